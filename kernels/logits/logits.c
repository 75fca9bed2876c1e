/* logits/logits.c - the entries of K1 (dense logits, ragged) and K2 (dense logits, paged), the
 * argument checks they share with K5 (logits/sparse.c), the hand-off to the variant registry,
 * and the CPU bodies of K1 and K2 that the `ref` and `fast` variants run on the engine
 * (logits/engine.c, engine_avx2.c).
 * Threads: OpenMP over blocks of keys (K1) or (row, block) pairs (K2), ixl_ctx_threads. */
#include "logits/engine.h"
#include "logits/logits.h"
#include "variants.h"

#include <omp.h>
#include <stdlib.h>


/* ---------------------------------------------------------------- shared argument checks */

/* A 2-D tensor whose dtype the reduction fixes (F32 for fp32, BF16 for bf16), with `rows`
 * rows and, when cols >= 0, `cols` columns: the weights and the outputs of K1/K2. */
static ixl_status check_reduction_tensor(ixl_ctx *ctx, const ixl_tensor *t, const char *name,
                                         ixl_reduction reduction, int64_t rows, int64_t cols) {
  ixl_status st;
  int dt = reduction == IXL_REDUCE_FP32 ? IXL_F32 : IXL_BF16;
  if (t && t->dtype != dt)
    return ixl_set_error(ctx, IXL_ERR_DTYPE, "%s: dtype %s, expected %s for the %s reduction", name,
                         ixl_dtype_name((ixl_dtype)t->dtype), ixl_dtype_name((ixl_dtype)dt),
                         reduction == IXL_REDUCE_FP32 ? "fp32" : "bf16");
  if ((st = ixl_check_tensor(ctx, t, name, dt, 2)) || (st = ixl_check_dim(ctx, t, name, 0, rows)))
    return st;
  if (cols >= 0 && (st = ixl_check_dim(ctx, t, name, 1, cols))) return st;
  return IXL_OK;
}

ixl_status ixl_check_query(ixl_ctx *ctx, const char *op, const ixl_qk *in,
                           const ixl_tensor *weights, int reduction, int64_t *R, int64_t *H) {
  ixl_status st;
  if (!in) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s: in (the ixl_qk inputs) is NULL", op);
  int fmt = in->kv_format;
  if (fmt != IXL_MXFP4 && fmt != IXL_MXFP8 && fmt != IXL_FP8)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: kv_format = %d: must be mxfp4 (0), mxfp8 (1) or fp8 (2)", op, fmt);
  if (reduction != IXL_REDUCE_FP32 && reduction != IXL_REDUCE_BF16)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: reduction = %d: must be fp32 (0) or bf16 (1)", op, reduction);
  int vb = ixl_format_value_bytes((ixl_kv_format)fmt);
  if ((st = ixl_check_tensor(ctx, in->q_codes, "q_codes", IXL_U8, 3))) return st;
  if (in->q_codes->shape[2] != vb)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "q_codes: shape[2] = %lld, expected %d (the value bytes of %s)",
                         (long long)in->q_codes->shape[2], vb, ixl_kv_format_name(fmt));
  *R = in->q_codes->shape[0];
  *H = in->q_codes->shape[1];
  if (*H < 4 || *H > 128 || *H % 4)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "q_codes: shape[1] (H) = %lld: must be a multiple of 4 in [4, 128]",
                         (long long)*H);
  if (fmt == IXL_FP8) {
    if (in->q_scales)
      return ixl_set_error(
          ctx, IXL_ERR_INVALID_ARG,
          "q_scales: must be NULL for fp8 (the Q scale is folded into the weights by "
          "ixl_prepare_weights)");
  } else {
    if ((st = ixl_check_tensor(ctx, in->q_scales, "q_scales", IXL_I32, 2)) ||
        (st = ixl_check_dim(ctx, in->q_scales, "q_scales", 0, *R)) ||
        (st = ixl_check_dim(ctx, in->q_scales, "q_scales", 1, *H)))
      return st;
  }
  return check_reduction_tensor(ctx, weights, "weights", reduction, *R, *H);
}

