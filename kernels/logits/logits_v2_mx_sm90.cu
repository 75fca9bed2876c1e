// logits/logits_v2_mx_sm90.cu - variant v2 of the logits family for MXFP4 keys (issue 13):
// K1 (ragged), K2 (paged) and K5 (ragged and paged) on Hopper's e4m3 wgmma with e2m1 widened
// to e4m3 (exact) and one k32 wgmma per 32-element scale group into its own accumulator, the
// groups combined in SPEC 3's order, so the bf16 reduction is bitwise the CPU reference's.
// logits_v2_sm90.cu's ixl_cuda_logits_v2 sends every MXFP4 call here.
//
// One kernel template for the four modes, so SPEC 3's K5 == K1/K2 (bf16) is structural: the
// same tile math and the same reduction code run for every mode; only where a tile's keys come
// from and where its logits go differ.
// - A CTA is one warpgroup (128 threads). It owns RB query rows (K1: 2 at H 32, 1 at H 64;
//   K2, K5: 1) and a chunk of output columns (at most 4096; the chunk is sized so the grid
//   fills the GPU), like v1's work items: ragged rows of any lengths balance over the grid
//   with no host knowledge of the lengths.
// - Swap-AB: the wgmma's M is 64 key slots, its N the CTA's RB * H (row, head) columns. Per
//   tile and scale group one m64nNk32 RS wgmma: A = the keys widened in registers (the zero-
//   table widening, v2_mx.cuh), B = the query, widened once per CTA into a 128B-swizzled tile
//   with its group exponents folded in (exactly). Four accumulators, scale-d 0 each.
// - Key tiles of 64 slots stream through a cp.async ring (kStages) of raw codes (64 B a slot,
//   the groups XOR-swizzled so the fragment reads are conflict-free) and scale words; K2/K5
//   fetch the chunk's page ids / sparse-block bases into shared memory once, like v1. One
//   barrier per tile.
// - Epilogue per lane (2 key slots x RB*H/4 columns): the group combine of v2_mx.cuh (fast:
//   5 FP instructions a dot, groups 0-1 while groups 2-3's wgmma run, 2^(qc - 127) carried by
//   the weights where that is exact; else, for the lane quad, the exact dots d and the stored
//   weights, with the CPU's formula on NaN scales or out-of-window exponents), then
//   the fp32 head sum (lane sums, 2 shfl_xor) or SPEC 3's bf16 chain in registers: the
//   heads h % 4 in {0, 1} of a position lie in lanes t4 = 0 and 2, {2, 3} in 1 and 3, so one
//   shfl_xor(2) per 8 heads puts each chain in head order in one lane, fma.rn.bf16x2 runs
//   it, and one shfl_xor(1) + add.bf16x2 + add.bf16 finish: bf16(bf16(s0 + s2) + bf16(s1 + s3)).
// - -inf outside each row's range in K1 (whatever `clean` says, as the README documents), at
//   columns past the context in K2, and at K5 columns whose key is outside the row or past the
//   valid prefix of the ids (no read there).
// IXL_LOGITS_V2_MX_V3 (off by default; see v3_mask and mx3_kernel): K1 and ragged K5 at H 32
// and 64 on mx3_kernel, the kernel above with shared-window addressing, K1's tiles by TMA into
// an mbarrier ring (one issuing thread) and the deferred key factor (3 fma a dot, v2_mx.cuh).
// H200, 2026-12-02 (V3=7): K1 2048x8192 666 -> 579 us, 4096x65536 10.95 -> 9.54 ms, ragged K5
// 4096x16K 2.97 -> 2.57 ms; its last fix (fold vs fast, below) not yet run on the GPU.
// IXL_LOGITS_V2_MX_NEXT=1|2 (off by default; not yet run on the GPU): K1 and ragged K5 at H 32
// on mx_next_kernel instead (the key tile widened once into shared memory, SS wgmma, several
// rows' warpgroups sharing it in K1; see "the NEXT kernels" below).
// Not here (v1 runs them): H other than 32 and 64, misaligned tensors, calls with more than
// 2^31 - 1 output columns.
// Benchmark: IXL_LOGITS_VARIANT=v2 build-gpu/bench_logits CASES.json 20 mxfp4 (BENCHMARKS.md,
// "MXFP4 on wgmma"). H200, 2026-12-01: 1.25-2.5x v1 (K1 2048x8192 666 us, K2 64x128K 436 us,
// K5 paged 71 us, K5 ragged 2.94 ms); one warpgroup per CTA, issue- and latency-bound.
//
// sass-limits: mx_kernel registers 255 shared 1024
// sass-limits: mx_next_kernel registers 128 shared 1024
// sass-limits: mx3_kernel registers 255 shared 1024
#include "logits/logits.h"
#include "cuda/launch.cuh"
#include "logits/block_scores.cuh"
#include "cuda/sm80.cuh"
#include "cuda/sm90.cuh"
#include "logits/v2_mx.cuh"
#include "logits/v2_mx_common.cuh" // what the MXFP4 v2 kernels share
#include "logits/v2_mx_ws.h"       // the hooks: the warp-specialized K1, K2, K5 kernels
#include "numerics/scalar.h"

#include <cuda_bf16.h>

#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

