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

#include "cuda/launch.cuh"
#include "cuda/sm90.cuh"

namespace ixl_v2 {

using namespace ixl::sm90;

constexpr int kTile = 64;               // positions per tile (the wgmma M)
constexpr int kTileBytes = kTile * 128; // fp8 codes of one tile
constexpr int kMath = 128;              // the K2/K5 kernels' math warpgroup
constexpr int kThreads = kMath + 32;    // + their producer warp

// Weights of one query row in shared memory as k1_epilogue reads them: lane quad t4's 2 H / 8
// weights (heads 8 jj + 2 t4 + c, jj = 0 .. H / 8 - 1, c = 0, 1) contiguous at t4 * kWQ(H),
// in (jj, c) order, so a lane reads them as float4s; the stride kWQ = H / 4 + 4 puts the four
// lanes' float4s in distinct banks.
template <int H>
__host__ __device__ constexpr int k1_wq() { return H / 4 + 4; }
template <int H>
__host__ __device__ constexpr int k1_wrow() { return 4 * k1_wq<H>(); } // floats per row
template <int H>
__host__ __device__ constexpr int k1_widx(int h) { // head h's slot in its row
  return ((h % 8) / 2) * k1_wq<H>() + 2 * (h / 8) + (h % 2);
}

#if IXL_SM90_DEVICE
// relu keeping NaN (max.NaN.f32, PTX ISA "max"): one FMNMX.NAN.
__device__ __forceinline__ float relu_nan(float x) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(0.0f));
  return r;
}

