-- mxk1_fold_stats.lua -- Question (issue 13, helper mxk1): on quick.lua's K1 data (the GPU
-- scale's prefill request: 4096 rows after 126976 positions, default workload knobs, seed 1),
-- how often would a single-accumulator s8 IGMMA path for MXFP4 K1 have to fall back, i.e. how
-- spread are the four UE8M0 group exponents of each key and each query head?
--
--   bin/idxlab script bench/mxk1_fold_stats.lua [rows=4096] [context=126976] [seed=1] [kwin=3]
--
-- Prints, for keys (per position) and query heads (per row and head), the histogram of the
-- spread max_g e_g - min_g e_g, and the share of 64-key tiles whose every key has spread <= w.
local M = { name = "mxk1_fold_stats" }

-- The kernel's per-chunk group offsets (logits_v2_mxk1_sm90.cu, kS8): G[g] = 1 (g = 1..4)
-- where most of the chunk's first 64 keys (from c0, of n) have byte g of their scale word kp[i]
-- 2 or more above the word's smallest byte, else 0. bench/mxk1_ovf_stats.lua uses it too.
function M.chunk_offsets(kp, c0, n)
  local cnt, ns = { 0, 0, 0, 0 }, math.min(64, n - c0)
  for i = c0, c0 + ns - 1 do
    local v, mn = kp[i], 255
    for g = 0, 3 do mn = math.min(mn, bit.band(bit.rshift(v, 8 * g), 0xFF)) end
    for g = 0, 3 do
      if bit.band(bit.rshift(v, 8 * g), 0xFF) - mn >= 2 then cnt[g + 1] = cnt[g + 1] + 1 end
    end
  end
  local G = {}
  for g = 1, 4 do G[g] = 2 * cnt[g] > ns and 1 or 0 end
  return G
end

