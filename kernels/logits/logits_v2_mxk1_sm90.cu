// logits/logits_v2_mxk1_sm90.cu - logits v2's MXFP4 K1 (dense ragged prefill) at H 32 on a
// warp-specialized kernel (issue 13; the kernel brief's section 3.4), behind
// IXL_LOGITS_V2_MX_WS (read once a process; 0: off, logits_v2_mx_sm90.cu's V3 kernel runs K1;
// unset: the default variant, see ws_mode). logits_v2_mx_sm90.cu's dense branch calls
// ixl_cuda_logits_v2_mxk1 first.
//
// Why: the V3 kernel (mx3_kernel) is one warpgroup a CTA that waits for its own TMA tile, widens
// e2m1 in registers, runs 4 RS wgmma, combines and chains, all in one serial chain per tile at 8
// warps an SM (208 registers): latency- and issue-bound. Here the work is split by role:
// - a CTA is 3 warpgroups (384 threads, 1 CTA an SM) over 4 query rows and one chunk of
//   columns; the key range is the union (hull) of the 4 rows' windows;
// - warpgroup 0, the producer (setmaxnreg.dec): thread 0 issues the TMA of each raw key tile
//   (64 slots x 64 B codes, SWIZZLE_64B = ixl_v2mx_raw_off's layout, and the scale words: the
//   same tensor maps as V3) into a ring of kSR stages ("raw-full" mbarriers); all 128 threads
//   widen the tile ONCE into the 128B-swizzled SS layout of ixl_v2mx_ss_off (the layout the
//   NEXT kernel's widening wrote, host-tested by test_cuda_logits's next_ss_tile_layout_host)
//   in a ring of kSW stages, with each slot's deferred key factors (ixl_v2mx_comb_factors_or0) and
//   scale word beside it, then fence.proxy.async and arrive on the stage's "widened-full";
// - warpgroups 1 and 2, the math (setmaxnreg.inc), own 2 rows each (N = 64 columns, the V3
//   kernel's per-CTA shape): per tile 4 SS m64n64k32 wgmma (A = the widened tile at +32 B per
//   scale group, B = the warpgroup's query tile, scale-d 0, one accumulator per group), then
//   V3's deferred-key-factor combine, the fp32 head sum or SPEC 3's bf16 chain and the stores,
//   as mx_body's code (the same operations in the same order, so the same bits); each thread
//   arrives on the stage's "widened-empty" once its wgmma have completed.
// - Exact slow path: as V3 (per lane quad, the CPU's formula on NaN scales and out-of-window
//   exponents), in the kernel.
// Not here (logits_v2_mx_sm90.cu runs them): H != 32, calls with K3 block scores, N % 4 != 0,
// keys not 16-B aligned.
// Status (H200, 2026-12-02, last visit, this file's b30cb68): test_cuda_logits [v2] 18/18 and
// test_cuda_logits_mxk1 5/5 (3 seeds) with WS=1 and WS=5, racecheck 0 hazards and memcheck 0
// errors (test_cuda_logits_mxk1 small); K1 2048x8192 fp32 / bf16 / 4096x65536, V3 -> WS=1 ->
// WS=5: 578.5 -> 418.4 -> 405.1 us, 574.9 -> 409.0 -> 404.8 us, 9,489 -> 7,081 -> 6,847 us.
// Without any epilogue (WS=e) it takes 305 us: the skeleton (producer, barriers, wgmma) is
// most of it. Session 7 (ws_mode; H200 visit 2): the default is c, session 6's kernel with
// its prologue's global loads issued together (kVarEarly; -5 %: 2048x8192 fp32 380 us,
// 4096x65536 6,376 us); PDL (launch_pdl; pdl_wait / pdl_trigger at entry); the other variants
// (per-warp producer, rolling pipeline, one math code path) measured no faster. Session 8
// (visit 1): the default is g (c + chunks of up to 8192 columns + the producer sleeping between
// polls; 2048x8192 fp32 348 us, 4096x65536 5,876 us). WS=s (off): the s8 single-accumulator
// path (v2_mxk1.cuh) on the tiles whose exponents fold, the e4m3 path on the others. Session 9
// (visit 2): the default is i (8 rows a CTA on that s8 path, a per-warp producer, only the
// overflow IGMMAs a tile needs; quick.lua's dense logits 12.54 -> 11.35 ms), see kWsUnset.
//
// sass-limits: mxk1_kernel registers 232 shared 1024
#include "logits/v2_mxk1.cuh"

#include "cuda/launch.cuh"
#include "cuda/sm90.cuh"
#include "logits/v2_mx.cuh"
#include "logits/v2_mx_common.cuh"
#include "logits/v2_mx_ws.h"
#include "numerics/scalar.h"

#include <cuda_bf16.h>

#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

namespace {

using namespace ixl::sm90;
using namespace ixl::v2mx; // kTile (64 key slots a tile, the wgmma M) and the shared pieces
constexpr int kH = 32;           // heads
constexpr int kRows = 4;         // query rows a CTA (2 a math warpgroup)
constexpr int kNC = 2 * kH;      // wgmma columns a math warpgroup
constexpr int kThreads = 384;    // producer + 2 math warpgroups
constexpr int kMaxChunk = 4096;  // output columns a CTA at most (kVarBigChunk: kMaxChunk2)
constexpr int kMaxChunk2 = 8192;
constexpr int kSCW = 96;         // scale words a raw stage (a 17 x 16 B box, 128-aligned)
// registers after setmaxnreg (entry: 168, 65536 / 384): producer / math; the rolling pipeline
// (two rows' accumulators live across each epilogue) takes 8 more for the math, its producer
// (the per-warp one, widening in pairs of units) 16 fewer
// (the 8-row s8 kernel's per-warp producer, VAR bit 524288 = kVarWarpProd8: 48 / 224, its fold,
// shifts and stage word live across the widening)
template <int VAR> constexpr int prod_regs() { return VAR & 524288 ? 48 : 40; }
template <int VAR> constexpr int math_regs() { return VAR & 524288 ? 224 : 232; }
static_assert(128 * prod_regs<0>() + 256 * math_regs<0>() <= 384 * 168, "setmaxnreg: the pool");
static_assert(128 * prod_regs<128>() + 256 * math_regs<128>() <= 384 * 168, "setmaxnreg: pool");
static_assert(128 * prod_regs<524288>() + 256 * math_regs<524288>() <= 384 * 168, "the pool");

struct Params {
  const uint8_t *q_codes;   // [R, H, 64]
  const uint32_t *q_scales; // [R, H]
  const uint8_t *k_codes;   // [N, 64]
  const uint32_t *k_scales; // [N]
  const void *w;            // [R, H] fp32 or bf16
  const int32_t *ks, *ke;   // [R]
  void *out;                // [R, out_cols]
  int64_t R, N, out_cols, chunk, nchunks, nrb;
  int compressed;
};

// Dynamic shared memory (offsets from the 1024-aligned base): query tiles (2 x 8 KB) | widened
// stages (8 KB) | raw stages (4 KB) | scale words (raw) | key factors (16 B a slot) and scale
// words (widened) | per column info. kSR raw and kSW widened stages.
template <int kSR, int kSW, int kScr, int kS8 = 0, int NC = kNC>
struct Smem {
  static constexpr int q = 0;
  static constexpr int w = q + 2 * NC * 128;
  static constexpr int raw = w + kSW * kTile * 128 * (kS8 ? 2 : 1); // kS8: + an overflow block
  static constexpr int sc = raw + kSR * kTile * 64;
  static constexpr int kf = sc + kSR * kSCW * 4;
  static constexpr int kw = kf + kSW * kTile * 16;
  static constexpr int hq = kw + kSW * kTile * 4; // u32 qeff per column (slow path)
  static constexpr int ht = hq + 2 * NC * 4;     // u32 packed t_g + 8 per column (Q widening)
  static constexpr int hc = ht + 2 * NC * 4;     // f32 2^(qc - 127) per column
  static constexpr int wo = hc + 2 * NC * 4;     // f32 the column's weight (slow path)
  static constexpr int wq = wo + 2 * NC * 4;     // f32 the weight times 2^(qc - 127) (fast)
  static constexpr int wh = wq + 2 * NC * 4;     // f32 wq / 2 (fp32 fold, kVarRoll)
  static constexpr int wb = wh + 2 * NC * 4;     // bf16 wq (bf16 fold, kVarRoll)
  static constexpr int hf = wb + 2 * NC * 2;     // u8 fast per column
  static constexpr int scr = (hf + 2 * NC + 15) / 16 * 16; // f32 [2][64][128] (kVarRoll)
  // kS8 (the s8 path): its query tiles (a math warpgroup's 8 KB main block + 8 KB overflow
  // block, 1024-aligned for the 128B swizzle) and per-slot / per-column / per-stage words
  static constexpr int q8 = (scr + kScr * 2 * 64 * 128 * 4 + 1023) / 1024 * 1024;
  static constexpr int k8 = q8 + 2 * 2 * NC * 128;  // u32 fp32 bits of k0 = 2^(kb - 127)
  static constexpr int sh = k8 + kSW * kTile * 4;    // u32 packed a_g of the tile's slots
  static constexpr int hb8 = sh + kTile * 4;         // u32 packed b_g per column
  static constexpr int wq8 = hb8 + 2 * NC * 4;      // f32 the weight times 2^(qmin - 129)
  static constexpr int tf = wq8 + 2 * NC * 4;       // u32 per widened stage: 1 = s8 tile
  static constexpr int bad = tf + kSW * 4;           // u32 [2]: the factor warps' votes
  static constexpr int gc = bad + 2 * 4;             // u32 [8]: the G sample's counts
  static constexpr int total = kS8 ? gc + 8 * 4 : scr + kScr * 2 * 64 * 128 * 4;
  static constexpr int alloc = total + 1024;
};

#if IXL_SM90_DEVICE
// bar.sync on a named barrier of the producer warpgroup only (barrier 0 is __syncthreads').
__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }
#endif

// Kernel variants (IXL_LOGITS_V2_MX_WS's value, see ws_mode): bits of VAR. Every variant
// interleaves the two rows' reduction chains (reduce2: 4 fp32 / 2 bf16 chains in flight); the
// values 1 and 16 of the earlier sessions are that kernel (kVarBase).
constexpr int kVarNoEpi = 8;     // timing ablation (WRONG results): the math does no epilogue
constexpr int kVarBase = 16;     // the kernel of session 6 (WS=5): one producer chain a tile
constexpr int kVarWarpProd = 32; // each producer warp widens whole tiles (t % 4 == its warp)
constexpr int kVarNoMath = 64;   // timing ablation (WRONG results): no wgmma and no epilogue
constexpr int kVarRoll = 128;    // rolling pipeline: a row's wgmma overlap the other's epilogue
constexpr int kVarSplit = 256;   // fp32 head sums in two chains a slot (the order is free)
constexpr int kVarOneCode = 512; // one math loop for both warpgroups (instruction cache)
constexpr int kVarNoMma = 1024;  // timing ablation (WRONG results): no wgmma in the tile loop
constexpr int kVarNoWiden = 4;   // timing ablation (WRONG results): kVarWarpProd, no widening
constexpr int kVarAblations =
    kVarNoEpi | kVarNoMath | kVarNoMma | kVarNoWiden | 32768 | 65536; // (S8 bits, below)
