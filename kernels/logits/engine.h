/* logits/engine.h - the per-position arithmetic of the logits kernels (SPEC 3, "The dot product"
 * and the bf16 reduction), shared by the CPU reference, the fast CPU path and the tests.
 * Every CUDA kernel must reproduce these functions bit for bit (see the rules below).
 *
 * The rules fixed here:
 * - MX formats (mxfp4, mxfp8): p_g = sum over the 32 elements of group g, in increasing element
 *   order, of the products of the UNSCALED values (e2m1 / e4m3 decoded to float), in fp32. The
 *   products are exact (at most 8 significant bits), so an fma chain gives the same sums. Then
 *   p_g = p_g * 2^(qe_g - 127 + ke_g - 127) rounded once to fp32 (ixl_scale_pow2f), and
 *   dot = (p0 + p1) + (p2 + p3) in fp32. A scale byte 0xFF (the OCP MX NaN scale, which the
 *   quantizer writes for a group holding a NaN) on either side makes p_g NaN.
 * - fp8: dot = (fp32 sum of the 128 e4m3 products, increasing order) * k_scale, in fp32; the
 *   Q scale is already folded into the weights.
 * - relu(x) = x < 0 ? 0 : x, so a NaN stays NaN (and -0 stays -0; equality ignores the sign
 *   of zero).
 * - fp32 reduction: logit = sum over h = 0..H-1, in increasing order, of w[h] * relu(dot_h)
 *   (a multiply, then an add, each rounded; SPEC allows any order, so the GPU is compared with
 *   a tolerance).
 * - bf16 reduction: v_h = bf16_rne(relu(dot_h)); s[h % 4] = bf16_fma(w[h], v_h, s[h % 4])
 *   with s starting at +0; result = bf16_add(bf16_add(s0, s2), bf16_add(s1, s3)). bf16_fma
 *   computes w*v + s exactly and rounds once to bf16 (nearest even, subnormals kept).
 *
 * No contraction: every multiply and add here is written to be rounded on its own. GCC does
 * not contract in ISO C mode (-std=c11); clang is told below. */
#ifndef IXL_LOGITS_ENGINE_H
#define IXL_LOGITS_ENGINE_H

#include "internal.h"
#include "numerics/scalar.h"

#include <math.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define IXL_D 128        /* head dim (SPEC 1) */
#define IXL_GROUP 32     /* elements per UE8M0 scale */
#define IXL_NAN_SCALE 0xFF

/* ---------------------------------------------------------------- scalar pieces */
/* Bit casts, ixl_scale_pow2f (x * 2^n rounded once) and ixl_bf16_roundf come from
 * numerics/scalar.h, the copy the CUDA kernels run too. */
static inline float ixl_relu(float x) { return x < 0.0f ? 0.0f : x; }

/* Rounds the exact value hi + lo (hi = fl(hi + lo) in double, |lo| <= ulp(hi)/2, as TwoSum
 * gives) to bf16 with round-to-nearest-even, directly from double. On an exact bf16 midpoint
 * with lo != 0 the exact value lies on lo's side of it. Returns the bf16 value as a float. */
static inline float ixl_bf16_round_dd(double hi, double lo) {
  if (isnan(hi)) return (float)hi;
  if (isinf(hi) || hi == 0.0) return (float)hi;
  double a = fabs(hi);
  int e;
  frexp(a, &e);
  e -= 1;                 /* a in [2^e, 2^(e+1)) */
  if (e < -126) e = -126; /* bf16 subnormals share fp32's quantum 2^-133 */
  double q = ldexp(1.0, e - 7);
  double t = a / q; /* exact: q is a power of two and a has no bits below q * 2^-45 */
  double f = floor(t), frac = t - f, r;
  if (frac > 0.5) r = f + 1.0;
  else if (frac < 0.5) r = f;
  else if (lo != 0.0) r = ((lo > 0.0) == (hi > 0.0)) ? f + 1.0 : f;
  else r = fmod(f, 2.0) == 0.0 ? f : f + 1.0;
  double res = r * q;
  if (res >= 0x1p128) res = INFINITY; /* past the largest bf16 (and fp32) */
  return (float)(hi < 0 ? -res : res);
}

/* Exact a + b as hi + lo (Knuth's TwoSum; exact for finite doubles without overflow). */
static inline void ixl_two_sum(double a, double b, double *hi, double *lo) {
  double s = a + b;
  double bb = s - a;
  *lo = (a - (s - bb)) + (b - bb);
  *hi = s;
}

/* bf16_fma(w, v, s) = bf16(w*v + s) with one rounding; w, v, s hold bf16 values. The product
 * of two bf16 values is exact in double. */
