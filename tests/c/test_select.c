/* test_select.c - the selection kernels on the CPU: K3 candidate selection, K4 expansion,
 * K6 top-k, K7 remap and the candidate mask. Each is compared with a plain reference written
 * here (sorts and marks, no radix tricks) on seeded random inputs with heavy ties, NaNs,
 * infinities and signed zeros, and every validation rule is triggered with its message
 * checked. Failures print the seed. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "rand.h"

static ixl_ctx *ctx;
static uint64_t seed_test(uint64_t base) {
  rand_seed(RAND_SPLITMIX64, base);
  return base;
}

static ixl_tensor *tensor(ixl_dtype dt, int ndim, int64_t a, int64_t b) {
  int64_t shape[2] = {a, b};
  ixl_tensor *t = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, dt, ndim, shape, IXL_HOST, &t));
  if (t && ixl_tensor_numel(t) > 0) ixl_tensor_fill_bytes(ctx, t, 0xA5); /* poison */
  return t;
}
static ixl_tensor *i32_from(int ndim, int64_t a, int64_t b, const int32_t *v) {
  ixl_tensor *t = tensor(IXL_I32, ndim, a, b);
  if (t && v) memcpy(t->data, v, (size_t)ixl_tensor_numel(t) * 4);
  return t;
}
#define I32(t) ((int32_t *)(t)->data)
#define F32(t) ((float *)(t)->data)
#define U16(t) ((uint16_t *)(t)->data)

/* ---------------------------------------------------------------- K4 reference */

static int i64_cmp(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  return (a > b) - (a < b);
}

/* SPEC 3's steps one by one: expand every candidate, drop, sort, deduplicate, offset, pad. */
static void ref_expand_row(const int32_t *cand, int64_t T, int64_t ks, int64_t ke, int64_t cbs,
                           int64_t sbk, int32_t *ids, int64_t nsb, int32_t *end) {
  int64_t len = ke - ks > 0 ? ke - ks : 0, nb = (len + sbk - 1) / sbk, ratio = cbs / sbk;
  int64_t *blocks = malloc((size_t)(T * ratio + 1) * sizeof *blocks), n = 0;
  for (int64_t t = 0; t < T; t++)
    if (cand[t] >= 0)
      for (int64_t i = 0; i < ratio; i++) {
        int64_t b = (int64_t)cand[t] * ratio + i;
        if (b < nb) blocks[n++] = b;
      }
  qsort(blocks, (size_t)n, sizeof *blocks, i64_cmp);
  int64_t nv = 0;
  for (int64_t i = 0; i < n; i++)
    if (nv == 0 || blocks[i] != blocks[nv - 1]) blocks[nv++] = blocks[i];
  for (int64_t j = 0; j < nsb; j++)
    ids[j] = (int32_t)((nv ? blocks[j < nv ? j : nv - 1] : 0) + ks / sbk);
  if (!nv) {
    *end = 0;
  } else {
    int64_t tail = ke - (blocks[nv - 1] * sbk + ks);
    tail = tail < 1 ? 1 : tail > sbk ? sbk : tail;
    *end = (int32_t)((nv - 1) * sbk + tail);
  }
  free(blocks);
}

static int expand_one(int64_t T, const int32_t *cand, int32_t ks, int32_t ke, int cbs, int sbk,
                      int32_t *ids_out, int32_t *end_out) {
  int32_t ksv[1] = {ks}, kev[1] = {ke};
  ixl_tensor *c = i32_from(2, 1, T, cand), *tks = i32_from(1, 1, 0, ksv),
             *tke = i32_from(1, 1, 0, kev);
  ixl_tensor *ids = tensor(IXL_I32, 2, 1, T * (cbs / sbk)), *end = tensor(IXL_I32, 1, 1, 0);
  ixl_status st = ixl_expand(ctx, c, tks, tke, cbs, sbk, IXL_KS_UNALIGNED, ids, end);
  if (st == IXL_OK) {
    memcpy(ids_out, ids->data, (size_t)(T * (cbs / sbk)) * 4);
    *end_out = I32(end)[0];
  } else {
    fprintf(stderr, "  expand: %s\n", ixl_last_error(ctx));
  }
  ixl_tensor_free(c), ixl_tensor_free(tks), ixl_tensor_free(tke), ixl_tensor_free(ids),
      ixl_tensor_free(end);
  return st == IXL_OK;
}

TEST(expand_spec_vectors) {
  int32_t ids[4], end;
  const int32_t c1[4] = {0, -1, -1, -1};
  CHECK(expand_one(4, c1, 64, 72, 8, 8, ids, &end));
  CHECK(ids[0] == 8 && ids[1] == 8 && ids[2] == 8 && ids[3] == 8 && end == 8);
  const int32_t c2[4] = {2, 0, -1, -1};
  CHECK(expand_one(4, c2, 13, 30, 8, 8, ids, &end));
  CHECK_MSG(ids[0] == 1 && ids[1] == 3 && ids[2] == 3 && ids[3] == 3 && end == 9,
            "ids %d %d %d %d end %d", ids[0], ids[1], ids[2], ids[3], end);
  const int32_t c3[4] = {0, 1, 2, 3};
  CHECK(expand_one(4, c3, 100, 100, 8, 8, ids, &end));
  CHECK(ids[0] == 12 && ids[1] == 12 && ids[2] == 12 && ids[3] == 12 && end == 0);
  const int32_t c4[2] = {1, 0};
  CHECK(expand_one(2, c4, 0, 48, 16, 8, ids, &end));
  CHECK_MSG(ids[0] == 0 && ids[1] == 1 && ids[2] == 2 && ids[3] == 3 && end == 32,
            "ids %d %d %d %d end %d", ids[0], ids[1], ids[2], ids[3], end);
}

static void check_expand_against_ref(uint64_t seed, int64_t R, int64_t T, int cbs, int sbk,
                                     const int32_t *cand, const int32_t *ks, const int32_t *ke,
                                     int paged) {
  const int64_t nsb = T * (cbs / sbk);
  ixl_tensor *c = i32_from(2, R, T, cand), *tks = paged ? NULL : i32_from(1, R, 0, ks),
             *tke = i32_from(1, R, 0, ke);
  ixl_tensor *ids = tensor(IXL_I32, 2, R, nsb), *end = tensor(IXL_I32, 1, R, 0);
  CHECK_OK(ctx, ixl_expand(ctx, c, tks, tke, cbs, sbk, IXL_KS_UNALIGNED, ids, end));
  int32_t *ref = malloc((size_t)(nsb + 1) * 4);
  for (int64_t r = 0; r < R; r++) {
    int32_t rend;
    int64_t s = paged ? 0 : ks[r];
    ref_expand_row(cand + r * T, T, s, ke[r], cbs, sbk, ref, nsb, &rend);
    const int32_t *got = I32(ids) + r * nsb;
    int same = rend == I32(end)[r];
    for (int64_t j = 0; j < nsb; j++) same &= got[j] == ref[j];
    CHECK_MSG(same, "seed %llu row %lld (ks %lld ke %d cbs %d sbk %d T %lld): end %d vs ref %d",
              (unsigned long long)seed, (long long)r, (long long)s, ke[r], cbs, sbk, (long long)T,
              I32(end)[r], rend);
    /* The first n_valid ids are strictly increasing (n_valid = the ref's count). */
    for (int64_t j = 1; j < nsb && got[j] != got[j - 1]; j++)
      CHECK_MSG(got[j] > got[j - 1], "seed %llu row %lld slot %lld not increasing",
                (unsigned long long)seed, (long long)r, (long long)j);
  }
  free(ref);
  ixl_tensor_free(c), ixl_tensor_free(tks), ixl_tensor_free(tke), ixl_tensor_free(ids),
      ixl_tensor_free(end);
}

TEST(expand_random_vs_reference) {
  static const int pairs[][2] = {{8, 8}, {16, 8}, {16, 16}, {64, 16}, {32, 4}, {8, 1}, {128, 8}};
  for (int iter = 0; iter < 60; iter++) {
    uint64_t seed = seed_test(1000 + iter);
    int cbs = pairs[iter % 7][0], sbk = pairs[iter % 7][1];
    int64_t R = rand_range(1, 24), T = rand_range(1, 40);
    int32_t *cand = malloc((size_t)(R * T) * 4), *ks = malloc((size_t)R * 4),
            *ke = malloc((size_t)R * 4);
    for (int64_t r = 0; r < R; r++) {
      ks[r] = (int32_t)rand_range(0, 3000);
      ke[r] = (int32_t)(ks[r] + rand_range(-20, 2000)); /* some rows with ke < ks: empty */
      if (rand_range(0, 9) == 0) ke[r] = ks[r];
      int64_t nb = ((ke[r] - ks[r] > 0 ? ke[r] - ks[r] : 0) + cbs - 1) / cbs;
      for (int64_t t = 0; t < T; t++) {
        int kind = (int)rand_range(0, 9);
        cand[r * T + t] = kind == 0   ? -1
                          : kind == 1 ? (int32_t)rand_range(-5, 100000) /* garbage */
                          : kind == 2 && t ? cand[r * T + t - 1] /* duplicate */
                                           : (int32_t)rand_range(0, nb + 2);
      }
    }
    check_expand_against_ref(seed, R, T, cbs, sbk, cand, ks, ke, 0);
    check_expand_against_ref(seed, R, T, cbs, sbk, cand, ks, ke, 1);
    free(cand), free(ks), free(ke);
  }
}

TEST(expand_hostile_candidates) {
  /* Huge and negative ids, duplicates, rows near INT32_MAX, a huge ratio: no crash, no
   * overflow (UBSan watches), and the reference's answer. */
  const int32_t cand[] = {INT32_MAX, INT32_MIN, 3, 3, 3, -1, 0, INT32_MAX - 1, 1, 1};
  const int32_t ks[] = {0, INT32_MAX - 100, 5, INT32_MAX, 0, 1000};
  const int32_t ke[] = {INT32_MAX, INT32_MAX, INT32_MIN, INT32_MAX, 0, 999};
  int32_t big[6 * 10];
  for (int r = 0; r < 6; r++) memcpy(big + r * 10, cand, sizeof cand);
  check_expand_against_ref(1, 6, 10, 8, 8, big, ks, ke, 0);
  check_expand_against_ref(2, 6, 10, 1 << 16, 1, big, ks, ke, 0);
  check_expand_against_ref(3, 6, 10, 1 << 20, 1 << 10, big, ks, ke, 0);
  check_expand_against_ref(4, 6, 10, 16, 8, big, ks, ke, 1);
}

