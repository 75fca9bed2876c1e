/* test_cuda_ops.c - GPU parity of the CUDA ops outside the logits kernels: quantize,
 * dequantize, prepare_weights, kv_pages_write (kernels/formats/formats.cu), K6 top-k (topk.cu), K3
 * candidate selection and the candidate mask (select.cu), K4 expand (expand.cu) and K7 remap
 * (remap.cu). Each is run on fresh seeded random inputs on the device and on the host (the CPU
 * reference) and the results compared: integer outputs and codes exactly, floats bitwise
 * (+0 == -0, NaN == NaN). Device outputs are poisoned before every run, and each GPU op runs
 * twice with different poison, so an unwritten element or a run-to-run difference fails.
 *
 * Without a usable GPU every test prints "ok - NAME # skipped: no GPU" and passes, so CI
 * builds and runs this file. Environment: IXL_TEST_SEED (default: from the clock; printed),
 * IXL_TEST_SMALL=1 (small shapes only, for compute-sanitizer), IXL_BENCH=1 (also time the ops at
 * the V4.1-Flash and V3.2 shapes and print a table) or IXL_BENCH=only (just that),
 * IXL_TEST_ONLY=WORD,... (only the tests whose names contain one of the words, e.g. topk),
 * IXL_TEST_SELECT=v2 (the top-k cases on select v2 only, not v1 too), IXL_TEST_MAX_CASES=N
 * (only the first N top-k cases of each test), IXL_TEST_CSTREAM=N (every cluster-stream case at
 * cluster size N); select v2's own switches (select/topk_v2.h) are
 * read from the environment too, e.g. IXL_TOPK_V2_NEXT=3 (its round-2 kernels; off by default).
 * IXL_BENCH=topk times the modes in IXL_TOPK_BENCH_MODES=M1,... when set (e.g. v2,v2:next),
 * else all of them, on the shapes whose names contain a word of IXL_TOPK_BENCH_SHAPES=W1,...
 * when set, else on all. */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "select/topk_v2.h"

static ixl_ctx *g_ctx;
static int g_small, g_bench;
static uint64_t g_seed, g_rng;

/* ---------------------------------------------------------------- random numbers */
static uint64_t rnd_u64(void) {
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double rnd_unif(void) { return (double)(rnd_u64() >> 11) * 0x1p-53; }
static int64_t rnd_int(int64_t lo, int64_t hi) { /* [lo, hi] */
  return lo + (int64_t)(rnd_u64() % (uint64_t)(hi - lo + 1));
}
static double rnd_normal(void) {
  double u = rnd_unif(), v = rnd_unif();
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* ---------------------------------------------------------------- tensors */
static ixl_tensor *tnew(int dtype, int ndim, const int64_t *shape, int device) {
  ixl_tensor *t = NULL;
  ixl_status st = ixl_tensor_new(g_ctx, (ixl_dtype)dtype, ndim, shape, (ixl_device_kind)device, &t);
  if (st) {
    fprintf(stderr, "  tensor_new: %s\n", ixl_last_error(g_ctx));
    check_failed_ = 1;
  }
  return t;
}
static ixl_tensor *host2(int dtype, int64_t a, int64_t b) {
  int64_t s[2] = {a, b};
  return tnew(dtype, 2, s, IXL_HOST);
}
static ixl_tensor *host1(int dtype, int64_t a) {
  int64_t s[1] = {a};
  return tnew(dtype, 1, s, IXL_HOST);
}
static int64_t tbytes(const ixl_tensor *t) {
  return ixl_tensor_numel(t) * (int64_t)ixl_dtype_size((ixl_dtype)t->dtype);
}
/* A device tensor with the same shape and contents. */
static ixl_tensor *to_dev(const ixl_tensor *h) {
  ixl_tensor *d = tnew(h->dtype, h->ndim, h->shape, IXL_DEVICE);
  if (d) CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, d, h));
  return d;
}
static ixl_tensor *to_host(const ixl_tensor *d) {
  ixl_tensor *h = tnew(d->dtype, d->ndim, d->shape, IXL_HOST);
  if (h) CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, h, d));
  return h;
}
static void tfree(ixl_tensor **ts, int n) {
  for (int i = 0; i < n; i++) ixl_tensor_free(ts[i]);
}

/* Element-wise equality of two host tensors of one dtype: bytes for integers and codes; for
 * floats the bits, with +0 == -0 and any NaN == any NaN. Reports the first mismatches. */
static int same(const ixl_tensor *a, const ixl_tensor *b, const char *what) {
  const int64_t n = ixl_tensor_numel(a);
  int64_t bad = 0, first = -1;
  const int es = (int)ixl_dtype_size((ixl_dtype)a->dtype);
  for (int64_t i = 0; i < n; i++) {
    int eq;
    if (a->dtype == IXL_F32) {
      const float x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
      uint32_t ux, uy;
      memcpy(&ux, &x, 4);
      memcpy(&uy, &y, 4);
      eq = ux == uy || (isnan(x) && isnan(y)) || (x == 0 && y == 0);
    } else if (a->dtype == IXL_BF16) {
      const uint16_t x = ((const uint16_t *)a->data)[i], y = ((const uint16_t *)b->data)[i];
      const int xn = (x & 0x7fff) > 0x7f80, yn = (y & 0x7fff) > 0x7f80;
      eq = x == y || (xn && yn) || ((x & 0x7fff) == 0 && (y & 0x7fff) == 0);
    } else {
      eq = memcmp((const char *)a->data + i * es, (const char *)b->data + i * es, (size_t)es) == 0;
    }
    if (!eq) {
      if (bad < 5) {
        double va = 0, vb = 0;
        if (a->dtype == IXL_I32) {
          va = ((const int32_t *)a->data)[i];
          vb = ((const int32_t *)b->data)[i];
        } else if (a->dtype == IXL_F32) {
          va = ((const float *)a->data)[i];
          vb = ((const float *)b->data)[i];
        } else if (a->dtype == IXL_BF16) {
          va = ixl_bf16_to_f32(((const uint16_t *)a->data)[i]);
          vb = ixl_bf16_to_f32(((const uint16_t *)b->data)[i]);
        } else {
          va = ((const uint8_t *)a->data)[i * es];
          vb = ((const uint8_t *)b->data)[i * es];
        }
        int64_t row = a->ndim == 2 ? i / a->shape[1] : i;
        int64_t col = a->ndim == 2 ? i % a->shape[1] : 0;
        fprintf(stderr, "  %s: element %lld (row %lld, col %lld): gpu %.9g, cpu %.9g (seed %llu)\n",
                what, (long long)i, (long long)row, (long long)col, va, vb,
                (unsigned long long)g_seed);
      }
      if (first < 0) first = i;
      bad++;
    }
  }
  if (bad) {
    fprintf(stderr, "  %s: %lld of %lld elements differ (seed %llu)\n", what, (long long)bad,
            (long long)n, (unsigned long long)g_seed);
    check_failed_ = 1;
  }
  return bad == 0;
}

/* Runs a device op twice with different poison on its outputs and checks both runs agree;
 * `outs` are the device outputs, the op is `expr`. The second run's results stay. */
#define RUN_TWICE(outs, nouts, expr)                                                    \
  do {                                                                                  \
    ixl_tensor *first_[8] = {0};                                                       \
    for (int p_ = 0; p_ < 2; p_++) {                                                    \
      for (int o_ = 0; o_ < (nouts); o_++)                                              \
        CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, (outs)[o_], p_ ? 0x00 : 0xff));    \
      CHECK_OK(g_ctx, (expr));                                                          \
      CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));                                             \
      for (int o_ = 0; o_ < (nouts); o_++) {                                            \
        if (p_ == 0) {                                                                  \
          first_[o_] = to_host((outs)[o_]);                                             \
        } else {                                                                        \
          ixl_tensor *again_ = to_host((outs)[o_]);                                     \
          if (first_[o_] && again_ &&                                                   \
              memcmp(first_[o_]->data, again_->data, (size_t)tbytes(again_)) != 0) {    \
            fprintf(stderr, "  %s:%d: output %d differs between two runs (seed %llu)\n", \
                    __FILE__, __LINE__, o_, (unsigned long long)g_seed);                \
            check_failed_ = 1;                                                          \
          }                                                                             \
          ixl_tensor_free(again_);                                                      \
          ixl_tensor_free(first_[o_]);                                                  \
        }                                                                               \
      }                                                                                 \
    }                                                                                   \
  } while (0)

/* ---------------------------------------------------------------- formats */

/* A value of a wide dynamic range, sometimes special: ties of the e2m1 grid, zeros of both
 * signs, subnormals, infinities and (when allowed) NaN. */
static float rnd_value(float group_scale, int specials) {
  const int pick = (int)rnd_int(0, 99);
  if (specials && pick == 0) return INFINITY;
  if (specials && pick == 1) return -INFINITY;
  if (specials && pick == 2) return rnd_int(0, 1) ? NAN : -NAN; /* both signs: fp8 keeps it */
  if (pick == 3) return -0.0f;
  if (pick == 4) return 0.0f;
  if (pick == 5) return 1e-41f; /* subnormal */
  if (pick < 20) { /* exact e2m1 grid points and midpoints, times the group's scale */
    static const float grid[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f,
                                 3.0f, 3.5f, 4.0f, 5.0f, 6.0f};
    float v = grid[rnd_int(0, 13)] * group_scale;
    return rnd_int(0, 1) ? -v : v;
  }
  return (float)(rnd_normal() * group_scale);
}

static void fill_x(ixl_tensor *x, int64_t M, int specials) {
  for (int64_t m = 0; m < M; m++) {
    for (int g = 0; g < 4; g++) {
      const float gs = ldexpf(1.0f, (int)rnd_int(-30, 30));
      for (int d = g * 32; d < g * 32 + 32; d++) {
        const float v = rnd_value(gs, specials);
        const int64_t i = m * 128 + d;
        if (x->dtype == IXL_F32) ((float *)x->data)[i] = v;
        else if (x->dtype == IXL_BF16) ((uint16_t *)x->data)[i] = ixl_f32_to_bf16(v);
        else ((uint16_t *)x->data)[i] = ixl_f32_to_f16(v);
      }
    }
  }
}

static const char *fmt_names[] = {"mxfp4", "mxfp8", "fp8"};

TEST(quantize_and_dequantize_match_cpu) {
  const int64_t M = g_small ? 37 : 4099;
  const int dtypes[3] = {IXL_F32, IXL_BF16, IXL_F16};
  for (int fmt = 0; fmt < 3; fmt++) {
    const int vb = ixl_format_value_bytes((ixl_kv_format)fmt);
    for (int q = 0; q < 2; q++) {
      for (int role = 0; role < 2; role++) {
        for (int di = 0; di < 3; di++) {
          ixl_tensor *x = host2(dtypes[di], M, 128);
          ixl_tensor *hc = host2(IXL_U8, M, vb);
          ixl_tensor *hs = host1(fmt == IXL_FP8 ? IXL_F32 : IXL_I32, M);
          ixl_tensor *hd = host2(IXL_F32, M, 128);
          if (!x || !hc || !hs || !hd) return;
          fill_x(x, M, 1);
          CHECK_OK(g_ctx, ixl_quantize(g_ctx, fmt, q, role, x, hc, hs));
          const int q_no_scale = fmt == IXL_FP8 && role == IXL_ROLE_Q;
          CHECK_OK(g_ctx, ixl_dequantize(g_ctx, fmt, role, hc, q_no_scale ? NULL : hs, hd));
          ixl_tensor *dx = to_dev(x), *dc = to_dev(hc), *ds = to_dev(hs), *dd = to_dev(hd);
          ixl_tensor *outs[2] = {dc, ds};
          RUN_TWICE(outs, 2, ixl_quantize(g_ctx, fmt, q, role, dx, dc, ds));
          ixl_tensor *gc = to_host(dc), *gs = to_host(ds);
          char what[96];
          snprintf(what, sizeof what, "quantize %s %s role %s x %s codes", fmt_names[fmt],
                   q ? "ties_down" : "rne", role ? "k" : "q",
                   ixl_dtype_name((ixl_dtype)dtypes[di]));
          same(gc, hc, what);
          snprintf(what, sizeof what, "quantize %s %s role %s x %s scales", fmt_names[fmt],
                   q ? "ties_down" : "rne", role ? "k" : "q",
                   ixl_dtype_name((ixl_dtype)dtypes[di]));
          same(gs, hs, what);
          /* dequantize the CPU's codes on the GPU */
          ixl_tensor *dcc = to_dev(hc), *dsc = to_dev(hs);
          ixl_tensor *douts[1] = {dd};
          RUN_TWICE(douts, 1, ixl_dequantize(g_ctx, fmt, role, dcc, q_no_scale ? NULL : dsc, dd));
          ixl_tensor *gd = to_host(dd);
          snprintf(what, sizeof what, "dequantize %s role %s", fmt_names[fmt], role ? "k" : "q");
          same(gd, hd, what);
          ixl_tensor *all[] = {x, hc, hs, hd, dx, dc, ds, dd, gc, gs, dcc, dsc, gd};
          tfree(all, 13);
        }
      }
    }
  }
}

TEST(prepare_weights_match_cpu) {
  const int64_t R = g_small ? 5 : 333, H = 64;
  for (int fmt = 0; fmt < 3; fmt++) {
    ixl_tensor *w = host2(IXL_F32, R, H), *qs = host2(IXL_F32, R, H);
    ixl_tensor *hd = host2(IXL_F32, R, H), *hb = host2(IXL_BF16, R, H);
    if (!w || !qs || !hd || !hb) return;
    for (int64_t i = 0; i < R * H; i++) {
      ((float *)w->data)[i] = (float)rnd_normal();
      ((float *)qs->data)[i] = ldexpf(1.0f, (int)rnd_int(-20, 10));
    }
    const ixl_tensor *hq = fmt == IXL_FP8 ? qs : NULL;
    CHECK_OK(g_ctx, ixl_prepare_weights(g_ctx, fmt, w, hq, hd, hb));
    ixl_tensor *dw = to_dev(w), *dq = to_dev(qs), *dd = to_dev(hd), *db = to_dev(hb);
    ixl_tensor *outs[2] = {dd, db};
    RUN_TWICE(outs, 2, ixl_prepare_weights(g_ctx, fmt, dw, fmt == IXL_FP8 ? dq : NULL, dd, db));
    ixl_tensor *gd = to_host(dd), *gb = to_host(db);
    same(gd, hd, "prepare_weights dense");
    same(gb, hb, "prepare_weights sparse");
    ixl_tensor *all[] = {w, qs, hd, hb, dw, dq, dd, db, gd, gb};
    tfree(all, 10);
  }
}

