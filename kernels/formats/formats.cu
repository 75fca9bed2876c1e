// formats.cu - the number formats of SPEC 2 on the GPU: ixl_cuda_quantize,
// ixl_cuda_dequantize, ixl_cuda_prepare_weights and ixl_cuda_kv_pages_write. Codes and scales
// are bit-identical to kernels/formats/formats.c, the definition: every rounding here is done in
// integer or exactly-rounded fp32 arithmetic (no fast-math, no hardware fp8 conversion, whose
// NaN and saturation rules differ), so both targets (sm_90a, sm_80) give the same bits. The
// scalar rules are core/numerics/scalar.h's ixl_cvt_* and ixl_scale_pow2f, the functions the
// CPU reference calls.
//
// Quantize: one warp per 128-vector, 4 consecutive elements per lane, so a 32-element scale
// group is 8 lanes and its amax is three shuffles.
#include "cuda/common.cuh"

#include <float.h>

namespace {

using namespace ixl;

// ------------------------------------------------------------------ quantize

template <typename T>
__device__ __forceinline__ float load_x(const T *p, int64_t i);
template <>
__device__ __forceinline__ float load_x<float>(const float *p, int64_t i) { return p[i]; }
template <>
__device__ __forceinline__ float load_x<uint16_t>(const uint16_t *p, int64_t i) {
  return ixl_cvt_bf16_to_f32(p[i]);
}

template <typename T, bool F16>
__device__ __forceinline__ float load_elem(const T *p, int64_t i) {
  if constexpr (F16) return ixl_cvt_f16_to_f32(p[i]);
  else return load_x<T>(p, i);
}

constexpr int QUANT_THREADS = 256;

// |x| for the amax: inf counts as FLT_MAX (it saturates); NaN stays NaN, and fmaxf skips it.
__device__ __forceinline__ float amax_abs(float x) {
  const float a = fabsf(x);
  return a > FLT_MAX ? FLT_MAX : a;
}
__device__ __forceinline__ float clamp_inf(float x) {
  return x > FLT_MAX ? FLT_MAX : x < -FLT_MAX ? -FLT_MAX : x; // NaN passes through
}

// The e4m3 code of a scaled fp8 value y = x * scale. A NaN x keeps its sign (sign | 0x7F,
// as on the CPU, where x86 arithmetic carries a NaN operand through); GPU arithmetic would
// return the canonical positive NaN, so it is taken from x itself.
// x_bits are the input's bits as loaded: the compiler may lower the inf clamp to a min/max
// that canonicalises NaN, so its sign is read before any arithmetic.
__device__ __forceinline__ uint8_t fp8_code(uint32_t x_bits, float y) {
  if ((x_bits & 0x7fffffffu) > 0x7f800000u) return (uint8_t)((x_bits >> 24 & 0x80u) | 0x7fu);
  return ixl_cvt_f32_to_e4m3(y);
}

template <typename T, bool F16>
__global__ void __launch_bounds__(QUANT_THREADS) quantize_kernel(const T *__restrict__ x, int64_t M,
                                                                 int fmt, int quantizer, int role,
                                                                 uint8_t *__restrict__ codes,
                                                                 void *__restrict__ scales) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t)gridDim.x * (QUANT_THREADS / 32);
  for (int64_t m = (int64_t)blockIdx.x * (QUANT_THREADS / 32) + (threadIdx.x >> 5); m < M;
       m += warps) {
    float v[4];
    uint32_t vb[4]; // bits as loaded, before any arithmetic
    float amax = 0.0f;
    bool nan = false;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      v[j] = load_elem<T, F16>(x, m * 128 + lane * 4 + j);
      vb[j] = __float_as_uint(v[j]);
      nan |= isnan(v[j]);
      amax = fmaxf(amax, amax_abs(v[j]));
      v[j] = clamp_inf(v[j]);
    }
    if (fmt == IXL_FP8) {
      // one scale per vector; a NaN element becomes the e4m3 NaN, the others are unaffected
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, d));
      amax = fmaxf(amax, 1e-4f);
      uint32_t packed = 0;
      float scale;
      if (role == IXL_ROLE_K && quantizer == IXL_Q_TIES_DOWN) {
        scale = amax / 448.0f;
        const float recip = 1.0f / scale;
#pragma unroll
        for (int j = 0; j < 4; j++) packed |= (uint32_t)fp8_code(vb[j], v[j] * recip) << (8 * j);
      } else {
        // Q (either quantizer) and K rne: a power-of-two scale
        const int e = ixl_ceil_log2_ratio(amax, 448.0f);
        scale = ixl_scale_pow2f(1.0f, e);
#pragma unroll
        for (int j = 0; j < 4; j++)
          packed |= (uint32_t)fp8_code(vb[j], ixl_scale_pow2f(v[j], -e)) << (8 * j);
      }
      reinterpret_cast<uint32_t *>(codes + m * 128)[lane] = packed;
      if (lane == 0) reinterpret_cast<float *>(scales)[m] = scale;
    } else {
      // one UE8M0 scale per 32-element group = 8 lanes; a group holding a NaN gets the NaN
      // scale byte 0xFF and zero codes
#pragma unroll
      for (int d = 1; d < 8; d <<= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, d));
        nan |= __shfl_xor_sync(0xffffffffu, (int)nan, d) != 0;
      }
      const float c = fmt == IXL_MXFP4 ? 6.0f : 448.0f;
      // the exponent rule of numerics/scalar.h, the CPU's (amax is never NaN: fmaxf skips it)
      const int e = ixl_mx_scale_exp(amax, c, quantizer == IXL_Q_TIES_DOWN);
      float s[4];