// prefetch.tensormap (PTX ISA "prefetch, prefetchu"; not in CCCL's cuda::ptx): brings a
// __grid_constant__ tensor map's descriptor into the cache before its first TMA, so the first
// copy does not wait on that fetch (the map is a kernel parameter: no PDL ordering needed).
__device__ __forceinline__ void prefetch_tensormap(const void *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// The end of a K2/K5 kernel's set-up (v2_fp8_kernel, k2_fp8_kernel), after thread 0 initialized
// the barriers: thread `producer` prefetches both tensor maps, the CTA syncs, then PDL's wait and
// trigger (cuda/launch.cuh's rule: no global access above them); [u0, u1): the CTA's units.
__device__ __forceinline__ void cta_start(int tid, int producer, const void *kmap,
                                          const void *qmap, int64_t per_cta, int64_t units,
                                          int64_t &u0, int64_t &u1) {
  if (tid == producer) { // the descriptors fetched while the CTA sets up
    prefetch_tensormap(kmap);
    prefetch_tensormap(qmap);
  }
  __syncthreads();
  ixl::pdl_wait();
  ixl::pdl_trigger();
  u0 = (int64_t)blockIdx.x * per_cta;
  u1 = u0 + per_cta < units ? u0 + per_cta : units;
}

// The four k32 groups of a tile as four wgmma (mma(acc, A descriptor, B descriptor, scale_d))
// chained into acc, A = the 64 x 128 B key tile and B = the queries, both 128B-swizzled K-major;
// one commit group. Issued, not waited.
template <int NA, typename Mma>
__device__ __forceinline__ void tile_mma_k4(float (&acc)[NA], const uint8_t *a, const uint8_t *q,
                                            Mma &&mma) {
  fence_operand(acc);
  wgmma_fence();
#pragma unroll
  for (int g = 0; g < 4; ++g)
    mma(acc, wgmma_desc(a + 32 * g, IXL_SM90_SWIZZLE_128B, 16, 1024),
        wgmma_desc(q + 32 * g, IXL_SM90_SWIZZLE_128B, 16, 1024), g > 0);
  wgmma_commit();
}
// Issues (does not wait for) the tile's four m64nHk32 wgmma into acc.
template <int H>
__device__ __forceinline__ void tile_mma(float (&acc)[H / 2], const uint8_t *a,
                                         const uint8_t *q) {
  tile_mma_k4(acc, a, q, [](float(&d)[H / 2], uint64_t da, uint64_t db, int sd) {
    wgmma_e4m3_ss<H>(d, da, db, sd);
  });
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

// epilogue_fp32 with the key scale applied after the head sum (k2_fp8_kernel's kV_FAST): when
// every position of the warp has a finite scale >= 0, relu(d s) = relu(d) s, so
// s0 = (sum_h w_h relu(d_h)) sc0; otherwise epilogue_fp32 (a warp-uniform choice, as
// k1_epilogue's). Not bitwise epilogue_fp32's value (one rounding moved): SPEC 3 leaves the fp32
// reduction's order free.
template <int H>
__device__ __forceinline__ void epilogue_fp32_post(const float (&acc)[H / 2], float sc0,
                                                   float sc1, const float *w, int t4, float &s0,
                                                   float &s1) {
  const float big = 3.402823466e38f;
  if (!__all_sync(0xffffffffu, sc0 >= 0.0f && sc0 <= big && sc1 >= 0.0f && sc1 <= big)) {
    epilogue_fp32<H>(acc, sc0, sc1, w, t4, s0, s1);
    return;
  }
  s0 = 0.0f, s1 = 0.0f;
#pragma unroll
  for (int j = 0; j < H / 8; ++j) {
    const float2 wj = *reinterpret_cast<const float2 *>(w + 8 * j + 2 * t4);
    s0 = __fmaf_rn(wj.x, relu_nan(acc[4 * j]), s0);
    s1 = __fmaf_rn(wj.x, relu_nan(acc[4 * j + 2]), s1);
    s0 = __fmaf_rn(wj.y, relu_nan(acc[4 * j + 1]), s0);
    s1 = __fmaf_rn(wj.y, relu_nan(acc[4 * j + 3]), s1);
  }
  s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
  s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
  s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
  s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
  s0 = __fmul_rn(s0, sc0), s1 = __fmul_rn(s1, sc1);
}

// The (row, tile) walk over a CTA's units [u0, u1) both roles of both K2/K5 kernels share: no
// division per step.
// (Rows fit int32: both kernels take calls with R H < 2^31 only.)
struct UnitWalk {
  int64_t u, u1;
  int32_t r, t, ntile;
  __device__ __forceinline__ UnitWalk(int64_t u0, int64_t u1_, int32_t ntile_)
      : u(u0), u1(u1_), r((int32_t)(u0 / ntile_)), t((int32_t)(u0 - (u0 / ntile_) * ntile_)),
        ntile(ntile_) {}
  __device__ __forceinline__ bool more() const { return u < u1; }
  __device__ __forceinline__ void step() {
    ++u;
    if (++t == ntile) t = 0, ++r;
  }
};

// A math warpgroup's next tile with keys along its walk (false at the end): on_row(row) when
// the row changes, empty(row, col0) says a tile has no key (then ninf(row, col0) writes its
// -inf columns and the walk goes on), take(row, col0) records the tile found.
template <typename Row, typename OnRow, typename Empty, typename Ninf, typename Take>
__device__ __forceinline__ bool next_tile(UnitWalk &wk, Row &row, OnRow &&on_row,
                                          Empty &&empty, Ninf &&ninf, Take &&take) {
  for (; wk.more(); wk.step()) {
    if (wk.r != row) {
      row = wk.r;
      on_row(row);
    }
    const int32_t col0 = wk.t * kTile;
    if (empty(row, col0)) {
      ninf(row, col0);
      continue;
    }
    take(row, col0);
    wk.step();
    return true;
  }
  return false;
}

// A K2 tile's copies into one stage, by the producer warp (v2_fp8_kernel's K2 mode and
// k2_fp8_kernel): lane 0's arrive.expect_tx for the whole tile, then per box b < per the page
// (block-table entry pi + b, from lane pi + b - cb's `cache`, clamped into the pool: device data)
// and lane 0's TMA box of codes (kmap rows pg rpp + sub 64) and bulk copy of its PB scales.
template <typename P_>
__device__ __forceinline__ void k2_copy_tile(const P_ &p, const CUtensorMap *kmap, int lane,
                                             int per, int32_t cache, int64_t pi, int64_t cb,
                                             int32_t sub, uint8_t *dst, float *sdst,
                                             uint64_t *full) {
  if (lane == 0)
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, full,
                                   (uint32_t)(kTileBytes + kTile * 4));
  for (int b = 0; b < per; ++b) {
    int32_t pg = __shfl_sync(0xffffffffu, cache, (int)(pi + b - cb));
    pg = pg < 0 ? 0 : pg >= p.num_pages ? p.num_pages - 1 : pg;
    const int32_t slot = sub * kTile;
    if (lane == 0) {
      const int32_t c[2] = {0, pg * p.rpp + slot};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst + b * p.PB * 128, kmap,
                                c, full);
      const uint8_t *src = p.pages + (int64_t)pg * p.stride + (int64_t)p.P * 128 + slot * 4;
      ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, sdst + b * p.PB, src,
                         (uint32_t)(p.PB * 4), full);
    }
  }
}

