// logits/logits_v2_sm90.cu - variant v2 of the logits family (pin only, experimental): K2
// (dense paged logits, decode) for fp8 keys on Hopper's wgmma and TMA; every other mode and
// config runs v1's kernels (logits/dense.cu, logits/sparse.cu).
//
// What it does differently from v1:
// - e4m3 wgmma (QGMMA) straight from the stored codes: no f16 conversion of the key tile.
//   Swap-AB: A = 64 key positions x 128 B (one tile), B = the row's H heads x 128 B, so one
//   tile is four m64nHk32 SS wgmma chained into one f32 accumulator (H = 32 or 64).
// - Both operands arrive by TMA (cp.async.bulk.tensor.2d, 128B swizzle) over the page pool
//   seen as rows of 128 B (row = page * stride / 128 + slot), the per-position fp32 scales by
//   1-D bulk copies: a page of >= 64 slots gives one 8 KB box and one 256 B copy per tile,
//   smaller pages (8, 16, 32) 64 / P of each.
// - Warp specialization: a CTA is one math warpgroup and one producer warp (160 threads),
//   two CTAs per SM by design (not yet confirmed on the GPU); the producer keeps an 8-stage
//   mbarrier ring of tiles in flight (~135 KB per SM with two CTAs) and a 2-slot ring of Q;
//   its lanes fetch 32 block-table entries at once and hand them out by shuffle, so no tile
//   waits on a page-id load.
// - Persistent split in the kernel: the (row, 64-position tile) space of every row's out
//   columns is cut into equal contiguous ranges, one per CTA (no metadata launch), so a single
//   128K row uses every SM. Tiles at or past a row's context length are -inf stores only.
// - Epilogue per lane: its 2 positions x H/4 heads, relu(acc * scale) * w summed in fp32, two
//   shfl_xor over the quad, one store per position.
// Numerics: the dot is the tensor core's fp8 accumulation (not the CPU's sequential fp32 sum):
// within test_cuda_logits.c's fp8 tolerance (2^-8 T), not bitwise. The head sum order differs
// from v1's (SPEC allows any order for fp32).
// Not here (runs v1): the bf16 reduction, mxfp4/mxfp8, other H, other page sizes, K1, K5. So
// SPEC 3's K5 == K1/K2 (bf16) holds as in v1, but v2's fp32 K2 is not v1's bits.
// Benchmark: IXL_LOGITS_VARIANT=v2 build-gpu/bench_logits CASES.json 20 k2_decode_64x128k_fp8
// (beside v1; bench/README.md). H200, 2026-12-01 (BENCHMARKS.md): 64x128K 429 us (v1 1160),
// 2.66 TB/s = 62 % of copy bandwidth; a per-tile serial chain, not HBM, limits it.
//
// sass-limits: k2_fp8_kernel registers 128 shared 1024
// sass-expect: k2_fp8_kernel UTMALDG SYNCS
#include "logits/logits.h"
#include "cuda/launch.cuh"
#include "cuda/sm90.cuh"

