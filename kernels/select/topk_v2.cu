// topk_v2.cu - K6 top-k, the select family's CUDA `v2` (ixl_cuda_topk_v2), and K6 with K7's
// remap fused into its store (ixl_cuda_topk_v2_remap): the same results as the CPU reference
// (kernels/select/topk.c, then kernels/index/remap.c) bit for bit, by a radix select whose
// output is a column-order compaction instead of a sort.
//
// A row is cut into `cs` chunks of L columns (cs = 1, or a thread-block cluster of 2-16 CTAs
// on sm_90); each CTA keeps its chunk's order keys in shared memory, so the row is read from
// global memory once. Then:
//  1. digit passes over the keys in shared memory (fp32 keys 11/11/10 bits, bf16 keys 11/5),
//     the first one fused into the load: per-CTA histograms (two copies, by warp parity), in a
//     cluster reduce-scattered through distributed shared memory (CTA c sums slice c of every
//     CTA's bins), the bin holding the kk-th largest key found by a block scan. In a cluster,
//     that first-digit bin's keys (usually a few thousand) then go to CTA 0, which finishes the
//     lower digits alone and hands the threshold back (DeepSelect's merge: one cluster-wide
//     find per row, not one per digit); a bin of more than GCAP keys (ties) runs the lower
//     digits cluster-wide. After the last digit the kk-th key t, the count above it and `need`
//     (how many keys equal to t win) are known exactly.
//  2. compaction in column order: thread i owns a contiguous run of the chunk; counts of keys
//     > t and == t are scanned over the CTA (and over the cluster's CTAs before it), which gives
//     every winner its output slot: unsorted output needs no sort, and the first `need` ties by
//     column win (ties to the smaller column).
//  3. sorted mode, and the fused remap: the kk winners, as (~key << 32 | column), go to CTA 0
//     (in column order, by slot); sorted mode orders them by one bitonic sort (value desc,
//     column asc); CTA 0 writes them out, remapped to positions (kernels/index/remap.cu's rule)
//     when fused, so a row's sparse-id loads are all in flight at once.
// Key 0 is never an order key (it would be a NaN, and every NaN keys as 0xffffffff), so it
// marks the columns outside [row_start, row_end) that the aligned chunks cover. No global
// scratch, nothing allocated, no host sync: the op is graph-capturable. Rows longer than 16
// chunks (more than 16 * 32768 columns), or over 32768 columns without clusters (sm_80), run
// v1 (kernels/select/topk.cu), then K7's own kernel when fused.
#include "cuda/common.cuh"
#include "cuda/sm80.cuh"
#include "select/topk_v2.h"

#include <cooperative_groups.h>
#include <cstdio>

namespace {

using namespace ixl;
namespace cg = cooperative_groups;

constexpr int NT = 512;       // threads per CTA
constexpr int NB = 2048;      // bins of the widest digit
constexpr int LCAP = 32768;   // columns per CTA at most (16-bit packed counts stay exact)
constexpr int CSMAX = 16;     // CTAs per cluster at most (16 needs the non-portable opt-in)
constexpr int GCAP = 4096;    // first-digit bin keys CTA 0 gathers at most (16 KB)
constexpr int PRE = 4;        // IXL_TOPK_V2_NEXT: vectors per thread prefetched (32 KB)

// flags (the development switches, dev_switches below)
constexpr int F_GATHER = 1;   // clusters: the first digit's bin finished in CTA 0
// IXL_TOPK_V2_NEXT's bits (round 2, off by default)
constexpr int NEXT_ROWS = 1;  // rows of one CTA: persistent CTAs, next row prefetched
constexpr int NEXT_AF = 2;    // clusters: the first find by DSMEM atomics into CTA 0

struct V2Shared {
  uint32_t prefix;          // cluster gather: the threshold CTA 0 hands back
  int above;
  int slice_tot;
  unsigned gcount;          // CTA 0: keys gathered
  int gbase;                // this CTA's first slot in CTA 0's gathered keys
  int ws[NT / 32 + 1];
  unsigned wsu[NT / 32 + 1];
};

// K7's rule (kernels/index/remap.cu): column c of row r -> (id[c / sbk] - ks / sbk) * sbk +
// c % sbk; -1 for c < 0, a column past the row's sparse columns, or a position outside
// [0, INT32_MAX]. on = 0: no remap, the column itself.
struct Remap {
  const int32_t *ids; // [R, nsb]; nullptr when nsb = 0
  const int32_t *ks;  // [R] or nullptr (= 0)
  int64_t nsb;
  int sbk, on;
};
__device__ __forceinline__ int32_t store_value(const Remap &m, int64_t r, int64_t c) {
  if (!m.on) return (int32_t)c;
  if (c < 0 || c >= m.nsb * m.sbk) return -1;
  const int64_t ks = m.ks ? m.ks[r] : 0;
  const int64_t pos = ((int64_t)m.ids[r * m.nsb + c / m.sbk] - ks / m.sbk) * m.sbk + c % m.sbk;
  return pos >= 0 && pos <= INT32_MAX ? (int32_t)pos : -1;
}

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
  // whether any of the vector's values may key at or above the threshold whose float is x0
  // (key_float: NaN passes, and a NaN x0 passes everything; -0 == +0 as for the keys)
  __device__ static bool any_ge(const uint4 &w, float x0) {
    return !(__uint_as_float(w.x) < x0) | !(__uint_as_float(w.y) < x0) |
           !(__uint_as_float(w.z) < x0) | !(__uint_as_float(w.w) < x0);
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
  __device__ static bool any_ge(const uint4 &w, float x0) {
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
    bool a = false;
#pragma unroll
    for (int h = 0; h < 4; h++)
      a |= !(__uint_as_float(u[h] << 16) < x0) | !(__uint_as_float(u[h] & 0xffff0000u) < x0);
    return a;
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

// The split cluster barrier of the kernel's start: arrive on entry, wait before the first
// access to a peer's shared memory (which needs every CTA of the cluster running).
template <bool CL> __device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CL) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
// The same arrive with release semantics (IXL_TOPK_V2_NEXT=2): a peer past its wait sees
// what this thread wrote before it (CTA 0's cleared histogram).
template <bool CL> __device__ __forceinline__ void cluster_arrive_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CL) asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
template <bool CL> __device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CL) asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}

// A pointer to the same shared variable in cluster CTA `rank` (itself without clusters).
template <bool CL, typename P> __device__ __forceinline__ P *peer(P *p, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CL) return cg::this_cluster().map_shared_rank(p, (unsigned)rank);
#endif
  (void)rank;
  return p;
}

// The bins a thread owns in a find over [lo, hi): thread 0 takes the top ones.
struct Own {
  int blo, bhi;
  __device__ Own(int lo, int hi) {
    const int per = (hi - lo + NT - 1) / NT;
    bhi = max(hi - (int)threadIdx.x * per, lo);
    blo = max(bhi - per, lo);
  }
};

// A find within the CTA over bins [lo, hi) of hist (both copies summed), searched from the
// top with `base` keys above hi: the bin holding the `need`-th largest key goes to res (bin,
// keys above it, its count; res[0] = -1 when fewer than need keys are counted), which every
// thread reads after it returns. Each thread zeroes the bins it owns once read, so the
// histogram is clear for the next pass (bins outside [lo, hi) must be clear already). Three
// barriers; total: the count over [lo, hi).
struct Found {
  int bin, above, count, total; // bin -1: fewer than need keys
};
// The find for NTH threads (ws: NTH / 32 + 1 ints of shared memory); local_find is NT's.
template <int NTH>
__device__ __forceinline__ Found find_n(int lo, int hi, int base, int need, unsigned *hist,
                                        int *res, int *ws) {
  const int per = (hi - lo + NTH - 1) / NTH;
  const int bhi = max(hi - (int)threadIdx.x * per, lo), blo = max(bhi - per, lo);
  int s = 0;
  for (int b = blo; b < bhi; b++) s += (int)(hist[b] + hist[NB + b]);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int x = s;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) ws[warp] = x;
  __syncthreads(); // every reader of the previous res is past it
  if (threadIdx.x == 0) res[0] = -1;
  if (warp == 0) {
    int w = lane < NTH / 32 ? ws[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    if (lane < NTH / 32) ws[lane] = w;
    if (lane == NTH / 32 - 1) ws[NTH / 32] = w;
  }
  __syncthreads();
  int acc = base + (warp > 0 ? ws[warp - 1] : 0) + x - s;
  const int total = ws[NTH / 32];
  if (s > 0 && acc < need && need <= acc + s) {
    for (int b = bhi - 1; b >= blo; b--) {
      const int c = (int)(hist[b] + hist[NB + b]);
      if (acc + c >= need) {
        res[0] = b, res[1] = acc, res[2] = c;
        break;
      }
      acc += c;
    }
  }
  for (int b = blo; b < bhi; b++) hist[b] = 0, hist[NB + b] = 0;
  __syncthreads(); // res is written; ws is free again
  return Found{res[0], res[1], res[2], total};
}

// The find over all NB bins for NTH threads, in two barriers: each thread owns NB / NTH
// contiguous bins (thread 0 the top ones), read by 16-byte loads and cleared at once; every
// thread sums the warp totals itself (no warp-0 scan and its barrier), and whether a bin was
// found follows from the total (no reset of res, so no barrier for its readers). hist: 16-byte
// aligned, bins clear afterwards.
template <int NTH>
__device__ __forceinline__ Found find_fast(int base, int need, unsigned *hist, int *res, int *ws) {
  constexpr int PER = NB / NTH;
  static_assert(PER == 2 || PER == 4 || PER == 8, "find_fast: 2, 4 or 8 bins a thread");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int blo = NB - ((int)threadIdx.x + 1) * PER;
  int c[PER];
  if (PER == 2) { // 1024 threads: 8-byte loads
    uint2 *h0 = reinterpret_cast<uint2 *>(hist + blo);
    uint2 *h1 = reinterpret_cast<uint2 *>(hist + NB + blo);
    const uint2 a = h0[0], b = h1[0];
    c[0] = (int)(a.x + b.x), c[PER - 1] = (int)(a.y + b.y);
    h0[0] = make_uint2(0, 0), h1[0] = make_uint2(0, 0);
  } else {
    uint4 *h0 = reinterpret_cast<uint4 *>(hist + blo);
    uint4 *h1 = reinterpret_cast<uint4 *>(hist + NB + blo);
#pragma unroll
    for (int q = 0; q < PER / 4; q++) {
      const uint4 a = h0[q], b = h1[q];
      c[(4 * q) % PER] = (int)(a.x + b.x), c[(4 * q + 1) % PER] = (int)(a.y + b.y);
      c[(4 * q + 2) % PER] = (int)(a.z + b.z), c[(4 * q + 3) % PER] = (int)(a.w + b.w);
      h0[q] = make_uint4(0, 0, 0, 0), h1[q] = make_uint4(0, 0, 0, 0);
    }
  }
  int s = 0;
#pragma unroll
  for (int b = 0; b < PER; b++) s += c[b];
  int x = s;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) ws[warp] = x;
  __syncthreads(); // warp totals published (the previous find's readers are past its end)
  int off = 0, total = 0;
#pragma unroll
  for (int q = 0; q < NTH / 32; q++) {
    const int t = ws[q];
    total += t;
    off += q < warp ? t : 0;
  }
  int acc = base + off + x - s;
  if (s > 0 && acc < need && need <= acc + s) {
    bool done = false;
#pragma unroll
    for (int b = PER - 1; b >= 0; b--) { // from this thread's top bin down
      if (!done && acc + c[b] >= need) {
        res[0] = blo + b, res[1] = acc, res[2] = c[b];
        done = true;
      }
      if (!done) acc += c[b];
    }
  }
  __syncthreads(); // res is written
  if (base + total < need) return Found{-1, 0, 0, total};
  return Found{res[0], res[1], res[2], total};
}

__device__ __forceinline__ Found local_find(int lo, int hi, int base, int need, unsigned *hist,
                                            int *res, V2Shared &sh) {
  return find_n<NT>(lo, hi, base, need, hist, res, sh.ws);
}

// The same find over the cluster's histograms (every CTA calls it): CTA c sums slice c of
// [lo, hi) over every CTA (reduce-scatter through distributed shared memory) and the CTA whose
// slice holds the need-th key writes res into every CTA. The histograms are clear afterwards.
// total: the cluster's count over [lo, hi).
template <bool CL>
__device__ Found cluster_find(int lo0, int hi0, int base0, int need, int rank, int cs,
                              unsigned *hist, unsigned *merged, int *res, V2Shared &sh) {
  csync<CL>(); // every histogram of the cluster is complete; every reader of res is past it
  if (threadIdx.x == 0) res[0] = -1;
  const int per = (hi0 - lo0 + cs - 1) / cs;
  const int lo = min(lo0 + rank * per, hi0), hi = min(lo + per, hi0);
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
  int base = base0, all = 0;
  for (int q = 0; q < cs; q++) {
    const int t = peer<CL>(&sh, q)->slice_tot;
    all += t;
    if (q > rank) base += t;
  }
  if (base < need && need <= base + tot) {
    // the find within this CTA's slice: thread 0 takes the slice's top bins
    const Own ow(lo, hi);
    int s = 0;
    for (int b = ow.blo; b < ow.bhi; b++) s += (int)merged[b];
    int t2;
    int acc = base + block_exclusive_scan<NT, int>(s, &t2, sh.ws);
    if (s > 0 && acc < need && need <= acc + s) {
      for (int b = ow.bhi - 1; b >= ow.blo; b--) {
        const int c = (int)merged[b];
        if (acc + c >= need) {
          for (int q = 0; q < cs; q++) {
            int *rq = peer<CL>(res, q);
            rq[0] = b, rq[1] = acc, rq[2] = c;
          }
          break;
        }
        acc += c;
      }
    }
  }
  csync<CL>(); // the finder's result is in every CTA
  return Found{res[0], res[1], res[2], all};
}

// IXL_TOPK_V2_NEXT=2 (off by default; not run on the GPU): the first digit's cluster find by
// distributed shared memory atomics instead of cluster_find's reduce-scatter: every CTA but 0
// adds its non-zero bins (about 50 of 2048 for normal logits) into CTA 0's histogram and
// clears its own, CTA 0 finds alone (local_find: 3 CTA barriers) and writes the result into
// every CTA. Two cluster barriers, no block scan outside CTA 0, no slice totals read from every
// peer (cluster_find: three cluster barriers, two block scans in every CTA). CTA 0's histogram
// is clear before any peer adds to it: the kernel's first cluster arrive comes after the
// clearing, with release semantics, and peers add only after their wait. The histograms
// are clear afterwards; total is not counted (0).
template <bool CL>
__device__ Found atomic_find(int need, int rank, int cs, unsigned *hist, int *res, V2Shared &sh) {
  if (rank != 0) {
    unsigned *h0 = peer<CL>(hist, 0);
    for (int b = threadIdx.x; b < NB; b += NT) {
      const unsigned c = hist[b] + hist[NB + b];
      if (c) atomicAdd(&h0[b], c);
      hist[b] = 0, hist[NB + b] = 0;
    }
  }
  csync<CL>(); // CTA 0's histogram holds the cluster's counts
  if (rank == 0) {
    local_find(0, NB, 0, need, hist, res, sh);
    if ((int)threadIdx.x < cs) {
      int *rq = peer<CL>(res, (int)threadIdx.x);
      rq[0] = res[0], rq[1] = res[1], rq[2] = res[2];
    }
  }
  csync<CL>(); // the result is in every CTA
  return Found{res[0], res[1], res[2], 0};
}

