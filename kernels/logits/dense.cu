// logits/dense.cu - variant v1 of the logits family, K1 (dense, ragged rows: prefill) and K2
// (dense, paged: decode), and the test-only v1_alt (kernels/variants.c).
//
// What this version does (llm.c's dev/cuda habit: one block per variant):
//   v1      the mma.sync f16 tile engine of logits/logits_v1.cuh (sm_80+, every format and
//           reduction; logits/sparse.cu is its K5). A CTA takes up to 4096 output columns.
//   v1_alt  (test build only) the same kernels on another grid: at most 1024 columns per
//           CTA, so the parity tests show that the chunking does not change a bit.
// Benchmark: bin/idxlab script bench/logits.lua on a CUDA machine (v1 is the default variant;
// BENCHMARKS.md: bash scripts/gpu-test.sh -- bash bench/bench_logits.sh build-gpu 20).
//
// The arguments arrive validated by logits/logits.c.
// K1: a CTA takes RB = 128 / HP consecutive rows (they share most of their K range in a
// prefill chunk) and one chunk of output columns, so each K tile it loads feeds RB * H dot
// products; the row blocks of one chunk are neighbours in the grid, so their K chunk is read
// from HBM about once. K2: a CTA takes one row and one chunk of its positions (rows of a
// decode batch have their own pages), chunks sized so that even one row fills the GPU.
#include "logits/logits.h"
#include "logits/logits_v1.cuh"

using namespace ixl_lg;

// K3's block scores (c->bs, set only when the registry says v1 emits them): the kernel's
// fields, and the preset of logits/block_scores.cuh.
static ixl_status block_scores_prepare(ixl_ctx *ctx, const ixl_logits_call *c, Params &p) {
  const ixl_block_scores *bs = c->bs;
  if (!bs) return IXL_OK;
  p.bs = (float *)bs->scores->data;
  p.bs_nblocks = (int32_t *)bs->nblocks->data;
  p.bs_cols = bs->scores->shape[1];
  p.bs_cbs = bs->candidate_block_size;
  return ixl_bs::preset(ctx, bs, p.R == 0 || p.out_cols == 0, "cudaMemsetAsync (block scores)");
}

static ixl_status dense_ragged(ixl_ctx *ctx, const ixl_logits_call *c, int max_chunk) {
  const char *op = "dense_logits";
  const ixl_qk *in = c->in;
  Params p = {};
  ixl_status st;
  if ((st = fill_query(ctx, op, p, in, c->weights, c->out)) ||
      (st = fill_k_ragged(ctx, op, p, in)) || (st = check_align(ctx, op, c->ks, "ks", 4)) ||
      (st = check_align(ctx, op, c->ke, "ke", 4)))
    return st;
  p.ks = (const int32_t *)c->ks->data;
  p.ke = (const int32_t *)c->ke->data;
  p.compressed = c->layout == IXL_LAYOUT_COMPRESSED;
  p.clean = c->clean != 0;
  plan_rows(p, (int)in->q_codes->shape[1], false);
  if ((st = block_scores_prepare(ctx, c, p))) return st;
  if (p.R == 0 || p.out_cols == 0) return IXL_OK;
  p.nrb = ixl_ceil_div(p.R, p.RB);
  int64_t blocks = 0;
  if ((st = plan_chunks(ctx, op, p, p.nrb, max_chunk, &blocks))) return st;
  return launch_fmt<DENSE_RAGGED>(ctx, p, blocks, in->kv_format,
                                  c->reduction == IXL_REDUCE_BF16, "dense_logits kernel");
}

static ixl_status dense_paged(ixl_ctx *ctx, const ixl_logits_call *c, int max_chunk) {
  const char *op = "dense_logits_paged";
  const ixl_qk *in = c->in;
  Params p = {};
  ixl_status st;
  if ((st = fill_query(ctx, op, p, in, c->weights, c->out)) ||
      (st = fill_k_paged(ctx, op, p, in, c->block_table)) ||
      (st = check_align(ctx, op, c->ke, "context_lens", 4)) ||
      (st = check_align(ctx, op, c->block_table, "block_table", 4)))
    return st;
  p.ke = (const int32_t *)c->ke->data;
  plan_rows(p, (int)in->q_codes->shape[1], true);
  if ((st = block_scores_prepare(ctx, c, p))) return st;
  if (p.R == 0 || p.out_cols == 0) return IXL_OK;
  p.nrb = p.R;
  int64_t blocks = 0;
  // a chunk's pages must fit the kernel's prefetch of page ids
  int64_t cap = (int64_t)(kMaxChunkBlocks - 2) * p.page_size;
  if (cap > max_chunk) cap = max_chunk;
  if ((st = plan_chunks(ctx, op, p, p.R, cap, &blocks))) return st;
  return launch_fmt<DENSE_PAGED>(ctx, p, blocks, in->kv_format,
                                 c->reduction == IXL_REDUCE_BF16, "dense_logits_paged kernel");
}

extern "C" ixl_status ixl_cuda_logits_v1_dense(ixl_ctx *ctx, const ixl_logits_call *c,
                                               int max_chunk) {
  return c->mode == IXL_LOGITS_DENSE ? dense_ragged(ctx, c, max_chunk)
                                     : dense_paged(ctx, c, max_chunk);
}
