/* expand_cpu.c - K4, the expansion of candidate blocks to sparse block ids (SPEC 3), on the
 * CPU: the definition the GPU is checked against, and the target of the K4 fuzzer.
 *
 * Per row with range [ks, ke) (paged: ks = 0, ke = context_len) and ratio = cbs / sbk:
 * candidate c >= 0 stands for the sparse blocks c*ratio + i (i < ratio); blocks outside
 * [0, ceil(max(ke - ks, 0) / sbk)) are dropped with -1 and every other garbage id; the rest,
 * ascending and without duplicates, become ids block + ks/sbk; the slots past n_valid repeat
 * the last id (an empty row: ks/sbk); end = (n_valid-1)*sbk + clamp(ke - (last*sbk + ks), 1,
 * sbk), or 0 for an empty row. Both ks_modes give the same ids; aligned only refuses a
 * non-empty row whose ks is not a multiple of sbk.
 *
 * Any candidate list is legal input (duplicates, -1, huge or negative ids): all arithmetic on
 * ids and positions is int64, and the first n_valid ids are unique and strictly increasing. */
#include "ops.h"

#include <omp.h>
#include <string.h>

/* Sorts a[0..n) (non-negative int32) ascending: LSD radix, 8 bits a pass, skipping a pass
 * whose digit is the same for all. tmp: n words. */
static void sort_ids(int32_t *a, int64_t n, int32_t *tmp) {
  int32_t *src = a, *dst = tmp;
  for (int shift = 0; shift < 32; shift += 8) {
    int64_t count[256] = {0};
    for (int64_t i = 0; i < n; i++) count[((uint32_t)src[i] >> shift) & 0xff]++;
    if (count[((uint32_t)src[0] >> shift) & 0xff] == n) continue;
    int64_t pos = 0;
    for (int d = 0; d < 256; d++) {
      int64_t c = count[d];
      count[d] = pos;
      pos += c;
    }
    for (int64_t i = 0; i < n; i++) dst[count[((uint32_t)src[i] >> shift) & 0xff]++] = src[i];
    int32_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* One row. buf, tmp: T words each. */
static void expand_row(const int32_t *cand, int64_t T, int64_t ks, int64_t ke, int64_t ratio,
                       int64_t sbk, int32_t *ids, int64_t nsb, int32_t *end, int32_t *buf,
                       int32_t *tmp) {
  const int64_t len = ke > ks ? ke - ks : 0;
  const int64_t nblocks = (len + sbk - 1) / sbk; /* len < 2^32: no overflow */
  const int64_t base = ks / sbk;

  /* Keep the candidates with at least one block inside the row: c*ratio < nblocks. */
  int64_t n = 0;
  for (int64_t t = 0; t < T; t++) {
    const int64_t c = cand[t];
    if (c >= 0 && c * ratio < nblocks) buf[n++] = (int32_t)c;
  }
  if (n > 1) sort_ids(buf, n, tmp);

  /* Distinct candidates expand to disjoint, increasing runs of blocks. */
  int64_t n_valid = 0, last = -1;
  for (int64_t i = 0; i < n; i++) {
    if (i > 0 && buf[i] == buf[i - 1]) continue;
    for (int64_t j = 0; j < ratio; j++) {
      const int64_t b = buf[i] * ratio + j;
      if (b >= nblocks) break;
      ids[n_valid++] = (int32_t)(b + base); /* b + base <= (ke - 1) / sbk: fits int32 */
      last = b;
    }
  }
  const int32_t pad = n_valid > 0 ? ids[n_valid - 1] : (int32_t)base;
  for (int64_t j = n_valid; j < nsb; j++) ids[j] = pad;
  if (n_valid == 0) {
    *end = 0;
  } else {
    int64_t tail = ke - (last * sbk + ks); /* >= 1 since last < nblocks */
    if (tail > sbk) tail = sbk;
    *end = (int32_t)((n_valid - 1) * sbk + tail); /* <= ke - ks */
  }
}

/* row_ks/row_ke are data: checked before anything is written. */
static ixl_status check_rows(ixl_ctx *ctx, const ixl_tensor *row_ks, const ixl_tensor *row_ke,
                             int64_t R, int sbk, ixl_ks_mode mode) {
  const int32_t *ks = row_ks ? (const int32_t *)row_ks->data : NULL;
  const int32_t *ke = (const int32_t *)row_ke->data;
  for (int64_t r = 0; r < R; r++) {
    const int64_t s = ks ? ks[r] : 0;
    if (s < 0)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "row_ks[%lld] = %lld: must be >= 0",
                           (long long)r, (long long)s);
    if (mode == IXL_KS_ALIGNED && ke[r] > s && s % sbk != 0)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "row %lld: ks = %lld is not a multiple of sparse_block_kv (%d), which "
                           "ks_mode aligned requires for a non-empty row",
                           (long long)r, (long long)s, sbk);
  }
  return IXL_OK;
}