TEST(expand_aligned_mode) {
  int32_t cand[] = {0, 1, 1, 0, 0, 0};
  int32_t ks_bad[] = {16, 13, 13}, ke_bad[] = {40, 30, 13};
  ixl_tensor *c = i32_from(2, 3, 2, cand), *ks = i32_from(1, 3, 0, ks_bad),
             *ke = i32_from(1, 3, 0, ke_bad);
  ixl_tensor *ids = tensor(IXL_I32, 2, 3, 2), *end = tensor(IXL_I32, 1, 3, 0);
  CHECK_ERR(ctx, ixl_expand(ctx, c, ks, ke, 8, 8, IXL_KS_ALIGNED, ids, end), IXL_ERR_INVALID_ARG,
            "row 1: ks = 13 is not a multiple of sparse_block_kv (8)");
  /* An empty row with an unaligned ks is fine; aligned ids equal unaligned ones. */
  I32(ke)[1] = 13;
  CHECK_OK(ctx, ixl_expand(ctx, c, ks, ke, 8, 8, IXL_KS_ALIGNED, ids, end));
  int32_t a0 = I32(ids)[0], a1 = I32(ids)[1], e0 = I32(end)[0];
  CHECK_OK(ctx, ixl_expand(ctx, c, ks, ke, 8, 8, IXL_KS_UNALIGNED, ids, end));
  CHECK(a0 == 2 && a1 == 3 && e0 == 16);
  CHECK(I32(ids)[0] == a0 && I32(ids)[1] == a1 && I32(end)[0] == e0);
  CHECK(I32(end)[1] == 0 && I32(ids)[2] == 1);
  ixl_tensor_free(c), ixl_tensor_free(ks), ixl_tensor_free(ke), ixl_tensor_free(ids),
      ixl_tensor_free(end);
}

TEST(expand_validation) {
  int32_t cand[] = {0, 1, 2, 3}, z[] = {0, 0}, e[] = {64, 64}, neg[] = {0, -8};
  ixl_tensor *c = i32_from(2, 2, 2, cand), *ks = i32_from(1, 2, 0, z), *ke = i32_from(1, 2, 0, e),
             *ids = tensor(IXL_I32, 2, 2, 4), *end = tensor(IXL_I32, 1, 2, 0);
  ixl_tensor *kneg = i32_from(1, 2, 0, neg), *f = tensor(IXL_F32, 2, 2, 2),
             *ids3 = tensor(IXL_I32, 2, 2, 3), *end3 = tensor(IXL_I32, 1, 3, 0),
             *ke3 = tensor(IXL_I32, 1, 3, 0);
  CHECK_OK(ctx, ixl_expand(ctx, c, ks, ke, 16, 8, IXL_KS_UNALIGNED, ids, end));
  CHECK_ERR(ctx, ixl_expand(ctx, c, ks, ke, 0, 8, IXL_KS_UNALIGNED, ids, end),
            IXL_ERR_INVALID_ARG, "candidate_block_size = 0: must be >= 1");
  CHECK_ERR(ctx, ixl_expand(ctx, c, ks, ke, 24, 12, IXL_KS_UNALIGNED, ids, end),
            IXL_ERR_INVALID_ARG, "sparse_block_kv = 12: must be a power of two");
  CHECK_ERR(ctx, ixl_expand(ctx, c, ks, ke, 12, 8, IXL_KS_UNALIGNED, ids, end),
            IXL_ERR_INVALID_ARG,
            "candidate_block_size = 12: must be a multiple of sparse_block_kv (8)");
  CHECK_ERR(ctx, ixl_expand(ctx, c, ks, ke, 16, 8, (ixl_ks_mode)7, ids, end), IXL_ERR_INVALID_ARG,
            "ks_mode = 7: must be unaligned (0) or aligned (1)");
  CHECK_ERR(ctx, ixl_expand(ctx, f, ks, ke, 16, 8, IXL_KS_UNALIGNED, ids, end), IXL_ERR_DTYPE,
            "cand: dtype f32, expected i32");
  CHECK_ERR(ctx, ixl_expand(ctx, c, ks, ke, 16, 8, IXL_KS_UNALIGNED, ids3, end), IXL_ERR_SHAPE,
            "sparse_ids: shape[1] = 3, expected T * candidate_block_size / sparse_block_kv = "
            "2 * 16 / 8 = 4");
  CHECK_ERR(ctx, ixl_expand(ctx, c, ks, ke, 16, 8, IXL_KS_UNALIGNED, ids, end3), IXL_ERR_SHAPE,
            "end: shape[0] = 3, expected 2");
  CHECK_ERR(ctx, ixl_expand(ctx, c, ks, ke3, 16, 8, IXL_KS_UNALIGNED, ids, end), IXL_ERR_SHAPE,
            "row_ke: shape[0] = 3, expected 2");
  CHECK_ERR(ctx, ixl_expand(ctx, c, ke3, ke, 16, 8, IXL_KS_UNALIGNED, ids, end), IXL_ERR_SHAPE,
            "row_ks: shape[0] = 3, expected 2");
  CHECK_ERR(ctx, ixl_expand(ctx, c, ks, NULL, 16, 8, IXL_KS_UNALIGNED, ids, end),
            IXL_ERR_INVALID_ARG, "row_ke: missing tensor");
  CHECK_ERR(ctx, ixl_expand(ctx, c, kneg, ke, 16, 8, IXL_KS_UNALIGNED, ids, end),
            IXL_ERR_INVALID_ARG, "row_ks[1] = -8: must be >= 0");
  ixl_tensor_free(c), ixl_tensor_free(ks), ixl_tensor_free(ke), ixl_tensor_free(ids),
      ixl_tensor_free(end), ixl_tensor_free(kneg), ixl_tensor_free(f), ixl_tensor_free(ids3),
      ixl_tensor_free(end3), ixl_tensor_free(ke3);
}

TEST(expand_t_overflow) {
  /* T * ratio overflowing int64 is refused before anything is allocated. A view with a huge
   * shape over a small tensor is not allowed, so build the descriptor by hand: the check
   * must come before the data is touched. */
  ixl_tensor *c = tensor(IXL_I32, 2, 1, 1), *ke = tensor(IXL_I32, 1, 1, 0),
             *ids = tensor(IXL_I32, 2, 1, 1), *end = tensor(IXL_I32, 1, 1, 0);
  ixl_tensor huge = *c;
  huge.shape[1] = INT64_MAX / 2;
  huge.stride[0] = huge.shape[1];
  huge.owns = 0;
  CHECK_ERR(ctx, ixl_expand(ctx, &huge, NULL, ke, 1 << 20, 1, IXL_KS_UNALIGNED, ids, end),
            IXL_ERR_OVERFLOW, "overflows");
  ixl_tensor_free(c), ixl_tensor_free(ke), ixl_tensor_free(ids), ixl_tensor_free(end);
}

/* ---------------------------------------------------------------- K6 reference */

typedef struct {
  float v;
  int32_t col;
} vc;

/* (value descending, column ascending), NaN above everything, -0 == +0. */
static int vc_cmp(const void *pa, const void *pb) {
  const vc *a = pa, *b = pb;
  int an = isnan(a->v), bn = isnan(b->v);
  if (an != bn) return an ? -1 : 1;
  if (!an && a->v != b->v) return a->v > b->v ? -1 : 1;
  return (a->col > b->col) - (a->col < b->col);
}
static int i32_cmp(const void *pa, const void *pb) {
  int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  return (a > b) - (a < b);
}

static void ref_topk_row(const float *x, int64_t n, int64_t k, int sorted, int32_t *out) {
  vc *a = malloc((size_t)(n + 1) * sizeof *a);
  for (int64_t i = 0; i < n; i++) a[i] = (vc){x[i], (int32_t)i};
  qsort(a, (size_t)n, sizeof *a, vc_cmp);
  int64_t m = n < k ? n : k;
  for (int64_t j = 0; j < m; j++) out[j] = a[j].col;
  if (!sorted) qsort(out, (size_t)m, sizeof *out, i32_cmp);
  for (int64_t j = m; j < k; j++) out[j] = -1;
  free(a);
}

/* A value drawn to make ties, NaNs, infinities and signed zeros common. */
static float tricky(int ties) {
  int kind = (int)rand_range(0, 99);
  if (kind < 2) return NAN;
  if (kind < 4) return kind == 2 ? INFINITY : -INFINITY;
  if (kind < 7) return kind == 4 ? 0.0f : -0.0f;
  if (ties) return (float)rand_range(-8, 8) * 0.25f;
  return (float)(rand_unit() * 20.0 - 10.0);
}

static void check_topk_case(uint64_t seed, int64_t R, int64_t C, int k, int bf16, int with_start,
                            int ties) {
  ixl_tensor *lg = tensor(bf16 ? IXL_BF16 : IXL_F32, 2, R, C);
  ixl_tensor *st = tensor(IXL_I32, 1, R, 0), *en = tensor(IXL_I32, 1, R, 0);
  ixl_tensor *out = tensor(IXL_I32, 2, R, k);
  float *vals = malloc((size_t)(R * C + 1) * sizeof *vals);
  for (int64_t i = 0; i < R * C; i++) {
    float v = tricky(ties);
    if (bf16) {
      U16(lg)[i] = ixl_f32_to_bf16(v);
      vals[i] = ixl_bf16_to_f32(U16(lg)[i]);
    } else {
      F32(lg)[i] = vals[i] = v;
    }
  }
  for (int64_t r = 0; r < R; r++) {
    int64_t s = with_start ? rand_range(0, C) : 0;
    int64_t e = rand_range(s, C);
    /* rows not longer than k */
    if (rand_range(0, 4) == 0) e = s + (C - s < k ? C - s : rand_range(0, k));
    if (rand_range(0, 9) == 0) e = s; /* empty rows */
    I32(st)[r] = (int32_t)s;
    I32(en)[r] = (int32_t)e;
  }
  int32_t *ref = malloc((size_t)k * 4);
  for (int sorted = 0; sorted < 2; sorted++) {
    CHECK_OK(ctx, ixl_topk(ctx, lg, with_start ? st : NULL, en, k, sorted, out));
    for (int64_t r = 0; r < R; r++) {
      int64_t s = with_start ? I32(st)[r] : 0;
      ref_topk_row(vals + r * C + s, I32(en)[r] - s, k, sorted, ref);
      int64_t bad = -1;
      for (int64_t j = 0; j < k && bad < 0; j++)
        if (I32(out)[r * k + j] != ref[j]) bad = j;
      CHECK_MSG(bad < 0,
                "seed %llu R %lld C %lld k %d bf16 %d sorted %d row %lld [%lld, %d): slot %lld "
                "got %d, ref %d",
                (unsigned long long)seed, (long long)R, (long long)C, k, bf16, sorted,
                (long long)r, (long long)s, I32(en)[r], (long long)bad,
                bad >= 0 ? I32(out)[r * k + bad] : 0, bad >= 0 ? ref[bad] : 0);
    }
  }
  free(ref), free(vals);
  ixl_tensor_free(lg), ixl_tensor_free(st), ixl_tensor_free(en), ixl_tensor_free(out);
}

