// logits/logits_v2_mxk5_sm90.cu - ragged and paged K5 (sparse prefill, decode) for MXFP4 keys
// at H 32 on a warp-specialized kernel (issue 13), behind IXL_LOGITS_V2_MX_K5WS (ragged) and
// IXL_LOGITS_V2_MX_K5PWS (paged), each read once a process (0: logits_v2_mx_sm90.cu's kernels,
// unchanged; the modes and the unset defaults: k5ws_mode / k5pws_mode below). The hook is the
// sparse branch of ixl_cuda_logits_v2_mx, after its own checks (mx_takes, power-of-two sbk).
//
// Why: the kernel before (mx3_kernel<K5R>) is one warpgroup in which every thread gathers its
// part of each tile (about 100 of ~400 SASS instructions a tile and thread: the sparse-block
// lookup, 64-bit address math, cp.async, flags, the vote and barrier), and each quad decodes
// the same scale words 4 times. Here:
// - one producer warp per CTA does the whole gather: per tile, each lane looks up 2 slots'
//   keys (the chunk's sparse-block bases prefetched into shared memory once, as before), loads
//   their scale words (plain loads, one tile ahead, in registers), then issues 8 cp.async of
//   16 B (lane l: slot 8 k + l / 4, group l % 4, ixl_v2mx_raw_off's layout, zero-filled without
//   a key), completion by cp.async.mbarrier.arrive.noinc on the stage's full barrier, and
//   stores each slot's decoded scale (v2_mxk5.cuh: the deferred factor's k0, r1, r2, r3 and
//   the ok / window bits) with an ordinary arrive; full = 32 noinc + 32 plain arrivals;
// - the math warpgroup(s) only wait, read (8 code words, 2 x 16 B factors, 2 x 8 B words),
//   release the stage (empty barrier, 128 arrivals) and then widen, run the 4 RS wgmma
//   m64n32k32 and the combine and SPEC 3's bf16 chain, exactly mx_body's code for K5R / H 32 /
//   bf16 / V3 / COMB (logits_v2_mx_sm90.cu), with the same v2_mx.cuh functions, so the bits
//   are the same: the same exact group sums, the same factors from the same scale words, the
//   same fast / slow tests (the slow path is the CPU's formula), the same chain.
// - -inf where the slot has no key of the row (outside [row_ks, row_ke), past the valid
//   (strictly increasing) prefix of the ids, garbage ids), as before.
//
// sass-limits: mxk5_kernel registers 136 shared 1024
#include "cuda/sm80.cuh"
#include "logits/v2_mx_common.cuh"
#include "logits/v2_mx_ws.h"
#include "logits/v2_mxk5.cuh"

#include <stdio.h>
#include <type_traits>

namespace {

using namespace ixl::sm90;
using namespace ixl::v2mx; // kTile (64 key slots a tile, the wgmma M) and the shared pieces

constexpr int kH = 32;                  // heads (the wgmma N)
constexpr int kStages = 8;              // ring depth of the 3-CTA kernels
constexpr int kMaxChunk = 4096;         // output columns a CTA at most (MC: 8192, 16384 too)
constexpr int kPre = kMaxChunk / 4 + 2; // prefetched sparse-block bases a CTA (sbk >= 4)
// HCH (OPT 16): the wgmma's N columns in a head order such that lane t4 of a quad holds one
// whole SPEC 3 chain: column n = 8 j + 2 t + e (the accumulator's register 4 j + e of lane
// t4 = t, ixl_sm90_acc_rc) is head t + 4 (2 j + e), so chain s_t (heads t, t + 4, .., t + 28,
// h % 4 = t) is that lane's registers in step order k = 2 j + e, for both of its slots (rows
// i0, i0 + 8: one bf16x2 fma a step, no exchange). Every per-column array (query tile, fold,
// weights, fast flags) is stored by column, so only the chain knows the order.
__host__ __device__ constexpr int hcol_head(int n) {
  return ((n >> 1) & 3) + 8 * (n >> 3) + 4 * (n & 1);
}
// the column of lane t's chain step k (head t + 4 k); of head h
__host__ __device__ constexpr int hch_col(int t, int k) { return 8 * (k >> 1) + 2 * t + (k & 1); }
__host__ __device__ constexpr int head_col(int h) { return hch_col(h & 3, h >> 2); }
static_assert(hcol_head(hch_col(3, 7)) == 31 && hcol_head(hch_col(1, 2)) == 9 &&
                  head_col(hcol_head(13)) == 13 && hcol_head(head_col(22)) == 22,
              "HCH map");

// one math warpgroup, then PW producer warps
template <int PW>
constexpr int kThreads = 128 + 32 * PW;

// Dynamic shared memory (1024-aligned base): q tile | raw stages | factors | scale words +
// info | per column | block bases (kPreN of them: MC / 4 + 2).
template <int kStages, int kPreN = kPre>
struct WsSmem {
  static constexpr int q = 0;
  static constexpr int raw = q + kH * 128;
  static constexpr int fac = raw + kStages * kTile * 64;  // float4 per slot
  // uint2 (scale word, info) per slot, 16 B apart (the factors' strides: one base address)
  static constexpr int kin = fac + kStages * kTile * 16;
  static constexpr int hq = kin + kStages * kTile * 16;   // u32 qeff per column
  static constexpr int ht = hq + kH * 4;                  // u32 packed t_g + 8 per column
  static constexpr int hc = ht + kH * 4;                  // f32 2^(qc - 127) per column
  static constexpr int wo = hc + kH * 4;                  // f32 the column's weight
  static constexpr int wq = wo + kH * 4;                  // f32 the fast path's weight
  static constexpr int hf = wq + kH * 4;                  // u8 fast per column
  static constexpr int wb = (hf + kH + 15) & ~15;         // bf16x2 [2][8] fast weight pairs
  static constexpr int pre = wb + 64;                     // int32 block bases
  static constexpr int total = pre + kPreN * 4;
  static constexpr int alloc = total + 1024;
  // paged: + int32 page and slot of each block's first position
  static constexpr int pg = total, sl = pg + kPreN * 4, total_paged = sl + kPreN * 4;
  static constexpr int alloc_paged = total_paged + 1024;
};

struct WsParams {
  const uint8_t *q_codes;   // [R, 32, 64]
  const uint32_t *q_scales; // [R, 32]
  const uint8_t *k_codes;   // ragged [N, 64]
  const uint32_t *k_scales; // ragged [N]
  const uint8_t *k_pages;   // paged [num_pages, stride]: P slots of 64 B, then P scale words
  const int32_t *bt;        // paged [R, bt_cols]
  const uint16_t *w;        // [R, 32] bf16
  const int32_t *ks, *ke;   // [R] row_ks / row_ke
  const int32_t *ids;       // [R, nsb]
  uint16_t *out;            // [R, out_cols] bf16
  int64_t R, N, nsb, out_cols, chunk, nchunks, num_pages, stride, bt_cols;
  int sbk, sbklog, aligned, P, Plog;
};

#if IXL_SM90_DEVICE
// ldmatrix.sync.aligned.m8n8.x4.shared.b16 (PTX ISA): four 8 x 16 B matrices, rows addressed
// by lanes 8 m .. 8 m + 7 for matrix m; thread l gets bytes 4 (l % 4) .. + 3 of row l / 4 of
// each, i.e. exactly an RS A fragment's raw word (word l % 4 of slot l / 4's group chunk).
// Volatile with a memory clobber: never moved above the stage's full-barrier wait.
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                        uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

// 32-bit shared-window forms of the math warps' per-tile waits, arrives and loads (LDSM
// kernels), on addresses computed once. Volatile with memory clobbers: never moved across the
// barrier operations.
// HINT: mbarrier.try_wait's suspendTimeHint (PTX ISA "mbarrier.test_wait / try_wait"): the
// thread may be suspended until the phase completes or that many ns pass, instead of the
// system-dependent limit. Session 7's visit 2 (ncu, mode 3) counted ~10.6 polls of the full
// barrier a tile and math warp (8 instructions each: 21 % of all issued instructions), taken
// from the producer warp that shares their scheduler; with a long hint a waiting warp sleeps.
template <bool HINT>
__device__ __forceinline__ bool try_wait32(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  if (HINT)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
                 "selp.b32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok)
                 : "r"(bar), "r"(parity), "r"(10000000u) // 10 ms
                 : "memory");
  else
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.b32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok)
                 : "r"(bar), "r"(parity)
                 : "memory");
  return ok != 0;
}
// mbar_wait's bounded wait (sm90.cuh) on a 32-bit address
template <bool HINT = false>
__device__ __forceinline__ void wait32(uint32_t bar, uint32_t parity) {
  if (try_wait32<HINT>(bar, parity)) return;
  const long long t0 = clock64();
  while (!try_wait32<HINT>(bar, parity))
    if (clock64() - t0 > 60000000000LL) __trap();
}
__device__ __forceinline__ void arrive32(uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
template <int OFF>
__device__ __forceinline__ uint2 lds64(uint32_t a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2+%3];\n"
               : "=r"(v.x), "=r"(v.y)
               : "r"(a), "n"(OFF)
               : "memory");
  return v;
}
__device__ __forceinline__ int lds32(uint32_t a) {
  int v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(a) : "memory");
  return v;
}
template <int OFF>
__device__ __forceinline__ float4 lds128(uint32_t a) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4+%5];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(a), "n"(OFF)
               : "memory");
  return v;
}