TEST(kv_pages_write_matches_cpu) {
  const int sizes[2] = {64, 128};
  for (int fmt = 0; fmt < 3; fmt++) {
    for (int si = 0; si < 2; si++) {
      const int P = sizes[si], vb = ixl_format_value_bytes((ixl_kv_format)fmt);
      const int64_t N = g_small ? 300 : 5000, start = rnd_int(0, 40);
      const int64_t count = N - start - rnd_int(0, 40);
      const int64_t npages = (count + P - 1) / P, num_pages = npages + 3;
      const int64_t stride = ((int64_t)P * (vb + 4) + 511) / 512 * 512 + 512 * rnd_int(0, 1);
      ixl_tensor *c = host2(IXL_U8, N, vb), *s = host1(fmt == IXL_FP8 ? IXL_F32 : IXL_I32, N);
      ixl_tensor *pg = host2(IXL_U8, num_pages, stride), *ids = host1(IXL_I32, npages);
      if (!c || !s || !pg || !ids) return;
      for (int64_t i = 0; i < N * vb; i++) ((uint8_t *)c->data)[i] = (uint8_t)rnd_u64();
      for (int64_t i = 0; i < N; i++) ((uint32_t *)s->data)[i] = (uint32_t)rnd_u64();
      /* a random injective page table */
      int32_t *perm = (int32_t *)malloc((size_t)num_pages * sizeof *perm);
      for (int64_t i = 0; i < num_pages; i++) perm[i] = (int32_t)i;
      for (int64_t i = num_pages - 1; i > 0; i--) {
        int64_t j = rnd_int(0, i);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
      }
      memcpy(ids->data, perm, (size_t)npages * sizeof *perm);
      free(perm);
      for (int64_t i = 0; i < num_pages * stride; i++) ((uint8_t *)pg->data)[i] = (uint8_t)(i * 7);
      ixl_tensor *dc = to_dev(c), *ds = to_dev(s), *dp = to_dev(pg), *di = to_dev(ids);
      CHECK_OK(g_ctx, ixl_kv_pages_write(g_ctx, fmt, c, s, start, count, pg, P, ids));
      CHECK_OK(g_ctx, ixl_kv_pages_write(g_ctx, fmt, dc, ds, start, count, dp, P, di));
      ixl_tensor *gp = to_host(dp);
      same(gp, pg, "kv_pages_write pages");
      ixl_tensor *all[] = {c, s, pg, ids, dc, ds, dp, di, gp};
      tfree(all, 9);
    }
  }
}

/* ---------------------------------------------------------------- K6 top-k */

/* Fills a logits row distribution: 0 normal, 1 few distinct values (heavy ties), 2 normal
 * with specials (NaN, +-inf, -0), 3 plateau of exact zeros (the relu-sum case). */
static float logit_value(int dist) {
  switch (dist) {
    case 1: return (float)rnd_int(-3, 3) * 0.5f;
    case 2: {
      const int p = (int)rnd_int(0, 199);
      if (p == 0) return NAN;
      if (p == 1) return INFINITY;
      if (p == 2) return -INFINITY;
      if (p == 3) return -0.0f;
      return (float)rnd_normal();
    }
    case 3: return rnd_int(0, 3) ? 0.0f : (float)fabs(rnd_normal());
    case 4: { /* the CPU tests' tricky mix: quarter steps, NaN of both signs, +-inf, +-0 */
      const int p = (int)rnd_int(0, 19);
      if (p == 0) return rnd_int(0, 1) ? NAN : -NAN;
      if (p == 1) return rnd_int(0, 1) ? INFINITY : -INFINITY;
      if (p == 2) return rnd_int(0, 1) ? 0.0f : -0.0f;
      return (float)rnd_int(-8, 8) * 0.25f;
    }
    case 5: return 1.5f;                           /* all equal */
    case 6: return rnd_int(0, 1) ? NAN : -NAN;    /* all NaN */
    case 7: return rnd_int(0, 1) ? 0.0f : -0.0f;  /* +0 and -0 tie */
    default: return (float)(rnd_normal() * 4.0);
  }
}

static void fill_logits(ixl_tensor *t, int dist) {
  const int64_t n = ixl_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    const float v = logit_value(dist);
    if (t->dtype == IXL_BF16) ((uint16_t *)t->data)[i] = ixl_f32_to_bf16(v);
    else ((float *)t->data)[i] = v;
  }
}

/* The CUDA select variants every top-k case runs under. */
static const char *const select_variants[] = {"v1", "v2"};
#define NSELECT 2
static int g_select_from; /* IXL_TEST_SELECT=v2: v2 only (a shorter compute-sanitizer run) */

/* The fused K6 + K7 (ixl_topk_remap) on a top-k case's data, every CUDA select variant (v2 in
 * one kernel, v1 as top-k then remap) against the CPU's K6 then K7: random sparse_block_kv,
 * sparse ids covering every column (positions in range), row_ks or NULL. */
static int g_remap_every = 1, g_remap_case;
static void topk_remap_case(const ixl_tensor *lg, const ixl_tensor *rs, const ixl_tensor *re,
                            int k, int sorted, const ixl_tensor *dl, const ixl_tensor *drs,
                            const ixl_tensor *dre) {
  const int64_t R = lg->shape[0], C = lg->shape[1];
  const int sbk = 1 << rnd_int(0, 4);
  const int64_t nsb = (C + sbk - 1) / sbk + rnd_int(0, 2);
  const int with_ks = (int)rnd_int(0, 1);
  ixl_tensor *ids = host2(IXL_I32, R, nsb), *ks = host1(IXL_I32, R), *hpos = host2(IXL_I32, R, k);
  if (!ids || !ks || !hpos) return;
  for (int64_t r = 0; r < R; r++) {
    ((int32_t *)ks->data)[r] = (int32_t)rnd_int(0, 1 << 20);
    for (int64_t b = 0; b < nsb; b++)
      ((int32_t *)ids->data)[r * nsb + b] =
          ((int32_t *)ks->data)[r] / sbk + (int32_t)rnd_int(0, 1 << 16);
  }
  CHECK_OK(g_ctx, ixl_topk_remap(g_ctx, lg, rs, re, k, sorted, ids, with_ks ? ks : NULL, sbk,
                                 hpos));
  ixl_tensor *did = to_dev(ids), *dks = to_dev(ks), *dpos = to_dev(hpos);
  ixl_tensor *outs[1] = {dpos};
  for (int v = g_select_from; v < NSELECT; v++) {
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", select_variants[v]));
    RUN_TWICE(outs, 1, ixl_topk_remap(g_ctx, dl, drs, dre, k, sorted, did,
                                      with_ks ? dks : NULL, sbk, dpos));
    CHECK(strcmp(ixl_ctx_variant_ran(g_ctx, "select"), select_variants[v]) == 0);
    ixl_tensor *go = to_host(dpos);
    char what[160];
    snprintf(what, sizeof what, "topk_remap %s %s R=%lld C=%lld k=%d %s sbk %d%s",
             select_variants[v], ixl_dtype_name((ixl_dtype)lg->dtype), (long long)R,
             (long long)C, k, sorted ? "sorted" : "unsorted", sbk, with_ks ? " ks" : "");
    if (go) same(go, hpos, what);
    ixl_tensor_free(go);
  }
  CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", NULL));
  ixl_tensor *all[] = {ids, ks, hpos, did, dks, dpos};
  tfree(all, 6);
}

/* select v2's development switches (select/topk_v2.h): set (NULL: unset) and read again. */
static void v2_switch(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  ixl_topk_v2_dev_reload();
}

/* IXL_TEST_MAX_CASES=N: the top-k cases of a test after its first N return at once (a short
 * compute-sanitizer run over the first cases of each test); each case prints its number. */
static int g_max_cases, g_cases;
static int g_periodic; /* topk_case: 1 the first 4 columns of every 64 hold the row's largest,
                        * 2 column 5 of every 128 is 2^30-ish, the rest normal */

/* One top-k case: R rows of C columns, random [start, end) per row (some empty, some full). */
static void topk_case(int dtype, int64_t R, int64_t C, int k, int sorted, int dist, int starts) {
  if (g_max_cases) {
    if (++g_cases > g_max_cases) return;
    printf("# topk case %d: %s R=%lld C=%lld k=%d sorted %d dist %d\n", g_cases,
           ixl_dtype_name((ixl_dtype)dtype), (long long)R, (long long)C, k, sorted, dist);
    fflush(stdout);
  }
  ixl_tensor *lg = host2(dtype, R, C), *rs = host1(IXL_I32, R), *re = host1(IXL_I32, R);
  ixl_tensor *ho = host2(IXL_I32, R, k);
  if (!lg || !rs || !re || !ho) return;
  fill_logits(lg, dist);
  if (g_periodic == 2) /* column 128 i + 5 far above the rest (2^30), none sampled */
    for (int64_t j = 0; j < R * C; j++)
      if (j % C % 128 == 5) {
        const float v = 1e9f + 1e7f * (float)(j % 7);
        if (dtype == IXL_BF16) ((uint16_t *)lg->data)[j] = ixl_f32_to_bf16(v);
        else ((float *)lg->data)[j] = v;
      }
  if (g_periodic == 1) /* columns 64 i .. 64 i + 3 above every other: select v2's sampled vectors */
    for (int64_t j = 0; j < R * C; j++)
      if (j % C % 64 < 4) {
        const float v = 40.0f + (float)(j % 7);
        if (dtype == IXL_BF16) ((uint16_t *)lg->data)[j] = ixl_f32_to_bf16(v);
        else ((float *)lg->data)[j] = v + (float)rnd_unif();
      }
  for (int64_t r = 0; r < R; r++) {
    int64_t s = starts ? rnd_int(0, C / 4) : 0, e = rnd_int(s, C);
    if (r == 0) e = s;         /* an empty row */
    if (r == 1) e = C;         /* a long one */
    if (r == 2 && s + k <= C) e = s + k; /* exactly k */
    ((int32_t *)rs->data)[r] = (int32_t)s;
    ((int32_t *)re->data)[r] = (int32_t)e;
  }
  CHECK_OK(g_ctx, ixl_topk(g_ctx, lg, starts ? rs : NULL, re, k, sorted, ho));
  ixl_tensor *dl = to_dev(lg), *drs = to_dev(rs), *dre = to_dev(re), *dout = to_dev(ho);
  ixl_tensor *outs[1] = {dout};
  for (int v = g_select_from; v < NSELECT; v++) { /* every CUDA select variant, pinned in turn */
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", select_variants[v]));
    RUN_TWICE(outs, 1, ixl_topk(g_ctx, dl, starts ? drs : NULL, dre, k, sorted, dout));
    CHECK(strcmp(ixl_ctx_variant_ran(g_ctx, "select"), select_variants[v]) == 0);
    ixl_tensor *go = to_host(dout);
    char what[160];
    snprintf(what, sizeof what, "topk %s %s R=%lld C=%lld k=%d %s dist %d", select_variants[v],
             ixl_dtype_name((ixl_dtype)dtype), (long long)R, (long long)C, k,
             sorted ? "sorted" : "unsorted", dist);
    if (go) same(go, ho, what);
    ixl_tensor_free(go);
  }
  CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", NULL));
  if (g_remap_every && ++g_remap_case % g_remap_every == 0)
    topk_remap_case(lg, starts ? rs : NULL, re, k, sorted, dl, starts ? drs : NULL, dre);
  ixl_tensor *all[] = {lg, rs, re, ho, dl, drs, dre, dout};
  tfree(all, 8);
}

/* v2's own paths: clusters of every size on long rows (IXL_TOPK_V2_CS pins the size), rows
 * of ties, plateaus, NaN/inf/-0 mixes, k at and beyond the row, k = 4096, unaligned starts;
 * a cluster row's lower digits cluster-wide (IXL_TOPK_V2_GATHER=0; a first-digit bin past
 * GCAP keys, as ties give, takes that path by default too). */
TEST(topk_v2_paths_match_cpu) {
  /* IXL_TEST_SMALL (the compute-sanitizer runs, where every access is instrumented): the
   * smallest and the largest cluster and the default, two distributions */
  static const char *const cs_all[] = {"", "2", "16", "1", "4", "8"}, *const cs_small[] = {
                                          "2", "16", ""};
  const char *const *cs = g_small ? cs_small : cs_all;
  const int64_t C = g_small ? 9000 : 70000;
  const int ncs = g_small ? 3 : 6, ndist = g_small ? 2 : 5;
  for (int c = 0; c < ncs; c++) {
    v2_switch("IXL_TOPK_V2_CS", cs[c]);
    for (int dt = 0; dt < 2; dt++) {
      const int dtype = dt ? IXL_BF16 : IXL_F32;
      for (int dist = 0; dist < ndist; dist++)
        topk_case(dtype, 3, C, dist == 4 ? 4096 : 64 << (dist % 3), (dist + c) % 2, dist,
                  (dist + dt) % 2);
    }
  }
  v2_switch("IXL_TOPK_V2_CS", NULL);
  static const int dists[] = {0, 4, 1, 2};
  v2_switch("IXL_TOPK_V2_GATHER", "0");
  for (int dt = 0; dt < 2; dt++)
    for (int d = 0; d < (g_small ? 1 : 4); d++)
      topk_case(dt ? IXL_BF16 : IXL_F32, 2, g_small ? 33000 : 140000, d % 2 ? 512 : 2048,
                (d + dt) % 2, dists[d], d % 2);
  v2_switch("IXL_TOPK_V2_GATHER", NULL);
  /* few long rows (clusters of 16 by default), both orders */
  for (int dt = 0; dt < 2; dt++)
    for (int d = 0; d < (g_small ? 1 : 3); d++)
      topk_case(dt ? IXL_BF16 : IXL_F32, 1 + d, g_small ? 40000 : 131072 + 8 * d, 2048,
                (d + dt) % 2, dists[d], d % 2);
  /* short rows, every k against row lengths around it */
  const int ks[] = {1, 2, 7, 31, 100, 1000, 4096};
  for (int ki = 0; ki < 7; ki += g_small ? 3 : 1)
    for (int dist = 0; dist < 5; dist++)
      topk_case(ki % 2 ? IXL_BF16 : IXL_F32, 7, 1 + (int64_t)rnd_int(0, 5000), ks[ki],
                (ki + dist) % 2, dist, dist % 2);
  /* all equal, all NaN, +-0 mixes on rows of one CTA and of a cluster */
  for (int dist = 5; dist < 8; dist++)
    for (int dt = 0; dt < 2; dt++)
      for (int sorted = 0; sorted < 2; sorted++) {
        if (!g_small || sorted != dt)
          topk_case(dt ? IXL_BF16 : IXL_F32, 4, 3001, 40, sorted, dist, 1);
        if (!g_small || sorted == dt)
          topk_case(dt ? IXL_BF16 : IXL_F32, 2, g_small ? 33000 : 140000, 2048, sorted, dist,
                    1);
      }
}

/* Several rows per CTA for select v2's persistent kernel (IXL_TOPK_V2_NEXT=1 or 3, from the
 * environment; without it these are more cases of the default kernel): grids capped at 1-3
 * CTAs (IXL_TOPK_V2_GRID), so a CTA selects rows in turn, empty, short, exactly k and full
 * ones (topk_case's rows), both orders, unaligned starts, the fused remap; rows of 16384 and
 * 32000 columns (bf16: one prefetched group and two; fp32: two and four), ties and NaN. */
