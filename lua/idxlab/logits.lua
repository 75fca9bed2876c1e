-- idxlab.logits: the logits kernels K1 (dense, ragged), K2 (dense, paged) and K5 (sparse) from
-- Lua. Thin wrappers over ixl_dense_logits, ixl_dense_logits_paged and ixl_sparse_logits.
--
-- The quantized inputs of one layer are a table:
--   qk = { q_codes = T, q_scales = T | nil (nil for fp8: its Q scale is in the weights),
--          k_codes = T, k_scales = T           -- ragged K
--          k_pages = T, page_size = n          -- or paged K
--          kv_format = "mxfp4" | "mxfp8" | "fp8" }
-- Pass an existing `out` to avoid an allocation per call (outputs are otherwise allocated on
-- q_codes' device).
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local util = require("idxlab.util")
local Tensor = require("idxlab.tensor")
local argcheck = require("idxlab.argcheck")
local ffi, C, check = core.ffi, core.C, core.check
local fail = errors.fail

local M = {}

local qk_fields = {
  q_codes = true, q_scales = true, k_codes = true, k_scales = true, k_pages = true,
  page_size = true, kv_format = true,
}

-- qk table -> ixl_qk (the Tensors stay referenced by the caller's table during the call).
local function to_qk(qk, fn)
  if type(qk) ~= "table" then fail("logits.%s: qk must be a table, got %s", fn, type(qk)) end
  for k in pairs(qk) do
    if not qk_fields[k] then
      fail("logits.%s: qk.%s: unknown field (q_codes, q_scales, k_codes, k_scales, k_pages, "
        .. "page_size, kv_format)", fn, tostring(k))
    end
  end
  local s = ffi.new("ixl_qk")
  for _, name in ipairs({ "q_codes", "q_scales", "k_codes", "k_scales", "k_pages" }) do
    local t = qk[name]
    if t ~= nil then
      if not Tensor.is_tensor(t) then
        fail("logits.%s: qk.%s must be a Tensor, got %s", fn, name, type(t))
      end
      local why = Tensor.dead_reason(t)
      if why then fail("logits.%s: qk.%s: %s", fn, name, why) end
      s[name] = t.cd
    end
  end
  if qk.q_codes == nil then fail("logits.%s: qk.q_codes is required", fn) end
  local fmt = qk.kv_format or "mxfp4"
  if core.enums.kv_format[fmt] == nil then
    fail("logits.%s: qk.kv_format = %s: must be one of %s", fn, tostring(fmt),
      table.concat(core.enum_names("kv_format"), ", "))
  end
  s.kv_format = core.enums.kv_format[fmt]
  if qk.k_pages ~= nil then
    local p = qk.page_size
    -- any positive integer passes here (C checks the page size against the pages' shape)
    if not util.is_int(p, 1, math.huge) then
      fail("logits.%s: qk.page_size = %s: must be a positive integer with k_pages", fn,
        tostring(p))
    end
    s.page_size = p
  end
  return s
end

-- The ixl_qk struct of a qk table, checked as the kernels' entries check it (messages name
-- "logits.qk"). It holds the tensors' raw pointers: the caller keeps the tensors alive while
-- it uses the struct (bench/lib.lua resolves it once, outside a timed loop).
function M.qk(qk) return to_qk(qk, "qk") end

local function enum_opt(kind, value, default, fn)
  value = value == nil and default or value
  local v = core.enums[kind][value]
  if v == nil then
    fail("logits.%s: %s = %s: must be one of %s", fn, kind, tostring(value),
      table.concat(core.enum_names(kind), ", "))
  end
  return v
end

local function want_len(v, name, fn)
  if v ~= nil and not util.is_int(v, 0, math.huge) then
    fail("logits.%s: %s = %s: must be a non-negative integer", fn, name, tostring(v))
  end
end

-- The largest value of an I32 [R] tensor (host or device), 0 when empty.
local function max_of(t, minus)
  local a = t:to_table()
  local b = minus and minus:to_table()
  local m = 0
  for i = 1, #a do
    local v = a[i] - (b and b[i] or 0)
    if v > m then m = v end
  end
  return m
end

-- opts.block_scores = { cbs = n, scores = T (f32 [R, >= ceil(cols / cbs)]), nblocks = T
-- (i32 [R]) }: K3's block scores emitted with the logits where the variant that runs can
-- (idxlab.h's ixl_block_scores). -> the ixl_block_scores struct (nil without the option).
local bs_fields = { cbs = true, scores = true, nblocks = true }
local function block_scores(opts, fn)
  local o = opts.block_scores
  if o == nil then return nil end
  local where = "logits." .. fn
  o = argcheck.opts(o, bs_fields, where .. " block_scores")
  local s = ffi.new("ixl_block_scores")
  s.candidate_block_size = argcheck.int(o.cbs, "block_scores.cbs", where, 1, 2 ^ 31 - 1)
  s.scores = argcheck.tensor(o.scores, "block_scores.scores", where)
  s.nblocks = argcheck.tensor(o.nblocks, "block_scores.nblocks", where)
  return s
end

-- The dtype of a reduction's output: f32 for "fp32", bf16 for "bf16".
local function out_dtype(reduction)
  return reduction == core.enums.reduction.fp32 and "f32" or "bf16"
end

-- K1. out, emitted = logits.dense(ctx, qk, weights, ks, ke, {layout = "compressed" | "full",
--   clean = true, reduction = "fp32" | "bf16", out = T, max_len = n, block_scores = {...}})
-- weights: f32 [R, H] for "fp32", bf16 [R, H] for "bf16". out: [R, N] (full) or [R, max_len]
-- (compressed; max_len defaults to the longest row), f32 or bf16 as the reduction.
-- emitted: with block_scores (compressed, fp32), true when the logits variant that ran wrote
-- them (K3 is then select.topk(scores, nil, nblocks, T, true)), false when it cannot.
local dense_opts = { layout = true, clean = true, reduction = true, out = true, max_len = true,
  block_scores = true }
function M.dense(ctx, qk, weights, ks, ke, opts)
  argcheck.ctx(ctx, "logits.dense")
  local q = to_qk(qk, "dense")
  argcheck.tensor(weights, "weights", "logits.dense")
  argcheck.tensor(ks, "ks", "logits.dense")
  argcheck.tensor(ke, "ke", "logits.dense")
  opts = argcheck.opts(opts, dense_opts, "logits.dense")
  local layout = enum_opt("layout", opts.layout, "compressed", "dense")
  local reduction = enum_opt("reduction", opts.reduction, "fp32", "dense")
  local clean = opts.clean
  if clean == nil then clean = true end
  if type(clean) ~= "boolean" then
    fail("logits.dense: clean = %s: must be a boolean", tostring(clean))
  end
  want_len(opts.max_len, "max_len", "dense")
  local out = opts.out
  argcheck.tensor(out, "out", "logits.dense", true)
  if out == nil then
    local R = qk.q_codes:shape()[1]
    local cols
    if layout == core.enums.layout.full then
      if qk.k_codes == nil then fail("logits.dense: qk.k_codes is required") end
      cols = qk.k_codes:shape()[1]
    else
      cols = opts.max_len or max_of(ke, ks)
    end
    out = Tensor.new(ctx, out_dtype(reduction), { R, cols }, qk.q_codes:device())
  end
  local bs = block_scores(opts, "dense")
  check(ctx.cd, C.ixl_dense_logits_scored(ctx.cd, q, weights.cd, ks.cd, ke.cd, layout,
    clean and 1 or 0, reduction, out.cd, bs))
  return out, bs ~= nil and bs.emitted == 1
end

-- K2. out, emitted = logits.dense_paged(ctx, qk, weights, context_lens, block_table,
--   {reduction = "fp32" | "bf16", out = T, max_len = n, block_scores = {...}})
-- qk holds k_pages and page_size. out [R, max_len]; columns >= context_len are -inf.
-- block_scores and emitted: as for logits.dense.
local paged_opts = { reduction = true, out = true, max_len = true, block_scores = true }
function M.dense_paged(ctx, qk, weights, context_lens, block_table, opts)
  argcheck.ctx(ctx, "logits.dense_paged")
  local q = to_qk(qk, "dense_paged")
  argcheck.tensor(weights, "weights", "logits.dense_paged")
  argcheck.tensor(context_lens, "context_lens", "logits.dense_paged")
  argcheck.tensor(block_table, "block_table", "logits.dense_paged")
  opts = argcheck.opts(opts, paged_opts, "logits.dense_paged")
  local reduction = enum_opt("reduction", opts.reduction, "fp32", "dense_paged")
  want_len(opts.max_len, "max_len", "dense_paged")
  local out = opts.out
  argcheck.tensor(out, "out", "logits.dense_paged", true)
  if out == nil then
    local R = qk.q_codes:shape()[1]
    out = Tensor.new(ctx, out_dtype(reduction), { R, opts.max_len or max_of(context_lens) },
      qk.q_codes:device())
  end
  local bs = block_scores(opts, "dense_paged")
  check(ctx.cd, C.ixl_dense_logits_paged_scored(ctx.cd, q, weights.cd, context_lens.cd,
    block_table.cd, reduction, out.cd, bs))
  return out, bs ~= nil and bs.emitted == 1
end

-- K5. out = logits.sparse(ctx, qk, weights_bf16, row_ks_or_nil, row_ke, block_table_or_nil,
--   sparse_ids, sparse_block_kv, ks_mode, out_or_nil)
-- Ragged: qk holds k_codes/k_scales, row_ks given, block_table nil. Paged: qk holds k_pages,
-- row_ks nil (ks = 0), row_ke = context_lens, block_table given. out: bf16
-- [R, num_sparse_blocks * sparse_block_kv]; columns past the row's end are -inf.
function M.sparse(ctx, qk, weights, row_ks, row_ke, block_table, sparse_ids, sbk, ks_mode, out)
  argcheck.ctx(ctx, "logits.sparse")
  local q = to_qk(qk, "sparse")
  argcheck.tensor(weights, "weights", "logits.sparse")
  argcheck.tensor(row_ks, "row_ks", "logits.sparse", true)
  argcheck.tensor(row_ke, "row_ke", "logits.sparse")
  argcheck.tensor(block_table, "block_table", "logits.sparse", true)
  argcheck.tensor(sparse_ids, "sparse_ids", "logits.sparse")
  -- C range-checks it against the config rules; only a non-integer stops here
  if not util.is_int(sbk, -math.huge, math.huge) then
    fail("logits.sparse: sparse_block_kv = %s: must be an integer", tostring(sbk))
  end
  local mode = enum_opt("ks_mode", ks_mode, "unaligned", "sparse")
  argcheck.tensor(out, "out", "logits.sparse", true)
  if out == nil then
    local s = sparse_ids:shape()
    out = Tensor.new(ctx, "bf16", { s[1], (s[2] or 0) * sbk }, qk.q_codes:device())
  end
  check(ctx.cd, C.ixl_sparse_logits(ctx.cd, q, weights.cd, row_ks and row_ks.cd or nil, row_ke.cd,
    block_table and block_table.cd or nil, sparse_ids.cd, sbk, mode, out.cd))
  return out
end

return errors.wrap(M)
