// logits/v2_fp8_k2.cuh - logits v2's K2 fp8 kernel with the fp32 reduction (BENCHMARKS.md, "Step
// 1 of issue 13's K2 work" and session 7's fp8 section): one math warpgroup and one producer
// warp per CTA, persistent (the (row, 64-position tile) units split evenly over one wave), an
// mbarrier ring of TMA-loaded tiles, a division-free producer with block-table prefetch, weights
// with Q by bulk copy. By default (IXL_LOGITS_V2_K2 unset): at H 64 the 4x5sf form (4 stages x
// 5 CTAs an SM, one accumulator waited before each epilogue, one Q slot, the key scale applied
// after the head sum), at H 32 the 6x3 form (6 stages x 3 CTAs, the accumulator double-buffered
// by wgmma.wait_group 1). On the H200 (2026-12-02, session 7 visit 2, bench_logits, L2 flushed):
// 64x128K 321.7 -> 296.3 us, 16x128K 90.1 -> 86.1, 256x8K 90.4 -> 86.2, 1x128K 13.4 -> 12.6;
// the copies alone 276, the math alone 248. logits_v2_sm90.cu includes it once and sends fp32 K2
// here; its v2_fp8_kernel (the same tile math, logits/v2_fp8.cuh) runs bf16 K2 and paged K5.
#ifndef IXL_LOGITS_V2_FP8_K2_CUH
#define IXL_LOGITS_V2_FP8_K2_CUH

#include "logits/logits.h"
#include "cuda/launch.cuh"
#include "cuda/sm90.cuh"
#include "logits/v2_fp8.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <type_traits>