// The profile instantiation (PROF, chosen by IXL_TOPK_V2_PROFILE=1, a development switch):
// thread 0 of three CTAs (the first, the middle and the last) stamps clock64 after each
// phase's barrier, so a stamp is the CTA's slowest thread, and prints one line of cycles per
// phase with the CTA's global start and end (ns). The timed instantiation has none of it.
constexpr int NSTAMP = 8; // entry, loaded, digit 0, digit 1, digit 2, counted, stored, end
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
// the profiles' stamping thread: thread 0 of the first, middle and last CTA
__device__ __forceinline__ bool prof_thread() {
  return threadIdx.x == 0 &&
         (blockIdx.x == 0 || blockIdx.x == gridDim.x / 2 || blockIdx.x == gridDim.x - 1);
}
__device__ __noinline__ void prof_print(const long long (&tc)[NSTAMP], unsigned long long g0,
                                        unsigned long long g1, int L, int cs, int path) {
  long long d[NSTAMP], prev = tc[0]; // a phase the row does not run has no stamp (0)
  for (int i = 1; i < NSTAMP; i++) {
    d[i] = tc[i] ? tc[i] - prev : 0;
    if (tc[i]) prev = tc[i];
  }
  printf("# topkprof blk %u/%u sm %u L %d cs %d path %d | ns %llu..%llu (%llu) | cyc load %lld "
         "d0 %lld d1 %lld d2 %lld count %lld store %lld end %lld total %lld\n",
         blockIdx.x, gridDim.x, smid(), L, cs, path, g0, g1, g1 - g0, d[1], d[2], d[3], d[4],
         d[5], d[6], d[7], tc[NSTAMP - 1] - tc[0]);
}

// The steps the resident and the persistent kernels share, over a thread's run of RV key
// vectors in shared memory (`run`, K::pack's layout; key 0 outside the row).

// A loaded vector's keys into the run layout (*dst), the first digit's histogram beside: w its
// 16 bytes at column g when wholly inside [s, e), else its keys one by one (0 outside)
template <typename K, typename T>
__device__ __forceinline__ void put_vector(const uint4 &w, int64_t g, int64_t s, int64_t e,
                                           const T *row, unsigned *myhist, int sh0, uint4 *dst) {
  using KS = typename K::KS;
  KS kv[K::VEC];
  if (g >= s && g + K::VEC <= e) {
    K::unpack(w, kv);
  } else {
#pragma unroll
    for (int j = 0; j < K::VEC; j++) kv[j] = (g + j >= s && g + j < e) ? K::key(row[g + j]) : (KS)0;
  }
#pragma unroll
  for (int j = 0; j < K::VEC; j++)
    if (kv[j]) atomicAdd(&myhist[kv[j] >> sh0], 1u);
  *dst = K::pack(kv);
}

// the next digit's histogram of the run's keys under (mask, prefix)
template <typename K>
__device__ __forceinline__ void run_digit_hist(const uint4 *run, int RV, uint32_t mask,
                                               uint32_t prefix, int shift, int nb,
                                               unsigned *myhist) {
  using KS = typename K::KS;
  for (int j = 0; j < RV; j++) {
    KS kv[K::VEC];
    K::from(run[j], kv);
#pragma unroll
    for (int q = 0; q < K::VEC; q++)
      if (((uint32_t)kv[q] & mask) == prefix && kv[q])
        atomicAdd(&myhist[((uint32_t)kv[q] >> shift) & (unsigned)(nb - 1)], 1u);
  }
}

// the run's keys > t (low 16 bits) and == t (high 16 bits)
template <typename K> __device__ __forceinline__ unsigned run_counts(const uint4 *run, int RV,
                                                                      uint32_t t) {
  using KS = typename K::KS;
  unsigned cnt = 0;
  for (int j = 0; j < RV; j++) {
    KS kv[K::VEC];
    K::from(run[j], kv);
#pragma unroll
    for (int q = 0; q < K::VEC; q++)
      cnt += ((uint32_t)kv[q] > t ? 1u : 0u) + ((uint32_t)kv[q] == t ? 0x10000u : 0u);
  }
  return cnt;
}

// The run's winners in column order: gtb / eqb the keys > t and == t before the run (over the
// row); a key > t takes slot gtb + min(eqb, need), the first `need` keys == t slot gtb + eqb.
// Staged (dst): (~key << 32 | column) for CTA 0's sort / remap; else the column to o.
template <typename K>
__device__ __forceinline__ void run_emit(const uint4 *run, int RV, uint32_t t, int need,
                                         int gtb, int eqb, int64_t col0, uint64_t *dst,
                                         int32_t *o) {
  using KS = typename K::KS;
  for (int j = 0; j < RV; j++) {
    KS kv[K::VEC];
    K::from(run[j], kv);
#pragma unroll
    for (int q = 0; q < K::VEC; q++) {
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
        const int col = (int)(col0 + j * K::VEC + q);
        if (dst) dst[slot] = ((uint64_t)(~(key << (32 - K::KB))) << 32) | (uint32_t)col;
        else o[slot] = col;
      }
    }
  }
}

// The staged winners (kk of them in sbuf, P a power of two >= kk) sorted when asked (value
// desc, column asc), then written out through the remap; every thread of the CTA calls it
// after the barrier that completes sbuf.
template <int NTH>
__device__ __forceinline__ void stage_store(uint64_t *sbuf, int kk, int P, int sorted,
                                            const Remap &m, int64_t r, int32_t *o) {
  if (sorted) {
    for (int j = kk + (int)threadIdx.x; j < P; j += NTH) sbuf[j] = ~0ull;
    __syncthreads();
    block_bitonic_sort<NTH>(sbuf, P);
  }
  for (int j = threadIdx.x; j < kk; j += NTH)
    o[j] = store_value(m, r, (int64_t)(uint32_t)(sbuf[j] & 0xffffffffu));
}

template <typename T, bool CL, bool PROF, bool AF = false> // AF: atomic_find (NEXT=2)
__global__ void __launch_bounds__(NT, 2)
    topk_v2_kernel(const T *__restrict__ logits, int64_t C, const int32_t *__restrict__ row_start,
                   const int32_t *__restrict__ row_end, int k, int sorted,
                   int32_t *__restrict__ out, int RV, int P, int flags, Remap m) {
  using K = KeyOf<T>;
  using KS = typename K::KS;
  constexpr int VEC = K::VEC;
  extern __shared__ uint4 smem4[];
  __shared__ V2Shared sh;
  __shared__ unsigned hist[2 * NB];
  __shared__ unsigned merged[CL ? NB : 1];
  __shared__ int res[3]; // the found bin, keys above it, its count (written by the finder)
  __shared__ unsigned ctas[CSMAX + 1]; // [0]: this CTA's counts; [1 + q]: CTA q's
  long long tc[NSTAMP] = {};
  unsigned long long g_in = 0;
  int path = 0; // profile: 1 gathered into CTA 0
  const bool prof = PROF && prof_thread();
  if (prof) tc[0] = clock64(), g_in = global_ns();
  auto stamp = [&](int i) {
    if (prof) tc[i] = clock64();
  };
  // PDL (launch.cuh's rule): nothing global before the wait; the trigger at once (it fires
  // only when every CTA has issued it, and changes no result)
  pdl_wait();
  pdl_trigger();

  int rank = 0, cs = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CL) {
    rank = (int)cg::this_cluster().block_rank();
    cs = (int)cg::this_cluster().num_blocks();
  }
#endif
  if (!AF) cluster_arrive<CL>();
  const int64_t r = blockIdx.x / cs;
  int64_t s = row_start ? row_start[r] : 0, e = row_end[r];
  if (s < 0) s = 0;
  if (e > C) e = C;
  const int n = e > s ? (int)(e - s) : 0;
  const int kk = k < n ? k : n;
  int32_t *o = out + r * (int64_t)k;
  if (rank == 0)
    for (int j = kk + threadIdx.x; j < k; j += NT) o[j] = -1;
  if (kk <= 0) { // the whole cluster leaves together: same row, same n
    if (AF) cluster_arrive_release<CL>();
    cluster_wait<CL>();
    return;
  }

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
  // after the keys: the P staged winners (sorted or fused), or (clusters, before the
  // compaction) CTA 0's gathered keys
  uint64_t *sbuf = reinterpret_cast<uint64_t *>(smem4 + NT * S);
  uint32_t *gbuf = reinterpret_cast<uint32_t *>(smem4 + NT * S);
  const int warp = threadIdx.x >> 5;
  unsigned *myhist = hist + (warp & 1) * NB;
  const int sh0 = K::shift(0);

  for (int b = threadIdx.x; b < 2 * NB; b += NT) hist[b] = 0;
  if (threadIdx.x == 0) sh.gcount = 0; // peers add to it only after the first cluster find
  if (AF) cluster_arrive_release<CL>(); // this CTA's histogram is clear (peers add to CTA 0's)

  // load: coalesced 16-B vectors, keys to shared memory, the first digit's histogram
  {
    // UNR vectors in flight per thread (32 KiB per CTA): the loads of a group are issued
    // before any is used, so a thread waits one memory latency per group, not per vector
    constexpr int UNR = 4;
    bool first = true;
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
      if (first) { // the histograms are clear (every thread runs the first group)
        __syncthreads();
        first = false;
      }
#pragma unroll
      for (int u = 0; u < UNR; u++) {
        const int v = v0 + u * NT;
        if (v >= nvec) break;
        put_vector<K>(w[u], g0 + (int64_t)v * VEC, s, e, row, myhist, sh0,
                      &keys[(v / RV) * S + v % RV]);
      }
    }
  }
  __syncthreads();
  stamp(1);

  // the first digit (every key: no bin can be skipped unseen)
  cluster_wait<CL>(); // every CTA of the cluster runs: peers' shared memory may be read
  const uint4 *run = keys + threadIdx.x * S; // this thread's run of RV vectors
  Found f;
  if (CL && AF) f = atomic_find<CL>(kk, rank, cs, hist, res, sh);
  else if (CL) f = cluster_find<CL>(0, NB, 0, kk, rank, cs, hist, merged, res, sh);
  else f = local_find(0, NB, 0, kk, hist, res, sh);
  stamp(2);
  uint32_t prefix = (uint32_t)f.bin << sh0, mask = (uint32_t)(NB - 1) << sh0;
  int above = f.above;

  if (CL && (flags & F_GATHER) && f.count <= GCAP) {
    // the bin's keys to CTA 0 (in any order: only the keys decide the threshold), which
    // finishes the lower digits alone and hands the threshold back
    path = 1;
    const unsigned b1 = (unsigned)f.bin;
    int mine = 0; // this thread's keys in the bin, then their place in CTA 0's buffer
    for (int j = 0; j < RV; j++) {
      KS kv[VEC];
      K::from(run[j], kv);
#pragma unroll
      for (int q = 0; q < VEC; q++) mine += kv[q] && ((unsigned)kv[q] >> sh0) == b1;
    }
    int cta_in;
    int at = block_exclusive_scan<NT, int>(mine, &cta_in, sh.ws);
    if (threadIdx.x == 0)
      sh.gbase = cta_in ? (int)atomicAdd(peer<CL>(&sh.gcount, 0), (unsigned)cta_in) : 0;
    __syncthreads();
    at += sh.gbase;
    if (mine) {
      uint32_t *gb = peer<CL>(gbuf, 0);
      for (int j = 0; j < RV; j++) {
        KS kv[VEC];
        K::from(run[j], kv);
#pragma unroll
        for (int q = 0; q < VEC; q++)
          if (kv[q] && ((unsigned)kv[q] >> sh0) == b1) {
            if (at < GCAP) gb[at] = kv[q];
            at++;
          }
      }
    }
    csync<CL>(); // CTA 0 holds the bin's f.count keys
    stamp(3);
    if (rank == 0) {
      const int ng = f.count;
      for (int p = 1; p < K::NP; p++) {
        const int shift = K::shift(p), nb = 1 << K::bits(p);
        for (int i = threadIdx.x; i < ng; i += NT) {
          const uint32_t key = gbuf[i];
          if ((key & mask) == prefix)
            atomicAdd(&myhist[(key >> shift) & (unsigned)(nb - 1)], 1u);
        }
        __syncthreads();
        const Found g = local_find(0, nb, 0, kk - above, hist, res, sh);
        prefix |= (uint32_t)g.bin << shift;
        mask |= (uint32_t)(nb - 1) << shift;
        above += g.above;
      }
      if ((int)threadIdx.x < cs) {
        V2Shared *q = peer<CL>(&sh, (int)threadIdx.x);
        q->prefix = prefix;
        q->above = above;
      }
    }
    csync<CL>(); // the threshold is in every CTA
    prefix = sh.prefix, above = sh.above;
    stamp(4);
  } else {
    for (int p = 1; p < K::NP; p++) {
      const int shift = K::shift(p), nb = 1 << K::bits(p);
      run_digit_hist<K>(run, RV, mask, prefix, shift, nb, myhist);
      if (!CL) __syncthreads();
      if (CL) f = cluster_find<CL>(0, nb, 0, kk - above, rank, cs, hist, merged, res, sh);
      else f = local_find(0, nb, 0, kk - above, hist, res, sh);
      prefix |= (uint32_t)f.bin << shift;
      mask |= (uint32_t)(nb - 1) << shift;
      above += f.above;
      stamp(2 + p);
    }
  }

  // compaction in column order
  const uint32_t t = prefix;
  const int need = kk - above;
  const unsigned cnt = run_counts<K>(run, RV, t); // gt | eq << 16 of this thread's run
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
  stamp(5);
  const bool stage = sorted || m.on; // winners to CTA 0's buffer, written out from there
  uint64_t *dst = stage ? peer<CL>(sbuf, 0) : nullptr;
  if ((cnt & 0xffffu) || ((cnt >> 16) && eqb < need))
    run_emit<K>(run, RV, t, need, gtb, eqb, g0 - s + (int64_t)threadIdx.x * RV * VEC, dst, o);
  if (PROF) {
    __syncthreads();
    stamp(6);
  }
  if (stage) {
    csync<CL>(); // every winner is in CTA 0's buffer
    if (rank == 0) stage_store<NT>(sbuf, kk, P, sorted, m, r, o);
  } else if (CL) {
    csync<CL>(); // no CTA leaves while a later one may read its counts
  }
  if (PROF && prof) {
    tc[NSTAMP - 1] = clock64();
    prof_print(tc, g_in, global_ns(), NT * RV * VEC, cs, path);
  }
}