TEST(topk_random_vs_reference) {
  static const int ks[] = {1, 3, 8, 17, 64, 256};
  for (int iter = 0; iter < 48; iter++) {
    uint64_t seed = seed_test(5000 + iter);
    int64_t R = rand_range(1, 12), C = rand_range(0, 3000);
    int k = ks[iter % 6];
    check_topk_case(seed, R, C, k, iter % 2, iter % 3 == 0, iter % 4 < 2);
  }
}

TEST(topk_long_rows) {
  /* 128K columns: every radix pass has work; ties force the threshold into a crowded bin. */
  uint64_t seed = seed_test(77);
  check_topk_case(seed, 3, 131072, 2048, 0, 0, 1);
  check_topk_case(seed, 2, 131072, 512, 0, 1, 0);
  check_topk_case(seed, 2, 131072, 4096, 1, 0, 1);
}

TEST(topk_all_equal_and_nan_rows) {
  /* All equal values: the k smallest columns; all NaN: the same; NaN beats +inf. */
  ixl_tensor *lg = tensor(IXL_F32, 2, 3, 100), *en = tensor(IXL_I32, 1, 3, 0),
             *out = tensor(IXL_I32, 2, 3, 8);
  for (int j = 0; j < 100; j++) {
    F32(lg)[j] = 1.5f;
    F32(lg)[100 + j] = NAN;
    F32(lg)[200 + j] = j % 2 ? -0.0f : 0.0f;
  }
  F32(lg)[250] = INFINITY;
  F32(lg)[260] = NAN;
  F32(lg)[270] = -NAN;
  for (int r = 0; r < 3; r++) I32(en)[r] = 100;
  CHECK_OK(ctx, ixl_topk(ctx, lg, NULL, en, 8, 1, out));
  for (int j = 0; j < 8; j++) CHECK(I32(out)[j] == j && I32(out)[8 + j] == j);
  CHECK(I32(out)[16] == 60 && I32(out)[17] == 70 && I32(out)[18] == 50);
  for (int j = 3; j < 8; j++) CHECK(I32(out)[16 + j] == j - 3); /* -0 ties +0: by column */
  ixl_tensor_free(lg), ixl_tensor_free(en), ixl_tensor_free(out);
}

TEST(topk_validation) {
  ixl_tensor *lg = tensor(IXL_F32, 2, 2, 10), *en = tensor(IXL_I32, 1, 2, 0),
             *st = tensor(IXL_I32, 1, 2, 0), *out = tensor(IXL_I32, 2, 2, 8);
  ixl_tensor *li = tensor(IXL_I32, 2, 2, 10), *out9 = tensor(IXL_I32, 2, 2, 9),
             *en3 = tensor(IXL_I32, 1, 3, 0), *outf = tensor(IXL_F32, 2, 2, 8);
  I32(en)[0] = 10, I32(en)[1] = 4, I32(st)[0] = 0, I32(st)[1] = 2;
  for (int i = 0; i < 20; i++) F32(lg)[i] = (float)i;
  CHECK_OK(ctx, ixl_topk(ctx, lg, st, en, 8, 0, out));
  CHECK(I32(out)[8] == 0 && I32(out)[9] == 1 && I32(out)[10] == -1);
  CHECK_ERR(ctx, ixl_topk(ctx, li, st, en, 8, 0, out), IXL_ERR_DTYPE,
            "logits: dtype i32, expected f32 or bf16");
  CHECK_ERR(ctx, ixl_topk(ctx, lg, st, en, 0, 0, out), IXL_ERR_INVALID_ARG,
            "k = 0: must be in [1, 4096]");
  CHECK_ERR(ctx, ixl_topk(ctx, lg, st, en, 5000, 0, out), IXL_ERR_INVALID_ARG,
            "k = 5000: must be in [1, 4096]");
  CHECK_ERR(ctx, ixl_topk(ctx, lg, st, en, 8, 0, out9), IXL_ERR_SHAPE,
            "out: shape[1] = 9, expected k (8)");
  CHECK_ERR(ctx, ixl_topk(ctx, lg, st, en, 8, 0, outf), IXL_ERR_DTYPE, "out: dtype f32");
  CHECK_ERR(ctx, ixl_topk(ctx, lg, st, en3, 8, 0, out), IXL_ERR_SHAPE,
            "row_end: shape[0] = 3, expected 2");
  CHECK_ERR(ctx, ixl_topk(ctx, lg, en3, en, 8, 0, out), IXL_ERR_SHAPE,
            "row_start: shape[0] = 3, expected 2");
  I32(en)[1] = 11;
  CHECK_ERR(ctx, ixl_topk(ctx, lg, st, en, 8, 0, out), IXL_ERR_INVALID_ARG,
            "row_end[1] = 11: must be <= C (10), the columns of logits");
  I32(en)[1] = 1;
  CHECK_ERR(ctx, ixl_topk(ctx, lg, st, en, 8, 0, out), IXL_ERR_INVALID_ARG,
            "row_end[1] = 1: must be >= row_start[1] (2)");
  I32(st)[1] = -1;
  CHECK_ERR(ctx, ixl_topk(ctx, lg, st, en, 8, 0, out), IXL_ERR_INVALID_ARG,
            "row_start[1] = -1: must be >= 0");
  ixl_tensor_free(lg), ixl_tensor_free(en), ixl_tensor_free(st), ixl_tensor_free(out),
      ixl_tensor_free(li), ixl_tensor_free(out9), ixl_tensor_free(en3), ixl_tensor_free(outf);
}

/* ---------------------------------------------------------------- K3 reference */

static double ref_score(const float *x, int64_t n, ixl_block_score how) {
  int any_nan = 0;
  double mx = -INFINITY, sum = 0;
  for (int64_t i = 0; i < n; i++) {
    any_nan |= isnan(x[i]);
    if (x[i] > mx) mx = x[i];
    sum += x[i];
  }
  if (any_nan) return NAN;
  switch (how) {
    case IXL_SCORE_MAX: return mx;
    case IXL_SCORE_SUM: return (float)sum;
    case IXL_SCORE_MEAN: return (float)(sum / (double)n);
    default: {
      if (isinf(mx)) return mx;
      double s = 0;
      for (int64_t i = 0; i < n; i++) s += exp(x[i] - mx);
      return (float)(mx + log(s));
    }
  }
}

static void check_candidates_case(uint64_t seed, int64_t R, int64_t C, int cbs, int64_t T,
                                  ixl_block_score how, int ties) {
  ixl_tensor *lg = tensor(IXL_F32, 2, R, C), *lens = tensor(IXL_I32, 1, R, 0),
             *out = tensor(IXL_I32, 2, R, T);
  for (int64_t i = 0; i < R * C; i++) F32(lg)[i] = tricky(ties);
  for (int64_t r = 0; r < R; r++) {
    int64_t n = rand_range(0, C);
    if (rand_range(0, 5) == 0) n = C < T * cbs ? C : T * cbs; /* exactly T blocks */
    if (rand_range(0, 9) == 0) n = 0;
    I32(lens)[r] = (int32_t)n;
  }
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, cbs, how, out));
  for (int64_t r = 0; r < R; r++) {
    int64_t n = I32(lens)[r], nb = (n + cbs - 1) / cbs;
    vc *a = malloc((size_t)(nb + 1) * sizeof *a);
    for (int64_t b = 0; b < nb; b++) {
      int64_t lo = b * cbs, hi = lo + cbs < n ? lo + cbs : n;
      a[b] = (vc){(float)ref_score(F32(lg) + r * C + lo, hi - lo, how), (int32_t)b};
    }
    if (nb && !isnan(a[nb - 1].v)) a[nb - 1].v = INFINITY;
    qsort(a, (size_t)nb, sizeof *a, vc_cmp);
    int64_t bad = -1;
    for (int64_t j = 0; j < T && bad < 0; j++)
      if (I32(out)[r * T + j] != (j < nb ? a[j].col : -1)) bad = j;
    CHECK_MSG(bad < 0, "seed %llu score %d cbs %d T %lld row %lld len %lld: slot %lld got %d",
              (unsigned long long)seed, (int)how, cbs, (long long)T, (long long)r, (long long)n,
              (long long)bad, bad >= 0 ? I32(out)[r * T + bad] : 0);
    free(a);
  }
  ixl_tensor_free(lg), ixl_tensor_free(lens), ixl_tensor_free(out);
}

TEST(candidates_random_vs_reference) {
  static const int cbss[] = {1, 3, 8, 16, 64};
  for (int iter = 0; iter < 40; iter++) {
    uint64_t seed = seed_test(9000 + iter);
    int cbs = cbss[iter % 5];
    int64_t R = rand_range(1, 10), C = rand_range(0, 4000), T = rand_range(1, 300);
    check_candidates_case(seed, R, C, cbs, T, (ixl_block_score)(iter % 4), iter % 3 != 0);
  }
  uint64_t seed = seed_test(99);
  check_candidates_case(seed, 2, 16384 * 8 + 5, 8, 2048, IXL_SCORE_MAX, 0); /* production-sized */
}

