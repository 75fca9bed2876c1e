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
// - epilogue_bf16: SPEC 3's K5 reduction (v_h = bf16(relu(dot * scale)); four bf16 chains by
//   h % 4, heads in increasing order, one fma.rn.bf16 each; bf16(bf16(s0 + s2) + bf16(s1 + s3))),
//   the same for K1, K2 and K5, so K5 == K1/K2 (bf16) bit for bit on this variant.
// Lane layout (ixl_sm90_acc_rc): thread t of the warpgroup, warp w = t / 32, lane l: register
// 4j + c is (position 16 w + l/4, head 8 j + 2 (l%4) + c), 4j + 2 + c the position + 8.
#ifndef IXL_LOGITS_V2_FP8_CUH
#define IXL_LOGITS_V2_FP8_CUH

#include <cuda_bf16.h>

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

// bf16 reduction of a finished accumulator. Lane quad t4 = 0..3 holds, per j, heads
// 8j + 2 t4 + {0, 1} of positions r0 and r0 + 8: chain pair (c, c + 1), c = 2 (t4 & 1), needs
// heads 8j + c + {0, 1} (lane t4 & 1) and 8j + 4 + c + {0, 1} (lane (t4 & 1) | 2), in that
// order. One shfl_xor(2) per j gives lanes t4 < 2 both halves for r0 and lanes t4 >= 2 both
// for r0 + 8; a shfl_xor(1) then joins chains (0, 1) and (2, 3). Result: the logit of
// position r0 + 8 (t4 >> 1), valid in every lane. w: the row's H bf16 weights in smem.
template <int H>
__device__ __forceinline__ __nv_bfloat16 epilogue_bf16(const float (&acc)[H / 2], float sc0,
                                                       float sc1, const __nv_bfloat16 *w,
                                                       int t4) {
  const bool hi = t4 & 2; // this lane finishes position r0 + 8
  const __nv_bfloat162 z = __floats2bfloat162_rn(0.0f, 0.0f);
  __nv_bfloat162 ch = z; // chains (c, c + 1), c = 2 (t4 & 1)
  const __nv_bfloat162 *w2 = reinterpret_cast<const __nv_bfloat162 *>(w);
#pragma unroll
  for (int j = 0; j < H / 8; ++j) {
    const float d0 = __fmul_rn(acc[4 * j], sc0), d1 = __fmul_rn(acc[4 * j + 1], sc0);
    const float d2 = __fmul_rn(acc[4 * j + 2], sc1), d3 = __fmul_rn(acc[4 * j + 3], sc1);
    const __nv_bfloat162 v0 = __floats2bfloat162_rn(d0 < 0.0f ? 0.0f : d0, d1 < 0.0f ? 0.0f : d1);
    const __nv_bfloat162 v8 = __floats2bfloat162_rn(d2 < 0.0f ? 0.0f : d2, d3 < 0.0f ? 0.0f : d3);
    const __nv_bfloat162 keep = hi ? v8 : v0, send = hi ? v0 : v8;
    uint32_t sb = *reinterpret_cast<const uint32_t *>(&send);
    sb = __shfl_xor_sync(0xffffffffu, sb, 2);
    const __nv_bfloat162 got = *reinterpret_cast<const __nv_bfloat162 *>(&sb);
    // heads 8j + c (lane t4 & 1, the "low" one) come before 8j + 4 + c (lane (t4 & 1) | 2)
    const int c = 2 * (t4 & 1);
    const __nv_bfloat162 wl = w2[(8 * j + c) / 2], wh = w2[(8 * j + 4 + c) / 2];
    ch = __hfma2(wl, hi ? got : keep, ch);
    ch = __hfma2(wh, hi ? keep : got, ch);
  }
  uint32_t cb = *reinterpret_cast<const uint32_t *>(&ch);
  cb = __shfl_xor_sync(0xffffffffu, cb, 1);
  const __nv_bfloat162 other = *reinterpret_cast<const __nv_bfloat162 *>(&cb);
  // (s0, s1) + (s2, s3): lanes t4 even hold (s0, s1), odd (s2, s3); the sum is symmetric
  const __nv_bfloat162 sum = (t4 & 1) ? __hadd2(other, ch) : __hadd2(ch, other);
  return __hadd(__low2bfloat16(sum), __high2bfloat16(sum));
}
#endif

} // namespace ixl_v2

#endif
