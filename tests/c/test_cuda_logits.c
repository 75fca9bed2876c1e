/* test_cuda_logits.c - GPU parity of the logits kernels K1 (dense ragged), K2 (dense paged)
 * and K5 (sparse, ragged and paged) against the CPU reference (kernels/logits/logits.c,
 * kernels/logits/sparse.c), on fresh seeded random inputs, for every CUDA logits variant the
 * device runs (each pinned in turn: v1, v2 on sm_90, and v1_alt in the test build); a case
 * whose format and H the pinned variant's supports() refuses is skipped for that variant.
 *
 * What must match:
 * - integer-like outputs (the -inf masks) exactly;
 * - bf16-reduction logits of mxfp4 bitwise (+0 == -0; NaN == NaN), including exponent sums
 *   outside the fast window (subnormal and NaN-scale cases) and K5 == K1/K2 on the GPU;
 * - fp32 logits within eps * T, where T = the same kernel on |q|, |k| and |w| (so T bounds
 *   sum_h |w_h| * sum_d |q_hd * k_d| with the scales applied):
 *   - mxfp4: every dot is bitwise the CPU's (group partials are exact on both sides), only
 *     the order of the head sum differs: |error| <= 2 (H - 1) 2^-24 T;
 *   - mxfp8 / fp8: the group sums come from the tensor core's accumulation (f16 products,
 *     fp32 accumulator), which is not the CPU's sequential fp32 sum; measured errors are about
 *     2^-22 T (dense_fp32_matches_float64_oracle prints them), eps = 2^-8 leaves room for any
 *     accumulator of at least 13 fraction bits below the largest term; fp8 on v2's wgmma:
 *     eps = 2^-11, the error model of test_cuda_logits_fp8v2.c (see eps_for);
 *   - bf16 logits of mxfp8 / fp8: a dot one ulp apart can round v_h the other way, eps = 2^-5
 *     (fp8: 2^-7, the same model).
 * Every output is poisoned before each GPU run (0xFF: NaN in f32 and bf16) so an unwritten
 * element fails; a second run with another poison must give the same bits (determinism).
 * Large shapes (1M and 128K positions, 256 rows) run in full on the GPU; the CPU checks a
 * sample of rows. Without a GPU every test prints "ok - <name> # skipped: no GPU".
 * IXL_TEST_SMALL=1 (the compute-sanitizer runs) keeps only tiny shapes; IXL_TEST_SEED sets
 * the seed (default: the time, printed first); IXL_TEST_VARIANT=NAME runs that variant only;
 * IXL_TEST_ONLY=WORD,... the tests whose names contain one of the words. */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "logits/engine.h"
#include "logits/v2_mx.cuh"
#include "rand.h"
#include "variants.h"

#ifdef IXL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

static ixl_ctx *g;      /* the CUDA context; host tensors live on it too (the CPU reference
                           runs for host tensors whatever the context's backend) */
static uint64_t g_seed; /* base seed of this run */
static int g_small;     /* tiny shapes only */
static int g_tiny_w;    /* gen_query: every weight of the even rows in +-2^[-100, -80) */
static int g_fake;      /* IXL_TEST_HOST_AS_DEVICE=1: "device" tensors are host tensors, so the
                           CPU checks itself: this file's own logic, tested without a GPU */

static const char *fmt_name(int f) {
  return f == IXL_MXFP4 ? "mxfp4" : f == IXL_MXFP8 ? "mxfp8" : "fp8";
}

static const ixl_variant *g_var; /* the pinned variant (main's loop) */
/* 1 when the pinned variant accepts format fmt at H heads (its supports() on what every mode
 * shares, as kernels/logits/logits.c asks it), so a case it refuses is not run on it. */
static int var_takes(int fmt, int H) {
  if (!g_var || !g_var->supports) return 1;
  ixl_problem p;
  ixl_problem_unknown(&p);
  p.kv_format = fmt;
  p.heads = H;
  p.head_dim = 128; /* SPEC 1 */
  return g_var->supports(&p);
}

/* ---------------------------------------------------------------- tensors */
static ixl_tensor *gnew(ixl_dtype dt, int nd, int64_t a, int64_t b, int64_t c,
                        ixl_device_kind dev) {
  int64_t shape[3] = {a, b, c};
  ixl_tensor *t = NULL;
  if (g_fake) dev = IXL_HOST;
  ixl_status st = ixl_tensor_new(g, dt, nd, shape, dev, &t);
  if (st != IXL_OK) {
    fprintf(stderr, "  tensor_new: %s\n", ixl_last_error(g));
    return NULL;
  }
  return t;
}
static ixl_tensor *host(ixl_dtype dt, int nd, int64_t a, int64_t b, int64_t c) {
  return gnew(dt, nd, a, b, c, IXL_HOST);
}
static ixl_tensor *to_dev(const ixl_tensor *h) {
  if (!h) return NULL;
  ixl_tensor *d =
      gnew((ixl_dtype)h->dtype, h->ndim, h->shape[0], h->shape[1], h->shape[2], IXL_DEVICE);
  if (d && ixl_tensor_copy(g, d, h) != IXL_OK) fprintf(stderr, "  copy: %s\n", ixl_last_error(g));
  return d;
}
static ixl_tensor *like_host(const ixl_tensor *t) {
  return host((ixl_dtype)t->dtype, t->ndim, t->shape[0], t->shape[1], t->shape[2]);
}
static void to_host(ixl_tensor *h, const ixl_tensor *d) {
  if (ixl_tensor_copy(g, h, d) != IXL_OK) fprintf(stderr, "  copy back: %s\n", ixl_last_error(g));
}
static void tfree(ixl_tensor **ts, int n) {
  for (int i = 0; i < n; i++) ixl_tensor_free(ts[i]);
}

/* Output element i as a double (bf16 and f32 convert exactly). */
static double out_at(const ixl_tensor *t, int64_t i) {
  if (t->dtype == IXL_F32) return ((const float *)t->data)[i];
  return ixl_bf16_to_f32(((const uint16_t *)t->data)[i]);
}

/* ---------------------------------------------------------------- random inputs */
static int vb_of(int fmt) { return ixl_format_value_bytes((ixl_kv_format)fmt); }

/* Random codes; e4m3 NaN codes (0x7F, 0xFF) only where nan_permille asks for them. */
static void fill_codes_nan(int fmt, uint8_t *p, int64_t n, int nan_permille) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rand_u64();
    uint8_t b = (uint8_t)r;
    if (fmt != IXL_MXFP4 && (b & 0x7F) == 0x7F) b ^= 1;
    if (fmt != IXL_MXFP4 && nan_permille && (int)((r >> 8) % 1000) < nan_permille) b |= 0x7F;
    p[i] = b;
  }
}
static void fill_codes(int fmt, uint8_t *p, int64_t n) { fill_codes_nan(fmt, p, n, 0); }
/* Packed UE8M0 words with every byte in [lo, hi]; a share nan_pct/100 of the bytes 0xFF. */
static void fill_mx_scales(int32_t *p, int64_t n, int lo, int hi, int nan_pct) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t w = 0;
    for (int g4 = 0; g4 < 4; g4++) {
      uint32_t b = (uint32_t)rand_range(lo, hi);
      if (nan_pct && rand_range(0, 99) < nan_pct) b = 0xFF;
      w |= b << (8 * g4);
    }
    p[i] = (int32_t)w;
  }
}

typedef struct {
  int fmt, H;
  int64_t R;
  ixl_tensor *qc, *qs, *wf, *wb; /* host: codes, scales (NULL for fp8), F32 and BF16 weights */
} query_in;

static void gen_query(query_in *q, int fmt, int64_t R, int H, int lo, int hi, int nan_pct) {
  q->fmt = fmt;
  q->H = H;
  q->R = R;
  q->qc = host(IXL_U8, 3, R, H, vb_of(fmt));
  fill_codes(fmt, q->qc->data, R * H * vb_of(fmt)); /* NaN codes only in keys */
  q->qs = NULL;
  if (fmt != IXL_FP8) {
    q->qs = host(IXL_I32, 2, R, H, 0);
    fill_mx_scales(q->qs->data, R * H, lo, hi, nan_pct);
  }
  q->wf = host(IXL_F32, 2, R, H, 0);
  q->wb = host(IXL_BF16, 2, R, H, 0);
  float *wf = q->wf->data;
  uint16_t *wb = q->wb->data;
  for (int64_t i = 0; i < R * H; i++) {
    double w = rand_unit() * 2.0 - 1.0;
    if (g_tiny_w && (i / H) % 2 == 0) w = ldexp(1.0 + rand_unit(), (int)rand_range(-100, -81));
    if (g_tiny_w && rand_range(0, 1)) w = -w;
    wb[i] = ixl_f32_to_bf16((float)w);
    wf[i] = ixl_bf16_to_f32(wb[i]); /* the same weights in both reductions */
  }
}
static void free_query(query_in *q) {
  ixl_tensor *ts[] = {q->qc, q->qs, q->wf, q->wb};
  tfree(ts, 4);
}

/* Keys: codes [N, VB] and scales [N] (I32 UE8M0 words, or positive F32 for fp8). */
static void gen_keys(int fmt, int64_t N, int lo, int hi, int nan_pct, ixl_tensor **kc,
                     ixl_tensor **ks) {
  *kc = host(IXL_U8, 2, N, vb_of(fmt), 0);
  fill_codes_nan(fmt, (*kc)->data, N * vb_of(fmt), nan_pct / 2);
  if (fmt == IXL_FP8) {
    *ks = host(IXL_F32, 1, N, 0, 0);
    float *s = (*ks)->data;
    for (int64_t i = 0; i < N; i++)
      s[i] = (float)ldexp(1.0 + rand_unit(), (int)rand_range(-12, -6));
  } else {
    *ks = host(IXL_I32, 1, N, 0, 0);
    fill_mx_scales((*ks)->data, N, lo, hi, nan_pct);
  }
}

/* |x| versions for the tolerance bound T: sign bits cleared in codes, |w|. */
static ixl_tensor *abs_codes(int fmt, const ixl_tensor *c) {
  ixl_tensor *a = like_host(c);
  const uint8_t *s = c->data;
  uint8_t *d = a->data, m = fmt == IXL_MXFP4 ? 0x77 : 0x7F;
  for (int64_t i = 0; i < ixl_tensor_numel(c); i++) d[i] = s[i] & m;
  return a;
}
static ixl_tensor *abs_f32(const ixl_tensor *w) {
  ixl_tensor *a = like_host(w);
  for (int64_t i = 0; i < ixl_tensor_numel(w); i++)
    ((float *)a->data)[i] = fabsf(((const float *)w->data)[i]);
  return a;
}

/* ---------------------------------------------------------------- comparison */
typedef struct {
  const char *what;
  int fmt, H, bf16;
  int64_t C;               /* row length of the outputs */
  const ixl_tensor *gpu;   /* host copies */
  const ixl_tensor *cpu;
  const ixl_tensor *tol;   /* F32 T per element (fp32 run on |inputs|), or NULL for bitwise */
  double eps;
  int64_t bad, shown, checked;
  double sxy, sxx;         /* DeepGEMM's diff measure over finite pairs */
} cmp_t;

static int same_bits(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b; /* +0 == -0 */
}

/* Compares element (r, c) at index gi of the GPU rows and ci of the CPU rows; `defined`: a
 * value (else both must be -inf). */
