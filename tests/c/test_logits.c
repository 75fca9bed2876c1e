/* test_logits.c - K1, K2 and K5 on the CPU: the bf16 single-rounding arithmetic against an
 * exact integer oracle, each kernel against a float64 computation on dequantized inputs over
 * random shapes, the fast path against the reference path bit for bit (every format, extreme
 * scales included), K2 == K1 and K5 == K1/K2 (bf16 reduction) at the same positions bit for
 * bit, empty rows, a row whose last sparse block runs past the end of K, NaN scales, and one
 * test per validation rule. Fresh seed per run (IXL_TEST_SEED repeats one). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "rand.h"
#include "logits/engine.h"
#include "logits/k1_window.h"

static uint64_t seed_;

static float *F(const ixl_tensor *t) { return (float *)t->data; }
static int32_t *I32(const ixl_tensor *t) { return (int32_t *)t->data; }
static uint16_t *B16(const ixl_tensor *t) { return (uint16_t *)t->data; }
static float out_at(const ixl_tensor *t, int64_t i) {
  return t->dtype == IXL_F32 ? F(t)[i] : ixl_bf16_to_f32(B16(t)[i]);
}
/* Equality of outputs: +0 == -0, NaN == NaN. */
static int same(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

/* ---------------------------------------------------------------- the exact bf16 oracle */
/* value = m * 2^e with an integer m (sign separate). */
static void split(float x, int *neg, uint64_t *m, int *e) {
  int k;
  double f = frexp(fabs((double)x), &k);
  *neg = signbit(x) != 0;
  *m = (uint64_t)ldexp(f, 24);
  *e = k - 24;
}
/* bf16(w*v + s) with one rounding, computed on integers. Returns 0 when the exponent gap is too
 * wide for 127 bits (the caller skips those). */
static int oracle_fma(float w, float v, float s, float *out) {
  int nw, nv, ns, ew, ev, es;
  uint64_t mw, mv, ms;
  split(w, &nw, &mw, &ew);
  split(v, &nv, &mv, &ev);
  split(s, &ns, &ms, &es);
  unsigned __int128 mp = (unsigned __int128)mw * mv;
  int ep = ew + ev, np = nw ^ nv;
  if (mp == 0 && ms == 0) {
    *out = 0.0f;
    return 1;
  }
  int emin = mp == 0 ? es : ms == 0 ? ep : (ep < es ? ep : es);
  int emax = mp == 0 ? es : ms == 0 ? ep : (ep > es ? ep : es);
  if (emax - emin > 70) return 0;
  __int128 S = 0;
  if (mp) S += (np ? -1 : 1) * (__int128)(mp << (ep - emin));
  if (ms) S += (ns ? -1 : 1) * (__int128)((unsigned __int128)ms << (es - emin));
  if (S == 0) {
    *out = 0.0f;
    return 1;
  }
  int neg = S < 0;
  unsigned __int128 U = neg ? (unsigned __int128)(-S) : (unsigned __int128)S;
  int L = 0;
  for (unsigned __int128 t = U; t; t >>= 1) L++;
  int top = emin + L - 1, qexp = top - 7;
  if (qexp < -133) qexp = -133;
  double val;
  if (qexp <= emin) {
    val = ldexp((double)U, emin);
  } else {
    int sh = qexp - emin;
    unsigned __int128 q = U >> sh, rem = U & (((unsigned __int128)1 << sh) - 1),
                      half = (unsigned __int128)1 << (sh - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    val = ldexp((double)q, qexp);
  }
  if (val >= 0x1p128) val = INFINITY;
  *out = (float)(neg ? -val : val);
  return 1;
}

static float rand_bf16(int emin, int emax) {
  int e = emin + (int)rand_below(emax - emin + 1);
  uint32_t man = (uint32_t)rand_below(128);
  float v = ldexpf(1.0f + man / 128.0f, e);
  if (e < -126) v = ldexpf((float)rand_below(128), -133); /* a subnormal */
  if (rand_below(2)) v = -v;
  return ixl_bf16_to_f32(ixl_f32_to_bf16(v));
}

TEST(bf16_fma_is_exact) {
  const int n = 200000;
  float *w = malloc(n * 4), *v = malloc(n * 4), *s = malloc(n * 4), *o = malloc(n * 4);
  int kinds = 5;
  for (int i = 0; i < n; i++) {
    int kind = i % kinds;
    if (kind == 0) { /* ordinary magnitudes */
      w[i] = rand_bf16(-6, 6), v[i] = rand_bf16(-6, 6), s[i] = rand_bf16(-12, 12);
    } else if (kind == 1) { /* a product far below s, and the reverse */
      w[i] = rand_bf16(-40, 0), v[i] = rand_bf16(-40, 0), s[i] = rand_bf16(-5, 5);
      if (rand_below(2)) s[i] = rand_bf16(-120, -60);
    } else if (kind == 2) { /* underflow: products and sums near and below 2^-126 */
      w[i] = rand_bf16(-70, -55), v[i] = rand_bf16(-75, -60), s[i] = rand_bf16(-140, -120);
    } else if (kind == 3) { /* overflow: near 2^128 */
      w[i] = rand_bf16(60, 64), v[i] = rand_bf16(60, 64), s[i] = rand_bf16(120, 127);
    } else { /* cancellation and zeros */
      w[i] = rand_bf16(-3, 3), v[i] = rand_bf16(-3, 3);
      s[i] = ixl_bf16_to_f32(ixl_f32_to_bf16(-w[i] * v[i]));
      if (rand_below(8) == 0) v[i] = 0.0f;
      if (rand_below(8) == 0) s[i] = -0.0f;
    }
  }
  /* midpoints with a tiny s on either side: 1.75 * 0.578125 = 1 + 3*2^-8 lies halfway between
   * two bf16 values */
  w[0] = 1.75f, v[0] = 0.578125f, s[0] = 0x1p-80f;
  w[1] = 1.75f, v[1] = 0.578125f, s[1] = -0x1p-80f;
  w[2] = -1.75f, v[2] = 0.578125f, s[2] = 0x1p-80f;
  ixl_bf16_fma_batch(w, v, s, o, n);
  int checked = 0, bad_ref = 0, bad_fast = 0;
  for (int i = 0; i < n; i++) {
    float want;
    if (!oracle_fma(w[i], v[i], s[i], &want)) continue;
    checked++;
    float ref = ixl_bf16_fma_ref(w[i], v[i], s[i]);
    if (!same(ref, want) && bad_ref++ < 5)
      fprintf(stderr, "  ref: %a * %a + %a = %a, expected %a (seed %llu)\n", w[i], v[i], s[i], ref,
              want, (unsigned long long)seed_);
    if (!same(o[i], want) && bad_fast++ < 5)
      fprintf(stderr, "  fast: %a * %a + %a = %a, expected %a (seed %llu)\n", w[i], v[i], s[i],
              o[i], want, (unsigned long long)seed_);
  }
  CHECK(bad_ref == 0 && bad_fast == 0);
  CHECK(checked > n * 9 / 10);
  CHECK(o[0] == 0x1.04p0f && o[1] == 0x1.02p0f && o[2] == -0x1.02p0f);
  /* NaN and infinities pass through */
  CHECK(isnan(ixl_bf16_fma_ref(NAN, 1.0f, 0.0f)) && isinf(ixl_bf16_fma_ref(1.0f, INFINITY, 1.0f)));
  CHECK(isnan(ixl_bf16_fma_ref(1.0f, INFINITY, -INFINITY)));
  CHECK(ixl_bf16_fma_ref(0x1.fep127f, 2.0f, 0.0f) == INFINITY);
  free(w);
  free(v);
  free(s);
  free(o);
}

TEST(dot_reference_known_values) {
  float q[128], k[128];
  for (int d = 0; d < 128; d++) q[d] = k[d] = 1.0f;
  uint8_t qs[4] = {128, 128, 128, 0xFF}, ks[4] = {124, 124, 124, 124};
  /* each group: 32 * 2^(1 - 3) = 8; group 3 has the NaN scale */
  CHECK(isnan(ixl_dot_ref(IXL_MXFP4, q, qs, k, ks)));
  qs[3] = 128;
  CHECK(ixl_dot_ref(IXL_MXFP4, q, qs, k, ks) == 32.0f);
  /* exponent sums past fp32's range are exact: 32 * 2^(254 - 254) and 32 * 2^-150 */
  uint8_t big[4] = {254, 254, 1, 1}, small[4] = {0, 0, 1, 1};
  CHECK(ixl_dot_ref(IXL_MXFP4, q, big, k, small) == 32.0f * 2 + 2 * ldexpf(32.0f, -252));
  float fs = 0.5f;
  uint8_t fsb[4];
  memcpy(fsb, &fs, 4);
  CHECK(ixl_dot_ref(IXL_FP8, q, NULL, k, fsb) == 64.0f);
  float dots[8] = {1, -1, 2, NAN, 0, 0, 0, 0}, w[8] = {1, 1, 0.5f, 0, 0, 0, 0, 0};
  CHECK(isnan(ixl_reduce_heads(IXL_REDUCE_FP32, 4, w, dots))); /* relu keeps NaN: 0 * NaN */
  dots[3] = 3;
  CHECK(ixl_reduce_heads(IXL_REDUCE_FP32, 8, w, dots) == 2.0f);
  CHECK(ixl_reduce_heads(IXL_REDUCE_BF16, 8, w, dots) == 2.0f);
  CHECK(ixl_relu(-0.0f) == 0.0f && isnan(ixl_relu(NAN)) && ixl_relu(-3.0f) == 0.0f);
}

/* ---------------------------------------------------------------- random problems */
typedef struct problem {
  int fmt, R, H, N;
  ixl_tensor *q_codes, *q_scales, *k_codes, *k_scales, *w32, *wbf;
  ixl_qk qk;
  double *qd, *kd; /* dequantized (fp8 Q: without its scale, which is in the weights) */
} problem;

static void problem_free(problem *p) {
  ixl_tensor_free(p->q_codes);
  ixl_tensor_free(p->q_scales);
  ixl_tensor_free(p->k_codes);
  ixl_tensor_free(p->k_scales);
  ixl_tensor_free(p->w32);
  ixl_tensor_free(p->wbf);
  free(p->qd);
  free(p->kd);
  memset(p, 0, sizeof *p);
}

/* raw: random code bytes and scale bytes over the whole range (0xFF and NaN codes included)
 * instead of quantized normal data; qd/kd are then not filled. */
static void problem_make(ixl_ctx *ctx, problem *p, int fmt, int quantizer, int R, int H, int N,
                         int raw) {
  memset(p, 0, sizeof *p);
  p->fmt = fmt, p->R = R, p->H = H, p->N = N;
  const int vb = ixl_format_value_bytes((ixl_kv_format)fmt);
  const ixl_dtype sdt = fmt == IXL_FP8 ? IXL_F32 : IXL_I32;
  p->q_codes = tnew(ctx, IXL_U8, 3, R, H, vb);
  ixl_tensor *qs = tnew(ctx, sdt, 2, R, H, 0);
  p->k_codes = tnew(ctx, IXL_U8, 2, N, vb, 0);
  p->k_scales = tnew(ctx, sdt, 1, N, 0, 0);
  ixl_tensor *w = tnew(ctx, IXL_F32, 2, R, H, 0);
  for (int i = 0; i < R * H; i++) F(w)[i] = (float)(rand_normal() + 0.3);
  if (raw) {
    /* scale bytes: wide (0 and 0xFF included), near the top of fp32's exponent range (sums past
     * it overflow), near the bottom (subnormal results), inside, or across the limits of the
     * fast path's key prescaling (mxfp8: 19 and 231, mxfp4: 244) */
    static const int lo_b[6] = {0, 175, 50, 64, 5, 215}, span_b[6] = {256, 26, 31, 127, 36, 40};
    const int mode = (int)rand_below(6), lo = lo_b[mode], span = span_b[mode];
    rand_bytes(p->q_codes->data, (int64_t)R * H * vb);
    rand_bytes(p->k_codes->data, (int64_t)N * vb);
    for (int64_t i = 0; i < (int64_t)R * H; i++) {
      if (fmt == IXL_FP8) F(qs)[i] = ldexpf(1.0f, (int)rand_below(40) - 20);
      else
        for (int g = 0; g < 4; g++)
          ((uint8_t *)qs->data)[i * 4 + g] = (uint8_t)(lo + rand_below(span));
    }
    for (int64_t i = 0; i < N; i++) {
      if (fmt == IXL_FP8)
        F(p->k_scales)[i] = (float)(rand_unit() * ldexp(1.0, (int)rand_below(60) - 30));
      else
        for (int g = 0; g < 4; g++)
          ((uint8_t *)p->k_scales->data)[i * 4 + g] = (uint8_t)(lo + rand_below(span));
    }
  } else {
    ixl_tensor *qx = tnew(ctx, IXL_F32, 3, R, H, 128), *kx = tnew(ctx, IXL_F32, 2, N, 128, 0);
    for (int64_t v = 0; v < (int64_t)R * H; v++) {
      double sc = ldexp(1.0, (int)rand_below(7) - 3);
      for (int d = 0; d < 128; d++)
        F(qx)[v * 128 + d] = (float)(rand_normal() * sc * (d % 32 == 5 ? 4 : 1));
    }
    for (int64_t v = 0; v < N; v++) {
      double sc = ldexp(1.0, (int)rand_below(7) - 3);
      for (int d = 0; d < 128; d++)
        F(kx)[v * 128 + d] = (float)(rand_normal() * sc * (d / 32 == 2 ? 0.25 : 1));
    }
    CHECK_OK(ctx, ixl_quantize(ctx, (ixl_kv_format)fmt, (ixl_quantizer)quantizer, IXL_ROLE_Q, qx,
                               p->q_codes, qs));
    CHECK_OK(ctx, ixl_quantize(ctx, (ixl_kv_format)fmt, (ixl_quantizer)quantizer, IXL_ROLE_K, kx,
                               p->k_codes, p->k_scales));
    ixl_tensor *qdt = tnew(ctx, IXL_F32, 3, R, H, 128), *kdt = tnew(ctx, IXL_F32, 2, N, 128, 0);
    CHECK_OK(ctx, ixl_dequantize(ctx, (ixl_kv_format)fmt, IXL_ROLE_Q, p->q_codes, qs, qdt));
    CHECK_OK(ctx,
             ixl_dequantize(ctx, (ixl_kv_format)fmt, IXL_ROLE_K, p->k_codes, p->k_scales, kdt));
    p->qd = malloc(sizeof(double) * R * H * 128 + 8);
    p->kd = malloc(sizeof(double) * N * 128 + 8);
    for (int64_t i = 0; i < (int64_t)R * H * 128; i++) p->qd[i] = F(qdt)[i];
    for (int64_t i = 0; i < (int64_t)N * 128; i++) p->kd[i] = F(kdt)[i];
    ixl_tensor_free(qx);
    ixl_tensor_free(kx);
    ixl_tensor_free(qdt);
    ixl_tensor_free(kdt);
  }
  p->w32 = tnew(ctx, IXL_F32, 2, R, H, 0);
  p->wbf = tnew(ctx, IXL_BF16, 2, R, H, 0);
  CHECK_OK(ctx, ixl_prepare_weights(ctx, (ixl_kv_format)fmt, w, fmt == IXL_FP8 ? qs : NULL, p->w32,
                                    p->wbf));
  ixl_tensor_free(w);
  if (fmt == IXL_FP8) {
    ixl_tensor_free(qs);
    p->q_scales = NULL;
  } else {
    p->q_scales = qs;
  }
  p->qk.q_codes = p->q_codes;
  p->qk.q_scales = p->q_scales;
  p->qk.k_codes = p->k_codes;
  p->qk.k_scales = p->k_scales;
  p->qk.kv_format = fmt;
}

/* float64 logit of (r, n) and a bound on its fp32/bf16 computation's error scale. */
static void oracle_logit(const problem *p, int reduction, int r, int64_t n, double *val,
                         double *mag) {
  double acc = 0, m = 0;
  for (int h = 0; h < p->H; h++) {
    const double *q = p->qd + ((int64_t)r * p->H + h) * 128, *k = p->kd + n * 128;
    double dot = 0, dm = 0;
    for (int d = 0; d < 128; d++) {
      dot += q[d] * k[d];
      dm += fabs(q[d] * k[d]);
    }
    double w = reduction == IXL_REDUCE_FP32 ? F(p->w32)[r * p->H + h]
                                            : ixl_bf16_to_f32(B16(p->wbf)[r * p->H + h]);
    acc += w * (dot > 0 ? dot : 0);
    m += fabs(w) * dm;
  }
  *val = acc;
  *mag = m;
}

static const int heads_choice[] = {4, 8, 32, 64, 128};

/* Random ragged rows over [0, N): some empty, some the whole of K, some ending at N. */
static void random_ranges(ixl_tensor *ks, ixl_tensor *ke, int R, int N, int align) {
  for (int r = 0; r < R; r++) {
    int a = (int)rand_below(N + 1), b = (int)rand_below(N + 1);
    if (a > b) { int t = a; a = b; b = t; }
    int kind = (int)rand_below(6);
    if (kind == 0) b = a;               /* empty */
    if (kind == 1) a = 0, b = N;        /* all of K */
    if (kind == 2) b = N;               /* ends at the end of K */
    if (align > 1 && b > a) {
      a -= a % align;
    }
    I32(ks)[r] = a;
    I32(ke)[r] = b;
  }
}

TEST(k1_matches_float64) {
  ixl_ctx *ctx = test_ctx(2);
  const int cases = 12;
  for (int c = 0; c < cases; c++) {
    int fmt = c % 3, H = heads_choice[rand_below(5)], R = 1 + (int)rand_below(64), N;
    /* keep R * N * H below 150K so the float64 oracle stays fast */
    if (c == 0 || c == 5) R = 1 + (int)rand_below(2), H = 4, N = 30000 + (int)rand_below(10001);
    else N = 1 + (int)rand_below(150000 / (R * H) + 1);
    problem p;
    problem_make(ctx, &p, fmt, (int)rand_below(2), R, H, N, 0);
    ixl_tensor *ks = tnew(ctx, IXL_I32, 1, R, 0, 0), *ke = tnew(ctx, IXL_I32, 1, R, 0, 0);
    random_ranges(ks, ke, R, N, 1);
    int maxlen = 1;
    for (int r = 0; r < R; r++)
      maxlen = I32(ke)[r] - I32(ks)[r] > maxlen ? I32(ke)[r] - I32(ks)[r] : maxlen;
    for (int red = 0; red < 2; red++) {
      for (int layout = 0; layout < 2; layout++) {
        int64_t cols = layout == IXL_LAYOUT_FULL ? N : maxlen + (int)rand_below(3);
        ixl_tensor *out = tnew(ctx, red ? IXL_BF16 : IXL_F32, 2, R, cols, 0);
        ixl_tensor_fill_bytes(ctx, out, 0x5A); /* poison */
        CHECK_OK(ctx, ixl_dense_logits(ctx, &p.qk, red ? p.wbf : p.w32, ks, ke, (ixl_layout)layout,
                                       1, (ixl_reduction)red, out));
        int bad = 0, badinf = 0;
        double worst = 0;
        for (int r = 0; r < R; r++) {
          for (int64_t col = 0; col < cols; col++) {
            int64_t n = layout == IXL_LAYOUT_FULL ? col : I32(ks)[r] + col;
            float got = out_at(out, (int64_t)r * cols + col);
            if (n < I32(ks)[r] || n >= I32(ke)[r]) {
              badinf += got != -INFINITY;
              continue;
            }
            double want, mag;
            oracle_logit(&p, red, r, n, &want, &mag);
            double tol = (red ? (H / 4 + 4) * 0x1p-8 : 2e-5) * mag + 1e-30;
            double err = fabs(got - want);
            if (!(err <= tol)) {
              if (bad++ < 3)
                fprintf(stderr,
                        "  fmt %d H %d red %d r %d n %lld: %.9g vs %.9g (tol %.3g, seed %llu)\n",
                        fmt, H, red, r, (long long)n, got, want, tol, (unsigned long long)seed_);
            }
            worst = fmax(worst, err / (mag + 1e-30));
          }
        }
        CHECK_MSG(bad == 0 && badinf == 0,
                  "case %d fmt %d R %d H %d N %d red %d layout %d: %d off, %d not -inf", c, fmt, R,
                  H, N, red, layout, bad, badinf);
        ixl_tensor_free(out);
      }
    }
    ixl_tensor_free(ks);
    ixl_tensor_free(ke);
    problem_free(&p);
  }
  ixl_ctx_free(ctx);
}

/* ---------------------------------------------------------------- the CPU variants */
/* Every CPU logits variant of this build, in registry order (ref, fast and, in the test
 * build, ref_alt): the parity tests run each one against ref. */
static const char *cpu_variant[16];
static int n_cpu_variant;
static void list_cpu_variants(void) {
  n_cpu_variant = 0;
  for (int i = 0; i < ixl_variant_count("logits") && n_cpu_variant < 16; i++)
    if (strcmp(ixl_variant_backend("logits", i), "cpu") == 0)
      cpu_variant[n_cpu_variant++] = ixl_variant_name("logits", i);
}

static void pin_(ixl_ctx *ctx, const char *name) {
  if (ixl_ctx_set_variant(ctx, "logits", name) != IXL_OK) {
    fprintf(stderr, "  set_variant %s: %s\n", name, ixl_last_error(ctx));
    check_failed_ = 1;
  }
}

/* 1 when the call ran on variant `name` (the context records it), 0 when the variant refused
 * it; a refusal must be IXL_ERR_UNSUPPORTED naming the variant. Any other failure counts. */
static int ran_on_(ixl_ctx *ctx, const char *name, ixl_status st, int line) {
  char want[64];
  snprintf(want, sizeof want, "logits variant %s ", name);
  const int ok = st == IXL_OK && strcmp(ixl_ctx_variant_ran(ctx, "logits"), name) == 0;
  if (st == IXL_OK && !ok) {
    fprintf(stderr, "  line %d: pinned %s, ran %s\n", line, name,
            ixl_ctx_variant_ran(ctx, "logits"));
    check_failed_ = 1;
  } else if (st != IXL_OK && !(st == IXL_ERR_UNSUPPORTED && strstr(ixl_last_error(ctx), want))) {
    fprintf(stderr, "  line %d: variant %s: %s: %s\n", line, name, ixl_status_name(st),
            ixl_last_error(ctx));
    check_failed_ = 1;
  }
  ixl_ctx_set_variant(ctx, "logits", NULL);
  return ok;
}
/* Runs expr (an op on ctx) pinned to variant `name`: ran_on_'s answer. */
#define RAN_ON(ctx, name, expr) ran_on_(ctx, name, (pin_(ctx, name), (expr)), __LINE__)

static int compare_outputs(const ixl_tensor *a, const ixl_tensor *b, const char *what) {
  int64_t n = ixl_tensor_numel(a), bad = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!same(out_at(a, i), out_at(b, i))) {
      if (bad++ < 3)
        fprintf(stderr, "  %s: element %lld: %a vs %a (seed %llu)\n", what, (long long)i,
                out_at(a, i), out_at(b, i), (unsigned long long)seed_);
    }
  }
  return bad == 0;
}

