/* fuzz_expand.c - libFuzzer harness for K4, ixl_expand (kernels/index/expand.c), on arbitrary
 * candidate lists: garbage, duplicates, -1, out-of-range ids, odd ranges and block sizes. Every
 * accepted call is compared with SPEC 3's K4 rules, written again here from the spec; every
 * refused call must give a clean error. */
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ixl_tensor *i32_tensor(ixl_ctx *ctx, int ndim, int64_t d0, int64_t d1) {
  int64_t shape[2] = {d0, d1};
  ixl_tensor *t = NULL;
  if (ixl_tensor_new(ctx, IXL_I32, ndim, shape, IXL_HOST, &t) != IXL_OK) abort();
  return t;
}

/* SPEC 3, K4, for one row: ids[0..nsb) and end. */
static void reference_row(const int32_t *cand, int64_t T, int64_t ks, int64_t ke, int64_t cbs,
                          int64_t sbk, int32_t *ids, int64_t nsb, int32_t *end) {
  const int64_t ratio = cbs / sbk;
  const int64_t len = ke - ks > 0 ? ke - ks : 0;
  const int64_t nb = (len + sbk - 1) / sbk;
  /* membership over [0, nb) by marking, then ascending order: unique by construction */
  int64_t n = 0, last = -1;
  for (int64_t b = 0; b < nb && n < nsb; b++) {
    int keep = 0;
    for (int64_t t = 0; t < T && !keep; t++) keep = cand[t] >= 0 && b / ratio == cand[t];
    if (keep) {
      ids[n++] = (int32_t)(b + ks / sbk);
      last = b;
    }
  }
  for (int64_t j = n; j < nsb; j++) ids[j] = n > 0 ? ids[n - 1] : (int32_t)(ks / sbk);
  if (n == 0) {
    *end = 0;
  } else {
    int64_t tail = ke - (last * sbk + ks);
    tail = tail < 1 ? 1 : tail > sbk ? sbk : tail;
    *end = (int32_t)((n - 1) * sbk + tail);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ixl_ctx *ctx = fz_ctx();
  fz_in in = {data, size, 0};
  static const int block_sizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 3, 12, 0, -8};
  const int64_t R = fz_u8(&in) % 9, T = fz_u8(&in) % 33;
  uint8_t sel = fz_u8(&in);
  int cbs = sel & 0x80 ? (int)fz_u32(&in) : block_sizes[sel % 13];
  sel = fz_u8(&in);
  int sbk = sel & 0x80 ? (int)fz_u32(&in) : block_sizes[sel % 13];
  uint8_t mode_sel = fz_u8(&in);
  ixl_ks_mode mode = (ixl_ks_mode)(mode_sel < 250 ? mode_sel & 1 : mode_sel);
  uint8_t flags = fz_u8(&in);
  const int paged = flags & 1, wrong_shape = (flags & 0x0e) == 0x0e;

  const int64_t live0 = fz_live_bytes(ctx);
  ixl_tensor *cand = i32_tensor(ctx, 2, R, T), *ks = paged ? NULL : i32_tensor(ctx, 1, R, 0);
  ixl_tensor *ke = i32_tensor(ctx, 1, R, 0), *end = i32_tensor(ctx, 1, R, 0);
  int32_t *c = cand->data;
  for (int64_t i = 0; i < R * T; i++) {
    uint8_t k = fz_u8(&in);
    c[i] = k < 96    ? (int32_t)(k % 24) /* small ids, many duplicates */
           : k < 128 ? -1                /* the pad */
           : k < 160 ? (int32_t)fz_interesting[fz_u8(&in) % FZ_NINTERESTING]
                     : (int32_t)fz_u32(&in); /* garbage */
  }
  for (int64_t r = 0; r < R; r++) {
    uint8_t k = fz_u8(&in);
    int32_t s = k < 200 ? (int32_t)(fz_u8(&in) * (k % 4 + 1)) : (int32_t)fz_u32(&in);
    int32_t len = (int32_t)(fz_u8(&in) | (fz_u8(&in) & 1) << 8) - 16;
    if (ks) ((int32_t *)ks->data)[r] = s;
    int64_t e = (int64_t)(ks ? s : 0) + len; /* int64: s may be near either int32 limit */
    ((int32_t *)ke->data)[r] = (int32_t)(e > INT32_MAX ? INT32_MAX : e < INT32_MIN ? INT32_MIN : e);
  }
  /* the ids tensor: the expected shape when it is small enough, else a small wrong one */
  int64_t nsb = -1;
  if (cbs > 0 && sbk > 0 && cbs % sbk == 0) nsb = T * (cbs / sbk);
  int64_t cols = nsb >= 0 && nsb * (R ? R : 1) <= (1 << 16) ? nsb : 7;
  if (wrong_shape) cols = cols + 1;
  ixl_tensor *ids = i32_tensor(ctx, 2, R, cols);
  if (R > 0 && cols > 0) memset(ids->data, 0xab, (size_t)(R * cols) * 4); /* poison */
  if (R) memset(end->data, 0xab, (size_t)R * 4);

  ixl_status st = ixl_expand(ctx, cand, ks, ke, cbs, sbk, mode, ids, end);
  if (st != IXL_OK) {
    fz_check_error(ctx, st, "ixl_expand");
  } else {
    FZ_REQUIRE(cbs >= 1 && sbk >= 1 && cbs % sbk == 0 && cols == nsb && (mode == 0 || mode == 1),
               "expand accepted cbs %d sbk %d mode %d with %lld columns", cbs, sbk, (int)mode,
               (long long)cols);
    int32_t *want = malloc((size_t)(cols ? cols : 1) * 4), want_end;
    for (int64_t r = 0; r < R; r++) {
      int64_t s = ks ? ((int32_t *)ks->data)[r] : 0, e = ((int32_t *)ke->data)[r];
      FZ_REQUIRE(s >= 0, "expand accepted row_ks[%lld] = %lld", (long long)r, (long long)s);
      FZ_REQUIRE(mode == IXL_KS_UNALIGNED || e <= s || s % sbk == 0,
                 "aligned mode accepted row %lld with ks %lld", (long long)r, (long long)s);
      /* empty tensors have no data pointer: no arithmetic on NULL */
      reference_row(T ? c + r * T : NULL, T, s, e, cbs, sbk, want, cols, &want_end);
      const int32_t *got = cols ? (const int32_t *)ids->data + r * cols : NULL;
      for (int64_t j = 0; j < cols; j++)
        FZ_REQUIRE(got[j] == want[j],
                   "row %lld (ks %lld ke %lld cbs %d sbk %d): id %lld = %d, SPEC gives %d",
                   (long long)r, (long long)s, (long long)e, cbs, sbk, (long long)j, got[j],
                   want[j]);
      FZ_REQUIRE(((int32_t *)end->data)[r] == want_end, "row %lld: end %d, SPEC gives %d",
                 (long long)r, ((int32_t *)end->data)[r], want_end);
    }
    free(want);
  }
  ixl_tensor_free(cand);
  ixl_tensor_free(ks);
  ixl_tensor_free(ke);
  ixl_tensor_free(end);
  ixl_tensor_free(ids);
  FZ_REQUIRE(fz_live_bytes(ctx) == live0, "counted host memory leaked: %lld bytes",
             (long long)(fz_live_bytes(ctx) - live0));
  return 0;
}
