// logits/logits_v2_mxk2_sm90.cu - K2 (dense paged decode) for MXFP4 keys at H 32 on a
// warp-specialized, persistent kernel (issue 13), behind IXL_LOGITS_V2_MX_K2WS (read once a
// process, k2ws_mode below; unset: s (fp32 and bf16); 0: logits_v2_mx_sm90.cu's mx_kernel<K2>,
// unchanged; the other letters and digits: this kernel's variants V). The hook is the paged
// branch of ixl_cuda_logits_v2_mx, after its own checks (mx_takes); calls with K3's block
// scores, H 64 or a page size this kernel does not take stay there.
//
// Why: mx_kernel<K2> is one warpgroup a CTA in which every thread issues its part of each
// tile's cp.async copies (page lookup, 64-bit address math, flags, a vote and a barrier a tile)
// and the grid is chunks of rows, so it ran at 436 us for 64 x 128K (1.31 TB/s) against a
// bytes floor of ~140 us. Here:
// - a persistent grid of one CTA an SM; CTA b takes a contiguous range of the flattened
//   (row, 64-position tile) units (ixl_v2mxk2_split), so a single 128K row spreads over every
//   SM and 64 rows balance to within one tile;
// - producer warps (one, or four with kProd4: warp w the tiles w mod 4) read the context
//   lengths and block table 32 pieces at a time (one lane a piece, the next batch's loads in
//   flight during this one's issue) and, per piece (a 64-position slice of a page, or a whole
//   page of 8, 16 or 32 positions), issue one TMA box of codes (the pages viewed as rows of
//   64 B, box 64 B x piece rows, SWIZZLE_64B, which lands as ixl_v2mx_raw_off's conflict-free
//   layout) and one bulk copy of its scale words into a ring of kStages stages (full barrier:
//   1 arrival + the bytes; empty: 128 arrivals, or 4 with kArr4), with the stage's mask of
//   loaded pieces in shared memory; a tile with none is a plain arrival;
// - three math warpgroups take the CTA's tiles in turn (tile k of the range by warpgroup
//   k % 3), row segment by row segment: for each row the query tile and per-column data are
//   built once into one of two buffers (one named barrier a row), and per tile a warpgroup
//   waits, reads its 8 code words and 2 scale words, releases the stage, widens, runs the
//   4 RS wgmma m64n32k32 and then exactly mx_body's combine and reduction for K2 / H 32 / V3's
//   deferred key factor (logits_v2_mx_sm90.cu, v2_mx.cuh): the same exact group sums, the same
//   fast / slow tests and factors from the same scale words (the slow path the CPU's formula),
//   the same fp32 sum or SPEC 3 bf16 chain, so the bits are mx_kernel's and the CPU's. kPipe:
//   a tile's reduction and stores run under the next tile's wgmma;
// - -inf at columns past the context and where the page id is outside the pool;
// - kWide (switch w, session 8, not yet run on a GPU): the producer warps widen each landed
//   tile into shared memory (private raw stages, 12 shared wide stages) and the math
//   warpgroups run SS wgmma on it: no code reads, no widening and no A registers there;
// - programmatic dependent launch (ixl::launch_pdl; pdl_wait and pdl_trigger at entry);
// - the math threads' shared-memory addresses, the wgmma descriptor and the row's output
//   pointer pass through a shfl once (launder): ptxas recomputed them from the thread index
//   in every tile (~40 of ~316 SASS instructions a tile and thread).
//
// H200, 2026-12-02, session 9 visit 2 (medians of 20, L2 flushed, two rounds): s (p's RS path
// with ldmatrix code loads, the key factors by bytes, lean barriers, the producers sleeping
// between empty polls) 64 x 128K fp32 245.6 / 245.2 us against Y 284.8 / 284.3 and p 299.4,
// bf16 244.8 / 244.8 against Y 295.4 / 296.4, 16 x 128K 72.5 / 72.2 (Y 80.3 / 80.4), 1 x 128K
// 13.7 / 13.5 (Y 13.9 / 13.9); n (s without the sleep) the same within 0.5 %; both
// test_cuda_logits_mxk2 14/14, racecheck and memcheck small clean: s the default since then
// (not run with the switch unset). The producer-widening forms I (both slots' loads first)
// 297.8, X / Z (each tile widened by all 4 producer warps) 545 / 517: slower.
// Session 9 visit 1: Y
// (the producers widen into SS A with their loads first and decode the key factors) 64 x 128K
// fp32 284.2 / 284.0 us against p 299.3 / 299.0, bf16 295.1 / 295.2 against q 309.7 / 309.7,
// 16 x 128K 80.8 / 80.4 (p 86.2 / 86.7), 1 x 128K 13.7 / 14.1 (p 14.6 / 14.9); z 293.6 /
// 294.3; test_cuda_logits_mxk2 14/14, racecheck and memcheck small clean, for both: the
// default until visit 2.
// Session 8 (medians of 20, L2 flushed): the defaults were p (fp32) and q (bf16);
// visit 3: p 64 x 128K fp32 301.2 us (q 309.6, mx_kernel<K2> ~436), 16 x 128K 86.4 (88.8),
// 1 x 128K 14.7 (14.7); bf16 64 x 128K q 311.6 (p 313.3). Visit 2: the producer-widening SS
// variants w / x / y correct and sanitizer-clean but producer-bound: 64 x 128K fp32 372 / 352
// / 359 us (1 x 128K 14.2 / 14.0 / 13.95).
// Session 7 (visit 2, snapshot 60a46d4), switch q (then the default): 64 x 128K fp32 309.7 us
// (mx_kernel<K2> 438.7), bf16 312.4 (432.7), 16 x 128K 88.9 (119.3), 1 x 128K 15.0 (18.3);
// test_cuda_logits_mxk2 14/14 (slow_paths_overflow_to_inf under the T = +inf rule),
// test_cuda_logits v2 18/18, IXL_PDL=1 small 4/4, memcheck and racecheck small clean. p
// 301.5 us (q without the full-tile path; sanitizer-checked in session 8's visit 3);
// the math alone (m) 269.7, math only (M) 289.9: the math bounds the kernel; copies only by one
// bulk copy a page (r) 148.2 (bytes floor ~140). Open: copies only with TMA boxes and 4
// producer warps (C; visit 1's 9 and 3 too) faults at 64 x 128K ("unspecified launch
// failure"), the bulk-copy version (r) does not; no full kernel faulted in any test or bench.
// Session 6: the kernel with one producer warp (switch 1) 450 us; its variants 2 (FAC: the
// producer decoding the key factors, 620 us) and 3 (RAW: the codes by 1-D bulk copies, 459 us)
// are gone. The fp32 "+-inf where the CPU has NaN" of dots that overflow (test case
// slow_paths_overflow_to_inf) is SPEC 3's free fp32 head order (the lead's replay for K1's WS
// kernel): the test accepts any value where T = +inf.
//
// sass-limits: mxk2_kernel registers 152 shared 1024
#include "logits/logits.h"
#include "cuda/launch.cuh"
#include "cuda/sm90.cuh"
#include "logits/v2_mx.cuh"
#include "logits/v2_mx_common.cuh"
#include "logits/v2_mxk2.cuh"
#include "numerics/scalar.h"

#include <cuda_bf16.h>

#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

namespace {

using namespace ixl::sm90;

constexpr int kH = 32;      // heads (the wgmma N)
constexpr int kTile = 64;   // key positions a tile (the wgmma M)
constexpr int kStages = 32; // ring depth: up to 28 x 4.25 KB in flight an SM
constexpr int kNWG = 3;     // math warpgroups
constexpr int kMath = 128 * kNWG;
constexpr int kThreads = kMath + 128; // then the producer warpgroup (one working warp)
// Registers after setmaxnreg (entry: 128 = 65536 / 512). A sub-partition of the SM holds one
// warp of each warpgroup and 16 K registers: 3 x 152 + 56 = 512 a lane. (416 threads with a
// lone producer warp at 150 registers did not launch: one sub-partition then holds 4 warps.)
constexpr int kProdRegs = 56, kMathRegs = 152;
static_assert(128 * kProdRegs + kMath * kMathRegs <= 65536, "setmaxnreg: the CTA's pool");
// kWide (below): the producers widen (80 registers), the math warps hold no A registers (144)
constexpr int kProdRegsW = 80, kMathRegsW = 144;
static_assert(128 * kProdRegsW + kMath * kMathRegsW <= 65536, "setmaxnreg: the CTA's pool");
// kIlp (below): the producers hold a slot's 4 raw words and more in flight (104), math 136
constexpr int kProdRegsI = 104, kMathRegsI = 136;
static_assert(128 * kProdRegsI + kMath * kMathRegsI <= 65536, "setmaxnreg: the CTA's pool");

// Dynamic shared memory (1024-aligned base): raw code stages | 2 query tiles | scale words |
// 2 x per column | stage masks.
// BOX1 (kBox1 below): a stage is the whole page of 64 positions, codes and scale words, as one
// TMA box of 68 rows of 64 B (4352 B, the stage 4608 B: a multiple of SWIZZLE_64B's 512-B span)
template <bool BOX1>
struct K2Smem {
  static constexpr int stage = BOX1 ? 4608 : kTile * 64;
  static constexpr int raw = 0;
  static constexpr int q = raw + kStages * stage;
  static constexpr int sc = q + 2 * kH * 128;
  static constexpr int col = sc + (BOX1 ? 0 : kStages * kTile * 4);
  // per column and buffer: hq (u32 qeff), hc (f32 2^(qc - 127)), wo (f32 weight), wq (f32 the
  // fast path's weight), hf (u8 fast)
  static constexpr int col_bytes = 4 * kH * 4 + kH;
  static constexpr int meta = (col + 2 * col_bytes + 15) & ~15;
  static constexpr int total = meta + kStages * 4;
  static constexpr int alloc = total + 1024;
};

// WIDE (kWide below): the producer warps widen each landed tile into shared memory (wgmma's SS
// A layout, v2_mx.cuh's ixl_v2mx_ss_off: 64 rows of 128 B, 128B-swizzled) and the math
// warpgroups run SS wgmma on it. Raw stages: kRawW a producer warp, private (warp w: raw stages
// w kRawW ..), each a TMA box of codes (SWIZZLE_64B, as above) + a bulk copy of scale words;
// wide stages: kWideS shared in tile order (tile k: k % kWideS), each 8 KB of e4m3 codes, the
// 64 scale words (copied by the producer) and the tile's piece mask.
constexpr int kRawW = 6, kWideS = 12;
// FAC (kFac): after the stage masks, each wide stage's deferred key factors, a float4 a slot
// (r1, r2, r3, k0 of v2_mx.cuh's COMB; k0's sign bit set where the slot is off the fast path)
template <bool FAC>
struct K2SmemW {
  static constexpr int stage = kTile * 128; // a wide stage's codes
  static constexpr int raw = 0;             // 4 kRawW raw stages of 4 KB
  static constexpr int rsc = raw + 4 * kRawW * kTile * 64;
  static constexpr int wide = rsc + 4 * kRawW * kTile * 4; // 1024-aligned
  static constexpr int sc = wide + kWideS * stage;         // the wide stages' scale words
  static constexpr int q = sc + kWideS * kTile * 4;        // 1024-aligned
  static constexpr int col = q + 2 * kH * 128;
  static constexpr int col_bytes = 4 * kH * 4 + kH;
  static constexpr int meta = (col + 2 * col_bytes + 15) & ~15;
  static constexpr int fac = (meta + kWideS * 4 + 15) & ~15;
  static constexpr int total = fac + (FAC ? kWideS * kTile * 16 : 0);
  static constexpr int alloc = total + 1024;
  static_assert(wide % 1024 == 0 && q % 1024 == 0, "the 128B-swizzled tiles");
};

struct K2Params {
  const uint8_t *q_codes;   // [R, 32, 64]
  const uint32_t *q_scales; // [R, 32]
  const uint8_t *k_pages;   // [num_pages, stride]
  const void *w;            // [R, 32] fp32 or bf16
  const int32_t *lens;      // [R] context lengths
  const int32_t *bt;        // [R, bt_cols]
  void *out;                // [R, out_cols] fp32 or bf16
  int64_t R, stride, num_pages, bt_cols, out_cols, ntr, total, G, rows64;
  int P, Plog, ptlog; // page size, its log2 (-1: not a power of 2), log2 of the piece positions
};

#if IXL_SM90_DEVICE
__device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}
__device__ __forceinline__ int64_t mn64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t mx64(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ __forceinline__ float relu(float x) { return x < 0.0f ? 0.0f : x; } // NaN stays NaN

// cvt_relu_bf16x2, slow_dot, lane_weights and head_chain_bf16: v2_mx_common.cuh (ixl::v2mx).

// ld.shared.u32 at a shared-window byte address (volatile: it stays between the stage's full
// wait and its empty arrival).
__device__ __forceinline__ uint32_t lds_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// ld.shared.v4.f32 (volatile, as lds_u32)
__device__ __forceinline__ float4 lds_f4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
  return v;
}

