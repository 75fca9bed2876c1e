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
local Tensor = require("idxlab.tensor")
local argcheck = require("idxlab.argcheck")
local ffi, C, check = core.ffi, core.C, core.check

local M = {}

local function arg_error(msg, level)
  error("idxlab: " .. msg, (level or 2) + 1)
end



local qk_fields = {
  q_codes = true, q_scales = true, k_codes = true, k_scales = true, k_pages = true,
  page_size = true, kv_format = true,
}

-- qk table -> ixl_qk (the Tensors stay referenced by the caller's table during the call).
local function to_qk(qk, fn)
  if type(qk) ~= "table" then arg_error(("logits.%s: qk must be a table, got %s"):format(fn, type(qk)), 3) end
  for k in pairs(qk) do
    if not qk_fields[k] then
      arg_error(("logits.%s: qk.%s: unknown field (q_codes, q_scales, k_codes, k_scales, k_pages, page_size, kv_format)")
        :format(fn, tostring(k)), 3)
    end
  end
  local s = ffi.new("ixl_qk")
  for _, name in ipairs({ "q_codes", "q_scales", "k_codes", "k_scales", "k_pages" }) do
    local t = qk[name]
    if t ~= nil then
      if not Tensor.is_tensor(t) then
        arg_error(("logits.%s: qk.%s must be a Tensor, got %s"):format(fn, name, type(t)), 3)
      end
      local why = Tensor.dead_reason(t)
      if why then arg_error(("logits.%s: qk.%s: %s"):format(fn, name, why), 3) end
      s[name] = t.cd
    end
  end
  if qk.q_codes == nil then arg_error(("logits.%s: qk.q_codes is required"):format(fn), 3) end
  local fmt = qk.kv_format or "mxfp4"
  if core.enums.kv_format[fmt] == nil then
    arg_error(("logits.%s: qk.kv_format = %s: must be one of mxfp4, mxfp8, fp8"):format(fn, tostring(fmt)), 3)
  end
  s.kv_format = core.enums.kv_format[fmt]
  if qk.k_pages ~= nil then
    local p = qk.page_size
    if type(p) ~= "number" or p < 1 or p ~= math.floor(p) then
      arg_error(("logits.%s: qk.page_size = %s: must be a positive integer with k_pages"):format(fn, tostring(p)), 3)
    end
    s.page_size = p
  end
  return s
end

local function check_opts(opts, allowed, fn)
  if opts == nil then return {} end
  if type(opts) ~= "table" then arg_error(("logits.%s: opts must be a table, got %s"):format(fn, type(opts)), 3) end
  for k in pairs(opts) do
    if not allowed[k] then
      local names = {}
      for n in pairs(allowed) do names[#names + 1] = n end
      table.sort(names)
      arg_error(("logits.%s: option %s: unknown (%s)"):format(fn, tostring(k), table.concat(names, ", ")), 3)
    end
  end
  return opts
end

local function enum_opt(kind, value, default, fn)
  value = value == nil and default or value
  local v = core.enums[kind][value]
  if v == nil then
    local names = {}
    for n in pairs(core.enums[kind]) do names[#names + 1] = n end
    table.sort(names, function(a, b) return core.enums[kind][a] < core.enums[kind][b] end)
    arg_error(("logits.%s: %s = %s: must be one of %s"):format(fn, kind, tostring(value), table.concat(names, ", ")), 3)
  end
  return v
end

local function want_len(v, name, fn)
  if v ~= nil and (type(v) ~= "number" or v < 0 or v ~= math.floor(v)) then
    arg_error(("logits.%s: %s = %s: must be a non-negative integer"):format(fn, name, tostring(v)), 3)
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

-- K1. out = logits.dense(ctx, qk, weights, ks, ke, {layout = "compressed" | "full",
--   clean = true, reduction = "fp32" | "bf16", out = T, max_len = n})
-- weights: f32 [R, H] for "fp32", bf16 [R, H] for "bf16". out: [R, N] (full) or [R, max_len]
-- (compressed; max_len defaults to the longest row), f32 or bf16 as the reduction.
local dense_opts = { layout = true, clean = true, reduction = true, out = true, max_len = true }
function M.dense(ctx, qk, weights, ks, ke, opts)
  argcheck.ctx(ctx, "logits.dense")
  local q = to_qk(qk, "dense")
  argcheck.tensor(weights, "weights", "logits.dense")
  argcheck.tensor(ks, "ks", "logits.dense")
  argcheck.tensor(ke, "ke", "logits.dense")
  opts = check_opts(opts, dense_opts, "dense")
  local layout = enum_opt("layout", opts.layout, "compressed", "dense")
  local reduction = enum_opt("reduction", opts.reduction, "fp32", "dense")
  local clean = opts.clean
  if clean == nil then clean = true end
  if type(clean) ~= "boolean" then arg_error(("logits.dense: clean = %s: must be a boolean"):format(tostring(clean)), 2) end
  want_len(opts.max_len, "max_len", "dense")
  local out = opts.out
  argcheck.tensor(out, "out", "logits.dense", true)
  if out == nil then
    local R = qk.q_codes:shape()[1]
    local cols
    if layout == core.enums.layout.full then
      if qk.k_codes == nil then arg_error("logits.dense: qk.k_codes is required", 2) end
      cols = qk.k_codes:shape()[1]
    else
      cols = opts.max_len or max_of(ke, ks)
    end
    out = Tensor.new(ctx, reduction == 0 and "f32" or "bf16", { R, cols }, qk.q_codes:device(), 3)
  end
  check(ctx.cd, C.ixl_dense_logits(ctx.cd, q, weights.cd, ks.cd, ke.cd, layout, clean and 1 or 0, reduction,
    out.cd), 2)
  return out
end

-- K2. out = logits.dense_paged(ctx, qk, weights, context_lens, block_table,
--   {reduction = "fp32" | "bf16", out = T, max_len = n})
-- qk holds k_pages and page_size. out [R, max_len]; columns >= context_len are -inf.
local paged_opts = { reduction = true, out = true, max_len = true }
function M.dense_paged(ctx, qk, weights, context_lens, block_table, opts)
  argcheck.ctx(ctx, "logits.dense_paged")
  local q = to_qk(qk, "dense_paged")
  argcheck.tensor(weights, "weights", "logits.dense_paged")
  argcheck.tensor(context_lens, "context_lens", "logits.dense_paged")
  argcheck.tensor(block_table, "block_table", "logits.dense_paged")
  opts = check_opts(opts, paged_opts, "dense_paged")
  local reduction = enum_opt("reduction", opts.reduction, "fp32", "dense_paged")
  want_len(opts.max_len, "max_len", "dense_paged")
  local out = opts.out
  argcheck.tensor(out, "out", "logits.dense_paged", true)
  if out == nil then
    local R = qk.q_codes:shape()[1]
    out = Tensor.new(ctx, reduction == 0 and "f32" or "bf16", { R, opts.max_len or max_of(context_lens) },
      qk.q_codes:device(), 3)
  end
  check(ctx.cd, C.ixl_dense_logits_paged(ctx.cd, q, weights.cd, context_lens.cd, block_table.cd, reduction,
    out.cd), 2)
  return out
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
  if type(sbk) ~= "number" or sbk ~= math.floor(sbk) then
    arg_error(("logits.sparse: sparse_block_kv = %s: must be an integer"):format(tostring(sbk)), 2)
  end
  local mode = enum_opt("ks_mode", ks_mode, "unaligned", "sparse")
  argcheck.tensor(out, "out", "logits.sparse", true)
  if out == nil then
    local s = sparse_ids:shape()
    out = Tensor.new(ctx, "bf16", { s[1], (s[2] or 0) * sbk }, qk.q_codes:device(), 3)
  end
  check(ctx.cd, C.ixl_sparse_logits(ctx.cd, q, weights.cd, row_ks and row_ks.cd or nil, row_ke.cd,
    block_table and block_table.cd or nil, sparse_ids.cd, sbk, mode, out.cd), 2)
  return out
end

return M
