-- lock_spec: a results folder has one writer at a time (issue 19, item 8). A live run holds an
-- advisory flock on DIR/.idxlab.lock; a second run, a --resume and a merge into that folder are
-- refused with the holder's pid and command before anything there is touched; a run killed
-- with SIGKILL leaves no lock behind, so the next run proceeds. The live run is a real child
-- process whose points block on the test hook (IDXLAB_FAKE_DELAY) until the spec kills it.
local fs = require("idxlab.fs")
local results = require("idxlab.results")
local binding = require("idxlab.ffi")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"
local q = fs.shell_quote

local support = dofile(ROOT .. "/tests/support.lua")
local child = dofile(ROOT .. "/tests/support/child.lua")
local function tmpdir() return support.tmpdir("lock-spec") end

local live = {}
teardown(function()
  for _, c in ipairs(live) do c.kill("KILL") end -- no process left behind, whatever failed
  support.cleanup()
end)

local TINY = [[
return {
  name = "tiny", seed = 3, backend = "cpu",
  workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
  sweep = { candidate_topk_blocks = { 64, 128, 256, 512 }, candidate_block_size = { 8, 16 } },
  metrics = { "recall_at_k" },
}
]]

describe("fs.lock", function()
  it("refuses a second holder with the first one's pid and command, until released", function()
    local d = tmpdir()
    local lock = fs.lock(d, "idxlab run first.lua --out x")
    local ok, err = pcall(fs.lock, d, "idxlab run second.lua")
    assert.is_false(ok)
    assert.matches(("lock_spec%%.lua:%%d+: idxlab: %s is in use by a running idxlab %%(pid %d: "
      .. "idxlab run first%%.lua %%-%%-out x%%)"):format(d:gsub("%p", "%%%0"), binding.getpid()),
      tostring(err))
    lock:release()
    lock:release() -- twice: nothing
    local again = fs.lock(d, "idxlab run second.lua")
    assert.equals(("pid %d\nidxlab run second.lua\n"):format(binding.getpid()),
      fs.read_file(d .. "/" .. fs.LOCK_NAME))
    again:release()
  end)

  it("names a folder it cannot lock", function()
    local ok, err = pcall(fs.lock, "/nonexistent/dir", "x")
    assert.is_false(ok)
    assert.matches("cannot lock /nonexistent/dir/%.idxlab%.lock: No such file", tostring(err))
  end)
end)

describe("two runs into one results folder", function()
  it("refuses a second run, --resume and merge while a run lives; after SIGKILL, a third "
    .. "proceeds", function()
    local d = tmpdir()
    local file = d .. "/tiny.lua"
    support.write(file, TINY)
    local folder = d .. "/res/tiny"
    local env = "env IDXLAB_FAKE_MEASURE=" .. q(support.FAKE_MEASURE)
    -- a finished run elsewhere, to merge from
    local rc, out = support.sh(("%s %s run %s --out %s --progress off"):format(env, BIN, q(file),
      q(d .. "/other")))
    assert.equals(0, rc, out)
    -- the live run: every point blocks for a minute (it is killed long before)
    local first = child.start(("%s IDXLAB_FAKE_DELAY=60 %s run %s --out %s --progress plain")
      :format(env, BIN, q(file), q(d .. "/res")), d .. "/first")
    live[#live + 1] = first
    local pid = first.pid()
    assert.is_string(pid, "the first run did not start")
    -- the lock, then the (empty) results file the run opens before its first point: read it
    -- only once it exists (the sanitizer build once read it before, nil against '' later)
    assert.is_true(child.wait_for(function()
      return (fs.read_file(folder .. "/" .. fs.LOCK_NAME) or ""):match("^pid (%d+)") == pid
        and fs.exists(folder .. "/results.jsonl")
    end, 20), "the first run took no lock or wrote no results file: " .. first.err())
    local jsonl = fs.read_file(folder .. "/results.jsonl")
    -- the command as the holder wrote it (the run's options but --progress, as its resume hint)
    local function lit(x) return (x:gsub("%p", "%%%0")) end
    local holder = lit(("%s is in use by a running idxlab (pid %s: idxlab run %s --out %s)")
      :format(folder, pid, file, d .. "/res"))
    for _, extra in ipairs({ "", " --resume" }) do
      rc, out = support.sh(("%s %s run %s --out %s --progress off%s"):format(env, BIN, q(file),
        q(d .. "/res"), extra))
      assert.equals(1, rc, out)
      assert.matches("^idxlab: " .. holder, out)
    end
    rc, out = support.sh(("%s merge %s %s"):format(BIN, q(folder), q(d .. "/other/tiny")))
    assert.equals(1, rc, out)
    assert.matches("^idxlab: " .. holder, out)
    -- refused before touching anything: the live results stay where the live run writes them
    assert.is_false(fs.exists(folder .. "/results.jsonl.prev"))
    assert.equals(jsonl, fs.read_file(folder .. "/results.jsonl"))
    assert.is_nil(first.rc(), "the first run ended early: " .. first.err())
    -- SIGKILL: no chance to clean up, and still no lock left behind
    assert.equals(137, first.kill("KILL"))
    rc, out = support.sh(("%s %s run %s --out %s --progress off"):format(env, BIN, q(file),
      q(d .. "/res")))
    assert.equals(0, rc, out)
    assert.equals(8, #results.read_jsonl(folder .. "/results.jsonl"))
    -- and a merge into the folder, free again, goes through
    rc, out = support.sh(("%s merge %s %s"):format(BIN, q(d .. "/merged"), q(folder)))
    assert.equals(0, rc, out)
  end)
end)