// IXL_TOPK_V2_NEXT=1 (round 2; off by default, the kernel above stays the default): rows of
// one CTA (cs = 1) run persistent CTAs, as many as are resident (IXL_TOPK_V2_GRID=N caps the
// grid, a test switch), CTA b taking rows b, b + G, b + 2G, ... Each row is selected as
// above (the same digits, finds, compaction and staging, so the same results), but the first
// UNR vectors per thread of the CTA's next row (the whole row up to UNR * NT * VEC columns:
// 16384 bf16, 8192 fp32) are copied by cp.async into a buffer of their own (after the keys)
// right after this row's keys are in shared memory, and stay in flight while this row's
// digits, compaction and store run; the next row's bounds are loaded one row earlier still.
// So the load latency that was 9-13 thousand of a bf16 row's 22-27 thousand cycles overlaps
// the previous row's selection. Each thread reads back only the vectors it copied (no barrier
// between copy and use). Registers could not hold the group: at the 64 registers of two CTAs
// per SM the prefetched vectors spilled right after their loads (the spill store waits for
// the load).
template <typename T>
__global__ void __launch_bounds__(NT, 2)
    topk_v2_next_kernel(const T *__restrict__ logits, int64_t R, int64_t C,
                        const int32_t *__restrict__ row_start,
                        const int32_t *__restrict__ row_end, int k, int sorted,
                        int32_t *__restrict__ out, int RV, int P, Remap m) {
  using K = KeyOf<T>;
  using KS = typename K::KS;
  constexpr int VEC = K::VEC;
  constexpr int UNR = PRE; // vectors per thread in flight (the default kernel's load group)
  extern __shared__ uint4 smem4[];
  __shared__ V2Shared sh;
  __shared__ unsigned hist[2 * NB];
  __shared__ int res[3];
  __shared__ int nbd[2][2]; // a later row's [start, end), by cp.async from thread 0
  pdl_wait(); // PDL (launch.cuh): before the first global access
  pdl_trigger();
  const int64_t G = gridDim.x;
  int64_t r = blockIdx.x;
  if (r >= R) return; // the host launches at most R CTAs
  const int nvec = NT * RV, S = RV | 1;
  uint4 *keys = smem4;
  uint4 *pre = smem4 + NT * S; // [UNR][NT]: the next row's first group, by cp.async
  uint64_t *sbuf = reinterpret_cast<uint64_t *>(pre + UNR * NT);
  const int warp = threadIdx.x >> 5;
  unsigned *myhist = hist + (warp & 1) * NB;
  const int sh0 = K::shift(0);
  const uint4 *run = keys + threadIdx.x * S; // this thread's run of RV vectors

  // a row's bounds clamped to [0, C]; the chunk's first column: the 16-byte boundary at or
  // before s
  auto first_col = [&](int64_t rr, int s) -> int {
    const T *row = logits + rr * C;
    return s - (int)(((uintptr_t)(row + s) & 15u) / sizeof(T));
  };
  // the first group of a row's vectors to pre (zeros outside [s, e), as the default kernel
  // loads), one commit group
  auto prefetch = [&](int64_t rr, int s, int e) {
    const T *row = logits + rr * C;
    const int a0 = first_col(rr, s);
#pragma unroll
    for (int u = 0; u < UNR; u++) {
      const int v = (int)threadIdx.x + u * NT;
      const int g = a0 + v * VEC;
      if (v < nvec) { // a vector not wholly in the row: zeros, by a plain store
        if (g >= s && g + VEC <= e) sm80::cp_async16(&pre[u * NT + threadIdx.x], row + g, 16);
        else pre[u * NT + threadIdx.x] = make_uint4(0, 0, 0, 0);
      }
    }
    sm80::cp_async_commit();
  };

  // the bounds of row rr + G to nbd[q] (in the commit group of the next prefetch): loaded
  // while the rows before it are selected, read after the barrier that follows the wait
  auto next_bounds = [&](int64_t rr, int q) {
    if (threadIdx.x == 0 && rr + G < R) {
      if (row_start) sm80::cp_async4(&nbd[q][0], row_start + rr + G);
      sm80::cp_async4(&nbd[q][1], row_end + rr + G);
    }
  };
  // columns as int (a row of one CTA has at most LCAP + VEC - 1 of them), clamped to [0, C]
  // (a start past C is an empty row either way)
  auto clamp = [&](int &s, int &e, int q) { // the row in nbd[q]
    s = row_start ? nbd[q][0] : 0, e = nbd[q][1];
    s = s < 0 ? 0 : s > (int)C ? (int)C : s;
    e = e > (int)C ? (int)C : e;
  };
  int s = row_start ? row_start[r] : 0, e = row_end[r];
  s = s < 0 ? 0 : s > (int)C ? (int)C : s;
  e = e > (int)C ? (int)C : e;
  int par = 0; // nbd[par]: the bounds of this CTA's next row
  next_bounds(r, par);
  prefetch(r, s, e);
  for (int b = threadIdx.x; b < 2 * NB; b += NT) hist[b] = 0;
  __syncthreads(); // the histograms are clear

  for (; r < R; r += G) {
    const int n = e > s ? (int)(e - s) : 0;
    const int kk = k < n ? k : n;
    int32_t *o = out + r * (int64_t)k;
    for (int j = kk + threadIdx.x; j < k; j += NT) o[j] = -1;
    const T *row = logits + r * C;
    const int g0 = first_col(r, s);

    sm80::cp_async_wait<0>(); // this thread's copies (the group, thread 0 the bounds) landed
    if (kk > 0) {
      // the keys to shared memory and the first digit's histogram: the prefetched group,
      // then the rest of the row's groups (rows over UNR vectors per thread) loaded here
      auto put = [&](int v0, const uint4 (&x)[UNR]) {
#pragma unroll
        for (int u = 0; u < UNR; u++) {
          const int v = v0 + u * NT;
          if (v >= nvec) break;
          put_vector<K>(x[u], g0 + v * VEC, s, e, row, myhist, sh0, &keys[(v / RV) * S + v % RV]);
        }
      };
      {
        uint4 x[UNR];
#pragma unroll
        for (int u = 0; u < UNR; u++) {
          x[u] = make_uint4(0, 0, 0, 0);
          if ((int)threadIdx.x + u * NT < nvec) x[u] = pre[u * NT + threadIdx.x];
        }
        put((int)threadIdx.x, x);
      }
      for (int v0 = (int)threadIdx.x + UNR * NT; v0 < nvec; v0 += UNR * NT) {
        uint4 x[UNR];
#pragma unroll
        for (int u = 0; u < UNR; u++) {
          const int v = v0 + u * NT;
          const int g = g0 + v * VEC;
          x[u] = make_uint4(0, 0, 0, 0);
          if (v < nvec && g >= s && g + VEC <= e)
            x[u] = __ldg(reinterpret_cast<const uint4 *>(row + g));
        }
        put(v0, x);
      }
    }
    __syncthreads(); // the keys and the first histogram are complete; nbd[par] is visible

    // the next row's first group (and the bounds of the row after it) in flight while this
    // row is selected
    const int64_t rn = r + G;
    if (rn < R) {
      int ns, ne;
      clamp(ns, ne, par);
      next_bounds(rn, par ^ 1);
      prefetch(rn, ns, ne);
    }

    if (kk > 0) {
      Found f = local_find(0, NB, 0, kk, hist, res, sh);
      uint32_t prefix = (uint32_t)f.bin << sh0, mask = (uint32_t)(NB - 1) << sh0;
      int above = f.above;
      for (int p = 1; p < K::NP; p++) {
        const int shift = K::shift(p), nb = 1 << K::bits(p);
        run_digit_hist<K>(run, RV, mask, prefix, shift, nb, myhist);
        __syncthreads();
        f = local_find(0, nb, 0, kk - above, hist, res, sh);
        prefix |= (uint32_t)f.bin << shift;
        mask |= (uint32_t)(nb - 1) << shift;
        above += f.above;
      }

      // compaction in column order (the default kernel's, one CTA)
      const uint32_t t = prefix;
      const int need = kk - above;
      const unsigned cnt = run_counts<K>(run, RV, t); // gt | eq << 16 of this thread's run
      unsigned cta_tot;
      const unsigned before = block_exclusive_scan<NT, unsigned>(cnt, &cta_tot, sh.wsu);
      int gtb = (int)(before & 0xffffu), eqb = (int)(before >> 16);
      const bool stage = sorted || m.on;
      if ((cnt & 0xffffu) || ((cnt >> 16) && eqb < need))
        run_emit<K>(run, RV, t, need, gtb, eqb, (int64_t)(g0 - s + (int)threadIdx.x * RV * VEC),
                    stage ? sbuf : nullptr, o);
      if (stage) {
        __syncthreads(); // every winner is in the buffer
        stage_store<NT>(sbuf, kk, P, sorted, m, r, o);
      }
    }
    __syncthreads(); // every read of this row's keys and staged winners is done
    if (rn < R) clamp(s, e, par);
    par ^= 1;
  }
}

// IXL_TOPK_V2_STREAM (issue 14, round 3; off by default until proven on the H200): many long
// rows (the source layer's top-k over [4096, 131072] fp32, 64 x 131072 fp32 k = 2048) in one
// pass over the row at streaming bandwidth, one CTA per row. Resident chunks cannot do it: a
// row's 512 KB is 8 CTAs' shared memory, so 4096 rows ran 124 waves of clusters with every
// chunk's fixed costs (3.57 ms, the bytes floor is 0.5 ms). Per row:
//  1. a sample: every SV-th 16-B vector of the row (at most 2 * CAP keys, 1/16 of a 131072
//     fp32 row), its keys' jth largest found over two digits (22 bits of an fp32 key, the
//     whole bf16 key), j = mu + 5 sqrt(mu) + 2 for mu = kk * sample / n: the threshold t0 has
//     about j / sample of the row at or above it, five standard deviations more than kk;
//  2. one pass over the row: every key >= t0 goes to a candidate buffer (key, column) in
//     shared memory, the first digit's histogram of the candidates beside it; the sampled
//     vectors come from L2;
//  3. when the buffer holds at least kk and at most CAP keys, every key >= the kk-th largest
//     is in it (t0 <= the kk-th key exactly when at least kk keys are >= t0): the digits of
//     the exact kk-th key t, the count above it and `need` come from the buffer alone;
//     otherwise (ties, a skewed or adversarial row, a row shorter than the sample's margin)
//     the exact streaming radix: one pass over the row per digit, then a pass that buffers
//     the keys > t (fewer than kk);
//  4. column order without a sort: bitmaps of the row's columns, W (keys > t) and Q (keys ==
//     t), one scan of each thread's word counts; a key > t takes slot (W and Q bits before its
//     column, Q's capped at need), the first `need` keys == t by column the slots between.
//     Sorted and fused modes stage the winners as the resident kernel does.
// The results are the CPU reference's bit for bit either way; only the time depends on the
// sample. Shared memory: 8 CAP bytes of buffer (sample keys first), two bitmaps of C / 8
// bytes, the staged winners when staged.
constexpr int SCAP = 4096; // candidate buffer entries (k <= SCAP / 2 streams)

// The float whose f32 order key is k (ixl_order_key_bits inverted): every value keyed at or
// above k compares >= it, or it is a NaN (k past +inf's key, or a negative-NaN pattern), which
// passes every value in any_ge. For a bf16 key (k << 16) the low mantissa bits of a negative
// come back as ones: a little below the bf16 value, still a lower bound.
__device__ __forceinline__ float key_float(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k ^ 0x80000000u) : ~k);
}

// A hint: `bytes` (a multiple of 16) from p (16-byte aligned) into L2 by the bulk-copy engine
// (cp.async.bulk.prefetch.L2, sm_90); nothing on older devices. Never changes a result.
__device__ __forceinline__ void l2_prefetch(const void *p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes));
#else
  (void)p, (void)bytes;
#endif
}

// The streaming and short kernels' dynamic shared memory: cap candidate keys (ck) and their
// columns from row_start (cc), bitmaps of the row's columns (W: keys > t, Q: keys == t; nwp
// words each), the P staged winners (sbuf)
struct CandLayout {
  uint32_t *ck, *cc, *W, *Q;
  uint64_t *sbuf;
  __device__ CandLayout(uint4 *smem, int cap, int nwp) {
    ck = reinterpret_cast<uint32_t *>(smem);
    cc = ck + cap;
    W = cc + cap;
    Q = W + nwp;
    sbuf = reinterpret_cast<uint64_t *>(Q + nwp);
  }
};

// The sampled threshold's rank: of ms sampled keys out of n, the j-th largest, j = mu + 5
// sqrt(mu) + 2 for mu = kk ms / n (five standard deviations past kk's expected share); ms + 1
// when that is past the sample (then every key is a candidate)
__device__ __forceinline__ int sample_rank(int kk, int ms, int n) {
  const float mu = (float)kk * (float)ms / (float)n;
  const float jf = ceilf(mu + 5.0f * sqrtf(mu) + 2.0f);
  return jf < (float)ms ? (int)jf : ms + 1;
}

struct StreamShared {
  unsigned ncand, nsample;
  unsigned long long ws64[NT / 32 + 1];
  unsigned long long tpre[NT]; // per thread: keys > t (high) and == t (low) in its words before
};

// The steps the streaming and the short-row kernels share (NTH threads; ck / cc the candidate
// buffer's keys and columns, W / Q the bitmaps of the row's keys > t and == t).

// The lower digits of the kk-th key from the buffer's nc keys, once the first digit's
// histogram is in hist: prefix / mask / above as the find leaves them (FAST0: the first find
// by find_fast, hist 16-byte aligned)
template <int NTH, typename K, bool FAST0>
__device__ __forceinline__ void buffer_digits(const uint32_t *ck, int nc, int kk, unsigned *hist,
                                              unsigned *myhist, int *res, int *ws,
                                              uint32_t &prefix, uint32_t &mask, int &above) {
  for (int p = 0; p < K::NP; p++) {
    const int shift = K::shift(p), nb = 1 << K::bits(p);
    if (p > 0) {
      for (int i = threadIdx.x; i < nc; i += NTH) {
        const uint32_t key = ck[i];
        if ((key & mask) == prefix) atomicAdd(&myhist[(key >> shift) & (unsigned)(nb - 1)], 1u);
      }
      __syncthreads();
    }
    const Found f = FAST0 && p == 0 ? find_fast<NTH>(0, kk, hist, res, ws)
                                    : find_n<NTH>(0, nb, 0, kk - above, hist, res, ws);
    prefix |= (uint32_t)f.bin << shift;
    mask |= (uint32_t)(nb - 1) << shift;
    above += f.above;
  }
}

// the buffer's keys > t into W, == t into Q
template <int NTH>
__device__ __forceinline__ void mark_bitmaps(const uint32_t *ck, const uint32_t *cc, int nc,
                                             uint32_t t, uint32_t *W, uint32_t *Q) {
  for (int i = threadIdx.x; i < nc; i += NTH) {
    const uint32_t key = ck[i], c = cc[i];
    if (key > t) atomicOr(&W[c >> 5], 1u << (c & 31));
    else if (key == t) atomicOr(&Q[c >> 5], 1u << (c & 31));
  }
}

// The exact radix over the row when the buffer cannot give the kk-th key: visit(f) calls
// f(key, column from row_start) once for every key of the row (0 outside it), one pass per
// digit, then a pass that buffers the keys > t (fewer than kk <= cap / 2) and marks W and Q.
// prefix / mask / above start at 0; returns the buffer's count.
template <int NTH, typename K, typename Visit>
__device__ __forceinline__ int radix_over_row(Visit &&visit, int kk, unsigned *hist,
                                              unsigned *myhist, int *res, int *ws,
                                              unsigned *ncand, uint32_t *ck, uint32_t *cc,
                                              uint32_t *W, uint32_t *Q, uint32_t &prefix,
                                              uint32_t &mask, int &above) {
  for (int b = threadIdx.x; b < 2 * NB; b += NTH) hist[b] = 0;
  __syncthreads(); // every thread has read the buffer's count
  if (threadIdx.x == 0) *ncand = 0;
#pragma unroll 1
  for (int p = 0; p < K::NP; p++) {
    const int shift = K::shift(p), nb = 1 << K::bits(p);
    visit([&](uint32_t key, int) {
      if (key && (key & mask) == prefix)
        atomicAdd(&myhist[(key >> shift) & (unsigned)(nb - 1)], 1u);
    });
    __syncthreads();
    const Found f = find_n<NTH>(0, nb, 0, kk - above, hist, res, ws);
    prefix |= (uint32_t)f.bin << shift;
    mask |= (uint32_t)(nb - 1) << shift;
    above += f.above;
  }
  const uint32_t t = prefix;
  visit([&](uint32_t key, int ci) {
    const uint32_t c = (uint32_t)ci;
    if (key > t) {
      const unsigned p = atomicAdd(ncand, 1u);
      ck[p] = key, cc[p] = c;
      atomicOr(&W[c >> 5], 1u << (c & 31));
    } else if (key == t && key) {
      atomicOr(&Q[c >> 5], 1u << (c & 31));
    }
  });
  __syncthreads();
  return (int)*ncand;
}

