// plan.cuh - the host side of the logits engine v1 shared by K1, K2 and K5: the kernel
// parameters and shared-memory layout, row and chunk planning, and the query-side fill.
#ifndef IXL_LOGITS_PLAN_CUH
#define IXL_LOGITS_PLAN_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "internal.h"
}
#include "cuda/launch.cuh"
#include "ops.h"

namespace ixl_lg {

constexpr int kBN = 128;      // positions (slots) per key tile
constexpr int kThreads = 256; // 8 warps
constexpr int kWarps = 8;
// bytes per slot of the f16 tile: 256 + 64 (conflict-free 16-byte B loads)
constexpr int kHRow = 320;
constexpr int kVS = kBN + 8;  // bf16 per staged (row, head): 68 words, conflict-free stores
// fp32 per (m-block, lane group) partial head sums: 2-way stores at most
constexpr int kPS = kBN + 8;
// mxfp4 exponent folding: a scale byte within 127 +- kFold moves into the f16 values' exponents
// (e2m1 magnitudes times 2^+-13 stay normal f16 numbers: [2^-14, 49152])
constexpr int kFold = 13;
constexpr int kMaxMB = 8;     // m-blocks of 16 (row, head) pairs per CTA
constexpr int kMaxRB = 8;     // rows per CTA (HP = 16 gives 8)
constexpr int kMaxChunk = 4096;
// K2, K5: a CTA's chunk of columns covers at most this many pages (K2) or sparse blocks
// (K5, sbk >= 4); their page ids / key bases are fetched into shared memory once per CTA.
constexpr int kMaxChunkBlocks = kMaxChunk / 4 + 2;

// cp.async pipeline depth: 3 for mxfp4 tiles (8 KiB), 2 for e4m3 tiles (16 KiB), so that two
// CTAs fit an SM.
__host__ __device__ constexpr int stages_for(int fmt, bool bf16) {
  return (void)bf16, fmt == IXL_MXFP4 ? 3 : 2;
}

enum Mode { DENSE_RAGGED = 0, DENSE_PAGED = 1, SPARSE_RAGGED = 2, SPARSE_PAGED = 3 };

struct Params {
  const uint8_t *q_codes;    // [R, H, VB]
  const uint32_t *q_scales;  // [R, H] packed UE8M0, NULL for fp8
  const uint8_t *k_codes;    // ragged: [N, VB]
  const uint8_t *k_scales;   // ragged: [N] x 4 bytes (UE8M0 x4 or fp32)
  const uint8_t *k_pages;    // paged: [num_pages, page_stride]
  const void *weights;       // [R, H] fp32 (fp32 reduction) or bf16 (bf16 reduction)
  const int32_t *ks;         // ragged: [R] (K1 ks, K5 row_ks)
  const int32_t *ke;         // [R]: ragged ke / row_ke, paged context_lens / row_ke
  const int32_t *block_table;// paged: [R, bt_cols]
  const int32_t *sparse_ids; // K5: [R, nsb]
  void *out;                 // [R, out_cols] fp32 or bf16
  int64_t R, N;
  int64_t page_stride, num_pages, bt_cols;
  int64_t nsb;
  int64_t out_cols;
  int64_t chunk;   // output columns per CTA, a multiple of kBN
  int64_t nchunks; // chunks per row block
  int64_t nrb;     // row blocks
  int page_size, sbk, aligned;
  int H, HP, RB, MB, MW;
  int compressed, clean;
  // K1 (compressed) / K2 with the fp32 reduction: K3's block scores (idxlab.h's
  // ixl_block_scores), NULL when none: [R, bs_cols] fp32, set to 0xFFFFFFFF words (below every
  // value of the float atomic max) before the launch; bs_nblocks [R]
  float *bs;
  int32_t *bs_nblocks;
  int64_t bs_cols;
  int bs_cbs;
};

// Dynamic shared memory layout; the host sizes the launch with the same struct.
struct Smem {
  int stages, stage_bytes, stage, scale, flag, half, kinfo, red, w, pre, total;
  __host__ __device__ Smem(int fmt, bool bf16, int MB, int RB, int H, bool one_row) {
    stages = stages_for(fmt, bf16);
    stage_bytes = kBN * (fmt == IXL_MXFP4 ? 64 : 128); // raw codes, as copied
    int off = 0;
    stage = off;
    off += stages * stage_bytes;
    scale = off; // raw scale words per stage
    off += stages * kBN * 4;
    flag = off;  // 1 where a slot holds a key, per stage
    off += stages * kBN;
    off = (off + 15) & ~15;
    half = off;  // the current tile as f16
    off += kBN * kHRow;
    kinfo = off; // per slot: MX ke_g << 23 for g = 0..3; fp8 the scale * 2^16
    off += kBN * 16;
    red = off; // fp32: partial head sums [MB][8 lane groups][kPS]; bf16: staged values [MB*16][kVS]
    off += bf16 ? MB * 16 * kVS * 2 : MB * 8 * kPS * 4;
    w = off;
    off += bf16 ? ((RB * H * 2 + 15) & ~15) : 0;
    pre = off; // K2, K5: int64 base[kMaxChunkBlocks], int32 page[..], int32 slot[..]
    if (one_row) off += kMaxChunkBlocks * 16;
    total = off;
  }
};

// ------------------------------------------------------------------ host side

// Alignment the kernels rely on: 16-byte copies of keys, 4-byte loads of query codes.
static inline ixl_status check_align(ixl_ctx *ctx, const char *op, const ixl_tensor *t,
                                     const char *name, int align) {
  if (t && t->data && ((uintptr_t)t->data % (uintptr_t)align))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: %s data at %p: the CUDA kernel needs it %d-byte aligned (a view "
                         "must start on such a boundary)",
                         op, name, t->data, align);
  return IXL_OK;
}

// Heads padded to a multiple of 16, rows per CTA, m-blocks, m-warps.
static inline void plan_rows(Params &p, int H, bool one_row) {
  p.H = H;
  p.HP = (H + 15) / 16 * 16;
  p.RB = one_row ? 1 : (128 / p.HP > kMaxRB ? kMaxRB : 128 / p.HP);
  if (p.RB < 1) p.RB = 1;
  p.MB = p.RB * p.HP / 16;
  p.MW = p.MB <= 1 ? 1 : p.MB <= 2 ? 2 : p.MB <= 4 ? 4 : 8; // one m-block per m-warp
}

// Chunk of output columns per CTA: large enough to amortise a CTA's set-up (Q fragments,
// prefetched page ids, pipeline fill), small enough that the grid fills the GPU: one wave of
// 2 CTAs per SM when the work is small, else chunks of kMaxChunk columns. `cap` bounds it
// further (K2: the chunk's pages must fit the prefetch array).
static inline ixl_status plan_chunks(ixl_ctx *ctx, const char *op, Params &p, int64_t units,
                                     int64_t cap, int64_t *blocks) {
  const int sms = ixl::sm_count(ctx);
  const int64_t cols = p.out_cols;
  if (cols > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED,
                         "%s: out has %lld columns: at most 2^31 - 1 on the GPU", op,
                         (long long)cols);
  cap = cap / kBN * kBN;
  if (cap > kMaxChunk) cap = kMaxChunk;
  if (cap < kBN) cap = kBN;
  int64_t want = ixl_ceil_div(units * ixl_ceil_div(cols, kBN), 2LL * sms) * kBN;
  if (want < kBN) want = kBN;
  if (want > cap) want = cap;
  int64_t nch = ixl_ceil_div(cols, want);
  if (units > 0 && nch > INT32_MAX / units) { // keep the 1-D grid within 2^31 - 1 blocks
    return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED,
                         "%s: %lld rows x %lld chunks of columns: more CTAs than a CUDA grid holds",
                         op, (long long)units, (long long)nch);
  }
  p.chunk = want;
  p.nchunks = nch;
  *blocks = nch * units;
  return IXL_OK;
}