static void cmp_one(cmp_t *m, int64_t r, int64_t c, int64_t gi, int64_t ci, int defined) {
  const double a = out_at(m->gpu, gi), b = out_at(m->cpu, ci);
  int ok;
  double lim = 0.0;
  m->checked++;
  if (!defined) {
    ok = isinf(a) && a < 0 && isinf(b) && b < 0;
  } else if (m->tol && isinf(((const float *)m->tol->data)[ci]) &&
             ((const float *)m->tol->data)[ci] > 0) {
    ok = 1; /* the sum of |terms| overflows: fp32's head order is free (SPEC 3), so whether it
             * ends +-inf or inf - inf = NaN depends on the order (see test_cuda_logits_mxk1) */
  } else if (!m->tol || isnan(b) || isinf(b) || isnan(a) || isinf(a)) {
    ok = same_bits(a, b);
  } else {
    lim = m->eps * ((const float *)m->tol->data)[ci] + 1e-30;
    ok = fabs(a - b) <= lim;
  }
  if (defined && isfinite(a) && isfinite(b)) {
    m->sxy += a * b;
    m->sxx += a * a + b * b;
  }
  if (!ok) {
    m->bad++;
    if (m->shown++ < 6)
      fprintf(
          stderr, "  %s %s H=%d %s: row %lld col %lld: gpu %.9g cpu %.9g (tol %.3g)%s seed %llu\n",
          m->what, fmt_name(m->fmt), m->H, m->bf16 ? "bf16" : "fp32", (long long)r, (long long)c, a,
          b, lim, defined ? "" : " (must be -inf)", (unsigned long long)g_seed);
  }
}

static double cmp_diff(const cmp_t *m) { return m->sxx > 0 ? 1.0 - 2.0 * m->sxy / m->sxx : 0.0; }

/* eps for the tolerance runs (see the header); 0 = bitwise. fp8: the fp8 wgmma error model
 * of test_cuda_logits_fp8v2.c (its compare_cpu comment): each k32 step aligns its 32 products
 * to the largest and keeps about 13-14 bits, so an element is within 2^-11 T (fp32) / 2^-7 T
 * (bf16: one ulp of a bf16 chain partial, each <= T); that file's modelled worst is 2^-13.7 /
 * 2^-8.3 T and the H200's 2^-14.8 / 2^-11.4 T. mxfp8 keeps the older 2^-8 / 2^-5. */
static double eps_for(int fmt, int bf16, int H) {
  if (fmt == IXL_MXFP4) return bf16 ? 0.0 : 2.0 * (H > 1 ? H - 1 : 1) * 0x1p-24;
  if (fmt == IXL_FP8) return bf16 ? 0x1p-7 : 0x1p-11;
  return bf16 ? 0x1p-5 : 0x1p-8;
}

/* Two GPU runs with different poisons must agree bit for bit where the output is defined;
 * returns the first run's host copy. `run` launches the op writing `dev_out`. */
typedef ixl_status (*gpu_op)(void *arg, ixl_tensor *out);
static ixl_tensor *run_gpu_twice(gpu_op op, void *arg, ixl_tensor *dev_out, int64_t *nondet,
                                 const uint8_t *defined_mask) {
  ixl_tensor *h1 = like_host(dev_out), *h2 = like_host(dev_out);
  CHECK_OK(g, ixl_tensor_fill_bytes(g, dev_out, 0xFF));
  CHECK_OK(g, op(arg, dev_out));
  CHECK_OK(g, ixl_ctx_sync(g));
  to_host(h1, dev_out);
  CHECK_OK(g, ixl_tensor_fill_bytes(g, dev_out, 0x7F));
  CHECK_OK(g, op(arg, dev_out));
  CHECK_OK(g, ixl_ctx_sync(g));
  to_host(h2, dev_out);
  const int64_t n = ixl_tensor_numel(dev_out);
  const size_t es = ixl_dtype_size((ixl_dtype)dev_out->dtype);
  *nondet = 0;
  for (int64_t i = 0; i < n; i++)
    if ((!defined_mask || defined_mask[i]) &&
        memcmp((const uint8_t *)h1->data + i * es, (const uint8_t *)h2->data + i * es, es))
      (*nondet)++;
  ixl_tensor_free(h2);
  return h1;
}

/* ---------------------------------------------------------------- K1 */
typedef struct {
  ixl_qk qk;
  const ixl_tensor *w, *ks, *ke;
  ixl_layout layout;
  int clean;
  ixl_reduction red;
} k1_args;
static ixl_status k1_op(void *a, ixl_tensor *out) {
  k1_args *k = a;
  return ixl_dense_logits(g, &k->qk, k->w, k->ks, k->ke, k->layout, k->clean, k->red, out);
}

/* Row ranges: an empty row, a full one, a single position at the end, causal rows and
 * random ones. */
static void gen_ranges(int32_t *ks, int32_t *ke, int64_t R, int64_t N) {
  for (int64_t r = 0; r < R; r++) {
    int64_t a, b;
    switch (r % 6) {
      case 0: a = b = rand_range(0, N); break;
      case 1: a = 0, b = N; break;
      case 2: a = N - 1, b = N; break;
      case 3: a = 0, b = N - R + r + 1 > 0 ? N - R + r + 1 : 1; break;
      default:
        a = rand_range(0, N - 1);
        b = rand_range(a, N);
    }
    ks[r] = (int32_t)a;
    ke[r] = (int32_t)b;
  }
}

typedef struct {
  int fmt, H;
  int64_t R, N;
  int qlo, qhi, klo, khi, nan_pct;
} shape_cfg;

/* K1 for one format and H: both reductions, a random layout and clean flag each. */
static void k1_case(const shape_cfg *s, int64_t *bad_total) {
  const int fmt = s->fmt, H = s->H;
  if (!var_takes(fmt, H)) return;
  const int64_t R = s->R, N = s->N;
  query_in q;
  gen_query(&q, fmt, R, H, s->qlo, s->qhi, s->nan_pct);
  ixl_tensor *kc, *ksc;
  gen_keys(fmt, N, s->klo, s->khi, s->nan_pct, &kc, &ksc);
  ixl_tensor *ks = host(IXL_I32, 1, R, 0, 0), *ke = host(IXL_I32, 1, R, 0, 0);
  gen_ranges(ks->data, ke->data, R, N);
  int64_t max_len = 0;
  for (int64_t r = 0; r < R; r++) {
    int64_t l = ((int32_t *)ke->data)[r] - ((int32_t *)ks->data)[r];
    max_len = l > max_len ? l : max_len;
  }
  max_len += rand_range(0, 5); /* extra columns must be -inf */
  ixl_tensor *aqc = abs_codes(fmt, q.qc), *akc = abs_codes(fmt, kc), *awf = abs_f32(q.wf);
  ixl_tensor *dq[] = {to_dev(q.qc), to_dev(q.qs), to_dev(kc), to_dev(ksc), to_dev(ks), to_dev(ke),
                      to_dev(q.wf), to_dev(q.wb)};
  for (int red = 0; red < 2; red++) {
    const int bf16 = red == IXL_REDUCE_BF16;
    const ixl_layout layout = rand_range(0, 1) ? IXL_LAYOUT_COMPRESSED : IXL_LAYOUT_FULL;
    const int clean = (int)rand_range(0, 1);
    const int64_t C = layout == IXL_LAYOUT_FULL ? N : max_len;
    const ixl_dtype odt = bf16 ? IXL_BF16 : IXL_F32;
    /* CPU reference, and T for the tolerance */
    ixl_qk hq = {q.qc, q.qs, kc, ksc, NULL, 0, fmt};
    ixl_tensor *cpu = host(odt, 2, R, C, 0), *tol = NULL;
    CHECK_OK(g, ixl_dense_logits(g, &hq, bf16 ? q.wb : q.wf, ks, ke, layout, 1, (ixl_reduction)red,
                                 cpu));
    const double eps = eps_for(fmt, bf16, H);
    if (eps > 0) {
      ixl_qk aq = {aqc, q.qs, akc, ksc, NULL, 0, fmt};
      tol = host(IXL_F32, 2, R, C, 0);
      CHECK_OK(g, ixl_dense_logits(g, &aq, awf, ks, ke, layout, 1, IXL_REDUCE_FP32, tol));
    }
    /* GPU, twice */
    k1_args a = {{dq[0], dq[1], dq[2], dq[3], NULL, 0, fmt}, bf16 ? dq[7] : dq[6], dq[4], dq[5],
                 layout, clean, (ixl_reduction)red};
    ixl_tensor *dout = gnew(odt, 2, R, C, 0, IXL_DEVICE);
    uint8_t *def = malloc((size_t)(R * C)); /* 1: compared (a value or a required -inf) */
    const int32_t *ksp = ks->data, *kep = ke->data;
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < C; c++) {
        const int in = layout == IXL_LAYOUT_FULL ? c >= ksp[r] && c < kep[r] : c < kep[r] - ksp[r];
        def[r * C + c] = in || clean || layout == IXL_LAYOUT_COMPRESSED;
      }
    int64_t nondet = 0;
    ixl_tensor *gpu = run_gpu_twice(k1_op, &a, dout, &nondet, def);
    cmp_t m = {"dense_logits", fmt, H, bf16, C, gpu, cpu, tol, eps, 0, 0, 0, 0, 0};
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < C; c++) {
        if (!def[r * C + c]) continue;
        const int in = layout == IXL_LAYOUT_FULL ? c >= ksp[r] && c < kep[r] : c < kep[r] - ksp[r];
        cmp_one(&m, r, c, r * C + c, r * C + c, in);
      }
    CHECK_MSG(m.bad == 0, "K1 %s H=%d %s %s clean=%d: %lld of %lld elements differ (seed %llu)",
              fmt_name(fmt), H, bf16 ? "bf16" : "fp32", layout ? "compressed" : "full", clean,
              (long long)m.bad, (long long)m.checked, (unsigned long long)g_seed);
    CHECK_MSG(nondet == 0, "K1 %s H=%d: %lld elements differ between two runs (seed %llu)",
              fmt_name(fmt), H, (long long)nondet, (unsigned long long)g_seed);
    if (!bf16 && fmt == IXL_MXFP4) CHECK_MSG(cmp_diff(&m) < 1e-9, "diff %.3g", cmp_diff(&m));
    *bad_total += m.bad + nondet;
    free(def);
    ixl_tensor *ts[] = {cpu, tol, dout, gpu};
    tfree(ts, 4);
  }
  tfree(dq, 8);
  ixl_tensor *ts[] = {kc, ksc, ks, ke, aqc, akc, awf};
  tfree(ts, 7);
  free_query(&q);
}

static const int k_formats[3] = {IXL_MXFP4, IXL_MXFP8, IXL_FP8};

TEST(dense_ragged_matches_cpu_every_format_and_h) {
  static const int Hs[] = {4, 8, 12, 16, 20, 32, 48, 64, 128};
  static const int Hs_small[] = {32, 4, 64}; /* one H per format */
  int64_t bad = 0;
  for (int f = 0; f < 3; f++)
    for (int i = 0; i < (g_small ? 1 : 9); i++) {
      shape_cfg s = {k_formats[f], g_small ? Hs_small[f] : Hs[i], g_small ? 7 : 23,
                     g_small ? 300 : 777, 119, 135, 119, 135, 0};
      k1_case(&s, &bad);
    }
  CHECK(bad == 0);
}

/* Exponent sums outside the fast window (subnormal and tiny results, the scalar path), NaN
 * scales (0xFF) and e4m3 NaN codes must still match bitwise (mxfp4) or within the tolerance,
 * NaN where the CPU has NaN. */
TEST(dense_ragged_extreme_scales_and_nan) {
  int64_t bad = 0;
  for (int f = 0; f < (g_small ? 1 : 3); f++) {
    shape_cfg wide = {k_formats[f], 32, 9, g_small ? 260 : 700, 20, 160, 30, 150, 0};
    k1_case(&wide, &bad);
    shape_cfg nan = {k_formats[f], 16, 9, 300, 120, 134, 120, 134, 2};
    k1_case(&nan, &bad);
  }
  CHECK(bad == 0);
}

/* ---------------------------------------------------------------- paged (K2) */
typedef struct {
  ixl_tensor *pages, *bt, *lens; /* host */
  int P;
  int64_t max_pages;
} paged_in;

/* Writes keys kc/ksc position by position into pages through random block tables (rows may
 * share pages, as requests sharing a prefix do). */