// The math warpgroup's place in the stage ring and its Q slots (two; k2_fp8_kernel's kV_Q1:
// one, qslot 0 from the start) (bit s of qfphase: Q slot s's parity).
struct MathRing {
  int stage = 0, qslot = 1;
  uint32_t fphase = 0, qfphase = 0;
  int32_t qrow = -1;
};
// Waits for the ring's next stage (and, when `row` is not the current Q slot's, for the other
// Q slot), then issues the stage's four wgmma into acc unless !mma; stage and qslot get what
// the tile uses. prof: the clocks waiting added to t_wait.
template <int H, int S, int NQ = 2>
__device__ __forceinline__ void ring_issue(MathRing &m, int32_t row, uint64_t *full,
                                           uint64_t *qfull, const uint8_t *s_codes,
                                           const uint8_t *s_q, bool mma, float (&acc)[H / 2],
                                           bool prof, long long &t_wait, int &stage,
                                           int &qslot) {
  const long long w0 = prof ? clock64() : 0;
  if (row != m.qrow) {
    m.qrow = row;
    m.qslot = NQ == 2 ? m.qslot ^ 1 : 0;
    mbar_wait(&qfull[m.qslot], (m.qfphase >> m.qslot) & 1);
    m.qfphase ^= 1u << m.qslot;
  }
  mbar_wait(&full[m.stage], m.fphase);
  if (prof) t_wait += clock64() - w0;
  stage = m.stage, qslot = m.qslot;
  if (mma) tile_mma<H>(acc, s_codes + m.stage * kTileBytes, s_q + m.qslot * H * 128);
  if (++m.stage == S) m.stage = 0, m.fphase ^= 1;
}