// the prologue's global loads issued together (session 6's query-tile loop waited on one load
// per iteration, ~11 round trips a CTA), the first kSR tiles' copies issued before the tiles
constexpr int kVarEarly = 2048;
constexpr int kVarSleep = 4096;    // the producer sleeps between polls of a full widened ring
constexpr int kVarBigChunk = 8192; // chunks of up to 8192 columns (half the CTAs, prologues)
// session 8: the s8 single-accumulator path (v2_mxk1.cuh's rules) on the tiles whose exponents
// fold, the e4m3 QGMMA path on the others
constexpr int kVarS8 = 16384;
constexpr int kVarS8All = 32768; // timing ablation (WRONG results): every tile on the s8 path
// timing ablation (WRONG results) on kVarS8All: the producer widens every tile as e4m3 (the s8
// widening's cost, priced by the difference)
constexpr int kVarS8NoWiden = 65536;
// timing ablation (WRONG results) on kVarS8All: 8 rows a CTA, 4 a math warpgroup (m64n128k32
// IGMMA into one 64-register accumulator; the e4m3 path is not built): the next step's price
constexpr int kVarRows8 = 131072;
// the s8 path's 8 IGMMA a tile as two independent chains (the main k blocks into one s32
// accumulator, the overflow blocks into another, added as integers): half the dependent depth
constexpr int kVarS8Split = 262144;
// session 9: the 8-row s8 kernel's producer per warp (kVarRows8): warp pw folds, votes and widens
// the tiles t = pw (mod 4) whole (8 raw stages, its own; the widened stage t % 4 = pw), so four
// tiles' chains (waits, loads, widening, fence, arrival) overlap and no producer bar.sync is left;
// the slots' shifts go through shuffles; the overflow IGMMAs read the main s8 query block (the
// same values), so the prologue writes no copy
constexpr int kVarWarpProd8 = 524288;
static_assert(prod_regs<kVarWarpProd8>() == 48, "prod_regs: kVarWarpProd8's bit");
// session 9, on kVarWarpProd8: the overflow IGMMA of group g only where one of the tile's slots
// has a_g = 4 (the producer's per-group vote, beside the stage's s8 flag); the others add zeros
constexpr int kVarOvfMask = 1048576;
// session 9, diagnostics on kVarWarpProd8 (results as without it): each launch outside a
// stream capture prints (stderr, after a synchronization) its CTAs, those whose heads all fold,
// its s8 / e4m3 tiles and the s8 tiles' overflow groups (device-wide counters)
constexpr int kVarStats = 2097152;
__device__ unsigned long long g_mxk1_stats[5];
#if IXL_SM90_DEVICE
// NR rows from R0 on (of a math warpgroup's 2): the epilogue's compile-time row set
template <int R0, int NR> struct Rows {
  enum { r0 = R0, nr = NR };
};
#endif
// the rings: the per-warp producer needs kSR % 4 == 0 (a warp refills its own raw stages)
template <int VAR> constexpr int ring_raw() {
  return VAR & (kVarWarpProd | kVarWarpProd8) ? 8 : 6;
}
template <int VAR> constexpr int ring_wide() { return VAR & kVarWarpProd ? 8 : 4; }

template <bool BF16, int VAR>
__global__ void __launch_bounds__(kThreads, 1)
    mxk1_kernel(const __grid_constant__ CUtensorMap kmap, const __grid_constant__ CUtensorMap smap,
                const Params p) {
#if IXL_SM90_DEVICE
  constexpr int kSR = ring_raw<VAR>(), kSW = ring_wide<VAR>();
  constexpr bool kS8 = VAR & kVarS8, kS8All = VAR & kVarS8All, kRows8 = VAR & kVarRows8;
  constexpr int kRowsV = kRows8 ? 8 : kRows, kNCV = kRowsV / 2 * kH; // rows a CTA, columns a WG
  constexpr int kRW = kRowsV / 2;                                      // rows a math warpgroup
  static_assert(!kRows8 || kS8, "8 rows a CTA: on the s8 path (the e4m3 path a row at a time)");
  constexpr bool kSplit8 = VAR & kVarS8Split;
  constexpr bool kWarpProd8 = VAR & kVarWarpProd8, kOvfMask = VAR & kVarOvfMask;
  constexpr bool kStats = VAR & kVarStats;
  static_assert(!kWarpProd8 || (kRows8 && (VAR & kVarEarly)), "kVarWarpProd8: 8 rows, kEarly");
  static_assert(!kOvfMask || (kWarpProd8 && !kSplit8), "kVarOvfMask: one chain, per-warp");
  // the s8 path's weights from shared memory (8 rows with the e4m3 fallback: registers)
  constexpr bool kW8Smem = kRows8 && !kS8All;
  using L = Smem<kSR, kSW, (VAR & kVarRoll) != 0, kS8, kNCV>;
  constexpr int kWStage = kTile * 128 * (kS8 ? 2 : 1); // a widened stage's bytes
  static_assert(!kS8 || !(VAR & (kVarWarpProd | kVarRoll)), "s8: on the kernel of c only");
  // PDL (launch.cuh's rule): nothing global is read or written above this
  ixl::pdl_wait();
  ixl::pdl_trigger();
  extern __shared__ uint8_t smem_raw[];
  // the 1024-aligned base as an offset of smem_raw: every pointer stays in the shared window
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  uint8_t *s_q = smem + L::q, *s_w = smem + L::w, *s_raw = smem + L::raw, *s_hf = smem + L::hf;
  uint32_t *s_sc = reinterpret_cast<uint32_t *>(smem + L::sc);
  uint4 *s_kf = reinterpret_cast<uint4 *>(smem + L::kf);
  uint32_t *s_kw = reinterpret_cast<uint32_t *>(smem + L::kw);
  uint32_t *s_hq = reinterpret_cast<uint32_t *>(smem + L::hq);
  uint32_t *s_ht = reinterpret_cast<uint32_t *>(smem + L::ht);
  float *s_hc = reinterpret_cast<float *>(smem + L::hc);
  float *s_wo = reinterpret_cast<float *>(smem + L::wo);
  float *s_wq = reinterpret_cast<float *>(smem + L::wq);
  float *s_wh = reinterpret_cast<float *>(smem + L::wh);
  __nv_bfloat16 *s_wb = reinterpret_cast<__nv_bfloat16 *>(smem + L::wb);
  float *s_scr = reinterpret_cast<float *>(smem + L::scr);
  uint8_t *s_q8 = smem + L::q8;
  uint32_t *s_k8 = reinterpret_cast<uint32_t *>(smem + L::k8);
  uint32_t *s_sh = reinterpret_cast<uint32_t *>(smem + L::sh);
  uint32_t *s_hb8 = reinterpret_cast<uint32_t *>(smem + L::hb8);
  float *s_wq8 = reinterpret_cast<float *>(smem + L::wq8);
  uint32_t *s_tf = reinterpret_cast<uint32_t *>(smem + L::tf);
  uint32_t *s_bad = reinterpret_cast<uint32_t *>(smem + L::bad);
  uint32_t *s_gc = reinterpret_cast<uint32_t *>(smem + L::gc);
  __shared__ int64_t s_lo[kRowsV], s_hi[kRowsV], s_co[kRowsV];
  __shared__ uint64_t s_rfull[kSR], s_wfull[kSW], s_wempty[kSW];
  constexpr bool kNoEpi = VAR & kVarNoEpi, kWarpProd = VAR & kVarWarpProd;
  constexpr bool kNoMath = VAR & kVarNoMath, kRoll = VAR & kVarRoll, kSplit = VAR & kVarSplit;
  constexpr bool kOneCode = VAR & kVarOneCode, kNoMma = VAR & kVarNoMma;
  constexpr bool kNoWiden = VAR & kVarNoWiden;
  constexpr bool kEarly = VAR & kVarEarly, kSleep = VAR & kVarSleep;
  static_assert(!kWarpProd || kSR % 4 == 0, "per-warp producer: kSR a multiple of 4");

  const int tid = threadIdx.x, wg = tid >> 7;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < kSR; s++) ptx::mbarrier_init(&s_rfull[s], 1);
#pragma unroll
    for (int s = 0; s < kSW; s++) {
      ptx::mbarrier_init(&s_wfull[s], kWarpProd || kWarpProd8 ? 32 : 128); // its widening lanes
      ptx::mbarrier_init(&s_wempty[s], 256);                 // every math thread
    }
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster); // before the first use
  }
  const int64_t b = blockIdx.x;
  // a chunk's row blocks run together (its keys are read from HBM ~once), the last row blocks
  // first: in causal prefill they are the longest, so the grid's last CTAs are short ones
  const int64_t rb = p.nrb - 1 - b % p.nrb, ch = b / p.nrb;
  const int64_t row0 = rb * kRowsV;
  const int64_t c0 = ch * p.chunk, chunk_hi = mn64(c0 + p.chunk, p.out_cols);

  // ---- row ranges (k1_window.h's rule)
  k1_windows<kRowsV>(tid, row0, p.R, p.ks, p.ke, p.N, p.compressed, c0, chunk_hi, s_lo, s_hi,
                    s_co);
  // ---- kEarly (the per-warp producer's variants): this thread's query code words loaded now,
  // beside the column info's loads (their use needs the column info, after the barrier)
  constexpr int kQW = kRowsV * kH * 32, kQI = (kQW + kThreads - 1) / kThreads;
  uint32_t qx[kEarly ? kQI : 1];
  if (kEarly) {
#pragma unroll
    for (int k = 0; k < kQI; k++) {
      const int i = tid + k * kThreads, n = i >> 5, g = (i >> 3) & 3, p4 = i & 7;
      const int64_t r = row0 + n / kH;
      qx[k] = i < kQW && r < p.R ? *reinterpret_cast<const uint32_t *>(
                                       p.q_codes + (r * kH + n % kH) * 64 + 16 * g + 4 * (p4 & 3))
                                 : 0u;
    }
  }
  // ---- per column (row, head): the fold of its query exponents (v2_mx_common's, COMB)
  if (tid < kRowsV * kH) {
    const int64_t r = row0 + tid / kH;
    const ColInfo ci = col_info<true, BF16>(r < p.R ? p.q_scales[r * kH + tid % kH] : 0x7F7F7F7Fu,
                                            p.w, r * kH + tid % kH, r < p.R);
    const ColArrays ca = {s_hq, s_ht, s_hc, s_wo, s_wq, s_hf};
    ca.store(tid, ci);
    s_wh[tid] = __fmul_rn(ci.wq, 0.5f);
    s_wb[tid] = __float2bfloat16_rn(ci.wq); // exact for bf16 weights (the bf16 path's)
  }
  __syncthreads();
  // ---- the hull of the rows' windows, and its tile count
  int64_t hull_lo = INT64_MAX, hull_hi = INT64_MIN;
