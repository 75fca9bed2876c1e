// logits/logits_v1.cuh - the tile engine of the CUDA logits kernels: K1 (dense, ragged), K2
// (dense, paged) and K5 (sparse, ragged and paged) are one kernel template that differs only
// in where a tile's keys come from and where its logits go. logits/dense.cu and
// logits/sparse.cu instantiate it; the numerics are those of kernels/logits/engine.h, bit for bit
// where SPEC 3 says so.
//
// Design (one CTA = 8 warps, 256 threads):
// - A CTA owns a few query rows (K1: RB = 128 / HP rows; K2, K5: one row) and one chunk of
//   output columns. The (row block, chunk) work items are all of bounded size, so ragged rows
//   of very different lengths balance over the grid without any host-side knowledge of the
//   lengths (they live on the device) and without scratch memory.
// - The M dimension of the MMAs is (row, head): heads are padded to HP = a multiple of 16, so
//   every m-block of 16 belongs to one row. The CTA has MB <= 8 m-blocks; each warp keeps the
//   query fragments of one m-block in registers for the whole kernel and walks its slice of
//   every key tile (N = positions).
// - Key tiles of 128 positions stream through a cp.async pipeline (16-byte copies; K5
//   gathers its sparse blocks as contiguous runs of sbk * 64 or sbk * 128 bytes, through ids
//   and page ids fetched into shared memory once per CTA). Each tile is converted once, in
//   shared memory, to f16, two threads per slot: every e2m1 value is exact in f16 (a byte
//   table), and so is every e4m3 value (sm_89+: the hardware conversion; sm_80: the e4m3 bit
//   pattern placed into f16's fields, exactly value * 2^-8). The query fragments are
//   converted the same way once. So the MMAs are plain m16n8k16 f16 MMAs with fp32
//   accumulation on every target. (On sm_90, mma.sync with e4m3 operands is itself lowered
//   to f16 MMAs plus conversions, repeated for every fragment: converting once is cheaper.)
//   Within each 32-element scale group the k order is permuted identically in A and B so
//   that a thread's B operand of a group is one 16-byte shared-memory load.
// - mxfp4 exponent folding: when a scale byte lies within 127 +- 13, 2^(e - 127) moves into
//   the f16 values themselves (the table's exponents), exactly; a group sum then already is
//   SPEC's scaled partial p_g * 2^(qe + ke - 254), and the epilogue is three fp32 adds.
// - The dot product (SPEC 3): one accumulator per 32-element scale group (two k16 MMAs).
//   For mxfp4 every group sum is a multiple of 1/4 below 1152, exact in the accumulator. Then
//   p_g * 2^(qe_g + ke_g - 254) and (p0 + p1) + (p2 + p3) in fp32, as an exact power-of-two
//   multiply and one fma when every exponent of the tile lies in a safe window (the common
//   case, decided once per tile by a block vote), else with numerics/scalar.h's
//   ixl_scale_pow2f, the CPU's formula (NaN scales, subnormal or huge results). fp8: one sum over
//   the 128 products, times the key's fp32 scale.
// - fp32 reduction: relu and the weights in registers; each lane group's share of the head
//   sum goes to shared memory, and the store phase sums the shares of the row's m-blocks in
//   a fixed order (deterministic; SPEC allows any order).
//   bf16 reduction: bf16(relu(dot)) of each (head, position) is staged in shared memory, and
//   one thread per pair of positions runs SPEC's fixed chain with fma.rn.bf16x2 (one rounding
//   per step, heads in increasing order, 4 partial sums), so the result is bitwise the CPU's.
// - Nothing is allocated, nothing synchronises with the host: every launch is capturable.
// - Row ranges, ids and page ids are device data: the kernels clamp them so that no value,
//   however wrong, makes them read outside K, the pages, the block table or the ids.
#ifndef IXL_LOGITS_V1_CUH
#define IXL_LOGITS_V1_CUH

#include "cuda/sm80.cuh"
#include "logits/block_scores.cuh"
#include "logits/k1_window.h"
#include "logits/plan.cuh"
#include "numerics/scalar.h"