// The query side every logits kernel shares.
static inline ixl_status fill_query(ixl_ctx *ctx, const char *op, Params &p, const ixl_qk *in,
                                    const ixl_tensor *weights, const ixl_tensor *out) {
  ixl_status st;
  if ((st = check_align(ctx, op, in->q_codes, "q_codes", 16)) ||
      (st = check_align(ctx, op, in->q_scales, "q_scales", 4)) ||
      (st = check_align(ctx, op, weights, "weights", weights->dtype == IXL_F32 ? 4 : 2)) ||
      (st = check_align(ctx, op, out, "out", out->dtype == IXL_F32 ? 4 : 2)))
    return st;
  p.q_codes = (const uint8_t *)in->q_codes->data;
  p.q_scales = in->q_scales ? (const uint32_t *)in->q_scales->data : nullptr;
  p.weights = weights->data;
  p.out = out->data;
  p.R = in->q_codes->shape[0];
  p.out_cols = out->shape[1];
  return IXL_OK;
}

// The ragged K side (K1, K5 ragged): codes read by 16-byte copies, scales by 4-byte loads.
static inline ixl_status fill_k_ragged(ixl_ctx *ctx, const char *op, Params &p,
                                       const ixl_qk *in) {
  ixl_status st;
  if ((st = check_align(ctx, op, in->k_codes, "k_codes", 16)) ||
      (st = check_align(ctx, op, in->k_scales, "k_scales", 4)))
    return st;
  p.k_codes = (const uint8_t *)in->k_codes->data;
  p.k_scales = (const uint8_t *)in->k_scales->data;
  p.N = in->k_codes->shape[0];
  return IXL_OK;
}

// The paged K side (K2, K5 paged): the pages and the block table of their ids. The caller
// checks the block table's alignment (each op names its tensors in its own order).
static inline ixl_status fill_k_paged(ixl_ctx *ctx, const char *op, Params &p, const ixl_qk *in,
                                      const ixl_tensor *block_table) {
  ixl_status st;
  if ((st = check_align(ctx, op, in->k_pages, "k_pages", 16))) return st;
  p.k_pages = (const uint8_t *)in->k_pages->data;
  p.num_pages = in->k_pages->shape[0];
  p.page_stride = in->k_pages->shape[1];
  p.page_size = in->page_size;
  p.block_table = (const int32_t *)block_table->data;
  p.bt_cols = block_table->shape[1];
  return IXL_OK;
}

} // namespace ixl_lg

#endif
