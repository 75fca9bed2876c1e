-- api_fuzz_spec: a seeded property fuzzer over the public Lua API (issue 9: "every public Lua
-- function checks its arguments"). Random calls with hostile arguments -- nil, numbers out of
-- range, fractions, wrong strings, tables, tensors of random dtypes and shapes, freed tensors,
-- views whose base was freed, a tensor where a context belongs -- must each return or raise an
-- idxlab error (errors.is): never another Lua error, and never a crash (which would end busted).
-- The functions that take a file path (safetensors.read and .write) get their string paths
-- inside a private temporary directory: the fuzzer writes nothing anywhere else.
local idxlab = require("idxlab")
local errors = require("idxlab.errors")
local Tensor = require("idxlab.tensor")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local support = dofile(ROOT .. "/tests/support.lua")
teardown(support.cleanup)

-- The targets whose first argument is a path in the filesystem. A string there is taken
-- relative to the private directory (absolute ones too: "/x" becomes DIR//x); anything else
-- goes through unchanged, so the argument checks see every hostile value as before.
local PATH_FIRST = { ["safetensors.read"] = true, ["safetensors.write"] = true }
local function confined(dir, f)
  return function(path, ...)
    if type(path) == "string" then path = dir .. "/" .. path end
    return f(path, ...)
  end
end

local exists = require("idxlab.fs").exists

local SEED = tonumber(os.getenv("IXL_TEST_SEED") or "") or (os.time() % 100000)
local ITERS = tonumber(os.getenv("IDXLAB_API_FUZZ_ITERS") or "") or 4000

describe("the public Lua API under random arguments", function()
  it("answers every call with a result or an idxlab error", function()
    math.randomseed(SEED)
    local ctx = idxlab.context{ backend = "cpu" }
    local dtypes = { "f32", "f16", "bf16", "e4m3", "e2m1x2", "i32", "u8" }
    local function rand_tensor()
      local nd = math.random(0, 4)
      local shape = {}
      for i = 1, nd do shape[i] = math.random(0, 5) end
      local t = ctx:tensor(dtypes[math.random(#dtypes)], shape)
      local r = math.random(12)
      if r == 1 then t:free() end
      if r == 2 and t:numel() > 0 then
        local v = t:view({ 1 }, 0)
        t:free()
        return v
      end
      return t
    end
    local pool = {
      function() return nil end, function() return math.random(-5, 300) end,
      function() return -1e12 end,
      function() return 2 ^ 40 end, function() return 0.5 end, function() return 0 / 0 end,
      function() return "mxfp4" end, function() return "bogus" end, function() return "fp32" end,
      function() return {} end, function() return { 1, 2, 3 } end, function() return { 2, 128 } end,
      rand_tensor, rand_tensor, rand_tensor, function() return ctx end, function() return true end,
      function()
        return { q_codes = rand_tensor(), k_codes = rand_tensor(), k_scales = rand_tensor(),
                 kv_format = "mxfp4" }
      end,
      function()
        return { decode = { { context_len = math.random(-3, 50) } },
                 prefill = { { query_len = 2, context_len = 7 } } }
      end,
      function()
        return { heads = 8, lens = { math.random(0, 40), 3 }, decode = math.random(2) == 1 }
      end,
    }
    local function rarg() return pool[math.random(#pool)]() end
    local dir = support.tmpdir("api-fuzz")
    local targets = {}
    for _, mod in ipairs({ "formats", "logits", "select", "workload", "chunker", "config", "rng",
                           "pipeline", "safetensors", "metrics" }) do
      for name, f in pairs(require("idxlab." .. mod)) do
        local id = mod .. "." .. name
        if type(f) == "function" then
          targets[#targets + 1] = { id, PATH_FIRST[id] and confined(dir, f) or f }
        end
      end
    end
    -- methods: the receiver comes first
    local b = idxlab.builder(ctx, { max_rows = 8, max_model_len = 4096 })
    for _, m in ipairs({ "shape", "dtype", "numel", "to_table", "from_table", "fill_bytes",
                         "copy_from", "to", "view", "ptr" }) do
      targets[#targets + 1] = { "Tensor:" .. m, function(...)
        local t = rand_tensor()
        return Tensor[m](t, ...)
      end }
    end
    for _, m in ipairs({ "tensor", "timer_record", "timer_elapsed_us", "check" }) do
      targets[#targets + 1] = { "Context:" .. m, function(...) return ctx[m](ctx, ...) end }
    end
    targets[#targets + 1] = { "Builder:build", function(...) return b:build(...) end }
    targets[#targets + 1] = { "idxlab.builder", function(...) return idxlab.builder(...) end }
    targets[#targets + 1] = { "idxlab.context", function(...) return idxlab.context(...) end }
    table.sort(targets, function(x, y) return x[1] < y[1] end)
    for id in pairs(PATH_FIRST) do
      local found = false
      for _, t in ipairs(targets) do found = found or t[1] == id end
      assert(found, id .. " is no longer a target: keep PATH_FIRST in step with the API")
    end
    -- the pool's strings, as names in the current directory (the repository root under
    -- scripts/run_tests.sh): the fuzzer must not make any of them
    local stray = {}
    for _, name in ipairs({ "mxfp4", "bogus", "fp32" }) do
      if not exists(name) then stray[#stray + 1] = name end
    end
    local bad = {}
    for _ = 1, ITERS do
      local t = targets[math.random(#targets)]
      local args, n = {}, math.random(0, 8)
      for i = 1, n do args[i] = rarg() end
      local ok, err = pcall(t[2], unpack(args, 1, n))
      if not ok and not errors.is(err) then
        bad[#bad + 1] = t[1] .. ": " .. tostring(err):sub(1, 200)
      end
    end
    b:free()
    assert.are.same({}, bad, "seed " .. SEED)
    local made = {}
    for _, name in ipairs(stray) do
      if exists(name) then made[#made + 1] = name end
    end
    assert.are.same({}, made, "written outside the private directory, seed " .. SEED)
  end)
end)
