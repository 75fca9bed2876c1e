// topk_v2.cu - K6 top-k, the select family's CUDA `v2` (ixl_cuda_topk_v2): the same results as
// the CPU reference (kernels/select/topk.c) bit for bit, by a radix select whose output is a
// column-order compaction instead of a sort.
//
// A row is cut into `cs` chunks of L columns (cs = 1, or a thread-block cluster of 2-16 CTAs
// on sm_90); each CTA keeps its chunk's order keys in shared memory, so the row is read from
// global memory once. Then:
//  1. digit passes over the keys in shared memory (fp32 keys 11/11/10 bits, bf16 keys 11/5),
//     the first one fused into the load: per-CTA histograms (two copies, by warp parity), in a
//     cluster reduce-scattered through distributed shared memory (CTA c sums slice c of every
//     CTA's bins), the slice holding the kk-th largest key found by a block scan and broadcast.
//     After the last digit the kk-th key t, the count above it and `need` (how many keys equal
//     to t win) are known exactly.
//  2. compaction in column order: thread i owns a contiguous run of the chunk; counts of keys
//     > t and == t are scanned over the CTA (and over the cluster's CTAs before it), which gives
//     every winner its output slot: unsorted output needs no sort, and the first `need` ties by
//     column win (ties to the smaller column).
//  3. sorted mode: the kk winners, as (~key << 32 | column), go to CTA 0 (in column order, by
//     slot) and one bitonic sort of those kk entries orders them (value desc, column asc).
// Key 0 is never an order key (it would be a NaN, and every NaN keys as 0xffffffff), so it
// marks the columns outside [row_start, row_end) that the aligned chunks cover. No global
// scratch, nothing allocated, no host sync: the op is graph-capturable. Rows longer than 16
// chunks (more than 16 * 32768 columns), or over 32768 columns without clusters (sm_80), run
// v1 (kernels/select/topk.cu).
#include "cuda/common.cuh"

#include <cooperative_groups.h>

namespace {

using namespace ixl;
namespace cg = cooperative_groups;

constexpr int NT = 512;       // threads per CTA
constexpr int NB = 2048;      // bins of the widest digit
constexpr int LCAP = 32768;   // columns per CTA at most (16-bit packed counts stay exact)
constexpr int CSMAX = 16;     // CTAs per cluster at most (16 needs the non-portable opt-in)

struct V2Shared {
  uint32_t prefix, mask;
  int above, need, found, inbin, slice_tot;
  unsigned cta_tot; // packed (gt | eq << 16) counts of the CTA, for the cluster prefix
  int ws[NT / 32 + 1];
  unsigned wsu[NT / 32 + 1];
};

// The key layout per dtype: KS is what shared memory holds per column, VEC columns per 16-B
// vector, KB the significant bits of a key (bf16 keys live in the top 16 bits of the f32 key).
template <typename T> struct KeyOf;
template <> struct KeyOf<float> {
  using KS = uint32_t;
  static constexpr int VEC = 4, KB = 32, NP = 3;
  __device__ static KS key(float x) { return ixl_order_key_f32(x); }
  __device__ static void unpack(const uint4 &w, KS (&k)[VEC]) {
    k[0] = ixl_order_key_f32(__uint_as_float(w.x));
    k[1] = ixl_order_key_f32(__uint_as_float(w.y));
    k[2] = ixl_order_key_f32(__uint_as_float(w.z));
    k[3] = ixl_order_key_f32(__uint_as_float(w.w));
  }
  __device__ static uint4 pack(const KS (&k)[VEC]) { return make_uint4(k[0], k[1], k[2], k[3]); }
  __device__ static void from(const uint4 &w, KS (&k)[VEC]) {
    k[0] = w.x, k[1] = w.y, k[2] = w.z, k[3] = w.w;
  }
  // digits from the top: 11, 11, 10 bits
  __device__ static int shift(int p) { return p == 0 ? 21 : p == 1 ? 10 : 0; }
  __device__ static int bits(int p) { return p == 2 ? 10 : 11; }
};
template <> struct KeyOf<uint16_t> {
  using KS = uint16_t;
  static constexpr int VEC = 8, KB = 16, NP = 2;
  __device__ static KS key(uint16_t h) { return (KS)(ixl_order_key_bf16(h) >> 16); }
  __device__ static void unpack(const uint4 &w, KS (&k)[VEC]) {
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int h = 0; h < 4; h++) {
      k[2 * h] = key((uint16_t)(u[h] & 0xffffu));
      k[2 * h + 1] = key((uint16_t)(u[h] >> 16));
    }
  }
  __device__ static uint4 pack(const KS (&k)[VEC]) {
    uint32_t u[4];
#pragma unroll
    for (int h = 0; h < 4; h++) u[h] = (uint32_t)k[2 * h] | ((uint32_t)k[2 * h + 1] << 16);
    return make_uint4(u[0], u[1], u[2], u[3]);
  }
  __device__ static void from(const uint4 &w, KS (&k)[VEC]) {
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int h = 0; h < 4; h++) k[2 * h] = (KS)(u[h] & 0xffffu), k[2 * h + 1] = (KS)(u[h] >> 16);
  }
  // digits from the top of the 16-bit key: 11, 5 bits
  __device__ static int shift(int p) { return p == 0 ? 5 : 0; }
  __device__ static int bits(int p) { return p == 0 ? 11 : 5; }
};

