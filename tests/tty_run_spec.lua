-- tty_run_spec: `bin/idxlab run` on a plotting experiment under a pseudo-terminal finishes
-- without input and leaves its PNG and SVG plots (issue 19, item 1: gnuplot's terminal probe
-- used to page its list and wait at "Press return for more:" whenever stdin was a tty).
-- The pty's input stays open and empty (a FIFO's sleeping writer), so a program that reads the
-- terminal blocks until the bounded timeout instead of seeing end-of-file. The real gnuplot
-- runs; under CI=true a missing gnuplot or `script` fails the spec.
local fs = require("idxlab.fs")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"
local q = fs.shell_quote
local support = dofile(ROOT .. "/tests/support.lua")
teardown(support.cleanup)

local function have(tool)
  local ok = os.execute("command -v " .. tool .. " >/dev/null 2>&1")
  if ok == 0 or ok == true then return true end
  assert.is_nil(os.getenv("CI") == "true" and tool or nil, tool .. " is missing under CI")
  pending(tool .. " is not installed")
  return false
end

describe("idxlab run on a terminal", function()
  it("finishes a plotting experiment without input and writes its PNG and SVG plots",
  function()
    if not (have("gnuplot") and have("script")) then return end
    local d = support.tmpdir("tty-run")
    support.write(d .. "/plotted.lua", [[
return {
  name = "plotted", seed = 1, backend = "cpu",
  workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 1 },
  config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
  sweep = { candidate_topk_blocks = { 64, 128 } },
  metrics = { "recall_at_k", "time_step_us" },
  plots = { { name = "recall", x = "candidate_topk_blocks", y = "recall_at_k" } },
}
]])
    local inner = ("cd %s && env IDXLAB_FAKE_MEASURE=%s %s run plotted.lua --out res "
      .. "--progress off"):format(q(d), q(support.FAKE_MEASURE), BIN)
    -- stdin of `script` is a FIFO whose one writer sleeps without writing: the run's stdin is
    -- the pty, whose input never ends while the run lasts; the writer is killed afterwards
    local fifo = d .. "/in"
    local sh = ("mkfifo %s; sleep 60 >%s & w=$!; timeout 50 script -qfec %s /dev/null <%s "
      .. ">%s 2>&1; rc=$?; kill $w 2>/dev/null; wait $w 2>/dev/null; echo $rc")
      :format(q(fifo), q(fifo), q(inner), q(fifo), q(d .. "/out.txt"))
    local p = io.popen("bash -c " .. q(sh))
    local rc = tonumber(p:read("*a"):match("(%d+)"))
    p:close()
    local out = fs.read_file(d .. "/out.txt") or ""
    assert.are_not.equals(124, rc, "the run waited for input on the terminal:\n" .. out)
    assert.equals(0, rc, out)
    local plots = {}
    local ls = io.popen(("ls %s"):format(q(d .. "/res/plotted")))
    for name in ls:lines() do plots[#plots + 1] = name end
    ls:close()
    local listing = table.concat(plots, " ")
    assert.matches("%.png", listing)
    assert.matches("%.svg", listing)
  end)
end)