/* Every CPU variant (the fast path above all) gives the reference path's bits, for quantized
 * data and for raw codes with extreme scale bytes (0, 0xFF, sums outside fp32's exponent
 * range). */
TEST(k1_every_cpu_variant_equals_reference) {
  int fast_ran = 0;
  ixl_ctx *ctx = test_ctx(2);
  for (int c = 0; c < 12; c++) {
    int fmt = c % 3, raw = c >= 6, H = heads_choice[rand_below(5)], R = 1 + (int)rand_below(16);
    int N = 1 + (int)rand_below(40000 / (R * H) + 100);
    problem p;
    problem_make(ctx, &p, fmt, (int)rand_below(2), R, H, N, raw);
    ixl_tensor *ks = tnew(ctx, IXL_I32, 1, R, 0, 0), *ke = tnew(ctx, IXL_I32, 1, R, 0, 0);
    random_ranges(ks, ke, R, N, 1);
    for (int red = 0; red < 2; red++) {
      ixl_tensor *o1 = tnew(ctx, red ? IXL_BF16 : IXL_F32, 2, R, N, 0);
      ixl_tensor *o2 = tnew(ctx, red ? IXL_BF16 : IXL_F32, 2, R, N, 0);
      const ixl_tensor *w = red ? p.wbf : p.w32;
      CHECK(RAN_ON(ctx, "ref", ixl_dense_logits(ctx, &p.qk, w, ks, ke, IXL_LAYOUT_FULL, 1,
                                                (ixl_reduction)red, o1)));
      for (int v = 0; v < n_cpu_variant; v++) {
        const char *name = cpu_variant[v];
        if (strcmp(name, "ref") == 0) continue;
        ixl_tensor_fill_bytes(ctx, o2, (uint8_t)(0x5A + v)); /* unwritten elements show */
        if (!RAN_ON(ctx, name, ixl_dense_logits(ctx, &p.qk, w, ks, ke, IXL_LAYOUT_FULL, 1,
                                                (ixl_reduction)red, o2)))
          continue;
        fast_ran += strcmp(name, "fast") == 0;
        CHECK_MSG(compare_outputs(o1, o2, name), "%s: case %d fmt %d raw %d R %d H %d N %d red %d",
                  name, c, fmt, raw, R, H, N, red);
      }
      ixl_tensor_free(o1);
      ixl_tensor_free(o2);
    }
    ixl_tensor_free(ks);
    ixl_tensor_free(ke);
    problem_free(&p);
  }
  CHECK(fast_ran == (ixl_engine_fast_available() ? 24 : 0)); /* never a silent fallback */
  ixl_ctx_free(ctx);
}