TEST(topk_v2_grid_rows_match_cpu) {
  static const char *const grids[] = {"1", "3", "2", ""};
  const int ng = g_small ? 2 : 4;
  for (int gi = 0; gi < ng; gi++) {
    v2_switch("IXL_TOPK_V2_GRID", grids[gi]);
    for (int dt = 0; dt < 2; dt++) {
      const int dtype = dt ? IXL_BF16 : IXL_F32;
      topk_case(dtype, g_small ? 5 : 9, g_small ? 3000 : 16384, 512, (gi + dt) % 2, gi % 4,
                (gi + dt) % 2);
      topk_case(dtype, g_small ? 4 : 7, g_small ? 1237 : 20011, g_small ? 40 : 2048,
                (gi + dt + 1) % 2, (gi + 1) % 5, 1);
      if (!g_small) topk_case(dtype, 5, 32000, 100, gi % 2, (gi + 2) % 5, dt);
    }
  }
  v2_switch("IXL_TOPK_V2_GRID", "2");
  for (int dist = 5; dist < 8; dist++)
    topk_case(dist % 2 ? IXL_BF16 : IXL_F32, 6, 3001, 40, dist % 2, dist, 1);
  v2_switch("IXL_TOPK_V2_GRID", NULL);
}

/* select v2's streaming kernel for many long rows (IXL_TOPK_V2_STREAM): 2 streams every case
 * (the sample's threshold; the exact streaming radix where the buffer misses), 3 takes the
 * exact streaming radix on every row; long rows with and without starts, k 1-2048, both
 * orders, the fused remap, ties, plateaus, NaN/inf mixes, all-equal, all-NaN and +-0 rows,
 * short rows (k past the row), a periodic row whose sampled vectors hold its largest values
 * (the sample's threshold too high: the count falls short, the fallback runs), and the
 * dispatch rule itself (1: only rows that need more resident chunks than one wave). */
TEST(topk_v2_stream_match_cpu) {
  /* each shape on both paths in turn (a sanitizer run's first IXL_TEST_MAX_CASES = 4 cases
   * cover the sampled and the exact path of both dtypes) */
  static const char *const modes[] = {"2", "3"};
  /* one CTA a row (the cluster form, on by default where it applies: topk_v2_cstream) */
  v2_switch("IXL_TOPK_V2_CSTREAM", "0");
  for (int dist = 0; dist < (g_small ? 3 : 8); dist++)
    for (int dt = 0; dt < 2; dt++)
      for (int mi = 0; mi < 2; mi++) {
        v2_switch("IXL_TOPK_V2_STREAM", modes[mi]);
        v2_switch("IXL_TOPK_V2_SUNR", (dist + dt) % 2 ? "8" : "4"); /* both instantiations */
        const int64_t C = g_small ? 9000 + 37 * dist : (dist % 2 ? 131072 : 70001 + dist);
        const int k = dist == 2 ? 2048 : 64 << (dist % 4);
        topk_case(dt ? IXL_BF16 : IXL_F32, g_small ? 3 : 6, C, k, (dist + mi) % 2, dist,
                  (dist + dt) % 2);
      }
  static const int ks[] = {1, 7, 100, 1000};
  for (int mi = 0; mi < (g_small ? 1 : 2); mi++) {
    v2_switch("IXL_TOPK_V2_STREAM", modes[mi]);
    for (int dt = 0; dt < 2; dt++)
      for (int ki = 0; ki < 4; ki += g_small ? 2 : 1)
        topk_case(dt ? IXL_BF16 : IXL_F32, 7, 1 + (int64_t)rnd_int(0, 3000), ks[ki], ki % 2, ki,
                  ki % 2);
  }
  v2_switch("IXL_TOPK_V2_STREAM", "2");
  g_periodic = 1;
  for (int dt = 0; dt < 2; dt++)
    topk_case(dt ? IXL_BF16 : IXL_F32, g_small ? 3 : 6, g_small ? 12000 : 131072,
              dt ? 512 : 2048, dt, 0, dt);
  g_periodic = 0;
  if (!g_small) {
    v2_switch("IXL_TOPK_V2_STREAM", "1");
    topk_case(IXL_F32, 64, 131072, 2048, 0, 0, 0);
    topk_case(IXL_F32, 64, 131072, 512, 1, 2, 0);
    topk_case(IXL_BF16, 300, 40000, 512, 0, 0, 1);
  }
  v2_switch("IXL_TOPK_V2_STREAM", NULL);
  v2_switch("IXL_TOPK_V2_SUNR", NULL);
  v2_switch("IXL_TOPK_V2_CSTREAM", NULL);
}

/* select v2's streaming kernel with each row over a cluster (IXL_TOPK_V2_CSTREAM=N; unset:
 * clusters of 2 where rows stream anyway and fit one wave, as the last cases; sm_90): rows
 * that need clusters (over 32768 columns), few enough that the cluster size stays (R * N <=
 * two CTAs per SM): the sampled threshold (STREAM 1) and CTA 0's exact
 * radix over the whole row (STREAM 3), cluster sizes 2, 4, 16, with and without starts, k
 * 1-2048, both orders, the fused remap, ties, plateaus, NaN/inf mixes, all-equal, all-NaN and
 * +-0 rows, short rows, and a periodic row (the count falls short: the fallback). Without
 * sm_90 the same cases run the other kernels: the same results. */
/* IXL_TEST_CSTREAM=N pins every case's cluster size (a sanitizer run of one size) */
static const char *cst_size(const char *size) {
  const char *pin = getenv("IXL_TEST_CSTREAM");
  return pin && *pin ? pin : size;
}
TEST(topk_v2_cstream_match_cpu) {
  static const char *const sizes[] = {"2", "4", "16"};
  for (int dist = 0; dist < (g_small ? 3 : 8); dist++)
    for (int dt = 0; dt < 2; dt++)
      for (int mi = 0; mi < 2; mi++) {
        v2_switch("IXL_TOPK_V2_CSTREAM", cst_size(sizes[(dist + dt + mi) % 3]));
        v2_switch("IXL_TOPK_V2_STREAM", mi ? "3" : "1");
        const int64_t C = g_small ? 33000 + 37 * dist : (dist % 2 ? 131072 : 70001 + dist);
        const int k = dist == 2 ? 2048 : 1 + (64 << (dist % 4)) - dist % 2;
        topk_case(dt ? IXL_BF16 : IXL_F32, g_small ? 2 : 1 + dist % 3 * 3, C, k, (dist + mi) % 2,
                  dist, (dist + dt) % 2);
      }
  v2_switch("IXL_TOPK_V2_STREAM", "1");
  v2_switch("IXL_TOPK_V2_CSTREAM", cst_size("16"));
  g_periodic = 1;
  for (int dt = 0; dt < 2; dt++)
    topk_case(dt ? IXL_BF16 : IXL_F32, g_small ? 2 : 3, g_small ? 40000 : 131072,
              dt ? 512 : 2048, dt, 0, dt);
  g_periodic = 0;
  if (!g_small) { /* the benchmark's shapes */
    v2_switch("IXL_TOPK_V2_CSTREAM", cst_size("4"));
    topk_case(IXL_F32, 64, 131072, 2048, 0, 0, 0);
    topk_case(IXL_F32, 64, 131072, 512, 1, 2, 0);
    v2_switch("IXL_TOPK_V2_CSTREAM", cst_size("16"));
    topk_case(IXL_F32, 1, 131072, 2048, 1, 1, 1);
    /* the default (CSTREAM unset: clusters of 2 where rows stream and fit one wave) */
    v2_switch("IXL_TOPK_V2_CSTREAM", NULL);
    topk_case(IXL_F32, 64, 131072, 2048, 1, 3, 1);
    topk_case(IXL_BF16, 100, 131072, 512, 0, 1, 0);
  }
  v2_switch("IXL_TOPK_V2_STREAM", NULL);
  v2_switch("IXL_TOPK_V2_CSTREAM", NULL);
}

/* select v2's short-row kernel (IXL_TOPK_V2_SHORT, off by default): 1 the sampled threshold
 * (the exact radix over the row, read again, where the buffer misses), 2 that radix on every
 * row; rows up to its register span (16384 bf16 / 8192 fp32 columns, aligned; a little less
 * with starts), k 1-1000, both orders, the fused remap (topk_case's every case), ties,
 * plateaus, NaN/inf mixes, all-equal, all-NaN and +-0 rows, rows shorter than k, and a
 * periodic row whose sampled keys hold its largest values (the count falls short). Shapes
 * past its span or k run the other kernels: the same results either way. */
TEST(topk_v2_short_match_cpu) {
  /* 1: 512 threads while R <= SMs (so here), 2 its fallback, 5 the 256-thread kernel, 6 the
   * 1024-thread one */
  static const char *const modes[] = {"1", "2", "5", "6"};
  for (int dist = 0; dist < (g_small ? 3 : 8); dist++)
    for (int dt = 0; dt < 2; dt++)
      for (int mi = 0; mi < 4; mi++) {
        v2_switch("IXL_TOPK_V2_SHORT", modes[mi]);
        /* the candidates by bit masks (IXL_TOPK_V2_SHC=1) and by unrolled slots, in turn */
        v2_switch("IXL_TOPK_V2_SHC", (dist + dt + mi) % 2 ? "1" : "0");
        const int starts = (dist + dt) % 2;
        /* the widest row the kernel takes: aligned without starts, VEC - 1 less with them */
        const int64_t C = g_small ? 3000 + 37 * dist
                          : dt  ? (starts ? 16377 - 8 * dist : 16384)
                                : (starts ? 8189 - 4 * dist : 8192);
        const int k = dist == 2 ? 1000 : 64 << (dist % 4);
        topk_case(dt ? IXL_BF16 : IXL_F32, g_small ? 3 : 9, C, k, (dist + mi) % 2, dist, starts);
      }
  v2_switch("IXL_TOPK_V2_SHC", NULL); /* the rest: as the environment says */
  static const int ks[] = {1, 7, 100, 512, 1000};
  for (int mi = 0; mi < (g_small ? 1 : 2); mi++) {
    v2_switch("IXL_TOPK_V2_SHORT", modes[mi]);
    for (int dt = 0; dt < 2; dt++)
      for (int ki = 0; ki < 5; ki += g_small ? 2 : 1)
        topk_case(dt ? IXL_BF16 : IXL_F32, 7, 1 + (int64_t)rnd_int(0, 3000), ks[ki], ki % 2, ki,
                  ki % 2);
  }
  v2_switch("IXL_TOPK_V2_SHORT", "5");
  topk_case(IXL_BF16, 5, 16384, 512, 1, 4, 0);
  topk_case(IXL_F32, 5, 8189, 700, 0, 1, 1);
  /* rows whose kk-th key is more than 2047 bf16 steps above the sample's t0 (the huge
   * columns are never sampled): the exact radix */
  v2_switch("IXL_TOPK_V2_SHORT", "1");
  g_periodic = 2;
  for (int dt = 0; dt < 2; dt++)
    topk_case(dt ? IXL_BF16 : IXL_F32, 4, g_small ? 3000 : dt ? 16384 : 8192, 100, dt, 0, 0);
  g_periodic = 0;
  v2_switch("IXL_TOPK_V2_SHORT", "1");
  g_periodic = 1;
  for (int dt = 0; dt < 2; dt++)
    topk_case(dt ? IXL_BF16 : IXL_F32, g_small ? 3 : 6, g_small ? 3000 : dt ? 16384 : 8192, 512,
              dt, 0, dt);
  g_periodic = 0;
  if (!g_small) { /* the benchmark's shapes */
    topk_case(IXL_BF16, 64, 16384, 512, 0, 0, 0);
    topk_case(IXL_BF16, 300, 16384, 512, 1, 2, 0);
  }
  v2_switch("IXL_TOPK_V2_SHORT", NULL);
}

/* The short kernel's next-row forms (IXL_TOPK_V2_SHNEXT, off by default): 5 the L2 prefetch a
 * wave ahead, 6 persistent CTAs with the next row's loads after the candidate pass, 7 both, 14
 * and 15 the same loads after the column order's scan (late), 20 and 21 the next row's first
 * half by cp.async into shared memory (21: the rest by the L2 prefetch), at any row count;
 * grids capped at 2-5 CTAs (IXL_TOPK_V2_GRID), so a CTA selects rows in turn (topk_case's
 * empty, full, exactly-k and random-end rows: partial last vectors), both orders, the fused
 * remap, ties, NaN mixes, the forced exact radix (SHORT=2), the radix after the buffer
 * (periodic huge columns), rows with starts (the host's rule: the plain kernel); then 2, 3,
 * 11, 17 and 1 by the rule (more rows than one wave) on the benchmark's widths (small: 1, 17, 2
 * on 600 rows of 2048 bf16), and the defaults on that shape. */
TEST(topk_v2_shnext_match_cpu) {
  static const char *const modes[] = {"6", "21", "15", "7", "5", "14", "20"};
  static const char *const grids[] = {"3", "5", "4", "5", "2", "3", "2"};
  for (int mi = 0; mi < (g_small ? 3 : 7); mi++) {
    v2_switch("IXL_TOPK_V2_SHNEXT", modes[mi]);
    v2_switch("IXL_TOPK_V2_SHORT", "1");
    v2_switch("IXL_TOPK_V2_GRID", grids[mi]);
    for (int dt = 0; dt < 2; dt++)
      for (int dist = 0; dist < (g_small ? 2 : 6); dist++) {
        const int64_t C = g_small ? 3000 : dt ? 16384 : 8192;
        const int k = dist == 2 ? 1000 : 64 << (dist % 4);
        topk_case(dt ? IXL_BF16 : IXL_F32, g_small ? 7 : 13, C, k, (dist + mi) % 2, dist,
                  !g_small && dist == 5);
      }
    if (g_small) continue;
    v2_switch("IXL_TOPK_V2_SHORT", "2");
    for (int dt = 0; dt < 2; dt++) topk_case(dt ? IXL_BF16 : IXL_F32, 11, 4000, 300, dt, 1, 0);
    v2_switch("IXL_TOPK_V2_SHORT", "1");
    for (int pe = 1; pe <= 2; pe++) {
      g_periodic = pe;
      for (int dt = 0; dt < 2; dt++)
        topk_case(dt ? IXL_BF16 : IXL_F32, 9, dt ? 16384 : 8192, pe == 2 ? 100 : 512, dt, 0, 0);
      g_periodic = 0;
    }
  }
  v2_switch("IXL_TOPK_V2_GRID", NULL);
  if (!g_small) { /* by the rule: 1200 rows (> 4 x 132), grids of the resident CTAs */
    static const char *const rule[] = {"2", "3", "11", "17"};
    for (int mi = 0; mi < 4; mi++) {
      v2_switch("IXL_TOPK_V2_SHNEXT", rule[mi]);
      topk_case(IXL_BF16, 1200, 16384, 512, mi % 2, mi, 0);
    }
    v2_switch("IXL_TOPK_V2_SHNEXT", "1");
    topk_case(IXL_BF16, 1200, 16384, 512, 1, 2, 0);
    topk_case(IXL_F32, 900, 8192, 512, 0, 1, 0);
  } else { /* the sanitizers: by the rule, 600 short rows (more than one wave) */
    static const char *const rule[] = {"1", "17", "2"};
    for (int mi = 0; mi < 3; mi++) {
      v2_switch("IXL_TOPK_V2_SHNEXT", rule[mi]);
      topk_case(IXL_BF16, 600, 2048, 64, mi % 2, mi, 0);
    }
  }
  v2_switch("IXL_TOPK_V2_SHNEXT", NULL);
  v2_switch("IXL_TOPK_V2_SHORT", NULL);
  topk_case(IXL_BF16, g_small ? 600 : 1200, g_small ? 2048 : 16384, g_small ? 64 : 512, 1, 1,
            0); /* the default's rule */
}