namespace {

using namespace ixl::sm90;
using namespace ixl::v2mx; // kTile: key slots per tile (the wgmma M)

constexpr int kThreads = 128;        // one warpgroup
constexpr int kMaxChunk = 4096;      // output columns per CTA at most
constexpr int kPre = kMaxChunk / 4 + 2; // prefetched page ids / block bases per CTA

enum Mode { K1 = 0, K2 = 1, K5R = 2, K5P = 3 };

struct Params {
  const uint8_t *q_codes;   // [R, H, 64]
  const uint32_t *q_scales; // [R, H]
  const uint8_t *k_codes;   // ragged [N, 64]
  const uint32_t *k_scales; // ragged [N]
  const uint8_t *k_pages;   // paged [num_pages, stride]
  const void *w;            // [R, H] fp32 or bf16
  const int32_t *ks, *ke;   // [R] (K1 ks/ke, K5R row_ks/row_ke; K2 ke = context_lens; K5P ke)
  const int32_t *bt;        // paged [R, bt_cols]
  const int32_t *ids;       // K5 [R, nsb]
  void *out;                // [R, out_cols]
  int64_t R, N, stride, num_pages, bt_cols, nsb, out_cols, chunk, nchunks, nrb;
  int P, Plog, sbk, sbklog, aligned, compressed;
  // K3's block scores (issue 14's fused K3; EMIT kernels only, IXL_LOGITS_V2_MX_EMIT): scores
  // [R, bs_cols] preset to 0xFFFFFFFF words, nblocks [R]; cbs, its log2 (-1: not a power of 2)
  float *bs;
  int32_t *bs_nblocks;
  int64_t bs_cols;
  int bs_cbs, bs_clog;
};

template <int MODE>
struct Cfg {
  static constexpr int stages = MODE == K1 ? 4 : 8;
};
// V3's stages: K1 8 (TMA ring), else as above.
template <int MODE, bool V3>
struct V3Cfg {
  static constexpr int stages = V3 && MODE == K1 ? 8 : Cfg<MODE>::stages;
};

// Dynamic shared memory: q tile (1024-aligned) | raw stages | scale words | flags | per
// column info | prefetch.
template <int MODE, int NC, int S_ = Cfg<MODE>::stages, int SCW_ = kTile>
struct Smem {
  static constexpr int S = S_;
  static constexpr int SCW = SCW_; // scale words a stage (V3 K1: 96, a 128-aligned 17 x 16 B box)
  static constexpr int q = 0;
  static constexpr int raw = q + NC * 128;
  static constexpr int sc = raw + S * kTile * 64;
  static constexpr int fl = sc + S * SCW * 4;
  static constexpr int hq = fl + S * kTile;    // u32 qeff per column
  static constexpr int ht = hq + NC * 4;       // u32 packed t_g + 8 per column (Q widening)
  static constexpr int hc = ht + NC * 4;       // f32 2^(qc - 127) per column
  static constexpr int wo = hc + NC * 4;       // f32 the column's weight (slow path)
  static constexpr int wq = wo + NC * 4;       // f32 the weight times 2^(qc - 127) (fast path)
  static constexpr int hf = wq + NC * 4;       // u8 fast per column
  static constexpr int pre = (hf + NC + 15) & ~15;
  static constexpr int pre_bytes = MODE == K1 ? 0 : MODE == K2 ? kPre * 4 : MODE == K5R ? kPre * 8
                                                                                       : kPre * 16;
  static constexpr int total = pre + pre_bytes;
  static constexpr int alloc = total + 1024;
};

#if IXL_SM90_DEVICE
// ---- K3's block scores (EMIT: K1 compressed / K2, fp32; logits v1's scheme, logits_v1.cuh;
// the max and the atomic: logits/block_scores.cuh)
__device__ __forceinline__ int bs_blk(const Params &p, int col) {
  return p.bs_clog >= 0 ? col >> p.bs_clog : col / p.bs_cbs;
}
// The epilogue's chains: the lanes of one t4 in {0, 1} of a warp hold 8 consecutive slots
// (lane 4 q + t4: slot 16 warp + 8 t4 + q), so a shfl_down by 4 k is the slot k later. Lane:
// col its request-local position (-1: none), valid positions [col, col + room) ahead of it
// in the row (room >= 1), logit v, len the row's length. Each block segment of a chain
// reduces to its first slot, which adds one atomic; the newest position adds +inf. Every lane
// of the warp calls it (lanes t4 >= 2 with col -1). cfirst: the first position of the CTA's
// range in the row (the slot before it is another CTA's or none).
__device__ __forceinline__ void bs_emit_chain(const Params &p, int64_t row, int col, int64_t room,
                                              int64_t cfirst, int64_t len, float v, int lane) {
  const bool ok = col >= 0;
  const int cm = ok ? col - bs_blk(p, col) * p.bs_cbs : 0; // col % cbs
  const int q = lane >> 2;
  float m = v;
#pragma unroll
  for (int k = 1; k < 8; k <<= 1) {
    const float om = __shfl_down_sync(0xffffffffu, m, 4 * k);
    if (q + k < 8 && k < room && cm + k < p.bs_cbs) m = ixl_bs::nan_max(m, om);
  }
  if (!ok) return;
  float *dst = p.bs + row * p.bs_cols + bs_blk(p, col);
  // the segment's first slot: the chain's first, the block's first or the range's first
  if (q == 0 || cm == 0 || col == cfirst) ixl_bs::score_max(dst, m);
  if (col == len - 1) ixl_bs::score_max(dst, __uint_as_float(0x7f800000u));
}
#endif

// CTAs per SM the register cap is set for: 2 at N = 64 (128 accumulator registers), else 3;
// 4 for ragged K5 at N = 32, which fits 128 registers without spilling (K2 and paged K5 spill).
constexpr int min_ctas(int mode, int nc) { return nc > 32 ? 2 : mode == K5R ? 4 : 3; }

#if IXL_SM90_DEVICE
// MODE: Mode; H: heads; RB: rows per CTA (NC = RB * H wgmma columns); BF16: the reduction;
// V3: the V3 path (IXL_LOGITS_V2_MX_V3, see "V3" below; kmap/smap its K1 tensor maps).
// EMIT: K1 (compressed) / K2 with the fp32 reduction also emit K3's block scores (p.bs set;
// IXL_LOGITS_V2_MX_EMIT=1, variants.c's v2_emits): instantiations of their own, so the other
// kernels' code is unchanged.
template <int MODE, int H, int RB, bool BF16, bool V3, bool COMB = false, bool EMIT = false>
__device__ __forceinline__ void mx_body(const Params &p, const CUtensorMap *kmap,
                                        const CUtensorMap *smap) {
  constexpr int NC = RB * H;
  constexpr int S = V3Cfg<MODE, V3>::stages;
  constexpr int NJ = NC / 8; // accumulator column blocks of 8
  constexpr bool kTma = V3 && MODE == K1; // K1's tiles by TMA (one thread), mbarrier ring
  // kTma: a stage's scale words are a box of 17 rows of 4 (the positions 4 floor(n0 / 4) ..
  // + 67, so position n0 + i is word (n0 & 3) + i; a box with its inner coordinate 0, since
  // boxes at unaligned inner coordinates faulted on the H200), 96 words apart
  constexpr int SCW = kTma ? 96 : kTile;
  using L = Smem<MODE, NC, S, SCW>;
  constexpr bool kPaged = MODE == K2 || MODE == K5P;
  constexpr bool kSparse = MODE == K5R || MODE == K5P;
  constexpr bool kEmit = EMIT && !BF16 && (MODE == K1 || MODE == K2);
  extern __shared__ uint8_t smem_raw[];
  // V3: the 1024-aligned base as an offset of smem_raw, so every pointer stays in the shared
  // window (LDS/STS with 32-bit addresses; the cast through uintptr_t makes them generic)
  uint8_t *smem =
      V3 ? smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u)
         : reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                       ~static_cast<uintptr_t>(1023));
  uint8_t *s_q = smem + L::q, *s_raw = smem + L::raw, *s_fl = smem + L::fl, *s_hf = smem + L::hf;
  uint32_t *s_sc = reinterpret_cast<uint32_t *>(smem + L::sc);
  uint32_t *s_hq = reinterpret_cast<uint32_t *>(smem + L::hq);
  uint32_t *s_ht = reinterpret_cast<uint32_t *>(smem + L::ht);
  float *s_hc = reinterpret_cast<float *>(smem + L::hc);
  float *s_wo = reinterpret_cast<float *>(smem + L::wo);
  float *s_wq = reinterpret_cast<float *>(smem + L::wq);
  int32_t *pre_page = reinterpret_cast<int32_t *>(smem + L::pre);   // K2
  int64_t *pre_base = reinterpret_cast<int64_t *>(smem + L::pre);   // K5
  int32_t *pre_pg5 = reinterpret_cast<int32_t *>(smem + L::pre + kPre * 8);
  int32_t *pre_sl5 = reinterpret_cast<int32_t *>(smem + L::pre + kPre * 12);
  __shared__ int64_t s_lo[RB], s_hi[RB], s_co[RB];
  __shared__ int64_t s_len[kEmit && MODE == K1 ? RB : 1]; // K1 block scores: the row's len
  __shared__ int s_nvalid;
  __shared__ uint64_t s_full[kTma ? S : 1]; // kTma: stage s's tile has landed

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, t4 = lane & 3;
  if (kTma && tid == 0) {
#pragma unroll
    for (int s = 0; s < S; s++) ptx::mbarrier_init(&s_full[s], 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster); // before the first use
  }
  const int64_t b = blockIdx.x;
  int64_t rb, ch;
  if (MODE == K1) {
    rb = b % p.nrb; // a chunk's row blocks run together: its keys are read from HBM ~once
    ch = b / p.nrb;
  } else {
    rb = b / p.nchunks;
    ch = b % p.nchunks;
  }
  const int64_t row0 = rb * RB, row = row0;
  const int64_t c0 = ch * p.chunk, chunk_hi = mn64(c0 + p.chunk, p.out_cols);

  // ---- row ranges
  int64_t row_lo = 0, row_hi = 0, koff = 0;
  if (MODE == K1) {
    // (kEmit, K3's block scores: the rows' len in compressed columns, nblocks by chunk 0)
    ixl_k1_row_windows<kEmit>(tid, RB, row0, p.R, p.ks, p.ke, p.N, p.compressed, c0, chunk_hi,
                              s_lo, s_hi, s_co, s_len, ch == 0 ? p.bs_nblocks : nullptr,
                              p.out_cols, p.bs_cbs);
  } else if (kPaged) {
    row_hi = clamp64(p.ke[row], 0, p.bt_cols * (int64_t)p.P);
    if (kEmit && ch == 0 && tid == 0)
      p.bs_nblocks[row] = (int32_t)((mn64(row_hi, p.out_cols) + p.bs_cbs - 1) / p.bs_cbs);
  } else {
    row_lo = clamp64(p.ks[row], 0, p.N);
    row_hi = clamp64(p.ke[row], row_lo, p.N);
    koff = p.aligned ? 0 : row_lo & (p.sbk - 1);
  }
  if (tid == 0) s_nvalid = (int)mn64(p.nsb, 0x7fffffff);

  // ---- per column (row, head): the fold of its query exponents
  if (tid < NC) {
    const ColArrays cols = {s_hq, s_ht, s_hc, s_wo, s_wq, s_hf};
    col_setup<H, COMB, BF16>(tid, row0, p.R, p.q_scales, p.w, cols);
  }
  __syncthreads();

  // ---- K5: n_valid = the strictly increasing prefix of the row's ids (up to this chunk)
  const int32_t *ids = kSparse ? p.ids + row * p.nsb : nullptr;
  if (kSparse) ids_valid_prefix<kThreads>(ids, p.nsb, chunk_hi, p.sbk, p.sbklog, tid, &s_nvalid);
  // ---- the query tile: column n's element perm(p) of group g at byte 32 g + p, as e4m3
  q_tiles<H, NC, kThreads>(s_q, p.q_codes, s_ht, row0, p.R, tid);
  ptx::fence_proxy_async(ptx::space_shared); // the generic stores, visible to wgmma
  __syncthreads();

  // ---- K2, K5: the chunk's page ids / block bases, once
  const int64_t nvalid = kSparse ? s_nvalid : 0;
  const int64_t pre0 = MODE == K2 ? div_p(c0, p.P, p.Plog) : kSparse ? c0 >> p.sbklog : 0;
  if (MODE == K2) {
    const int64_t last = mn64(chunk_hi, row_hi) - 1;
    if (last >= c0) {
      const int64_t np = div_p(last, p.P, p.Plog) - pre0 + 1;
      for (int64_t j = tid; j < np; j += kThreads) {
        const int64_t pg = p.bt[row * p.bt_cols + pre0 + j];
        pre_page[j] = pg >= 0 && pg < p.num_pages ? (int32_t)pg : -1;
      }
    }
  } else if (kSparse) {
    const int64_t nb = ((chunk_hi - 1) >> p.sbklog) - pre0 + 1;
    for (int64_t j = tid; j < nb; j += kThreads) {
      const int64_t jb = pre0 + j;
      int64_t base = INT64_MIN / 2; // no key: every slot of the block lies outside the row
      int32_t pg = -1, sl = 0;
      if (jb < nvalid) {
        base = (int64_t)ids[jb] * p.sbk + koff;
        if (MODE == K5P && base >= 0 && base < row_hi) {
          const int64_t e = p.bt[row * p.bt_cols + div_p(base, p.P, p.Plog)];
          if (e >= 0 && e < p.num_pages) pg = (int32_t)e;
          sl = (int32_t)(base - div_p(base, p.P, p.Plog) * p.P);
        }
      }
      pre_base[j] = base;
      if (MODE == K5P) {
        pre_pg5[j] = pg;
        pre_sl5[j] = sl;
      }
    }
  }
  // ---- K1: -inf at the chunk's columns outside each row's window; the hull of the windows
  int64_t hull_lo = 0, hull_hi = 0;
  if (MODE == K1)
    k1_fill_hull<BF16, RB, kThreads>(p.out, p.out_cols, row0, p.R, s_lo, s_hi, s_co, c0, chunk_hi,
                                     tid, &hull_lo, &hull_hi);
  __syncthreads(); // the prefetched page ids / bases

  // ---- per lane: its columns 8 j + 2 t4 + c (register 4 j + 2 half + c), weights, folds
  const int i0 = 16 * warp + (lane >> 2); // this lane's slots: i0, i0 + 8
  uint32_t slow_heads;
  // any lane of the quad (the lanes of the same two slots) with a slow column
  const int quad_slow = lane_slow<NJ>(s_hf, t4, &slow_heads);
  // the fast path's weights (times 2^(qc - 127)): fp32: half of them, for the lane's own
  // columns (relu(x) w = (x + |x|) (w / 2), NaN kept); bf16: the pairs its chains take,
  // heads 8 j + 2 (t4 & 1) + {0, 1} (first) and 8 j + 4 + 2 (t4 & 1) + {0, 1} (second)
  float wf[BF16 ? 1 : 2 * NJ];
  __nv_bfloat162 wb[BF16 ? 2 * NJ : 1];
  lane_weights<BF16, NJ>(s_wq, t4, wf, wb);

  // ---- loading one tile (raw codes and scale words as stored; a slot without a key reads
  // nothing and is zero-filled)
  const int64_t span = MODE == K1 ? hull_hi - hull_lo : chunk_hi - c0;
  const int T = (int)((span + kTile - 1) / kTile);
  // kTma: row r needs the tiles t in [tr0[r], tr1[r]) (its window relative to the hull)
  int tr0[RB], tr1[RB];