TEST(k1_threads_do_not_change_bits) {
  ixl_ctx *c1 = test_ctx(1), *c2 = test_ctx(2);
  problem p;
  problem_make(c1, &p, IXL_MXFP8, 0, 9, 8, 3000, 0);
  ixl_tensor *ks = tnew(c1, IXL_I32, 1, 9, 0, 0), *ke = tnew(c1, IXL_I32, 1, 9, 0, 0);
  random_ranges(ks, ke, 9, 3000, 1);
  ixl_tensor *o1 = tnew(c1, IXL_F32, 2, 9, 3000, 0), *o2 = tnew(c1, IXL_F32, 2, 9, 3000, 0);
  CHECK_OK(c1, ixl_dense_logits(c1, &p.qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, o1));
  CHECK_OK(c2, ixl_dense_logits(c2, &p.qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, o2));
  CHECK(compare_outputs(o1, o2, "1 vs 2 threads"));
  ixl_tensor_free(o1);
  ixl_tensor_free(o2);
  ixl_tensor_free(ks);
  ixl_tensor_free(ke);
  problem_free(&p);
  ixl_ctx_free(c1);
  ixl_ctx_free(c2);
}

/* ---------------------------------------------------------------- paged */
typedef struct paged {
  ixl_tensor *pages, *bt, *lens, *starts;
  int P, max_pages;
} paged;