static void gen_paged(int fmt, int64_t R, int P, int64_t max_pages, const ixl_tensor *kc,
                      const ixl_tensor *ksc, paged_in *pi) {
  const int vb = vb_of(fmt);
  int64_t stride = ((int64_t)P * (vb + 4) + 511) / 512 * 512;
  if (rand_range(0, 1)) stride += 512; /* a stride larger than needed */
  const int64_t npos = kc->shape[0], num_pages = (npos + P - 1) / P;
  pi->P = P;
  pi->max_pages = max_pages;
  pi->pages = host(IXL_U8, 2, num_pages, stride, 0);
  memset(pi->pages->data, 0xAB, (size_t)(num_pages * stride)); /* garbage in the padding */
  uint8_t *pg = pi->pages->data;
  for (int64_t p = 0; p < npos; p++) {
    uint8_t *base = pg + (p / P) * stride;
    memcpy(base + (p % P) * vb, (const uint8_t *)kc->data + p * vb, (size_t)vb);
    memcpy(base + (int64_t)P * vb + (p % P) * 4, (const uint8_t *)ksc->data + p * 4, 4);
  }
  pi->bt = host(IXL_I32, 2, R, max_pages, 0);
  pi->lens = host(IXL_I32, 1, R, 0, 0);
  int32_t *bt = pi->bt->data, *lens = pi->lens->data;
  for (int64_t r = 0; r < R; r++) {
    for (int64_t j = 0; j < max_pages; j++)
      bt[r * max_pages + j] = (int32_t)rand_range(0, num_pages - 1);
    const int64_t full = max_pages * P;
    switch (r % 5) {
      case 0: lens[r] = 0; break;
      case 1: lens[r] = (int32_t)full; break;
      case 2: lens[r] = 1; break;
      default: lens[r] = (int32_t)rand_range(1, full);
    }
  }
}
/* Every slot of the page pool as ragged keys (codes [S, vb], scales [S]; S = pages x P), the
 * padding's garbage included, so a tolerance bound covers the slots a block table reaches
 * past the real keys; fp8's fp32 scales as |s| (the garbage bytes make a negative one). */
static void pool_keys(int fmt, const paged_in *pi, ixl_tensor **kc, ixl_tensor **ks) {
  const int vb = vb_of(fmt), P = pi->P;
  const int64_t np = pi->pages->shape[0], stride = pi->pages->shape[1], S = np * P;
  *kc = host(IXL_U8, 2, S, vb, 0);
  *ks = host(fmt == IXL_FP8 ? IXL_F32 : IXL_I32, 1, S, 0, 0);
  const uint8_t *pg = pi->pages->data;
  for (int64_t p = 0; p < S; p++) {
    const uint8_t *base = pg + (p / P) * stride;
    memcpy((uint8_t *)(*kc)->data + p * vb, base + (p % P) * vb, (size_t)vb);
    memcpy((uint8_t *)(*ks)->data + p * 4, base + (int64_t)P * vb + (p % P) * 4, 4);
    if (fmt == IXL_FP8) ((float *)(*ks)->data)[p] = fabsf(((float *)(*ks)->data)[p]);
  }
}
static void free_paged(paged_in *pi) {
  ixl_tensor *ts[] = {pi->pages, pi->bt, pi->lens};
  tfree(ts, 3);
}

typedef struct {
  ixl_qk qk;
  const ixl_tensor *w, *lens, *bt;
  ixl_reduction red;
} k2_args;
static ixl_status k2_op(void *a, ixl_tensor *out) {
  k2_args *k = a;
  return ixl_dense_logits_paged(g, &k->qk, k->w, k->lens, k->bt, k->red, out);
}

static void k2_case(int fmt, int H, int64_t R, int P, int64_t max_pages, int64_t *bad_total) {
  if (!var_takes(fmt, H)) return;
  query_in q;
  gen_query(&q, fmt, R, H, 119, 135, 0);
  ixl_tensor *kc, *ksc;
  const int64_t npos = P * (max_pages + 3);
  gen_keys(fmt, npos, 119, 135, 0, &kc, &ksc);
  paged_in pi;
  gen_paged(fmt, R, P, max_pages, kc, ksc, &pi);
  ixl_tensor *akc = abs_codes(fmt, kc), *aqc = abs_codes(fmt, q.qc), *awf = abs_f32(q.wf);
  paged_in api; /* the same pages with |k| */
  api.pages = like_host(pi.pages);
  {
    const int vb = vb_of(fmt);
    memcpy(api.pages->data, pi.pages->data, (size_t)ixl_tensor_numel(pi.pages));
    uint8_t *pg = api.pages->data;
    const int64_t stride = pi.pages->shape[1];
    for (int64_t p = 0; p < npos; p++)
      memcpy(pg + (p / P) * stride + (p % P) * vb, (const uint8_t *)akc->data + p * vb, (size_t)vb);
  }
  const int64_t C = max_pages * P + 7;
  ixl_tensor *dq[] = {to_dev(q.qc), to_dev(q.qs), to_dev(pi.pages), to_dev(pi.lens), to_dev(pi.bt),
                      to_dev(q.wf), to_dev(q.wb)};
  for (int red = 0; red < 2; red++) {
    const int bf16 = red == IXL_REDUCE_BF16;
    const ixl_dtype odt = bf16 ? IXL_BF16 : IXL_F32;
    ixl_qk hq = {q.qc, q.qs, NULL, NULL, pi.pages, P, fmt};
    ixl_tensor *cpu = host(odt, 2, R, C, 0), *tol = NULL;
    CHECK_OK(g, ixl_dense_logits_paged(g, &hq, bf16 ? q.wb : q.wf, pi.lens, pi.bt,
                                       (ixl_reduction)red, cpu));
    const double eps = eps_for(fmt, bf16, H);
    if (eps > 0) {
      ixl_qk aq = {aqc, q.qs, NULL, NULL, api.pages, P, fmt};
      tol = host(IXL_F32, 2, R, C, 0);
      CHECK_OK(g, ixl_dense_logits_paged(g, &aq, awf, pi.lens, pi.bt, IXL_REDUCE_FP32, tol));
    }
    k2_args a = {{dq[0], dq[1], NULL, NULL, dq[2], P, fmt}, bf16 ? dq[6] : dq[5], dq[3], dq[4],
                 (ixl_reduction)red};
    ixl_tensor *dout = gnew(odt, 2, R, C, 0, IXL_DEVICE);
    int64_t nondet = 0;
    ixl_tensor *gpu = run_gpu_twice(k2_op, &a, dout, &nondet, NULL);
    cmp_t m = {"dense_logits_paged", fmt, H, bf16, C, gpu, cpu, tol, eps, 0, 0, 0, 0, 0};
    const int32_t *lens = pi.lens->data;
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < C; c++) cmp_one(&m, r, c, r * C + c, r * C + c, c < lens[r]);
    CHECK_MSG(m.bad == 0, "K2 %s H=%d P=%d %s: %lld of %lld elements differ (seed %llu)",
              fmt_name(fmt), H, P, bf16 ? "bf16" : "fp32", (long long)m.bad, (long long)m.checked,
              (unsigned long long)g_seed);
    CHECK_MSG(nondet == 0, "K2 %s H=%d: %lld elements differ between two runs", fmt_name(fmt), H,
              (long long)nondet);
    *bad_total += m.bad + nondet;
    ixl_tensor *ts[] = {cpu, tol, dout, gpu};
    tfree(ts, 4);
  }
  tfree(dq, 7);
  free_paged(&pi);
  ixl_tensor *ts[] = {kc, ksc, akc, aqc, awf, api.pages};
  tfree(ts, 6);
  free_query(&q);
}

TEST(dense_paged_matches_cpu_every_format_and_h) {
  static const int Hs[] = {4, 8, 24, 32, 64, 128};
  static const int Ps[] = {16, 64, 128, 32, 64, 256};
  int64_t bad = 0;
  for (int f = 0; f < 3; f++)
    for (int i = 0; i < (g_small ? 1 : 6); i++)
      k2_case(k_formats[f], Hs[g_small ? 3 + f % 2 : i], g_small ? 5 : 11, Ps[g_small ? f : i],
              g_small ? 5 : 9, &bad);
  CHECK(bad == 0);
}

/* fp8 K2 at H 32 and 64 over every page size class v2's kernel has (8, 16, 32: several pages
 * per 64-position tile; 64, 128, 256: one) and one it hands to v1 (48), then 3 long rows
 * (1000 pages of 64) that v2 splits over every SM. */
TEST(dense_paged_fp8_page_sizes_and_long_rows) {
  static const int Ps[] = {8, 16, 32, 64, 128, 256, 48};
  int64_t bad = 0;
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < (g_small ? 2 : 7); i++)
      k2_case(IXL_FP8, h ? 64 : 32, g_small ? 5 : 11, Ps[g_small ? 2 * i + h : i],
              g_small ? 3 : 7, &bad);
  k2_case(IXL_FP8, 64, 3, 64, g_small ? 40 : 1000, &bad);
  CHECK(bad == 0);
}

/* ---------------------------------------------------------------- sparse (K5) */
/* Sparse ids as K4 makes them for a row range [ks, ke) (paged: ks = 0): n_valid distinct
 * blocks in increasing order, + ks / sbk, then pads repeating the last (ks / sbk when empty).
 * garbage: random ids instead (negative, past the end, out of order). */
static void gen_ids(int32_t *ids, int64_t nsb, int64_t ks, int64_t ke, int sbk, int garbage) {
  const int64_t nblk = ke > ks ? (ke - ks + sbk - 1) / sbk : 0, base = ks / sbk;
  if (garbage) {
    for (int64_t j = 0; j < nsb; j++) ids[j] = (int32_t)rand_range(base - 3, base + nblk + 3);
    if (rand_range(0, 1)) /* a long increasing run first, so the garbage lies past it */
      for (int64_t j = 1; j < nsb / 2; j++) ids[j] = ids[j - 1] + (int32_t)rand_range(1, 3);
    return;
  }
  int64_t want = nblk < nsb ? nblk : nsb;
  if (want > 0 && rand_range(0, 2) == 0) want = rand_range(1, want);
  int64_t n = 0;
  for (int64_t b = 0; b < nblk && n < want; b++) /* selection sampling: sorted, distinct */
    if ((double)(want - n) > rand_unit() * (double)(nblk - b)) ids[n++] = (int32_t)(b + base);
  for (int64_t j = n; j < nsb; j++) ids[j] = n ? ids[n - 1] : (int32_t)base;
}

typedef struct {
  ixl_qk qk;
  const ixl_tensor *w, *ks, *ke, *bt, *ids;
  int sbk;
  ixl_ks_mode mode;
} k5_args;
static ixl_status k5_op(void *a, ixl_tensor *out) {
  k5_args *k = a;
  return ixl_sparse_logits(g, &k->qk, k->w, k->ks, k->ke, k->bt, k->ids, k->sbk, k->mode, out);
}

/* One K5 configuration against the CPU, and against K1/K2 (bf16) on the GPU at the same
 * positions (SPEC 3: bitwise equal). */