#pragma unroll
      for (int j = 0; j < 4; j++) s[j] = ixl_scale_pow2f(v[j], -e); // exact: |s| <= c
      if (fmt == IXL_MXFP4) {
        uint32_t packed = 0; // two bytes: elements 4l..4l+3, element 2i in the low nibble
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const float a = fabsf(s[j]);
          uint8_t code;
          if (quantizer == IXL_Q_TIES_DOWN) {
            code = ixl_e2m1_ties_down(a);
            if (code && s[j] < 0.0f) code |= 8; // a value that rounds to zero loses its sign
          } else {
            code = ixl_e2m1_rne(a) | (signbit(s[j]) ? 8 : 0); // -0 kept, as hardware does
          }
          packed |= (uint32_t)code << (4 * j);
        }
        if (nan) packed = 0;
        reinterpret_cast<uint16_t *>(codes + m * 64)[lane] = (uint16_t)packed;
      } else {
        uint32_t packed = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) packed |= (uint32_t)ixl_cvt_f32_to_e4m3(s[j]) << (8 * j);
        if (nan) packed = 0;
        reinterpret_cast<uint32_t *>(codes + m * 128)[lane] = packed;
      }
      // lanes 0, 8, 16, 24 hold the four group bytes: byte g goes to bits 8g..8g+7
      const uint32_t byte = nan ? 0xffu : (uint32_t)(e + 127) & 0xffu;
      uint32_t word = 0;
#pragma unroll
      for (int g = 0; g < 4; g++) word |= __shfl_sync(0xffffffffu, byte, 8 * g) << (8 * g);
      if (lane == 0) reinterpret_cast<uint32_t *>(scales)[m] = word;
    }
  }
}

// ------------------------------------------------------------------ dequantize

__global__ void dequantize_kernel(const uint8_t *__restrict__ codes,
                                  const void *__restrict__ scales, int64_t M, int fmt, int role,
                                  float *__restrict__ out) {
  const int64_t total = M * 128;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t m = i >> 7;
    const int d = (int)(i & 127);
    float v;
    if (fmt == IXL_MXFP4) {
      const uint8_t b = codes[m * 64 + (d >> 1)];
      v = ixl_cvt_e2m1_to_f32((d & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15));
    } else {
      v = ixl_cvt_e4m3_to_f32(codes[m * 128 + d]);
    }
    if (fmt == IXL_FP8) {
      if (role == IXL_ROLE_K) v *= reinterpret_cast<const float *>(scales)[m];
    } else {
      const uint32_t word = reinterpret_cast<const uint32_t *>(scales)[m];
      const int b = (int)((word >> (8 * (d >> 5))) & 0xffu);
      v = b == 0xff ? __int_as_float(0x7fc00000) // 0xFF: the NaN scale
                    : ixl_scale_pow2f(v, b - 127);
    }
    out[i] = v;
  }
}

// ------------------------------------------------------------------ weights

__global__ void prepare_weights_kernel(const float *__restrict__ w, const float *__restrict__ qs,
                                       int64_t n, float *__restrict__ dense,
                                       uint16_t *__restrict__ sparse) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float v = qs ? w[i] * qs[i] : w[i];
    if (dense) dense[i] = v;
    if (sparse) sparse[i] = ixl_cvt_f32_to_bf16(v);
  }
}

// ------------------------------------------------------------------ paged K

// One thread per V-sized piece of a position's values, plus one per position for its scale.
// V = uint4 when every address is 16-byte aligned, else bytes.
template <typename V>
__global__ void pages_write_kernel(const uint8_t *__restrict__ codes,
                                   const uint32_t *__restrict__ scales, int64_t src_start,
                                   int64_t count, uint8_t *__restrict__ pages, int64_t num_pages,
                                   int64_t page_stride, int page_size, int vb,
                                   const int32_t *__restrict__ page_ids) {
  const int pieces = vb / (int)sizeof(V);
  const int64_t total = count * (pieces + 1);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t p = i / (pieces + 1);
    const int piece = (int)(i % (pieces + 1));
    const int64_t page = page_ids[p / page_size];
    if (page < 0 || page >= num_pages) continue; // refused on the host when it can see it
    const int64_t slot = p % page_size;
    uint8_t *dst = pages + page * page_stride;
    if (piece < pieces) {
      reinterpret_cast<V *>(dst + slot * vb)[piece] =
          reinterpret_cast<const V *>(codes + (src_start + p) * vb)[piece];
    } else {
      // scales of the page after its values; 4-byte aligned since page_stride % 512 == 0
      reinterpret_cast<uint32_t *>(dst + (int64_t)page_size * vb)[slot] = scales[src_start + p];
    }
  }
}

} // namespace

