// gather.cu - ixl_cuda_gather_cols: out[r, j] = src[r, idx[r, j]] (or -inf / -1 outside the
// row), used by the pipeline to bring compared values together on the device before a small
// copy to the host. One thread per output element; reads are as scattered as the indices.
// PDL (cuda/launch.cuh): the kernel waits at entry (src and idx are previous kernels' outputs),
// then lets a dependent PDL launch start.
#include <cstdint>

#include "cuda/launch.cuh"

namespace {

template <typename T>
__global__ void gather_kernel(const T *__restrict__ src, const int32_t *__restrict__ idx,
                              T *__restrict__ out, int64_t R, int64_t K, int64_t C, T fill) {
  ixl::pdl_wait();    // before the first global access (cuda/launch.cuh's rule)
  ixl::pdl_trigger(); // safe anywhere: a dependent waits for this grid's end, not for this
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
  const dim3 grid((unsigned)((n + threads - 1) / threads)), block(threads);
  const int32_t *ix = (const int32_t *)idx->data;
  switch (src->dtype) {
    case IXL_F32:
      return ixl::launch_pdl(ctx, "gather_cols", gather_kernel<float>, grid, block, 0, 1,
                             (const float *)src->data, ix, (float *)out->data, R, K, C,
                             -INFINITY);
    case IXL_BF16:
      return ixl::launch_pdl(ctx, "gather_cols", gather_kernel<uint16_t>, grid, block, 0, 1,
                             (const uint16_t *)src->data, ix, (uint16_t *)out->data, R, K, C,
                             (uint16_t)0xff80);
    default:
      return ixl::launch_pdl(ctx, "gather_cols", gather_kernel<int32_t>, grid, block, 0, 1,
                             (const int32_t *)src->data, ix, (int32_t *)out->data, R, K, C,
                             (int32_t)-1);
  }
}
