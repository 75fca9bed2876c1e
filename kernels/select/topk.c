/* topk_cpu.c - K6 top-k (SPEC 3) on the CPU, and the radix select it shares with K3.
 *
 * The definition the GPU top-k is checked against: per row, the k largest of the row's
 * columns [row_start, row_end), ties to the smaller column, NaN above every number, -0 equal
 * to +0, -1 pads last. Unsorted mode emits the winners in ascending column order; sorted mode
 * by (value descending, column ascending). Rows run in parallel (OpenMP, the context's thread
 * count); each row is a radix select over order-preserving keys, so a 128K-column row costs a
 * few linear passes, not a sort. */
#include "index/remap.h"
#include "ops.h"
#include "select/radix_ref.h"
#include "select/topk_v2.h"
#include "variants.h"

#include <omp.h>
#include <string.h>

int64_t ixl_select_top_scratch_words(int64_t n, int64_t k) {
  if (n < 0 || k < 0) return -1;
  int64_t m = k < n ? k : n, a, b;
  if (!ixl_mul_ok(n, 2, &a) || !ixl_mul_ok(m, 4, &b) || !ixl_add_ok(a, b, &a)) return -1;
  return a;
}

/* The bin holding the `rank`-th largest key (rank >= 1, at most the histogram's total);
 * *above gets the number of keys in the bins above it. */
static uint32_t find_bin(const uint32_t *hist, int nbins, int64_t rank, int64_t *above) {
  int64_t acc = 0;
  for (int b = nbins - 1; b > 0; b--) {
    if (acc + hist[b] >= rank) {
      *above = acc;
      return (uint32_t)b;
    }
    acc += hist[b];
  }
  *above = acc;
  return 0;
}

/* Sorts idx[0..m) by keys[idx] descending, keeping the current order among equal keys (the
 * caller passes ascending indices, so ties end up index-ascending). Stable LSD radix sort on
 * the complemented key, 8 bits per pass; a pass whose digit is the same for all is skipped.
 * w: 3*m words. */
static void sort_desc_stable(const uint32_t *keys, int32_t *idx, int64_t m, uint32_t *w) {
  uint32_t *da = w, *db = w + m;
  int32_t *ia = idx, *ib = (int32_t *)(w + 2 * m);
  for (int64_t i = 0; i < m; i++) da[i] = ~keys[idx[i]];
  for (int shift = 0; shift < 32; shift += 8) {
    int64_t count[256] = {0};
    for (int64_t i = 0; i < m; i++) count[(da[i] >> shift) & 0xff]++;
    if (count[(da[0] >> shift) & 0xff] == m) continue;
    int64_t pos = 0;
    for (int d = 0; d < 256; d++) {
      int64_t c = count[d];
      count[d] = pos;
      pos += c;
    }
    for (int64_t i = 0; i < m; i++) {
      int64_t p = count[(da[i] >> shift) & 0xff]++;
      db[p] = da[i];
      ib[p] = ia[i];
    }
    uint32_t *td = da;
    da = db;
    db = td;
    int32_t *ti = ia;
    ia = ib;
    ib = ti;
  }
  if (ia != idx) memcpy(idx, ia, (size_t)m * sizeof *idx);
}

