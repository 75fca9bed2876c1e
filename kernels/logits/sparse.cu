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
  Params p = {};
  ixl_status st;
  const bool paged = in->k_pages != NULL;
  if ((st = fill_query(ctx, op, p, in, c->weights, c->out)) ||
      (st = check_align(ctx, op, c->ks, "row_ks", 4)) ||
      (st = check_align(ctx, op, c->ke, "row_ke", 4)) ||
      (st = check_align(ctx, op, c->sparse_ids, "sparse_ids", 4)))
    return st;
  if (paged) {
    if ((st = fill_k_paged(ctx, op, p, in, c->block_table)) ||
        (st = check_align(ctx, op, c->block_table, "block_table", 4)))
      return st;
  } else {
    if ((st = fill_k_ragged(ctx, op, p, in))) return st;
    p.ks = (const int32_t *)c->ks->data;
  }
  p.ke = (const int32_t *)c->ke->data;
  p.sparse_ids = (const int32_t *)c->sparse_ids->data;
  p.nsb = c->sparse_ids->shape[1];
  p.sbk = c->sparse_block_kv;
  p.aligned = c->ks_mode == IXL_KS_ALIGNED;
  plan_rows(p, (int)in->q_codes->shape[1], true);
  if (p.R == 0 || p.out_cols == 0) return IXL_OK;
  p.nrb = p.R;
  int64_t blocks = 0;
  if ((st = plan_chunks(ctx, op, p, p.R, max_chunk, &blocks))) return st;
  const char *name = "sparse_logits kernel";
  return paged ? launch_fmt<SPARSE_PAGED>(ctx, p, blocks, in->kv_format, true, name)
               : launch_fmt<SPARSE_RAGGED>(ctx, p, blocks, in->kv_format, true, name);
}
