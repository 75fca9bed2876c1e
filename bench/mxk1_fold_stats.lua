-- mxk1_fold_stats.lua -- Question (issue 13, helper mxk1): on quick.lua's K1 data (the GPU
-- scale's prefill request: 4096 rows after 126976 positions, default workload knobs, seed 1),
-- how often would a single-accumulator s8 IGMMA path for MXFP4 K1 have to fall back, i.e. how
-- spread are the four UE8M0 group exponents of each key and each query head?
--
--   bin/idxlab script bench/mxk1_fold_stats.lua [rows=4096] [context=126976] [seed=1]
--
-- Prints, for keys (per position) and query heads (per row and head), the histogram of the
-- spread max_g e_g - min_g e_g, and the share of 64-key tiles whose every key has spread <= w.
local M = { name = "mxk1_fold_stats" }

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
    local hist, lo_hist, tiles, tile_ok = {}, {}, 0, {}
    local bad_in_tile = {}
    for w = 0, 8 do tile_ok[w], bad_in_tile[w] = 0, 0 end
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
      lo_hist[mn] = (lo_hist[mn] or 0) + 1
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
    local best, bestG = -1, nil
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
        if ok > best then best, bestG = ok, res[#res] end
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
  workload.free(inputs)
end

M.stats = stats
function M.main(opts) return stats(opts) end
return M