extern "C" ixl_status ixl_cuda_quantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_quantizer quantizer,
                                        ixl_role role, const ixl_tensor *x, ixl_tensor *codes,
                                        ixl_tensor *scales) {
  const int64_t M = ixl_tensor_numel(x) / 128;
  if (M == 0) return IXL_OK;
  const unsigned grid = grid_for(M, QUANT_THREADS / 32);
  cudaStream_t s = stream_of(ctx);
  uint8_t *cd = (uint8_t *)codes->data;
  void *sd = scales->data;
  switch (x->dtype) {
    case IXL_F32:
      quantize_kernel<float, false><<<grid, QUANT_THREADS, 0, s>>>((const float *)x->data, M, fmt,
                                                                   quantizer, role, cd, sd);
      break;
    case IXL_BF16:
      quantize_kernel<uint16_t, false><<<grid, QUANT_THREADS, 0, s>>>(
          (const uint16_t *)x->data, M, fmt, quantizer, role, cd, sd);
      break;
    case IXL_F16:
      quantize_kernel<uint16_t, true><<<grid, QUANT_THREADS, 0, s>>>(
          (const uint16_t *)x->data, M, fmt, quantizer, role, cd, sd);
      break;
    default:
      return ixl_set_error(ctx, IXL_ERR_DTYPE, "quantize: x: dtype %s, expected f32, bf16 or f16",
                           ixl_dtype_name((ixl_dtype)x->dtype));
  }
  return ixl_cuda_check_launch(ctx, "quantize");
}

extern "C" ixl_status ixl_cuda_dequantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_role role,
                                          const ixl_tensor *codes, const ixl_tensor *scales,
                                          ixl_tensor *out) {
  const int64_t M = ixl_tensor_numel(out) / 128;
  if (M == 0) return IXL_OK;
  dequantize_kernel<<<grid_for(M * 128, 256), 256, 0, stream_of(ctx)>>>(
      (const uint8_t *)codes->data, scales ? scales->data : nullptr, M, fmt, role,
      (float *)out->data);
  return ixl_cuda_check_launch(ctx, "dequantize");
}

extern "C" ixl_status ixl_cuda_prepare_weights(ixl_ctx *ctx, ixl_kv_format fmt,
                                               const ixl_tensor *weights,
                                               const ixl_tensor *q_scales, ixl_tensor *dense_f32,
                                               ixl_tensor *sparse_bf16) {
  const int64_t n = ixl_tensor_numel(weights);
  if (n == 0 || (!dense_f32 && !sparse_bf16)) return IXL_OK;
  const float *qs = fmt == IXL_FP8 && q_scales ? (const float *)q_scales->data : nullptr;
  prepare_weights_kernel<<<grid_for(n, 256), 256, 0, stream_of(ctx)>>>(
      (const float *)weights->data, qs, n, dense_f32 ? (float *)dense_f32->data : nullptr,
      sparse_bf16 ? (uint16_t *)sparse_bf16->data : nullptr);
  return ixl_cuda_check_launch(ctx, "prepare_weights");
}

extern "C" ixl_status ixl_cuda_kv_pages_write(ixl_ctx *ctx, ixl_kv_format fmt,
                                              const ixl_tensor *codes, const ixl_tensor *scales,
                                              int64_t src_start, int64_t count, ixl_tensor *pages,
                                              int page_size, const ixl_tensor *page_ids) {
  if (count <= 0) return IXL_OK;
  const int vb = ixl_format_value_bytes(fmt);
  const int64_t num_pages = pages->shape[0], stride = pages->shape[1];
  const bool aligned = ((uintptr_t)codes->data % 16 == 0) && ((uintptr_t)pages->data % 16 == 0);
  cudaStream_t s = stream_of(ctx);
  const uint8_t *cd = (const uint8_t *)codes->data;
  const uint32_t *sd = (const uint32_t *)scales->data;
  uint8_t *pd = (uint8_t *)pages->data;
  const int32_t *ids = (const int32_t *)page_ids->data;
  if (aligned) {
    const int64_t total = count * (vb / 16 + 1);
    pages_write_kernel<uint4><<<grid_for(total, 256), 256, 0, s>>>(
        cd, sd, src_start, count, pd, num_pages, stride, page_size, vb, ids);
  } else {
    const int64_t total = count * (vb + 1);
    pages_write_kernel<uint8_t><<<grid_for(total, 256), 256, 0, s>>>(
        cd, sd, src_start, count, pd, num_pages, stride, page_size, vb, ids);
  }
  return ixl_cuda_check_launch(ctx, "kv_pages_write");
}