static void k5_case_p(int fmt, int H, int paged, int sbk, ixl_ks_mode mode, int garbage, int P,
                      int64_t *bad_total) {
  if (!var_takes(fmt, H)) return;
  const int64_t R = g_small ? 5 : 13, nsb = g_small ? 9 : 37;
  const int64_t N = g_small ? 400 : 1500;
  query_in q;
  gen_query(&q, fmt, R, H, 119, 135, 0);
  ixl_tensor *kc, *ksc;
  gen_keys(fmt, N, 119, 135, 0, &kc, &ksc);
  ixl_tensor *ks = host(IXL_I32, 1, R, 0, 0), *ke = host(IXL_I32, 1, R, 0, 0);
  ixl_tensor *ids = host(IXL_I32, 2, R, nsb, 0);
  int32_t *ksp = ks->data, *kep = ke->data, *idp = ids->data;
  paged_in pi = {0};
  if (paged) {
    gen_paged(fmt, R, P, (N - 3 * P) / P, kc, ksc, &pi);
    for (int64_t r = 0; r < R; r++) ksp[r] = 0;
    memcpy(kep, pi.lens->data, (size_t)R * 4);
  } else {
    gen_ranges(ksp, kep, R, N);
    if (mode == IXL_KS_ALIGNED)
      for (int64_t r = 0; r < R; r++) ksp[r] = ksp[r] / sbk * sbk;
  }
  for (int64_t r = 0; r < R; r++)
    gen_ids(idp + r * nsb, nsb, paged ? 0 : ksp[r], kep[r], sbk, garbage && r % 2);
  const int64_t C = nsb * sbk;
  ixl_tensor *dq[] = {to_dev(q.qc),
                      to_dev(q.qs),
                      to_dev(kc),
                      to_dev(ksc),
                      to_dev(ks),
                      to_dev(ke),
                      to_dev(q.wb),
                      to_dev(ids),
                      paged ? to_dev(pi.pages) : NULL,
                      paged ? to_dev(pi.bt) : NULL};
  ixl_qk hq = {q.qc,          q.qs, paged ? NULL : kc, paged ? NULL : ksc, paged ? pi.pages : NULL,
               paged ? P : 0, fmt};
  ixl_tensor *cpu = host(IXL_BF16, 2, R, C, 0);
  CHECK_OK(g, ixl_sparse_logits(g, &hq, q.wb, paged ? NULL : ks, ke, paged ? pi.bt : NULL, ids, sbk,
                                mode, cpu));
  /* T from the dense CPU kernel on |inputs| at the same positions (fp32) */
  ixl_tensor *tol = NULL;
  const double eps = eps_for(fmt, 1, H);
  k5_args a = {
      {dq[0], dq[1], paged ? NULL : dq[2], paged ? NULL : dq[3], dq[8], paged ? P : 0, fmt},
      dq[6],
      paged ? NULL : dq[4],
      dq[5],
      dq[9],
      dq[7],
      sbk,
      mode};
  ixl_tensor *dout = gnew(IXL_BF16, 2, R, C, 0, IXL_DEVICE);
  int64_t nondet = 0;
  ixl_tensor *gpu = run_gpu_twice(k5_op, &a, dout, &nondet, NULL);
  /* GPU K1/K2 bf16, full layout: the same positions must give the same bits */
  ixl_tensor *dense_h = NULL, *dense_d = NULL;
  int64_t DC;
  if (paged) {
    DC = pi.max_pages * P;
    dense_d = gnew(IXL_BF16, 2, R, DC, 0, IXL_DEVICE);
    ixl_qk dqk = {dq[0], dq[1], NULL, NULL, dq[8], P, fmt};
    CHECK_OK(g, ixl_dense_logits_paged(g, &dqk, dq[6], dq[5], dq[9], IXL_REDUCE_BF16, dense_d));
  } else {
    DC = N;
    dense_d = gnew(IXL_BF16, 2, R, DC, 0, IXL_DEVICE);
    ixl_qk dqk = {dq[0], dq[1], dq[2], dq[3], NULL, 0, fmt};
    CHECK_OK(g, ixl_dense_logits(g, &dqk, dq[6], dq[4], dq[5], IXL_LAYOUT_FULL, 1, IXL_REDUCE_BF16,
                                 dense_d));
  }
  dense_h = like_host(dense_d);
  to_host(dense_h, dense_d);
  if (eps > 0) {
    /* paged: T over every pool slot, the padding's too (a block table may point there) */
    ixl_tensor *pkc = NULL, *pks = NULL;
    if (paged) pool_keys(fmt, &pi, &pkc, &pks);
    const ixl_tensor *tkc = paged ? pkc : kc, *tks = paged ? pks : ksc;
    const int64_t NT = tkc->shape[0];
    ixl_tensor *aqc = abs_codes(fmt, q.qc), *akc = abs_codes(fmt, tkc), *awf = abs_f32(q.wf);
    ixl_tensor *full = host(IXL_F32, 2, R, NT, 0), *zk = host(IXL_I32, 1, R, 0, 0),
               *nk = host(IXL_I32, 1, R, 0, 0);
    for (int64_t r = 0; r < R; r++)
      ((int32_t *)zk->data)[r] = 0, ((int32_t *)nk->data)[r] = (int32_t)NT;
    ixl_qk aq = {aqc, q.qs, akc, tks, NULL, 0, fmt};
    CHECK_OK(g, ixl_dense_logits(g, &aq, awf, zk, nk, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, full));
    tol = host(IXL_F32, 2, R, C, 0);
    for (int64_t r = 0; r < R; r++) /* the K position of each column (garbage too: 0 if none) */
      for (int64_t c = 0; c < C; c++) {
        int64_t pos = (int64_t)idp[r * nsb + c / sbk] * sbk +
                      (paged || mode == IXL_KS_ALIGNED ? 0 : ksp[r] % sbk) + c % sbk;
        if (paged && pos >= 0 && pos < pi.max_pages * P)
          pos = (int64_t)((int32_t *)pi.bt->data)[r * pi.max_pages + pos / P] * P + pos % P;
        ((float *)tol->data)[r * C + c] =
            pos >= 0 && pos < NT ? ((float *)full->data)[r * NT + pos] : 0.0f;
      }
    ixl_tensor *ts[] = {aqc, akc, awf, full, zk, nk};
    tfree(ts, 6);
    if (paged) {
      ixl_tensor *ps[] = {pkc, pks};
      tfree(ps, 2);
    }
  }
  cmp_t m = {"sparse_logits", fmt, H, 1, C, gpu, cpu, tol, eps, 0, 0, 0, 0, 0};
  int64_t dense_bad = 0;
  for (int64_t r = 0; r < R; r++)
    for (int64_t c = 0; c < C; c++) {
      const double b = out_at(cpu, r * C + c);
      const int defined = !(isinf(b) && b < 0);
      cmp_one(&m, r, c, r * C + c, r * C + c, defined);
      if (defined) { /* K5 == K1/K2 bf16 at the same position, on the GPU */
        int64_t pos = (int64_t)idp[r * nsb + c / sbk] * sbk +
                      (paged || mode == IXL_KS_ALIGNED ? 0 : ksp[r] % sbk) + c % sbk;
        if (pos >= 0 && pos < DC &&
            !same_bits(out_at(gpu, r * C + c), out_at(dense_h, r * DC + pos))) {
          if (dense_bad++ < 4)
            fprintf(stderr,
                    "  K5 vs dense (GPU) %s H=%d row %lld col %lld pos %lld: %.9g vs %.9g (seed "
                    "%llu)\n",
                    fmt_name(fmt), H, (long long)r, (long long)c, (long long)pos,
                    out_at(gpu, r * C + c), out_at(dense_h, r * DC + pos),
                    (unsigned long long)g_seed);
        }
      }
    }
  CHECK_MSG(m.bad == 0, "K5 %s H=%d %s sbk=%d %s%s: %lld of %lld elements differ (seed %llu)",
            fmt_name(fmt), H, paged ? "paged" : "ragged", sbk, mode ? "aligned" : "unaligned",
            garbage ? " garbage ids" : "", (long long)m.bad, (long long)m.checked,
            (unsigned long long)g_seed);
  CHECK_MSG(nondet == 0, "K5 %s: %lld elements differ between two runs", fmt_name(fmt),
            (long long)nondet);
  CHECK_MSG(dense_bad == 0, "K5 %s H=%d: %lld columns differ from K1/K2 bf16 on the GPU",
            fmt_name(fmt), H, (long long)dense_bad);
  *bad_total += m.bad + nondet + dense_bad;
  tfree(dq, 10);
  ixl_tensor *ts[] = {kc, ksc, ks, ke, ids, cpu, tol, dout, gpu, dense_h, dense_d};
  tfree(ts, 11);
  if (paged) free_paged(&pi);
  free_query(&q);
}

static void k5_case(int fmt, int H, int paged, int sbk, ixl_ks_mode mode, int garbage,
                    int64_t *bad_total) {
  k5_case_p(fmt, H, paged, sbk, mode, garbage, 64, bad_total);
}

TEST(sparse_ragged_matches_cpu_and_dense) {
  static const int Hs[] = {4, 8, 32, 64, 128, 20};
  static const int sbks[] = {8, 16, 4, 32, 8, 16};
  int64_t bad = 0;
  for (int f = 0; f < 3; f++)
    for (int i = 0; i < (g_small ? 1 : 6); i++) {
      const int k = g_small ? f : i;
      k5_case(k_formats[f], Hs[k], 0, sbks[k], k % 2 ? IXL_KS_ALIGNED : IXL_KS_UNALIGNED, 0, &bad);
    }
  CHECK(bad == 0);
}

TEST(sparse_paged_matches_cpu_and_dense) {
  static const int Hs[] = {32, 64, 4, 128};
  static const int sbks[] = {8, 16, 32, 4};
  int64_t bad = 0;
  for (int f = 0; f < (g_small ? 1 : 3); f++)
    for (int i = 0; i < (g_small ? 1 : 4); i++)
      k5_case(k_formats[f], Hs[i], 1, sbks[i], IXL_KS_UNALIGNED, 0, &bad);
  CHECK(bad == 0);
}

/* Ids that are not K4's (negative, past the end, out of order) read nothing outside K or
 * the pages and give the CPU's -inf/value pattern exactly. */
TEST(sparse_garbage_ids_stay_inside_and_match) {
  int64_t bad = 0;
  for (int f = 0; f < (g_small ? 1 : 3); f++) {
    k5_case(k_formats[f], 32, 0, 8, IXL_KS_UNALIGNED, 1, &bad);
    k5_case(k_formats[f], 32, 1, 16, IXL_KS_UNALIGNED, 1, &bad);
  }
  CHECK(bad == 0);
}

/* mxfp4 at V4.1's H = 32 and at 64 (logits v2's own kernels) over the page sizes and sparse
 * block sizes the builder accepts: pages of 1, 8, 48 (not a power of two; sparse blocks of 32
 * then cross pages) and 256 for K2, and K5 paged with pages of 16, 48 and 128 and blocks up to
 * 128 (wider than a 64-slot tile), K5 ragged with blocks of 64 and 128, and K1 with exponents
 * outside the fast window and NaN scales at H = 64. */
TEST(mxfp4_page_sizes_blocks_and_h64_extremes) {
  static const int P2[] = {1, 8, 48, 256};
  static const int P5[] = {16, 48, 128, 48};
  static const int S5[] = {16, 32, 128, 16};
  int64_t bad = 0;
  for (int h = 0; h < 2; h++) {
    const int H = h ? 64 : 32;
    for (int i = 0; i < (g_small ? 1 : 4); i++) {
      const int i2 = g_small ? 2 - h : i, i5 = g_small ? 1 - h : i;
      k2_case(IXL_MXFP4, H, g_small ? 3 : 9, P2[i2], g_small ? 4 : i2 == 0 ? 200 : 9, &bad);
      k5_case_p(IXL_MXFP4, H, 1, S5[i5], IXL_KS_UNALIGNED, i == 3, P5[i5], &bad);
    }
    if (!g_small) {
      k5_case(IXL_MXFP4, H, 0, 64, IXL_KS_UNALIGNED, 0, &bad);
      k5_case(IXL_MXFP4, H, 0, 128, IXL_KS_ALIGNED, 1, &bad);
    }
  }
  shape_cfg wide = {IXL_MXFP4, 64, 9, g_small ? 200 : 700, 20, 160, 30, 150, 0};
  k1_case(&wide, &bad);
  shape_cfg nan = {IXL_MXFP4, 64, 9, 300, 120, 134, 120, 134, 2};
  k1_case(&nan, &bad);
  CHECK(bad == 0);
}

/* mxfp4 at H = 32 on the shapes logits v2's NEXT kernels take (IXL_LOGITS_V2_MX_NEXT: K1 and
 * ragged K5), small enough for the sanitizers: ragged K5 (== K1 bf16 too) with blocks of 4 to
 * 128, aligned and not, garbage ids; K1 with 9 and 6 rows (a CTA of 4 rows with empty ones),
 * exponents outside the fast window and NaN scales. Switch off, the default kernels run it. */
TEST(mxfp4_h32_ragged_matches_next_shapes) {
  static const int sbks[] = {8, 4, 64, 128};
  int64_t bad = 0;
  for (int i = 0; i < 4; i++)
    k5_case(IXL_MXFP4, 32, 0, sbks[i], i % 2 ? IXL_KS_ALIGNED : IXL_KS_UNALIGNED, i == 1, &bad);
  shape_cfg a = {IXL_MXFP4, 32, 9, g_small ? 300 : 900, 119, 135, 119, 135, 0};
  k1_case(&a, &bad);
  shape_cfg b = {IXL_MXFP4, 32, 6, 260, 20, 160, 30, 150, 2};
  k1_case(&b, &bad);
  CHECK(bad == 0);
}

