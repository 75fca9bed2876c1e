-- local_shards_spec: `idxlab run FILE --local-shards N` (idxlab.shards) on the CPU: the
-- merged results equal the unsharded run point for point (config hashes and every metric
-- that does not depend on timing), with the fake measure and with the real CPU kernels;
-- each shard's rows sit in its own folder and each shard got its environment (threads
-- max(1, cores/N), the (i mod G)-th entry of an inherited CUDA_VISIBLE_DEVICES); Ctrl-C
-- stops every shard, keeps what finished (exit 130), and --resume completes the sweep.
local fs = require("idxlab.fs")
local results = require("idxlab.results")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"
local support = dofile(ROOT .. "/tests/support.lua")
local q = fs.shell_quote
teardown(support.cleanup)

local sh = support.sh

local EXP = [[
-- sharded: six small CPU points
return {
  name = "sharded", question = "do local shards merge to the unsharded run?", seed = 11,
  backend = "cpu",
  workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
  sweep = { candidate_topk_blocks = { 64, 128, 256 }, candidate_block_size = { 8, 16 } },
  metrics = { "recall_at_k", "time_step_us" },
}
]]

-- The fake measure, recording in each row the environment its process was given.
local RECORDER = [[
local fake = dofile(os.getenv("IDXLAB_TEST_FAKE"))
return function(ctx, point)
  local row = fake(ctx, point)
  row.seen_threads = os.getenv("IDXLAB_THREADS") or "unset"
  row.seen_gpu = os.getenv("CUDA_VISIBLE_DEVICES") or "unset"
  return row
end
]]

-- Besides timing: the device and the environment the recorder saw differ per shard.
local function assert_same_rows(ref_path, got_path)
  support.assert_same_rows(ref_path, got_path,
    function(k) return k:match("^seen_") ~= nil end)
end

local function cores()
  local _, out = sh("nproc")
  return tonumber(out:match("%d+"))
end