namespace ixl_lg {

using namespace ixl::sm80;

// 1 when every byte of a packed UE8M0 word lies within 127 +- kFold.
__device__ __forceinline__ bool foldable(uint32_t w) {
  const uint32_t mn = __vminu4(w, w >> 16), mx = __vmaxu4(w, w >> 16);
  const int lo = (int)(__vminu4(mn, mn >> 8) & 0xFF), hi = (int)(__vmaxu4(mx, mx >> 8) & 0xFF);
  return lo >= 127 - kFold && hi <= 127 + kFold;
}

__device__ __forceinline__ float relu(float x) { return x < 0.0f ? 0.0f : x; } // NaN stays NaN

__device__ __forceinline__ float neg_inf() { return __uint_as_float(0xff800000u); }
constexpr uint16_t kBf16NegInf = 0xFF80;

__device__ __forceinline__ void store_out(void *out, int64_t idx, float v, bool bf16) {
  if (bf16)
    reinterpret_cast<__nv_bfloat16 *>(out)[idx] = __float2bfloat16_rn(v); // v holds a bf16 value
  else
    reinterpret_cast<float *>(out)[idx] = v;
}
__device__ __forceinline__ void store_neg_inf(void *out, int64_t idx, bool bf16) {
  if (bf16)
    reinterpret_cast<uint16_t *>(out)[idx] = kBf16NegInf;
  else
    reinterpret_cast<float *>(out)[idx] = neg_inf();
}

__host__ __device__ __forceinline__ int64_t mn64(int64_t a, int64_t b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ int64_t mx64(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// ------------------------------------------------------------------ K3's block scores
// (issue 14's fused K3: K1 compressed / K2, fp32 reduction, any cbs and ks; the max and the
// atomic in logits/block_scores.cuh)

// One warp's slots of one row, position col (request-local; -1: none) with logit v: each block
// segment of the warp reduces to its first lane (the positions of a warp's lanes increase, so
// a block's lanes are consecutive) and adds one atomic; the row's newest position adds +inf.
// Every lane of the warp calls it.
__device__ __forceinline__ void emit_scores(const Params &p, int64_t row, int64_t col, int64_t len,
                                            float v, int lane) {
  const bool ok = col >= 0 && col < len;
  const int64_t blk = ok ? col / p.bs_cbs : -1;
  float m = v;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int64_t ob = __shfl_down_sync(0xffffffffu, blk, off);
    const float om = __shfl_down_sync(0xffffffffu, m, off);
    if (lane + off < 32 && ob == blk) m = ixl_bs::nan_max(m, om);
  }
  const int64_t pb = __shfl_up_sync(0xffffffffu, blk, 1);
  if (!ok || blk >= p.bs_cols) return;
  float *dst = p.bs + row * p.bs_cols + blk;
  if (lane == 0 || pb != blk) ixl_bs::score_max(dst, m);
  if (col == len - 1) ixl_bs::score_max(dst, __uint_as_float(0x7f800000u));
}

// ------------------------------------------------------------------ the kernel

// FMT: ixl_kv_format. MODE: Mode. BF16: the bf16 reduction (else fp32).
template <int FMT, int MODE, bool BF16>
__global__ void __launch_bounds__(kThreads, 2) logits_kernel(const Params p) {
  constexpr bool kMX = FMT != IXL_FP8;
  constexpr int VB = FMT == IXL_MXFP4 ? 64 : 128; // value bytes per position
  constexpr int CPP = VB / 16;                     // 16-byte copies per position
  constexpr bool kPaged = MODE == DENSE_PAGED || MODE == SPARSE_PAGED;
  constexpr bool kSparse = MODE == SPARSE_RAGGED || MODE == SPARSE_PAGED;
  constexpr bool kOneRow = MODE != DENSE_RAGGED;
  // K3's block scores can come with K1 / K2's fp32 logits (p.bs)
  constexpr bool kEmit = !BF16 && (MODE == DENSE_RAGGED || MODE == DENSE_PAGED);
  // the MMAs sum the f16 images of the values: e2m1 exactly, e4m3 exactly (sm_89+) or times
  // 2^-8 (sm_80: products 2^-16)
  constexpr int SH = FMT == IXL_MXFP4 ? 0 : kE4m3Sh;
  constexpr int kSt = stages_for(FMT, BF16);
  // the scale word of a slot that holds no key: exponent 0 in every group (MX) or 1.0f
  constexpr uint32_t kNoScale = kMX ? 0x7F7F7F7Fu : 0x3F800000u;

  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int64_t s_lo[kMaxRB], s_hi[kMaxRB], s_coloff[kMaxRB];
  __shared__ int64_t s_len[kEmit && MODE == DENSE_RAGGED ? kMaxRB : 1]; // K1 block scores
  __shared__ int s_nvalid, s_qlo, s_qhi, s_qff;

  const Smem L(FMT, BF16, p.MB, p.RB, p.H, kOneRow);
  uint8_t *const stage = smem + L.stage;
  uint32_t *const sscale = reinterpret_cast<uint32_t *>(smem + L.scale);
  uint8_t *const sflag = smem + L.flag;
  uint8_t *const htile = smem + L.half;
  uint32_t *const kinfo = reinterpret_cast<uint32_t *>(smem + L.kinfo);
  float *const psum = reinterpret_cast<float *>(smem + L.red);
  __nv_bfloat16 *const vbuf = reinterpret_cast<__nv_bfloat16 *>(smem + L.red);
  __nv_bfloat16 *const sw = reinterpret_cast<__nv_bfloat16 *>(smem + L.w);
  int64_t *const pre_base = reinterpret_cast<int64_t *>(smem + L.pre);
  int32_t *const pre_page = reinterpret_cast<int32_t *>(smem + L.pre + kMaxChunkBlocks * 8);
  int32_t *const pre_slot = reinterpret_cast<int32_t *>(smem + L.pre + kMaxChunkBlocks * 12);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, t4 = lane & 3;
  const int H = p.H, HP = p.HP, RB = p.RB, MB = p.MB, MW = p.MW;

  // ---- the work item
  const int64_t b = blockIdx.x;
  int64_t rb, ch;
  if (kOneRow) {
    rb = b / p.nchunks; // a row's chunks are neighbours
    ch = b % p.nchunks;
  } else {
    rb = b % p.nrb;     // the row blocks of one chunk run together: K chunk reuse in L2
    ch = b / p.nrb;
  }
  const int64_t row0 = rb * RB;
  const int64_t c0 = ch * p.chunk;
  const int64_t chunk_hi = mn64(c0 + p.chunk, p.out_cols);

  // ---- per-row ranges
  // K1: window [s_lo, s_hi) of K rows this CTA computes for row r; output column = K row -
  // s_coloff. K2, K5: one row; lo/hi are the key range (paged: [0, context_len)).
  int64_t hull_lo = 0, hull_hi = 0, row_lo = 0, row_hi = 0, koff = 0;
  const int64_t row = row0; // K2, K5
  if (MODE == DENSE_RAGGED) {
    // (kEmit, K3's block scores: the rows' len in compressed columns, block counts by chunk 0)
    ixl_k1_row_windows<kEmit>(tid, RB, row0, p.R, p.ks, p.ke, p.N, p.compressed, c0, chunk_hi,
                              s_lo, s_hi, s_coloff, s_len,
                              p.bs && ch == 0 ? p.bs_nblocks : nullptr, p.out_cols, p.bs_cbs);
  } else if (kPaged) {
    row_lo = 0;
    row_hi = clamp64(p.ke[row], 0, p.bt_cols * (int64_t)p.page_size);
    if (kEmit && p.bs && ch == 0 && tid == 0)
      p.bs_nblocks[row] = (int32_t)((mn64(row_hi, p.out_cols) + p.bs_cbs - 1) / p.bs_cbs);
  } else { // SPARSE_RAGGED
    row_lo = clamp64(p.ks[row], 0, p.N);
    row_hi = clamp64(p.ke[row], row_lo, p.N);
    koff = p.aligned ? 0 : row_lo % p.sbk;
  }
  if (tid == 0) {
    s_nvalid = (int)mn64(p.nsb, 0x7fffffff);
    s_qlo = 1 << 20;
    s_qhi = -(1 << 20);
    s_qff = 0;
  }
  // the query side's bf16 weights (bf16 reduction)
  if (BF16) {
    const __nv_bfloat16 *wb = reinterpret_cast<const __nv_bfloat16 *>(p.weights);
    for (int i = tid; i < RB * H; i += kThreads) {
      const int64_t r = row0 + i / H;
      sw[i] = r < p.R ? wb[r * H + i % H] : __float2bfloat16_rn(0.0f);
    }
  }
  __syncthreads();

  // K5: n_valid = the length of the strictly increasing prefix of the row's ids (this CTA
  // needs it only up to its last block).
  const int32_t *ids = kSparse ? p.sparse_ids + row * p.nsb : nullptr;
  if (kSparse) {
    const int64_t jmax = mn64(p.nsb, (chunk_hi + p.sbk - 1) / p.sbk);
    for (int64_t j = 1 + tid; j < jmax; j += kThreads)
      if (ids[j] <= ids[j - 1]) atomicMin(&s_nvalid, (int)j);
  }
  // MX: the window of the CTA's query exponents (the per-tile fast-path vote, and whether the
  // mxfp4 query exponents fold into the f16 values)
  const int mw = warp % MW, nw = warp / MW;
  const int mb = mw; // this warp's m-block (none when mb >= MB)
  if (kMX) {
    bool q_ff = false;
    int lo = 1 << 20, hi = -(1 << 20);
    for (int half = 0; half < 2; half++) {
      const int qh = mb * 16 + gid + half * 8, r = qh / HP, h = qh % HP;
      if (mb < MB && h < H && r < RB && row0 + r < p.R && t4 == 0) {
        const uint32_t qw = p.q_scales[(row0 + r) * H + h];
        for (int g = 0; g < 4; g++) {
          const int qb = (int)((qw >> (8 * g)) & 0xFF);
          lo = min(lo, qb - 127);
          hi = max(hi, qb - 127);
          q_ff |= qb == 0xFF;
        }
      }
    }
    if (hi >= lo) {
      atomicMin(&s_qlo, lo);
      atomicMax(&s_qhi, hi);
    }
    if (q_ff) atomicOr(&s_qff, 1);
  }
  __syncthreads();
  const int64_t nvalid = kSparse ? s_nvalid : 0;
  const int cq_lo = s_qlo, cq_hi = s_qhi, cq_ff = s_qff;
  // mxfp4: fold every query exponent into the f16 query values (then the MMA's group sums
  // already carry 2^(qe - 127)); the keys fold per slot when the tile is converted
  const bool fold_q = FMT == IXL_MXFP4 && !cq_ff && cq_lo >= -kFold && cq_hi <= kFold;

  // K2, K5: the chunk's page ids (K2) or its sparse blocks' key bases and pages (K5), once,
  // so that loading a tile needs no dependent global load.
  const int64_t pre0 = kSparse ? c0 / p.sbk : kPaged ? c0 / p.page_size : 0;
  if (MODE == DENSE_PAGED) {
    const int64_t last = mn64(chunk_hi, row_hi) - 1;
    // a chunk with no position of the row reads no page id (last / page_size would round
    // -1 up to page 0, of a block table that may have no columns)
    for (int64_t j = tid; last >= c0 && pre0 + j <= last / p.page_size; j += kThreads) {
      const int64_t pg = p.block_table[row * p.bt_cols + pre0 + j];
      pre_page[j] = pg >= 0 && pg < p.num_pages ? (int32_t)pg : -1;
    }
  } else if (kSparse) {
    const int64_t nb = (chunk_hi - c0 + p.sbk - 1) / p.sbk;
    for (int64_t j = tid; j < nb; j += kThreads) {
      const int64_t jb = pre0 + j;
      int64_t base = -1;
      int32_t pg = -1, slot = 0;
      if (jb < nvalid) {
        base = (int64_t)ids[jb] * p.sbk + koff; // the key (or logical position) of o = 0
        if (kPaged && base >= 0 && base < row_hi) {
          const int64_t e = p.block_table[row * p.bt_cols + base / p.page_size];
          if (e >= 0 && e < p.num_pages) pg = (int32_t)e;
          slot = (int32_t)(base % p.page_size);
        }
      } else {
        base = INT64_MIN / 2; // no key: every position of the block lies outside the row
      }
      pre_base[j] = base;
      pre_page[j] = pg;
      pre_slot[j] = slot;
    }
  }

  // K1: -inf where this CTA's columns lie outside a row's range (clean, or compressed), and
  // the hull of the rows' windows.
  if (MODE == DENSE_RAGGED) {
    hull_lo = INT64_MAX;
    hull_hi = INT64_MIN;
    for (int r = 0; r < RB; r++) {
      if (row0 + r >= p.R) break;
      const int64_t lo = s_lo[r], hi = s_hi[r], co = s_coloff[r];
      if (hi > lo) {
        hull_lo = mn64(hull_lo, lo);
        hull_hi = mx64(hull_hi, hi);
      }
      if (p.clean || p.compressed) {
        const int64_t a1 = hi > lo ? lo - co : chunk_hi;
        const int64_t b0 = hi > lo ? hi - co : chunk_hi;
        const int64_t base = (row0 + r) * p.out_cols;
        for (int64_t c = c0 + tid; c < a1; c += kThreads) store_neg_inf(p.out, base + c, BF16);
        for (int64_t c = b0 + tid; c < chunk_hi; c += kThreads)
          store_neg_inf(p.out, base + c, BF16);
      }
    }
    if (hull_hi <= hull_lo) hull_lo = hull_hi = 0;
  }

  const int64_t span = MODE == DENSE_RAGGED ? hull_hi - hull_lo : chunk_hi - c0;
  const int T = (int)((span + kBN - 1) / kBN);

  // ---- the query fragments: this warp's m-block, as f16, for the whole kernel
  const int slice = kBN / (kWarps / MW); // positions of each tile this warp computes
  uint32_t qa[4][2][4];                  // [group][half: row gid, gid + 8][word]
  uint32_t qbits[2][4];                  // MX: (qe - 127 - SH) << 23 (qe = 127 once folded)
  float wf[2];                           // fp32 reduction: the weights
  bool rowok[2];
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int qh = mb * 16 + gid + half * 8;
    const int r = qh / HP, h = qh % HP;
    const int64_t qrow = row0 + r;
    const bool ok = mb < MB && h < H && r < RB && qrow < p.R;
    rowok[half] = ok;
    const int64_t qi = qrow * H + h;
    uint32_t qw = 0x7F7F7F7Fu;
    if (kMX && ok) qw = p.q_scales[qi];
#pragma unroll
    for (int g = 0; g < 4; g++) {
      const int qb = (int)((qw >> (8 * g)) & 0xFF);
      uint32_t w0 = 0, w1 = 0, w2 = 0, w3 = 0;
      if (ok) { // elements 32g + 8*t4 .. + 7
        if (FMT == IXL_MXFP4) {
          const uint32_t x =
              *reinterpret_cast<const uint32_t *>(p.q_codes + qi * 64 + g * 16 + t4 * 4);
          uint32_t l0, l1;
          e2m1_table(fold_q ? qb - 127 : 0, l0, l1);
          e2m1x4_to_f16(x, l0, l1, w0, w1);
          e2m1x4_to_f16(x >> 16, l0, l1, w2, w3);
        } else {
          const uint2 x = *reinterpret_cast<const uint2 *>(p.q_codes + qi * 128 + g * 32 + t4 * 8);
          e4m3x4_to_f16(x.x, w0, w1);
          e4m3x4_to_f16(x.y, w2, w3);
        }
      }
      qa[g][half][0] = w0;
      qa[g][half][1] = w1;
      qa[g][half][2] = w2;
      qa[g][half][3] = w3;
      qbits[half][g] = (uint32_t)((fold_q ? 127 : qb) - 127 - SH) << 23;
    }
    wf[half] = 0.0f;
    if (!BF16 && ok) wf[half] = reinterpret_cast<const float *>(p.weights)[qi];
  }

  // ---- loading one tile into a stage (raw codes and scale words, as stored)
  auto load_tile = [&](int t, int s) {
    uint8_t *dst = stage + s * L.stage_bytes;
    uint32_t *dsc = sscale + s * kBN;
    uint8_t *dfl = sflag + s * kBN;
    // K1: the tile is needed when some row's window meets it
    bool needed = true;
    int64_t n0 = 0;
    if (MODE == DENSE_RAGGED) {
      n0 = hull_lo + (int64_t)t * kBN;
      needed = false;
      for (int r = 0; r < RB; r++)
        needed |= s_hi[r] > s_lo[r] && s_lo[r] < n0 + kBN && s_hi[r] > n0;
    }
    {
      // two threads per slot: the slot's source is computed once; thread `part` copies the
      // 16-byte chunks 2j + part, so a warp's copies cover whole 32-byte sectors
      const int i = tid >> 1, part = tid & 1;
      const uint8_t *vsrc = nullptr, *ssrc = nullptr;
      if (MODE == DENSE_RAGGED) {
        const int64_t n = n0 + i;
        if (needed && n < hull_hi) {
          vsrc = p.k_codes + n * VB;
          ssrc = p.k_scales + n * 4;
        }
      } else {
        const int local = t * kBN + i; // column - c0, < kMaxChunk
        int64_t pg = -1, slot = 0, pos = -1;
        if (c0 + local < chunk_hi) {
          if (MODE == DENSE_PAGED) {
            if (c0 + local < row_hi) {
              const unsigned P = (unsigned)p.page_size, col = (unsigned)(c0 + local);
              const unsigned pi = col / P;
              pg = pre_page[pi - (unsigned)pre0];
              slot = col - pi * P;
            }
          } else {
            const int jl = local / p.sbk, o = local % p.sbk; // c0 is a multiple of sbk
            const int64_t q = pre_base[jl] + o;
            if (q >= row_lo && q < row_hi) {
              if (MODE == SPARSE_RAGGED) {
                pos = q;
              } else {
                pg = pre_page[jl];
                slot = pre_slot[jl] + o;
                if (slot >= p.page_size) { // a block across a page boundary (page_size % sbk != 0)
                  const int64_t e = p.block_table[row * p.bt_cols + q / p.page_size];
                  pg = e >= 0 && e < p.num_pages ? e : -1;
                  slot = q % p.page_size;
                }
              }
            }
          }
        }
        if (kPaged && pg >= 0) {
          const uint8_t *base = p.k_pages + pg * p.page_stride;
          vsrc = base + slot * VB;
          ssrc = base + (int64_t)p.page_size * VB + slot * 4;
        } else if (!kPaged && pos >= 0) {
          vsrc = p.k_codes + pos * VB;
          ssrc = p.k_scales + pos * 4;
        }
      }
      // a slot without a key is zero-filled without reading (src-size 0)
#pragma unroll
      for (int j = 0; j < CPP / 2; j++) {
        const int c = 2 * j + part;
        cp_async16(dst + i * VB + c * 16, vsrc ? vsrc + c * 16 : p.q_codes, vsrc ? 16 : 0);
      }
      if (part == 0) {
        if (ssrc)
          cp_async4(dsc + i, ssrc);
        else
          dsc[i] = kNoScale;
        dfl[i] = vsrc != nullptr;
      }
    }
  };

  // ---- the pipeline
  __syncthreads(); // the prefetched page ids / key bases
#pragma unroll
  for (int s = 0; s < kSt - 1; s++) {
    if (s < T) load_tile(s, s);
    cp_async_commit();
  }
  __syncthreads(); // the prologue tiles' flags (plain stores) are visible to every thread

  for (int t = 0; t < T; t++) {
    const int s = t % kSt;
    cp_async_wait<kSt - 2>();
    // two stages: tile t's flags were stored in the previous iteration, after its barrier;
    // one more barrier orders them before the vote reads them (three stages: two barriers
    // back already)
    if (kSt == 2) __syncthreads();
    // every thread's copies of tile t have landed, and every thread is done with tile t - 1
    const int any = __syncthreads_or(tid < kBN && sflag[s * kBN + tid]);
    if (t + kSt - 1 < T) load_tile(t + kSt - 1, (t + kSt - 1) % kSt);
    cp_async_commit();

    const int64_t tbase = MODE == DENSE_RAGGED ? hull_lo + (int64_t)t * kBN : c0 + (int64_t)t * kBN;
    if (!any) {
      if (kOneRow)
        for (int i = tid; i < kBN; i += kThreads)
          if (tbase + i < chunk_hi) store_neg_inf(p.out, row * p.out_cols + tbase + i, BF16);
      // K2: the row's positions here are -inf logits, and so count for their blocks (K1: a
      // tile no row's window meets has no position of any row)
      if (kEmit && MODE == DENSE_PAGED && p.bs && tid < kBN)
        emit_scores(p, row, tbase + tid < chunk_hi ? tbase + tid : -1, mn64(row_hi, p.out_cols),
                    neg_inf(), lane);
      continue;
    }

    // ---- the tile to f16 (once for all warps), and the per-slot scale information. Two
    // threads per slot: the slot's scale word is read and judged once per thread.
    bool bad = false, unfolded = false;
    {
      const int slot = tid >> 1, part = tid & 1;
      uint32_t w = sscale[s * kBN + slot];
      const uint32_t *raw = reinterpret_cast<const uint32_t *>(stage + s * L.stage_bytes);
      uint8_t *hrow = htile + slot * kHRow;
      if (FMT == IXL_MXFP4) {
        // a slot whose 4 exponents all fold carries 2^(ke_g - 127) in its f16 values, and its
        // effective exponents are then 127
        const bool fold = foldable(w);
        const uint4 r0 = *reinterpret_cast<const uint4 *>(raw + slot * 16 + part * 8);
        const uint4 r1 = *reinterpret_cast<const uint4 *>(raw + slot * 16 + part * 8 + 4);
        const uint32_t x[8] = {r0.x, r0.y, r0.z, r0.w, r1.x, r1.y, r1.z, r1.w};
#pragma unroll
        for (int gg = 0; gg < 2; gg++) { // this thread's groups: 2 * part + gg
          const int g = 2 * part + gg;
          uint32_t l0, l1;
          e2m1_table(fold ? (int)((w >> (8 * g)) & 0xFF) - 127 : 0, l0, l1);
#pragma unroll
          for (int j = 0; j < 4; j++) { // 16-byte chunk 4g + j of the f16 row (8 codes)
            uint4 o;
            e2m1x4_to_f16(x[4 * gg + j], l0, l1, o.x, o.y);
            e2m1x4_to_f16(x[4 * gg + j] >> 16, l0, l1, o.z, o.w);
            *reinterpret_cast<uint4 *>(hrow + (4 * g + j) * 16) = o;
          }
        }
        if (fold)
          w = 0x7F7F7F7Fu;
        else
          unfolded = part == 0;
      } else {
#pragma unroll
        for (int j4 = 0; j4 < 4; j4++) {
          const int jj = (j4 + tid) & 3;
          const uint4 r = *reinterpret_cast<const uint4 *>(raw + slot * 32 + part * 16 + jj * 4);
          uint4 o0, o1;
          e4m3x4_to_f16(r.x, o0.x, o0.y);
          e4m3x4_to_f16(r.y, o0.z, o0.w);
          e4m3x4_to_f16(r.z, o1.x, o1.y);
          e4m3x4_to_f16(r.w, o1.z, o1.w);
          *reinterpret_cast<uint4 *>(hrow + (part * 16 + jj * 4) * 8) = o0;
          *reinterpret_cast<uint4 *>(hrow + (part * 16 + jj * 4) * 8 + 16) = o1;
        }
      }
      // MX: the tile takes the fast scale path when every exponent sum qe + ke - 254 of the
      // CTA's rows and the tile's keys lies in [-100, 100] and no scale is 0xFF. Then every
      // p_g * 2^E is a normal fp32 number (|p_g| in [2^-18, 2^23] or 0), and so is the factor
      // 2^(E - SH): the products are exact and one fma rounds each pair sum once, as the CPU.
      if (part == 0) {
        if (kMX) {
          uint32_t mn = __vminu4(w, w >> 16), mx = __vmaxu4(w, w >> 16);
          mn = __vminu4(mn, mn >> 8);
          mx = __vmaxu4(mx, mx >> 8);
          const int klo = (int)(mn & 0xFF) - 127, khi = (int)(mx & 0xFF) - 127;
          bad = cq_ff || khi == 128 || cq_lo + klo < -100 || cq_hi + khi > 100;
          *reinterpret_cast<uint4 *>(kinfo + slot * 4) = make_uint4(
              (w & 0xFFu) << 23, (w & 0xFF00u) << 15, (w & 0xFF0000u) << 7, (w >> 24) << 23);
        } else {
          // the key's scale, times 2^-SH: exact
          kinfo[slot * 4] = __float_as_uint(__fmul_rn(__uint_as_float(w), SH ? 65536.0f : 1.0f));
        }
      }
    }
    const bool fast = !__syncthreads_or(bad);
    // mxfp4, query and every key of the tile folded: the group sums are the scaled partials
    const bool folded = FMT == IXL_MXFP4 && fold_q && !__syncthreads_or(unfolded);

    // ---- MMAs and the per-head epilogue
    if (mb < MB) {
      for (int nb = 0; nb < slice / 8; nb++) {
        const int sb = nw * slice + nb * 8; // first slot of this n-block
        const uint8_t *bp = htile + (sb + gid) * kHRow + t4 * 16;
        uint4 bf[4];
#pragma unroll
        for (int g = 0; g < 4; g++) bf[g] = *reinterpret_cast<const uint4 *>(bp + g * 64);
        const int c0s = sb + 2 * t4;
        float d[4];
        if (kMX) {
          const uint4 k0 = *reinterpret_cast<const uint4 *>(kinfo + c0s * 4);
          const uint4 k1 = *reinterpret_cast<const uint4 *>(kinfo + c0s * 4 + 4);
          const uint32_t kb[2][4] = {{k0.x, k0.y, k0.z, k0.w}, {k1.x, k1.y, k1.z, k1.w}};
          float acc[4][4];
#pragma unroll
          for (int g = 0; g < 4; g++) {
#pragma unroll
            for (int e = 0; e < 4; e++) acc[g][e] = 0.0f;
            mma_group(acc[g], qa[g], bf[g]);
          }
          if (folded) {
#pragma unroll
            for (int e = 0; e < 4; e++)
              d[e] = __fadd_rn(__fadd_rn(acc[0][e], acc[1][e]), __fadd_rn(acc[2][e], acc[3][e]));
          } else if (fast) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
              const int half = e >> 1, col = e & 1;
              float m[4];
#pragma unroll
              for (int g = 0; g < 4; g++) m[g] = __uint_as_float(qbits[half][g] + kb[col][g]);
              const float t01 = __fmaf_rn(acc[1][e], m[1], __fmul_rn(acc[0][e], m[0]));
              const float t23 = __fmaf_rn(acc[3][e], m[3], __fmul_rn(acc[2][e], m[2]));
              d[e] = __fadd_rn(t01, t23);
            }
          } else {
#pragma unroll
            for (int e = 0; e < 4; e++) {
              const int half = e >> 1, col = e & 1;
              float pg[4];
#pragma unroll
              for (int g = 0; g < 4; g++) {
                const int qe = ((int)qbits[half][g] >> 23) + 127 + SH;
                const int ke = (int)(kb[col][g] >> 23);
                pg[g] = qe == 0xFF || ke == 0xFF ? __uint_as_float(0x7fc00000u)
                                                 : ixl_scale_pow2f(acc[g][e], qe + ke - 254 - SH);
              }
              d[e] = __fadd_rn(__fadd_rn(pg[0], pg[1]), __fadd_rn(pg[2], pg[3]));
            }
          }
        } else { // fp8: the sum of the 128 products (two independent chains), times the scale
          float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma_group(acc, qa[0], bf[0]);
          mma_group(acc2, qa[1], bf[1]);
          mma_group(acc, qa[2], bf[2]);
          mma_group(acc2, qa[3], bf[3]);
          const float ks0 = __uint_as_float(kinfo[c0s * 4]),
                      ks1 = __uint_as_float(kinfo[c0s * 4 + 4]);
#pragma unroll
          for (int e = 0; e < 4; e++) d[e] = __fmul_rn(acc[e] + acc2[e], (e & 1) ? ks1 : ks0);
        }

        if (BF16) {
          // bf16(relu(dot)) of rows gid and gid + 8, columns 2*t4 and 2*t4 + 1
          __nv_bfloat16 *vb = vbuf + (mb * 16 + gid) * kVS + c0s;
          *reinterpret_cast<__nv_bfloat162 *>(vb) = __floats2bfloat162_rn(relu(d[0]), relu(d[1]));
          *reinterpret_cast<__nv_bfloat162 *>(vb + 8 * kVS) =
              __floats2bfloat162_rn(relu(d[2]), relu(d[3]));
        } else {
          float c0v = 0.0f, c1v = 0.0f;
          if (rowok[0]) {
            c0v = wf[0] * relu(d[0]);
            c1v = wf[0] * relu(d[1]);
          }
          if (rowok[1]) {
            c0v += wf[1] * relu(d[2]);
            c1v += wf[1] * relu(d[3]);
          }
          // this lane group's share of the head sum; the stores sum the 8 groups
          *reinterpret_cast<float2 *>(psum + (mb * 8 + gid) * kPS + c0s) = make_float2(c0v, c1v);
        }
      }
    }
    __syncthreads();

