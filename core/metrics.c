/* metrics.c - what SPEC 6 measures, as per-row statistics over host position lists and
 * logits (host tensors only; gather_cols, which brings compared values together on either
 * backend, is in kernels/index/gather.c). Set operations sort small per-row copies, so they are
 * exact and do not depend on the order the kernels emit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "tensor_check.h"

/* Position lists take [R] or [R, k]; per-row values (counts, valid, end, mismatches: one
 * number a row) take exactly [R]. */
enum { ROWS_LIST = 0, ROWS_PER_ROW = 1 };

static ixl_status check_rows_i32(ixl_ctx *ctx, const ixl_tensor *t, const char *name, int64_t rows,
                                 int per_row) {
  ixl_status st = ixl_check_tensor(ctx, t, name, IXL_I32, -1);
  if (st) return st;
  if (per_row && t->ndim != 1)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "%s: %d dims, expected [R] (one value per row)", name,
                         t->ndim);
  if (t->ndim < 1 || t->ndim > 2)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "%s: %d dims, expected [R] or [R, k]", name, t->ndim);
  if (rows >= 0 && t->shape[0] != rows)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "%s: shape[0] = %lld, expected %lld rows", name,
                         (long long)t->shape[0], (long long)rows);
  if (t->device != IXL_HOST)
    return ixl_set_error(ctx, IXL_ERR_BACKEND, "%s: metrics take host tensors", name);
  return IXL_OK;
}

static int64_t row_width(const ixl_tensor *t) { return t->ndim == 2 ? t->shape[1] : 1; }

/* Row r of a [R, k] list; NULL when k == 0 (the tensor may have no data then, and C allows
 * no arithmetic on a NULL pointer). */
static const int32_t *row_i32(const ixl_tensor *t, int64_t r, int64_t k) {
  return k > 0 ? (const int32_t *)t->data + r * k : NULL;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Copies the valid (>= 0) entries of a row, sorted and deduplicated; returns the count. */
static int64_t sorted_valid(const int32_t *row, int64_t k, int32_t *buf) {
  if (k <= 0) return 0; /* row and buf may be NULL */
  int64_t n = 0;
  for (int64_t j = 0; j < k; j++)
    if (row[j] >= 0) buf[n++] = row[j];
  qsort(buf, (size_t)n, sizeof *buf, cmp_i32);
  int64_t m = 0;
  for (int64_t j = 0; j < n; j++)
    if (m == 0 || buf[m - 1] != buf[j]) buf[m++] = buf[j];
  return m;
}

ixl_status ixl_rows_overlap(ixl_ctx *ctx, const ixl_tensor *a, const ixl_tensor *b,
                            ixl_tensor *counts, ixl_tensor *valid) {
  ixl_status st;
  if ((st = check_rows_i32(ctx, a, "a", -1, ROWS_LIST))) return st;
  const int64_t R = a->shape[0];
  if ((st = check_rows_i32(ctx, b, "b", R, ROWS_LIST))) return st;
  if ((st = check_rows_i32(ctx, counts, "counts", R, ROWS_PER_ROW))) return st;
  if (valid && (st = check_rows_i32(ctx, valid, "valid", R, ROWS_PER_ROW))) return st;
  const ixl_tensor *ts[] = {a, b, counts, valid};
  const char *names[] = {"a", "b", "counts", "valid"};
  if ((st = ixl_check_outputs(ctx, 4, ts, names, 2))) return st;
  const int64_t ka = row_width(a), kb = row_width(b);
  int64_t bytes;
  if (!ixl_add_ok(ka, kb, &bytes) || !ixl_mul_ok(bytes, 4, &bytes))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                         "rows_overlap: scratch for k = %lld + %lld overflows", (long long)ka,
                         (long long)kb);
  int32_t *buf;
  if ((st = ixl_ctx_scratch(ctx, 0, bytes, IXL_HOST, (void **)&buf))) return st;
  for (int64_t r = 0; r < R; r++) {
    int32_t *sa = buf, *sb = kb > 0 ? buf + ka : NULL;
    int64_t na = sorted_valid(row_i32(a, r, ka), ka, sa);
    int64_t nb = sorted_valid(row_i32(b, r, kb), kb, sb);
    int64_t i = 0, j = 0, c = 0;
    while (i < na && j < nb) {
      if (sa[i] < sb[j]) i++;
      else if (sa[i] > sb[j]) j++;
      else { c++; i++; j++; }
    }
    ((int32_t *)counts->data)[r] = (int32_t)c;
    if (valid) ((int32_t *)valid->data)[r] = (int32_t)na;
  }
  return IXL_OK;
}

