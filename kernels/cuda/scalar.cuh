// scalar.cuh - the names the CUDA kernels use for the exact scalar rules (bit casts, bf16 /
// f16 / e4m3 / e2m1, power-of-two scaling, order keys). Each forwards to numerics/scalar.h,
// the one copy the CPU reference runs too, so there is nothing here to keep in step.
#ifndef IXL_CUDA_SCALAR_CUH
#define IXL_CUDA_SCALAR_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "numerics/scalar.h"

namespace ixl {

__host__ __device__ __forceinline__ uint32_t f32_bits(float x) { return ixl_f32_bits(x); }
__host__ __device__ __forceinline__ float bits_f32(uint32_t u) { return ixl_bits_f32(u); }
__host__ __device__ __forceinline__ double pow2d(int e) { return ixl_pow2d(e); }
// v * 2^e rounded once to fp32, |e| <= 300.
__host__ __device__ __forceinline__ float ldexp_exact(float v, int e) {
  return ixl_scale_pow2f(v, e);
}

__host__ __device__ __forceinline__ uint16_t f32_to_bf16(float x) {
  return ixl_cvt_f32_to_bf16(x);
}
__host__ __device__ __forceinline__ float bf16_to_f32(uint16_t h) {
  return ixl_cvt_bf16_to_f32(h);
}
__host__ __device__ __forceinline__ float f16_to_f32(uint16_t h) { return ixl_cvt_f16_to_f32(h); }
__host__ __device__ __forceinline__ uint8_t f32_to_e4m3(float x) {
  return ixl_cvt_f32_to_e4m3(x);
}
__host__ __device__ __forceinline__ float e4m3_to_f32(uint8_t x) {
  return ixl_cvt_e4m3_to_f32(x);
}
__host__ __device__ __forceinline__ float e2m1_to_f32(uint8_t code) {
  return ixl_cvt_e2m1_to_f32(code);
}

__host__ __device__ __forceinline__ uint32_t order_key_bits(uint32_t u) {
  return ixl_order_key_bits(u);
}
__host__ __device__ __forceinline__ uint32_t order_key_f32(float x) {
  return ixl_order_key_f32(x);
}
// Determined by its top 16 bits (the low 16 are zero): the select keys bf16 on 16 bits.
__host__ __device__ __forceinline__ uint32_t order_key_bf16(uint16_t h) {
  return ixl_order_key_bf16(h);
}
constexpr uint32_t KEY_NAN = IXL_KEY_NAN;
constexpr uint32_t KEY_POS_INF = IXL_KEY_POS_INF;

} // namespace ixl

#endif