#pragma unroll
  for (int r = 0; r < kRowsV; r++) {
    if (row0 + r >= p.R) break;
    if (s_hi[r] > s_lo[r]) {
      hull_lo = mn64(hull_lo, s_lo[r]);
      hull_hi = mx64(hull_hi, s_hi[r]);
    }
  }
  if (hull_hi <= hull_lo) hull_lo = hull_hi = 0;
  const int T = (int)((hull_hi - hull_lo + kTile - 1) / kTile);
  // tile t of the hull into raw stage s (rows past N arrive as zeros)
  auto issue = [&](int t, int s) {
    const int32_t n0 = (int32_t)(hull_lo + (int64_t)t * kTile);
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                   &s_rfull[s], (uint32_t)(kTile * 64 + 17 * 16));
    const int32_t ck[2] = {0, n0}, cs[2] = {0, n0 >> 2};
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, s_raw + s * (kTile * 64),
                              &kmap, ck, &s_rfull[s]);
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, s_sc + s * kSCW, &smap, cs,
                              &s_rfull[s]);
  };
  // kEarly: the first kSR tiles' copies start now, under the query tiles' set-up
  if (kEarly && tid == 0) {
#pragma unroll 1
    for (int s = 0; s < kSR && s < T; s++) issue(s, s);
  }
  // ---- kS8: the CTA's per-group key offsets G (byte g = 1 when most of the hull's first 64
  // keys have ke_g >= 2 above their smallest exponent: quick.lua's outlier channels lift whole
  // groups), the columns' s8 folds (v2_mxk1.cuh), and when all 128 fold and are V3-fast, the
  // s8 query tiles (column n's element p of group g at byte 32 g + p; the overflow block a copy)
  uint32_t G8 = 0;
  int all8 = 0;
  if constexpr (kS8) {
    const int nsamp = (int)mn64(64, hull_hi - hull_lo);
    if (tid < 64) {
      const bool have = tid < nsamp;
      const uint32_t kw = have ? p.k_scales[hull_lo + tid] : 0u;
      int mn = 255;
#pragma unroll
      for (int g = 0; g < 4; g++) mn = min(mn, (int)((kw >> (8 * g)) & 0xFFu));
#pragma unroll
      for (int g = 0; g < 4; g++) {
        const unsigned bal =
            __ballot_sync(0xffffffffu, have && (int)((kw >> (8 * g)) & 0xFFu) - mn >= 2);
        if ((tid & 31) == 0) s_gc[4 * (tid >> 5) + g] = (uint32_t)__popc(bal);
      }
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < 4; g++)
      G8 |= (uint32_t)(2 * (int)(s_gc[g] + s_gc[4 + g]) > nsamp) << (8 * g);
    int ok = 1;
    if (tid < kRowsV * kH) {
      const int64_t r = row0 + tid / kH;
      const uint32_t qw = r < p.R ? p.q_scales[r * kH + tid % kH] : 0x7F7F7F7Fu;
      uint32_t sh;
      int qmin;
      ok = ixl_mxk1_col_s8(qw, G8, &sh, &qmin) && s_hf[tid];
      s_hb8[tid] = sh;
      // 2^(qmin - 129) (qmin >= 99 where the column is fast): exact, a normal product
      const float wq8 =
          ok ? __fmul_rn(s_wo[tid], __uint_as_float((uint32_t)(qmin - 2) << 23)) : 0.0f;
      if (!kW8Smem) s_wq8[tid] = wq8;
      else if (BF16) reinterpret_cast<__nv_bfloat16 *>(s_wq8)[tid] = __float2bfloat16_rn(wq8);
      else s_wq8[tid] = __fmul_rn(wq8, 0.5f); // kW8Smem: read from here by the head sums
    }
    all8 = __syncthreads_and(ok) || kS8All;
    if (all8) {
#pragma unroll
      for (int k = 0; k < kQI; k++) {
        const int i = tid + k * kThreads, n = i >> 5, g = (i >> 3) & 3, p4 = i & 7;
        if (i >= kQW) break;
        if (p4 >= 4) continue; // raw word p4 & 3 is also thread i - 4's
        uint2 o;
        ixl_mxk1_s8_widen(qx[k], (int)((s_hb8[n] >> (8 * g)) & 0xFFu), &o.x, &o.y);
        const unsigned wn = (unsigned)n / kNCV, nl = (unsigned)n % kNCV; // its WG, column
        uint8_t *dst = s_q8 + wn * (2 * kNCV * 128) +
                       ixl_sm90_swizzle((uint32_t)(nl * 128 + 32 * g + 8 * p4),
                                        IXL_SM90_SWIZZLE_128B);
        *reinterpret_cast<uint2 *>(dst) = o;
        if (!kWarpProd8) *reinterpret_cast<uint2 *>(dst + kNCV * 128) = o; // the overflow block
      }
    }
  }
  // ---- the query tiles: column n's element perm(p) of group g at byte 32 g + p, as e4m3;
  // math warpgroup m's tile is columns 64 m .. 64 m + 63 (8 KB at 8192 m: on the swizzle period)
  if (kEarly) {
#pragma unroll
    for (int k = 0; k < kQI; k++) {
      const int i = tid + k * kThreads, n = i >> 5, g = (i >> 3) & 3, p4 = i & 7;
      if (i >= kQW) break;
      const uint32_t o = row0 + n / kH < p.R
                             ? ixl_v2mx_q_word(qx[k], p4, (int)((s_ht[n] >> (8 * g)) & 0xFFu) - 8)
                             : 0u;
      *reinterpret_cast<uint32_t *>(
          s_q + ixl_sm90_swizzle((uint32_t)(n * 128 + 32 * g + 4 * p4), IXL_SM90_SWIZZLE_128B)) = o;
    }
  } else {
    for (int i = tid; i < kRowsV * kH * 32; i += kThreads) {
      const int n = i >> 5;
      q_tile_word(s_q, p.q_codes, row0 * kH + n, row0 + n / kH < p.R, n, (i >> 3) & 3, i & 7,
                  s_ht[n]);
    }
  }
  ptx::fence_proxy_async(ptx::space_shared); // the generic stores, visible to wgmma
  // ---- -inf at the chunk's columns outside each row's window (its hull is the one above)
  {
    int64_t hl, hh;
    k1_fill_hull<BF16, kRowsV, kThreads>(p.out, p.out_cols, row0, p.R, s_lo, s_hi, s_co, c0,
                                        chunk_hi, tid, &hl, &hh);
  }
  __syncthreads(); // the query tiles, the column info and the barriers' init

  if (wg == 0) {
    // ================================================================ producer
    setmaxnreg_dec<prod_regs<VAR>()>();
    const int pt = tid, pw = tid >> 5, lane = tid & 31;
    const uint32_t bar_raw = smem_u32(s_rfull), bar_full = smem_u32(s_wfull),
                   bar_empty = smem_u32(s_wempty);
    const int sco = (int)(hull_lo & 3); // position n0 + i is word (n0 & 3) + i of its box
    // widened stage ws free again for tile t (the math released tile t - kSW); kSleep: polled
    // with sleeps (the producer is up to kSW tiles ahead: it has slack)
    auto wait_empty = [&](int ws, int t) {
      const uint32_t a = bar_empty + 8 * ws, par = (uint32_t)(t / kSW - 1) & 1u;
      if (kSleep) ixl_mxk1_wait_sleep(a, par, 100);
      else ixl_mxk1_wait(a, par);
    };
    // 256 units of 16 B (slot i, group g: raw words q = 0..3) a tile: the even words are one
    // 16-B chunk of the SS row (ixl_v2mx_ss_off(i, g, 0, 0), the 128B swizzle moves whole
    // chunks), the odd ones the next; 8 consecutive units (a phase of a 16-B access) read two
    // slots' 128 B and write their 16 distinct chunks: conflict-free. Then a slot's key factors
    // and scale word.
    auto widen = [&](int u, const uint8_t *src, uint8_t *et) {
      const int i = u >> 2, g = u & 3;
      const uint4 wv = *reinterpret_cast<const uint4 *>(src + ixl_v2mx_raw_off(i, g));
      uint4 ev, od;
      ixl_sm90_e2m1x8_widen(wv.x, &ev.x, &od.x);
      ixl_sm90_e2m1x8_widen(wv.y, &ev.y, &od.y);
      ixl_sm90_e2m1x8_widen(wv.z, &ev.z, &od.z);
      ixl_sm90_e2m1x8_widen(wv.w, &ev.w, &od.w);
      *reinterpret_cast<uint4 *>(et + ixl_v2mx_ss_off(i, g, 0, 0)) = ev;
      *reinterpret_cast<uint4 *>(et + ixl_v2mx_ss_off(i, g, 0, 1)) = od;
    };
    auto factors = [&](int i, int rs, int ws) {
      const uint32_t kw = s_sc[rs * kSCW + sco + i];
      uint32_t f[4];
      ixl_v2mx_comb_factors_or0(kw, f); // k0 = 0: outside the combine window (slow slot)
      s_kf[ws * kTile + i] = make_uint4(f[0], f[1], f[2], f[3]);
      s_kw[ws * kTile + i] = kw;
    };
    if (kWarpProd) {
      // warp pw widens the tiles t = pw (mod 4) whole, in raw stages t % kSR (its own: kSR is
      // a multiple of 4) and widened stages t % kSW; its lane 0 refills its raw stages. Four
      // tiles in flight at once, one fence and one arrival per thread a tile (wfull count 32),
      // no barrier between the producer warps.
      static_assert(!kWarpProd || kEarly, "the per-warp producer relies on kEarly's first copies");
      for (int t = pw; t < T; t += 4) {
        const int rs = t % kSR, ws = t % kSW;
        ixl_mxk1_wait(bar_raw + 8 * rs, (uint32_t)(t / kSR) & 1u);
        if (t >= kSW) wait_empty(ws, t);
        const uint8_t *src = s_raw + rs * (kTile * 64);
        uint8_t *et = s_w + ws * kWStage;
#pragma unroll 2
        for (int k = 0; k < (kNoWiden ? 0 : kTile * 4 / 32); k++) widen(lane + 32 * k, src, et);
#pragma unroll
        for (int k = 0; k < (kNoWiden ? 0 : kTile / 32); k++) factors(lane + 32 * k, rs, ws);
        ptx::fence_proxy_async(ptx::space_shared); // the widened tile, visible to wgmma
        ixl_mxk1_arrive(bar_full + 8 * ws);
        __syncwarp(); // every lane is done reading raw stage rs
        if (lane == 0 && t + kSR < T) issue(t + kSR, rs);
      }
      return;
    }
    // kS8: unit u (slot i, group g) as s8 values 2 e2m1 2^min(a_g, 3) (v2_mxk1.cuh) at byte
    // 32 g + p of the slot's 128-B row (element p), and into the overflow block (+8 KB) the
    // same where a_g = 4, else zeros
    auto widen8 = [&](int u, const uint8_t *src, uint8_t *et) {
      const int i = u >> 2, g = u & 3;
      const uint4 wv = *reinterpret_cast<const uint4 *>(src + ixl_v2mx_raw_off(i, g));
      const int a = (int)((s_sh[i] >> (8 * g)) & 0xFFu), am = min(a, 3);
      uint4 c0, c1;
      ixl_mxk1_s8_widen(wv.x, am, &c0.x, &c0.y);
      ixl_mxk1_s8_widen(wv.y, am, &c0.z, &c0.w);
      ixl_mxk1_s8_widen(wv.z, am, &c1.x, &c1.y);
      ixl_mxk1_s8_widen(wv.w, am, &c1.z, &c1.w);
      uint4 *m0 = reinterpret_cast<uint4 *>(et + ixl_v2mx_ss_off(i, g, 0, 0));
      uint4 *m1 = reinterpret_cast<uint4 *>(et + ixl_v2mx_ss_off(i, g, 0, 1));
      *m0 = c0;
      *m1 = c1;
      const uint4 z = make_uint4(0u, 0u, 0u, 0u);
      m0[kTile * 128 / 16] = a == 4 ? c0 : z;
      m1[kTile * 128 / 16] = a == 4 ? c1 : z;
    };
    // kVarWarpProd8: widen8 with the slot's shift a_g given, its overflow copy into k block og
    // of the overflow block (og < 0: none; kVarOvfMask compacts the blocks)
    auto widen8a = [&](int u, const uint8_t *src, uint8_t *et, int a, int og) {
      const int i = u >> 2, g = u & 3, am = min(a, 3);
      const uint4 wv = *reinterpret_cast<const uint4 *>(src + ixl_v2mx_raw_off(i, g));
      uint4 c0, c1;
      ixl_mxk1_s8_widen(wv.x, am, &c0.x, &c0.y);
      ixl_mxk1_s8_widen(wv.y, am, &c0.z, &c0.w);
      ixl_mxk1_s8_widen(wv.z, am, &c1.x, &c1.y);
      ixl_mxk1_s8_widen(wv.w, am, &c1.z, &c1.w);
      uint4 *m0 = reinterpret_cast<uint4 *>(et + ixl_v2mx_ss_off(i, g, 0, 0));
      uint4 *m1 = reinterpret_cast<uint4 *>(et + ixl_v2mx_ss_off(i, g, 0, 1));
      *m0 = c0;
      *m1 = c1;
      if (og >= 0) {
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        uint8_t *ov = et + kTile * 128;
        *reinterpret_cast<uint4 *>(ov + ixl_v2mx_ss_off(i, og, 0, 0)) = a == 4 ? c0 : z;
        *reinterpret_cast<uint4 *>(ov + ixl_v2mx_ss_off(i, og, 0, 1)) = a == 4 ? c1 : z;
      }
    };
    if constexpr (kWarpProd8) {
      // kVarWarpProd8: warp pw takes the tiles t = pw (mod 4) whole (raw stages t % 8, its own;
      // widened stage t % 4 = pw): lane l folds slots l and l + 32 (their key factors, s8
      // shifts and k0), the warp votes, then widens units l + 32 k (slot l / 4 + 8 k, group
      // l % 4; its shifts by a shuffle), s8 or e4m3; lane 0 sets the stage's flag (bit 0: s8;
      // kOvfMask: bit 1 + g where a slot has a_g = 4) and refills the raw stage
      static_assert(kSR % 4 == 0 && kSW == 4, "per-warp s8 producer: its own stages");
      uint32_t n8 = 0, nov_sum = 0; // kStats: this warp's s8 tiles, their overflow groups
      for (int t = pw; t < T; t += 4) {
        const int rs = t % kSR, ws = t % kSW;
        ixl_mxk1_wait(bar_raw + 8 * rs, (uint32_t)(t / kSR) & 1u);
        if (t >= kSW) wait_empty(ws, t);
        const uint8_t *src = s_raw + rs * (kTile * 64);
        uint8_t *et = s_w + ws * kWStage;
        uint32_t sh[2], ovf = 0;
        int ok = 1;
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int i = lane + 32 * h;
          factors(i, rs, ws);
          uint32_t k0;
          ok &= ixl_mxk1_slot_s8(s_sc[rs * kSCW + sco + i], G8, &sh[h], &k0);
          s_k8[ws * kTile + i] = k0;
          if (kOvfMask || kStats) {
#pragma unroll
            for (int g = 0; g < 4; g++) ovf |= (uint32_t)(((sh[h] >> (8 * g)) & 0xFFu) == 4u) << g;
          }
        }
        const bool use8 = kS8All || (all8 && __all_sync(0xffffffffu, ok));
        // kOvfMask: the groups with a slot at a_g = 4 (ovf), their compacted k blocks (this
        // lane's group g = lane % 4 at og, or none), the stage's word (s8, n, the g_j)
        uint32_t word = use8 ? 1u : 0u;
        int og = lane & 3;
        if (kOvfMask || kStats) {
          ovf = __reduce_or_sync(0xffffffffu, ovf);
          const uint32_t n = __popc(ovf);
          nov_sum += use8 ? n : 0u;
          if (kOvfMask) {
            uint32_t gl = 0;
#pragma unroll
            for (int g = 0, j = 0; g < 4; g++)
              if ((ovf >> g) & 1u) gl |= (uint32_t)g << (2 * j++);
            word = use8 ? 1u | n << 1 | gl << 4 : 0u;
            og = (ovf >> og) & 1u ? __popc(ovf & ((1u << og) - 1u)) : -1;
          }
        }
        if (use8) {
#pragma unroll 2
          for (int k = 0; k < kTile * 4 / 32; k++) {
            const uint32_t s2 = __shfl_sync(0xffffffffu, k < 4 ? sh[0] : sh[1],
                                            (lane >> 2) + 8 * (k & 3));
            widen8a(lane + 32 * k, src, et, (int)((s2 >> (8 * (lane & 3))) & 0xFFu), og);
          }
        } else {
#pragma unroll 2
          for (int k = 0; k < kTile * 4 / 32; k++) widen(lane + 32 * k, src, et);
        }
        n8 += use8 ? 1u : 0u;
        if (lane == 0) s_tf[ws] = word;
        ptx::fence_proxy_async(ptx::space_shared); // the widened tile, visible to wgmma
        ixl_mxk1_arrive(bar_full + 8 * ws);
        __syncwarp(); // every lane is done reading raw stage rs
        if (lane == 0 && t + kSR < T) issue(t + kSR, rs);
      }
      if (kStats && lane == 0) {
        // kStats: the launch's totals (CTAs, CTAs whose heads all fold, s8 / e4m3 tiles, the
        // s8 tiles' overflow groups), which the host reads after the launch
        unsigned long long *st = g_mxk1_stats;
        if (pw == 0) {
          atomicAdd(&st[0], 1ull);
          atomicAdd(&st[1], all8 ? 1ull : 0ull);
        }
        atomicAdd(&st[2], (unsigned long long)n8);
        atomicAdd(&st[3], (unsigned long long)((T > pw ? (T - pw + 3) / 4 : 0) - (int)n8));
        atomicAdd(&st[4], (unsigned long long)nov_sum);
      }
      return;
    }
    if (pt == 0 && !kEarly)
      for (int s = 0; s < kSR && s < T; s++) issue(s, s);
    for (int t = 0; t < T; t++) {
      const int rs = t % kSR, ws = t % kSW;
      ixl_mxk1_wait(bar_raw + 8 * rs, (uint32_t)(t / kSR) & 1u);
      if (t >= kSW) wait_empty(ws, t);
      const uint8_t *src = s_raw + rs * (kTile * 64);
      uint8_t *et = s_w + ws * kWStage;
      if constexpr (kS8) {
        // the slots' s8 folds first (their shifts are the widening's), and the tile's vote
        if (pt < kTile) {
          factors(pt, rs, ws);
          uint32_t sh, k0;
          const int ok = ixl_mxk1_slot_s8(s_sc[rs * kSCW + sco + pt], G8, &sh, &k0);
          s_sh[pt] = sh;
          s_k8[ws * kTile + pt] = k0;
          const unsigned bal = __ballot_sync(0xffffffffu, !ok);
          if (lane == 0) s_bad[pw] = bal;
        }
        producer_sync(); // the shifts and the votes
        const bool use8 = kS8All || (all8 && (s_bad[0] | s_bad[1]) == 0u);
        if (use8 && !(VAR & kVarS8NoWiden)) {
#pragma unroll
          for (int k = 0; k < kTile * 4 / 128; k++) widen8(pt + 128 * k, src, et);
        } else {
#pragma unroll
          for (int k = 0; k < kTile * 4 / 128; k++) widen(pt + 128 * k, src, et);
        }
        if (pt == 0) s_tf[ws] = use8 ? 1u : 0u;
      } else {
#pragma unroll
        for (int k = 0; k < kTile * 4 / 128; k++) widen(pt + 128 * k, src, et);
        if (pt < kTile) factors(pt, rs, ws);
      }
      ptx::fence_proxy_async(ptx::space_shared); // the widened tile, visible to wgmma
      ixl_mxk1_arrive(bar_full + 8 * ws);
      producer_sync(); // every producer thread is done reading raw stage rs
      if (pt == 0 && t + kSR < T) issue(t + kSR, rs);
    }
    return;
  }
  // ================================================================ math
  setmaxnreg_inc<math_regs<VAR>()>();
  // one instantiation per math warpgroup (mw 0 or 1, a constant): its query tile's address and
  // columns are then constants, so its B descriptors can stay uniform across tiles
  auto math = [&](auto mw_tag) {
  // kOneCode: one instantiation for both warpgroups (mw at run time), half the math code
  const int mw = kOneCode ? wg - 1 : decltype(mw_tag)::value;
  constexpr int NJ = kNCV / 8; // accumulator column blocks of 8
  constexpr int JR = kH / 8;  // column blocks a row
  const int mt = tid - 128 * (mw + 1), warp = mt >> 5, lane = tid & 31, t4 = lane & 3;
  const int cb = kNCV * mw;         // this warpgroup's columns in the per-column arrays
  const int64_t mrow0 = row0 + kRW * mw; // its rows
  const int i0 = 16 * warp + (lane >> 2); // this lane's slots: i0, i0 + 8
  uint32_t slow_heads = 0;
#pragma unroll
  for (int j = 0; j < NJ; j++)
#pragma unroll
    for (int c = 0; c < 2; c++)
      slow_heads |= (uint32_t)(s_hf[cb + 8 * j + 2 * t4 + c] == 0) << (2 * j + c);
  int quad_slow = slow_heads != 0;
  quad_slow |= __shfl_xor_sync(0xffffffffu, quad_slow, 1);
  quad_slow |= __shfl_xor_sync(0xffffffffu, quad_slow, 2);
  // this lane's folded weights from the per-column array sw: bf16 pairs (exact: bf16 values),
  // or fp32 halved (the fold's (x + |x|) w / 2)
  auto load_weights = [&](const float *sw, auto &f, auto &h) {
#pragma unroll
    for (int j = 0; j < NJ; j++) {
      if (BF16) {
#pragma unroll
        for (int k = 0; k < 2; k++) {
          const int n = cb + 8 * j + 4 * k + 2 * (t4 & 1);
          h[2 * j + k] = __floats2bfloat162_rn(sw[n], sw[n + 1]);
        }
      } else {
#pragma unroll
        for (int c = 0; c < 2; c++) f[2 * j + c] = __fmul_rn(sw[cb + 8 * j + 2 * t4 + c], 0.5f);
      }
    }
  };
  float wf[BF16 ? 1 : 2 * NJ];
  __nv_bfloat162 wb[BF16 ? 2 * NJ : 1];
  load_weights(s_wq, wf, wb);
  // kS8: the s8 path's folded weights (2^(qmin - 129) instead of 2^(qc - 127))
  // (kW8Smem: read from shared memory in the head sums, halved for fp32, as bf16 for bf16)
  float wf8[kS8 && !kW8Smem && !BF16 ? 2 * NJ : 1];
  __nv_bfloat162 wb8[kS8 && !kW8Smem && BF16 ? 2 * NJ : 1];
  if constexpr (kS8 && !kW8Smem) load_weights(s_wq8, wf8, wb8);
  // row r (of 2): its window [rlo, rhi) relative to the hull's first position (empty for rows
  // past R), so it needs the tiles [tr0, tr1); ob[r] + n is its output of hull position n
  using OutT = typename std::conditional<BF16, uint16_t, float>::type;
  int rlo[kRW], rhi[kRW], tr0[kRW], tr1[kRW];
  OutT *ob[kRW];
#pragma unroll
  for (int r = 0; r < kRW; r++) {
    const int64_t lo = s_lo[kRW * mw + r], hi = s_hi[kRW * mw + r], co = s_co[kRW * mw + r];
    const bool has = mrow0 + r < p.R && hi > lo;
    rlo[r] = has ? (int)(lo - hull_lo) : 0;
    rhi[r] = has ? (int)(hi - hull_lo) : 0;
    tr0[r] = rlo[r] >> 6;
    tr1[r] = has ? (rhi[r] + kTile - 1) >> 6 : 0;
    ob[r] = reinterpret_cast<OutT *>(p.out) + (has ? (mrow0 + r) * p.out_cols - co + hull_lo : 0);
  }
  const uint32_t bar_full = ixl_mxk1_keep(smem_u32(s_wfull));
  const uint32_t bar_empty = ixl_mxk1_keep(smem_u32(s_wempty));
  // this lane's key factors of slot i0 in stage 0 (slot i0 + 8: +128 B, a stage: +1 KB)
  const uint32_t kf_addr = ixl_mxk1_keep(smem_u32(s_kf + i0));
  const uint32_t kw_addr = ixl_mxk1_keep(smem_u32(s_kw + i0)); // slot i0 + 8: +32 B
  // the descriptors' low words (start address >> 4, LBO 16 >> 4): a group's k32 slice is 32 B
  // (+2) further, a widened stage 8 KB (+512), a row's 32 query columns 4 KB (+256); the high
  // word (SBO 1024, 128B swizzle) is the same for all, so each descriptor is built from a
  // 32-bit add (no 64-bit carry chain)
  const uint32_t dqlo =
      ixl_mxk1_keep((uint32_t)wgmma_desc(s_q + mw * (kNCV * 128), IXL_SM90_SWIZZLE_128B, 16, 1024));
  const uint32_t dwlo = ixl_mxk1_keep((uint32_t)wgmma_desc(s_w, IXL_SM90_SWIZZLE_128B, 16, 1024));
  const uint32_t dhi = (uint32_t)(wgmma_desc(s_w, IXL_SM90_SWIZZLE_128B, 16, 1024) >> 32);
  auto desc = [&](uint32_t lo) { return (uint64_t)dhi << 32 | lo; };
  // kS8: the s8 query tile's descriptor (main block; the overflow block +8 KB = +512), the
  // slots' k0 (slot i0 of stage 0; slot i0 + 8: +32 B, a stage: +256 B), the stages' flags
  [[maybe_unused]] const uint32_t dq8lo = kS8 ? ixl_mxk1_keep((uint32_t)wgmma_desc(
                                   s_q8 + mw * (2 * kNCV * 128), IXL_SM90_SWIZZLE_128B, 16, 1024))
                             : 0u;
  [[maybe_unused]] const uint32_t k8_addr = kS8 ? ixl_mxk1_keep(smem_u32(s_k8 + i0)) : 0u;
  [[maybe_unused]] const uint32_t tf_addr = kS8 ? ixl_mxk1_keep(smem_u32(s_tf)) : 0u;

  // ---- a tile's per-slot data: the key factors (k0 = 0: outside the combine window) and the
  // scale words (slow path), read before the stage is released (read after the arrival they
  // raced with the producer's next fill: racecheck on the H200, 2026-12-02)
  struct Slots {
    float ck0[2], cr1[2], cr2[2], cr3[2];
    uint32_t kw[2];
    bool qslow; // quad-uniform
  };
  auto load_slots = [&](int s) {
    Slots d;
    uint4 f0, f1;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(f0.x), "=r"(f0.y), "=r"(f0.z), "=r"(f0.w)
                 : "r"(kf_addr + s * (kTile * 16)));
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(f1.x), "=r"(f1.y), "=r"(f1.z), "=r"(f1.w)
                 : "r"(kf_addr + s * (kTile * 16) + 8 * 16));
    d.ck0[0] = __uint_as_float(f0.x), d.ck0[1] = __uint_as_float(f1.x);
    d.cr1[0] = __uint_as_float(f0.y), d.cr1[1] = __uint_as_float(f1.y);
    d.cr2[0] = __uint_as_float(f0.z), d.cr2[1] = __uint_as_float(f1.z);
    d.cr3[0] = __uint_as_float(f0.w), d.cr3[1] = __uint_as_float(f1.w);
    d.qslow = quad_slow || f0.x == 0u || f1.x == 0u;
    // the rolling pipeline: warp-uniform (the slow path is exact for every element), so no
    // warp diverges while its other row's wgmma run
    if (kRoll) d.qslow = __any_sync(0xffffffffu, d.qslow);
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(d.kw[0]) : "r"(kw_addr + s * (kTile * 4)));
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(d.kw[1]) : "r"(kw_addr + s * (kTile * 4) + 32));
    return d;
  };

  // ---- the head reduction and the stores (mx_body's, the same operations in the same order)
  // of NR rows from R0 on, from a[0] (the dots, over their column blocks 4 R0 .. 4 (R0 + NR)),
  // the rows' chains interleaved and the shuffles and stores batched after them (2 rows: 4
  // independent fp32 chains / 2 bf16 chains in flight)
  auto reduce = [&](auto r0_tag, auto fold_tag, const auto &a, const Slots &d, int tb,
                    auto w8_tag) {
    constexpr int R0 = decltype(r0_tag)::r0, NR = decltype(r0_tag)::nr;
    constexpr bool FOLD = decltype(fold_tag)::value;
    constexpr bool W8 = decltype(w8_tag)::value; // the s8 path's weights (wf8, wb8)
    if (!BF16) {
      // kSplit: each slot's sum in two chains (column blocks 0-1 and 2-3, added at the end:
      // fp32's head order is free, SPEC 3), half the dependent depth
      constexpr int P = kSplit ? 2 : 1;
      float sum[NR][2], part[NR][2][P];
#pragma unroll
      for (int r = 0; r < NR; r++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int q = 0; q < P; q++) part[r][h][q] = 0.0f; // [row][slot][chain]
#pragma unroll
      for (int jj = 0; jj < JR; jj++)
#pragma unroll
        for (int c = 0; c < 2; c++)
#pragma unroll
          for (int h = 0; h < 2; h++)
#pragma unroll
            for (int r = 0; r < NR; r++) {
              const int jl = r * JR + jj, j = R0 * JR + jl, q = kSplit ? jj >> 1 : 0;
              const float x = a[4 * jl + 2 * h + c];
              // kRoll: the folded weights from shared memory (their 16 registers spilled)
              float wfj = W8 ? wf8[BF16 || !kS8 || kW8Smem ? 0 : 2 * j + c]
                             : wf[BF16 ? 0 : 2 * j + c];
              if (kW8Smem && W8) {
                const float2 w2 = *reinterpret_cast<const float2 *>(&s_wq8[cb + 8 * j + 2 * t4]);
                wfj = c ? w2.y : w2.x;
              }
              if ((kRoll || kRows8) && !W8) { // kRows8: the e4m3 fallback's, from smem too
                const float2 w2 = *reinterpret_cast<const float2 *>(&s_wh[cb + 8 * j + 2 * t4]);
                wfj = c ? w2.y : w2.x;
              }
              part[r][h][q] =
                  FOLD ? __fmaf_rn(wfj, __fadd_rn(x, fabsf(x)), part[r][h][q])
                       : __fmaf_rn(s_wo[cb + 8 * j + 2 * t4 + c], relu(x), part[r][h][q]);
            }
#pragma unroll
      for (int r = 0; r < NR; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) sum[r][h] = kSplit ? part[r][h][0] + part[r][h][P - 1]
                                                       : part[r][h][0];
#pragma unroll
      for (int r = 0; r < NR; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) sum[r][h] += __shfl_xor_sync(0xffffffffu, sum[r][h], 1);
#pragma unroll
      for (int r = 0; r < NR; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) sum[r][h] += __shfl_xor_sync(0xffffffffu, sum[r][h], 2);
      if (t4 < 2) { // lane 0 of the quad stores slot i0, lane 1 slot i0 + 8
        const int n = tb + i0 + 8 * t4;
#pragma unroll
        for (int r = 0; r < NR; r++) {
          float v = t4 ? sum[r][1] : sum[r][0];
          if (FOLD) v = __fmul_rn(v, t4 ? d.ck0[1] : d.ck0[0]); // the deferred k0: exact
          if (n >= rlo[R0 + r] && n < rhi[R0 + r]) reinterpret_cast<float *>(ob[R0 + r])[n] = v;
        }
      }
    } else {
      // chains: lanes t4 = 0, 2 run (s0, s1), lanes 1, 3 run (s2, s3); lanes 0, 1 keep slot i0
      // and lanes 2, 3 slot i0 + 8; each sends the other slot's pair to lane t4 ^ 2
      const int keep = t4 >> 1;
      __nv_bfloat162 ch2[NR];
#pragma unroll
      for (int r = 0; r < NR; r++) ch2[r] = __floats2bfloat162_rn(0.0f, 0.0f);
#pragma unroll
      for (int jj = 0; jj < JR; jj++)
#pragma unroll
        for (int r = 0; r < NR; r++) {
          const int jl = r * JR + jj, j = R0 * JR + jl;
          const uint32_t v0 = cvt_relu_bf16x2(a[4 * jl], a[4 * jl + 1]);     // slot i0
          const uint32_t v1 = cvt_relu_bf16x2(a[4 * jl + 2], a[4 * jl + 3]); // i0 + 8
          const uint32_t mine = keep ? v1 : v0;
          const uint32_t got = __shfl_xor_sync(0xffffffffu, keep ? v0 : v1, 2);
          const uint32_t first = keep ? got : mine, second = keep ? mine : got;
          __nv_bfloat162 w0, w1;
          if (FOLD) {
            if ((kRoll || kRows8) && !W8) {
              const int n = cb + 8 * j + 2 * (t4 & 1);
              w0 = *reinterpret_cast<const __nv_bfloat162 *>(&s_wb[n]);
              w1 = *reinterpret_cast<const __nv_bfloat162 *>(&s_wb[n + 4]);
            } else if (W8 && kW8Smem) {
              const int n = cb + 8 * j + 2 * (t4 & 1);
              const __nv_bfloat16 *w8h = reinterpret_cast<const __nv_bfloat16 *>(s_wq8);
              w0 = *reinterpret_cast<const __nv_bfloat162 *>(&w8h[n]);
              w1 = *reinterpret_cast<const __nv_bfloat162 *>(&w8h[n + 4]);
            } else if (W8) {
              w0 = wb8[BF16 && kS8 && !kW8Smem ? 2 * j : 0];
              w1 = wb8[BF16 && kS8 && !kW8Smem ? 2 * j + 1 : 0];
            } else {
              w0 = wb[2 * j];
              w1 = wb[2 * j + 1];
            }
          } else {
            const int n = cb + 8 * j + 2 * (t4 & 1);
            w0 = __floats2bfloat162_rn(s_wo[n], s_wo[n + 1]);
            w1 = __floats2bfloat162_rn(s_wo[n + 4], s_wo[n + 5]);
          }
          ch2[r] = __hfma2(w0, *reinterpret_cast<const __nv_bfloat162 *>(&first), ch2[r]);
          ch2[r] = __hfma2(w1, *reinterpret_cast<const __nv_bfloat162 *>(&second), ch2[r]);
        }
      uint32_t ou[NR];
#pragma unroll
      for (int r = 0; r < NR; r++)
        ou[r] = __shfl_xor_sync(0xffffffffu, *reinterpret_cast<const uint32_t *>(&ch2[r]), 1);
      const int n = tb + i0 + 8 * keep;
#pragma unroll
      for (int r = 0; r < NR; r++) {
        const __nv_bfloat162 pair =
            __hadd2(ch2[r], *reinterpret_cast<const __nv_bfloat162 *>(&ou[r]));
        __nv_bfloat16 res = __hadd(__low2bfloat16(pair), __high2bfloat16(pair));
        if (FOLD) // the deferred k0: exact (a power of two, in range)
          res = __float2bfloat16_rn(__fmul_rn(__bfloat162float(res), keep ? d.ck0[1] : d.ck0[0]));
        const uint16_t v = *reinterpret_cast<const uint16_t *>(&res);
        if ((t4 & 1) == 0 && n >= rlo[R0 + r] && n < rhi[R0 + r])
          reinterpret_cast<uint16_t *>(ob[R0 + r])[n] = v;
      }
    }
  };
  // ---- the epilogue of NR rows from R0 on: the dots from the four group accumulators (fast:
  // the deferred-key-factor combine, its groups 0 + 1 already done when c01; slow: the exact
  // per element formula), then the reduction
  auto epilogue = [&](auto r0_tag, auto c01_tag, auto &a, const Slots &d, int tb) {
    constexpr int R0 = decltype(r0_tag)::r0, NE = JR * 4 * decltype(r0_tag)::nr;
    if (!d.qslow) {
#pragma unroll
      for (int e = 0; e < NE; e++) {
        const int h = (e >> 1) & 1;
        if (!decltype(c01_tag)::value) a[0][e] = __fmaf_rn(a[1][e], d.cr1[h], a[0][e]);
        a[0][e] = __fmaf_rn(__fmaf_rn(a[3][e], d.cr3[h], a[2][e]), d.cr2[h], a[0][e]);
      }
      reduce(r0_tag, std::true_type{}, a[0], d, tb, std::false_type{});
    } else if constexpr (kRoll) {
      // the rolling pipeline's slow path: through this thread's column of a shared scratch
      // (element (g, e) at word (16 g + e) * 128 + mt), one element at a time, so its double
      // arithmetic needs few registers while the other row's wgmma (and accumulators) are live
      float *sc = s_scr + mw * (64 * 128) + mt;
#pragma unroll
      for (int g = 0; g < 4; g++)
#pragma unroll
        for (int e = 0; e < NE; e++) sc[(16 * g + e) * 128] = a[g][e];
#pragma unroll 1
      for (int e = 0; e < NE; e++) {
        const int h = (e >> 1) & 1, j = R0 * JR + (e >> 2), c = 2 * j + (e & 1);
        const int n = cb + 8 * j + 2 * t4 + (e & 1);
        const uint32_t kw = h ? d.kw[1] : d.kw[0];
        const float a0 = sc[e * 128], a1 = sc[(16 + e) * 128], a2 = sc[(32 + e) * 128],
                    a3 = sc[(48 + e) * 128];
        float v;
        if (((slow_heads >> c) & 1) || !ixl_v2mx_fast_word(kw)) {
          v = slow_dot(a0, a1, a2, a3, s_hq[n], kw);
        } else {
          const float k0 = __uint_as_float((kw & 0xFFu) << 23);
          const float k1 = __uint_as_float(((kw >> 8) & 0xFFu) << 23);
          const float k2 = __uint_as_float(((kw >> 16) & 0xFFu) << 23);
          const float k3 = __uint_as_float((kw >> 24) << 23);
          const float t01 = __fmaf_rn(a1, k1, __fmul_rn(a0, k0));
          const float t23 = __fmaf_rn(a3, k3, __fmul_rn(a2, k2));
          v = __fmul_rn(s_hc[n], __fadd_rn(t01, t23));
        }
        sc[e * 128] = v;
      }
#pragma unroll
      for (int e = 0; e < NE; e++) a[0][e] = sc[e * 128];
      reduce(r0_tag, std::false_type{}, a[0], d, tb, std::false_type{});
    } else {
      float kf[2][4];
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int g = 0; g < 4; g++)
          kf[h][g] = __uint_as_float(((d.kw[h] >> (8 * g)) & 0xFFu) << 23);
      // the exact dots d: the fast formula times 2^(qc - 127) where it holds, else the CPU's
      const bool pslow[2] = {!ixl_v2mx_fast_word(d.kw[0]) != 0, !ixl_v2mx_fast_word(d.kw[1]) != 0};
#pragma unroll
      for (int e = 0; e < NE; e++) {
        const int h = (e >> 1) & 1, j = R0 * JR + (e >> 2), c = 2 * j + (e & 1);
        const int n = cb + 8 * j + 2 * t4 + (e & 1);
        if (((slow_heads >> c) & 1) || pslow[h]) {
          a[0][e] = slow_dot(a[0][e], a[1][e], a[2][e], a[3][e], s_hq[n], d.kw[h]);
        } else {
          const float t01 = __fmaf_rn(a[1][e], kf[h][1], __fmul_rn(a[0][e], kf[h][0]));
          const float t23 = __fmaf_rn(a[3][e], kf[h][3], __fmul_rn(a[2][e], kf[h][2]));
          a[0][e] = __fmul_rn(s_hc[n], __fadd_rn(t01, t23));
        }
      }
      reduce(r0_tag, std::false_type{}, a[0], d, tb, std::false_type{});
    }
  };
  // kNoEpi: keep the wgmma alive (ptxas drops them when nothing reads the accumulators): one
  // element of each group feeds a store no run takes (R is never negative)
  auto keep_alive = [&](const float (&a)[4][kNCV / 2], int t) {
    const float k = a[0][0] + a[1][0] + a[2][0] + a[3][0];
    if (p.R < 0) reinterpret_cast<float *>(p.out)[t] = k;
  };

  if constexpr (kRows8) {
    // ---- 8 rows a CTA, 4 (N = 128) a math warpgroup: the tiles whose exponents fold on the s8
    // path (one m64n128 s32 accumulator, or two with kSplit8), the others (none under the
    // ablation kS8All) on the e4m3 path one row at a time (N = 32, 4 accumulators of 16: two
    // rows spill; the session-7 epilogue with its row R0; the weights from shared memory)
    for (int t = 0; t < T; t++) {
      const int s = t % kSW;
      ixl_mxk1_wait(bar_full + 8 * s, (uint32_t)(t / kSW) & 1u);
      bool need = false;
#pragma unroll
      for (int r = 0; r < kRW; r++) need |= t >= tr0[r] && t < tr1[r];
      // kNoMath (a timing ablation on 8 rows: the producer alone); R is never negative, so
      // the rest stays in the SASS
      if (!need || (kNoMath && p.R >= 0)) {
        ixl_mxk1_arrive(bar_empty + 8 * s);
        continue;
      }
      const int tb = t * kTile;
      const uint32_t dalo = dwlo + (uint32_t)s * (kWStage / 16);
      uint32_t use8 = 1u;
      if (!kS8All || kOvfMask)
        asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(use8) : "r"(tf_addr + 4 * s));
      if (kS8All || (kOvfMask ? use8 & 1u : use8)) {
        uint32_t acc8[kNCV / 2], accb[kSplit8 ? kNCV / 2 : 1];
        if constexpr (kOvfMask) {
          uint32_t k0a, k0b;
          // the 4 main IGMMA, then the stage's n overflow k blocks (compacted by the producer:
          // block j holds group g_j's, the query side is the main block's group g_j): one
          // straight-line batch (fence, IGMMA, commit, wait) per n, so every wgmma sequence is
          // whole on its path (a guarded IGMMA makes ptxas serialize them all: C7520)
          asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(k0a) : "r"(k8_addr + s * (kTile * 4)));
          asm volatile("ld.shared.u32 %0, [%1];\n"
                       : "=r"(k0b)
                       : "r"(k8_addr + s * (kTile * 4) + 32));
          // the stage's word: bit 0 s8, bits 1-3 n, bits 4 + 2 j .. 5 + 2 j g_j
          auto dq_j = [&](int j) { return desc(dq8lo + ((use8 >> (3 + 2 * j)) & 6u)); };
          switch ((use8 >> 1) & 7u) {
#define IXL_MXK1_BATCH(NOV)                                                                      \
  {                                                                                               \
    wgmma_fence();                                                                                \
    _Pragma("unroll") for (int g = 0; g < 4; g++)                                                 \
        ixl_mxk1_igmma<kNCV>(acc8, desc(dalo + 2 * g), desc(dq8lo + 2 * g), g);                   \
    _Pragma("unroll") for (int j = 0; j < (NOV); j++)                                             \
        ixl_mxk1_igmma<kNCV>(acc8, desc(dalo + 512 + 2 * j), dq_j(j), 1);                         \
    wgmma_commit();                                                                               \
    wgmma_wait<0>();                                                                              \
  }
            case 0: IXL_MXK1_BATCH(0) break;
            case 1: IXL_MXK1_BATCH(1) break;
            case 2: IXL_MXK1_BATCH(2) break;
            case 3: IXL_MXK1_BATCH(3) break;
            default: IXL_MXK1_BATCH(4) break;
#undef IXL_MXK1_BATCH
          }
          Slots d = {};
          d.ck0[0] = __uint_as_float(k0a), d.ck0[1] = __uint_as_float(k0b);
          fence_operand(acc8);
          ixl_mxk1_arrive(bar_empty + 8 * s);
          float x[kNCV / 2];
#pragma unroll
          for (int e = 0; e < kNCV / 2; e++) x[e] = __int2float_rn((int)acc8[e]); // exact
          reduce(Rows<0, kRW>{}, std::true_type{}, x, d, tb, std::true_type{});
          continue;
        }
        // kWarpProd8: the overflow IGMMAs on the main query block (no copy: kOq = 0)
        constexpr uint32_t kOq = kWarpProd8 ? 0 : kNCV * 128 / 16;
        wgmma_fence();
#pragma unroll
        for (int g = 0; g < 4; g++)
          ixl_mxk1_igmma<kNCV>(acc8, desc(dalo + 2 * g), desc(dq8lo + 2 * g), g);
#pragma unroll
        for (int g = 0; g < 4; g++) {
          if constexpr (kSplit8)
            ixl_mxk1_igmma<kNCV>(accb, desc(dalo + 512 + 2 * g),
                                 desc(dq8lo + kOq + 2 * g), g);
          else
            ixl_mxk1_igmma<kNCV>(acc8, desc(dalo + 512 + 2 * g),
                                 desc(dq8lo + kOq + 2 * g), 1);
        }
        wgmma_commit();
        Slots d = {};
        uint32_t k0a, k0b;
        asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(k0a) : "r"(k8_addr + s * (kTile * 4)));
        asm volatile("ld.shared.u32 %0, [%1];\n"
                     : "=r"(k0b)
                     : "r"(k8_addr + s * (kTile * 4) + 32));
        d.ck0[0] = __uint_as_float(k0a), d.ck0[1] = __uint_as_float(k0b);
        wgmma_wait<0>();
        fence_operand(acc8);
        if constexpr (kSplit8) fence_operand(accb);
        ixl_mxk1_arrive(bar_empty + 8 * s);
        float x[kNCV / 2];
