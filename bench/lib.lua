-- bench/lib.lua: what the benchmark scripts share. One timing helper, one median (and the C
-- benchmark's order statistics, for bench/logits.lua); and the few named wrappers over the C
-- API (through idxlab.ffi) that a timed loop needs where the Lua API would do per-call work
-- inside the timed region: each wrapper checks and resolves its named arguments once and
-- returns a closure that makes only the C call (it returns the status; ctx:check it). Load it
-- from a script beside it:
--   local lib = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
--     .. "/lib.lua")
local core = require("idxlab.ffi")
local util = require("idxlab.util")
local logits = require("idxlab.logits")
local C = core.C

local M = {}

M.median = util.median
M.minimum = util.minimum

-- Microseconds one call of fn takes between two timer events on ctx (CUDA events on a CUDA
-- context's stream, the monotonic clock on a CPU context).
function M.time_us(ctx, fn)
  ctx:timer_record(0)
  fn()
  ctx:timer_record(1)
  return ctx:timer_elapsed_us(0, 1)
end

-- median, minimum, 90th percentile of a list of times, as bench/bench_logits.c defines them
-- (sorted t, 0-based: t[n / 2], t[0], t[min(n * 9 / 10, n - 1)]), so the Lua and the C
-- benchmark report the same statistic. The list is sorted in place.
function M.order_stats(times)
  table.sort(times)
  local n = #times
  return times[math.floor(n / 2) + 1], times[1], times[math.min(n, math.floor(n * 0.9) + 1)]
end

-- The FMA peak of `threads` CPU threads over about `seconds` (GFLOP/s), or nil when the
-- machine has no AVX2/FMA loop to time.
function M.fma_peak_gflops(threads, seconds)
  local g = C.ixl_bench_fma_peak_gflops(threads, seconds)
  return g > 0 and g or nil
end

-- The bf16 bits of a float (round to nearest even), for filling bf16 tensors by hand.
function M.f32_to_bf16(v) return C.ixl_f32_to_bf16(v) end

-- K1: a closure calling ixl_dense_logits. a = { qk = table as logits.dense takes it, weights,
-- ks, ke, out = Tensors, layout = "full" | "compressed", clean = boolean, reduction = "fp32" |
-- "bf16" }. The tensors must stay alive while the closure is used.
function M.dense_logits(ctx, a)
  local q = logits.qk(a.qk)
  local layout, red = core.enum("layout", a.layout), core.enum("reduction", a.reduction)
  local clean = a.clean and 1 or 0
  local cd, w, ks, ke, out = ctx.cd, a.weights.cd, a.ks.cd, a.ke.cd, a.out.cd
  return function() return C.ixl_dense_logits(cd, q, w, ks, ke, layout, clean, red, out) end
end

-- K2: a closure calling ixl_dense_logits_paged. a = { qk (with k_pages, page_size), weights,
-- context_lens, block_table, out, reduction }.
function M.dense_logits_paged(ctx, a)
  local q = logits.qk(a.qk)
  local red = core.enum("reduction", a.reduction)
  local cd, w, lens, bt, out = ctx.cd, a.weights.cd, a.context_lens.cd, a.block_table.cd,
    a.out.cd
  return function() return C.ixl_dense_logits_paged(cd, q, w, lens, bt, red, out) end
end

-- K5: a closure calling ixl_sparse_logits. a = { qk, weights, row_ks (nil when paged), row_ke,
-- block_table (nil when ragged), sparse_ids, sparse_block_kv, ks_mode, out }.
function M.sparse_logits(ctx, a)
  local q = logits.qk(a.qk)
  local mode = core.enum("ks_mode", a.ks_mode)
  local cd, w, ke, ids, out = ctx.cd, a.weights.cd, a.row_ke.cd, a.sparse_ids.cd, a.out.cd
  local ks = a.row_ks and a.row_ks.cd or nil
  local bt = a.block_table and a.block_table.cd or nil
  local sbk = a.sparse_block_kv
  return function() return C.ixl_sparse_logits(cd, q, w, ks, ke, bt, ids, sbk, mode, out) end
end

return M
