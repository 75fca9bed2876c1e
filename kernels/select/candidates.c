/* candidates_cpu.c - K3 candidate selection (SPEC 3) and the comparison path's candidate
 * mask, on the CPU. The definition the GPU is checked against.
 *
 * K3, per row of visible length len: nblocks = ceil(len / cbs); block b scores its fp32
 * logits over [b*cbs, min((b+1)*cbs, len)) with the chosen block_score; the newest block
 * scores +inf (a NaN score stays NaN, which orders above +inf anyway); the top min(T, nblocks)
 * blocks are written in the order (score descending, block id ascending), NaN above +inf
 * above every number, then -1 pads.
 *
 * Block scores, fixed so that every backend gets the same floats:
 * - max: fp32 max; any NaN makes the score NaN;
 * - sum: the values added in double in increasing position order, then rounded to fp32;
 * - mean: that double sum divided by the count in double, then rounded to fp32;
 * - logsumexp: m = max (NaN propagates); m = +-inf gives m; otherwise
 *   m + log(sum exp(x - m)) in double, then rounded to fp32. The GPU uses the same formula in
 *   double, so libm differences of an ulp can only matter at near-ties of two blocks. */
#include "ops.h"
#include "select/radix_ref.h"
#include "variants.h"

#include <math.h>
#include <omp.h>
#include <string.h>

static float block_score(const float *x, int64_t n, ixl_block_score how) {
  if (how == IXL_SCORE_SUM || how == IXL_SCORE_MEAN) {
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += x[i];
    return how == IXL_SCORE_SUM ? (float)acc : (float)(acc / (double)n);
  }
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(x[i])) return NAN;
    if (x[i] > m) m = x[i];
  }
  if (how == IXL_SCORE_MAX || isinf(m)) return m;
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - (double)m);
  return (float)((double)m + log(s));
}

/* lens are data: checked before anything is written. *max_blocks gets the most blocks of
 * any row. */
static ixl_status check_lens(ixl_ctx *ctx, const ixl_tensor *lens, int64_t R, int64_t C, int cbs,
                             int64_t *max_blocks) {
  const int32_t *len = (const int32_t *)lens->data;
  int64_t most = 0;
  for (int64_t r = 0; r < R; r++) {
    if (len[r] < 0 || len[r] > C)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "lens[%lld] = %d: must be in [0, C] (C = %lld, the columns of logits)",
                           (long long)r, len[r], (long long)C);
    int64_t nb = ixl_ceil_div(len[r], cbs);
    if (nb > most) most = nb;
  }
  *max_blocks = most;
  return IXL_OK;
}

static int thread_count(ixl_ctx *ctx, int64_t rows) {
  int nt = ixl_ctx_threads(ctx);
  if (nt > rows) nt = (int)rows;
  return nt < 1 ? 1 : nt;
}

static ixl_status candidate_select_cpu(ixl_ctx *ctx, const ixl_tensor *logits,
                                       const ixl_tensor *lens, int cbs, ixl_block_score how,
                                       ixl_tensor *out) {
  const int64_t R = logits->shape[0], C = logits->shape[1], T = out->shape[1];
  int64_t max_blocks;
  ixl_status st = check_lens(ctx, lens, R, C, cbs, &max_blocks);
  if (st) return st;
  if (R == 0 || T == 0) return IXL_OK;

  const int nt = thread_count(ctx, R);
  /* Per thread: the block keys, then ixl_select_top's scratch, and one spare word so the
   * allocation is never empty. */
  int64_t sel = ixl_select_top_scratch_words(max_blocks, T), words, bytes;
  if (sel < 0 || !ixl_add_ok(sel, max_blocks + 1, &words) || !ixl_mul_ok(words, nt, &bytes) ||
      !ixl_mul_ok(bytes, (int64_t)sizeof(uint32_t), &bytes))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                         "candidate_select: scratch for %lld blocks, T = %lld, %d threads "
                         "overflows",
                         (long long)max_blocks, (long long)T, nt);
  uint32_t *scratch;
  if ((st = ixl_ctx_scratch(ctx, 0, bytes, IXL_HOST, (void **)&scratch))) return st;

  const int32_t *len = (const int32_t *)lens->data;