namespace {

using namespace ixl::sm90;

constexpr int kTile = 64;              // positions per tile (the wgmma M)
constexpr int kStages = 8;             // tiles in flight per CTA
constexpr int kTileBytes = kTile * 128; // fp8 codes of one tile
constexpr int kMath = 128;             // the math warpgroup
constexpr int kThreads = kMath + 32;   // + the producer warp

struct K2Params {
  const uint8_t *pages;     // [num_pages, stride]: P x 128 B codes, then P fp32 scales
  const int32_t *bt;        // [R, bt_cols]
  const int32_t *lens;      // [R]
  const float *w;           // [R, H]
  float *out;               // [R, out_cols]
  int64_t stride, bt_cols, out_cols, units, per_cta;
  int32_t num_pages, P, PB, rpp; // PB = positions per box (min(P, 64)); rpp = stride / 128
  int32_t ntile, max_len;        // tiles per row (over out_cols); bt_cols * P clamped
};

// Dynamic shared memory: codes[kStages][8 KB] | q[2][H * 128] | scales[kStages][64] | bars.
template <int H>
struct K2Smem {
  static constexpr int codes = 0;
  static constexpr int q = codes + kStages * kTileBytes;
  static constexpr int scales = q + 2 * H * 128;
  static constexpr int bars = scales + kStages * kTile * 4;
  static constexpr int total = bars + (2 * kStages + 4) * 8;
  static constexpr int alloc = total + 1024; // the base is aligned up to 1024 in the kernel
};

#if IXL_SM90_DEVICE
// A row's length as the kernel uses it: clamped into [0, bt_cols * P].
__device__ __forceinline__ int32_t row_len(const K2Params &p, int64_t row) {
  const int32_t l = p.lens[row];
  return l < 0 ? 0 : l > p.max_len ? p.max_len : l;
}
#endif

template <int H>
__global__ void __launch_bounds__(kThreads, 2)
    k2_fp8_kernel(const __grid_constant__ CUtensorMap kmap,
                  const __grid_constant__ CUtensorMap qmap, const K2Params p) {
#if IXL_SM90_DEVICE
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  using L = K2Smem<H>;
  uint8_t *s_codes = smem + L::codes;
  uint8_t *s_q = smem + L::q;
  float *s_scales = reinterpret_cast<float *>(smem + L::scales);
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + L::bars);
  uint64_t *empty = full + kStages, *qfull = empty + kStages, *qempty = qfull + 2;
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], kMath);
    }
    for (int s = 0; s < 2; ++s) {
      ptx::mbarrier_init(&qfull[s], 1);
      ptx::mbarrier_init(&qempty[s], kMath);
    }
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  const int64_t u0 = (int64_t)blockIdx.x * p.per_cta;
  const int64_t u1 = u0 + p.per_cta < p.units ? u0 + p.per_cta : p.units;

  if (tid >= kMath) {
    // ---------------------------------------------------------------- producer warp
    const int lane = tid & 31;
    int stage = 0, qslot = 1;
    uint32_t ephase = 1, qephase = 3; // fresh empties pass on parity 1; bit s: Q slot s's
    int64_t row = -1, qrow = -1, cb = -1;     // cb: first page index of the cached bt entries
    int32_t len = 0, cache = 0;
    const int per = kTile / p.PB;
    int64_t r = u0 / p.ntile; // the unit's (row, tile), stepped without a division
    int32_t t = (int32_t)(u0 - r * p.ntile);
    for (int64_t u = u0; u < u1; ++u, ++t) {
      if (t == p.ntile) t = 0, ++r;
      if (r != row) {
        row = r;
        len = row_len(p, row);
        cb = -1;
      }
      const int32_t pos0 = t * kTile;
      if (pos0 >= len) continue; // an empty tile: -inf stores by the math warpgroup only
      if (row != qrow) {
        qrow = row;
        qslot ^= 1;
        mbar_wait(&qempty[qslot], (qephase >> qslot) & 1);
        qephase ^= 1u << qslot;
        if (lane == 0) {
          ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                         &qfull[qslot], (uint32_t)(H * 128));
          const int32_t c[2] = {0, (int32_t)(row * H)};
          ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, s_q + qslot * H * 128,
                                    &qmap, c, &qfull[qslot]);
        }
      }
      // the tile's page indices: [first, first + per) (clamped into the block table)
      const int64_t first = pos0 / p.P;
      int64_t last = (pos0 + kTile - 1) / p.P;
      if (last > p.bt_cols - 1) last = p.bt_cols - 1;
      if (cb < 0 || first < cb || last >= cb + 32) {
        cb = first;
        int64_t j = cb + lane < p.bt_cols ? cb + lane : p.bt_cols - 1;
        cache = p.bt[row * p.bt_cols + j];
      }
      mbar_wait(&empty[stage], ephase);
      if (lane == 0)
        ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                       &full[stage], (uint32_t)(kTileBytes + kTile * 4));
      for (int b = 0; b < per; ++b) {
        int64_t pi = (pos0 + b * p.PB) / p.P;
        if (pi > last) pi = last;
        int32_t pg = __shfl_sync(0xffffffffu, cache, (int)(pi - cb));
        pg = pg < 0 ? 0 : pg >= p.num_pages ? p.num_pages - 1 : pg; // device data: clamped
        const int32_t slot = (pos0 + b * p.PB) % p.P;
        if (lane == 0) {
          const int32_t c[2] = {0, pg * p.rpp + slot};
          ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global,
                                    s_codes + stage * kTileBytes + b * p.PB * 128, &kmap, c,
                                    &full[stage]);
          const uint8_t *src = p.pages + (int64_t)pg * p.stride + (int64_t)p.P * 128 + slot * 4;
          ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global,
                             s_scales + stage * kTile + b * p.PB, src, (uint32_t)(p.PB * 4),
                             &full[stage]);
        }
      }
      if (++stage == kStages) stage = 0, ephase ^= 1;
    }
    return;
  }

  // ---------------------------------------------------------------- math warpgroup
  const int warp = tid >> 5, lane = tid & 31, t4 = lane & 3;
  const int r0 = 16 * warp + (lane >> 2); // this lane's positions in a tile: r0, r0 + 8
  int stage = 0, qslot = 1;
  uint32_t fphase = 0, qfphase = 0; // bit s: Q slot s's parity
  int64_t row = -1, qrow = -1;
  int32_t len = 0;
  float wr[H / 4]; // the weights of this lane's heads 8j + 2 t4 + c, at 2j + c
  float acc[H / 2];
  const float ninf = __uint_as_float(0xff800000u);
  int64_t r = u0 / p.ntile;
  int32_t t = (int32_t)(u0 - r * p.ntile);
  for (int64_t u = u0; u < u1; ++u, ++t) {
    if (t == p.ntile) t = 0, ++r;
    if (r != row) {
      row = r;
      len = row_len(p, row);
    }
    const int32_t pos0 = t * kTile;
    float *orow = p.out + row * p.out_cols;
    if (pos0 >= len) { // nothing to read: -inf where the tile has columns
      if (tid < kTile && pos0 + tid < p.out_cols) orow[pos0 + tid] = ninf;
      continue;
    }
    if (row != qrow) {
      if (qrow >= 0) ptx::mbarrier_arrive(&qempty[qslot]); // the old Q's wgmma are all done
      qrow = row;
      qslot ^= 1;
#pragma unroll
      for (int j = 0; j < H / 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) wr[2 * j + c] = p.w[row * H + 8 * j + 2 * t4 + c];
      mbar_wait(&qfull[qslot], (qfphase >> qslot) & 1);
      qfphase ^= 1u << qslot;
    }
    mbar_wait(&full[stage], fphase);
    const uint8_t *a = s_codes + stage * kTileBytes, *bq = s_q + qslot * H * 128;
    wgmma_fence();
#pragma unroll
    for (int g = 0; g < 4; ++g)
      wgmma_e4m3_ss<H>(acc, wgmma_desc(a + 32 * g, IXL_SM90_SWIZZLE_128B, 16, 1024),
                       wgmma_desc(bq + 32 * g, IXL_SM90_SWIZZLE_128B, 16, 1024), g > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operand(acc);
    const float sc0 = s_scales[stage * kTile + r0], sc1 = s_scales[stage * kTile + r0 + 8];
    ptx::mbarrier_arrive(&empty[stage]); // this thread's reads of the stage are done
    if (++stage == kStages) stage = 0, fphase ^= 1;
    // relu(dot * scale) * w over the lane's heads (NaN stays NaN: x < 0 ? 0 : x)
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int j = 0; j < H / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float d0 = __fmul_rn(acc[4 * j + c], sc0), d1 = __fmul_rn(acc[4 * j + 2 + c], sc1);
        s0 = __fmaf_rn(wr[2 * j + c], d0 < 0.0f ? 0.0f : d0, s0);
        s1 = __fmaf_rn(wr[2 * j + c], d1 < 0.0f ? 0.0f : d1, s1);
      }
    s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
    s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
    if (t4 < 2) { // lane 0 of the quad stores position r0, lane 1 position r0 + 8
      const int32_t pos = pos0 + r0 + 8 * t4;
      if (pos < p.out_cols) orow[pos] = pos < len ? (t4 ? s1 : s0) : ninf;
    }
  }
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// ------------------------------------------------------------------ host
// 1 when v2's kernel takes this K2 call (else v1 runs it).
bool k2_takes(const ixl_logits_call *c) {
  const ixl_qk *in = c->in;
  const int P = in->page_size;
  const bool page_ok = P % 64 == 0 || P == 8 || P == 16 || P == 32;
  const ixl_tensor *al16[] = {in->q_codes, in->k_pages};
  for (const ixl_tensor *t : al16)
    if ((uintptr_t)t->data % 16) return false;
  const ixl_tensor *al4[] = {c->weights, c->out, c->ke, c->block_table};
  for (const ixl_tensor *t : al4)
    if ((uintptr_t)t->data % 4) return false;
  return in->kv_format == IXL_FP8 && c->reduction == IXL_REDUCE_FP32 && (c->H == 32 || c->H == 64)
         && page_ok && c->num_pages * (c->page_stride / 128) < INT32_MAX &&
         c->R * c->H < INT32_MAX && c->out->shape[1] < INT32_MAX;
}