// A math warpgroup's walk over its tiles with a double-buffered accumulator (k2_fp8_kernel and
// v2_fp8_kernel): tile i + 1's wgmma are issued before tile i's epilogue, which runs after
// wait1() (wgmma.wait_group 1) under them. next(Tile &) finds the next tile with keys (false at
// the end); issue(Tile &, acc) waits for its stage and issues its wgmma (setting Tile::qslot);
// finish(const Tile &, acc, last, next_qslot) releases and reduces a waited tile. One plain
// loop with early exits (a form with a lambda per buffer made ptxas serialize every wgmma,
// C7518).
template <int H, typename Tile, typename Next, typename Issue, typename Wait1, typename Finish>
__device__ __forceinline__ void walk_double(Next &&next, Issue &&issue, Wait1 &&wait1,
                                            Finish &&finish) {
  float acc0[H / 2], acc1[H / 2];
  Tile a, b;
  if (!next(a)) return;
  issue(a, acc0);
  for (;;) { // a in flight in acc0
    if (!next(b)) {
      wgmma_wait<0>();
      finish(a, acc0, true, 0);
      return;
    }
    issue(b, acc1);
    wait1();
    finish(a, acc0, false, b.qslot);
    if (!next(a)) { // b in flight in acc1
      wgmma_wait<0>();
      finish(b, acc1, true, 0);
      return;
    }
    issue(a, acc0);
    wait1();
    finish(b, acc1, false, a.qslot);
  }
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

// ---------------------------------------------------------------- K1 on a shared key tile
// (logits_v2_sm90.cu's k1_fp8_kernel; IXL_LOGITS_V2_FP8_K1). One 64-position key tile is the A
// operand of ONE m64n256k32 wgmma whose N = 256 columns are RB = 256 / H query rows x H heads:
// the tile is read from shared memory once per 4 rows (H 64) instead of once per row, and the
// 64 x 256 accumulator (128 registers a thread) holds the four rows' dots.
// wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3, SS (PTX ISA "wgmma.mma_async"), the
// same form as sm90.cuh's n32-n128 wrappers (which end at N 128).
__device__ __forceinline__ void wgmma_m64n256k32_e4m3_ss(float (&d)[128], uint64_t da,
                                                         uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
               "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "
               "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "
               "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, "
               "%66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "
               "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, "
               "%98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
               "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "
               "%124, %125, %126, %127"
               "}, %128, %129, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
                 "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                 "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
                 "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                 "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                 "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
                 "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
                 "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                 "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                 "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]),
                 "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                 "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
                 "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                 "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
                 "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                 "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
                 "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                 "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
                 "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                 "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
                 "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                 "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
                 "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                 "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
                 "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "l"(da), "l"(db), "r"(scale_d));
}

// The four k32 groups of a tile into one accumulator: A = the key tile (64 x 128 B, 128B
// swizzle), B = the RB rows' queries (256 x 128 B, the same swizzle). Issued, not waited.
__device__ __forceinline__ void tile_mma256(float (&acc)[128], const uint8_t *a,
                                            const uint8_t *q) {
  tile_mma_k4(acc, a, q, [](float(&d)[128], uint64_t da, uint64_t db, int sd) {
    wgmma_m64n256k32_e4m3_ss(d, da, db, sd);
  });
}

// tile_mma256 from the descriptors' low words (k1_fp8_kernel's LEAN & 1, IXL_LOGITS_V2_FP8_K1=f,
// g): alo, blo = the low 32 bits of wgmma_desc(a / q, 128B swizzle, 16, 1024) (the start
// address >> 4 in bits 0-13, LBO 1 in bits 16-29); k32 group g starts 32 g bytes on, + 2 g in
// the low word (a start address below 256 KB: no carry out of bits 0-13); the high word
// (SBO 64, the swizzle) a constant. The same descriptors as tile_mma256's: with the stage and
// Q slot in uniform registers (warp-uniform loop control, the kernel's votes) ptxas builds them
// with UIADD3 / UMOV, no R2UR.
__device__ __forceinline__ uint32_t desc_lo(const void *smem) {
  return (uint32_t)wgmma_desc(smem, IXL_SM90_SWIZZLE_128B, 16, 1024);
}
template <int NA, typename Mma>
__device__ __forceinline__ void tile_mma_k4_lo(float (&acc)[NA], uint32_t alo, uint32_t blo,
                                               Mma &&mma) {
  const uint64_t hi = ixl_sm90_desc_bits(0, IXL_SM90_SWIZZLE_128B, 16, 1024) & ~0xffffffffull;
  fence_operand(acc);
  wgmma_fence();
#pragma unroll
  for (int g = 0; g < 4; ++g) mma(acc, hi | (alo + 2 * g), hi | (blo + 2 * g), g > 0);
  wgmma_commit();
}
__device__ __forceinline__ void tile_mma256_lo(float (&acc)[128], uint32_t alo, uint32_t blo) {
  tile_mma_k4_lo(acc, alo, blo, [](float(&d)[128], uint64_t da, uint64_t db, int sd) {
    wgmma_m64n256k32_e4m3_ss(d, da, db, sd);
  });
}
// tile_mma from the low words (k2_fp8_kernel's kV_UNI): four m64nHk32.
template <int H>
__device__ __forceinline__ void tile_mma_lo(float (&acc)[H / 2], uint32_t alo, uint32_t blo) {
  tile_mma_k4_lo(acc, alo, blo, [](float(&d)[H / 2], uint64_t da, uint64_t db, int sd) {
    wgmma_e4m3_ss<H>(d, da, db, sd);
  });
}

// cp.async.ca.shared.global 4 B with src-size (PTX ISA "cp.async"): src_bytes 0 zero-fills
// the destination and reads nothing; then cp.async.mbarrier.arrive.noinc (PTX ISA
// "cp.async.mbarrier.arrive"): an arrival on `bar` once this thread's earlier cp.async have
// landed, not counted in advance (the barrier's expected count includes it). The key scales
// of k1_fp8_kernel's producer: its lanes never wait on a global load.
__device__ __forceinline__ void cp_async4_zfill(void *dst, const void *src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar))
               : "memory");
}

// Named barrier `id` (1..15; 0 is __syncthreads) over n threads (a multiple of 32): bar.sync
// waits for the barrier's n arrivals, bar.arrive adds its warp's and goes on (PTX ISA
// "bar.sync / bar.arrive"). k1_fp8_kernel's ping-pong (IXL_LOGITS_V2_FP8_K1=3): each math
// warpgroup issues its tile's wgmma only after the other one issued its own, so their wgmma
// reach the tensor cores in turn (FlashAttention-3's warpgroup scheduling barriers).
__device__ __forceinline__ void named_bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}

