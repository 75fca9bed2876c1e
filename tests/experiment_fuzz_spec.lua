-- experiment_fuzz_spec: the seeded property fuzzer of the experiment-file loader (issue 9).
-- libFuzzer cannot see Lua, so this spec generates hundreds of experiments -- random tables,
-- valid experiments with random mutations, the shipped experiment files with their text
-- mutated, and random --set lists -- and checks the property: each gives a clean error
-- ("idxlab: ..." naming what is wrong) or a valid plan, never another kind of Lua error.
-- IDXLAB_FUZZ_SEED=n replays a run; IDXLAB_FUZZ_N=n changes the count per kind.
local experiment = require("idxlab.experiment")
local fs = require("idxlab.fs")
local config = require("idxlab.config")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local SEED = tonumber(os.getenv("IDXLAB_FUZZ_SEED") or "") or os.time()
local N = tonumber(os.getenv("IDXLAB_FUZZ_N") or "") or 200

-- A small deterministic generator (xorshift32), so a seed replays the same cases on any Lua.
local bit = require("bit")
local state
local function reseed(s) state = bit.tobit(s * 2654435761 % 4294967296 + 1) end
local function rand_u32()
  state = bit.bxor(state, bit.lshift(state, 13))
  state = bit.bxor(state, bit.rshift(state, 17))
  state = bit.bxor(state, bit.lshift(state, 5))
  return state % 4294967296