/* Ragged K: k_codes U8 [N, VB] and k_scales [N]; returns N. */
ixl_status ixl_check_ragged_k(ixl_ctx *ctx, const char *op, const ixl_qk *in, int64_t *N) {
  ixl_status st;
  int fmt = in->kv_format, vb = ixl_format_value_bytes((ixl_kv_format)fmt);
  if (in->k_pages)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: k_pages must be NULL for ragged rows (the keys come from k_codes)",
                         op);
  if ((st = ixl_check_tensor(ctx, in->k_codes, "k_codes", IXL_U8, 2))) return st;
  if (in->k_codes->shape[1] != vb)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "k_codes: shape[1] = %lld, expected %d (the value bytes of %s)",
                         (long long)in->k_codes->shape[1], vb, ixl_kv_format_name(fmt));
  *N = in->k_codes->shape[0];
  if ((st = ixl_check_tensor(ctx, in->k_scales, "k_scales", fmt == IXL_FP8 ? IXL_F32 : IXL_I32,
                             1)) ||
      (st = ixl_check_dim(ctx, in->k_scales, "k_scales", 0, *N)))
    return st;
  return IXL_OK;
}

ixl_status ixl_check_pages(ixl_ctx *ctx, const char *op, const ixl_qk *in, int64_t *num_pages,
                           int64_t *stride) {
  ixl_status st;
  int vb = ixl_format_value_bytes((ixl_kv_format)in->kv_format);
  if (in->k_codes || in->k_scales)
    return ixl_set_error(
        ctx, IXL_ERR_INVALID_ARG,
        "%s: k_codes and k_scales must be NULL for paged rows (the keys come from k_pages)", op);
  if ((st = ixl_check_tensor(ctx, in->k_pages, "k_pages", IXL_U8, 2))) return st;
  if (in->page_size <= 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "page_size = %d: must be > 0",
                         (int)in->page_size);
  *num_pages = in->k_pages->shape[0];
  *stride = in->k_pages->shape[1];
  int64_t need = (int64_t)in->page_size * (vb + 4);
  if (*stride < need || *stride % 512)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "k_pages: shape[1] (page stride) = %lld: must be a multiple of 512 and >= "
                         "page_size * %d = %lld",
                         (long long)*stride, vb + 4, (long long)need);
  return IXL_OK;
}

ixl_status ixl_check_block_table(ixl_ctx *ctx, const char *lens_name, const int32_t *lens,
                                 const int32_t *bt, int64_t R, int64_t max_pages, int page_size,
                                 int64_t num_pages) {
  for (int64_t r = 0; r < R; r++) {
    if (lens[r] < 0 || (int64_t)lens[r] > max_pages * page_size)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "%s[%lld] = %d: must be in [0, max_pages * page_size] = [0, %lld] "
                           "(block_table shape[1] = %lld)",
                           lens_name, (long long)r, lens[r], (long long)(max_pages * page_size),
                           (long long)max_pages);
    int64_t used = ixl_ceil_div(lens[r], page_size);
    for (int64_t j = 0; j < used; j++) {
      int32_t p = bt[r * max_pages + j];
      if (p < 0 || p >= num_pages)
        return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                             "block_table[%lld][%lld] = %d: must be in [0, num_pages) = [0, %lld) "
                             "(row %lld uses %lld pages)",
                             (long long)r, (long long)j, p, (long long)num_pages, (long long)r,
                             (long long)used);
    }
  }
  return IXL_OK;
}

ixl_status ixl_check_ranges(ixl_ctx *ctx, const int32_t *ks, const int32_t *ke, int64_t R,
                            int64_t N, const char *ks_name, const char *ke_name) {
  for (int64_t r = 0; r < R; r++) {
    if (ks[r] < 0)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s[%lld] = %d: must be >= 0", ks_name,
                           (long long)r, ks[r]);
    if (ke[r] > N)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "%s[%lld] = %d: must be <= N (%lld), the rows of k_codes", ke_name,
                           (long long)r, ke[r], (long long)N);
    if (ke[r] < ks[r])
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "%s[%lld] = %d < %s[%lld] = %d: a row's range must not be reversed",
                           ke_name, (long long)r, ke[r], ks_name, (long long)r, ks[r]);
  }
  return IXL_OK;
}

/* Every element of a 2-D F32/BF16 output to -inf. */
static void fill_neg_inf(ixl_tensor *out, int threads) {
  (void)threads; /* unused when the compiler ignores OpenMP */
  int64_t n = ixl_tensor_numel(out);
  if (out->dtype == IXL_F32) {
    float *p = out->data;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) p[i] = -INFINITY;
  } else {
    uint16_t *p = out->data;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) p[i] = 0xFF80;
  }
}