// x through a shfl to its own lane: the same value, which ptxas keeps in a register rather
// than recomputing it where it is used (the warp must be converged).
__device__ __forceinline__ uint32_t launder(uint32_t x) {
  return __shfl_sync(0xffffffffu, x, (int)(threadIdx.x & 31));
}

// st.global of one logit (the laundered row pointer would otherwise become a generic store).
__device__ __forceinline__ void stg_u32(float *p, uint32_t v) {
  asm volatile("st.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void stg_u16(uint16_t *p, uint16_t v) {
  asm volatile("st.global.b16 [%0], %1;\n" ::"l"(p), "h"(v) : "memory");
}
__device__ __forceinline__ uint64_t launder64(uint64_t x) {
  return (uint64_t)launder((uint32_t)x) | (uint64_t)launder((uint32_t)(x >> 32)) << 32;
}

// mbarrier try_wait (acquire) / arrive (release) at a shared-window address (kLean): ptx::'s
// generic-pointer forms convert the address at every call (S2UR SR_CgaCtaId + ULEA; session
// 8 visit 1's ncu of q: ~5 % of the math warps' stall samples on those two).
__device__ __forceinline__ uint32_t try_wait_u32(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               "selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(ok)
               : "r"(bar), "r"(parity)
               : "memory");
  return ok;
}
// as mbar_wait (cuda/sm90.cuh): bounded by clock64, ~30 s
__device__ __forceinline__ void wait_u32(uint32_t bar, uint32_t parity) {
  if (try_wait_u32(bar, parity)) return;
  const long long t0 = clock64();
  while (!try_wait_u32(bar, parity))
    if (clock64() - t0 > 60000000000LL) __trap();
}
__device__ __forceinline__ void arrive_u32(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// wait_u32 with a sleep of ~ns between the polls (kSleep: the producer's empty-stage wait; it
// is up to ~28 tiles ahead, and its polls took ~12 % of the SM's issued instructions in
// session 8's ncu of q: 9 instructions x 22.6 polls a tile)
__device__ __forceinline__ void wait_u32_sleep(uint32_t bar, uint32_t parity, unsigned ns) {
  if (try_wait_u32(bar, parity)) return;
  const long long t0 = clock64();
  while (!try_wait_u32(bar, parity)) {
    __nanosleep(ns);
    if (clock64() - t0 > 60000000000LL) __trap();
  }
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16 (kLdsm): lane l gets, of matrix m (its 8 rows of
// 16 B at the addresses of lanes 8 m .. 8 m + 7), the word l % 4 of row l / 4 in d[m]
// (volatile, as lds_u32)
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &d0, uint32_t &d1, uint32_t &d2,
                                        uint32_t &d3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
               : "r"(addr)
               : "memory");
}

// The fast path's deferred key factors r1 = 2^(ke1 - ke0), r2 = 2^(ke2 - ke0), r3 =
// 2^(ke3 - ke2) of scale word kw (kLdsm), by bytes at once: z = (kw >> 8) + 0x7F7F7F7F -
// [ke0, ke0, ke2, 0] has the base-256 digits ke1 - ke0 + 127, ke2 - ke0 + 127, ke3 - ke2 + 127
// (each in [0, 255] when every byte lies in ixl_v2mx_comb_word's window 127 +- 25, so no digit
// borrows or carries): the same bits as combine's (e + 127 - e') << 23 there; garbage
// elsewhere (the slow path never reads them).
__device__ __forceinline__ void comb_r123(uint32_t kw, float &r1, float &r2, float &r3) {
  const uint32_t z = (kw >> 8) + 0x7F7F7F7Fu - __byte_perm(kw, 0u, 0x4200u);
  r1 = __uint_as_float((z << 23) & 0x7F800000u);
  r2 = __uint_as_float((z << 15) & 0x7F800000u);
  r3 = __uint_as_float((z << 7) & 0x7F800000u);
}

// bar.sync on named barrier 1 over the math warpgroups only (the producer warp never joins).
__device__ __forceinline__ void math_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kMath) : "memory");
}
#endif

// V (the variant bits, IXL_LOGITS_V2_MX_K2WS below): kPipe (1) the math warpgroups software-
// pipelined across their tiles: tile t's group sums are combined into 16 registers (cd), tile
// t + 1's 4 wgmma issued, and then t's head reduction and stores run under them; kProd4 (2)
// the 4 warps of the producer warpgroup each issue every 4th tile of the CTA (warp w: tiles
// w mod 4, the stages w mod 4: 32 % 4 == 0), each with its own page-id batches; kArr4 (4) a
// stage's empty barrier takes one arrival a math warp (lane 0 after __syncwarp) instead of 128;
// kBox1 (8, page size 64 only) one TMA box a tile for the codes and the scale words together
// (the page's 68 rows of 64 B: its codes, then its scale words), instead of a box and a bulk
// copy; the scale words then sit swizzled after the codes in the stage.
// kRaw1 (16, with kBox1) that page by one 1-D bulk copy instead (no tensor map, no swizzle:
// the plain layout, slot i at 64 i, group g at 16 g, its scale word at 4096 + 4 i; the A
// reads then conflict 4 ways): does the box or the copy count bound the copy side?
// kFull (32): a tile whose every piece was loaded and whose 64 columns all lie below the
// context and out_cols (warpgroup-uniform) takes a fast path's reduction with unconditional
// stores (no per-slot validity, no column bound).
// kWide (64, with kProd4; not with kPipe, kArr4, kBox1, DIAG): the producer warps widen the
// codes into shared memory and the math warpgroups run SS wgmma (K2SmemW above): no code reads
// and no widening in the math warps (~70 of ~335 SASS instructions a tile and thread), the
// stage released after the tile's wgmma completed.
// kLean (128, with kWide): the mbarrier waits and arrivals at laundered shared-window addresses
// (try_wait_u32 above), the lane's slot / column indices and the descriptors' high word
// laundered once (ptxas re-read SR_TID.X and rebuilt them in every tile).
// kFac (256, with kLean): the producer decodes each slot's scale word into the deferred key
// factors while it widens (K2SmemW's fac: one 16-B load a slot in the math warps instead of
// two bytes-to-float decodes and the window test in each of the quad's 4 lanes); the scale
// words themselves are read only on the slow path.
// kIlp (512, with kLean): the producer's widening loads a tile's raw words before its stores
// (session 8 visit 2's ncu of x: the widening ran serialized, load -> widen -> store, ~0.12
// IPC on the producer warp, which then bounded w, x and y).
// kLean without kWide (session 9): the RS path (p) with kLean's math-side laundering and
// shared-window barrier addresses (the full wait, the empty arrival; the producer's empty
// wait).
// kLdsm (1024, with kLean, the RS path; not kBox1): per tile the codes by 2 ldmatrix.x4 (8
// LDS.32 and their address math before), the fast path's key factors by comb_r123 (bytes at
// once), computed under the wgmma; a tile with no keys leaves through its own branch (the -inf
// stores' predicates were computed in every tile).
// kSleep (2048, with kLean): the producer sleeps between the polls of its empty waits
// (wait_u32_sleep; kWide: the wide stage's).
// kIlp2 (4096, with kIlp): the widening loads both of a lane's slots (8 LDS.128 and 2 scale
// words) before any store of the tile (kIlp: one slot's, so the second slot's loads waited
// for the first slot's stores).
// kSplit (8192, with kFac and kIlp): each tile widened by all 4 producer warps, warp w its slots
// 16 w .. 16 w + 15 (lane l: groups 2 (l / 16) and + 1 of slot 16 w + l % 16; lanes 0-15 the
// slot's scale word and factors): a quarter of the tile's latency and of its instructions on
// each scheduler. The TMA issue stays per warp (tile k by warp k % 4, into its raw stages); a
// raw stage is issued again after all 4 warps released it (s_rempty, 4 arrivals), its piece
// mask in shared memory (s_rmask); a wide stage's full barrier counts 128 lanes. Each warp
// widens the tiles in order up to 21 behind its next issue.
// kTrim (16384, with kFac): kLdsm's math-side trims on the SS path: keyless tiles in their own
// branch, each lane's stored slot and its mask bit once a row, t0 laundered.
constexpr int kPipe = 1, kProd4 = 2, kArr4 = 4, kBox1 = 8, kRaw1 = 16, kFull = 32, kWide = 64,
              kLean = 128, kFac = 256, kIlp = 512, kLdsm = 1024, kSleep = 2048, kIlp2 = 4096,
              kSplit = 8192, kTrim = 16384;