namespace ixl_v2_k2 {

using namespace ixl::sm90;
using namespace ixl_v2; // the tile math; kTile, kTileBytes, kMath (threads) + a producer warp

struct K2Params {
  const uint8_t *pages;     // [num_pages, stride]: P x 128 B codes, then P fp32 scales
  const int32_t *bt;        // [R, bt_cols]
  const int32_t *lens;      // [R]
  const float *w;           // [R, H] (16-B aligned rows: H * 4 is a multiple of 16)
  float *out;               // [R, out_cols]
  unsigned long long *prof; // development profile (IXL_LOGITS_V2_PROF), else NULL
  int64_t stride, bt_cols, out_cols, units, per_cta;
  int32_t num_pages, P, PB, rpp; // PB = positions per box (min(P, 64)); rpp = stride / 128
  int32_t ntile, max_len;        // tiles per row (over out_cols); bt_cols * P clamped
};

// Dynamic shared memory: codes[S][8 KB] | q[NQ][H * 128] | w[NQ][H] | scales[S][64] | bars.
template <int H, int S, int NQ = 2>
struct K2Smem {
  static constexpr int codes = 0;
  static constexpr int q = codes + S * kTileBytes;
  static constexpr int w = q + NQ * H * 128;
  static constexpr int scales = w + NQ * H * 4;
  static constexpr int bars = scales + S * kTile * 4;
  static constexpr int total = bars + (2 * S + 4) * 8;
  static constexpr int alloc = total + 1024; // room for a base aligned up to 1024 (unused)
};

#if IXL_SM90_DEVICE
// A row's length as the kernel uses it: clamped into [0, bt_cols * P].
__device__ __forceinline__ int32_t row_len(const K2Params &p, int64_t row) {
  const int32_t l = p.lens[row];
  return l < 0 ? 0 : l > p.max_len ? p.max_len : l;
}

#endif

// Variant bits of k2_fp8_kernel (IXL_LOGITS_V2_K2, development; 0 is the default kernel):
// kV_SINGLE: one accumulator, each tile's wgmma waited before its epilogue (DeepGEMM's form),
// so 4 CTAs fit an SM at H 64 (96 registers); kV_FAST: the epilogue's key scale applied once
// per logit after the head sum when the warp's 16 positions' scales are finite and >= 0
// (relu(d s) = relu(d) s there; v2_fp8.cuh's epilogue_fp32 formula otherwise: fp32's order is
// free, SPEC 3); kV_COPY: timing ablation, the math warps release each stage unread (no
// wgmma, no epilogue, no stores: wrong results): the copy side's limit.
// kV_Q1 (with kV_SINGLE only: a double-buffered math warpgroup would wait for the next row's Q
// before releasing the slot it needs): one Q slot, so 5 CTAs of 4 stages fit an SM at H 64; the
// producer loads a row's Q once the math warpgroup has finished the previous row.
// kV_NOLOAD: timing ablation, the producer loads no keys (each stage's scales set to 1, the
// stage marked full at once; wrong results): the math side's limit.
// kV_UNI (with kV_SINGLE | kV_Q1 | kV_FAST only; IXL_LOGITS_V2_K2=4x5sfu and 3x6sfu, session 9,
// development): the math warpgroup's loop written for the uniform datapath: the walk over the
// units is the same in every lane (from blockIdx and the parameters) and the one data-dependent
// branch (a tile past the row's length) is a warp vote, so the walk, the stage, its phase and
// the Q slot's state stay in uniform registers and the wgmma descriptors come from their low
// words (tile_mma_lo: UIADD3 / UMOV, no R2UR); the row's output pointer made once a row, int32
// positions. The same tile math (epilogue_fp32_post) and the same barrier protocol as 4x5sf:
// the same bits.
enum : int { kV_SINGLE = 1, kV_FAST = 2, kV_COPY = 4, kV_Q1 = 8, kV_NOLOAD = 16, kV_UNI = 32 };
template <int V>
constexpr int k2_nq() { return (V & kV_Q1) ? 1 : 2; }

// One CTA: a math warpgroup and a producer warp (kThreads), MinBlocks CTAs per SM; an S-stage
// ring of tiles; the math warpgroup double-buffers its accumulator: tile i + 1's wgmma run
// while tile i's epilogue does (wgmma.wait_group 1), unless V has kV_SINGLE.
template <int H, int S, int MinBlocks, int V>
__global__ void __launch_bounds__(kThreads, MinBlocks)
    k2_fp8_kernel(const __grid_constant__ CUtensorMap kmap,
                  const __grid_constant__ CUtensorMap qmap, const K2Params p) {
#if IXL_SM90_DEVICE
  // 1024-B aligned (the 128B swizzle's period), as k1_fp8_kernel's: indexing the array itself
  // keeps the shared address space, so the epilogue's weight and scale reads are LDS (a pointer
  // rounded up through uintptr_t made them generic LD.E with 64-bit addresses)
  extern __shared__ __align__(1024) uint8_t k2_smem[];
  uint8_t *smem = k2_smem;
  constexpr int NQ = k2_nq<V>();
  constexpr bool kProf = V == 0; // the profile (IXL_LOGITS_V2_PROF) in the default kernel only
  static_assert(NQ == 2 || (V & kV_SINGLE), "one Q slot needs the one-accumulator loop");
  using L = K2Smem<H, S, NQ>;
  uint8_t *s_codes = smem + L::codes;
  uint8_t *s_q = smem + L::q;
  float *s_w = reinterpret_cast<float *>(smem + L::w);
  float *s_scales = reinterpret_cast<float *>(smem + L::scales);
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + L::bars);
  uint64_t *empty = full + S, *qfull = empty + S, *qempty = qfull + 2;
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], kMath);
    }
    for (int s = 0; s < NQ; ++s) {
      ptx::mbarrier_init(&qfull[s], 1);
      ptx::mbarrier_init(&qempty[s], kMath);
    }
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  int64_t u0, u1; // PDL's wait and trigger in there: no global access above this line
  ixl_v2::cta_start(tid, kMath, &kmap, &qmap, p.per_cta, p.units, u0, u1);
  long long t_wait = 0; // profile: clocks spent waiting (IXL_LOGITS_V2_PROF)
  const long long t_start = (kProf && p.prof) ? clock64() : 0;

  if (tid >= kMath) {
    // ---------------------------------------------------------------- producer warp
    const int lane = tid & 31;
    int stage = 0, qslot = NQ - 1;
    uint32_t ephase = 1, qephase = 3; // fresh empties pass on parity 1; bit s: Q slot s's
    int64_t row = -1, qrow = -1;
    int32_t len = 0;
    // block-table entries cb .. cb + 31 in `cache` (lane i: entry cb + i), the next 32 in
    // `nextc` (loaded a window ahead, so crossing a window does not wait on a load)
    int64_t cb = 0;
    int32_t cache = 0, nextc = 0;
    const int per = kTile / p.PB;                // boxes per tile
    const int32_t tpp = p.P >= kTile ? p.P / kTile : 1; // tiles per page (P >= 64)
    int32_t pi = 0, sub = 0; // the tile's first page index in the row; tile within the page
    auto bt_at = [&](int64_t j) {
      return p.bt[row * p.bt_cols + (j < p.bt_cols ? j : p.bt_cols - 1)];
    };
    for (ixl_v2::UnitWalk wk(u0, u1, p.ntile); wk.more(); wk.step()) {
      if (wk.r != row) {
        row = wk.r;
        len = row_len(p, row);
        if (p.P >= kTile) pi = wk.t / tpp, sub = wk.t - pi * tpp;
        else pi = wk.t * per, sub = 0;
        cb = pi;
        cache = bt_at(cb + lane);
        nextc = bt_at(cb + 32 + lane);
      } else if (p.P >= kTile) {
        if (++sub == tpp) sub = 0, ++pi;
      } else {
        pi += per;
      }
      const int32_t pos0 = wk.t * kTile;
      if (pos0 >= len) continue; // an empty tile: -inf stores by the math warpgroup only
      if (row != qrow) {
        qrow = row;
        qslot = NQ == 2 ? qslot ^ 1 : 0;
        const long long w0 = (kProf && p.prof) ? clock64() : 0;
        mbar_wait(&qempty[qslot], (qephase >> qslot) & 1);
        if (kProf && p.prof) t_wait += clock64() - w0;
        qephase ^= 1u << qslot;
        if (lane == 0) {
          ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                         &qfull[qslot], (uint32_t)(H * 128 + H * 4));
          const int32_t c[2] = {0, (int32_t)(row * H)};
          ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, s_q + qslot * H * 128,
                                    &qmap, c, &qfull[qslot]);
          ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, s_w + qslot * H,
                             p.w + row * H, (uint32_t)(H * 4), &qfull[qslot]);
        }
      }
      // the tile's pages: pi .. pi + per - 1 (clamped into the block table by bt_at)
      while (pi + per - 1 >= cb + 32) { // past the window: slide by 32 (rarely twice)
        cb += 32;
        cache = nextc;
        nextc = bt_at(cb + 32 + lane);
      }
      const long long w0 = (kProf && p.prof) ? clock64() : 0;
      mbar_wait(&empty[stage], ephase);
      if (kProf && p.prof) t_wait += clock64() - w0;
      if constexpr (V & kV_NOLOAD) {
        s_scales[stage * kTile + lane] = 1.0f, s_scales[stage * kTile + 32 + lane] = 1.0f;
        __syncwarp();
        if (lane == 0) ptx::mbarrier_arrive(&full[stage]);
      } else {
        k2_copy_tile(p, &kmap, lane, per, cache, pi, cb, sub, s_codes + stage * kTileBytes,
                     s_scales + stage * kTile, &full[stage]);
      }
      if (++stage == S) stage = 0, ephase ^= 1;
    }
    if (kProf && p.prof && lane == 0) {
      atomicAdd(&p.prof[2], (unsigned long long)t_wait);
      atomicAdd(&p.prof[3], (unsigned long long)(clock64() - t_start));
    }
    return;
  }

  // ---------------------------------------------------------------- math warpgroup
  const int warp = tid >> 5, lane = tid & 31, t4 = lane & 3;
  const int r0 = 16 * warp + (lane >> 2); // this lane's positions in a tile: r0, r0 + 8
  const float ninf = __uint_as_float(0xff800000u);
  struct Tile {
    int64_t row;
    int32_t pos0, len;
    int stage, qslot;
    float sc0, sc1;
  };
  ixl_v2::MathRing ring;
  ring.qslot = NQ - 1;
  int32_t row = -1;
  int32_t len = 0;
  ixl_v2::UnitWalk wk(u0, u1, p.ntile);
  // the next tile that has keys (empty ones get their -inf stores on the way); false at the end
  auto next = [&](Tile &c) -> bool {
    return ixl_v2::next_tile(
        wk, row, [&](int64_t r) { len = row_len(p, r); },
        [&](int64_t, int32_t pos0) { return pos0 >= len; },
        [&](int64_t r, int32_t pos0) { // nothing to read: -inf where the tile has columns
          if (tid < kTile && pos0 + tid < p.out_cols) p.out[r * p.out_cols + pos0 + tid] = ninf;
        },
        [&](int64_t r, int32_t pos0) { c.row = r, c.pos0 = pos0, c.len = len; });
  };
  // wait for tile c's stage (and its row's Q), then issue its wgmma into acc (kV_COPY: never,
  // but kept in the code: make sass wants a QGMMA in every v2 kernel)
  auto issue = [&](Tile &c, float(&acc)[H / 2]) {
    ixl_v2::ring_issue<H, S, NQ>(ring, (V & kV_SINGLE) ? row : (int32_t)c.row, full, qfull,
                                 s_codes, s_q,
                                 !(V & kV_COPY) || p.out_cols < 0, acc,
                                 kProf && p.prof != nullptr, t_wait, c.stage, c.qslot);
    c.sc0 = s_scales[c.stage * kTile + r0], c.sc1 = s_scales[c.stage * kTile + r0 + 8];
  };
  // tile c's wgmma are done (the caller waited): release its stage, reduce, store; release its
  // Q slot when the next tile (if any) uses the other one
  auto finish = [&](const Tile &c, float(&acc)[H / 2], bool last, int next_qslot) {
    fence_operand(acc);
    ptx::mbarrier_arrive(&empty[c.stage]); // this thread's reads of the stage are done
    float s0 = 0.0f, s1 = 0.0f;
    if constexpr ((V & kV_FAST) && !(V & kV_COPY))
      ixl_v2::epilogue_fp32_post<H>(acc, c.sc0, c.sc1, s_w + c.qslot * H, t4, s0, s1);
    else if constexpr (!(V & kV_COPY))
      ixl_v2::epilogue_fp32<H>(acc, c.sc0, c.sc1, s_w + c.qslot * H, t4, s0, s1);
    if (last || next_qslot != c.qslot) ptx::mbarrier_arrive(&qempty[c.qslot]);
    if ((V & kV_COPY) && p.out_cols < 0) p.out[tid] = acc[0]; // never: keeps the wgmma
    // the one-accumulator loop finishes a tile before it looks for the next: the walk's row
    // and length are still the tile's (fewer registers live)
    const int64_t crow = (V & kV_SINGLE) ? row : c.row;
    const int32_t clen = (V & kV_SINGLE) ? len : c.len;
    if (!(V & kV_COPY) && t4 < 2) { // lane 0 of the quad stores position r0, lane 1 r0 + 8
      const int32_t pos = c.pos0 + r0 + 8 * t4;
      if (pos < p.out_cols) p.out[crow * p.out_cols + pos] = pos < clen ? (t4 ? s1 : s0) : ninf;
    }
  };
  if constexpr ((V & kV_UNI) != 0) {
    static_assert((V & (kV_SINGLE | kV_Q1 | kV_FAST)) == (kV_SINGLE | kV_Q1 | kV_FAST) &&
                      !(V & (kV_COPY | kV_NOLOAD)), "kV_UNI: the 4x5sf form");
    const uint32_t a_lo = ixl_v2::desc_lo(s_codes), q_lo = ixl_v2::desc_lo(s_q);
    int stage = 0;
    uint32_t fph = 0, qph = 0;
    bool qheld = false; // Q slot 0 waited for `row` (released once the walk leaves the row)
    float *orow = p.out;
    float acc[H / 2];
    // (every loop-control condition a vote: the values are warp-uniform, the votes tell ptxas)
    auto U = [](bool c) { return __any_sync(0xffffffffu, c); };
    __syncwarp();
    for (ixl_v2::UnitWalk uw(u0, u1, p.ntile); U(uw.more()); uw.step()) {
      if (U(uw.r != row)) {
        if (qheld) ptx::mbarrier_arrive(&qempty[0]); // the row's last read of its Q is done
        qheld = false;
        row = uw.r;
        len = row_len(p, row);
        orow = p.out + (int64_t)row * p.out_cols;
      }
      const int32_t pos0 = uw.t * kTile;
      if (U(pos0 >= len)) { // nothing to read: -inf where the tile has columns
        if (tid < kTile && pos0 + tid < p.out_cols) orow[pos0 + tid] = ninf;
        continue;
      }
      if (U(!qheld)) {
        mbar_wait(&qfull[0], qph);
        qph ^= 1;
        qheld = true;
      }
      mbar_wait(&full[stage], fph);
      const float sc0 = s_scales[stage * kTile + r0], sc1 = s_scales[stage * kTile + r0 + 8];
      ixl_v2::tile_mma_lo<H>(acc, a_lo + stage * (kTileBytes >> 4), q_lo);
      wgmma_wait<0>();
      fence_operand(acc);
      ptx::mbarrier_arrive(&empty[stage]); // this thread's reads of the stage are done
      if (++stage == S) stage = 0, fph ^= 1;
      float s0, s1;
      ixl_v2::epilogue_fp32_post<H>(acc, sc0, sc1, s_w, t4, s0, s1);
      if (t4 < 2) { // lane 0 of the quad stores position r0, lane 1 r0 + 8
        const int32_t pos = pos0 + r0 + 8 * t4;
        if (pos < p.out_cols) orow[pos] = pos < len ? (t4 ? s1 : s0) : ninf;
      }
    }
    if (qheld) ptx::mbarrier_arrive(&qempty[0]);
  } else if constexpr (V & kV_SINGLE) { // one accumulator: each tile waited before its epilogue
    float acc[H / 2];
    Tile a;
    for (bool have = next(a); have;) {
      issue(a, acc);
      wgmma_wait<0>();
      finish(a, acc, false, a.qslot); // the Q slot: below, once the next tile's row is known
      const int32_t arow = (int32_t)a.row;
      const int aq = a.qslot;
      have = next(a);
      if (!have || a.row != arow) ptx::mbarrier_arrive(&qempty[aq]); // after its reads above
    }
  } else {
    ixl_v2::walk_double<H, Tile>(next, issue, [] { wgmma_wait<1>(); }, finish);
  }
  if (kProf && p.prof && tid == 0) {
    atomicAdd(&p.prof[0], (unsigned long long)t_wait);
    atomicAdd(&p.prof[1], (unsigned long long)(clock64() - t_start));
  }
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// ------------------------------------------------------------------ host
// 1 when v2's kernel takes this K2 call (else v1 runs it).
inline bool k2_takes(const ixl_logits_call *c) {
  const ixl_qk *in = c->in;
  const int P = in->page_size;
  const bool page_ok = P % 64 == 0 || P == 8 || P == 16 || P == 32;
  const ixl_tensor *al16[] = {in->q_codes, in->k_pages, c->weights}; // weights: bulk copies
  for (const ixl_tensor *t : al16)
    if ((uintptr_t)t->data % 16) return false;
  const ixl_tensor *al4[] = {c->out, c->ke, c->block_table};
  for (const ixl_tensor *t : al4)
    if ((uintptr_t)t->data % 4) return false;
  return in->kv_format == IXL_FP8 && c->reduction == IXL_REDUCE_FP32 && (c->H == 32 || c->H == 64)
         && page_ok && c->num_pages * (c->page_stride / 128) < INT32_MAX &&
         c->R * c->H < INT32_MAX && c->out->shape[1] < INT32_MAX;
}

