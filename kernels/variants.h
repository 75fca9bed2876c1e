/* variants.h - the kernel variant registry: every implementation of an op family, by name.
 *
 * A family (logits, select, index, formats, gen) has variants per backend: on the CPU `ref`
 * (the definition) and, where one exists, `fast`; on CUDA v1, v2, ... (v1 is today's kernel,
 * kept as the portable path and the GPU-side oracle). An entry validates its arguments once,
 * then asks ixl_variant_pick for the variant and calls it through the family's ops table.
 *
 * The choice (nothing is timed): the context's pin for the family if it has one, else the
 * last variant of the table, for the tensors' backend, that can run on this machine (CUDA:
 * min_sm; CPU: the instructions it needs) and whose supports() accepts the problem. A pin that
 * cannot run or refuses the problem is an error naming the family, the name and the variants
 * that would run; it never falls back silently.
 *
 * Invariant (SPEC 3's dense/sparse bit equality): supports() sees only the problem, and an
 * entry fills only the fields that every mode of its family knows (-1 for the rest), so one
 * variant runs K1, K2 and K5 of a config, or none of them. */
#ifndef IXL_VARIANTS_H
#define IXL_VARIANTS_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ixl_family {
  IXL_FAMILY_LOGITS = 0, /* K1, K2, K5 */
  IXL_FAMILY_SELECT = 1, /* K3 candidate_select, K6 topk */
  IXL_FAMILY_INDEX = 2,  /* K4 expand, K7 remap, gather_cols (no variants registered yet) */
  IXL_FAMILY_FORMATS = 3,
  IXL_FAMILY_GEN = 4,
  IXL_FAMILY_COUNT = 5
} ixl_family;

/* What a variant may base supports() on: the config fields every mode of a family shares.
 * -1 = not known to this op (the entry does not have it). */
typedef struct ixl_problem {
  int kv_format, quantizer;
  int64_t heads, head_dim, page_size, candidate_block_size, sparse_block_kv;
} ixl_problem;

static inline void ixl_problem_unknown(ixl_problem *p) {
  p->kv_format = p->quantizer = -1;
  p->heads = p->head_dim = p->page_size = p->candidate_block_size = p->sparse_block_kv = -1;
}

typedef struct ixl_variant {
  ixl_family family;
  const char *name;       /* unique in its family; "ref", "fast", "v1", ... */
  ixl_backend backend;    /* IXL_BACKEND_CPU or IXL_BACKEND_CUDA */
  int min_sm;             /* CUDA: lowest compute capability * 10 (80 = sm_80); CPU: 0 */
  int pin_only;           /* 1: never the default (the test-only variants) */
  /* CPU: 1 when this machine runs it (NULL: always); why names what it lacks */
  int (*runs_here)(const char **why);
  int (*supports)(const ixl_problem *p); /* NULL: every problem */
  const void *ops;        /* the family's ops table (ixl_logits_ops, ixl_select_ops) */
  const char *about;      /* one line: what this version does differently */
  /* NULL: the default wherever it supports the problem (unless pin_only); else it is the
   * default only for the problems this returns 1 for, and runs the others only when pinned */
  int (*default_for)(const ixl_problem *p);
} ixl_variant;

/* The logits family's ops: one launch for every mode (logits/logits.h's ixl_logits_call). */
struct ixl_logits_call;
typedef struct ixl_logits_ops {
  ixl_status (*launch)(ixl_ctx *ctx, const struct ixl_logits_call *c);
  /* 1 when K1/K2 of this variant emit K3's block scores (block_score max) for the problem
   * (p->candidate_block_size is the cbs), with the call's bs set; NULL: never (issue 14's
   * fused K3: the step then runs the unfused K3) */
  int (*emits_block_scores)(const ixl_problem *p);
} ixl_logits_ops;

/* The select family's ops: the signatures of the ixl_cuda_* twins (kernels/ops.h). */
typedef struct ixl_select_ops {
  ixl_status (*candidate_select)(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *lens,
                                 int candidate_block_size, ixl_block_score score,
                                 ixl_tensor *out);
  ixl_status (*topk)(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                     const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out);
  /* K6 with K7's remap fused into its store; NULL: ixl_topk_remap runs topk, then ixl_remap */
  ixl_status (*topk_remap)(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                           const ixl_tensor *row_end, int k, int sorted,
                           const ixl_tensor *sparse_ids, const ixl_tensor *row_ks,
                           int sparse_block_kv, ixl_tensor *out);
} ixl_select_ops;

/* The CPU bodies the select family's `ref` runs (select/candidates.c, select/topk.c). */
ixl_status ixl_candidate_select_ref(ixl_ctx *ctx, const ixl_tensor *logits,
                                    const ixl_tensor *lens, int candidate_block_size,
                                    ixl_block_score score, ixl_tensor *out);
ixl_status ixl_topk_ref(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                        const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out);

/* The variant for an op of `family` on tensors living on `dev` (IXL_HOST / IXL_DEVICE), and
 * records it as the family's last-ran variant on ctx. */
ixl_status ixl_variant_pick(ixl_ctx *ctx, ixl_family family, int dev, const ixl_problem *p,
                            const ixl_variant **out);

/* The registry's table (for the tests): *n gets its length. */
const ixl_variant *ixl_variant_table(int *n);
const char *ixl_family_name(ixl_family f);

#ifdef __cplusplus
}
#endif
#endif