// DIAG (bench-only diagnostics, fp32, the logits are garbage): 1 = math only (the producer
// copies nothing: the stages hold zero codes and in-window scale words written once, each
// tile a plain arrival), 2 = copies only (the math warps wait, read the stage and release it,
// nothing else): which side bounds the kernel; 3 = the math alone (as 1, but the stages are
// filled and signalled once, and the math warps never wait or release after the first round:
// no producer in the loop at all).
template <bool BF16, int V, int DIAG = 0>
__global__ void __launch_bounds__(kThreads, 1)
    mxk2_kernel(const __grid_constant__ CUtensorMap kmap, const K2Params p) {
#if IXL_SM90_DEVICE
  constexpr bool WIDE = (V & kWide) != 0, FAC = (V & kFac) != 0, ILP = (V & kIlp) != 0;
  constexpr int S = WIDE ? kWideS : kStages; // the math warps' ring (WIDE: the wide stages)
  constexpr int NPW = (V & kProd4) ? 4 : 1;  // producer warps
  constexpr bool PIPE = (V & kPipe) != 0, ARR4 = (V & kArr4) != 0, BOX1 = (V & kBox1) != 0;
  constexpr bool RAW1 = BOX1 && (V & kRaw1) != 0, FULL = !PIPE && (V & kFull) != 0;
  static_assert(S % NPW == 0, "a producer warp owns the stages w mod NPW");
  static_assert(!WIDE || (NPW == 4 && !PIPE && !ARR4 && !BOX1 && DIAG == 0), "WIDE: with p");
  constexpr bool LEAN = (V & kLean) != 0;
  static_assert(!LEAN || (NPW == 4 && !PIPE && !ARR4 && !BOX1 && DIAG == 0), "kLean: with p");
  static_assert(!FAC || (LEAN && WIDE), "kFac: with kLean and kWide");
  static_assert(!ILP || (LEAN && WIDE), "kIlp: with kLean and kWide");
  constexpr bool LDSM = (V & kLdsm) != 0, SLEEP = (V & kSleep) != 0;
  static_assert(!LDSM || (LEAN && !WIDE && !FULL), "kLdsm: with kLean, the RS path");
  static_assert(!SLEEP || LEAN, "kSleep: with kLean");
  constexpr bool ILP2 = (V & kIlp2) != 0;
  static_assert(!ILP2 || ILP, "kIlp2: with kIlp");
  constexpr bool SPLIT = (V & kSplit) != 0;
  static_assert(!SPLIT || (FAC && ILP && !ILP2), "kSplit: with kFac and kIlp");
  constexpr bool TRIM = (V & kTrim) != 0, LT = LDSM || TRIM;
  static_assert(!TRIM || FAC, "kTrim: with kFac");
  constexpr int NC = kH, NJ = NC / 8;
  using LW = K2SmemW<FAC>;
  using L = std::conditional_t<WIDE, LW, K2Smem<BOX1>>;
  constexpr int STB = L::stage;
  extern __shared__ uint8_t smem_raw[];
  // the 1024-aligned base as an offset of smem_raw: every pointer stays in the shared window
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  uint8_t *s_raw = smem + L::raw;
  uint32_t *s_sc = reinterpret_cast<uint32_t *>(smem + L::sc);
  uint32_t *s_meta = reinterpret_cast<uint32_t *>(smem + L::meta);
  __shared__ uint64_t s_full[S], s_empty[S];
  // WIDE: the raw stages' barriers (1 arrival + the bytes); s_full then counts the producer
  // warp's 32 lanes (each arrives after its own stores of the widened tile)
  __shared__ uint64_t s_rfull[WIDE ? 4 * kRawW : 1];
  // SPLIT: the raw stages' release by the 4 producer warps, and their piece masks
  __shared__ uint64_t s_rempty[SPLIT ? 4 * kRawW : 1];
  __shared__ uint32_t s_rmask[SPLIT ? 4 * kRawW : 1];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < S; s++) {
      ptx::mbarrier_init(&s_full[s], SPLIT ? 128 : WIDE ? 32 : 1);
      ptx::mbarrier_init(&s_empty[s], ARR4 ? 4 : 128);
    }
    if constexpr (WIDE) {
#pragma unroll
      for (int s = 0; s < 4 * kRawW; s++) ptx::mbarrier_init(&s_rfull[s], 1);
    }
    if constexpr (SPLIT) {
#pragma unroll
      for (int s = 0; s < 4 * kRawW; s++) ptx::mbarrier_init(&s_rempty[s], 4);
    }
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster); // before the first use
  }
  __syncthreads();
  // PDL (cuda/launch.cuh): only the barriers' set-up above comes before the wait; the next
  // grid may start its own prologue as soon as every CTA of this one got here
  ixl::pdl_wait();
  ixl::pdl_trigger();
  const int64_t u0 = ixl_v2mxk2_split(p.total, p.G, blockIdx.x);
  const int64_t u1 = ixl_v2mxk2_split(p.total, p.G, (int64_t)blockIdx.x + 1);
  const int64_t n = u1 - u0; // tiles of this CTA
  const int Pt = 1 << p.ptlog, npclog = 6 - p.ptlog, npc = 1 << npclog;
  const int64_t rmax = p.bt_cols * (int64_t)p.P;

  if (warp >= 4 * kNWG) {
    // the whole warpgroup; then the warps past NPW leave (WIDE: the widening needs more)
    setmaxnreg_dec<ILP ? kProdRegsI : WIDE ? kProdRegsW : kProdRegs>();
    const int pw = warp - 4 * kNWG;
    if (pw >= NPW) return;
    if (DIAG == 1 || DIAG == 3) { // math only: this warp's stages once, zero codes, 2^0 scales
      for (int s = pw; s < S; s += NPW) {
        uint32_t *r32 = reinterpret_cast<uint32_t *>(s_raw + s * STB);
        for (int i = lane; i < kTile * 16; i += 32) r32[i] = 0u;
        uint32_t *sc = BOX1 ? r32 + kTile * 16 : s_sc + s * kTile;
        for (int i = lane; i < kTile; i += 32) sc[i] = 0x7F7F7F7Fu;
      }
      __syncwarp();
    }
    // ---------------------------------------------------------------- the producer warps
    // Warp pw issues the CTA's tiles k = pw + NPW i (i = 0, 1, ...), each after its stage's
    // empty wait. Its pieces are numbered locally: piece lp is piece lp % npc of its tile
    // lp / npc.
    const int64_t nw = n > pw ? (n - pw + NPW - 1) / NPW : 0; // this warp's tiles
    const int64_t np = nw << npclog;                          // and pieces
    // local piece lp: its unit, row, first position and page index
    auto where = [&](int64_t lp, int64_t &row, int64_t &pos0, int64_t &pi) {
      // 32-bit divisions: units below 2^31 (the host's check), positions below out_cols < 2^31
      const int u = (int)(u0 + pw + NPW * (lp >> npclog)), nt = (int)p.ntr;
      const int r = u / nt;
      const int ps0 = (u - r * nt) * kTile + (int)((lp & (npc - 1)) << p.ptlog);
      row = r;
      pos0 = ps0;
      pi = p.Plog >= 0 ? ps0 >> p.Plog : ps0 / p.P;
    };
    // piece lp's loads (the context length and the page id), with no dependence between them
    auto fetch = [&](int64_t lp, int32_t &len, int32_t &pg) {
      len = 0;
      pg = -1;
      if (lp < np) {
        int64_t row, pos0, pi;
        where(lp, row, pos0, pi);
        len = __ldg(p.lens + row);
        if (pi < p.bt_cols) pg = __ldg(p.bt + row * p.bt_cols + pi);
      }
    };
    int32_t c_len, c_pg, n_len, n_pg;
    fetch(lane, c_len, c_pg);
    fetch(32 + lane, n_len, n_pg); // the next batch, in flight while this one issues
    int ps = pw;                   // tile k's stage (k % S)
    uint32_t pq = 0;               // its phase parity
    bool ok = false;
    int32_t crd = 0;
    const uint8_t *ssrc = nullptr;
    uint32_t vm = 0;
    int64_t b0 = -32;
    // A new batch of 32 pieces from local piece PK: piece PK + lane's validity (ok), TMA row (crd)
    // and scale words' address (ssrc = its page + SC_OFF, sl the piece's first row in its page),
    // the batch's ballot (vm); the next batch's loads issued (fetch). Both producer loops' form
    // (a macro: as a lambda it changed every kernel's register allocation).
#define K2_NEW_BATCH(PK, SC_OFF)                                                               \
  do {                                                                                         \
    if (b0 >= 0) {                                                                             \
      c_len = n_len;                                                                           \
      c_pg = n_pg;                                                                             \
      fetch((PK) + 32 + lane, n_len, n_pg);                                                    \
    }                                                                                          \
    b0 = (PK);                                                                                 \
    const int64_t lp = b0 + lane;                                                              \
    ok = false;                                                                                \
    crd = 0;                                                                                   \
    ssrc = nullptr;                                                                            \
    if (lp < np) {                                                                             \
      int64_t row, pos0, pi;                                                                   \
      where(lp, row, pos0, pi);                                                                \
      const int64_t row_hi = clamp64(c_len, 0, rmax);                                          \
      if (pos0 < row_hi && pos0 < p.out_cols && c_pg >= 0 && c_pg < p.num_pages) {            \
        const int64_t sl = pos0 - pi * p.P;                                                    \
        ok = true;                                                                             \
        crd = (int32_t)(c_pg * p.rows64 + sl);                                                 \
        ssrc = p.k_pages + c_pg * p.stride + SC_OFF;                                           \
      }                                                                                        \
    }                                                                                          \
    vm = __ballot_sync(0xffffffffu, ok);                                                       \
  } while (0)
    if constexpr (WIDE) {
      // The raw stages of this warp (pw kRawW + 0 .. kRawW - 1) and their scale words; lane r
      // holds the piece mask of the tile in raw stage r (m_ring). Tile i is issued into raw
      // stage i % kRawW after the widening of tile i - kRawW (the same stage: program order,
      // the warp's own reads) and widened kRawW tiles later into wide stage k % S.
      uint8_t *const w_raw = s_raw + pw * kRawW * (kTile * 64);
      uint32_t *const w_rsc =
          reinterpret_cast<uint32_t *>(smem + LW::rsc) + pw * kRawW * kTile;
      uint32_t m_ring = 0, wr_q = 0, ww_q = 0;
      int wr = 0, ww = pw;
      // (kLean: the barriers' shared-window addresses; this warp's raw stages' at b_rfull)
      const uint32_t b_full = LEAN ? launder(smem_u32(s_full)) : 0u,
                     b_empty = LEAN ? launder(smem_u32(s_empty)) : 0u,
                     b_rfull = LEAN ? launder(smem_u32(s_rfull + pw * kRawW)) : 0u;
      int64_t wk = pw;
      // widens the warp's next tile (wk, raw stage wr, wide stage ww) once its raw stage has
      // landed and the math warps released the wide stage's last tile (wk - S); then the 32
      // lanes arrive on the wide stage's full barrier (each after its own stores)
      auto widen_next = [&]() {
        const uint32_t m = __shfl_sync(0xffffffffu, m_ring, wr);
        if constexpr (SLEEP) {
          if (wk >= S) wait_u32_sleep(b_empty + 8u * (uint32_t)ww, ww_q ^ 1u, 128u);
          wait_u32(b_rfull + 8u * (uint32_t)wr, wr_q);
        } else if constexpr (LEAN) {
          if (wk >= S) wait_u32(b_empty + 8u * (uint32_t)ww, ww_q ^ 1u);
          wait_u32(b_rfull + 8u * (uint32_t)wr, wr_q);
        } else {
          if (wk >= S) mbar_wait(&s_empty[ww], ww_q ^ 1u);
          mbar_wait(&s_rfull[pw * kRawW + wr], wr_q);
        }
        if (m) {
          const uint8_t *src = w_raw + wr * (kTile * 64);
          uint8_t *dst = smem + LW::wide + ww * LW::stage;
          // (ILP2: both slots' raw words and scale words first)
          uint4 wv2[ILP2 ? 2 : 1][4];
          uint32_t kv2[2] = {0u, 0u};
          if constexpr (ILP2) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
              for (int g = 0; g < 4; g++)
                wv2[h][g] =
                    *reinterpret_cast<const uint4 *>(src + ixl_v2mx_raw_off(lane + 32 * h, g));
              kv2[h] = w_rsc[wr * kTile + lane + 32 * h];
            }
          }
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int i = lane + 32 * h; // slot i: its 4 groups of 16 raw bytes, conflict-free
            // ILP: the slot's 4 raw words of 16 B and its scale word loaded before its stores
            // (else ptxas keeps each load behind the last group's stores: the same generic
            // pointers; all 8 at once spill at 80 registers)
            uint4 wv[4];
            uint32_t kv = 0;
            if constexpr (ILP2) {
#pragma unroll
              for (int g = 0; g < 4; g++) wv[g] = wv2[h][g];
              kv = kv2[h];
            } else if constexpr (ILP) {
#pragma unroll
              for (int g = 0; g < 4; g++)
                wv[g] = *reinterpret_cast<const uint4 *>(src + ixl_v2mx_raw_off(i, g));
              kv = w_rsc[wr * kTile + i];
            }
#pragma unroll
            for (int g = 0; g < 4; g++) {
              const uint4 w = ILP ? wv[g]
                                  : *reinterpret_cast<const uint4 *>(src + ixl_v2mx_raw_off(i, g));
              uint4 ev, od;
              ixl_sm90_e2m1x8_widen(w.x, &ev.x, &od.x);
              ixl_sm90_e2m1x8_widen(w.y, &ev.y, &od.y);
              ixl_sm90_e2m1x8_widen(w.z, &ev.z, &od.z);
              ixl_sm90_e2m1x8_widen(w.w, &ev.w, &od.w);
              *reinterpret_cast<uint4 *>(dst + ixl_v2mx_ss_off(i, g, 0, 0)) = ev;
              *reinterpret_cast<uint4 *>(dst + ixl_v2mx_ss_off(i, g, 0, 1)) = od;
            }
            const uint32_t kwv = ILP ? kv : w_rsc[wr * kTile + i];
            s_sc[ww * kTile + i] = kwv;
            if constexpr (FAC) { // the math warps' COMB factors of this slot (their formulas)
              const uint32_t e0 = kwv & 0xFFu, e1 = (kwv >> 8) & 0xFFu, e2 = (kwv >> 16) & 0xFFu,
                             e3 = kwv >> 24;
              float4 f;
              f.x = __uint_as_float((e1 + 127u - e0) << 23);
              f.y = __uint_as_float((e2 + 127u - e0) << 23);
              f.z = __uint_as_float((e3 + 127u - e2) << 23);
              f.w = __uint_as_float(e0 << 23 | (ixl_v2mx_comb_word(kwv) ? 0u : 0x80000000u));
              *reinterpret_cast<float4 *>(smem + LW::fac + (ww * kTile + i) * 16) = f;
            }
          }
          // the stores, visible to wgmma (async proxy); the raw stage's reads before its next
          // TMA
          ptx::fence_proxy_async(ptx::space_shared);
        }
        if (lane == 0) s_meta[ww] = m;
        if constexpr (LEAN) arrive_u32(b_full + 8u * (uint32_t)ww);
        else (void)ptx::mbarrier_arrive(&s_full[ww]);
        if (++wr == kRawW) {
          wr = 0;
          wr_q ^= 1u;
        }
        ww += NPW;
        if (ww >= S) {
          ww -= S;
          ww_q ^= 1u;
        }
        wk += NPW;
      };
      // SPLIT: this warp's quarter of the CTA's tile t (any warp's), in raw stage rsl of its
      // issuing warp t % 4; then its 32 arrivals on the wide stage's full barrier and one
      // on the raw stage's release
      const uint32_t b_rempty = SPLIT ? launder(smem_u32(s_rempty)) : 0u,
                     b_rfull0 = SPLIT ? launder(smem_u32(s_rfull)) : 0u;
      auto widen_split = [&](int t) {
        const int oi = t >> 2, rsl = (t & 3) * kRawW + oi % kRawW, ws = t % S;
        const uint32_t rq = (uint32_t)(oi / kRawW) & 1u, wq = (uint32_t)(t / S) & 1u;
        if constexpr (SLEEP) {
          if (t >= S) wait_u32_sleep(b_empty + 8u * (uint32_t)ws, wq ^ 1u, 128u);
        } else {
          if (t >= S) wait_u32(b_empty + 8u * (uint32_t)ws, wq ^ 1u);
        }
        wait_u32(b_rfull0 + 8u * (uint32_t)rsl, rq);
        const uint32_t m = s_rmask[rsl];
        if (m) {
          const uint8_t *src = s_raw + rsl * (kTile * 64);
          uint8_t *dst = smem + LW::wide + ws * LW::stage;
          const int i = 16 * pw + (lane & 15), g0 = 2 * (lane >> 4);
          const uint4 wv[2] = {*reinterpret_cast<const uint4 *>(src + ixl_v2mx_raw_off(i, g0)),
                               *reinterpret_cast<const uint4 *>(src + ixl_v2mx_raw_off(i, g0 + 1))};
          const uint32_t kwv =
              lane < 16 ? reinterpret_cast<const uint32_t *>(smem + LW::rsc)[rsl * kTile + i] : 0u;
#pragma unroll
          for (int u = 0; u < 2; u++) {
            uint4 ev, od;
            ixl_sm90_e2m1x8_widen(wv[u].x, &ev.x, &od.x);
            ixl_sm90_e2m1x8_widen(wv[u].y, &ev.y, &od.y);
            ixl_sm90_e2m1x8_widen(wv[u].z, &ev.z, &od.z);
            ixl_sm90_e2m1x8_widen(wv[u].w, &ev.w, &od.w);
            *reinterpret_cast<uint4 *>(dst + ixl_v2mx_ss_off(i, g0 + u, 0, 0)) = ev;
            *reinterpret_cast<uint4 *>(dst + ixl_v2mx_ss_off(i, g0 + u, 0, 1)) = od;
          }
          if (lane < 16) { // the slot's scale word and COMB factors (y's formulas)
            s_sc[ws * kTile + i] = kwv;
            const uint32_t e0 = kwv & 0xFFu, e1 = (kwv >> 8) & 0xFFu, e2 = (kwv >> 16) & 0xFFu,
                           e3 = kwv >> 24;
            float4 f;
            f.x = __uint_as_float((e1 + 127u - e0) << 23);
            f.y = __uint_as_float((e2 + 127u - e0) << 23);
            f.z = __uint_as_float((e3 + 127u - e2) << 23);
            f.w = __uint_as_float(e0 << 23 | (ixl_v2mx_comb_word(kwv) ? 0u : 0x80000000u));
            *reinterpret_cast<float4 *>(smem + LW::fac + (ws * kTile + i) * 16) = f;
          }
          ptx::fence_proxy_async(ptx::space_shared); // the stores, visible to wgmma
        }
        if (pw == 0 && lane == 0) s_meta[ws] = m;
        arrive_u32(b_full + 8u * (uint32_t)ws);
        __syncwarp(); // every lane's reads of the raw stage are above
        if (lane == 0) arrive_u32(b_rempty + 8u * (uint32_t)rsl);
      };
      int wt = 0; // SPLIT: the next tile of the CTA to widen
      int rs = 0; // tile i's raw stage
      for (int64_t i = 0; i < nw; i++) {
        if constexpr (SPLIT) { // the tiles up to 21 behind this one; raw stage rs released
          const int k = pw + NPW * (int)i;
          while (wt <= k - 21) widen_split(wt++);
          if (i >= kRawW)
            wait_u32(b_rempty + 8u * (uint32_t)(pw * kRawW + rs),
                     (uint32_t)(i / kRawW - 1) & 1u);
        } else if (i >= kRawW) {
          widen_next(); // tile i - kRawW: frees raw stage rs
        }
        __syncwarp();
        const int64_t pk = i << npclog;
        if (pk >= b0 + 32) { // a new batch (as below)
          K2_NEW_BATCH(pk, (int64_t)p.P * 64 + sl * 4);
        }
        const int j = (int)((pk - b0) >> npclog);
        const uint32_t m = (vm >> (j << npclog)) & ((1u << npc) - 1u);
        uint64_t *const rb = &s_rfull[pw * kRawW + rs];
        if (SPLIT) {
          if (lane == 0) s_rmask[pw * kRawW + rs] = m; // published by the arrival below
        } else if (lane == rs) {
          m_ring = m;
        }
        if (lane == 0) {
          if (m)
            ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                           rb, (uint32_t)(__popc(m) * Pt * 68));
          else
            (void)ptx::mbarrier_arrive(rb);
        }
        __syncwarp();
        if (ok && (lane >> npclog) == j) {
          const int pc = lane & (npc - 1);
          const int32_t ck[2] = {0, crd};
          ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global,
                                    w_raw + rs * (kTile * 64) + pc * Pt * 64, &kmap, ck, rb);
          ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, w_rsc + rs * kTile + pc * Pt,
                             ssrc, (uint32_t)(Pt * 4), rb);
        }
        if (++rs == kRawW) rs = 0;
      }
      if constexpr (SPLIT) {
        while (wt < (int)n) widen_split(wt++); // the last ones
      } else {
        for (int64_t i = nw > kRawW ? nw - kRawW : 0; i < nw; i++) widen_next(); // the last ones
      }
    } else {
      // (kLean: the empty barriers' shared-window address)
      const uint32_t b_empty = LEAN ? launder(smem_u32(s_empty)) : 0u;
      for (int64_t i = 0; i < nw; i++) {
        const int64_t k = pw + NPW * i;
        const int64_t pk = i << npclog; // the tile's first local piece (npc divides 32: a batch
                                        // holds whole tiles)
        if (pk >= b0 + 32) { // a new batch: local piece b0 + lane's addresses
          K2_NEW_BATCH(pk, (RAW1 ? 0 : (int64_t)p.P * 64 + sl * 4));
        }
        const int j = (int)((pk - b0) >> npclog);
        const int s = ps;
        if (DIAG == 3 && k >= S) break; // every stage signalled once
        // every lane: the stage's last tile (k - S) has been read
        if constexpr (SLEEP) {
          if (k >= S) wait_u32_sleep(b_empty + 8u * (uint32_t)s, pq ^ 1u, 128u);
        } else if constexpr (LEAN) {
          if (k >= S) wait_u32(b_empty + 8u * (uint32_t)s, pq ^ 1u);
        } else {
          if (k >= S) mbar_wait(&s_empty[s], pq ^ 1u);
        }
        ps += NPW;
        if (ps >= S) {
          ps -= S;
          pq ^= 1u;
        }
        const uint32_t m = DIAG == 1 || DIAG == 3 ? (1u << npc) - 1u
                                                  : (vm >> (j << npclog)) & ((1u << npc) - 1u);
        if (lane == 0) {
          s_meta[s] = m; // published by the arrival below (release)
          if (m && DIAG != 1 && DIAG != 3)
            ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                           &s_full[s], (uint32_t)(__popc(m) * Pt * 68));
          else
            (void)ptx::mbarrier_arrive(&s_full[s]);
        }
        __syncwarp();
        if (DIAG != 1 && DIAG != 3 && ok && (lane >> npclog) == j) {
          const int pc = lane & (npc - 1);
          const int32_t ck[2] = {0, crd};
          if (RAW1) // the whole page: its codes and scale words, 4352 B
            ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, s_raw + s * STB, ssrc,
                               (uint32_t)(kTile * 68), &s_full[s]);
          else
            ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global,
                                      s_raw + s * STB + pc * Pt * 64, &kmap, ck, &s_full[s]);
          if (!BOX1)
            ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, s_sc + s * kTile + pc * Pt,
                               ssrc, (uint32_t)(Pt * 4), &s_full[s]);
        }
      }
    }