#pragma unroll
        for (int e = 0; e < kNCV / 2; e++) // exact: |I| < 2^22 (either sum alone too)
          x[e] = __int2float_rn(kSplit8 ? (int)(acc8[e] + accb[e]) : (int)acc8[e]);
        reduce(Rows<0, kRW>{}, std::true_type{}, x, d, tb, std::true_type{});
        continue;
      }
      if constexpr (!kS8All) {
        const Slots d = load_slots(s); // before the stage's release (the last row's wgmma)
        float acc[4][kH / 2]; // one row: N = 32 (4 accumulators of 16; 2 rows spilled)
        auto row = [&](auto r_tag) {
          constexpr int r = decltype(r_tag)::value; // row r: columns 32 r ..
          const uint32_t dq = dqlo + (uint32_t)r * (kH * 128 / 16);
          wgmma_fence();
#pragma unroll
          for (int g = 0; g < 2; g++)
            wgmma_e4m3_ss<kH>(acc[g], desc(dalo + 2 * g), desc(dq + 2 * g), 0);
          wgmma_commit();
#pragma unroll
          for (int g = 2; g < 4; g++)
            wgmma_e4m3_ss<kH>(acc[g], desc(dalo + 2 * g), desc(dq + 2 * g), 0);
          wgmma_commit();
          wgmma_wait<1>();
          fence_operand(acc[0]);
          fence_operand(acc[1]);
          if (!d.qslow) {
#pragma unroll
            for (int e = 0; e < kH / 2; e++)
              acc[0][e] = __fmaf_rn(acc[1][e], d.cr1[(e >> 1) & 1], acc[0][e]);
          }
          fence_operand(acc[0]);
          wgmma_wait<0>();
#pragma unroll
          for (int g = 0; g < 4; g++) fence_operand(acc[g]);
          if (r == kRW - 1) ixl_mxk1_arrive(bar_empty + 8 * s); // the stage's last reads
          epilogue(Rows<r, 1>{}, std::true_type{}, acc, d, tb);
        };
        row(std::integral_constant<int, 0>{});
        row(std::integral_constant<int, 1>{});
        row(std::integral_constant<int, 2>{});
        row(std::integral_constant<int, 3>{});
      }
    }
  } else if constexpr (kRoll) {
    // ---- rolling pipeline: each row is its own m64n32 batch (4 wgmma into its own 4 group
    // accumulators, one commit group); row 0's epilogue of tile t runs while row 1's wgmma
    // do, and row 1's while tile t + 1's row-0 batch runs. The warpgroup computes the tiles
    // [tA, tB) of its rows' windows (a tile between two disjoint windows too: its stores are
    // masked) and passes over the others (waits for them and releases them, in order).
    float acc0[4][kNCV / 4], acc1[4][kNCV / 4];
    static_assert(!kNoEpi && !kNoMath, "the rolling pipeline has no ablations");
    int tA = T, tB = 0;
#pragma unroll
    for (int r = 0; r < 2; r++)
      if (tr1[r] > tr0[r]) {
        tA = min(tA, tr0[r]);
        tB = max(tB, tr1[r]);
      }
    if (tA >= tB) tA = tB = T;
    auto issue_row = [&](float (&a)[4][kNCV / 4], int r, int t) {
      const uint32_t dalo = dwlo + (uint32_t)(t % kSW) * (kWStage / 16);
      wgmma_fence();
#pragma unroll
      for (int g = 0; g < 4; g++)
        wgmma_e4m3_ss<kNCV / 2>(a[g], desc(dalo + 2 * g), desc(dqlo + 2 * g + 256 * r), 0);
      wgmma_commit();
    };
    auto pass = [&](int t) {
      ixl_mxk1_wait(bar_full + 8 * (t % kSW), (uint32_t)(t / kSW) & 1u);
      ixl_mxk1_arrive(bar_empty + 8 * (t % kSW));
    };
    for (int t = 0; t < tA; t++) pass(t);
    if (tA >= tB) return; // (then tA = T: every tile passed)
    // straight-line from here (the last tile peeled off): every wgmma wait has the same depth
    // on every path, so ptxas need not insert its own (C7518)
    using R0 = Rows<0, 1>;
    using R1 = Rows<1, 1>;
    ixl_mxk1_wait(bar_full + 8 * (tA % kSW), (uint32_t)(tA / kSW) & 1u);
    issue_row(acc0, 0, tA);
    issue_row(acc1, 1, tA);
    for (int t = tA; t < tB - 1; t++) {
      const int s = t % kSW, tb = t * kTile;
      const Slots d = load_slots(s);
      wgmma_wait<1>(); // row 0's batch of tile t
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(acc0[g]);
      epilogue(R0{}, std::false_type{}, acc0, d, tb);
      ixl_mxk1_wait(bar_full + 8 * ((t + 1) % kSW), (uint32_t)((t + 1) / kSW) & 1u);
      issue_row(acc0, 0, t + 1);
      wgmma_wait<1>(); // row 1's batch of tile t
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(acc1[g]);
      ixl_mxk1_arrive(bar_empty + 8 * s); // this thread's wgmma have read the stage
      epilogue(R1{}, std::false_type{}, acc1, d, tb);
      issue_row(acc1, 1, t + 1);
    }
    {
      const int t = tB - 1, s = t % kSW, tb = t * kTile;
      const Slots d = load_slots(s);
      wgmma_wait<1>();
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(acc0[g]);
      epilogue(R0{}, std::false_type{}, acc0, d, tb);
      wgmma_wait<0>();
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(acc1[g]);
      ixl_mxk1_arrive(bar_empty + 8 * s);
      epilogue(R1{}, std::false_type{}, acc1, d, tb);
    }
    for (int t = tB; t < T; t++) pass(t);
  } else {

  float acc[4][kNCV / 2];
  using RB = Rows<0, 2>;
  // the ablations' one set of wgmma on stage 0's contents, waited for
  auto mma_once = [&]() {
    wgmma_fence();
#pragma unroll
    for (int g = 0; g < 4; g++)
      wgmma_e4m3_ss<kNCV>(acc[g], desc(dwlo + 2 * g), desc(dqlo + 2 * g), 0);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int g = 0; g < 4; g++) fence_operand(acc[g]);
  };
  if (kNoMma) mma_once(); // the accumulators the tile loop then reads
  for (int t = 0; t < T; t++) {
    const int s = t % kSW;
    ixl_mxk1_wait(bar_full + 8 * s, (uint32_t)(t / kSW) & 1u);
    const bool need = (t >= tr0[0] && t < tr1[0]) || (t >= tr0[1] && t < tr1[1]);
    if (!need || kNoMath) {
      ixl_mxk1_arrive(bar_empty + 8 * s);
      continue;
    }
    const int tb = t * kTile; // the tile's first position, relative to the hull
    const uint32_t dalo = dwlo + (uint32_t)s * (kWStage / 16);
    if constexpr (kS8) {
      uint32_t use8;
      asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(use8) : "r"(tf_addr + 4 * s));
      if (use8) {
        // one s32 accumulator: the 4 groups' main blocks, then their overflow blocks (+8 KB
        // on both sides), chained: I = sum_g 4 s_g 2^(a_g + b_g), exact (v2_mxk1.cuh)
        uint32_t acc8[kNCV / 2];
        wgmma_fence();
#pragma unroll
        for (int g = 0; g < 4; g++)
          ixl_mxk1_igmma<kNCV>(acc8, desc(dalo + 2 * g), desc(dq8lo + 2 * g), g);
#pragma unroll
        for (int g = 0; g < 4; g++)
          ixl_mxk1_igmma<kNCV>(acc8, desc(dalo + 512 + 2 * g), desc(dq8lo + 512 + 2 * g), 1);
        wgmma_commit();
        Slots d = {};
        uint32_t k0a, k0b;
        asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(k0a) : "r"(k8_addr + s * (kTile * 4)));
        asm volatile("ld.shared.u32 %0, [%1];\n"
                     : "=r"(k0b)
                     : "r"(k8_addr + s * (kTile * 4) + 32));
        d.ck0[0] = __uint_as_float(k0a), d.ck0[1] = __uint_as_float(k0b);
        wgmma_wait<0>();
        fence_operand(acc8);
        ixl_mxk1_arrive(bar_empty + 8 * s); // this thread's wgmma have read the stage
        float x[kNCV / 2];
#pragma unroll
        for (int e = 0; e < kNCV / 2; e++) x[e] = __int2float_rn((int)acc8[e]); // exact: < 2^22
        reduce(RB{}, std::true_type{}, x, d, tb, std::true_type{});
        continue;
      }
    }
    if (!kNoMma) {
      wgmma_fence();
      // groups 0 and 1, then 2 and 3: the first pair's combine overlaps the second's wgmma
#pragma unroll
      for (int g = 0; g < 2; g++)
        wgmma_e4m3_ss<kNCV>(acc[g], desc(dalo + 2 * g), desc(dqlo + 2 * g), 0);
      wgmma_commit();
#pragma unroll
      for (int g = 2; g < 4; g++)
        wgmma_e4m3_ss<kNCV>(acc[g], desc(dalo + 2 * g), desc(dqlo + 2 * g), 0);
      wgmma_commit();
    }
    const Slots d = load_slots(s);
    if (!kNoMma) wgmma_wait<1>();
    fence_operand(acc[0]);
    fence_operand(acc[1]);
    if (!d.qslow) {
#pragma unroll
      for (int e = 0; e < kNCV / 2; e++) {
        const int h = (e >> 1) & 1;
        acc[0][e] = __fmaf_rn(acc[1][e], d.cr1[h], acc[0][e]);
      }
    }
    fence_operand(acc[0]);
    if (!kNoMma) wgmma_wait<0>();