// fp32 reduction of a finished 64 x (RB x H) accumulator (RB = 256 / H rows). Per lane: for
// each of its RB rows and its 2 positions (r0, r0 + 8), sum over its H / 4 heads of
// w * relu(dot) (fast: the key scales are finite and >= 0 for the warp's positions, so
// relu(dot * scale) = relu(dot) * scale and the scale is applied once per logit after the head
// sum) or w * relu(dot * scale) (else: v2_fp8.cuh's epilogue_fp32 formula). Then the quad's 4
// partial sums of every (row, position) are added as (p0 + p1) + (p2 + p3) by a transposing
// reduction (xor 1 halves the lane's values, xor 2 halves them again: 3/4 of the shuffles of a
// reduction per value), so the lane ends with RB / 2 finished logits: value i is row
// (t4 & 1) RB / 2 + (t4 >> 1) RB / 4 + i / 2, position r0 + 8 (i & 1). The order of every
// sum is the same for every (row, position), so a logit does not depend on its tile, its rows'
// grouping or the layout. w: the RB rows' weights (k1_widx layout, 16-B aligned).
// RELU2 (k1_fp8_kernel's IXL_LOGITS_V2_FP8_K1=6): the fast path's relu(x) w is (x + |x|) w, one
// FADD with an |operand| on the FMA pipe instead of FMNMX.NAN on the ALU pipe; x + |x| = 2 relu(x)
// exactly (+0 for x <= 0, NaN stays NaN), so the chains hold twice the plain sums, rounded the
// same way (a power of 2) unless a partial sum is subnormal or above 2^127, and the doubled sum
// is halved before the scale. The slow path is the plain one.
// SPLIT (k1_fp8_kernel's LEAN & 4, IXL_LOGITS_V2_FP8_K1=j, development): the fast path's doubled
// sum as sum w x + sum w |x| (two FFMA an element, |x| an FFMA operand modifier), two
// independent chains per value instead of an FADD feeding each FFMA; the two added before the
// reduction. Not K1=6's bits (other roundings; the accumulators are finite, so no inf - inf):
// SPEC 3 leaves the fp32 order free.
template <int H, int NA, bool RELU2 = false, bool SPLIT = false>
__device__ __forceinline__ void k1_epilogue_n(const float (&acc)[NA], float sc0, float sc1,
                                              bool fast, const float *w, int t4,
                                              float (&res)[NA * 2 / H / 2]) {
  auto rl = [](float x) { return RELU2 ? __fadd_rn(x, fabsf(x)) : relu_nan(x); };
  constexpr int RB = NA * 2 / H, V = 2 * RB, JR = H / 8; // RB rows; JR: j per row
  static_assert(!SPLIT || RELU2, "SPLIT: the doubled sum");
  float v[V];
#pragma unroll
  for (int i = 0; i < V; ++i) v[i] = 0.0f;
  if (SPLIT && fast) {
    float u[V]; // the sum w |x| beside v's sum w x
#pragma unroll
    for (int i = 0; i < V; ++i) u[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < NA / 4; j += 2) {
      const int rb = j / JR, jj = j % JR;
      const float4 wj = *reinterpret_cast<const float4 *>(w + rb * k1_wrow<H>() +
                                                          t4 * k1_wq<H>() + 2 * jj);
      const float wv[4] = {wj.x, wj.y, wj.z, wj.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int a = 4 * (j + e / 2) + e % 2;
        v[2 * rb] = __fmaf_rn(wv[e], acc[a], v[2 * rb]);
        u[2 * rb] = __fmaf_rn(wv[e], fabsf(acc[a]), u[2 * rb]);
        v[2 * rb + 1] = __fmaf_rn(wv[e], acc[a + 2], v[2 * rb + 1]);
        u[2 * rb + 1] = __fmaf_rn(wv[e], fabsf(acc[a + 2]), u[2 * rb + 1]);
      }
    }
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = __fadd_rn(v[i], u[i]);
  } else if (fast) {
#pragma unroll
    for (int j = 0; j < NA / 4; j += 2) {
      const int rb = j / JR, jj = j % JR;
      const float4 wj = *reinterpret_cast<const float4 *>(w + rb * k1_wrow<H>() +
                                                          t4 * k1_wq<H>() + 2 * jj);
      float &s0 = v[2 * rb], &s1 = v[2 * rb + 1];
      s0 = __fmaf_rn(wj.x, rl(acc[4 * j]), s0);
      s1 = __fmaf_rn(wj.x, rl(acc[4 * j + 2]), s1);
      s0 = __fmaf_rn(wj.y, rl(acc[4 * j + 1]), s0);
      s1 = __fmaf_rn(wj.y, rl(acc[4 * j + 3]), s1);
      s0 = __fmaf_rn(wj.z, rl(acc[4 * j + 4]), s0);
      s1 = __fmaf_rn(wj.z, rl(acc[4 * j + 6]), s1);
      s0 = __fmaf_rn(wj.w, rl(acc[4 * j + 5]), s0);
      s1 = __fmaf_rn(wj.w, rl(acc[4 * j + 7]), s1);
    }
  } else {
#pragma unroll
    for (int j = 0; j < NA / 4; j += 2) {
      const int rb = j / JR, jj = j % JR;
      const float4 wj = *reinterpret_cast<const float4 *>(w + rb * k1_wrow<H>() +
                                                          t4 * k1_wq<H>() + 2 * jj);
      const float wv[4] = {wj.x, wj.y, wj.z, wj.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) { // e: (j + e / 2, c = e % 2)
        const int a = 4 * (j + e / 2) + e % 2;
        const float d0 = __fmul_rn(acc[a], sc0), d1 = __fmul_rn(acc[a + 2], sc1);
        v[2 * rb] = __fmaf_rn(wv[e], d0 < 0.0f ? 0.0f : d0, v[2 * rb]);
        v[2 * rb + 1] = __fmaf_rn(wv[e], d1 < 0.0f ? 0.0f : d1, v[2 * rb + 1]);
      }
    }
  }
  // the transposing quad reduction
  const bool b0 = t4 & 1, b1 = t4 & 2;
  float u[V / 2];
#pragma unroll
  for (int i = 0; i < V / 2; ++i) {
    const float keep = b0 ? v[V / 2 + i] : v[i], send = b0 ? v[i] : v[V / 2 + i];
    u[i] = keep + __shfl_xor_sync(0xffffffffu, send, 1);
  }
#pragma unroll
  for (int i = 0; i < V / 4; ++i) {
    const float keep = b1 ? u[V / 4 + i] : u[i], send = b1 ? u[i] : u[V / 4 + i];
    res[i] = keep + __shfl_xor_sync(0xffffffffu, send, 2);
    // value i is pair k of the lane's (row, position) pairs, position r0 + 8 (k & 1) (for the
    // whole tile V / 4 is even, so k & 1 = i & 1)
    const int k = (b0 ? V / 2 : 0) + (b1 ? V / 4 : 0) + i;
    if (fast && RELU2) res[i] = __fmul_rn(res[i], 0.5f);
    if (fast) res[i] = __fmul_rn(res[i], (k & 1) ? sc1 : sc0);
  }
}
template <int H, bool RELU2 = false, bool SPLIT = false>
__device__ __forceinline__ void k1_epilogue(const float (&acc)[128], float sc0, float sc1,
                                            bool fast, const float *w, int t4,
                                            float (&res)[256 / H / 2]) {
  k1_epilogue_n<H, 128, RELU2, SPLIT>(acc, sc0, sc1, fast, w, t4, res);
}

