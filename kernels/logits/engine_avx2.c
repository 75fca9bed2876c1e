/* logits/engine_avx2.c - the CPU logits engine's fast path (AVX2 + FMA, chosen by the
 * `fast` logits variant), bitwise equal to the reference path of engine.c.
 *
 * Per block of IXL_KBLOCK keys, the key values are decoded once into strips of 16 positions
 * ([strip][d][16] floats; MX values already times their group's 2^(ke - 127) where that is
 * exact, see ixl_engine_pack); a 4x16 register tile then computes the group partials of 4
 * heads x 16 positions with one fma chain per group in increasing element order. The products
 * are exact (<= 8 significant bits), so each fma rounds exactly as the reference's add does,
 * and the partials are bitwise the reference's (times the key scale) for every format. The
 * epilogue applies the query scale (one exact power-of-two multiply, or the reference's scalar
 * formula for blocks outside the exact range and NaN scales), relu, the weights and the head
 * reduction; the bf16 reduction runs 8 positions at a time as an fp32 TwoSum with a correction
 * on bf16 midpoints, and falls back to the double-precision reference per lane when a product
 * could be inexact in fp32 (underflow) or a value is not finite. The tests compare both paths
 * bitwise. */
#include "logits/engine_impl.h"

#include <float.h>

#if IXL_HAVE_X86
#include <immintrin.h>
#endif

int ixl_engine_fast_available(void) {
#if IXL_HAVE_X86 && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

#if IXL_HAVE_X86

/* Transposes a 16 x 16 byte block: dst[j] = column j of the rows src[0..15]. */
IXL_AVX2 static inline void transpose16(const __m128i r[16], __m128i w[16]) {
  __m128i t[16], u[16], v[16];
  for (int k = 0; k < 8; k++) {
    t[2 * k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; k++) { /* rows 4k..4k+3 */
    u[4 * k + 0] = _mm_unpacklo_epi16(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm_unpackhi_epi16(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm_unpacklo_epi16(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm_unpackhi_epi16(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int k = 0; k < 2; k++) { /* rows 8k..8k+7 */
    for (int c = 0; c < 4; c++) {
      v[8 * k + 2 * c] = _mm_unpacklo_epi32(u[8 * k + c], u[8 * k + 4 + c]);
      v[8 * k + 2 * c + 1] = _mm_unpackhi_epi32(u[8 * k + c], u[8 * k + 4 + c]);
    }
  }
  for (int c = 0; c < 8; c++) {
    w[2 * c] = _mm_unpacklo_epi64(v[c], v[8 + c]);
    w[2 * c + 1] = _mm_unpackhi_epi64(v[c], v[8 + c]);
  }
}

/* 16 int8 values (twice the e2m1 value) times the keys' factors f0 (keys 0-7), f1 (8-15) -> 16
 * floats at dst. Exact: the factors are powers of two in range (ixl_engine_pack). */
IXL_AVX2 static inline void store_e2m1x2(__m128i q, __m256 f0, __m256 f1, float *dst) {
  _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), f0));
  _mm256_storeu_ps(
      dst + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), f1));
}

/* mxfp4 strip: 16 keys' 64 code bytes -> [128][16] floats, value * fk[group][key]. */
IXL_AVX2 void ixl_engine_pack_strip_mxfp4(const uint8_t *const codes[STRIP],
                                          const float fk[4][STRIP], float *dst) {
  /* e2m1 codes 0..15 as twice their value (exact in int8); -0 -> 0 */
  const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i lo4 = _mm_set1_epi8(0x0F);
  for (int blk = 0; blk < 4; blk++) { /* bytes 16 * blk .. + 15 of every key */
    __m128i r[16], w[16];
    for (int i = 0; i < STRIP; i++)
      r[i] =
          codes[i] ? _mm_loadu_si128((const __m128i *)(codes[i] + 16 * blk)) : _mm_setzero_si128();
    transpose16(r, w);
    /* bytes 16 * blk .. + 15 hold elements 32 * blk .. + 31: group blk */
    const __m256 half = _mm256_set1_ps(0.5f);
    const __m256 f0 = _mm256_mul_ps(half, _mm256_loadu_ps(fk[blk])),
                 f1 = _mm256_mul_ps(half, _mm256_loadu_ps(fk[blk] + 8));
    for (int j = 0; j < 16; j++) { /* byte 16 * blk + j holds elements 2 * that and + 1 */
      int d = 2 * (16 * blk + j);
      store_e2m1x2(_mm_shuffle_epi8(lut, _mm_and_si128(w[j], lo4)), f0, f1, dst + d * STRIP);
      store_e2m1x2(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(w[j], 4), lo4)), f0, f1,
                   dst + (d + 1) * STRIP);
    }
  }
}