TEST(topk_matches_cpu) {
  const int ks_full[] = {1, 8, 64, 512, 2048, 4096};
  const int ks_small[] = {1, 8, 64, 512};
  const int *ks = g_small ? ks_small : ks_full;
  const int nk = g_small ? 4 : 6;
  const int64_t C = g_small ? 3000 : 20000, R = g_small ? 4 : 12;
  for (int dt = 0; dt < 2; dt++) {
    const int dtype = dt ? IXL_BF16 : IXL_F32;
    for (int ki = 0; ki < nk; ki++)
      for (int dist = 0; dist < 4; dist++)
        topk_case(dtype, R, C, ks[ki], (ki + dist) % 2, dist, (ki + dist + dt) % 3 != 0);
  }
  /* both orders on the same shapes */
  topk_case(IXL_F32, R, C, 512, 0, 2, 1);
  topk_case(IXL_F32, R, C, 512, 1, 2, 1);
  /* odd widths (unaligned rows, vector tails) */
  topk_case(IXL_BF16, 5, 1237, 40, 1, 0, 1);
  topk_case(IXL_F32, 5, 1237, 40, 0, 1, 1);
}

/* The tie path (too many keys equal to the k-th) and the large-k path (k beyond shared
 * memory) are reached on small rows by shrinking the shared buffer. */
TEST(topk_fallback_paths_match_cpu) {
  setenv("IXL_SELECT_BUFFER", "64", 1);
  const int64_t C = g_small ? 700 : 5000;
  for (int dt = 0; dt < 2; dt++) {
    const int dtype = dt ? IXL_BF16 : IXL_F32;
    for (int sorted = 0; sorted < 2; sorted++) {
      topk_case(dtype, 6, C, 40, sorted, 1, 1);  /* ties exceed the buffer */
      topk_case(dtype, 6, C, 40, sorted, 3, 0);  /* plateau of zeros */
      /* k > buffer: written in place, sorted in global */
      topk_case(dtype, 6, C, 200, sorted, 0, 1);
      topk_case(dtype, 6, C, 200, sorted, 1, 0);
    }
  }
  unsetenv("IXL_SELECT_BUFFER");
}

/* ---------------------------------------------------------------- K3 and the mask */

/* Block scores of one row in double, as the CPU defines them (for the near-tie check). */
static double block_score_f64(const float *x, int64_t n, int how) {
  if (how == IXL_SCORE_SUM || how == IXL_SCORE_MEAN) {
    double a = 0;
    for (int64_t i = 0; i < n; i++) a += x[i];
    return how == IXL_SCORE_SUM ? a : a / (double)n;
  }
  double m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(x[i])) return NAN;
    if (x[i] > m) m = x[i];
  }
  if (how == IXL_SCORE_MAX || isinf(m)) return m;
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - m);
  return m + log(s);
}

/* logsumexp may differ from the CPU by an ulp of libm: a differing slot is accepted when the
 * two blocks' scores are within 1e-6 relative (a near-tie), and the sets of kept blocks may
 * differ only at the boundary by such near-ties. */
static int near_tie_ok(const float *row, int64_t len, int cbs, int32_t a, int32_t b) {
  if (a < 0 || b < 0) return 0;
  const int64_t nb = (len + cbs - 1) / cbs;
  const int64_t na = (a + 1) * (int64_t)cbs < len ? cbs : len - (int64_t)a * cbs;
  const int64_t nbb = (b + 1) * (int64_t)cbs < len ? cbs : len - (int64_t)b * cbs;
  double sa = a == nb - 1 ? INFINITY
                          : block_score_f64(row + (int64_t)a * cbs, na, IXL_SCORE_LOGSUMEXP);
  double sb = b == nb - 1 ? INFINITY
                          : block_score_f64(row + (int64_t)b * cbs, nbb, IXL_SCORE_LOGSUMEXP);
  if (isinf(sa) || isinf(sb) || isnan(sa) || isnan(sb)) return 0;
  return fabs(sa - sb) <= 1e-6 * fmax(1.0, fmax(fabs(sa), fabs(sb)));
}

static void candidate_case(int64_t R, int64_t C, int cbs, int64_t T, int how, int dist) {
  ixl_tensor *lg = host2(IXL_F32, R, C), *lens = host1(IXL_I32, R), *ho = host2(IXL_I32, R, T);
  if (!lg || !lens || !ho) return;
  fill_logits(lg, dist);
  for (int64_t r = 0; r < R; r++) {
    int64_t len = rnd_int(0, C);
    if (r == 0) len = 0;
    if (r == 1) len = C;
    if (r == 2) len = rnd_int(1, cbs); /* one block */
    ((int32_t *)lens->data)[r] = (int32_t)len;
  }
  CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, lg, lens, cbs, how, ho));
  ixl_tensor *dl = to_dev(lg), *dn = to_dev(lens), *dout = to_dev(ho);
  ixl_tensor *outs[1] = {dout};
  RUN_TWICE(outs, 1, ixl_candidate_select(g_ctx, dl, dn, cbs, how, dout));
  ixl_tensor *go = to_host(dout);
  char what[128];
  snprintf(what, sizeof what, "candidate_select R=%lld C=%lld cbs=%d T=%lld score %d dist %d",
           (long long)R, (long long)C, cbs, (long long)T, how, dist);
  if (how != IXL_SCORE_LOGSUMEXP) {
    same(go, ho, what);
  } else {
    const int32_t *a = go->data, *b = ho->data;
    for (int64_t r = 0; r < R; r++) {
      const int64_t len = ((int32_t *)lens->data)[r];
      for (int64_t j = 0; j < T; j++) {
        const int32_t x = a[r * T + j], y = b[r * T + j];
        if (x != y && !near_tie_ok((const float *)lg->data + r * C, len, cbs, x, y)) {
          fprintf(stderr, "  %s: row %lld slot %lld: gpu %d, cpu %d, not a near-tie (seed %llu)\n",
                  what, (long long)r, (long long)j, x, y, (unsigned long long)g_seed);
          check_failed_ = 1;
          break;
        }
      }
    }
  }
  ixl_tensor *all[] = {lg, lens, ho, dl, dn, dout, go};
  tfree(all, 7);
}

TEST(candidate_select_matches_cpu) {
  const int cbss[] = {1, 8, 16, 64};
  const int64_t C = g_small ? 2000 : 40000, R = g_small ? 4 : 9;
  for (int how = 0; how < 4; how++) {
    for (int ci = 0; ci < 4; ci++) {
      const int cbs = cbss[ci];
      const int64_t nbmax = (C + cbs - 1) / cbs;
      const int64_t Ts[3] = {1, 16, g_small ? 64 : 2048};
      for (int ti = 0; ti < 3; ti++) {
        const int dist = (how + ci + ti) % 4;
        candidate_case(R, C, cbs, Ts[ti], how, dist);
      }
      if (!g_small) candidate_case(R, C, cbs, nbmax + 5, how, 0); /* T beyond the blocks */
    }
  }
  /* the large-T paths on small rows */
  setenv("IXL_SELECT_BUFFER", "32", 1);
  candidate_case(5, 1500, 8, 100, IXL_SCORE_MAX, 0);
  candidate_case(5, 1500, 8, 100, IXL_SCORE_MAX, 1);
  candidate_case(5, 1500, 8, 20, IXL_SCORE_SUM, 1);
  unsetenv("IXL_SELECT_BUFFER");
}

TEST(mask_candidates_matches_cpu) {
  const int64_t C = g_small ? 3000 : 50000, R = g_small ? 3 : 7, T = 64;
  const int cbss[] = {1, 8, 16, 128};
  for (int dt = 0; dt < 2; dt++) {
    for (int ci = 0; ci < 4; ci++) {
      const int cbs = cbss[ci], dtype = dt ? IXL_BF16 : IXL_F32;
      ixl_tensor *lg = host2(dtype, R, C), *lens = host1(IXL_I32, R), *cand = host2(IXL_I32, R, T);
      if (!lg || !lens || !cand) return;
      fill_logits(lg, 0);
      for (int64_t r = 0; r < R; r++) {
        const int64_t len = r == 0 ? 0 : r == 1 ? C : rnd_int(0, C);
        ((int32_t *)lens->data)[r] = (int32_t)len;
        const int64_t nb = (len + cbs - 1) / cbs;
        for (int64_t t = 0; t < T; t++) {
          int64_t c = rnd_int(0, nb + 3);
          if (t % 9 == 0) c = -1;
          if (t % 13 == 0) c = 1 << 30;
          ((int32_t *)cand->data)[r * T + t] = (int32_t)c;
        }
      }
      ixl_tensor *dl = to_dev(lg), *dn = to_dev(lens), *dc = to_dev(cand);
      CHECK_OK(g_ctx, ixl_mask_candidates(g_ctx, lg, lens, cand, cbs));
      CHECK_OK(g_ctx, ixl_mask_candidates(g_ctx, dl, dn, dc, cbs));
      ixl_tensor *gl = to_host(dl);
      same(gl, lg, dt ? "mask_candidates bf16" : "mask_candidates f32");
      ixl_tensor *all[] = {lg, lens, cand, dl, dn, dc, gl};
      tfree(all, 7);
    }
  }
}

/* ---------------------------------------------------------------- K4 and K7 */

static void expand_case(int64_t R, int64_t T, int cbs, int sbk, int mode, int paged) {
  const int64_t nsb = T * (cbs / sbk);
  ixl_tensor *cand = host2(IXL_I32, R, T), *ks = host1(IXL_I32, R), *ke = host1(IXL_I32, R);
  ixl_tensor *hid = host2(IXL_I32, R, nsb), *hend = host1(IXL_I32, R);
  if (!cand || !ks || !ke || !hid || !hend) return;
  for (int64_t r = 0; r < R; r++) {
    int64_t s = paged ? 0 : rnd_int(0, 100000), len = rnd_int(0, 20000);
    if (mode == IXL_KS_ALIGNED) s -= s % sbk;
    if (r == 0) len = 0;
    ((int32_t *)ks->data)[r] = (int32_t)s;
    ((int32_t *)ke->data)[r] = (int32_t)(s + len);
    const int64_t nb = (len + cbs - 1) / cbs;
    for (int64_t t = 0; t < T; t++) {
      int64_t c = rnd_int(0, nb + 2);
      const int p = (int)rnd_int(0, 19);
      if (p == 0) c = -1;
      if (p == 1) c = -7;
      if (p == 2) c = 2000000000;
      if (p == 3 && t > 0) c = ((int32_t *)cand->data)[r * T + t - 1]; /* a duplicate */
      ((int32_t *)cand->data)[r * T + t] = (int32_t)c;
    }
  }
  CHECK_OK(g_ctx, ixl_expand(g_ctx, cand, paged ? NULL : ks, ke, cbs, sbk, mode, hid, hend));
  ixl_tensor *dc = to_dev(cand), *dks = to_dev(ks), *dke = to_dev(ke), *did = to_dev(hid),
             *dend = to_dev(hend);
  ixl_tensor *outs[2] = {did, dend};
  RUN_TWICE(outs, 2, ixl_expand(g_ctx, dc, paged ? NULL : dks, dke, cbs, sbk, mode, did, dend));
  ixl_tensor *gid = to_host(did), *gend = to_host(dend);
  char what[96];
  snprintf(what, sizeof what, "expand T=%lld cbs=%d sbk=%d mode %d paged %d ids", (long long)T,
           cbs, sbk, mode, paged);
  same(gid, hid, what);
  snprintf(what, sizeof what, "expand T=%lld cbs=%d sbk=%d mode %d paged %d end", (long long)T,
           cbs, sbk, mode, paged);
  same(gend, hend, what);

  /* K7 on these ids: random columns (and -1 pads), into a separate tensor and in place */
  const int64_t k = 64;
  ixl_tensor *cols = host2(IXL_I32, R, k), *hpos = host2(IXL_I32, R, k);
  for (int64_t r = 0; r < R; r++) {
    const int64_t e = ((int32_t *)hend->data)[r];
    for (int64_t j = 0; j < k; j++)
      ((int32_t *)cols->data)[r * k + j] = e > 0 && rnd_int(0, 7) ? (int32_t)rnd_int(0, e - 1) : -1;
  }
  CHECK_OK(g_ctx, ixl_remap(g_ctx, cols, hid, paged ? NULL : ks, sbk, hpos));
  ixl_tensor *dcols = to_dev(cols), *dpos = to_dev(hpos);
  ixl_tensor *routs[1] = {dpos};
  RUN_TWICE(routs, 1, ixl_remap(g_ctx, dcols, did, paged ? NULL : dks, sbk, dpos));
  ixl_tensor *gpos = to_host(dpos);
  same(gpos, hpos, "remap");
  CHECK_OK(g_ctx, ixl_remap(g_ctx, dcols, did, paged ? NULL : dks, sbk, dcols)); /* out == cols */
  ixl_tensor *gin = to_host(dcols);
  same(gin, hpos, "remap in place");
  ixl_tensor *all[] = {cand, ks, ke, hid, hend, dc, dks, dke, did, dend, gid, gend,
                       cols, hpos, dcols, dpos, gpos, gin};
  tfree(all, 18);
}

TEST(expand_and_remap_match_cpu) {
  const int64_t R = g_small ? 5 : 40;
  const int pairs[][2] = {{8, 8}, {16, 8}, {64, 16}, {128, 4}};
  for (int pi = 0; pi < 4; pi++)
    for (int mode = 0; mode < 2; mode++)
      for (int paged = 0; paged < 2; paged++)
        expand_case(R, g_small ? 24 : (pi % 2 ? 2048 : 300), pairs[pi][0], pairs[pi][1], mode,
                    paged);
}

