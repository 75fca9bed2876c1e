/* remap_cpu.c - K7 (SPEC 3) on the CPU: sparse columns back to request-local positions.
 *
 * Sparse column c of a row maps to (id[c / sbk] - ks / sbk) * sbk + c % sbk, with id the
 * row's sparse block ids (K4's output) and ks its range start (0 when row_ks is NULL, the
 * paged case); c < 0 (top-k's -1 pads) maps to -1. Every column is checked before anything
 * is written, so an error leaves out untouched even when out aliases cols: a column past the
 * row's sparse columns, or ids that would give a position outside [0, INT32_MAX] (ids from
 * another row range), are errors naming the row and slot. */
#include "index/remap.h"
#include "ops.h"

#include <omp.h>

static int64_t position_of(int64_t c, const int32_t *ids, int64_t ks, int64_t sbk) {
  return ((int64_t)ids[c / sbk] - ks / sbk) * sbk + c % sbk;
}

static ixl_status check_cols(ixl_ctx *ctx, const ixl_tensor *cols, const ixl_tensor *sparse_ids,
                             const ixl_tensor *row_ks, int sbk) {
  const int64_t R = cols->shape[0], k = cols->shape[1], nsb = sparse_ids->shape[1];
  const int64_t ncols = nsb * sbk; /* checked for overflow by the caller */
  const int32_t *ks = row_ks ? (const int32_t *)row_ks->data : NULL;
  for (int64_t r = 0; r < R; r++) {
    const int64_t s = ks ? ks[r] : 0;
    if (k == 0) continue; /* cols has no data: no arithmetic on NULL */
    if (s < 0)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "row_ks[%lld] = %lld: must be >= 0",
                           (long long)r, (long long)s);
    const int32_t *c = (const int32_t *)cols->data + r * k;
    const int32_t *ids = nsb ? (const int32_t *)sparse_ids->data + r * nsb : NULL;
    for (int64_t j = 0; j < k; j++) {
      if (c[j] < 0) continue;
      if (c[j] >= ncols)
        return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                             "cols[%lld][%lld] = %d: must be < num_sparse_blocks (%lld) * "
                             "sparse_block_kv (%d) = %lld",
                             (long long)r, (long long)j, c[j], (long long)nsb, sbk,
                             (long long)ncols);
      const int64_t p = position_of(c[j], ids, s, sbk);
      if (p < 0 || p > INT32_MAX)
        return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                             "sparse_ids[%lld][%lld] = %d with row_ks = %lld maps cols[%lld][%lld] "
                             "= %d to position %lld: must be in [0, 2147483647]",
                             (long long)r, (long long)(c[j] / sbk), ids[c[j] / sbk], (long long)s,
                             (long long)r, (long long)j, c[j], (long long)p);
    }
  }
  return IXL_OK;
}

static ixl_status remap_cpu(ixl_ctx *ctx, const ixl_tensor *cols, const ixl_tensor *sparse_ids,
                            const ixl_tensor *row_ks, int sbk, ixl_tensor *out) {
  ixl_status st = check_cols(ctx, cols, sparse_ids, row_ks, sbk);
  if (st) return st;
  const int64_t R = cols->shape[0], k = cols->shape[1], nsb = sparse_ids->shape[1];
  if (R == 0 || k == 0) return IXL_OK;
  const int32_t *ks = row_ks ? (const int32_t *)row_ks->data : NULL;
  int nt = ixl_ctx_threads(ctx);
  if (nt > R) nt = (int)R;
  if (nt < 1) nt = 1;
  /* Element j is read before it is written, so out == cols is safe. */
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < R; r++) {
    const int32_t *c = (const int32_t *)cols->data + r * k;
    const int32_t *ids = nsb ? (const int32_t *)sparse_ids->data + r * nsb : NULL;
    int32_t *o = (int32_t *)out->data + r * k;
    const int64_t s = ks ? ks[r] : 0;
    for (int64_t j = 0; j < k; j++) o[j] = c[j] < 0 ? -1 : (int32_t)position_of(c[j], ids, s, sbk);
  }
  return IXL_OK;
}

ixl_status ixl_remap_check_map(ixl_ctx *ctx, int64_t R, const ixl_tensor *sparse_ids,
                               const ixl_tensor *row_ks, int sparse_block_kv) {
  ixl_status st;
  const int sbk = sparse_block_kv;
  if (sbk < 1 || (sbk & (sbk - 1)) != 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "sparse_block_kv = %d: must be a power of two",
                         sbk);
  if ((st = ixl_check_tensor(ctx, sparse_ids, "sparse_ids", IXL_I32, 2))) return st;
  if ((st = ixl_check_dim(ctx, sparse_ids, "sparse_ids", 0, R))) return st;
  int64_t ncols;
  if (!ixl_mul_ok(sparse_ids->shape[1], sbk, &ncols))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                         "sparse_ids: shape[1] = %lld times sparse_block_kv (%d) overflows",
                         (long long)sparse_ids->shape[1], sbk);
  if (row_ks) {
    if ((st = ixl_check_tensor(ctx, row_ks, "row_ks", IXL_I32, 1))) return st;
    if ((st = ixl_check_dim(ctx, row_ks, "row_ks", 0, R))) return st;
  }
  return IXL_OK;
}

ixl_status ixl_remap(ixl_ctx *ctx, const ixl_tensor *cols, const ixl_tensor *sparse_ids,
                     const ixl_tensor *row_ks, int sparse_block_kv, ixl_tensor *out) {
  ixl_status st;
  const int sbk = sparse_block_kv;
  if ((st = ixl_check_tensor(ctx, cols, "cols", IXL_I32, 2))) return st;
  const int64_t R = cols->shape[0], k = cols->shape[1];
  if ((st = ixl_remap_check_map(ctx, R, sparse_ids, row_ks, sbk))) return st;
  if ((st = ixl_check_tensor(ctx, out, "out", IXL_I32, 2))) return st;
  if ((st = ixl_check_dim(ctx, out, "out", 0, R))) return st;
  if ((st = ixl_check_dim(ctx, out, "out", 1, k))) return st;
  const ixl_tensor *ts[] = {cols, sparse_ids, row_ks, out};
  const char *names[] = {"cols", "sparse_ids", "row_ks", "out"};
  int dev;
  if ((st = ixl_check_same_device(ctx, &dev, 4, ts, names))) return st;
  /* out may be cols itself; a partial overlap would read already remapped values. */
  if (out->data != cols->data && ixl_tensors_overlap(out, cols))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "out overlaps cols without being the same memory: pass cols itself "
                         "or a separate tensor");
  if ((st = ixl_check_disjoint(ctx, out, "out", sparse_ids, "sparse_ids")) ||
      (st = ixl_check_disjoint(ctx, out, "out", row_ks, "row_ks")))
    return st;
  if (dev == IXL_DEVICE) return ixl_cuda_remap(ctx, cols, sparse_ids, row_ks, sbk, out);
  return remap_cpu(ctx, cols, sparse_ids, row_ks, sbk, out);
}
