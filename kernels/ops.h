/* ops.h - the CUDA side of every dispatching op. Each public op in idxlab.h validates its
 * arguments once (in its *_cpu.c file), then runs the CPU reference for host tensors or the
 * ixl_cuda_* twin below for device tensors. The twins take the same, already validated,
 * arguments. With CUDA=0 they come from kernels/stubs.c and answer IXL_ERR_BACKEND. */
#ifndef IXL_BACKEND_H
#define IXL_BACKEND_H
#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

ixl_status ixl_cuda_rng_uniform(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset);
ixl_status ixl_cuda_rng_normal(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset,
                               float mean, float stddev);
ixl_status ixl_cuda_quantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_quantizer quantizer,
                             ixl_role role, const ixl_tensor *x, ixl_tensor *codes,
                             ixl_tensor *scales);
ixl_status ixl_cuda_dequantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_role role,
                               const ixl_tensor *codes, const ixl_tensor *scales, ixl_tensor *out);
ixl_status ixl_cuda_prepare_weights(ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *weights,
                                    const ixl_tensor *q_scales, ixl_tensor *dense_f32,
                                    ixl_tensor *sparse_bf16);
ixl_status ixl_cuda_kv_pages_write(ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *codes,
                                   const ixl_tensor *scales, int64_t src_start, int64_t count,
                                   ixl_tensor *pages, int page_size, const ixl_tensor *page_ids);
ixl_status ixl_cuda_dense_logits(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                 const ixl_tensor *ks, const ixl_tensor *ke, ixl_layout layout,
                                 int clean, ixl_reduction reduction, ixl_tensor *out);
ixl_status ixl_cuda_dense_logits_paged(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                       const ixl_tensor *context_lens,
                                       const ixl_tensor *block_table, ixl_reduction reduction,
                                       ixl_tensor *out);
ixl_status ixl_cuda_candidate_select(ixl_ctx *ctx, const ixl_tensor *logits,
                                     const ixl_tensor *lens, int candidate_block_size,
                                     ixl_block_score score, ixl_tensor *out);
ixl_status ixl_cuda_expand(ixl_ctx *ctx, const ixl_tensor *cand, const ixl_tensor *row_ks,
                           const ixl_tensor *row_ke, int candidate_block_size, int sparse_block_kv,
                           ixl_ks_mode ks_mode, ixl_tensor *sparse_ids, ixl_tensor *end);
ixl_status ixl_cuda_sparse_logits(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                  const ixl_tensor *row_ks, const ixl_tensor *row_ke,
                                  const ixl_tensor *block_table, const ixl_tensor *sparse_ids,
                                  int sparse_block_kv, ixl_ks_mode ks_mode, ixl_tensor *out);
ixl_status ixl_cuda_topk(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                         const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out);
ixl_status ixl_cuda_remap(ixl_ctx *ctx, const ixl_tensor *cols, const ixl_tensor *sparse_ids,
                          const ixl_tensor *row_ks, int sparse_block_kv, ixl_tensor *out);
ixl_status ixl_cuda_mask_candidates(ixl_ctx *ctx, ixl_tensor *logits, const ixl_tensor *lens,
                                    const ixl_tensor *cand, int candidate_block_size);
ixl_status ixl_cuda_gather_cols(ixl_ctx *ctx, const ixl_tensor *src, const ixl_tensor *idx,
                                ixl_tensor *out);

#ifdef __cplusplus
}
#endif
#endif