local function stats(opts)
  opts = opts or {}
  local idxlab = require("idxlab")
  local formats = require("idxlab.formats")
  local workload = require("idxlab.workload")
  local ffi = require("ffi")
  local rows, context = opts.rows or 4096, opts.context or 126976
  local ctx = idxlab.context{ backend = "cpu", seed = opts.seed or 1, threads = 2 }
  local log = opts.log or print
  local inputs = workload.generate(ctx, {
    prefill = { { query_len = rows, context_len = context } }, consumer_layers = 1,
  }, { heads = 32, head_dim = 128 }, opts.seed or 1)
  local function spread_hist(x, name, tile)
    local _, sc = formats.quantize(ctx, "mxfp4", "rne", name, x)
    local n = sc:numel()
    local p = ffi.cast("const uint32_t *", sc:ptr())
    local hist, tiles, tile_ok = {}, 0, {}
    for w = 0, 8 do tile_ok[w] = 0 end
    local tile_max = 0
    for i = 0, n - 1 do
      local v = p[i]
      local mx, mn = 0, 255
      for g = 0, 3 do
        local b = bit.band(bit.rshift(v, 8 * g), 0xFF)
        if b > mx then mx = b end
        if b < mn then mn = b end
      end
      local s = mx - mn
      hist[s] = (hist[s] or 0) + 1
      if tile then
        if s > tile_max then tile_max = s end
        if i % tile == tile - 1 or i == n - 1 then
          tiles = tiles + 1
          for w = 0, 8 do if tile_max <= w then tile_ok[w] = tile_ok[w] + 1 end end
          tile_max = 0
        end
      end
    end
    local line = {}
    for s = 0, 30 do
      if hist[s] then line[#line + 1] = ("%d:%.4f"):format(s, hist[s] / n) end
    end
    log(("%s: %d vectors; spread share %s"):format(name, n, table.concat(line, " ")))
    if tile then
      local t = {}
      for w = 0, 8 do t[#t + 1] = ("<=%d:%.4f"):format(w, tile_ok[w] / tiles) end
      log(("%s: %d tiles of %d; tiles with every spread %s"):format(name, tiles, tile,
        table.concat(t, " ")))
    end
    sc:free()
  end
  spread_hist(inputs.k, "k", 64)
  -- keys against per-group offsets G (g = 0..3, each 0..3, one of them 0): the residuals
  -- e_g - G_g of every key within a window of 3 (the s8 budget), with the query side taking
  -- +G_g (a query head of spread s needs s + max G <= 3)
  do
    local _, sc = formats.quantize(ctx, "mxfp4", "rne", "k", inputs.k)
    local n = sc:numel()
    local p = ffi.cast("const uint32_t *", sc:ptr())
    local res = {}
    for G = 0, 255 do
      local Gv = { bit.band(G, 3), bit.band(bit.rshift(G, 2), 3), bit.band(bit.rshift(G, 4), 3),
        bit.band(bit.rshift(G, 6), 3) }
      if math.min(Gv[1], Gv[2], Gv[3], Gv[4]) == 0 then
        local ok, tiles, tok, tbad = 0, 0, 0, false
        for i = 0, n - 1 do
          local v = p[i]
          local mx, mn = -99, 999
          for g = 0, 3 do
            local b = bit.band(bit.rshift(v, 8 * g), 0xFF) - Gv[g + 1]
            if b > mx then mx = b end
            if b < mn then mn = b end
          end
          if mx - mn <= (opts.kwin or 3) then ok = ok + 1 else tbad = true end
          if i % 64 == 63 then
            tiles = tiles + 1
            if not tbad then tok = tok + 1 end
            tbad = false
          end
        end
        res[#res + 1] = { G = table.concat(Gv, ","), key = ok / n, tile = tok / tiles,
          gmax = math.max(Gv[1], Gv[2], Gv[3], Gv[4]) }
      end
    end
    table.sort(res, function(a, b) return a.key > b.key end)
    for j = 1, 6 do
      log(("k offsets G=%s (max %d): keys in window %.5f, 64-key tiles %.4f"):format(res[j].G,
        res[j].gmax, res[j].key, res[j].tile))
    end
    sc:free()
  end
  spread_hist(inputs.q, "q", 32) -- a "tile" of 32 = one row's heads
  -- the kernel's rule (logits_v2_mxk1_sm90.cu, WS=s): per chunk of 4096 keys (a CTA's; the
  -- causal rows' hull starts at the chunk's first key), G_g = 1 where most of its first 64 keys
  -- have e_g >= 2 above their smallest; a 64-key tile takes the s8 path when each of its keys
  -- folds (e_g - G_g within 4, bytes in 127 +- 25) and each of the CTA's 128 heads does
  -- (qe_g - qmin + G_g <= 3)
  do
    local _, ksc = formats.quantize(ctx, "mxfp4", "rne", "k", inputs.k)
    local _, qsc = formats.quantize(ctx, "mxfp4", "rne", "q", inputs.q)
    local kp = ffi.cast("const uint32_t *", ksc:ptr())
    local qp = ffi.cast("const uint32_t *", qsc:ptr())
    local n, nq = ksc:numel(), qsc:numel()
    local function byte(v, g) return bit.band(bit.rshift(v, 8 * g), 0xFF) end
    local tiles, fast, head_ok, heads = 0, 0, 0, 0
    local gsum = { 0, 0, 0, 0 }
    local chunks = 0
    local Gs = {}
    for c0 = 0, n - 1, 4096 do
      chunks = chunks + 1
      local G = M.chunk_offsets(kp, c0, n)
      for g = 1, 4 do gsum[g] = gsum[g] + G[g] end
      Gs[#Gs + 1] = G
      for t0 = c0, math.min(c0 + 4096, n) - 1, 64 do
        local ok = true
        for i = t0, math.min(t0 + 64, n) - 1 do
          local v, lo, hi, inw = kp[i], 999, -999, true
          for g = 0, 3 do
            local b = byte(v, g)
            if b < 102 or b > 152 then inw = false end
            lo, hi = math.min(lo, b - G[g + 1]), math.max(hi, b - G[g + 1])
          end
          if not inw or hi - lo > 4 then ok = false; break end
        end
        tiles = tiles + 1
        if ok then fast = fast + 1 end
      end
    end
    -- heads against the first chunk's G (every chunk's G printed as a share)
    local G = Gs[1]
    for i = 0, nq - 1 do
      local v, lo, ok = qp[i], 255, true
      for g = 0, 3 do lo = math.min(lo, byte(v, g)) end
      for g = 0, 3 do if byte(v, g) - lo + G[g + 1] > 3 then ok = false end end
      heads = heads + 1
      if ok then head_ok = head_ok + 1 end
    end
    log(("kernel rule: %d chunks, G_g = 1 in %d/%d/%d/%d of them; 64-key tiles on the s8 path "
      .. "%.4f; heads folding (first chunk's G %d%d%d%d) %.5f, so CTAs of 128 heads ~%.4f")
      :format(chunks, gsum[1], gsum[2], gsum[3], gsum[4], fast / tiles, G[1], G[2], G[3], G[4],
        head_ok / heads, (head_ok / heads) ^ 128))
    ksc:free(); qsc:free()
  end
  workload.free(inputs)
end

M.stats = stats
function M.main(opts) return stats(opts) end
return M
