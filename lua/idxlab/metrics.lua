-- idxlab.metrics: the SPEC 6 measuring ops from Lua, thin wrappers over ixl_gather_cols (any
-- device) and the host-only per-row statistics ixl_rows_overlap, ixl_rows_in_candidates,
-- ixl_rows_mass_recall and ixl_rows_bf16_compare (include/idxlab.h says what each counts).
-- Outputs are the caller's tensors (the step reuses its buffers), except gather_cols' out,
-- which is allocated when not given.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local Tensor = require("idxlab.tensor")
local argcheck = require("idxlab.argcheck")
local ffi, C, check = core.ffi, core.C, core.check

local M = {}

local f64box = ffi.typeof("double[1]")

-- The checks every op here opens with, in argument order: ctx, then each (name, tensor) pair
-- as a required Tensor; messages name the function metrics.<op>.
local function args(op, ctx, ...)
  local where = "metrics." .. op
  argcheck.ctx(ctx, where)
  for i = 1, select("#", ...), 2 do
    local name, t = select(i, ...)
    argcheck.tensor(t, name, where)
  end
end

-- out = metrics.gather_cols(ctx, src, idx [, out]): src [R, C] (F32, BF16 or I32) at the
-- columns idx I32 [R, k]; out [R, k] of src's dtype, on src's device unless given.
function M.gather_cols(ctx, src, idx, out)
  args("gather_cols", ctx, "src", src, "idx", idx)
  argcheck.tensor(out, "out", "metrics.gather_cols", true)
  out = out or Tensor.new(ctx, src:dtype(), idx:shape(), src:device())
  check(ctx.cd, C.ixl_gather_cols(ctx.cd, src.cd, idx.cd, out.cd))
  return out
end

-- metrics.rows_overlap(ctx, a, b, counts [, valid]): per row, |valid a intersect valid b| into
-- counts and |valid a| into valid (host I32 [R]).
function M.rows_overlap(ctx, a, b, counts, valid)
  args("rows_overlap", ctx, "a", a, "b", b, "counts", counts)
  argcheck.tensor(valid, "valid", "metrics.rows_overlap", true)
  check(ctx.cd, C.ixl_rows_overlap(ctx.cd, a.cd, b.cd, counts.cd, valid and valid.cd or nil))
end

-- metrics.rows_in_candidates(ctx, pos, cand, candidate_block_size, counts): per row, the valid
-- positions of pos that lie in a candidate block of cand.
function M.rows_in_candidates(ctx, pos, cand, cbs, counts)
  args("rows_in_candidates", ctx, "pos", pos, "cand", cand)
  argcheck.int(cbs, "candidate_block_size", "metrics.rows_in_candidates", 1, 2 ^ 31 - 1)
  argcheck.tensor(counts, "counts", "metrics.rows_in_candidates")
  check(ctx.cd, C.ixl_rows_in_candidates(ctx.cd, pos.cd, cand.cd, cbs, counts.cd))
end

-- metrics.rows_mass_recall(ctx, dense_pos, dense_vals, sel, out): per row (F32 [R]), the share
-- of the dense top-k's softmax mass whose positions sel also holds (NaN for an empty row).
function M.rows_mass_recall(ctx, dense_pos, dense_vals, sel, out)
  args("rows_mass_recall", ctx, "dense_pos", dense_pos, "dense_vals", dense_vals, "sel", sel,
    "out", out)
  check(ctx.cd, C.ixl_rows_mass_recall(ctx.cd, dense_pos.cd, dense_vals.cd, sel.cd, out.cd))
end

-- sum_dd, sum_sq = metrics.rows_bf16_compare(ctx, a, b, end_, mismatches): BF16 [R, C] a and
-- b on columns [0, end_[r]); mismatches I32 [R] per row; the two sums of SPEC 3's measure
-- (logit_diff = sum_dd / sum_sq) over this call.
function M.rows_bf16_compare(ctx, a, b, end_, mismatches)
  args("rows_bf16_compare", ctx, "a", a, "b", b, "end", end_, "mismatches", mismatches)
  local sdd, ssq = f64box(), f64box()
  check(ctx.cd, C.ixl_rows_bf16_compare(ctx.cd, a.cd, b.cd, end_.cd, mismatches.cd, sdd, ssq))
  return sdd[0], ssq[0]
end

return errors.wrap(M)