/* Group partials of 4 heads x 16 positions: c[g][i][n] = sum over d in group g of
 * a[d][i] * b[d][n], one fma chain per (g, i, n) in increasing d. glen: 32 (MX) or 128 (fp8). */
IXL_AVX2 static void tile_4x16(const float *a, const float *b, int glen, float *c) {
  for (int g0 = 0; g0 < IXL_D; g0 += glen) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    const float *ap = a + g0 * MR, *bp = b + g0 * STRIP;
#pragma GCC unroll 4
    for (int d = 0; d < glen; d++, ap += MR, bp += STRIP) {
      __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
      __m256 a0 = _mm256_broadcast_ss(ap), a1 = _mm256_broadcast_ss(ap + 1);
      __m256 a2 = _mm256_broadcast_ss(ap + 2), a3 = _mm256_broadcast_ss(ap + 3);
      c00 = _mm256_fmadd_ps(a0, b0, c00);
      c01 = _mm256_fmadd_ps(a0, b1, c01);
      c10 = _mm256_fmadd_ps(a1, b0, c10);
      c11 = _mm256_fmadd_ps(a1, b1, c11);
      c20 = _mm256_fmadd_ps(a2, b0, c20);
      c21 = _mm256_fmadd_ps(a2, b1, c21);
      c30 = _mm256_fmadd_ps(a3, b0, c30);
      c31 = _mm256_fmadd_ps(a3, b1, c31);
    }
    float *cc = c + (g0 / glen) * MR * STRIP;
    _mm256_storeu_ps(cc + 0, c00);
    _mm256_storeu_ps(cc + 8, c01);
    _mm256_storeu_ps(cc + 16, c10);
    _mm256_storeu_ps(cc + 24, c11);
    _mm256_storeu_ps(cc + 32, c20);
    _mm256_storeu_ps(cc + 40, c21);
    _mm256_storeu_ps(cc + 48, c30);
    _mm256_storeu_ps(cc + 56, c31);
  }
}

/* relu(x) = x < 0 ? 0 : x: vmaxps returns its second operand when either is NaN or both are
 * zeros, so NaN and -0 pass through as in ixl_relu. */
IXL_AVX2 static inline __m256 relu8(__m256 x) { return _mm256_max_ps(_mm256_setzero_ps(), x); }

/* bf16(x) for 8 floats, round to nearest even (NaN lanes are caught by the caller). */
IXL_AVX2 static inline __m256 bf16_round8(__m256 x) {
  __m256i b = _mm256_castps_si256(x);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  b = _mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
  return _mm256_castsi256_ps(_mm256_and_si256(b, _mm256_set1_epi32((int)0xffff0000u)));
}

/* bf16_fma(w, v, s) for 8 lanes with one rounding: p = w*v is exact in fp32 when it is a
 * normal number (16 significant bits); TwoSum gives hi + lo = p + s exactly; hi rounds to
 * bf16 by nearest even unless it sits on a midpoint with lo != 0. *bad gets the lanes where
 * the premises fail (p below the normal range with nonzero factors, anything not finite). */
IXL_AVX2 static inline __m256 bf16_fma8(__m256 w, __m256 v, __m256 s, int *bad) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 p = _mm256_mul_ps(w, v);
  __m256 hi = _mm256_add_ps(p, s);
  __m256 bb = _mm256_sub_ps(hi, p);
  __m256 lo = _mm256_add_ps(_mm256_sub_ps(p, _mm256_sub_ps(hi, bb)), _mm256_sub_ps(s, bb));
  __m256i hb = _mm256_castps_si256(hi);
  __m256i himask = _mm256_set1_epi32((int)0xffff0000u);
  __m256i trunc = _mm256_and_si256(hb, himask);
  __m256i rnd = _mm256_castps_si256(bf16_round8(hi));
  __m256i mid = _mm256_cmpeq_epi32(_mm256_and_si256(hb, _mm256_set1_epi32(0xffff)),
                                   _mm256_set1_epi32(0x8000));
  __m256i lonz = _mm256_castps_si256(_mm256_cmp_ps(lo, zero, _CMP_NEQ_OQ));
  /* same sign: the exact value lies beyond the midpoint, away from zero */
  __m256i diff = _mm256_srai_epi32(_mm256_xor_si256(hb, _mm256_castps_si256(lo)), 31);
  __m256i away = _mm256_add_epi32(trunc, _mm256_set1_epi32(0x10000));
  __m256i dir = _mm256_blendv_epi8(away, trunc, diff);
  __m256i res = _mm256_blendv_epi8(rnd, dir, _mm256_and_si256(mid, lonz));
  __m256 finite = _mm256_cmp_ps(_mm256_and_ps(hi, absmask), _mm256_set1_ps(FLT_MAX), _CMP_LE_OQ);
  __m256 small = _mm256_cmp_ps(_mm256_and_ps(p, absmask), _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ);
  __m256 zf = _mm256_or_ps(_mm256_cmp_ps(v, zero, _CMP_EQ_OQ), _mm256_cmp_ps(w, zero, _CMP_EQ_OQ));
  __m256 badm = _mm256_or_ps(_mm256_andnot_ps(finite, _mm256_castsi256_ps(_mm256_set1_epi32(-1))),
                             _mm256_andnot_ps(zf, small));
  *bad = _mm256_movemask_ps(badm);
  return _mm256_castsi256_ps(res);
}

