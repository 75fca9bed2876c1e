/* stubs.c - the CUDA twins for a CUDA=0 build: each answers IXL_ERR_BACKEND, so a
 * device tensor on a CPU-only build is a clear error, never a crash. */
#include "ops.h"

#ifndef IXL_WITH_CUDA
ixl_status ixl_cuda_rng_uniform(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset) {
  (void)out; (void)seed; (void)offset;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "rng_uniform: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_rng_normal(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset, float mean, float stddev) {
  (void)out; (void)seed; (void)offset; (void)mean; (void)stddev;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "rng_normal: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_quantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_quantizer quantizer, ixl_role role, const ixl_tensor *x, ixl_tensor *codes, ixl_tensor *scales) {
  (void)fmt; (void)quantizer; (void)role; (void)x; (void)codes; (void)scales;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "quantize: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_dequantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_role role, const ixl_tensor *codes, const ixl_tensor *scales, ixl_tensor *out) {
  (void)fmt; (void)role; (void)codes; (void)scales; (void)out;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "dequantize: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_prepare_weights(ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *weights, const ixl_tensor *q_scales, ixl_tensor *dense_f32, ixl_tensor *sparse_bf16) {
  (void)fmt; (void)weights; (void)q_scales; (void)dense_f32; (void)sparse_bf16;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "prepare_weights: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_kv_pages_write(ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *codes, const ixl_tensor *scales, int64_t src_start, int64_t count, ixl_tensor *pages, int page_size, const ixl_tensor *page_ids) {
  (void)fmt; (void)codes; (void)scales; (void)src_start; (void)count; (void)pages; (void)page_size; (void)page_ids;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "kv_pages_write: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_dense_logits(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights, const ixl_tensor *ks, const ixl_tensor *ke, ixl_layout layout, int clean, ixl_reduction reduction, ixl_tensor *out) {
  (void)in; (void)weights; (void)ks; (void)ke; (void)layout; (void)clean; (void)reduction; (void)out;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "dense_logits: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_dense_logits_paged(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights, const ixl_tensor *context_lens, const ixl_tensor *block_table, ixl_reduction reduction, ixl_tensor *out) {
  (void)in; (void)weights; (void)context_lens; (void)block_table; (void)reduction; (void)out;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "dense_logits_paged: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_candidate_select(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *lens, int candidate_block_size, ixl_block_score score, ixl_tensor *out) {
  (void)logits; (void)lens; (void)candidate_block_size; (void)score; (void)out;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "candidate_select: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_expand(ixl_ctx *ctx, const ixl_tensor *cand, const ixl_tensor *row_ks, const ixl_tensor *row_ke, int candidate_block_size, int sparse_block_kv, ixl_ks_mode ks_mode, ixl_tensor *sparse_ids, ixl_tensor *end) {
  (void)cand; (void)row_ks; (void)row_ke; (void)candidate_block_size; (void)sparse_block_kv; (void)ks_mode; (void)sparse_ids; (void)end;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "expand: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_sparse_logits(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights, const ixl_tensor *row_ks, const ixl_tensor *row_ke, const ixl_tensor *block_table, const ixl_tensor *sparse_ids, int sparse_block_kv, ixl_ks_mode ks_mode, ixl_tensor *out) {
  (void)in; (void)weights; (void)row_ks; (void)row_ke; (void)block_table; (void)sparse_ids; (void)sparse_block_kv; (void)ks_mode; (void)out;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "sparse_logits: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_topk(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start, const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out) {
  (void)logits; (void)row_start; (void)row_end; (void)k; (void)sorted; (void)out;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "topk: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_remap(ixl_ctx *ctx, const ixl_tensor *cols, const ixl_tensor *sparse_ids, const ixl_tensor *row_ks, int sparse_block_kv, ixl_tensor *out) {
  (void)cols; (void)sparse_ids; (void)row_ks; (void)sparse_block_kv; (void)out;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "remap: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_mask_candidates(ixl_ctx *ctx, ixl_tensor *logits, const ixl_tensor *lens, const ixl_tensor *cand, int candidate_block_size) {
  (void)logits; (void)lens; (void)cand; (void)candidate_block_size;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "mask_candidates: device tensors need a CUDA build (this one is CUDA=0)");
}

ixl_status ixl_cuda_gather_cols(ixl_ctx *ctx, const ixl_tensor *src, const ixl_tensor *idx,
                                ixl_tensor *out) {
  (void)src; (void)idx; (void)out;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "gather_cols: device tensors need a CUDA build (this one is CUDA=0)");
}

#endif