// The kernel configurations built: S stages x M CTAs per SM (each one wave of M * sms CTAs),
// and the variants (kV_*). The default is the fastest measured on the H200 (BENCHMARKS.md); the
// development switch IXL_LOGITS_V2_K2 picks another, read once per process: 8x2, 6x3, 4x4 (H 32
// only), and at H 64 (else the default): 4x4s (kV_SINGLE: 4 stages x 4 CTAs, one accumulator),
// 6x3f and 4x4sf (kV_FAST), 4x5s and 4x5sf (kV_Q1: 4 stages x 5 CTAs, one accumulator, one Q
// slot), copy, copy4 and copy5 (kV_COPY ablations of 6x3, 4x4s and 4x5s), noload5 (kV_NOLOAD
// of 4x5sf) (the ablations: wrong results), 3x6sf (3 stages x 6 CTAs, 64 registers), 4x5sfu
// and 3x6sfu (4x5sf and 3x6sf with kV_UNI). H200 session 9 visit 2 (k2graph, single / graph
// per launch, PDL off; no sanitizer run yet, so off): 64x128K 4x5sf 298.9 / 289.6, 4x5sfu
// 290.7 / 282.4, 3x6sfu 289.6 / 281.1, copy5 (the copies alone) 274.7 / 266.1; 16x128K 86.2 /
// 77.2, 83.6 / 75.0, 82.9 / 74.6, 78.0 / 69.9; test_cuda_logits v2 paged tests pass (4x5sfu).
enum K2Cfg {
  K2_8x2 = 0, K2_6x3, K2_4x4, K2_4x4s, K2_6x3f, K2_4x4sf, K2_copy, K2_copy4, K2_4x5s, K2_4x5sf,
  K2_copy5, K2_noload5, K2_3x6sf, K2_4x5sfu, K2_3x6sfu, K2_auto
};
// Unset (K2_auto): H 64 on 4x5sfu since session 10 (4x5sf before; session 7: parity and
// sanitizers clean on the H200), H 32 on 6x3 (the development variants are built for H 64 only).
constexpr K2Cfg kK2Default = K2_auto;