int64_t ixl_select_top(const uint32_t *keys, int64_t n, int64_t k, int sorted, int32_t *idx,
                       uint32_t *scratch) {
  int64_t m = k < n ? k : n;
  if (m <= 0) return 0;
  if (m == n) {
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)i;
  } else {
    /* The k-th largest key t is found digit by digit: 11 bits from the top, then 11, then 10.
     * Scratch: ckey/cidx hold the keys sharing t's top digit, with their indices; win holds
     * the indices of the keys whose top digit is above t's (fewer than k, all winners). */
    uint32_t *ckey = scratch;
    int32_t *cidx = (int32_t *)(scratch + n), *win = (int32_t *)(scratch + 2 * n);
    int64_t above, need = k;

    /* Pass 1 over all keys: histogram of the top digit. Four interleaved histograms, since
     * real logits crowd into few bins and one counter bumped back to back is a serial chain
     * through memory. */
    uint32_t hist[4][2048];
    memset(hist, 0, sizeof hist);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      hist[0][keys[i] >> 21]++;
      hist[1][keys[i + 1] >> 21]++;
      hist[2][keys[i + 2] >> 21]++;
      hist[3][keys[i + 3] >> 21]++;
    }
    for (; i < n; i++) hist[0][keys[i] >> 21]++;
    for (int b = 0; b < 2048; b++) hist[0][b] += hist[1][b] + hist[2][b] + hist[3][b];
    const uint32_t b1 = find_bin(hist[0], 2048, need, &above);
    need -= above;

    /* Pass 2 over all keys: split off the sure winners and the top digit's bin. Keys below
     * the bin are the common case, so the one branch is well predicted. */
    int64_t nw = 0, nc = 0;
    for (i = 0; i < n; i++) {
      const uint32_t key = keys[i], d = key >> 21;
      if (d >= b1) {
        if (d > b1) {
          win[nw++] = (int32_t)i;
        } else {
          ckey[nc] = key;
          cidx[nc++] = (int32_t)i;
        }
      }
    }

    /* The lower digits, over the bin only. */
    memset(hist[0], 0, sizeof hist[0]);
    for (int64_t j = 0; j < nc; j++) hist[0][(ckey[j] >> 10) & 0x7ff]++;
    const uint32_t b2 = find_bin(hist[0], 2048, need, &above);
    need -= above;
    memset(hist[0], 0, 1024 * sizeof hist[0][0]);
    for (int64_t j = 0; j < nc; j++)
      if (((ckey[j] >> 10) & 0x7ff) == b2) hist[0][ckey[j] & 0x3ff]++;
    const uint32_t b3 = find_bin(hist[0], 1024, need, &above);
    need -= above;
    const uint32_t t = (b1 << 21) | (b2 << 10) | b3;

    /* The bin's winners: keys above t, and the first `need` keys equal to t (ties to the
     * smaller index). Merged with `win` by index, both ascending, they give the k winners in
     * index order. */
    int64_t a = 0, c = 0, out = 0;
    while (out < m) {
      while (c < nc && !(ckey[c] > t || (ckey[c] == t && need > 0))) c++;
      if (c < nc && (a >= nw || cidx[c] < win[a])) {
        if (ckey[c] == t) need--;
        idx[out++] = cidx[c++];
      } else {
        idx[out++] = win[a++];
      }
    }
  }
  if (sorted && m > 1) sort_desc_stable(keys, idx, m, scratch + 2 * n + m);
  return m;
}

/* Row ranges live in the tensors, so they are checked here, on the host data, before
 * anything is written; device tensors are the CUDA twin's to guard. *max_len gets the
 * longest row. */
static ixl_status check_rows(ixl_ctx *ctx, const ixl_tensor *row_start, const ixl_tensor *row_end,
                             int64_t R, int64_t C, int64_t *max_len) {
  const int32_t *rs = row_start ? (const int32_t *)row_start->data : NULL;
  const int32_t *re = (const int32_t *)row_end->data;
  int64_t longest = 0;
  for (int64_t r = 0; r < R; r++) {
    int64_t s = rs ? rs[r] : 0, e = re[r];
    if (s < 0)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "row_start[%lld] = %lld: must be >= 0",
                           (long long)r, (long long)s);
    if (e > C)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "row_end[%lld] = %lld: must be <= C (%lld), the columns of logits",
                           (long long)r, (long long)e, (long long)C);
    if (e < s)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "row_end[%lld] = %lld: must be >= row_start[%lld] (%lld)", (long long)r,
                           (long long)e, (long long)r, (long long)s);
    if (e - s > longest) longest = e - s;
  }
  *max_len = longest;
  return IXL_OK;
}

static ixl_status topk_cpu(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                           const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out) {
  const int64_t R = logits->shape[0], C = logits->shape[1];
  int64_t max_len;
  ixl_status st = check_rows(ctx, row_start, row_end, R, C, &max_len);
  if (st) return st;
  if (R == 0) return IXL_OK;

  int nt = ixl_ctx_threads(ctx);
  if (nt > R) nt = (int)R;
  if (nt < 1) nt = 1;
  /* Per thread: the row's keys, then ixl_select_top's scratch, and one spare word so the
   * allocation is never empty. */
  int64_t sel = ixl_select_top_scratch_words(max_len, k), words, bytes;
  if (sel < 0 || !ixl_add_ok(sel, max_len + 1, &words) || !ixl_mul_ok(words, nt, &bytes) ||
      !ixl_mul_ok(bytes, (int64_t)sizeof(uint32_t), &bytes))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                         "topk: scratch for rows of %lld columns, k = %d, %d threads overflows",
                         (long long)max_len, k, nt);
  uint32_t *scratch;
  if ((st = ixl_ctx_scratch(ctx, 0, bytes, IXL_HOST, (void **)&scratch))) return st;

  const int32_t *rs = row_start ? (const int32_t *)row_start->data : NULL;
  const int32_t *re = (const int32_t *)row_end->data;
  const int is_bf16 = logits->dtype == IXL_BF16;
#pragma omp parallel num_threads(nt)
  {
    uint32_t *keys = scratch + (int64_t)omp_get_thread_num() * words;
#pragma omp for schedule(dynamic, 1)
    for (int64_t r = 0; r < R; r++) {
      const int64_t s = rs ? rs[r] : 0, n = re[r] - s;
      if (n == 0) {
        /* empty row: nothing to read (logits may even have no data) */
      } else if (is_bf16) {
        const uint16_t *x = (const uint16_t *)logits->data + r * C + s;
        for (int64_t i = 0; i < n; i++) keys[i] = ixl_order_key_bf16(x[i]);
      } else {
        const float *x = (const float *)logits->data + r * C + s;
        for (int64_t i = 0; i < n; i++) keys[i] = ixl_order_key_f32(x[i]);
      }
      int32_t *o = (int32_t *)out->data + r * (int64_t)k;
      int64_t m = ixl_select_top(keys, n, k, sorted, o, keys + max_len);
      for (int64_t j = m; j < k; j++) o[j] = -1;
    }
  }
  return IXL_OK;
}