/* s = bf16_fma(w, bf16(relu(dot)), s) for 8 positions, exact lane fallback where needed. */
IXL_AVX2 static inline void bf16_step8(float wv, __m256 dot, float *s) {
  __m256 sv = _mm256_loadu_ps(s);
  int bad;
  __m256 r = bf16_fma8(_mm256_set1_ps(wv), bf16_round8(relu8(dot)), sv, &bad);
  bad |= _mm256_movemask_ps(_mm256_cmp_ps(dot, dot, _CMP_UNORD_Q));
  if (bad) {
    float dl[8], rl[8];
    _mm256_storeu_ps(dl, dot);
    _mm256_storeu_ps(rl, r);
    for (int l = 0; l < 8; l++)
      if (bad >> l & 1) rl[l] = ixl_bf16_fma_ref(wv, ixl_bf16_roundf(ixl_relu(dl[l])), s[l]);
    r = _mm256_loadu_ps(rl);
  }
  _mm256_storeu_ps(s, r);
}

IXL_AVX2 static inline __m256 bf16_add8(__m256 a, __m256 b) {
  int bad;
  __m256 r = bf16_fma8(_mm256_set1_ps(1.0f), a, b, &bad);
  if (bad) {
    float al[8], bl[8], rl[8];
    _mm256_storeu_ps(al, a);
    _mm256_storeu_ps(bl, b);
    _mm256_storeu_ps(rl, r);
    for (int l = 0; l < 8; l++)
      if (bad >> l & 1) rl[l] = ixl_bf16_add_ref(al[l], bl[l]);
    r = _mm256_loadu_ps(rl);
  }
  return r;
}

/* Scalar epilogue of one head tile (keys not prescaled, or a 0xFF scale on the query side):
 * the reference's formula on the tile's partials. */
static void tile_dots_scalar(const ixl_engine *e, const worker *w, int64_t li, int64_t h0,
                             int s0, const float *c, float dots[MR][STRIP]) {
  for (int i = 0; i < MR; i++) {
    const int32_t *qe = e->qe + ((li * e->H) + h0 + i) * 4;
    for (int n = 0; n < STRIP; n++) {
      int slot = s0 + n;
      float pg[4];
      for (int g = 0; g < 4; g++) {
        float p = c[(g * MR + i) * STRIP + n]; /* prescaled: p_g * 2^(ke - 127), exactly */
        int ke = w->ke[g][slot];
        pg[g] = qe[g] == IXL_NAN_SCALE || ke == IXL_NAN_SCALE
                    ? NAN
                    : ixl_scale_pow2f(p, qe[g] - 127 + (w->prescaled ? 0 : ke - 127));
      }
      dots[i][n] = (pg[0] + pg[1]) + (pg[2] + pg[3]);
    }
  }
}

