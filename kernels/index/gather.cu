// gather.cu - ixl_cuda_gather_cols: out[r, j] = src[r, idx[r, j]] (or -inf / -1 outside the
// row), used by the pipeline to bring compared values together on the device before a small
// copy to the host. One thread per output element; reads are as scattered as the indices.
#include <cstdint>

#include "ops.h"

namespace {

template <typename T>
__global__ void gather_kernel(const T *__restrict__ src, const int32_t *__restrict__ idx,
                              T *__restrict__ out, int64_t R, int64_t K, int64_t C, T fill) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= R * K) return;
  int64_t r = i / K;
  int64_t c = idx[i];
  out[i] = (c >= 0 && c < C) ? src[r * C + c] : fill;
}

}  // namespace

extern "C" ixl_status ixl_cuda_gather_cols(ixl_ctx *ctx, const ixl_tensor *src,
                                           const ixl_tensor *idx, ixl_tensor *out) {
  const int64_t R = idx->shape[0], K = idx->shape[1], C = src->shape[1];
  const int64_t n = R * K;
  if (n == 0) return IXL_OK;
  const int threads = 256;
  const unsigned blocks = (unsigned)((n + threads - 1) / threads);
  cudaStream_t s = (cudaStream_t)ctx->stream;
  const int32_t *ix = (const int32_t *)idx->data;
  switch (src->dtype) {
    case IXL_F32:
      gather_kernel<float><<<blocks, threads, 0, s>>>((const float *)src->data, ix,
                                                       (float *)out->data, R, K, C, -INFINITY);
      break;
    case IXL_BF16:
      gather_kernel<uint16_t><<<blocks, threads, 0, s>>>((const uint16_t *)src->data, ix,
                                                          (uint16_t *)out->data, R, K, C,
                                                          (uint16_t)0xff80);
      break;
    default:
      gather_kernel<int32_t><<<blocks, threads, 0, s>>>((const int32_t *)src->data, ix,
                                                         (int32_t *)out->data, R, K, C, -1);
  }
  return ixl_cuda_check_launch(ctx, "gather_cols");
}
