-- select_spec: the selection kernels from Lua (idxlab.select): SPEC 3's exact K4 vectors,
-- K3/K6 against plain Lua references on seeded random inputs (ties, NaNs, infinities), K7 and
-- the candidate mask, argument errors at the caller's line, and (#gpu) the device kernels
-- against the CPU reference.
local idxlab = require("idxlab")
local sel = require("idxlab.select")

local NAN, INF = 0 / 0, math.huge

local function i32(ctx, shape, values, device)
  local t = ctx:tensor("i32", shape, device or "host")
  return t:from_table(values)
end

-- (value descending, column ascending), NaN above everything, -0 == +0.
local function before(a, b)
  local an, bn = a.v ~= a.v, b.v ~= b.v
  if an ~= bn then return an end
  if not an and a.v ~= b.v then return a.v > b.v end
  return a.col < b.col
end

local function ref_topk(vals, r, C, s, e, k, sorted)
  local items = {}
  for j = s, e - 1 do items[#items + 1] = { v = vals[r * C + j + 1], col = j - s } end
  table.sort(items, before)
  local out = {}
  for i = 1, math.min(k, #items) do out[i] = items[i].col end
  if not sorted then table.sort(out) end
  for i = #out + 1, k do out[i] = -1 end
  return out
end

local function tricky(ties)
  local kind = math.random(0, 99)
  if kind < 2 then return NAN end
  if kind < 4 then return kind == 2 and INF or -INF end
  if kind < 7 then return kind == 4 and 0.0 or -0.0 end
  if ties then return math.random(-8, 8) * 0.25 end
  return math.random() * 20 - 10
end

local function row_slice(t, r, width)
  local out = {}
  for j = 1, width do out[j] = t[r * width + j] end
  return out
end

describe("K4 expansion (sel.expand)", function()
  local ctx = idxlab.context{ backend = "cpu", seed = 1 }

  local function one(T, cand, ks, ke, cbs, sbk)
    local ids, end_ = sel.expand(ctx, i32(ctx, { 1, T }, cand), i32(ctx, { 1 }, { ks }),
      i32(ctx, { 1 }, { ke }), cbs, sbk)
    return ids:to_table(), end_:to_table()[1]
  end

  it("gives SPEC 3's four exact vectors", function()
    local ids, e = one(4, { 0, -1, -1, -1 }, 64, 72, 8, 8)
    assert.are.same({ 8, 8, 8, 8 }, ids); assert.equals(8, e)
    ids, e = one(4, { 2, 0, -1, -1 }, 13, 30, 8, 8)
    assert.are.same({ 1, 3, 3, 3 }, ids); assert.equals(9, e)
    ids, e = one(4, { 0, 1, 2, 3 }, 100, 100, 8, 8)
    assert.are.same({ 12, 12, 12, 12 }, ids); assert.equals(0, e)
    ids, e = one(2, { 1, 0 }, 0, 48, 16, 8)
    assert.are.same({ 0, 1, 2, 3 }, ids); assert.equals(32, e)
  end)

  it("keeps ids unique and increasing for duplicate and garbage candidates (paged rows)", function()
    local ids, end_ = sel.expand(ctx, i32(ctx, { 2, 6 }, { 3, 3, -1, 2147483647, -5, 0,
      1, 1, 1, 1, 1, 1 }), nil, i32(ctx, { 2 }, { 30, 9 }), 8, 4)
    assert.are.same({ 0, 1, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2 },
      ids:to_table())
    assert.are.same({ 14, 1 }, end_:to_table())
  end)

  it("refuses an unaligned ks in aligned mode, naming the row and its ks", function()
    local ok, err = pcall(sel.expand, ctx, i32(ctx, { 2, 1 }, { 0, 0 }),
      i32(ctx, { 2 }, { 8, 13 }), i32(ctx, { 2 }, { 20, 30 }), 8, 8, "aligned")
    assert.is_false(ok)
    assert.matches("row 1: ks = 13 is not a multiple of sparse_block_kv %(8%)", err)
  end)

  it("reports bad arguments at the caller's line", function()
    local cand, ke = i32(ctx, { 1, 2 }, { 0, 1 }), i32(ctx, { 1 }, { 16 })
    local ok, err = pcall(function() sel.expand(ctx, cand, nil, ke, 12, 8) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: candidate_block_size = 12: must be a multiple "
      .. "of sparse_block_kv %(8%)", err)
    ok, err = pcall(function() sel.expand(ctx, cand, nil, ke, 8, 8, "sideways") end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: ks_mode = sideways: must be one of unaligned, "
      .. "aligned", err)
    ok, err = pcall(function() sel.expand(ctx, cand, nil, ke, 8.5, 8) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: candidate_block_size = 8.5: must be an integer",
      err)
    ok, err = pcall(function() sel.expand(ctx, cand, 7, ke, 8, 8) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: row_ks = 7: must be a tensor or nil", err)
    ok, err = pcall(function() sel.expand(ctx, cand, nil, ke, 8, 6) end)
    assert.is_false(ok)
    assert.matches("sparse_block_kv = 6: must be a power of two", err)
    ok, err = pcall(function() sel.expand({}, cand, nil, ke, 8, 8) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: ctx = .*: must be a live context", err)
  end)
end)

describe("K6 top-k (sel.topk)", function()
  local ctx = idxlab.context{ backend = "cpu", seed = 1, threads = 2 }

  it("matches a sort-based reference on random rows with ties, NaNs and infinities", function()
    for iter = 1, 24 do
      local seed = 700 + iter
      math.randomseed(seed)
      local R, C = math.random(1, 6), math.random(0, 600)
      local k = ({ 1, 5, 8, 40, 128 })[iter % 5 + 1]
      local dtype = iter % 2 == 0 and "bf16" or "f32"
      local vals = {}
      for i = 1, R * C do vals[i] = tricky(iter % 3 ~= 0) end
      local logits = ctx:tensor(dtype, { R, C }):from_table(vals)
      vals = logits:to_table() -- the values as stored (bf16-rounded)
      local starts, ends = {}, {}
      for r = 1, R do
        starts[r] = math.random(0, C)
        ends[r] = math.random(starts[r], C)
        if math.random(1, 5) == 1 then ends[r] = starts[r] end
      end
      local use_start = iter % 3 == 0
      if not use_start then for r = 1, R do starts[r] = 0 end end
      local st = use_start and i32(ctx, { R }, starts) or nil
      for _, sorted in ipairs({ false, true }) do
        local got = sel.topk(ctx, logits, st, i32(ctx, { R }, ends), k, sorted):to_table()
        for r = 0, R - 1 do
          local want = ref_topk(vals, r, C, starts[r + 1], ends[r + 1], k, sorted)
          assert.are.same(want, row_slice(got, r, k),
            ("seed %d row %d dtype %s sorted %s"):format(seed, r, dtype, tostring(sorted)))
        end
      end
    end
  end)

  it("writes into a given output and puts NaN above +inf", function()
    local logits = ctx:tensor("f32", { 1, 5 }):from_table({ 1, INF, NAN, -INF, 1 })
    local out = ctx:tensor("i32", { 1, 8 })
    assert.equals(out, sel.topk(ctx, logits, nil, i32(ctx, { 1 }, { 5 }), 8, true, out))
    assert.are.same({ 2, 1, 0, 4, 3, -1, -1, -1 }, out:to_table())
  end)

  it("reports bad arguments at the caller's line", function()
    local logits = ctx:tensor("f32", { 2, 4 }):from_table({ 1, 2, 3, 4, 5, 6, 7, 8 })
    local ok, err = pcall(function() sel.topk(ctx, logits, nil, i32(ctx, { 2 }, { 4, 5 }), 2) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: row_end%[1%] = 5: must be <= C %(4%)", err)
    ok, err = pcall(function() sel.topk(ctx, logits, nil, i32(ctx, { 2 }, { 4, 4 }), 0) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: k = 0: must be in %[1, 4096%]", err)
    ok, err = pcall(function() sel.topk(ctx, logits, nil, i32(ctx, { 2 }, { 4, 4 }), 2, 1) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: sorted = 1: must be true, false or nil", err)
    ok, err = pcall(function() sel.topk(ctx, logits, nil, "ends", 2) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: row_end = ends: must be a tensor", err)
    ok, err = pcall(function()
      sel.topk(ctx, logits, nil, i32(ctx, { 2 }, { 4, 4 }), 2, false, ctx:tensor("i32", { 2, 3 }))
    end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: out: shape%[1%] = 3, expected k %(2%)", err)
  end)
end)

describe("K3 candidate selection (sel.candidates)", function()
  local ctx = idxlab.context{ backend = "cpu", seed = 1 }

  local function ref_candidates(vals, r, C, len, cbs, T)
    local blocks, nb = {}, math.ceil(len / cbs)
    for b = 0, nb - 1 do
      local m = -INF
      for j = b * cbs, math.min((b + 1) * cbs, len) - 1 do
        local x = vals[r * C + j + 1]
        if x ~= x then m = NAN break end
        if x > m then m = x end
      end
      if b == nb - 1 and m == m then m = INF end
      blocks[#blocks + 1] = { v = m, col = b }
    end
    table.sort(blocks, before)
    local out = {}
    for i = 1, T do out[i] = blocks[i] and blocks[i].col or -1 end
    return out
  end

  it("matches a sort-based reference for block_score max", function()
    for iter = 1, 16 do
      local seed = 900 + iter
      math.randomseed(seed)
      local R, C, cbs, T = math.random(1, 5), math.random(0, 700), ({ 1, 4, 8, 16 })[iter % 4 + 1],
        math.random(1, 40)
      local vals = {}
      for i = 1, R * C do vals[i] = tricky(iter % 2 == 0) end
      local logits = ctx:tensor("f32", { R, C }):from_table(vals)
      vals = logits:to_table()
      local lens = {}
      for r = 1, R do lens[r] = math.random(0, C) end
      local got = sel.candidates(ctx, logits, i32(ctx, { R }, lens), cbs, T):to_table()
      for r = 0, R - 1 do
        assert.are.same(ref_candidates(vals, r, C, lens[r + 1], cbs, T), row_slice(got, r, T),
          ("seed %d row %d cbs %d T %d"):format(seed, r, cbs, T))
      end
    end
  end)

  it("takes every block_score and refuses unknown ones at the caller's line", function()
    local logits = ctx:tensor("f32",
      { 1, 12 }):from_table({ 5, 5, 5, 5, 6, -INF, -INF, -INF, 0, 0, 0, 0 })
    local lens = i32(ctx, { 1 }, { 12 })
    assert.are.same({ 2, 1, 0 }, sel.candidates(ctx, logits, lens, 4, 3, "max"):to_table())
    assert.are.same({ 2, 0, 1 }, sel.candidates(ctx, logits, lens, 4, 3, "logsumexp"):to_table())
    assert.are.same({ 2, 0, 1 }, sel.candidates(ctx, logits, lens, 4, 3, "mean"):to_table())
    assert.are.same({ 2, 0, 1 }, sel.candidates(ctx, logits, lens, 4, 3, "sum"):to_table())
    local ok, err = pcall(function() sel.candidates(ctx, logits, lens, 4, 3, "median") end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: block_score = median: must be one of max, "
      .. "mean, sum, logsumexp", err)
    ok, err = pcall(function() sel.candidates(ctx, logits, lens, 4) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: candidate_topk_blocks = nil: must be an integer",
      err)
    ok, err = pcall(function() sel.candidates(ctx, logits, i32(ctx, { 1 }, { 13 }), 4, 3) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: lens%[0%] = 13: must be in %[0, C%]", err)
    ok, err = pcall(function() sel.candidates(ctx, logits, lens, 4, 3, nil,
      ctx:tensor("i32", { 1, 2 })) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: out has shape {1, 2}: expected {R, 3}", err)
  end)
end)

-- Issue 19: rows of length 0 (a decode row of 0 positions) through K3, K4 (paged: ks = 0),
-- K6 over [0, end) and K7 on ctx's device: the empty rows give no candidate, ids of ks / sbk
-- = 0, end 0 and -1 top-k; returns every output as tables for a comparison across backends.
local function empty_rows_chain(ctx, device)
  local R, C, cbs, sbk, T, k = 4, 300, 16, 8, 8, 16
  local vals = {}
  for i = 1, R * C do vals[i] = ((i * 7919) % 1000) / 7 end
  local logits = ctx:tensor("f32", { R, C }, device):from_table(vals)
  local lens = i32(ctx, { R }, { 0, 37, 0, 300 }, device)
  local cand = sel.candidates(ctx, logits, lens, cbs, T)
  local ids, end_ = sel.expand(ctx, cand, nil, lens, cbs, sbk, "aligned")
  local nsb = T * cbs / sbk
  local sparse = ctx:tensor("f32", { R, nsb * sbk }, device):from_table((function()
    local t = {}
    for i = 1, R * nsb * sbk do t[i] = (i * 31) % 97 end
    return t
  end)())
  local cols = sel.topk(ctx, sparse, nil, end_, k, false)
  local out = { cand = cand:to_table(), ids = ids:to_table(), ["end"] = end_:to_table(),
    pos = sel.remap(ctx, cols, ids, nil, sbk):to_table(),
    dense = sel.topk(ctx, logits, nil, lens, k, true):to_table() }
  for _, r in ipairs({ 0, 2 }) do
    assert.equals(0, out["end"][r + 1])
    for j = 1, T do assert.equals(-1, out.cand[r * T + j]) end
    for j = 1, nsb do assert.equals(0, out.ids[r * nsb + j]) end
    for j = 1, k do
      assert.equals(-1, out.pos[r * k + j])
      assert.equals(-1, out.dense[r * k + j])
    end
  end
  assert.equals(2, out.cand[T + 1]) -- row 1's newest block, (37 - 1) / 16, comes first
  assert.equals(37, out["end"][2])
  return out
end

describe("K7 remap and the candidate mask", function()
  local ctx = idxlab.context{ backend = "cpu", seed = 1 }

  it("maps sparse columns to request-local positions, in place too", function()
    local ids, ks = i32(ctx, { 1, 4 }, { 1, 3, 3, 3 }), i32(ctx, { 1 }, { 13 })
    local cols = i32(ctx, { 1, 4 }, { 9, 0, -1, 7 })
    assert.are.same({ 17, 0, -1, 7 }, sel.remap(ctx, cols, ids, ks, 8):to_table())
    assert.equals(cols, sel.remap(ctx, cols, ids, nil, 8, cols))
    assert.are.same({ 25, 8, -1, 15 }, cols:to_table())
    local ok, err = pcall(function() sel.remap(ctx, i32(ctx, { 1, 1 }, { 32 }), ids, ks, 8) end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: cols%[0%]%[0%] = 32: must be < num_sparse_blocks",
      err)
  end)

  it("masks everything outside the candidate blocks and the row", function()
    local logits = ctx:tensor("bf16", { 1, 10 }):from_table({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 })
    sel.mask_candidates(ctx, logits, i32(ctx, { 1 }, { 9 }), i32(ctx, { 1, 3 }, { 2, -1, 7 }), 3)
    assert.are.same({ -INF, -INF, -INF, -INF, -INF, -INF, 7, 8, 9, -INF }, logits:to_table())
    local ok, err = pcall(function()
      sel.mask_candidates(ctx, logits, i32(ctx, { 1 }, { 9 }), i32(ctx, { 1, 3 }, { 2, -1, 7 }), 0)
    end)
    assert.is_false(ok)
    assert.matches("select_spec.lua:%d+: idxlab: candidate_block_size = 0: must be >= 1", err)
  end)

  it("keeps rows of length 0 empty through K3, K4, top-k and K7", function()
    empty_rows_chain(ctx, "host")
  end)

  it("chains K3, K4, top-k and K7 into the masked dense selection", function()
    math.randomseed(4242)
    local R, C, cbs, sbk, T, k = 3, 900, 16, 8, 12, 32
    local vals = {}
    for i = 1, R * C do vals[i] = math.random() * 10 - 5 end
    local logits = ctx:tensor("f32", { R, C }):from_table(vals)
    local lens = i32(ctx, { R }, { 900, 150, 191 })
    local cand = sel.candidates(ctx, logits, lens, cbs, T)
    local ids, end_ = sel.expand(ctx, cand, nil, lens, cbs, sbk)
    -- gather the sparse columns (what K5 computes) from the dense logits
    local nsb, idt, ends = T * cbs / sbk, ids:to_table(), end_:to_table()
    local sp = {}
    for r = 0, R - 1 do
      for j = 0, nsb * sbk - 1 do
        local p = idt[r * nsb + math.floor(j / sbk) + 1] * sbk + j % sbk
        sp[#sp + 1] = j < ends[r + 1] and vals[r * C + p + 1] or -INF
      end
    end
    local sparse = ctx:tensor("f32", { R, nsb * sbk }):from_table(sp)
    local pos = sel.remap(ctx, sel.topk(ctx, sparse, nil, end_, k, true), ids, nil, sbk)
    -- K6 and K7 as one op give the same positions, sorted or not
    assert.are.same(pos:to_table(),
      sel.topk_remap(ctx, sparse, nil, end_, k, true, ids, nil, sbk):to_table())
    assert.are.same(sel.remap(ctx, sel.topk(ctx, sparse, nil, end_, k), ids, nil, sbk):to_table(),
      sel.topk_remap(ctx, sparse, nil, end_, k, false, ids, nil, sbk):to_table())
    local ok, err = pcall(function()
      sel.topk_remap(ctx, sparse, nil, end_, k, 1, ids, nil, sbk)
    end)
    assert.is_false(ok)
    assert.matches("sorted = 1: must be true, false or nil", tostring(err))
    sel.mask_candidates(ctx, logits, lens, cand, cbs)
    local dense = sel.topk(ctx, logits, nil, lens, k, true):to_table()
    local lv, got = logits:to_table(), pos:to_table()
    for i = 1, R * k do
      local d = dense[i]
      if d >= 0 and lv[math.floor((i - 1) / k) * C + d + 1] == -INF then d = -1 end
      assert.equals(d, got[i], "seed 4242 slot " .. i)
    end
  end)
end)

describe("the selection kernels on the GPU #gpu", function()
  it("keeps rows of length 0 empty on the GPU, as on the CPU #gpu", function()
    local cpu = idxlab.context{ backend = "cpu", seed = 3 }
    local gpu = idxlab.context{ backend = "cuda", seed = 3 }
    assert.are.same(empty_rows_chain(cpu, "host"), empty_rows_chain(gpu, "device"))
    gpu:free()
  end)

  it("match the CPU reference exactly on random inputs #gpu", function()
    local cpu = idxlab.context{ backend = "cpu", seed = 3 }
    local gpu = idxlab.context{ backend = "cuda", seed = 3 }
    local seed = 31337
    math.randomseed(seed)
    local R, C, cbs, sbk, T, k = 6, 5000, 16, 8, 64, 256
    local vals = {}
    for i = 1, R * C do vals[i] = tricky(true) end
    local lens_v = { 5000, 0, 1, 1024, 1023, 4097 }
    local function both(dtype, shape, values)
      local h = cpu:tensor(dtype, shape, "host"):from_table(values)
      local d = gpu:tensor(dtype, shape, "device"):from_table(values)
      return h, d
    end
    local lh, ld = both("f32", { R, C }, vals)
    local nh, nd = both("i32", { R }, lens_v)
    for _, score in ipairs({ "max", "mean", "sum", "logsumexp" }) do
      local ch = sel.candidates(cpu, lh, nh, cbs, T, score)
      local cd = sel.candidates(gpu, ld, nd, cbs, T, score)
      assert.are.same(ch:to_table(), cd:to_table(), "K3 " .. score .. " seed " .. seed)
      cd:free()
    end
    local ch = sel.candidates(cpu, lh, nh, cbs, T)
    local cd = sel.candidates(gpu, ld, nd, cbs, T)
    local ih, eh = sel.expand(cpu, ch, nil, nh, cbs, sbk)
    local id, ed = sel.expand(gpu, cd, nil, nd, cbs, sbk)
    assert.are.same(ih:to_table(), id:to_table(), "K4 ids")
    assert.are.same(eh:to_table(), ed:to_table(), "K4 end")
    for _, dtype in ipairs({ "f32", "bf16" }) do
      local xh, xd = both(dtype, { R, C }, vals)
      for _, sorted in ipairs({ false, true }) do
        local th = sel.topk(cpu, xh, nil, nh, k, sorted)
        local td = sel.topk(gpu, xd, nil, nd, k, sorted)
        assert.are.same(th:to_table(), td:to_table(), "K6 " .. dtype .. " seed " .. seed)
        -- remap takes sparse columns: a top-k over each row's [0, end) prefix
        local sh = sel.topk(cpu, xh, nil, eh, k, sorted)
        local sd = sel.topk(gpu, xd, nil, ed, k, sorted)
        local ph = sel.remap(cpu, sh, ih, nil, sbk)
        local pd = sel.remap(gpu, sd, id, nil, sbk)
        assert.are.same(ph:to_table(), pd:to_table(), "K7 " .. dtype)
        local fd = sel.topk_remap(gpu, xd, nil, ed, k, sorted, id, nil, sbk)
        assert.are.same(ph:to_table(), fd:to_table(), "K6 + K7 in one op, " .. dtype)
        td:free(); sd:free(); pd:free(); fd:free()
      end
      sel.mask_candidates(cpu, xh, nh, ch, cbs)
      sel.mask_candidates(gpu, xd, nd, cd, cbs)
      -- NaN inside a candidate block stays NaN on both backends; compare it as a value
      local function nan_as_text(t)
        for i, v in ipairs(t) do if v ~= v then t[i] = "NaN" end end
        return t
      end
      assert.are.same(nan_as_text(xh:to_table()), nan_as_text(xd:to_table()), "mask " .. dtype)
      xd:free()
    end
    ld:free(); nd:free(); cd:free(); id:free(); ed:free()
  end)
end)
