-- idxlab.select: the selection kernels from Lua: K3 candidate selection, K4 expansion, K6
-- top-k, K7 remap and the comparison path's candidate mask (SPEC 3). Each takes Tensor
-- objects, allocates its outputs only when they are not given (on the inputs' device), and
-- runs on the CPU or the GPU by where the tensors live. Every argument is checked here or in
-- C; errors point at the caller's line.
local core = require("idxlab.ffi")
local Tensor = require("idxlab.tensor")
local C = core.C

local M = {}

local INT32_MIN, INT32_MAX = -2 ^ 31, 2 ^ 31 - 1

local function need_ctx(ctx, level)
  if not require("idxlab.context").is_context(ctx) then
    error(("idxlab: ctx = %s: must be a live context (idxlab.context{...})"):format(tostring(ctx)),
      level + 1)
  end
  return ctx.cd
end

-- The ixl_tensor* of a Tensor argument; nil passes when `optional`.
local function need_tensor(t, name, level, optional)
  if t == nil and optional then return nil end
  if not Tensor.is_tensor(t) then
    error(("idxlab: %s = %s: must be a tensor%s"):format(name, tostring(t),
      optional and " or nil" or ""), level + 1)
  end
  local why = Tensor.dead_reason(t)
  if why then error(("idxlab: %s: %s"):format(name, why), level + 1) end
  return t.cd
end

-- An integer that C receives as int (a fraction would be truncated silently by the FFI).
local function need_int(v, name, level)
  if type(v) ~= "number" or v ~= math.floor(v) or v < INT32_MIN or v > INT32_MAX then
    error(("idxlab: %s = %s: must be an integer in [-2^31, 2^31)"):format(name, tostring(v)),
      level + 1)
  end
  return v
end

local function rows_of(t) return tonumber(t.cd.shape[0]) end

-- A new I32 output on `like`'s device, or the caller's tensor.
local function output(ctx, out, name, shape, like, level)
  if out ~= nil then
    need_tensor(out, name, level + 1)
    return out
  end
  local t = Tensor.new(ctx, "i32", shape, like:device(), level + 1) -- not a tail call: levels count this frame
  return t
end

-- K3. logits F32 [R, C] (compressed layout), lens I32 [R]; block_score "max" (default),
-- "mean", "sum" or "logsumexp". Returns out I32 [R, T]: block ids by (score desc, id asc),
-- -1 pads. T may be nil when out is given.
function M.candidates(ctx, logits, lens, cbs, T, block_score, out)
  local cd = need_ctx(ctx, 2)
  need_tensor(logits, "logits", 2)
  need_tensor(lens, "lens", 2)
  need_int(cbs, "candidate_block_size", 2)
  local score = core.enum("block_score", block_score or "max", 2)
  if out == nil or T ~= nil then
    need_int(T, "candidate_topk_blocks", 2)
    if T < 0 then
      error(("idxlab: candidate_topk_blocks = %d: must be >= 0"):format(T), 2)
    end
  end
  if out ~= nil and T ~= nil then
    need_tensor(out, "out", 2)
    local shp = out:shape()
    if #shp ~= 2 or shp[2] ~= T then
      error(("idxlab: out has shape {%s}: expected {R, %d} for candidate_topk_blocks = %d")
        :format(table.concat(shp, ", "), T, T), 2)
    end
  end
  out = output(ctx, out, "out", { rows_of(logits), T }, logits, 2)
  core.check(cd, C.ixl_candidate_select(cd, logits.cd, lens.cd, cbs, score, out.cd), 2)
  return out
end

-- K4. cand I32 [R, T]; row_ks I32 [R] or nil (paged: ks = 0); row_ke I32 [R] (paged: the
-- context lengths); ks_mode "unaligned" (default) or "aligned". Returns sparse_ids
-- I32 [R, T*cbs/sbk] and end I32 [R].
function M.expand(ctx, cand, row_ks, row_ke, cbs, sbk, ks_mode, sparse_ids, end_)
  local cd = need_ctx(ctx, 2)
  need_tensor(cand, "cand", 2)
  need_tensor(row_ks, "row_ks", 2, true)
  need_tensor(row_ke, "row_ke", 2)
  need_int(cbs, "candidate_block_size", 2)
  need_int(sbk, "sparse_block_kv", 2)
  local mode = core.enum("ks_mode", ks_mode or "unaligned", 2)
  local R = rows_of(cand)
  local T = cand.cd.ndim == 2 and tonumber(cand.cd.shape[1]) or 0
  -- A bad cbs/sbk pair still gets a shape here; C then refuses it with the rule it breaks.
  local nsb = (sbk >= 1 and cbs >= 1) and math.floor(T * math.floor(cbs / sbk)) or 0
  sparse_ids = output(ctx, sparse_ids, "sparse_ids", { R, nsb }, cand, 2)
  end_ = output(ctx, end_, "end", { R }, cand, 2)
  core.check(cd, C.ixl_expand(cd, cand.cd, row_ks and row_ks.cd or nil, row_ke.cd, cbs, sbk, mode,
    sparse_ids.cd, end_.cd), 2)
  return sparse_ids, end_
end

-- K6. logits F32 or BF16 [R, C]; the row's columns are [row_start, row_end) (row_start nil =
-- 0). Returns out I32 [R, k]: columns relative to row_start, ties to the smaller column, NaN
-- above every number, -1 pads last; ascending columns, or by value when `sorted`.
function M.topk(ctx, logits, row_start, row_end, k, sorted, out)
  local cd = need_ctx(ctx, 2)
  need_tensor(logits, "logits", 2)
  need_tensor(row_start, "row_start", 2, true)
  need_tensor(row_end, "row_end", 2)
  need_int(k, "k", 2)
  if sorted ~= nil and type(sorted) ~= "boolean" then
    error(("idxlab: sorted = %s: must be true, false or nil"):format(tostring(sorted)), 2)
  end
  if k < 1 or k > 4096 then error(("idxlab: k = %d: must be in [1, 4096]"):format(k), 2) end
  out = output(ctx, out, "out", { rows_of(logits), k }, logits, 2)
  core.check(cd, C.ixl_topk(cd, logits.cd, row_start and row_start.cd or nil, row_end.cd, k,
    sorted and 1 or 0, out.cd), 2)
  return out