static inline void store_logits(ixl_tensor *out, int64_t idx, const float *res, int n) {
  if (out->dtype == IXL_F32) {
    memcpy((float *)out->data + idx, res, sizeof(float) * (size_t)n);
  } else {
    uint16_t *p = (uint16_t *)out->data + idx;
    for (int i = 0; i < n; i++) p[i] = ixl_f32_to_bf16(res[i]); /* exact: res holds bf16 values */
  }
}

/* ---------------------------------------------------------------- dispatch */
ixl_status ixl_logits_run(ixl_ctx *ctx, int dev, const ixl_logits_call *c) {
  /* only what every mode knows: a variant that accepts K1 for a config accepts K5 too */
  ixl_problem pb;
  ixl_problem_unknown(&pb);
  pb.kv_format = c->in->kv_format;
  pb.heads = c->H;
  pb.head_dim = IXL_D;
  const ixl_variant *v;
  ixl_status st = ixl_variant_pick(ctx, IXL_FAMILY_LOGITS, dev, &pb, &v);
  if (st) return st;
  const ixl_logits_ops *ops = (const ixl_logits_ops *)v->ops;
  if (!c->bs) return ops->launch(ctx, c);
  /* the block scores: asked of the variant that runs, with the cbs added to the problem (the
   * pick itself never sees it, so the scores cannot change which variant runs) */
  pb.candidate_block_size = c->bs->candidate_block_size;
  const int emits = ops->emits_block_scores && ops->emits_block_scores(&pb);
  ixl_logits_call cc = *c;
  if (!emits) cc.bs = NULL;
  c->bs->emitted = 0;
  if ((st = ops->launch(ctx, &cc))) return st;
  c->bs->emitted = emits;
  return IXL_OK;
}

/* The block scores of K1/K2 (idxlab.h's ixl_block_scores): shapes and dtypes; rows = R,
 * cols = the logits' columns. Device and overlap checks go with the op's. */
static ixl_status check_block_scores(ixl_ctx *ctx, const char *op, const ixl_block_scores *bs,
                                     ixl_reduction reduction, int64_t R, int64_t cols) {
  ixl_status st;
  if (bs->candidate_block_size < 1)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: block scores' candidate_block_size = %d: must be >= 1", op,
                         (int)bs->candidate_block_size);
  if (reduction != IXL_REDUCE_FP32)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: block scores need the fp32 reduction (K3 scores fp32 logits)", op);
  if ((st = ixl_check_tensor(ctx, bs->scores, "scores", IXL_F32, 2)) ||
      (st = ixl_check_dim(ctx, bs->scores, "scores", 0, R)) ||
      (st = ixl_check_tensor(ctx, bs->nblocks, "nblocks", IXL_I32, 1)) ||
      (st = ixl_check_dim(ctx, bs->nblocks, "nblocks", 0, R)))
    return st;
  const int64_t need = ixl_ceil_div(cols, bs->candidate_block_size);
  if (bs->scores->shape[1] < need)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "scores: shape[1] = %lld, expected >= %lld (ceil(%lld logits columns / "
                         "cbs %d))",
                         (long long)bs->scores->shape[1], (long long)need, (long long)cols,
                         (int)bs->candidate_block_size);
  return IXL_OK;
}

/* ---------------------------------------------------------------- K1 */
ixl_status ixl_dense_logits(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                            const ixl_tensor *ks, const ixl_tensor *ke, ixl_layout layout,
                            int clean, ixl_reduction reduction, ixl_tensor *out) {
  return ixl_dense_logits_scored(ctx, in, weights, ks, ke, layout, clean, reduction, out, NULL);
}

