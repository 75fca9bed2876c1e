/* logits/logits.h - what the files of the logits family share: one call of K1, K2 or K5 as a
 * struct (so that every variant takes every mode through one launch function), the CPU body
 * that the `ref` and `fast` variants run, and the CUDA launchers of variant v1.
 *
 * Invariant: a call reaches a variant only after its entry (logits.c, sparse.c) validated every
 * argument that does not need the tensors' contents; host values (ranges, page ids) are checked
 * by the CPU body, device values are clamped by the kernels. */
#ifndef IXL_LOGITS_H
#define IXL_LOGITS_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ixl_logits_mode {
  IXL_LOGITS_DENSE = 0,       /* K1: ragged K, ks/ke per row */
  IXL_LOGITS_DENSE_PAGED = 1, /* K2: paged K, ke = context_lens */
  IXL_LOGITS_SPARSE = 2       /* K5: ragged (ks = row_ks) or paged (in->k_pages set) */
} ixl_logits_mode;

typedef struct ixl_logits_call {
  ixl_logits_mode mode;
  const ixl_qk *in;
  const ixl_tensor *weights;
  ixl_reduction reduction;        /* K5: always bf16 */
  const ixl_tensor *ks;           /* K1 ks, ragged K5 row_ks; NULL otherwise */
  const ixl_tensor *ke;           /* K1 ke, K2 context_lens, K5 row_ke */
  const ixl_tensor *block_table;  /* K2, paged K5 */
  const ixl_tensor *sparse_ids;   /* K5 */
  int sparse_block_kv;            /* K5 */
  ixl_ks_mode ks_mode;            /* K5 */
  ixl_layout layout;              /* K1 */
  int clean;                      /* K1 */
  ixl_tensor *out;
  /* K1 (compressed) / K2 with the fp32 reduction: K3's block scores to emit (NULL: none).
   * Reaches a variant only when its ops' emits_block_scores accepts the problem. */
  ixl_block_scores *bs;
  /* facts the entry's checks established */
  int64_t R, H, N;                /* rows, heads, ragged keys (0 when paged) */
  int64_t num_pages, page_stride; /* paged only */
} ixl_logits_call;

/* Picks the logits variant for the call (kernels/variants.c) and runs it. dev: where the
 * tensors live (IXL_HOST or IXL_DEVICE, from ixl_check_op). */
ixl_status ixl_logits_run(ixl_ctx *ctx, int dev, const ixl_logits_call *c);

/* The CPU body of every mode on the engine path IXL_PATH_REFERENCE or IXL_PATH_FAST
 * (logits.c; K5's in sparse.c). */
ixl_status ixl_logits_cpu(ixl_ctx *ctx, const ixl_logits_call *c, int path);
ixl_status ixl_sparse_logits_cpu(ixl_ctx *ctx, const ixl_logits_call *c, int path);

/* Variant v1 on CUDA (logits/dense.cu: K1 and K2; logits/sparse.cu: K5). max_chunk: the most
 * output columns one CTA takes (a multiple of 128, at most 4096): v1 passes 4096, the
 * test-only v1_alt a smaller one, so that the same kernels run on another grid. With CUDA=0
 * they answer IXL_ERR_BACKEND (logits.c). */
ixl_status ixl_cuda_logits_v1_dense(ixl_ctx *ctx, const ixl_logits_call *c, int max_chunk);
ixl_status ixl_cuda_logits_v1_sparse(ixl_ctx *ctx, const ixl_logits_call *c, int max_chunk);

/* Variant v2 on CUDA (logits/logits_v2_sm90.cu, sm_90a), H 32 or 64: fp8 K1, K2 (fp32 and
 * bf16) and K5 on wgmma + TMA (page size 8, 16, 32 or a multiple of 64); MXFP4 calls go to
 * ixl_cuda_logits_v2_mx; every other call runs v1's kernels (max_chunk 4096). Only in CUDA
 * builds (kernels/variants.c registers it there). */
ixl_status ixl_cuda_logits_v2(ixl_ctx *ctx, const ixl_logits_call *c);
/* v2's MXFP4 side (logits/logits_v2_mx_sm90.cu): K1, K2 and K5 (ragged and paged) on wgmma,
 * bitwise the CPU reference's with the bf16 reduction; a call its kernels cannot take
 * (misaligned tensors, over 2^31 - 1 output columns) runs v1's. */
ixl_status ixl_cuda_logits_v2_mx(ixl_ctx *ctx, const ixl_logits_call *c);

#ifdef __cplusplus
}
#endif
#endif