static K2Cfg k2_cfg() {
  static const K2Cfg cfg = [] {
    const char *e = getenv("IXL_LOGITS_V2_K2");
    if (!e) return kK2Default;
    static const char *const names[] = {"8x2",   "6x3",  "4x4",   "4x4s",  "6x3f",
                                        "4x4sf", "copy", "copy4", "4x5s",  "4x5sf",
                                        "copy5", "noload5", "3x6sf", "4x5sfu", "3x6sfu"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); ++i)
      if (!strcmp(e, names[i])) return (K2Cfg)i;
    return kK2Default;
  }();
  return cfg;
}

// Development profile (IXL_LOGITS_V2_PROF=1, never in tests or graphs: it synchronizes): the
// math warpgroups' and producers' clocks waiting on barriers against their total, summed
// over CTAs, printed to stderr after each launch; counted by the variant-0 kernels only
// (IXL_LOGITS_V2_K2=6x3, 8x2, 4x4), the others print zeros.
__device__ unsigned long long g_k2_prof[4];
static bool k2_prof_on() {
  static const bool on = getenv("IXL_LOGITS_V2_PROF") && getenv("IXL_LOGITS_V2_PROF")[0] == '1';
  return on;
}

// A persistent kernel's shared-memory attributes set and its occupancy asked once per device
// and process (they do not change; asking costs driver calls on every launch otherwise), at
// most M CTAs an SM; `cached` is the kernel's own (one per instantiation). <= 0 with *err set
// when the driver refused. print: the result on stderr (the profile switch), the kernel named
// as `what`<H h, s stages, `tag` v>.
template <typename Kern>
static int cached_occupancy(ixl_ctx *ctx, std::atomic<int> (&cached)[64], Kern kern, int threads,
                            int smem, int M, bool print, const char *what, const char *tag,
                            int h, int s, int v, cudaError_t *err) {
  const int dev = ixl_ctx_device(ctx);
  const bool slot = dev >= 0 && dev < 64;
  int occ = slot ? cached[dev].load(std::memory_order_relaxed) : 0;
  if (occ > 0) return occ;
  // the whole shared-memory carveout, else the driver may fit fewer CTAs per SM than the
  // grid assumes and run the persistent grid in two waves
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, threads, smem);
  if (e != cudaSuccess) {
    *err = e;
    return 0;
  }
  if (occ < 1) occ = 1;
  if (occ > M) occ = M;
  if (print)
    fprintf(stderr, "logits v2 %s<H %d, %d stages, %s %d>: %d CTAs per SM (designed for %d), %d B "
            "smem\n", what, h, s, tag, v, occ, M, smem);
  if (slot) cached[dev].store(occ, std::memory_order_relaxed);
  return occ;
}