static inline float ixl_bf16_fma_ref(float w, float v, float s) {
  double p = (double)w * (double)v, hi, lo;
  if (isnan(p) || isnan(s) || isinf(p) || isinf(s)) return ixl_bf16_roundf((float)(p + (double)s));
  ixl_two_sum(p, (double)s, &hi, &lo);
  return ixl_bf16_round_dd(hi, lo);
}
static inline float ixl_bf16_add_ref(float a, float b) { return ixl_bf16_fma_ref(1.0f, a, b); }

/* The kv_format's name in messages ("?" for a value outside the enum). */
static inline const char *ixl_kv_format_name(int fmt) {
  return fmt == IXL_MXFP4 ? "mxfp4" : fmt == IXL_MXFP8 ? "mxfp8" : fmt == IXL_FP8 ? "fp8" : "?";
}

/* ---------------------------------------------------------------- decoding tables */
/* e2m1 value of every nibble; the unscaled values of a packed byte are lo = tab[b & 15],
 * hi = tab[b >> 4]. -0 decodes to +0 (SPEC 8). */
static inline void ixl_e2m1_table(float t[16]) {
  for (int i = 0; i < 16; i++) t[i] = ixl_cvt_e2m1_to_f32((uint8_t)i);
}
static inline void ixl_e4m3_table(float t[256]) {
  for (int i = 0; i < 256; i++) t[i] = ixl_cvt_e4m3_to_f32((uint8_t)i);
}

/* Unscaled values of one 128-vector of codes. */
static inline void ixl_decode_values(int fmt, const uint8_t *codes, float *out) {
  if (fmt == IXL_MXFP4) {
    for (int i = 0; i < IXL_D / 2; i++) {
      out[2 * i] = ixl_cvt_e2m1_to_f32(codes[i] & 15);
      out[2 * i + 1] = ixl_cvt_e2m1_to_f32(codes[i] >> 4);
    }
  } else {
    for (int i = 0; i < IXL_D; i++) out[i] = ixl_cvt_e4m3_to_f32(codes[i]);
  }
}

static inline float ixl_load_f32(const uint8_t *p) {
  float x;
  memcpy(&x, p, 4);
  return x;
}

/* ---------------------------------------------------------------- the dot product */
/* SPEC 3's dot of one query vector and one key. qf/kf: unscaled values (ixl_decode_values);
 * qscale: the 4 UE8M0 bytes of the query (MX; unused for fp8); kscale: the key's 4 scale
 * bytes (MX: UE8M0 bytes; fp8: an fp32). This is the definition; everything else is checked
 * against it. */
static inline float ixl_dot_ref(int fmt, const float *qf, const uint8_t *qscale, const float *kf,
                                const uint8_t *kscale) {
  if (fmt == IXL_FP8) {
    float p = 0.0f;
    for (int d = 0; d < IXL_D; d++) p = p + qf[d] * kf[d];
    return p * ixl_load_f32(kscale);
  }
  float pg[4];
  for (int g = 0; g < 4; g++) {
    float p = 0.0f;
    for (int d = g * IXL_GROUP; d < (g + 1) * IXL_GROUP; d++) p = p + qf[d] * kf[d];
    if (qscale[g] == IXL_NAN_SCALE || kscale[g] == IXL_NAN_SCALE)
      pg[g] = NAN;
    else
      pg[g] = ixl_scale_pow2f(p, (int)qscale[g] - 127 + (int)kscale[g] - 127);
  }
  return (pg[0] + pg[1]) + (pg[2] + pg[3]);
}

/* One logit from the H dots of a position. w: the row's weights as floats (fp32, or the bf16
 * values). Returns the fp32 logit, or the bf16 result as a float. */
static inline float ixl_reduce_heads(int reduction, int H, const float *w, const float *dots) {
  if (reduction == IXL_REDUCE_FP32) {
    float acc = 0.0f;
    for (int h = 0; h < H; h++) acc = acc + w[h] * ixl_relu(dots[h]);
    return acc;
  }
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int h = 0; h < H; h++)
    s[h % 4] = ixl_bf16_fma_ref(w[h], ixl_bf16_roundf(ixl_relu(dots[h])), s[h % 4]);
  return ixl_bf16_add_ref(ixl_bf16_add_ref(s[0], s[2]), ixl_bf16_add_ref(s[1], s[3]));
}

/* ---------------------------------------------------------------- the logits engine */
/* Shared by K1, K2 and K5 (logits/engine.c, and engine_avx2.c for the fast path). A kernel
 * describes each output position by a key reference; the engine computes a query row against
 * a block of them. */

/* Where one key lives: its value bytes and its 4 scale bytes. codes == NULL: no key there
 * (the output becomes -inf and nothing is read). */
typedef struct ixl_kref {
  const uint8_t *codes;
  const uint8_t *scale;
} ixl_kref;

#define IXL_KBLOCK 256 /* positions per engine block */

