-- tty_run_spec: `bin/idxlab run` on a plotting experiment under a pseudo-terminal finishes
-- without input and leaves its PNG and SVG plots (issue 19, item 1: gnuplot's terminal probe
-- used to page its list and wait at "Press return for more:" whenever stdin was a tty).
-- The pty (tests/support/pty.lua) keeps its input open and empty, so a program that reads the
-- terminal blocks until the bounded wait ends instead of seeing end-of-file. The real gnuplot
-- runs; under CI=true a missing gnuplot or `script` fails the spec.
local fs = require("idxlab.fs")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"
local q = fs.shell_quote
local support = dofile(ROOT .. "/tests/support.lua")
local pty = dofile(ROOT .. "/tests/support/pty.lua")
teardown(support.cleanup)

local have = support.have

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
    -- the run's stdin is the pty, whose input never ends while the run lasts; its exit
    -- status is the last line of the output
    local inner = ("cd %s && %s run plotted.lua --out res --progress off; echo \"run exited $?\"")
      :format(q(d), BIN)
    local p = pty.start(d, "sh -c " .. q(inner), { IDXLAB_FAKE_MEASURE = support.FAKE_MEASURE })
    local done, seen = pcall(p.expect, p, "run exited (%d+)", 50, true)
    local out = p:text()
    p:close(nil, false) -- sends no Ctrl-D: after the run nobody reads the pty's FIFO
    assert.is_true(done, "the run waited for input on the terminal:\n" .. out)
    assert.equals(0, tonumber(seen:match("run exited (%d+)")), out)
    local plots = {}
    local ls = io.popen(("ls %s"):format(q(d .. "/res/plotted")))
    for name in ls:lines() do plots[#plots + 1] = name end
    ls:close()
    local listing = table.concat(plots, " ")
    assert.matches("%.png", listing)
    assert.matches("%.svg", listing)
  end)
end)
