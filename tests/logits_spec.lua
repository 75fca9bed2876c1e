-- logits_spec: idxlab.logits from Lua: one small end-to-end check of K1 against a float64
-- computation on the dequantized inputs, K2 == K1 and K5 == K1 (bf16 reduction) bit for bit,
-- allocation of outputs, views as arguments, and the error messages.
local idxlab = require("idxlab")
local formats = require("idxlab.formats")
local logits = require("idxlab.logits")

local seed = tonumber(os.getenv("IXL_TEST_SEED") or "") or (os.time() % 1000003)
math.randomseed(seed)
local support = dofile((os.getenv("IDXLAB_ROOT") or ".") .. "/tests/support.lua")
local normal = support.normal

local function random_tensor(ctx, shape, scale)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local v = {}
  for i = 1, n do v[i] = normal() * (scale or 1) end
  return ctx:tensor("f32", shape):from_table(v), v
end

-- One layer's quantized inputs for R rows, H heads, N keys.
local function make_layer(ctx, fmt, R, H, N)
  local q = random_tensor(ctx, { R, H, 128 })
  local k = random_tensor(ctx, { N, 128 })
  local w = random_tensor(ctx, { R, H })
  local qc, qs = formats.quantize(ctx, fmt, "rne", "q", q)
  local kc, ks = formats.quantize(ctx, fmt, "rne", "k", k)
  local wd, wb = formats.prepare_weights(ctx, fmt, w, fmt == "fp8" and qs or nil)
  return {
    qk = { q_codes = qc, q_scales = fmt ~= "fp8" and qs or nil, k_codes = kc, k_scales = ks,
      kv_format = fmt },
    wd = wd, wb = wb,
    qd = formats.dequantize(ctx, fmt, "q", qc, qs):to_table(),
    kd = formats.dequantize(ctx, fmt, "k", kc, ks):to_table(),
  }
end

local function same(a, b) return a == b or (a ~= a and b ~= b) end