#undef K2_NEW_BATCH
    return;
  }

  // ------------------------------------------------------------------ the math warpgroups
  setmaxnreg_inc<ILP ? kMathRegsI : WIDE ? kMathRegsW : kMathRegs>();
  const int mt = tid, wg = tid >> 7, wwarp = (tid & 127) >> 5;
  // (kLean: through launder, which ptxas keeps in registers: it re-read SR_TID.X every tile)
  const int wt = LEAN ? (int)launder((uint32_t)(tid & 127)) : tid & 127;
  const int t4 = LEAN ? (int)launder((uint32_t)(lane & 3)) : lane & 3;
  // this lane's slots: i0, i0 + 8
  const int i0_ = 16 * wwarp + (lane >> 2);
  const int i0 = LEAN ? (int)launder((uint32_t)i0_) : i0_;
  const uint32_t b_full = LEAN ? launder(smem_u32(s_full)) : 0u,
                 b_empty = LEAN ? launder(smem_u32(s_empty)) : 0u;
  // (kFac: slot i0's factors in wide stage 0; stage s at + 1024 s, slot i0 + 8's 128 B further)
  const uint32_t fac_u32 = FAC ? launder(smem_u32(smem + LW::fac) + 16u * (uint32_t)i0) : 0u;
  const int q4 = lane & 3, sw = (i0 >> 1) & 3;
  // shared-window byte addresses: the code stages (1024-aligned), this lane's word of slot i0
  // group 0 within a stage (group g: a_off ^ 16 g), its scale word; the pieces of its slots
  // (through a shfl, which ptxas does not rematerialize: it recomputed them from the thread
  // index in every tile)
  const uint32_t raw_u32 = launder(smem_u32(s_raw));
  // WIDE: the wide stages' wgmma descriptor, low word (stage s: + s 512, group g: + 2 g; the
  // high word is the query's, the same LBO, SBO and swizzle)
  const uint32_t wa_lo =
      WIDE ? launder((uint32_t)wgmma_desc(smem + LW::wide, IXL_SM90_SWIZZLE_128B, 16, 1024))
           : 0u;
  const uint32_t a_off = launder((uint32_t)(i0 * 64 + (RAW1 ? 0 : 16 * sw) + 4 * q4));
  // BOX1: slot i's scale word at 4096 + 4 i of the box, swizzled (SWIZZLE_64B: the 16-B chunk
  // index, bits 4-5, XOR bits 7-8): row 64 + i / 16, chunk ((i / 4) % 4) ^ (i / 32); slot
  // i0 + 8's is in the same row, chunk ^ 2 (i0 % 16 < 8, i0 % 32 < 24): sc_u32 ^ 32
  const uint32_t sc_u32 = launder(
      RAW1   ? 4096u + 4u * (uint32_t)i0
      : BOX1 ? 4096u + 64u * (uint32_t)(i0 >> 4) + 16u * (uint32_t)(((i0 >> 2) & 3) ^ (i0 >> 5)) +
                 4u * (uint32_t)(i0 & 3)
           : smem_u32(s_sc) + 4u * (uint32_t)i0);
  const int sh0 = (int)launder((uint32_t)(i0 >> p.ptlog)),
            sh1 = (int)launder((uint32_t)((i0 + 8) >> p.ptlog));
  // kLdsm: this lane's row addresses (within a stage) of the tile's two ldmatrix.x4: matrix
  // m = lane / 8 of the first holds group m / 2 (the second's: 2 + m / 2) of the slots
  // 16 wwarp + 8 (m % 2) + 0 .. 7, so it returns r[m] (r[4 + m]) of the LDS.32 form
  const int lm = lane >> 3, lslot = 16 * wwarp + (lane & 7) + 8 * (lm & 1);
  const uint32_t ld_a = LDSM ? launder(ixl_v2mx_raw_off(lslot, lm >> 1)) : 0u,
                 ld_b = LDSM ? launder(ixl_v2mx_raw_off(lslot, 2 + (lm >> 1))) : 0u;
  // (kLdsm: the slot this lane stores, i0 + 8 my_h, and its piece's bit in the tile's mask:
  // fp32 lanes t4 = 0, 1 store slots i0, i0 + 8; bf16 lanes t4 = 0, 2)
  const int my_h = BF16 ? t4 >> 1 : t4 & 1;
  const int my_i = LT ? (int)launder((uint32_t)(i0 + 8 * my_h)) : 0,
            my_sh = LT ? (int)launder((uint32_t)((i0 + 8 * my_h) >> p.ptlog)) : 0;
  if (n <= 0) return;
  const int64_t rfirst = u0 / p.ntr, rlast = (u1 - 1) / p.ntr;
  int par = 0;
  for (int64_t row = rfirst; row <= rlast; row++, par ^= 1) {
    uint8_t *s_q = smem + L::q + par * (kH * 128);
    uint8_t *cb = smem + L::col + par * L::col_bytes;
    uint32_t *s_hq = reinterpret_cast<uint32_t *>(cb);
    float *s_hc = reinterpret_cast<float *>(cb + kH * 4);
    float *s_wo = reinterpret_cast<float *>(cb + 2 * kH * 4);
    float *s_wq = reinterpret_cast<float *>(cb + 3 * kH * 4);
    uint8_t *s_hf = cb + 4 * kH * 4;
    // ---- per column (head): the fold of its query exponents (mx_body's rules, COMB)
    if (mt < NC) {
      const uint32_t qw = p.q_scales[row * kH + mt];
      int qc, t[4];
      const int fold = ixl_v2mx_head_fold(qw, &qc, t);
      int fast = fold;
      const float w =
          BF16 ? __uint_as_float((uint32_t)reinterpret_cast<const uint16_t *>(p.w)[row * kH + mt]
                                 << 16)
               : reinterpret_cast<const float *>(p.w)[row * kH + mt];
      const float wc = __fmul_rn(w, __uint_as_float((uint32_t)qc << 23));
      const uint32_t we = (__float_as_uint(wc) >> 23) & 0xFFu;
      if (fast && w == w && w != 0.0f && (we < 2 || we == 0xFF)) fast = 0;
      if (fast) { // the deferred key factor's window (v2_mx.cuh, IXL_V2MX_COMB_E)
        const float aw = fabsf(w);
        if (aw != 0.0f && aw <= 3.4028235e38f && (aw < 0x1p-25f || aw > 0x1p25f)) fast = 0;
        if (qc < 127 - IXL_V2MX_COMB_E || qc > 127 + IXL_V2MX_COMB_E) fast = 0;
      }
      s_wo[mt] = w;
      s_wq[mt] = fast ? wc : w;
      s_hf[mt] = (uint8_t)fast;
      s_hq[mt] = fold ? (uint32_t)qc * 0x01010101u : qw; // the fold's exponents (slow path)
      s_hc[mt] = fast ? __uint_as_float((uint32_t)qc << 23) : 1.0f;
    }
    // ---- the query tile: column n's element perm(p) of group g at byte 32 g + p, as e4m3
    for (int i = mt; i < NC * 32; i += kMath) {
      const int nn = i >> 5, g = (i >> 3) & 3, p4 = i & 7;
      const uint32_t qw = p.q_scales[row * kH + nn];
      int qc, t[4];
      (void)ixl_v2mx_head_fold(qw, &qc, t);
      const uint32_t tw = (uint32_t)(t[0] + 8) | (uint32_t)(t[1] + 8) << 8 |
                          (uint32_t)(t[2] + 8) << 16 | (uint32_t)(t[3] + 8) << 24;
      const uint32_t x = *reinterpret_cast<const uint32_t *>(p.q_codes + (row * kH + nn) * 64 +
                                                             16 * g + 4 * (p4 & 3));
      const uint32_t o = ixl_v2mx_q_word(x, p4, (int)((tw >> (8 * g)) & 0xFFu) - 8);
      *reinterpret_cast<uint32_t *>(s_q + ixl_sm90_swizzle((uint32_t)(nn * 128 + 32 * g + 4 * p4),
                                                           IXL_SM90_SWIZZLE_128B)) = o;
    }
    ptx::fence_proxy_async(ptx::space_shared); // the generic stores, visible to wgmma
    // the tiles and columns are visible; every warpgroup is done with row - 2's buffer (it
    // passed row - 1's barrier after its last tile of row - 2)
    math_sync();

    // ---- per lane: its columns 8 j + 2 t4 + c (register 4 j + 2 half + c), weights, folds
    uint32_t slow_heads = 0;
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
      for (int c = 0; c < 2; c++)
        slow_heads |= (uint32_t)(s_hf[8 * j + 2 * t4 + c] == 0) << (2 * j + c);
    int quad_slow = slow_heads != 0;
    quad_slow |= __shfl_xor_sync(0xffffffffu, quad_slow, 1);
    quad_slow |= __shfl_xor_sync(0xffffffffu, quad_slow, 2);
    float wf[BF16 ? 1 : 2 * NJ];
    __nv_bfloat162 wb[BF16 ? 2 * NJ : 1];
    ixl::v2mx::lane_weights<BF16, NJ>(s_wq, t4, wf, wb);
    // 32-bit from here: a context length is an int32, out_cols < 2^31 (mx_takes) and a CTA has
    // fewer than 2^31 tiles (the host's check)
    const int row_hi = (int)clamp64(p.lens[row], 0, rmax), ocols = (int)p.out_cols;
    // (the descriptor and the row's output through launder: ptxas rebuilt them every tile)
    // (the low word through launder; the high word holds no address bits, a constant; group g's
    // B is 2 g further in the 14-bit address field, which cannot carry: s_q + 96 < 256 KB)
    const uint64_t dq = wgmma_desc(s_q, IXL_SM90_SWIZZLE_128B, 16, 1024);
    const uint32_t db_lo = launder((uint32_t)dq),
                   db_hi = LEAN ? launder((uint32_t)(dq >> 32)) : (uint32_t)(dq >> 32);
    auto dbg = [&](int g) { return (uint64_t)db_hi << 32 | (uint64_t)(db_lo + 2u * (uint32_t)g); };
    // (the row's first logit: row * out_cols elements of 2 (bf16) or 4 (fp32) bytes in)
    uint8_t *const orow = reinterpret_cast<uint8_t *>(launder64(
        (uint64_t)(reinterpret_cast<uint8_t *>(p.out) + row * p.out_cols * (BF16 ? 2 : 4))));
    float *out_f = reinterpret_cast<float *>(orow);
    uint16_t *out_h = reinterpret_cast<uint16_t *>(orow);

    // ---- this row's tiles of the CTA: k in [seg_lo, seg_hi), warpgroup k % 3
    // (seg_hi through launder: ptxas rebuilt it from 64-bit products twice a tile)
    const int seg_lo = (int)(mx64(u0, row * p.ntr) - u0),
              seg_hi = (int)launder((uint32_t)(mn64(u1, (row + 1) * p.ntr) - u0));
    // tile k of the CTA is tile t0 + k of the row (kLdsm: through launder, ptxas rebuilt it from
    // 64-bit products every tile)
    const int t0 = LT ? (int)launder((uint32_t)(u0 - row * p.ntr)) : (int)(u0 - row * p.ntr);
    int k = seg_lo + (wg - seg_lo % kNWG + kNWG) % kNWG;
    int s = k % S;                        // k's stage, kept as k steps by kNWG (< S)
    uint32_t kq = (uint32_t)(k / S) & 1u; // its phase parity
    float acc[4][NC / 2], cd[NC / 2]; // the group sums; the combined dots of the tile reduced
    float fc[2][4];                   // kFac: the tile's slots' factors (r1, r2, r3, k0)
    uint32_t a[4][4];                 // the widened codes (wgmma A), live until its wait
    // ---- pieces of a tile's work
    // acc -> cd: the dots of mx_body's K2 / H 32 / COMB (fast: the deferred key factors in SPEC
    // 3's group order; slow: the exact dots); `first` when acc[0] already holds g0 + r1 g1
    auto combine = [&](uint32_t kwa, uint32_t kwb, bool qs, bool first) {
      const uint32_t kw[2] = {kwa, kwb};
      if (!qs) {
        float cr1[2], cr2[2], cr3[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
          if constexpr (FAC || LDSM) {
            cr1[h] = fc[h][0];
            cr2[h] = fc[h][1];
            cr3[h] = fc[h][2];
          } else {
            const uint32_t e0 = kw[h] & 0xFFu, e1 = (kw[h] >> 8) & 0xFFu,
                           e2 = (kw[h] >> 16) & 0xFFu, e3 = kw[h] >> 24;
            cr1[h] = __uint_as_float((e1 + 127u - e0) << 23);
            cr2[h] = __uint_as_float((e2 + 127u - e0) << 23);
            cr3[h] = __uint_as_float((e3 + 127u - e2) << 23);
          }
        }
#pragma unroll
        for (int e = 0; e < NC / 2; e++) {
          const int h = (e >> 1) & 1;
          const float c01 = first ? acc[0][e] : __fmaf_rn(acc[1][e], cr1[h], acc[0][e]);
          cd[e] = __fmaf_rn(__fmaf_rn(acc[3][e], cr3[h], acc[2][e]), cr2[h], c01);
        }
      } else {
        float kf[2][4];
        ixl::v2mx::key_pow2(kw[0], kf[0]);
        ixl::v2mx::key_pow2(kw[1], kf[1]);
        const bool pslow[2] = {!ixl_v2mx_fast_word(kw[0]) != 0, !ixl_v2mx_fast_word(kw[1]) != 0};
        // the exact dots d (v2mx::slow_branch: the fast formula times 2^(qc - 127) where it
        // holds, else the CPU's) into cd, through a copy of acc (acc itself stays as it is)
        float t[4][NC / 2];
#pragma unroll
        for (int g = 0; g < 4; g++)
#pragma unroll
          for (int e = 0; e < NC / 2; e++) t[g][e] = acc[g][e];
        ixl::v2mx::slow_branch(t, kf, kw, pslow, slow_heads, s_hq, s_hc, t4);
#pragma unroll
        for (int e = 0; e < NC / 2; e++) cd[e] = t[0][e];
      }
    };
    // ---- the head reduction of cd and the stores. FOLD: the dots are d / (2^(qc - 127) k0)
    // and the weights carry 2^(qc - 127), k0 multiplied last; else the dots are d and the
    // weights the stored ones.
    auto reduce = [&](auto fold_tag, auto full_tag, int tb, bool ok0, bool ok1, uint32_t kwa,
                      uint32_t kwb) {
      constexpr bool FOLD = decltype(fold_tag)::value, ALL = decltype(full_tag)::value;
      // (kFac: k0 from the factors; its sign bit is clear on the fast path, the one using it)
      float ck0[2];
      if constexpr (FAC) {
        ck0[0] = fc[0][3];
        ck0[1] = fc[1][3];
      } else {
        ck0[0] = __uint_as_float((kwa & 0xFFu) << 23);
        ck0[1] = __uint_as_float((kwb & 0xFFu) << 23);
      }
      if (!BF16) {
        float sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
          for (int c = 0; c < 2; c++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
              const float x = cd[4 * j + 2 * h + c];
              sum[h] = FOLD ? __fmaf_rn(wf[2 * j + c], __fadd_rn(x, fabsf(x)), sum[h])
                            : __fmaf_rn(s_wo[8 * j + 2 * t4 + c], relu(x), sum[h]);
            }
#pragma unroll
        for (int h = 0; h < 2; h++) {
          sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
          sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
        }
        if (t4 < 2) { // lane 0 of the quad stores slot i0, lane 1 slot i0 + 8
          const int i = LT ? my_i : i0 + 8 * t4;
          float v = t4 ? sum[1] : sum[0];
          if (FOLD) v = __fmul_rn(v, t4 ? ck0[1] : ck0[0]); // the deferred k0: exact
          const int nn = tb + i;
          if (ALL) stg_u32(out_f + nn, __float_as_uint(v));
          else if (nn < ocols)
            stg_u32(out_f + nn, (t4 ? ok1 : ok0) ? __float_as_uint(v) : 0xff800000u);
        }
      } else {
        // SPEC 3's bf16 chain (v2mx::head_chain_bf16): lanes t4 = 0 and 2 hold slots i0 and
        // i0 + 8 (keep = t4 >> 1)
        const int keep = t4 >> 1;
        __nv_bfloat16 res = ixl::v2mx::head_chain_bf16<FOLD>(cd, 0, NJ, wb, s_wo, t4);
        if (FOLD) // the deferred k0: exact (a power of two, in range)
          res = __float2bfloat16_rn(__fmul_rn(__bfloat162float(res), keep ? ck0[1] : ck0[0]));
        if ((t4 & 1) == 0) {
          const int i = LT ? my_i : i0 + 8 * keep;
          const int nn = tb + i;
          const uint16_t v = *reinterpret_cast<const uint16_t *>(&res);
          if (ALL) stg_u16(out_h + nn, v);
          else if (nn < ocols) stg_u16(out_h + nn, (keep ? ok1 : ok0) ? v : (uint16_t)0xFF80u);
        }
      }
    };
    auto finish = [&](int tb, bool ok0, bool ok1, uint32_t kwa, uint32_t kwb, bool qs) {
      if (!qs) reduce(std::true_type{}, std::false_type{}, tb, ok0, ok1, kwa, kwb);
      else reduce(std::false_type{}, std::false_type{}, tb, ok0, ok1, kwa, kwb);
    };
    const uint32_t mfull = (1u << npc) - 1u; // every piece of a tile
    // the tile whose wgmma is in flight (PIPE): its scale words; flags: 1, 2 its slots i0,
    // i0 + 8 valid, 4 slow path, 8 there is one
    uint32_t p_fl = 0, p_kwa = 0, p_kwb = 0;
    for (;; k += kNWG, s += kNWG) {
      const bool cur = k < seg_hi;
      if (!PIPE && !cur) break;
      if (s >= S) {
        s -= S;
        kq ^= 1u;
      }
      if (PIPE) {
        // No branch around the wgmma and its wait (ptxas serializes every wgmma, C7518, when
        // one is in flight across a divergent path): each pass waits for the last pass's
        // tile and combines it (before its own stage's reads: fewer live registers), issues
        // its own tile (zero codes when it has none, or past the segment's end: a dummy whose
        // sums are never read), then reduces the last one under it.
        wgmma_wait<0>();
#pragma unroll
        for (int g = 0; g < 4; g++) fence_operand(acc[g]);
#pragma unroll
        for (int g = 0; g < 4; g++) fence_operand(a[g]);
        if (p_fl & 8u) combine(p_kwa, p_kwb, (p_fl & 4u) != 0, false); // acc, a free after
      }
      const int tb = (t0 + k) * kTile; // the tile's first column
      const uint32_t st = raw_u32 + (uint32_t)s * (uint32_t)STB;
      if constexpr (LDSM) { // (the RS path of p, leaner: see kLdsm)
        wait_u32(b_full + 8u * (uint32_t)s, kq); // the codes (and mask) landed
        const uint32_t m = s_meta[s];
        if (__builtin_expect(m == 0, 0)) { // no key loaded: -inf
          arrive_u32(b_empty + 8u * (uint32_t)s);
          if (wt < kTile && tb + wt < ocols) {
            if (BF16) stg_u16(out_h + tb + wt, 0xFF80u);
            else stg_u32(out_f + tb + wt, 0xff800000u);
          }
          continue;
        }
        uint32_t r[8], kw[2];
        ldsm_x4(st + ld_a, r[0], r[1], r[2], r[3]);
        ldsm_x4(st + ld_b, r[4], r[5], r[6], r[7]);
        const uint32_t sa = sc_u32 + ((uint32_t)s << 8);
        kw[0] = lds_u32(sa);
        kw[1] = lds_u32(sa + 32u);
        arrive_u32(b_empty + 8u * (uint32_t)s); // every read of the stage is above
#pragma unroll
        for (int g = 0; g < 4; g++) {
          ixl_sm90_e2m1x8_widen(r[2 * g], &a[g][0], &a[g][2]);
          ixl_sm90_e2m1x8_widen(r[2 * g + 1], &a[g][1], &a[g][3]);
        }
        wgmma_fence();
#pragma unroll
        for (int g = 0; g < 2; g++) wgmma_e4m3_rs<NC>(acc[g], a[g], dbg(g), 0);
        wgmma_commit();
#pragma unroll
        for (int g = 2; g < 4; g++) wgmma_e4m3_rs<NC>(acc[g], a[g], dbg(g), 0);
        wgmma_commit();
        // under the wgmma: the stored slot's validity and scale word, the fast-path test and
        // factors
        const bool okm = ((m >> my_sh) & 1u) && tb + my_i < row_hi;
        const uint32_t kwm = my_h ? kw[1] : kw[0];
        const bool qs = (quad_slow | !ixl_v2mx_comb_word(kw[0]) | !ixl_v2mx_comb_word(kw[1])) != 0;
        comb_r123(kw[0], fc[0][0], fc[0][1], fc[0][2]);
        comb_r123(kw[1], fc[1][0], fc[1][1], fc[1][2]);
        wgmma_wait<1>();
        fence_operand(acc[0]);
        fence_operand(acc[1]);
        if (!qs) {
#pragma unroll
          for (int e = 0; e < NC / 2; e++)
            acc[0][e] = __fmaf_rn(acc[1][e], fc[(e >> 1) & 1][0], acc[0][e]);
        }
        fence_operand(acc[0]);
        wgmma_wait<0>();
#pragma unroll
        for (int g = 0; g < 4; g++) fence_operand(acc[g]);
#pragma unroll
        for (int g = 0; g < 4; g++) fence_operand(a[g]);
        combine(kw[0], kw[1], qs, true);
        finish(tb, okm, okm, kwm, kwm, qs); // (the lane's own slot: both the same)
        continue;
      }
      uint32_t m = 0, r[8], kw[2] = {0u, 0u}, fslow = 0; // (fslow: kFac's slot test)
      if (!cur) {
#pragma unroll
        for (int g = 0; g < 8; g++) r[g] = 0u; // (PIPE's dummy; else this pass breaks above)
      } else {
        if constexpr (LEAN) wait_u32(b_full + 8u * (uint32_t)s, kq);
        else if (DIAG != 3 || k < S) mbar_wait(&s_full[s], kq); // the codes (and mask) landed
        m = s_meta[s];
        if (m) {
          // slot i0's group g word is at st + (a_off ^ 16 g) (ixl_v2mx_raw_off: group g at
          // 16 (g ^ sw); a_off holds 16 sw in bits 4-5), slot i0 + 8's 512 B further
          if constexpr (!WIDE) {
#pragma unroll
            for (int g = 0; g < 4; g++) {
              const uint32_t ad = RAW1 ? st + a_off + 16u * g : st + (a_off ^ (16u * g));
              r[2 * g] = lds_u32(ad);
              r[2 * g + 1] = lds_u32(ad + 512u);
            }
          }
          const uint32_t sa = BOX1 ? st + sc_u32 : sc_u32 + ((uint32_t)s << 8);
          if constexpr (FAC) { // the factors; the scale words only for the slow path
            const float4 fa = lds_f4(fac_u32 + ((uint32_t)s << 10)),
                         fb = lds_f4(fac_u32 + ((uint32_t)s << 10) + 128u);
            fc[0][0] = fa.x, fc[0][1] = fa.y, fc[0][2] = fa.z, fc[0][3] = fa.w;
            fc[1][0] = fb.x, fc[1][1] = fb.y, fc[1][2] = fb.z, fc[1][3] = fb.w;
            fslow = (__float_as_uint(fa.w) | __float_as_uint(fb.w)) >> 31;
            if (quad_slow || fslow) {
              kw[0] = lds_u32(sa);
              kw[1] = lds_u32(sa + 32u);
            }
          } else {
            kw[0] = lds_u32(sa);
            kw[1] = lds_u32(BOX1 && !RAW1 ? sa ^ 32u : sa + 32u); // (BOX1: st is 512-aligned)
          }
        } else if (PIPE) { // the dummy wgmma's codes (its sums are never read)
#pragma unroll
          for (int g = 0; g < 8; g++) r[g] = 0u;
        }
        // release: every read of the stage is above
        // (WIDE: a tile with keys after its wgmma, below: they read the stage)
        if (DIAG == 3) {
        } else if (ARR4) {
          __syncwarp();
          if (lane == 0) (void)ptx::mbarrier_arrive(&s_empty[s]);
        } else if (LEAN) {
          if (!WIDE || m == 0) arrive_u32(b_empty + 8u * (uint32_t)s);
        } else if (!WIDE || m == 0) {
          (void)ptx::mbarrier_arrive(&s_empty[s]);
        }
        if constexpr (TRIM) {
          if (__builtin_expect(m == 0, 0)) { // no key loaded: -inf
            if (wt < kTile && tb + wt < ocols) {
              if (BF16) stg_u16(out_h + tb + wt, 0xFF80u);
              else stg_u32(out_f + tb + wt, 0xff800000u);
            }
            continue;
          }
        } else if (m == 0 && wt < kTile && tb + wt < ocols) { // no key loaded: -inf
          if (BF16) stg_u16(out_h + tb + wt, 0xFF80u);
          else stg_u32(out_f + tb + wt, 0xff800000u);
        }
      }
      // copies only: keep the words live, nothing else (p.R >= 0 always: the tile math stays
      // in the SASS, which sass_check asks of every v2 kernel, but never runs)
      if (DIAG == 2 && p.R >= 0) {
        if (!cur) break;
        uint32_t x = kw[0] ^ kw[1];
#pragma unroll
        for (int g = 0; g < 8; g++) x ^= r[g];
        if (m && x == 0x9E3779B9u && wt == 0) stg_u32(out_f + tb, x);
        continue;
      }
      // (kTrim: only the lane's stored slot)
      const bool okm = TRIM && ((m >> my_sh) & 1u) && tb + my_i < row_hi;
      const bool ok0 = TRIM ? okm : ((m >> sh0) & 1u) && tb + i0 < row_hi,
                 ok1 = TRIM ? okm : ((m >> sh1) & 1u) && tb + i0 + 8 < row_hi;
      // the slots' key exponents: the fast path needs every byte in the window (quad-uniform)
      const bool qs0 = FAC ? quad_slow || fslow != 0
                           : quad_slow || !ixl_v2mx_comb_word(kw[0]) || !ixl_v2mx_comb_word(kw[1]);
      // the math alone: the fast path only, so the slow path (its registers spilled there)
      // compiles out; the test itself stays (a store keeps it)
      if (DIAG == 3 && qs0 && wt == 0) stg_u32(out_f + tb, 0u);
      const bool qs = DIAG == 3 ? false : qs0;
      if (PIPE) {
#pragma unroll
        for (int g = 0; g < 4; g++) {
          ixl_sm90_e2m1x8_widen(r[2 * g], &a[g][0], &a[g][2]);
          ixl_sm90_e2m1x8_widen(r[2 * g + 1], &a[g][1], &a[g][3]);
        }
        wgmma_fence();
#pragma unroll
        for (int g = 0; g < 4; g++) wgmma_e4m3_rs<NC>(acc[g], a[g], dbg(g), 0);
        wgmma_commit();
        if (p_fl & 8u) // under the new wgmma; the last pass's tile began kNWG tiles earlier
          finish(tb - kNWG * kTile, p_fl & 1u, (p_fl & 2u) != 0, p_kwa, p_kwb, (p_fl & 4u) != 0);
        p_fl = (uint32_t)ok0 | (uint32_t)ok1 << 1 | (uint32_t)qs << 2 | (uint32_t)(cur && m) << 3;
        p_kwa = kw[0];
        p_kwb = kw[1];
        if (!cur) break;
        continue;
      }
      if (m == 0) continue;
      // WIDE: the stage's widened tile (A by descriptor)
      const uint32_t da_lo = wa_lo + (uint32_t)s * (uint32_t)(LW::stage >> 4);
      auto dag = [&](int g) {
        return (uint64_t)db_hi << 32 | (uint64_t)(da_lo + 2u * (uint32_t)g);
      };
      if constexpr (!WIDE) {
#pragma unroll
        for (int g = 0; g < 4; g++) {
          ixl_sm90_e2m1x8_widen(r[2 * g], &a[g][0], &a[g][2]);
          ixl_sm90_e2m1x8_widen(r[2 * g + 1], &a[g][1], &a[g][3]);
        }
      }
      wgmma_fence();
      // groups 0 and 1, then 2 and 3: the first pair's combine overlaps the second's wgmma
#pragma unroll
      for (int g = 0; g < 2; g++) {
        if constexpr (WIDE) wgmma_e4m3_ss<NC>(acc[g], dag(g), dbg(g), 0);
        else wgmma_e4m3_rs<NC>(acc[g], a[g], dbg(g), 0);
      }
      wgmma_commit();
#pragma unroll
      for (int g = 2; g < 4; g++) {
        if constexpr (WIDE) wgmma_e4m3_ss<NC>(acc[g], dag(g), dbg(g), 0);
        else wgmma_e4m3_rs<NC>(acc[g], a[g], dbg(g), 0);
      }
      wgmma_commit();
      wgmma_wait<1>();
      fence_operand(acc[0]);
      fence_operand(acc[1]);
      if (!qs) {
        float r1[2];
        if constexpr (FAC) {
          r1[0] = fc[0][0];
          r1[1] = fc[1][0];
        } else {
          r1[0] = __uint_as_float(((kw[0] >> 8 & 0xFFu) + 127u - (kw[0] & 0xFFu)) << 23);
          r1[1] = __uint_as_float(((kw[1] >> 8 & 0xFFu) + 127u - (kw[1] & 0xFFu)) << 23);
        }
#pragma unroll
        for (int e = 0; e < NC / 2; e++)
          acc[0][e] = __fmaf_rn(acc[1][e], r1[(e >> 1) & 1], acc[0][e]);
      }
      fence_operand(acc[0]);
      wgmma_wait<0>();
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(acc[g]);
      if constexpr (!WIDE) {
#pragma unroll
        for (int g = 0; g < 4; g++) fence_operand(a[g]);
      } else {
        if constexpr (LEAN) arrive_u32(b_empty + 8u * (uint32_t)s); // the wgmma read the stage
        else (void)ptx::mbarrier_arrive(&s_empty[s]);
      }
      combine(kw[0], kw[1], qs, true);
      if (FULL && !qs && m == mfull && tb + kTile <= row_hi && tb + kTile <= ocols)
        reduce(std::true_type{}, std::true_type{}, tb, true, true, kw[0], kw[1]);
      else
        finish(tb, ok0, ok1, kw[0], kw[1], qs);
    }
    if (PIPE) { // the last pass's dummy
      wgmma_wait<0>();
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(acc[g]);
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(a[g]);
    }
  }
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// ------------------------------------------------------------------ host
int log2_exact(int64_t v) {
  if (v <= 0 || (v & (v - 1))) return -1;
  int l = 0;
  while ((1LL << l) < v) l++;
  return l;
}