template <bool CL> __device__ __forceinline__ void csync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CL) {
    cg::this_cluster().sync();
    return;
  }
#endif
  __syncthreads();
}

// A pointer to the same shared variable in cluster CTA `rank` (itself without clusters).
template <bool CL, typename P> __device__ __forceinline__ P *peer(P *p, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CL) return cg::this_cluster().map_shared_rank(p, (unsigned)rank);
#endif
  (void)rank;
  return p;
}

// Among bins [lo, hi) with counts cnt(b), searched from the top with `base` keys above hi,
// the bin holding the `need`-th largest key: when it is in range, the thread that finds it
// stores the bin, the keys above it and its count through `put`. Every thread must call it.
template <class Cnt, class Put>
__device__ void find_in_range(int lo, int hi, int base, int need, Cnt &&cnt, Put &&put,
                              V2Shared &sh) {
  const int nbins = hi - lo, per = (nbins + NT - 1) / NT;
  // thread 0 takes the top bins: bins [hi - (t+1) per, hi - t per)
  const int bhi = max(hi - (int)threadIdx.x * per, lo), blo = max(bhi - per, lo);
  int s = 0;
  for (int b = blo; b < bhi; b++) s += cnt(b);
  int total;
  const int before = block_exclusive_scan<NT, int>(s, &total, sh.ws);
  int acc = base + before;
  if (s > 0 && acc < need && need <= acc + s) {
    for (int b = bhi - 1; b >= blo; b--) {
      const int c = cnt(b);
      if (acc + c >= need) {
        put(b, acc, c);
        break;
      }
      acc += c;
    }
  }
}

// The profile instantiation (PROF, chosen at run time by IXL_TOPK_V2_PROFILE=1, a development
// switch): thread 0 of three CTAs (the first, the middle and the last) stamps clock64 after
// each phase's barrier, so a stamp is the CTA's slowest thread, and prints one line of cycles
// per phase with the CTA's global start and end (ns). The timed instantiation has none of it.
constexpr int NSTAMP = 12; // entry, zeroed, loaded, (hist, found) x 3 passes, counted, stored
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned smid() {
  unsigned v;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(v));
  return v;
}
__device__ __noinline__ void prof_print(const long long (&tc)[NSTAMP], unsigned long long g0,
                                        unsigned long long g1, int L, int cs, int hm) {
  long long d[NSTAMP], prev = tc[0]; // a pass the dtype does not run has no stamp (0)
  for (int i = 1; i < NSTAMP; i++) {
    d[i] = tc[i] ? tc[i] - prev : 0;
    if (tc[i]) prev = tc[i];
  }
  printf("# topkprof blk %u/%u sm %u L %d cs %d hm %d | ns %llu..%llu (%llu) | cyc zero %lld "
         "load %lld p0 find %lld p1 hist %lld find %lld p2 hist %lld find %lld count %lld "
         "store %lld end %lld total %lld\n",
         blockIdx.x, gridDim.x, smid(), L, cs, hm, g0, g1, g1 - g0, d[1], d[2], d[4], d[5], d[6],
         d[7], d[8], d[9], d[10], d[11], tc[NSTAMP - 1] - tc[0]);
}