#pragma unroll
    for (int g = 0; g < 4; g++) fence_operand(acc[g]);
    ixl_mxk1_arrive(bar_empty + 8 * s); // this thread's wgmma have read the stage
    if (kNoEpi) {
      keep_alive(acc, t);
      continue;
    }
    epilogue(RB{}, std::true_type{}, acc, d, tb);
  }
  if (kNoMath && p.R < 0) { // never taken: keeps one wgmma in the ablation's SASS (sass_check)
    mma_once();
    keep_alive(acc, 0);
  }
  } // kRoll
  };
  if (kOneCode || wg == 1) math(std::integral_constant<int, 0>{});
  else math(std::integral_constant<int, 1>{});
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// ------------------------------------------------------------------ host
// IXL_LOGITS_V2_MX_WS, read once a process: 0 (or anything not below): off (-1), V3 runs K1;
// 1 or 5: session 6's kernel (kVarBase); 6: the per-warp producer (kVarWarpProd); 7: it and
// the rolling pipeline (kVarRoll); 8: 7 with the fp32 head sums in two chains (kVarSplit);
// 9, a, b: 6, 8, 5 with one math code path for both warpgroups (kVarOneCode); c: 5 with the
// prologue's loads together (kVarEarly, also in 6..b and the ablations on the per-warp producer);
// d: c + the producer sleeping between polls of a full ring (kVarSleep); h: c + chunks of up to
// 8192 columns (kVarBigChunk); g: both (the default of session 8); s: g + the s8
// single-accumulator path where the exponents fold (kVarS8, v2_mxk1.cuh; session 8).
// Timing ablations with WRONG results, for the benchmark only: e (kVarBase, no math epilogue),
// f (kVarWarpProd, no math epilogue), p (kVarBase, the math warpgroups pass every tile on: no
// wgmma, no epilogue), q (the same with kVarWarpProd), m (6 without the tile loop's wgmma:
// kVarNoMma), w (6 without the producer's widening: kVarNoWiden), t (s with every tile on the s8
// path, folded or not: kVarS8All), x (t with the producer's e4m3 widening: kVarS8NoWiden), y
// (t with 8 rows a CTA, 4 a math warpgroup: kVarRows8), k (y with two IGMMA chains:
// kVarS8Split). z (s with 8 rows a CTA: kVarRows8, the e4m3 fallback one row at a time), v (z
// with two IGMMA chains): H200 session 9 visit 1: exact (10/10), racecheck / memcheck clean;
// quick.lua's dense logits 12,578 (g) -> 12,386 (z) / 12,749 (v) us; bench g 348, y 309, k 317,
// z 390 us (2048x8192 fp32; random scales: z falls back everywhere). Session 9 (visit 2): n (z
// with the per-warp producer, kVarWarpProd8), i (n with the overflow IGMMAs of the groups that
// need them only, kVarOvfMask: 5.3 instead of 8 IGMMA a tile on quick.lua's keys,
// bench/mxk1_ovf_stats.lua; the default, see kWsUnset), D (n printing each uncaptured launch's
// fold counts: kVarStats); ablations (WRONG results): r (y with the per-warp producer), Y (r
// with kVarOvfMask: on bench data no slot folds, so 4 IGMMA a tile), l (y without math: the
// producer alone), j (r so). Visit 2, bench us 2048x8192 fp32 / bf16 / 4096x65536: g 349.0 /
// 372.1 / 5,871, y 309.2 / 302.2 / 5,207, r 302.8 / 288.4 / 5,093, Y 302.3 / 303.5 / 5,012, l
// 174.4 / 176.5 / 2,844 (the producer is no longer the limit: the math is).
// Measured on the H200 and no longer built (2026-12-02, session 6 visit 3; K1 2048x8192 fp32 /
// bf16 / 4096x65536, WS=1: 419 / 394 / 7,094 us): the math warpgroups taking turns to issue
// on two mbarriers 430 / 405 / 7,299, raw stages released by an mbarrier (no producer
// bar.sync) 424 / 423 / 7,206, both 431 / 424 / 7,308; no widening (wrong results) 391 / 374 /
// 6,615; WS=1's reduction (the rows' chains one after the other): 418 / 409 / 7,081 against
// WS=5's 405 / 405 / 6,847 (visit 4), so 1 now runs 5's kernel.
// Unset: c (kVarBase | kVarEarly) since session 7's visit 2 (H200, 2026-12-02): there with
// the switch set to c, test_cuda_logits_mxk1 5/5 (PDL on), racecheck 0 hazards and memcheck 0
// errors (small shapes, PDL on), K1 2048x8192 fp32 398.8 -> 380.2 us, bf16 408.5 -> 395.8,
// 4096x65536 6,731 -> 6,376 against 5 in the same run. Before: 5 (kVarBase), the default
// since session 6's last visit (the whole GPU suite with it unset 654 passed / 0 failed,
// quick.lua's step 31.9 -> 26.5 ms, exact). test_cuda_logits_mxk1's one failure in that visit
// (seed 1796190516, an fp32 logit -inf where the CPU has NaN) was the test's: no NaN input,
// the sum of the heads' terms overflows, and the fp32 head order is free (SPEC 3), so
// +inf + -inf happens in the CPU's order and not in the lanes' (the test accepts any value
// where T = +inf).
// Unset: g (c + kVarSleep + kVarBigChunk) since session 8's visit 1 (H200, 2026-12-02): with the
// switch set to g, test_cuda_logits_mxk1 5/5, racecheck 0 hazards and memcheck 0 errors (small,
// PDL on), K1 2048x8192 fp32 380.0 -> 348.4 us, bf16 398.7 -> 371.0, 4096x65536 6,365 -> 5,876
// against c in the same run (h alone: 350.5 / 371.2 / 5,904; d alone: 377.9 / 398.8 / 6,348).
// Unset: i (8 rows a CTA: the s8 path on the tiles that fold, the per-warp producer, only the
// overflow IGMMAs a tile needs; the e4m3 fallback a row at a time) since session 9's visit 2
// (H200, 2026-12-02), where with the switch set to i: test_cuda_logits_mxk1 11/11, racecheck 0
// hazards and memcheck 0 errors (small, PDL on), quick.lua's step (bench/step.lua, same run)
// time_dense_logits_us 12,544 (g) -> 11,354 (i), time_step_us 24,498 -> 23,308, exact
// (logit_mismatches 0, selection_agreement 1); n 11,760, D's counts: 96.9 % of the step's K1
// tiles on the s8 path, every CTA's heads folding, 1.36 overflow groups an s8 tile. NOT run
// with the switch unset (no visit left). IXL_LOGITS_V2_MX_WS=g: the previous default.
constexpr int kZ = kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarRows8;
constexpr int kWsUnset = kZ | kVarWarpProd8 | kVarOvfMask;
int ws_mode() {
  static const int v = [] {
    switch (env_switch("IXL_LOGITS_V2_MX_WS", "156789abcdghkmvwefpqstxyznirljYD", 'u')) {
      case 'u': return kWsUnset; // i
      case '1':
      case '5': return kVarBase;
      case '6': return kVarBase | kVarEarly | kVarWarpProd;
      case '7': return kVarBase | kVarEarly | kVarWarpProd | kVarRoll;
      case '8': return kVarBase | kVarEarly | kVarWarpProd | kVarRoll | kVarSplit;
      case '9': return kVarBase | kVarEarly | kVarWarpProd | kVarOneCode;
      case 'a': return kVarBase | kVarEarly | kVarWarpProd | kVarRoll | kVarSplit | kVarOneCode;
      case 'b': return kVarBase | kVarEarly | kVarOneCode;
      case 'c': return kVarBase | kVarEarly;
      case 'd': return kVarBase | kVarEarly | kVarSleep;
      case 'g': return kVarBase | kVarEarly | kVarSleep | kVarBigChunk;
      case 'h': return kVarBase | kVarEarly | kVarBigChunk;
      case 's': return kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8;
      case 't': return kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarS8All;
      case 'x': return kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarS8All |
                       kVarS8NoWiden;
      case 'y': return kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarS8All |
                       kVarRows8;
      case 'k': return kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarS8All |
                       kVarRows8 | kVarS8Split;
      case 'z': return kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarRows8;
      case 'v': return kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarRows8 |
                       kVarS8Split;
      case 'n': return kZ | kVarWarpProd8;
      case 'i': return kZ | kVarWarpProd8 | kVarOvfMask;
      case 'r': return kZ | kVarS8All | kVarWarpProd8;
      case 'Y': return kZ | kVarS8All | kVarWarpProd8 | kVarOvfMask;
      case 'D': return kZ | kVarWarpProd8 | kVarStats;
      case 'l': return kZ | kVarS8All | kVarNoMath;
      case 'j': return kZ | kVarS8All | kVarWarpProd8 | kVarNoMath;
      case 'm': return kVarBase | kVarEarly | kVarWarpProd | kVarNoMma;
      case 'w': return kVarBase | kVarEarly | kVarWarpProd | kVarNoWiden;
      case 'e': return kVarBase | kVarNoEpi;
      case 'f': return kVarBase | kVarEarly | kVarWarpProd | kVarNoEpi;
      case 'p': return kVarBase | kVarNoMath;
      case 'q': return kVarBase | kVarEarly | kVarWarpProd | kVarNoMath;
      default: return -1; // 0 and anything else: off
    }
  }();
  return v;
}

