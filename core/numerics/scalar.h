/* numerics/scalar.h - the single copy of every exact scalar rule: bit casts, powers of two and
 * the scale exponent of the MX and fp8 formats, bf16 / f16 / e4m3 / e2m1 in both directions,
 * and the order-preserving keys of the selections. Host and device (IXL_NUM_FN), so the CPU
 * reference (core/convert.c, the CPU kernels) and the CUDA kernels (through
 * kernels/cuda/scalar.cuh) run the same text.
 *
 * Every rounding is round-to-nearest-even, done either in integer arithmetic on a float's bits
 * or by one exact-op macro of numerics/exact.h, so no target, compiler flag or math library
 * can change a bit. tests/c/test_formats.c checks e4m3 against its plain definition (all 2^32
 * floats with IXL_EXHAUSTIVE=1); test_core.c the other conversions' edge cases. */
#ifndef IXL_NUMERICS_SCALAR_H
#define IXL_NUMERICS_SCALAR_H

#include "numerics/exact.h"

/* ---------------------------------------------------------------- bit casts */
IXL_NUM_FN uint32_t ixl_f32_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
#endif
}
IXL_NUM_FN float ixl_bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, 4);
  return x;
#endif
}
IXL_NUM_FN uint64_t ixl_f64_bits(double x) {
#ifdef __CUDA_ARCH__
  return (uint64_t)__double_as_longlong(x);
#else
  uint64_t b;
  memcpy(&b, &x, 8);
  return b;
#endif
}
IXL_NUM_FN double ixl_bits_f64(uint64_t b) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double((long long)b);
#else
  double x;
  memcpy(&x, &b, 8);
  return x;
#endif
}

/* ---------------------------------------------------------------- powers of two */
/* 2^e exactly, e in [-1022, 1023]. */
IXL_NUM_FN double ixl_pow2d(int e) { return ixl_bits_f64((uint64_t)(e + 1023) << 52); }

/* x * 2^n rounded once to fp32 (nearest even, subnormal results included), for |n| <= 300:
 * the product is exact in double (x has 24 significant bits and |x| >= 2^-149), so the one
 * rounding is the conversion, as in ldexpf. MX scaling and dequantization use it. */
IXL_NUM_FN float ixl_scale_pow2f(float x, int n) {
  return IXL_D2F(IXL_DMUL((double)x, ixl_pow2d(n)));
}

/* The exponent of a power-of-two scale (SPEC 2, 8): the smallest integer e with m * 2^e >= a,
 * for finite floats a > 0 (subnormals included) and m > 0 (6 or 448), found exactly. The
 * exponent fields' difference is within one of the answer for normal a and m (a / m lies in
 * (2^(ea - em - 1), 2^(ea - em + 1))); for a subnormal a it is too high and the second loop
 * walks it down. m * 2^e is exact in double (m has 24 significant bits, e within
 * [-300, 300]), so each comparison is exact and no libm call can move a bit. */
IXL_NUM_FN int ixl_ceil_log2_ratio(float a, float m) {
  int e = (int)(ixl_f32_bits(a) >> 23) - (int)(ixl_f32_bits(m) >> 23);
  while (IXL_DMUL((double)m, ixl_pow2d(e)) < (double)a) e++;
  while (IXL_DMUL((double)m, ixl_pow2d(e - 1)) >= (double)a) e--;
  return e;
}

/* The exponent e of an MX scale byte (e + 127) for a group whose largest magnitude is amax
 * (finite, >= 0; a NaN group is the caller's), m = 6 (mxfp4) or 448 (mxfp8): amax clamped
 * below at m * 2^-126 (rne) or fp32(1e-4) (ties_down), then e clamped to [-127, 127] (rne) or
 * [-126, 127] (ties_down: the byte stays in [1, 254]). */
IXL_NUM_FN int ixl_mx_scale_exp(float amax, float m, int ties_down) {
  const float lo = ties_down ? 1e-4f : ixl_scale_pow2f(m, -126); /* m * 2^-126 is exact */
  const int e = ixl_ceil_log2_ratio(amax < lo ? lo : amax, m);
  const int emin = ties_down ? -126 : -127;
  return e < emin ? emin : e > 127 ? 127 : e;
}