end

-- K7. cols I32 [R, k] sparse columns, sparse_ids I32 [R, NSB], row_ks I32 [R] or nil (= 0).
-- Returns out I32 [R, k] request-local positions (-1 stays -1). out may be cols itself.
function M.remap(ctx, cols, sparse_ids, row_ks, sbk, out)
  local cd = need_ctx(ctx, 2)
  need_tensor(cols, "cols", 2)
  need_tensor(sparse_ids, "sparse_ids", 2)
  need_tensor(row_ks, "row_ks", 2, true)
  need_int(sbk, "sparse_block_kv", 2)
  out = output(ctx, out, "out", cols:shape(), cols, 2)
  core.check(cd, C.ixl_remap(cd, cols.cd, sparse_ids.cd, row_ks and row_ks.cd or nil, sbk, out.cd),
    2)
  return out
end

-- The comparison path: sets logits (F32 or BF16 [R, C], in place) to -inf outside the
-- candidate blocks cand I32 [R, T] and outside [0, lens[r]). Returns logits.
function M.mask_candidates(ctx, logits, lens, cand, cbs)
  local cd = need_ctx(ctx, 2)
  need_tensor(logits, "logits", 2)
  need_tensor(lens, "lens", 2)
  need_tensor(cand, "cand", 2)
  need_int(cbs, "candidate_block_size", 2)
  core.check(cd, C.ixl_mask_candidates(cd, logits.cd, lens.cd, cand.cd, cbs), 2)
  return logits
end

return M