template <typename T, bool CL, bool PROF>
__global__ void __launch_bounds__(NT, 2)
    topk_v2_kernel(const T *__restrict__ logits, int64_t C, const int32_t *__restrict__ row_start,
                   const int32_t *__restrict__ row_end, int k, int sorted,
                   int32_t *__restrict__ out, int RV, int P, int hm) {
  using K = KeyOf<T>;
  using KS = typename K::KS;
  constexpr int VEC = K::VEC;
  extern __shared__ uint4 smem4[];
  __shared__ V2Shared sh;
  __shared__ unsigned hist[2 * NB];
  __shared__ unsigned merged[NB];
  __shared__ int res[3]; // the found bin, keys above it, its count (written by the finder)
  __shared__ unsigned ctas[CSMAX + 1]; // [0]: this CTA's counts; [1 + q]: CTA q's
  long long tc[NSTAMP] = {};
  unsigned long long g_in = 0;
  const bool prof = PROF && threadIdx.x == 0 &&
                    (blockIdx.x == 0 || blockIdx.x == gridDim.x / 2 || blockIdx.x == gridDim.x - 1);
  if (prof) tc[0] = clock64(), g_in = global_ns();
  auto stamp = [&](int i) {
    if (prof) tc[i] = clock64();
  };

  int rank = 0, cs = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CL) {
    rank = (int)cg::this_cluster().block_rank();
    cs = (int)cg::this_cluster().num_blocks();
  }
