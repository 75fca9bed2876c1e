/* test_cuda_logits_mxk1.c - K1 (mxfp4, H 32) on logits v2's warp-specialized kernel
 * (IXL_LOGITS_V2_MX_WS, kernels/logits/logits_v2_mxk1_sm90.cu) against the CPU reference, on
 * what test_cuda_logits's K1 cases leave out for it (their N is often not a multiple of 4, which
 * the kernel's tensor maps need): CTAs of 4 rows whose windows are disjoint, overlap or are
 * empty, R not a multiple of 4, several chunks a row (N up to 20K) and rings wrapped many times,
 * both layouts, the slow paths (key and query exponents outside the fast windows, NaN scale
 * bytes, tiny weights). bf16: bit for bit the CPU's (+0 == -0, NaN == NaN); fp32: within
 * 2 (H - 1) 2^-24 T (T: the same logits on |q|, |k|, |w|; only the head sum's order differs), NaN
 * where the CPU has NaN, -inf masks exact. Every output is poisoned first (0xFF: NaN).
 *
 * IXL_LOGITS_V2_MX_WS as the environment sets it (unset: the default variant, i since session 9;
 * 0: the kernels before, as a control); pins logits v2 (tests/c/mx_test.h's harness). Skips
 * (passes) without a CUDA GPU of sm_90 or newer; IXL_TEST_HOST_AS_DEVICE=1 runs the CPU against
 * itself (this file's logic, no GPU). IXL_TEST_SMALL=1 (the compute-sanitizer runs) keeps tiny
 * shapes; IXL_TEST_SEED sets the seed; IXL_TEST_ONLY=WORD,... the cases whose names contain one. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "logits/v2_mxk1.cuh"
#include "mx_test.h"
#include "numerics/scalar.h"

typedef struct {
  const char *name;
  int64_t R, N;
  int ranges;         /* 0: random, 1: causal (row r sees the first N - R + r + 1), 2: CTA mix */
  int klo, khi, knan; /* key exponent bytes and NaN share (%) */
  int qlo, qhi, qnan; /* query */
  int tiny_w;         /* odd rows: weights of magnitude 2^-100 .. 2^-81 (the slow weight path) */
  int kpat;           /* 1: quick.lua-like key groups with rare overflows (replaces klo..khi) */
} k1c;

/* kpat 1: key group bytes (129, 128, 126..127, 126..127), so the CTA's offsets are G = (1, 1,
 * 0, 0) and every slot folds with a_g <= 3; each slot has, with probability 1/100 each, group 0
 * raised by 2, group 1 by 3, group 3 by 3 (a_g = 4 where the slot's minimum is 126): a tile's
 * overflow groups vary over the subsets of {0, 1, 3} (WS=i's compacted overflow blocks). */
static void fill_key_pattern(uint32_t *w, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t e0 = 129, e1 = 128, e2 = (uint32_t)rand_range(126, 127);
    uint32_t e3 = (uint32_t)rand_range(126, 127);
    if (rand_range(0, 99) == 0) e0 += 2;
    if (rand_range(0, 99) == 0) e1 += 3;
    if (rand_range(0, 99) == 0) e3 += 3;
    w[i] = e0 | e1 << 8 | e2 << 16 | e3 << 24;
  }
}