/* mxfp4 K1 whose query heads fold (group exponents within 14 of each other) with their largest
 * exponent outside logits v2's V3 combine window (127 +- 25) but inside the fast path's (127 +-
 * 50), alone and mixed with heads inside it and unfolded ones, keys inside and outside the
 * window: V3 (IXL_LOGITS_V2_MX_V3 with bit 4) turns such heads slow while their query tiles stay
 * folded (a first V3 version took the unfolded exponents there: wrong dots, seen on the H200 in
 * dense_ragged_extreme_scales_and_nan). The default kernels take the same shapes. */
TEST(mxfp4_folded_heads_outside_the_v3_window) {
  int64_t bad = 0;
  static const int H[] = {32, 64};
  for (int i = 0; i < 2; i++) {
    shape_cfg a = {IXL_MXFP4, H[i], 9, 300, 160, 170, 119, 135, 0}; /* every head folded, qc high */
    k1_case(&a, &bad);
    shape_cfg b = {IXL_MXFP4, H[i], 6, 260, 140, 165, 95, 160, 0}; /* mixed heads and keys */
    k1_case(&b, &bad);
    shape_cfg c = {IXL_MXFP4, H[i], 5, 200, 84, 96, 100, 150, 0}; /* qc low, folded */
    k1_case(&c, &bad);
  }
  CHECK(bad == 0);
}

/* Rows whose every weight is tiny (2^-100 .. 2^-81) on low query exponents (qc about 84-96):
 * w * 2^(qc - 127) is then below the normal range, so the fast path's weight check turns the
 * folded head slow, and its slow dot must still use the folded query tile's exponents (the
 * row's logit is made of those heads alone, so a wrong exponent shows). */
TEST(mxfp4_tiny_weights_on_folded_heads) {
  int64_t bad = 0;
  static const int H[] = {32, 64};
  g_tiny_w = 1;
  for (int i = 0; i < 2; i++) {
    shape_cfg a = {IXL_MXFP4, H[i], 6, 240, 84, 96, 119, 135, 0};
    k1_case(&a, &bad);
    shape_cfg b = {IXL_MXFP4, H[i], 4, 180, 100, 110, 110, 140, 0};
    k1_case(&b, &bad);
  }
  g_tiny_w = 0;
  CHECK(bad == 0);
}

/* ---------------------------------------------------------------- float64 oracle */
/* The fp32 GPU logits against a float64 computation on the dequantized inputs (the CPU
 * reference is not involved): the same tolerance must hold. */
TEST(dense_fp32_matches_float64_oracle) {
  int64_t bad = 0;
  for (int f = 0; f < (g_small ? 1 : 3); f++) {
    const int fmt = k_formats[f], H = 32, vb = vb_of(fmt);
    if (!var_takes(fmt, H)) continue;
    const int64_t R = 5, N = g_small ? 100 : 300;
    query_in q;
    gen_query(&q, fmt, R, H, 119, 135, 0);
    ixl_tensor *kc, *ksc;
    gen_keys(fmt, N, 119, 135, 0, &kc, &ksc);
    ixl_tensor *ks = host(IXL_I32, 1, R, 0, 0), *ke = host(IXL_I32, 1, R, 0, 0);
    for (int64_t r = 0; r < R; r++)
      ((int32_t *)ks->data)[r] = 0, ((int32_t *)ke->data)[r] = (int32_t)N;
    ixl_tensor *dq[] = {to_dev(q.qc), to_dev(q.qs), to_dev(kc),  to_dev(ksc),
                        to_dev(ks),   to_dev(ke),   to_dev(q.wf)};
    ixl_tensor *dout = gnew(IXL_F32, 2, R, N, 0, IXL_DEVICE);
    k1_args a = {{dq[0], dq[1], dq[2], dq[3], NULL, 0, fmt},
                 dq[6],
                 dq[4],
                 dq[5],
                 IXL_LAYOUT_FULL,
                 1,
                 IXL_REDUCE_FP32};
    int64_t nondet = 0;
    ixl_tensor *gpu = run_gpu_twice(k1_op, &a, dout, &nondet, NULL);
    const uint8_t *qc = q.qc->data, *kcd = kc->data;
    double worst = 0;
    for (int64_t r = 0; r < R; r++)
      for (int64_t n = 0; n < N; n++) {
        double exact = 0, bound = 0;
        for (int h = 0; h < H; h++) {
          double dot = 0, adot = 0;
          const uint8_t *qv = qc + (r * H + h) * vb, *kv = kcd + n * vb;
          for (int d = 0; d < 128; d++) {
            double x, y;
            if (fmt == IXL_MXFP4) {
              x = ixl_e2m1_to_f32((uint8_t)(qv[d / 2] >> (4 * (d & 1)) & 15));
              y = ixl_e2m1_to_f32((uint8_t)(kv[d / 2] >> (4 * (d & 1)) & 15));
            } else {
              x = ixl_e4m3_to_f32(qv[d]);
              y = ixl_e4m3_to_f32(kv[d]);
            }
            double s = 1.0;
            if (fmt != IXL_FP8) {
              const uint32_t qw = (uint32_t)((int32_t *)q.qs->data)[r * H + h],
                             kw = (uint32_t)((int32_t *)ksc->data)[n];
              s = ldexp(1.0, (int)(qw >> (8 * (d / 32)) & 255) - 127 +
                                 (int)(kw >> (8 * (d / 32)) & 255) - 127);
            } else {
              s = ((float *)ksc->data)[n];
            }
            dot += x * y * s;
            adot += fabs(x * y * s);
          }
          const double w = ((float *)q.wf->data)[r * H + h];
          exact += w * (dot > 0 ? dot : 0);
          bound += fabs(w) * adot;
        }
        const double got = ((float *)gpu->data)[r * N + n];
        /* the reference's own fp32 rounding (dots and head sum) is within 2^-22 H of bound */
        const double eps = (fmt == IXL_MXFP4 ? 4.0 * H * 0x1p-24
                            : fmt == IXL_FP8 ? 0x1p-11 /* eps_for's fp8 error model */
                                             : 0x1p-8) + 4.0 * H * 0x1p-24;
        const double err = fabs(got - exact) / (bound > 0 ? bound : 1);
        worst = err > worst ? err : worst;
        if (!(err <= eps)) {
          if (bad++ < 4)
            fprintf(stderr,
                    "  oracle %s row %lld pos %lld: gpu %.9g exact %.9g bound %.3g (seed %llu)\n",
                    fmt_name(fmt), (long long)r, (long long)n, got, exact, bound,
                    (unsigned long long)g_seed);
        }
      }
    printf("# float64 oracle %s: worst |gpu - exact| / T = %.3g\n", fmt_name(fmt), worst);
    bad += nondet;
    tfree(dq, 7);
    ixl_tensor *ts[] = {kc, ksc, ks, ke, dout, gpu};
    tfree(ts, 6);
    free_query(&q);
  }
  CHECK_MSG(bad == 0, "%lld elements off the float64 oracle (seed %llu)", (long long)bad,
            (unsigned long long)g_seed);
}

/* ---------------------------------------------------------------- large shapes */
/* Copies rows `rows` of a device output [R, C] to a host tensor [n, C]. */
static ixl_tensor *rows_to_host(const ixl_tensor *d, const int64_t *rows, int n) {
  const int64_t C = d->shape[1];
  ixl_tensor *h = host((ixl_dtype)d->dtype, 2, n, C, 0);
  for (int i = 0; i < n; i++) {
    ixl_tensor v, hv;
    int64_t shape[2] = {1, C};
    CHECK_OK(g, ixl_tensor_view(g, d, 2, shape, NULL, rows[i] * C, &v));
    CHECK_OK(g, ixl_tensor_view(g, h, 2, shape, NULL, (int64_t)i * C, &hv));
    CHECK_OK(g, ixl_tensor_copy(g, &hv, &v));
  }
  return h;
}
/* Rows `rows` of a host tensor [R, ...] as a new host tensor [n, ...]. */
static ixl_tensor *pick_rows(const ixl_tensor *t, const int64_t *rows, int n) {
  if (!t) return NULL;
  ixl_tensor *h = host((ixl_dtype)t->dtype, t->ndim, n, t->shape[1], t->shape[2]);
  const int64_t rb =
      ixl_tensor_numel(t) / t->shape[0] * (int64_t)ixl_dtype_size((ixl_dtype)t->dtype);
  for (int i = 0; i < n; i++)
    memcpy((uint8_t *)h->data + i * rb, (const uint8_t *)t->data + rows[i] * rb, (size_t)rb);
  return h;
}

/* K1 at 256 rows x 1M positions (V4.1-Flash: mxfp4, H = 32), both reductions; the CPU checks
 * sampled rows. */
TEST(large_dense_ragged_1m_positions) {
  if (g_small || g_fake) return;
  const int fmt = IXL_MXFP4, H = 32;
  if (!var_takes(fmt, H)) return;
  const int64_t R = 256, N = 1 << 20;
  query_in q;
  gen_query(&q, fmt, R, H, 121, 133, 0);
  ixl_tensor *kc, *ksc;
  gen_keys(fmt, N, 121, 133, 0, &kc, &ksc);
  ixl_tensor *ks = host(IXL_I32, 1, R, 0, 0), *ke = host(IXL_I32, 1, R, 0, 0);
  for (int64_t r = 0; r < R; r++) { /* causal rows of one request, some starting later */
    ((int32_t *)ke->data)[r] = (int32_t)(N - R + r + 1);
    ((int32_t *)ks->data)[r] = r % 4 == 3 ? (int32_t)rand_range(0, N / 2) : 0;
  }
  ixl_tensor *dq[] = {to_dev(q.qc), to_dev(q.qs), to_dev(kc),   to_dev(ksc),
                      to_dev(ks),   to_dev(ke),   to_dev(q.wf), to_dev(q.wb)};
  const int64_t rows[2] = {rand_range(0, R - 1), R - 1};
  ixl_tensor *aqc = abs_codes(fmt, q.qc), *akc = abs_codes(fmt, kc), *awf = abs_f32(q.wf);
  int64_t bad = 0;
  for (int red = 0; red < 2; red++) {
    const int bf16 = red;
    const ixl_dtype odt = bf16 ? IXL_BF16 : IXL_F32;
    ixl_tensor *dout = gnew(odt, 2, R, N, 0, IXL_DEVICE);
    CHECK_OK(g, ixl_tensor_fill_bytes(g, dout, 0xFF));
    ixl_qk dqk = {dq[0], dq[1], dq[2], dq[3], NULL, 0, fmt};
    CHECK_OK(g, ixl_timer_record(g, 0));
    CHECK_OK(g, ixl_dense_logits(g, &dqk, bf16 ? dq[7] : dq[6], dq[4], dq[5], IXL_LAYOUT_FULL, 1,
                                 (ixl_reduction)red, dout));
    CHECK_OK(g, ixl_timer_record(g, 1));
    double us = 0;
    CHECK_OK(g, ixl_timer_elapsed_us(g, 0, 1, &us));
    double valid = 0;
    for (int64_t r = 0; r < R; r++) valid += ((int32_t *)ke->data)[r] - ((int32_t *)ks->data)[r];
    printf("# K1 mxfp4 H=32 %s 256 x 1M: %.1f us (first run), %.0f TFLOP/s\n",
           bf16 ? "bf16" : "fp32", us, 2.0 * valid * H * 128 / us * 1e-6);
    ixl_tensor *gh = rows_to_host(dout, rows, 2);
    ixl_tensor *sq = pick_rows(q.qc, rows, 2), *ss = pick_rows(q.qs, rows, 2),
               *sw = pick_rows(bf16 ? q.wb : q.wf, rows, 2);
    ixl_tensor *sks = pick_rows(ks, rows, 2), *ske = pick_rows(ke, rows, 2);
    ixl_tensor *cpu = host(odt, 2, 2, N, 0), *tol = NULL;
    ixl_qk hq = {sq, ss, kc, ksc, NULL, 0, fmt};
    CHECK_OK(g,
             ixl_dense_logits(g, &hq, sw, sks, ske, IXL_LAYOUT_FULL, 1, (ixl_reduction)red, cpu));
    if (!bf16) {
      ixl_tensor *saq = pick_rows(aqc, rows, 2), *saw = pick_rows(awf, rows, 2);
      ixl_qk aq = {saq, ss, akc, ksc, NULL, 0, fmt};
      tol = host(IXL_F32, 2, 2, N, 0);
      CHECK_OK(g,
               ixl_dense_logits(g, &aq, saw, sks, ske, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, tol));
      ixl_tensor *ts[] = {saq, saw};
      tfree(ts, 2);
    }
    cmp_t m = {"large dense_logits",  fmt, H, bf16, N, gh, cpu, tol,
               eps_for(fmt, bf16, H), 0,   0, 0,    0, 0};
    for (int i = 0; i < 2; i++)
      for (int64_t c = 0; c < N; c++)
        cmp_one(&m, rows[i], c, i * N + c, i * N + c,
                c >= ((int32_t *)sks->data)[i] && c < ((int32_t *)ske->data)[i]);
    CHECK_MSG(m.bad == 0, "large K1 %s: %lld of %lld differ", bf16 ? "bf16" : "fp32",
              (long long)m.bad, (long long)m.checked);
    bad += m.bad;
    ixl_tensor *ts[] = {dout, gh, sq, ss, sw, sks, ske, cpu, tol};
    tfree(ts, 9);
  }
  tfree(dq, 8);
  ixl_tensor *ts[] = {kc, ksc, ks, ke, aqc, akc, awf};
  tfree(ts, 7);
  free_query(&q);
  CHECK(bad == 0);
}