TEST(candidates_edges) {
  /* len < cbs: one block, kept; len 0: all -1; a NaN block outranks the newest block. */
  const int64_t T = 3;
  ixl_tensor *lg = tensor(IXL_F32, 2, 3, 40), *lens = tensor(IXL_I32, 1, 3, 0),
             *out = tensor(IXL_I32, 2, 3, T);
  for (int i = 0; i < 120; i++) F32(lg)[i] = (float)(i % 40);
  I32(lens)[0] = 5, I32(lens)[1] = 0, I32(lens)[2] = 40;
  F32(lg)[80 + 9] = NAN; /* row 2, block 1 */
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, 8, IXL_SCORE_MAX, out));
  CHECK(I32(out)[0] == 0 && I32(out)[1] == -1 && I32(out)[2] == -1);
  CHECK(I32(out)[3] == -1 && I32(out)[4] == -1 && I32(out)[5] == -1);
  CHECK_MSG(I32(out)[6] == 1 && I32(out)[7] == 4 && I32(out)[8] == 3, "%d %d %d", I32(out)[6],
            I32(out)[7], I32(out)[8]);
  /* sum vs max differ: block 0 of row 2 holds a big value but a small sum. */
  for (int j = 0; j < 40; j++) F32(lg)[80 + j] = 1.0f;
  F32(lg)[80] = 5.0f;  /* block 0: max 5, sum 12 */
  F32(lg)[88] = -9.0f; /* block 1: max 1, sum -2 */
  for (int j = 16; j < 24; j++) F32(lg)[80 + j] = 2.0f; /* block 2: max 2, sum 16 */
  I32(lens)[2] = 40;
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, 8, IXL_SCORE_MAX, out));
  CHECK(I32(out)[6] == 4 && I32(out)[7] == 0 && I32(out)[8] == 2);
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, 8, IXL_SCORE_SUM, out));
  CHECK(I32(out)[6] == 4 && I32(out)[7] == 2 && I32(out)[8] == 0);
  ixl_tensor_free(lg), ixl_tensor_free(lens), ixl_tensor_free(out);
}

TEST(candidates_block_scores) {
  /* Four full blocks of 4 and a newest one. Block 0: four 5s (lse 5 + log 4 = 6.39, mean 5);
   * block 1: one 6 and -inf (lse 6, mean -inf); block 2: all -inf (lse must be -inf, not
   * NaN); block 3: {7, -100, -100, -100} (max 7, lse ~7, mean ~-73). */
  const float v[20] = {5, 5, 5, 5, 6, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                       -INFINITY, -INFINITY, 7, -100, -100, -100, 0, 0, 0, 0};
  ixl_tensor *lg = tensor(IXL_F32, 2, 1, 20), *lens = tensor(IXL_I32, 1, 1, 0),
             *out = tensor(IXL_I32, 2, 1, 5);
  memcpy(lg->data, v, sizeof v);
  I32(lens)[0] = 20;
  const int32_t want[4][5] = {
      {4, 3, 1, 0, 2}, /* max */
      {4, 0, 3, 1, 2}, /* mean: block 1 is -inf, block 2 -inf: tie to the smaller id */
      {4, 0, 3, 1, 2}, /* sum */
      {4, 3, 0, 1, 2}, /* logsumexp */
  };
  for (int how = 0; how < 4; how++) {
    CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, 4, (ixl_block_score)how, out));
    int same = 1;
    for (int j = 0; j < 5; j++) same &= I32(out)[j] == want[how][j];
    CHECK_MSG(same, "block_score %d: %d %d %d %d %d", how, I32(out)[0], I32(out)[1], I32(out)[2],
              I32(out)[3], I32(out)[4]);
  }
  /* +inf and -inf in one block: max +inf, sum NaN (above everything, even the newest). */
  F32(lg)[12] = INFINITY;
  F32(lg)[13] = -INFINITY;
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, 4, IXL_SCORE_SUM, out));
  CHECK(I32(out)[0] == 3 && I32(out)[1] == 4);
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, 4, IXL_SCORE_LOGSUMEXP, out));
  CHECK(I32(out)[0] == 3 && I32(out)[1] == 4); /* +inf ties the newest: smaller id first */
  ixl_tensor_free(lg), ixl_tensor_free(lens), ixl_tensor_free(out);
}

TEST(candidates_validation) {
  ixl_tensor *lg = tensor(IXL_F32, 2, 2, 16), *lens = tensor(IXL_I32, 1, 2, 0),
             *out = tensor(IXL_I32, 2, 2, 4), *bf = tensor(IXL_BF16, 2, 2, 16),
             *lens3 = tensor(IXL_I32, 1, 3, 0), *out3 = tensor(IXL_I32, 2, 3, 4);
  for (int i = 0; i < 32; i++) F32(lg)[i] = (float)i;
  I32(lens)[0] = 16, I32(lens)[1] = 17;
  CHECK_ERR(ctx, ixl_candidate_select(ctx, lg, lens, 8, IXL_SCORE_MAX, out), IXL_ERR_INVALID_ARG,
            "lens[1] = 17: must be in [0, C] (C = 16, the columns of logits)");
  I32(lens)[1] = -1;
  CHECK_ERR(ctx, ixl_candidate_select(ctx, lg, lens, 8, IXL_SCORE_MAX, out), IXL_ERR_INVALID_ARG,
            "lens[1] = -1");
  I32(lens)[1] = 3;
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, 8, IXL_SCORE_MAX, out));
  CHECK_ERR(ctx, ixl_candidate_select(ctx, lg, lens, 0, IXL_SCORE_MAX, out), IXL_ERR_INVALID_ARG,
            "candidate_block_size = 0: must be >= 1");
  CHECK_ERR(ctx, ixl_candidate_select(ctx, lg, lens, 8, (ixl_block_score)9, out),
            IXL_ERR_INVALID_ARG,
            "block_score = 9: must be max (0), mean (1), sum (2) or logsumexp (3)");
  CHECK_ERR(ctx, ixl_candidate_select(ctx, bf, lens, 8, IXL_SCORE_MAX, out), IXL_ERR_DTYPE,
            "logits: dtype bf16, expected f32");
  CHECK_ERR(ctx, ixl_candidate_select(ctx, lg, lens3, 8, IXL_SCORE_MAX, out), IXL_ERR_SHAPE,
            "lens: shape[0] = 3, expected 2");
  CHECK_ERR(ctx, ixl_candidate_select(ctx, lg, lens, 8, IXL_SCORE_MAX, out3), IXL_ERR_SHAPE,
            "out: shape[0] = 3, expected 2");
  CHECK_ERR(ctx, ixl_candidate_select(ctx, lg, lens, 8, IXL_SCORE_MAX, NULL), IXL_ERR_INVALID_ARG,
            "out: missing tensor");
  ixl_tensor_free(lg), ixl_tensor_free(lens), ixl_tensor_free(out), ixl_tensor_free(bf),
      ixl_tensor_free(lens3), ixl_tensor_free(out3);
}

/* ---------------------------------------------------------------- mask */

TEST(mask_random_vs_reference) {
  for (int iter = 0; iter < 30; iter++) {
    uint64_t seed = seed_test(12000 + iter);
    int bf16 = iter % 2, cbs = (int)rand_range(1, 20);
    int64_t R = rand_range(1, 8), C = rand_range(0, 500), T = rand_range(0, 12);
    ixl_tensor *lg = tensor(bf16 ? IXL_BF16 : IXL_F32, 2, R, C), *lens = tensor(IXL_I32, 1, R, 0),
               *cand = tensor(IXL_I32, 2, R, T);
    float *orig = malloc((size_t)(R * C + 1) * sizeof *orig);
    for (int64_t i = 0; i < R * C; i++) {
      orig[i] = tricky(0);
      if (isinf(orig[i]) && orig[i] < 0) orig[i] = 1.0f; /* -inf inputs would hide a bug */
      if (bf16) {
        U16(lg)[i] = ixl_f32_to_bf16(orig[i]);
        orig[i] = ixl_bf16_to_f32(U16(lg)[i]);
      } else {
        F32(lg)[i] = orig[i];
      }
    }
    for (int64_t r = 0; r < R; r++) {
      I32(lens)[r] = (int32_t)rand_range(0, C);
      for (int64_t t = 0; t < T; t++)
        I32(cand)[r * T + t] =
            (int32_t)(rand_range(0, 5) == 0 ? rand_range(-3, 1000) : rand_range(-1, C / cbs + 1));
    }
    CHECK_OK(ctx, ixl_mask_candidates(ctx, lg, lens, cand, cbs));
    for (int64_t r = 0; r < R; r++)
      for (int64_t j = 0; j < C; j++) {
        int keep = 0;
        for (int64_t t = 0; t < T; t++) keep |= I32(cand)[r * T + t] == j / cbs;
        keep &= j < I32(lens)[r];
        float got = bf16 ? ixl_bf16_to_f32(U16(lg)[r * C + j]) : F32(lg)[r * C + j];
        float want = keep ? orig[r * C + j] : -INFINITY;
        int same = (isnan(got) && isnan(want)) || got == want;
        CHECK_MSG(same, "seed %llu row %lld col %lld: got %g want %g", (unsigned long long)seed,
                  (long long)r, (long long)j, got, want);
        if (!same) break;
      }
    free(orig);
    ixl_tensor_free(lg), ixl_tensor_free(lens), ixl_tensor_free(cand);
  }
}

TEST(mask_validation) {
  ixl_tensor *lg = tensor(IXL_F32, 2, 2, 16), *lens = tensor(IXL_I32, 1, 2, 0),
             *cand = tensor(IXL_I32, 2, 2, 2), *li = tensor(IXL_I32, 2, 2, 16),
             *cand3 = tensor(IXL_I32, 2, 3, 2), *candf = tensor(IXL_F32, 2, 2, 2);
  I32(lens)[0] = 16, I32(lens)[1] = 20;
  CHECK_ERR(ctx, ixl_mask_candidates(ctx, lg, lens, cand, 8), IXL_ERR_INVALID_ARG,
            "lens[1] = 20: must be in [0, C] (C = 16, the columns of logits)");
  I32(lens)[1] = 2;
  CHECK_ERR(ctx, ixl_mask_candidates(ctx, lg, lens, cand, 0), IXL_ERR_INVALID_ARG,
            "candidate_block_size = 0: must be >= 1");
  CHECK_ERR(ctx, ixl_mask_candidates(ctx, li, lens, cand, 8), IXL_ERR_DTYPE,
            "logits: dtype i32, expected f32 or bf16");
  CHECK_ERR(ctx, ixl_mask_candidates(ctx, lg, lens, cand3, 8), IXL_ERR_SHAPE,
            "cand: shape[0] = 3, expected 2");
  CHECK_ERR(ctx, ixl_mask_candidates(ctx, lg, lens, candf, 8), IXL_ERR_DTYPE,
            "cand: dtype f32, expected i32");
  ixl_tensor_free(lg), ixl_tensor_free(lens), ixl_tensor_free(cand), ixl_tensor_free(li),
      ixl_tensor_free(cand3), ixl_tensor_free(candf);
}

/* ---------------------------------------------------------------- K7 */

