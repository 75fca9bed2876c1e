// scalar.cuh - exact scalar conversions on the device (bit casts, bf16/f16/e4m3/e2m1, power-of-
// two scaling) that mirror core/convert.c bit for bit, and the order-preserving keys of
// kernels/select/radix_ref.h.
#ifndef IXL_CUDA_SCALAR_CUH
#define IXL_CUDA_SCALAR_CUH

#include <cuda_runtime.h>
#include <stdint.h>

namespace ixl {

// ------------------------------------------------------------------ float bits and scalars

__host__ __device__ __forceinline__ uint32_t f32_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
#endif
}
__host__ __device__ __forceinline__ float bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, 4);
  return x;
#endif
}

// 2^e exactly, for e in [-149, 127] (subnormal powers included).
__device__ __forceinline__ float pow2f(int e) {
  return e >= -126 ? __uint_as_float((uint32_t)(e + 127) << 23)
                   : __uint_as_float(1u << (e + 149));
}

// 2^e as a double, e in [-1022, 1023].
__device__ __forceinline__ double pow2d(int e) {
  return __longlong_as_double((long long)(e + 1023) << 52);
}

// v * 2^e rounded once to fp32, for e in [-300, 300]: the product is exact in double and
// the conversion rounds to nearest even, as ldexpf and the CPU's (float)((double)v * 2^e) do.
__device__ __forceinline__ float ldexp_exact(float v, int e) {
  return (float)((double)v * pow2d(e));
}

// bf16 round to nearest even, NaN kept quiet: the same bits as ixl_f32_to_bf16.
__host__ __device__ __forceinline__ uint16_t f32_to_bf16(float x) {
  uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
__host__ __device__ __forceinline__ float bf16_to_f32(uint16_t h) {
  return bits_f32((uint32_t)h << 16);
}

// f16 -> f32 (exact).
__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const int e = (h >> 10) & 31, m = h & 1023;
  if (e == 31) return __uint_as_float(sign | 0x7f800000u | ((uint32_t)m << 13));
  if (e == 0) {
    const float v = (float)m * pow2f(-24); // exact: m < 2^10
    return sign ? -v : v;
  }
  return __uint_as_float(sign | ((uint32_t)(e - 15 + 127) << 23) | ((uint32_t)m << 13));
}

// fp8 e4m3 with round to nearest even, subnormals, saturation at +-448 and NaN -> sign|0x7f:
// the same codes as ixl_f32_to_e4m3 (core/convert.c), by integer arithmetic so that every
// target (sm_80 has no fp8 conversion instruction) gives the same bits.
__device__ __forceinline__ uint8_t f32_to_e4m3(float x) {
  const uint32_t u = __float_as_uint(x);
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7f);
  const float af = __uint_as_float(a);
  if (af >= 448.0f) return (uint8_t)(sign | 0x7e);
  if (af < 0.015625f) {
    // below 2^-6: a fixed quantum of 2^-9; the code is the number of quanta (8 quanta is
    // the smallest normal, whose code is also 8). a * 512 is exact; rintf rounds to even.
    const int q = (int)rintf(af * 512.0f);
    return (uint8_t)(sign | q);
  }
  // normal: keep 3 mantissa bits, round to nearest even; a carry moves into the exponent
  uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  r &= ~0xfffffu;
  const int e = (int)(r >> 23) - 127;
  return (uint8_t)(sign | (uint8_t)((e + 7) << 3) | (uint8_t)((r >> 20) & 7u));
}

__host__ __device__ __forceinline__ float e4m3_to_f32(uint8_t x) {
  const uint32_t sign = (uint32_t)(x & 0x80u) << 24;
  const int e = (x >> 3) & 15, m = x & 7;
  if (e == 15 && m == 7) return bits_f32(sign | 0x7fc00000u);
  if (e == 0) {
    // m * 2^-9: m < 8 is exact
    const float v = (float)m * 0.001953125f;
    return sign ? -v : v;
  }
  return bits_f32(sign | ((uint32_t)(e - 7 + 127) << 23) | ((uint32_t)m << 20));
}

// e2m1 code (low 4 bits) -> value; -0 dequantizes to +0 (SPEC 8).
__host__ __device__ __forceinline__ float e2m1_to_f32(uint8_t code) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = mag[code & 7];
  return (code & 8) && v != 0.0f ? -v : v;
}

// ------------------------------------------------------------------ order-preserving keys

// Unsigned order of the key = SPEC's value order: NaN (any payload) above +inf above every
// number; -0 equals +0. The same function as ixl_order_key_bits in select/radix_ref.h.
__host__ __device__ __forceinline__ uint32_t order_key_bits(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ uint32_t order_key_f32(float x) { return order_key_bits(__float_as_uint(x)); }
// For bf16 the low 16 bits of the key carry no information (all ones for negatives); the
// select clears them so that a key is determined by its top 16 bits alone (same order).
__device__ __forceinline__ uint32_t order_key_bf16(uint16_t h) {
  return order_key_bits((uint32_t)h << 16) & 0xffff0000u;
}
constexpr uint32_t KEY_NAN = 0xffffffffu;
constexpr uint32_t KEY_POS_INF = 0xff800000u; // order_key_bits(0x7f800000)

} // namespace ixl

#endif