/* K2 at 256 rows x 128K positions, page 64 (V3.2: fp8, H = 64), and K5 paged over the same
 * pages (mxfp4 keys for K5: V4.1-Flash, H = 32, 2048 sparse blocks of 8). */
TEST(large_paged_128k_and_sparse) {
  if (g_small || g_fake) return;
  const int64_t R = 256, P = 64, max_pages = 2048, npos = P * max_pages; /* 131072 */
  int64_t bad = 0;
  for (int pass = 0; pass < 2; pass++) {
    const int fmt = pass == 0 ? IXL_FP8 : IXL_MXFP4, H = pass == 0 ? 64 : 32;
    if (!var_takes(fmt, H)) continue;
    query_in q;
    gen_query(&q, fmt, R, H, 121, 133, 0);
    ixl_tensor *kc, *ksc;
    gen_keys(fmt, npos, 121, 133, 0, &kc, &ksc);
    paged_in pi;
    gen_paged(fmt, R, (int)P, max_pages, kc, ksc, &pi);
    int32_t *lens = pi.lens->data;
    for (int64_t r = 0; r < R; r++)
      lens[r] = (int32_t)(r % 3 == 0 ? npos : rand_range(npos / 2, npos));
    ixl_tensor *dq[] = {to_dev(q.qc),  to_dev(q.qs), to_dev(pi.pages), to_dev(pi.lens),
                        to_dev(pi.bt), to_dev(q.wf), to_dev(q.wb)};
    const int64_t rows[3] = {0, rand_range(1, R - 2), R - 1};
    ixl_tensor *sq = pick_rows(q.qc, rows, 3), *ss = pick_rows(q.qs, rows, 3),
               *sl = pick_rows(pi.lens, rows, 3), *sbt = pick_rows(pi.bt, rows, 3);
    ixl_qk hq = {sq, ss, NULL, NULL, pi.pages, (int)P, fmt};
    ixl_qk dqk = {dq[0], dq[1], NULL, NULL, dq[2], (int)P, fmt};
    if (pass == 0) { /* K2, fp32 */
      ixl_tensor *dout = gnew(IXL_F32, 2, R, npos, 0, IXL_DEVICE);
      CHECK_OK(g, ixl_tensor_fill_bytes(g, dout, 0xFF));
      CHECK_OK(g, ixl_dense_logits_paged(g, &dqk, dq[5], dq[3], dq[4], IXL_REDUCE_FP32, dout));
      ixl_tensor *gh = rows_to_host(dout, rows, 3);
      ixl_tensor *sw = pick_rows(q.wf, rows, 3), *cpu = host(IXL_F32, 2, 3, npos, 0);
      CHECK_OK(g, ixl_dense_logits_paged(g, &hq, sw, sl, sbt, IXL_REDUCE_FP32, cpu));
      /* T: |q|, |k| pages, |w| */
      ixl_tensor *ap = like_host(pi.pages);
      memcpy(ap->data, pi.pages->data, (size_t)ixl_tensor_numel(pi.pages));
      const int64_t stride = pi.pages->shape[1];
      for (int64_t p = 0; p < npos; p++) {
        uint8_t *v = (uint8_t *)ap->data + (p / P) * stride + (p % P) * 128;
        for (int d = 0; d < 128; d++) v[d] &= 0x7F;
      }
      ixl_tensor *aq = abs_codes(fmt, sq), *aw = abs_f32(sw), *tol = host(IXL_F32, 2, 3, npos, 0);
      ixl_qk aqk = {aq, NULL, NULL, NULL, ap, (int)P, fmt};
      CHECK_OK(g, ixl_dense_logits_paged(g, &aqk, aw, sl, sbt, IXL_REDUCE_FP32, tol));
      cmp_t m = {"large dense_logits_paged", fmt, H, 0, npos, gh, cpu, tol,
                 eps_for(fmt, 0, H),         0,   0, 0, 0,    0};
      for (int i = 0; i < 3; i++)
        for (int64_t c = 0; c < npos; c++)
          cmp_one(&m, rows[i], c, i * npos + c, i * npos + c, c < ((int32_t *)sl->data)[i]);
      CHECK_MSG(m.bad == 0, "large K2: %lld of %lld differ", (long long)m.bad,
                (long long)m.checked);
      printf("# large K2 fp8 H=64 256 x 128K: diff measure %.3g over sampled rows\n", cmp_diff(&m));
      bad += m.bad;
      ixl_tensor *ts[] = {dout, gh, sw, cpu, ap, aq, aw, tol};
      tfree(ts, 8);
    } else { /* K5 paged, mxfp4, bitwise */
      const int sbk = 8;
      const int64_t nsb = 2048, C = nsb * sbk;
      ixl_tensor *ids = host(IXL_I32, 2, R, nsb, 0);
      for (int64_t r = 0; r < R; r++)
        gen_ids((int32_t *)ids->data + r * nsb, nsb, 0, lens[r], sbk, 0);
      ixl_tensor *did = to_dev(ids), *dout = gnew(IXL_BF16, 2, R, C, 0, IXL_DEVICE);
      CHECK_OK(g, ixl_tensor_fill_bytes(g, dout, 0xFF));
      CHECK_OK(g, ixl_sparse_logits(g, &dqk, dq[6], NULL, dq[3], dq[4], did, sbk, IXL_KS_UNALIGNED,
                                    dout));
      ixl_tensor *gh = rows_to_host(dout, rows, 3);
      ixl_tensor *sw = pick_rows(q.wb, rows, 3), *sid = pick_rows(ids, rows, 3),
                 *cpu = host(IXL_BF16, 2, 3, C, 0);
      CHECK_OK(g, ixl_sparse_logits(g, &hq, sw, NULL, sl, sbt, sid, sbk, IXL_KS_UNALIGNED, cpu));
      cmp_t m = {"large sparse_logits", fmt, H, 1, C, gh, cpu, NULL, 0, 0, 0, 0, 0, 0};
      for (int i = 0; i < 3; i++)
        for (int64_t c = 0; c < C; c++) {
          const double b = out_at(cpu, i * C + c);
          cmp_one(&m, rows[i], c, i * C + c, i * C + c, !(isinf(b) && b < 0));
        }
      CHECK_MSG(m.bad == 0, "large K5: %lld of %lld differ", (long long)m.bad,
                (long long)m.checked);
      bad += m.bad;
      ixl_tensor *ts[] = {ids, did, dout, gh, sw, sid, cpu};
      tfree(ts, 7);
    }
    tfree(dq, 7);
    ixl_tensor *ts[] = {sq, ss, sl, sbt, kc, ksc};
    tfree(ts, 6);
    free_paged(&pi);
    free_query(&q);
  }
  CHECK(bad == 0);
}

