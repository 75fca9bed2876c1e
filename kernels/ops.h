/* ops.h - the CUDA side of every dispatching op, listed once. Each public op in idxlab.h
 * validates its arguments once (in its entry, kernels/<family>/<op>.c), then runs the CPU path
 * for host tensors or the ixl_cuda_* twin below for device tensors. The twins take the same,
 * already validated, arguments; they are defined in the family's .cu files, and with CUDA=0
 * by kernels/stubs.c, which answers IXL_ERR_BACKEND. Both the declarations and the stubs are
 * generated from IXL_CUDA_OPS, so a signature is written here and in its .cu file only. The
 * logits family (K1, K2, K5) is not listed: its entry picks a variant from the registry
 * (kernels/variants.h), whose CUDA launchers logits/logits.h declares. */
#ifndef IXL_OPS_H
#define IXL_OPS_H
#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kernels/gen/workload_math.h defines it; the twin takes it by pointer only. */
typedef struct wl_plan wl_plan;

/* X(name, parameters): one entry per twin ixl_cuda_<name>. The context is always the first
 * parameter and is called ctx (the stubs report through it). */
#define IXL_CUDA_OPS(X)                                                                        \
  X(rng_uniform, (ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset))              \
  X(rng_normal, (ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset, float mean,    \
                 float stddev))                                                                \
  X(workload_generate, (ixl_ctx *ctx, const wl_plan *plan, const void *blob, ixl_tensor *q,    \
                        ixl_tensor *weights, ixl_tensor *k, ixl_tensor *q_consumer,            \
                        ixl_tensor *weights_consumer))                                         \
  X(quantize, (ixl_ctx *ctx, ixl_kv_format fmt, ixl_quantizer quantizer, ixl_role role,        \
               const ixl_tensor *x, ixl_tensor *codes, ixl_tensor *scales))                    \
  X(dequantize, (ixl_ctx *ctx, ixl_kv_format fmt, ixl_role role, const ixl_tensor *codes,      \
                 const ixl_tensor *scales, ixl_tensor *out))                                   \
  X(prepare_weights, (ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *weights,              \
                      const ixl_tensor *q_scales, ixl_tensor *dense_f32,                       \
                      ixl_tensor *sparse_bf16))                                                \
  X(kv_pages_write, (ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *codes,                 \
                     const ixl_tensor *scales, int64_t src_start, int64_t count,               \
                     ixl_tensor *pages, int page_size, const ixl_tensor *page_ids))            \
  X(candidate_select, (ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *lens,         \
                       int candidate_block_size, ixl_block_score score, ixl_tensor *out))      \
  X(mask_candidates, (ixl_ctx *ctx, ixl_tensor *logits, const ixl_tensor *lens,                \
                      const ixl_tensor *cand, int candidate_block_size))                       \
  X(expand, (ixl_ctx *ctx, const ixl_tensor *cand, const ixl_tensor *row_ks,                   \
             const ixl_tensor *row_ke, int candidate_block_size, int sparse_block_kv,          \
             ixl_ks_mode ks_mode, ixl_tensor *sparse_ids, ixl_tensor *end))                    \
  X(topk, (ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,                \
           const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out))                     \
  X(topk_v2, (ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,             \
              const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out))                  \
  X(topk_v2_remap, (ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,       \
                    const ixl_tensor *row_end, int k, int sorted, const ixl_tensor *sparse_ids, \
                    const ixl_tensor *row_ks, int sparse_block_kv, ixl_tensor *out))           \
  X(remap, (ixl_ctx *ctx, const ixl_tensor *cols, const ixl_tensor *sparse_ids,                \
            const ixl_tensor *row_ks, int sparse_block_kv, ixl_tensor *out))                   \
  X(gather_cols, (ixl_ctx *ctx, const ixl_tensor *src, const ixl_tensor *idx,                  \
                  ixl_tensor *out))

#define IXL_CUDA_DECLARE(name, params) ixl_status ixl_cuda_##name params;
IXL_CUDA_OPS(IXL_CUDA_DECLARE)
#undef IXL_CUDA_DECLARE

#ifdef __cplusplus
}
#endif
#endif