// The producer's stores, on 32-bit shared addresses.
__device__ __forceinline__ void sts128(uint32_t a, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
template <int OFF>
__device__ __forceinline__ void sts64(uint32_t a, uint2 v) {
  asm volatile("st.shared.v2.u32 [%0+%1], {%2, %3};\n" ::"r"(a), "n"(OFF), "r"(v.x), "r"(v.y)
               : "memory");
}
// cp.async.cg 16 B (sm80.cuh's cp_async16) to a 32-bit shared address: src_bytes of src, the
// rest zero-filled.
__device__ __forceinline__ void cp_async16_s(uint32_t dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
// cp.async.mbarrier.arrive.noinc (PTX ISA, sm_80+): an arrive-on the barrier at `bar` once every
// cp.async this thread issued before it has completed; the barrier's count includes it (noinc).
__device__ __forceinline__ void cp_async_arrive_noinc32(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// wgmma.mma_async m64n16k32 .f32.e4m3.e4m3, A in registers (PTX ISA "wgmma.mma_async"; the
// form of sm90.cuh's wgmma_m64n32k32_e4m3_rs at N 16, which sm90.cuh does not have): D[64][16]
// = A[64][32] * B[16][32]^T, scale-d 0 (D not read).
__device__ __forceinline__ void wgmma_m64n16k32_e4m3_rs(float (&d)[8], const uint32_t (&a)[4],
                                                        uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
               "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(0));
}
// The same at N 8 (4 passes of 8 heads): D[64][8].
__device__ __forceinline__ void wgmma_m64n8k32_e4m3_rs(float (&d)[4], const uint32_t (&a)[4],
                                                       uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(0));
}
template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (N == 8) wgmma_m64n8k32_e4m3_rs(d, a, db);
  else if constexpr (N == 16) wgmma_m64n16k32_e4m3_rs(d, a, db);
  else wgmma_e4m3_rs<N>(d, a, db, 0);
}
#endif

// One math warpgroup and one producer warp a CTA. The math warps read a tile's code words by 2
// ldmatrix.x4 (8 matrices: 4 groups x the two 8-slot halves of the warp's 16 slots), and wait /
// load / arrive on 32-bit addresses computed once and kept in registers (ptxas otherwise
// recomputes ~30 instructions of them a tile).
// PAGED: paged K5 (K2's page pool; logits_v2_mx_sm90.cu's K5P addressing: the block's first
// page and slot prefetched with its base, a block across a page boundary looked up per slot).
// NP: the heads in NP passes of 32 / NP (1: 4 m64n32k32 a tile, 64 accumulators; 2: twice 4
// m64n16k32 on the same A registers, heads 0-15 then 16-31, 32 accumulators, so that the
// kernel fits MAXREG 96 and 4 CTAs an SM; 4: 4 m64n8k32 a pass, 16 accumulators, 80 registers,
// 5 CTAs). The group sums are exact either way and each head's combine and SPEC 3's bf16 chain
// run in the same order (the chain's steps j = 0, 1 in the first pass, 2, 3 in the second, or
// step j in pass j; one chain register carried), so the bits are the same.
// MAXREG: 136 (125 used ragged, 136 paged) -> 3 CTAs an SM ragged, 2 paged (above 128 a
// scheduler's 16K registers hold only 3 warps); 128 (NP 2: 109 used) -> 3; 96 (ragged NP 2) ->
// 4 with STAGES <= 6 (4 CTAs' shared memory).
// ABL (timing ablations only, wrong results, never a default), bits: 1 = one wgmma a tile
// instead of 4 (groups 1-3's accumulators keep whatever they hold), 2 = no key copies (the
// producer arrives without copying; the math reads stale stages), 4 = no scale decode in the
// producer (constant factors, every slot fast), 8 = the math warps only wait and release each
// stage (the producer side alone), 16 = no widening (the raw words as A), 32 = no combine on
// the fast path (the accumulators of group 0 as the dots). OPT bits: 1 (DEC) the math warps
// decode their slots' scale words (the producer stores the words only; the same functions, the
// same bits); 2 (HINT) the ring's waits suspend (try_wait32's hint) instead of polling; 4 (PRE)
// the set-up's global loads batched (the query words and 16 contiguous ids a thread issued
// before the column fold, the block bases' ids and page entries 4 a thread at once; the same
// values, the same bits);
// 8 (NOX) int32 chunk columns, no page-crossing path (the hook takes only page sizes that sbk
// divides: SPEC 4's builder rule), the slow-head mask re-read in the slow branch (session 7's
// reverted 1141f1e, here behind its bit): so that paged 2 passes fit 96 registers, 4 CTAs.
// 16 (HCH) the columns in hcol_head's head order, the chain per lane without exchange (PRE, NP
// 1 or 2); 32 (BTP, paged) the block table's row prefetched into L2 at entry; 64 (FDEC) the
// producer's decode without the fast-window bit (the slow branch tests the scale words).
// PW: producer warps (tile t from warp t % PW). PIPE (NP 2): the two passes software-pipelined
// across tiles (pass 1 of tile t under pass 0's epilogue, pass 0 of t + 1 under pass 1's).
// (A chain-free ablation made ptxas serialize the wgmma, C7518, and spill: not offered.)
template <bool PAGED, int NP, int STAGES, int MAXREG, int ABL = 0, int OPT = 0, int PW = 1,
          bool PIPE = false, int MC = kMaxChunk>
__global__ void __launch_bounds__(kThreads<PW>) __maxnreg__(MAXREG)
    mxk5_kernel(const WsParams p) {
#if IXL_SM90_DEVICE
  constexpr int NT = kThreads<PW>;
  constexpr bool DEC = (OPT & 1) != 0, HINT = (OPT & 2) != 0, PRE = (OPT & 4) != 0;
  constexpr bool NOX = (OPT & 8) != 0;
  // HCH (OPT 16): the wgmma's columns permuted so that each lane holds one whole SPEC 3 chain
  // (hcol_head) and the bf16 chain runs without the exchange; needs PRE's query tile
  constexpr bool HCH = (OPT & 16) != 0;
  static_assert(!HCH || (PRE && (NP == 1 || NP == 2) && !PIPE), "HCH: PRE, 1 or 2 passes");
  // BTP (OPT 32, paged): the row's block-table entries prefetched into L2 at entry, beside the
  // ids, so that the set-up's page lookups (after the ids' scan) hit L2 instead of HBM
  constexpr bool BTP = PAGED && (OPT & 32) != 0;
  // FDEC (OPT 64): the producer's decode without the fast-window bit (the COMB window lies
  // inside it, so only slots on the slow branch need it: the slow branch tests the scale words
  // itself, with the same ixl_v2mx_fast_word)
  constexpr bool FDEC = (OPT & 64) != 0;
  // 4 producer warps (a warpgroup): setmaxnreg moves registers from them to the math warps
  // (entry MAXREG each; the producers kProdRegs; the math the rest of the CTA's pool)
  constexpr bool SETMAX = PW == 4;
  // (1 pass or PIPE need 128 for the math, but the producers spill at 32 / the PIPE math with
  // setmaxnreg spills: 2 passes only, the math at 120)
  constexpr int kProdRegs = 40;
  constexpr int kMathRegs = (MAXREG * NT - kProdRegs * 32 * PW) / 128 / 8 * 8;
  static_assert(!SETMAX || kMathRegs <= 256, "setmaxnreg: at most 256");
  constexpr int S = STAGES;
  using L = WsSmem<S, MC / 4 + 2>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  uint8_t *s_q = smem + L::q, *s_raw = smem + L::raw, *s_hf = smem + L::hf;
  float4 *s_fac = reinterpret_cast<float4 *>(smem + L::fac);
  // the (scale word, info) pairs: 16 B a slot at a fixed distance from the factors
  constexpr int kKinOff = L::kin - L::fac;
  uint32_t *s_hq = reinterpret_cast<uint32_t *>(smem + L::hq);
  uint32_t *s_ht = reinterpret_cast<uint32_t *>(smem + L::ht);
  float *s_hc = reinterpret_cast<float *>(smem + L::hc);
  float *s_wo = reinterpret_cast<float *>(smem + L::wo);
  float *s_wq = reinterpret_cast<float *>(smem + L::wq);
  int32_t *pre_base = reinterpret_cast<int32_t *>(smem + L::pre);
  int32_t *pre_pg = reinterpret_cast<int32_t *>(smem + L::pg); // PAGED
  int32_t *pre_sl = reinterpret_cast<int32_t *>(smem + L::sl);
  __nv_bfloat162 *s_wb = reinterpret_cast<__nv_bfloat162 *>(smem + L::wb);
  __shared__ uint64_t s_bar[2 * S]; // full[S] then empty[S]
  uint64_t *s_full = s_bar, *s_empty = s_bar + S;
  __shared__ int s_nvalid;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, t4 = lane & 3;
  // PDL (cuda/launch.cuh): before the first global access; the trigger anywhere (a dependent
  // waits for this grid's completion)
  ixl::pdl_wait();
  ixl::pdl_trigger();
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < S; s++) {
      ptx::mbarrier_init(&s_full[s], 64);   // 32 cp.async noinc + 32 plain (the producer)
      ptx::mbarrier_init(&s_empty[s], 128); // the stage's math warpgroup
    }
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
    s_nvalid = (int)mn64(p.nsb, 0x7fffffff);
  }
  const int64_t b = blockIdx.x;
  const int64_t row = b / p.nchunks, ch = b % p.nchunks;
  // the chunk's output columns [c0, chunk_hi) (NOX: int32, the hook keeps out_cols below 2^30)
  using CI = typename std::conditional<NOX, int, int64_t>::type;
  const CI c0 = (CI)(ch * p.chunk), chunk_hi = (CI)mn64(c0 + p.chunk, p.out_cols);
  // the row's keys: ragged [row_ks, row_ke) of K; paged [0, context_len) of its pages
  const int64_t row_lo = PAGED ? 0 : clamp64(p.ks[row], 0, p.N);
  const int64_t row_hi = PAGED ? clamp64(p.ke[row], 0, p.bt_cols * (int64_t)p.P)
                               : clamp64(p.ke[row], row_lo, p.N);
  const int64_t koff = PAGED || p.aligned ? 0 : row_lo & (p.sbk - 1);

  // PRE: the row's ids up to this chunk's end (the valid prefix's scan)
  const int32_t *ids_r = p.ids + row * p.nsb;
  const int64_t jmax_r = mn64(p.nsb, (chunk_hi + p.sbk - 1) >> p.sbklog);
  // PRE: the set-up's global loads in flight together (visit 2's SASS of session 7: the query
  // tile's loop one LDG an iteration, 7 serial round trips; the ids scan 4 rounds; paged block
  // bases 4 x (ids, then the page table): ~11 (ragged) / ~19 (paged) serial round trips a CTA
  // before its first tile): the query words and the first kIdU ids a thread loaded before the
  // column fold, consumed after it
  constexpr int kQW = (kH * 32 + NT - 1) / NT; // query words a thread (q_tiles's loop)
  constexpr int kIdU = 16;                     // ids a thread and round
  uint32_t qx[PRE ? kQW : 1];
  int idx[PRE ? kIdU + 1 : 1];
  auto ids_round = [&](int64_t j0) {
#pragma unroll
    for (int u = 0; u <= kIdU; u++) {
      const int64_t j = j0 - 1 + u;
      idx[u] = j < jmax_r ? __ldg(ids_r + j) : 0x7fffffff; // past jmax: no break
    }
  };
  // the first break of the round at j0 (0x7fffffff: none)
  auto ids_break = [&](int64_t j0) {
    int f = 0x7fffffff;
#pragma unroll
    for (int u = kIdU - 1; u >= 0; u--)
      if (idx[u + 1] <= idx[u] && j0 + u < jmax_r) f = (int)(j0 + u);
    return f;
  };
  if constexpr (PRE) {
#pragma unroll
    for (int u = 0; u < kQW; u++) { // q_tile_word's word: head n, group g, word p4 & 3
      const int i = tid + u * NT, n = i >> 5, g = (i >> 3) & 3, p4 = i & 7;
      qx[u] = 0;
      if (i < kH * 32)
        qx[u] = __ldg(reinterpret_cast<const uint32_t *>(p.q_codes + (row * kH + n) * 64 +
                                                         16 * g + 4 * (p4 & 3)));
    }
    // round 0: the thread's kIdU ids j = j0 .. j0 + kIdU - 1 (j0 = 1 + kIdU tid) and the one
    // before (a break at j: ids[j] <= ids[j - 1]); contiguous, so kIdU + 1 registers
    ids_round(1 + (int64_t)kIdU * tid);
    if constexpr (BTP) { // the 128-B lines of entries [0, ceil(row_hi / P)) of the row
      const int64_t ne = mn64(p.bt_cols, (row_hi + p.P - 1) / p.P);
      const int32_t *bt_r = p.bt + row * p.bt_cols;
      for (int64_t i = 32 * (int64_t)tid; i < ne; i += 32 * (int64_t)NT)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(bt_r + i));
    }
  }

  // ---- per column (head): the fold of its query exponents (mx_body's, COMB, bf16 weights)
  if (tid < kH) { // head tid, at column tid (HCH: head_col(tid))
    const ColInfo ci = col_info<true, true>(p.q_scales[row * kH + tid], p.w, row * kH + tid, true);
    const int c = HCH ? head_col(tid) : tid;
    s_wo[c] = ci.wo;
    s_wq[c] = ci.wq;
    s_hf[c] = ci.fast;
    s_hq[c] = ci.hq;
    s_hc[c] = ci.hc;
    s_ht[c] = ci.ht;
  }
  // PRE: the thread's first break (the smallest j), its later rounds (rows of more than
  // 1 + NT kIdU ids) only while none is found
  int id_first = 0x7fffffff;
  if constexpr (PRE) {
    id_first = ids_break(1 + (int64_t)kIdU * tid);
    for (int64_t j0 = 1 + (int64_t)kIdU * (tid + NT); j0 < jmax_r && id_first == 0x7fffffff;
         j0 += (int64_t)kIdU * NT) {
      ids_round(j0);
      id_first = ids_break(j0);
    }
  }
  __syncthreads();

  // ---- n_valid: the strictly increasing prefix of the row's ids (up to this chunk)
  const int32_t *ids = p.ids + row * p.nsb;
  if constexpr (PRE) {
    if (id_first != 0x7fffffff) atomicMin(&s_nvalid, id_first);
  } else {
    const int64_t jmax = mn64(p.nsb, (chunk_hi + p.sbk - 1) >> p.sbklog);
    for (int64_t j = 1 + tid; j < jmax; j += NT)
      if (ids[j] <= ids[j - 1]) atomicMin(&s_nvalid, (int)j);
  }
  // ---- the fast path's bf16 weight pairs (times 2^(qc - 127)) of the lanes with t4 & 1 =
  // par, at s_wb + 8 par: entries 2 j + k, heads 8 j + 4 k + 2 par + {0, 1}
  if (HCH) { // HCH: bf16 [4][8]: lane t4's chain step k (head t4 + 4 k, column hch_col)
    if (tid < 32)
      reinterpret_cast<__nv_bfloat16 *>(s_wb)[tid] =
          __float2bfloat16_rn(s_wq[hch_col(tid >> 3, tid & 7)]); // exact: bf16 values
  } else if (tid < 2) {
    lane_weights<true, kH / 8>(s_wq, tid, nullptr, s_wb + 8 * tid);
  }
  // ---- the query tile: column n's element perm(p) of group g at byte 32 g + p, as e4m3
  if constexpr (PRE) { // q_tile_word's conversion and place, of the words loaded above
#pragma unroll
    for (int u = 0; u < kQW; u++) {
      const int i = tid + u * NT, g = (i >> 3) & 3, p4 = i & 7;
      const int n = HCH ? head_col(i >> 5) : i >> 5; // head i >> 5's column
      if (i < kH * 32) {
        const uint32_t o = ixl_v2mx_q_word(qx[u], p4, (int)((s_ht[n] >> (8 * g)) & 0xFFu) - 8);
        *reinterpret_cast<uint32_t *>(
            s_q + ixl_sm90_swizzle((uint32_t)(n * 128 + 32 * g + 4 * p4), IXL_SM90_SWIZZLE_128B)) =
            o;
      }
    }
  } else {
    q_tiles<kH, kH, NT>(s_q, p.q_codes, s_ht, row, p.R, tid);
  }
  ptx::fence_proxy_async(ptx::space_shared); // the generic stores, visible to wgmma
  __syncthreads();

  // ---- the chunk's sparse-block bases, once
  const int64_t nvalid = s_nvalid;
  const int64_t pre0 = c0 >> p.sbklog;
  {
    const int64_t nb = ((chunk_hi - 1) >> p.sbklog) - pre0 + 1;
    if constexpr (PRE) { // kBU blocks a thread and round: their ids, then their page entries
      // (base_of: the loop's base below)
      auto base_of = [&](int64_t j) {
        const int64_t jb = pre0 + j;
        int64_t base = jb < nvalid ? (int64_t)ids[jb] * p.sbk + koff : INT32_MIN / 2;
        if (base <= row_lo - p.sbk || base >= row_hi) base = INT32_MIN / 2;
        return base;
      };
      constexpr int kBU = 4;
      for (int64_t j0 = tid; j0 < nb; j0 += (int64_t)NT * kBU) {
        int64_t base[kBU];
        int32_t e[kBU];
#pragma unroll
        for (int u = 0; u < kBU; u++) {
          const int64_t j = j0 + (int64_t)NT * u;
          base[u] = j < nb ? base_of(j) : (int64_t)(INT32_MIN / 2);
        }
        if (PAGED) {
#pragma unroll
          for (int u = 0; u < kBU; u++) {
            e[u] = -1;
            if (base[u] >= 0 && base[u] < row_hi)
              e[u] = __ldg(p.bt + row * p.bt_cols + div_p(base[u], p.P, p.Plog));
          }
        }
#pragma unroll
        for (int u = 0; u < kBU; u++) {
          const int64_t j = j0 + (int64_t)NT * u;
          if (j >= nb) continue;
          pre_base[j] = (int32_t)base[u];
          if (PAGED) {
            int32_t pg = -1, sl = 0;
            if (base[u] >= 0 && base[u] < row_hi) {
              const int64_t pi = div_p(base[u], p.P, p.Plog);
              if (e[u] >= 0 && e[u] < p.num_pages) pg = e[u];
              sl = (int32_t)(base[u] - pi * p.P);
            }
            pre_pg[j] = pg;
            pre_sl[j] = sl;
          }
        }
      }
    } else {
      for (int64_t j = tid; j < nb; j += NT) {
        const int64_t jb = pre0 + j;
        // no key (every slot of the block lies outside the row: the id is past the valid
        // prefix, or the block ends at or before row_lo or starts at or past row_hi): a base
        // whose slots all fail the producer's test; otherwise in (row_lo - sbk, row_hi), int32
        // (the hook keeps positions below 2^30)
        int64_t base = jb < nvalid ? (int64_t)ids[jb] * p.sbk + koff : INT32_MIN / 2;
        if (base <= row_lo - p.sbk || base >= row_hi) base = INT32_MIN / 2;
        pre_base[j] = (int32_t)base;
        if (PAGED) {
          int32_t pg = -1, sl = 0;
          if (base >= 0 && base < row_hi) {
            const int64_t pi = div_p(base, p.P, p.Plog);
            const int64_t e = p.bt[row * p.bt_cols + pi];
            if (e >= 0 && e < p.num_pages) pg = (int32_t)e;
            sl = (int32_t)(base - pi * p.P);
          }
          pre_pg[j] = pg;
          pre_sl[j] = sl;
        }
      }
    }
  }
  __syncthreads();

  const int T = (int)((chunk_hi - c0 + kTile - 1) / kTile);
  if (warp >= 4) {
    // ================================================================ the producer warp(s)
    if constexpr (SETMAX) setmaxnreg_dec<kProdRegs>();
    // slots lane and lane + 32 of tile t: whether the slot has a key, the offset of its codes
    // from kbase (16-B units: one shuffle a copy), its scale word (plain loads, kLook * PW
    // tiles ahead: paged keys come from HBM, about 1 us, two tile periods of a CTA; kLook
    // register sets, the loop unrolled by kLook so that no set is copied, which would wait for
    // its loads; 4 producer warps: one set, 4 tiles ahead)
    const uint8_t *kbase = PAGED ? p.k_pages : p.k_codes;
    struct Look {
      uint32_t q[2]; // the codes' offset from kbase in 16-B units (the hook checks the range)
      uint32_t kw[2];
      bool ok[2];
    };
    constexpr int kLook = PW >= 4 ? 1 : 3;
    // 32-bit columns from c0 (a chunk holds at most kMaxChunk), positions (below 2^30: the
    // hook), 16-B units (below 2^32) and shared addresses: half the registers and instructions
    // of 64-bit ones
    const int ncols = (int)(chunk_hi - c0), coff = (int)(c0 & (p.sbk - 1));
    const int rlo = (int)row_lo, rhi = (int)row_hi, sbm = p.sbk - 1, sbl = p.sbklog;
    const uint32_t pre_a = smem_u32(pre_base); // (paged: pre_pg, pre_sl at fixed distances)
    auto scan = [&](int t, Look &x) {
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int colr = t * kTile + lane + 32 * h;
        bool o = false;
        uint32_t q = 0;
        const uint32_t *sp = nullptr;
        if (colr < ncols) {
          const int cc = coff + colr, jl = cc >> sbl, oo = cc & sbm;
          const int qq = lds32(pre_a + 4 * jl) + oo;
          o = qq >= rlo && qq < rhi;
          if (o && PAGED) {
            int pg = lds32(pre_a + (L::pg - L::pre) + 4 * jl);
            int sl = lds32(pre_a + (L::sl - L::pre) + 4 * jl) + oo;
            if (!NOX && sl >= p.P) { // a block across a page boundary (NOX: never, the hook)
              const int pi = p.Plog >= 0 ? qq >> p.Plog : qq / p.P;
              const int64_t e = p.bt[row * p.bt_cols + pi];
              pg = e >= 0 && e < p.num_pages ? (int)e : -1;
              sl = qq - pi * p.P;
            }
            o = pg >= 0;
            q = (uint32_t)pg * (uint32_t)(p.stride >> 4) + (uint32_t)sl * 4u;
            sp = reinterpret_cast<const uint32_t *>(p.k_pages + (int64_t)pg * p.stride +
                                                    (int64_t)p.P * 64) +
                 sl;
          } else if (o) {
            q = (uint32_t)qq * 4u;
            sp = p.k_scales + qq;
          }
        }
        x.ok[h] = o;
        x.q[h] = o ? q : 0u;
        x.kw[h] = o ? __ldg(sp) : IXL_MXK5_NOKEY;
      }
    };
    const uint32_t raw_a = smem_u32(s_raw), fac0 = smem_u32(s_fac), full0 = smem_u32(s_full);
    auto step = [&](int t, Look &x) {
      const uint32_t s = (uint32_t)t % S;
      wait32<HINT>(full0 + 8 * (S + s), ((uint32_t)t / S & 1u) ^ 1u); // empty[s]: last tile read
      const uint32_t b0 = __ballot_sync(0xffffffffu, x.ok[0]);
      const uint32_t b1 = __ballot_sync(0xffffffffu, x.ok[1]);
      const uint32_t dst = raw_a + s * (kTile * 64);
#pragma unroll
      for (int k = 0; k < 8; k++) {
        const int i = 8 * k + (lane >> 2), g = lane & 3;
        const uint32_t qk = __shfl_sync(0xffffffffu, k < 4 ? x.q[0] : x.q[1], i & 31);
        const bool okk = (((k < 4 ? b0 : b1) >> (i & 31)) & 1u) != 0;
        // no key: offset 0 (a valid address), 0 bytes read, the 16 B zero-filled
        if (!(ABL & 2))
          cp_async16_s(dst + ixl_v2mx_raw_off(i, g), kbase + 16 * ((uint64_t)qk + g), okk ? 16 : 0);
      }
      cp_async_arrive_noinc32(full0 + 8 * s);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        uint32_t f[4];
        uint32_t info;
        const uint32_t fa = fac0 + 16 * (s * kTile + lane + 32 * h);
        if (DEC) { // the math warps decode
          sts64<kKinOff>(fa, make_uint2(x.kw[h], x.ok[h] ? IXL_MXK5_OK : 0u));
          continue;
        }
        if (ABL & 4) {
          f[0] = f[1] = f[2] = f[3] = 0x3f800000u;
          info = (x.ok[h] ? IXL_MXK5_OK : 0u) | IXL_MXK5_COMB | IXL_MXK5_FAST;
        } else {
          if (FDEC) { // ixl_mxk5_decode less the fast bit
            const uint32_t kw = x.kw[h];
            ixl_v2mx_comb_factors(kw, f);
            info = (x.ok[h] ? IXL_MXK5_OK : 0u) | (ixl_v2mx_comb_word(kw) ? IXL_MXK5_COMB : 0u);
          } else {
            info = ixl_mxk5_decode(x.kw[h], x.ok[h], f);
          }
        }
        sts128(fa, make_uint4(f[0], f[1], f[2], f[3]));
        sts64<kKinOff>(fa, make_uint2(x.kw[h], info));
      }
      arrive32(full0 + 8 * s); // release: the stores above
      if (t + kLook * PW < T) scan(t + kLook * PW, x);
    };
    // producer warp pw: the tiles pw, pw + PW, ... (each stage's tile from one warp: the full
    // barrier's 64 arrivals)
    const int pw = warp - 4;
    Look la, lb, lc;
    if (pw < T) scan(pw, la);
    if (kLook > 1 && pw + PW < T) scan(pw + PW, lb);
    if (kLook > 2 && pw + 2 * PW < T) scan(pw + 2 * PW, lc);
    for (int t = pw; t < T; t += kLook * PW) {
      step(t, la);
      if (kLook > 1 && t + PW < T) step(t + PW, lb);
      if (kLook > 2 && t + 2 * PW < T) step(t + 2 * PW, lc);
    }
    ixl::sm80::cp_async_wait<0>();
    return;
  }

  // ================================================================ the math warpgroup
  if constexpr (SETMAX) setmaxnreg_inc<kMathRegs>();
  const int mw = warp;
  const int i0 = 16 * mw + (lane >> 2); // this lane's slots: i0, i0 + 8
  uint32_t slow_heads;
  const int quad_slow = lane_slow<kH / 8>(s_hf, t4, &slow_heads);
  // the fast path's bf16 weight pairs (s_wb) of this lane's parity: entries 2 j, 2 j + 1 of
  // chain step j; in registers (NP 1), or the pass's 4 entries (16 B) read each pass (NP 2)
  constexpr int NH = kH / NP; // heads a pass
  // (HCH: the lane's 8 bf16 step weights, 16 B at s_wb + 16 t4: 4 registers (NP 1), or the
  // pass's 4 (8 B) read each pass (NP 2))
  const uint4 *wb_src = reinterpret_cast<const uint4 *>(HCH ? s_wb + 4 * t4 : s_wb + 8 * (t4 & 1));
  uint4 wbr[2];
  if (NP == 1) {
    wbr[0] = wb_src[0];
    if (!HCH) wbr[1] = wb_src[1];
  }

  float acc[4][NH / 2];
  float acc2[PIPE ? 4 : 1][PIPE ? NH / 2 : 1]; // PIPE: the second pass's accumulators
  if constexpr ((ABL & 1) != 0) { // groups 1-3: no wgmma writes them: opaque, nothing folds
#pragma unroll
    for (int g = 0; g < 4; g++)
#pragma unroll
      for (int e = 0; e < NH / 2; e++) acc[g][e] = __int_as_float(0x3f800000 + tid + e);
#pragma unroll
    for (int g = 0; g < 4; g++) fence_operand(acc[g]);
  }
  const uint64_t db = wgmma_desc(s_q, IXL_SM90_SWIZZLE_128B, 16, 1024);
  // lane l addresses row l % 8 of matrix m = l / 8: slot 16 mw + 8 (m & 1) + l % 8, group
  // (m >> 1) (first x4: groups 0, 1) or 2 + (m >> 1) (second: 2, 3), ixl_v2mx_raw_off's place
  const int lm_slot = 16 * mw + 8 * ((lane >> 3) & 1) + (lane & 7), lm_g = lane >> 4;
  // (groups 2, 3: address bit 5 flipped, 16 ((g + 2) ^ sw) = 16 (g ^ sw) ^ 32 for g < 2; the
  // scale words 16 B a slot at a fixed distance from the factors; empty[s] 8 S B past full[s])
  uint32_t lm01 = smem_u32(s_raw) + ixl_v2mx_raw_off(lm_slot, lm_g);
  uint32_t fac_a = smem_u32(s_fac + i0);
  uint32_t full_a = smem_u32(s_full);
  // the lane's store (lanes t4 = 0, 2: slot i0 + 8 (t4 >> 1)) as a pointer and the columns
  // left in the chunk from tile 0's slot; all opaque: kept in registers (ptxas otherwise
  // recomputes them from the thread index a tile)
  uint16_t *optr = p.out + row * p.out_cols + c0 + i0 + 8 * (t4 >> 1);
  int orem = (int)(chunk_hi - c0 - (i0 + 8 * (t4 >> 1)));
  asm volatile("" : "+r"(lm01), "+r"(fac_a), "+r"(full_a), "+l"(optr), "+r"(orem));
  const int keep = t4 >> 1;

  // ---- the pieces of a tile (both loop forms below)
  // the stage's 8 code words by 2 ldmatrix.x4, widened to the 4 groups' A fragments
  auto load_codes = [&](uint32_t su, uint32_t (&a)[4][4]) {
    uint32_t w0[4], w1[4];
    const uint32_t la = lm01 + su * (kTile * 64);
    ldsm_x4(la, w0[0], w1[0], w0[1], w1[1]);
    ldsm_x4(la ^ 32u, w0[2], w1[2], w0[3], w1[3]);
#pragma unroll
    for (int g = 0; g < 4; g++) {
      if constexpr ((ABL & 16) != 0) { // timing: the raw words as the A fragments, no widening
        a[g][0] = a[g][2] = w0[g];
        a[g][1] = a[g][3] = w1[g];
        continue;
      }
      ixl_sm90_e2m1x8_widen(w0[g], &a[g][0], &a[g][2]);
      ixl_sm90_e2m1x8_widen(w1[g], &a[g][1], &a[g][3]);
    }
  };
  // the lane's two slots' factors (f0: slot i0, f1: i0 + 8) and (scale word, info); then the
  // stage is released (empty[s]; release: every read of the stage is above)
  struct Sc {
    float4 f0, f1;
    uint2 m0, m1;
    uint32_t fa; // PIPE: the stage's factors (read where used)
  };
  auto load_scales = [&](uint32_t su, Sc &k) {
    const uint32_t fa = fac_a + su * (kTile * 16);
    if (!DEC) {
      k.f0 = lds128<0>(fa); // slot i0 + 8: 128 B on
      k.f1 = lds128<128>(fa);
    }
    k.m0 = lds64<kKinOff>(fa);
    k.m1 = lds64<kKinOff + 128>(fa);
    arrive32(full_a + 8 * (S + su));
    if (DEC) { // the producer's decode (v2_mxk5.cuh), here
      uint32_t f[2][4];
      k.m0.y = ixl_mxk5_decode(k.m0.x, k.m0.y & IXL_MXK5_OK, f[0]);
      k.m1.y = ixl_mxk5_decode(k.m1.x, k.m1.y & IXL_MXK5_OK, f[1]);
      k.f0 = make_float4(__uint_as_float(f[0][0]), __uint_as_float(f[0][1]),
                         __uint_as_float(f[0][2]), __uint_as_float(f[0][3]));
      k.f1 = make_float4(__uint_as_float(f[1][0]), __uint_as_float(f[1][1]),
                         __uint_as_float(f[1][2]), __uint_as_float(f[1][3]));
    }
  };
  // factor g (0: k0, 1: r1, 2: r2, 3: r3) of slot h; PIPE: read from the stage where used (the
  // stage is held until the tile's store), to keep a tile's factors out of registers
  auto fac = [&](const Sc &k, int h, int g) -> float {
    if (!PIPE) {
      const float4 &v = h ? k.f1 : k.f0;
      return g == 0 ? v.x : g == 1 ? v.y : g == 2 ? v.z : v.w;
    }
    return __int_as_float(lds32(k.fa + 128 * h + 4 * g));
  };
  // PIPE: the lane's (scale word, info) pairs of stage su, the stage kept (no arrive)
  auto peek_scales = [&](uint32_t su, Sc &k) {
    k.fa = fac_a + su * (kTile * 16);
    k.m0 = lds64<kKinOff>(k.fa);
    k.m1 = lds64<kKinOff + 128>(k.fa);
  };
  // the fast path needs every byte of both slots in the window (quad-uniform)
  auto slow_of = [&](const Sc &k) { return quad_slow || !(k.m0.y & k.m1.y & IXL_MXK5_COMB); };
  // pass ps's 4 wgmma (heads NH ps on: 128 B a head) in 1 or 2 commit groups: groups 0 and 1,
  // then 2 and 3, so that the first pair's combine can overlap the second's wgmma
  auto issue = [&](float (&ac)[4][NH / 2], const uint32_t (&a)[4][4], int ps, bool split) {
    const uint64_t dbp = db + (uint64_t)(ps * NH * 128 / 16);
    wgmma_fence();
#pragma unroll
    for (int g = 0; g < 2; g++)
      if (!(ABL & 1) || g == 0) wgmma_rs<NH>(ac[g], a[g], dbp + 2 * g);
    if (split) wgmma_commit();
#pragma unroll
    for (int g = 2; g < 4; g++)
      if (!(ABL & 1)) wgmma_rs<NH>(ac[g], a[g], dbp + 2 * g);
    wgmma_commit();
  };
  auto comb01 = [&](float (&ac)[4][NH / 2], const Sc &k) {
    if ((ABL & 32) == 0 && !slow_of(k)) { // (ABL 32, timing: no combine on the fast path)
      const float cr1[2] = {fac(k, 0, 1), fac(k, 1, 1)};
#pragma unroll
      for (int e = 0; e < NH / 2; e++) ac[0][e] = __fmaf_rn(ac[1][e], cr1[(e >> 1) & 1], ac[0][e]);
    }
  };
  // ---- SPEC 3's bf16 chain (mx_body's bf16 reduce, RB 1), its steps j of pass ps: lanes
  // t4 = 0, 2 run (s0, s1), lanes 1, 3 run (s2, s3); lanes 0, 1 keep slot i0 and lanes 2, 3
  // slot i0 + 8; each sends the other slot's pair to lane t4 ^ 2
  // (FOLD a plain bool, constant after inlining: a generic lambda here crashes cicc 13.0)
  auto chain = [&](bool FOLD, const float (&ac)[4][NH / 2], int ps, __nv_bfloat162 &ch2) {
    if constexpr (HCH) { // lane t4's chain s_t4 for both slots (low: i0, high: i0 + 8)
      uint32_t wh[4]; // the pass's step weights, 2 bf16 a word (word jj: steps 2 jj, 2 jj + 1)
      if (FOLD) {
        if (NP == 1) {
          wh[0] = wbr[0].x, wh[1] = wbr[0].y, wh[2] = wbr[0].z, wh[3] = wbr[0].w;
        } else { // NP 2: steps 4 ps .. 4 ps + 3
          const uint2 v = reinterpret_cast<const uint2 *>(wb_src)[ps];
          wh[0] = v.x, wh[1] = v.y;
        }
      }
#pragma unroll
      for (int jj = 0; jj < NH / 8; jj++)
#pragma unroll
        for (int e = 0; e < 2; e++) { // the pass's step 2 jj + e (registers 4 jj + e, + 2)
          const uint32_t v = cvt_relu_bf16x2(ac[0][4 * jj + e], ac[0][4 * jj + 2 + e]);
          __nv_bfloat162 w;
          if (FOLD) {
            const uint32_t wu = wh[jj];
            const __nv_bfloat162 pr = *reinterpret_cast<const __nv_bfloat162 *>(&wu);
            w = e ? __high2bfloat162(pr) : __low2bfloat162(pr);
          } else {
            w = __float2bfloat162_rn(s_wo[8 * (jj + ps * (NH / 8)) + 2 * t4 + e]);
          }
          ch2 = __hfma2(w, *reinterpret_cast<const __nv_bfloat162 *>(&v), ch2);
        }
      // (paged: without this no-op, 1 instruction a pass, ptxas spills 4 B at 96 registers; the
      // warp may be split by quads here, as at the chain's shuffles of the kernels without HCH)
      if (PAGED) __syncwarp();
    } else {
      uint4 wbt[2];
      if (FOLD) {
        if (NP == 1) wbt[0] = wbr[0], wbt[1] = wbr[1];
        else if (NP == 2) wbt[0] = wb_src[ps];
        else { // NP 4: the pass's 2 entries (8 B)
          const uint2 v = reinterpret_cast<const uint2 *>(wb_src)[ps];
          wbt[0].x = v.x;
          wbt[0].y = v.y;
        }
      }
      const __nv_bfloat162 *wb = reinterpret_cast<const __nv_bfloat162 *>(wbt);
#pragma unroll
      for (int jj = 0; jj < NH / 8; jj++) {
        const uint32_t v0 = cvt_relu_bf16x2(ac[0][4 * jj], ac[0][4 * jj + 1]);     // i0
        const uint32_t v1 = cvt_relu_bf16x2(ac[0][4 * jj + 2], ac[0][4 * jj + 3]); // i0 + 8
        const uint32_t mine = keep ? v1 : v0;
        const uint32_t got = __shfl_xor_sync(0xffffffffu, keep ? v0 : v1, 2);
        const uint32_t first = keep ? got : mine, second = keep ? mine : got;
        __nv_bfloat162 x0, x1;
        if (FOLD) {
          x0 = wb[2 * jj];
          x1 = wb[2 * jj + 1];
        } else {
          const int n = 8 * (jj + ps * (NH / 8)) + 2 * (t4 & 1);
          x0 = __floats2bfloat162_rn(s_wo[n], s_wo[n + 1]);
          x1 = __floats2bfloat162_rn(s_wo[n + 4], s_wo[n + 5]);
        }
        ch2 = __hfma2(x0, *reinterpret_cast<const __nv_bfloat162 *>(&first), ch2);
        ch2 = __hfma2(x1, *reinterpret_cast<const __nv_bfloat162 *>(&second), ch2);
      }
    }
  };
  // pass ps after its wgmma and comb01: the rest of the combine (or the exact slow dots) and
  // the pass's chain steps
  auto finish_pass = [&](float (&ac)[4][NH / 2], const Sc &k, int ps, __nv_bfloat162 &ch2) {
    if (!slow_of(k)) {
      const float cr2[2] = {fac(k, 0, 2), fac(k, 1, 2)}, cr3[2] = {fac(k, 0, 3), fac(k, 1, 3)};
#pragma unroll
      for (int e = 0; e < NH / 2 && (ABL & 32) == 0; e++) {
        const int h = (e >> 1) & 1;
        ac[0][e] = __fmaf_rn(__fmaf_rn(ac[3][e], cr3[h], ac[2][e]), cr2[h], ac[0][e]);
      }
      chain(true, ac, ps, ch2);
    } else {
      const uint32_t kw[2] = {k.m0.x, k.m1.x};
      float kf[2][4];
      key_pow2(kw[0], kf[0]);
      key_pow2(kw[1], kf[1]);
      // the exact dots d: the fast formula times 2^(qc - 127) where it holds, else the CPU's;
      // pass ps's columns from NH ps on (its slow-head bits from NH / 4 ps: 2 a block of 8)
      const bool pslow[2] = {
          FDEC ? !ixl_v2mx_fast_word(k.m0.x) : (k.m0.y & IXL_MXK5_FAST) == 0,
          FDEC ? !ixl_v2mx_fast_word(k.m1.x) : (k.m1.y & IXL_MXK5_FAST) == 0};
      // (NOX: the lane's slow-head mask, lane_slow's, read again here in the rare slow
      // branch rather than held in a register over the loop)
      uint32_t sh = slow_heads;
      constexpr int kShb = NH / 4; // slow-head bits a pass
      if constexpr (NOX) {
        sh = 0;
#pragma unroll
        for (int j = 0; j < kH / 8; j++)
#pragma unroll
          for (int c = 0; c < 2; c++)
            sh |= (uint32_t)(s_hf[8 * j + 2 * t4 + c] == 0) << (2 * j + c);
      }
      slow_branch<NH / 2>(ac, kf, kw, pslow, sh >> (kShb * ps), s_hq + NH * ps,
                          s_hc + NH * ps, t4);
      chain(false, ac, ps, ch2);
    }
  };
  // the chain's end (the quad's two halves), the deferred k0, -inf without a key, the store
  auto store = [&](const Sc &k, __nv_bfloat162 ch2, int t) {
    __nv_bfloat16 res;
    if constexpr (HCH) { // lane t: (s_t of i0, of i0 + 8); bf16(bf16(s0 + s2) + bf16(s1 + s3))
      const uint32_t cu = *reinterpret_cast<const uint32_t *>(&ch2);
      const uint32_t u2 = __shfl_xor_sync(0xffffffffu, cu, 2);
      const __nv_bfloat162 pr = __hadd2(ch2, *reinterpret_cast<const __nv_bfloat162 *>(&u2));
      const uint32_t pu = *reinterpret_cast<const uint32_t *>(&pr);
      const uint32_t u1 = __shfl_xor_sync(0xffffffffu, pu, 1);
      const __nv_bfloat162 r = __hadd2(pr, *reinterpret_cast<const __nv_bfloat162 *>(&u1));
      res = keep ? __high2bfloat16(r) : __low2bfloat16(r); // lanes 0, 2: slot i0 + 8 keep
    } else {
      const uint32_t cu = *reinterpret_cast<const uint32_t *>(&ch2);
      const uint32_t ou = __shfl_xor_sync(0xffffffffu, cu, 1);
      const __nv_bfloat162 pair = __hadd2(ch2, *reinterpret_cast<const __nv_bfloat162 *>(&ou));
      res = __hadd(__low2bfloat16(pair), __high2bfloat16(pair));
    }
    if (!slow_of(k)) // the deferred k0: exact (a power of two, in range)
      res = __float2bfloat16_rn(__fmul_rn(__bfloat162float(res), fac(k, keep, 0)));
    if ((t4 & 1) == 0) {
      const uint16_t v = *reinterpret_cast<const uint16_t *>(&res);
      const bool ok = ((keep ? k.m1.y : k.m0.y) & IXL_MXK5_OK) != 0;
      const uint16_t o = ok ? v : (uint16_t)0xFF80u;
      if (t * kTile < orem) // st.global: the opaque pointer lost its space (else ST.E)
        asm volatile("st.global.b16 [%0], %1;\n" ::"l"(optr + t * kTile), "h"(o) : "memory");
    }
  };
  auto wait_full = [&](int t) {
    wait32<HINT>(full_a + 8 * ((uint32_t)t % S), ((uint32_t)t / S) & 1u);
  };

  if constexpr (PIPE) {
    // ---- two passes in flight: pass 1 of tile t runs under pass 0's epilogue, pass 0 of
    // tile t + 1 under pass 1's (each pass one commit group; the scale words of t + 1 read
    // after t's last epilogue, so one set is live)
    static_assert(!PIPE || (NP == 2 && ABL == 0), "PIPE: 2 passes, no ablation");
    uint32_t a[4][4];
    if (T > 0) {
      wait_full(0);
      load_codes(0, a);
      issue(acc, a, 0, false);
    }
    for (int t = 0; t < T; t++) {
      const uint32_t su = (uint32_t)t % S;
      __nv_bfloat162 ch2 = __floats2bfloat162_rn(0.0f, 0.0f);
      issue(acc2, a, 1, false);
      wgmma_wait<1>();
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(acc[g]);
      {
        Sc k;
        peek_scales(su, k);
        comb01(acc, k);
        finish_pass(acc, k, 0, ch2);
      }
      wgmma_wait<0>();
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(acc2[g]);
#pragma unroll
      for (int g = 0; g < 4; g++) fence_operand(a[g]);
      // tile t + 1's codes and pass 0 (the last tile: one more pass on the same A, never read,
      // so that no branch encloses a wgmma)
      if (t + 1 < T) {
        wait_full(t + 1);
        load_codes((uint32_t)(t + 1) % S, a);
      }
      issue(acc, a, 0, false);
      Sc k;
      peek_scales(su, k);
      comb01(acc2, k);
      finish_pass(acc2, k, 1, ch2);
      store(k, ch2, t);
      arrive32(full_a + 8 * (S + su)); // empty[su]: every read of the stage is above
    }
    wgmma_wait<0>();
#pragma unroll
    for (int g = 0; g < 4; g++) fence_operand(acc[g]);
  } else {
    for (int t = 0; t < T; t++) {
      const uint32_t su = (uint32_t)t % S;
      wait_full(t);
      if constexpr ((ABL & 8) != 0) { // the producer side alone (one wgmma never run, for the
        arrive32(full_a + 8 * (S + su)); // SASS rule that every v2 kernel has one)
        if (orem == -0x40000000) {
          uint32_t z[4][4] = {};
          issue(acc, z, 0, false);
          wgmma_wait<0>();
          fence_operand(acc[0]);
          optr[0] = (uint16_t)__float_as_uint(acc[0][0]);
        }
        continue;
      }
      uint32_t a[4][4];
      Sc k;
      load_codes(su, a);
      load_scales(su, k);
      __nv_bfloat162 ch2 = __floats2bfloat162_rn(0.0f, 0.0f);
#pragma unroll
      for (int ps = 0; ps < NP; ps++) {
        issue(acc, a, ps, true);
        wgmma_wait<1>();
        fence_operand(acc[0]);
        fence_operand(acc[1]);
        comb01(acc, k);
        fence_operand(acc[0]);
        wgmma_wait<0>();
#pragma unroll
        for (int g = 0; g < 4; g++) fence_operand(acc[g]);
#pragma unroll
        for (int g = 0; g < 4; g++) fence_operand(a[g]);
        finish_pass(acc, k, ps, ch2);
      }
      store(k, ch2, t);
    }
  }
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// ------------------------------------------------------------------ host
// The switches (v2_mx_common.cuh's env_switch, read once a process): the character of the
// value ('3', 'a', ...), 0 (off: logits_v2_mx_sm90.cu's kernels) for a value not listed.
// IXL_LOGITS_V2_MX_K5WS (ragged K5): 3 = 1 head pass, 8 stages, 3 CTAs an SM; 5 = 2 head
// passes at 96 registers, 6 stages, 4 CTAs an SM; 6 = 2 passes at 128 registers, 8 stages, 3
// CTAs (5's passes without its occupancy); timing ablations of 3 (ABL below; wrong results):
// 7 = 4 (no producer decode), 8 = 1 (one wgmma of 4), 9 = 2 (no key copies), a = 8 (producer
// side only), b = 6 (math side only: no copies, no decode); c = 3 with the scale decode in
// the math warps (the producer stores the words only: DEC; 5 with it spills 16 B); e = 2 head
// passes at 96 registers with 2 producer warps (PW), 8 stages, 3 CTAs an SM; f = 2 passes
// with a producer warpgroup of 4 warps (setmaxnreg: 80 registers at entry, the producers 40,
// the math 120; 1 pass needs 126 and the producers spill at 32), 8 stages, 3 CTAs an SM; g = 2
// passes pipelined across tiles (PIPE) at 128 registers, 8 stages, 3 CTAs an SM (the factors
// read from the held stage where used: visit 1's form, recomputing them from the scale word,
// cost +21 % against 6); h = 5 and i = 3 with the ring's waits suspending (OPT 2, HINT);
// j = 5 and k = 3 with chunks of up to 8192 columns (MC; visit 2's ncu: the CTA set-up, the
// ids prefix scan and the query tile above all, took ~20 % of the warps' samples: fewer, longer
// CTAs amortize it), l = 5 with chunks of up to 16384 columns (a whole row here) and 5 stages;
// m = 5 with the set-up's loads batched (PRE), n = m with suspending waits, o = j with PRE,
// p = k with PRE, q = l with PRE; r = the heads in 4 passes of 8 (NP 4: 4 m64n8k32 a pass, 16
// accumulators) at 80 registers, 5 stages, 5 CTAs an SM, with PRE; s = r with chunks of up to
// 8192 columns and 4 stages (5 CTAs' shared memory); u = r at 96 registers, 6 stages, 4 CTAs (m's
// occupancy: what the 2 extra passes cost; timing only). (NP 4 at 64 registers for 6 CTAs spills.)
// Session 9: v = p with HCH (the columns in hcol_head's order: the bf16 chain without exchange
// or selects), w = o with HCH, x = v with FDEC (the producer's decode without the fast bit);
// timing ablations of x (wrong results): y = no widening (ABL 16: the raw words as the A
// fragments), z = no combine on the fast path (ABL 32); W = w with FDEC (2 passes at 96
// registers, 4 CTAs an SM: visit 2's w beat v by 3 %, x beat v by 4 %; NOT yet run on a GPU).
// Modes 1, 2 and 4 of the last session (LDS code words; two math warpgroups; 10 stages: all
// slower than 3 on the H200) are no longer instantiated and read as off.
// Unset: kK5wsDefault = x since session 9's visit 2 (H200, 2026-12-02): test_cuda_logits_mxk5
// 8/8 with K5WS=x (and with v, w; v on a second seed), test_cuda_logits [v2] sparse +
// mxfp4_page_sizes 17/17 with x / d routed (and every test 50/50 with v / b), racecheck 0
// hazards and memcheck 0 errors small (mxk5 test with x; sparse + page sizes with d / x),
// IXL_PDL=1; ragged K5 4096x16K mxfp4 H32, same run: p 2,122.7 / 2,106.1 / 2,109.5 us, v
// 2,089.2 / 2,073.1 (-1.6 %), w 2,026.8 / 2,010.9, x 2,002.1 / 1,986.6 (-5.8 %); the step
// (bench/step.lua, K5WS=x K5PWS=d): sparse logits 9,170 -> 8,662 us, exact. Verified with the
// switch set only, NOT run with it unset (the session had no visit after the flip).
// p before, since session 8's visit 2: test_cuda_logits_mxk5
// 8/8 and test_cuda_logits [v2] sparse + mxfp4_page_sizes 17/17 with K5WS=p, racecheck 0
// hazards small (mxk5 test) and memcheck 0 errors small (test_cuda_logits sparse + page sizes,
// ragged p routed), IXL_PDL=1; ragged K5 4096x16K mxfp4 H32 2,140.2 (j; three runs within 0.3
// us) -> 2,125.2 us (-0.7 %). Visit 3 with p / 8 the defaults: test_cuda_logits every test, the
// mxk5 test on 2 seeds, racecheck and memcheck small of both programs clean; 2,119.9 (p, three
// runs) against 2,137.0 (j) and 2,136.5 (k): -0.8 %. (j before, since session 8's visit 1:
// 2,194 (5) -> 2,121 us; 5 before that, since session 7: 2,310 (3) -> 2,213.)
// IXL_LOGITS_V2_MX_K5WS=0: the kernels of logits_v2_mx_sm90.cu.
constexpr char kK5wsDefault = 'x';
int k5ws_mode() {
  static const int v =
      env_switch("IXL_LOGITS_V2_MX_K5WS", "356789abcefghijklmnopqrsuvwxyzW", kK5wsDefault);
  return v;
}
// IXL_LOGITS_V2_MX_K5PWS (paged K5): 2 = 1 head pass, 8 stages (136 registers: 2 CTAs an
// SM); 4 = 2 passes at 128 (110 used), 8 stages, 3 CTAs; 5 = 4 with suspending waits (HINT);
// 6 = 4 with the set-up's loads batched (PRE: ~19 serial round trips a CTA before its first
// tile -> ~4, on the paged launch's one wave's critical path), 7 = 6 with suspending waits;
// 8 = 6 with NOX at 96 registers, 6 stages, 4 CTAs an SM (pages that sbk does not divide or
// more than 2^30 output columns: mode 6), 9 = 8 with suspending waits; a = 8 with the heads in
// 4 passes of 8 (m64n8k32) at 80 registers, 4 stages, 5 CTAs an SM (else mode 6); session 9:
// b = 8 with HCH (ragged v's chain), c = b with the block table's L2 prefetch (BTP), d = c with
// FDEC (else 6).
// Not offered, they spill: 2 passes at 96 registers for 4 CTAs without NOX (36 B); 4 with f's
// producer warpgroup (ragged f's; a register across the setmaxnreg, 80 -> 48 / 112).
// Mode 1 of the last session (LDS code words, slower) reads as off.
// Unset: kK5pwsDefault = d since session 9's visit 2 (H200, 2026-12-02): test_cuda_logits [v2]
// sparse + mxfp4_page_sizes 17/17 with K5PWS=d (ragged x, PDL) and with c, racecheck 0 hazards
// and memcheck 0 errors small on the same tests with d (and b, c), IXL_PDL=1; paged K5 64x16K
// page 128, same run: 8 50.8 / 50.3 / 50.2 us, b 48.7 / 48.5, c 48.0 / 47.9, d 47.0 / 46.7
// (-6.9 %); the step's consumer part 305.1 -> 293.2 us (K5WS=x K5PWS=d), exact. Verified with
// the switch set only, NOT run with it unset. 8 before, since session 8's visit 2:
// test_cuda_logits [v2]
// sparse + mxfp4_page_sizes 17/17 with K5PWS=8 (ragged p routed), racecheck 0 hazards and
// memcheck 0 errors small on the same tests with K5PWS=8 (IXL_PDL=1); paged K5 64x16K page 128
// 58.0 (4; three runs within 0.3 us) -> 50.9 us (-12 %; three runs 50.7-51.0); visit 3 (8 the
// default, every check above clean): 50.1-50.3 against 57.5-57.6 (4). (4 before, since
// session 7's visit 1: 67.7 (2) -> 58.5 us; 2 before that.) IXL_LOGITS_V2_MX_K5PWS=0:
// mx_kernel<K5P>.
constexpr char kK5pwsDefault = 'd';
int k5pws_mode() {
  static const int v = env_switch("IXL_LOGITS_V2_MX_K5PWS", "2456789abcd", kK5pwsDefault);
  return v;
}

