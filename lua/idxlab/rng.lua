-- idxlab.rng: the counter-based RNG from Lua. The uniform stream is cuRAND's PHILOX4_32_10
-- stream (same seed and offset, same bits on the CPU and the GPU); normals come from it through
-- one transform that gives the same floats on both backends.
--
--   rng.uniform(t, {seed = 7, offset = 0})             -- fills an f32 Tensor in (0, 1]
--   rng.normal(t, {seed = 7, mean = 0, stddev = 1})    -- fills an f32 Tensor
--   rng.uniform(ctx, {4, 128}, {seed = 7})             -- a new f32 tensor on ctx's device
--   rng.philox({c0, c1, c2, c3}, {k0, k1})             -- one Philox4x32-10 block
-- seed defaults to the context's seed, offset to 0.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local util = require("idxlab.util")
local Tensor = require("idxlab.tensor")
local Context = require("idxlab.context")
local ffi, C = core.ffi, core.C
local fail = errors.fail

local M = {}

local u64 = ffi.typeof("uint64_t")
local u32arr = ffi.typeof("uint32_t[?]")

-- A seed or offset: an integer Lua number in [0, 2^53), or a uint64_t cdata.
local function to_u64(v, what)
  if type(v) == "cdata" and ffi.istype(u64, v) then return v end
  if not util.is_int(v, 0) then
    fail("rng: %s = %s: must be an integer in [0, 2^53) or a uint64_t cdata", what, tostring(v))
  end
  return u64(v)
end

local function check_opts(opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail("rng: options must be a table") end
  for k in pairs(opts) do
    if not allowed[k] then
      fail("rng: option %s: unknown (%s)", tostring(k),
        table.concat(util.sorted_keys(allowed), ", "))
    end
  end
  return opts
end

-- (t, opts) or (ctx, shape, opts): the tensor to fill and the options.
local function target(a, b, c)
  if Tensor.is_tensor(a) then
    local why = Tensor.dead_reason(a)
    if why then fail("rng: the %s", why) end
    return a, b
  end
  if getmetatable(a) == Context then
    if type(b) ~= "table" then fail("rng: expected (ctx, shape, opts) with shape a list") end
    return Tensor.new(a, "f32", b), c
  end
  fail("rng: expected an f32 Tensor or (ctx, shape, opts), got %s", type(a))
end

local uniform_opts = { seed = true, offset = true }
local normal_opts = { seed = true, offset = true, mean = true, stddev = true }

function M.uniform(a, b, c)
  local t, opts = target(a, b, c)
  opts = check_opts(opts, uniform_opts)
  local seed = to_u64(opts.seed or t.ctx:seed(), "seed")
  local offset = to_u64(opts.offset or 0, "offset")
  core.check(t.ctx.cd, C.ixl_rng_uniform(t.ctx.cd, t.cd, seed, offset))
  return t
end

function M.normal(a, b, c)
  local t, opts = target(a, b, c)
  opts = check_opts(opts, normal_opts)
  local seed = to_u64(opts.seed or t.ctx:seed(), "seed")
  local offset = to_u64(opts.offset or 0, "offset")
  local mean, stddev = opts.mean or 0, opts.stddev or 1
  if type(mean) ~= "number" then fail("rng: mean = %s: must be a number", tostring(mean)) end
  if type(stddev) ~= "number" then
    fail("rng: stddev = %s: must be a number", tostring(stddev))
  end
  core.check(t.ctx.cd, C.ixl_rng_normal(t.ctx.cd, t.cd, seed, offset, mean, stddev))
  return t
end

-- One Philox4x32-10 block: counter (4 words) and key (2 words), each an integer in [0, 2^32).
function M.philox(counter, key)
  local function words(list, n, what)
    if type(list) ~= "table" or #list ~= n then
      fail("rng.philox: %s must be a list of %d integers in [0, 2^32)", what, n)
    end
    local arr = u32arr(n)
    for i = 1, n do
      local v = list[i]
      if not util.is_int(v, 0, 2 ^ 32 - 1) then
        fail("rng.philox: %s[%d] = %s: must be an integer in [0, 2^32)", what, i, tostring(v))
      end
      arr[i - 1] = v
    end
    return arr
  end
  local c, k = words(counter, 4, "counter"), words(key, 2, "key")
  local out = u32arr(4)
  C.ixl_philox4x32_10(c, k, out)
  return { tonumber(out[0]), tonumber(out[1]), tonumber(out[2]), tonumber(out[3]) }
end

return errors.wrap(M)
