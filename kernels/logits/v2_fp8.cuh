// logits/v2_fp8.cuh - the fp8 tile math of logits v2 (logits_v2_sm90.cu), one copy for every
// mode that runs it, so that two modes computing the same (row, position) compute it with the
// same instructions in the same order.
//
// A tile is 64 key positions x 128 e4m3 codes (the wgmma A operand, M = 64) in a 128B-swizzled
// K-major smem tile (what a TMA box of 64 rows x 128 B with SWIZZLE_128B writes), beside the
// 64 positions' fp32 scales; the query of one row is H rows x 128 codes (the B operand, N = H),
// swizzled the same way, beside its H fp32 weights. Swap-AB: D[position][head].
// - tile_mma: four m64nHk32 SS wgmma (k32 groups 0..3) chained into one f32 accumulator (the
//   tensor core's fp8 accumulation: within the fp8 tolerance of the CPU's fp32 sum, not bitwise).
// - epilogue_fp32: per position, sum over heads of w * relu(dot * scale) in fp32 (SPEC 3 allows
//   any order for the fp32 reduction): a lane's 2 positions x H/4 heads, then 2 shfl_xor.
// Lane layout (ixl_sm90_acc_rc): thread t of the warpgroup, warp w = t / 32, lane l: register
// 4j + c is (position 16 w + l/4, head 8 j + 2 (l%4) + c), 4j + 2 + c the position + 8.
#ifndef IXL_LOGITS_V2_FP8_CUH
#define IXL_LOGITS_V2_FP8_CUH

#include "cuda/sm90.cuh"

namespace ixl_v2 {

using namespace ixl::sm90;

constexpr int kTile = 64;               // positions per tile (the wgmma M)
constexpr int kTileBytes = kTile * 128; // fp8 codes of one tile

#if IXL_SM90_DEVICE
// Issues (does not wait for) the tile's four wgmma into acc; the caller commits and waits.
template <int H>
__device__ __forceinline__ void tile_mma(float (&acc)[H / 2], const uint8_t *a,
                                         const uint8_t *q) {
  fence_operand(acc);
  wgmma_fence();
#pragma unroll
  for (int g = 0; g < 4; ++g)
    wgmma_e4m3_ss<H>(acc, wgmma_desc(a + 32 * g, IXL_SM90_SWIZZLE_128B, 16, 1024),
                     wgmma_desc(q + 32 * g, IXL_SM90_SWIZZLE_128B, 16, 1024), g > 0);
  wgmma_commit();
}

// fp32 reduction of a finished accumulator: s0, s1 = the logits of the lane's positions r0 and
// r0 + 8 (every lane of the quad gets both). sc0, sc1: their K scales; w: the row's H fp32
// weights in smem (8-B aligned). relu as x < 0 ? 0 : x keeps NaN.
template <int H>
__device__ __forceinline__ void epilogue_fp32(const float (&acc)[H / 2], float sc0, float sc1,
                                              const float *w, int t4, float &s0, float &s1) {
  s0 = 0.0f, s1 = 0.0f;
#pragma unroll
  for (int j = 0; j < H / 8; ++j) {
    const float2 wj = *reinterpret_cast<const float2 *>(w + 8 * j + 2 * t4);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const float wc = c ? wj.y : wj.x;
      const float d0 = __fmul_rn(acc[4 * j + c], sc0), d1 = __fmul_rn(acc[4 * j + 2 + c], sc1);
      s0 = __fmaf_rn(wc, d0 < 0.0f ? 0.0f : d0, s0);
      s1 = __fmaf_rn(wc, d1 < 0.0f ? 0.0f : d1, s1);
    }
  }
  s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
  s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
  s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
  s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
}
#endif

} // namespace ixl_v2

#endif