/* Pages row r's positions [0, lens[r]) = K rows [starts[r], starts[r] + lens[r]) through a
 * shuffled block table; unused block table entries are garbage (-7). */
static void paged_make(ixl_ctx *ctx, const problem *p, paged *g, int P, int maxlen) {
  const int vb = ixl_format_value_bytes((ixl_kv_format)p->fmt);
  g->P = P;
  g->lens = tnew(ctx, IXL_I32, 1, p->R, 0, 0);
  g->starts = tnew(ctx, IXL_I32, 1, p->R, 0, 0);
  int total = 0;
  g->max_pages = 1;
  for (int r = 0; r < p->R; r++) {
    int len = (int)rand_below((maxlen < p->N ? maxlen : p->N) + 1);
    if (rand_below(5) == 0) len = 0;
    I32(g->lens)[r] = len;
    I32(g->starts)[r] = (int)rand_below(p->N - len + 1);
    int np = (len + P - 1) / P;
    total += np;
    g->max_pages = np > g->max_pages ? np : g->max_pages;
  }
  g->max_pages += (int)rand_below(3); /* a wider table than needed */
  int64_t stride = ((int64_t)P * (vb + 4) + 511) / 512 * 512 + 512 * rand_below(2);
  g->pages = tnew(ctx, IXL_U8, 2, total + 1, stride, 0);
  ixl_tensor_fill_bytes(ctx, g->pages, 0x7F); /* NaN codes wherever nothing was written */
  g->bt = tnew(ctx, IXL_I32, 2, p->R, g->max_pages, 0);
  int *perm = malloc(sizeof(int) * (total + 1));
  for (int i = 0; i <= total; i++) perm[i] = i;
  for (int i = total; i > 0; i--) {
    int j = (int)rand_below(i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  int next = 0;
  for (int r = 0; r < p->R; r++) {
    int np = (I32(g->lens)[r] + P - 1) / P;
    for (int j = 0; j < g->max_pages; j++)
      I32(g->bt)[r * g->max_pages + j] = j < np ? perm[next++] : -7;
    ixl_tensor ids;
    int64_t shape[1] = {np};
    CHECK_OK(ctx, ixl_tensor_view(ctx, g->bt, 1, shape, NULL, (int64_t)r * g->max_pages, &ids));
    CHECK_OK(ctx, ixl_kv_pages_write(ctx, (ixl_kv_format)p->fmt, p->k_codes, p->k_scales,
                                     I32(g->starts)[r], I32(g->lens)[r], g->pages, P, &ids));
  }
  free(perm);
}
static void paged_free(paged *g) {
  ixl_tensor_free(g->pages);
  ixl_tensor_free(g->bt);
  ixl_tensor_free(g->lens);
  ixl_tensor_free(g->starts);
}
static ixl_qk paged_qk(const problem *p, const paged *g) {
  ixl_qk qk = p->qk;
  qk.k_codes = NULL;
  qk.k_scales = NULL;
  qk.k_pages = g->pages;
  qk.page_size = g->P;
  return qk;
}

/* K2 on pages == K1 (compressed) on the same keys, bit for bit, both reductions and paths. */
TEST(k2_equals_k1_on_the_same_keys) {
  ixl_ctx *ctx = test_ctx(2);
  for (int c = 0; c < 6; c++) {
    int fmt = c % 3, H = heads_choice[rand_below(3)], R = 1 + (int)rand_below(12),
        N = 200 + (int)rand_below(2000);
    problem p;
    problem_make(ctx, &p, fmt, 0, R, H, N, c >= 3);
    paged g;
    const int Ps[] = {16, 64, 128};
    paged_make(ctx, &p, &g, Ps[rand_below(3)], N);
    ixl_qk qk = paged_qk(&p, &g);
    int maxlen = 1;
    for (int r = 0; r < R; r++) maxlen = I32(g.lens)[r] > maxlen ? I32(g.lens)[r] : maxlen;
    ixl_tensor *ke = tnew(ctx, IXL_I32, 1, R, 0, 0);
    for (int r = 0; r < R; r++) I32(ke)[r] = I32(g.starts)[r] + I32(g.lens)[r];
    for (int red = 0; red < 2; red++) {
      ixl_tensor *o1 = tnew(ctx, red ? IXL_BF16 : IXL_F32, 2, R, maxlen, 0);
      ixl_tensor *o2 = tnew(ctx, red ? IXL_BF16 : IXL_F32, 2, R, maxlen, 0);
      ixl_tensor *o3 = tnew(ctx, red ? IXL_BF16 : IXL_F32, 2, R, maxlen, 0);
      const ixl_tensor *w = red ? p.wbf : p.w32;
      CHECK_OK(ctx, ixl_dense_logits(ctx, &p.qk, w, g.starts, ke, IXL_LAYOUT_COMPRESSED, 1,
                                     (ixl_reduction)red, o1));
      CHECK_OK(ctx, ixl_dense_logits_paged(ctx, &qk, w, g.lens, g.bt, (ixl_reduction)red, o2));
      CHECK_MSG(compare_outputs(o1, o2, "K2 vs K1"), "case %d fmt %d red %d P %d", c, fmt, red,
                g.P);
      for (int v = 0; v < n_cpu_variant; v++) { /* each variant against the default */
        ixl_tensor_fill_bytes(ctx, o3, (uint8_t)(0x5A + v));
        if (!RAN_ON(ctx, cpu_variant[v],
                    ixl_dense_logits_paged(ctx, &qk, w, g.lens, g.bt, (ixl_reduction)red, o3)))
          continue;
        CHECK_MSG(compare_outputs(o2, o3, cpu_variant[v]), "K2 %s: case %d fmt %d red %d",
                  cpu_variant[v], c, fmt, red);
      }
      ixl_tensor_free(o1);
      ixl_tensor_free(o2);
      ixl_tensor_free(o3);
    }
    ixl_tensor_free(ke);
    paged_free(&g);
    problem_free(&p);
  }
  ixl_ctx_free(ctx);
}

/* ---------------------------------------------------------------- K5 */
/* K4-like ids: n_valid distinct increasing blocks of the row's ceil(len / sbk) (the last one
 * always when force_last, and at least one for a non-empty row, as K3 always keeps the newest
 * block), pads repeating the last id (ks / sbk for an empty row). */
static void make_ids(ixl_tensor *ids, int r, int nsb, int64_t ks, int64_t ke, int sbk,
                     int force_last, int *nvalid_out) {
  int64_t nb = ke > ks ? (ke - ks + sbk - 1) / sbk : 0;
  int32_t *row = I32(ids) + (int64_t)r * nsb;
  double prob = nb ? fmin(1.0, (double)nsb / (double)nb) * 0.8 + 0.1 : 0.0;
  int nv = 0;
  for (int64_t b = 0; b < nb; b++)
    if (nv < nsb && rand_unit() < prob) row[nv++] = (int32_t)(b + ks / sbk);
  int32_t last = (int32_t)(nb - 1 + ks / sbk);
  if (nb > 0 && (nv == 0 || (force_last && row[nv - 1] != last))) {
    if (nv == nsb) nv--;
    row[nv++] = last;
  }
  for (int j = nv; j < nsb; j++) row[j] = nv ? row[nv - 1] : (int32_t)(ks / sbk);
  *nvalid_out = nv;
}

TEST(k5_equals_k1_bf16_at_the_same_positions) {
  ixl_ctx *ctx = test_ctx(2);
  for (int c = 0; c < 9; c++) {
    int fmt = c % 3, H = heads_choice[rand_below(3)], R = 1 + (int)rand_below(10);
    int N =
        16 * (40 + (int)rand_below(280)); /* a multiple of 16: the scales end exactly at N (ASan) */
    const int sbks[] = {4, 8, 16, 64, 128};
    int sbk = sbks[rand_below(5)], nsb = 1 + (int)rand_below(40);
    int aligned = c % 2;
    problem p;
    problem_make(ctx, &p, fmt, 0, R, H, N, c >= 6);
    ixl_tensor *ks = tnew(ctx, IXL_I32, 1, R, 0, 0), *ke = tnew(ctx, IXL_I32, 1, R, 0, 0);
    random_ranges(ks, ke, R, N, aligned ? sbk : 1);
    /* row 0 ends at the end of K with a partial last block: reading past it would be a bug */
    I32(ke)[0] = N;
    I32(ks)[0] = aligned ? (N - 3 * sbk) / sbk * sbk : N - 3 * sbk - 1 - (int)rand_below(sbk - 1);
    ixl_tensor *ids = tnew(ctx, IXL_I32, 2, R, nsb, 0);
    int *nvalid = malloc(sizeof(int) * R);
    for (int r = 0; r < R; r++)
      make_ids(ids, r, nsb, I32(ks)[r], I32(ke)[r], sbk, r == 0, &nvalid[r]);
    ixl_tensor *full = tnew(ctx, IXL_BF16, 2, R, N, 0);
    CHECK_OK(ctx, ixl_dense_logits(ctx, &p.qk, p.wbf, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_BF16,
                                   full));
    for (int v = 0; v < n_cpu_variant; v++) {
      const char *path = cpu_variant[v];
      ixl_tensor *out = tnew(ctx, IXL_BF16, 2, R, (int64_t)nsb * sbk, 0);
      ixl_tensor_fill_bytes(ctx, out, 0x5A);
      if (!RAN_ON(ctx, path, ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk,
                                               aligned ? IXL_KS_ALIGNED : IXL_KS_UNALIGNED,
                                               out))) {
        ixl_tensor_free(out);
        continue;
      }
      int bad = 0, computed = 0;
      for (int r = 0; r < R; r++) {
        for (int64_t col = 0; col < (int64_t)nsb * sbk; col++) {
          int64_t j = col / sbk, o = col % sbk;
          int64_t krow =
              (int64_t)I32(ids)[r * nsb + j] * sbk + (aligned ? 0 : I32(ks)[r] % sbk) + o;
          float got = ixl_bf16_to_f32(B16(out)[(int64_t)r * nsb * sbk + col]);
          float want = -INFINITY;
          if (j < nvalid[r] && krow >= I32(ks)[r] && krow < I32(ke)[r]) {
            want = ixl_bf16_to_f32(B16(full)[(int64_t)r * N + krow]);
            computed++;
          }
          if (!same(got, want) && bad++ < 3)
            fprintf(stderr, "  row %d col %lld (K row %lld): %a vs %a (seed %llu)\n", r,
                    (long long)col, (long long)krow, got, want, (unsigned long long)seed_);
        }
      }
      CHECK_MSG(bad == 0, "case %d fmt %d variant %s sbk %d nsb %d aligned %d: %d differ", c, fmt,
                path, sbk, nsb, aligned, bad);
      CHECK(computed > 0);
      ixl_tensor_free(out);
    }
    free(nvalid);
    ixl_tensor_free(full);
    ixl_tensor_free(ids);
    ixl_tensor_free(ks);
    ixl_tensor_free(ke);
    problem_free(&p);
  }
  ixl_ctx_free(ctx);
}

TEST(k5_paged_equals_k2_bf16_at_the_same_positions) {
  ixl_ctx *ctx = test_ctx(2);
  for (int c = 0; c < 6; c++) {
    int fmt = c % 3, H = heads_choice[rand_below(3)], R = 1 + (int)rand_below(10),
        N = 300 + (int)rand_below(3000);
    const int sbks[] = {4, 8, 16, 64};
    int sbk = sbks[rand_below(4)], nsb = 1 + (int)rand_below(60);
    problem p;
    problem_make(ctx, &p, fmt, 1, R, H, N, c >= 3);
    paged g;
    paged_make(ctx, &p, &g, 128, N);
    ixl_qk qk = paged_qk(&p, &g);
    int maxlen = 1;
    for (int r = 0; r < R; r++) maxlen = I32(g.lens)[r] > maxlen ? I32(g.lens)[r] : maxlen;
    ixl_tensor *dense = tnew(ctx, IXL_BF16, 2, R, maxlen, 0);
    CHECK_OK(ctx, ixl_dense_logits_paged(ctx, &qk, p.wbf, g.lens, g.bt, IXL_REDUCE_BF16, dense));
    ixl_tensor *ids = tnew(ctx, IXL_I32, 2, R, nsb, 0);
    int *nvalid = malloc(sizeof(int) * R);
    for (int r = 0; r < R; r++)
      make_ids(ids, r, nsb, 0, I32(g.lens)[r], sbk, (int)rand_below(2), &nvalid[r]);
    for (int v = 0; v < n_cpu_variant; v++) {
      const char *path = cpu_variant[v];
      ixl_tensor *out = tnew(ctx, IXL_BF16, 2, R, (int64_t)nsb * sbk, 0);
      ixl_tensor_fill_bytes(ctx, out, 0x5A);
      if (!RAN_ON(ctx, path, ixl_sparse_logits(ctx, &qk, p.wbf, NULL, g.lens, g.bt, ids, sbk,
                                               (ixl_ks_mode)(c % 2), out))) {
        ixl_tensor_free(out);
        continue;
      }
      int bad = 0;
      for (int r = 0; r < R; r++)
        for (int64_t col = 0; col < (int64_t)nsb * sbk; col++) {
          int64_t j = col / sbk, pos = (int64_t)I32(ids)[r * nsb + j] * sbk + col % sbk;
          float got = ixl_bf16_to_f32(B16(out)[(int64_t)r * nsb * sbk + col]);
          float want = j < nvalid[r] && pos < I32(g.lens)[r]
                           ? ixl_bf16_to_f32(B16(dense)[(int64_t)r * maxlen + pos])
                           : -INFINITY;
          if (!same(got, want) && bad++ < 3)
            fprintf(stderr, "  row %d col %lld (pos %lld): %a vs %a (seed %llu)\n", r,
                    (long long)col, (long long)pos, got, want, (unsigned long long)seed_);
        }
      CHECK_MSG(bad == 0, "case %d fmt %d variant %s sbk %d: %d differ", c, fmt, path, sbk, bad);
      ixl_tensor_free(out);
    }
    free(nvalid);
    ixl_tensor_free(ids);
    ixl_tensor_free(dense);
    paged_free(&g);
    problem_free(&p);
  }
  ixl_ctx_free(ctx);
}

/* Ids that K4 would never make (negative, before ks, past the end, decreasing) give -inf and
 * read nothing. */
TEST(k5_hostile_ids_read_nothing_outside) {
  ixl_ctx *ctx = test_ctx(2);
  const int R = 3, H = 4, N = 64, sbk = 8, nsb = 6;
  problem p;
  problem_make(ctx, &p, IXL_MXFP4, 0, R, H, N, 0);
  ixl_tensor *ks = tnew(ctx, IXL_I32, 1, R, 0, 0), *ke = tnew(ctx, IXL_I32, 1, R, 0, 0);
  int32_t ksv[3] = {10, 0, 60}, kev[3] = {40, 64, 60};
  memcpy(ks->data, ksv, sizeof ksv);
  memcpy(ke->data, kev, sizeof kev);
  ixl_tensor *ids = tnew(ctx, IXL_I32, 2, R, nsb, 0);
  int32_t idv[18] = {-5, 1, 2, 1000000, 7, 3, /* row 0: -5 -> before ks, 1000000 -> past K */
                     7, 8, 9, 9, 9, 9,        /* row 1: 8, 9 past N */
                     7, 7, 7, 7, 7, 7};       /* row 2: empty */
  memcpy(ids->data, idv, sizeof idv);
  ixl_tensor *out = tnew(ctx, IXL_BF16, 2, R, nsb * sbk, 0);
  ixl_tensor *full = tnew(ctx, IXL_BF16, 2, R, N, 0);
  CHECK_OK(ctx,
           ixl_dense_logits(ctx, &p.qk, p.wbf, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_BF16, full));
  CHECK_OK(ctx,
           ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, out));
  for (int col = 0; col < nsb * sbk; col++) {
    int j = col / sbk, o = col % sbk;
    /* row 0: ids -5, 1, 2, 1000000 are increasing (n_valid = 4); block 1 -> K rows 10..17,
     * block 2 -> 18..25; -5 and 1000000 lie outside [10, 40) */
    float want = (j == 1 || j == 2) ? ixl_bf16_to_f32(B16(full)[j * 8 + 2 + o]) : -INFINITY;
    CHECK_MSG(same(ixl_bf16_to_f32(B16(out)[col]), want), "row 0 col %d", col);
    want = j == 0 ? ixl_bf16_to_f32(B16(full)[N + 56 + o]) : -INFINITY;
    CHECK_MSG(same(ixl_bf16_to_f32(B16(out)[nsb * sbk + col]), want), "row 1 col %d", col);
    CHECK(B16(out)[2 * nsb * sbk + col] == 0xFF80);
  }
  ixl_tensor_free(out);
  ixl_tensor_free(full);
  ixl_tensor_free(ids);
  ixl_tensor_free(ks);
  ixl_tensor_free(ke);
  problem_free(&p);
  ixl_ctx_free(ctx);
}