ixl_status ixl_dense_logits_scored(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                   const ixl_tensor *ks, const ixl_tensor *ke, ixl_layout layout,
                                   int clean, ixl_reduction reduction, ixl_tensor *out,
                                   ixl_block_scores *bs) {
  ixl_status st;
  int64_t R = 0, H = 0, N = 0;
  if ((st = ixl_check_query(ctx, "dense_logits", in, weights, reduction, &R, &H)) ||
      (st = ixl_check_ragged_k(ctx, "dense_logits", in, &N)))
    return st;
  if ((st = ixl_check_tensor(ctx, ks, "ks", IXL_I32, 1)) ||
      (st = ixl_check_dim(ctx, ks, "ks", 0, R)) ||
      (st = ixl_check_tensor(ctx, ke, "ke", IXL_I32, 1)) ||
      (st = ixl_check_dim(ctx, ke, "ke", 0, R)))
    return st;
  if (layout != IXL_LAYOUT_FULL && layout != IXL_LAYOUT_COMPRESSED)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "layout = %d: must be full (0) or compressed (1)", (int)layout);
  if ((st = check_reduction_tensor(ctx, out, "out", reduction, R, -1))) return st;
  if (layout == IXL_LAYOUT_FULL && out->shape[1] != N)
    return ixl_set_error(
        ctx, IXL_ERR_SHAPE,
        "out: shape[1] = %lld, expected N = %lld (the rows of k_codes) in the full layout",
        (long long)out->shape[1], (long long)N);
  if (bs) {
    if (layout != IXL_LAYOUT_COMPRESSED)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "dense_logits: block scores need the compressed layout (K3's "
                           "columns are request-local positions)");
    if ((st = check_block_scores(ctx, "dense_logits", bs, reduction, R, out->shape[1])))
      return st;
  }
  const ixl_tensor *all[] = {in->q_codes, in->q_scales, in->k_codes, in->k_scales, weights, ks,
                             ke,          out,          bs ? bs->scores : NULL,
                             bs ? bs->nblocks : NULL};
  const char *names[] = {"q_codes", "q_scales", "k_codes", "k_scales", "weights",
                         "ks",      "ke",       "out",     "scores",   "nblocks"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, bs ? 10 : 8, all, names, 7)))
    return st;
  ixl_logits_call c = {.mode = IXL_LOGITS_DENSE, .in = in, .weights = weights,
                       .reduction = reduction, .ks = ks, .ke = ke, .layout = layout,
                       .clean = clean, .out = out, .bs = bs, .R = R, .H = H, .N = N};
  return ixl_logits_run(ctx, dev, &c);
}

static ixl_status dense_cpu(ixl_ctx *ctx, const ixl_logits_call *c, int path) {
  ixl_status st;
  const ixl_qk *in = c->in;
  const ixl_tensor *weights = c->weights, *ks = c->ks, *ke = c->ke;
  const ixl_layout layout = c->layout;
  const ixl_reduction reduction = c->reduction;
  ixl_tensor *out = c->out;
  const int64_t R = c->R, N = c->N;
  /* c->clean is not read: the CPU always writes -inf outside [ks, ke) (SPEC leaves it open
   * unclean) */
  const int32_t *ksp = ks->data, *kep = ke->data;
  if ((st = ixl_check_ranges(ctx, ksp, kep, R, N, "ks", "ke"))) return st;
  const int64_t max_len = out->shape[1];
  if (layout == IXL_LAYOUT_COMPRESSED)
    for (int64_t r = 0; r < R; r++)
      if (kep[r] - ksp[r] > max_len)
        return ixl_set_error(
            ctx, IXL_ERR_SHAPE,
            "ke[%lld] - ks[%lld] = %d: must be <= max_len = %lld (out shape[1]) in "
            "the compressed layout",
            (long long)r, (long long)r, kep[r] - ksp[r], (long long)max_len);
  const int threads = ixl_ctx_threads(ctx);
  fill_neg_inf(out, threads);
  if (R == 0 || N == 0) return IXL_OK;
  ixl_engine *e;
  if ((st = ixl_engine_new(ctx, in->kv_format, reduction, in->q_codes, in->q_scales, weights,
                           threads, path, &e)))
    return st;
  const int64_t vb = in->k_codes->shape[1];
  const uint8_t *kc = in->k_codes->data;
  const uint8_t *ksc = in->k_scales->data;
  const int64_t cr = ixl_engine_chunk_rows(e);
  for (int64_t r0 = 0; r0 < R; r0 += cr) {
    int64_t nr = R - r0 < cr ? R - r0 : cr;
    int64_t lo = N, hi = 0;
    for (int64_t r = r0; r < r0 + nr; r++)
      if (kep[r] > ksp[r]) {
        lo = ksp[r] < lo ? ksp[r] : lo;
        hi = kep[r] > hi ? kep[r] : hi;
      }
    if (lo >= hi) continue;
    ixl_engine_load_rows(e, r0, nr);
    const int64_t b0 = lo / IXL_KBLOCK, b1 = (hi - 1) / IXL_KBLOCK;
#pragma omp parallel num_threads(threads)
    {
      const int tid = omp_get_thread_num();
      ixl_kref keys[IXL_KBLOCK];
      float res[IXL_KBLOCK];
#pragma omp for schedule(dynamic, 1)
      for (int64_t b = b0; b <= b1; b++) {
        const int64_t n0 = b * IXL_KBLOCK, n1 = n0 + IXL_KBLOCK < N ? n0 + IXL_KBLOCK : N;
        int used = 0;
        for (int64_t r = r0; r < r0 + nr && !used; r++) used = ksp[r] < n1 && kep[r] > n0;
        if (!used) continue;
        for (int64_t n = n0; n < n1; n++) {
          keys[n - n0].codes = kc + n * vb;
          keys[n - n0].scale = ksc + n * 4;
        }
        ixl_engine_pack(e, tid, keys, (int)(n1 - n0));
        for (int64_t r = r0; r < r0 + nr; r++) {
          int64_t a = ksp[r] > n0 ? ksp[r] : n0, z = kep[r] < n1 ? kep[r] : n1;
          if (a >= z) continue;
          ixl_engine_row(e, tid, r, (int)(a - n0), (int)(z - n0), res);
          int64_t col = layout == IXL_LAYOUT_FULL ? a : a - ksp[r];
          store_logits(out, r * max_len + col, res, (int)(z - a));
        }
      }
    }
  }
  return IXL_OK;
}