#endif
  const int64_t r = blockIdx.x / cs;
  int64_t s = row_start ? row_start[r] : 0, e = row_end[r];
  if (s < 0) s = 0;
  if (e > C) e = C;
  const int n = e > s ? (int)(e - s) : 0;
  const int kk = k < n ? k : n;
  int32_t *o = out + r * (int64_t)k;
  if (rank == 0)
    for (int j = kk + threadIdx.x; j < k; j += NT) o[j] = -1;
  if (kk <= 0) return; // the whole cluster leaves together: same row, same n

  const T *row = logits + r * C;
  // the chunks start at a 16-byte boundary at or before column s (columns before s are 0)
  const int64_t mis = (int64_t)(((uintptr_t)(row + s) & 15u) / sizeof(T));
  const int64_t a0 = s - mis;
  const int nvec = NT * RV;                 // vectors per chunk
  const int64_t g0 = a0 + (int64_t)rank * nvec * VEC;
  // logical vector v at (v / RV) * S + v % RV: runs S vectors apart, S odd, so the 8 threads of
  // a quarter warp reading their runs' j-th vectors hit 8 distinct bank quads (an even stride
  // paired them: the profile of 2026-12-01, RV 5 in a pad of 1)
  const int S = RV | 1;
  uint4 *keys = smem4;
  uint64_t *sbuf = reinterpret_cast<uint64_t *>(smem4 + NT * S); // sorted mode: P entries
  const int warp = threadIdx.x >> 5;
  unsigned *myhist = hist + (warp & 1) * NB;

  for (int b = threadIdx.x; b < 2 * NB; b += NT) hist[b] = 0;
  if (threadIdx.x == 0) sh.prefix = 0, sh.mask = 0, sh.above = 0;
  __syncthreads();
  stamp(1);

  // load: coalesced 16-B vectors, keys to shared memory, the first digit's histogram
  {
    // UNR vectors in flight per thread (32 KiB per CTA): the loads of a group are issued
    // before any is used, so a thread waits one memory latency per group, not per vector
    constexpr int UNR = 4;
    const int sh0 = K::shift(0);
    for (int v0 = threadIdx.x; v0 < nvec; v0 += UNR * NT) {
      uint4 w[UNR];
#pragma unroll
      for (int u = 0; u < UNR; u++) {
        const int v = v0 + u * NT;
        const int64_t g = g0 + (int64_t)v * VEC;
        w[u] = make_uint4(0, 0, 0, 0);
        if (v < nvec && g >= s && g + VEC <= e)
          w[u] = __ldg(reinterpret_cast<const uint4 *>(row + g));
      }
#pragma unroll
      for (int u = 0; u < UNR; u++) {
        const int v = v0 + u * NT;
        if (v >= nvec) break;
        const int64_t g = g0 + (int64_t)v * VEC;
        KS kv[VEC];
        if (g >= s && g + VEC <= e) {
          K::unpack(w[u], kv);
        } else {
#pragma unroll
          for (int j = 0; j < VEC; j++)
            kv[j] = (g + j >= s && g + j < e) ? K::key(row[g + j]) : (KS)0;
        }
        if (hm) {
          // warp-aggregated: one atomic per distinct bin of the warp (a development switch,
          // IXL_TOPK_V2_HIST=1; v is the same across the block, so the whole warp is here)
#pragma unroll
          for (int j = 0; j < VEC; j++) {
            const unsigned bin = kv[j] ? (unsigned)kv[j] >> sh0 : 0xffffffffu;
            const unsigned peers = __match_any_sync(0xffffffffu, bin);
            if (bin != 0xffffffffu && (int)(threadIdx.x & 31) == __ffs(peers) - 1)
              atomicAdd(&myhist[bin], (unsigned)__popc(peers));
          }
        } else {
#pragma unroll
          for (int j = 0; j < VEC; j++)
            if (kv[j]) atomicAdd(&myhist[kv[j] >> sh0], 1u);
        }
        keys[(v / RV) * S + v % RV] = K::pack(kv);
      }
    }
  }
  __syncthreads();
  stamp(2);

  const uint4 *run = keys + threadIdx.x * S; // this thread's run of RV vectors
  for (int p = 0; p < K::NP; p++) {
    const int shift = K::shift(p), nb = 1 << K::bits(p);
    if (p > 0) {
      const uint32_t prefix = sh.prefix, mask = sh.mask;
      for (int j = 0; j < RV; j++) {
        KS kv[VEC];
        K::from(run[j], kv);
#pragma unroll
        for (int q = 0; q < VEC; q++)
          if (((uint32_t)kv[q] & mask) == prefix && kv[q])
            atomicAdd(&myhist[((uint32_t)kv[q] >> shift) & (unsigned)(nb - 1)], 1u);
      }
    }
    const int need = kk - sh.above;
    csync<CL>(); // every histogram of the cluster is complete
    stamp(3 + 2 * p);
    if (threadIdx.x == 0) res[0] = -1;
    if (!CL) {
      __syncthreads();
      find_in_range(
          0, nb, 0, need, [&](int b) { return (int)(hist[b] + hist[NB + b]); },
          [&](int b, int above, int c) { res[0] = b, res[1] = above, res[2] = c; }, sh);
      __syncthreads();
    } else {
      // reduce-scatter: this CTA owns bins [lo, hi) of the cluster's histogram
      const int per = (nb + cs - 1) / cs, lo = min(rank * per, nb), hi = min(lo + per, nb);
      int part = 0;
      for (int b = lo + threadIdx.x; b < hi; b += NT) {
        // every peer's two counts in flight at once (one DSMEM latency, not 2 cs of them)
        unsigned sum = 0;
#pragma unroll
        for (int q = 0; q < CSMAX; q++) {
          if (q < cs) {
            const unsigned *h = peer<CL>(hist, q);
            sum += h[b] + h[NB + b];
          }
        }
        merged[b] = sum;
        part += (int)sum;
      }
      int tot;
      block_exclusive_scan<NT, int>(part, &tot, sh.ws);
      if (threadIdx.x == 0) sh.slice_tot = tot;
      csync<CL>(); // slice totals published; nobody reads a peer's histogram any more
      for (int b = threadIdx.x; b < 2 * NB; b += NT) hist[b] = 0;
      int base = 0;
      for (int q = rank + 1; q < cs; q++) base += peer<CL>(&sh, q)->slice_tot;
      if (base < need && need <= base + sh.slice_tot) {
        find_in_range(
            lo, hi, base, need, [&](int b) { return (int)merged[b]; },
            [&](int b, int above, int c) {
              for (int q = 0; q < cs; q++) {
                int *rq = peer<CL>(res, q);
                rq[0] = b, rq[1] = above, rq[2] = c;
              }
            },
            sh);
      }
      csync<CL>(); // the finder's result is in every CTA
    }
    if (!CL)
      for (int b = threadIdx.x; b < 2 * NB; b += NT) hist[b] = 0;
    if (threadIdx.x == 0) {
      sh.prefix |= (uint32_t)res[0] << shift;
      sh.mask |= (uint32_t)(nb - 1) << shift;
      sh.above += res[1];
    }
    __syncthreads();
    stamp(4 + 2 * p);
  }

  // compaction in column order
  const uint32_t t = sh.prefix;
  const int need = kk - sh.above;
  unsigned cnt = 0; // gt | eq << 16 of this thread's run
  for (int j = 0; j < RV; j++) {
    KS kv[VEC];
    K::from(run[j], kv);
#pragma unroll
    for (int q = 0; q < VEC; q++)
      cnt += ((uint32_t)kv[q] > t ? 1u : 0u) + ((uint32_t)kv[q] == t ? 0x10000u : 0u);
  }
  unsigned cta_tot;
  unsigned before = block_exclusive_scan<NT, unsigned>(cnt, &cta_tot, sh.wsu);
  int gtb = 0, eqb = 0;
  if (CL) {
    if (threadIdx.x == 0) ctas[0] = cta_tot;
    csync<CL>();
    if (threadIdx.x < (unsigned)rank) {
      ctas[1 + threadIdx.x] = peer<CL>(ctas, (int)threadIdx.x)[0];
    }
    __syncthreads();
    for (int q = 0; q < rank; q++) {
      gtb += (int)(ctas[1 + q] & 0xffffu);
      eqb += (int)(ctas[1 + q] >> 16);
    }
  }
  gtb += (int)(before & 0xffffu);
  eqb += (int)(before >> 16);
  stamp(9);
  uint64_t *dst = sorted ? peer<CL>(sbuf, 0) : nullptr;
  if ((cnt & 0xffffu) || ((cnt >> 16) && eqb < need)) {
    const int64_t col0 = g0 - s + (int64_t)threadIdx.x * RV * VEC;
    for (int j = 0; j < RV; j++) {
      KS kv[VEC];
      K::from(run[j], kv);
#pragma unroll
      for (int q = 0; q < VEC; q++) {
        const uint32_t key = kv[q];
        int slot = -1;
        if (key > t) {
          slot = gtb + min(eqb, need);
          gtb++;
        } else if (key == t) {
          if (eqb < need) slot = gtb + eqb;
          eqb++;
        }
        if (slot >= 0) {
          const int col = (int)(col0 + j * VEC + q);
          if (sorted)
            dst[slot] = ((uint64_t)(~(key << (32 - K::KB))) << 32) | (uint32_t)col;
          else
            o[slot] = col;
        }
      }
    }
  }
  if (PROF) {
    __syncthreads();
    stamp(10);
  }
  if (sorted) {
    csync<CL>(); // every winner is in CTA 0's buffer
    if (rank == 0) {
      for (int j = kk + threadIdx.x; j < P; j += NT) sbuf[j] = ~0ull;
      __syncthreads();
      block_bitonic_sort<NT>(sbuf, P);
      for (int j = threadIdx.x; j < kk; j += NT)
        o[j] = (int32_t)(uint32_t)(sbuf[j] & 0xffffffffu);
    }
  } else if (CL) {
    csync<CL>(); // no CTA leaves while a later one may read its counts
  }
  if (PROF && prof) {
    tc[NSTAMP - 1] = clock64();
    prof_print(tc, g_in, global_ns(), NT * RV * VEC, cs, hm);
  }
}