template <int H, int S, int M, int V>
static int k2_occupancy(ixl_ctx *ctx, cudaError_t *err) {
  static std::atomic<int> cached[64];
  return cached_occupancy(ctx, cached, k2_fp8_kernel<H, S, M, V>, kThreads,
                          K2Smem<H, S, k2_nq<V>()>::alloc, M, k2_prof_on(), "K2", "variant", H, S,
                          V, err);
}

template <int H, int S, int M, int V = 0>
static ixl_status launch_k2_cfg(ixl_ctx *ctx, const ixl_logits_call *c, K2Params &p) {
  const char *op = "dense_logits_paged";
  const ixl_qk *in = c->in;
  cudaError_t e = cudaSuccess;
  const int occ = k2_occupancy<H, S, M, V>(ctx, &e);
  if (occ <= 0) return ixl_cuda_status(ctx, e, "cudaFuncSetAttribute (logits v2 K2)");
  int64_t grid = (int64_t)occ * ixl::sm_count(ctx); // one wave: every CTA resident at once
  if (grid > p.units) grid = p.units;
  p.per_cta = ixl_ceil_div(p.units, grid);
  grid = ixl_ceil_div(p.units, p.per_cta);
  CUtensorMap kmap, qmap;
  char why[160];
  if (tma_map_2d(&kmap, p.pages, CU_TENSOR_MAP_DATA_TYPE_UINT8, 128,
                 (uint64_t)p.num_pages * (uint64_t)p.rpp, 128, 128, (uint32_t)p.PB,
                 CU_TENSOR_MAP_SWIZZLE_128B, why, sizeof why) ||
      tma_map_2d(&qmap, in->q_codes->data, CU_TENSOR_MAP_DATA_TYPE_UINT8, 128,
                 (uint64_t)(c->R * H), 128, 128, (uint32_t)H, CU_TENSOR_MAP_SWIZZLE_128B, why,
                 sizeof why))
    return ixl_set_error(ctx, IXL_ERR_BACKEND, "%s (v2): %s", op, why);
  const bool prof = k2_prof_on();
  if (prof) {
    static const unsigned long long zero[4] = {0, 0, 0, 0};
    cudaMemcpyToSymbolAsync(g_k2_prof, zero, sizeof zero, 0, cudaMemcpyHostToDevice,
                            ixl::stream_of(ctx));
    cudaGetSymbolAddress((void **)&p.prof, g_k2_prof);
  }
  ixl_status st = ixl::launch_pdl(ctx, "dense_logits_paged kernel (v2)", k2_fp8_kernel<H, S, M, V>,
                                  dim3((unsigned)grid), dim3(kThreads),
                                  K2Smem<H, S, k2_nq<V>()>::alloc, 1, kmap, qmap, p);
  if (prof && st == IXL_OK) {
    unsigned long long v[4] = {0, 0, 0, 0};
    cudaMemcpyFromSymbolAsync(v, g_k2_prof, sizeof v, 0, cudaMemcpyDeviceToHost,
                              ixl::stream_of(ctx));
    cudaStreamSynchronize(ixl::stream_of(ctx));
    fprintf(stderr,
            "logits v2 K2 prof: R %lld cols %lld grid %lld x %lld units: math waits %.1f%% "
            "(%.0f clk/CTA), producer waits %.1f%% (%.0f clk/CTA)\n",
            (long long)c->R, (long long)p.out_cols, (long long)grid, (long long)p.per_cta,
            v[1] ? 100.0 * (double)v[0] / (double)v[1] : 0.0, (double)v[1] / (double)grid,
            v[3] ? 100.0 * (double)v[2] / (double)v[3] : 0.0, (double)v[3] / (double)grid);
  }
  return st;
}