/* |x| / 2^q rounded to an integer, ties to even, from a = |x|'s bits (finite), where the
 * quantum 2^q is at least twice x's ulp (the callers: the subnormal ranges of f16 and e4m3).
 * In integers: a = M * 2^(E - 150) with M the significand with its implicit bit and E =
 * max(the exponent field, 1), so the quotient is M * 2^-s with s = q + 150 - E >= 1; adding
 * half a quantum less one, plus the parity of the kept bits, rounds a tie to the even one. */
IXL_NUM_FN uint32_t ixl_rne_quanta(uint32_t a, int q) {
  const int ef = (int)(a >> 23);
  const uint32_t M = ef ? (a & 0x7fffffu) | 0x800000u : a;
  const int s = q + 150 - (ef ? ef : 1);
  if (s > 25) return 0; /* M < 2^24 <= 2^(s - 2): below half a quantum */
  return (M + (1u << (s - 1)) - 1u + ((M >> s) & 1u)) >> s;
}

/* ---------------------------------------------------------------- bf16 */
/* Round to nearest even; a NaN stays NaN (made quiet, sign kept). */
IXL_NUM_FN uint16_t ixl_cvt_f32_to_bf16(float x) {
  uint32_t u = ixl_f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
IXL_NUM_FN float ixl_cvt_bf16_to_f32(uint16_t h) { return ixl_bits_f32((uint32_t)h << 16); }
/* The bf16 value of x (round to nearest even), as a float. */
IXL_NUM_FN float ixl_bf16_roundf(float x) { return ixl_cvt_bf16_to_f32(ixl_cvt_f32_to_bf16(x)); }

/* ---------------------------------------------------------------- f16 */
/* Round to nearest even, subnormals, overflow to inf (from 65520 = 65504 + half an ulp up,
 * the tie going to the even 65536); a NaN becomes sign | 0x7e00. */
IXL_NUM_FN uint16_t ixl_cvt_f32_to_f16(float x) {
  const uint32_t u = ixl_f32_bits(x), a = u & 0x7fffffffu;
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520, inf included */
  /* below 2^-14: f16's subnormals m * 2^-24 (m = 1024 is 2^-14, code 0x400: the same bits) */
  if (a < 0x38800000u) return (uint16_t)(sign | ixl_rne_quanta(a, -24));
  /* normal: round the 23 mantissa bits to 10 (a carry moves the exponent), rebias 127 -> 15 */
  const uint32_t r = (a + 0xfffu + ((a >> 13) & 1u)) >> 13;
  return (uint16_t)(sign | (r - ((127u - 15u) << 10)));
}
/* Exact; a NaN becomes the quiet NaN sign | 0x7fc00000 (payload dropped). */
IXL_NUM_FN float ixl_cvt_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const int e = (h >> 10) & 31, m = h & 1023;
  if (e == 31) return ixl_bits_f32(sign | (m ? 0x7fc00000u : 0x7f800000u));
  if (e == 0) {
    const float v = IXL_FMUL((float)m, 5.9604644775390625e-08f); /* m * 2^-24, exact */
    return sign ? -v : v;
  }
  return ixl_bits_f32(sign | ((uint32_t)(e - 15 + 127) << 23) | ((uint32_t)m << 13));
}

/* ---------------------------------------------------------------- e4m3 */
/* fp8 e4m3 (OCP "fn": no inf, 0x7f is NaN, 448 the largest finite), rounding to nearest even
 * and saturating at 448, inf included; a NaN becomes sign | 0x7f. Integer arithmetic only, so
 * every target (sm_80 has no fp8 conversion, and the hardware's saturation and NaN rules
 * differ) gives the same codes as the CPU. */