// IXL_LOGITS_V2_MX_K2WS, read once a process: one character (0, unset-but-empty or anything
// else: off, mx_kernel; unset: kK2wsDefault for fp32 calls, kK2wsDefaultBf16 for bf16 ones):
//   1 V = 0 (session 6's kernel: one producer warp, 128 arrivals a stage, no pipelining);
//   p kProd4 (4 producer warps); q kProd4 | kFull; b kProd4 | kBox1 (page size 64, else p);
//   R kProd4 | kBox1 | kRaw1 (page size 64, else p); 4 kPipe | kProd4 | kArr4; 5 kProd4 | kArr4;
//   w kProd4 | kWide (the producers widen, SS wgmma; session 8: correct, producer-bound);
//   x kProd4 | kWide | kLean (w with laundered barrier addresses and lane indices);
//   y kProd4 | kWide | kLean | kFac (x with the key factors decoded by the producers);
//   z x + kIlp, Y y + kIlp (the producer's loads of a tile before its stores; not yet run);
//   l kProd4 | kLean (p with lean barriers), n l + kLdsm (ldmatrix code loads, the factors by
//   bytes, the keyless tiles' own branch), s n + kSleep (the producer sleeps between polls);
//   S Y + kSleep, I Y + kIlp2 (both slots' loads first), J I + kSleep, X Y + kSplit (each tile
//   widened by the 4 producer warps together), Z X + kTrim, W Z + kSleep (session 9 visit 2,
//   64x128K fp32 us: n 246, s 245 (the default), S 284 = Y, I 298, X 545, Z 517; l, J, W not
//   run);
//   bench-only diagnostics (DIAG above, fp32 calls; garbage logits; bf16 calls run p): M math
//   only of p, m the math alone of p, C copies only of p, c copies only of b, r copies only of
//   R, 7 copies only with one producer warp and 4 arrivals.
// (H200 visit 1 of session 7: 2, 3, 6, 8, 9 measured and dropped; see bench_mxk2.md.)
// H200 session 8 (visits 1-3, medians of 20, same runs): p vs q at 64x128K fp32 299.3 / 299.8
// / 301.2 us vs 307.1 / 308.2 / 309.6, 16x128K 85.6 / 86.0 / 86.4 vs 88.1 / 88.5 / 88.8; bf16
// 64x128K 311.3 / 311.2 / 313.3 vs 309.9 / 310.6 / 311.6 (q ahead by 0.2-0.5 %). Visit 3: p
// test_cuda_logits_mxk2 14/14, racecheck and memcheck small clean, the v2 paged tests 6/6.
// So fp32 calls took p, bf16 calls q (session 7 visit 2's default). Session 9 visit 1: Y
// faster than both in every case (64x128K fp32 284.1 vs p 299.2, bf16 295.1 vs q 309.7),
// exact (test_cuda_logits_mxk2 14/14), racecheck and memcheck small clean: Y for both. Session
// 9 visit 2: s (and n) faster than Y in every case (64x128K fp32 245.6 / 245.2 vs 284.8 /
// 284.3, bf16 244.8 vs 295.4 / 296.4, 16x128K 72.5 / 72.2 vs 80.3), exact (14/14), racecheck
// and memcheck small clean; the lead's step with K2WS=s exact: s for both (not yet run unset).
constexpr char kK2wsDefault = 's', kK2wsDefaultBf16 = 's';
int k2ws_mode(bool bf16) {
  static const int v = [] {
    const char *e = getenv("IXL_LOGITS_V2_MX_K2WS");
    if (!e) return (int)'D'; // the defaults
    static const char known[] = "1pqbR45MmCcr7wxyzYlnsSIJXZW";
    for (const char *k = known; *k; k++)
      if (e[0] == *k && e[1] == 0) return (int)*k;
    return 0;
  }();
  return v == 'D' ? (int)(bf16 ? kK2wsDefaultBf16 : kK2wsDefault) : v;
}