#pragma unroll
  for (int r = 0; r < RB; r++) {
    tr0[r] = tr1[r] = 0;
    if (kTma && row0 + r < p.R && s_hi[r] > s_lo[r]) {
      tr0[r] = (int)((s_lo[r] - hull_lo) >> 6);
      tr1[r] = (int)((s_hi[r] - hull_lo + kTile - 1) >> 6);
    }
  }
  auto tile_needed = [&](int t) {
    if (MODE != K1) return true;
    bool need = false;
    if (kTma) {
#pragma unroll
      for (int r = 0; r < RB; r++) need |= t >= tr0[r] && t < tr1[r];
      return need;
    }
    const int64_t n0 = hull_lo + (int64_t)t * kTile;
#pragma unroll
    for (int r = 0; r < RB; r++) need |= s_hi[r] > s_lo[r] && s_lo[r] < n0 + kTile && s_hi[r] > n0;
    return need;
  };
  // kTma: tile t into stage s by TMA, every tile of the hull (rows past N arrive as zeros),
  // issued by thread 0 once every thread is done with the stage's previous tile
  auto issue = [&](int t, int s) {
    if constexpr (kTma) {
      const int32_t n0 = (int32_t)(hull_lo + (int64_t)t * kTile);
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                     &s_full[s], (uint32_t)(kTile * 64 + 17 * 16));
      const int32_t ck[2] = {0, n0}, cs[2] = {0, n0 >> 2};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, s_raw + s * (kTile * 64),
                                kmap, ck, &s_full[s]);
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, s_sc + s * SCW, smap, cs,
                                &s_full[s]);
    }
  };
  auto load = [&](int t, int s) {
    const int i = tid >> 1, part = tid & 1;
    const uint8_t *vsrc = nullptr;
    const uint32_t *ssrc = nullptr;
    if (MODE == K1) {
      const int64_t n = hull_lo + (int64_t)t * kTile + i;
      if (n < hull_hi) {
        vsrc = p.k_codes + n * 64;
        ssrc = p.k_scales + n;
      }
    } else {
      const int64_t col = c0 + (int64_t)t * kTile + i;
      if (col < chunk_hi) {
        if (MODE == K2) {
          if (col < row_hi) {
            const int64_t pi = div_p(col, p.P, p.Plog);
            const int32_t pg = pre_page[pi - pre0];
            if (pg >= 0) {
              const uint8_t *base = p.k_pages + (int64_t)pg * p.stride;
              const int64_t sl = col - pi * p.P;
              vsrc = base + sl * 64;
              ssrc = reinterpret_cast<const uint32_t *>(base + (int64_t)p.P * 64) + sl;
            }
          }
        } else {
          const int64_t jl = (col >> p.sbklog) - pre0, o = col & (p.sbk - 1);
          const int64_t q = pre_base[jl] + o;
          if (q >= row_lo && q < row_hi) {
            if (MODE == K5R) {
              vsrc = p.k_codes + q * 64;
              ssrc = p.k_scales + q;
            } else {
              int64_t pg = pre_pg5[jl], sl = pre_sl5[jl] + o;
              if (sl >= p.P) { // a block across a page boundary
                const int64_t pi = div_p(q, p.P, p.Plog);
                const int64_t e = p.bt[row * p.bt_cols + pi];
                pg = e >= 0 && e < p.num_pages ? e : -1;
                sl = q - pi * p.P;
              }
              if (pg >= 0) {
                const uint8_t *base = p.k_pages + pg * p.stride;
                vsrc = base + sl * 64;
                ssrc = reinterpret_cast<const uint32_t *>(base + (int64_t)p.P * 64) + sl;
              }
            }
          }
        }
      }
    }
    uint8_t *dst = s_raw + s * (kTile * 64);
#pragma unroll
    for (int c = 0; c < 2; c++) {
      const int g = 2 * part + c;
      ixl::sm80::cp_async16(dst + ixl_v2mx_raw_off(i, g), vsrc ? vsrc + 16 * g : p.q_codes,
                            vsrc ? 16 : 0);
    }
    if (part == 0) {
      if (ssrc) ixl::sm80::cp_async4(s_sc + s * kTile + i, ssrc);
      else s_sc[s * kTile + i] = 0x7F7F7F7Fu;
      s_fl[s * kTile + i] = vsrc != nullptr;
    }
  };

  // ---- the pipeline
  if (kTma) {
    if (tid == 0)
      for (int s = 0; s < S - 1 && s < T; s++) issue(s, s);
  } else {
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
      if (s < T && tile_needed(s)) load(s, s);
      ixl::sm80::cp_async_commit();
    }
    __syncthreads(); // the prologue tiles' flags (plain stores) are visible to iteration 0's vote
  }
  float acc[4][NC / 2];
  const int q4 = lane & 3, sw = (i0 >> 1) & 3;
  for (int t = 0; t < T; t++) {
    const int s = t % S;
    int any = 1;
    if (kTma) {
      __syncthreads(); // every thread is done with tile t - 1: its stage takes tile t + S - 1
      if (tid == 0 && t + S - 1 < T) issue(t + S - 1, (t + S - 1) % S);
      mbar_wait(&s_full[s], (uint32_t)(t / S) & 1u); // every tile: each phase is waited for
    } else {
      ixl::sm80::cp_async_wait<S - 2>();
      // every thread's copies of tile t have landed, and every thread is done with tile t - 1
      any = __syncthreads_or(tid < kTile && s_fl[s * kTile + tid]);
      if (t + S - 1 < T && tile_needed(t + S - 1)) load(t + S - 1, (t + S - 1) % S);
      ixl::sm80::cp_async_commit();
    }
    const int64_t tb = MODE == K1 ? hull_lo + (int64_t)t * kTile : c0 + (int64_t)t * kTile;
    if (MODE == K1 ? !tile_needed(t) : !any) {
      if (MODE != K1 && tid < kTile && tb + tid < chunk_hi)
        store_ninf<BF16>(p.out, row * p.out_cols + tb + tid);
      if (kEmit && MODE == K2 && tid < kTile) {
        // K2's positions here (before the context's end) are -inf logits: one atomic per block
        // the tile meets (at its first position here), +inf at the newest
        const int64_t n = tb + tid, vend = mn64(chunk_hi, row_hi);
        if (n < vend) {
          float *dst = p.bs + row * p.bs_cols + bs_blk(p, (int)n);
          if (tid == 0 || (int)n == bs_blk(p, (int)n) * p.bs_cbs)
            ixl_bs::score_max(dst, __uint_as_float(0xff800000u));
          if (n == mn64(row_hi, p.out_cols) - 1)
            ixl_bs::score_max(dst, __uint_as_float(0x7f800000u));
        }
      }
      continue;
    }
    // A: the lane's two slots, widened; then one wgmma per scale group
    const uint8_t *st = s_raw + s * (kTile * 64);
    uint32_t a[4][4];
    load_widen_a(st, i0, sw, q4, a);
    const int sc0 = s * SCW + (kTma ? (int)(hull_lo & 3) : 0);
    const uint32_t kw[2] = {s_sc[sc0 + i0], s_sc[sc0 + i0 + 8]};
    const bool okslot[2] = {s_fl[s * kTile + i0] != 0, s_fl[s * kTile + i0 + 8] != 0};
    // the slots' key exponents: the fast path needs every byte in the window (quad-uniform)
    const bool qslow = COMB ? quad_slow || !ixl_v2mx_comb_word(kw[0]) || !ixl_v2mx_comb_word(kw[1])
                            : quad_slow || !ixl_v2mx_fast_word(kw[0]) || !ixl_v2mx_fast_word(kw[1]);
    float kf[2][4];
    // COMB: k0 = 2^(ke0 - 127), r1 = 2^(ke1 - ke0), r2 = 2^(ke2 - ke0), r3 = 2^(ke3 - ke2) (the
    // fast path only: garbage outside the window), kf in the slow branch
    float ck0[2], cr1[2], cr2[2], cr3[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      if (COMB) {
        uint32_t f[4];
        ixl_v2mx_comb_factors(kw[h], f);
        ck0[h] = __uint_as_float(f[0]);
        cr1[h] = __uint_as_float(f[1]);
        cr2[h] = __uint_as_float(f[2]);
        cr3[h] = __uint_as_float(f[3]);
      } else {
        key_pow2(kw[h], kf[h]);
      }
    }
    const uint64_t db = wgmma_desc(s_q, IXL_SM90_SWIZZLE_128B, 16, 1024);
    // groups 0 and 1, then 2 and 3: the first pair's combine overlaps the second's wgmma
    rs_wgmma_groups<NC>(acc, a, db);
    wgmma_wait<1>();
    fence_operand(acc[0]);
    fence_operand(acc[1]);
    if (!qslow) {
      if constexpr (COMB) comb01_deferred(acc, cr1);
      else comb01_scaled(acc, kf);
    }
    fence_operand(acc[0]);
    wgmma_wait<0>();
#pragma unroll
    for (int g = 0; g < 4; g++) fence_operand(acc[g]);
#pragma unroll
    for (int g = 0; g < 4; g++) fence_operand(a[g]);

    // ---- the head reduction and the stores: RB rows of H / 8 column blocks each. FOLD: the
    // dots are d / 2^(qc - 127) and the weights carry the factor; else the dots are d and the
    // weights the stored ones.
    float ev[RB]; // kEmit: the lane's logit of each row (slot i0 + 8 (t4 & 1))
#pragma unroll
    for (int r = 0; r < RB; r++) ev[r] = 0.0f;
    auto reduce = [&](auto fold_tag) {
      constexpr bool FOLD = decltype(fold_tag)::value;
#pragma unroll
      for (int r = 0; r < RB; r++) {
        const int64_t orow = row0 + r;
        int64_t lo = 0, hi = 0, co = 0;
        if (MODE == K1) lo = s_lo[r], hi = s_hi[r], co = s_co[r];
        if (!BF16) {
          float sum[2];
          head_sum_f32<FOLD>(acc[0], r * (H / 8), (r + 1) * (H / 8), wf, s_wo, t4, sum);
          if (t4 < 2) { // lane 0 of the quad stores slot i0, lane 1 slot i0 + 8
            const int i = i0 + 8 * t4;
            float v = t4 ? sum[1] : sum[0];
            if (COMB && FOLD) v = __fmul_rn(v, t4 ? ck0[1] : ck0[0]); // the deferred k0: exact
            const int64_t n = tb + i;
            if (MODE == K1) {
              if (orow < p.R && n >= lo && n < hi)
                reinterpret_cast<float *>(p.out)[orow * p.out_cols + n - co] = v;
            } else if (n < chunk_hi) {
              reinterpret_cast<float *>(p.out)[row * p.out_cols + n] =
                  (t4 ? okslot[1] : okslot[0]) ? v : __uint_as_float(0xff800000u);
            }
          }
          if constexpr (kEmit) {
            // K3's block scores from the values just stored (the same expression, so the same
            // bits), emitted after the fast / slow branches (quad-uniform only) rejoin
            const int hh = t4 & 1;
            float v = hh ? sum[1] : sum[0];
            if (COMB && FOLD) v = __fmul_rn(v, hh ? ck0[1] : ck0[0]);
            if (MODE == K2 && !(hh ? okslot[1] : okslot[0])) v = __uint_as_float(0xff800000u);
            ev[r] = v;
          }
        } else {
          // SPEC 3's chains (head_chain_bf16): lanes 0, 1 keep slot i0, lanes 2, 3 slot i0 + 8
          const int keep = t4 >> 1;
          __nv_bfloat16 res =
              head_chain_bf16<FOLD>(acc[0], r * (H / 8), (r + 1) * (H / 8), wb, s_wo, t4);
          if (COMB && FOLD) // the deferred k0: exact (a power of two, in range)
            res = __float2bfloat16_rn(__fmul_rn(__bfloat162float(res), keep ? ck0[1] : ck0[0]));
          if ((t4 & 1) == 0) {
            const int i = i0 + 8 * keep;
            const int64_t n = tb + i;
            const uint16_t v = *reinterpret_cast<const uint16_t *>(&res);
            if (MODE == K1) {
              if (orow < p.R && n >= lo && n < hi)
                reinterpret_cast<uint16_t *>(p.out)[orow * p.out_cols + n - co] = v;
            } else if (n < chunk_hi) {
              reinterpret_cast<uint16_t *>(p.out)[row * p.out_cols + n] =
                  (keep ? okslot[1] : okslot[0]) ? v : (uint16_t)0xFF80u;
            }
          }
        }
      }
    };
    if (!qslow) {
      if constexpr (COMB) comb23_deferred(acc, cr2, cr3);
      else comb23_scaled(acc, kf);
      reduce(std::true_type{});
    } else {
      if (COMB) {
#pragma unroll
        for (int h = 0; h < 2; h++) key_pow2(kw[h], kf[h]);
      }
      // the exact dots d: the fast formula times 2^(qc - 127) where it holds, else the CPU's
      const bool pslow[2] = {!ixl_v2mx_fast_word(kw[0]) != 0, !ixl_v2mx_fast_word(kw[1]) != 0};
      slow_branch(acc, kf, kw, pslow, slow_heads, s_hq, s_hc, t4);
      reduce(std::false_type{});
    }
    if constexpr (kEmit) {
      // K3's block scores, the warp converged: chains of lanes t4 = 0 (slots i0) and 1
      // (i0 + 8) per row, bs_emit_chain
      const int64_t n = tb + i0 + 8 * (t4 & 1);
#pragma unroll
      for (int r = 0; r < RB; r++) {
        int col = -1;
        int64_t room = 0, cfirst, len;
        if (MODE == K1) {
          const int64_t lo = s_lo[r], hi = s_hi[r], co = s_co[r];
          len = s_len[r];
          cfirst = lo - co;
          if (t4 < 2 && row0 + r < p.R && n >= lo && n < hi) {
            col = (int)(n - co);
            room = hi - n;
          }
        } else {
          const int64_t vend = mn64(chunk_hi, row_hi);
          len = mn64(row_hi, p.out_cols);
          cfirst = c0;
          if (t4 < 2 && n < vend) {
            col = (int)n;
            room = vend - n;
          }
        }
        bs_emit_chain(p, row0 + r, col, room, cfirst, len, ev[r], lane);
      }
    }
  }
  if (!kTma) ixl::sm80::cp_async_wait<0>();
}
#endif