/* ---------------------------------------------------------------- CUDA-side rules */
/* The one rule the CUDA twins add: key data must be 16-byte aligned (16-byte copies). */
TEST(cuda_rejects_misaligned_keys) {
  if (g_fake) return;
  const int fmt = IXL_MXFP8, H = 4;
  if (!var_takes(fmt, H)) return;
  const int64_t R = 2, N = 16;
  ixl_tensor *qc = gnew(IXL_U8, 3, R, H, 128, IXL_DEVICE),
             *qs = gnew(IXL_I32, 2, R, H, 0, IXL_DEVICE);
  ixl_tensor *kbase = gnew(IXL_U8, 2, N + 1, 128, 0, IXL_DEVICE),
             *ksc = gnew(IXL_I32, 1, N, 0, 0, IXL_DEVICE);
  ixl_tensor *w = gnew(IXL_F32, 2, R, H, 0, IXL_DEVICE),
             *ks = gnew(IXL_I32, 1, R, 0, 0, IXL_DEVICE);
  ixl_tensor *ke = gnew(IXL_I32, 1, R, 0, 0, IXL_DEVICE),
             *out = gnew(IXL_F32, 2, R, N, 0, IXL_DEVICE);
  ixl_tensor kv;
  int64_t shape[2] = {N, 128};
  CHECK_OK(g, ixl_tensor_view(g, kbase, 2, shape, NULL, 8, &kv)); /* starts 8 bytes in */
  ixl_qk qk = {qc, qs, &kv, ksc, NULL, 0, fmt};
  CHECK_ERR(g, ixl_dense_logits(g, &qk, w, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "k_codes data at");
  CHECK(strstr(ixl_last_error(g), "16-byte aligned") != NULL);
  ixl_tensor *ts[] = {qc, qs, kbase, ksc, w, ks, ke, out};
  tfree(ts, 8);
}

/* Capturable: the ops issue nothing that breaks stream capture, and a replay of the graph
 * gives the same bits as the direct launch. */
TEST(ops_capture_in_a_cuda_graph) {
  if (g_fake) return;
  const int fmt = IXL_MXFP4, H = 32;
  if (!var_takes(fmt, H)) return;
  const int64_t R = 6, N = 500;
  query_in q;
  gen_query(&q, fmt, R, H, 120, 134, 0);
  ixl_tensor *kc, *ksc;
  gen_keys(fmt, N, 120, 134, 0, &kc, &ksc);
  ixl_tensor *ks = host(IXL_I32, 1, R, 0, 0), *ke = host(IXL_I32, 1, R, 0, 0);
  gen_ranges(ks->data, ke->data, R, N);
  ixl_tensor *dq[] = {to_dev(q.qc), to_dev(q.qs), to_dev(kc),  to_dev(ksc),
                      to_dev(ks),   to_dev(ke),   to_dev(q.wb)};
  ixl_tensor *o1 = gnew(IXL_BF16, 2, R, N, 0, IXL_DEVICE),
             *o2 = gnew(IXL_BF16, 2, R, N, 0, IXL_DEVICE);
  ixl_qk qk = {dq[0], dq[1], dq[2], dq[3], NULL, 0, fmt};
  CHECK_OK(g,
           ixl_dense_logits(g, &qk, dq[6], dq[4], dq[5], IXL_LAYOUT_FULL, 1, IXL_REDUCE_BF16, o1));
  CHECK_OK(g, ixl_tensor_fill_bytes(g, o2, 0xFF));
  CHECK_OK(g, ixl_graph_begin(g));
  ixl_status st =
      ixl_dense_logits(g, &qk, dq[6], dq[4], dq[5], IXL_LAYOUT_FULL, 1, IXL_REDUCE_BF16, o2);
  CHECK_OK(g, st);
  CHECK_OK(g, ixl_graph_end(g));
  CHECK_OK(g, ixl_graph_launch(g));
  CHECK_OK(g, ixl_ctx_sync(g));
  ixl_tensor *h1 = like_host(o1), *h2 = like_host(o2);
  to_host(h1, o1);
  to_host(h2, o2);
  CHECK(memcmp(h1->data, h2->data, (size_t)(R * N * 2)) == 0);
  tfree(dq, 7);
  ixl_tensor *ts[] = {kc, ksc, ks, ke, o1, o2, h1, h2};
  tfree(ts, 8);
  free_query(&q);
}

/* ---------------------------------------------------------------- main */
/* ---------------------------------------------------------------- host: the NEXT SS tile */
/* logits v2's NEXT kernels (IXL_LOGITS_V2_MX_NEXT) widen a raw key tile once into shared
 * memory as wgmma's SS A operand. On the host, every run (no GPU): the kernel's widening (512
 * units of 8 B, ixl_v2mx_ss_off) writes each byte of the 8 KB tile once, each half-warp's
 * 8-B stores and raw loads hit distinct banks, the bytes in the order wgmma's 128B-swizzled
 * K-major descriptor reads them (ixl_sm90_tile_off) are the keys' e4m3 values in
 * ixl_sm90_widen_perm's order, and the per-group dots of that tile with the kernel's query
 * tile (ixl_v2mx_q_word, with folds t_g = 6 + d_g) equal the e2m1 dots times 2^d_g (float64). */
static double e2m1_val(uint32_t nib) {
  static const double m[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (nib & 8u) ? -m[nib & 7u] : m[nib & 7u];
}
static double e4m3_val(uint32_t b) {
  const int e = (int)((b >> 3) & 15u), f = (int)(b & 7u);
  const double v = e ? ldexp(1.0 + f / 8.0, e - 7) : ldexp(f / 8.0, -6);
  return (b & 0x80u) ? -v : v;
}
static int next_ss_tile_host(void) {
  int bad = 0;
  for (int rep = 0; rep < 4; rep++) {
    uint8_t raw[64 * 64], et[8192], qt[32 * 128], seen[8192];
    rand_bytes(raw, sizeof raw);
    memset(et, 0xAA, sizeof et);
    memset(seen, 0, sizeof seen);
    for (int u = 0; u < 512; u++) { /* the kernel's widen(): unit u = (slot, group, half) */
      const int i = u >> 3, g = (u >> 1) & 3, hf = u & 1;
      uint32_t w[2], ev[2], od[2];
      memcpy(w, raw + i * 64 + 16 * g + 8 * hf, 8);
      for (int k = 0; k < 2; k++) ixl_sm90_e2m1x8_widen(w[k], &ev[k], &od[k]);
      const uint32_t oe = ixl_v2mx_ss_off(i, g, 2 * hf, 0), oo = ixl_v2mx_ss_off(i, g, 2 * hf, 1);
      bad += oe % 8 != 0 || oo % 8 != 0 || oe + 8 > 8192 || oo + 8 > 8192;
      if (bad) return 0;
      memcpy(et + oe, ev, 8);
      memcpy(et + oo, od, 8);
      for (int b = 0; b < 8; b++) seen[oe + b]++, seen[oo + b]++;
    }
    for (int b = 0; b < 8192; b++) bad += seen[b] != 1;
    /* banks: a half-warp (units 16 h .. 16 h + 15) stores 16 distinct 8-B bank pairs */
    for (int h = 0; h < 32; h++)
      for (int odd = 0; odd < 2; odd++) {
        int used[16] = {0};
        for (int u = 16 * h; u < 16 * h + 16; u++) {
          const uint32_t o = ixl_v2mx_ss_off(u >> 3, (u >> 1) & 3, 2 * (u & 1), odd);
          used[(o % 128) / 8]++;
          bad += (uint32_t)((u >> 3) * 64 + 16 * ((u >> 1) & 3) + 8 * (u & 1)) / 128 != (uint32_t)h;
        }
        for (int k = 0; k < 16; k++) bad += used[k] != 1;
      }
    /* the SS read order: row i, k byte kb = element perm(kb % 32) of group kb / 32, * 2^-6 */
    for (int i = 0; i < 64; i++)
      for (int kb = 0; kb < 128; kb++) {
        const int g = kb >> 5, el = ixl_sm90_widen_perm(kb & 31);
        const uint32_t nib = (raw[i * 64 + 16 * g + (el >> 1)] >> (4 * (el & 1))) & 15u;
        const uint32_t got = et[ixl_sm90_tile_off(IXL_SM90_SWIZZLE_128B, 64, i, kb)];
        bad += e4m3_val(got) != ldexp(e2m1_val(nib), -6);
      }
    /* the query tile as the kernel writes it (32 columns, random folds t_g in [-8, 6]) and
     * the per-group dots an SS wgmma of group g computes, in float64: S_g 2^(t_g - 6) */
    uint8_t qraw[32 * 64];
    int tg[32][4];
    rand_bytes(qraw, sizeof qraw);
    for (int n = 0; n < 32; n++)
      for (int g = 0; g < 4; g++) tg[n][g] = (int)rand_range(-8, 6);
    for (int n = 0; n < 32; n++)
      for (int g = 0; g < 4; g++)
        for (int p4 = 0; p4 < 8; p4++) {
          uint32_t x;
          memcpy(&x, qraw + n * 64 + 16 * g + 4 * (p4 & 3), 4);
          const uint32_t o = ixl_v2mx_q_word(x, p4, tg[n][g]);
          memcpy(qt + ixl_sm90_swizzle((uint32_t)(n * 128 + 32 * g + 4 * p4),
                                       IXL_SM90_SWIZZLE_128B),
                 &o, 4);
        }
    for (int i = 0; i < 64; i++)
      for (int n = 0; n < 32; n++)
        for (int g = 0; g < 4; g++) {
          double mma = 0, ref = 0;
          for (int k = 0; k < 32; k++) {
            const int kb = 32 * g + k;
            mma += e4m3_val(et[ixl_sm90_tile_off(IXL_SM90_SWIZZLE_128B, 64, i, kb)]) *
                   e4m3_val(qt[ixl_sm90_tile_off(IXL_SM90_SWIZZLE_128B, 32, n, kb)]);
            const uint32_t kn = (raw[i * 64 + 16 * g + (k >> 1)] >> (4 * (k & 1))) & 15u;
            const uint32_t qn = (qraw[n * 64 + 16 * g + (k >> 1)] >> (4 * (k & 1))) & 15u;
            ref += e2m1_val(kn) * e2m1_val(qn);
          }
          bad += mma != ldexp(ref, tg[n][g] - 6); /* B holds v 2^t, A v 2^-6 */
        }
  }
  if (bad) fprintf(stderr, "  next_ss_tile_host: %d mismatches\n", bad);
  return bad == 0;
}

typedef struct {
  const char *name;
  void (*fn)(void);
} test_entry;

/* ---------------------------------------------------------------- V3's combine, on the host */
/* logits v2's V3 kernels (IXL_LOGITS_V2_MX_V3 bit 4) emulated on the host for one quad: the
 * prologue's per-column fold / fast / slow-dot exponents (s_hq from the fold), the fast path's
 * deferred key factor (3 fma, the bf16 chain on values 1/k0 times the CPU's, the result times
 * k0) and the slow path, against the CPU's dot and SPEC 3 chain (engine.h) bit for bit, over
 * random exact group sums (the wgmma's, folded as the query tile is) with heads folded inside
 * and outside the combine window, unfolded and NaN-scaled ones, keys inside, at the edges of and
 * outside it, weights at and past 2^-25 / 2^25, zero and NaN; and the fp32 reduction against
 * the kernels before V3 in the same lane order wherever both take their fast paths. */
static float v3h_relu(float x) { return x < 0.0f ? 0.0f : x; }
static float v3h_p2(int e) { return ixl_bits_f32((uint32_t)e << 23); } /* 2^(e - 127) */
static uint32_t v3h_qword(void) {
  const int m = (int)rand_range(0, 9);
  uint32_t w = 0;
  int qc = m < 4 ? (int)rand_range(102, 152) : m < 6 ? (int)rand_range(77, 101)
                                               : (int)rand_range(153, 177);
  if (m == 4) qc = rand_range(0, 1) ? 102 : 152;
  for (int g = 0; g < 4; g++) {
    int b = g == (int)(rand_u64() & 3) ? qc : qc - (int)rand_range(0, 14);
    if (m == 7) b = (int)rand_range(20, 200); /* unfolded (spread) */
    if (m == 8 && rand_range(0, 3) == 0) b = 0xFF;
    w |= (uint32_t)(b < 1 ? 1 : b > 0xFF ? 0xFF : b) << (8 * g);
  }
  return w;
}
static uint32_t v3h_kword(void) {
  const int m = (int)rand_range(0, 7);
  uint32_t w = 0;
  for (int g = 0; g < 4; g++) {
    int b = m < 4 ? (int)rand_range(102, 152) : m == 4 ? (rand_range(0, 1) ? 102 : 152)
                                           : (int)rand_range(60, 190);
    if (m == 5 && g == 1) b = rand_range(0, 1) ? 101 : 153;
    if (m == 6 && rand_range(0, 5) == 0) b = 0xFF;
    w |= (uint32_t)b << (8 * g);
  }
  return w;
}
static float v3h_weight(void) {
  const int m = (int)rand_range(0, 15);
  float w = (float)(rand_unit() * 2.0 - 1.0);
  if (m == 0) w = 0x1p-25f;
  if (m == 1) w = -0x1p-26f;
  if (m == 2) w = 0x1p25f;
  if (m == 3) w = 0x1.8p25f;
  if (m == 4) w = 0.0f;
  if (m == 5) w = 0x1p-80f;
  if (m == 6 && rand_range(0, 7) == 0) w = NAN;
  return ixl_cvt_bf16_to_f32(ixl_cvt_f32_to_bf16(w));
}
static float v3h_sum(void) { /* an exact group sum: a multiple of 1/4, |S| <= 1152 */
  const int m = (int)rand_range(0, 7);
  if (m == 0) return 0.0f;
  if (m == 1) return rand_range(0, 1) ? 1152.0f : -1152.0f;
  if (m == 2) return 0.25f * (float)rand_range(-8, 8);
  return 0.25f * (float)rand_range(-4608, 4608);
}
static int v3h_same(float a, float b) {
  return (a != a && b != b) || a == b; /* NaN == NaN; +0 == -0 */
}
static int v3_comb_host(void) {
  enum { NCOL = 64, HH = 32 };
  int bad = 0;
  for (int rep = 0; rep < 3000; rep++) {
    uint32_t qw[NCOL], kw[2], s_hq[NCOL];
    float w[NCOL], S[NCOL][2][4], acc[NCOL][2][4], s_wq[NCOL], s_hc[NCOL];
    int s_hf[NCOL], ofast[NCOL];
    const int allfast = rand_range(0, 2) == 0;
    for (int n = 0; n < NCOL; n++) {
      qw[n] = allfast ? 0x7F7F7F7Fu - (uint32_t)rand_range(0, 3) : v3h_qword();
      w[n] = allfast ? ixl_cvt_bf16_to_f32(ixl_cvt_f32_to_bf16((float)rand_unit() - 0.5f))
                     : v3h_weight();
      int qc, t[4];
      const int fold = ixl_v2mx_head_fold(qw[n], &qc, t);
      int fast = fold;
      const float wc = w[n] * v3h_p2(qc);
      const uint32_t we = (ixl_f32_bits(wc) >> 23) & 0xFFu;
      if (fast && w[n] == w[n] && w[n] != 0.0f && (we < 2 || we == 0xFF)) fast = 0;
      ofast[n] = fast; /* the kernels before V3 */
      const float aw = fabsf(w[n]);
      if (fast && aw != 0.0f && aw <= 3.4028235e38f && (aw < 0x1p-25f || aw > 0x1p25f)) fast = 0;
      if (fast && (qc < 127 - IXL_V2MX_COMB_E || qc > 127 + IXL_V2MX_COMB_E)) fast = 0;
      s_hf[n] = fast;
      s_wq[n] = fast ? wc : w[n];
      s_hq[n] = fold ? (uint32_t)qc * 0x01010101u : qw[n];
      s_hc[n] = fast ? v3h_p2(qc) : 1.0f;
      for (int k = 0; k < 2; k++)
        for (int g = 0; g < 4; g++) {
          S[n][k][g] = v3h_sum();
          if (g == 1 && rand_range(0, 5) == 0) S[n][k][1] = -S[n][k][0]; /* cancellation */
          acc[n][k][g] = S[n][k][g] * ixl_bits_f32((uint32_t)(t[g] - 6 + 127) << 23);
        }
    }
    for (int k = 0; k < 2; k++)
      kw[k] = allfast ? 0x7F7F7F7Fu + (uint32_t)rand_range(0, 2) : v3h_kword();
    int qslow = !ixl_v2mx_comb_word(kw[0]) || !ixl_v2mx_comb_word(kw[1]);
    int oqslow = !ixl_v2mx_fast_word(kw[0]) || !ixl_v2mx_fast_word(kw[1]);
    for (int n = 0; n < NCOL; n++) qslow |= !s_hf[n], oqslow |= !ofast[n];
    for (int r = 0; r < 2; r++)
      for (int k = 0; k < 2; k++) {
        float kf[4], cpu_s[4] = {0, 0, 0, 0}, gpu_s[4] = {0, 0, 0, 0}, part[4] = {0, 0, 0, 0};
        float opart[4] = {0, 0, 0, 0};
        for (int g = 0; g < 4; g++) kf[g] = v3h_p2((int)((kw[k] >> (8 * g)) & 0xFFu));
        const int e0 = (int)(kw[k] & 0xFFu), e1 = (int)((kw[k] >> 8) & 0xFFu);
        const int e2 = (int)((kw[k] >> 16) & 0xFFu), e3 = (int)(kw[k] >> 24);
        const float k0 = v3h_p2(e0), r1 = v3h_p2(e1 + 127 - e0), r2 = v3h_p2(e2 + 127 - e0);
        const float r3 = v3h_p2(e3 + 127 - e2);
        for (int h = 0; h < HH; h++) {
          const int n = HH * r + h;
          float p[4], a[4];
          for (int g = 0; g < 4; g++) {
            const int qb = (int)((qw[n] >> (8 * g)) & 0xFFu);
            const int kb = (int)((kw[k] >> (8 * g)) & 0xFFu);
            p[g] = qb == 0xFF || kb == 0xFF ? NAN : ixl_scale_pow2f(S[n][k][g], qb + kb - 254);
            a[g] = acc[n][k][g];
          }
          const float dot = (p[0] + p[1]) + (p[2] + p[3]);
          const float v = ixl_bf16_roundf(v3h_relu(dot));
          cpu_s[h % 4] = ixl_bf16_fma_ref(w[n], v, cpu_s[h % 4]);
          float x, wx;
          if (!qslow) {
            x = fmaf(fmaf(a[3], r3, a[2]), r2, fmaf(a[1], r1, a[0]));
            wx = s_wq[n];
          } else {
            if (!s_hf[n] || !ixl_v2mx_fast_word(kw[k])) {
              float pg[4];
              for (int g = 0; g < 4; g++) {
                const int qb = (int)((s_hq[n] >> (8 * g)) & 0xFFu);
                const int kb = (int)((kw[k] >> (8 * g)) & 0xFFu);
                pg[g] = qb == 0xFF || kb == 0xFF ? NAN : ixl_scale_pow2f(a[g], qb + kb - 254);
              }
              x = (pg[0] + pg[1]) + (pg[2] + pg[3]);
            } else {
              x = s_hc[n] * ((fmaf(a[1], kf[1], a[0] * kf[0])) + fmaf(a[3], kf[3], a[2] * kf[2]));
            }
            wx = w[n];
          }
          gpu_s[h % 4] = ixl_bf16_fma_ref(ixl_bf16_roundf(wx), ixl_bf16_roundf(v3h_relu(x)),
                                          gpu_s[h % 4]);
          /* fp32, lane t4 = (h % 8) / 2: its partial in the kernels' order (j, then c) */
          if (!qslow) part[(h % 8) / 2] = fmaf(s_wq[n] * 0.5f, x + fabsf(x), part[(h % 8) / 2]);
          if (!oqslow) {
            const float ox = (fmaf(a[1], kf[1], a[0] * kf[0])) + fmaf(a[3], kf[3], a[2] * kf[2]);
            opart[(h % 8) / 2] = fmaf(s_wq[n] * 0.5f, ox + fabsf(ox), opart[(h % 8) / 2]);
          }
        }
        const float cpu = ixl_bf16_add_ref(ixl_bf16_add_ref(cpu_s[0], cpu_s[2]),
                                           ixl_bf16_add_ref(cpu_s[1], cpu_s[3]));
        float gpu = ixl_bf16_add_ref(ixl_bf16_add_ref(gpu_s[0], gpu_s[2]),
                                     ixl_bf16_add_ref(gpu_s[1], gpu_s[3]));
        if (!qslow) gpu = ixl_bf16_roundf(gpu * k0);
        if (!v3h_same(cpu, gpu)) {
          if (bad < 5)
            fprintf(stderr, "  v3_comb_host: rep %d row %d slot %d (%s): gpu %.9g cpu %.9g\n", rep,
                    r, k, qslow ? "slow" : "fast", (double)gpu, (double)cpu);
          bad++;
        }
        if (!qslow && !oqslow) { /* fp32: the same order, one side scaled by 1/k0 */
          const float nf = ((part[0] + part[1]) + (part[2] + part[3])) * k0;
          const float of = (opart[0] + opart[1]) + (opart[2] + opart[3]);
          if (!v3h_same(nf, of)) {
            if (bad < 5)
              fprintf(stderr, "  v3_comb_host: rep %d fp32 row %d slot %d: %.9g vs %.9g\n", rep, r,
                      k, (double)nf, (double)of);
            bad++;
          }
        }
      }
  }
  if (bad) fprintf(stderr, "  v3_comb_host: %d mismatches\n", bad);
  return bad == 0;
}

int main(void) {
  static const test_entry tests[] = {
      {"dense_ragged_matches_cpu_every_format_and_h", dense_ragged_matches_cpu_every_format_and_h},
      {"dense_ragged_extreme_scales_and_nan", dense_ragged_extreme_scales_and_nan},
      {"dense_paged_matches_cpu_every_format_and_h", dense_paged_matches_cpu_every_format_and_h},
      {"dense_paged_fp8_page_sizes_and_long_rows", dense_paged_fp8_page_sizes_and_long_rows},
      {"sparse_ragged_matches_cpu_and_dense", sparse_ragged_matches_cpu_and_dense},
      {"sparse_paged_matches_cpu_and_dense", sparse_paged_matches_cpu_and_dense},
      {"sparse_garbage_ids_stay_inside_and_match", sparse_garbage_ids_stay_inside_and_match},
      {"mxfp4_page_sizes_blocks_and_h64_extremes", mxfp4_page_sizes_blocks_and_h64_extremes},
      {"dense_fp32_matches_float64_oracle", dense_fp32_matches_float64_oracle},
      {"large_dense_ragged_1m_positions", large_dense_ragged_1m_positions},
      {"large_paged_128k_and_sparse", large_paged_128k_and_sparse},
      {"cuda_rejects_misaligned_keys", cuda_rejects_misaligned_keys},
      {"ops_capture_in_a_cuda_graph", ops_capture_in_a_cuda_graph},
      {"mxfp4_h32_ragged_matches_next_shapes", mxfp4_h32_ragged_matches_next_shapes},
      {"mxfp4_folded_heads_outside_the_v3_window", mxfp4_folded_heads_outside_the_v3_window},
      {"mxfp4_tiny_weights_on_folded_heads", mxfp4_tiny_weights_on_folded_heads},
  };
  const int n = (int)(sizeof tests / sizeof tests[0]);
  char why[256];
  rand_seed(RAND_SPLITMIX64, 12345);
  if (next_ss_tile_host()) {
    printf("ok - next_ss_tile_layout_host\n");
    tests_passed_++;
  } else {
    printf("not ok - next_ss_tile_layout_host\n");
    tests_failed_++;
  }
  if (v3_comb_host()) {
    printf("ok - v3_deferred_key_factor_host\n");
    tests_passed_++;
  } else {
    printf("not ok - v3_deferred_key_factor_host\n");
    tests_failed_++;
  }
  g_fake = getenv("IXL_TEST_HOST_AS_DEVICE") && getenv("IXL_TEST_HOST_AS_DEVICE")[0] == '1';
  if (!g_fake && !ixl_cuda_available(why, sizeof why)) {
    for (int i = 0; i < n; i++) {
      printf("ok - %s # skipped: no GPU (%s)\n", tests[i].name, why);
      tests_passed_++;
    }
    DONE();
  }
  const char *env = getenv("IXL_TEST_SEED");
  g_seed = env && *env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
  g_small = getenv("IXL_TEST_SMALL") && getenv("IXL_TEST_SMALL")[0] == '1';
  printf("# seed %llu%s (IXL_TEST_SEED reproduces a run)\n", (unsigned long long)g_seed,
         g_small ? ", small shapes" : "");
  if (ixl_ctx_new(g_fake ? IXL_BACKEND_CPU : IXL_BACKEND_CUDA, 0, g_seed, &g) != IXL_OK) {
    printf("not ok - cuda context: %s\n", ixl_last_error(g));
    ixl_ctx_free(g);
    return 1;
  }
  /* Every logits variant of the device's backend that the device runs (the test build adds
   * v1_alt), each pinned in turn: the same parity rules and poison runs for all. Pins are per
   * backend, so the CPU references on host tensors keep running the CPU default. */
  const char *want = g_fake ? "cpu" : "cuda";
  int sm = 0;
#ifdef IXL_WITH_CUDA
  if (!g_fake) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    sm = major * 10 + minor;
  }
#endif
  for (int vi = 0; vi < ixl_variant_count("logits"); vi++) {
    const char *vname = ixl_variant_name("logits", vi);
    if (strcmp(ixl_variant_backend("logits", vi), want) != 0) continue;
    const char *only = getenv("IXL_TEST_VARIANT");
    if (only && *only && strcmp(only, vname) != 0) continue;
    if (!g_fake && ixl_variant_min_sm("logits", vi) > sm) {
      printf("# variant %s needs sm_%d, the device is sm_%d: not run\n", vname,
             ixl_variant_min_sm("logits", vi), sm);
      continue;
    }
    if (ixl_ctx_set_variant(g, "logits", vname) != IXL_OK) {
      printf("not ok - pin %s: %s\n", vname, ixl_last_error(g));
      tests_failed_++;
      continue;
    }
    printf("# logits variant %s\n", vname);
    {
      int nt = 0;
      const ixl_variant *tab = ixl_variant_table(&nt);
      g_var = NULL;
      for (int t = 0; t < nt; t++)
        if (tab[t].family == IXL_FAMILY_LOGITS && strcmp(tab[t].name, vname) == 0) g_var = &tab[t];
    }
    for (int i = 0; i < n; i++) {
      if (!test_wanted(tests[i].name)) continue;
      /* each test its own stream: reproducible alone */
      rand_seed(RAND_SPLITMIX64, g_seed * 1000003ull + (uint64_t)i);
      check_failed_ = 0;
      const double t0 = (double)clock() / CLOCKS_PER_SEC;
      tests[i].fn();
      if (check_failed_) {
        tests_failed_++;
        printf("not ok - %s [%s]\n", tests[i].name, vname);
      } else {
        tests_passed_++;
        printf("ok - %s [%s] (%.1f s cpu)\n", tests[i].name, vname,
               (double)clock() / CLOCKS_PER_SEC - t0);
      }
      fflush(stdout);
    }
  }
  ixl_ctx_set_variant(g, "logits", NULL);
  ixl_ctx_free(g);
  DONE();
}