template <bool PAGED, int NP, int STAGES, int MAXREG, int ABL = 0, int OPT = 0, int PW = 1,
          bool PIPE = false, int MC = kMaxChunk>
ixl_status launch_ws(ixl_ctx *ctx, WsParams p, const char *name) {
  auto kern = mxk5_kernel<PAGED, NP, STAGES, MAXREG, ABL, OPT, PW, PIPE, MC>;
  using L = WsSmem<STAGES, MC / 4 + 2>;
  constexpr int kThr = kThreads<PW>;
  constexpr int alloc = PAGED ? L::alloc_paged : L::alloc;
  int occ = 0, sms = 132;
  const ixl_status ost =
      occupancy(ctx, kern, kThr, alloc, "cudaFuncSetAttribute (logits v2 mxk5)", &occ, &sms);
  if (ost) return ost;
  static bool said = false; // one stderr line per configuration a process: the switch took
  if (!said) {
    said = true;
    fprintf(stderr,
            "ixl logits v2 mxfp4: K5WS kernel, %s K5, H 32, 1 math warpgroup + %d producer "
            "warp, %d head pass(es), %d stages, %d CTAs an SM, bf16 (switch %c)\n",
            PAGED ? "paged" : "ragged", PW, NP, STAGES, occ, PAGED ? k5pws_mode() : k5ws_mode());
  }
  // the chunk: tiles of 64, at most MC columns and MC / 4 sparse blocks (sbk 1, 2); as few
  // chunks per row as fill whole waves
  Grid g;
  const ixl_status gst = chunk_grid(ctx, p.out_cols, p.R, (int64_t)(MC / 4) * p.sbk, MC,
                                    occ, sms, name, "v2", &g);
  if (gst) return gst;
  p.chunk = g.chunk;
  p.nchunks = g.nchunks;
  const int64_t blocks = g.blocks;
  return ixl::launch_pdl(ctx, name, kern, dim3((unsigned)blocks), dim3(kThr), alloc, 1, p);
}

} // namespace

