// logits/sparse.cu - K5, the sparse logits (ragged and paged) on the GPU. The arguments
// arrive validated by kernels/sparse_logits_cpu.c; the kernel is the tile engine of
// logits/logits_v1.cuh with the bf16 reduction.
//
// A CTA takes one row and one chunk of its sparse columns. Each tile of 128 columns gathers
// its keys (K rows ids[j]*sbk + ks%sbk + o, or page slots of position ids[j]*sbk + o) with
// 16-byte cp.async copies; a sparse block is one contiguous run of sbk * 64 (mxfp4) or
// sbk * 128 bytes, so a warp's copies are coalesced. Columns past the strictly increasing
// prefix of the ids (n_valid, as K4 writes them; the CPU derives `end` the same way) or whose
// key lies outside the row's range are -inf and read nothing, so no id, however wrong, makes
// the kernel read outside K or the row's pages. Numerics: the same bits as K1/K2 with the
// bf16 reduction at the same positions.
#include "logits/logits_v1.cuh"

using namespace ixl_lg;

extern "C" ixl_status ixl_cuda_sparse_logits(ixl_ctx *ctx, const ixl_qk *in,
                                             const ixl_tensor *weights, const ixl_tensor *row_ks,
                                             const ixl_tensor *row_ke,
                                             const ixl_tensor *block_table,
                                             const ixl_tensor *sparse_ids, int sparse_block_kv,
                                             ixl_ks_mode ks_mode, ixl_tensor *out) {
  const char *op = "sparse_logits";
  Params p = {};
  ixl_status st;
  const bool paged = in->k_pages != NULL;
  if ((st = fill_query(ctx, op, p, in, weights, out)) ||
      (st = check_align(ctx, op, row_ks, "row_ks", 4)) ||
      (st = check_align(ctx, op, row_ke, "row_ke", 4)) ||
      (st = check_align(ctx, op, sparse_ids, "sparse_ids", 4)))
    return st;
  if (paged) {
    if ((st = check_align(ctx, op, in->k_pages, "k_pages", 16)) ||
        (st = check_align(ctx, op, block_table, "block_table", 4)))
      return st;
    p.k_pages = (const uint8_t *)in->k_pages->data;
    p.num_pages = in->k_pages->shape[0];
    p.page_stride = in->k_pages->shape[1];
    p.page_size = in->page_size;
    p.block_table = (const int32_t *)block_table->data;
    p.bt_cols = block_table->shape[1];
  } else {
    if ((st = check_align(ctx, op, in->k_codes, "k_codes", 16)) ||
        (st = check_align(ctx, op, in->k_scales, "k_scales", 4)))
      return st;
    p.k_codes = (const uint8_t *)in->k_codes->data;
    p.k_scales = (const uint8_t *)in->k_scales->data;
    p.N = in->k_codes->shape[0];
    p.ks = (const int32_t *)row_ks->data;
  }
  p.ke = (const int32_t *)row_ke->data;
  p.sparse_ids = (const int32_t *)sparse_ids->data;
  p.nsb = sparse_ids->shape[1];
  p.sbk = sparse_block_kv;
  p.aligned = ks_mode == IXL_KS_ALIGNED;
  plan_rows(p, (int)in->q_codes->shape[1], true);
  if (p.R == 0 || p.out_cols == 0) return IXL_OK;
  p.nrb = p.R;
  int64_t blocks = 0;
  if ((st = plan_chunks(ctx, op, p, p.R, kMaxChunk, &blocks))) return st;
  return paged ? launch_fmt<SPARSE_PAGED>(ctx, p, blocks, in->kv_format, true, "sparse_logits kernel")
               : launch_fmt<SPARSE_RAGGED>(ctx, p, blocks, in->kv_format, true, "sparse_logits kernel");
}