/* Empty rows are all -inf. A 0xFF scale byte (the NaN scale) makes its group's partial NaN:
 * a key's makes that position NaN, a query's makes its whole row NaN. The other scale bytes
 * are kept low so that only the 0xFF itself can send a block to the exact scalar epilogue. */
TEST(empty_rows_and_nan_scales) {
  ixl_ctx *ctx = test_ctx(2);
  const int R = 3, H = 8, N = 48; /* whole strips: no empty key slots in the block */
  problem p;
  problem_make(ctx, &p, IXL_MXFP4, 0, R, H, N, 0);
  ixl_tensor *ks = tnew(ctx, IXL_I32, 1, R, 0, 0), *ke = tnew(ctx, IXL_I32, 1, R, 0, 0);
  int32_t ksv[3] = {5, 48, 0}, kev[3] = {5, 48, 40};
  memcpy(ks->data, ksv, sizeof ksv);
  memcpy(ke->data, kev, sizeof kev);
  uint8_t *qsb = (uint8_t *)p.q_scales->data, *ksb = (uint8_t *)p.k_scales->data;
  for (int side = 0; side < 2; side++) {
    for (int i = 0; i < R * H * 4; i++) qsb[i] = side == 0 ? 110 : 130;
    for (int i = 0; i < N * 4; i++) ksb[i] = side == 0 ? 130 : 110;
    if (side == 0) ksb[7 * 4 + 2] = 0xFF;         /* key 7, group 2 */
    else qsb[(2 * H + 3) * 4 + 1] = 0xFF;         /* row 2, head 3, group 1 */
    for (int red = 0; red < 2; red++) {
      for (int v = 0; v < n_cpu_variant; v++) {
        const char *path = cpu_variant[v];
        ixl_tensor *out = tnew(ctx, red ? IXL_BF16 : IXL_F32, 2, R, N, 0);
        if (!RAN_ON(ctx, path, ixl_dense_logits(ctx, &p.qk, red ? p.wbf : p.w32, ks, ke,
                                                IXL_LAYOUT_COMPRESSED, 0, (ixl_reduction)red,
                                                out))) {
          ixl_tensor_free(out);
          continue;
        }
        for (int i = 0; i < 2 * N; i++) CHECK(out_at(out, i) == -INFINITY);
        int nan = 0;
        for (int n = 0; n < N; n++) nan += isnan(out_at(out, 2 * N + n));
        for (int n = 40; n < N; n++) CHECK(out_at(out, 2 * N + n) == -INFINITY);
        CHECK_MSG(side == 0 ? nan == 1 && isnan(out_at(out, 2 * N + 7)) : nan == 40,
                  "side %d red %d variant %s: %d NaN", side, red, path, nan);
        ixl_tensor_free(out);
      }
    }
  }
  ixl_tensor_free(ks);
  ixl_tensor_free(ke);
  problem_free(&p);
  ixl_ctx_free(ctx);
}