// The hook of logits_v2_mx_sm90.cu's sparse branch (after mx_takes and the power-of-two sbk
// check): 1 when this file took the call (*st its status), 0 when its switch is off
// (IXL_LOGITS_V2_MX_K5WS for ragged calls, IXL_LOGITS_V2_MX_K5PWS for paged ones) or the call
// does not suit the kernel (then the caller's kernels run it).
extern "C" int ixl_cuda_logits_v2_mxk5(ixl_ctx *ctx, const ixl_logits_call *c, ixl_status *st) {
  const ixl_qk *in = c->in;
  const bool paged = in->k_pages != nullptr;
  const int mode = paged ? k5pws_mode() : k5ws_mode();
  if (!mode) return 0;
  if (c->mode != IXL_LOGITS_SPARSE || c->H != 32 || (!paged && !c->ks)) return 0;
  const int sbklog = log2_exact(c->sparse_block_kv);
  if (sbklog < 0 || c->R == 0 || c->out->shape[1] == 0) return 0;
  if (paged && (in->page_size <= 0 || !c->block_table)) return 0;
  // the producer's code offsets are 32-bit in 16-B units: the key bytes below 64 GiB, pages
  // 16-B aligned (the cp.async need it anyway: page sizes are multiples of sbk >= 4, SPEC 4)
  if (paged && in->k_pages->shape[1] % 16) return 0;
  const int64_t kbytes = paged ? in->k_pages->shape[0] * in->k_pages->shape[1]
                               : in->k_codes->shape[0] * (int64_t)64;
  if (kbytes > ((int64_t)1 << 36)) return 0;
  // and its positions int32 with room for a block: below 2^30 (ragged: N, by the line above)
  if (paged && in->page_size * c->block_table->shape[1] > ((int64_t)1 << 30)) return 0;
  WsParams p = {};
  p.q_codes = (const uint8_t *)in->q_codes->data;
  p.q_scales = (const uint32_t *)in->q_scales->data;
  if (paged) {
    p.k_pages = (const uint8_t *)in->k_pages->data;
    p.num_pages = in->k_pages->shape[0];
    p.stride = in->k_pages->shape[1];
    p.P = in->page_size;
    p.Plog = log2_exact(p.P);
    p.bt = (const int32_t *)c->block_table->data;
    p.bt_cols = c->block_table->shape[1];
  } else {
    p.k_codes = (const uint8_t *)in->k_codes->data;
    p.k_scales = (const uint32_t *)in->k_scales->data;
    p.N = in->k_codes->shape[0];
    p.ks = (const int32_t *)c->ks->data;
  }
  p.w = (const uint16_t *)c->weights->data;
  p.ke = (const int32_t *)c->ke->data;
  p.ids = (const int32_t *)c->sparse_ids->data;
  p.out = (uint16_t *)c->out->data;
  p.R = c->R;
  p.nsb = c->sparse_ids->shape[1];
  p.out_cols = c->out->shape[1];
  p.sbk = c->sparse_block_kv;
  p.sbklog = sbklog;
  p.aligned = c->ks_mode == IXL_KS_ALIGNED;
  const char *name = "sparse_logits kernel (v2 mxfp4 K5WS)";
  if (paged) {
    // NOX (modes 8, 9): whole blocks in a page (the builder's rule, SPEC 4: sbk divides the
    // page size) and int32 output columns
    const bool nox = p.P % p.sbk == 0 && p.out_cols <= ((int64_t)1 << 30);
    switch (mode) { // 2, 4, 5, 6, 7, 8, 9, a (0 returned above)
    case '2': *st = launch_ws<true, 1, kStages, 136>(ctx, p, name); break;
    case '4': *st = launch_ws<true, 2, kStages, 128>(ctx, p, name); break;
    case '6': *st = launch_ws<true, 2, kStages, 128, 0, 4>(ctx, p, name); break;
    case '7': *st = launch_ws<true, 2, kStages, 128, 0, 6>(ctx, p, name); break;
    case '8': // NOX's conditions, else mode 6
      *st = nox ? launch_ws<true, 2, 6, 96, 0, 12>(ctx, p, name)
                : launch_ws<true, 2, kStages, 128, 0, 4>(ctx, p, name);
      break;
    case '9':
      *st = nox ? launch_ws<true, 2, 6, 96, 0, 14>(ctx, p, name)
                : launch_ws<true, 2, kStages, 128, 0, 6>(ctx, p, name);
      break;
    case 'a':
      *st = nox ? launch_ws<true, 4, 4, 80, 0, 12>(ctx, p, name)
                : launch_ws<true, 2, kStages, 128, 0, 4>(ctx, p, name);
      break;
    case 'b': // 8 with HCH (else mode 6)
      *st = nox ? launch_ws<true, 2, 6, 96, 0, 28>(ctx, p, name)
                : launch_ws<true, 2, kStages, 128, 0, 4>(ctx, p, name);
      break;
    case 'c': // b with BTP (else mode 6)
      *st = nox ? launch_ws<true, 2, 6, 96, 0, 60>(ctx, p, name)
                : launch_ws<true, 2, kStages, 128, 0, 4>(ctx, p, name);
      break;
    case 'd': // c with FDEC (else mode 6)
      *st = nox ? launch_ws<true, 2, 6, 96, 0, 124>(ctx, p, name)
                : launch_ws<true, 2, kStages, 128, 0, 4>(ctx, p, name);
      break;
    default: *st = launch_ws<true, 2, kStages, 128, 0, 2>(ctx, p, name); break; // '5'
    }
    return 1;
  }
  switch (mode) {
  case '3': *st = launch_ws<false, 1, kStages, 136>(ctx, p, name); break;
  case '5': *st = launch_ws<false, 2, 6, 96>(ctx, p, name); break;
  case '6': *st = launch_ws<false, 2, kStages, 128>(ctx, p, name); break;
  case '7': *st = launch_ws<false, 1, kStages, 136, 4>(ctx, p, name); break;
  case '8': *st = launch_ws<false, 1, kStages, 136, 1>(ctx, p, name); break;
  case '9': *st = launch_ws<false, 1, kStages, 136, 2>(ctx, p, name); break;
  case 'a': *st = launch_ws<false, 1, kStages, 136, 8>(ctx, p, name); break;
  case 'b': *st = launch_ws<false, 1, kStages, 136, 6>(ctx, p, name); break;
  case 'c': *st = launch_ws<false, 1, kStages, 136, 0, 1>(ctx, p, name); break;
  case 'e': *st = launch_ws<false, 2, kStages, 96, 0, 0, 2>(ctx, p, name); break;
  case 'f': *st = launch_ws<false, 2, kStages, 80, 0, 0, 4>(ctx, p, name); break;
  case 'g': *st = launch_ws<false, 2, kStages, 128, 0, 0, 1, true>(ctx, p, name); break;
  case 'h': *st = launch_ws<false, 2, 6, 96, 0, 2>(ctx, p, name); break;
  case 'j': *st = launch_ws<false, 2, 6, 96, 0, 0, 1, false, 8192>(ctx, p, name); break;
  case 'k': *st = launch_ws<false, 1, kStages, 136, 0, 0, 1, false, 8192>(ctx, p, name); break;
  case 'l': *st = launch_ws<false, 2, 5, 96, 0, 0, 1, false, 16384>(ctx, p, name); break;
  case 'm': *st = launch_ws<false, 2, 6, 96, 0, 4>(ctx, p, name); break;
  case 'n': *st = launch_ws<false, 2, 6, 96, 0, 6>(ctx, p, name); break;
  case 'o': *st = launch_ws<false, 2, 6, 96, 0, 4, 1, false, 8192>(ctx, p, name); break;
  case 'p': *st = launch_ws<false, 1, kStages, 136, 0, 4, 1, false, 8192>(ctx, p, name); break;
  case 'q': *st = launch_ws<false, 2, 5, 96, 0, 4, 1, false, 16384>(ctx, p, name); break;
  case 'r': *st = launch_ws<false, 4, 5, 80, 0, 4>(ctx, p, name); break;
  case 's': *st = launch_ws<false, 4, 4, 80, 0, 4, 1, false, 8192>(ctx, p, name); break;
  case 'u': *st = launch_ws<false, 4, 6, 96, 0, 4>(ctx, p, name); break;
  case 'v': *st = launch_ws<false, 1, kStages, 136, 0, 20, 1, false, 8192>(ctx, p, name); break;
  case 'w': *st = launch_ws<false, 2, 6, 96, 0, 20, 1, false, 8192>(ctx, p, name); break;
  case 'x': *st = launch_ws<false, 1, kStages, 136, 0, 84, 1, false, 8192>(ctx, p, name); break;
  case 'y': *st = launch_ws<false, 1, kStages, 136, 16, 84, 1, false, 8192>(ctx, p, name); break;
  case 'z': *st = launch_ws<false, 1, kStages, 136, 32, 84, 1, false, 8192>(ctx, p, name); break;
  case 'W': *st = launch_ws<false, 2, 6, 96, 0, 84, 1, false, 8192>(ctx, p, name); break;
  default: *st = launch_ws<false, 1, kStages, 136, 0, 2>(ctx, p, name); break; // 'i'
  }
  return 1;
}