static void run_case(const k1c *c) {
  const int H = 32;
  const int64_t R = c->R, N = c->N;
  ixl_tensor *qc = tn(IXL_U8, 3, R, H, 64, IXL_HOST), *qs = tn(IXL_I32, 2, R, H, 0, IXL_HOST);
  ixl_tensor *wb = tn(IXL_BF16, 2, R, H, 0, IXL_HOST), *wf = tn(IXL_F32, 2, R, H, 0, IXL_HOST);
  ixl_tensor *kc = tn(IXL_U8, 2, N, 64, 0, IXL_HOST), *ksc = tn(IXL_I32, 1, N, 0, 0, IXL_HOST);
  ixl_tensor *ks = tn(IXL_I32, 1, R, 0, 0, IXL_HOST), *ke = tn(IXL_I32, 1, R, 0, 0, IXL_HOST);
  rand_bytes(qc->data, R * H * 64);
  rand_bytes(kc->data, N * 64);
  fill_scales(qs->data, R * H, c->qlo, c->qhi, c->qnan);
  fill_scales(ksc->data, N, c->klo, c->khi, c->knan);
  if (c->kpat) fill_key_pattern(ksc->data, N);
  uint16_t *wbp = wb->data;
  float *wfp = wf->data;
  for (int64_t i = 0; i < R * H; i++) {
    double x = rand_unit() * 2.0 - 1.0;
    if (c->tiny_w && (i / H) % 2) x = ldexp(1.0 + rand_unit(), (int)rand_range(-100, -81));
    wbp[i] = ixl_f32_to_bf16((float)x);
    wfp[i] = ixl_bf16_to_f32(wbp[i]) * (float)(1.0 + 0.25 * rand_unit()); /* fp32-only bits */
  }
  /* |q|, |k|, |w| for the fp32 tolerance: e2m1's sign is bit 3 of each nibble */
  ixl_tensor *aqc = tn(IXL_U8, 3, R, H, 64, IXL_HOST), *akc = tn(IXL_U8, 2, N, 64, 0, IXL_HOST);
  ixl_tensor *awf = tn(IXL_F32, 2, R, H, 0, IXL_HOST);
  for (int64_t i = 0; i < R * H * 64; i++)
    ((uint8_t *)aqc->data)[i] = ((uint8_t *)qc->data)[i] & 0x77;
  for (int64_t i = 0; i < N * 64; i++) ((uint8_t *)akc->data)[i] = ((uint8_t *)kc->data)[i] & 0x77;
  for (int64_t i = 0; i < R * H; i++) ((float *)awf->data)[i] = fabsf(wfp[i]);
  int32_t *ksp = ks->data, *kep = ke->data;
  int64_t max_len = 0;
  for (int64_t r = 0; r < R; r++) {
    int64_t a, b;
    if (c->ranges == 1) {
      a = 0;
      b = N - R + r + 1 > 0 ? N - R + r + 1 : 1;
    } else if (c->ranges == 2) { /* within a CTA of 4: disjoint, nested, empty, whole */
      switch (r % 4) {
        case 0: a = 0, b = rand_range(1, N / 3); break;
        case 1: a = rand_range(N / 2, N - 1), b = rand_range(a + 1, N); break;
        case 2: a = b = rand_range(0, N); break;
        default: a = rand_range(0, N / 8), b = N - rand_range(0, N / 8);
      }
    } else {
      a = rand_range(0, N - 1);
      b = rand_range(a, N);
      if (r % 7 == 3) b = a; /* an empty row */
    }
    ksp[r] = (int32_t)a;
    kep[r] = (int32_t)b;
    max_len = b - a > max_len ? b - a : max_len;
  }
  ixl_tensor *dqc = to_dev(qc), *dqs = to_dev(qs), *dwb = to_dev(wb), *dwf = to_dev(wf),
             *dkc = to_dev(kc), *dksc = to_dev(ksc), *dks = to_dev(ks), *dke = to_dev(ke);
  ixl_qk hq = {qc, qs, kc, ksc, NULL, 0, IXL_MXFP4}, aq = {aqc, qs, akc, ksc, NULL, 0, IXL_MXFP4};
  ixl_qk dq = {dqc, dqs, dkc, dksc, NULL, 0, IXL_MXFP4};
  for (int red = 0; red < 2; red++)
    for (int lay = 0; lay < 2; lay++) {
      const int bf16 = red == IXL_REDUCE_BF16;
      const ixl_layout layout = lay ? IXL_LAYOUT_COMPRESSED : IXL_LAYOUT_FULL;
      const int64_t C = lay ? max_len + 3 : N; /* compressed: 3 extra columns, all -inf */
      const ixl_dtype odt = bf16 ? IXL_BF16 : IXL_F32;
      ixl_tensor *cpu = tn(odt, 2, R, C, 0, IXL_HOST), *gpu = tn(odt, 2, R, C, 0, IXL_HOST);
      ixl_tensor *dout = tn(odt, 2, R, C, 0, IXL_DEVICE), *tol = NULL;
      CHECK_OK(g, ixl_dense_logits(g, &hq, bf16 ? wb : wf, ks, ke, layout, 1,
                                   (ixl_reduction)red, cpu));
      if (!bf16) {
        tol = tn(IXL_F32, 2, R, C, 0, IXL_HOST);
        CHECK_OK(g, ixl_dense_logits(g, &aq, awf, ks, ke, layout, 1, IXL_REDUCE_FP32, tol));
      }
      CHECK_OK(g, ixl_tensor_fill_bytes(g, dout, 0xFF)); /* poison: an unwritten column is NaN */
      CHECK_OK(g, ixl_dense_logits(g, &dq, bf16 ? dwb : dwf, dks, dke, layout, 1,
                                   (ixl_reduction)red, dout));
      CHECK_OK(g, ixl_tensor_copy(g, gpu, dout));
      const double eps = 2.0 * (H - 1) * 0x1p-24;
      int64_t bad = 0, defined = 0;
      for (int64_t r = 0; r < R; r++)
        for (int64_t col = 0; col < C; col++) {
          const int64_t i = r * C + col;
          int ok;
          if (bf16) {
            const uint16_t gv = ((uint16_t *)gpu->data)[i], cv = ((uint16_t *)cpu->data)[i];
            ok = same16(gv, cv);
            defined += cv != 0xFF80;
            if (!ok && bad < 4)
              fprintf(stderr,
                      "  %s bf16 %s: row %lld col %lld: GPU 0x%04x CPU 0x%04x (seed %llu)\n",
                      c->name, lay ? "compressed" : "full", (long long)r, (long long)col, gv, cv,
                      (unsigned long long)g_seed);
          } else {
            const float gv = ((float *)gpu->data)[i], cv = ((float *)cpu->data)[i];
            const float tv = ((float *)tol->data)[i];
            /* T = +inf with no NaN input: the sum of |terms| overflows, and fp32's head order is
             * free (SPEC 3), so overflow to +-inf and inf - inf = NaN depend on the order: any
             * value passes (seed 1796190516: CPU NaN, the kernel's lane order -inf). A NaN T (a
             * NaN scale, or 0 * inf) propagates in any order and stays strict. */
            if (isinf(tv) && tv > 0) ok = 1;
            else if (isnan(cv) || isnan(gv)) ok = isnan(cv) && isnan(gv);
            else if (isinf(cv) || isinf(gv)) ok = gv == cv;
            else ok = fabs((double)gv - (double)cv) <= eps * (double)tv;
            defined += !isinf(cv);
            if (!ok && bad < 4)
              fprintf(stderr, "  %s fp32 %s: row %lld col %lld: GPU %a CPU %a (T %a, seed %llu)\n",
                      c->name, lay ? "compressed" : "full", (long long)r, (long long)col, gv, cv,
                      tv, (unsigned long long)g_seed);
          }
          bad += !ok;
        }
      printf("# %s %s %s: R %lld N %lld cols %lld: %lld defined, %lld differ\n", c->name,
             bf16 ? "bf16" : "fp32", lay ? "compressed" : "full", (long long)R, (long long)N,
             (long long)C, (long long)defined, (long long)bad);
      CHECK_MSG(bad == 0, "%s %s %s: %lld of %lld differ (seed %llu)", c->name,
                bf16 ? "bf16" : "fp32", lay ? "compressed" : "full", (long long)bad,
                (long long)(R * C), (unsigned long long)g_seed);
      ixl_tensor *ts[] = {cpu, gpu, dout, tol};
      for (size_t k = 0; k < 4; k++) ixl_tensor_free(ts[k]);
    }
  ixl_tensor *ts[] = {qc, qs, wb, wf, kc, ksc, ks, ke, aqc, akc, awf,
                      dqc, dqs, dwb, dwf, dkc, dksc, dks, dke};
  for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) ixl_tensor_free(ts[k]);
}