#pragma omp parallel num_threads(nt)
  {
    uint32_t *keys = scratch + (int64_t)omp_get_thread_num() * words;
#pragma omp for schedule(dynamic, 1)
    for (int64_t r = 0; r < R; r++) {
      const int64_t n = len[r], nb = ixl_ceil_div(n, cbs);
      for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = b * cbs, hi = lo + cbs < n ? lo + cbs : n;
        const float *x = (const float *)logits->data + r * C + lo;
        keys[b] = ixl_order_key_f32(block_score(x, hi - lo, how));
      }
      /* The newest block is always kept; a NaN score already sits above +inf. */
      if (nb > 0 && keys[nb - 1] != 0xffffffffu) keys[nb - 1] = ixl_order_key_f32(INFINITY);
      int32_t *o = (int32_t *)out->data + r * T;
      int64_t kept = ixl_select_top(keys, nb, T, 1, o, keys + max_blocks);
      for (int64_t j = kept; j < T; j++) o[j] = -1;
    }
  }
  return IXL_OK;
}

ixl_status ixl_candidate_select(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *lens,
                                int candidate_block_size, ixl_block_score score, ixl_tensor *out) {
  ixl_status st;
  if ((st = ixl_check_tensor(ctx, logits, "logits", IXL_F32, 2))) return st;
  const int64_t R = logits->shape[0];
  if ((st = ixl_check_tensor(ctx, lens, "lens", IXL_I32, 1))) return st;
  if ((st = ixl_check_dim(ctx, lens, "lens", 0, R))) return st;
  if ((st = ixl_check_tensor(ctx, out, "out", IXL_I32, 2))) return st;
  if ((st = ixl_check_dim(ctx, out, "out", 0, R))) return st;
  if (candidate_block_size < 1)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "candidate_block_size = %d: must be >= 1",
                         candidate_block_size);
  if ((int)score < IXL_SCORE_MAX || (int)score > IXL_SCORE_LOGSUMEXP)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "block_score = %d: must be max (0), mean (1), sum (2) or logsumexp (3)",
                         (int)score);
  const ixl_tensor *ts[] = {logits, lens, out};
  const char *names[] = {"logits", "lens", "out"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 3, ts, names, 2)))
    return st;
  ixl_problem pb; /* K3 knows candidate_block_size; K6 (topk.c) knows no config field */
  ixl_problem_unknown(&pb);
  pb.candidate_block_size = candidate_block_size;
  const ixl_variant *v;
  if ((st = ixl_variant_pick(ctx, IXL_FAMILY_SELECT, dev, &pb, &v))) return st;
  return ((const ixl_select_ops *)v->ops)
      ->candidate_select(ctx, logits, lens, candidate_block_size, score, out);
}

/* The select family's `ref` (kernels/variants.c). */
ixl_status ixl_candidate_select_ref(ixl_ctx *ctx, const ixl_tensor *logits,
                                    const ixl_tensor *lens, int candidate_block_size,
                                    ixl_block_score score, ixl_tensor *out) {
  return candidate_select_cpu(ctx, logits, lens, candidate_block_size, score, out);
}

/* ---------------------------------------------------------------- the candidate mask */

/* Sets columns [from, to) of row r to -inf. */
static void fill_neg_inf(ixl_tensor *logits, int64_t r, int64_t from, int64_t to) {
  const int64_t C = logits->shape[1];
  if (from >= to) return; /* also keeps a NULL data pointer (C = 0) out of arithmetic */
  if (logits->dtype == IXL_BF16) {
    uint16_t *x = (uint16_t *)logits->data + r * C;
    for (int64_t j = from; j < to; j++) x[j] = 0xff80; /* bf16 -inf */
  } else {
    float *x = (float *)logits->data + r * C;
    for (int64_t j = from; j < to; j++) x[j] = -INFINITY;
  }
}

