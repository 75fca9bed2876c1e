-- experiment_spec: experiment files -> plan -> run. Sweep expansion (product, zip, "all"),
-- validation messages (one spec per rule), the sandbox, --set, dry runs, runs with a fake
-- measure (no kernels), resume after a real child process is killed, Ctrl-C, shard and merge,
-- and the same file and seed giving the same results twice (with the real pipeline when it is
-- there).
local idxlab = require("idxlab")
local experiment = require("idxlab.experiment")
local fs = require("idxlab.fs")
local results = require("idxlab.results")
local merge = require("idxlab.merge")
local config = require("idxlab.config")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"
local q = fs.shell_quote

local support = dofile(ROOT .. "/tests/support.lua")
local children = dofile(ROOT .. "/tests/support/child.lua")
-- the runner's stand-in for the kernels (a test double: tests/support/, not the library)
local FAKE, fake_measure = support.FAKE_MEASURE, support.fake_measure
local function tmpdir() return support.tmpdir("exp-spec") end
teardown(support.cleanup)

local write = support.write
local function lines_of(path)
  local out = {}
  local f = io.open(path, "rb")
  if not f then return out end
  for l in f:lines() do out[#out + 1] = l end
  f:close()
  return out
end
local function sink()
  local s = { text = {} }
  function s:write(...)
    for _, x in ipairs({ ... }) do self.text[#self.text + 1] = tostring(x) end
    return self
  end
  function s:flush() return self end
  function s:str() return table.concat(self.text) end
  return s
end
local function quiet(extra)
  local o = { stdout = sink(), stderr = sink(), progress = "off", fake = fake_measure,
    gnuplot = "none" }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- The error of f(...), with the "file:line: " prefix dropped.
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  e = tostring(e)
  return (e:match("idxlab: .*") or e), e
end

local function base_exp()
  return {
    name = "unit", question = "does the runner work?", seed = 5, backend = "cpu",
    workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
    config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
    sweep = { candidate_block_size = { 8, 16 }, candidate_topk_blocks = { 64, 128 } },
    metrics = { "recall_at_k", "time_step_us" },
    plots = { { x = "candidate_topk_blocks", y = "recall_at_k", series = "candidate_block_size" } },
  }
end

local TINY = [[
-- tiny: a test experiment
return {
  name = "tiny", question = "does it resume?", seed = 3, backend = "cpu",
  workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
  sweep = { candidate_topk_blocks = { 64, 128, 256, 512 }, candidate_block_size = { 8, 16 } },
  metrics = { "recall_at_k" },
}
]]

describe("sweep expansion", function()
  it("expands a product in a fixed order, the last field fastest, repeats innermost", function()
    local e = base_exp()
    e.repeats = 2
    local plan = experiment.plan(e)
    assert.equals(8, #plan.points)
    assert.equals(4, plan.combos)
    local want = { { 8, 64 }, { 8, 128 }, { 16, 64 }, { 16, 128 } }
    for i, pt in ipairs(plan.points) do
      local w = want[math.floor((i - 1) / 2) + 1]
      assert.equals(i - 1, pt.index)
      assert.equals((i - 1) % 2, pt["repeat"])
      assert.equals(5 + (i - 1) % 2, pt.seed)
      assert.equals(w[1], pt.config.candidate_block_size)
      assert.equals(w[2], pt.config.candidate_topk_blocks)
      assert.matches("^%x%x%x%x%x%x%x%x$", pt.hash)
    end
    -- repeats of one config share the hash; configs differ
    assert.equals(plan.points[1].hash, plan.points[2].hash)
    assert.are_not.equal(plan.points[1].hash, plan.points[3].hash)
    assert.are.same({ "candidate_block_size", "candidate_topk_blocks" }, plan.swept)
  end)

  it("zips every list with zip = true", function()
    local e = base_exp()
    e.sweep = { candidate_block_size = { 8, 16, 32 }, candidate_topk_blocks = { 512, 256, 128 } }
    e.zip = true
    e.plots = nil
    local plan = experiment.plan(e)
    assert.equals(3, #plan.points)
    for _, pt in ipairs(plan.points) do
      assert.equals(4096, pt.config.candidate_block_size * pt.config.candidate_topk_blocks)
    end
  end)

  it("zips groups and takes the product with the other fields", function()
    local e = base_exp()
    e.sweep = { candidate_block_size = { 8, 16 }, candidate_topk_blocks = { 128, 64 },
      block_score = { "max", "mean", "sum" } }
    e.zip = { { "candidate_block_size", "candidate_topk_blocks" } }
    e.plots = nil
    local plan = experiment.plan(e)
    assert.equals(6, #plan.points)
    local seen = {}
    for _, pt in ipairs(plan.points) do
      assert.equals(1024, pt.config.candidate_block_size * pt.config.candidate_topk_blocks)
      seen[pt.config.block_score .. pt.config.candidate_block_size] = true
    end
    local n = 0
    for _ in pairs(seen) do n = n + 1 end
    assert.equals(6, n)
  end)

  it("expands sparse_block_kv = \"all\" into every valid choice of each point", function()
    local e = base_exp()
    e.sweep = { candidate_block_size = { 8, 32 }, sparse_block_kv = "all" }
    e.config.candidate_topk_blocks = 64
    e.plots = nil
    local plan = experiment.plan(e)
    local got = {}
    for _, pt in ipairs(plan.points) do
      local cbs = pt.config.candidate_block_size
      got[cbs] = got[cbs] or {}
      table.insert(got[cbs], pt.config.sparse_block_kv)
    end
    for _, cbs in ipairs({ 8, 32 }) do
      local c = config.resolve({ candidate_block_size = cbs, candidate_topk_blocks = 64,
        index_topk = 64 })
      assert.are.same(config.valid_sparse_block_kv(c), got[cbs])
    end
    assert.are.same({ 4, 8 }, got[8])
    assert.equals(6, #plan.points)
  end)

  it("skips a point the builder refuses, with the reason, and keeps the rest", function()
    local e = base_exp()
    -- T = 96: 8 * 96 = 768 positions break the top-k layout rule; 16 * 96 and 32 * 96 keep it
    e.sweep = { candidate_block_size = { 8, 16, 32 } }
    e.config.candidate_topk_blocks = 96
    e.plots = nil
    local plan = experiment.plan(e)
    assert.equals(2, #plan.points)
    assert.equals(1, #plan.skipped)
    assert.equals("candidate_block_size=8", plan.skipped[1].desc)
    assert.matches("candidate_topk_blocks %(96%) %* candidate_block_size %(8%) = 768: must be a "
      .. "multiple of 512", plan.skipped[1].reason)
    local d = tmpdir()
    local o = quiet({ out = d })
    local res = experiment.run(e, o)
    assert.equals(2, #res.rows)
    assert.matches("skipped candidate_block_size=8: .*must be a multiple of 512", o.stderr:str())
  end)

  it("refuses an experiment whose every point is invalid", function()
    local e = base_exp()
    e.sweep = { candidate_block_size = { 12 } }
    e.config.candidate_topk_blocks = 64
    e.plots = nil
    local msg = err_of(experiment.plan, e)
    assert.matches("^idxlab: experiment table: no valid point", msg)
    assert.matches("sparse_block_kv", msg)
  end)

  it("sweeps workload knobs, seed and backend", function()
    local e = base_exp()
    e.sweep = { ["workload.locality"] = { 0, 8 }, seed = { 1, 2 },
      ["workload.decode.context"] = { 4096, 8192 } }
    e.plots = { { x = "workload.locality", y = "recall_at_k", series = "seed" } }
    local plan = experiment.plan(e)
    assert.equals(8, #plan.points)
    local pt = plan.points[#plan.points]
    assert.equals(8, pt.workload.locality)
    assert.equals(8192, pt.workload.decode.context)
    assert.equals(2, pt.workload.decode.rows) -- the rest of the table is kept
    assert.equals(2, pt.seed)
    -- the base table is not modified
    assert.is_nil(e.workload.locality)
  end)
end)

describe("validation messages", function()
  -- Each case: a change to a valid experiment and the message it must give.
  local cases = {
    { "unknown top field, with a suggestion", function(e) e.sweeps = e.sweep end,
      "field 'sweeps': unknown experiment field %(did you mean sweep%?%)" },
    { "unknown sweep field, with a suggestion", function(e) e.sweep.candidate_blok_size = { 8 } end,
      "field 'sweep.candidate_blok_size': unknown field %(did you mean candidate_block_size%?%)" },
    { "unknown config field, with a suggestion", function(e) e.config.index_top_k = 8 end,
      "field 'config.index_top_k': unknown config field %(did you mean index_topk%?%)" },
    { "bad config value", function(e) e.config.kv_format = "fp16" end,
      "field 'config'.*kv_format = fp16: must be one of mxfp4, mxfp8, fp8" },
    { "bad swept value", function(e) e.sweep.candidate_block_size = { 8, "big" } end,
      "field 'config' %(sweep point candidate_block_size=big.*must be an integer" },
    { "name", function(e) e.name = "a b/c" end, "field 'name' = \"a b/c\": must be a name" },
    { "seed", function(e) e.seed = -1 end, "field 'seed' = %-1: must be an integer" },
    { "backend", function(e) e.backend = "tpu" end,
      "field 'backend' = \"tpu\": must be cpu, cuda or auto" },
    { "mode", function(e) e.mode = "fast" end, "field 'mode' = \"fast\"" },
    { "repeats", function(e) e.repeats = 0 end,
      "field 'repeats' = 0: must be an integer in %[1, 1000%]" },
    { "by", function(e) e.by = "width" end, "field 'by' = \"width\": must be \"length\"" },
    { "by with chunks (an invalid combination)", function(e)
      e.mode = "chunks"; e.by = "length"
      e.workload.prefill = { { query_len = 8, context_len = 8 } }
    end, "field 'by' = \"length\": only for mode = \"step\"" },
    { "chunks without prefill (an invalid combination)",
      function(e) e.mode = "chunks"; e.metrics = nil; e.plots = nil end,
      "mode = \"chunks\" needs workload.prefill" },
    { "unknown metric, with a suggestion",
      function(e) e.metrics = { "recall_at_k", "recal_at_k" } end,
      "field 'metrics%[2%]' = \"recal_at_k\": not a metric of mode step "
        .. "%(did you mean recall_at_k%?%)" },
    { "a step metric in chunks mode", function(e)
      e.mode = "chunks"; e.workload.prefill = { { query_len = 8, context_len = 8 } }; e.plots = nil
    end, "field 'metrics%[1%]' = \"recall_at_k\": not a metric of mode chunks" },
    { "plot x not swept", function(e) e.plots[1].x = "index_topk" end,
      "field 'plots%[1%]%.x' = \"index_topk\": not a swept field "
        .. "%(swept: candidate_block_size, candidate_topk_blocks%)" },
    { "plot y not a metric", function(e) e.plots[1].y = "speed" end,
      "field 'plots%[1%]%.y' = \"speed\": not a metric" },
    { "plot series equal to x", function(e) e.plots[1].series = "candidate_topk_blocks" end,
      "field 'plots%[1%]%.series' = \"candidate_topk_blocks\": the same field as x" },
    { "unknown plot field", function(e) e.plots[1].colour = "red" end,
      "field 'plots%[1%]%.colour': unknown" },
    { "zip lists of different lengths",
      function(e) e.sweep.candidate_topk_blocks = { 64, 128, 256 }; e.zip = true end,
      "zipped lists must have equal lengths: candidate_block_size has 2 values, "
        .. "candidate_topk_blocks has 3" },
    { "zip of an unswept field",
      function(e) e.zip = { { "candidate_block_size", "index_topk" } } end,
      "field 'zip%[1%]%[2%]' = \"index_topk\": not a swept field" },
    { "zip of sparse_block_kv = all", function(e)
      e.sweep.sparse_block_kv = "all"; e.zip = { { "candidate_block_size", "sparse_block_kv" } }
    end, "cannot be zipped" },
    { "a value listed twice", function(e) e.sweep.candidate_block_size = { 8, 8 } end,
      "field 'sweep.candidate_block_size%[2%]' = 8: listed twice" },
    { "an empty sweep list", function(e) e.sweep.candidate_block_size = {} end,
      "field 'sweep.candidate_block_size' = %[%]: must be a non%-empty list" },
    { "\"all\" for another field", function(e) e.sweep.candidate_block_size = { "all" } end,
      "only sparse_block_kv = \"all\"" },
    { "unknown workload knob, with a suggestion", function(e) e.workload.localty = 2 end,
      "field 'workload.localty': unknown workload knob %(did you mean locality%?%)" },
    { "workload knob of the wrong type", function(e) e.workload.locality = "high" end,
      "field 'workload.locality' = \"high\": must be a number" },
    { "decode rows", function(e) e.workload.decode.rows = -2 end,
      "field 'workload.decode.rows' = %-2" },
    { "prefill context shorter than the query", function(e)
      e.workload.prefill = { requests = 2, query_len = 64, context = 32 }
    end, "field 'workload.prefill.context' = 32: must be >= query_len %(64%)" },
    { "replay without files", function(e) e.workload = { kind = "replay" } end,
      "a replay workload needs file, files or dir" },
    { "a function value", function(e) e.config.heads = function() return 32 end end,
      "field 'config.heads': a function is not plain data" },
    { "a table that refers to itself", function(e) e.workload.self = e.workload end,
      "refers to itself" },
    { "timing", function(e) e.timing = { warmup = 1, iter = 3 } end,
      "field 'timing.iter': unknown %(warmup, iters%) %(did you mean iters%?%)" },
  }
  for _, c in ipairs(cases) do
    it("rejects " .. c[1], function()
      local e = base_exp()
      c[2](e)
      local msg = err_of(experiment.plan, e)
      assert.matches("^idxlab: experiment table: ", msg)
      assert.matches(c[3], msg)
    end)
  end

  it("names the file and reports at the caller's line", function()
    local d = tmpdir()
    local path = d .. "/bad.lua"
    write(path, "return { name = 'bad', sweep = { candidate_blok_size = { 8 } } }\n")
    local msg, raw = err_of(function() local p = experiment.plan(path) return p end)
    assert.matches("^idxlab: " .. path:gsub("%p", "%%%0")
      .. ": field 'sweep.candidate_blok_size'", msg)
    assert.matches("experiment_spec.lua:%d+: idxlab:", raw)
  end)

  it("reports bad files before anything runs", function()
    local d = tmpdir()
    local path = d .. "/bad.lua"
    write(path, "return { name = 'bad', repeats = 'many' }\n")
    local called = false
    local msg = err_of(experiment.run, path,
      quiet({ out = d, measure = function() called = true end }))
    assert.matches("field 'repeats' = \"many\"", msg)
    assert.is_false(called)
    assert.is_false(fs.exists(d .. "/bad/results.jsonl"))
  end)
end)

describe("the sandbox", function()
  local function load_text(text)
    local d = tmpdir()
    local path = d .. "/x.lua"
    write(path, text)
    return err_of(experiment.load, path)
  end

  it("has no io, os or require", function()
    assert.matches("error while loading: .*io", load_text("io.open('/etc/passwd')\nreturn {}"))
    assert.matches("error while loading: .*os", load_text("os.exit(3)\nreturn {}"))
    assert.matches("error while loading: .*require",
      load_text("local x = require('ffi')\nreturn {}"))
    assert.matches("error while loading: .*loadstring",
      load_text("loadstring('return 1')()\nreturn {}"))
  end)

  it("stops a runaway loop", function()
    local keep = experiment.MAX_INSTRUCTIONS
    experiment.MAX_INSTRUCTIONS = 1e6
    local msg = load_text("local i = 0\nwhile true do i = i + 1 end\n")
    experiment.MAX_INSTRUCTIONS = keep
    assert.matches("still running after 1000000 instructions", msg)
  end)

  it("stops a loop that hides inside pcall, and refuses Lua patterns and huge method reps",
    function()
    local keep = experiment.MAX_INSTRUCTIONS
    experiment.MAX_INSTRUCTIONS = 1e6
    local msg = load_text("for i = 1, 1e15 do pcall(function() for j = 1, 1e9 do end end) end\n"
      .. "return {}\n")
    experiment.MAX_INSTRUCTIONS = keep
    assert.matches("still running after 1000000 instructions", msg)
    -- a backtracking pattern would run in C, out of the hook's reach
    assert.matches("string.find: only plain find",
      load_text("string.find(string.rep('a', 40), string.rep('a*', 20) .. 'b')\nreturn {}\n"))
    assert.matches("string.match: Lua patterns are not available",
      load_text("local x = ('abc'):match('b')\nreturn {}\n"))
    assert.matches("string.rep: result longer than 16 MiB",
      load_text("local x = ('x'):rep(2 ^ 30)\nreturn {}\n"))
    assert.matches("string.rep: result longer than 16 MiB",
      load_text("local x = (''):rep(2 ^ 30, 'x')\nreturn {}\n"))
    assert.matches("table.concat: result longer than 16 MiB",
      load_text("local t = {} for i = 1, 32 do t[i] = ('x'):rep(2 ^ 24) end\n"
        .. "return { name = table.concat(t) }\n"))
    assert.equals(3, ("abc"):find("c", 1, true)) -- the real string methods are back afterwards
    assert.equals("b", ("abc"):match("b"))
    local d = tmpdir()
    write(d .. "/plain.lua",
      "return { name = ('x'):rep(3) .. tostring(('abc'):find('b', 1, true)) }\n")
    assert.equals("xxx2", experiment.load(d .. "/plain.lua").name)
  end)

  it("restores the hook and the string methods when the budget runs out just as the file ends",
    function()
    local keep = experiment.MAX_INSTRUCTIONS
    experiment.MAX_INSTRUCTIONS = 1e5
    -- budgets that end at every instruction near the file's last ones
    local d = tmpdir()
    for n = 99940, 100010 do -- an empty loop runs one instruction a turn
      write(d .. "/edge.lua", ("for i = 1, %d do end return { name = 'x' }\n"):format(n))
      pcall(experiment.load, d .. "/edge.lua")
      assert.is_nil(debug.gethook(), "hook left behind at n = " .. n)
      assert.equals(string, getmetatable("").__index, "string metatable left behind at n = " .. n)
    end
    experiment.MAX_INSTRUCTIONS = keep
    assert.equals("b", ("abc"):match("b"))
  end)

  it("reports syntax errors, missing files and non-table results", function()
    assert.matches("cannot read experiment file /tmp: not a regular file",
      err_of(experiment.load, "/tmp"))
    assert.matches("x%.lua:%d+: does not parse: ", load_text("return { name = \n"))
    assert.matches("must return a table %(the experiment%), got number", load_text("return 42\n"))
    assert.matches("cannot read experiment file /nonexistent/e%.lua",
      err_of(experiment.load, "/nonexistent/e.lua"))
  end)

  it("gives the file math, string and table", function()
    local d = tmpdir()
    local path = d .. "/ok.lua"
    write(path, "local l = {}\nfor i = 0, 3 do l[#l + 1] = math.floor(2 ^ (3 + i)) end\n"
      .. "return { name = string.format('e%d', 1), sweep = { candidate_block_size = l } }\n")
    local e = experiment.load(path)
    assert.are.same({ 8, 16, 32, 64 }, e.sweep.candidate_block_size)
    assert.equals("e1", e.name)
  end)
end)

describe("--set", function()
  it("fixes a swept builder field and drops the plots along it", function()
    local plan = experiment.plan(base_exp(), { set = { "candidate_block_size=32" } })
    assert.equals(2, #plan.points)
    for _, pt in ipairs(plan.points) do assert.equals(32, pt.config.candidate_block_size) end
    assert.equals(1, #plan.exp.plots)
    assert.is_nil(plan.exp.plots[1].series)
  end)

  it("sweeps with a list, sparse_block_kv=all and sweep.<field>", function()
    local plan = experiment.plan(base_exp(),
      { set = { "candidate_topk_blocks=64,128,256", "sparse_block_kv=all" } })
    -- cbs 8: sbk 4, 8; cbs 16: 4, 8, 16; times 3 T values
    assert.equals(15, #plan.points)
    plan = experiment.plan(base_exp(), { set = { "sweep.block_score=max,mean" } })
    assert.equals(8, #plan.points)
    plan = experiment.plan(base_exp(), { set = { "sweep.workload.locality=0,4" } })
    assert.equals(8, #plan.points)
    assert.equals(4, plan.points[8].workload.locality)
  end)

  it("sets seed, repeats, backend, name, metrics and workload knobs", function()
    local plan = experiment.plan(base_exp(), { set = { "seed=11", "repeats=3", "name=other",
      "metrics=mass_recall,recall_at_k",
      "workload.decode.rows=5", "workload.locality=2.5", "max_logits_bytes=64MiB",
      "timing.iters=3" } })
    assert.equals(3, plan.exp.timing.iters)
    assert.equals(12, #plan.points)
    assert.equals(11, plan.points[1].seed)
    assert.equals(13, plan.points[3].seed)
    assert.equals("other", plan.exp.name)
    assert.are.same({ "mass_recall", "recall_at_k" }, plan.metrics)
    assert.equals(5, plan.points[1].workload.decode.rows)
    assert.equals(2.5, plan.points[1].workload.locality)
    assert.equals(64 * 2 ^ 20, plan.points[1].config.max_logits_bytes)
  end)

  it("rejects unknown keys with a suggestion, and bad values naming the field", function()
    assert.matches("unknown key candidate_blok_size %(did you mean candidate_block_size%?%)",
      err_of(experiment.plan, base_exp(), { set = { "candidate_blok_size=8" } }))
    assert.matches("candidate_block_size = abc: must be an integer",
      err_of(experiment.plan, base_exp(), { set = { "candidate_block_size=abc" } }))
    assert.matches("%-%-set \"seed\": must be key=value",
      err_of(experiment.plan, base_exp(), { set = { "seed" } }))
    assert.matches("field 'seed' = \"x\"",
      err_of(experiment.plan, base_exp(), { set = { "seed=x" } }))
    assert.matches("sweep.colour: unknown field",
      err_of(experiment.plan, base_exp(), { set = { "sweep.colour=1,2" } }))
  end)
end)

describe("dry run", function()
  it("prints every point's config and the skipped ones, and runs nothing", function()
    local e = base_exp()
    e.sweep.candidate_block_size = { 8, 12 }
    local d = tmpdir()
    local o = quiet({ out = d, dry_run = true, measure = function() error("must not run") end })
    local res = experiment.run(e, o)
    local text = o.stdout:str()
    assert.equals(0, res.status)
    local n = 0
    for _ in text:gmatch("\n  config: heads=32 head_dim=128 index_topk=64 ") do n = n + 1 end
    assert.equals(2, n)
    assert.matches("skipped %(2: refused by the builder", text)
    assert.matches("candidate_block_size=12 candidate_topk_blocks=64: sparse_block_kv = auto: "
      .. "pick_sparse_block_kv", text)
    assert.is_false(fs.is_dir(d .. "/unit"))
  end)

  it("works from the command line, from another directory", function()
    local rc, out = support.sh("cd / && " .. BIN .. " run "
      .. q(ROOT .. "/experiments/sparse_block_kv.lua") .. " --dry-run")
    assert.matches("28 points %(14 point configs x 2 repeats%)", out)
    assert.equals(0, rc, out)
  end)
end)

describe("runs", function()
  it("writes one whole line per point with the schema's fields, a CSV and a summary", function()
    local d = tmpdir()
    local e = base_exp()
    e.repeats = 2
    e.by = "length"
    local res = experiment.run(e, quiet({ out = d }))
    assert.equals(0, res.status)
    local dir = d .. "/unit"
    assert.equals(dir, res.dir)
    local rows = results.read_jsonl(dir .. "/results.jsonl")
    assert.equals(8, #rows)
    local git = experiment.git_info()
    for i, r in ipairs(rows) do
      assert.equals(results.SCHEMA, r.schema)
      assert.equals(i - 1, r.point)
      assert.equals((i - 1) % 2, r["repeat"])
      assert.equals("unit", r.experiment)
      assert.equals("cpu", r.backend)
      assert.is_string(r.device)
      assert.equals(idxlab.version, r.idxlab_version)
      assert.equals(git.commit, r.git_commit)
      assert.is_true(r.git_commit == "unknown" or #r.git_commit == 40)
      if r.git_commit ~= "unknown" then assert.is_boolean(r.git_dirty) end
      assert.is_number(r.wall_time_s)
      assert.is_number(r.seed)
      for _, f in ipairs(config.field_names()) do assert.is_not_nil(r[f], f) end
      assert.is_number(r.sparse_block_kv) -- as the builder chose it, not "auto"
      for _, m in ipairs({ "logit_mismatches", "recall_at_k", "time_step_us", "scratch_bytes",
        "num_chunks" }) do
        assert.is_number(r[m], m)
      end
      assert.equals(2, #r.per_layer)
      assert.is_table(r.by_length)
      assert.is_table(r.workload)
    end
    assert.is_true(fs.exists(dir .. "/results.csv"))
    assert.is_true(fs.exists(dir .. "/summary.txt"))
    assert.is_true(fs.exists(dir .. "/experiment.json"))
    assert.equals(res.summary, fs.read_file(dir .. "/summary.txt"))
    assert.matches("mean ±sd over repeats", res.summary)
  end)

  it("writes null, not a number, for quality metrics without active rows", function()
    local d = tmpdir()
    local e = base_exp()
    e.workload.decode.context = 512 -- every row shorter than T * cbs: nothing is active
    local res = experiment.run(e, quiet({ out = d }))
    local text = fs.read_file(res.dir .. "/results.jsonl")
    local n = 0
    for line in text:gmatch("[^\n]+") do
      n = n + 1
      assert.matches('"active_rows":0', line)
      assert.matches('"recall_at_k":null', line)
      assert.matches('"per_layer":%[{[^}]*"recall_at_k":null', line)
    end
    assert.equals(4, n)
    assert.matches("null", res.summary)
  end)

  it("reports a point that fails and runs the rest (status 1)", function()
    local d = tmpdir()
    local e = base_exp()
    local res = experiment.run(e, quiet({ out = d, measure = function(ctx, pt)
      if pt.config.candidate_topk_blocks == 128 and pt.config.candidate_block_size == 16 then
        error("idxlab: kernel exploded")
      end
      return fake_measure(ctx, pt)
    end }))
    assert.equals(1, res.status)
    assert.equals(1, #res.failed)
    assert.equals(3, res.failed[1].point)
    assert.matches("kernel exploded", res.failed[1].reason)
    assert.equals(3, #results.read_jsonl(d .. "/unit/results.jsonl"))
    -- --resume runs the failed point again
    local res2 = experiment.run(e, quiet({ out = d, resume = true }))
    assert.equals(1, res2.new_rows)
    assert.equals(4, #res2.rows)
  end)

  it("keeps the finished points when interrupted and resumes the rest", function()
    local d = tmpdir()
    local e = base_exp()
    local n = 0
    local res = experiment.run(e, quiet({ out = d, measure = function(ctx, pt)
      n = n + 1
      if n == 3 then error("stdin:1: interrupted!") end
      return fake_measure(ctx, pt)
    end }))
    assert.equals(130, res.status)
    assert.is_true(res.interrupted)
    assert.equals(2, #results.read_jsonl(d .. "/unit/results.jsonl"))
    local res2 = experiment.run(e, quiet({ out = d, resume = true }))
    assert.equals(0, res2.status)
    assert.equals(2, res2.new_rows)
    local rows = results.read_jsonl(d .. "/unit/results.jsonl")
    assert.equals(4, #rows)
    for i, r in ipairs(rows) do assert.equals(i - 1, r.point) end
  end)

  it("measures on_backend's workload with the swept knobs on top, records it, and hashes it",
    function()
    local d = tmpdir()
    local e = base_exp()
    e.sweep = { ["workload.locality"] = { 0, 8 } }
    e.plots = nil
    e.on_backend = { cpu = { workload = { decode = { rows = 2, context = 4096 }, prefill = false,
      consumer_layers = 1 } } }
    local seen = {}
    local res = experiment.run(e, quiet({ out = d, measure = function(ctx, pt)
      seen[#seen + 1] = pt.workload
      return fake_measure(ctx, pt)
    end }))
    assert.equals(0, res.status)
    assert.equals(4096, seen[1].decode.context)
    assert.equals(0, seen[1].locality)
    assert.equals(8, seen[2].locality)
    local rows = results.read_jsonl(d .. "/unit/results.jsonl")
    assert.equals(4096, rows[2].workload.decode.context) -- what ran, not the file's base workload
    assert.equals(8, rows[2].workload.locality)
    -- a changed on_backend is a different plan: --resume refuses it
    e.on_backend.cpu.workload.decode.context = 2048
    assert.matches("holds results of a different plan",
      err_of(experiment.run, e, quiet({ out = d, resume = true })))
  end)

  it("applies a --set workload or timing value where on_backend replaces them, too", function()
    local d = tmpdir()
    local e = base_exp()
    e.sweep = nil
    e.plots = nil
    e.timing = { warmup = 0, iters = 1 }
    e.on_backend = { cpu = { workload = { decode = { rows = 2, context = 4096 }, prefill = false,
      consumer_layers = 1 }, timing = { warmup = 1, iters = 5 } } }
    local seen = {}
    local res = experiment.run(e, quiet({ out = d, set = { "workload.decode.rows=3",
      "timing.iters=2" }, measure = function(ctx, pt)
      seen[#seen + 1] = pt
      return fake_measure(ctx, pt)
    end }))
    assert.equals(0, res.status)
    assert.equals(3, seen[1].workload.decode.rows) -- not on_backend's 2, silently
    assert.equals(4096, seen[1].workload.decode.context)
    assert.equals(2, seen[1].timing.iters)
    assert.equals(1, seen[1].timing.warmup)
    local rows = results.read_jsonl(d .. "/unit/results.jsonl")
    assert.equals(3, rows[1].workload.decode.rows)
  end)

  it("runs a point once when two sweep values resolve to the same config", function()
    local e = base_exp()
    e.sweep = { sparse_block_kv = { "auto", 8 } }
    e.plots = nil
    local plan = experiment.plan(e)
    assert.equals(1, #plan.points)
    assert.equals(1, #plan.skipped)
    assert.matches("sparse_block_kv=8", plan.skipped[1].desc)
    assert.matches("the same point as sparse_block_kv=auto once resolved", plan.skipped[1].reason)
  end)

  it("takes an --out that starts with a dash", function()
    local d = tmpdir()
    local cmd = ("cd %s && %s run %s --out -dash --progress off --set metrics=recall_at_k "
      .. ">/dev/null 2>&1"):format(
      q(d), q(BIN), q(d .. "/e.lua"))
    write(d .. "/e.lua", "return { name = 'dash', seed = 1, backend = 'cpu', workload = { "
      .. "decode = { rows = 2, context = 4096 }, prefill = false, consumer_layers = 1 }, "
      .. "config = { index_topk = 64, max_rows = 8, max_model_len = 8192, "
      .. "candidate_topk_blocks = 64, heads = 4 } }\n")
    local ok = os.execute(cmd)
    assert.is_true(ok == 0 or ok == true, cmd)
    assert.is_truthy(io.open(d .. "/-dash/dash/results.jsonl"))
  end)

  it("refuses to resume results of a different plan", function()
    local d = tmpdir()
    experiment.run(base_exp(), quiet({ out = d }))
    local e = base_exp()
    e.config.index_topk = 128
    local msg = err_of(experiment.run, e, quiet({ out = d, resume = true }))
    assert.matches("%-%-resume: .* holds results of a different plan "
      .. "%(point 0's config differs", msg)
  end)

  it("checks --out and --progress before it touches a results file", function()
    local d = tmpdir()
    experiment.run(base_exp(), quiet({ out = d }))
    local o = quiet({ out = d })
    o.progress = "xyz"
    assert.matches("run: %-%-progress = \"xyz\": must be bar, plain or off",
      err_of(experiment.run, base_exp(), o))
    assert.is_nil(io.open(d .. "/unit/results.jsonl.prev"), "nothing was moved aside")
    assert.equals(4, #results.read_jsonl(d .. "/unit/results.jsonl"))
    assert.matches("run: %-%-out = \"\": must be a non%-empty directory path",
      err_of(experiment.run, base_exp(), quiet({ out = "" })))
  end)

  it("refuses a workload knob out of range at load, and skips points too small for the workload",
    function()
    local e = base_exp()
    e.sweep = { ["workload.locality"] = { 1, -5 } }
    e.plots = nil
    assert.matches("field 'workload %(with workload.locality=%-5%)': workload locality = %-5: "
      .. "must be in",
      err_of(experiment.plan, e))
    e = base_exp()
    e.workload.decode.rows = 100
    e.sweep = { max_rows = { 64, 128 } }
    e.plots = nil
    local plan = experiment.plan(e)
    assert.equals(1, #plan.points)
    assert.equals(128, plan.points[1].config.max_rows)
    assert.equals(1, #plan.skipped)
    assert.matches("workload: 100 rows %(decode rows and prefill query rows%): more than "
      .. "max_rows = 64", plan.skipped[1].reason)
    -- longer than max_model_len (65536) at every point
    e.workload.decode = { rows = 2, context = 100000 }
    assert.matches("no valid point: .*decode request 0 is 100000 tokens long %(100000 positions, "
      .. "compress_ratio 1%): more than max_model_len = 65536",
      err_of(experiment.plan, e))
    -- the builder counts tokens: 32768 positions at compress_ratio 4 are 131072 tokens
    e.workload.decode = { rows = 2, context = 32768 }
    e.sweep = { compress_ratio = { 1, 4 } }
    plan = experiment.plan(e)
    assert.equals(1, #plan.points)
    assert.equals(1, #plan.skipped)
    assert.matches("decode request 0 is 131072 tokens long %(32768 positions, compress_ratio 4%)",
      plan.skipped[1].reason)
  end)

  it("keeps earlier results aside when run again without --resume", function()
    local d = tmpdir()
    experiment.run(base_exp(), quiet({ out = d }))
    local res = experiment.run(base_exp(), quiet({ out = d }))
    assert.equals(4, #res.rows)
    assert.equals(4, #results.read_jsonl(d .. "/unit/results.jsonl.prev"))
  end)
end)

describe("a killed run (a real child process)", function()
  local wait_for = children.wait_for
  -- starts cmd (tests/support/child.lua records its pid before exec, so the signal reaches
  -- luajit itself); its directory (pid, out, err and rc files) and its pid
  local function start_child(cmd)
    local c = children.start(cmd, tmpdir())
    local pid = c.pid()
    assert.is_truthy(pid, "the child did not start")
    return c.dir, pid
  end

  it("loses at most the point in flight; --resume removes a half-written line and finishes with "
    .. "one line per point", function()
    local d = tmpdir()
    local file = d .. "/tiny.lua"
    write(file, TINY)
    local jsonl = d .. "/res/tiny/results.jsonl"
    local child, pid = start_child(("env IDXLAB_FAKE_MEASURE=%s IDXLAB_FAKE_DELAY=0.25 %s run "
      .. "%s --out %s "
      .. "--progress plain"):format(q(FAKE), BIN, q(file), q(d .. "/res")))
    assert.is_true(wait_for(function() return #lines_of(jsonl) >= 2 end, 20),
      "no results appeared: "
      .. tostring(fs.read_file(child .. "/err")))
    os.execute("kill -KILL " .. pid)
    assert.is_true(wait_for(function() return fs.exists(child .. "/rc") end, 10))
    local rows, info = results.read_jsonl(jsonl)
    assert.is_false(info.torn, "a killed run left a torn line")
    assert.is_true(#rows >= 2 and #rows < 8, "rows: " .. #rows)
    local before = lines_of(jsonl)
    -- what a kill in the middle of a write leaves
    local f = assert(io.open(jsonl, "ab"))
    f:write('{"schema":1,"experiment":"tiny","point":')
    f:close()
    local rc, out = support.sh(("env IDXLAB_FAKE_MEASURE=%s %s run %s --out %s --resume "
      .. "--progress plain"):format(q(FAKE), BIN, q(file), q(d .. "/res")))
    assert.equals(0, rc, out)
    assert.matches("removed a half%-written last line", out)
    local after = lines_of(jsonl)
    assert.equals(8, #after)
    for i, l in ipairs(before) do assert.equals(l, after[i]) end
    local final = results.read_jsonl(jsonl)
    local seen = {}
    for _, r in ipairs(final) do
      assert.is_nil(seen[r.point], "point twice: " .. tostring(r.point))
      seen[r.point] = true
    end
    for i = 0, 7 do assert.is_true(seen[i], "missing point " .. i) end
  end)

  it("stops cleanly on Ctrl-C (SIGINT) with status 130 and says how to resume", function()
    local d = tmpdir()
    local file = d .. "/tiny.lua"
    write(file, TINY)
    local jsonl = d .. "/res/tiny/results.jsonl"
    local child, pid = start_child(("env IDXLAB_FAKE_MEASURE=%s IDXLAB_FAKE_DELAY=0.25 %s run "
      .. "%s --out %s "
      .. "--progress plain"):format(q(FAKE), BIN, q(file), q(d .. "/res")))
    assert.is_true(wait_for(function() return #lines_of(jsonl) >= 1 end, 20))
    os.execute("kill -INT " .. pid)
    assert.is_true(wait_for(function()
      return (fs.read_file(child .. "/rc") or ""):match("%d") ~= nil
    end, 10))
    assert.equals("130", (fs.read_file(child .. "/rc")):match("%d+"))
    local err = fs.read_file(child .. "/err")
    assert.matches("interrupted: %d+ of 8 points of this run done", err)
    assert.matches("%-%-resume", err)
    local rows, info = results.read_jsonl(jsonl)
    assert.is_false(info.torn)
    assert.is_true(#rows >= 1 and #rows < 8)
    -- the summary and CSV of what is done were written
    assert.is_true(fs.exists(d .. "/res/tiny/results.csv"))
  end)
end)

describe("kernel variants", function()
  local FAMILIES = { "logits", "select", "index", "formats", "gen" } -- variants.families()

  it("pins a family's variant: part of the point, its hash and the dry run", function()
    local e = base_exp()
    local plain = experiment.plan(e)
    e.variant = { logits = "v1" }
    local plan = experiment.plan(e)
    assert.equals(#plain.points, #plan.points)
    for i, pt in ipairs(plan.points) do
      assert.are.same({ logits = "v1" }, pt.variant)
      assert.are_not.equal(plain.points[i].hash, pt.hash)
    end
    assert.are.same({}, plain.points[1].variant)
    assert.matches("\n  variant: logits=v1\n", experiment.describe(plan))
  end)

  it("refuses an unknown family and a name that is not a string", function()
    local e = base_exp()
    e.variant = { logitz = "v1" }
    local msg = err_of(experiment.plan, e)
    assert.matches("field 'variant.logitz': unknown kernel family %(did you mean logits%?%) "
      .. "%(families: [a-z, ]+%)", msg)
    for _, f in ipairs(FAMILIES) do assert.matches("families: .*" .. f, msg) end
    e.variant = { logits = 2 }
    assert.matches("field 'variant.logits' = 2: must be a variant name", err_of(experiment.plan, e))
    e.variant = { "v1" }
    assert.matches("field 'variant' = %[\"v1\"%]: must map kernel families to variant names",
      err_of(experiment.plan, e))
    e.variant = nil
    e.sweep = { ["variant.logits"] = { "v1", 2 } }
    e.plots = nil
    assert.matches("field 'sweep.variant.logits%[2%]' = 2: must be a variant name",
      err_of(experiment.plan, e))
    assert.matches("unknown key variant.nope",
      err_of(experiment.plan, base_exp(), { set = { "variant.nope=v1" } }))
  end)

  it("sweeps variant.<family> like any knob, from the file or --set", function()
    local e = base_exp()
    e.sweep = { ["variant.logits"] = { "v1", "v2" } }
    e.plots = { { x = "variant.logits", y = "recall_at_k" } }
    local plan = experiment.plan(e)
    assert.are.same({ "variant.logits" }, plan.swept)
    assert.equals(2, #plan.points)
    assert.equals("v1", plan.points[1].variant.logits)
    assert.equals("variant.logits=v2", plan.points[2].desc)
    -- --set: a list sweeps (the file's pin goes), one value pins (the sweep and its plots go)
    e = base_exp()
    e.variant = { logits = "v1", select = "v1" }
    plan = experiment.plan(e, { set = { "variant.logits=v1,v2" } })
    assert.equals(8, #plan.points)
    assert.are.same({ logits = "v2", select = "v1" }, plan.points[2].variant)
    e.sweep = { ["variant.logits"] = { "v1", "v2" } }
    e.plots = { { x = "variant.logits", y = "recall_at_k" } }
    plan = experiment.plan(e, { set = { "variant.logits=v3" } })
    assert.equals(1, #plan.points)
    assert.equals(0, #plan.exp.plots)
    assert.equals("v3", plan.points[1].variant.logits)
    plan = experiment.plan(base_exp(), { set = { "sweep.variant.select=v1,v2" } })
    assert.equals(8, #plan.points)
    assert.equals("v2", plan.points[2].variant.select)
  end)

  it("passes the pins as cfg.variant and records variant.<family> in every row", function()
    local d = tmpdir()
    local e = base_exp()
    e.sweep = { ["variant.logits"] = { "v1", "v2" } }
    e.variant = { select = "v1" }
    e.plots = nil
    local seen = {}
    local res = experiment.run(e, quiet({ out = d, measure = function(ctx, pt)
      seen[#seen + 1] = pt.config.variant
      local row = fake_measure(ctx, pt)
      -- what ran: the measure says so for logits only
      if pt.config.variant.logits == "v2" then row.variant = { logits = "v2_test" } end
      return row
    end }))
    assert.equals(0, res.status)
    assert.are.same({ { logits = "v1", select = "v1" }, { logits = "v2", select = "v1" } }, seen)
    local rows = results.read_jsonl(d .. "/unit/results.jsonl")
    assert.equals("v1", rows[1]["variant.logits"])
    assert.equals("v2_test", rows[2]["variant.logits"])
    for _, r in ipairs(rows) do
      assert.equals("v1", r["variant.select"])
      for _, f in ipairs({ "formats", "index", "gen" }) do
        assert.equals("default", r["variant." .. f])
      end
      assert.is_nil(r.variant)
    end
    -- without pins the measure sees no cfg.variant and every family is "default"
    local plain = experiment.run(base_exp(), quiet({ out = d .. "/plain",
      measure = function(ctx, pt)
      assert.is_nil(pt.config.variant)
      return fake_measure(ctx, pt)
    end }))
    for _, r in ipairs(plain.rows) do
      for _, f in ipairs(FAMILIES) do assert.equals("default", r["variant." .. f]) end
    end
  end)
end)

describe("kernel variants with the real measure", function()
  it("runs a pinned CPU variant and records what ran", function()
    local d = tmpdir()
    local e = {
      name = "pinned", seed = 4, backend = "cpu", variant = { logits = "ref" },
      workload = { decode = { rows = 2, context = 2048 }, prefill = false, consumer_layers = 1 },
      config = { heads = 8, index_topk = 64, candidate_topk_blocks = 64, max_rows = 16,
        max_model_len = 8192 },
    }
    local o = { out = d, stdout = sink(), stderr = sink(), progress = "off", gnuplot = "none" }
    local res = experiment.run(e, o)
    assert.equals(0, res.status, table.concat(o.stderr.text))
    assert.equals("ref", res.rows[1]["variant.logits"])
  end)
end)

describe("shard and merge", function()
  it("runs index % n == i per shard and merges them into one result per point", function()
    local d = tmpdir()
    local e = base_exp()
    e.repeats = 2
    local r0 = experiment.run(e, quiet({ out = d, shard = "0/3" }))
    local r1 = experiment.run(e, quiet({ out = d, shard = "1/3" }))
    local r2 = experiment.run(e, quiet({ out = d, shard = "2/3" }))
    for i, r in ipairs({ r0, r1, r2 }) do
      assert.equals(("%s/unit/shard-%d-of-3"):format(d, i - 1), r.dir)
      for _, row in ipairs(r.rows) do assert.equals(i - 1, row.point % 3) end
    end
    assert.equals(8, #r0.rows + #r1.rows + #r2.rows)
    local m = merge.merge(d .. "/merged", { r2.dir, r0.dir, r1.dir })
    assert.equals(8, #m.rows)
    assert.equals(0, m.missing)
    local rows = results.read_jsonl(d .. "/merged/results.jsonl")
    for i, r in ipairs(rows) do assert.equals(i - 1, r.point) end
    assert.is_true(fs.exists(d .. "/merged/results.csv"))
    -- the merged file holds the shards' lines as written
    local shard_lines = {}
    for _, r in ipairs({ r0, r1, r2 }) do
      for _, l in ipairs(lines_of(r.dir .. "/results.jsonl")) do shard_lines[l] = true end
    end
    for _, l in ipairs(lines_of(d .. "/merged/results.jsonl")) do assert.is_true(shard_lines[l]) end
    -- the command line
    local rc, out = support.sh(("%s merge %s %s %s"):format(BIN, q(d .. "/merged2"), q(r0.dir),
      q(r1.dir)))
    assert.equals(0, rc, out)
    assert.matches("warning: 2 of 8 points have no result", out)
  end)

  it("refuses shards of different experiments, plans, or a point twice; warns on commits",
    function()
    local d = tmpdir()
    local e = base_exp()
    local a = experiment.run(e, quiet({ out = d, shard = "0/2" }))
    local b = experiment.run(e, quiet({ out = d, shard = "1/2" }))
    local other = base_exp()
    other.name = "other"
    local c = experiment.run(other, quiet({ out = d, shard = "1/2" }))
    local changed = base_exp()
    changed.config.index_topk = 128
    local x = experiment.run(changed, quiet({ out = d .. "/changed", shard = "1/2" }))
    assert.matches("holds experiment other but", err_of(merge.merge, d .. "/m", { a.dir, c.dir }))
    assert.matches("not the same experiment plan",
      err_of(merge.merge, d .. "/m", { a.dir, x.dir }))
    assert.matches("point 0 is in both", err_of(merge.merge, d .. "/m", { a.dir, a.dir }))
    -- a shard run at another commit: a warning, not an error
    local lines = lines_of(b.dir .. "/results.jsonl")
    lines[1] = lines[1]:gsub('"git_commit":"[^"]*"', '"git_commit":"' .. ("ab"):rep(20) .. '"')
    write(b.dir .. "/results.jsonl", table.concat(lines, "\n") .. "\n")
    local m = merge.merge(d .. "/m", { a.dir, b.dir })
    assert.equals(4, #m.rows)
    assert.matches("different git commits", table.concat(m.warnings, "\n"))
  end)
end)

describe("reproducibility", function()
  local QUALITY = { "logit_mismatches", "logit_diff", "selection_agreement",
    "fp32_selection_agreement", "recall_at_k",
    "mass_recall", "candidate_coverage", "active_rows", "scratch_bytes", "num_chunks" }

  it("gives identical rows for the same file and seed (fake measure)", function()
    local d = tmpdir()
    local a = experiment.run(base_exp(), quiet({ out = d .. "/a" }))
    local b = experiment.run(base_exp(), quiet({ out = d .. "/b" }))
    for i, r in ipairs(a.rows) do
      for _, m in ipairs(QUALITY) do assert.equals(r[m], b.rows[i][m], m) end
      assert.equals(r.config_hash, b.rows[i].config_hash)
    end
  end)

  it("gives identical metrics twice on the CPU with the real pipeline", function()
    local ok, pipeline = pcall(require, "idxlab.pipeline")
    if not ok then
      pending("idxlab.pipeline is not available: " .. tostring(pipeline):sub(1, 120))
      return
    end
    local d = tmpdir()
    local e = {
      name = "repro", seed = 9, backend = "cpu",
      workload = { decode = { rows = 2, context = 2048 }, prefill = false, consumer_layers = 1 },
      config = { heads = 8, index_topk = 64, candidate_topk_blocks = 64, max_rows = 16,
        max_model_len = 8192 },
      sweep = { candidate_block_size = { 8, 16 } },
    }
    local o = { stdout = sink(), stderr = sink(), progress = "off", gnuplot = "none" }
    local function with_out(dir)
      local x = {}
      for k, v in pairs(o) do x[k] = v end
      x.out = dir
      return x
    end
    local a = experiment.run(e, with_out(d .. "/a"))
    local b = experiment.run(e, with_out(d .. "/b"))
    assert.equals(0, a.status, table.concat(o.stderr.text))
    assert.equals(2, #a.rows)
    for i, r in ipairs(a.rows) do
      assert.equals(0, r.logit_mismatches)
      for _, m in ipairs(QUALITY) do
        assert.equals(r[m], b.rows[i][m], m .. " differs between runs (seed 9)")
      end
      for l, pl in ipairs(r.per_layer) do
        assert.equals(pl.recall_at_k, b.rows[i].per_layer[l].recall_at_k)
      end
    end
  end)
end)

describe("shipped experiments", function()
  it("chunk_budget: fewer chunks for a larger budget, more for bf16+fp32, peaks within the budget",
    function()
    local d = tmpdir()
    local res = experiment.run(ROOT .. "/experiments/chunk_budget.lua", { out = d,
      progress = "off", stdout = sink(),
      stderr = sink(), gnuplot = "none" })
    assert.equals(0, res.status)
    assert.equals(12, #res.rows)
    local by = {}
    for _, r in ipairs(res.rows) do
      assert.equals("chunks", r.mode)
      assert.is_true(r.peak_logits_bytes <= r.max_logits_bytes, "peak over the budget")
      assert.is_true(r.max_rows_per_chunk >= 1)
      by[r.split_width] = by[r.split_width] or {}
      table.insert(by[r.split_width], r)
    end
    for _, sw in ipairs({ "bf16", "bf16+fp32" }) do
      local rows = by[sw]
      table.sort(rows, function(a, b) return a.max_logits_bytes < b.max_logits_bytes end)
      for i = 2, #rows do assert.is_true(rows[i].num_chunks <= rows[i - 1].num_chunks, sw) end
      assert.is_true(rows[1].num_chunks > rows[#rows].num_chunks, sw)
    end
    for i, r in ipairs(by.bf16) do
      assert.is_true(by["bf16+fp32"][i].num_chunks >= r.num_chunks)
      assert.equals(8192, r.min_split_seq_len)
      assert.equals(24576, by["bf16+fp32"][i].min_split_seq_len)
    end
  end)

  it("candidate_topk_blocks: recall rises with T and falls as locality is reduced (real "
    .. "pipeline)", function()
    local ok, pipeline = pcall(require, "idxlab.pipeline")
    if not ok then
      pending("idxlab.pipeline is not available: " .. tostring(pipeline):sub(1, 120))
      return
    end
    local d = tmpdir()
    local o = { out = d, progress = "off", stdout = sink(), stderr = sink(), gnuplot = "none",
      set = { "workload.decode.rows=4", "workload.decode.context=8192",
        "workload.consumer_layers=1",
        "sweep.candidate_topk_blocks=64,512", "sweep.workload.locality=0,8,32",
        "timing.warmup=0", "timing.iters=1" } }
    local res = experiment.run(ROOT .. "/experiments/candidate_topk_blocks.lua", o)
    assert.equals(0, res.status, table.concat(o.stderr.text))
    local recall = {}
    for _, r in ipairs(res.rows) do
      recall[r.candidate_topk_blocks .. "/" .. r["workload.locality"]] = r.recall_at_k
      assert.is_true(r.active_rows > 0)
      assert.equals(0, r.logit_mismatches)
    end
    assert.is_true(recall["512/8"] - recall["64/8"] >= 0.05,
      ("recall %s at T = 64, %s at T = 512 (seed 1)"):format(recall["64/8"], recall["512/8"]))
    assert.is_true(recall["64/0"] < recall["64/8"] and recall["64/8"] < recall["64/32"],
      ("recall %s, %s, %s at locality 0, 8, 32 (T = 64, seed 1)"):format(recall["64/0"],
        recall["64/8"], recall["64/32"]))
  end)
end)
