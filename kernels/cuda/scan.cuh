// scan.cuh - block-wide scans.
#ifndef IXL_CUDA_SCAN_CUH
#define IXL_CUDA_SCAN_CUH

#include <cuda_runtime.h>
#include <stdint.h>

namespace ixl {

// ------------------------------------------------------------------ block-wide scans

// Exclusive prefix sum over the block of one value per thread; *total gets the block's sum.
// ws: NT/32 + 1 ints of shared memory. Every thread must call it; it synchronises.
template <int NT, typename T>
__device__ __forceinline__ T block_exclusive_scan(T v, T *total, T *ws) {
  static_assert(NT % 32 == 0 && NT <= 1024, "block size");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T x = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) ws[warp] = x;
  __syncthreads();
  if (warp == 0) {
    T w = lane < NT / 32 ? ws[lane] : T(0);
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const T y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    if (lane < NT / 32) ws[lane] = w; // inclusive prefix of the warp sums
    if (lane == NT / 32 - 1) ws[NT / 32] = w;
  }
  __syncthreads();
  const T before = (warp > 0 ? ws[warp - 1] : T(0)) + x - v;
  *total = ws[NT / 32];
  __syncthreads(); // ws may be reused by the caller right away
  return before;
}

} // namespace ixl

#endif