template <typename T, bool CL>
ixl_status launch(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                  const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out, int cs,
                  int64_t L) {
  constexpr int VEC = KeyOf<T>::VEC;
  const int64_t R = logits->shape[0], C = logits->shape[1];
  const int RV = (int)((L / VEC + NT - 1) / NT);
  int P = 1;
  while (P < k) P <<= 1;
  const size_t smem = (size_t)(NT * RV + NT) * 16 + (sorted ? (size_t)P * 8 : 0);
  // development switches (the benchmark's): the profile instantiation, the aggregated histogram
  const char *pe = getenv("IXL_TOPK_V2_PROFILE"), *he = getenv("IXL_TOPK_V2_HIST");
  const int hm = he && *he == '1';
  auto kern = pe && *pe == '1' ? topk_v2_kernel<T, CL, true> : topk_v2_kernel<T, CL, false>;
  ixl_status st = ixl_cuda_status(
      ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "topk v2: cudaFuncSetAttribute");
  if (st) return st;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(R * cs));
  cfg.blockDim = dim3(NT);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream_of(ctx);
  cudaLaunchAttribute attr[1];
  if (CL) {
    if (cs > 8 &&
        (st = ixl_cuda_status(
             ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
             "topk v2: cudaFuncSetAttribute (cluster size)")))
      return st;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cs;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  st = ixl_cuda_status(
      ctx,
      cudaLaunchKernelEx(&cfg, kern, (const T *)logits->data, C,
                         row_start ? (const int32_t *)row_start->data : (const int32_t *)nullptr,
                         (const int32_t *)row_end->data, k, sorted, (int32_t *)out->data, RV, P,
                         hm),
      "topk v2: launch");
  if (st) return st;
  return ixl_cuda_check_launch(ctx, "topk v2");
}