TEST(expand_spec_vectors) {
  /* SPEC 3's vectors, on the device */
  struct { int cbs, sbk, ks, ke, n; int cand[2]; int ids[4]; int end; } v[] = {
      {8, 8, 64, 72, 1, {0, 0}, {8, 8, 8, 8}, 8},
      {8, 8, 13, 30, 2, {2, 0}, {1, 3, 3, 3}, 9},
      {8, 8, 100, 100, 1, {0, 0}, {12, 12, 12, 12}, 0},
      {16, 8, 0, 48, 2, {1, 0}, {0, 1, 2, 3}, 32},
  };
  for (int i = 0; i < 4; i++) {
    const int ratio = v[i].cbs / v[i].sbk, T = 4 / ratio;
    ixl_tensor *cand = host2(IXL_I32, 1, T), *ks = host1(IXL_I32, 1), *ke = host1(IXL_I32, 1);
    for (int t = 0; t < T; t++) ((int32_t *)cand->data)[t] = t < v[i].n ? v[i].cand[t] : -1;
    ((int32_t *)ks->data)[0] = v[i].ks;
    ((int32_t *)ke->data)[0] = v[i].ke;
    ixl_tensor *dc = to_dev(cand), *dks = to_dev(ks), *dke = to_dev(ke);
    int64_t s2[2] = {1, 4}, s1[1] = {1};
    ixl_tensor *did = tnew(IXL_I32, 2, s2, IXL_DEVICE), *dend = tnew(IXL_I32, 1, s1, IXL_DEVICE);
    CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, did, 0xff));
    CHECK_OK(g_ctx,
             ixl_expand(g_ctx, dc, dks, dke, v[i].cbs, v[i].sbk, IXL_KS_UNALIGNED, did, dend));
    ixl_tensor *gid = to_host(did), *gend = to_host(dend);
    for (int j = 0; j < 4; j++)
      CHECK_MSG(((int32_t *)gid->data)[j] == v[i].ids[j], "vector %d slot %d: %d, expected %d", i,
                j, ((int32_t *)gid->data)[j], v[i].ids[j]);
    CHECK_MSG(((int32_t *)gend->data)[0] == v[i].end, "vector %d end %d, expected %d", i,
              ((int32_t *)gend->data)[0], v[i].end);
    ixl_tensor *all[] = {cand, ks, ke, dc, dks, dke, did, dend, gid, gend};
    tfree(all, 10);
  }
}

/* ---------------------------------------------------------------- empty decode rows */

/* Issue 19: a decode row of 0 positions is an empty row on the device as on the host. The
 * selection chain K3 -> K4 (paged: ks = 0, ke = the length) -> K6 over [0, end) -> K7, under
 * every CUDA select variant: the empty rows give cand all -1, ids all 0 (ks / sbk), end 0,
 * top-k and positions all -1, and every output equals the CPU's. C = 0 is the step whose rows
 * are all empty (dense logits [R, 0]). */
static void empty_rows_case(int64_t C, const int32_t *lens_v, int64_t R, int cbs, int sbk) {
  const int64_t T = 16, k = 16, nsb = T * (cbs / sbk), ncols = nsb * sbk;
  ixl_tensor *lg = host2(IXL_F32, R, C), *lens = host1(IXL_I32, R), *sp = host2(IXL_F32, R, ncols);
  ixl_tensor *hc = host2(IXL_I32, R, T), *hid = host2(IXL_I32, R, nsb), *hend = host1(IXL_I32, R);
  ixl_tensor *hcol = host2(IXL_I32, R, k), *hpos = host2(IXL_I32, R, k),
             *hden = host2(IXL_I32, R, k);
  if (!lg || !lens || !sp || !hc || !hid || !hend || !hcol || !hpos || !hden) return;
  fill_logits(lg, 0);
  fill_logits(sp, 0);
  memcpy(lens->data, lens_v, (size_t)R * 4);
  CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, lg, lens, cbs, IXL_SCORE_MAX, hc));
  CHECK_OK(g_ctx, ixl_expand(g_ctx, hc, NULL, lens, cbs, sbk, IXL_KS_UNALIGNED, hid, hend));
  CHECK_OK(g_ctx, ixl_topk(g_ctx, sp, NULL, hend, (int)k, 0, hcol));
  CHECK_OK(g_ctx, ixl_remap(g_ctx, hcol, hid, NULL, sbk, hpos));
  CHECK_OK(g_ctx, ixl_topk(g_ctx, lg, NULL, lens, (int)k, 0, hden));
  for (int64_t r = 0; r < R; r++) {
    if (lens_v[r] != 0) continue;
    int bad = ((int32_t *)hend->data)[r] != 0;
    for (int64_t t = 0; t < T; t++) bad += ((int32_t *)hc->data)[r * T + t] != -1;
    for (int64_t j = 0; j < nsb; j++) bad += ((int32_t *)hid->data)[r * nsb + j] != 0;
    for (int64_t j = 0; j < k; j++)
      bad += ((int32_t *)hcol->data)[r * k + j] != -1 || ((int32_t *)hpos->data)[r * k + j] != -1 ||
             ((int32_t *)hden->data)[r * k + j] != -1;
    CHECK_MSG(bad == 0, "cpu: empty row %lld (C %lld cbs %d sbk %d): %d wrong", (long long)r,
              (long long)C, cbs, sbk, bad);
  }
  ixl_tensor *dl = to_dev(lg), *dn = to_dev(lens), *dsp = to_dev(sp), *dc = to_dev(hc),
             *did = to_dev(hid), *dend = to_dev(hend), *dcol = to_dev(hcol), *dpos = to_dev(hpos),
             *dden = to_dev(hden);
  for (int v = g_select_from; v < NSELECT; v++) {
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", select_variants[v]));
    ixl_tensor *o1[1] = {dc}, *o2[2] = {did, dend}, *o3[1] = {dcol}, *o4[1] = {dpos},
               *o5[1] = {dden};
    RUN_TWICE(o1, 1, ixl_candidate_select(g_ctx, dl, dn, cbs, IXL_SCORE_MAX, dc));
    RUN_TWICE(o2, 2, ixl_expand(g_ctx, dc, NULL, dn, cbs, sbk, IXL_KS_UNALIGNED, did, dend));
    RUN_TWICE(o3, 1, ixl_topk(g_ctx, dsp, NULL, dend, (int)k, 0, dcol));
    RUN_TWICE(o4, 1, ixl_remap(g_ctx, dcol, did, NULL, sbk, dpos));
    RUN_TWICE(o5, 1, ixl_topk(g_ctx, dl, NULL, dn, (int)k, 0, dden));
    ixl_tensor *got[5] = {to_host(dc), to_host(did), to_host(dend), to_host(dpos), to_host(dden)};
    ixl_tensor *want[5] = {hc, hid, hend, hpos, hden};
    const char *names[5] = {"cand", "sparse_ids", "end", "remapped top-k", "dense top-k"};
    for (int i = 0; i < 5; i++) {
      char what[128];
      snprintf(what, sizeof what, "empty rows %s: %s (C %lld cbs %d sbk %d)", select_variants[v],
               names[i], (long long)C, cbs, sbk);
      if (got[i]) same(got[i], want[i], what);
    }
    tfree(got, 5);
  }
  CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", NULL));
  ixl_tensor *all[] = {lg, lens, sp, hc, hid, hend, hcol, hpos, hden,
                       dl, dn, dsp, dc, did, dend, dcol, dpos, dden};
  tfree(all, 18);
}

TEST(empty_decode_rows_match_cpu) {
  const int32_t mixed[6] = {0, 37, 0, 3000, 1, 0}, none[3] = {0, 0, 0};
  const int pairs[3][2] = {{8, 8}, {16, 8}, {64, 16}};
  for (int pi = 0; pi < 3; pi++) {
    empty_rows_case(3000, mixed, 6, pairs[pi][0], pairs[pi][1]);
    empty_rows_case(0, none, 3, pairs[pi][0], pairs[pi][1]);
  }
}

/* ---------------------------------------------------------------- graphs */

/* The selection stages on one stream, captured into a CUDA graph and replayed: the same
 * results as running them eagerly (the ops allocate and synchronise nothing). */
TEST(selection_stages_replay_in_a_graph) {
  const int64_t R = 6, C = g_small ? 1024 : 16384, cbs = 8, T = 32, sbk = 8, k = 64;
  const int64_t nsb = T * (cbs / sbk);
  ixl_tensor *lg = host2(IXL_F32, R, C), *lens = host1(IXL_I32, R);
  fill_logits(lg, 0);
  for (int64_t r = 0; r < R; r++) ((int32_t *)lens->data)[r] = (int32_t)rnd_int(C / 2, C);
  ixl_tensor *dl = to_dev(lg), *dn = to_dev(lens);
  int64_t sc[2] = {R, T}, si[2] = {R, nsb}, se[1] = {R}, sk[2] = {R, k}, sl[2] = {R, nsb * sbk};
  ixl_tensor *cand = tnew(IXL_I32, 2, sc, IXL_DEVICE), *ids = tnew(IXL_I32, 2, si, IXL_DEVICE);
  ixl_tensor *end = tnew(IXL_I32, 1, se, IXL_DEVICE), *cols = tnew(IXL_I32, 2, sk, IXL_DEVICE);
  ixl_tensor *pos = tnew(IXL_I32, 2, sk, IXL_DEVICE), *sp = tnew(IXL_F32, 2, sl, IXL_DEVICE);
  if (!cand || !ids || !end || !cols || !pos || !sp) return;
  /* stand-in sparse logits: any fixed values */
  ixl_tensor *hsp = host2(IXL_F32, R, nsb * sbk);
  fill_logits(hsp, 0);
  CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, sp, hsp));
#define STAGES()                                                                          \
  do {                                                                                    \
    CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, dl, dn, (int)cbs, IXL_SCORE_MAX, cand));  \
    CHECK_OK(g_ctx,                                                                       \
             ixl_expand(g_ctx, cand, NULL, dn, (int)cbs, (int)sbk, IXL_KS_UNALIGNED, ids, end)); \
    CHECK_OK(g_ctx, ixl_topk(g_ctx, sp, NULL, end, (int)k, 0, cols));                     \
    CHECK_OK(g_ctx, ixl_remap(g_ctx, cols, ids, NULL, (int)sbk, pos));                    \
  } while (0)
  STAGES();
  CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
  ixl_tensor *eager = to_host(pos);
  CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, pos, 0xff));
  CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, cand, 0xff));
  CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
  ixl_alloc_stats before, after;
  ixl_ctx_alloc_stats(g_ctx, &before);
  CHECK_OK(g_ctx, ixl_graph_begin(g_ctx));
  STAGES();
  CHECK_OK(g_ctx, ixl_graph_end(g_ctx));
  ixl_ctx_alloc_stats(g_ctx, &after);
  CHECK(after.device_allocs == before.device_allocs && after.host_allocs == before.host_allocs);
  CHECK_OK(g_ctx, ixl_graph_launch(g_ctx));
  CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
  ixl_tensor *replay = to_host(pos);
  if (eager && replay) same(replay, eager, "graph replay of the selection stages");
  int positive = 0;
  for (int64_t i = 0; eager && i < R * k; i++) positive += ((int32_t *)eager->data)[i] >= 0;
  CHECK(positive > 0);
#undef STAGES
  ixl_tensor *all[] = {lg, lens, dl, dn, cand, ids, end, cols, pos, sp, hsp, eager, replay};
  tfree(all, 13);
}

/* ---------------------------------------------------------------- large shapes */

/* Rows of up to 1M columns, 256 rows, generated on the device (cuRAND normals); the CPU
 * checks a sample of rows copied back. */
static void large_topk(int64_t R, int64_t C, int k, int sorted, int nsample) {
  int64_t s2[2] = {R, C}, s1[1] = {R}, so[2] = {R, k};
  ixl_tensor *dl = tnew(IXL_F32, 2, s2, IXL_DEVICE), *dre = tnew(IXL_I32, 1, s1, IXL_DEVICE);
  ixl_tensor *dout = tnew(IXL_I32, 2, so, IXL_DEVICE), *re = host1(IXL_I32, R);
  if (!dl || !dre || !dout || !re) return;
  CHECK_OK(g_ctx, ixl_rng_normal(g_ctx, dl, g_seed, 0, 0.0f, 3.0f));
  for (int64_t r = 0; r < R; r++)
    ((int32_t *)re->data)[r] = (int32_t)(r % 3 ? C : rnd_int(C / 2, C));
  CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, dre, re));
  ixl_tensor *outs[1] = {dout};
  for (int v = g_select_from; v < NSELECT; v++) {
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", select_variants[v]));
    RUN_TWICE(outs, 1, ixl_topk(g_ctx, dl, NULL, dre, k, sorted, dout));
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", NULL));
    ixl_tensor *go = to_host(dout);
    /* sample rows: copy each to the host and run the CPU reference on it alone */
    ixl_tensor *row = host2(IXL_F32, 1, C), *rend = host1(IXL_I32, 1), *ho = host2(IXL_I32, 1, k);
    for (int i = 0; i < nsample && go && row; i++) {
      const int64_t r = i == 0 ? 0 : i == 1 ? R - 1 : rnd_int(0, R - 1);
      ixl_tensor view;
      int64_t vs[2] = {1, C};
      CHECK_OK(g_ctx, ixl_tensor_view(g_ctx, dl, 2, vs, NULL, r * C, &view));
      CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, row, &view));
      ((int32_t *)rend->data)[0] = ((int32_t *)re->data)[r];
      CHECK_OK(g_ctx, ixl_topk(g_ctx, row, NULL, rend, k, sorted, ho));
      if (memcmp(ho->data, (int32_t *)go->data + r * k, (size_t)k * 4) != 0) {
        fprintf(stderr,
                "  large topk %s R=%lld C=%lld k=%d: row %lld differs from the CPU (seed %llu)\n",
                select_variants[v], (long long)R, (long long)C, k, (long long)r,
                (unsigned long long)g_seed);
        check_failed_ = 1;
      }
    }
    ixl_tensor *all[] = {go, row, rend, ho};
    tfree(all, 4);
  }
  ixl_tensor *all[] = {dl, dre, dout, re};
  tfree(all, 4);
}