// The codes' tensor map (the pages as rows of 64 B, box 64 B x box rows: Pt, or 68 for BOX1's
// whole page; SWIZZLE_64B), kept for the last buffer and box this thread saw (a step calls with
// the same pool each time; the map embeds only the pointer and the extents).
bool k2_map(CUtensorMap *map, const uint8_t *pages, uint64_t rows, int box) {
  thread_local struct {
    const void *base;
    uint64_t rows;
    int box;
    CUtensorMap map;
  } cache = {nullptr, 0, 0, {}};
  if (cache.base != pages || cache.rows != rows || cache.box != box) {
    cache.base = nullptr;
    if (tma_map_2d(&cache.map, pages, CU_TENSOR_MAP_DATA_TYPE_UINT8, 64, rows, 64, 64,
                   (uint32_t)box, CU_TENSOR_MAP_SWIZZLE_64B, nullptr, 0) != 0)
      return false;
    cache.base = pages;
    cache.rows = rows;
    cache.box = box;
  }
  *map = cache.map;
  return true;
}

// Launches the kernel (ixl::launch_pdl: programmatic dependent launch when IXL_PDL is on);
// returns 0 (nothing launched, the caller's kernels run the call) when the device cannot hold
// one CTA of it (checked once a process per configuration).
template <bool BF16, int V, int DIAG = 0>
int launch_k2(ixl_ctx *ctx, const CUtensorMap &map, K2Params p, const char *name,
              ixl_status *st) {
  auto kern = mxk2_kernel<BF16, V, DIAG>;
  constexpr int alloc =
      (V & kWide) ? K2SmemW<(V & kFac) != 0>::alloc : K2Smem<(V & kBox1) != 0>::alloc;
  static int fits = -1; // one check and one stderr line per configuration a process
  if (fits < 0) {
    int occ = 0;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, alloc);
    if (e == cudaSuccess)
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, kThreads, alloc);
    if (e != cudaSuccess) {
      *st = ixl_cuda_status(ctx, e, "cudaFuncSetAttribute (logits v2 K2WS)");
      return 1;
    }
    fits = occ >= 1;
    fprintf(stderr,
            "ixl logits v2 mxfp4: K2WS kernel, paged K2, H 32, %d math warpgroups%s + %d "
            "producer warp%s, %d stages, %s, %d arrivals a stage%s%s (switch %c)%s\n",
            kNWG, (V & kPipe) ? " pipelined" : "", (V & kProd4) ? 4 : 1,
            (V & kProd4) ? "s" : "", (V & kWide) ? kWideS : kStages, BF16 ? "bf16" : "fp32",
            (V & kArr4) ? 4 : 128,
            (V & kRaw1)   ? ", one bulk copy a page"
            : (V & kBox1) ? ", one TMA box a page"
            : (V & kFull) ? ", full tiles' own reduction"
            : (V & kFac)  ? ((V & kIlp) ? ", codes widened and key factors decoded by the "
                                          "producers (SS A), lean barriers, loads first"
                                        : ", codes widened and key factors decoded by the "
                                          "producers (SS A, 6 raw stages a warp), lean barriers")
            : (V & kIlp)  ? ", codes widened by the producers into SS A, lean barriers, loads first"
            : (V & kWide) ? ((V & kLean) ? ", codes widened by the producers into SS A (6 raw "
                                           "stages a warp), lean barriers"
                                         : ", codes widened by the producers into SS A (6 raw "
                                           "stages a warp)")
            : (V & kLdsm) ? ((V & kSleep) ? ", lean barriers, ldmatrix codes, factors by bytes, "
                                            "the producers sleep"
                                          : ", lean barriers, ldmatrix codes, factors by bytes")
            : (V & kLean) ? ", lean barriers"
                          : "",
            DIAG == 1   ? ", DIAG math only"
            : DIAG == 2 ? ", DIAG copies only"
            : DIAG == 3 ? ", DIAG the math alone"
                        : "",
            (char)k2ws_mode(BF16),
            fits ? "" : ": does not fit an SM, mx_kernel runs it");
  }
  if (!fits) return 0;
  // the grid: one CTA an SM, or fewer when the test knob IXL_LOGITS_V2_MX_K2WS_CTAS=N asks (read
  // at each call: tests/c/test_cuda_logits_mxk2.c makes a few CTAs wrap the ring many times)
  int64_t sms = ixl::sm_count(ctx);
  const char *cap = getenv("IXL_LOGITS_V2_MX_K2WS_CTAS");
  if (cap && atoi(cap) > 0 && atoi(cap) < sms) sms = atoi(cap);
  p.G = p.total < sms ? p.total : sms;
  *st = ixl::launch_pdl(ctx, name, kern, dim3((unsigned)p.G), dim3(kThreads), (size_t)alloc, 1u,
                        map, p);
  return 1;
}