/* ---------------------------------------------------------------- host rules of the s8 path
 * (v2_mxk1.cuh, WS=s; no GPU needed). (1) ixl_mxk1_s8_widen against the value of every code:
 * all 2^16 halves of a word, every shift. (2) The exact-dot claim: for pairs of a query head
 * and a key slot (random and adversarial codes: all +-6, cancellations; exponents at the
 * folds' edges, G in {0, 1}^4), whenever both fold, I 2^(qmin - 129) 2^(kb - 127) from the
 * emulated IGMMA (8 chained k32 blocks: main with min(a, 3), overflow where a = 4) is bit for
 * bit the CPU's (p0 + p1) + (p2 + p3), and |I| < 2^22; the folds' own rules too. */
static float e2m1v(uint32_t nib) { return ixl_cvt_e2m1_to_f32((uint8_t)(nib & 15u)); }

static int s8_pair(const uint8_t *qc, uint32_t qw, const uint8_t *kc, uint32_t kw, uint32_t G,
                   int *folded) {
  /* the CPU's dot (SPEC 3) */
  float p[4];
  for (int g = 0; g < 4; g++) {
    float sg = 0.0f;
    for (int e = 0; e < 32; e++) {
      const int i = 32 * g + e;
      sg += e2m1v(qc[i / 2] >> (4 * (i & 1))) * e2m1v(kc[i / 2] >> (4 * (i & 1)));
    }
    const int qb = (int)((qw >> (8 * g)) & 0xFFu), kb = (int)((kw >> (8 * g)) & 0xFFu);
    p[g] = qb == 0xFF || kb == 0xFF ? NAN : ixl_scale_pow2f(sg, qb + kb - 254);
  }
  const float cpu = (p[0] + p[1]) + (p[2] + p[3]);
  uint32_t ksh, k0, qsh;
  int qmin;
  const int kf = ixl_mxk1_slot_s8(kw, G, &ksh, &k0), qf = ixl_mxk1_col_s8(qw, G, &qsh, &qmin);
  *folded = kf && qf;
  int bad = 0;
  /* the folds' rules: shifts in range, and exactly the exponents' offsets */
  for (int g = 0; g < 4 && kf; g++) {
    const int a = (int)((ksh >> (8 * g)) & 0xFFu);
    bad += a > 4 || (int)((kw >> (8 * g)) & 0xFFu) - (int)((G >> (8 * g)) & 0xFFu) !=
                        (int)(k0 >> 23) + a;
  }
  for (int g = 0; g < 4 && qf; g++) {
    const int b = (int)((qsh >> (8 * g)) & 0xFFu);
    bad += b > 3 || (int)((qw >> (8 * g)) & 0xFFu) + (int)((G >> (8 * g)) & 0xFFu) != qmin + b;
  }
  if (!*folded) return bad;
  int64_t I = 0;
  for (int g = 0; g < 4; g++) {
    const int a = (int)((ksh >> (8 * g)) & 0xFFu), b = (int)((qsh >> (8 * g)) & 0xFFu);
    for (int w = 0; w < 4; w++) {
      uint32_t x, y, kl, kh, ql, qh;
      memcpy(&x, kc + 16 * g + 4 * w, 4);
      memcpy(&y, qc + 16 * g + 4 * w, 4);
      ixl_mxk1_s8_widen(x, a < 3 ? a : 3, &kl, &kh);
      ixl_mxk1_s8_widen(y, b, &ql, &qh);
      for (int j = 0; j < 4; j++) {
        const int64_t t = (int64_t)(int8_t)(kl >> (8 * j)) * (int8_t)(ql >> (8 * j)) +
                          (int64_t)(int8_t)(kh >> (8 * j)) * (int8_t)(qh >> (8 * j));
        I += a == 4 ? 2 * t : t; /* main block, plus the overflow block's copy */
      }
    }
  }
  bad += I >= (1 << 22) || I <= -(1 << 22);
  const float hc = ixl_scale_pow2f(1.0f, qmin - 129);
  const float dot = ((float)I * hc) * ixl_bits_f32(k0);
  if (!(dot == cpu || (isnan(dot) && isnan(cpu)))) {
    if (bad < 4)
      fprintf(stderr, "  s8 dot: qw %08x kw %08x G %08x: %a, CPU %a\n", qw, kw, G, dot, cpu);
    bad++;
  }
  return bad;
}