static void large_candidates(int64_t R, int64_t C, int cbs, int64_t T, int nsample) {
  int64_t s2[2] = {R, C}, s1[1] = {R}, so[2] = {R, T};
  ixl_tensor *dl = tnew(IXL_F32, 2, s2, IXL_DEVICE), *dn = tnew(IXL_I32, 1, s1, IXL_DEVICE);
  ixl_tensor *dout = tnew(IXL_I32, 2, so, IXL_DEVICE), *lens = host1(IXL_I32, R);
  if (!dl || !dn || !dout || !lens) return;
  CHECK_OK(g_ctx, ixl_rng_normal(g_ctx, dl, g_seed + 1, 0, 0.0f, 3.0f));
  for (int64_t r = 0; r < R; r++) ((int32_t *)lens->data)[r] = (int32_t)rnd_int(C / 2, C);
  CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, dn, lens));
  ixl_tensor *outs[1] = {dout};
  RUN_TWICE(outs, 1, ixl_candidate_select(g_ctx, dl, dn, cbs, IXL_SCORE_MAX, dout));
  ixl_tensor *go = to_host(dout);
  ixl_tensor *row = host2(IXL_F32, 1, C), *rl = host1(IXL_I32, 1), *ho = host2(IXL_I32, 1, T);
  for (int i = 0; i < nsample && go && row; i++) {
    const int64_t r = rnd_int(0, R - 1);
    ixl_tensor view;
    int64_t vs[2] = {1, C};
    CHECK_OK(g_ctx, ixl_tensor_view(g_ctx, dl, 2, vs, NULL, r * C, &view));
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, row, &view));
    ((int32_t *)rl->data)[0] = ((int32_t *)lens->data)[r];
    CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, row, rl, cbs, IXL_SCORE_MAX, ho));
    if (memcmp(ho->data, (int32_t *)go->data + r * T, (size_t)T * 4) != 0) {
      fprintf(stderr,
              "  large candidate_select R=%lld C=%lld: row %lld differs from the CPU (seed %llu)\n",
              (long long)R, (long long)C, (long long)r, (unsigned long long)g_seed);
      check_failed_ = 1;
    }
  }
  ixl_tensor *all[] = {dl, dn, dout, lens, go, row, rl, ho};
  tfree(all, 8);
}

TEST(large_topk_shapes_match_cpu_on_sampled_rows) {
  large_topk(256, 131072, 2048, 0, 6);
  large_topk(256, 1048576, 2048, 1, 3);
  large_topk(64, 131072, 512, 1, 4);
}

/* select v2's staggered first waves: the streaming kernel's (on by default at 12 us)
 * (IXL_TOPK_V2_SSTG, more than two waves of rows that need clusters) and the short kernel's
 * (IXL_TOPK_V2_SHSTG, more than one wave of short rows: three fp32 CTAs an SM); under
 * IXL_TEST_SMALL one case of 300 streamed rows (past two waves of 132 SMs) for the sanitizers */
TEST(topk_v2_staggered_match_cpu) {
  if (g_small) { /* on select v2 only (the sanitizers' time) */
    const int from = g_select_from;
    g_select_from = NSELECT - 1;
    v2_switch("IXL_TOPK_V2_SSTG", "12000");
    topk_case(IXL_F32, 300, 33000, 64, 1, 0, 1);
    v2_switch("IXL_TOPK_V2_SSTG", NULL);
    g_select_from = from;
    return;
  }
  v2_switch("IXL_TOPK_V2_SSTG", "18000");
  large_topk(600, 131072, 512, 1, 4);
  v2_switch("IXL_TOPK_V2_SSTG", NULL);
  v2_switch("IXL_TOPK_V2_SHSTG", "4000");
  large_topk(1000, 8192, 512, 0, 4);
  large_topk(800, 6000, 100, 1, 4);
  v2_switch("IXL_TOPK_V2_SHSTG", NULL);
}

TEST(large_candidate_shapes_match_cpu_on_sampled_rows) {
  large_candidates(256, 131072, 8, 2048, 4);
  large_candidates(64, 1048576, 8, 2048, 2);
}

/* ---------------------------------------------------------------- benchmark */

/* Median of `reps` timed runs (CUDA events on the context's stream) of `expr`. */
#define TIME_US(out_us, reps, expr)                                           \
  do {                                                                        \
    double t_[64];                                                            \
    for (int w_ = 0; w_ < 3; w_++) CHECK_OK(g_ctx, (expr));                   \
    for (int i_ = 0; i_ < (reps); i_++) {                                     \
      CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 0));                            \
      CHECK_OK(g_ctx, (expr));                                                \
      CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 1));                            \
      CHECK_OK(g_ctx, ixl_timer_elapsed_us(g_ctx, 0, 1, &t_[i_]));            \
    }                                                                         \
    for (int a_ = 0; a_ < (reps); a_++)                                       \
      for (int b_ = a_ + 1; b_ < (reps); b_++)                                \
        if (t_[b_] < t_[a_]) { double x_ = t_[a_]; t_[a_] = t_[b_]; t_[b_] = x_; } \
    (out_us) = t_[(reps) / 2];                                                \
  } while (0)

static void bench_row(const char *name, double us, double bytes) {
  printf("# bench %-52s %10.1f us %8.0f GB/s\n", name, us, bytes / (us * 1e-6) / 1e9);
}

/* K6 at the four shapes 64x16384 and 4096x16384 bf16 k=512, 1x131072 and 64x131072 fp32
 * k=2048, v1 and v2 (and v2 at each pinned cluster size), inputs rotated over copies
 * filling at least 256 MB so no launch finds its row in the 60 MB L2. Two times per case:
 * `single`, the median of 21 launches timed alone (events around one launch, so a launch's
 * host cost shows when the GPU outruns the host), and `batch`, the median of 7
 * groups of 10 back-to-back launches over 10 copies, per launch (the GPU's own time when the
 * host keeps ahead). bench/topk_gpu.sh prints these beside torch.topk's. */
static int cmp_dbl(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One timed call of bench_topk: how 0 = ixl_topk, 1 = ixl_topk then ixl_remap, 2 =
 * ixl_topk_remap (sbk 8). */
static int g_bench_sorted; /* bench_topk: the shape's order (its k3s_ shapes: sorted) */
static ixl_status bench_call(int how, const ixl_tensor *lg, const ixl_tensor *re, int k,
                             ixl_tensor *out, const ixl_tensor *ids, ixl_tensor *pos) {
  if (how == 2) return ixl_topk_remap(g_ctx, lg, NULL, re, k, g_bench_sorted, ids, NULL, 8, pos);
  ixl_status st = ixl_topk(g_ctx, lg, NULL, re, k, g_bench_sorted, out);
  if (st || how == 0) return st;
  return ixl_remap(g_ctx, out, ids, NULL, 8, pos);
}

TEST(bench_topk) {
  /* causal: row r ends at C - R + 1 + r (the source layer's top-k over a prefill chunk at the
   * end of its context: quick.lua's step runs 64 x 131072 plus 4096 causal rows, k = 512) */
  struct { int64_t R, C; int k, dtype, causal; const char *name; } tk[] = {
      {64, 16384, 512, IXL_BF16, 0, "64x16384_bf16_k512"},
      {4096, 16384, 512, IXL_BF16, 0, "4096x16384_bf16_k512"},
      {1, 131072, 2048, IXL_F32, 0, "1x131072_f32_k2048"},
      {64, 131072, 2048, IXL_F32, 0, "64x131072_f32_k2048"},
      {64, 131072, 512, IXL_F32, 0, "src_64x131072_f32_k512"},
      {4096, 131072, 512, IXL_F32, 1, "src_4096x131072c_f32_k512"},
      /* K3 fused (issue 14): the top-k over the logits kernel's block scores, sorted (64
       * decode rows of 131072 positions at cbs 8, T 2048: ixl_topk(scores, NULL, nblocks, T, 1)) */
      {64, 16384, 2048, IXL_F32, 0, "k3s_64x16384_f32_k2048_sorted"},
      {64, 16384, 2048, IXL_F32, 0, "k3u_64x16384_f32_k2048"}, /* the same unsorted */
  };
  /* v2:g0 = a cluster row's lower digits cluster-wide (IXL_TOPK_V2_GATHER=0); v2:k6k7 =
   * ixl_topk then ixl_remap (two launches), v2:fused = ixl_topk_remap (one), sbk 8 over
   * identity ids */
  /* v2:next = the round-2 kernels (IXL_TOPK_V2_NEXT=3: persistent rows of one CTA, the
   * atomic first find in clusters), v2:nextf = the same with the fused remap;
   * IXL_TOPK_BENCH_MODES=M1,... times only those */
  /* v2:stream = the streaming kernel where its rule takes the shape (IXL_TOPK_V2_STREAM=1),
   * v2:s8 the same with 8 vectors per thread in flight (IXL_TOPK_V2_SUNR=8), v2:streamf
   * fused, v2:sfb every row on its exact streaming radix (IXL_TOPK_V2_STREAM=3, forced),
   * v2:sforce the streaming kernel on every shape (IXL_TOPK_V2_STREAM=2), v2:s0 without it
   * (IXL_TOPK_V2_STREAM=0), v2:s4 with 4 vectors in flight, v2:spf64 / v2:spf256 with the
   * L2 prefetch that many KB ahead (IXL_TOPK_V2_SPF), v2:s3 three CTAs per SM
   * (IXL_TOPK_V2_S3=1), v2:s3pf the same with the prefetch 128 KB ahead, v2:smu16 the
   * sample's mu 16 (IXL_TOPK_V2_SMU), v2:pm both the prefetch 64 KB ahead and mu 16,
   * v2:smu8 mu 8, v2:pm8 the prefetch 64 KB ahead and mu 8, v2:pm256 256 KB ahead, mu 16;
   * v2:sp the stream's loads one round ahead (IXL_TOPK_V2_SPIPE=1), v2:sppm the same with the
   * prefetch 64 KB ahead and mu 16, v2:sppm8 with mu 8; v2:sp2 the same loads ahead and no
   * histogram atomics in the stream (IXL_TOPK_V2_SPIPE=2), v2:sp2pm with SPF 64 and SMU 16,
   * v2:sp3 also warp-aggregated buffer slots (IXL_TOPK_V2_SPIPE=3) */
  /* v2:short = rows of one CTA on the short-row kernel (IXL_TOPK_V2_SHORT=1), v2:shortf the
   * same fused, v2:shmu32 with its sample's mu 32 (IXL_TOPK_V2_SHMU), v2:short512 its
   * 512-thread instantiation (IXL_TOPK_V2_SHORT=4), v2:short256 its 256-thread one (=5;
   * v2:short takes 512 threads while R <= SMs, else 256); v2:shc the short kernel's
   * candidates by bit masks (IXL_TOPK_V2_SHC=1), v2:shcf fused, v2:shc256 on 256 threads,
   * v2:shc0 by the unrolled slots (SHC=0), v2:short1024 on 1024 threads (SHORT=6);
   * v2:cstN rows that need clusters streamed by a cluster of up to N CTAs each
   * (IXL_TOPK_V2_CSTREAM=N; v2:cst0 never, v2 where the rows stream and two CTAs a row fit
   * one wave), v2:cst16f the same fused; v2:sstgN the streaming kernel's first
   * wave's second half N us late (IXL_TOPK_V2_SSTG=N000; 12 by default, v2:sstg0 off);
   * v2:shstgN the short kernel's first wave's SM slot j j N us late (IXL_TOPK_V2_SHSTG=N000);
   * v2:shpf its L2 prefetch a wave ahead (IXL_TOPK_V2_SHNEXT=1), v2:shnx its persistent form
   * with the next row's loads after the candidate pass (=2), v2:shnxpf both (=3), v2:shnxl
   * and v2:shnxlpf the loads after the column order's scan, four CTAs an SM (=10, 11),
   * v2:shsp the next row's first half by cp.async into shared memory (=16), v2:shsppf with
   * the L2 prefetch of its second half (=17), v2:shnx0 none of them (=0);
   * v2:old = every round-4 switch off
   * (SHORT=0, SPIPE=0, SPF=0, SMU=64: the defaults before this round, whatever they are now) */
  static const char *const modes[] = {"v1",       "v2",       "v2:cs1",    "v2:cs2",
                                      "v2:cs4",   "v2:cs8",   "v2:cs16",   "v2:g0",
                                      "v2:k6k7",  "v2:fused", "v2:next",   "v2:nextf",
                                      "v2:stream", "v2:s8",   "v2:streamf", "v2:sfb",
                                      "v2:sforce", "v2:s0",   "v2:s4",     "v2:spf64",
                                      "v2:spf256", "v2:s3",   "v2:s3pf",   "v2:smu16",
                                      "v2:pm",    "v2:short", "v2:shortf", "v2:shmu32",
                                      "v2:smu8",  "v2:pm8",   "v2:pm256",  "v2:sp",
                                      "v2:sppm",  "v2:sppm8", "v2:short512", "v2:short256",
                                      "v2:old",   "v2:sp2",   "v2:sp2pm",  "v2:sp3",
                                      "v2:shc",   "v2:shcf",  "v2:shc256", "v2:cst2",
                                      "v2:cst4",  "v2:cst8",  "v2:cst16",  "v2:cst16f",
                                      "v2:shc0",  "v2:short1024", "v2:sstg12", "v2:sstg18",
                                      "v2:sstg24", "v2:cst0",  "v2:shstg2", "v2:shstg4",
                                      "v2:shstg6", "v2:sstg0", "v2:shpf",  "v2:shnx",
                                      "v2:shnxpf", "v2:shnxl", "v2:shnxlpf", "v2:shsp",
                                      "v2:shsppf", "v2:shnx0"};
  const char *only_modes = getenv("IXL_TOPK_BENCH_MODES");
  const char *only_shapes = getenv("IXL_TOPK_BENCH_SHAPES"); /* WORD,...: shapes naming one */
  const int nmodes = (int)(sizeof modes / sizeof modes[0]);
  for (size_t i = 0; i < sizeof tk / sizeof tk[0]; i++) {
    if (only_shapes && *only_shapes) {
      int hit = 0;
      for (const char *w = only_shapes; *w;) {
        const size_t wl = strcspn(w, ",");
        char word[64];
        if (wl > 0 && wl < sizeof word) {
          memcpy(word, w, wl);
          word[wl] = '\0';
          if (strstr(tk[i].name, word)) hit = 1;
        }
        w += wl + (w[wl] == ',');
      }
      if (!hit) continue;
    }
    const int64_t R = tk[i].R, C = tk[i].C, k = tk[i].k, nsb = C / 8;
    g_bench_sorted = !strncmp(tk[i].name, "k3s_", 4);
    const int64_t bytes = R * C * (tk[i].dtype == IXL_F32 ? 4 : 2);
    int nbuf = (int)((256ll << 20) / bytes + 1);
    if (nbuf > 128) nbuf = 128;
    int64_t s2[2] = {R, C}, s1[1] = {R}, so[2] = {R, k};
    ixl_tensor *h = host2(tk[i].dtype, R, C), *re = host1(IXL_I32, R);
    ixl_tensor *ids = host2(IXL_I32, R, nsb);
    ixl_tensor *dre = tnew(IXL_I32, 1, s1, IXL_DEVICE), *out = tnew(IXL_I32, 2, so, IXL_DEVICE);
    ixl_tensor *pos = tnew(IXL_I32, 2, so, IXL_DEVICE), *dids = NULL;
    ixl_tensor *buf[128] = {0};
    if (!h || !re || !ids || !dre || !out || !pos) return;
    if (R > 64) { /* rows past the first 64 repeat them (a host fill of 2 GB takes long) */
      ixl_tensor *h64 = host2(tk[i].dtype, 64, C);
      if (!h64) return;
      fill_logits(h64, 0);
      const size_t rb = (size_t)tbytes(h64);
      for (int64_t r0 = 0; r0 < R; r0 += 64)
        memcpy((char *)h->data + (size_t)r0 / 64 * rb, h64->data, rb);
      ixl_tensor_free(h64);
    } else {
      fill_logits(h, 0);
    }
    for (int b = 0; b < nbuf; b++) {
      buf[b] = tnew(tk[i].dtype, 2, s2, IXL_DEVICE);
      if (!buf[b]) return;
      CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, buf[b], h));
    }
    for (int64_t r = 0; r < R; r++)
      ((int32_t *)re->data)[r] = (int32_t)(tk[i].causal ? C - R + 1 + r : C);
    for (int64_t j = 0; j < R * nsb; j++) ((int32_t *)ids->data)[j] = (int32_t)(j % nsb);
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, dre, re));
    if (!(dids = to_dev(ids))) return;
    int rot = 0;
    for (int m = 0; m < nmodes; m++) {
      const char *mode = modes[m];
      if (only_modes && *only_modes) { /* the mode as a whole word of the list */
        const size_t ml = strlen(mode);
        const char *w = only_modes;
        int hit = 0;
        for (; (w = strstr(w, mode)) != NULL; w += ml)
          if ((w == only_modes || w[-1] == ',') && (w[ml] == ',' || w[ml] == '\0')) hit = 1;
        if (!hit) continue;
      }
      const int how = !strcmp(mode, "v2:k6k7") ? 1
                      : !strcmp(mode, "v2:fused") || !strcmp(mode, "v2:nextf") ||
                              !strcmp(mode, "v2:streamf") || !strcmp(mode, "v2:shortf") ||
                              !strcmp(mode, "v2:shcf") || !strcmp(mode, "v2:cst16f")
                          ? 2
                          : 0;
      CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", m == 0 ? "v1" : "v2"));
      v2_switch("IXL_TOPK_V2_CS", !strncmp(mode, "v2:cs", 5) ? mode + 5 : NULL);
      v2_switch("IXL_TOPK_V2_GATHER", !strcmp(mode, "v2:g0") ? "0" : NULL);
      v2_switch("IXL_TOPK_V2_NEXT", !strncmp(mode, "v2:next", 7) ? "3" : NULL);
      const int pm = !strncmp(mode, "v2:pm", 5) || !strncmp(mode, "v2:sppm", 7) ||
                     !strcmp(mode, "v2:sp2pm");
      const int mu8 = !strcmp(mode, "v2:smu8") || !strcmp(mode, "v2:pm8") ||
                      !strcmp(mode, "v2:sppm8");
      v2_switch("IXL_TOPK_V2_SPF", !strncmp(mode, "v2:spf", 6)  ? mode + 6
                                   : !strcmp(mode, "v2:s3pf")  ? "128"
                                   : !strcmp(mode, "v2:pm256") ? "256"
                                   : pm                        ? "64"
                                                               : NULL);
      v2_switch("IXL_TOPK_V2_SMU", mu8 ? "8" : pm || !strcmp(mode, "v2:smu16") ? "16" : NULL);
      const int sp = !strncmp(mode, "v2:sp", 5) && strncmp(mode, "v2:spf", 6);
      v2_switch("IXL_TOPK_V2_SPIPE", !strncmp(mode, "v2:sp3", 6)   ? "3"
                                     : !strncmp(mode, "v2:sp2", 6) ? "2"
                                     : sp                          ? "1"
                                                                   : NULL);
      v2_switch("IXL_TOPK_V2_SHORT", !strcmp(mode, "v2:short1024") ? "6"
                                     : !strcmp(mode, "v2:short512") ? "4"
                                     : !strcmp(mode, "v2:short256") ? "5"
                                     : !strncmp(mode, "v2:sh", 5)   ? "1"
                                                                    : NULL);
      v2_switch("IXL_TOPK_V2_SHMU", !strcmp(mode, "v2:shmu32") ? "32" : NULL);
      v2_switch("IXL_TOPK_V2_SHC", !strcmp(mode, "v2:shc0")       ? "0"
                                   : !strncmp(mode, "v2:shc", 6) ? "1"
                                                                 : NULL);
      if (!strcmp(mode, "v2:shc256")) v2_switch("IXL_TOPK_V2_SHORT", "5");
      v2_switch("IXL_TOPK_V2_CSTREAM", !strncmp(mode, "v2:cst16", 8) ? "16"
                                       : !strncmp(mode, "v2:cst", 6) ? mode + 6
                                                                      : NULL);
      if (!strcmp(mode, "v2:old")) {
        v2_switch("IXL_TOPK_V2_SHORT", "0");
        v2_switch("IXL_TOPK_V2_SHC", "0");
        v2_switch("IXL_TOPK_V2_SPIPE", "0");
        v2_switch("IXL_TOPK_V2_SPF", "0");
        v2_switch("IXL_TOPK_V2_SMU", "64");
      }
      char sstg[16] = "", shstg[16] = "";
      if (!strncmp(mode, "v2:sstg", 7)) snprintf(sstg, sizeof sstg, "%s000", mode + 7);
      if (!strncmp(mode, "v2:shstg", 8)) snprintf(shstg, sizeof shstg, "%s000", mode + 8);
      v2_switch("IXL_TOPK_V2_SSTG", sstg[0] ? sstg : NULL);
      v2_switch("IXL_TOPK_V2_SHSTG", shstg[0] ? shstg : NULL);
      v2_switch("IXL_TOPK_V2_SHNEXT", !strcmp(mode, "v2:shpf")     ? "1"
                                      : !strcmp(mode, "v2:shnx")   ? "2"
                                      : !strcmp(mode, "v2:shnxpf") ? "3"
                                      : !strcmp(mode, "v2:shnxl")  ? "10"
                                      : !strcmp(mode, "v2:shnxlpf") ? "11"
                                      : !strcmp(mode, "v2:shsp")    ? "16"
                                      : !strcmp(mode, "v2:shsppf")  ? "17"
                                      : !strcmp(mode, "v2:shnx0")   ? "0"
                                                                   : NULL);
      v2_switch("IXL_TOPK_V2_S3", !strncmp(mode, "v2:s3", 5) ? "1" : NULL);
      v2_switch("IXL_TOPK_V2_SUNR", !strcmp(mode, "v2:s8")   ? "8"
                                    : !strcmp(mode, "v2:s4") ? "4"
                                                             : NULL);
      v2_switch("IXL_TOPK_V2_STREAM", !strcmp(mode, "v2:sfb")      ? "3"
                                      : !strcmp(mode, "v2:sforce") ? "2"
                                      : !strcmp(mode, "v2:s0")     ? "0"
                                      : !strncmp(mode, "v2:s", 4)  ? "1"
                                                                   : NULL);
#define BENCH_CALL() bench_call(how, buf[rot++ % nbuf], dre, (int)k, out, dids, pos)
      double t1[21], tb[7];
      for (int w = 0; w < 3; w++) CHECK_OK(g_ctx, BENCH_CALL());
      for (int rep = 0; rep < 21; rep++) {
        CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
        CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 0));
        CHECK_OK(g_ctx, BENCH_CALL());
        CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 1));
        CHECK_OK(g_ctx, ixl_timer_elapsed_us(g_ctx, 0, 1, &t1[rep]));
      }
      for (int rep = 0; rep < 7; rep++) {
        CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
        CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 0));
        for (int j = 0; j < 10; j++) CHECK_OK(g_ctx, BENCH_CALL());
        CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 1));
        CHECK_OK(g_ctx, ixl_timer_elapsed_us(g_ctx, 0, 1, &tb[rep]));
        tb[rep] /= 10;
      }