describe("idxlab run --local-shards", function()
  local d, exp, fake_env
  setup(function()
    d = support.tmpdir("local-shards")
    exp = d .. "/sharded.lua"
    support.write(exp, EXP)
    support.write(d .. "/recorder.lua", RECORDER)
    fake_env = ("cd %s && env -u CUDA_VISIBLE_DEVICES IDXLAB_FAKE_MEASURE=%s IDXLAB_TEST_FAKE=%s ")
      :format(q(d), q(d .. "/recorder.lua"), q(support.FAKE_MEASURE))
  end)

  it("merges 2 shards to the unsharded results; each shard's rows in its folder, with its "
    .. "threads", function()
    local rc, out = sh(fake_env .. BIN .. " run sharded.lua --out ref --progress off")
    assert.equals(0, rc, out)
    rc, out = sh(fake_env .. BIN .. " run sharded.lua --local-shards 2 --out two")
    assert.equals(0, rc, out)
    assert.matches("shard 0/2 finished", out)
    assert.matches("shard 1/2 finished", out)
    assert_same_rows(d .. "/ref/sharded/results.jsonl", d .. "/two/sharded/results.jsonl")
    local threads = tostring(math.max(1, math.floor(cores() / 2)))
    for i = 0, 1 do
      local rows = results.read_jsonl(("%s/two/sharded/shard-%d-of-2/results.jsonl"):format(d, i))
      assert.equals(3, #rows)
      for _, r in ipairs(rows) do
        assert.equals(i, r.point % 2)
        assert.equals(threads, r.seen_threads)
        -- no GPU: the environment is left alone; else shard i gets the (i mod G)-th device
        local devs = require("idxlab.shards").visible_devices()
        assert.equals(#devs == 0 and "unset" or devs[i % #devs + 1], r.seen_gpu)
      end
    end
    rc, out = sh(BIN .. " status " .. q(d .. "/two/sharded"))
    assert.equals(0, rc, out)
    assert.matches("6 points in 2 shards: 6 finished, 0 failed, 0 missing", out)
  end)

  it("gives shard i the (i mod G)-th inherited CUDA_VISIBLE_DEVICES entry", function()
    local rc, out = sh(fake_env:gsub("env %-u CUDA_VISIBLE_DEVICES", "env CUDA_VISIBLE_DEVICES=3,5")
      .. BIN .. " run sharded.lua --local-shards 3 --out three")
    assert.equals(0, rc, out)
    assert.matches("3 shards on GPUs 3,5", out)
    local want = { [0] = "3", "5", "3" }
    for i = 0, 2 do
      local rows = results.read_jsonl(("%s/three/sharded/shard-%d-of-3/results.jsonl"):format(d,
        i))
      assert.equals(2, #rows)
      for _, r in ipairs(rows) do assert.equals(want[i], r.seen_gpu) end
    end
  end)

  it("merges 2 shards of the real CPU kernels to the unsharded results", function()
    local env = ("cd %s && env -u IDXLAB_FAKE_MEASURE "):format(q(d))
    local rc, out = sh(env .. BIN .. " run sharded.lua --out realref --progress off")
    assert.equals(0, rc, out)
    rc, out = sh(env .. BIN .. " run sharded.lua --local-shards 2 --out real")
    assert.equals(0, rc, out)
    assert_same_rows(d .. "/realref/sharded/results.jsonl", d .. "/real/sharded/results.jsonl")
    local threads = math.max(1, math.floor(cores() / 2))
    for _, r in ipairs((results.read_jsonl(d .. "/real/sharded/results.jsonl"))) do
      assert.equals("cpu", r.backend)
      -- the device names the context's threads (experiment/run.lua reads IDXLAB_THREADS)
      assert.equals(("cpu (%d threads)"):format(threads), r.device)
    end
  end)

  it("records each row's shard", function()
    local rows = results.read_jsonl(d .. "/two/sharded/results.jsonl")
    assert.equals(6, #rows)
    for _, r in ipairs(rows) do assert.equals(("%d/2"):format(r.point % 2), r.shard) end
  end)

  it("stops every shard on Ctrl-C, keeps what finished (exit 130); --resume completes it",
  function()
    -- a session of its own, so the SIGINT to its process group is the terminal's Ctrl-C
    local log = d .. "/int.log"
    local cmd = ("cd %s && { setsid env IDXLAB_FAKE_MEASURE=%s IDXLAB_TEST_FAKE=%s "
      .. "IDXLAB_FAKE_DELAY=1 %s run sharded.lua --local-shards 2 --out int >%s 2>&1 & "
      .. "pid=$!; for i in $(seq 600); do "
      -- Ctrl-C once the shards have finished 2 points between them (at most 60 s): a fixed
      -- sleep raced the shards' start on a loaded machine (0 points done, seen in CI)
      .. "n=$(cat int/sharded/shard-*-of-2/results.jsonl 2>/dev/null | wc -l); "
      .. "[ \"$n\" -ge 2 ] && break; "
      .. "sleep 0.1; done; kill -INT -- -$pid; wait $pid; echo \"exit=$?\" >>%s; }")
      :format(q(d), q(d .. "/recorder.lua"), q(support.FAKE_MEASURE), BIN, q(log), q(log))
    sh("bash -c " .. q(cmd)) -- bash: its kill takes a process group
    local text = fs.read_file(log) or ""
    assert.matches("exit=130", text)
    assert.matches("stopping the shards; what they finished is kept", text)
    assert.matches("idxlab: interrupted: %d of 6 points done", text)
    local done = #results.read_jsonl(d .. "/int/sharded/results.jsonl")
    assert.is_true(done >= 2 and done < 6, text)
    local rc, out = sh(fake_env .. BIN .. " run sharded.lua --local-shards 2 --out int --resume")
    assert.equals(0, rc, out)
    assert_same_rows(d .. "/ref/sharded/results.jsonl", d .. "/int/sharded/results.jsonl")
  end)

  it("refuses --shard with --local-shards, and a bad count", function()
    local rc, out = sh(fake_env .. BIN .. " run sharded.lua --local-shards 2 --shard 0/2")
    assert.equals(1, rc)
    assert.matches("^idxlab: run: %-%-shard and %-%-local%-shards: choose one", out)
    rc, out = sh(fake_env .. BIN .. " run sharded.lua --local-shards 0")
    assert.equals(1, rc)
    assert.matches("^idxlab: run: %-%-local%-shards 0: must be a whole number >= 1", out)
    rc, out = sh(fake_env .. BIN .. " run sharded.lua --local-shards 7")
    assert.equals(1, rc)
    assert.matches("%-%-local%-shards 7 but [^\n]* plans 6 points", out)
  end)
end)