/* Saturated codes (every product at the top of the format) with key scale bytes just inside and
 * just past the limits of the fast path's key prescaling, and a small query scale byte: the
 * logits stay finite and both paths agree bit for bit. */
TEST(prescale_limits_with_saturated_codes) {
  ixl_ctx *ctx = test_ctx(2);
  const int R = 1, H = 4, N = 32;
  for (int fmt = 0; fmt < 2; fmt++) {
    const int limit = fmt == IXL_MXFP4 ? 244 : 231;
    for (int past = 0; past <= 3; past++) {
      problem p;
      problem_make(ctx, &p, fmt, 0, R, H, N, 0);
      const int vb = fmt == IXL_MXFP4 ? 64 : 128;
      memset(p.q_codes->data, fmt == IXL_MXFP4 ? 0x77 : 0x7E, (size_t)R * H * vb); /* 6 or 448 */
      memset(p.k_codes->data, fmt == IXL_MXFP4 ? 0x77 : 0x7E, (size_t)N * vb);
      memset(p.q_scales->data, 1, (size_t)R * H * 4); /* 2^-126 */
      memset(p.k_scales->data, limit + past, (size_t)N * 4);
      ixl_tensor *ks = tnew(ctx, IXL_I32, 1, R, 0, 0), *ke = tnew(ctx, IXL_I32, 1, R, 0, 0);
      I32(ks)[0] = 0, I32(ke)[0] = N;
      for (int red = 0; red < 2; red++) {
        ixl_tensor *o1 = tnew(ctx, red ? IXL_BF16 : IXL_F32, 2, R, N, 0),
                   *o2 = tnew(ctx, red ? IXL_BF16 : IXL_F32, 2, R, N, 0);
        const ixl_tensor *w = red ? p.wbf : p.w32;
        CHECK(RAN_ON(ctx, "ref", ixl_dense_logits(ctx, &p.qk, w, ks, ke, IXL_LAYOUT_FULL, 1,
                                                  (ixl_reduction)red, o1)));
        for (int v = 0; v < n_cpu_variant; v++) {
          ixl_tensor_fill_bytes(ctx, o2, (uint8_t)(0x5A + v));
          if (!RAN_ON(ctx, cpu_variant[v], ixl_dense_logits(ctx, &p.qk, w, ks, ke, IXL_LAYOUT_FULL,
                                                            1, (ixl_reduction)red, o2)))
            continue;
          CHECK_MSG(compare_outputs(o1, o2, "saturated"), "%s: fmt %d ke %d red %d",
                    cpu_variant[v], fmt, limit + past, red);
        }
        for (int n = 0; n < N; n++)
          CHECK_MSG(isfinite(out_at(o1, n)), "fmt %d ke %d: %g", fmt, limit + past, out_at(o1, n));
        ixl_tensor_free(o1);
        ixl_tensor_free(o2);
      }
      ixl_tensor_free(ks);
      ixl_tensor_free(ke);
      problem_free(&p);
    }
  }
  ixl_ctx_free(ctx);
}