template <int H>
ixl_status launch_k2(ixl_ctx *ctx, const ixl_logits_call *c) {
  const ixl_qk *in = c->in;
  K2Params p = {};
  p.pages = (const uint8_t *)in->k_pages->data;
  p.bt = (const int32_t *)c->block_table->data;
  p.lens = (const int32_t *)c->ke->data;
  p.w = (const float *)c->weights->data;
  p.out = (float *)c->out->data;
  p.stride = c->page_stride;
  p.bt_cols = c->block_table->shape[1];
  p.out_cols = c->out->shape[1];
  p.num_pages = (int32_t)c->num_pages;
  p.P = in->page_size;
  p.PB = p.P < kTile ? p.P : kTile;
  p.rpp = (int32_t)(p.stride / 128);
  p.ntile = (int32_t)ixl_ceil_div(p.out_cols, kTile);
  const int64_t ml = p.bt_cols * (int64_t)p.P;
  p.max_len = (int32_t)(ml < INT32_MAX ? ml : INT32_MAX);
  p.units = c->R * p.ntile;
  if (c->R == 0 || p.out_cols == 0 || p.num_pages == 0 || p.bt_cols == 0) {
    // nothing to read: v1 writes the -inf rows (and answers an empty call)
    return ixl_cuda_logits_v1_dense(ctx, c, 4096);
  }
  if constexpr (H == 64) { // the development variants (H 64: the benchmark's cases)
    // unset = 4x5sfu (session 10 visit 1, switch set: racecheck 0 hazards, memcheck 0 errors,
    // dense_paged 4/4; k2graph hashes seed 19005 4 of 4 equal to 4x5sf's; 64x128K single /
    // graph 298.8 / 290.2 -> 290.9 / 282.5 us, 1x128K graph 7.96 -> 7.73; 3x6sfu 289.7 /
    // 281.5 but 8.21 at 1x128K graph, past the 8 us target)
    switch (k2_cfg() == kK2Default ? K2_4x5sfu : k2_cfg()) {
    case K2_4x4s: return launch_k2_cfg<H, 4, 4, kV_SINGLE>(ctx, c, p);
    case K2_6x3f: return launch_k2_cfg<H, 6, 3, kV_FAST>(ctx, c, p);
    case K2_4x4sf: return launch_k2_cfg<H, 4, 4, kV_SINGLE | kV_FAST>(ctx, c, p);
    case K2_copy: return launch_k2_cfg<H, 6, 3, kV_COPY>(ctx, c, p);
    case K2_copy4: return launch_k2_cfg<H, 4, 4, kV_SINGLE | kV_COPY>(ctx, c, p);
    case K2_4x5s: return launch_k2_cfg<H, 4, 5, kV_SINGLE | kV_Q1>(ctx, c, p);
    case K2_4x5sf: return launch_k2_cfg<H, 4, 5, kV_SINGLE | kV_Q1 | kV_FAST>(ctx, c, p);
    case K2_copy5: return launch_k2_cfg<H, 4, 5, kV_SINGLE | kV_Q1 | kV_COPY>(ctx, c, p);
    case K2_3x6sf: return launch_k2_cfg<H, 3, 6, kV_SINGLE | kV_Q1 | kV_FAST>(ctx, c, p);
    case K2_4x5sfu:
      return launch_k2_cfg<H, 4, 5, kV_SINGLE | kV_Q1 | kV_FAST | kV_UNI>(ctx, c, p);
    case K2_3x6sfu:
      return launch_k2_cfg<H, 3, 6, kV_SINGLE | kV_Q1 | kV_FAST | kV_UNI>(ctx, c, p);
    case K2_noload5:
      return launch_k2_cfg<H, 4, 5, kV_SINGLE | kV_Q1 | kV_FAST | kV_NOLOAD>(ctx, c, p);
    default: break;
    }
  }
  switch (k2_cfg() == kK2Default ? (H == 64 ? K2_4x5sf : K2_6x3) : k2_cfg()) {
  case K2_8x2: return launch_k2_cfg<H, 8, 2>(ctx, c, p);
  case K2_4x4: // H 64's two accumulators do not fit 4 CTAs' registers (96): 6x3 instead
    if constexpr (H == 32) return launch_k2_cfg<H, 4, 4>(ctx, c, p);
    [[fallthrough]];
  default: return launch_k2_cfg<H, 6, 3>(ctx, c, p);
  }
}

} // namespace ixl_v2_k2

#endif