static ixl_status mask_candidates_cpu(ixl_ctx *ctx, ixl_tensor *logits, const ixl_tensor *lens,
                                      const ixl_tensor *cand, int cbs) {
  const int64_t R = logits->shape[0], C = logits->shape[1], T = cand->shape[1];
  int64_t max_blocks;
  ixl_status st = check_lens(ctx, lens, R, C, cbs, &max_blocks);
  if (st) return st;
  if (R == 0) return IXL_OK;

  const int nt = thread_count(ctx, R);
  /* One spare byte per thread keeps the allocation non-empty. */
  const int64_t stride = max_blocks + 1;
  int64_t bytes;
  if (!ixl_mul_ok(stride, nt, &bytes))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                         "mask_candidates: scratch for %lld blocks overflows",
                         (long long)max_blocks);
  uint8_t *scratch;
  if ((st = ixl_ctx_scratch(ctx, 0, bytes, IXL_HOST, (void **)&scratch))) return st;

  const int32_t *len = (const int32_t *)lens->data;
#pragma omp parallel num_threads(nt)
  {
    uint8_t *keep = scratch + (int64_t)omp_get_thread_num() * stride;
#pragma omp for schedule(dynamic, 1)
    for (int64_t r = 0; r < R; r++) {
      const int64_t n = len[r], nb = ixl_ceil_div(n, cbs);
      if (nb > 0) memset(keep, 0, (size_t)nb);
      /* -1 pads and garbage ids (negative, past the row) keep nothing. T = 0 leaves cand
       * without data: no arithmetic on NULL. */
      const int32_t *c = T ? (const int32_t *)cand->data + r * T : NULL;
      for (int64_t t = 0; t < T; t++)
        if (c[t] >= 0 && c[t] < nb) keep[c[t]] = 1;
      for (int64_t b = 0; b < nb; b++)
        if (!keep[b]) fill_neg_inf(logits, r, b * cbs, (b + 1) * cbs < n ? (b + 1) * cbs : n);
      fill_neg_inf(logits, r, n, C);
    }
  }
  return IXL_OK;
}

ixl_status ixl_mask_candidates(ixl_ctx *ctx, ixl_tensor *logits, const ixl_tensor *lens,
                               const ixl_tensor *cand, int candidate_block_size) {
  ixl_status st;
  if ((st = ixl_check_tensor(ctx, logits, "logits", -1, 2))) return st;
  if (logits->dtype != IXL_F32 && logits->dtype != IXL_BF16)
    return ixl_set_error(ctx, IXL_ERR_DTYPE, "logits: dtype %s, expected f32 or bf16",
                         ixl_dtype_name((ixl_dtype)logits->dtype));
  const int64_t R = logits->shape[0];
  if ((st = ixl_check_tensor(ctx, lens, "lens", IXL_I32, 1))) return st;
  if ((st = ixl_check_dim(ctx, lens, "lens", 0, R))) return st;
  if ((st = ixl_check_tensor(ctx, cand, "cand", IXL_I32, 2))) return st;
  if ((st = ixl_check_dim(ctx, cand, "cand", 0, R))) return st;
  if (candidate_block_size < 1)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "candidate_block_size = %d: must be >= 1",
                         candidate_block_size);
  const ixl_tensor *ts[] = {logits, lens, cand};
  const char *names[] = {"logits", "lens", "cand"};
  int dev;
  if ((st = ixl_check_same_device(ctx, &dev, 3, ts, names))) return st;
  /* logits is masked in place; lens and cand are read while it is written. */
  if ((st = ixl_check_disjoint(ctx, logits, "logits", lens, "lens")) ||
      (st = ixl_check_disjoint(ctx, logits, "logits", cand, "cand")))
    return st;
  if (dev == IXL_DEVICE)
    return ixl_cuda_mask_candidates(ctx, logits, lens, cand, candidate_block_size);
  return mask_candidates_cpu(ctx, logits, lens, cand, candidate_block_size);
}