// Step 4, column order without a sort: thread i owns bitmap words [i << lw, (i + 1) << lw);
// one scan of their counts (keys > t high, == t low) gives each key > t in the buffer its slot
// (W and Q bits before its column, Q's capped at need) and the first `need` keys == t by
// column the slots between. Sorted or fused (stage): the winners as (~key << 32 | column) in
// sbuf, sorted when asked, then written through the remap. stamp() after the scan (profiles).
template <int NTH, int KB, typename Stamp>
__device__ __forceinline__ void column_order(const uint32_t *W, const uint32_t *Q, int nw,
                                             const uint32_t *ck, const uint32_t *cc, int nc,
                                             uint32_t t, int need, int kk, int P, int sorted,
                                             const Remap &m, int64_t r, int32_t *o,
                                             uint64_t *sbuf, unsigned long long *ws64,
                                             unsigned long long *tpre, Stamp &&stamp) {
  const int tid = threadIdx.x;
  int lw = 0;
  while ((NTH << lw) < nw) lw++;
  const int wb = tid << lw, we = min(wb + (1 << lw), nw);
  unsigned long long cnt = 0;
  for (int x = wb; x < we; x++)
    cnt += ((unsigned long long)__popc(W[x]) << 32) | (unsigned)__popc(Q[x]);
  unsigned long long tot;
  const unsigned long long before = block_exclusive_scan<NTH, unsigned long long>(cnt, &tot, ws64);
  tpre[tid] = before;
  __syncthreads();
  stamp();
  const bool stage = sorted || m.on;
  auto emit = [&](int slot, uint32_t key, uint32_t c) {
    if (stage) sbuf[slot] = ((uint64_t)(~(key << (32 - KB))) << 32) | c;
    else o[slot] = (int32_t)c;
  };
  // keys > t, from the buffer
  for (int i = tid; i < nc; i += NTH) {
    const uint32_t key = ck[i];
    if (key <= t) continue;
    const uint32_t c = cc[i];
    const int x = (int)(c >> 5), own = x >> lw;
    const unsigned long long pre = tpre[own];
    int gtb = (int)(pre >> 32), eqb = (int)(pre & 0xffffffffu);
    for (int y = own << lw; y < x; y++) gtb += __popc(W[y]), eqb += __popc(Q[y]);
    const unsigned below = (1u << (c & 31)) - 1u;
    gtb += __popc(W[x] & below), eqb += __popc(Q[x] & below);
    emit(gtb + min(eqb, need), key, c);
  }
  // the first `need` keys == t by column, from this thread's words of Q
  {
    int gtb = (int)(before >> 32), eqb = (int)(before & 0xffffffffu);
    for (int x = wb; x < we && eqb < need; x++) {
      unsigned q = Q[x];
      const unsigned gw = W[x];
      while (q && eqb < need) {
        const int b = __ffs(q) - 1;
        const uint32_t c = ((uint32_t)x << 5) | (uint32_t)b;
        emit(gtb + __popc(gw & ((1u << b) - 1u)) + eqb, t, c);
        eqb++;
        q &= q - 1;
      }
      gtb += __popc(gw);
    }
  }
  if (stage) {
    __syncthreads(); // every winner is in the buffer
    stage_store<NTH>(sbuf, kk, P, sorted, m, r, o);
  }
}

// PROF: IXL_TOPK_V2_SPROF's instantiation; MINB: CTAs per SM (3: IXL_TOPK_V2_S3, 40 registers)
// PIPE (IXL_TOPK_V2_SPIPE=1, off by default): the stream's next round of loads is issued
// before this round's vectors are tested, so a warp's load latency overlaps its own compares
// and candidate atomics (the same loads and the same order of results: a timing change only).
// DH (IXL_TOPK_V2_SPIPE=2, with PIPE): no histogram atomics in the stream (one per key slot
// of a passing vector, in divergent code: 1-2 lanes an instruction, the short kernel's
// costliest phase in visit 2), the candidates' first digit by one dense pass afterwards.
// AGG (IXL_TOPK_V2_SPIPE=3, with DH): the buffer slots of a round's vector by one shared
// atomic per warp (ballots of the lanes' counts), not one atomic with a return per passing
// vector in divergent code; the buffer's order changes, nothing that depends on it
// CLS (IXL_TOPK_V2_CSTREAM=N; unset: 2 where rows stream anyway and fit one wave): a row over a
// thread-block cluster of cs CTAs
// (sm_90), for rows too few to fill the GPU one CTA each (64 x 131072 fp32: 64 of 132 SMs).
// Every CTA takes the same sample of the whole row (from L2 after the first: 32 KB), so every
// CTA finds the same t0 with no exchange; CTA c streams the c-th contiguous part of the row's
// whole vectors into its own buffer (CTA 0 also the partial first and last vectors); then one
// cluster barrier, each CTA reads the cluster's counts (DSMEM) and copies its candidates into
// CTA 0's buffer after those of the CTAs before it, a second barrier, and CTA 0 alone finishes
// the row as cs = 1 does (the exact kk-th key from the buffer, or the exact radix over the whole
// row; the bitmaps, the column order, the store). The same candidates as one CTA (keys >= the
// same t0), so the same results; the buffer's order is not used.
// STG (IXL_TOPK_V2_SSTG=ns, 12000 by default, 0 off): the CTAs [stg_lo, 2 stg_lo) (the first wave's
// second half, stg_lo = the SMs) wait stg_ns before they start, so an SM's two CTAs stream and
// finish (sample, tail) out of phase; the CTAs that replace them keep the phase. Nothing else
// changes (a timing change only).
template <typename T, int UNR, bool PROF = false, int MINB = 2, bool PIPE = false,
          bool DH = false, bool AGG = false, bool CLS = false, bool STG = false>
__global__ void __launch_bounds__(NT, MINB)
    topk_v2_stream_kernel(const T *__restrict__ logits, int64_t C,
                          const int32_t *__restrict__ row_start,
                          const int32_t *__restrict__ row_end, int k, int sorted,
                          int32_t *__restrict__ out, int P, int nwp, int force_fb, int mu_t,
                          int pfv, int cap, Remap m, int stg_lo, int stg_ns) {
  using K = KeyOf<T>;
  using KS = typename K::KS;
  constexpr int VEC = K::VEC;
  extern __shared__ uint4 smem4[];
  __shared__ V2Shared sh;
  __shared__ StreamShared ss;
  __shared__ unsigned hist[2 * NB];
  __shared__ int res[3];
  // cap: the buffer's entries (4096, or 2048 for IXL_TOPK_V2_S3), k <= cap / 2; the sample's
  // keys in ck first: [2 cap]
  const CandLayout cl(smem4, cap, nwp);
  uint32_t *ck = cl.ck, *cc = cl.cc, *W = cl.W, *Q = cl.Q;
  uint64_t *sbuf = cl.sbuf;
  // IXL_TOPK_V2_SPROF=1 (the PROF instantiation: a printf costs the timed kernels a stack
  // frame and spills): thread 0 of the first, middle and last CTA stamps clock64 after each
  // phase's barrier and prints the cycles
  const bool prof = PROF && prof_thread();
  long long tc[7] = {};
  unsigned long long gin = 0;
  if (prof) tc[0] = clock64(), gin = global_ns();
  pdl_wait(); // PDL (launch.cuh): before the first global access
  pdl_trigger();
  if constexpr (STG) {
    if (stg_ns > 0 && blockIdx.x - (unsigned)stg_lo < (unsigned)stg_lo) {
      const unsigned long long t0 = global_ns();
      do __nanosleep(256);
      while (global_ns() - t0 < (unsigned long long)stg_ns);
    }
  }

  int rank = 0, cs = 1; // CLS: this CTA's rank in the row's cluster, the cluster's size
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CLS) {
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
  if (kk <= 0) return; // the whole cluster (same row): no peer access follows

  const T *row = logits + r * C;
  const int64_t a0 = s - (int64_t)(((uintptr_t)(row + s) & 15u) / sizeof(T));
  const int nv = (int)((e - a0 + VEC - 1) / VEC); // vectors from the aligned start
  const int nw = (n + 31) >> 5;                    // bitmap words of the row
  // IXL_TOPK_V2_SPF (off by default, not yet run on the GPU): the bulk-copy engine fetches the
  // stream's first pfv vectors into L2 while the sample is taken, then pfv vectors ahead of
  // thread 0 each round, so a round's loads find L2, not HBM
  const int vlo = a0 < s ? 1 : 0, vhi = (int)((e - a0) / VEC);
  // this CTA's part of the whole vectors (CLS: the rank-th of cs contiguous parts)
  const int cper = CLS ? (vhi - vlo + cs - 1) / cs : 0;
  const int plo = CLS ? min(vhi, vlo + rank * cper) : vlo;
  const int phi = CLS ? min(vhi, plo + cper) : vhi;
  const uint4 *vp = reinterpret_cast<const uint4 *>(row + a0);
  auto prefetch = [&](int lo, int cnt) { // vectors [lo, lo + cnt) of this part's whole ones
    const int hi = min(lo + cnt, phi);
    if (lo < hi) l2_prefetch(vp + lo, (uint32_t)(hi - lo) * 16u);
  };
  if (pfv && threadIdx.x == 0) prefetch(plo, pfv);
  const int warp = threadIdx.x >> 5;
  unsigned *myhist = hist + (warp & 1) * NB;
  const int sh0 = K::shift(0);
  for (int b = threadIdx.x; b < 2 * NB; b += NT) hist[b] = 0;
  for (int w = threadIdx.x; w < nw; w += NT) W[w] = 0, Q[w] = 0;
  if (threadIdx.x == 0) ss.ncand = 0, ss.nsample = 0;

  // the keys of vector v (0 outside [s, e)), w its 16 bytes when wholly inside
  auto keys_of = [&](int v, const uint4 &w, KS (&kv)[VEC]) {
    const int64_t g = a0 + (int64_t)v * VEC;
    if (g >= s && g + VEC <= e) {
      K::unpack(w, kv);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; j++) kv[j] = (g + j >= s && g + j < e) ? K::key(row[g + j]) : (KS)0;
    }
  };
  auto load = [&](int v) {
    const int64_t g = a0 + (int64_t)v * VEC;
    return (g >= s && g + VEC <= e) ? __ldg(reinterpret_cast<const uint4 *>(row + g))
                                    : make_uint4(0, 0, 0, 0);
  };
  // every key of the row once, f(key, column from s); UNR vectors per thread in flight
  auto visit = [&](auto &&f) {
    for (int v0 = threadIdx.x; v0 < nv; v0 += UNR * NT) {
      uint4 w[UNR];
#pragma unroll
      for (int u = 0; u < UNR; u++) {
        const int v = v0 + u * NT;
        w[u] = v < nv ? load(v) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < UNR; u++) {
        const int v = v0 + u * NT;
        if (v >= nv) break;
        KS kv[VEC];
        keys_of(v, w[u], kv);
        const int c0 = (int)(a0 + (int64_t)v * VEC - s);
#pragma unroll
        for (int j = 0; j < VEC; j++) f((uint32_t)kv[j], c0 + j);
      }
    }
  };

  // 1. the sample: every SV-th vector, SV the smallest power of two whose sample fits the
  // target: 64 n / kk keys (mu about 64: the candidates' count stays within 2 kk) while kk <=
  // cap / 4, else 2 cap (kk up to cap / 2 needs the sample's full precision)
  const int64_t mt =
      kk <= cap / 4 ? min((int64_t)2 * cap, (int64_t)mu_t * n / kk + VEC) : (int64_t)2 * cap;
  int SV = 1;
  while ((int64_t)((nv + SV - 1) / SV) * VEC > mt && SV < nv) SV <<= 1;
  const int nsv = (nv + SV - 1) / SV;
  {
    constexpr int SU = 4;
    unsigned mine = 0;
    // a group of SU sampled vectors per thread: loads first, then keys and histogram
    auto group = [&](int i0, bool first) {
      uint4 w[SU];
#pragma unroll
      for (int u = 0; u < SU; u++) {
        const int i = i0 + u * NT;
        w[u] = i < nsv ? load(i * SV) : make_uint4(0, 0, 0, 0);
      }
      if (first) __syncthreads(); // the histograms are clear (every thread runs group 0)
#pragma unroll
      for (int u = 0; u < SU; u++) {
        const int i = i0 + u * NT;
        if (i >= nsv) break;
        KS kv[VEC];
        keys_of(i * SV, w[u], kv);
#pragma unroll
        for (int j = 0; j < VEC; j++) {
          ck[i * VEC + j] = kv[j];
          if (kv[j]) atomicAdd(&myhist[kv[j] >> sh0], 1u), mine++;
        }
      }
    };
    group((int)threadIdx.x, true);
    for (int i0 = (int)threadIdx.x + SU * NT; i0 < nsv; i0 += SU * NT) group(i0, false);
    if (mine) atomicAdd(&ss.nsample, mine);
  }
  __syncthreads();
  if (prof) tc[1] = clock64();
  const int ms = (int)ss.nsample;
  uint32_t t0 = 1; // every key (a key is never 0)
  {
    const int j = sample_rank(kk, ms, n);
    if (j <= ms) { // uniform: ms is shared
      const Found f0 = local_find(0, NB, 0, j, hist, res, sh);
      const int sh1 = K::shift(1), nb1 = 1 << K::bits(1);
      for (int i = threadIdx.x; i < nsv; i += NT)
#pragma unroll
        for (int q = 0; q < VEC; q++) {
          const uint32_t key = ck[i * VEC + q];
          if (key && (int)(key >> sh0) == f0.bin)
            atomicAdd(&myhist[(key >> sh1) & (unsigned)(nb1 - 1)], 1u);
        }
      __syncthreads();
      const Found f1 = local_find(0, nb1, 0, j - f0.above, hist, res, sh);
      t0 = ((uint32_t)f0.bin << sh0) | ((uint32_t)f1.bin << sh1);
      if (t0 == 0) t0 = 1;
    } else {
      local_find(0, NB, 0, 1, hist, res, sh); // clears the histogram (and the sample is read)
    }
  }
  if (prof) tc[2] = clock64();

  // 2. one pass: keys >= t0 to the buffer, their first digit's histogram. The whole vectors
  // [vlo, vhi) by a float compare per value (any_ge, one branch per vector), the keys only of
  // a vector that passes; the row's partial first and last vectors by threads 0 and 1
  {
    const float x0 = key_float(t0 << (32 - K::KB));
    auto take = [&](int v, const KS (&kv)[VEC]) {
      unsigned c = 0;
#pragma unroll
      for (int j = 0; j < VEC; j++) c += (uint32_t)kv[j] >= t0;
      if (!c) return;
      unsigned p = atomicAdd(&ss.ncand, c);
      const int c0 = (int)(a0 + (int64_t)v * VEC - s);
#pragma unroll
      for (int j = 0; j < VEC; j++)
        if ((uint32_t)kv[j] >= t0) {
          if (p < (unsigned)cap) {
            ck[p] = kv[j], cc[p] = (uint32_t)(c0 + j);
            if (!DH) atomicAdd(&myhist[(uint32_t)kv[j] >> sh0], 1u);
          }
          p++;
        }
    };
    auto whole = [&](int v, const uint4 &w) {
      if (K::any_ge(w, x0)) {
        KS kv[VEC];
        K::unpack(w, kv);
        take(v, kv);
      }
    };
    // AGG: the lanes here (the main loop's; a lane past the row's end is not) count their
    // keys >= t0, four ballots give each lane's offset and the warp's total (a count is at
    // most VEC <= 8), one lane reserves the warp's slots
    auto whole_agg = [&](int v, const uint4 &w) {
      KS kv[VEC];
      unsigned c = 0;
      if (K::any_ge(w, x0)) {
        K::unpack(w, kv);
#pragma unroll
        for (int j = 0; j < VEC; j++) c += (uint32_t)kv[j] >= t0;
      }
      const unsigned am = __activemask();
      const unsigned b0 = __ballot_sync(am, c & 1u), b1 = __ballot_sync(am, c & 2u);
      const unsigned b2 = __ballot_sync(am, c & 4u), b3 = __ballot_sync(am, c & 8u);
      const unsigned tot = __popc(b0) + 2 * __popc(b1) + 4 * __popc(b2) + 8 * __popc(b3);
      if (!tot) return; // uniform over am
      const int ln = (int)(threadIdx.x & 31);
      const unsigned lt = (1u << ln) - 1u;
      const unsigned ex =
          __popc(b0 & lt) + 2 * __popc(b1 & lt) + 4 * __popc(b2 & lt) + 8 * __popc(b3 & lt);
      const int leader = __ffs(am) - 1;
      unsigned base = 0;
      if (ln == leader) base = atomicAdd(&ss.ncand, tot);
      base = __shfl_sync(am, base, leader);
      if (c) {
        unsigned p = base + ex;
        const int c0 = (int)(a0 + (int64_t)v * VEC - s);
#pragma unroll
        for (int j = 0; j < VEC; j++)
          if ((uint32_t)kv[j] >= t0) {
            if (p < (unsigned)cap) ck[p] = kv[j], cc[p] = (uint32_t)(c0 + j);
            p++;
          }
      }
    };
    int v = plo + (int)threadIdx.x;
    if (PIPE) {
      uint4 cur[UNR];
      if (v + (UNR - 1) * NT < phi) {
#pragma unroll
        for (int u = 0; u < UNR; u++) cur[u] = __ldg(vp + v + u * NT);
      }
      for (; v + (UNR - 1) * NT < phi; v += UNR * NT) {
        if (pfv && threadIdx.x == 0) prefetch(v + pfv, UNR * NT);
        const int vn = v + UNR * NT;
        const bool more = vn + (UNR - 1) * NT < phi;
        uint4 nxt[UNR];
#pragma unroll
        for (int u = 0; u < UNR; u++) nxt[u] = more ? __ldg(vp + vn + u * NT) : cur[u];
#pragma unroll
        for (int u = 0; u < UNR; u++) {
          if (AGG) whole_agg(v + u * NT, cur[u]);
          else whole(v + u * NT, cur[u]);
        }
#pragma unroll
        for (int u = 0; u < UNR; u++) cur[u] = nxt[u];
      }
    } else {
      for (; v + (UNR - 1) * NT < phi; v += UNR * NT) {
        if (pfv && threadIdx.x == 0) prefetch(v + pfv, UNR * NT); // the window moves one round
        uint4 w[UNR];
#pragma unroll
        for (int u = 0; u < UNR; u++) w[u] = __ldg(vp + v + u * NT);
#pragma unroll
        for (int u = 0; u < UNR; u++) whole(v + u * NT, w[u]);
      }
    }
    for (; v < phi; v += NT) whole(v, __ldg(vp + v));
    const int part = rank != 0                                        ? -1
                     : threadIdx.x == 0 && vlo                         ? 0
                     : threadIdx.x == 1 && vhi < nv && vhi >= vlo ? vhi
                                                                   : -1;
    if (part >= 0) {
      KS kv[VEC];
      keys_of(part, make_uint4(0, 0, 0, 0), kv);
      take(part, kv);
    }
  }
  __syncthreads();
  if (prof) tc[3] = clock64();
  int nc = (int)ss.ncand;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (CLS && cs > 1) { // the candidates to CTA 0, after those of the lower ranks
    cg::this_cluster().sync(); // every CTA's buffer and count are final
    if (threadIdx.x < 32) {
      const int q = (int)threadIdx.x;
      const unsigned nq = q < cs ? *peer<true>(&ss.ncand, q) : 0u;
      unsigned incl = nq;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, incl, d);
        if (q >= d) incl += y;
      }
      const unsigned base = __shfl_sync(0xffffffffu, incl - nq, rank);
      const unsigned total = __shfl_sync(0xffffffffu, incl, 31);
      if (q == 0) sh.gbase = (int)base, sh.gcount = total;
    }
    __syncthreads();
    const unsigned base = (unsigned)sh.gbase, total = sh.gcount;
    if (rank > 0 && total <= (unsigned)cap) { // else the exact radix: the buffer is unused
      uint32_t *ck0 = peer<true>(ck, 0), *cc0 = peer<true>(cc, 0);
      for (int i = threadIdx.x; i < nc; i += NT) ck0[base + i] = ck[i], cc0[base + i] = cc[i];
    }
    cg::this_cluster().sync(); // CTA 0's buffer is complete
    if (rank > 0) return;
    nc = (int)min(total, (unsigned)cap + 1u);
  }
