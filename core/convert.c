/* convert.c - scalar conversions between fp32 and the small float formats (bf16, f16, e4m3,
 * e2m1). Every rounding is round-to-nearest-even; these are the definitions the CPU kernels
 * and the tests use. */
#include "internal.h"

#include <math.h>
#include <string.h>

static uint32_t f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
static float bits_f32(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

uint16_t ixl_f32_to_bf16(float x) {
  uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float ixl_bf16_to_f32(uint16_t x) { return bits_f32((uint32_t)x << 16); }

/* Rounds a (finite, >= 0) to a binary format with `mbits` mantissa bits, minimum normal
 * exponent emin and given max finite exponent; returns the rounded value (not the code). */
static double round_mini(double a, int mbits, int emin) {
  if (a == 0) return 0;
  int e;
  frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) -> leading exponent e-1 */
  e -= 1;
  if (e < emin) e = emin; /* subnormal: fixed quantum */
  double q = ldexp(1.0, e - mbits);
  return rint(a / q) * q; /* a/q is exact in double for our inputs; rint rounds to even */
}

uint16_t ixl_f32_to_f16(float x) {
  uint32_t u = f32_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
  double a = fabs((double)x);
  if (isinf(a)) return (uint16_t)(sign | 0x7c00);
  double r = round_mini(a, 10, -14);
  if (r >= 65536.0) return (uint16_t)(sign | 0x7c00); /* overflow to inf */
  if (r == 0) return sign;
  int e;
  double f = frexp(r, &e);
  e -= 1;
  if (e < -14) return (uint16_t)(sign | (uint16_t)(r / ldexp(1.0, -24)));
  uint16_t m = (uint16_t)((f * 2.0 - 1.0) * 1024.0);
  return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | m);
}

float ixl_f16_to_f32(uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexp((double)m, -24);
  else v = ldexp(1.0 + m / 1024.0, e - 15);
  return (float)(sign ? -v : v);
}

/* e4m3 (OCP "fn": no inf, 0x7f is NaN, 448 the largest finite), rounding to nearest even and
 * saturating at 448, on the bits (the quantizers call it once per element). test_formats checks
 * it against the plain rounding definition on every float exponent and on each rounding
 * boundary, and over all 2^32 inputs with IXL_EXHAUSTIVE=1. */
uint8_t ixl_f32_to_e4m3(float x) {
  const uint32_t u = f32_bits(x), a = u & 0x7fffffffu;
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7f); /* NaN */
  if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7e); /* >= 448, inf included: saturate */
  if (a < 0x3c800000u) {
    /* below 2^-6, e4m3's subnormals m * 2^-9: t = |x| * 2^9 is exact in double */
    const double t = (double)bits_f32(a) * 512.0, fl = floor(t), fr = t - fl;
    int m = (int)fl;
    if (fr > 0.5 || (fr == 0.5 && (m & 1))) m++; /* m = 8 is 2^-6, code 8: the same bits */
    return (uint8_t)(sign | m);
  }
  /* normal: round the 23 mantissa bits to 3 (ties to even; a carry moves the exponent), then
   * rebias the exponent from 127 to 7 */
  const uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
  const int code = (int)r - ((127 - 7) << 3);
  return (uint8_t)(sign | (code > 0x7e ? 0x7e : code));
}

float ixl_e4m3_to_f32(uint8_t x) {
  int sign = x >> 7, e = (x >> 3) & 15, m = x & 7;
  double v;
  if (e == 15 && m == 7) v = NAN;
  else if (e == 0) v = ldexp((double)m, -9);
  else v = ldexp(1.0 + m / 8.0, e - 7);
  return (float)(sign ? -v : v);
}

float ixl_e2m1_to_f32(uint8_t code) {
  static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v = mag[code & 7];
  return (code & 8) && v != 0.0f ? -v : v; /* -0 dequantizes to 0 (SPEC 8) */
}

int ixl_format_value_bytes(ixl_kv_format fmt) {
  switch (fmt) {
    case IXL_MXFP4: return 64;
    case IXL_MXFP8:
    case IXL_FP8: return 128;
    default: return 0;
  }
}