static int host_rules(void) {
  int bad = 0;
  /* (1) the widening, exhaustively */
  for (int a = 0; a < 4; a++)
    for (uint32_t x = 0; x < 65536u; x++) {
      uint32_t lo, hi;
      ixl_mxk1_s8_widen(x | (x << 16), a, &lo, &hi);
      for (int j = 0; j < 4; j++) {
        const int want = (int)(2.0f * e2m1v(x >> (4 * j)) * (float)(1 << a));
        bad += (int8_t)(lo >> (8 * j)) != want || (int8_t)(hi >> (8 * j)) != want;
      }
    }
  printf("# host_rules: s8 widening %d mismatches\n", bad);
  /* (2) pairs */
  int64_t pairs = 0, folded = 0;
  uint8_t qc[64], kc[64];
  for (int it = 0; it < 200000; it++) {
    const int mode = it % 5;
    for (int i = 0; i < 64; i++) {
      uint32_t r = (uint32_t)rand_u64();
      if (mode == 1) r = 0x77; /* every value +6 */
      if (mode == 2) r = (r & 0x88) | 0x77; /* every value +-6 */
      if (mode == 3) r = (r & 0x88) | (r & 0x77 ? 0x77 : 0x11); /* +-6 and +-0.5 */
      qc[i] = (uint8_t)r;
      kc[i] = (uint8_t)(mode == 4 ? r ^ 0x88 : (uint32_t)rand_u64()); /* 4: cancellations */
      if (mode >= 1 && mode <= 3) kc[i] = (uint8_t)((rand_u64() & 0x88) | 0x77);
    }
    const uint32_t G = (uint32_t)(rand_u64() & 0x01010101u);
    /* exponents: a base in (or at the edge of) the combine window, group offsets 0..5 */
    const int qb0 = (int)rand_range(98, 156), kb0 = (int)rand_range(98, 156);
    uint32_t qw = 0, kw = 0;
    for (int g = 0; g < 4; g++) {
      qw |= (uint32_t)(qb0 + (int)rand_range(0, it % 3 ? 3 : 5)) << (8 * g);
      kw |= (uint32_t)(kb0 + (int)rand_range(0, it % 3 ? 5 : 7)) << (8 * g);
    }
    if (it % 97 == 0) kw |= 0xFFu << (8 * (it % 4)); /* NaN key scale: never folds */
    int f;
    bad += s8_pair(qc, qw, kc, kw, G, &f);
    pairs++;
    folded += f;
  }
  printf("# host_rules: %lld pairs, %lld folded (s8 path), %d mismatches in all\n",
         (long long)pairs, (long long)folded, bad);
  return bad == 0 && folded > pairs / 10;
}