TEST(remap_examples_and_random) {
  /* SPEC's second vector: ks = 13, ids [1, 3, 3, 3], sbk 8. Column 9 is block 1 (id 3),
   * offset 1: (3 - 1) * 8 + 1 = 17, request-local. */
  int32_t ids_v[] = {1, 3, 3, 3}, cols_v[] = {9, 0, -1, 7}, ks_v[] = {13};
  ixl_tensor *ids = i32_from(2, 1, 4, ids_v), *cols = i32_from(2, 1, 4, cols_v),
             *ks = i32_from(1, 1, 0, ks_v), *out = tensor(IXL_I32, 2, 1, 4);
  CHECK_OK(ctx, ixl_remap(ctx, cols, ids, ks, 8, out));
  CHECK(I32(out)[0] == 17 && I32(out)[1] == 0 && I32(out)[2] == -1 && I32(out)[3] == 7);
  CHECK_OK(ctx, ixl_remap(ctx, cols, ids, NULL, 8, cols)); /* in place, ks = 0 */
  CHECK(I32(cols)[0] == 25 && I32(cols)[1] == 8 && I32(cols)[2] == -1 && I32(cols)[3] == 15);
  ixl_tensor_free(ids), ixl_tensor_free(cols), ixl_tensor_free(ks), ixl_tensor_free(out);

  /* Random: expand, then remap every sparse column below end; the positions must be the
   * kept blocks' positions in order, inside [0, ke - ks). */
  for (int iter = 0; iter < 20; iter++) {
    uint64_t seed = seed_test(15000 + iter);
    int sbk = 1 << rand_range(0, 4), cbs = sbk << rand_range(0, 2);
    int64_t R = rand_range(1, 6), T = rand_range(1, 20), nsb = T * (cbs / sbk), k = nsb * sbk;
    ixl_tensor *cand = tensor(IXL_I32, 2, R, T), *tks = tensor(IXL_I32, 1, R, 0),
               *tke = tensor(IXL_I32, 1, R, 0), *sid = tensor(IXL_I32, 2, R, nsb),
               *end = tensor(IXL_I32, 1, R, 0), *c = tensor(IXL_I32, 2, R, k),
               *pos = tensor(IXL_I32, 2, R, k);
    for (int64_t r = 0; r < R; r++) {
      I32(tks)[r] = (int32_t)rand_range(0, 100);
      I32(tke)[r] = I32(tks)[r] + (int32_t)rand_range(0, 300);
      for (int64_t t = 0; t < T; t++) I32(cand)[r * T + t] = (int32_t)rand_range(-1, 300 / cbs);
    }
    CHECK_OK(ctx, ixl_expand(ctx, cand, tks, tke, cbs, sbk, IXL_KS_UNALIGNED, sid, end));
    for (int64_t r = 0; r < R; r++)
      for (int64_t j = 0; j < k; j++) I32(c)[r * k + j] = j < I32(end)[r] ? (int32_t)j : -1;
    CHECK_OK(ctx, ixl_remap(ctx, c, sid, tks, sbk, pos));
    for (int64_t r = 0; r < R; r++) {
      int64_t ks0 = I32(tks)[r], len = I32(tke)[r] - ks0;
      for (int64_t j = 0; j < k; j++) {
        int32_t p = I32(pos)[r * k + j];
        if (j >= I32(end)[r]) {
          CHECK(p == -1);
          continue;
        }
        int64_t want = ((int64_t)I32(sid)[r * nsb + j / sbk] - ks0 / sbk) * sbk + j % sbk;
        CHECK_MSG(p == want && p >= 0 && p < len, "seed %llu row %lld col %lld: %d vs %lld",
                  (unsigned long long)seed, (long long)r, (long long)j, p, (long long)want);
        if (j > 0) CHECK(p > I32(pos)[r * k + j - 1]);
      }
    }
    ixl_tensor_free(cand), ixl_tensor_free(tks), ixl_tensor_free(tke), ixl_tensor_free(sid),
        ixl_tensor_free(end), ixl_tensor_free(c), ixl_tensor_free(pos);
  }
}

/* The fused K6 + K7 on the CPU is exactly ixl_topk then ixl_remap in place: random rows
 * (ties, NaN, both dtypes, both orders, row_start or not), random sparse ids and row_ks. */
TEST(topk_remap_is_topk_then_remap) {
  for (int iter = 0; iter < 30; iter++) {
    const uint64_t seed = seed_test(16000 + iter);
    const int bf = iter % 2, sorted = (iter / 2) % 2, starts = (iter / 4) % 2;
    const int sbk = 1 << rand_range(0, 4);
    const int64_t R = rand_range(1, 5), C = rand_range(1, 3000), k = rand_range(1, 600);
    const int64_t nsb = (C + sbk - 1) / sbk + rand_range(0, 3);
    ixl_tensor *lg = tensor(bf ? IXL_BF16 : IXL_F32, 2, R, C), *rs = tensor(IXL_I32, 1, R, 0),
               *re = tensor(IXL_I32, 1, R, 0), *ks = tensor(IXL_I32, 1, R, 0),
               *sid = tensor(IXL_I32, 2, R, nsb), *want = tensor(IXL_I32, 2, R, k),
               *got = tensor(IXL_I32, 2, R, k);
    for (int64_t i = 0; i < R * C; i++) {
      const float v = rand_range(0, 30) == 0 ? NAN : (float)rand_range(-20, 20) * 0.5f;
      if (bf) U16(lg)[i] = ixl_f32_to_bf16(v);
      else F32(lg)[i] = v;
    }
    for (int64_t r = 0; r < R; r++) {
      I32(rs)[r] = starts ? (int32_t)rand_range(0, C) : 0;
      I32(re)[r] = (int32_t)rand_range(I32(rs)[r], C);
      I32(ks)[r] = (int32_t)rand_range(0, 5000);
      for (int64_t b = 0; b < nsb; b++)
        I32(sid)[r * nsb + b] = I32(ks)[r] / sbk + (int32_t)rand_range(0, 10000);
    }
    const ixl_tensor *rsp = starts ? rs : NULL, *ksp = iter % 3 ? ks : NULL;
    CHECK_OK(ctx, ixl_topk(ctx, lg, rsp, re, (int)k, sorted, want));
    CHECK_OK(ctx, ixl_remap(ctx, want, sid, ksp, sbk, want));
    CHECK_OK(ctx, ixl_topk_remap(ctx, lg, rsp, re, (int)k, sorted, sid, ksp, sbk, got));
    CHECK_MSG(memcmp(want->data, got->data, (size_t)(R * k * 4)) == 0,
              "seed %llu: topk_remap differs from topk then remap", (unsigned long long)seed);
    ixl_tensor_free(lg), ixl_tensor_free(rs), ixl_tensor_free(re), ixl_tensor_free(ks),
        ixl_tensor_free(sid), ixl_tensor_free(want), ixl_tensor_free(got);
  }
  /* the checks of both ops */
  ixl_tensor *lg = tensor(IXL_F32, 2, 2, 10), *en = tensor(IXL_I32, 1, 2, 0),
             *sid = tensor(IXL_I32, 2, 2, 2), *sid3 = tensor(IXL_I32, 2, 3, 2),
             *out = tensor(IXL_I32, 2, 2, 4);
  for (int i = 0; i < 20; i++) F32(lg)[i] = (float)i;
  I32(en)[0] = 10, I32(en)[1] = 4;
  for (int i = 0; i < 4; i++) I32(sid)[i] = i;
  CHECK_OK(ctx, ixl_topk_remap(ctx, lg, NULL, en, 4, 0, sid, NULL, 8, out));
  CHECK(I32(out)[0] == 6 && I32(out)[3] == 9 && I32(out)[4] == 16 && I32(out)[7] == 19);
  CHECK_ERR(ctx, ixl_topk_remap(ctx, lg, NULL, en, 4, 0, sid, NULL, 6, out), IXL_ERR_INVALID_ARG,
            "sparse_block_kv = 6: must be a power of two");
  CHECK_ERR(ctx, ixl_topk_remap(ctx, lg, NULL, en, 4, 0, sid3, NULL, 8, out), IXL_ERR_SHAPE,
            "sparse_ids: shape[0] = 3, expected 2");
  CHECK_ERR(ctx, ixl_topk_remap(ctx, lg, NULL, en, 0, 0, sid, NULL, 8, out), IXL_ERR_INVALID_ARG,
            "k = 0: must be in [1, 4096]");
  CHECK_ERR(ctx, ixl_topk_remap(ctx, lg, NULL, en, 4, 0, sid, NULL, 1, out), IXL_ERR_INVALID_ARG,
            "cols[0][0] = 6: must be < num_sparse_blocks (2) * sparse_block_kv (1) = 2");
  CHECK_ERR(ctx, ixl_topk_remap(ctx, lg, NULL, en, 4, 0, out, NULL, 8, out), IXL_ERR_INVALID_ARG,
            "out overlaps sparse_ids");
  ixl_tensor_free(lg), ixl_tensor_free(en), ixl_tensor_free(sid), ixl_tensor_free(sid3),
      ixl_tensor_free(out);
}

TEST(remap_validation) {
  int32_t ids_v[] = {1, 3, 0, 0}, cols_v[] = {9, 16, 0, 1}, ks_v[] = {13, 0};
  ixl_tensor *ids = i32_from(2, 2, 2, ids_v), *cols = i32_from(2, 2, 2, cols_v),
             *ks = i32_from(1, 2, 0, ks_v), *out = tensor(IXL_I32, 2, 2, 2),
             *out3 = tensor(IXL_I32, 2, 2, 3), *ids3 = tensor(IXL_I32, 2, 3, 2),
             *colsf = tensor(IXL_F32, 2, 2, 2);
  CHECK_ERR(ctx, ixl_remap(ctx, cols, ids, ks, 8, out), IXL_ERR_INVALID_ARG,
            "cols[0][1] = 16: must be < num_sparse_blocks (2) * sparse_block_kv (8) = 16");
  CHECK(I32(out)[0] == (int32_t)0xA5A5A5A5); /* nothing written on error */
  I32(cols)[1] = 1;
  I32(ks)[0] = 40; /* ks/sbk = 5 > id 1: a negative position */
  CHECK_ERR(ctx, ixl_remap(ctx, cols, ids, ks, 8, out), IXL_ERR_INVALID_ARG,
            "sparse_ids[0][1] = 3 with row_ks = 40 maps cols[0][0] = 9 to position -15");
  I32(ks)[0] = -2;
  CHECK_ERR(ctx, ixl_remap(ctx, cols, ids, ks, 8, out), IXL_ERR_INVALID_ARG,
            "row_ks[0] = -2: must be >= 0");
  I32(ks)[0] = 13;
  CHECK_OK(ctx, ixl_remap(ctx, cols, ids, ks, 8, out));
  CHECK_ERR(ctx, ixl_remap(ctx, cols, ids, ks, 6, out), IXL_ERR_INVALID_ARG,
            "sparse_block_kv = 6: must be a power of two");
  CHECK_ERR(ctx, ixl_remap(ctx, cols, ids, ks, 8, out3), IXL_ERR_SHAPE,
            "out: shape[1] = 3, expected 2");
  CHECK_ERR(ctx, ixl_remap(ctx, cols, ids3, ks, 8, out), IXL_ERR_SHAPE,
            "sparse_ids: shape[0] = 3, expected 2");
  CHECK_ERR(ctx, ixl_remap(ctx, colsf, ids, ks, 8, out), IXL_ERR_DTYPE, "cols: dtype f32");
  /* out overlapping cols at an offset. */
  ixl_tensor *wide = tensor(IXL_I32, 2, 1, 8), vcols, vout;
  int64_t shp[2] = {2, 2};
  for (int i = 0; i < 8; i++) I32(wide)[i] = 0;
  CHECK_OK(ctx, ixl_tensor_view(ctx, wide, 2, shp, NULL, 0, &vcols));
  CHECK_OK(ctx, ixl_tensor_view(ctx, wide, 2, shp, NULL, 1, &vout));
  CHECK_ERR(ctx, ixl_remap(ctx, &vcols, ids, ks, 8, &vout), IXL_ERR_INVALID_ARG,
            "out overlaps cols");
  ixl_tensor_free(ids), ixl_tensor_free(cols), ixl_tensor_free(ks), ixl_tensor_free(out),
      ixl_tensor_free(out3), ixl_tensor_free(ids3), ixl_tensor_free(colsf), ixl_tensor_free(wide);
}

