-- idxlab.formats: the number formats of SPEC 2 and 8 from Lua. Thin wrappers over
-- ixl_quantize, ixl_dequantize, ixl_prepare_weights and ixl_kv_pages_write that take Tensor
-- objects and the names "mxfp4" | "mxfp8" | "fp8", "rne" | "ties_down", "q" | "k".
-- Outputs are allocated on the input's device (host or device) unless given.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local Tensor = require("idxlab.tensor")
local argcheck = require("idxlab.argcheck")
local C, check = core.C, core.check

local M = {}

-- Bytes of one 128-vector's values: 64 for mxfp4, 128 for mxfp8 and fp8.
function M.value_bytes(fmt)
  return C.ixl_format_value_bytes(core.enum("kv_format", fmt))
end

-- The dtype of the scales of `fmt`: "i32" (UE8M0 bytes, MX formats) or "f32" (fp8).
function M.scale_dtype(fmt)
  core.enum("kv_format", fmt)
  return fmt == "fp8" and "f32" or "i32"
end

local function leading(shape)
  local s = {}
  for i = 1, #shape - 1 do s[i] = shape[i] end
  return s
end

-- codes, scales = formats.quantize(ctx, fmt, quantizer, role, x [, codes, scales])
-- x: [..., 128] f32/bf16/f16. codes: u8 [..., value_bytes]; scales: [...] (i32 or f32).
function M.quantize(ctx, fmt, quantizer, role, x, codes, scales)
  argcheck.ctx(ctx, "formats.quantize")
  local f = core.enum("kv_format", fmt)
  local q = core.enum("quantizer", quantizer)
  local r = core.enum("role", role)
  argcheck.tensor(x, "x", "formats.quantize")
  argcheck.tensor(codes, "codes", "formats.quantize", true)
  argcheck.tensor(scales, "scales", "formats.quantize", true)
  local shape = x:shape()
  if #shape < 1 or shape[#shape] ~= 128 then
    errors.fail("formats.quantize: x has shape {%s}: the last dim must be 128 (the head dim D)",
      table.concat(shape, ", "))
  end
  local lead = leading(shape)
  if not codes then
    local cs = leading(shape)
    cs[#cs + 1] = C.ixl_format_value_bytes(f)
    codes = Tensor.new(ctx, "u8", cs, x:device())
  end
  scales = scales or Tensor.new(ctx, M.scale_dtype(fmt), lead, x:device())
  check(ctx.cd, C.ixl_quantize(ctx.cd, f, q, r, x.cd, codes.cd, scales.cd))
  return codes, scales
end

-- out = formats.dequantize(ctx, fmt, role, codes, scales [, out]): f32 [..., 128]. fp8 role "q"
-- leaves the Q scale out (it lives in the weights); scales may then be nil.
function M.dequantize(ctx, fmt, role, codes, scales, out)
  argcheck.ctx(ctx, "formats.dequantize")
  local f = core.enum("kv_format", fmt)
  local r = core.enum("role", role)
  argcheck.tensor(codes, "codes", "formats.dequantize")
  argcheck.tensor(scales, "scales", "formats.dequantize", true)
  argcheck.tensor(out, "out", "formats.dequantize", true)
  if not out then
    local s = leading(codes:shape())
    s[#s + 1] = 128
    out = Tensor.new(ctx, "f32", s, codes:device())
  end
  check(ctx.cd, C.ixl_dequantize(ctx.cd, f, r, codes.cd, scales and scales.cd or nil, out.cd))
  return out
end

-- dense_f32, sparse_bf16 = formats.prepare_weights(ctx, fmt, weights, q_scales_or_nil
--   [, dense_f32, sparse_bf16])
-- weights f32 [R, H]. fp8 folds its per-(row, head) Q scales (f32 [R, H]) into both; the MX
-- formats take nil (their Q scales stay with the codes).
function M.prepare_weights(ctx, fmt, weights, q_scales, dense, sparse)
  argcheck.ctx(ctx, "formats.prepare_weights")
  local f = core.enum("kv_format", fmt)
  argcheck.tensor(weights, "weights", "formats.prepare_weights")
  argcheck.tensor(q_scales, "q_scales", "formats.prepare_weights", true)
  argcheck.tensor(dense, "dense_f32", "formats.prepare_weights", true)
  argcheck.tensor(sparse, "sparse_bf16", "formats.prepare_weights", true)
  local shape = weights:shape()
  dense = dense or Tensor.new(ctx, "f32", shape, weights:device())
  sparse = sparse or Tensor.new(ctx, "bf16", shape, weights:device())
  check(ctx.cd, C.ixl_prepare_weights(ctx.cd, f, weights.cd, q_scales and q_scales.cd or nil,
    dense.cd, sparse.cd))
  return dense, sparse
end

-- formats.write_pages(ctx, fmt, codes, scales, src_start, count, pages, page_size, page_ids)
-- Writes positions src_start .. src_start+count-1 of codes/scales into pages (u8 [num_pages,
-- page_stride]) at logical positions 0..count-1 through page_ids (i32 [>= ceil(count /
-- page_size)]): values first, then scales (SPEC 2).
function M.write_pages(ctx, fmt, codes, scales, src_start, count, pages, page_size, page_ids)
  argcheck.ctx(ctx, "formats.write_pages")
  local f = core.enum("kv_format", fmt)
  argcheck.tensor(codes, "codes", "formats.write_pages")
  argcheck.tensor(scales, "scales", "formats.write_pages")
  argcheck.int(src_start, "src_start", "formats.write_pages")
  argcheck.int(count, "count", "formats.write_pages")
  argcheck.tensor(pages, "pages", "formats.write_pages")
  argcheck.int(page_size, "page_size", "formats.write_pages", 1, 2147483647)
  argcheck.tensor(page_ids, "page_ids", "formats.write_pages")
  check(ctx.cd, C.ixl_kv_pages_write(ctx.cd, f, codes.cd, scales.cd, src_start, count, pages.cd,
    page_size, page_ids.cd))
end

-- The smallest page stride for page_size positions of fmt: page_size * (value_bytes + 4)
-- rounded up to a multiple of 512 bytes.
function M.page_stride(fmt, page_size)
  argcheck.int(page_size, "page_size", "formats.page_stride", 1, 2147483647)
  local bytes = page_size * (M.value_bytes(fmt) + 4)
  return math.ceil(bytes / 512) * 512
end

return errors.wrap(M)