// The largest cluster the device runs for this kernel and shared memory, at most `want`;
// the last answer per dtype is kept (the query costs more than a launch).
template <typename T> int cluster_fits_query(int want, size_t smem);
template <typename T>
int cluster_fits(int want, size_t smem) {
  static int last_want, last_fit, last_dev = -1;
  static size_t last_smem;
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev == last_dev && want == last_want && smem == last_smem) return last_fit;
  const int fit = cluster_fits_query<T>(want, smem);
  last_dev = dev, last_want = want, last_smem = smem, last_fit = fit;
  return fit;
}
template <typename T>
int cluster_fits_query(int want, size_t smem) {
  auto kern = topk_v2_kernel<T, true, false>;
  if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) ||
      cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1)) {
    cudaGetLastError();
    return 0;
  }
  for (int cs = want; cs >= 2; cs >>= 1) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)cs);
    cfg.blockDim = dim3(NT);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cs;
    attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int nc = 0;
    if (cudaOccupancyMaxActiveClusters(&nc, kern, &cfg) == cudaSuccess && nc > 0) return cs;
    cudaGetLastError();
  }
  return 0;
}

template <typename T>
ixl_status dispatch(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                    const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out) {
  constexpr int VEC = KeyOf<T>::VEC;
  const int64_t R = logits->shape[0], C = logits->shape[1];
  // columns a row's aligned chunks may have to cover: C when every row starts on 16 bytes (no
  // row_start, C * sizeof(T) a multiple of 16, the tensor aligned), else up to VEC - 1 more
  // (16384 bf16 columns were 20480 keys per CTA, not 16384). The cluster size is chosen from
  // the unaligned span either way, as measured on 2026-12-01.
  const bool aligned = !row_start && (C * (int64_t)sizeof(T)) % 16 == 0 &&
                       ((uintptr_t)logits->data & 15u) == 0;
  const int64_t span_cs = C + VEC - 1, span = aligned ? C : span_cs;
  int dev = 0, major = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  // chunks: the fewest that fit LCAP. Measured on the H200 (2026-12-01, BENCHMARKS.md): more
  // CTAs per row never paid (64 x 16384 bf16: 14.7 us at 1, 27.9 at 4; 1 x 131072 fp32: the
  // same at 4 and 16), so idle SMs are not a reason to split a row
  int cs = 1;
  while (cs <= CSMAX && (span_cs + cs - 1) / cs > LCAP) cs <<= 1;
  (void)sms, (void)R;
  const char *env = getenv("IXL_TOPK_V2_CS"); // a development switch, for the benchmark
  if (env && *env) {
    const int v = atoi(env);
    if (v >= 1 && v <= CSMAX && (v & (v - 1)) == 0 && (span + v - 1) / v <= LCAP) cs = v;
  }
  if (cs > CSMAX || (cs > 1 && major < 9))
    return ixl_cuda_topk(ctx, logits, row_start, row_end, k, sorted, out);
  int64_t L = (span + cs - 1) / cs;
  L = (L + VEC * NT - 1) / (VEC * NT) * (VEC * NT); // whole runs
  if (cs > 1) {
    int P = 1;
    while (P < k) P <<= 1;
    const size_t smem = (size_t)(L / VEC + NT) * 16 + (sorted ? (size_t)P * 8 : 0);
    const int fit = cluster_fits<T>(cs, smem);
    if (fit < cs) { // a smaller cluster means longer chunks: only while they fit
      if (fit >= 2 && (span + fit - 1) / fit <= LCAP) {
        cs = fit;
        L = (span + cs - 1) / cs;
        L = (L + VEC * NT - 1) / (VEC * NT) * (VEC * NT);
      } else {
        return ixl_cuda_topk(ctx, logits, row_start, row_end, k, sorted, out);
      }
    }
    return launch<T, true>(ctx, logits, row_start, row_end, k, sorted, out, cs, L);
  }
  return launch<T, false>(ctx, logits, row_start, row_end, k, sorted, out, 1, L);
}

} // namespace