/* ---------------------------------------------------------------- K2 */
ixl_status ixl_dense_logits_paged(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                  const ixl_tensor *context_lens, const ixl_tensor *block_table,
                                  ixl_reduction reduction, ixl_tensor *out) {
  return ixl_dense_logits_paged_scored(ctx, in, weights, context_lens, block_table, reduction,
                                       out, NULL);
}

ixl_status ixl_dense_logits_paged_scored(ixl_ctx *ctx, const ixl_qk *in,
                                         const ixl_tensor *weights,
                                         const ixl_tensor *context_lens,
                                         const ixl_tensor *block_table, ixl_reduction reduction,
                                         ixl_tensor *out, ixl_block_scores *bs) {
  ixl_status st;
  int64_t R = 0, H = 0, num_pages = 0, stride = 0;
  if ((st = ixl_check_query(ctx, "dense_logits_paged", in, weights, reduction, &R, &H)) ||
      (st = ixl_check_pages(ctx, "dense_logits_paged", in, &num_pages, &stride)))
    return st;
  if ((st = ixl_check_tensor(ctx, context_lens, "context_lens", IXL_I32, 1)) ||
      (st = ixl_check_dim(ctx, context_lens, "context_lens", 0, R)) ||
      (st = ixl_check_tensor(ctx, block_table, "block_table", IXL_I32, 2)) ||
      (st = ixl_check_dim(ctx, block_table, "block_table", 0, R)))
    return st;
  if ((st = check_reduction_tensor(ctx, out, "out", reduction, R, -1))) return st;
  if (bs && (st = check_block_scores(ctx, "dense_logits_paged", bs, reduction, R, out->shape[1])))
    return st;
  const ixl_tensor *all[] = {in->q_codes, in->q_scales, in->k_pages, weights, context_lens,
                             block_table, out,          bs ? bs->scores : NULL,
                             bs ? bs->nblocks : NULL};
  const char *names[] = {"q_codes",     "q_scales", "k_pages", "weights", "context_lens",
                         "block_table", "out",      "scores",  "nblocks"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, bs ? 9 : 7, all, names, 6)))
    return st;
  ixl_logits_call c = {.mode = IXL_LOGITS_DENSE_PAGED, .in = in, .weights = weights,
                       .reduction = reduction, .ke = context_lens, .block_table = block_table,
                       .out = out, .bs = bs, .R = R, .H = H, .num_pages = num_pages,
                       .page_stride = stride};
  return ixl_logits_run(ctx, dev, &c);
}