#undef BENCH_CALL
      qsort(t1, 21, sizeof t1[0], cmp_dbl);
      qsort(tb, 7, sizeof tb[0], cmp_dbl);
      printf("# topkbench %-22s %-8s single %8.2f us batch %8.2f us %7.0f GB/s (%d copies)\n",
             tk[i].name, mode, t1[10], tb[3], (double)bytes / (tb[3] * 1e-6) / 1e9, nbuf);
      fflush(stdout);
    }
    v2_switch("IXL_TOPK_V2_CS", NULL);
    v2_switch("IXL_TOPK_V2_GATHER", NULL);
    v2_switch("IXL_TOPK_V2_NEXT", NULL);
    v2_switch("IXL_TOPK_V2_SUNR", NULL);
    v2_switch("IXL_TOPK_V2_STREAM", NULL);
    v2_switch("IXL_TOPK_V2_SPF", NULL);
    v2_switch("IXL_TOPK_V2_S3", NULL);
    v2_switch("IXL_TOPK_V2_SMU", NULL);
    v2_switch("IXL_TOPK_V2_SHORT", NULL);
    v2_switch("IXL_TOPK_V2_SHMU", NULL);
    v2_switch("IXL_TOPK_V2_SPIPE", NULL);
    v2_switch("IXL_TOPK_V2_SHC", NULL);
    v2_switch("IXL_TOPK_V2_CSTREAM", NULL);
    v2_switch("IXL_TOPK_V2_SSTG", NULL);
    v2_switch("IXL_TOPK_V2_SHSTG", NULL);
    v2_switch("IXL_TOPK_V2_SHNEXT", NULL);
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", NULL));
    for (int b = 0; b < nbuf; b++) ixl_tensor_free(buf[b]);
    ixl_tensor *all[] = {h, re, ids, dre, out, pos, dids};
    tfree(all, 7);
  }
}

/* The short-row kernel's phases (IXL_BENCH=topkshprof): IXL_TOPK_V2_SHORT=3 prints clock64
 * cycles per phase (load, sample, cand, select, scan, emit) of three CTAs per launch, at the
 * two bf16 shapes, 2 launches each, on copies not in L2 (a 64 MB write between). */
TEST(bench_topk_short_profile) {
  struct { int64_t R, C; int k; const char *name; } tk[] = {
      {64, 16384, 512, "64x16384_bf16_k512"},
      {4096, 16384, 512, "4096x16384_bf16_k512"},
  };
  for (size_t i = 0; i < sizeof tk / sizeof tk[0]; i++) {
    const int64_t R = tk[i].R, C = tk[i].C, k = tk[i].k;
    int64_t s2[2] = {R, C}, s1[1] = {R}, so[2] = {R, k};
    ixl_tensor *h = host2(IXL_BF16, R, C), *re = host1(IXL_I32, R);
    ixl_tensor *dre = tnew(IXL_I32, 1, s1, IXL_DEVICE), *out = tnew(IXL_I32, 2, so, IXL_DEVICE);
    ixl_tensor *buf[2] = {0};
    if (!h || !re || !dre || !out) return;
    fill_logits(h, 0);
    for (int b = 0; b < 2; b++) {
      buf[b] = tnew(IXL_BF16, 2, s2, IXL_DEVICE);
      if (!buf[b]) return;
      CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, buf[b], h));
    }
    for (int64_t r = 0; r < R; r++) ((int32_t *)re->data)[r] = (int32_t)C;
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, dre, re));
    int64_t sf[1] = {16 << 20};
    ixl_tensor *flush = tnew(IXL_F32, 1, sf, IXL_DEVICE);
    if (!flush) return;
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", "v2"));
    v2_switch("IXL_TOPK_V2_SHORT", "3");
    for (int b = 0; b < 2; b++) {
      CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, flush, (uint8_t)b));
      CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
      CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 0));
      CHECK_OK(g_ctx, ixl_topk(g_ctx, buf[b], NULL, dre, (int)k, 0, out));
      CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 1));
      double us = 0;
      CHECK_OK(g_ctx, ixl_timer_elapsed_us(g_ctx, 0, 1, &us));
      printf("# topkshprof %s launch %d: %.1f us\n", tk[i].name, b, us);
      fflush(stdout);
    }
    v2_switch("IXL_TOPK_V2_SHORT", NULL);
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", NULL));
    for (int b = 0; b < 2; b++) ixl_tensor_free(buf[b]);
    ixl_tensor *all[] = {h, re, dre, out, flush};
    tfree(all, 5);
  }
}

/* The streaming kernel's phases (IXL_BENCH=topksprof): IXL_TOPK_V2_SPROF=1 prints clock64
 * cycles per phase (sample, t0, stream, select, scan, emit) of three CTAs per launch (CTA 0 of
 * a cluster in the cluster form), at the source top-k's shapes and 64 x 131072 k=2048, one CTA
 * a row (IXL_TOPK_V2_CSTREAM=0, launches 0-1) and the default (launches 2-3: clusters of 2 on
 * the 64-row shapes), each launch on a copy not in L2. */
TEST(bench_topk_stream_profile) {
  struct { int64_t R, C; int k, causal; const char *name; } tk[] = {
      {64, 131072, 512, 0, "src_64x131072_f32_k512"},
      {1024, 131072, 512, 1, "src_1024x131072c_f32_k512"},
      {64, 131072, 2048, 0, "64x131072_f32_k2048"},
  };
  static const char *const csts[] = {"0", "0", NULL, NULL};
  for (size_t i = 0; i < sizeof tk / sizeof tk[0]; i++) {
    const int64_t R = tk[i].R, C = tk[i].C, k = tk[i].k;
    int64_t s2[2] = {R, C}, s1[1] = {R}, so[2] = {R, k};
    ixl_tensor *h = host2(IXL_F32, R, C), *h64 = host2(IXL_F32, 64, C), *re = host1(IXL_I32, R);
    ixl_tensor *dre = tnew(IXL_I32, 1, s1, IXL_DEVICE), *out = tnew(IXL_I32, 2, so, IXL_DEVICE);
    ixl_tensor *buf[4] = {0};
    if (!h || !h64 || !re || !dre || !out) return;
    fill_logits(h64, 0);
    for (int64_t r0 = 0; r0 < R; r0 += 64)
      memcpy((char *)h->data + (size_t)r0 / 64 * (size_t)tbytes(h64), h64->data,
             (size_t)tbytes(h64));
    for (int b = 0; b < 4; b++) {
      buf[b] = tnew(IXL_F32, 2, s2, IXL_DEVICE);
      if (!buf[b]) return;
      CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, buf[b], h));
    }
    for (int64_t r = 0; r < R; r++)
      ((int32_t *)re->data)[r] = (int32_t)(tk[i].causal ? C - R + 1 + r : C);
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, dre, re));
    int64_t sf[1] = {16 << 20};
    ixl_tensor *flush = tnew(IXL_F32, 1, sf, IXL_DEVICE);
    if (!flush) return;
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", "v2"));
    v2_switch("IXL_TOPK_V2_SPROF", "1");
    for (int b = 0; b < 4; b++) {
      v2_switch("IXL_TOPK_V2_CSTREAM", csts[b]);
      CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, flush, (uint8_t)b));
      CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
      printf("# topksprof %s launch %d cstream %s\n", tk[i].name, b, csts[b] ? csts[b] : "default");
      fflush(stdout);
      CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 0));
      CHECK_OK(g_ctx, ixl_topk(g_ctx, buf[b], NULL, dre, (int)k, 0, out));
      CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 1));
      double us = 0;
      CHECK_OK(g_ctx, ixl_timer_elapsed_us(g_ctx, 0, 1, &us));
      printf("# topksprof %s launch %d: %.1f us\n", tk[i].name, b, us);
      fflush(stdout);
    }
    v2_switch("IXL_TOPK_V2_SPROF", NULL);
    v2_switch("IXL_TOPK_V2_CSTREAM", NULL);
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", NULL));
    for (int b = 0; b < 4; b++) ixl_tensor_free(buf[b]);
    ixl_tensor *all[] = {h, h64, re, dre, out, flush};
    tfree(all, 6);
  }
}