extern "C" ixl_status ixl_cuda_topk_v2(ixl_ctx *ctx, const ixl_tensor *logits,
                                       const ixl_tensor *row_start, const ixl_tensor *row_end,
                                       int k, int sorted, ixl_tensor *out) {
  const int64_t R = logits->shape[0];
  if (R == 0) return IXL_OK;
  if (R * CSMAX > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "topk: logits: shape[0] = %lld: must be <= %d rows on the GPU",
                         (long long)R, INT32_MAX / CSMAX);
  if (logits->dtype == IXL_BF16)
    return dispatch<uint16_t>(ctx, logits, row_start, row_end, k, sorted, out);
  return dispatch<float>(ctx, logits, row_start, row_end, k, sorted, out);
}

// K6 then K7 (ixl_topk_remap's select v2 twin): v2's top-k into out, then K7's kernel in place.
extern "C" ixl_status ixl_cuda_topk_v2_remap(ixl_ctx *ctx, const ixl_tensor *logits,
                                             const ixl_tensor *row_start,
                                             const ixl_tensor *row_end, int k, int sorted,
                                             const ixl_tensor *sparse_ids,
                                             const ixl_tensor *row_ks, int sparse_block_kv,
                                             ixl_tensor *out) {
  ixl_status st = ixl_cuda_topk_v2(ctx, logits, row_start, row_end, k, sorted, out);
  if (st) return st;
  return ixl_cuda_remap(ctx, out, sparse_ids, row_ks, sparse_block_kv, out);
}