// The kernel of switch `mode` (the letters of k2ws_mode; unknown or not taken here: p); the
// DIAG diagnostics for fp32 calls only (bf16 calls of those letters run p).
template <bool BF16>
int dispatch_k2(ixl_ctx *ctx, int mode, bool box1, const CUtensorMap &map, const K2Params &p,
                const char *name, ixl_status *st) {
  constexpr int kB = kProd4 | kBox1, kR = kProd4 | kBox1 | kRaw1,
                kY = kProd4 | kWide | kLean | kFac | kIlp;
  switch (mode) {
    case '1': return launch_k2<BF16, 0>(ctx, map, p, name, st);
    case '4': return launch_k2<BF16, kPipe | kProd4 | kArr4>(ctx, map, p, name, st);
    case '5': return launch_k2<BF16, kProd4 | kArr4>(ctx, map, p, name, st);
    case 'q': return launch_k2<BF16, kProd4 | kFull>(ctx, map, p, name, st);
    case 'w': return launch_k2<BF16, kProd4 | kWide>(ctx, map, p, name, st);
    case 'x': return launch_k2<BF16, kProd4 | kWide | kLean>(ctx, map, p, name, st);
    case 'y': return launch_k2<BF16, kProd4 | kWide | kLean | kFac>(ctx, map, p, name, st);
    case 'z': return launch_k2<BF16, kProd4 | kWide | kLean | kIlp>(ctx, map, p, name, st);
    case 'Y': return launch_k2<BF16, kY>(ctx, map, p, name, st);
    case 'l': return launch_k2<BF16, kProd4 | kLean>(ctx, map, p, name, st);
    case 'n': return launch_k2<BF16, kProd4 | kLean | kLdsm>(ctx, map, p, name, st);
    case 's': return launch_k2<BF16, kProd4 | kLean | kLdsm | kSleep>(ctx, map, p, name, st);
    case 'S': return launch_k2<BF16, kY | kSleep>(ctx, map, p, name, st);
    case 'I': return launch_k2<BF16, kY | kIlp2>(ctx, map, p, name, st);
    case 'J': return launch_k2<BF16, kY | kIlp2 | kSleep>(ctx, map, p, name, st);
    case 'X': return launch_k2<BF16, kY | kSplit>(ctx, map, p, name, st);
    case 'Z': return launch_k2<BF16, kY | kSplit | kTrim>(ctx, map, p, name, st);
    case 'W': return launch_k2<BF16, kY | kSplit | kTrim | kSleep>(ctx, map, p, name, st);
    case 'b': if (box1) return launch_k2<BF16, kB>(ctx, map, p, name, st); break;
    case 'R': if (box1) return launch_k2<BF16, kR>(ctx, map, p, name, st); break;
    default: break;
  }
  if constexpr (!BF16) {
    switch (mode) {
      case 'M': return launch_k2<false, kProd4, 1>(ctx, map, p, name, st);
      case 'm': return launch_k2<false, kProd4, 3>(ctx, map, p, name, st);
      case 'C': return launch_k2<false, kProd4, 2>(ctx, map, p, name, st);
      case 'c': if (box1) return launch_k2<false, kB, 2>(ctx, map, p, name, st); break;
      case 'r': if (box1) return launch_k2<false, kR, 2>(ctx, map, p, name, st); break;
      case '7': return launch_k2<false, kArr4, 2>(ctx, map, p, name, st);
      default: break;
    }
  }
  return launch_k2<BF16, kProd4>(ctx, map, p, name, st);
}

} // namespace

