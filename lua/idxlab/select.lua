-- idxlab.select: the selection kernels from Lua: K3 candidate selection, K4 expansion, K6
-- top-k, K7 remap and the comparison path's candidate mask (SPEC 3). Each takes Tensor
-- objects, allocates its outputs only when they are not given (on the inputs' device), and
-- runs on the CPU or the GPU by where the tensors live. Every argument is checked here or in
-- C; errors point at the caller's line.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local Tensor = require("idxlab.tensor")
local argcheck = require("idxlab.argcheck")
local C = core.C
local fail = errors.fail

local M = {}

local need_ctx, need_tensor, need_int = argcheck.ctx, argcheck.tensor, argcheck.c_int

local function rows_of(t) return tonumber(t.cd.shape[0]) end

-- A new I32 output on `like`'s device, or the caller's tensor.
local function output(ctx, out, name, shape, like)
  if out ~= nil then
    need_tensor(out, name)
    return out
  end
  return Tensor.new(ctx, "i32", shape, like:device())
end

-- K3. logits F32 [R, C] (compressed layout), lens I32 [R]; block_score "max" (default),
-- "mean", "sum" or "logsumexp". Returns out I32 [R, T]: block ids by (score desc, id asc),
-- -1 pads. T may be nil when out is given.
function M.candidates(ctx, logits, lens, cbs, T, block_score, out)
  local cd = need_ctx(ctx)
  need_tensor(logits, "logits")
  need_tensor(lens, "lens")
  need_int(cbs, "candidate_block_size")
  local score = core.enum("block_score", block_score or "max")
  if out == nil or T ~= nil then
    need_int(T, "candidate_topk_blocks")
    if T < 0 then
      fail("candidate_topk_blocks = %d: must be >= 0", T)
    end
  end
  if out ~= nil and T ~= nil then
    need_tensor(out, "out")
    local shp = out:shape()
    if #shp ~= 2 or shp[2] ~= T then
      fail("out has shape {%s}: expected {R, %d} for candidate_topk_blocks = %d",
        table.concat(shp, ", "), T, T)
    end
  end
  out = output(ctx, out, "out", { rows_of(logits), T }, logits)
  core.check(cd, C.ixl_candidate_select(cd, logits.cd, lens.cd, cbs, score, out.cd))
  return out
end

-- K4. cand I32 [R, T]; row_ks I32 [R] or nil (paged: ks = 0); row_ke I32 [R] (paged: the
-- context lengths); ks_mode "unaligned" (default) or "aligned". Returns sparse_ids
-- I32 [R, T*cbs/sbk] and end I32 [R].
function M.expand(ctx, cand, row_ks, row_ke, cbs, sbk, ks_mode, sparse_ids, end_)
  local cd = need_ctx(ctx)
  need_tensor(cand, "cand")
  need_tensor(row_ks, "row_ks", nil, true)
  need_tensor(row_ke, "row_ke")
  need_int(cbs, "candidate_block_size")
  need_int(sbk, "sparse_block_kv")
  local mode = core.enum("ks_mode", ks_mode or "unaligned")
  local R = rows_of(cand)
  local T = cand.cd.ndim == 2 and tonumber(cand.cd.shape[1]) or 0
  -- A bad cbs/sbk pair still gets a shape here; C then refuses it with the rule it breaks.
  local nsb = (sbk >= 1 and cbs >= 1) and math.floor(T * math.floor(cbs / sbk)) or 0
  sparse_ids = output(ctx, sparse_ids, "sparse_ids", { R, nsb }, cand)
  end_ = output(ctx, end_, "end", { R }, cand)
  core.check(cd, C.ixl_expand(cd, cand.cd, row_ks and row_ks.cd or nil, row_ke.cd, cbs, sbk, mode,
    sparse_ids.cd, end_.cd))
  return sparse_ids, end_
end

-- K6. logits F32 or BF16 [R, C]; the row's columns are [row_start, row_end) (row_start nil =
-- 0). Returns out I32 [R, k]: columns relative to row_start, ties to the smaller column, NaN
-- above every number, -1 pads last; ascending columns, or by value when `sorted`.
-- K6's argument checks (topk and topk_remap) -> the context's cdata.
local function check_topk(ctx, logits, row_start, row_end, k, sorted)
  local cd = need_ctx(ctx)
  need_tensor(logits, "logits")
  need_tensor(row_start, "row_start", nil, true)
  need_tensor(row_end, "row_end")
  need_int(k, "k")
  if sorted ~= nil and type(sorted) ~= "boolean" then
    fail("sorted = %s: must be true, false or nil", tostring(sorted))
  end
  if k < 1 or k > 4096 then fail("k = %d: must be in [1, 4096]", k) end
  return cd
end

function M.topk(ctx, logits, row_start, row_end, k, sorted, out)
  local cd = check_topk(ctx, logits, row_start, row_end, k, sorted)
  out = output(ctx, out, "out", { rows_of(logits), k }, logits)
  core.check(cd, C.ixl_topk(cd, logits.cd, row_start and row_start.cd or nil, row_end.cd, k,
    sorted and 1 or 0, out.cd))
  return out
end

-- K7. cols I32 [R, k] sparse columns, sparse_ids I32 [R, NSB], row_ks I32 [R] or nil (= 0).
-- Returns out I32 [R, k] request-local positions (-1 stays -1). out may be cols itself.
function M.remap(ctx, cols, sparse_ids, row_ks, sbk, out)
  local cd = need_ctx(ctx)
  need_tensor(cols, "cols")
  need_tensor(sparse_ids, "sparse_ids")
  need_tensor(row_ks, "row_ks", nil, true)
  need_int(sbk, "sparse_block_kv")
  out = output(ctx, out, "out", cols:shape(), cols)
  core.check(cd, C.ixl_remap(cd, cols.cd, sparse_ids.cd, row_ks and row_ks.cd or nil, sbk, out.cd))
  return out
end

-- K6 then K7 as one op: out I32 [R, k] holds the positions remap(topk(logits), sparse_ids,
-- row_ks, sbk) would give, bit for bit. Select v2 on CUDA writes them from the top-k kernel's
-- store (one launch, K7 fused); every other variant runs the two ops inside the call. out
-- must not share memory with an input.
function M.topk_remap(ctx, logits, row_start, row_end, k, sorted, sparse_ids, row_ks, sbk, out)
  local cd = check_topk(ctx, logits, row_start, row_end, k, sorted)
  need_tensor(sparse_ids, "sparse_ids")
  need_tensor(row_ks, "row_ks", nil, true)
  need_int(sbk, "sparse_block_kv")
  out = output(ctx, out, "out", { rows_of(logits), k }, logits)
  core.check(cd, C.ixl_topk_remap(cd, logits.cd, row_start and row_start.cd or nil, row_end.cd,
    k, sorted and 1 or 0, sparse_ids.cd, row_ks and row_ks.cd or nil, sbk, out.cd))
  return out
end

-- The comparison path: sets logits (F32 or BF16 [R, C], in place) to -inf outside the
-- candidate blocks cand I32 [R, T] and outside [0, lens[r]). Returns logits.
function M.mask_candidates(ctx, logits, lens, cand, cbs)
  local cd = need_ctx(ctx)
  need_tensor(logits, "logits")
  need_tensor(lens, "lens")
  need_tensor(cand, "cand")
  need_int(cbs, "candidate_block_size")
  core.check(cd, C.ixl_mask_candidates(cd, logits.cd, lens.cd, cand.cd, cbs))
  return logits
end

return errors.wrap(M)