ixl_status ixl_rows_in_candidates(ixl_ctx *ctx, const ixl_tensor *pos, const ixl_tensor *cand,
                                  int cbs, ixl_tensor *counts) {
  ixl_status st;
  if (cbs <= 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "candidate_block_size = %d: must be > 0", cbs);
  if ((st = check_rows_i32(ctx, pos, "pos", -1, ROWS_LIST))) return st;
  const int64_t R = pos->shape[0];
  if ((st = check_rows_i32(ctx, cand, "cand", R, ROWS_LIST))) return st;
  if ((st = check_rows_i32(ctx, counts, "counts", R, ROWS_PER_ROW))) return st;
  if ((st = ixl_check_disjoint(ctx, counts, "counts", pos, "pos")) ||
      (st = ixl_check_disjoint(ctx, counts, "counts", cand, "cand")))
    return st;
  const int64_t k = row_width(pos), T = row_width(cand);
  int64_t bytes;
  if (!ixl_mul_ok(T, 4, &bytes))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "cand: shape[1] = %lld overflows the scratch size",
                         (long long)T);
  int32_t *buf;
  if ((st = ixl_ctx_scratch(ctx, 0, bytes, IXL_HOST, (void **)&buf))) return st;
  for (int64_t r = 0; r < R; r++) {
    int64_t nc = sorted_valid(row_i32(cand, r, T), T, buf);
    const int32_t *pr = row_i32(pos, r, k);
    int32_t c = 0;
    for (int64_t j = 0; j < k && nc > 0; j++) {
      int32_t p = pr[j];
      if (p < 0) continue;
      int32_t blk = p / cbs;
      if (bsearch(&blk, buf, (size_t)nc, sizeof *buf, cmp_i32)) c++;
    }
    ((int32_t *)counts->data)[r] = c;
  }
  return IXL_OK;
}

ixl_status ixl_rows_mass_recall(ixl_ctx *ctx, const ixl_tensor *dense_pos,
                                const ixl_tensor *dense_vals, const ixl_tensor *sel,
                                ixl_tensor *out) {
  ixl_status st;
  if ((st = check_rows_i32(ctx, dense_pos, "dense_pos", -1, ROWS_LIST))) return st;
  const int64_t R = dense_pos->shape[0], k = row_width(dense_pos);
  if ((st = ixl_check_tensor(ctx, dense_vals, "dense_vals", IXL_F32, 2))) return st;
  if (dense_vals->shape[0] != R || dense_vals->shape[1] != k)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "dense_vals: shape [%lld, %lld], expected [%lld, %lld]",
                         (long long)dense_vals->shape[0], (long long)dense_vals->shape[1],
                         (long long)R, (long long)k);
  if ((st = check_rows_i32(ctx, sel, "sel", R, ROWS_LIST))) return st;
  if ((st = ixl_check_tensor(ctx, out, "out", IXL_F32, 1))) return st;
  if ((st = ixl_check_dim(ctx, out, "out", 0, R))) return st;
  if (dense_vals->device != IXL_HOST || out->device != IXL_HOST)
    return ixl_set_error(ctx, IXL_ERR_BACKEND, "mass_recall takes host tensors");
  if ((st = ixl_check_disjoint(ctx, out, "out", dense_pos, "dense_pos")) ||
      (st = ixl_check_disjoint(ctx, out, "out", dense_vals, "dense_vals")) ||
      (st = ixl_check_disjoint(ctx, out, "out", sel, "sel")))
    return st;
  const int64_t ks = row_width(sel);
  int64_t bytes;
  if (!ixl_mul_ok(ks, 4, &bytes))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "sel: shape[1] = %lld overflows the scratch size",
                         (long long)ks);
  int32_t *buf;
  if ((st = ixl_ctx_scratch(ctx, 0, bytes, IXL_HOST, (void **)&buf))) return st;
  for (int64_t r = 0; r < R; r++) {
    const int32_t *p = row_i32(dense_pos, r, k);
    const float *v = k > 0 ? (const float *)dense_vals->data + r * k : NULL;
    int64_t ns = sorted_valid(row_i32(sel, r, ks), ks, buf);
    double m = -INFINITY;
    for (int64_t j = 0; j < k; j++)
      if (p[j] >= 0 && v[j] > m) m = v[j]; /* a NaN never wins */
    double total = 0, kept = 0;
    for (int64_t j = 0; j < k; j++) {
      if (p[j] < 0 || isnan(v[j])) continue;
      /* The softmax's limits where it has no finite form: with +inf logits the mass sits on
       * them evenly; when every logit is -inf it is uniform. Otherwise -inf weighs 0. */
      double w = isinf(m) ? (v[j] == m ? 1.0 : 0.0) : exp((double)v[j] - m);
      total += w;
      if (ns > 0 && bsearch(&p[j], buf, (size_t)ns, sizeof *buf, cmp_i32)) kept += w;
    }
    ((float *)out->data)[r] = total > 0 ? (float)(kept / total) : NAN;
  }
  return IXL_OK;
}

