-- formats_spec: idxlab.formats from Lua: known vectors, shapes, a dequantize round trip, fp8
-- weights, paged writes through a padded stride, and the error messages (naming the value,
-- at the caller's line).
local idxlab = require("idxlab")
local formats = require("idxlab.formats")

local seed = tonumber(os.getenv("IXL_TEST_SEED") or "") or (os.time() % 1000003)
math.randomseed(seed)
local support = dofile((os.getenv("IDXLAB_ROOT") or ".") .. "/tests/support.lua")
local normal = support.normal

describe("formats", function()
  local ctx = idxlab.context{ backend = "cpu", seed = 1 }

  it("knows the value bytes of each format", function()
    assert.equals(64, formats.value_bytes("mxfp4"))
    assert.equals(128, formats.value_bytes("mxfp8"))
    assert.equals(128, formats.value_bytes("fp8"))
    assert.equals("i32", formats.scale_dtype("mxfp8"))
    assert.equals("f32", formats.scale_dtype("fp8"))
    assert.equals(8704, formats.page_stride("mxfp4", 128)) -- 128 * 68 is a multiple of 512
    assert.equals(1536, formats.page_stride("mxfp4", 16))
    local ok, err = pcall(formats.value_bytes, "mxfp6")
    assert.is_false(ok)
    assert.matches("kv_format = mxfp6: must be one of mxfp4, mxfp8, fp8", err)
  end)

  it("quantizes known vectors (mxfp4, rne and ties_down)", function()
    local x = ctx:tensor("f32", { 1, 128 })
    local v = {}
    for i = 1, 128 do v[i] = 0 end
    v[1], v[2], v[3], v[4], v[5] = 6, 0.25, 0.75, 2.5, -0.1
    x:from_table(v)
    local codes, scales = formats.quantize(ctx, "mxfp4", "rne", "k", x)
    assert.are.same({ 1, 64 }, codes:shape())
    assert.are.same({ 1 }, scales:shape())
    assert.equals("i32", scales:dtype())
    local c = codes:to_table()
    -- byte 0: element 0 (6 -> 7) low, element 1 (0.25 -> 0, tie to even) high
    assert.equals(7, c[1])
    assert.equals(2 + 16 * 4, c[2]) -- 0.75 -> 1 (code 2); 2.5 -> 2 (code 4)
    assert.equals(8, c[3] % 16)      -- -0.1 -> -0: rne keeps the sign
    local s = scales:to_table()[1]
    assert.equals(127, s % 256)      -- group 0: amax 6 -> e = 0
    codes = formats.quantize(ctx, "mxfp4", "ties_down", "k", x)
    c = codes:to_table()
    assert.equals(7, c[1])
    assert.equals(1 + 16 * 4, c[2]) -- 0.75 -> 0.5 (code 1): ties go down
    assert.equals(0, c[3] % 16)      -- a zero code drops the sign
  end)

  it("keeps leading dims and round-trips within the format's step (seed " .. seed .. ")", function()
    for _, fmt in ipairs({ "mxfp4", "mxfp8", "fp8" }) do
      local x = ctx:tensor("f32", { 2, 3, 128 })
      local v = {}
      for i = 1, 2 * 3 * 128 do v[i] = normal() end
      x:from_table(v)
      local codes, scales = formats.quantize(ctx, fmt, "rne", "k", x)
      assert.are.same({ 2, 3, formats.value_bytes(fmt) }, codes:shape())
      assert.are.same({ 2, 3 }, scales:shape())
      local y = formats.dequantize(ctx, fmt, "k", codes, scales):to_table()
      local worst = 0
      for vec = 0, 5 do
        local amax = 0
        for d = 1, 128 do amax = math.max(amax, math.abs(v[vec * 128 + d])) end
        for d = 1, 128 do worst = math.max(worst,
          math.abs(y[vec * 128 + d] - v[vec * 128 + d]) / amax) end
      end
      local bound = fmt == "mxfp4" and 1 / 3 or 1 / 16
      assert.is_true(worst <= bound,
        ("%s: worst error %.4f of amax (seed %d)"):format(fmt, worst, seed))
    end
  end)

  it("folds the fp8 Q scale into both weights", function()
    local x = ctx:tensor("f32", { 2, 4, 128 })
    local v = {}
    for i = 1, 2 * 4 * 128 do v[i] = normal() * 3 end
    x:from_table(v)
    local _, qs = formats.quantize(ctx, "fp8", "rne", "q", x)
    local w = ctx:tensor("f32", { 2, 4 }):from_table({ 1, -2, 0.5, 3, 0.25, 1.5, -1, 2 })
    local dense, sparse = formats.prepare_weights(ctx, "fp8", w, qs)
    local d, s, q, wt = dense:to_table(), sparse:to_table(), qs:to_table(), w:to_table()
    for i = 1, 8 do
      assert.equals(wt[i] * q[i], d[i]) -- q is a power of two: exact
      assert.equals(sparse:dtype(), "bf16")
      assert.is_true(math.abs(s[i] - d[i]) <= math.abs(d[i]) * 2 ^ -8)
    end
    local ok, err = pcall(formats.prepare_weights, ctx, "mxfp4", w, qs)
    assert.is_false(ok)
    assert.matches("q_scales: must be NULL for mxfp4", err)
  end)

  it("writes pages through a padded stride", function()
    local N, P = 40, 16
    local x = ctx:tensor("f32", { N, 128 })
    local v = {}
    for i = 1, N * 128 do v[i] = normal() end
    x:from_table(v)
    local codes, scales = formats.quantize(ctx, "mxfp4", "rne", "k", x)
    local stride = formats.page_stride("mxfp4", P) + 512
    local pages = ctx:tensor("u8", { 4, stride }):fill_bytes(0)
    local ids = ctx:tensor("i32", { 2 }):from_table({ 3, 1 })
    formats.write_pages(ctx, "mxfp4", codes, scales, 5, 20, pages, P, ids)
    local pg, c, s = pages:to_table(), codes:to_table(), scales:to_table()
    for p = 0, 19 do
      local page = p < P and 3 or 1
      local base = page * stride + (p % P) * 64
      for b = 0, 63 do
        assert.equals(c[(5 + p) * 64 + b + 1], pg[base + b + 1],
          ("position %d byte %d"):format(p, b))
      end
      local sb = page * stride + P * 64 + (p % P) * 4
      local want = s[5 + p + 1] % 2 ^ 32
      local got = pg[sb + 1] + 256 * (pg[sb + 2] + 256 * (pg[sb + 3] + 256 * pg[sb + 4]))
      assert.equals(want, got)
    end
    for b = 1, stride do assert.equals(0, pg[b]) end -- page 0 untouched
  end)

  it("raises errors that name the problem, at the caller's line", function()
    local x = ctx:tensor("f32", { 2, 127 })
    local ok, err = pcall(function() local r = formats.quantize(ctx, "mxfp4", "rne", "k",
      x); return r end)
    assert.is_false(ok)
    assert.matches("formats_spec.lua:%d+: idxlab: formats.quantize: x has shape {2, 127}: the "
      .. "last dim must be 128", err)
    ok, err = pcall(function() local r = formats.quantize(ctx, "mxfp4", "nearest", "k",
      x); return r end)
    assert.is_false(ok)
    assert.matches("quantizer = nearest: must be one of rne, ties_down", err)
    ok, err = pcall(function() local r = formats.quantize(ctx, "mxfp4", "rne", "v",
      x); return r end)
    assert.is_false(ok)
    assert.matches("role = v: must be one of q, k", err)
    ok, err = pcall(function() local r = formats.quantize(ctx, "mxfp4", "rne", "k",
      { 1, 2 }); return r end)
    assert.is_false(ok)
    assert.matches("formats.quantize: x must be a Tensor, got table", err)
    local xi = ctx:tensor("i32", { 2, 128 })
    ok, err = pcall(function() local r = formats.quantize(ctx, "mxfp4", "rne", "k",
      xi); return r end)
    assert.is_false(ok)
    assert.matches("formats_spec.lua:%d+: idxlab: x: dtype i32, expected f32, bf16 or f16", err)
    local codes = ctx:tensor("u8", { 2, 64 })
    local scales = ctx:tensor("f32", { 2 })
    ok, err = pcall(function() local r = formats.dequantize(ctx, "mxfp4", "k", codes,
      scales); return r end)
    assert.is_false(ok)
    assert.matches("scales: dtype f32, expected i32", err)
    ok, err = pcall(function() formats.write_pages(ctx, "mxfp4", codes, scales, -1, 2, codes, 16,
      codes) end)
    assert.is_false(ok)
    assert.matches("formats.write_pages: src_start = %-1: must be an integer >= 0", err)
    ok, err = pcall(function() formats.write_pages(ctx, "mxfp4", codes, scales, 0, 2, codes, 0,
      codes) end)
    assert.is_false(ok)
    assert.matches("page_size = 0: must be an integer >= 1", err)
    ok, err = pcall(function() formats.quantize(nil, "mxfp4", "rne", "k", x) end)
    assert.is_false(ok)
    assert.matches("formats.quantize: ctx must be an idxlab context", err)
  end)
end)