#endif
  const int nc0 = nc;
  uint32_t prefix = 0, mask = 0;
  int above = 0;
  if (!force_fb && nc >= kk && nc <= cap) {
    if (DH) { // the candidates' first digit, one dense pass over the buffer
      for (int i = threadIdx.x; i < nc; i += NT) atomicAdd(&myhist[ck[i] >> sh0], 1u);
      __syncthreads();
    }
    // 3. the exact kk-th key from the buffer
    buffer_digits<NT, K, false>(ck, nc, kk, hist, myhist, res, sh.ws, prefix, mask, above);
    mark_bitmaps<NT>(ck, cc, nc, prefix, W, Q);
  } else {
    // the exact streaming radix: one pass per digit
    nc = radix_over_row<NT, K>(visit, kk, hist, myhist, res, sh.ws, &ss.ncand, ck, cc, W, Q,
                               prefix, mask, above);
  }
  __syncthreads(); // the bitmaps are complete
  if (prof) tc[4] = clock64();

  // 4. slots in column order
  column_order<NT, K::KB>(W, Q, nw, ck, cc, nc, prefix, kk - above, kk, P, sorted, m, r, o, sbuf,
                          ss.ws64, ss.tpre, [&] {
                            if (prof) tc[5] = clock64();
                          });
  if (PROF && prof) {
    tc[6] = clock64();
    printf("# topksprof blk %u/%u sm %u n %d sample %d nc %d fb %d | ns %llu | cyc sample %lld "
           "t0 %lld stream %lld select %lld scan %lld emit %lld total %lld\n",
           blockIdx.x, gridDim.x, smid(), n, ms, nc0, (int)(force_fb || nc0 < kk || nc0 > cap),
           global_ns() - gin, tc[1] - tc[0], tc[2] - tc[1], tc[3] - tc[2], tc[4] - tc[3],
           tc[5] - tc[4], tc[6] - tc[5], tc[6] - tc[0]);
  }
}

// IXL_TOPK_V2_SHORT (off by default; not yet run on the GPU): rows of one CTA (up to 16384
// bf16 / 8192 fp32 columns) on 256-thread CTAs, four per SM, the row held in registers (8
// vectors of 16 B per thread, converted to order keys once), read from HBM once, and no
// histogram over the whole row. The resident kernel's profile (BENCHMARKS.md, 2026-12-01)
// put a 16384-bf16 row at 26-27 thousand cycles, two CTAs per SM: every pass over the keys
// in shared memory (2.5-4.6 thousand cycles each) and every find (3 barriers) is on the
// row's critical path, and only two rows per SM hide each other's latency. Here, per row:
//  1. a sample from the registers (one key of every SV-th vector, about mu * n / kk keys):
//     its j-th largest key over two digits, j = mu + 5 sqrt(mu) + 2, is the threshold t0
//     (the streaming kernel's rule);
//  2. one pass over the registers: the keys >= t0 (about kk + 5 sqrt(mu) n / ms) to a
//     candidate buffer (key, column; one shared atomic per warp for the slots), their first
//     digit's histogram beside it;
//  3. when kk <= candidates <= cap, the exact kk-th key t from the buffer alone (every key
//     >= the kk-th is in it), else the exact radix over the row, read again (ties, skewed or
//     adversarial rows);
//  4. column order by two bitmaps (keys > t, keys == t) and one scan, as the streaming
//     kernel: no sort unsorted, ties to the smaller column; sorted mode and the fused remap
//     staged as there. Results are the CPU's either way; the sample decides only the time.
constexpr int NTS = 256;   // threads of the short-row kernel
constexpr int SUV = 8;     // vectors per thread it holds in registers
constexpr int SHCAP = 2048; // candidate entries for k <= SHCAP / 4 (twice that up to SHCAP / 2)

template <int NTH> struct ShortShared {
  uint4 part[2]; // the keys of the row's partial first and last vectors
  unsigned ncand, nsample;
  int ws[NTH / 32 + 1];
  unsigned long long ws64[NTH / 32 + 1];
  unsigned long long tpre[NTH]; // per thread: keys > t (high) and == t (low) in its words before
};

// key q (0 <= q < VEC, not a compile-time index: selects, no local memory) of a packed vector
template <typename T> __device__ __forceinline__ uint32_t key_at(const uint4 &w, int q);
template <> __device__ __forceinline__ uint32_t key_at<float>(const uint4 &w, int q) {
  const uint32_t lo = q & 1 ? w.y : w.x, hi = q & 1 ? w.w : w.z;
  return q & 2 ? hi : lo;
}
template <> __device__ __forceinline__ uint32_t key_at<uint16_t>(const uint4 &w, int q) {
  const uint32_t lo = q & 2 ? w.y : w.x, hi = q & 2 ? w.w : w.z;
  const uint32_t u = q & 4 ? hi : lo;
  return q & 1 ? u >> 16 : u & 0xffffu;
}

// A vector's 16 bytes keyed in place (the layout K::pack gives): fp32 one key a word; bf16
// two a word, on the packed halves (-0 to +0, every NaN to 0xffff, a negative's bits
// flipped, a positive's sign set), equal to two ixl_order_key_bf16 >> 16 for every one of the
// 2^32 words (checked exhaustively on the host), in about half the instructions
template <typename T> __device__ __forceinline__ uint4 keys_vec(const uint4 &w);
template <> __device__ __forceinline__ uint4 keys_vec<float>(const uint4 &w) {
  return make_uint4(ixl_order_key_bits(w.x), ixl_order_key_bits(w.y), ixl_order_key_bits(w.z),
                    ixl_order_key_bits(w.w));
}
__device__ __forceinline__ uint32_t bf16_keys2(uint32_t w) {
  const uint32_t a = w & 0x7fff7fffu;
  const uint32_t nz = ((a + 0x7fff7fffu) >> 15) & 0x00010001u;  // a half is not +-0
  const uint32_t sg = (w >> 15) & nz;                            // ... and negative
  const uint32_t nan = ((a + 0x007f007fu) >> 15) & 0x00010001u; // its magnitude > 0x7f80
  return ((a | (sg << 15)) ^ ((sg * 0x7fffu) | 0x80008000u)) | (nan * 0xffffu);
}
template <> __device__ __forceinline__ uint4 keys_vec<uint16_t>(const uint4 &w) {
  return make_uint4(bf16_keys2(w.x), bf16_keys2(w.y), bf16_keys2(w.z), bf16_keys2(w.w));
}

// how many keys of a packed key vector are >= t0, without extracting them (bf16: the high
// key compares as the word, the low one as the word shifted up)
template <typename T> __device__ __forceinline__ unsigned count_ge(const uint4 &w, uint32_t t0);
template <> __device__ __forceinline__ unsigned count_ge<float>(const uint4 &w, uint32_t t0) {
  return (unsigned)(w.x >= t0) + (w.y >= t0) + (w.z >= t0) + (w.w >= t0);
}
template <> __device__ __forceinline__ unsigned count_ge<uint16_t>(const uint4 &w, uint32_t t0) {
  const uint32_t T = t0 << 16;
  return (unsigned)(w.x >= T) + ((w.x << 16) >= T) + (w.y >= T) + ((w.y << 16) >= T) +
         (w.z >= T) + ((w.z << 16) >= T) + (w.w >= T) + ((w.w << 16) >= T);
}

// which keys of a packed key vector are >= t0, one bit per key in key_at's order (bf16: bit
// 2h the low half of word h, 2h + 1 the high one)
template <typename T> __device__ __forceinline__ unsigned ge_mask(const uint4 &w, uint32_t t0);
template <> __device__ __forceinline__ unsigned ge_mask<float>(const uint4 &w, uint32_t t0) {
  return (unsigned)(w.x >= t0) | (unsigned)(w.y >= t0) << 1 | (unsigned)(w.z >= t0) << 2 |
         (unsigned)(w.w >= t0) << 3;
}
template <> __device__ __forceinline__ unsigned ge_mask<uint16_t>(const uint4 &w, uint32_t t0) {
  const uint32_t T = t0 << 16;
  return (unsigned)((w.x << 16) >= T) | (unsigned)(w.x >= T) << 1 |
         (unsigned)((w.y << 16) >= T) << 2 | (unsigned)(w.y >= T) << 3 |
         (unsigned)((w.z << 16) >= T) << 4 | (unsigned)(w.z >= T) << 5 |
         (unsigned)((w.w << 16) >= T) << 6 | (unsigned)(w.w >= T) << 7;
}

// four CTAs per SM for bf16 (63 registers, no local memory); fp32 at four spilled 24 B in
// the candidate pass, so three (85 registers)
// PROF: IXL_TOPK_V2_SHORT=3's instantiation (clock64 per phase of three CTAs, printed); NTH
// threads (NTS, or 512 with UV 4 for IXL_TOPK_V2_SHORT=4: two CTAs per SM)
// SB (IXL_TOPK_V2_SHC, 1 = the default): the candidates stored by each lane's bit mask of
// passing keys (__ffs per candidate, one loop per vector: about 2 trips a warp where a bf16
// vector has 5 % of candidates) instead of VEC unrolled predicated slots per vector (visit 4's
// SASS: 64 divergent branches of two STS, a reload of cap and a reconvergence each, 8 K cycles
// of the row's 24 K), and no bound per store: a thread whose slots pass cap stores nothing
// (the buffer is used only when every candidate fits, nc <= cap)
// STG (IXL_TOPK_V2_SHSTG=ns, off by default): the first wave's CTAs of SM slot j (blocks
// [j stg_lo, (j + 1) stg_lo), j < the CTAs an SM holds, stg_lo = the SMs) wait j stg_ns before
// they start, so an SM's rows load and select out of phase; the CTAs that replace them keep
// the phase. A timing change only.
// NXM (IXL_TOPK_V2_SHNEXT; PF alone the default where the host's rule takes it, since session
// 9's visit 2, the other forms off: slower on the H200, see ixl_topk_v2_dev_reload): bit 1 (PF) the
// bulk-copy engine fetches row r + stg_ns (the CTAs resident: the row the CTA after this one
// on its SM slot takes, about) into L2 when row r starts, so that row's loads find L2, not
// HBM; bit 2 (NX) persistent CTAs, CTA b taking rows b, b + G, b + 2G, ... (G = gridDim.x),
// and the next row's vectors loaded into w as soon as this row's keys are in the candidate
// buffer (after the candidate pass where the buffer gives the kk-th key, after the exact
// radix otherwise), in flight during this row's select, column order and store; with PF the
// L2 prefetch is of row r + 2G (row r + G's at the kernel's start). NXM kernels run rows
// that all start on 16 bytes (no row_start, C * sizeof(T) % 16 == 0, the tensor aligned: the
// host's rule), take stg_lo = R, and skip the partial vectors' scalar loads where a row's end
// is on a vector boundary. The same digits, buffer, finds and column order per row, so the
// same results. NX runs three CTAs an SM for bf16 too (80 registers): at four (64 registers)
// ptxas spilled 5 of the next row's 8 vectors right after their loads (80 B of STL, each
// waiting for its load: no overlap left). Bit 4 (LT, with NX): the next row's loads issued
// later, after the column order's scan (in flight during the emit only, where fewer values
// are live), at four CTAs an SM; meant with PF (the loads then find L2). Bit 8 (SP, not with
// NX): persistent CTAs at four an SM whose next row's first half (SPU = UV / 2 vectors a
// thread, 16 KB a CTA of dynamic shared memory after the candidate layout) is copied by
// cp.async into the thread's own slots right after this row's first barrier, so it is in
// flight during the whole row, no register held; with PF the L2 prefetch is of that row's
// second half. The slots are read back by the thread that copied them, after its wait.
template <typename T, int UV, bool PROF = false, int NTH = NTS, bool SB = false, bool STG = false,
          int NXM = 0>