IXL_AVX2 void ixl_engine_row_fast(ixl_engine *e, worker *w, int64_t r, int p0, int p1, float *res) {
  const int64_t H = e->H, li = r - e->r0;
  const float *wt = e->wf + li * H;
  const float *qa = e->qa + li * (H / MR) * IXL_D * MR;
  const int mx = e->fmt != IXL_FP8;
  /* prescaled keys and no NaN scale on the query side: one multiply per group partial */
  const int scale_fast = !mx || (w->prescaled && !e->qff[li]);
  const int glen = mx ? IXL_GROUP : IXL_D;
  const int bf16 = e->reduction == IXL_REDUCE_BF16;
  float c[4 * MR * STRIP];
  float dots[MR][STRIP];
  for (int sidx = p0 / STRIP; sidx * STRIP < p1; sidx++) {
    const int s0 = sidx * STRIP;
    int any = 0;
    for (int n = 0; n < STRIP; n++) any |= w->valid[s0 + n];
    if (!any) {
      for (int n = s0 < p0 ? p0 : s0; n < s0 + STRIP && n < p1; n++) res[n - p0] = -INFINITY;
      continue;
    }
    const float *bs = w->b + sidx * IXL_D * STRIP;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float sacc[4][STRIP];
    memset(sacc, 0, sizeof sacc);
    __m256 ksv0 = _mm256_setzero_ps(), ksv1 = _mm256_setzero_ps();
    if (!mx) {
      ksv0 = _mm256_loadu_ps(&w->kscale[s0]);
      ksv1 = _mm256_loadu_ps(&w->kscale[s0 + 8]);
    }
    for (int64_t t = 0; t < H / MR; t++) {
      const int64_t h0 = t * MR;
      tile_4x16(qa + t * IXL_D * MR, bs, glen, c);
      if (mx && !scale_fast) tile_dots_scalar(e, w, li, h0, s0, c, dots);
      for (int i = 0; i < MR; i++) {
        __m256 d0, d1;
        if (!mx) {
          d0 = _mm256_mul_ps(_mm256_loadu_ps(c + i * STRIP), ksv0);
          d1 = _mm256_mul_ps(_mm256_loadu_ps(c + i * STRIP + 8), ksv1);
        } else if (scale_fast) {
          const float *fq = e->fq + (li * H + h0 + i) * 4;
          __m256 x[4][2];
          for (int g = 0; g < 4; g++) {
            __m256 f = _mm256_broadcast_ss(fq + g);
            for (int j = 0; j < 2; j++)
              x[g][j] = _mm256_mul_ps(_mm256_loadu_ps(c + (g * MR + i) * STRIP + 8 * j), f);
          }
          d0 = _mm256_add_ps(_mm256_add_ps(x[0][0], x[1][0]), _mm256_add_ps(x[2][0], x[3][0]));
          d1 = _mm256_add_ps(_mm256_add_ps(x[0][1], x[1][1]), _mm256_add_ps(x[2][1], x[3][1]));
        } else {
          d0 = _mm256_loadu_ps(dots[i]);
          d1 = _mm256_loadu_ps(dots[i] + 8);
        }
        const float wv = wt[h0 + i];
        if (!bf16) {
          __m256 wb = _mm256_set1_ps(wv);
          acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(wb, relu8(d0)));
          acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(wb, relu8(d1)));
        } else {
          bf16_step8(wv, d0, sacc[i]);
          bf16_step8(wv, d1, sacc[i] + 8);
        }
      }
    }
    float out[STRIP];
    if (!bf16) {
      _mm256_storeu_ps(out, acc0);
      _mm256_storeu_ps(out + 8, acc1);
    } else {
      for (int j = 0; j < 2; j++) {
        __m256 a = bf16_add8(_mm256_loadu_ps(sacc[0] + 8 * j), _mm256_loadu_ps(sacc[2] + 8 * j));
        __m256 b = bf16_add8(_mm256_loadu_ps(sacc[1] + 8 * j), _mm256_loadu_ps(sacc[3] + 8 * j));
        _mm256_storeu_ps(out + 8 * j, bf16_add8(a, b));
      }
    }
    for (int n = s0 < p0 ? p0 : s0; n < s0 + STRIP && n < p1; n++)
      res[n - p0] = w->valid[n] ? out[n - s0] : -INFINITY;
  }
}

/* ---------------------------------------------------------------- test hook */
IXL_AVX2 static void bf16_fma_batch_avx2(const float *w, const float *v, const float *s,
                                         float *out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int bad;
    __m256 r =
        bf16_fma8(_mm256_loadu_ps(w + i), _mm256_loadu_ps(v + i), _mm256_loadu_ps(s + i), &bad);
    _mm256_storeu_ps(out + i, r);
    for (int l = 0; l < 8; l++)
      if (bad >> l & 1) out[i + l] = ixl_bf16_fma_ref(w[i + l], v[i + l], s[i + l]);
  }
  for (; i < n; i++) out[i] = ixl_bf16_fma_ref(w[i], v[i], s[i]);
}
#else
/* Never called: ixl_engine_fast_available() is 0 here, so no engine is fast. */
void ixl_engine_pack_strip_mxfp4(const uint8_t *const codes[STRIP], const float fk[4][STRIP],
                                 float *dst) {
  (void)codes, (void)fk, (void)dst;
}
void ixl_engine_row_fast(ixl_engine *e, worker *w, int64_t r, int p0, int p1, float *res) {
  (void)e, (void)w, (void)r, (void)p0, (void)p1, (void)res;
}
#endif

int ixl_bf16_fma_batch(const float *w, const float *v, const float *s, float *out, int64_t n) {
#if IXL_HAVE_X86
  if (ixl_engine_fast_available()) {
    bf16_fma_batch_avx2(w, v, s, out, n);
    return 1;
  }
#endif
  for (int64_t i = 0; i < n; i++) out[i] = ixl_bf16_fma_ref(w[i], v[i], s[i]);
  return 0;
}