static ixl_status expand_cpu(ixl_ctx *ctx, const ixl_tensor *cand, const ixl_tensor *row_ks,
                             const ixl_tensor *row_ke, int cbs, int sbk, ixl_ks_mode mode,
                             ixl_tensor *sparse_ids, ixl_tensor *end) {
  const int64_t R = cand->shape[0], T = cand->shape[1], nsb = sparse_ids->shape[1];
  ixl_status st = check_rows(ctx, row_ks, row_ke, R, sbk, mode);
  if (st) return st;
  if (R == 0) return IXL_OK;

  int nt = ixl_ctx_threads(ctx);
  if (nt > R) nt = (int)R;
  if (nt < 1) nt = 1;
  /* Per thread: the kept candidates and the sort's buffer, plus one spare pair so the
   * allocation is never empty. */
  int64_t words, bytes;
  if (!ixl_mul_ok(T + 1, 2, &words) || !ixl_mul_ok(words, nt, &bytes) ||
      !ixl_mul_ok(bytes, (int64_t)sizeof(int32_t), &bytes))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                         "expand: scratch for T = %lld, %d threads overflows", (long long)T, nt);
  int32_t *scratch;
  if ((st = ixl_ctx_scratch(ctx, 0, bytes, IXL_HOST, (void **)&scratch))) return st;

  const int32_t *ks = row_ks ? (const int32_t *)row_ks->data : NULL;
  const int32_t *ke = (const int32_t *)row_ke->data;
  const int64_t ratio = cbs / sbk;
#pragma omp parallel num_threads(nt)
  {
    int32_t *buf = scratch + (int64_t)omp_get_thread_num() * words;
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < R; r++) {
      /* T = 0 leaves cand and sparse_ids without data: no arithmetic on NULL. */
      const int32_t *c = T ? (const int32_t *)cand->data + r * T : NULL;
      int32_t *ids = nsb ? (int32_t *)sparse_ids->data + r * nsb : NULL;
      expand_row(c, T, ks ? ks[r] : 0, ke[r], ratio, sbk, ids, nsb, (int32_t *)end->data + r, buf,
                 buf + T + 1);
    }
  }
  return IXL_OK;
}

ixl_status ixl_expand(ixl_ctx *ctx, const ixl_tensor *cand, const ixl_tensor *row_ks,
                      const ixl_tensor *row_ke, int candidate_block_size, int sparse_block_kv,
                      ixl_ks_mode ks_mode, ixl_tensor *sparse_ids, ixl_tensor *end) {
  ixl_status st;
  const int cbs = candidate_block_size, sbk = sparse_block_kv;
  if (cbs < 1)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "candidate_block_size = %d: must be >= 1", cbs);
  if (sbk < 1 || (sbk & (sbk - 1)) != 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "sparse_block_kv = %d: must be a power of two",
                         sbk);
  if (cbs % sbk != 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "candidate_block_size = %d: must be a multiple of sparse_block_kv (%d)",
                         cbs, sbk);
  if (ks_mode != IXL_KS_UNALIGNED && ks_mode != IXL_KS_ALIGNED)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "ks_mode = %d: must be unaligned (0) or aligned (1)", (int)ks_mode);
  if ((st = ixl_check_tensor(ctx, cand, "cand", IXL_I32, 2))) return st;
  const int64_t R = cand->shape[0], T = cand->shape[1];
  if (row_ks) {
    if ((st = ixl_check_tensor(ctx, row_ks, "row_ks", IXL_I32, 1))) return st;
    if ((st = ixl_check_dim(ctx, row_ks, "row_ks", 0, R))) return st;
  }
  if ((st = ixl_check_tensor(ctx, row_ke, "row_ke", IXL_I32, 1))) return st;
  if ((st = ixl_check_dim(ctx, row_ke, "row_ke", 0, R))) return st;
  if ((st = ixl_check_tensor(ctx, sparse_ids, "sparse_ids", IXL_I32, 2))) return st;
  if ((st = ixl_check_dim(ctx, sparse_ids, "sparse_ids", 0, R))) return st;
  int64_t nsb;
  if (!ixl_mul_ok(T, cbs / sbk, &nsb))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                         "cand: shape[1] = %lld (T) * candidate_block_size (%d) / "
                         "sparse_block_kv (%d) overflows",
                         (long long)T, cbs, sbk);
  if (sparse_ids->shape[1] != nsb)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "sparse_ids: shape[1] = %lld, expected T * candidate_block_size / "
                         "sparse_block_kv = %lld * %d / %d = %lld",
                         (long long)sparse_ids->shape[1], (long long)T, cbs, sbk, (long long)nsb);
  if ((st = ixl_check_tensor(ctx, end, "end", IXL_I32, 1))) return st;
  if ((st = ixl_check_dim(ctx, end, "end", 0, R))) return st;
  const ixl_tensor *ts[] = {cand, row_ks, row_ke, sparse_ids, end};
  const char *names[] = {"cand", "row_ks", "row_ke", "sparse_ids", "end"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 5, ts, names, 3)))
    return st;
  if (dev == IXL_DEVICE)
    return ixl_cuda_expand(ctx, cand, row_ks, row_ke, cbs, sbk, ks_mode, sparse_ids, end);
  return expand_cpu(ctx, cand, row_ks, row_ke, cbs, sbk, ks_mode, sparse_ids, end);
}
