// logits/sparse.cu - variant v1 of the logits family, K5: the sparse logits (ragged and
// paged), and the test-only v1_alt (kernels/variants.c).
//
// What this version does (llm.c's dev/cuda habit: one block per variant):
//   v1      the tile engine of logits/logits_v1.cuh with the bf16 reduction (sm_80+), the same
//           kernel template as K1/K2 in logits/dense.cu. A CTA takes up to 4096 columns.
//   v1_alt  (test build only) at most 1024 columns per CTA: another grid, the same bits.
// Benchmark: bin/idxlab script bench/logits.lua only=k5_ on a CUDA machine (v1 is the
// default variant; BENCHMARKS.md: bash scripts/gpu-test.sh -- bash bench/bench_logits.sh).
//
// The arguments arrive validated by logits/sparse.c.
// A CTA takes one row and one chunk of its sparse columns. Each tile of 128 columns gathers
// its keys (K rows ids[j]*sbk + ks%sbk + o, or page slots of position ids[j]*sbk + o) with
// 16-byte cp.async copies; a sparse block is one contiguous run of sbk * 64 (mxfp4) or
// sbk * 128 bytes, so a warp's copies are coalesced. Columns past the strictly increasing
// prefix of the ids (n_valid, as K4 writes them; the CPU derives `end` the same way) or whose
// key lies outside the row's range are -inf and read nothing, so no id, however wrong, makes
// the kernel read outside K or the row's pages. Numerics: the same bits as K1/K2 with the
// bf16 reduction at the same positions.
#include "logits/logits.h"
#include "logits/logits_v1.cuh"

using namespace ixl_lg;

extern "C" ixl_status ixl_cuda_logits_v1_sparse(ixl_ctx *ctx, const ixl_logits_call *c,
                                                int max_chunk) {
  const char *op = "sparse_logits";
  const ixl_qk *in = c->in;
  const ixl_tensor *weights = c->weights, *row_ks = c->ks, *row_ke = c->ke;
  const ixl_tensor *block_table = c->block_table, *sparse_ids = c->sparse_ids;
  const int sparse_block_kv = c->sparse_block_kv;
  const ixl_ks_mode ks_mode = c->ks_mode;
  ixl_tensor *out = c->out;
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
  if ((st = plan_chunks(ctx, op, p, p.R, max_chunk, &blocks))) return st;
  const char *name = "sparse_logits kernel";
  return paged ? launch_fmt<SPARSE_PAGED>(ctx, p, blocks, in->kv_format, true, name)
               : launch_fmt<SPARSE_RAGGED>(ctx, p, blocks, in->kv_format, true, name);
}