template <bool BF16, int VAR>
ixl_status launch(ixl_ctx *ctx, Params p, const CUtensorMap *maps, const char *name) {
  auto kern = mxk1_kernel<BF16, VAR>;
  constexpr int kSR = ring_raw<VAR>(), kSW = ring_wide<VAR>();
  constexpr int alloc = Smem<kSR, kSW, (VAR & kVarRoll) != 0, (VAR & kVarS8) != 0,
                             (VAR & kVarRows8) ? 4 * kH : kNC>::alloc;
  static bool said = false; // one stderr line per configuration a process: the switch took
  if (!said) {
    said = true;
    fprintf(stderr,
            "ixl logits v2 mxfp4: WS kernel (mxk1), K1, H %d, %d rows a CTA, %s, %d + %d stages, "
            "variant %d%s (IXL_LOGITS_V2_MX_WS=%s)\n",
            kH, (VAR & kVarRows8) ? 8 : kRows, BF16 ? "bf16" : "fp32", kSR, kSW, VAR,
            VAR & kVarAblations ? " TIMING ABLATION, WRONG RESULTS" : "",
            getenv("IXL_LOGITS_V2_MX_WS") ? getenv("IXL_LOGITS_V2_MX_WS") : "unset");
  }
  if (VAR & kVarRows8) p.nrb = ixl_ceil_div(p.R, 8); // the 8-row ablation's row blocks
  int occ = 0, sms = 132;
  ixl_status st = occupancy(ctx, kern, kThreads, alloc, "cudaFuncSetAttribute (logits v2 mxk1)",
                            &occ, &sms);
  if (st) return st;
  // the chunk (as logits_v2_mx_sm90.cu's launch_kern): tiles of 64, at most kMaxChunk columns,
  // as few chunks per row block as fill whole waves of the resident CTAs
  Grid g;
  constexpr int mc = VAR & kVarBigChunk ? kMaxChunk2 : kMaxChunk;
  st = chunk_grid(ctx, p.out_cols, p.nrb, mc, mc, occ, sms, name, "v2 mxk1", &g);
  if (st) return st;
  p.chunk = g.chunk;
  p.nchunks = g.nchunks;
  const int64_t blocks = g.blocks;
  if (!(VAR & kVarStats))
    return ixl::launch_pdl(ctx, name, kern, dim3((unsigned)blocks), dim3(kThreads), alloc, 1,
                           maps[0], maps[1], p);
  // kVarStats: zero the counters, launch, read them back (not under capture: counts only)
  cudaStream_t sm = ixl::stream_of(ctx);
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(sm, &cap);
  const unsigned long long zero[5] = {0, 0, 0, 0, 0};
  if (cap == cudaStreamCaptureStatusNone)
    cudaMemcpyToSymbolAsync(g_mxk1_stats, zero, sizeof zero, 0, cudaMemcpyHostToDevice, sm);
  st = ixl::launch_pdl(ctx, name, kern, dim3((unsigned)blocks), dim3(kThreads), alloc, 1, maps[0],
                       maps[1], p);
  if (st || cap != cudaStreamCaptureStatusNone) return st;
  unsigned long long c[5] = {0, 0, 0, 0, 0};
  cudaMemcpyFromSymbolAsync(c, g_mxk1_stats, sizeof c, 0, cudaMemcpyDeviceToHost, sm);
  cudaStreamSynchronize(sm);
  fprintf(stderr,
          "mxk1 stats: R %lld, cols %lld, %s: CTAs %llu, with every head folding %llu; tiles s8 "
          "%llu, e4m3 %llu; overflow groups of the s8 tiles %llu\n",
          (long long)p.R, (long long)p.out_cols, BF16 ? "bf16" : "fp32", c[0], c[1], c[2], c[3],
          c[4]);
  return st;
}

} // namespace