    // ---- the head reduction and the stores
    const uint8_t *fl = sflag + s * kBN;
    if (!BF16) {
      const int per_row = HP / 16;
      // (RB * kBN is a multiple of 32 and a warp's 32 slots share one row: the block scores'
      // warp reduction sees whole warps)
      for (int idx = tid; idx < RB * kBN; idx += kThreads) {
        const int r = idx / kBN, i = idx % kBN;
        int64_t o = -1, col = -1; // col: the request-local position, for the block scores
        bool st = false;
        if (MODE == DENSE_RAGGED) {
          const int64_t n = tbase + i;
          if (row0 + r < p.R && n >= s_lo[r] && n < s_hi[r]) {
            o = (row0 + r) * p.out_cols + n - s_coloff[r];
            col = n - s_coloff[r];
            st = true;
          }
        } else if (tbase + i < chunk_hi) {
          o = row * p.out_cols + tbase + i;
          col = tbase + i;
          st = fl[i];
          if (!st) store_neg_inf(p.out, o, false);
        }
        float v = neg_inf();
        if (st) {
          v = 0.0f;
          const float *ps = psum + (r * per_row) * 8 * kPS + i;
          for (int k = 0; k < per_row * 8; k++) v += ps[k * kPS];
          store_out(p.out, o, v, false);
        }
        if (kEmit && p.bs) {
          // K1: col < the row's len by its window; K2: positions < min(context_len, out_cols)
          const int64_t len = MODE == DENSE_RAGGED ? s_len[r] : mn64(row_hi, p.out_cols);
          emit_scores(p, MODE == DENSE_RAGGED ? row0 + r : row, col, len, v, lane);
        }
      }
    } else {
      for (int idx = tid; idx < RB * (kBN / 2); idx += kThreads) {
        const int r = idx / (kBN / 2), i0 = (idx % (kBN / 2)) * 2;
        bool ok[2];
        int64_t o[2];
#pragma unroll
        for (int q = 0; q < 2; q++) {
          const int i = i0 + q;
          if (MODE == DENSE_RAGGED) {
            const int64_t n = tbase + i;
            ok[q] = row0 + r < p.R && n >= s_lo[r] && n < s_hi[r];
            o[q] = (row0 + r) * p.out_cols + n - s_coloff[r];
          } else {
            ok[q] = tbase + i < chunk_hi && fl[i];
            o[q] = row * p.out_cols + tbase + i;
            if (tbase + i < chunk_hi && !fl[i]) store_neg_inf(p.out, o[q], true);
          }
        }
        if (!ok[0] && !ok[1]) continue;
        // SPEC 3, K5 steps 2-4: four bf16 partial sums by h % 4, heads in increasing order,
        // each step one fma rounded once; then bf16(bf16(s0 + s2) + bf16(s1 + s3))
        const __nv_bfloat162 z = __floats2bfloat162_rn(0.0f, 0.0f);
        __nv_bfloat162 a0 = z, a1 = z, a2 = z, a3 = z;
        const __nv_bfloat16 *wr = sw + r * H;
        const __nv_bfloat16 *vr = vbuf + (r * HP) * kVS + i0;
        for (int h = 0; h < H; h += 4) {
          a0 = __hfma2(__bfloat162bfloat162(wr[h]),
                       *reinterpret_cast<const __nv_bfloat162 *>(vr + h * kVS), a0);
          a1 = __hfma2(__bfloat162bfloat162(wr[h + 1]),
                       *reinterpret_cast<const __nv_bfloat162 *>(vr + (h + 1) * kVS), a1);
          a2 = __hfma2(__bfloat162bfloat162(wr[h + 2]),
                       *reinterpret_cast<const __nv_bfloat162 *>(vr + (h + 2) * kVS), a2);
          a3 = __hfma2(__bfloat162bfloat162(wr[h + 3]),
                       *reinterpret_cast<const __nv_bfloat162 *>(vr + (h + 3) * kVS), a3);
        }
        const __nv_bfloat162 res = __hadd2(__hadd2(a0, a2), __hadd2(a1, a3));
        __nv_bfloat16 *ob = reinterpret_cast<__nv_bfloat16 *>(p.out);
        if (ok[0]) ob[o[0]] = __low2bfloat16(res);
        if (ok[1]) ob[o[1]] = __high2bfloat16(res);
      }
    }
  }
  cp_async_wait<0>();
}