__global__ void __launch_bounds__(NTH, NTH == NTS ? (sizeof(T) == 2 && (NXM & 6) != 2 ? 4 : 3)
                                       : NTH == 1024                      ? 1
                                                                          : 2)
    topk_v2_short_kernel(const T *__restrict__ logits, int64_t C,
                         const int32_t *__restrict__ row_start,
                         const int32_t *__restrict__ row_end, int k, int sorted,
                         int32_t *__restrict__ out, int P, int nwp, int force_fb, int mu_t,
                         int cap, Remap m, int stg_lo, int stg_ns) {
  constexpr bool PFL2 = (NXM & 1) != 0, NX = (NXM & 2) != 0, LT = NX && (NXM & 4) != 0;
  constexpr bool SP = !NX && (NXM & 8) != 0, PERS = NX || SP;
  constexpr int SPU = UV / 2; // SP: vectors a thread of the next row copied into shared memory
  static_assert(!NXM || (!PROF && !STG), "NXM: not with the profile or the stagger");
  using K = KeyOf<T>;
  using KS = typename K::KS;
  constexpr int VEC = K::VEC;
  extern __shared__ uint4 smem4[];
  __shared__ __align__(16) unsigned hist[2 * NB];
  __shared__ int res[3];
  __shared__ ShortShared<NTH> ss;
  const CandLayout cl(smem4, cap, nwp);
  uint32_t *ck = cl.ck, *cc = cl.cc, *W = cl.W, *Q = cl.Q;
  uint64_t *sbuf = cl.sbuf;
  const bool prof = PROF && prof_thread();
  long long tc[7] = {};
  unsigned long long gin = 0;
  if (prof) tc[0] = clock64(), gin = global_ns();
  pdl_wait(); // PDL (launch.cuh): before the first global access (the early loads too)
  pdl_trigger();
  if constexpr (STG) {
    constexpr unsigned SLOTS = NTH == NTS ? (sizeof(T) == 2 ? 4 : 3) : NTH == 1024 ? 1 : 2;
    const unsigned j = blockIdx.x / (unsigned)stg_lo;
    if (stg_ns > 0 && j > 0 && j < SLOTS) {
      const unsigned long long t0 = global_ns();
      do __nanosleep(256);
      while (global_ns() - t0 < (unsigned long long)stg_ns * j);
    }
  }

  int64_t r = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint4 w[UV];
  // NX: row rn's whole vectors into w and its end into e_nx (zeros past the last row)
  int64_t e_nx = 0;
  auto load_next = [&](int64_t rn) {
    const bool ok = rn < (int64_t)stg_lo;
    const T *rw = logits + (ok ? rn : 0) * C;
#pragma unroll
    for (int u = 0; u < UV; u++) {
      const int64_t g = (int64_t)(tid + u * NTH) * VEC;
      w[u] = make_uint4(0, 0, 0, 0);
      if (ok && g + VEC <= C) w[u] = __ldg(reinterpret_cast<const uint4 *>(rw + g));
    }
    e_nx = ok ? row_end[rn] : 0;
  };
  if (NX) load_next(r);
  // SP: the next row's first SPU vectors a thread, by cp.async into this thread's own slots
  // after the candidate layout (read back by the same thread only)
  uint4 *pbuf = nullptr;
  if (SP) {
    const size_t lay = (size_t)cap * 8 + (size_t)nwp * 8 + (sorted || m.on ? (size_t)P * 8 : 0);
    pbuf = smem4 + (lay + 15) / 16;
  }
  auto sp_issue = [&](int64_t rn) {
    if (rn < (int64_t)stg_lo) {
      const T *rw = logits + rn * C;
#pragma unroll
      for (int u = 0; u < SPU; u++) {
        const int64_t g = (int64_t)(tid + u * NTH) * VEC;
        if (g + VEC <= C) sm80::cp_async16(&pbuf[u * NTH + tid], rw + g, 16);
      }
    }
    sm80::cp_async_commit();
  };
  if (NX && PFL2 && tid == 0 && r + gridDim.x < (int64_t)stg_lo)
    l2_prefetch(logits + (r + gridDim.x) * C, (uint32_t)(C * (int64_t)sizeof(T)));
  for (;;) {
  do { // one row (NX: the CTA's rows in turn; break = this row is done)
  const T *row = logits + r * C;
  if (PFL2 && tid == 0) {
    const int64_t rp = r + (NX ? 2 * (int64_t)gridDim.x : SP ? gridDim.x : (int64_t)stg_ns);
    const int64_t c0 = SP ? min(C, (int64_t)SPU * NTH * VEC) : 0; // SP: the part not copied
    if (rp < (int64_t)stg_lo && c0 < C)
      l2_prefetch(logits + rp * C + c0, (uint32_t)((C - c0) * (int64_t)sizeof(T)));
  }
  // the row: vector tid + u NTH of the aligned span in w[u], every load in flight at once.
  // Rows from column 0 on a 16-byte boundary (no row_start) load every whole vector of their
  // C columns before their end is known: the row's loads overlap the bounds' load instead of
  // waiting for it (one HBM round trip less on a row's critical path); vectors past the end
  // are dropped below (NX: loaded during the previous row)
  const bool early = NXM || (!row_start && ((uintptr_t)row & 15u) == 0); // uniform in the CTA
  if (early && !NX) {
    const bool from_sp = SP && r != (int64_t)blockIdx.x; // SP: the first SPU copied already
    if (SP && from_sp) sm80::cp_async_wait<0>();
#pragma unroll
    for (int u = 0; u < UV; u++) {
      const int64_t g = (int64_t)(tid + u * NTH) * VEC;
      w[u] = make_uint4(0, 0, 0, 0);
      if (g + VEC <= C)
        w[u] = SP && from_sp && u < SPU ? pbuf[u * NTH + tid]
                                        : __ldg(reinterpret_cast<const uint4 *>(row + g));
    }
  }
  int64_t s = row_start ? row_start[r] : 0, e = NX ? e_nx : row_end[r];
  if (s < 0) s = 0;
  if (e > C) e = C;
  const int n = e > s ? (int)(e - s) : 0;
  const int kk = k < n ? k : n;
  int32_t *o = out + r * (int64_t)k;
  for (int j = kk + threadIdx.x; j < k; j += NTH) o[j] = -1;
  if (kk <= 0) {
    if (!PERS) return;
    if (NX) load_next(r + gridDim.x);
    if (SP) {
      __syncthreads(); // every thread has read its slots (the shared state's barrier comes too)
      sp_issue(r + gridDim.x);
    }
    break;
  }

  const int64_t a0 = s - (int64_t)(((uintptr_t)(row + s) & 15u) / sizeof(T)); // 0 when early
  const int nv = (int)((e - a0 + VEC - 1) / VEC); // <= NTH * UV (the host's rule)
  const int nw = (n + 31) >> 5;
  if (!early) {
#pragma unroll
    for (int u = 0; u < UV; u++) {
      const int v = tid + u * NTH;
      const int64_t g = a0 + (int64_t)v * VEC;
      w[u] = make_uint4(0, 0, 0, 0);
      if (v < nv && g >= s && g + VEC <= e)
        w[u] = __ldg(reinterpret_cast<const uint4 *>(row + g));
    }
  }
  for (int b = tid; b < 2 * NB; b += NTH) hist[b] = 0;
  for (int x = tid; x < nw; x += NTH) W[x] = 0, Q[x] = 0;
  if (tid == 0) ss.ncand = 0, ss.nsample = 0;
  // the row's partial first and last vectors (at most two), keyed by threads 0 and 1 into
  // shared memory: a partial vector in every unrolled slot was 25,000 lines of SASS and spills
  if (tid < 2 && (!NXM || (e - a0) % VEC != 0)) { // NXM: a0 = s = 0, only the last may be
    const int v = tid == 0 ? 0 : nv - 1;
    const int64_t g = a0 + (int64_t)v * VEC;
    KS kv[VEC];
#pragma unroll
    for (int j = 0; j < VEC; j++) kv[j] = (g + j >= s && g + j < e) ? K::key(row[g + j]) : (KS)0;
    ss.part[tid] = K::pack(kv);
  }
  __syncthreads(); // the histograms, bitmaps and partial vectors are ready
  if (SP) sp_issue(r + gridDim.x); // this row's slots were read before the barrier
  // order keys in place (0 outside [s, e): never a key)
#pragma unroll
  for (int u = 0; u < UV; u++) {
    const int v = tid + u * NTH;
    const int64_t g = a0 + (int64_t)v * VEC;
    if (v < nv && g >= s && g + VEC <= e) {
      w[u] = keys_vec<T>(w[u]);
    } else if (v < nv) {
      w[u] = ss.part[v == 0 ? 0 : 1];
    } else {
      w[u] = make_uint4(0, 0, 0, 0); // past the row (loaded early) or past the span
    }
  }
  unsigned *myhist = hist + (warp & 1) * NB;
  const int sh0 = K::shift(0);
  if (prof) tc[1] = clock64();

  // 1. the sample: key (v / SV) % VEC of every SV-th vector v, about mu_t n / kk keys
  const int64_t mt = min((int64_t)2 * NB, (int64_t)mu_t * n / kk + 1);
  int lsv = 0;
  while (((nv + (1 << lsv) - 1) >> lsv) > mt && (1 << lsv) < nv) lsv++;
  const int svm = (1 << lsv) - 1;
  {
    unsigned mine = 0;
#pragma unroll
    for (int u = 0; u < UV; u++) {
      const int v = tid + u * NTH;
      if ((v & svm) == 0) {
        const uint32_t key = key_at<T>(w[u], (v >> lsv) & (VEC - 1));
        if (key) atomicAdd(&myhist[key >> sh0], 1u), mine++;
      }
    }
    mine = __reduce_add_sync(0xffffffffu, mine);
    if (lane == 0 && mine) atomicAdd(&ss.nsample, mine);
  }
  __syncthreads();
  const int ms = (int)ss.nsample;
  uint32_t t0 = 1; // every key (a key is never 0)
  {
    const int j = sample_rank(kk, ms, n);
    // one digit: t0 is the lower edge of the j-th sampled key's first-digit bin (a second
    // digit's pass and find cost more than the bin's extra candidates: visit 2's profile)
    if (j <= ms) { // uniform: ms is shared
      const Found f0 = find_fast<NTH>(0, j, hist, res, ss.ws);
      t0 = (uint32_t)f0.bin << sh0;
      if (t0 == 0) t0 = 1;
    } else {
      find_fast<NTH>(0, 1, hist, res, ss.ws); // clears the histogram
    }
  }
  if (prof) tc[2] = clock64();

  // 2. keys >= t0 to the buffer: per thread its count, one shared atomic per warp for the
  // slots, then the keys (no atomics here: an ATOMS per unrolled key slot with a candidate in
  // any lane was 512 warp instructions of 1-2 lanes a CTA, 11 K cycles in visit 2)
  {
    // per vector its count (0..VEC, 4 bits each) by compares on the packed words: extracting
    // the keys here too kept all 64 bf16 keys live into the write loop (192 B of spills)
    unsigned c = 0, cpk = 0;
#pragma unroll
    for (int u = 0; u < UV; u++) {
      const unsigned cu = count_ge<T>(w[u], t0);
      c += cu, cpk |= cu << (4 * u);
    }
    unsigned incl = c;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const unsigned y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    unsigned base = 0;
    if (lane == 31 && incl) base = atomicAdd(&ss.ncand, incl);
    base = __shfl_sync(0xffffffffu, base, 31);
    if (SB) {
      if (c && base + incl <= (unsigned)cap) { // else nc > cap: the buffer goes unused
        unsigned p = base + incl - c;
#pragma unroll
        for (int u = 0; u < UV; u++) {
          unsigned msk = ge_mask<T>(w[u], t0);
          const uint32_t c0 = (uint32_t)(a0 + (int64_t)(tid + u * NTH) * VEC - s);
          while (msk) {
            const int j = __ffs(msk) - 1;
            msk &= msk - 1;
            ck[p] = key_at<T>(w[u], j), cc[p] = c0 + (uint32_t)j;
            p++;
          }
        }
      }
    } else if (c) {
      unsigned p = base + incl - c;
#pragma unroll
      for (int u = 0; u < UV; u++) {
        if (!((cpk >> (4 * u)) & 15u)) continue;
        KS kv[VEC];
        K::from(w[u], kv);
        const int c0 = (int)(a0 + (int64_t)(tid + u * NTH) * VEC - s);
#pragma unroll
        for (int j = 0; j < VEC; j++)
          if ((uint32_t)kv[j] >= t0) {
            if (p < (unsigned)cap) ck[p] = kv[j], cc[p] = (uint32_t)(c0 + j);
            p++;
          }
      }
    }
  }
  __syncthreads();
  if (prof) tc[3] = clock64();
  int nc = (int)ss.ncand;
  const int nc0 = nc;
  // NX: the row's keys are in the buffer (the condition of step 3 below): w is free
  if (NX && !LT && !force_fb && nc >= kk && nc <= cap) load_next(r + gridDim.x);
  uint32_t prefix = 0, mask = 0;
  int above = 0;
  bool exact = false; // the kk-th key, the count above it: from the buffer
  if (!force_fb && nc >= kk && nc <= cap) {
    // 3. the exact kk-th key from the buffer: one dense pass for its histogram (bf16: one
    // bin per key value from t0, the last bin every key t0 + 2047 and above; fp32: the first
    // digit), then the find(s)
    constexpr bool BF = sizeof(T) == 2;
    for (int i = tid; i < nc; i += NTH) {
      const uint32_t key = ck[i];
      atomicAdd(&myhist[BF ? min(key - t0, (uint32_t)NB - 1u) : key >> sh0], 1u);
    }
    __syncthreads();
    if (BF) {
      const Found f = find_fast<NTH>(0, kk, hist, res, ss.ws);
      // a kk-th key at t0 + 2047 or above (the candidates span more than 2047 bf16 steps):
      // the exact radix below
      if (f.bin < NB - 1) prefix = t0 + (uint32_t)f.bin, above = f.above, exact = true;
    } else {
      buffer_digits<NTH, K, true>(ck, nc, kk, hist, myhist, res, ss.ws, prefix, mask, above);
      exact = true;
    }
  }
  if (exact) {
    mark_bitmaps<NTH>(ck, cc, nc, prefix, W, Q);
  } else {
    // the exact radix over the row, read again (from L2, mostly; the registers are dead by
    // now: keeping them live through a cold path spilled the kernel): one histogram per digit;
    // every key of the row once, f(key, column from s); partial vectors from shared memory
    auto visit = [&](auto &&f) {
#pragma unroll 1
      for (int v = tid; v < nv; v += NTH) {
        const int64_t g = a0 + (int64_t)v * VEC;
        KS kv[VEC];
        if (g >= s && g + VEC <= e) K::unpack(__ldg(reinterpret_cast<const uint4 *>(row + g)), kv);
        else K::from(ss.part[v == 0 ? 0 : 1], kv);
        const int c0 = (int)(g - s);
#pragma unroll
        for (int j = 0; j < VEC; j++) f((uint32_t)kv[j], c0 + j);
      }
    };
    nc = radix_over_row<NTH, K>(visit, kk, hist, myhist, res, ss.ws, &ss.ncand, ck, cc, W, Q,
                                prefix, mask, above);
    if (NX && !LT) load_next(r + gridDim.x); // (again, where the buffer's digits missed)
  }
  __syncthreads(); // the bitmaps are complete
  if (prof) tc[4] = clock64();

  // 4. slots in column order
  column_order<NTH, K::KB>(W, Q, nw, ck, cc, nc, prefix, kk - above, kk, P, sorted, m, r, o,
                           sbuf, ss.ws64, ss.tpre, [&] {
                             if (prof) tc[5] = clock64();
                             if (LT) load_next(r + gridDim.x); // in flight during the emit
                           });
  if (PROF && prof) {
    tc[6] = clock64();
    printf("# topkshprof blk %u/%u sm %u n %d sample %d nc %d fb %d | ns %llu | cyc load %lld "
           "sample %lld cand %lld select %lld scan %lld emit %lld total %lld\n",
           blockIdx.x, gridDim.x, smid(), n, ms, nc0, (int)(force_fb || nc0 < kk || nc0 > cap),
           global_ns() - gin, tc[1] - tc[0], tc[2] - tc[1], tc[3] - tc[2], tc[4] - tc[3],
           tc[5] - tc[4], tc[6] - tc[5], tc[6] - tc[0]);
  }
  } while (0);
  if (!PERS) break;
  r += gridDim.x;
  if (r >= (int64_t)stg_lo) break;
  __syncthreads(); // every thread is done with the row's shared state
  }
}