/* The engine's two paths: the logits variants `ref` and `fast` (kernels/variants.c). */
enum { IXL_PATH_REFERENCE = 1, IXL_PATH_FAST = 2 };

/* 1 when this CPU runs the fast path (AVX2 and FMA). */
int ixl_engine_fast_available(void);

/* Where the AVX2 code is compiled at all (the fast path, engine_avx2.c, and the FMA peak,
 * bench_peak.c); IXL_AVX2 marks a function compiled for AVX2 + FMA, which runs only where
 * ixl_engine_fast_available() says so. */
#if defined(__x86_64__) || defined(__i386__)
#define IXL_HAVE_X86 1
#define IXL_AVX2 __attribute__((target("avx2,fma")))
#else
#define IXL_HAVE_X86 0
#endif

typedef struct ixl_engine ixl_engine; /* opaque: formats, query chunk, per-thread scratch */

/* The context's grow-only scratch slots (ixl_ctx_scratch) the CPU logits use, so a steady
 * stream of steps allocates nothing: the engine in one piece, and K2's page prefix beside it
 * (one call holds both). */
#define IXL_WS_ENGINE_SLOT 1
#define IXL_WS_PREFIX_SLOT 2

/* The query side of a call: q_codes U8 [R,H,VB], q_scales I32 [R,H] or NULL (fp8), weights
 * [R,H] F32 (fp32 reduction) or BF16 (bf16 reduction). path: IXL_PATH_REFERENCE or
 * IXL_PATH_FAST; FAST on a CPU without AVX2 and FMA is IXL_ERR_UNSUPPORTED (never a silent
 * fallback). The workspace for `threads` workers is carved from the context's scratch
 * (IXL_WS_ENGINE_SLOT), so it lives until the next op that uses that slot: nothing to free. */
ixl_status ixl_engine_new(ixl_ctx *ctx, int fmt, int reduction, const ixl_tensor *q_codes,
                          const ixl_tensor *q_scales, const ixl_tensor *weights, int threads,
                          int path, ixl_engine **out);
/* Rows per chunk: the query side is prepared for rows [r0, r0 + n) at a time. */
int64_t ixl_engine_chunk_rows(const ixl_engine *e);
/* Prepares rows [r0, r0 + n), n <= ixl_engine_chunk_rows (parallel over the rows). */
void ixl_engine_load_rows(ixl_engine *e, int64_t r0, int64_t n);
/* Worker `tid` (< threads) packs n <= IXL_KBLOCK keys into its scratch. */
void ixl_engine_pack(ixl_engine *e, int tid, const ixl_kref *keys, int n);
/* Worker `tid` computes loaded row r against its packed keys [p0, p1): res[i - p0] = the logit
 * (fp32, or the bf16 value as a float), -inf where keys[i].codes was NULL. */
void ixl_engine_row(ixl_engine *e, int tid, int64_t r, int p0, int p1, float *res);

/* Shared argument checks of the logits kernels (logits/logits.c). `op` prefixes messages.
 * Checks the query side (q_codes, q_scales, weights vs the reduction) and returns R and H. */
ixl_status ixl_check_query(ixl_ctx *ctx, const char *op, const ixl_qk *in,
                           const ixl_tensor *weights, int reduction, int64_t *R, int64_t *H);
/* Checks the ragged K side (k_codes, k_scales; k_pages NULL) and returns N, its rows. */
ixl_status ixl_check_ragged_k(ixl_ctx *ctx, const char *op, const ixl_qk *in, int64_t *N);
/* Checks the paged K side (k_pages, page_size) and returns num_pages and the page stride. */
ixl_status ixl_check_pages(ixl_ctx *ctx, const char *op, const ixl_qk *in, int64_t *num_pages,
                           int64_t *stride);
/* Host values: each ragged row's range 0 <= ks[r] <= ke[r] <= N (ks_name, ke_name: the
 * arguments' names in the messages). */
ixl_status ixl_check_ranges(ixl_ctx *ctx, const int32_t *ks, const int32_t *ke, int64_t R,
                            int64_t N, const char *ks_name, const char *ke_name);
/* Host values: every used page id of each row (positions < lens[r]) in [0, num_pages), and
 * lens[r] in [0, max_pages * page_size]. */
ixl_status ixl_check_block_table(ixl_ctx *ctx, const char *lens_name, const int32_t *lens,
                                 const int32_t *bt, int64_t R, int64_t max_pages, int page_size,
                                 int64_t num_pages);

/* The fast path's 8-lane bf16_fma (with its exact lane fallback) over n triples, for the
 * tests; returns 1 when the AVX2 code ran, 0 when the scalar reference did. */
int ixl_bf16_fma_batch(const float *w, const float *v, const float *s, float *out, int64_t n);

#endif