// ------------------------------------------------------------------ launch

template <int FMT, int MODE, bool BF16>
static ixl_status launch_one(ixl_ctx *ctx, const Params &p, int64_t blocks, const char *name) {
  const Smem L(FMT, BF16, p.MB, p.RB, p.H, MODE != DENSE_RAGGED);
  auto kern = logits_kernel<FMT, MODE, BF16>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, L.total);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaFuncSetAttribute (logits kernel)");
  kern<<<(unsigned)blocks, kThreads, L.total, (cudaStream_t)ctx->stream>>>(p);
  return ixl_cuda_check_launch(ctx, name);
}

// The instance for a runtime format and reduction.
template <int MODE>
static ixl_status launch_fmt(ixl_ctx *ctx, const Params &p, int64_t blocks, int fmt, bool bf16,
                             const char *name) {
  if (blocks <= 0) return IXL_OK;
  switch (fmt) {
    case IXL_MXFP4:
      return bf16 ? launch_one<IXL_MXFP4, MODE, true>(ctx, p, blocks, name)
                  : launch_one<IXL_MXFP4, MODE, false>(ctx, p, blocks, name);
    case IXL_MXFP8:
      return bf16 ? launch_one<IXL_MXFP8, MODE, true>(ctx, p, blocks, name)
                  : launch_one<IXL_MXFP8, MODE, false>(ctx, p, blocks, name);
    case IXL_FP8:
      return bf16 ? launch_one<IXL_FP8, MODE, true>(ctx, p, blocks, name)
                  : launch_one<IXL_FP8, MODE, false>(ctx, p, blocks, name);
    default:
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s: kv_format = %d: not a known format", name,
                           fmt);
  }
}

} // namespace ixl_lg

#endif