extern "C" int ixl_cuda_logits_v2_mxk2(ixl_ctx *ctx, const ixl_logits_call *c, ixl_status *st) {
  const bool bf16 = c->reduction == IXL_REDUCE_BF16;
  const int mode = k2ws_mode(bf16);
  if (!mode) return 0;
  const ixl_qk *in = c->in;
  if (c->mode != IXL_LOGITS_DENSE_PAGED || c->H != 32 || c->bs || !in->k_pages || !in->q_scales)
    return 0;
  const int Pt = ixl_v2mxk2_piece(in->page_size);
  const int64_t stride = in->k_pages->shape[1], num_pages = in->k_pages->shape[0];
  if (!Pt || stride % 64 || stride < (int64_t)in->page_size * 68 || num_pages <= 0) return 0;
  const int64_t rows64 = stride / 64;
  if (num_pages > (int64_t)INT32_MAX / rows64) return 0; // TMA row coordinates are int32
  if ((uintptr_t)in->k_pages->data % 16 || (uintptr_t)in->q_codes->data % 16 ||
      (uintptr_t)in->q_scales->data % 4)
    return 0;
  K2Params p = {};
  p.q_codes = (const uint8_t *)in->q_codes->data;
  p.q_scales = (const uint32_t *)in->q_scales->data;
  p.k_pages = (const uint8_t *)in->k_pages->data;
  p.w = c->weights->data;
  p.lens = (const int32_t *)c->ke->data;
  p.bt = (const int32_t *)c->block_table->data;
  p.out = c->out->data;
  p.R = c->R;
  p.stride = stride;
  p.num_pages = num_pages;
  p.bt_cols = c->block_table->shape[1];
  p.out_cols = c->out->shape[1];
  p.P = (int)in->page_size;
  p.Plog = log2_exact(p.P);
  p.ptlog = log2_exact(Pt);
  p.rows64 = rows64;
  if (p.R <= 0 || p.out_cols <= 0) return 0;
  p.ntr = (p.out_cols + kTile - 1) / kTile;
  if (p.R > ((int64_t)1 << 31) / p.ntr) return 0; // tile counters are int32
  p.total = p.R * p.ntr;
  // kBox1 (switches b, R, c, r): pages of 64 only (a page's 68 rows of 64 B, codes then scale
  // words: rows64 >= 68 as the stride holds them)
  const bool box1 = (mode == 'b' || mode == 'R' || mode == 'c' || mode == 'r') && p.P == 64;
  CUtensorMap map;
  if (!k2_map(&map, p.k_pages, (uint64_t)(num_pages * rows64), box1 ? 68 : Pt)) return 0;
  const char *name = "dense_logits_paged kernel (v2 mxfp4 K2WS)";
  return bf16 ? dispatch_k2<true>(ctx, mode, box1, map, p, name, st)
              : dispatch_k2<false>(ctx, mode, box1, map, p, name, st);
}