/* ---------------------------------------------------------------- the chain */

TEST(sparse_selection_equals_masked_dense) {
  /* Without ties, top-k over the candidate-masked dense logits equals top-k over
   * the gathered sparse columns, remapped. The gather here is the identity of K5 on the
   * dense logits (what K5 computes bitwise in bf16 mode). */
  uint64_t seed = seed_test(424242);
  const int cbs = 16, sbk = 8, k = 64;
  const int64_t R = 5, C = 3000, T = 20, nsb = T * cbs / sbk, ncols = nsb * sbk;
  ixl_tensor *lg = tensor(IXL_F32, 2, R, C), *lens = tensor(IXL_I32, 1, R, 0),
             *cand = tensor(IXL_I32, 2, R, T), *sid = tensor(IXL_I32, 2, R, nsb),
             *end = tensor(IXL_I32, 1, R, 0), *sp = tensor(IXL_F32, 2, R, ncols),
             *cols = tensor(IXL_I32, 2, R, k), *dense = tensor(IXL_I32, 2, R, k);
  for (int64_t i = 0; i < R * C; i++) F32(lg)[i] = tricky(0);
  for (int64_t i = 0; i < R * C; i++)
    if (isnan(F32(lg)[i]) || isinf(F32(lg)[i]) || F32(lg)[i] == 0) F32(lg)[i] = (float)i * 1e-4f;
  for (int64_t r = 0; r < R; r++) I32(lens)[r] = (int32_t)rand_range(1, C);
  I32(lens)[0] = (int32_t)(T * cbs); /* exactly T blocks */
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, cbs, IXL_SCORE_MAX, cand));
  CHECK_OK(ctx, ixl_expand(ctx, cand, NULL, lens, cbs, sbk, IXL_KS_UNALIGNED, sid, end));
  for (int64_t r = 0; r < R; r++)
    for (int64_t j = 0; j < ncols; j++) {
      int64_t p = (int64_t)I32(sid)[r * nsb + j / sbk] * sbk + j % sbk;
      F32(sp)[r * ncols + j] = j < I32(end)[r] ? F32(lg)[r * C + p] : -INFINITY;
    }
  CHECK_OK(ctx, ixl_topk(ctx, sp, NULL, end, k, 1, cols));
  CHECK_OK(ctx, ixl_remap(ctx, cols, sid, NULL, sbk, cols));
  CHECK_OK(ctx, ixl_mask_candidates(ctx, lg, lens, cand, cbs));
  CHECK_OK(ctx, ixl_topk(ctx, lg, NULL, lens, k, 1, dense));
  for (int64_t r = 0; r < R; r++)
    for (int64_t j = 0; j < k; j++) {
      /* Sorted, the finite winners come first on both sides and in the same order (sparse
       * column order is position order). Where the dense side has run out of candidate
       * positions (-inf fill), the sparse side has run out of columns (-1). */
      int32_t d = I32(dense)[r * k + j];
      if (d >= 0 && isinf(F32(lg)[r * C + d])) d = -1;
      CHECK_MSG(I32(cols)[r * k + j] == d, "seed %llu row %lld slot %lld: sparse %d dense %d",
                (unsigned long long)seed, (long long)r, (long long)j, I32(cols)[r * k + j], d);
    }
  ixl_tensor_free(lg), ixl_tensor_free(lens), ixl_tensor_free(cand), ixl_tensor_free(sid),
      ixl_tensor_free(end), ixl_tensor_free(sp), ixl_tensor_free(cols), ixl_tensor_free(dense);
}

TEST(empty_shapes) {
  /* Zero rows, zero columns, T = 0, k = 0: legal, nothing read or written out of bounds
   * (tensors of no elements have no data). */
  ixl_tensor *lg0 = tensor(IXL_F32, 2, 2, 0), *lens = tensor(IXL_I32, 1, 2, 0),
             *cand0 = tensor(IXL_I32, 2, 2, 0), *out3 = tensor(IXL_I32, 2, 2, 3),
             *ids0 = tensor(IXL_I32, 2, 2, 0), *end = tensor(IXL_I32, 1, 2, 0),
             *lg = tensor(IXL_F32, 2, 2, 5), *none = tensor(IXL_I32, 2, 0, 4),
             *lens_none = tensor(IXL_I32, 1, 0, 0), *lg_none = tensor(IXL_F32, 2, 0, 7),
             *cols0 = tensor(IXL_I32, 2, 2, 0);
  I32(lens)[0] = I32(lens)[1] = 0;
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg0, lens, 8, IXL_SCORE_MAX, out3));
  CHECK(I32(out3)[0] == -1 && I32(out3)[5] == -1);
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, 8, IXL_SCORE_MAX, cand0));
  CHECK_OK(ctx, ixl_topk(ctx, lg0, NULL, lens, 3, 1, out3));
  CHECK(I32(out3)[0] == -1 && I32(out3)[5] == -1);
  CHECK_OK(ctx, ixl_mask_candidates(ctx, lg0, lens, cand0, 8));
  for (int i = 0; i < 10; i++) F32(lg)[i] = 1.0f;
  I32(lens)[0] = 5;
  CHECK_OK(ctx, ixl_mask_candidates(ctx, lg, lens, cand0, 8));
  CHECK(isinf(F32(lg)[0]) && isinf(F32(lg)[9]));
  I32(end)[0] = I32(end)[1] = 77;
  CHECK_OK(ctx, ixl_expand(ctx, cand0, NULL, lens, 8, 8, IXL_KS_UNALIGNED, ids0, end));
  CHECK(I32(end)[0] == 0 && I32(end)[1] == 0);
  CHECK_OK(ctx, ixl_remap(ctx, cols0, out3, NULL, 8, cols0));
  CHECK_OK(ctx, ixl_remap(ctx, out3, ids0, lens, 8, out3)); /* all -1: no block needed */
  CHECK_OK(ctx, ixl_expand(ctx, none, NULL, lens_none, 8, 8, IXL_KS_UNALIGNED, none, lens_none));
  CHECK_OK(ctx, ixl_topk(ctx, lg_none, NULL, lens_none, 4, 0, none));
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg_none, lens_none, 8, IXL_SCORE_MAX, none));
  ixl_tensor_free(lg0), ixl_tensor_free(lens), ixl_tensor_free(cand0), ixl_tensor_free(out3),
      ixl_tensor_free(ids0), ixl_tensor_free(end), ixl_tensor_free(lg), ixl_tensor_free(none),
      ixl_tensor_free(lens_none), ixl_tensor_free(lg_none), ixl_tensor_free(cols0);
}

/* Issue 19: a decode row of 0 positions (an empty indexer cache, or padding) is an empty row
 * of every stage: K3 keeps no block (all -1), K4 (paged: ks = 0, ke = 0) gives end 0 and pads
 * with ks / sbk = 0, K6 over [0, end) gives all -1, K7 maps them to -1, in both ks_modes and
 * at every cbs/sbk; the rows beside it get what they get alone. */