end
local function rnd(a, b) return a + rand_u32() % (b - a + 1) end
local function pick(list) return list[rnd(1, #list)] end
local function chance(p) return rand_u32() / 4294967296 < p end

local SHIPPED = { "candidate_block_size", "sparse_block_kv", "chunk_budget",
  "candidate_topk_blocks", "context_scaling", "block_score" }

local vocab = {}
for _, k in ipairs(experiment.TOP_FIELDS) do vocab[#vocab + 1] = k end
for _, k in ipairs(config.field_names()) do vocab[#vocab + 1] = k end
for _, k in ipairs({ "recall_at_k", "time_step_us", "num_chunks", "decode", "prefill", "rows",
  "context", "contexts", "query_len", "context_len", "requests", "consumer_layers", "locality",
  "kind", "replay", "files", "x", "y", "series", "workload.locality", "workload.decode.context",
  "config.index_topk", "all", "auto", "length", "chunks", "step", "warmup", "iters", "", "_",
  "seed", "sweep.x", "__index", "logits", "select", "variant.logits", "v1" }) do
  vocab[#vocab + 1] = k
end

local function rand_scalar()
  local r = rnd(1, 14)
  if r == 1 then return rnd(-3, 3) end
  if r == 2 then return 2 ^ rnd(0, 12) end
  if r == 3 then
    return pick({ 0.5, -1e300, 1e308 * 10, -(1e308 * 10), 2 ^ 53, 2 ^ 63, 1e-320, 3.75 })
  end
  if r == 4 then return pick({ true, false }) end
  if r <= 8 then return pick(vocab) end
  if r == 9 then
    return pick({ "mxfp4", "fp8", "bf16", "bf16+fp32", "max", "logsumexp", "cpu", "cuda", "gpu" })
  end
  if r == 10 then return ("x"):rep(rnd(0, 300)) end
  if r == 11 then return "\0\255\n\"" end
  if r == 12 then return pick({ 8, 16, 32, 64, 128, 512, 2048, 4096 }) end
  if r == 13 then return 0 / 0 end
  return rnd(0, 100000)
end

-- A table key: any scalar but NaN, which Lua refuses as a key.
local function rand_key()
  local k = rand_scalar()
  if k ~= k then return "nan" end
  return k
end

local function rand_value(depth)
  if depth > 3 or chance(0.6) then return rand_scalar() end
  local t = {}
  if chance(0.5) then
    for i = 1, rnd(0, 5) do t[i] = rand_value(depth + 1) end
  else
    for _ = 1, rnd(0, 5) do t[rand_key()] = rand_value(depth + 1) end
  end
  return t
end

local function valid_base()
  return {
    name = "fz", question = "?", seed = 1, backend = "cpu",
    workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
    config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
    sweep = { candidate_block_size = { 8, 16 }, candidate_topk_blocks = { 64, 128 } },
    metrics = { "recall_at_k" },
    plots = { { x = "candidate_topk_blocks", y = "recall_at_k", series = "candidate_block_size" } },
  }
end

-- Walks to a random table inside t and changes, adds or removes one entry.
local function mutate(t)
  local node = t
  for _ = 1, rnd(0, 3) do
    local keys = {}
    for k, v in pairs(node) do if type(v) == "table" then keys[#keys + 1] = k end end
    if #keys == 0 then break end
    node = node[pick(keys)]
  end
  local keys = {}
  for k in pairs(node) do keys[#keys + 1] = k end
  local r = rnd(1, 4)
  if r == 1 and #keys > 0 then
    node[pick(keys)] = nil
  elseif r == 2 and #keys > 0 then
    node[pick(keys)] = rand_value(1)
  elseif r == 3 then
    node[rand_key()] = rand_value(1)
  else
    node[#node + 1] = rand_value(2)
  end
end

-- The property: a clean idxlab error, or a plan whose every point is well formed.
local function check(case, f, ...)
  local ok, res = pcall(f, ...)
  if not ok then
    local msg = tostring(res)
    local clean = msg:match("idxlab: .*")
    assert(clean ~= nil and not msg:find("^idxlab: .*stack traceback"),
      ("case %s (seed %d): not a clean error: %s"):format(case, SEED, msg))
    assert(not clean:find("attempt to ", 1, true) or clean:find("error while loading", 1, true),
      ("case %s (seed %d): an internal error: %s"):format(case, SEED, msg))
    return "error"
  end
  local plan = res
  assert(type(plan) == "table" and type(plan.points) == "table" and #plan.points >= 1,
    ("case %s (seed %d): a plan without points"):format(case, SEED))
  for i, pt in ipairs(plan.points) do
    assert(pt.index == i - 1, ("case %s (seed %d): point %d has index %s")
      :format(case, SEED, i, tostring(pt.index)))
    assert(type(pt.config) == "table" and type(pt.effective.sparse_block_kv) == "number",
      ("case %s (seed %d): point %d without a resolved config"):format(case, SEED, i))
    assert(type(pt.hash) == "string" and pt.hash:match("^%x+$"),
      ("case %s (seed %d): bad hash"):format(case, SEED))
    assert(type(pt.workload) == "table" and type(pt.seed) == "number")
  end
  assert(type(experiment.describe(plan)) == "string")
  return "plan"
end

-- A unique file (os.tmpname is mkstemp): concurrent runs with the same seed never share it.
local function tmpfile()
  return os.tmpname()
end

describe("the experiment loader under fuzzing", function()
  local keep
  setup(function()
    keep = experiment.MAX_INSTRUCTIONS
    experiment.MAX_INSTRUCTIONS = 2e5 -- a mutated file may loop; stop it soon
  end)
  teardown(function() experiment.MAX_INSTRUCTIONS = keep end)

  it("gives a clean error or a valid plan for random tables (seed printed on failure)", function()
    reseed(SEED)
    local counts = { error = 0, plan = 0 }
    for i = 1, N do
      local t = rand_value(0)
      if type(t) == "table" and chance(0.5) then t.name = "r" .. i end
      local kind = check("random table " .. i, experiment.plan, t)
      counts[kind] = counts[kind] + 1
    end
    assert.equals(N, counts.error + counts.plan)
  end)

  it("gives a clean error or a valid plan for mutated valid experiments", function()
    reseed(SEED + 1)
    local counts = { error = 0, plan = 0 }
    for i = 1, N do
      local t = valid_base()
      for _ = 1, rnd(1, 3) do mutate(t) end
      local kind = check("mutated table " .. i, experiment.plan, t)
      counts[kind] = counts[kind] + 1
    end
    -- mutations keep some experiments valid: the property is checked on both sides
    assert.is_true(counts.plan > 0, "seed " .. SEED)
    assert.is_true(counts.error > 0, "seed " .. SEED)
  end)

  it("gives a clean error or a valid plan for the shipped files with their text mutated", function()
    reseed(SEED + 2)
    local texts = {}
    for _, name in ipairs(SHIPPED) do
      local text = fs.read_file(ROOT .. "/experiments/" .. name .. ".lua")
      assert.is_string(text, name)
      texts[#texts + 1] = text
    end
    local tokens = { "{", "}", ",", "=", "nil", "0", "-1", "\"x\"", "1e309", "...", "(", ")", "[",
      "]", "--", "\n", "while true do end ", "return 1 ", "local ", "\"all\"", "zip = true,",
      "sweep = 3,", "error('boom')", "{}" }
    local path = tmpfile()
    local counts = { error = 0, plan = 0 }
    for i = 1, N do
      local text = pick(texts)
      for _ = 1, rnd(1, 4) do
        local pos = rnd(1, #text)
        local r = rnd(1, 4)
        if r == 1 then
          text = text:sub(1, pos - 1) .. text:sub(pos + rnd(1, 20))
        elseif r == 2 then
          text = text:sub(1, pos - 1) .. pick(tokens) .. text:sub(pos)
        elseif r == 3 then
          local a = rnd(1, #text)
          text = text:sub(1, pos - 1) .. text:sub(a, a + rnd(0, 30)) .. text:sub(pos)
        else
          text = text:sub(1, pos - 1) .. string.char(rnd(0, 255)) .. text:sub(pos + 1)
        end
      end
      local f = assert(io.open(path, "wb"))
      f:write(text)
      f:close()
      local kind = check("mutated file " .. i, experiment.plan, path)
      counts[kind] = counts[kind] + 1
    end
    os.remove(path)
    assert.equals(N, counts.error + counts.plan)
  end)

  it("gives a clean error or a valid plan for random --set lists", function()
    reseed(SEED + 3)
    local keys = { "candidate_block_size", "candidate_topk_blocks", "sparse_block_kv", "index_topk",
      "seed", "repeats", "backend", "mode", "by", "metrics", "zip", "name", "workload.locality",
      "workload.decode.rows", "workload.decode", "sweep.block_score", "sweep.workload.locality",
      "sweep.seed", "config.page_size", "max_logits_bytes", "kv_format", "nonsense",
      "sweep.nonsense", "workload..x", "=", "", "variant.logits", "sweep.variant.select",
      "variant.nope" }
    local values = { "8", "16,32", "all", "auto", "64MiB", "1.5", "-3", "true", "x", "", "1,,2",
      "cpu", "cuda", "length", "chunks", "recall_at_k", "8,8", "1e400", "mxfp8", "v1,v2" }
    for _ = 1, N do
      local sets = {}
      for _ = 1, rnd(1, 3) do
        sets[#sets + 1] = pick(keys) .. (chance(0.9) and "=" or "") .. pick(values)
      end
      check("--set " .. table.concat(sets, " "), experiment.plan, valid_base(), { set = sets })
    end
  end)

  it("plans every shipped experiment", function()
    for _, name in ipairs(SHIPPED) do
      local plan = experiment.plan(ROOT .. "/experiments/" .. name .. ".lua")
      assert.equals(name, plan.exp.name)
      assert.is_string(plan.exp.question)
      assert.is_true(#plan.points >= 3, name)
      assert.equals(0, #plan.skipped, name)
      assert.is_true(#plan.exp.plots >= 1, name)
    end
  end)
end)