IXL_NUM_FN uint8_t ixl_cvt_f32_to_e4m3(float x) {
  const uint32_t u = ixl_f32_bits(x), a = u & 0x7fffffffu;
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7f); /* NaN */
  if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7e); /* >= 448: saturate */
  /* below 2^-6: e4m3's subnormals m * 2^-9 (m = 8 is 2^-6, code 8: the same bits) */
  if (a < 0x3c800000u) return (uint8_t)(sign | ixl_rne_quanta(a, -9));
  /* normal: round the 23 mantissa bits to 3 (a carry moves the exponent), then rebias the
   * exponent from 127 to 7; a < 448 rounds to at most 448 = code 0x7e, never to NaN */
  const uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
  return (uint8_t)(sign | (r - ((127u - 7u) << 3)));
}
/* Exact; the NaN codes (0x7f, 0xff) become sign | 0x7fc00000. */
IXL_NUM_FN float ixl_cvt_e4m3_to_f32(uint8_t x) {
  const uint32_t sign = (uint32_t)(x & 0x80u) << 24;
  const int e = (x >> 3) & 15, m = x & 7;
  if (e == 15 && m == 7) return ixl_bits_f32(sign | 0x7fc00000u);
  if (e == 0) {
    const float v = IXL_FMUL((float)m, 0.001953125f); /* m * 2^-9, exact */
    return sign ? -v : v;
  }
  return ixl_bits_f32(sign | ((uint32_t)(e - 7 + 127) << 23) | ((uint32_t)m << 20));
}

/* ---------------------------------------------------------------- e2m1 */
/* Code (low 4 bits) -> value; -0 dequantizes to +0 (SPEC 8). */
IXL_NUM_FN float ixl_cvt_e2m1_to_f32(uint8_t code) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = mag[code & 7];
  return (code & 8) && v != 0.0f ? -v : v;
}
/* The e2m1 magnitude code (0..7) of a = |y| >= 0, saturating at 6: the count of the midpoints
 * a has passed (no branches: random data mispredicts them). Ties go to the even code: a
 * midpoint below an even code counts when passed (>), one below an odd code when reached
 * (>=): 0.25 -> 0, 0.75 -> 2, 1.25 -> 2, 1.75 -> 4, 2.5 -> 4, 3.5 -> 6, 5 -> 6. NaN -> 0. */
IXL_NUM_FN uint8_t ixl_e2m1_rne(float a) {
  return (uint8_t)((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                   (a >= 3.5f) + (a > 5.0f));
}
/* DeepGEMM's strict thresholds: a midpoint counts only when passed (ties to the smaller
 * magnitude). */
IXL_NUM_FN uint8_t ixl_e2m1_ties_down(float a) {
  return (uint8_t)((a > 0.25f) + (a > 0.75f) + (a > 1.25f) + (a > 1.75f) + (a > 2.5f) +
                   (a > 3.5f) + (a > 5.0f));
}

/* ---------------------------------------------------------------- order-preserving keys */
/* The key of the float whose bits are u: unsigned integer order of keys = SPEC's value order,
 * NaN (any payload) above +inf above every number above -inf, and -0 equal to +0. Equal keys
 * are equal values, so "ties to the smaller index" is a rule on keys alone. Branch-free on the
 * sign (random signs would mispredict): a negative value flips every bit (larger magnitude is
 * smaller), a positive one sets the sign bit (positives sit above all negatives). */
IXL_NUM_FN uint32_t ixl_order_key_bits(uint32_t u) {
  if (u == 0x80000000u) u = 0; /* -0 equals +0 */
  const uint32_t key = u ^ ((0u - (u >> 31)) | 0x80000000u);
  return (u & 0x7fffffffu) > 0x7f800000u ? 0xffffffffu : key; /* every NaN is one, top value */
}
#define IXL_KEY_NAN 0xffffffffu
#define IXL_KEY_POS_INF 0xff800000u /* ixl_order_key_bits(0x7f800000) */

IXL_NUM_FN uint32_t ixl_order_key_f32(float x) { return ixl_order_key_bits(ixl_f32_bits(x)); }

/* bf16 is the top half of an f32: its key is the f32 key of the widened value with the low 16
 * bits cleared (they carry no information: all ones for negatives, zeros otherwise), so a key
 * is determined by its top 16 bits alone (the GPU select keys on 16 bits). Same order and same
 * ties as the unmasked key: no two bf16 values share a top half, NaNs (0xffff) sit alone on
 * top (+inf is 0xff80). */
IXL_NUM_FN uint32_t ixl_order_key_bf16(uint16_t h) {
  return ixl_order_key_bits((uint32_t)h << 16) & 0xffff0000u;
}

#endif