/* v2's phases at the same four shapes (IXL_BENCH=topkprof): the profile instantiation of
 * select/topk_v2.cu (IXL_TOPK_V2_PROFILE=1) prints, per launch, clock64 cycles per phase of
 * three CTAs (first, middle, last) with their global start and end; a cluster row's lower
 * digits in CTA 0 (launches 0-2) and cluster-wide (3-5, IXL_TOPK_V2_GATHER=0), the default
 * cluster size, each launch on a copy not touched before (not in L2). */
TEST(bench_topk_profile) {
  struct { int64_t R, C; int k, dtype; const char *name; } tk[] = {
      {64, 16384, 512, IXL_BF16, "64x16384_bf16_k512"},
      {4096, 16384, 512, IXL_BF16, "4096x16384_bf16_k512"},
      {1, 131072, 2048, IXL_F32, "1x131072_f32_k2048"},
      {64, 131072, 2048, IXL_F32, "64x131072_f32_k2048"},
  };
  for (size_t i = 0; i < sizeof tk / sizeof tk[0]; i++) {
    const int64_t R = tk[i].R, C = tk[i].C, k = tk[i].k;
    int64_t s2[2] = {R, C}, s1[1] = {R}, so[2] = {R, k};
    ixl_tensor *h = host2(tk[i].dtype, R, C), *re = host1(IXL_I32, R);
    ixl_tensor *dre = tnew(IXL_I32, 1, s1, IXL_DEVICE), *out = tnew(IXL_I32, 2, so, IXL_DEVICE);
    ixl_tensor *buf[6] = {0};
    if (!h || !re || !dre || !out) return;
    fill_logits(h, 0);
    for (int b = 0; b < 6; b++) {
      buf[b] = tnew(tk[i].dtype, 2, s2, IXL_DEVICE);
      if (!buf[b]) return;
      CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, buf[b], h));
    }
    for (int64_t r = 0; r < R; r++) ((int32_t *)re->data)[r] = (int32_t)C;
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, dre, re));
    /* a 64 MB write between launches pushes the previous copies out of the 60 MB L2 */
    int64_t sf[1] = {16 << 20};
    ixl_tensor *flush = tnew(IXL_F32, 1, sf, IXL_DEVICE);
    if (!flush) return;
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", "v2"));
    v2_switch("IXL_TOPK_V2_PROFILE", "1");
    for (int b = 0; b < 6; b++) {
      const int g0 = b >= 3;
      v2_switch("IXL_TOPK_V2_GATHER", g0 ? "0" : NULL);
      CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, flush, (uint8_t)b));
      CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
      printf("# topkprof %s launch %d g0 %d%s\n", tk[i].name, b, g0,
             b % 3 == 0 ? " (first of its kind: a cold start)" : "");
      fflush(stdout);
      CHECK_OK(g_ctx, ixl_topk(g_ctx, buf[b], NULL, dre, (int)k, 0, out));
      CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
      fflush(stdout);
    }
    v2_switch("IXL_TOPK_V2_PROFILE", NULL);
    v2_switch("IXL_TOPK_V2_GATHER", NULL);
    CHECK_OK(g_ctx, ixl_ctx_set_variant(g_ctx, "select", NULL));
    for (int b = 0; b < 6; b++) ixl_tensor_free(buf[b]);
    ixl_tensor *all[] = {h, re, dre, out, flush};
    tfree(all, 5);
  }
}

TEST(bench_ops) {
  if (!g_bench) return;
  const int reps = 21;
  double us;
  struct { int64_t R, C; int k, dtype, sorted; const char *name; } tk[] = {
      {64, 16384, 512, IXL_BF16, 0, "topk V4.1 decode: 64 x 16384 bf16, k=512"},
      {4096, 16384, 512, IXL_BF16, 0, "topk V4.1 prefill: 4096 x 16384 bf16, k=512"},
      {1, 131072, 2048, IXL_F32, 0, "topk V3.2: 1 x 131072 f32, k=2048"},
      {64, 131072, 2048, IXL_F32, 0, "topk V3.2: 64 x 131072 f32, k=2048"},
      {256, 131072, 2048, IXL_F32, 0, "topk: 256 x 131072 f32, k=2048"},
      {64, 1048576, 2048, IXL_F32, 0, "topk: 64 x 1048576 f32, k=2048"},
      {64, 131072, 2048, IXL_F32, 1, "topk sorted: 64 x 131072 f32, k=2048"},
  };
  for (size_t i = 0; i < sizeof tk / sizeof tk[0]; i++) {
    int64_t s2[2] = {tk[i].R, tk[i].C}, s1[1] = {tk[i].R}, so[2] = {tk[i].R, tk[i].k};
    ixl_tensor *f = tnew(IXL_F32, 2, s2, IXL_DEVICE);
    ixl_tensor *lg = tk[i].dtype == IXL_F32 ? f : tnew(IXL_BF16, 2, s2, IXL_DEVICE);
    ixl_tensor *re = host1(IXL_I32, tk[i].R), *dre = tnew(IXL_I32, 1, s1, IXL_DEVICE);
    ixl_tensor *out = tnew(IXL_I32, 2, so, IXL_DEVICE);
    if (!f || !lg || !re || !dre || !out) return;
    CHECK_OK(g_ctx, ixl_rng_normal(g_ctx, f, g_seed, 0, 0.0f, 3.0f));
    if (lg != f) { /* bf16 rows: from host-made values */
      ixl_tensor *h = host2(IXL_BF16, tk[i].R, tk[i].C);
      fill_logits(h, 0);
      CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, lg, h));
      ixl_tensor_free(h);
    }
    for (int64_t r = 0; r < tk[i].R; r++) ((int32_t *)re->data)[r] = (int32_t)tk[i].C;
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, dre, re));
    TIME_US(us, reps, ixl_topk(g_ctx, lg, NULL, dre, tk[i].k, tk[i].sorted, out));
    bench_row(tk[i].name, us, (double)tk[i].R * tk[i].C * (tk[i].dtype == IXL_F32 ? 4 : 2));
    if (lg != f) ixl_tensor_free(lg);
    ixl_tensor *all[] = {f, re, dre, out};
    tfree(all, 4);
  }
  /* K3 at the V4.1 decode shape, K4 and K7 with it */
  {
    const int64_t R = 64, C = 131072, cbs = 8, T = 2048, k = 512, nsb = T;
    int64_t s2[2] = {R, C}, s1[1] = {R}, sc[2] = {R, T}, sk[2] = {R, k}, sl[2] = {R, nsb * 8};
    ixl_tensor *dl = tnew(IXL_F32, 2, s2, IXL_DEVICE), *dn = tnew(IXL_I32, 1, s1, IXL_DEVICE);
    ixl_tensor *cand = tnew(IXL_I32, 2, sc, IXL_DEVICE), *ids = tnew(IXL_I32, 2, sc, IXL_DEVICE);
    ixl_tensor *end = tnew(IXL_I32, 1, s1, IXL_DEVICE), *cols = tnew(IXL_I32, 2, sk, IXL_DEVICE);
    ixl_tensor *sp = tnew(IXL_BF16, 2, sl, IXL_DEVICE), *lens = host1(IXL_I32, R);
    if (!dl || !dn || !cand || !ids || !end || !cols || !sp || !lens) return;
    CHECK_OK(g_ctx, ixl_rng_normal(g_ctx, dl, g_seed, 0, 0.0f, 3.0f));
    for (int64_t r = 0; r < R; r++) ((int32_t *)lens->data)[r] = (int32_t)C;
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, dn, lens));
    TIME_US(us, reps, ixl_candidate_select(g_ctx, dl, dn, (int)cbs, IXL_SCORE_MAX, cand));
    bench_row("candidate_select V4.1: 64 x 131072, cbs=8, T=2048", us, (double)R * C * 4);
    TIME_US(us, reps, ixl_mask_candidates(g_ctx, dl, dn, cand, (int)cbs));
    bench_row("mask_candidates: 64 x 131072 f32, T=2048", us, (double)R * C * 4);
    TIME_US(us, reps, ixl_expand(g_ctx, cand, NULL, dn, (int)cbs, 8, IXL_KS_UNALIGNED, ids, end));
    bench_row("expand V4.1: 64 rows, T=2048, cbs=sbk=8", us, (double)R * T * 8);
    ixl_tensor *hsp = host2(IXL_BF16, R, nsb * 8);
    fill_logits(hsp, 0);
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, sp, hsp));
    CHECK_OK(g_ctx, ixl_topk(g_ctx, sp, NULL, end, (int)k, 0, cols));
    TIME_US(us, reps, ixl_remap(g_ctx, cols, ids, NULL, 8, cols));
    bench_row("remap V4.1: 64 x 512", us, (double)R * k * 8);
    ixl_tensor *all[] = {dl, dn, cand, ids, end, cols, sp, lens, hsp};
    tfree(all, 9);
  }
  /* quantize K at 1M positions */
  for (int fmt = 0; fmt < 3; fmt++) {
    const int64_t M = 1 << 20;
    const int vb = ixl_format_value_bytes((ixl_kv_format)fmt);
    int64_t sx[2] = {M, 128}, sc2[2] = {M, vb}, ss[1] = {M};
    ixl_tensor *x = tnew(IXL_F32, 2, sx, IXL_DEVICE), *c = tnew(IXL_U8, 2, sc2, IXL_DEVICE);
    ixl_tensor *s = tnew(fmt == IXL_FP8 ? IXL_F32 : IXL_I32, 1, ss, IXL_DEVICE);
    if (!x || !c || !s) return;
    CHECK_OK(g_ctx, ixl_rng_normal(g_ctx, x, g_seed, 0, 0.0f, 1.0f));
    TIME_US(us, reps, ixl_quantize(g_ctx, fmt, IXL_Q_RNE, IXL_ROLE_K, x, c, s));
    char name[96];
    snprintf(name, sizeof name, "quantize %s K: 1048576 x 128 f32", fmt_names[fmt]);
    bench_row(name, us, (double)M * (512 + vb + 4));
    ixl_tensor *all[] = {x, c, s};
    tfree(all, 3);
  }
}

/* ---------------------------------------------------------------- main */

#define RUN_GPU(name)                                                   \
  do {                                                                  \
    if (!test_wanted(#name)) {                                          \
      /* not asked for */                                               \
    } else if (g_ctx) {                                                 \
      g_cases = 0; /* IXL_TEST_MAX_CASES counts per test */             \
      RUN(name);                                                        \
    } else {                                                            \
      printf("ok - %s # skipped: no GPU\n", #name);                     \
      tests_passed_++;                                                  \
    }                                                                   \
  } while (0)

int main(void) {
  const char *seed_env = getenv("IXL_TEST_SEED");
  g_seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
  g_rng = g_seed;
  g_small = getenv("IXL_TEST_SMALL") && getenv("IXL_TEST_SMALL")[0] == '1';
  g_bench = getenv("IXL_BENCH") && getenv("IXL_BENCH")[0] == '1';
  /* the fused K6 + K7 on every top-k case, every third under IXL_TEST_SMALL */
  g_remap_every = g_small ? 3 : 1;
  g_select_from = getenv("IXL_TEST_SELECT") && !strcmp(getenv("IXL_TEST_SELECT"), "v2");
  g_max_cases = getenv("IXL_TEST_MAX_CASES") ? atoi(getenv("IXL_TEST_MAX_CASES")) : 0;
  printf("# seed %llu%s\n", (unsigned long long)g_seed, g_small ? " (small shapes)" : "");
  char why[256];
  if (ixl_cuda_available(why, sizeof why)) {
    if (ixl_ctx_new(IXL_BACKEND_CUDA, 0, g_seed, &g_ctx) != IXL_OK) {
      printf("# CUDA context failed: %s\n", ixl_last_error(g_ctx));
      ixl_ctx_free(g_ctx);
      g_ctx = NULL;
      tests_failed_++;
    } else {
      printf("# device: %s\n", ixl_ctx_device_name(g_ctx));
    }
  } else {
    printf("# no GPU: %s\n", why);
  }
  if (getenv("IXL_BENCH") && strcmp(getenv("IXL_BENCH"), "topkprof") == 0) {
    RUN_GPU(bench_topk_profile);
    ixl_ctx_free(g_ctx);
    DONE();
  }
  if (getenv("IXL_BENCH") && strcmp(getenv("IXL_BENCH"), "topkshprof") == 0) {
    RUN_GPU(bench_topk_short_profile);
    ixl_ctx_free(g_ctx);
    DONE();
  }
  if (getenv("IXL_BENCH") && strcmp(getenv("IXL_BENCH"), "topksprof") == 0) {
    RUN_GPU(bench_topk_stream_profile);
    ixl_ctx_free(g_ctx);
    DONE();
  }
  if (getenv("IXL_BENCH") && strcmp(getenv("IXL_BENCH"), "topk") == 0) {
    RUN_GPU(bench_topk);
    ixl_ctx_free(g_ctx);
    DONE();
  }
  if (getenv("IXL_BENCH") && strcmp(getenv("IXL_BENCH"), "only") == 0) {
    g_bench = 1;
    RUN_GPU(bench_ops);
    ixl_ctx_free(g_ctx);
    DONE();
  }
  RUN_GPU(quantize_and_dequantize_match_cpu);
  RUN_GPU(prepare_weights_match_cpu);
  RUN_GPU(kv_pages_write_matches_cpu);
  RUN_GPU(topk_matches_cpu);
  RUN_GPU(topk_fallback_paths_match_cpu);
  RUN_GPU(topk_v2_paths_match_cpu);
  RUN_GPU(topk_v2_grid_rows_match_cpu);
  RUN_GPU(topk_v2_stream_match_cpu);
  RUN_GPU(topk_v2_cstream_match_cpu);
  RUN_GPU(topk_v2_short_match_cpu);
  RUN_GPU(topk_v2_shnext_match_cpu);
  RUN_GPU(candidate_select_matches_cpu);
  RUN_GPU(mask_candidates_matches_cpu);
  RUN_GPU(expand_and_remap_match_cpu);
  RUN_GPU(expand_spec_vectors);
  RUN_GPU(empty_decode_rows_match_cpu);
  RUN_GPU(selection_stages_replay_in_a_graph);
  if (!g_small) RUN_GPU(large_topk_shapes_match_cpu_on_sampled_rows);
  RUN_GPU(topk_v2_staggered_match_cpu);
  if (!g_small) RUN_GPU(large_candidate_shapes_match_cpu_on_sampled_rows);
  if (g_bench) RUN_GPU(bench_ops);
  ixl_ctx_free(g_ctx);
  DONE();
}
