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

uint8_t ixl_f32_to_e4m3(float x) {
  uint32_t u = f32_bits(x);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint8_t)(sign | 0x7f);
  double a = fabs((double)x);
  if (a >= 448.0) return (uint8_t)(sign | 0x7e); /* saturate, inf included */
  double r = round_mini(a, 3, -6);
  if (r >= 448.0) return (uint8_t)(sign | 0x7e);
  if (r == 0) return sign;
  int e;
  double f = frexp(r, &e);
  e -= 1;
  if (e < -6) return (uint8_t)(sign | (uint8_t)(r / ldexp(1.0, -9)));
  uint8_t m = (uint8_t)((f * 2.0 - 1.0) * 8.0);
  return (uint8_t)(sign | (uint8_t)((e + 7) << 3) | m);
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