// The development switches (the tests' and the benchmark's), read from the environment once
// and again on ixl_topk_v2_dev_reload: IXL_TOPK_V2_CS=N pins the cluster size (1-16, a power
// of two, where the chunks fit), IXL_TOPK_V2_PROFILE=1 runs the profile instantiation,
// IXL_TOPK_V2_GATHER=0 runs a cluster row's lower digits cluster-wide; IXL_TOPK_V2_NEXT (bits,
// not the default): 1 runs rows of one CTA on topk_v2_next_kernel (persistent, next row
// prefetched), 2 a cluster row's first find by atomic_find, 3 both; IXL_TOPK_V2_GRID=N caps
// the persistent grid at N CTAs (tests: several rows per CTA).
struct Dev {
  int cs, profile, flags, next, grid, stream, sunr, smu, sprof, spf, s3, shortk, shmu, spipe, shc,
      cstream, sstg, shstg, shnext;
};
Dev g_dev;
std::atomic<int> g_dev_read{0};
const Dev &dev_switches() {
  if (!g_dev_read.load(std::memory_order_acquire)) ixl_topk_v2_dev_reload();
  return g_dev;
}

// Dynamic shared memory of a launch: the keys of L columns (runs of RV vectors, S = RV | 1
// apart), then the P staged winners (sorted or fused) or CTA 0's gathered keys, whichever is
// larger.
struct Geometry {
  int RV, P;
  size_t smem;
};
template <typename T> Geometry geometry(int64_t L, int k, bool stage, bool cl) {
  constexpr int VEC = KeyOf<T>::VEC;
  Geometry g;
  g.RV = (int)((L / VEC + NT - 1) / NT);
  g.P = 1;
  while (g.P < k) g.P <<= 1;
  const size_t extra = stage ? (size_t)g.P * 8 : 0, gather = cl ? (size_t)GCAP * 4 : 0;
  g.smem = (size_t)NT * (size_t)(g.RV | 1) * 16 + (extra > gather ? extra : gather);
  return g;
}

struct Args {
  const ixl_tensor *logits, *row_start, *row_end;
  int k, sorted;
  ixl_tensor *out;
  const ixl_tensor *sparse_ids, *row_ks; // the fused remap's (sparse_ids NULL: none)
  int sbk;
};

Remap remap_of(const Args &a) {
  Remap m = {nullptr, nullptr, 0, 1, 0};
  if (a.sparse_ids) {
    m.nsb = a.sparse_ids->shape[1];
    m.ids = m.nsb ? (const int32_t *)a.sparse_ids->data : nullptr;
    m.ks = a.row_ks ? (const int32_t *)a.row_ks->data : nullptr;
    m.sbk = a.sbk;
    m.on = 1;
  }
  return m;
}

template <typename T, bool CL>
ixl_status launch(ixl_ctx *ctx, const Args &a, int cs, int64_t L, const Dev &dv) {
  constexpr int VEC = KeyOf<T>::VEC;
  const int64_t R = a.logits->shape[0], C = a.logits->shape[1];
  const Geometry gm = geometry<T>(L, a.k, a.sorted || a.sparse_ids, CL);
  auto kern = dv.profile                ? topk_v2_kernel<T, CL, true>
              : CL && (dv.next & NEXT_AF) ? topk_v2_kernel<T, CL, false, CL>
                                          : topk_v2_kernel<T, CL, false>;
  ixl_status st = ixl_cuda_status(
      ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gm.smem),
      "topk v2: cudaFuncSetAttribute");
  if (st) return st;
  (void)VEC;
  if (CL && cs > 8 &&
      (st = ixl_cuda_status(
           ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
           "topk v2: cudaFuncSetAttribute (cluster size)")))
    return st;
  return launch_pdl(ctx, "topk v2", kern, dim3((unsigned)(R * cs)), dim3(NT), gm.smem,
                    CL ? (unsigned)cs : 1u, (const T *)a.logits->data, C,
                    a.row_start ? (const int32_t *)a.row_start->data : (const int32_t *)nullptr,
                    (const int32_t *)a.row_end->data, a.k, a.sorted, (int32_t *)a.out->data,
                    gm.RV, gm.P, dv.flags, remap_of(a));
}

// Rows of one CTA on the persistent kernel (IXL_TOPK_V2_NEXT=1): as many CTAs as are resident
// (the occupancy for this shared memory, asked once per device and size), at most R and at
// most dv.grid when set. The extra 32 KB of prefetch buffer may not fit beside the longest
// chunks and the largest k: then (or if no CTA would be resident) the default kernel runs.
template <typename T>
ixl_status launch_next(ixl_ctx *ctx, const Args &a, int64_t L, const Dev &dv) {
  const int64_t R = a.logits->shape[0], C = a.logits->shape[1];
  const Geometry gm = geometry<T>(L, a.k, a.sorted || a.sparse_ids, false);
  const size_t smem = gm.smem + (size_t)PRE * NT * 16; // and the prefetch buffer
  auto kern = topk_v2_next_kernel<T>;
  static int last_dev = -1, last_per_sm;
  static size_t last_smem;
  const int dev = ixl_ctx_device(ctx);
  if (dev != last_dev || smem != last_smem) {
    int per_sm = 0;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, NT, smem) != cudaSuccess) {
      cudaGetLastError(); // too much shared memory: not a sticky error
      per_sm = 0;
    }
    last_dev = dev, last_smem = smem, last_per_sm = per_sm;
  }
  if (last_per_sm < 1) return launch<T, false>(ctx, a, 1, L, dv);
  ixl_status st = ixl_cuda_status(
      ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "topk v2 next: cudaFuncSetAttribute");
  if (st) return st;
  int64_t grid = (int64_t)last_per_sm * sm_count(ctx);
  if (dv.grid && grid > dv.grid) grid = dv.grid;
  if (grid > R) grid = R;
  return launch_pdl(ctx, "topk v2 next", kern, dim3((unsigned)grid), dim3(NT), smem, 1u,
                    (const T *)a.logits->data, R, C,
                    a.row_start ? (const int32_t *)a.row_start->data : (const int32_t *)nullptr,
                    (const int32_t *)a.row_end->data, a.k, a.sorted, (int32_t *)a.out->data,
                    gm.RV, gm.P, remap_of(a));
}

// The streaming kernel's dynamic shared memory for rows of C columns (0: it does not fit, or
// k is past the buffer's half): the buffer, two bitmaps, the staged winners.
size_t stream_smem(int64_t C, int k, bool stage, int cap = SCAP) {
  if (k > cap / 2) return 0;
  int P = 1;
  while (P < k) P <<= 1;
  const size_t nwp = (size_t)((C + 31) / 32);
  const size_t smem = (size_t)cap * 8 + nwp * 8 + (stage ? (size_t)P * 8 : 0);
  return smem <= (size_t)180 * 1024 ? smem : 0;
}

// One CTA per row on topk_v2_stream_kernel (IXL_TOPK_V2_STREAM; UNR = IXL_TOPK_V2_SUNR).
// IXL_TOPK_V2_S3=1 (off by default, not yet run on the GPU): three CTAs per SM where a
// buffer of 2048 entries (k <= 1024) and the bitmaps leave each under a third of the SM's
// shared memory (rows up to about 190K fp32 columns), at 40 registers, UNR 4.
// ccs > 1 (IXL_TOPK_V2_CSTREAM): each row over a cluster of ccs CTAs (the CLS instantiation).
template <typename T>
ixl_status launch_stream(ixl_ctx *ctx, const Args &a, size_t smem, const Dev &dv, int ccs = 1) {
  const int64_t R = a.logits->shape[0], C = a.logits->shape[1];
  int P = 1;
  while (P < a.k) P <<= 1;
  const int nwp = (int)((C + 31) / 32);
  int cap = SCAP;
  auto kern = dv.sprof      ? topk_v2_stream_kernel<T, 4, true>
              : dv.sunr == 8 ? topk_v2_stream_kernel<T, 8>
              : dv.spipe == 3 ? topk_v2_stream_kernel<T, 4, false, 2, true, true, true>
              : dv.spipe == 2 ? topk_v2_stream_kernel<T, 4, false, 2, true, true>
              : dv.spipe     ? topk_v2_stream_kernel<T, 4, false, 2, true>
                             : topk_v2_stream_kernel<T, 4>;
  // (IXL_TOPK_V2_SPROF: the profile of the cluster form, CTA 0 of a cluster printing)
  if (ccs > 1)
    kern = dv.sprof ? topk_v2_stream_kernel<T, 4, true, 2, true, true, false, true>
                    : topk_v2_stream_kernel<T, 4, false, 2, true, true, false, true>;
  // IXL_TOPK_V2_SSTG: the default kernel (SPIPE 2, UNR 4) with the staggered first wave, where
  // the rows fill more than one wave of two CTAs per SM
  const int stg = dv.sstg > 0 && ccs == 1 && !dv.sprof && dv.sunr == 4 && dv.spipe == 2 &&
                          R > 2 * (int64_t)sm_count(ctx)
                      ? dv.sstg
                      : 0;
  if (stg) kern = topk_v2_stream_kernel<T, 4, false, 2, true, true, false, false, true>;
  if (dv.s3 && !dv.sprof && ccs == 1 && !stg) {
    const size_t s3 = stream_smem(C, a.k, a.sorted || a.sparse_ids, 2048);
    if (s3 && s3 <= (size_t)54 * 1024) {
      kern = topk_v2_stream_kernel<T, 4, false, 3>;
      smem = s3, cap = 2048;
    }
  }
  ixl_status st = ixl_cuda_status(
      ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "topk v2 stream: cudaFuncSetAttribute");
  if (st) return st;
  if (ccs > 8 &&
      (st = ixl_cuda_status(
           ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
           "topk v2 stream: cudaFuncSetAttribute (cluster size)")))
    return st;
  return launch_pdl(ctx, "topk v2 stream", kern, dim3((unsigned)(R * ccs)), dim3(NT), smem,
                    (unsigned)ccs,
                    (const T *)a.logits->data, C,
                    a.row_start ? (const int32_t *)a.row_start->data : (const int32_t *)nullptr,
                    (const int32_t *)a.row_end->data, a.k, a.sorted, (int32_t *)a.out->data, P,
                    nwp, dv.stream == 3 ? 1 : 0, dv.smu, dv.spf * 64, cap, remap_of(a),
                    sm_count(ctx), stg);
}

// Rows of one CTA on topk_v2_short_kernel (IXL_TOPK_V2_SHORT: 1 on, 2 the same on its exact
// radix over the row, for tests, 3 its profile instantiation (256 threads), 4 always on 512
// threads with 4 vectors each (two CTAs per SM), 5 always on 256, 6 always on 1024 threads with
// 2 vectors each, bit-mask candidates; off by default): the host's rule is that every
// row's aligned span fits NTS * SUV vectors and k <= SHCAP / 2; the buffer holds SHCAP
// candidates for k <= SHCAP / 4, twice that above.
template <typename T>
ixl_status launch_short(ixl_ctx *ctx, const Args &a, const Dev &dv) {
  const int64_t R = a.logits->shape[0], C = a.logits->shape[1];
  int P = 1;
  while (P < a.k) P <<= 1;
  const int nwp = (int)((C + 31) / 32);
  const int cap = a.k <= SHCAP / 4 ? SHCAP : 2 * SHCAP;
  const bool stage = a.sorted || a.sparse_ids;
  const size_t smem0 = (size_t)cap * 8 + (size_t)nwp * 8 + (stage ? (size_t)P * 8 : 0);
  // IXL_TOPK_V2_SHNEXT (unset: PF): the 256-thread SHC kernel's next-row forms (NXM), for
  // rows that all start on 16 bytes, more than one wave of them (or any number: bit 4)
  const bool aligned = !a.row_start && (C * (int64_t)sizeof(T)) % 16 == 0 &&
                       ((uintptr_t)a.logits->data & 15u) == 0;
  const int slots = sizeof(T) == 2 ? 4 : 3;
  const bool nx_ok = (dv.shortk == 1 || dv.shortk == 2) && dv.shc && aligned &&
                     (R > (int64_t)slots * sm_count(ctx) || (dv.shnext & 4));
  int nxm = 0;
  if (nx_ok && (dv.shnext & 16)) nxm = 8 | (dv.shnext & 1);
  else if (nx_ok && (dv.shnext & 3))
    nxm = (dv.shnext & 3) | ((dv.shnext & 8) && (dv.shnext & 2) ? 4 : 0);
  // SP: the next row's first half (NTS x SUV / 2 vectors) after the candidate layout
  const size_t smem = nxm & 8 ? (smem0 + 15) / 16 * 16 + (size_t)NTS * (SUV / 2) * 16 : smem0;
  // 512 threads (two CTAs per SM) while every row has an SM of its own (a row's latency is
  // the time), 256 (four per SM: rows hide each other's latency) past that
  const bool wide =
      !nxm && (dv.shortk == 4 || ((dv.shortk == 1 || dv.shortk == 2) && R <= sm_count(ctx)));
  const int nth = dv.shortk == 6 ? 1024 : wide ? 512 : NTS;
  auto kern = dv.shortk == 6 ? topk_v2_short_kernel<T, SUV * NTS / 1024, false, 1024, true>
              : dv.shortk == 3 ? (dv.shc ? topk_v2_short_kernel<T, SUV, true, NTS, true>
                                         : topk_v2_short_kernel<T, SUV, true>)
              : wide ? (dv.shc ? topk_v2_short_kernel<T, SUV * NTS / 512, false, 512, true>
                               : topk_v2_short_kernel<T, SUV * NTS / 512, false, 512>)
              : dv.shc ? topk_v2_short_kernel<T, SUV, false, NTS, true>
                       : topk_v2_short_kernel<T, SUV>;
  // IXL_TOPK_V2_SHSTG: the default 256-thread kernel (SHC) with the staggered first wave,
  // where the rows fill more than one wave (four CTAs an SM for bf16, three for fp32)
  const int stg = !nxm && dv.shstg > 0 && dv.shortk == 1 && !wide && dv.shc &&
                          R > (int64_t)slots * sm_count(ctx)
                      ? dv.shstg
                      : 0;
  if (stg) kern = topk_v2_short_kernel<T, SUV, false, NTS, true, true>;
  if (nxm)
    kern = nxm == 1   ? topk_v2_short_kernel<T, SUV, false, NTS, true, false, 1>
           : nxm == 2 ? topk_v2_short_kernel<T, SUV, false, NTS, true, false, 2>
           : nxm == 3 ? topk_v2_short_kernel<T, SUV, false, NTS, true, false, 3>
           : nxm == 6 ? topk_v2_short_kernel<T, SUV, false, NTS, true, false, 6>
           : nxm == 7 ? topk_v2_short_kernel<T, SUV, false, NTS, true, false, 7>
           : nxm == 8 ? topk_v2_short_kernel<T, SUV, false, NTS, true, false, 8>
                      : topk_v2_short_kernel<T, SUV, false, NTS, true, false, 9>;
  ixl_status st = ixl_cuda_status(
      ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "topk v2 short: cudaFuncSetAttribute");
  if (st) return st;
  // SP at four CTAs an SM (bf16, k <= 512 unsorted: 56.5 KB a CTA): the largest carveout
  if ((nxm & 8) && cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        (int)cudaSharedmemCarveoutMaxShared) != cudaSuccess)
    cudaGetLastError(); // a hint only
  int64_t grid = R;
  int aux0 = sm_count(ctx), aux1 = stg; // stg_lo, stg_ns; NXM kernels: R, the rows ahead
  if (nxm) {
    // the CTAs resident at this shared memory (asked once per dtype, mode, device and size)
    static int last_dev[2][10] = {{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
                                  {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1}},
               last_per_sm[2][10];
    static size_t last_smem[2][10];
    const int dt = sizeof(T) == 2, dev = ixl_ctx_device(ctx);
    if (dev != last_dev[dt][nxm] || smem != last_smem[dt][nxm]) {
      int per_sm = 0;
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, NTS, smem) != cudaSuccess)
        cudaGetLastError(), per_sm = 0;
      last_dev[dt][nxm] = dev, last_smem[dt][nxm] = smem, last_per_sm[dt][nxm] = per_sm;
      const char *pr = getenv("IXL_TOPK_V2_SHPRINT"); // a development print, once a size
      if (pr && pr[0] == '1')
        fprintf(stderr, "# topk v2 short nxm %d %s: %d CTAs an SM at %zu B dynamic shared\n",
                nxm, sizeof(T) == 2 ? "bf16" : "fp32", per_sm, smem);
    }
    const int64_t res = (int64_t)(last_per_sm[dt][nxm] > 0 ? last_per_sm[dt][nxm] : slots) *
                        sm_count(ctx);
    if (nxm & 10) { // persistent (NX, SP)
      grid = res;
      if (dv.grid && grid > dv.grid) grid = dv.grid;
      if (grid > R) grid = R;
    }
    aux0 = (int)R, aux1 = (int)res;
  }
  return launch_pdl(ctx, "topk v2 short", kern, dim3((unsigned)grid), dim3((unsigned)nth), smem,
                    1u, (const T *)a.logits->data, C,
                    a.row_start ? (const int32_t *)a.row_start->data : (const int32_t *)nullptr,
                    (const int32_t *)a.row_end->data, a.k, a.sorted, (int32_t *)a.out->data, P,
                    nwp, dv.shortk == 2 ? 1 : 0, dv.shmu, cap, remap_of(a), aux0, aux1);
}