static void run_one(const void *c) { run_case((const k1c *)c); }

int main(void) {
  /* the host rules first: they need no GPU, so they run (and count) on every machine */
  mx_test_host("host_rules", host_rules);
  /* the switch is read once a process, at the first K1 call: unset here runs the default */
  const int st = mx_test_start("mxk1", "IXL_LOGITS_V2_MX_WS", NULL);
  if (st <= 0) return st < 0;
  static const k1c big[] = {
      /* name, R, N, ranges, keys lo hi nan, query lo hi nan, tiny w */
      {"causal_3_chunks", 37, 12288, 1, 119, 135, 0, 119, 135, 0, 0, 0},
      {"cta_mix_disjoint_rows", 23, 9000, 2, 119, 135, 0, 119, 135, 0, 0, 0},
      {"random_rows_20k", 14, 20000, 0, 121, 133, 0, 121, 133, 0, 0, 0},
      {"slow_paths_keys_queries_nan", 13, 4000, 0, 40, 215, 3, 60, 200, 2, 1, 0},
      {"fold_edges", 10, 4000, 2, 95, 160, 0, 98, 156, 0, 1, 0},
      /* narrow exponents: WS=s's s8 path on the tiles whose 64 keys fold (keys 125..129
       * with the CTA's offsets: most do, some not, so both paths meet in one CTA) */
      {"s8_fold_causal", 37, 12288, 1, 125, 129, 0, 126, 128, 0, 0, 0},
      {"s8_fold_random_rows", 14, 20000, 0, 124, 129, 0, 126, 128, 0, 0, 0},
      {"s8_fold_cta_mix", 23, 9000, 2, 126, 129, 0, 127, 128, 0, 0, 0},
      /* every tile folds (keys 126..129, queries 127..128): the s8-only ablations t and y
       * (8 rows a CTA) are exact here */
      {"s8_all_fold_causal", 37, 12288, 1, 126, 129, 0, 127, 128, 0, 0, 0},
      /* every tile folds, its overflow groups vary (kpat 1; session 9's WS=i skips the others) */
      {"s8_ovf_groups_causal", 37, 12288, 1, 0, 0, 0, 127, 128, 0, 0, 1},
  };
  static const k1c small[] = {
      {"small_cta_mix", 6, 700, 2, 119, 135, 0, 119, 135, 0, 0, 0},
      {"small_slow_paths", 5, 400, 0, 40, 215, 3, 60, 200, 2, 1, 0},
      {"small_s8_fold", 6, 700, 2, 125, 129, 0, 126, 128, 0, 0, 0},
      {"small_s8_ovf_groups", 9, 700, 1, 0, 0, 0, 127, 128, 0, 0, 1},
  };
  const k1c *cs = g_small ? small : big;
  const int n = g_small ? (int)(sizeof small / sizeof small[0]) : (int)(sizeof big / sizeof big[0]);
  for (int i = 0; i < n; i++)
    if (test_wanted(cs[i].name)) mx_test_case(cs[i].name, i, run_one, &cs[i]);
  return mx_test_end();
}