template <int MODE, int H, int RB, bool BF16, bool EMIT = false>
__global__ void __launch_bounds__(kThreads, min_ctas(MODE, RB * H)) mx_kernel(const Params p) {
#if IXL_SM90_DEVICE
  mx_body<MODE, H, RB, BF16, false, false, EMIT>(p, nullptr, nullptr);
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// V3 (IXL_LOGITS_V2_MX_V3): the kernel above with every shared-memory access in the shared
// window and, in K1, the key tiles by TMA (kmap: codes [N][64] B, box 64 x 64 B, SWIZZLE_64B,
// which lands as ixl_v2mx_raw_off's layout; smap: scale words [1][N], box 64) issued by one
// thread into an 8-stage mbarrier ring, so the other threads run no address math, copies,
// flags or votes; the tiles a K1 row pair needs come from per-row tile ranges.
template <int MODE, int H, int RB, bool BF16, bool COMB, bool EMIT = false>
__global__ void __launch_bounds__(kThreads, min_ctas(MODE, RB * H))
    mx3_kernel(const __grid_constant__ CUtensorMap kmap, const __grid_constant__ CUtensorMap smap,
               const Params p) {
#if IXL_SM90_DEVICE
  mx_body<MODE, H, RB, BF16, true, COMB, EMIT>(p, &kmap, &smap);
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// ------------------------------------------------------------------ the NEXT kernels
// IXL_LOGITS_V2_MX_NEXT=1 (or 2) runs K1 and ragged K5 at H 32 on these instead (off by
// default: the kernels above are the ones verified on the H200). The key tile is widened ONCE
// into shared memory (e4m3, the SS A layout of v2_mx.cuh's ixl_v2mx_ss_off) by all the CTA's
// threads, and each warpgroup runs one m64n32k32 SS wgmma per scale group on it, A = that tile,
// B = its own row's query tile (the same tile as above): no A registers, and in K1 the widening
// is shared by NW rows (NW warpgroups a CTA, one row each: 4 with NEXT=1, 2 with NEXT=2) where
// the kernel above widens per 2 rows. Ragged K5 (rows have their own keys): one warpgroup, the
// same SS path. Numerics: the same exact group sums, the same combine and SPEC 3 chain as above
// (one row of 32 columns per warpgroup), so the results are the same bits.
// Per tile (one barrier): the raw tile t + 1 is visible and the widened tile t too; each
// warpgroup issues tile t's wgmma, widens its share of tile t + 1 into the other buffer while
// they run, then combines and stores tile t.
constexpr int kNextH = 32;

// 0: off; 1: K1 with 4 rows a CTA; 2: K1 with 2 (read once a process).
int next_mode() {
  static const int v = [] {
    const int c = env_switch("IXL_LOGITS_V2_MX_NEXT", "12", 0);
    return c ? c - '0' : 0;
  }();
  return v;
}

template <int MODE, int NW>
struct NextCfg {
  static constexpr int stages = MODE == K1 ? (NW >= 4 ? 6 : 4) : 5;
  static constexpr int threads = 128 * NW;
  static constexpr int min_ctas = MODE == K1 ? 4 / NW : 4; // 128 registers at most
};

// Dynamic shared memory: NW query tiles (4 KB each) | 2 widened key tiles (8 KB each) | raw
// stages (4 KB) | scale words | flags | per column info | K5 prefetch.
template <int MODE, int NW>
struct NextSmem {
  static constexpr int S = NextCfg<MODE, NW>::stages;
  static constexpr int NCT = kNextH * NW;
  static constexpr int q = 0;
  static constexpr int e = q + NCT * 128;
  static constexpr int raw = e + 2 * kTile * 128;
  static constexpr int sc = raw + S * kTile * 64;
  static constexpr int fl = sc + S * kTile * 4;
  static constexpr int hq = fl + S * kTile;
  static constexpr int hc = hq + NCT * 4;
  static constexpr int wo = hc + NCT * 4;
  static constexpr int wq = wo + NCT * 4;
  static constexpr int ht = wq + NCT * 4;
  static constexpr int hf = ht + NCT * 4;
  static constexpr int pre = (hf + NCT + 15) & ~15;
  static constexpr int pre_bytes = MODE == K5R ? kPre * 8 : 0;
  static constexpr int total = pre + pre_bytes;
  static constexpr int alloc = total + 1024;
};

template <int MODE, int NW, bool BF16>
__global__ void __launch_bounds__(NextCfg<MODE, NW>::threads, NextCfg<MODE, NW>::min_ctas)
    mx_next_kernel(const Params p) {
#if IXL_SM90_DEVICE
  static_assert(MODE == K1 || (MODE == K5R && NW == 1), "NEXT: K1 (NW rows) or ragged K5");
  constexpr int H = kNextH, NC = kNextH, NJ = NC / 8;
  constexpr int NT = NextCfg<MODE, NW>::threads, NCT = NC * NW;
  constexpr int S = NextCfg<MODE, NW>::stages;
  static_assert(S >= 3, "the ring holds tiles t, t + 1 and one in flight at least");
  using L = NextSmem<MODE, NW>;
  constexpr bool kSparse = MODE == K5R;
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint8_t *s_q = smem + L::q, *s_e = smem + L::e, *s_raw = smem + L::raw, *s_fl = smem + L::fl;
  uint8_t *s_hf = smem + L::hf;
  uint32_t *s_sc = reinterpret_cast<uint32_t *>(smem + L::sc);
  uint32_t *s_hq = reinterpret_cast<uint32_t *>(smem + L::hq);
  uint32_t *s_ht = reinterpret_cast<uint32_t *>(smem + L::ht);
  float *s_hc = reinterpret_cast<float *>(smem + L::hc);
  float *s_wo = reinterpret_cast<float *>(smem + L::wo);
  float *s_wq = reinterpret_cast<float *>(smem + L::wq);
  int64_t *pre_base = reinterpret_cast<int64_t *>(smem + L::pre); // K5
  __shared__ int64_t s_lo[NW], s_hi[NW], s_co[NW];
  __shared__ int s_nvalid;

  const int tid = threadIdx.x, wg = tid >> 7, wt = tid & 127;
  const int warp = wt >> 5, lane = tid & 31, t4 = lane & 3;
  const int cb = NC * wg; // this warpgroup's columns in the per-column arrays (its row wg)
  const int64_t b = blockIdx.x;
  int64_t rb, ch;
  if (MODE == K1) {
    rb = b % p.nrb; // a chunk's row blocks run together: its keys are read from HBM ~once
    ch = b / p.nrb;
  } else {
    rb = b / p.nchunks;
    ch = b % p.nchunks;
  }
  const int64_t row0 = rb * NW, row = row0, wrow = row0 + wg;
  const int64_t c0 = ch * p.chunk, chunk_hi = mn64(c0 + p.chunk, p.out_cols);

  // ---- row ranges
  int64_t row_lo = 0, row_hi = 0, koff = 0;
  if (MODE == K1) {
    k1_windows<NW>(tid, row0, p.R, p.ks, p.ke, p.N, p.compressed, c0, chunk_hi, s_lo, s_hi, s_co);
  } else {
    row_lo = clamp64(p.ks[row], 0, p.N);
    row_hi = clamp64(p.ke[row], row_lo, p.N);
    koff = p.aligned ? 0 : row_lo & (p.sbk - 1);
  }
  if (tid == 0) s_nvalid = (int)mn64(p.nsb, 0x7fffffff);

  // ---- per column (row, head): the fold of its query exponents (as the kernel above)
  if (tid < NCT) {
    const ColArrays cols = {s_hq, s_ht, s_hc, s_wo, s_wq, s_hf};
    col_setup<H, false, BF16>(tid, row0, p.R, p.q_scales, p.w, cols);
  }
  __syncthreads();

  // ---- K5: n_valid = the strictly increasing prefix of the row's ids (up to this chunk)
  const int32_t *ids = kSparse ? p.ids + row * p.nsb : nullptr;
  if (kSparse) ids_valid_prefix<NT>(ids, p.nsb, chunk_hi, p.sbk, p.sbklog, tid, &s_nvalid);
  // ---- the query tiles: column n's element perm(p) of group g at byte 32 g + p, as e4m3
  // (warpgroup w's tile is columns 32 w .. 32 w + 31, 4 KB at 4096 w: on the swizzle period)
  q_tiles<H, NCT, NT>(s_q, p.q_codes, s_ht, row0, p.R, tid);
  ptx::fence_proxy_async(ptx::space_shared); // the generic stores, visible to wgmma
  __syncthreads();

  // ---- K5: the chunk's block bases, once; K1: -inf outside each row's window, the hull
  const int64_t nvalid = kSparse ? s_nvalid : 0;
  const int64_t pre0 = kSparse ? c0 >> p.sbklog : 0;
  if (kSparse) {
    const int64_t nb = ((chunk_hi - 1) >> p.sbklog) - pre0 + 1;
    for (int64_t j = tid; j < nb; j += NT) {
      const int64_t jb = pre0 + j;
      pre_base[j] = jb < nvalid ? (int64_t)ids[jb] * p.sbk + koff : INT64_MIN / 2;
    }
  }
  int64_t hull_lo = 0, hull_hi = 0;
  if (MODE == K1)
    k1_fill_hull<BF16, NW, NT>(p.out, p.out_cols, row0, p.R, s_lo, s_hi, s_co, c0, chunk_hi, tid,
                               &hull_lo, &hull_hi);
  __syncthreads(); // the prefetched bases

  // ---- per lane: its columns 8 j + 2 t4 + c of its warpgroup's row, weights, folds
  const int i0 = 16 * warp + (lane >> 2); // this lane's slots: i0, i0 + 8
  uint32_t slow_heads;
  const int quad_slow = lane_slow<NJ>(s_hf + cb, t4, &slow_heads);
  float wf[BF16 ? 1 : 2 * NJ];
  __nv_bfloat162 wb[BF16 ? 2 * NJ : 1];
  lane_weights<BF16, NJ>(s_wq + cb, t4, wf, wb);

  // ---- tiles: K1 over the hull of the rows' windows, K5 over the chunk
  const int64_t span = MODE == K1 ? hull_hi - hull_lo : chunk_hi - c0;
  const int T = (int)((span + kTile - 1) / kTile);
  auto row_needs = [&](int r, int t) {
    const int64_t n0 = hull_lo + (int64_t)t * kTile;
    return s_hi[r] > s_lo[r] && s_lo[r] < n0 + kTile && s_hi[r] > n0;
  };
  auto tile_needed = [&](int t) {
    if (MODE != K1) return true;
    bool need = false;
#pragma unroll
    for (int r = 0; r < NW; r++) need |= row_needs(r, t);
    return need;
  };
  // loading one raw tile: 256 pieces of 16 B (slot i, group g) over the first LT threads, the
  // slot's scale word and flag by its group-0 piece; a slot without a key reads nothing and
  // is zero-filled (raw layout: slot i at 64 i, group g at 16 g)
  constexpr int LT = NT < 256 ? NT : 256, PL = 256 / LT; // PL pieces a thread, one slot
  auto load = [&](int t, int s) {
    if (tid >= LT) return;
    const int i = tid / (4 / PL), g0 = (tid % (4 / PL)) * PL;
    const uint8_t *vsrc = nullptr;
    const uint32_t *ssrc = nullptr;
    if (MODE == K1) {
      const int64_t n = hull_lo + (int64_t)t * kTile + i;
      if (n < hull_hi) {
        vsrc = p.k_codes + n * 64;
        ssrc = p.k_scales + n;
      }
    } else {
      const int64_t col = c0 + (int64_t)t * kTile + i;
      if (col < chunk_hi) {
        const int64_t jl = (col >> p.sbklog) - pre0, o = col & (p.sbk - 1);
        const int64_t q = pre_base[jl] + o;
        if (q >= row_lo && q < row_hi) {
          vsrc = p.k_codes + q * 64;
          ssrc = p.k_scales + q;
        }
      }
    }
    uint8_t *dst = s_raw + s * (kTile * 64) + i * 64;
#pragma unroll
    for (int c = 0; c < PL; c++) {
      const int g = g0 + c;
      ixl::sm80::cp_async16(dst + 16 * g, vsrc ? vsrc + 16 * g : p.q_codes, vsrc ? 16 : 0);
    }
    if (g0 == 0) {
      if (ssrc) ixl::sm80::cp_async4(s_sc + s * kTile + i, ssrc);
      else s_sc[s * kTile + i] = 0x7F7F7F7Fu;
      s_fl[s * kTile + i] = vsrc != nullptr;
    }
  };
  // widening raw stage s into widened buffer eb: 512 units of 8 B (slot i, group g, half hf:
  // raw words 2 hf, 2 hf + 1), conflict-free (a half-warp reads 128 contiguous bytes and
  // writes two rows' 8 distinct 16-B chunks)
  auto widen = [&](int s, int eb) {
    const uint8_t *src = s_raw + s * (kTile * 64);
    uint8_t *et = s_e + eb * (kTile * 128);
#pragma unroll
    for (int k = 0; k < kTile * 8 / NT; k++) {
      const int u = tid + k * NT, i = u >> 3, g = (u >> 1) & 3, hf = u & 1;
      const uint2 w = *reinterpret_cast<const uint2 *>(src + i * 64 + 16 * g + 8 * hf);
      uint2 ev, od;
      ixl_sm90_e2m1x8_widen(w.x, &ev.x, &od.x);
      ixl_sm90_e2m1x8_widen(w.y, &ev.y, &od.y);
      *reinterpret_cast<uint2 *>(et + ixl_v2mx_ss_off(i, g, 2 * hf, 0)) = ev;
      *reinterpret_cast<uint2 *>(et + ixl_v2mx_ss_off(i, g, 2 * hf, 1)) = od;
    }
    ptx::fence_proxy_async(ptx::space_shared); // the widened tile, visible to wgmma
  };

  // ---- the pipeline: raw stages t .. t + S - 1 in flight, widened tiles t (read) and t + 1
#pragma unroll
  for (int s = 0; s < S - 1; s++) {
    if (s < T && tile_needed(s)) load(s, s);
    ixl::sm80::cp_async_commit();
  }
  ixl::sm80::cp_async_wait<S - 2>(); // this thread's copies of tile 0
  int any_next = __syncthreads_or(MODE != K1 && T > 0 && tid < kTile && s_fl[tid]);
  if (T > 0 && (MODE == K1 ? tile_needed(0) : any_next != 0)) widen(0, 0);
  float acc[4][NC / 2];
  for (int t = 0; t < T; t++) {
    const int s = t % S;
    const int any = any_next;
    ixl::sm80::cp_async_wait<S - 3>(); // this thread's copies of tile t + 1
    // every copy of tile t + 1 has landed, tile t is widened, every warpgroup is done with
    // widened buffer (t + 1) & 1 and with raw stage (t - 1) % S
    any_next = __syncthreads_or(MODE != K1 && t + 1 < T && tid < kTile &&
                                s_fl[((t + 1) % S) * kTile + tid]);
    if (t + S - 1 < T && tile_needed(t + S - 1)) load(t + S - 1, (t + S - 1) % S);
    ixl::sm80::cp_async_commit();
    const int64_t tb = MODE == K1 ? hull_lo + (int64_t)t * kTile : c0 + (int64_t)t * kTile;
    // the next tile is widened (into the buffer whose last reader waited at t - 1) while this
    // tile's wgmma run, with no branch (a branch between a wgmma and its wait makes ptxas
    // serialize them, C7518): always, also when no one reads it (t + 1 = T, a skipped tile:
    // its raw stage then holds an old tile or zeros, and no copy into it is in flight)
    const bool mine = MODE == K1 ? wrow < p.R && row_needs(wg, t) : any != 0;
    if (!mine) {
      widen((t + 1) % S, (t + 1) & 1);
      if (MODE != K1 && tid < kTile && tb + tid < chunk_hi)
        store_ninf<BF16>(p.out, row * p.out_cols + tb + tid);
      continue;
    }
    const uint64_t da = wgmma_desc(s_e + (t & 1) * (kTile * 128), IXL_SM90_SWIZZLE_128B, 16, 1024);
    const uint64_t db = wgmma_desc(s_q + wg * (NC * 128), IXL_SM90_SWIZZLE_128B, 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int g = 0; g < 2; g++) wgmma_e4m3_ss<NC>(acc[g], da + 2 * g, db + 2 * g, 0);
    wgmma_commit();
#pragma unroll
    for (int g = 2; g < 4; g++) wgmma_e4m3_ss<NC>(acc[g], da + 2 * g, db + 2 * g, 0);
    wgmma_commit();
    widen((t + 1) % S, (t + 1) & 1);
    const uint32_t kw[2] = {s_sc[s * kTile + i0], s_sc[s * kTile + i0 + 8]};
    const bool okslot[2] = {s_fl[s * kTile + i0] != 0, s_fl[s * kTile + i0 + 8] != 0};
    const bool qslow = quad_slow || !ixl_v2mx_fast_word(kw[0]) || !ixl_v2mx_fast_word(kw[1]);
    float kf[2][4];
#pragma unroll
    for (int h = 0; h < 2; h++) key_pow2(kw[h], kf[h]);
    wgmma_wait<1>();
    fence_operand(acc[0]);
    fence_operand(acc[1]);
    if (!qslow) comb01_scaled(acc, kf);
    fence_operand(acc[0]);
    wgmma_wait<0>();
#pragma unroll
    for (int g = 0; g < 4; g++) fence_operand(acc[g]);

    // ---- the head reduction and the stores (the kernel above's, one row of 32 columns)
    auto reduce = [&](auto fold_tag) {
      constexpr bool FOLD = decltype(fold_tag)::value;
      const int64_t orow = MODE == K1 ? wrow : row;
      int64_t lo = 0, hi = 0, co = 0;
      if (MODE == K1) lo = s_lo[wg], hi = s_hi[wg], co = s_co[wg];
      if (!BF16) {
        float sum[2];
        head_sum_f32<FOLD>(acc[0], 0, NJ, wf, s_wo + cb, t4, sum);
        if (t4 < 2) {
          const int i = i0 + 8 * t4;
          const float v = t4 ? sum[1] : sum[0];
          const int64_t n = tb + i;
          if (MODE == K1) {
            if (n >= lo && n < hi) reinterpret_cast<float *>(p.out)[orow * p.out_cols + n - co] = v;
          } else if (n < chunk_hi) {
            reinterpret_cast<float *>(p.out)[orow * p.out_cols + n] =
                (t4 ? okslot[1] : okslot[0]) ? v : __uint_as_float(0xff800000u);
          }
        }
      } else {
        const int keep = t4 >> 1;
        const __nv_bfloat16 res = head_chain_bf16<FOLD>(acc[0], 0, NJ, wb, s_wo + cb, t4);
        if ((t4 & 1) == 0) {
          const int i = i0 + 8 * keep;
          const int64_t n = tb + i;
          const uint16_t v = *reinterpret_cast<const uint16_t *>(&res);
          if (MODE == K1) {
            if (n >= lo && n < hi)
              reinterpret_cast<uint16_t *>(p.out)[orow * p.out_cols + n - co] = v;
          } else if (n < chunk_hi) {
            reinterpret_cast<uint16_t *>(p.out)[orow * p.out_cols + n] =
                (keep ? okslot[1] : okslot[0]) ? v : (uint16_t)0xFF80u;
          }
        }
      }
    };
    if (!qslow) {
      comb23_scaled(acc, kf);
      reduce(std::true_type{});
    } else {
      const bool pslow[2] = {!ixl_v2mx_fast_word(kw[0]) != 0, !ixl_v2mx_fast_word(kw[1]) != 0};
      slow_branch(acc, kf, kw, pslow, slow_heads, s_hq + cb, s_hc + cb, t4);
      reduce(std::false_type{});
    }
  }
  ixl::sm80::cp_async_wait<0>();
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// ------------------------------------------------------------------ host

// 1 when this file's kernels take the call (else v1 runs it).
bool mx_takes(const ixl_logits_call *c) {
  const ixl_qk *in = c->in;
  if (c->H != 32 && c->H != 64) return false;
  if (!in->q_scales || (uintptr_t)in->q_codes->data % 16 || (uintptr_t)in->q_scales->data % 4)
    return false;
  const bool paged = in->k_pages != nullptr;
  if (paged) {
    if ((uintptr_t)in->k_pages->data % 16 || (uintptr_t)c->block_table->data % 4) return false;
    if (in->page_size <= 0) return false;
  } else {
    if ((uintptr_t)in->k_codes->data % 16 || (uintptr_t)in->k_scales->data % 4) return false;
  }
  const size_t wa = c->weights->dtype == IXL_F32 ? 4 : 2, oa = c->out->dtype == IXL_F32 ? 4 : 2;
  if ((uintptr_t)c->weights->data % wa || (uintptr_t)c->out->data % oa) return false;
  if ((uintptr_t)c->ke->data % 4 || (c->ks && (uintptr_t)c->ks->data % 4)) return false;
  if (c->mode == IXL_LOGITS_SPARSE && (uintptr_t)c->sparse_ids->data % 4) return false;
  return c->out->shape[1] < INT32_MAX;
}

// Launches `kern` (threads a CTA, alloc bytes of dynamic shared memory) over units x chunks.
// The chunk: chunk_grid's (tiles of 64, at most `cap` columns, whole waves).
template <typename Kern>
ixl_status launch_kern(ixl_ctx *ctx, Kern kern, int threads, int alloc, Params p, int64_t units,
                       int64_t cap, const char *name, const CUtensorMap *maps = nullptr) {
  int occ, sms;
  ixl_status st = occupancy(ctx, kern, threads, alloc, "cudaFuncSetAttribute (logits v2 mxfp4)",
                            &occ, &sms);
  if (st) return st;
  Grid g;
  st = chunk_grid(ctx, p.out_cols, units, cap, kMaxChunk, occ, sms, name, "v2", &g);
  if (st) return st;
  p.chunk = g.chunk;
  p.nchunks = g.nchunks;
  const int64_t blocks = g.blocks;
  if constexpr (std::is_invocable_v<Kern, CUtensorMap, CUtensorMap, Params>)
    kern<<<(unsigned)blocks, threads, alloc, ixl::stream_of(ctx)>>>(maps[0], maps[1], p);
  else
    kern<<<(unsigned)blocks, threads, alloc, ixl::stream_of(ctx)>>>(p);
  return ixl_cuda_check_launch(ctx, name);
}

// IXL_LOGITS_V2_MX_V3 (read once a process; unset: kV3Default, 0 = the kernels above, verified
// on the H200; any other value: 0), a digit: bit 1 = K1 on mx3_kernel (TMA ring, shared-window
// addressing; K1 calls with N % 4 != 0 or unaligned keys stay above), bit 2 = ragged K5 on
// mx3_kernel (shared-window addressing), bit 4 = those with the deferred key factor (3-fma
// combine, v2_mx.cuh). 7 (all) passed parity, memcheck, racecheck and synccheck on the H200
// (2026-12-02), and again with the fold fix in the session's last visit (/work/.device/11:
// test_cuda_logits [v2] 18/18 with V3=7, the 6 V3 configurations routed, racecheck, memcheck and
// synccheck clean on small shapes; K1 2048x8192 664 -> 581 us, 4096x65536 10.96 -> 9.51 ms,
// ragged K5 4096x16K 2.97 -> 2.56 ms; quick.lua's step 37.9 -> 33.4 ms, exact): the default.
constexpr int kV3Default = 7; // the value when unset (IXL_LOGITS_V2_MX_V3=0: the kernels above)
int v3_mask() {
  static const int v = [] {
    const int c = env_switch("IXL_LOGITS_V2_MX_V3", "01234567", '0' + kV3Default);
    return c ? c - '0' : 0;
  }();
  return v;
}


template <int MODE, int H, int RB, bool BF16>
ixl_status launch3(ixl_ctx *ctx, Params p, int64_t units, int64_t cap, const char *name,
                   const CUtensorMap *maps) {
  static bool said = false; // one stderr line per configuration a process: the switch took
  if (!said) {
    said = true;
    fprintf(stderr, "ixl logits v2 mxfp4: V3 kernel, %s, H %d, %d row(s) a CTA, %s (switch %d)\n",
            MODE == K1 ? "K1" : "ragged K5", H, RB, BF16 ? "bf16" : "fp32", v3_mask());
  }
  constexpr int alloc =
      Smem<MODE, RB * H, V3Cfg<MODE, true>::stages, MODE == K1 ? 96 : kTile>::alloc;
  if constexpr (MODE == K1 && !BF16) {
    if (p.bs) // K3's block scores too
      return v3_mask() & 4 ? launch_kern(ctx, mx3_kernel<MODE, H, RB, BF16, true, true>, kThreads,
                                         alloc, p, units, cap, name, maps)
                           : launch_kern(ctx, mx3_kernel<MODE, H, RB, BF16, false, true>,
                                         kThreads, alloc, p, units, cap, name, maps);
  }
  if (v3_mask() & 4)
    return launch_kern(ctx, mx3_kernel<MODE, H, RB, BF16, true>, kThreads, alloc, p, units, cap,
                       name, maps);
  return launch_kern(ctx, mx3_kernel<MODE, H, RB, BF16, false>, kThreads, alloc, p, units, cap,
                     name, maps);
}

template <int MODE, int H, int RB, bool BF16>
ixl_status launch(ixl_ctx *ctx, Params p, int64_t units, int64_t cap, const char *name) {
  if constexpr ((MODE == K1 || MODE == K2) && !BF16) {
    if (p.bs) // K3's block scores too
      return launch_kern(ctx, mx_kernel<MODE, H, RB, BF16, true>, kThreads,
                         Smem<MODE, RB * H>::alloc, p, units, cap, name);
  }
  return launch_kern(ctx, mx_kernel<MODE, H, RB, BF16>, kThreads, Smem<MODE, RB * H>::alloc, p,
                     units, cap, name);
}

// The NEXT kernels (IXL_LOGITS_V2_MX_NEXT): K1 with NW rows a CTA, ragged K5 (NW 1), H 32.
template <int MODE, int NW>
ixl_status launch_next(ixl_ctx *ctx, Params p, bool bf16, const char *name) {
  constexpr int threads = NextCfg<MODE, NW>::threads, alloc = NextSmem<MODE, NW>::alloc;
  p.nrb = MODE == K1 ? ixl_ceil_div(p.R, NW) : p.R;
  static bool said = false; // one stderr line per configuration a process: the switch took
  if (!said) {
    said = true;
    fprintf(stderr, "ixl logits v2 mxfp4: NEXT kernel, %s, %d row(s) a CTA (switch %d)\n",
            MODE == K1 ? "K1" : "ragged K5", NW, next_mode());
  }
  if constexpr (MODE == K5R) // K5 reduces in bf16 only
    return launch_kern(ctx, mx_next_kernel<MODE, NW, true>, threads, alloc, p, p.nrb, kMaxChunk,
                       name);
  else
    return bf16 ? launch_kern(ctx, mx_next_kernel<MODE, NW, true>, threads, alloc, p, p.nrb,
                            kMaxChunk, name)
              : launch_kern(ctx, mx_next_kernel<MODE, NW, false>, threads, alloc, p, p.nrb,
                            kMaxChunk, name);
}

template <int MODE, int H, int RB>
ixl_status launch_red(ixl_ctx *ctx, const Params &p, int64_t units, int64_t cap, bool bf16,
                      const char *name) {
  return bf16 ? launch<MODE, H, RB, true>(ctx, p, units, cap, name)
              : launch<MODE, H, RB, false>(ctx, p, units, cap, name);
}

} // namespace

extern "C" ixl_status ixl_cuda_logits_v2_mx(ixl_ctx *ctx, const ixl_logits_call *c) {
  if (!mx_takes(c))
    return c->mode == IXL_LOGITS_SPARSE ? ixl_cuda_logits_v1_sparse(ctx, c, 4096)
                                        : ixl_cuda_logits_v1_dense(ctx, c, 4096);
  const ixl_qk *in = c->in;
  Params p = {};
  p.q_codes = (const uint8_t *)in->q_codes->data;
  p.q_scales = (const uint32_t *)in->q_scales->data;
  p.w = c->weights->data;
  p.out = c->out->data;
  p.R = c->R;
  p.out_cols = c->out->shape[1];
  p.ke = (const int32_t *)c->ke->data;
  p.ks = c->ks ? (const int32_t *)c->ks->data : nullptr;
  p.Plog = -1;
  p.sbklog = 0;
  p.sbk = 1;
  const bool paged = in->k_pages != nullptr;
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
  }
  if (c->bs) { // K3's block scores (fp32 K1 compressed / K2; v2_emits said yes): v1's preset
    const ixl_block_scores *bs = c->bs;
    p.bs = (float *)bs->scores->data;
    p.bs_nblocks = (int32_t *)bs->nblocks->data;
    p.bs_cols = bs->scores->shape[1];
    p.bs_cbs = bs->candidate_block_size;
    p.bs_clog = log2_exact(p.bs_cbs);
    ixl_status st = ixl_bs::preset(ctx, bs, p.R == 0 || p.out_cols == 0,
                                   "cudaMemsetAsync (block scores, v2)");
    if (st) return st;
  }
  if (p.R == 0 || p.out_cols == 0) return IXL_OK;
  const bool bf16 = c->reduction == IXL_REDUCE_BF16;
  const int H = (int)c->H;
  if (c->mode == IXL_LOGITS_DENSE) {
    p.compressed = c->layout == IXL_LAYOUT_COMPRESSED;
    const char *name = "dense_logits kernel (v2 mxfp4)";
    // IXL_LOGITS_V2_MX_WS=1: H 32 without K3's block scores on the warp-specialized kernel
    // (logits_v2_mxk1_sm90.cu), when the call suits it (else it returns 0 and we go on)
    if (H == 32 && !p.bs) {
      ixl_status ws_st = IXL_OK;
      if (ixl_cuda_logits_v2_mxk1(ctx, c, &ws_st)) return ws_st;
    }
    // (the NEXT kernels do not emit K3's block scores: a call with them stays below)
    if (H == 32 && next_mode() == 1 && !p.bs) return launch_next<K1, 4>(ctx, p, bf16, name);
    if (H == 32 && next_mode() == 2 && !p.bs) return launch_next<K1, 2>(ctx, p, bf16, name);
    CUtensorMap maps[2];
    // V3 K1: the tensor maps of the key codes and scale words (see mx3_kernel); a call that
    // does not suit them stays on the kernels above
    const bool v3 = (v3_mask() & 1) && k1_maps(p.k_codes, p.k_scales, p.N, kMaxChunk, maps);
    if (H == 32) {
      p.nrb = ixl_ceil_div(p.R, 2);
      if (v3)
        return bf16 ? launch3<K1, 32, 2, true>(ctx, p, p.nrb, kMaxChunk, name, maps)
                    : launch3<K1, 32, 2, false>(ctx, p, p.nrb, kMaxChunk, name, maps);
      return launch_red<K1, 32, 2>(ctx, p, p.nrb, kMaxChunk, bf16, name);
    }
    p.nrb = p.R;
    if (v3)
      return bf16 ? launch3<K1, 64, 1, true>(ctx, p, p.nrb, kMaxChunk, name, maps)
                  : launch3<K1, 64, 1, false>(ctx, p, p.nrb, kMaxChunk, name, maps);
    return launch_red<K1, 64, 1>(ctx, p, p.nrb, kMaxChunk, bf16, name);
  }
  if (c->mode == IXL_LOGITS_DENSE_PAGED) {
    {
      // IXL_LOGITS_V2_MX_K2WS=1: H 32 without K3's block scores on the warp-specialized,
      // persistent kernel (logits_v2_mxk2_sm90.cu), when the call suits it (else it returns 0)
      ixl_status ws_st = IXL_OK;
      if (H == 32 && !p.bs && ixl_cuda_logits_v2_mxk2(ctx, c, &ws_st)) return ws_st;
    }
    const char *name = "dense_logits_paged kernel (v2 mxfp4)";
    p.nrb = p.R;
    // a chunk's pages must fit the prefetch of page ids
    const int64_t cap = (int64_t)(kPre - 2) * p.P;
    return H == 32 ? launch_red<K2, 32, 1>(ctx, p, p.R, cap, bf16, name)
                   : launch_red<K2, 64, 1>(ctx, p, p.R, cap, bf16, name);
  }
  const char *name = "sparse_logits kernel (v2 mxfp4)";
  p.ids = (const int32_t *)c->sparse_ids->data;
  p.nsb = c->sparse_ids->shape[1];
  p.sbk = c->sparse_block_kv;
  p.sbklog = log2_exact(p.sbk);
  p.aligned = c->ks_mode == IXL_KS_ALIGNED;
  p.nrb = p.R;
  if (p.sbklog < 0) return ixl_cuda_logits_v1_sparse(ctx, c, 4096);
  {
    // IXL_LOGITS_V2_MX_K5WS=1|2 (ragged), IXL_LOGITS_V2_MX_K5PWS=1 (paged): K5 at H 32 on the
    // warp-specialized kernel (logits_v2_mxk5_sm90.cu), when the call suits it (else it
    // returns 0 and we go on)
    ixl_status ws_st = IXL_OK;
    if (ixl_cuda_logits_v2_mxk5(ctx, c, &ws_st)) return ws_st;
  }
  if (paged)
    return H == 32 ? launch<K5P, 32, 1, true>(ctx, p, p.R, kMaxChunk, name)
                   : launch<K5P, 64, 1, true>(ctx, p, p.R, kMaxChunk, name);
  if (H == 32 && next_mode() != 0 && p.sbk >= 4) return launch_next<K5R, 1>(ctx, p, true, name);
  if (v3_mask() & 2) {
    CUtensorMap maps[2]; // unused by ragged K5
    memset(maps, 0, sizeof maps);
    return H == 32 ? launch3<K5R, 32, 1, true>(ctx, p, p.R, kMaxChunk, name, maps)
                   : launch3<K5R, 64, 1, true>(ctx, p, p.R, kMaxChunk, name, maps);
  }
  return H == 32 ? launch<K5R, 32, 1, true>(ctx, p, p.R, kMaxChunk, name)
                 : launch<K5R, 64, 1, true>(ctx, p, p.R, kMaxChunk, name);
}