ixl_status ixl_rows_bf16_compare(ixl_ctx *ctx, const ixl_tensor *a, const ixl_tensor *b,
                                 const ixl_tensor *end, ixl_tensor *mismatches, double *sum_dd,
                                 double *sum_sq) {
  ixl_status st;
  if ((st = ixl_check_tensor(ctx, a, "a", IXL_BF16, 2))) return st;
  if ((st = ixl_check_tensor(ctx, b, "b", IXL_BF16, 2))) return st;
  const int64_t R = a->shape[0], C = a->shape[1];
  if (b->shape[0] != R || b->shape[1] != C)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "b: shape [%lld, %lld], expected [%lld, %lld] like a",
                         (long long)b->shape[0], (long long)b->shape[1], (long long)R,
                         (long long)C);
  if ((st = check_rows_i32(ctx, end, "end", R, ROWS_PER_ROW))) return st;
  if ((st = check_rows_i32(ctx, mismatches, "mismatches", R, ROWS_PER_ROW))) return st;
  if (a->device != IXL_HOST || b->device != IXL_HOST)
    return ixl_set_error(ctx, IXL_ERR_BACKEND, "bf16_compare takes host tensors");
  if ((st = ixl_check_disjoint(ctx, mismatches, "mismatches", a, "a")) ||
      (st = ixl_check_disjoint(ctx, mismatches, "mismatches", b, "b")) ||
      (st = ixl_check_disjoint(ctx, mismatches, "mismatches", end, "end")))
    return st;
  double sdd = 0, sq = 0;
  for (int64_t r = 0; r < R; r++) {
    int64_t e = ((const int32_t *)end->data)[r];
    if (e < 0 || e > C)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "end[%lld] = %lld: must be in [0, %lld]",
                           (long long)r, (long long)e, (long long)C);
    int32_t mis = 0;
    for (int64_t c = 0; c < e; c++) {
      uint16_t x = ((const uint16_t *)a->data)[r * C + c];
      uint16_t y = ((const uint16_t *)b->data)[r * C + c];
      int same = x == y || ((x & 0x7fff) == 0 && (y & 0x7fff) == 0);
      if (!same) mis++;
      float fx = ixl_bf16_to_f32(x), fy = ixl_bf16_to_f32(y);
      if (isfinite(fx) && isfinite(fy)) {
        sdd += ((double)fx - fy) * ((double)fx - fy);
        sq += (double)fx * fx + (double)fy * fy;
      }
    }
    ((int32_t *)mismatches->data)[r] = mis;
  }
  if (sum_dd) *sum_dd += sdd;
  if (sum_sq) *sum_sq += sq;
  return IXL_OK;
}