describe("logits", function()
  local ctx = idxlab.context{ backend = "cpu", seed = 1 }

  it("K1 matches a float64 computation on the dequantized inputs (seed " .. seed .. ")", function()
    for _, fmt in ipairs({ "mxfp4", "mxfp8", "fp8" }) do
      local R, H, N = 3, 8, 50
      local L = make_layer(ctx, fmt, R, H, N)
      local ks = ctx:tensor("i32", { R }):from_table({ 0, 10, 20 })
      local ke = ctx:tensor("i32", { R }):from_table({ 50, 10, 47 })
      local out = logits.dense(ctx, L.qk, L.wd, ks, ke) -- compressed, clean, fp32
      assert.are.same({ R, 50 }, out:shape())
      assert.equals("f32", out:dtype())
      local o, w = out:to_table(), L.wd:to_table()
      local kst, ket = ks:to_table(), ke:to_table()
      for r = 0, R - 1 do
        for j = 0, 49 do
          local got = o[r * 50 + j + 1]
          local n = kst[r + 1] + j
          if n >= ket[r + 1] then
            assert.equals(-math.huge, got)
          else
            local acc, mag = 0, 0
            for h = 0, H - 1 do
              local dot, dm = 0, 0
              for d = 1, 128 do
                local p = L.qd[(r * H + h) * 128 + d] * L.kd[n * 128 + d]
                dot, dm = dot + p, dm + math.abs(p)
              end
              acc = acc + w[r * H + h + 1] * math.max(dot, 0)
              mag = mag + math.abs(w[r * H + h + 1]) * dm
            end
            assert.is_true(math.abs(got - acc) <= 2e-5 * mag + 1e-30,
              ("%s row %d col %d: %.9g vs %.9g (seed %d)"):format(fmt, r, j, got, acc, seed))
          end
        end
      end
    end
  end)

  it("K2 equals K1, and K5 equals K1 with the bf16 reduction, bit for bit", function()
    local R, H, N, P, sbk = 2, 8, 70, 16, 8
    local L = make_layer(ctx, "mxfp4", R, H, N)
    -- row r pages K rows [start, start + len)
    local starts, lens = { 3, 20 }, { 45, 50 }
    local pages = ctx:tensor("u8", { 8, formats.page_stride("mxfp4", P) })
    local bt = ctx:tensor("i32", { R, 4 }):from_table({ 7, 2, 5, -1, 0, 6, 1, 3 })
    for r = 1, R do
      formats.write_pages(ctx, "mxfp4", L.qk.k_codes, L.qk.k_scales, starts[r], lens[r], pages, P,
        bt:view({ 4 }, (r - 1) * 4))
    end
    local ks = ctx:tensor("i32", { R }):from_table(starts)
    local ke = ctx:tensor("i32", { R }):from_table({ starts[1] + lens[1], starts[2] + lens[2] })
    local cl = ctx:tensor("i32", { R }):from_table(lens)
    local pqk = { q_codes = L.qk.q_codes, q_scales = L.qk.q_scales, k_pages = pages, page_size = P,
      kv_format = "mxfp4" }
    for _, red in ipairs({ "fp32", "bf16" }) do
      local w = red == "fp32" and L.wd or L.wb
      local a = logits.dense(ctx, L.qk, w, ks, ke, { reduction = red, max_len = 50 }):to_table()
      local out = ctx:tensor(red == "fp32" and "f32" or "bf16", { R, 50 })
      local b = logits.dense_paged(ctx, pqk, w, cl, bt, { reduction = red, out = out }):to_table()
      for i = 1, #a do assert.is_true(same(a[i], b[i]),
        ("%s element %d: %s vs %s"):format(red, i, a[i], b[i])) end
    end
    -- K5 over the ragged rows: blocks 1 and 5 of row 0, blocks 0, 2 and 6 (past the end) of row 1
    local ids = ctx:tensor("i32", { R, 3 }):from_table({ 1 + 0, 5 + 0, 5 + 0, 0 + 2, 2 + 2, 6 + 2 })
    local full = logits.dense(ctx, L.qk, L.wb, ks, ke,
      { layout = "full", reduction = "bf16" }):to_table()
    local s = logits.sparse(ctx, L.qk, L.wb, ks, ke, nil, ids, sbk, "unaligned")
    assert.are.same({ R, 3 * sbk }, s:shape())
    local sv, idv = s:to_table(), ids:to_table()
    local nvalid = { 2, 3 }
    for r = 0, R - 1 do
      for c = 0, 3 * sbk - 1 do
        local j = math.floor(c / sbk)
        local krow = idv[r * 3 + j + 1] * sbk + starts[r + 1] % sbk + c % sbk
        local want = -math.huge
        if j < nvalid[r + 1] and krow < starts[r + 1] + lens[r + 1] then
          want = full[r * N + krow + 1]
        end
        assert.is_true(same(want, sv[r * 3 * sbk + c + 1]),
          ("row %d col %d: %s vs %s"):format(r, c, want, sv[r * 3 * sbk + c + 1]))
      end
    end
    -- the paged K5 reads the same positions (ks = 0): blocks 0 and 5 of row 0
    local pids = ctx:tensor("i32", { R, 3 }):from_table({ 0, 5, 5, 6, 6, 6 })
    local ps = logits.sparse(ctx, pqk, L.wb, nil, cl, bt, pids, sbk, nil):to_table()
    local dp = logits.dense_paged(ctx, pqk, L.wb, cl, bt, { reduction = "bf16" }):to_table()
    for c = 0, 3 * sbk - 1 do
      local j = math.floor(c / sbk)
      local pos = ({ 0, 5 })[j + 1]
      local want = j < 2 and dp[pos * sbk + c % sbk + 1] or -math.huge
      assert.is_true(same(want, ps[c + 1]), ("paged col %d"):format(c))
    end
    -- row 1 lists block 6 only: positions 48..55, of which 48 and 49 are < 50
    for c = 0, 3 * sbk - 1 do
      local want = (c < 2) and dp[50 + 48 + c + 1] or -math.huge
      assert.is_true(same(want, ps[3 * sbk + c + 1]), ("paged row 1 col %d"):format(c))
    end
  end)

  it("raises errors that name the problem, at the caller's line", function()
    local L = make_layer(ctx, "mxfp4", 2, 4, 16)
    local ks = ctx:tensor("i32", { 2 }):from_table({ 0, 0 })
    local ke = ctx:tensor("i32", { 2 }):from_table({ 16, 17 })
    local ok, err = pcall(function() local r = logits.dense(ctx, L.qk, L.wd, ks, ke); return r end)
    assert.is_false(ok)
    assert.matches("logits_spec.lua:%d+: idxlab: ke%[1%] = 17: must be <= N %(16%), the rows of "
      .. "k_codes", err)
    ke:from_table({ 16, 16 })
    ok, err = pcall(function() local r = logits.dense(ctx, L.qk, L.wd, ks, ke,
      { layout = "dense" }); return r end)
    assert.is_false(ok)
    assert.matches("logits_spec.lua:%d+: idxlab: logits.dense: layout = dense: must be one of "
      .. "full, compressed", err)
    ok, err = pcall(function() local r = logits.dense(ctx, L.qk, L.wd, ks, ke,
      { colour = 1 }); return r end)
    assert.is_false(ok)
    assert.matches("logits.dense: option colour: unknown %(block_scores, clean, layout, max_len, "
      .. "out, reduction%)", err)
    ok, err = pcall(function() local r = logits.dense(ctx, L.qk, L.wd, ks, ke,
      { reduction = "bf16" }); return r end)
    assert.is_false(ok)
    assert.matches("weights: dtype f32, expected bf16 for the bf16 reduction", err)
    ok, err = pcall(function() local r = logits.dense(ctx, L.qk, L.wd, ks, ke,
      { clean = "yes" }); return r end)
    assert.is_false(ok)
    assert.matches("logits.dense: clean = yes: must be a boolean", err)
    ok, err = pcall(function() local r = logits.dense(ctx, { q_codes = L.qk.q_codes, colour = 1 },
      L.wd, ks, ke); return r end)
    assert.is_false(ok)
    assert.matches("logits.dense: qk.colour: unknown field", err)
    ok, err = pcall(function() local r = logits.dense(ctx, { kv_format = "mxfp4" }, L.wd, ks,
      ke); return r end)
    assert.is_false(ok)
    assert.matches("logits.dense: qk.q_codes is required", err)
    ok, err = pcall(function() local r = logits.dense(ctx, "qk", L.wd, ks, ke); return r end)
    assert.is_false(ok)
    assert.matches("logits.dense: qk must be a table, got string", err)
    ok, err = pcall(function() local r = logits.dense(ctx, L.qk, { 1 }, ks, ke); return r end)
    assert.is_false(ok)
    assert.matches("logits.dense: weights must be a Tensor, got table", err)
    local pqk = { q_codes = L.qk.q_codes, q_scales = L.qk.q_scales,
      k_pages = ctx:tensor("u8", { 2, 1536 }),
      kv_format = "mxfp4" }
    ok, err = pcall(function() local r = logits.dense_paged(ctx, pqk, L.wd, ks, ks); return r end)
    assert.is_false(ok)
    assert.matches("logits.dense_paged: qk.page_size = nil: must be a positive integer with "
      .. "k_pages", err)
    ok, err = pcall(function() local r = logits.sparse(ctx, L.qk, L.wb, ks, ke, nil, ks, 8.5,
      "aligned"); return r end)
    assert.is_false(ok)
    assert.matches("logits.sparse: sparse_block_kv = 8.5: must be an integer", err)
    local ids = ctx:tensor("i32", { 2, 2 }):from_table({ 0, 1, 0, 1 })
    ok, err = pcall(function() local r = logits.sparse(ctx, L.qk, L.wb, ks, ke, nil, ids, 8,
      "diagonal"); return r end)
    assert.is_false(ok)
    assert.matches("logits.sparse: ks_mode = diagonal: must be one of unaligned, aligned", err)
    ok, err = pcall(function() local r = logits.sparse(ctx, L.qk, L.wb, ks, ke, nil, ids, 6,
      "aligned"); return r end)
    assert.is_false(ok)
    assert.matches("logits_spec.lua:%d+: idxlab: sparse_block_kv = 6: must be a power of two in "
      .. "%[4, 128%]", err)
    local L8 = make_layer(ctx, "fp8", 2, 4, 16)
    local bad = { q_codes = L8.qk.q_codes, q_scales = L8.wd, k_codes = L8.qk.k_codes,
      k_scales = L8.qk.k_scales,
      kv_format = "fp8" }
    ok, err = pcall(function() local r = logits.dense(ctx, bad, L8.wd, ks, ke); return r end)
    assert.is_false(ok)
    assert.matches("q_scales: must be NULL for fp8", err)
  end)
end)