template <int H>
ixl_status launch_k2(ixl_ctx *ctx, const ixl_logits_call *c) {
  const char *op = "dense_logits_paged";
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
  int sms = 132;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ixl_ctx_device(ctx)) !=
          cudaSuccess ||
      sms <= 0) {
    cudaGetLastError();
    sms = 132;
  }
  auto kern = k2_fp8_kernel<H>;
  // the whole shared-memory carveout, else the driver may fit one CTA per SM and run the
  // persistent grid in two waves (seen on the H200: every case took twice its time)
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       K2Smem<H>::alloc);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared);
  int occ = 0;
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, kThreads, K2Smem<H>::alloc);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaFuncSetAttribute (logits v2 K2)");
  if (occ < 1) occ = 1;
  if (occ > 2) occ = 2;
  int64_t grid = (int64_t)occ * sms; // one wave: every CTA resident at once
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
  kern<<<(unsigned)grid, kThreads, K2Smem<H>::alloc, ixl::stream_of(ctx)>>>(kmap, qmap, p);
  return ixl_cuda_check_launch(ctx, "dense_logits_paged kernel (v2)");
}

} // namespace

extern "C" ixl_status ixl_cuda_logits_v2(ixl_ctx *ctx, const ixl_logits_call *c) {
  if (c->in->kv_format == IXL_MXFP4) return ixl_cuda_logits_v2_mx(ctx, c);
  if (c->mode == IXL_LOGITS_SPARSE) return ixl_cuda_logits_v1_sparse(ctx, c, 4096);
  if (c->mode != IXL_LOGITS_DENSE_PAGED || !k2_takes(c))
    return ixl_cuda_logits_v1_dense(ctx, c, 4096);
  return c->H == 64 ? launch_k2<64>(ctx, c) : launch_k2<32>(ctx, c);
}
