// logits/dense.cu - K1 (dense logits, ragged rows: prefill) and K2 (dense logits, paged:
// decode) on the GPU. The arguments arrive validated by kernels/dense_logits_cpu.c; the
// kernel itself is the tile engine of logits/logits_v1.cuh.
//
// K1: a CTA takes RB = 128 / HP consecutive rows (they share most of their K range in a
// prefill chunk) and one chunk of output columns, so each K tile it loads feeds RB * H dot
// products; the row blocks of one chunk are neighbours in the grid, so their K chunk is read
// from HBM about once. K2: a CTA takes one row and one chunk of its positions (rows of a
// decode batch have their own pages), chunks sized so that even one row fills the GPU.
#include "logits/logits_v1.cuh"

using namespace ixl_lg;

extern "C" ixl_status ixl_cuda_dense_logits(ixl_ctx *ctx, const ixl_qk *in,
                                            const ixl_tensor *weights, const ixl_tensor *ks,
                                            const ixl_tensor *ke, ixl_layout layout, int clean,
                                            ixl_reduction reduction, ixl_tensor *out) {
  const char *op = "dense_logits";
  Params p = {};
  ixl_status st;
  if ((st = fill_query(ctx, op, p, in, weights, out)) ||
      (st = check_align(ctx, op, in->k_codes, "k_codes", 16)) ||
      (st = check_align(ctx, op, in->k_scales, "k_scales", 4)) ||
      (st = check_align(ctx, op, ks, "ks", 4)) || (st = check_align(ctx, op, ke, "ke", 4)))
    return st;
  p.k_codes = (const uint8_t *)in->k_codes->data;
  p.k_scales = (const uint8_t *)in->k_scales->data;
  p.N = in->k_codes->shape[0];
  p.ks = (const int32_t *)ks->data;
  p.ke = (const int32_t *)ke->data;
  p.compressed = layout == IXL_LAYOUT_COMPRESSED;
  p.clean = clean != 0;
  plan_rows(p, (int)in->q_codes->shape[1], false);
  if (p.R == 0 || p.out_cols == 0) return IXL_OK;
  p.nrb = ixl_ceil_div(p.R, p.RB);
  int64_t blocks = 0;
  if ((st = plan_chunks(ctx, op, p, p.nrb, kMaxChunk, &blocks))) return st;
  return launch_fmt<DENSE_RAGGED>(ctx, p, blocks, in->kv_format, reduction == IXL_REDUCE_BF16,
                                  "dense_logits kernel");
}

extern "C" ixl_status ixl_cuda_dense_logits_paged(ixl_ctx *ctx, const ixl_qk *in,
                                                  const ixl_tensor *weights,
                                                  const ixl_tensor *context_lens,
                                                  const ixl_tensor *block_table,
                                                  ixl_reduction reduction, ixl_tensor *out) {
  const char *op = "dense_logits_paged";
  Params p = {};
  ixl_status st;
  if ((st = fill_query(ctx, op, p, in, weights, out)) ||
      (st = check_align(ctx, op, in->k_pages, "k_pages", 16)) ||
      (st = check_align(ctx, op, context_lens, "context_lens", 4)) ||
      (st = check_align(ctx, op, block_table, "block_table", 4)))
    return st;
  p.k_pages = (const uint8_t *)in->k_pages->data;
  p.num_pages = in->k_pages->shape[0];
  p.page_stride = in->k_pages->shape[1];
  p.page_size = in->page_size;
  p.ke = (const int32_t *)context_lens->data;
  p.block_table = (const int32_t *)block_table->data;
  p.bt_cols = block_table->shape[1];
  plan_rows(p, (int)in->q_codes->shape[1], true);
  if (p.R == 0 || p.out_cols == 0) return IXL_OK;
  p.nrb = p.R;
  int64_t blocks = 0;
  // a chunk's pages must fit the kernel's prefetch of page ids
  if ((st = plan_chunks(ctx, op, p, p.R, (int64_t)(kMaxChunkBlocks - 2) * p.page_size, &blocks)))
    return st;
  return launch_fmt<DENSE_PAGED>(ctx, p, blocks, in->kv_format, reduction == IXL_REDUCE_BF16,
                                 "dense_logits_paged kernel");
}