/* ---------------------------------------------------------------- validation */
TEST(k1_errors) {
  ixl_ctx *ctx = test_ctx(2);
  const int R = 2, H = 8, N = 32;
  problem p, p8;
  problem_make(ctx, &p, IXL_MXFP4, 0, R, H, N, 0);
  problem_make(ctx, &p8, IXL_FP8, 0, R, H, N, 0);
  ixl_tensor *ks = tnew(ctx, IXL_I32, 1, R, 0, 0), *ke = tnew(ctx, IXL_I32, 1, R, 0, 0);
  ixl_tensor *ks3 = tnew(ctx, IXL_I32, 1, R + 1, 0, 0), *kf = tnew(ctx, IXL_F32, 1, R, 0, 0);
  I32(ks)[0] = 0, I32(ks)[1] = 4, I32(ke)[0] = 10, I32(ke)[1] = 32;
  ixl_tensor *out = tnew(ctx, IXL_F32, 2, R, N, 0), *outb = tnew(ctx, IXL_BF16, 2, R, N, 0);
  ixl_tensor *out_n = tnew(ctx, IXL_F32, 2, R, N - 1, 0),
             *out_r = tnew(ctx, IXL_F32, 2, R + 1, N, 0);
  ixl_tensor *small = tnew(ctx, IXL_F32, 2, R, 20, 0);
  ixl_qk qk = p.qk;
  CHECK_OK(ctx,
           ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out));
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, NULL, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "in (the ixl_qk inputs) is NULL");
  qk.kv_format = 9;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "kv_format = 9");
  qk.kv_format = IXL_MXFP8;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "q_codes: shape[2] = 64, expected 128 (the value bytes of mxfp8)");
  qk = p.qk;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, (ixl_reduction)4, out),
            IXL_ERR_INVALID_ARG, "reduction = 4");
  ixl_tensor *q6 = tnew(ctx, IXL_U8, 3, R, 6, 64), *q132 = tnew(ctx, IXL_U8, 3, R, 132, 64),
             *qf = tnew(ctx, IXL_F32, 3, R, H, 64);
  qk.q_codes = q6;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "q_codes: shape[1] (H) = 6: must be a multiple of 4 in [4, 128]");
  qk.q_codes = q132;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "(H) = 132");
  qk.q_codes = qf;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_DTYPE, "q_codes: dtype f32, expected u8");
  qk = p.qk;
  qk.q_scales = NULL;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "q_scales: missing tensor");
  qk.q_scales = ks3;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "q_scales: 1 dims, expected 2");
  ixl_tensor *fake_qs = tnew(ctx, IXL_F32, 2, R, H, 0);
  qk = p8.qk;
  qk.q_scales = fake_qs;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p8.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "q_scales: must be NULL for fp8");
  qk = p.qk;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.wbf, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_DTYPE, "weights: dtype bf16, expected f32 for the fp32 reduction");
  ixl_tensor *w12 = tnew(ctx, IXL_F32, 2, R, H + 4, 0),
             *kscale3 = tnew(ctx, IXL_I32, 1, N + 1, 0, 0);
  CHECK_ERR(ctx, ixl_dense_logits(ctx, &qk, w12, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "weights: shape[1] = 12, expected 8");
  qk.k_scales = kscale3;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "k_scales: shape[0] = 33, expected 32");
  qk.k_scales = p8.k_scales;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_DTYPE, "k_scales: dtype f32, expected i32");
  qk = p.qk;
  qk.k_codes = p8.k_codes;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "k_codes: shape[1] = 128, expected 64 (the value bytes of mxfp4)");
  qk = p.qk;
  qk.k_pages = p.k_codes;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "k_pages must be NULL for ragged rows");
  qk = p.qk;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks3, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "ks: shape[0] = 3, expected 2");
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, kf, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_DTYPE, "ke: dtype f32, expected i32");
  CHECK_ERR(ctx, ixl_dense_logits(ctx, &qk, p.w32, ks, ke, (ixl_layout)3, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "layout = 3");
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, outb),
            IXL_ERR_DTYPE, "out: dtype bf16, expected f32 for the fp32 reduction");
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out_n),
            IXL_ERR_SHAPE, "out: shape[1] = 31, expected N = 32");
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out_r),
            IXL_ERR_SHAPE, "out: shape[0] = 3, expected 2");
  CHECK_ERR(
      ctx,
      ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_COMPRESSED, 1, IXL_REDUCE_FP32, small),
      IXL_ERR_SHAPE,
      "ke[1] - ks[1] = 28: must be <= max_len = 20 (out shape[1]) in the compressed layout");
  I32(ks)[1] = -1;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "ks[1] = -1: must be >= 0");
  I32(ks)[1] = 4, I32(ke)[1] = 33;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "ke[1] = 33: must be <= N (32), the rows of k_codes");
  I32(ke)[1] = 3;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "ke[1] = 3 < ks[1] = 4");
  I32(ke)[1] = 32;
  /* out over an input (k_codes' bytes, larger than out: nothing is written on refusal) */
  ixl_tensor alias = *out;
  alias.data = (uint8_t *)p.k_codes->data + 64;
  CHECK_ERR(
      ctx, ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, &alias),
      IXL_ERR_INVALID_ARG, "out overlaps k_codes: an output must not share memory with an input");
  ixl_tensor dev = *p.k_codes; /* a descriptor claiming device memory (never dereferenced) */
  dev.device = IXL_DEVICE;
  dev.owns = 0;
  qk.k_codes = &dev;
  CHECK_ERR(ctx,
            ixl_dense_logits(ctx, &qk, p.w32, ks, ke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_FP32, out),
            IXL_ERR_BACKEND, "k_codes is in device memory but q_codes is in host memory");
  ixl_tensor *tensors[] = {ks,    ke, ks3,  kf, out,     outb, out_n,  out_r,
                           small, q6, q132, qf, fake_qs, w12,  kscale3};
  for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) ixl_tensor_free(tensors[i]);
  problem_free(&p);
  problem_free(&p8);
  ixl_ctx_free(ctx);
}

TEST(k2_errors) {
  ixl_ctx *ctx = test_ctx(2);
  problem p;
  problem_make(ctx, &p, IXL_MXFP4, 0, 3, 4, 300, 0);
  paged g;
  paged_make(ctx, &p, &g, 16, 300);
  /* our own lens and table: two pages per row out of a 4-wide table */
  ixl_tensor *lens = tnew(ctx, IXL_I32, 1, 3, 0, 0), *bt = tnew(ctx, IXL_I32, 2, 3, 4, 0);
  for (int r = 0; r < 3; r++) {
    I32(lens)[r] = 20 + r;
    int32_t row[4] = {0, 1, -1, -1};
    memcpy(I32(bt) + r * 4, row, sizeof row);
  }
  ixl_tensor *pg4 = tnew(ctx, IXL_U8, 2, 4, 1536, 0); /* 4 pages of 16 mxfp4 keys */
  ixl_tensor_fill_bytes(ctx, pg4, 0x11);
  ixl_qk qk = paged_qk(&p, &g);
  qk.k_pages = pg4;
  ixl_tensor *out = tnew(ctx, IXL_F32, 2, 3, 64, 0), *out_small = tnew(ctx, IXL_F32, 2, 3, 21, 0);
  ixl_tensor *bt2 = tnew(ctx, IXL_I32, 2, 2, 4, 0), *lens4 = tnew(ctx, IXL_I32, 1, 4, 0, 0);
  CHECK_OK(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens, bt, IXL_REDUCE_FP32, out));
  ixl_qk bad = qk;
  bad.k_codes = p.k_codes;
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &bad, p.w32, lens, bt, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "k_codes and k_scales must be NULL for paged rows");
  bad = qk;
  bad.page_size = 0;
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &bad, p.w32, lens, bt, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "page_size = 0: must be > 0");
  bad = qk;
  bad.page_size = 64; /* 64 * 68 > the stride */
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &bad, p.w32, lens, bt, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "(page stride)");
  ixl_tensor *odd = tnew(ctx, IXL_U8, 2, 4, 1100, 0);
  bad = qk;
  bad.k_pages = odd;
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &bad, p.w32, lens, bt, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "k_pages: shape[1] (page stride) = 1100: must be a multiple of 512");
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens4, bt, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "context_lens: shape[0] = 4, expected 3");
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &qk, p.wbf, lens, bt, IXL_REDUCE_BF16, out),
            IXL_ERR_DTYPE, "out: dtype f32, expected bf16 for the bf16 reduction");
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens, bt2, IXL_REDUCE_FP32, out),
            IXL_ERR_SHAPE, "block_table: shape[0] = 2, expected 3");
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens, bt, IXL_REDUCE_FP32, out_small),
            IXL_ERR_SHAPE, "context_lens[2] = 22: must be <= max_len = 21 (out shape[1])");
  I32(lens)[2] = 65;
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens, bt, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG,
            "context_lens[2] = 65: must be in [0, max_pages * page_size] = [0, 64]");
  I32(lens)[2] = -1;
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens, bt, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "context_lens[2] = -1");
  I32(lens)[2] = 22;
  int64_t np = pg4->shape[0];
  I32(bt)[1 * 4 + 1] = (int32_t)np;
  char msg[128];
  snprintf(msg, sizeof msg, "block_table[1][1] = %lld: must be in [0, num_pages) = [0, %lld)",
           (long long)np, (long long)np);
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens, bt, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, msg);
  I32(bt)[1 * 4 + 1] = -3;
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens, bt, IXL_REDUCE_FP32, out),
            IXL_ERR_INVALID_ARG, "block_table[1][1] = -3");
  I32(bt)[1 * 4 + 1] = 1;
  I32(lens)[1] = 16; /* the second page is no longer used: its entry may be anything */
  I32(bt)[1 * 4 + 1] = -3;
  CHECK_OK(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens, bt, IXL_REDUCE_FP32, out));
  ixl_tensor alias = *out; /* out over the pages it reads (6144 bytes, out 768) */
  alias.data = (uint8_t *)pg4->data + 1024;
  CHECK_ERR(ctx, ixl_dense_logits_paged(ctx, &qk, p.w32, lens, bt, IXL_REDUCE_FP32, &alias),
            IXL_ERR_INVALID_ARG,
            "out overlaps k_pages: an output must not share memory with an input");
  CHECK(((uint8_t *)pg4->data)[1024] == 0x11);
  ixl_tensor *tensors[] = {out, out_small, bt2, lens4, odd, lens, bt, pg4};
  for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) ixl_tensor_free(tensors[i]);
  paged_free(&g);
  problem_free(&p);
  ixl_ctx_free(ctx);
}

