-- mxk1_ovf_stats.lua -- Question (issue 13, helper mxk1, session 9): on quick.lua's K1 data
-- (the GPU scale's prefill request: 4096 rows after 126976 positions, seed 1), of the 64-key
-- tiles the 8-row s8 kernel (WS=z) runs on the s8 path, how many of their 4 groups need the
-- overflow IGMMA (some slot with a_g = 4 after the CTA's offsets G)? That is the tensor work
-- kVarOvfMask would skip (4 main + one per such group, instead of 8).
--
--   bin/idxlab script bench/mxk1_ovf_stats.lua [rows=4096] [context=126976] [seed=1] [chunk=8192]
local M = { name = "mxk1_ovf_stats" }
-- the kernel's per-chunk offsets G, as bench/mxk1_fold_stats.lua computes them
local fold_stats = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/mxk1_fold_stats.lua")

local function stats(opts)
  opts = opts or {}
  local idxlab = require("idxlab")
  local formats = require("idxlab.formats")
  local workload = require("idxlab.workload")
  local ffi = require("ffi")
  local rows, context = opts.rows or 4096, opts.context or 126976
  local chunk = opts.chunk or 8192
  local ctx = idxlab.context{ backend = "cpu", seed = opts.seed or 1, threads = 2 }
  local log = opts.log or print
  local inputs = workload.generate(ctx, {
    prefill = { { query_len = rows, context_len = context } }, consumer_layers = 1,
  }, { heads = 32, head_dim = 128 }, opts.seed or 1)
  local _, ksc = formats.quantize(ctx, "mxfp4", "rne", "k", inputs.k)
  local kp = ffi.cast("const uint32_t *", ksc:ptr())
  local n = ksc:numel()
  local function byte(v, g) return bit.band(bit.rshift(v, 8 * g), 0xFF) end
  local tiles, fold, hist = 0, 0, { [0] = 0, 0, 0, 0, 0 }
  local per_group = { 0, 0, 0, 0 }
  -- the kernel's rule (logits_v2_mxk1_sm90.cu, kS8): per chunk (a CTA's hull starts at the
  -- chunk's first key in causal prefill), G_g = 1 where most of its first 64 keys have e_g >= 2
  -- above their smallest; a tile folds when each key's bytes are in 127 +- 25 and its e_g - G_g
  -- lie within 4; then a_g = e_g - G_g - min, and a_g = 4 needs group g's overflow IGMMA
  for c0 = 0, n - 1, chunk do
    local G = fold_stats.chunk_offsets(kp, c0, n)
    for t0 = c0, math.min(c0 + chunk, n) - 1, 64 do
      local ok, need = true, { false, false, false, false }
      for i = t0, math.min(t0 + 64, n) - 1 do
        local v, lo, hi, inw, e = kp[i], 999, -999, true, {}
        for g = 0, 3 do
          local b = byte(v, g)
          if b < 102 or b > 152 then inw = false end
          e[g + 1] = b - G[g + 1]
          lo, hi = math.min(lo, e[g + 1]), math.max(hi, e[g + 1])
        end
        if not inw or hi - lo > 4 then ok = false; break end
        for g = 1, 4 do if e[g] - lo == 4 then need[g] = true end end
      end
      tiles = tiles + 1
      if ok then
        fold = fold + 1
        local c = 0
        for g = 1, 4 do if need[g] then c = c + 1; per_group[g] = per_group[g] + 1 end end
        hist[c] = hist[c] + 1
      end
    end
  end
  local h = {}
  local mean = 0
  for c = 0, 4 do
    h[#h + 1] = ("%d:%.4f"):format(c, hist[c] / math.max(fold, 1))
    mean = mean + c * hist[c] / math.max(fold, 1)
  end
  log(("chunk %d: %d tiles, %.4f on the s8 path; of those, groups needing the overflow IGMMA %s"
    .. " (mean %.3f, so %.3f IGMMA a tile instead of 8); per group %.4f %.4f %.4f %.4f")
    :format(chunk, tiles, fold / tiles, table.concat(h, " "), mean, 4 + mean,
      per_group[1] / math.max(fold, 1), per_group[2] / math.max(fold, 1),
      per_group[3] / math.max(fold, 1), per_group[4] / math.max(fold, 1)))
  ksc:free()
  workload.free(inputs)
end

M.stats = stats
function M.main(opts) return stats(opts) end
return M
