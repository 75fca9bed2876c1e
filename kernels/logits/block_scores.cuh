// logits/block_scores.cuh - what the logits kernels that emit K3's block scores share (issue
// 14's fused K3, idxlab.h's ixl_block_scores; logits v1 in logits_v1.cuh, v2's MXFP4 EMIT
// kernels in logits_v2_mx_sm90.cu): the NaN-propagating max, the float atomic max on a word
// preset to 0xFFFFFFFF, and that preset.
#ifndef IXL_LOGITS_BLOCK_SCORES_CUH
#define IXL_LOGITS_BLOCK_SCORES_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/launch.cuh"
#include "internal.h"

namespace ixl_bs {

// max with NaN propagating (SPEC 3 K3 step 2); +0 and -0 are equal keys to K3
__device__ __forceinline__ float nan_max(float a, float b) {
  return a != a ? a : b != b ? b : fmaxf(a, b);
}

// *a = max(*a, v) on a word that starts at 0xFFFFFFFF (below every value here): a value with
// the sign bit clear is the larger the larger its bits as int, one with it set the smaller its
// bits as unsigned, and every NaN becomes 0x7FFFFFFF, above +inf.
__device__ __forceinline__ void score_max(float *a, float v) {
  uint32_t b = __float_as_uint(v);
  if (v != v) b = 0x7FFFFFFFu;
  if ((int32_t)b >= 0)
    atomicMax(reinterpret_cast<int *>(a), (int)b);
  else
    atomicMin(reinterpret_cast<unsigned *>(a), b);
}

// Before the launch: the scores' words to 0xFFFFFFFF (a block with a position always gets an
// atomic), and nblocks to zeros when the call has no rows or columns (no CTA writes them then).
static inline ixl_status preset(ixl_ctx *ctx, const ixl_block_scores *bs, bool empty,
                                const char *what) {
  const cudaStream_t s = ixl::stream_of(ctx);
  const int64_t rows = bs->scores->shape[0], cols = bs->scores->shape[1];
  cudaError_t e = cudaMemsetAsync(bs->scores->data, 0xFF, (size_t)(rows * cols) * sizeof(float), s);
  if (e == cudaSuccess && empty)
    e = cudaMemsetAsync(bs->nblocks->data, 0, (size_t)rows * sizeof(int32_t), s);
  return e == cudaSuccess ? IXL_OK : ixl_cuda_status(ctx, e, what);
}

} // namespace ixl_bs

#endif