static ixl_status dense_paged_cpu(ixl_ctx *ctx, const ixl_logits_call *c, int path) {
  ixl_status st;
  const ixl_qk *in = c->in;
  const ixl_tensor *weights = c->weights, *context_lens = c->ke, *block_table = c->block_table;
  const ixl_reduction reduction = c->reduction;
  ixl_tensor *out = c->out;
  const int64_t R = c->R, num_pages = c->num_pages, stride = c->page_stride;

  const int32_t *lens = context_lens->data, *bt = block_table->data;
  const int64_t max_pages = block_table->shape[1], max_len = out->shape[1];
  const int P = in->page_size;
  if ((st = ixl_check_block_table(ctx, "context_lens", lens, bt, R, max_pages, P, num_pages)))
    return st;
  for (int64_t r = 0; r < R; r++)
    if (lens[r] > max_len)
      return ixl_set_error(ctx, IXL_ERR_SHAPE,
                           "context_lens[%lld] = %d: must be <= max_len = %lld (out shape[1])",
                           (long long)r, lens[r], (long long)max_len);
  const int threads = ixl_ctx_threads(ctx);
  fill_neg_inf(out, threads);
  if (R == 0) return IXL_OK;
  ixl_engine *e;
  if ((st = ixl_engine_new(ctx, in->kv_format, reduction, in->q_codes, in->q_scales, weights,
                           threads, path, &e)))
    return st;
  const int64_t vb = ixl_format_value_bytes((ixl_kv_format)in->kv_format);
  const uint8_t *pages = in->k_pages->data;
  const int64_t cr = ixl_engine_chunk_rows(e);
  /* tasks are (row, block of positions); first[i] = the first task of row r0 + i */
  int64_t *first, first_bytes = (cr + 1) * (int64_t)sizeof(int64_t);
  if ((st = ixl_ctx_scratch(ctx, IXL_WS_PREFIX_SLOT, first_bytes, IXL_HOST, (void **)&first)))
    return st;
  for (int64_t r0 = 0; r0 < R; r0 += cr) {
    int64_t nr = R - r0 < cr ? R - r0 : cr;
    first[0] = 0;
    for (int64_t i = 0; i < nr; i++)
      first[i + 1] = first[i] + ixl_ceil_div(lens[r0 + i], IXL_KBLOCK);
    const int64_t ntask = first[nr];
    if (ntask == 0) continue;
    ixl_engine_load_rows(e, r0, nr);
#pragma omp parallel num_threads(threads)
    {
      const int tid = omp_get_thread_num();
      ixl_kref keys[IXL_KBLOCK];
      float res[IXL_KBLOCK];
      /* no assumption on the order a thread gets its tasks (dynamic is nonmonotonic) */
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < ntask; t++) {
        int64_t lo = 0, hi = nr; /* the row i with first[i] <= t < first[i + 1] */
        while (hi - lo > 1) {
          int64_t mid = (lo + hi) / 2;
          if (first[mid] <= t) lo = mid;
          else hi = mid;
        }
        const int64_t row = r0 + lo;
        const int64_t p0 = (t - first[lo]) * IXL_KBLOCK;
        const int64_t p1 = p0 + IXL_KBLOCK < lens[row] ? p0 + IXL_KBLOCK : lens[row];
        for (int64_t p = p0; p < p1; p++) {
          const uint8_t *base = pages + (int64_t)bt[row * max_pages + p / P] * stride;
          keys[p - p0].codes = base + (p % P) * vb;
          keys[p - p0].scale = base + (int64_t)P * vb + (p % P) * 4;
        }
        ixl_engine_pack(e, tid, keys, (int)(p1 - p0));
        ixl_engine_row(e, tid, row, 0, (int)(p1 - p0), res);
        store_logits(out, row * max_len + p0, res, (int)(p1 - p0));
      }
    }
  }
  return IXL_OK;
}

ixl_status ixl_logits_cpu(ixl_ctx *ctx, const ixl_logits_call *c, int path) {
  switch (c->mode) {
    case IXL_LOGITS_DENSE: return dense_cpu(ctx, c, path);
    case IXL_LOGITS_DENSE_PAGED: return dense_paged_cpu(ctx, c, path);
    case IXL_LOGITS_SPARSE: return ixl_sparse_logits_cpu(ctx, c, path);
  }
  return ixl_set_error(ctx, IXL_ERR_INTERNAL, "logits: mode %d: not a logits mode", (int)c->mode);
}

#ifndef IXL_WITH_CUDA
/* CUDA=0: device tensors cannot exist, but the registry lists v1 on every build. */
ixl_status ixl_cuda_logits_v1_dense(ixl_ctx *ctx, const ixl_logits_call *c, int max_chunk) {
  (void)max_chunk;
  return ixl_set_error(ctx, IXL_ERR_BACKEND,
                       "%s: device tensors need a CUDA build (this one is CUDA=0)",
                       c->mode == IXL_LOGITS_DENSE ? "dense_logits" : "dense_logits_paged");
}
ixl_status ixl_cuda_logits_v1_sparse(ixl_ctx *ctx, const ixl_logits_call *c, int max_chunk) {
  (void)c, (void)max_chunk;
  return ixl_set_error(ctx, IXL_ERR_BACKEND,
                       "sparse_logits: device tensors need a CUDA build (this one is CUDA=0)");
}
#endif