extern "C" int ixl_cuda_logits_v2_mxk1(ixl_ctx *ctx, const ixl_logits_call *c, ixl_status *st) {
  const int mode = ws_mode();
  if (mode < 0 || c->mode != IXL_LOGITS_DENSE || c->H != kH || c->bs) return 0;
  const ixl_qk *in = c->in;
  if (in->k_pages || !in->k_codes || !in->k_scales || !in->q_scales) return 0;
  Params p = {};
  p.q_codes = (const uint8_t *)in->q_codes->data;
  p.q_scales = (const uint32_t *)in->q_scales->data;
  p.k_codes = (const uint8_t *)in->k_codes->data;
  p.k_scales = (const uint32_t *)in->k_scales->data;
  p.N = in->k_codes->shape[0];
  p.w = c->weights->data;
  p.out = c->out->data;
  p.R = c->R;
  p.out_cols = c->out->shape[1];
  p.ke = (const int32_t *)c->ke->data;
  p.ks = c->ks ? (const int32_t *)c->ks->data : nullptr;
  p.compressed = c->layout == IXL_LAYOUT_COMPRESSED;
  if (p.R <= 0 || p.out_cols <= 0 || !p.ks) return 0;
  CUtensorMap maps[2];
  if (!k1_maps(p.k_codes, p.k_scales, p.N, kMaxChunk2, maps)) return 0;
  p.nrb = ixl_ceil_div(p.R, kRows);
  const char *name = "dense_logits kernel (v2 mxfp4, WS)";
  const bool bf16 = c->reduction == IXL_REDUCE_BF16;
  switch (mode) {
#define IXL_MXK1_CASE(V)                                                                         \
  case V: *st = bf16 ? launch<true, V>(ctx, p, maps, name) : launch<false, V>(ctx, p, maps, name); \
    break;
    IXL_MXK1_CASE(kVarBase)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarWarpProd)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarWarpProd | kVarRoll)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarWarpProd | kVarRoll | kVarSplit)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarWarpProd | kVarOneCode)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarWarpProd | kVarRoll | kVarSplit | kVarOneCode)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarOneCode)
    IXL_MXK1_CASE(kVarBase | kVarEarly)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarSleep)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarSleep | kVarBigChunk)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarBigChunk)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarS8All)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarS8All |
                  kVarS8NoWiden)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarS8All |
                  kVarRows8)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarS8All |
                  kVarRows8 | kVarS8Split)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarRows8)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarSleep | kVarBigChunk | kVarS8 | kVarRows8 |
                  kVarS8Split)
    IXL_MXK1_CASE(kZ | kVarWarpProd8)
    IXL_MXK1_CASE(kZ | kVarWarpProd8 | kVarOvfMask)
    IXL_MXK1_CASE(kZ | kVarS8All | kVarWarpProd8)
    IXL_MXK1_CASE(kZ | kVarS8All | kVarWarpProd8 | kVarOvfMask)
    IXL_MXK1_CASE(kZ | kVarWarpProd8 | kVarStats)
    IXL_MXK1_CASE(kZ | kVarS8All | kVarNoMath)
    IXL_MXK1_CASE(kZ | kVarS8All | kVarWarpProd8 | kVarNoMath)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarWarpProd | kVarNoMma)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarWarpProd | kVarNoWiden)
    IXL_MXK1_CASE(kVarBase | kVarNoEpi)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarWarpProd | kVarNoEpi)
    IXL_MXK1_CASE(kVarBase | kVarNoMath)
    IXL_MXK1_CASE(kVarBase | kVarEarly | kVarWarpProd | kVarNoMath)
#undef IXL_MXK1_CASE
    default: return 0;
  }
  return 1;
}