/* ixl_topk's argument checks, the fused op's too (each adds its own device and overlap check). */
static ixl_status topk_check(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                             const ixl_tensor *row_end, int k, const ixl_tensor *out) {
  ixl_status st;
  if ((st = ixl_check_tensor(ctx, logits, "logits", -1, 2))) return st;
  if (logits->dtype != IXL_F32 && logits->dtype != IXL_BF16)
    return ixl_set_error(ctx, IXL_ERR_DTYPE, "logits: dtype %s, expected f32 or bf16",
                         ixl_dtype_name((ixl_dtype)logits->dtype));
  const int64_t R = logits->shape[0], C = logits->shape[1];
  if (C > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "logits: shape[1] = %lld: must be <= 2147483647 so columns fit int32",
                         (long long)C);
  if (row_start) {
    if ((st = ixl_check_tensor(ctx, row_start, "row_start", IXL_I32, 1))) return st;
    if ((st = ixl_check_dim(ctx, row_start, "row_start", 0, R))) return st;
  }
  if ((st = ixl_check_tensor(ctx, row_end, "row_end", IXL_I32, 1))) return st;
  if ((st = ixl_check_dim(ctx, row_end, "row_end", 0, R))) return st;
  if (k < 1 || k > 4096)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "k = %d: must be in [1, 4096]", k);
  if ((st = ixl_check_tensor(ctx, out, "out", IXL_I32, 2))) return st;
  if ((st = ixl_check_dim(ctx, out, "out", 0, R))) return st;
  if (out->shape[1] != k)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "out: shape[1] = %lld, expected k (%d)",
                         (long long)out->shape[1], k);
  return IXL_OK;
}

ixl_status ixl_topk(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                    const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out) {
  ixl_status st;
  if ((st = topk_check(ctx, logits, row_start, row_end, k, out))) return st;
  const ixl_tensor *ts[] = {logits, row_start, row_end, out};
  const char *names[] = {"logits", "row_start", "row_end", "out"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 4, ts, names, 3)))
    return st;
  ixl_problem pb; /* topk knows no config field: every select variant must take any */
  ixl_problem_unknown(&pb);
  const ixl_variant *v;
  if ((st = ixl_variant_pick(ctx, IXL_FAMILY_SELECT, dev, &pb, &v))) return st;
  return ((const ixl_select_ops *)v->ops)->topk(ctx, logits, row_start, row_end, k, sorted, out);
}

/* K6 then K7: the select variant's fused topk_remap where it has one (select v2: one kernel,
 * its store writes positions), else its top-k into out, then ixl_remap in place. */
ixl_status ixl_topk_remap(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                          const ixl_tensor *row_end, int k, int sorted,
                          const ixl_tensor *sparse_ids, const ixl_tensor *row_ks,
                          int sparse_block_kv, ixl_tensor *out) {
  ixl_status st;
  const int sbk = sparse_block_kv;
  if ((st = topk_check(ctx, logits, row_start, row_end, k, out))) return st;
  if ((st = ixl_remap_check_map(ctx, logits->shape[0], sparse_ids, row_ks, sbk))) return st;
  const ixl_tensor *ts[] = {logits, row_start, row_end, sparse_ids, row_ks, out};
  const char *names[] = {"logits", "row_start", "row_end", "sparse_ids", "row_ks", "out"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 6, ts, names, 5))) return st;
  ixl_problem pb;
  ixl_problem_unknown(&pb);
  const ixl_variant *v;
  if ((st = ixl_variant_pick(ctx, IXL_FAMILY_SELECT, dev, &pb, &v))) return st;
  const ixl_select_ops *ops = (const ixl_select_ops *)v->ops;
  if (ops->topk_remap)
    return ops->topk_remap(ctx, logits, row_start, row_end, k, sorted, sparse_ids, row_ks, sbk,
                           out);
  if ((st = ops->topk(ctx, logits, row_start, row_end, k, sorted, out))) return st;
  return ixl_remap(ctx, out, sparse_ids, row_ks, sbk, out);
}

#ifndef IXL_WITH_CUDA
/* Without CUDA select v2's switches are nothing to read (select/topk_v2.h). */
void ixl_topk_v2_dev_reload(void) {}
#endif

/* The select family's `ref` (kernels/variants.c). */
ixl_status ixl_topk_ref(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                        const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out) {
  return topk_cpu(ctx, logits, row_start, row_end, k, sorted != 0, out);
}
