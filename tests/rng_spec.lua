-- rng_spec: the Philox stream from Lua against an independent Lua Philox4x32-10 (uint64
-- cdata arithmetic), the normal transform against math.log/sin/cos, the argument errors, and
-- (#gpu) the CPU and GPU streams bit for bit.
local idxlab = require("idxlab")
local ffi = require("ffi")
local rng = idxlab.rng

local u64 = ffi.typeof("uint64_t")
local fbox = ffi.new("float[1]")
local function f32(x) fbox[0] = x return fbox[0] end
local function bits(x) fbox[0] = x return ffi.cast("uint32_t *", fbox)[0] end

-- Philox4x32-10 written again in Lua, from the algorithm's definition.
local M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
local function lo32(v) return tonumber(bit.band(v, 0xffffffffULL)) end
local function hi32(v) return tonumber(bit.rshift(v, 32)) end
local function u32(x) return x % 4294967296 end -- bit.* results are signed int32
local function philox_lua(c, k)
  local c0, c1, c2, c3, k0, k1 = c[1], c[2], c[3], c[4], k[1], k[2]
  for _ = 1, 10 do
    local p0, p1 = u64(M0) * c0, u64(M1) * c2
    c0, c1, c2, c3 = u32(bit.bxor(hi32(p1), c1, k0)), lo32(p1), u32(bit.bxor(hi32(p0), c3, k1)),
      lo32(p0)
    k0, k1 = u32(k0 + W0), u32(k1 + W1)
  end
  return { c0, c1, c2, c3 }
end
-- cuRAND's generator order: value p is lane p%4 of counter (p/4)/65536, subsequence (p/4)%65536.
local function stream_value(seed, p)
  local chunk = math.floor(p / 4)
  local ctr, sub = math.floor(chunk / 65536), chunk % 65536
  local out = philox_lua({ ctr % 2 ^ 32, math.floor(ctr / 2 ^ 32), sub, 0 },
    { seed % 2 ^ 32, math.floor(seed / 2 ^ 32) })
  return out[p % 4 + 1]
end
-- exact in double, one rounding
local function uniform_of(x) return f32(f32(x) * 2 ^ -32 + 2 ^ -33) end

describe("rng", function()
  local ctx = idxlab.context{ backend = "cpu", seed = 5 }
  local seed0 = os.time() % 100000

  it("gives Philox4x32-10's known answers", function()
    assert.are.same({ 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 },
      rng.philox({ 0, 0, 0, 0 }, { 0, 0 }))
    assert.are.same({ 546353992, 3665621163, 1140953199, 3419031310 },
      rng.philox({ 0, 0, 0, 0 }, { 1234, 0 }))
    local c, k = { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 }, { 0xa4093822, 0x299f31d0 }
    assert.are.same({ 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 }, rng.philox(c, k))
    assert.are.same(philox_lua(c, k), rng.philox(c, k))
  end)

  it("fills uniforms that match an independent Lua Philox, across the subsequence wrap", function()
    for _, case in ipairs({ { seed0, 0, 37 }, { seed0 + 1, 3, 10 }, { 2 ^ 40 + 7, 262140, 13 },
      { 1234, 0, 8 } }) do
      local seed, offset, n = case[1], case[2], case[3]
      local t = rng.uniform(ctx, { n }, { seed = seed, offset = offset })
      local p = t:ptr()
      for i = 0, n - 1 do
        local want = uniform_of(stream_value(seed, offset + i))
        assert(bits(p[i]) == bits(want),
          ("seed %d offset %d: value %d is %.9g, expected %.9g"):format(seed, offset, i, p[i],
            want))
      end
      t:free()
    end
    local t = rng.uniform(ctx, { 8 }, { seed = 1234 })
    assert.is_true(math.abs(t:ptr()[4] - 0.816736) < 1e-6) -- subsequence 1, counter 0 (cuRAND)
  end)

  it("defaults the seed to the context's and accepts uint64 seeds", function()
    local a = rng.uniform(ctx, { 16 })
    local b = rng.uniform(ctx, { 16 }, { seed = 5 })
    local c = rng.uniform(ctx, { 16 }, { seed = 5ULL })
    assert.are.same(a:to_table(), b:to_table())
    assert.are.same(a:to_table(), c:to_table())
    local d = rng.uniform(ctx, { 4 }, { seed = 0xffffffffffffffffULL })
    local want = philox_lua({ 0, 0, 0, 0 }, { 0xffffffff, 0xffffffff })
    for i = 1, 4 do assert.equals(bits(uniform_of(want[i])), bits(d:ptr()[i - 1])) end
  end)

  it("fills normals equal to math.log/sin/cos Box-Muller to float precision, with N(m, s^2) "
    .. "statistics", function()
    local n = 20001
    local seed = seed0 + 17
    local z = rng.normal(ctx, { n }, { seed = seed, offset = 1 })
    local u = rng.uniform(ctx, { n + 1 }, { seed = seed, offset = 1 })
    local zp, up = z:ptr(), u:ptr()
    local s1, s2 = 0, 0
    for i = 0, n - 1 do
      local j = i - i % 2
      local r, a = math.sqrt(-2 * math.log(up[j])), 2 * math.pi * up[j + 1]
      local want = i % 2 == 0 and r * math.cos(a) or r * math.sin(a)
      assert(math.abs(zp[i] - want) <= 1.2e-7 * math.max(1, math.abs(want)),
        ("seed %d: normal %d = %.9g, Box-Muller gives %.9g"):format(seed, i, zp[i], want))
      s1, s2 = s1 + zp[i], s2 + zp[i] * zp[i]
    end
    local mean, var = s1 / n, s2 / n - (s1 / n) ^ 2
    assert(math.abs(mean) < 5 / math.sqrt(n), ("seed %d: mean %g"):format(seed, mean))
    assert(math.abs(var - 1) < 5 * math.sqrt(2 / n), ("seed %d: variance %g"):format(seed, var))
    local w = rng.normal(ctx, { n }, { seed = seed, offset = 1, mean = -1.5, stddev = 4 })
    for i = 0, n - 1, 97 do
      assert.is_true(math.abs(w:ptr()[i] - (-1.5 + 4 * zp[i])) < 1e-5)
    end
    z:free(); u:free(); w:free()
  end)

  it("fills a tensor given to it, of any shape", function()
    local t = ctx:tensor("f32", { 3, 5 })
    assert.equals(t, rng.normal(t, { seed = 3 }))
    local flat = rng.normal(ctx, { 15 }, { seed = 3 })
    assert.are.same(flat:to_table(), t:to_table())
  end)

  it("refuses bad arguments at the caller's line", function()
    local ok, err = pcall(rng.uniform, ctx:tensor("i32", { 4 }), { seed = 1 })
    assert.is_false(ok)
    assert.matches("rng_uniform: out: dtype i32, expected f32", err)
    ok, err = pcall(function() rng.normal(ctx:tensor("f32", { 4 }), { stddev = -1 }) end)
    assert.is_false(ok)
    assert.matches("rng_spec.lua:%d+: idxlab: rng_normal: stddev = %-1: must be finite and >= 0",
      err)
    ok, err = pcall(function() rng.uniform(ctx, { 4 }, { seed = -1 }) end)
    assert.is_false(ok)
    assert.matches("rng_spec.lua:%d+: idxlab: rng: seed = %-1: must be an integer in %[0, 2%^53%)",
      err)
    ok, err = pcall(function() rng.uniform(ctx, { 4 }, { offset = 0.5 }) end)
    assert.is_false(ok)
    assert.matches("offset = 0.5", err)
    ok, err = pcall(function() rng.uniform(ctx, { 4 }, { sead = 1 }) end)
    assert.is_false(ok)
    assert.matches("rng_spec.lua:%d+: idxlab: rng: option sead: unknown %(offset, seed%)", err)
    ok, err = pcall(function() rng.normal(ctx, { 4 }, { mean = "0" }) end)
    assert.is_false(ok)
    assert.matches("mean = 0: must be a number", err)
    ok, err = pcall(function() rng.uniform(ctx, { -4 }) end)
    assert.is_false(ok)
    assert.matches("rng_spec.lua:%d+: idxlab: shape%[1%] = %-4", err)
    ok, err = pcall(function() rng.uniform(42) end)
    assert.is_false(ok)
    assert.matches("expected an f32 Tensor or %(ctx, shape, opts%), got number", err)
    local t = ctx:tensor("f32", { 2 }); t:free()
    ok, err = pcall(function() rng.uniform(t) end)
    assert.is_false(ok)
    assert.matches("the tensor was freed", err)
    ok, err = pcall(function() rng.philox({ 0, 0, 0 }, { 0, 0 }) end)
    assert.is_false(ok)
    assert.matches("rng_spec.lua:%d+: idxlab: rng.philox: counter must be a list of 4 integers",
      err)
    ok, err = pcall(function() rng.philox({ 0, 0, 0, 0 }, { 0, 2 ^ 32 }) end)
    assert.is_false(ok)
    assert.matches("key%[2%] = 4294967296: must be an integer in %[0, 2%^32%)", err)
  end)
end)

describe("rng on the GPU #gpu", function()
  it("gives the CPU's uniforms and normals bit for bit", function()
    local gpu = idxlab.context{ backend = "cuda", seed = 9 }
    local cpu = idxlab.context{ backend = "cpu", seed = 9 }
    local seed0 = os.time() % 100000
    local before = gpu:alloc_stats().device_bytes_live
    for _, case in ipairs({ { seed0, 0, 1 }, { seed0, 3, 1000003 }, { 2 ^ 40 + 1, 262141, 600001 },
      { 7, 2 ^ 34 + 5, 4099 } }) do
      local seed, offset, n = case[1], case[2], case[3]
      for _, kind in ipairs({ "uniform", "normal" }) do
        local opts = { seed = seed, offset = offset }
        if kind == "normal" then opts.mean, opts.stddev = 0.25, 2 end
        local d = rng[kind](gpu, { n }, opts)
        local h = rng[kind](cpu, { n }, opts)
        local back = d:to("host")
        local a, b = back:ptr(), h:ptr()
        local bad, first = 0, nil
        for i = 0, n - 1 do
          if bits(a[i]) ~= bits(b[i]) then bad = bad + 1; first = first or i end
        end
        assert(bad == 0,
          ("%s seed %d offset %d n %d: %d values differ, first at %d: gpu %.9g cpu %.9g")
          :format(kind, seed, offset, n, bad, first or -1, first and a[first] or 0,
            first and b[first] or 0))
        d:free(); back:free(); h:free()
      end
    end
    assert.equals(before, gpu:alloc_stats().device_bytes_live)
  end)
end)