TEST(k5_errors) {
  ixl_ctx *ctx = test_ctx(2);
  const int R = 2, N = 64, sbk = 8, nsb = 4;
  problem p;
  problem_make(ctx, &p, IXL_MXFP8, 0, R, 8, N, 0);
  ixl_tensor *ks = tnew(ctx, IXL_I32, 1, R, 0, 0), *ke = tnew(ctx, IXL_I32, 1, R, 0, 0);
  I32(ks)[0] = 0, I32(ks)[1] = 16, I32(ke)[0] = 30, I32(ke)[1] = 64;
  ixl_tensor *ids = tnew(ctx, IXL_I32, 2, R, nsb, 0), *ids3 = tnew(ctx, IXL_I32, 2, R + 1, nsb, 0);
  for (int i = 0; i < R * nsb; i++) I32(ids)[i] = 2 + i % nsb;
  ixl_tensor *out = tnew(ctx, IXL_BF16, 2, R, nsb * sbk, 0),
             *out16 = tnew(ctx, IXL_BF16, 2, R, nsb * 16, 0);
  ixl_tensor *outf = tnew(ctx, IXL_F32, 2, R, nsb * sbk, 0);
  CHECK_OK(ctx, ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_ALIGNED, out));
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &p.qk, p.w32, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_DTYPE, "weights: dtype f32, expected bf16 for the bf16 reduction");
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &p.qk, p.wbf, NULL, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "row_ks: missing tensor");
  ixl_qk q4 = p.qk;
  q4.kv_format = IXL_MXFP4;
  ixl_tensor *qc64 = tnew(ctx, IXL_U8, 3, R, 8, 64);
  q4.q_codes = qc64;
  CHECK_ERR(ctx, ixl_sparse_logits(ctx, &q4, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_SHAPE, "k_codes: shape[1] = 128, expected 64 (the value bytes of mxfp4)");
  ixl_tensor_free(qc64);
  CHECK_ERR(ctx, ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, ids, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "block_table must be NULL for ragged rows");
  CHECK_ERR(ctx, ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, 6, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "sparse_block_kv = 6: must be a power of two in [4, 128]");
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, 256, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "sparse_block_kv = 256");
  CHECK_ERR(ctx, ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, (ixl_ks_mode)2, out),
            IXL_ERR_INVALID_ARG, "ks_mode = 2");
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, out16),
            IXL_ERR_SHAPE,
            "out: shape[1] = 64, expected num_sparse_blocks * sparse_block_kv = 4 * 8 = 32");
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, outf),
            IXL_ERR_DTYPE, "out: dtype f32, expected bf16");
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids3, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_SHAPE, "sparse_ids: shape[0] = 3, expected 2");
  I32(ks)[1] = 13;
  CHECK_ERR(ctx, ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_ALIGNED, out),
            IXL_ERR_INVALID_ARG,
            "row_ks[1] = 13: must be a multiple of sparse_block_kv (8) in the aligned ks_mode");
  CHECK_OK(ctx,
           ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, out));
  I32(ke)[1] = 13; /* empty rows may sit anywhere in aligned mode */
  CHECK_OK(ctx, ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_ALIGNED, out));
  I32(ke)[1] = 65;
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "row_ke[1] = 65: must be <= N (64), the rows of k_codes");
  I32(ke)[1] = 10;
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "row_ke[1] = 10 < row_ks[1] = 13");
  I32(ke)[1] = 64, I32(ks)[0] = -2;
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "row_ks[0] = -2: must be >= 0");
  I32(ks)[0] = 0;
  ixl_tensor alias = *out; /* out over q_codes (2048 bytes, out 128) */
  alias.data = p.q_codes->data;
  CHECK_ERR(
      ctx, ixl_sparse_logits(ctx, &p.qk, p.wbf, ks, ke, NULL, ids, sbk, IXL_KS_UNALIGNED, &alias),
      IXL_ERR_INVALID_ARG, "out overlaps q_codes: an output must not share memory with an input");
  /* paged */
  paged g;
  paged_make(ctx, &p, &g, 16, N);
  ixl_qk qk = paged_qk(&p, &g);
  for (int r = 0; r < R; r++) I32(g.lens)[r] = 0;
  CHECK_OK(ctx,
           ixl_sparse_logits(ctx, &qk, p.wbf, NULL, g.lens, g.bt, ids, sbk, IXL_KS_UNALIGNED, out));
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &qk, p.wbf, ks, g.lens, g.bt, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "row_ks must be NULL for paged rows");
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &qk, p.wbf, NULL, g.lens, NULL, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "block_table: missing tensor");
  I32(g.lens)[1] = 5;
  I32(g.bt)[1 * g.max_pages] = 100000;
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &qk, p.wbf, NULL, g.lens, g.bt, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "block_table[1][0] = 100000: must be in [0, num_pages)");
  I32(g.lens)[1] = g.max_pages * 16 + 16;
  CHECK_ERR(ctx,
            ixl_sparse_logits(ctx, &qk, p.wbf, NULL, g.lens, g.bt, ids, sbk, IXL_KS_UNALIGNED, out),
            IXL_ERR_INVALID_ARG, "row_ke[1] = ");
  paged_free(&g);
  ixl_tensor *tensors[] = {ks, ke, ids, ids3, out, out16, outf};
  for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) ixl_tensor_free(tensors[i]);
  problem_free(&p);
  ixl_ctx_free(ctx);
}

/* logits/k1_window.h, the CUDA K1 kernels' per-row window in a chunk, against its definition
 * by enumeration: key n of the row (ks' <= n < ke', the clamped range) is read by the chunk
 * [c0, chunk_hi) exactly when its output column (n, or n - ks' compressed) lies in the chunk,
 * and the window is that set as one range (empty: hi == lo). */
TEST(k1_window_is_the_keys_of_the_chunks_columns) {
  int nonempty = 0;
  for (int it = 0; it < 20000; it++) {
    const int64_t N = rand_range(0, 70), c0 = rand_range(0, 80);
    const int64_t chunk_hi = c0 + rand_range(0, 40);
    const int64_t ks = rand_range(-5, N + 5), ke = rand_range(-5, N + 5);
    const int compressed = (int)rand_range(0, 1);
    const ixl_k1_window w = ixl_k1_window_of(ks, ke, N, compressed, c0, chunk_hi);
    const int64_t ksr = ks < 0 ? 0 : ks > N ? N : ks, ker = ke < ksr ? ksr : ke > N ? N : ke;
    int64_t lo = -1, hi = -1, count = 0;
    for (int64_t n = ksr; n < ker; n++) {
      const int64_t col = compressed ? n - ksr : n;
      if (col < c0 || col >= chunk_hi) continue;
      if (lo < 0) lo = n;
      hi = n + 1;
      count++;
    }
    int ok = w.keys == ker - ksr && w.co == (compressed ? ksr : 0) && w.hi >= w.lo;
    if (count) ok &= w.lo == lo && w.hi == hi && hi - lo == count;
    else ok &= w.hi == w.lo;
    nonempty += count > 0;
    CHECK_MSG(ok,
              "ks %lld ke %lld N %lld compressed %d chunk [%lld, %lld): lo %lld hi %lld co %lld "
              "keys %lld (want [%lld, %lld) of %lld)",
              (long long)ks, (long long)ke, (long long)N, compressed, (long long)c0,
              (long long)chunk_hi, (long long)w.lo, (long long)w.hi, (long long)w.co,
              (long long)w.keys, (long long)lo, (long long)hi, (long long)count);
    if (!ok) break;
  }
  CHECK(nonempty > 1000);
}

int main(void) {
  seed_ = test_seed();
  rand_seed(RAND_XORSHIFT64, seed_ * 0x9E3779B97F4A7C15ull + 1);
  list_cpu_variants();
  RUN(bf16_fma_is_exact);
  RUN(dot_reference_known_values);
  RUN(k1_matches_float64);
  RUN(k1_every_cpu_variant_equals_reference);
  RUN(k1_threads_do_not_change_bits);
  RUN(k2_equals_k1_on_the_same_keys);
  RUN(k5_equals_k1_bf16_at_the_same_positions);
  RUN(k5_paged_equals_k2_bf16_at_the_same_positions);
  RUN(k5_hostile_ids_read_nothing_outside);
  RUN(empty_rows_and_nan_scales);
  RUN(prescale_limits_with_saturated_codes);
  RUN(k1_errors);
  RUN(k2_errors);
  RUN(k5_errors);
  RUN(k1_window_is_the_keys_of_the_chunks_columns);
  DONE();
}