TEST(empty_decode_rows_through_k3_k4_k6_k7) {
  const int64_t R = 5, C = 300, T = 16, k = 16;
  const int32_t lens_v[5] = {0, 37, 0, 300, 1};
  const int pairs[3][2] = {{8, 8}, {16, 8}, {64, 16}};
  for (int pi = 0; pi < 3; pi++)
    for (int mode = 0; mode < 2; mode++) {
      const int cbs = pairs[pi][0], sbk = pairs[pi][1];
      const int64_t nsb = T * (cbs / sbk), ncols = nsb * sbk;
      ixl_tensor *lg = tensor(IXL_F32, 2, R, C), *lens = i32_from(1, R, 0, lens_v),
                 *cand = tensor(IXL_I32, 2, R, T), *ids = tensor(IXL_I32, 2, R, nsb),
                 *end = tensor(IXL_I32, 1, R, 0), *sp = tensor(IXL_F32, 2, R, ncols),
                 *cols = tensor(IXL_I32, 2, R, k), *pos = tensor(IXL_I32, 2, R, k),
                 *dense = tensor(IXL_I32, 2, R, k);
      for (int64_t i = 0; i < R * C; i++) F32(lg)[i] = (float)((i * 7919) % 1000) / 7;
      for (int64_t i = 0; i < R * ncols; i++) F32(sp)[i] = (float)((i * 104729) % 1000) / 3;
      CHECK_OK(ctx, ixl_candidate_select(ctx, lg, lens, cbs, IXL_SCORE_MAX, cand));
      CHECK_OK(ctx, ixl_expand(ctx, cand, NULL, lens, cbs, sbk, (ixl_ks_mode)mode, ids, end));
      CHECK_OK(ctx, ixl_topk(ctx, sp, NULL, end, (int)k, mode, cols));
      CHECK_OK(ctx, ixl_remap(ctx, cols, ids, NULL, sbk, pos));
      CHECK_OK(ctx, ixl_topk(ctx, lg, NULL, lens, (int)k, 0, dense));
      for (int64_t r = 0; r < R; r++) {
        const int empty = lens_v[r] == 0;
        int bad = 0;
        for (int64_t t = 0; t < T; t++) bad += empty ? I32(cand)[r * T + t] != -1 : 0;
        for (int64_t j = 0; j < nsb; j++) bad += empty ? I32(ids)[r * nsb + j] != 0 : 0;
        for (int64_t j = 0; j < k; j++)
          bad += empty ? I32(cols)[r * k + j] != -1 || I32(pos)[r * k + j] != -1 ||
                             I32(dense)[r * k + j] != -1
                       : I32(dense)[r * k + j] < 0 && j < lens_v[r];
        bad += empty ? I32(end)[r] != 0 : I32(end)[r] < 1;
        bad += !empty && I32(cand)[r * T] != (lens_v[r] - 1) / cbs; /* the newest block first */
        CHECK_MSG(bad == 0, "cbs %d sbk %d mode %d row %lld (len %d): %d wrong slots", cbs, sbk,
                  mode, (long long)r, lens_v[r], bad);
      }
      /* The rows beside the empty ones: the same as a batch without them (rows 1, 3, 4). */
      const int32_t alone_v[3] = {37, 300, 1};
      ixl_tensor *lens3 = i32_from(1, 3, 0, alone_v), *lg3 = tensor(IXL_F32, 2, 3, C),
                 *cand3 = tensor(IXL_I32, 2, 3, T), *ids3 = tensor(IXL_I32, 2, 3, nsb),
                 *end3 = tensor(IXL_I32, 1, 3, 0);
      const int64_t from[3] = {1, 3, 4};
      for (int i = 0; i < 3; i++) memcpy(F32(lg3) + i * C, F32(lg) + from[i] * C, C * 4);
      CHECK_OK(ctx, ixl_candidate_select(ctx, lg3, lens3, cbs, IXL_SCORE_MAX, cand3));
      CHECK_OK(ctx, ixl_expand(ctx, cand3, NULL, lens3, cbs, sbk, (ixl_ks_mode)mode, ids3, end3));
      for (int i = 0; i < 3; i++) {
        CHECK(memcmp(I32(cand3) + i * T, I32(cand) + from[i] * T, (size_t)T * 4) == 0);
        CHECK(memcmp(I32(ids3) + i * nsb, I32(ids) + from[i] * nsb, (size_t)nsb * 4) == 0);
        CHECK(I32(end3)[i] == I32(end)[from[i]]);
      }
      ixl_tensor *all[] = {lg, lens, cand, ids, end, sp, cols, pos, dense, lens3, lg3, cand3,
                           ids3, end3};
      for (size_t i = 0; i < sizeof all / sizeof *all; i++) ixl_tensor_free(all[i]);
    }
}

TEST(mass_recall_limits) {
  /* Softmax mass over the dense top-k: finite logits, +inf logits (the mass sits on them
   * evenly), all -inf (uniform), NaN entries ignored, -1 pads ignored. Never NaN while one
   * entry is a number. */
  const int64_t R = 4, k = 3;
  ixl_tensor *pos = tensor(IXL_I32, 2, R, k), *vals = tensor(IXL_F32, 2, R, k),
             *sel = tensor(IXL_I32, 2, R, 2), *out = tensor(IXL_F32, 1, R, 0);
  const int32_t P[] = {5, 7, 9, 5, 7, 9, 5, 7, 9, 5, 7, -1};
  const float inf = INFINITY;
  const float V[] = {0.0f, 0.0f, (float)log(2.0), inf, 3.0f, inf,
                     -inf, -inf, -inf, NAN, 1.0f, 9.0f};
  const int32_t S[] = {9, -1, 5, -1, 7, -1, 9, 7};
  memcpy(pos->data, P, sizeof P), memcpy(vals->data, V, sizeof V), memcpy(sel->data, S, sizeof S);
  CHECK_OK(ctx, ixl_rows_mass_recall(ctx, pos, vals, sel, out));
  const float *o = (const float *)out->data;
  CHECK(fabsf(o[0] - 0.5f) < 1e-6f); /* e^log2 / (1 + 1 + 2) */
  CHECK(o[1] == 0.5f);               /* two +inf logits, one of them kept */
  CHECK(fabsf(o[2] - 1.0f / 3) < 1e-6f);
  CHECK(o[3] == 1.0f); /* the NaN and the pad weigh nothing; 7 is the only number, kept */
  ixl_tensor_free(pos), ixl_tensor_free(vals), ixl_tensor_free(sel), ixl_tensor_free(out);
}

TEST(metrics_per_row_outputs_are_one_dim) {
  /* counts, valid, end and mismatches hold one value a row: [R, 0] has no data to write and
   * [R, k > 1] would take row r's value at flat index r, so both are refused. Position lists
   * may be [R, 0]. */
  const int32_t A[] = {1, 2, 3, 4, 5, 6};
  ixl_tensor *a = i32_from(2, 2, 3, A), *b = i32_from(2, 2, 3, A), *c1 = tensor(IXL_I32, 1, 2, 0),
             *c0 = tensor(IXL_I32, 2, 2, 0), *c3 = tensor(IXL_I32, 2, 2, 3),
             *cr1 = tensor(IXL_I32, 2, 2, 1), *x = tensor(IXL_BF16, 2, 2, 3),
             *y = tensor(IXL_BF16, 2, 2, 3), *e = tensor(IXL_I32, 1, 2, 0),
             *e0 = tensor(IXL_I32, 2, 2, 0), *a0 = tensor(IXL_I32, 2, 2, 0),
             *f0 = tensor(IXL_F32, 2, 2, 0), *mass = tensor(IXL_F32, 1, 2, 0);
  CHECK_ERR(ctx, ixl_rows_overlap(ctx, a, b, c0, NULL), IXL_ERR_SHAPE,
            "counts: 2 dims, expected [R] (one value per row)");
  CHECK_ERR(ctx, ixl_rows_overlap(ctx, a, b, c3, NULL), IXL_ERR_SHAPE,
            "counts: 2 dims, expected [R]");
  CHECK_ERR(ctx, ixl_rows_overlap(ctx, a, b, cr1, NULL), IXL_ERR_SHAPE,
            "counts: 2 dims, expected [R]");
  CHECK_ERR(ctx, ixl_rows_overlap(ctx, a, b, c1, c0), IXL_ERR_SHAPE, "valid: 2 dims, expected [R]");
  CHECK_ERR(ctx, ixl_rows_in_candidates(ctx, a, b, 8, c0), IXL_ERR_SHAPE,
            "counts: 2 dims, expected [R] (one value per row)");
  CHECK_ERR(ctx, ixl_rows_in_candidates(ctx, a, b, 8, c3), IXL_ERR_SHAPE, "counts: 2 dims");
  memset(x->data, 0, 12), memset(y->data, 0, 12);
  I32(e)[0] = I32(e)[1] = 3;
  CHECK_ERR(ctx, ixl_rows_bf16_compare(ctx, x, y, e0, c1, NULL, NULL), IXL_ERR_SHAPE,
            "end: 2 dims, expected [R] (one value per row)");
  CHECK_ERR(ctx, ixl_rows_bf16_compare(ctx, x, y, c3, c1, NULL, NULL), IXL_ERR_SHAPE,
            "end: 2 dims");
  CHECK_ERR(ctx, ixl_rows_bf16_compare(ctx, x, y, e, c0, NULL, NULL), IXL_ERR_SHAPE,
            "mismatches: 2 dims, expected [R] (one value per row)");
  CHECK_ERR(ctx, ixl_rows_bf16_compare(ctx, x, y, e, c3, NULL, NULL), IXL_ERR_SHAPE,
            "mismatches: 2 dims");
  CHECK_OK(ctx, ixl_rows_bf16_compare(ctx, x, y, e, c1, NULL, NULL));
  CHECK(I32(c1)[0] == 0 && I32(c1)[1] == 0);
  /* Empty position lists (no data) are legal and count nothing. */
  I32(c1)[0] = I32(c1)[1] = 77;
  CHECK_OK(ctx, ixl_rows_overlap(ctx, a0, a0, c1, e));
  CHECK(I32(c1)[0] == 0 && I32(c1)[1] == 0 && I32(e)[0] == 0 && I32(e)[1] == 0);
  CHECK_OK(ctx, ixl_rows_overlap(ctx, a, a0, c1, e));
  CHECK(I32(c1)[0] == 0 && I32(e)[0] == 3);
  I32(c1)[0] = 77;
  CHECK_OK(ctx, ixl_rows_in_candidates(ctx, a0, a0, 8, c1));
  CHECK(I32(c1)[0] == 0);
  I32(c1)[0] = 77;
  CHECK_OK(ctx, ixl_rows_in_candidates(ctx, a, a0, 8, c1));
  CHECK(I32(c1)[0] == 0);
  CHECK_OK(ctx, ixl_rows_mass_recall(ctx, a0, f0, a0, mass));
  CHECK(isnan(F32(mass)[0]) && isnan(F32(mass)[1]));
  ixl_tensor *ts[] = {a, b, c1, c0, c3, cr1, x, y, e, e0, a0, f0, mass};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) ixl_tensor_free(ts[i]);
}