// The largest cluster the device runs for kernel `kern` and this shared memory, at most
// `want` (0: none).
template <typename K> int cluster_fits_kern(K kern, int want, size_t smem) {
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
// The same for the resident kernel (STREAM false) or the streaming kernel's CLS instantiation
// (IXL_TOPK_V2_CSTREAM); the last answer per dtype and kernel is kept (the query costs more
// than a launch).
template <typename T, bool STREAM = false>
int cluster_fits(int dev, int want, size_t smem) {
  static int last_want, last_fit, last_dev = -1;
  static size_t last_smem;
  if (dev == last_dev && want == last_want && smem == last_smem) return last_fit;
  const int fit =
      STREAM ? cluster_fits_kern(topk_v2_stream_kernel<T, 4, false, 2, true, true, false, true>,
                                 want, smem)
             : cluster_fits_kern(topk_v2_kernel<T, true, false>, want, smem);
  last_dev = dev, last_want = want, last_smem = smem, last_fit = fit;
  return fit;
}

// The rows v2 does not take: v1's top-k, then K7's kernel when fused.
ixl_status run_v1(ixl_ctx *ctx, const Args &a) {
  ixl_status st = ixl_cuda_topk(ctx, a.logits, a.row_start, a.row_end, a.k, a.sorted, a.out);
  if (st || !a.sparse_ids) return st;
  return ixl_cuda_remap(ctx, a.out, a.sparse_ids, a.row_ks, a.sbk, a.out);
}

template <typename T>
ixl_status dispatch(ixl_ctx *ctx, const Args &a) {
  constexpr int VEC = KeyOf<T>::VEC;
  const Dev &dv = dev_switches();
  const int64_t C = a.logits->shape[1];
  // columns a row's aligned chunks may have to cover: C when every row starts on 16 bytes (no
  // row_start, C * sizeof(T) a multiple of 16, the tensor aligned), else up to VEC - 1 more
  // (16384 bf16 columns were 20480 keys per CTA, not 16384). The cluster size is chosen from
  // the unaligned span either way, as measured on 2026-12-01.
  const bool aligned = !a.row_start && (C * (int64_t)sizeof(T)) % 16 == 0 &&
                       ((uintptr_t)a.logits->data & 15u) == 0;
  const int64_t span_cs = C + VEC - 1, span = aligned ? C : span_cs;
  // chunks: the fewest that fit LCAP. Measured on the H200 (2026-12-01, BENCHMARKS.md): more
  // CTAs per row never paid (64 x 16384 bf16: 14.7 us at 1, 27.9 at 4; 1 x 131072 fp32: the
  // same at 4 and 16), so idle SMs are not a reason to split a row
  int cs = 1;
  while (cs <= CSMAX && (span_cs + cs - 1) / cs > LCAP) cs <<= 1;
  if (dv.cs && (span + dv.cs - 1) / dv.cs <= LCAP) cs = dv.cs;
  // many long rows (IXL_TOPK_V2_STREAM=1): rows that need a cluster, more chunks than one wave
  // of resident CTAs holds (or rows too long for a cluster), stream; 2 streams every shape
  // that fits, 3 the same with the exact streaming radix on every row (tests)
  if (dv.stream && !dv.cs && !dv.profile) {
    const size_t ss = stream_smem(C, a.k, a.sorted || a.sparse_ids);
    const int64_t R = a.logits->shape[0];
    // rows that need clusters, split over a cluster of up to IXL_TOPK_V2_CSTREAM CTAs each
    // while the grid stays one wave at two CTAs per SM (64 rows: 4; 1 row: all of it); unset
    // (-1): clusters of 2 where the rows stream anyway (more clusters than one wave holds, as
    // 64 x 131072 fp32 at cs 8) and 2 CTAs a row still fit one wave (R <= SMs)
    const bool streams = cs > 1 && cs <= CSMAX && R * cs > 2 * sm_count(ctx);
    const int want = dv.cstream >= 0 ? dv.cstream : streams && dv.stream == 1 ? 2 : 0;
    if (ss && want > 1 && cs > 1 && ctx->variant_sm >= 90) {
      int ccs = want;
      while (ccs > 1 && R * ccs > 2 * sm_count(ctx)) ccs >>= 1;
      if (ccs > 1) ccs = cluster_fits<T, true>(ixl_ctx_device(ctx), ccs, ss);
      if (ccs > 1) return launch_stream<T>(ctx, a, ss, dv, ccs);
    }
    if (ss && (dv.stream >= 2 || (cs > 1 && (cs > CSMAX || R * cs > 2 * sm_count(ctx)))))
      return launch_stream<T>(ctx, a, ss, dv);
  }
  // rows of one CTA whose aligned span fits the short kernel's registers (IXL_TOPK_V2_SHORT,
  // off by default)
  if (dv.shortk && !dv.cs && !dv.profile && cs == 1 && a.k <= SHCAP / 2) {
    const int64_t maxnv = (span + VEC - 1) / VEC; // a row's vectors from its aligned start
    if (maxnv <= (int64_t)NTS * SUV) return launch_short<T>(ctx, a, dv);
  }
  // ctx->variant_sm: the device's sm, asked by the variant pick that chose v2
  if (cs > CSMAX || (cs > 1 && ctx->variant_sm < 90)) return run_v1(ctx, a);
  auto chunk = [&](int c) {
    const int64_t L = (span + c - 1) / c;
    return (L + VEC * NT - 1) / (VEC * NT) * (VEC * NT); // whole runs
  };
  // few long rows: more CTAs per row while every CTA still has an SM of its own (1 x 131072
  // fp32 on the H200, 2026-12-01: 22.2 us at 16 CTAs, 27.3 at 8)
  if (cs > 1 && !dv.cs)
    while (cs < CSMAX && a.logits->shape[0] * cs * 2 <= sm_count(ctx)) cs <<= 1;
  int64_t L = chunk(cs);
  if (cs > 1) {
    const size_t smem = geometry<T>(L, a.k, a.sorted || a.sparse_ids, true).smem;
    const int fit = cluster_fits<T>(ixl_ctx_device(ctx), cs, smem);
    if (fit < cs) { // a smaller cluster means longer chunks: only while they fit
      if (fit < 2 || (span + fit - 1) / fit > LCAP) return run_v1(ctx, a);
      cs = fit;
      L = chunk(cs);
    }
    return launch<T, true>(ctx, a, cs, L, dv);
  }
  if ((dv.next & NEXT_ROWS) && !dv.profile) return launch_next<T>(ctx, a, L, dv);
  return launch<T, false>(ctx, a, 1, L, dv);
}

ixl_status topk_v2(ixl_ctx *ctx, const Args &a) {
  const int64_t R = a.logits->shape[0];
  if (R == 0) return IXL_OK;
  if (R * CSMAX > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "topk: logits: shape[0] = %lld: must be <= %d rows on the GPU",
                         (long long)R, INT32_MAX / CSMAX);
  if (a.logits->dtype == IXL_BF16) return dispatch<uint16_t>(ctx, a);
  return dispatch<float>(ctx, a);
}

} // namespace

extern "C" void ixl_topk_v2_dev_reload(void) {
  auto num = [](const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
  };
  Dev d;
  d.cs = num("IXL_TOPK_V2_CS", 0);
  if (d.cs < 1 || d.cs > CSMAX || (d.cs & (d.cs - 1)) != 0) d.cs = 0;
  d.profile = num("IXL_TOPK_V2_PROFILE", 0) == 1;
  d.flags = num("IXL_TOPK_V2_GATHER", 1) ? F_GATHER : 0;
  d.next = num("IXL_TOPK_V2_NEXT", 0) & (NEXT_ROWS | NEXT_AF);
  d.grid = num("IXL_TOPK_V2_GRID", 0);
  if (d.grid < 0) d.grid = 0;
  d.stream = num("IXL_TOPK_V2_STREAM", 1);
  if (d.stream < 0 || d.stream > 3) d.stream = 0;
  d.sunr = num("IXL_TOPK_V2_SUNR", 4) == 8 ? 8 : 4;
  // The streaming kernel's defaults since 2026-12-02 (H200, helper topk's visit 3, one binary,
  // batch us): the sample's mu 16, the L2 prefetch 64 KB ahead, the loads a round ahead
  // (SMU=16 SPF=64 SPIPE=1) against the earlier 64 / 0 / 0: the source layer's top-k over 4096
  // causal rows x 131072 fp32 k=512 841.8 -> 766.6, 64 x 131072 k=512 43.2 -> 40.9; every
  // select-v2 top-k test of test_cuda_ops bitwise with them (topk_matches, fallback, v2_paths,
  // grid, stream, short), memcheck 0 errors and racecheck 0 hazards on the stream test (small).
  // IXL_TOPK_V2_SMU=64 IXL_TOPK_V2_SPF=0 IXL_TOPK_V2_SPIPE=0 give the earlier kernel.
  d.smu = num("IXL_TOPK_V2_SMU", 16);
  if (d.smu < 4 || d.smu > 1024) d.smu = 16;
  d.sprof = num("IXL_TOPK_V2_SPROF", 0) == 1;
  d.spf = num("IXL_TOPK_V2_SPF", 64); // KB ahead (64 vectors of 16 B per KB); 0 off
  if (d.spf < 0 || d.spf > 1024) d.spf = 64;
  d.s3 = num("IXL_TOPK_V2_S3", 0) == 1;
  // 2: also no histogram atomics in the stream, 3: and warp-aggregated buffer slots (off)
  // SPIPE 2 and SHORT 1 are the defaults since session 6's last visits (visit 4, switches set:
  // the stream and short tests bitwise, 4096x16384 bf16 k512 237.7 -> 143.2 us, 64x16384 12.7
  // -> 10.9, source 4096 causal x 131072 772.3 -> 755.8, 64x131072 k2048 48.9 -> 45.3; visit 5:
  // the whole GPU suite with them unset, memcheck and racecheck small). SPIPE=1 SHORT=0 give
  // the kernels before.
  d.spipe = num("IXL_TOPK_V2_SPIPE", 2);
  if (d.spipe < 0 || d.spipe > 3) d.spipe = 2;
  d.shortk = num("IXL_TOPK_V2_SHORT", 1);
  if (d.shortk < 0 || d.shortk > 6) d.shortk = 1;
  // the short kernel's candidates by bit masks (1, the default since session 7's visit 1 on
  // the H200: every select-v2 top-k test bitwise with it, memcheck 0 errors and racecheck 0
  // hazards small (PDL on), 4096x16384 bf16 k512 143.8 -> 127.8 us, 64x16384 11.1 -> 10.4);
  // 0 = the unrolled predicated slots
  d.shc = num("IXL_TOPK_V2_SHC", 1) != 0;
  // rows that need clusters on the streaming kernel split over a cluster of up to N CTAs (2,
  // 4, 8, 16, any such rows; 0 off). Unset (-1, any other value too): 2 where the rows stream
  // anyway and two CTAs a row fit one wave, the default since session 8's visit 1 (H200,
  // snapshot bb3ea3a, CSTREAM=2 set: topk_matches, v2_stream and v2_cstream bitwise at full
  // size with every cluster-stream case at size 2 (IXL_TEST_CSTREAM=2), racecheck small 0
  // hazards (PDL on); session 7 visit 2: memcheck 0 errors; batch us 64 x 131072 fp32 k2048
  // 46.4 -> 39.3, source 64 x 131072 k512 39.4 -> 33.8, PDL on 45.1 -> 38.1 and 38.5 -> 32.8;
  // 1 x 131072 slower at size 2 (19.0 -> 35.9), so rows that fit the resident clusters keep them)
  d.cstream = num("IXL_TOPK_V2_CSTREAM", -1);
  if (d.cstream != 0 && d.cstream != 2 && d.cstream != 4 && d.cstream != 8 && d.cstream != 16)
    d.cstream = -1;
  // the streaming kernel's staggered first wave (ns; 0 off); 12000 the default since session
  // 8's visit 3 (H200: the stream and cstream tests and topk_v2_staggered (600 x 131072 rows
  // at 18 us) bitwise with it in visit 2, racecheck 0 hazards and memcheck 0 errors on the
  // small staggered case in visit 3; batch us, source 4096 causal x 131072 fp32 k512 745.6 ->
  // 735.5 (visit 2) and 753.0 -> 738.9 (visit 3); no other shape takes it)
  d.sstg = num("IXL_TOPK_V2_SSTG", 12000);
  if (d.sstg < 0 || d.sstg > 1000000) d.sstg = 12000;
  // the short kernel's staggered first wave (ns a slot; 0, the default: off)
  d.shstg = num("IXL_TOPK_V2_SHSTG", 0);
  if (d.shstg < 0 || d.shstg > 1000000) d.shstg = 0;
  // the short kernel's next rows (bits): 1 the L2 prefetch a wave ahead, 2 persistent CTAs
  // with the next row's loads issued after the candidate pass, 3 both; 4 added: at any row
  // count (tests; the rule: more rows than one wave of the 256-thread kernel holds); 8 added
  // to 2 or 3: the next row's loads after the column order's scan, four CTAs an SM (LT); 16
  // (17 with the L2 prefetch): the next row's first half by cp.async into shared memory (SP).
  // Unset = 1 since session 9's visit 2 (H200, switches set: topk_v2_shnext bitwise at full
  // size with every form, racecheck 0 hazards and memcheck 0 errors small, the whole suite
  // passed; batch / single us 4096 x 16384 bf16 k512 126.2 / 132.2 -> 122.5 / 128.4; the
  // persistent forms were slower: NX 155.9, NX + PF 156.1, LT 157.8, SP 152.1, SP + PF 154.1;
  // 64 x 16384 is not taken by the rule); 0 = off (bench v2:shnx0)
  d.shnext = num("IXL_TOPK_V2_SHNEXT", 1);
  if (d.shnext < 0 || d.shnext > 31) d.shnext = 1;
  d.shmu = num("IXL_TOPK_V2_SHMU", 64);
  if (d.shmu < 4 || d.shmu > 1024) d.shmu = 64;
  g_dev = d;
  g_dev_read.store(1, std::memory_order_release);
}

extern "C" ixl_status ixl_cuda_topk_v2(ixl_ctx *ctx, const ixl_tensor *logits,
                                       const ixl_tensor *row_start, const ixl_tensor *row_end,
                                       int k, int sorted, ixl_tensor *out) {
  const Args a = {logits, row_start, row_end, k, sorted, out, nullptr, nullptr, 1};
  return topk_v2(ctx, a);
}

extern "C" ixl_status ixl_cuda_topk_v2_remap(ixl_ctx *ctx, const ixl_tensor *logits,
                                             const ixl_tensor *row_start,
                                             const ixl_tensor *row_end, int k, int sorted,
                                             const ixl_tensor *sparse_ids,
                                             const ixl_tensor *row_ks, int sparse_block_kv,
                                             ixl_tensor *out) {
  const Args a = {logits, row_start, row_end, k, sorted, out, sparse_ids, row_ks,
                  sparse_block_kv};
  return topk_v2(ctx, a);
}