// k1_fp8_kernel's pipelined form (IXL_LOGITS_V2_FP8_K1=2): the 64 x 256 tile as two halves of
// RB / 2 rows, each four m64n128k32 (B = the half's 128 query columns) into its own 64-register
// accumulator and its own commit group, so one half's epilogue runs under the other half's
// wgmma of the same warpgroup. Issued, not waited.
__device__ __forceinline__ void tile_mma128(float (&acc)[64], const uint8_t *a,
                                            const uint8_t *q) {
  tile_mma_k4(acc, a, q, [](float(&d)[64], uint64_t da, uint64_t db, int sd) {
    wgmma_m64n128k32_e4m3_ss(d, da, db, sd);
  });
}
// k1_epilogue for one half (RH = 128 / H rows, w: the half's weights): the same sums in the same
// order; the lane ends with RH / 2 logits (H 64: 1, H 32: 2): value i is k = (t4 & 1) RH +
// (t4 >> 1) RH / 2 + i of the half's (row, position) pairs, row k / 2, position r0 + 8 (k & 1).
template <int H>
__device__ __forceinline__ void k1_epilogue_half(const float (&acc)[64], float sc0, float sc1,
                                                 bool fast, const float *w, int t4,
                                                 float (&res)[128 / H / 2]) {
  k1_epilogue_n<H, 64>(acc, sc0, sc1, fast, w, t4, res);
}
#endif

} // namespace ixl_v2

#endif