TEST(outputs_sharing_memory_with_inputs_are_refused) {
  /* gather_cols into its own src, candidate_select with lens inside out, a count written over
   * its positions: each would read values it already overwrote. */
  ixl_tensor *src = tensor(IXL_F32, 2, 1, 4), *idx = tensor(IXL_I32, 2, 1, 4),
             *out = tensor(IXL_F32, 2, 1, 4), *base = tensor(IXL_I32, 1, 6, 0),
             *lg = tensor(IXL_F32, 2, 2, 4), *pos = tensor(IXL_I32, 1, 2, 0);
  for (int i = 0; i < 4; i++) F32(src)[i] = (float)(i + 1), I32(idx)[i] = 3 - i;
  CHECK_ERR(ctx, ixl_gather_cols(ctx, src, idx, src), IXL_ERR_INVALID_ARG,
            "out overlaps src: an output must not share memory with an input");
  CHECK(F32(src)[0] == 1.0f && F32(src)[3] == 4.0f); /* untouched */
  ixl_tensor isrc = *src;
  isrc.dtype = IXL_I32; /* same bytes seen as i32: out = idx */
  CHECK_ERR(ctx, ixl_gather_cols(ctx, &isrc, idx, idx), IXL_ERR_INVALID_ARG, "out overlaps idx");
  CHECK_OK(ctx, ixl_gather_cols(ctx, src, idx, out));
  CHECK(F32(out)[0] == 4.0f && F32(out)[3] == 1.0f);

  for (int i = 0; i < 8; i++) F32(lg)[i] = 0.0f;
  for (int i = 0; i < 6; i++) I32(base)[i] = i < 2 ? 1 : 0;
  ixl_tensor o, lens;
  int64_t so[2] = {2, 2}, sl[1] = {2};
  CHECK_OK(ctx, ixl_tensor_view(ctx, base, 2, so, NULL, 0, &o));
  CHECK_OK(ctx, ixl_tensor_view(ctx, base, 1, sl, NULL, 0, &lens));
  CHECK_ERR(ctx, ixl_candidate_select(ctx, lg, &lens, 1, IXL_SCORE_MAX, &o), IXL_ERR_INVALID_ARG,
            "out overlaps lens: an output must not share memory with an input");
  CHECK(I32(base)[0] == 1 && I32(base)[1] == 1 && I32(base)[2] == 0);
  CHECK_OK(ctx, ixl_tensor_view(ctx, base, 1, sl, NULL, 4, &lens)); /* beside out: fine */
  I32(base)[4] = I32(base)[5] = 1;
  CHECK_OK(ctx, ixl_candidate_select(ctx, lg, &lens, 1, IXL_SCORE_MAX, &o));
  CHECK(I32(base)[0] == 0 && I32(base)[1] == -1 && I32(base)[2] == 0 && I32(base)[3] == -1);

  I32(pos)[0] = 5, I32(pos)[1] = 6;
  CHECK_ERR(ctx, ixl_rows_overlap(ctx, pos, pos, pos, NULL), IXL_ERR_INVALID_ARG,
            "counts overlaps a");
  CHECK_ERR(ctx, ixl_rows_in_candidates(ctx, pos, pos, 8, pos), IXL_ERR_INVALID_ARG,
            "counts overlaps pos");
  ixl_tensor_free(src), ixl_tensor_free(idx), ixl_tensor_free(out), ixl_tensor_free(base),
      ixl_tensor_free(lg), ixl_tensor_free(pos);
}

TEST(every_selection_op_refuses_shared_memory) {
  /* One alias case per op (descriptors pointed into another tensor's bytes; nothing is
   * written on refusal, so the short targets are never overrun), and the allowed cases:
   * disjoint views of one buffer, remap in place, mask_candidates on its own logits. */
  int32_t cand_v[] = {0, 1}, ke_v[] = {16};
  ixl_tensor *cand = i32_from(2, 1, 2, cand_v), *ke = i32_from(1, 1, 0, ke_v),
             *base = tensor(IXL_I32, 1, 3, 0), *lg = tensor(IXL_F32, 2, 1, 16);
  ixl_tensor sid, end, t;
  int64_t s_sid[2] = {1, 2}, s_end[1] = {1};
  CHECK_OK(ctx, ixl_tensor_view(ctx, base, 2, s_sid, NULL, 0, &sid));
  CHECK_OK(ctx, ixl_tensor_view(ctx, base, 1, s_end, NULL, 1, &end)); /* inside sid */
  /* K4: an output over an input, then two outputs over each other. */
  t = sid;
  t.data = cand->data;
  ixl_tensor e2 = end;
  e2.data = (int32_t *)base->data + 2;
  CHECK_ERR(ctx, ixl_expand(ctx, cand, NULL, ke, 8, 8, IXL_KS_UNALIGNED, &t, &e2),
            IXL_ERR_INVALID_ARG,
            "sparse_ids overlaps cand: an output must not share memory with an input");
  CHECK(I32(cand)[0] == 0 && I32(cand)[1] == 1);
  CHECK_ERR(ctx, ixl_expand(ctx, cand, NULL, ke, 8, 8, IXL_KS_UNALIGNED, &sid, &end),
            IXL_ERR_INVALID_ARG,
            "end overlaps sparse_ids: two outputs must not share memory");
  CHECK_OK(ctx, ixl_expand(ctx, cand, NULL, ke, 8, 8, IXL_KS_UNALIGNED, &sid, &e2));
  CHECK(I32(base)[0] == 0 && I32(base)[1] == 1 && I32(base)[2] == 16);

  /* K6: out over logits (the same bytes seen as i32). */
  for (int i = 0; i < 16; i++) F32(lg)[i] = (float)i;
  ixl_tensor *tk = tensor(IXL_I32, 2, 1, 2);
  t = *tk;
  t.data = lg->data;
  CHECK_ERR(ctx, ixl_topk(ctx, lg, NULL, ke, 2, 1, &t), IXL_ERR_INVALID_ARG,
            "out overlaps logits: an output must not share memory with an input");
  CHECK(F32(lg)[0] == 0.0f && F32(lg)[1] == 1.0f);
  t.data = ke->data; /* out over row_end */
  CHECK_ERR(ctx, ixl_topk(ctx, lg, NULL, ke, 2, 1, &t), IXL_ERR_INVALID_ARG,
            "out overlaps row_end");
  CHECK_OK(ctx, ixl_topk(ctx, lg, NULL, ke, 2, 1, tk));
  CHECK(I32(tk)[0] == 15 && I32(tk)[1] == 14);

  /* Masking writes logits in place: lens or cand inside logits is refused. */
  ixl_tensor lens = *ke;
  lens.data = (float *)lg->data + 15;
  CHECK_ERR(ctx, ixl_mask_candidates(ctx, lg, &lens, cand, 8), IXL_ERR_INVALID_ARG,
            "logits overlaps lens: an output must not share memory with an input");
  t = *cand;
  t.data = lg->data;
  CHECK_ERR(ctx, ixl_mask_candidates(ctx, lg, ke, &t, 8), IXL_ERR_INVALID_ARG,
            "logits overlaps cand");
  CHECK(F32(lg)[15] == 15.0f && F32(lg)[0] == 0.0f);
  I32(cand)[1] = -1; /* keep block 0 only */
  CHECK_OK(ctx, ixl_mask_candidates(ctx, lg, ke, cand, 8));
  CHECK(F32(lg)[7] == 7.0f && F32(lg)[8] == -INFINITY);

  /* K7: out may be cols itself, never sparse_ids or row_ks. */
  int32_t ids_v[] = {1, 3}, cols_v[] = {9, 0};
  ixl_tensor *ids = i32_from(2, 1, 2, ids_v), *cols = i32_from(2, 1, 2, cols_v);
  t = *cols;
  t.data = ids->data;
  CHECK_ERR(ctx, ixl_remap(ctx, cols, ids, NULL, 8, &t), IXL_ERR_INVALID_ARG,
            "out overlaps sparse_ids: an output must not share memory with an input");
  CHECK(I32(ids)[0] == 1 && I32(ids)[1] == 3);
  ixl_tensor rks = *ke;
  rks.data = (int32_t *)cols->data + 1;
  CHECK_ERR(ctx, ixl_remap(ctx, cols, ids, &rks, 8, cols), IXL_ERR_INVALID_ARG,
            "out overlaps row_ks");
  CHECK_OK(ctx, ixl_remap(ctx, cols, ids, NULL, 8, cols));
  CHECK(I32(cols)[0] == 25 && I32(cols)[1] == 8);

  /* Metrics: two outputs over each other, and an output over an input. */
  int32_t pos_v[] = {5, 6};
  ixl_tensor *pos = i32_from(2, 2, 1, pos_v), *cnt = tensor(IXL_I32, 1, 2, 0);
  CHECK_ERR(ctx, ixl_rows_overlap(ctx, pos, pos, cnt, cnt), IXL_ERR_INVALID_ARG,
            "valid overlaps counts: two outputs must not share memory");
  ixl_tensor *vals = tensor(IXL_F32, 2, 2, 1), *mass = tensor(IXL_F32, 1, 2, 0);
  F32(vals)[0] = F32(vals)[1] = 1.0f;
  CHECK_ERR(ctx, ixl_rows_mass_recall(ctx, pos, vals, pos, vals), IXL_ERR_SHAPE,
            "out: 2 dims, expected 1");
  t = *mass;
  t.data = vals->data;
  CHECK_ERR(ctx, ixl_rows_mass_recall(ctx, pos, vals, pos, &t), IXL_ERR_INVALID_ARG,
            "out overlaps dense_vals: an output must not share memory with an input");
  CHECK(F32(vals)[0] == 1.0f);
  ixl_tensor *ba = tensor(IXL_BF16, 2, 2, 2), *be = tensor(IXL_I32, 1, 2, 0);
  I32(be)[0] = I32(be)[1] = 2;
  CHECK_ERR(ctx, ixl_rows_bf16_compare(ctx, ba, ba, be, be, NULL, NULL), IXL_ERR_INVALID_ARG,
            "mismatches overlaps end: an output must not share memory with an input");
  t = *be;
  t.data = ba->data;
  CHECK_ERR(ctx, ixl_rows_bf16_compare(ctx, ba, ba, be, &t, NULL, NULL), IXL_ERR_INVALID_ARG,
            "mismatches overlaps a");
  CHECK_OK(ctx, ixl_rows_bf16_compare(ctx, ba, ba, be, cnt, NULL, NULL));
  CHECK(I32(cnt)[0] == 0 && I32(cnt)[1] == 0);
  ixl_tensor *ts[] = {cand, ke, base, lg, tk, ids, cols, pos, cnt, vals, mass, ba, be};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) ixl_tensor_free(ts[i]);
}

int main(void) {
  if (ixl_ctx_new(IXL_BACKEND_CPU, 0, 1, &ctx) != IXL_OK) {
    printf("# 0 passed, 1 failed\n");
    return 1;
  }
  ixl_ctx_set_threads(ctx, 2);
  RUN(expand_spec_vectors);
  RUN(expand_random_vs_reference);
  RUN(expand_hostile_candidates);
  RUN(expand_aligned_mode);
  RUN(expand_validation);
  RUN(expand_t_overflow);
  RUN(topk_random_vs_reference);
  RUN(topk_long_rows);
  RUN(topk_all_equal_and_nan_rows);
  RUN(topk_validation);
  RUN(candidates_random_vs_reference);
  RUN(candidates_edges);
  RUN(candidates_block_scores);
  RUN(candidates_validation);
  RUN(mask_random_vs_reference);
  RUN(mask_validation);
  RUN(remap_examples_and_random);
  RUN(remap_validation);
  RUN(topk_remap_is_topk_then_remap);
  RUN(sparse_selection_equals_masked_dense);
  RUN(empty_shapes);
  RUN(empty_decode_rows_through_k3_k4_k6_k7);
  RUN(mass_recall_limits);
  RUN(metrics_per_row_outputs_are_one_dim);
  RUN(outputs_sharing_memory_with_inputs_are_refused);
  RUN(every_selection_op_refuses_shared_memory);
  ixl_ctx_free(ctx);
  DONE();
}
