// candidates.cu - K3 candidate selection (ixl_cuda_candidate_select) and the comparison path's
// candidate mask (ixl_cuda_mask_candidates) on the GPU; the same results as
// kernels/select/candidates.c.
//
// K3, keys in shared memory (rows of fewer than 65536 blocks, the common case): one 1024-thread
// CTA per row streams the row's logits once (coalesced 16-byte loads, 8 in flight per thread),
// reduces each block to its score and keeps the order key of every block score in shared
// memory, with the histogram of the keys' top 11 bits built on the way. Two more digit passes
// (11 and 10 bits) over the shared keys give the T-th largest key t exactly; one ordered
// compaction (counts of keys > t and == t scanned over the CTA in index order) collects the
// winners, the ties at t by smaller block id, and a bitonic sort of those kk entries orders
// them (score descending, block id ascending) as the CPU does. No sampling, no sort of the row.
// Longer rows (and IXL_CANDIDATES_V1=1, a test-only switch that keeps the previous kernel
// callable for comparison) use the per-row radix select of cuda/radix_select.cuh with the block
// scores as keys, recomputed from the logits at every pass.
//
// IXL_K3_NEXT (read once per process) picks an instantiation, a mode of six bits: 1 = no
// histogram atomics in the load (the top 11 bits come from a bit-by-bit count over the shared
// keys), 2 = the sort of the winners in registers (shuffles below a warp's chunk, shared
// memory only for the larger strides), 4 = the load's histogram atomics aggregated per warp
// (__match_any_sync: one atomic per distinct bin of a warp's keys), 8 = the winners sorted by
// CUB's stable block radix sort where they fill its items exactly (k3_cub_sort; mode 2's
// register sort otherwise), 16 = a staggered first wave (rows past two waves of 512-thread
// CTAs: the CTAs [SMs, 2 SMs) wait IXL_K3_STAGGER_NS, default 19000, before they start, so an
// SM's two CTAs load and select out of phase instead of both loading at the copy ceiling and
// then both selecting while nothing loads; the same work in the same order after the wait),
// and with IXL_K3_PF=D (1-4; 0, the default, none) thread 0 prefetches the vector load's
// rounds D ahead into L2 (cp.async.bulk.prefetch.L2, any row count: a hint, never a result);
// 32 (with 8) = CUB's sort over an order code of fewer bits (k3_cub_sort's kNarrow: about 24
// bits of a prefill row's winners, 6 passes instead of 8; the same order, so the same output).
// IXL_K3_NEXT=1 is mode 3, 2 is mode 2, 6 is mode 6, 0 is mode 0 (the kernel before the
// register sort), 8 is mode 10, 16 is mode 26; unset, or any other value: mode 58 with the
// stagger at 19 us and no prefetch, the default since session 8's visit 2 (H200, batch us,
// one process a mode, the default first): prefill 4096x131072 cbs 8 T 2048 mode 10 832.1,
// mode 26 unstaggered 798.2, staggered 12 / 19 / 26 us 787.3 / 786.6 / 790.4, mode 58
// unstaggered 777.2, staggered 19 us **764.4**, mode 26 19 us + PF 2 761.1, PF 2 alone 804.1;
// decode 64x131072 cbs 8 41.96 -> 41.62 (PF 2: 45.1, so no prefetch), cbs 16 30.24 -> 30.24,
// cbs 64 23.16 -> 22.77, 1x131072 32.43 -> 30.81, 64x4096 12.30 -> 12.28; test_cuda_index 9/9
// under mode 58 (PF 2), test_cuda_ops' K3 tests 5/5 under mode 26 (PF 2), racecheck 0 hazards
// and memcheck 0 errors small (mode 58, PF 2). The profile (prefill row 2048, thousands of
// cycles): load 52-55 -> 46-48 staggered (a CTA's load is bound by its own loads in flight,
// not by its SM neighbour's: mode 3 without the load's atomics loads in 58 too), sort 21.6 ->
// 17-19 over fewer bits, the compaction 13 -> 15 (the max reduction).
// Mode 10 was the default
// since session 7's second H200 visit (/work/.device/5, batch medians, inputs rotated; mode 2
// / 10 with CUB at half-filled items too): prefill 4096x131072 cbs 8 T 2048 989 / 838 us
// (the prefill row's sort 37.5 -> 20.5 thousand cycles), decode 64x131072 cbs 8 T 2048 43.0 /
// 40.7, 1x131072 36.0 / 33.6, cbs 16 T 1024 30.6 / 34.7 (the half-filled case, hence the rule
// above: k3_sort there), cbs 64 T 256 24.3 / 24.4, 64x4096 T 512 13.5 / 13.4;
// test_cuda_index 9/9 and test_cuda_ops' K3 tests 3/3 under mode 10, racecheck clean. Before
// (session 6, /work/.device/2, mode 0 / 2 / 6): decode 64x131072 cbs 8 47.4 / 43.3 / 41.8 us,
// prefill 995 / 991 / 1102; mode 6's aggregated atomics win on decode but lose 11 % on
// prefill.
//
// PDL (cuda/launch.cuh, IXL_PDL): every kernel here opens with pdl_wait() (the logits, lengths
// and candidates are previous kernels' outputs; the outputs may still be read by one), then
// pdl_trigger(), so a dependent PDL launch (the source top-k, K4) may start its CTAs while this
// grid runs; it waits for this grid's end before it reads anything.
//
// Block scores follow the CPU definition exactly: max in fp32 with NaN propagating (the order
// key of a max is the max of the keys, NaN on top, -0 equal to +0); sum and mean accumulated in
// double in increasing position order, then rounded to fp32; logsumexp as m + log(sum exp(x -
// m)) in double. CUDA's double exp/log may differ from glibc's by an ulp, which can change the
// order of two blocks only when their scores are within about 1e-7 relative (a near-tie).
#include <cooperative_groups.h>

#include <cub/block/block_radix_sort.cuh>

#include "cuda/common.cuh"

namespace {

using namespace ixl;
namespace cg = cooperative_groups;
constexpr int NT = SELECT_THREADS;

// fp32 max that propagates NaN (PTX max.NaN, sm_80+); the sign of a zero result is free (the
// order keys of -0 and +0 are equal).
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// The score of block b of a row (len visible positions), as the CPU defines it.
__device__ float block_score(const float *x, int64_t len, int cbs, int how, bool aligned4,
                             int64_t b) {
  const int64_t lo = b * cbs, hi = lo + cbs < len ? lo + cbs : len;
  if (how == IXL_SCORE_SUM || how == IXL_SCORE_MEAN) {
    double acc = 0;
    for (int64_t i = lo; i < hi; i++) acc += (double)x[i];
    return how == IXL_SCORE_SUM ? (float)acc : (float)(acc / (double)(hi - lo));
  }
  float m = -INFINITY;
  int64_t i = lo;
  if (aligned4) // 16-byte loads: blocks start at multiples of cbs, a multiple of 4 here
    for (; i + 4 <= hi; i += 4) {
      const float4 v = *reinterpret_cast<const float4 *>(x + i);
      m = fmax_nan(fmax_nan(m, v.x), fmax_nan(fmax_nan(v.y, v.z), v.w));
    }
  for (; i < hi; i++) m = fmax_nan(m, x[i]);
  if (isnan(m)) return __int_as_float(0x7fc00000);
  if (how == IXL_SCORE_MAX || isinf(m)) return m;
  double s = 0;
  for (int64_t j = lo; j < hi; j++) s += exp((double)x[j] - (double)m);
  return (float)((double)m + log(s));
}

// ---------------------------------------------------------------- K3, keys in shared memory
constexpr int64_t K3_NMAX = 65535;      // blocks per row at most: 16-bit packed counts stay exact
constexpr int K3_HIST = 2048 + 2048 + 1024; // the three digits' bins (11, 11, 10 bits)
constexpr int K3_U = 8;                 // 16-byte loads in flight per thread
constexpr int K3_WTOT = 512;            // (round, warp) totals: 65536 keys / 128 per warp-round

template <int NTH>
struct K3Shared {
  unsigned ws[NTH / 32 + 1];
  unsigned wtot[K3_WTOT];
  unsigned bin, above;
};

// After a histogram of the keys that match the prefix so far: the bin holding the need-th
// largest of them (sh.bin) and how many of them lie in the bins above it (sh.above).
// nbins is a multiple of NTH; the bins are scanned from the top.
template <int NTH>
__device__ void k3_find_bin(const unsigned *hist, int nbins, unsigned need, K3Shared<NTH> &sh) {
  const int per = nbins / NTH;
  const int hi = nbins - (int)threadIdx.x * per; // this thread's bins: [hi - per, hi)
  unsigned s = 0;
  for (int b = hi - per; b < hi; b++) s += hist[b];
  unsigned total;
  const unsigned before = block_exclusive_scan<NTH, unsigned>(s, &total, sh.ws);
  if (before < need && need <= before + s) {
    unsigned acc = before;
    for (int b = hi - 1; b >= hi - per; b--) {
      if (acc + hist[b] >= need) {
        sh.bin = (unsigned)b;
        sh.above = acc;
        break;
      }
      acc += hist[b];
    }
  }
  __syncthreads();
}

// One digit pass over the shared keys: hist[(key >> shift) & mask] for the keys whose bits
// above `match_shift` equal `prefix`.
template <int NTH>
__device__ __forceinline__ void k3_digit_pass(const uint4 *keys4, int n, int rounds,
                                              unsigned *hist, int match_shift, unsigned prefix,
                                              int shift, unsigned mask) {
  for (int rr = 0; rr < rounds; rr++) {
    const int v = rr * NTH + (int)threadIdx.x, i0 = 4 * v;
    const uint4 kv = keys4[v];
    const unsigned k4[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
    for (int e = 0; e < 4; e++)
      if (i0 + e < n && (k4[e] >> match_shift) == prefix)
        atomicAdd(&hist[(k4[e] >> shift) & mask], 1u);
  }
  __syncthreads();
}

// (gt, eq) of up to 4 keys, packed: gt in the low 16 bits, eq in the high 16.
__device__ __forceinline__ unsigned k3_counts(const unsigned (&k4)[4], int i0, int n, bool all,
                                              unsigned thr) {
  unsigned c = 0;
#pragma unroll
  for (int e = 0; e < 4; e++) {
    const bool valid = i0 + e < n;
    c += (valid && (all || k4[e] > thr)) ? 1u : 0u;
    c += (valid && !all && k4[e] == thr) ? 0x10000u : 0u;
  }
  return c;
}

// ---- IXL_K3_NEXT=1 (off by default, read once per process): the next K3 step
// The top 11 bits of the kk-th largest key by a bit-by-bit search over the shared keys: per
// bit one count of the keys >= a candidate threshold (warp reductions, one barrier), no
// atomics (a histogram of the top digit serialises on its few busy bins). Returns the 11-bit
// digit; *above gets the count of keys above its bin. part: 2 * NTH / 32 words of scratch.
template <int NTH>
__device__ unsigned k3_top_digit(const uint4 *keys4, int n, int rounds, unsigned kk,
                                 unsigned *above, unsigned *part) {
  constexpr int NW = NTH / 32;
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  unsigned prefix = 0, hi = 0; // count(key >= prefix) >= kk; hi = keys above the window
  for (int bit = 31; bit >= 21; bit--) {
    const unsigned c = prefix | (1u << bit);
    unsigned cnt = 0;
    for (int rr = 0; rr < rounds; rr++) {
      const int v = rr * NTH + (int)threadIdx.x, i0 = 4 * v;
      const uint4 kv = keys4[v];
      cnt += (i0 < n && kv.x >= c) + (i0 + 1 < n && kv.y >= c) + (i0 + 2 < n && kv.z >= c) +
             (i0 + 3 < n && kv.w >= c);
    }
    cnt = __reduce_add_sync(0xffffffffu, cnt);
    unsigned *buf = part + (bit & 1) * NW;
    if (lane == 0) buf[warp] = cnt;
    __syncthreads(); // a buffer is written again two bits later, after another barrier
    const unsigned tot = __reduce_add_sync(0xffffffffu, lane < NW ? buf[lane] : 0u);
    if (tot >= kk) prefix = c;
    else hi = tot; // the last failed candidate is prefix + 2^21 at the end
  }
  *above = hi;
  return prefix >> 21;
}

// Compare-exchange of two register entries toward ascending (asc) or descending order.
__device__ __forceinline__ void k3_cx(uint64_t &a, uint64_t &b, bool asc) {
  const uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
  a = asc ? lo : hi;
  b = asc ? hi : lo;
}

// Ascending bitonic sort of buf[0..P), P a power of two: each active warp holds a chunk of
// 32 * E consecutive entries in registers (entry base + 32 e + lane), so every step whose
// stride is below the chunk runs in registers (shuffles for strides < 32); only the strides
// of a chunk or more go through shared memory. Falls back to the shared-memory network
// outside 64 <= P <= NTH * 4. Every thread of the CTA calls it (after a barrier that makes
// buf visible); it ends with one.
template <int NTH>
__device__ void k3_sort(uint64_t *buf, int P) {
  constexpr int NW = NTH / 32, EMAX = 4;
  if (P < 64 || P > NW * 32 * EMAX) {
    block_bitonic_sort<NTH>(buf, P);
    return;
  }
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int aw = P / 32 < NW ? P / 32 : NW; // active warps (a power of two)
  const int E = P / (32 * aw), chunk = 32 * E, base = warp * chunk; // E = 1, 2 or 4
  const bool act = warp < aw;
  uint64_t v[EMAX];
#pragma unroll
  for (int e = 0; e < EMAX; e++) v[e] = act && e < E ? buf[base + 32 * e + lane] : 0ull;
  for (int size = 2; size <= P; size <<= 1) {
    int stride = size >> 1;
    if (stride >= chunk) { // block-uniform
      if (act)
#pragma unroll
        for (int e = 0; e < EMAX; e++)
          if (e < E) buf[base + 32 * e + lane] = v[e];
      __syncthreads();
      for (; stride >= chunk; stride >>= 1) {
        for (int t = (int)threadIdx.x; t < P / 2; t += NTH) {
          const int i = ((t & ~(stride - 1)) << 1) | (t & (stride - 1)), j = i | stride;
          const uint64_t a = buf[i], b = buf[j];
          if ((b < a) == ((i & size) == 0)) {
            buf[i] = b;
            buf[j] = a;
          }
        }
        __syncthreads();
      }
      if (act)
#pragma unroll
        for (int e = 0; e < EMAX; e++)
          if (e < E) v[e] = buf[base + 32 * e + lane];
    }
    if (!act) continue; // warp-uniform
    for (; stride >= 32; stride >>= 1) { // partners in this lane's registers (chunk 64 or 128)
      if (stride == 32) {
        k3_cx(v[0], v[1], ((base + lane) & size) == 0);
        if (E > 2) k3_cx(v[2], v[3], ((base + 64 + lane) & size) == 0);
      } else { // stride 64, E = 4
        k3_cx(v[0], v[2], ((base + lane) & size) == 0);
        k3_cx(v[1], v[3], ((base + 32 + lane) & size) == 0);
      }
    }
    for (; stride >= 1; stride >>= 1) { // partners in other lanes
      const bool lower = (lane & stride) == 0;
#pragma unroll
      for (int e = 0; e < EMAX; e++) {
        if (e >= E) break; // warp-uniform
        const uint64_t pv = __shfl_xor_sync(0xffffffffu, v[e], stride);
        const bool asc = ((base + 32 * e + lane) & size) == 0;
        const uint64_t mn = v[e] < pv ? v[e] : pv, mx = v[e] < pv ? pv : v[e];
        v[e] = lower == asc ? mn : mx;
      }
    }
  }
  if (act)
#pragma unroll
    for (int e = 0; e < EMAX; e++)
      if (e < E) buf[base + 32 * e + lane] = v[e];
  __syncthreads();
}

// Mode 8's sort of the winners: CUB's stable block radix sort over the composite's key half
// (bits 32-63, ~key), so the ties keep the compaction's block-id order: the same order as
// k3_sort's (score descending, block id ascending) in 8 passes of 4 bits, each a rank and an
// exchange, instead of a bitonic network's 66 compare-exchange steps. Items in CUB's blocked
// arrangement, kItems a thread; taken when P fills them exactly (at half of them the
// padding costs more than the bitonic sort: H200, decode 64x131072 cbs 16 T 1024, 30.6 ->
// 34.7 us), else k3_sort.
template <int NTH> struct K3CubSort {
  static constexpr int kItems = NTH >= 1024 ? 2 : 4;
  using Sort = cub::BlockRadixSort<unsigned long long, NTH, kItems>;
  using Storage = typename Sort::TempStorage;
};

// kNarrow (mode 58): the key half replaced by an order code of fewer bits first: 0 for NaN,
// 1 for +inf, kmax - key + 2 for the rest (kmax: the largest winner below +inf, lo the
// smallest winner's key), the pads (~0) all ones in nb bits, nb the fewest bits above every
// real code; CUB then sorts bits [32, 32 + nb) only: ceil(nb / 4) passes instead of 8 (a
// prefill row's winners span about 24 bits: 6). The same order (the codes order the keys
// descending, ties kept stable), so the same output; nb = 32 (the composites as they are)
// where the span needs it.
template <int NTH, bool kNarrow = false>
__device__ void k3_cub_sort(uint64_t *buf, int P, typename K3CubSort<NTH>::Storage &tmp,
                            unsigned kmax = 0, unsigned lo = 0) {
  constexpr int I = K3CubSort<NTH>::kItems;
  if (P != NTH * I) {
    k3_sort<NTH>(buf, P);
    return;
  }
  const int t = (int)threadIdx.x;
  unsigned long long v[I];
#pragma unroll
  for (int i = 0; i < I; i++) v[i] = t * I + i < P ? buf[t * I + i] : ~0ull;
  int nb = 32;
  if (kNarrow) {
    // the largest real code: kmax - lo + 2 (or 1: only NaN / +inf winners)
    const unsigned long long top = kmax >= lo ? (unsigned long long)(kmax - lo) + 2ull : 1ull;
    if (top < 0x7fffffffull) {
      nb = 1;
      while ((1ull << nb) - 1ull <= top) nb++; // all ones (the pads) above every real code
      const unsigned pad = (unsigned)((1ull << nb) - 1ull);
#pragma unroll
      for (int i = 0; i < I; i++) {
        const unsigned key = ~(unsigned)(v[i] >> 32), id = (unsigned)v[i];
        const unsigned code = v[i] == ~0ull          ? pad
                              : key == IXL_KEY_NAN     ? 0u
                              : key == IXL_KEY_POS_INF ? 1u
                                                       : kmax - key + 2u;
        v[i] = ((unsigned long long)code << 32) | id;
      }
    }
  }
  typename K3CubSort<NTH>::Sort(tmp).Sort(v, 32, 32 + nb);
#pragma unroll
  for (int i = 0; i < I; i++)
    if (t * I + i < P) buf[t * I + i] = v[i];
  __syncthreads();
}

// Mode 26's hint: vectors [lo, min(lo + cnt, hi)) of p into L2 by the bulk-copy engine
// (cp.async.bulk.prefetch.L2, sm_90; nothing before). Never changes a result.
__device__ __forceinline__ void k3_l2_prefetch(const float4 *p, int lo, int hi, int cnt) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int e = lo + cnt < hi ? lo + cnt : hi;
  if (lo < e)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + lo),
                 "r"((unsigned)(e - lo) * 16u));
#else
  (void)p, (void)lo, (void)hi, (void)cnt;
#endif
}

// Mode 58's largest key below +inf of the row (the leader's, block-reduced in the compaction)
__device__ __forceinline__ unsigned &k3_kmax_slot() {
  __shared__ unsigned v;
  return v;
}

// Cluster helpers (sm_90): the rank-0 CTA's shared address of a local one, and the cluster
// barrier. Unused (cs = 1) on older GPUs.
__device__ __forceinline__ unsigned *k3_leader_smem(unsigned *p, int cs) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (cs > 1) return cg::this_cluster().map_shared_rank(p, 0);
#endif
  (void)cs;
  return p;
}
__device__ __forceinline__ void k3_cluster_sync(int cs) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (cs > 1) {
    cg::this_cluster().sync();
    return;
  }
#endif
  (void)cs;
  __syncthreads();
}

// The profile instantiation (IXL_CANDIDATES_PROFILE=1, test-only): thread 0 of the first and
// the middle row's leader stamps clock64 after each phase and prints the cycles.
constexpr int K3_NSTAMP = 9;

// grid: R * cs CTAs, clusters of cs (one row each); every CTA of a cluster scores a slice of
// the row's blocks and writes the keys and the top digit's histogram into the rank-0 CTA's
// shared memory, which then selects alone.
template <bool kVec, int NTH, bool kProf, int kMode>
__global__ void __launch_bounds__(NTH, 1024 / NTH)
    candidate_select_smem_kernel(const float *__restrict__ logits, int64_t C,
                                 const int32_t *__restrict__ lens, int cbs, int how, int64_t T,
                                 int32_t *__restrict__ out, int P, int lq, int cs, int stg_lo,
                                 int stg_ns, int pfd) {
  constexpr int RK = 4 * NTH; // keys per round of the passes (one uint4 per thread)
  constexpr int NW = NTH / 32;
  constexpr bool kNext = (kMode & 1) != 0; // the top digit by a counting search
  constexpr bool kRegSort = (kMode & 2) != 0;
  constexpr bool kAgg = !kNext && (kMode & 4) != 0;
  constexpr bool kCub = (kMode & 8) != 0; // the winners' sort by CUB's block radix sort
  // mode 26: the first wave's second half starts stg_ns late; the vector load's rounds
  // prefetched into L2 pfd rounds ahead (0: not)
  constexpr bool kStg = (kMode & 16) != 0;
  constexpr bool kNarrow = kCub && (kMode & 32) != 0; // mode 58: the sort over fewer bits
  extern __shared__ __align__(16) unsigned char k3_smem[];
  __shared__ K3Shared<NTH> sh;
  long long stamp[kProf ? K3_NSTAMP : 1];
  pdl_wait();    // before the first global access (cuda/launch.cuh's rule)
  pdl_trigger(); // safe anywhere: a dependent waits for this grid's end, not for this
  if constexpr (kStg) { // CTAs [stg_lo, 2 stg_lo) wait stg_ns first (no memory is touched)
    if (stg_ns > 0 && blockIdx.x - (unsigned)stg_lo < (unsigned)stg_lo) {
      unsigned long long t0, t;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
      do {
        __nanosleep(256);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      } while (t - t0 < (unsigned long long)stg_ns);
    }
  }
  if (kProf) stamp[0] = clock64();
  const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t r = blockIdx.x / cs;
  const int rank = (int)(blockIdx.x % cs);
  int64_t len = lens[r];
  if (len < 0) len = 0; // validated on the host when visible there; clamp so bad data never faults
  if (len > C) len = C;
  const int n = (int)((len + cbs - 1) / cbs);
  const int kk = (int)(T < n ? T : (int64_t)n);
  int32_t *o = out + r * T;
  if (kk == 0) { // the same for every CTA of the cluster
    if (rank == 0)
      for (int64_t j = tid; j < T; j += NTH) o[j] = -1;
    return;
  }
  // shared memory: [sort buffer of P entries | the histograms] (one region, used in turn),
  // then the keys
  const int region = P * 8 > K3_HIST * 4 ? P * 8 : K3_HIST * 4;
  uint64_t *sbuf = reinterpret_cast<uint64_t *>(k3_smem);
  unsigned *hist = reinterpret_cast<unsigned *>(k3_smem);
  unsigned *keys = reinterpret_cast<unsigned *>(k3_smem + region);
  const uint4 *keys4 = reinterpret_cast<const uint4 *>(keys);
  if (rank == 0) // (next: the top digit takes no histogram)
    for (int i = (kNext ? 2048 : 0) + tid; i < K3_HIST; i += NTH) hist[i] = 0;
  if constexpr (kNarrow)
    if (tid == 0) k3_kmax_slot() = 0;
  unsigned *keys_to = k3_leader_smem(keys, cs);
  unsigned *hist_to = kNext ? hist : k3_leader_smem(hist, cs);
  k3_cluster_sync(cs);
  if (kProf) stamp[1] = clock64();

  // ---- load this CTA's slice of blocks: keys and the top digit's histogram to the leader
  const int per = (n + cs - 1) / cs, blo = rank * per, bhi = blo + per < n ? blo + per : n;
  const float *row = logits + r * C;
  if (kVec) { // max over cbs = 4 << lq positions; q = 1 << lq lanes share a block
    const int q = 1 << lq, ilen = (int)len; // len < 2^31 (an int32 length)
    const float4 *row4 = reinterpret_cast<const float4 *>(row);
    const int vlo = blo << lq, vhi = bhi << lq; // vectors of the slice's blocks (< 2^21)
    constexpr int RV = NTH * K3_U;              // vectors a round
    if (kStg && pfd > 0 && tid == 0) // the rounds after the first, pfd of them
      for (int d = 1; d <= pfd; d++) k3_l2_prefetch(row4, vlo + d * RV, vhi, RV);
    for (int v0 = vlo; v0 < vhi; v0 += RV) {
      if (kStg && pfd > 0 && tid == 0) k3_l2_prefetch(row4, v0 + (pfd + 1) * RV, vhi, RV);
      float4 x[K3_U];
#pragma unroll
      for (int u = 0; u < K3_U; u++) {
        const int v = v0 + u * NTH + tid;
        x[u] = v < vhi && 4 * v < ilen
                   ? __ldg(row4 + v)
                   : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      }
#pragma unroll
      for (int u = 0; u < K3_U; u++) {
        const int v = v0 + u * NTH + tid;
        float4 a = x[u];
        if (4 * v + 4 > ilen) { // the row's last, partial vector (or none)
          if (4 * v + 1 >= ilen) a.y = -INFINITY;
          if (4 * v + 2 >= ilen) a.z = -INFINITY;
          if (4 * v + 3 >= ilen) a.w = -INFINITY;
        }
        float m = fmax_nan(fmax_nan(a.x, a.y), fmax_nan(a.z, a.w));
        for (int d = 1; d < q; d <<= 1) m = fmax_nan(m, __shfl_xor_sync(0xffffffffu, m, d));
        const bool own = (tid & (q - 1)) == 0 && v < vhi;
        // every lane of the warp is here (the loop bounds are warp-uniform): kAgg's ballot
        const unsigned am = kAgg ? __ballot_sync(0xffffffffu, own) : 0u;
        if (own) {
          const int b = v >> lq;
          unsigned key = ixl_order_key_f32(m);
          if (b == n - 1 && key != IXL_KEY_NAN) key = IXL_KEY_POS_INF;
          keys_to[b] = key;
          if (kAgg) {
            const unsigned peers = __match_any_sync(am, key >> 21);
            if (__ffs(peers) - 1 == lane) atomicAdd(&hist_to[key >> 21], (unsigned)__popc(peers));
          } else if (!kNext) {
            atomicAdd(&hist_to[key >> 21], 1u);
          }
        }
      }
    }
  } else {
    const bool aligned4 = cbs % 4 == 0 && ((uintptr_t)row & 15u) == 0;
    for (int b = blo + tid; b < bhi; b += NTH) {
      unsigned key = ixl_order_key_f32(block_score(row, len, cbs, how, aligned4, b));
      if (b == n - 1 && key != IXL_KEY_NAN) key = IXL_KEY_POS_INF;
      keys_to[b] = key;
      if (!kNext) atomicAdd(&hist_to[key >> 21], 1u);
    }
  }
  k3_cluster_sync(cs);
  if (rank != 0) return; // the leader selects alone
  if (kProf) stamp[2] = clock64();

  // ---- the kk-th largest key t, digit by digit (11/11/10 bits); need = the ties at t taken
  const int rounds = (n + RK - 1) / RK;
  const bool all = kk == n; // every block is kept
  unsigned thr = 0, need = 0;
  if (kProf) stamp[3] = stamp[4] = stamp[5] = stamp[2];
  if (!all) {
    unsigned b0, above0;
    if (kNext) { // a counting search over the shared keys (sh.wtot is free until the compaction)
      b0 = k3_top_digit<NTH>(keys4, n, rounds, (unsigned)kk, &above0, sh.wtot);
    } else {
      k3_find_bin<NTH>(hist, 2048, (unsigned)kk, sh);
      b0 = sh.bin;
      above0 = sh.above;
    }
    if (kProf) stamp[3] = clock64();
    unsigned rem = (unsigned)kk - above0;
    k3_digit_pass<NTH>(keys4, n, rounds, hist + 2048, 21, b0, 10, 2047u);
    k3_find_bin<NTH>(hist + 2048, 2048, rem, sh);
    if (kProf) stamp[4] = clock64();
    const unsigned p1 = (b0 << 11) | sh.bin;
    rem -= sh.above;
    k3_digit_pass<NTH>(keys4, n, rounds, hist + 4096, 10, p1, 0, 1023u);
    k3_find_bin<NTH>(hist + 4096, 1024, rem, sh);
    if (kProf) stamp[5] = clock64();
    thr = (p1 << 10) | sh.bin;
    need = rem - sh.above;
  }

  // ---- ordered compaction of the winners (keys > t, the first `need` keys == t) into sbuf
  for (int rr = 0; rr < rounds; rr++) {
    const int v = rr * NTH + tid;
    const uint4 kv = keys4[v];
    const unsigned k4[4] = {kv.x, kv.y, kv.z, kv.w};
    const unsigned wt = __reduce_add_sync(0xffffffffu, k3_counts(k4, 4 * v, n, all, thr));
    if (lane == 0) sh.wtot[rr * NW + warp] = wt;
    if constexpr (kNarrow) { // the largest key below +inf
      unsigned mx = 0;
#pragma unroll
      for (int e = 0; e < 4; e++)
        if (4 * v + e < n && k4[e] < IXL_KEY_POS_INF && k4[e] > mx) mx = k4[e];
      mx = __reduce_max_sync(0xffffffffu, mx);
      if (lane == 0 && mx) atomicMax(&k3_kmax_slot(), mx);
    }
  }
  __syncthreads();
  if (warp == 0) { // exclusive scan of the (round, warp) totals, in index order
    const int m = rounds * NW, e = (m + 31) / 32, e0 = lane * e;
    unsigned s = 0;
    for (int i = e0; i < e0 + e && i < m; i++) s += sh.wtot[i];
    unsigned x = s;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const unsigned y = __shfl_up_sync(0xffffffffu, x, d);
      if (lane >= d) x += y;
    }
    unsigned acc = x - s;
    for (int i = e0; i < e0 + e && i < m; i++) {
      const unsigned t = sh.wtot[i];
      sh.wtot[i] = acc;
      acc += t;
    }
  }
  __syncthreads();
  for (int rr = 0; rr < rounds; rr++) {
    const int v = rr * NTH + tid, i0 = 4 * v;
    const uint4 kv = keys4[v];
    const unsigned k4[4] = {kv.x, kv.y, kv.z, kv.w};
    const unsigned c = k3_counts(k4, i0, n, all, thr);
    unsigned x = c;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const unsigned y = __shfl_up_sync(0xffffffffu, x, d);
      if (lane >= d) x += y;
    }
    const unsigned base = sh.wtot[rr * NW + warp] + x - c;
    unsigned gtb = base & 0xffffu, eqb = base >> 16;
#pragma unroll
    for (int e = 0; e < 4; e++) {
      if (i0 + e >= n) break;
      if (all || k4[e] > thr) {
        sbuf[gtb + (eqb < need ? eqb : need)] = select_composite(k4[e], i0 + e);
        gtb++;
      } else if (k4[e] == thr) {
        if (eqb < need) sbuf[gtb + eqb] = select_composite(k4[e], i0 + e);
        eqb++;
      }
    }
  }
  for (int j = kk + tid; j < P; j += NTH) sbuf[j] = ~0ull;
  __syncthreads();
  if (kProf) stamp[6] = clock64();

  // ---- order the kk winners (score descending, block id ascending), then -1 pads
  if constexpr (kCub) {
    __shared__ typename K3CubSort<NTH>::Storage cub_tmp;
    if constexpr (kNarrow) k3_cub_sort<NTH, true>(sbuf, P, cub_tmp, k3_kmax_slot(), all ? 0u : thr);
    else k3_cub_sort<NTH>(sbuf, P, cub_tmp);
  } else if (kRegSort) {
    k3_sort<NTH>(sbuf, P);
  } else {
    block_bitonic_sort<NTH>(sbuf, P);
  }
  if (kProf) stamp[7] = clock64();
  for (int64_t j = tid; j < T; j += NTH)
    o[j] = j < kk ? (int32_t)(uint32_t)(sbuf[j] & 0xffffffffull) : -1;
  if (kProf) {
    __syncthreads();
    stamp[8] = clock64();
    const int64_t R = gridDim.x / cs;
    if (tid == 0 && (r == 0 || r == R / 2))
      printf("k3prof row %lld n %d T %lld NT %d cs %d | kcycles: zero %.1f load %.1f find0 %.1f "
             "pass1 %.1f pass2 %.1f compact %.1f sort %.1f store %.1f total %.1f\n",
             (long long)r, n, (long long)T, NTH, cs, (stamp[1] - stamp[0]) * 1e-3,
             (stamp[2] - stamp[1]) * 1e-3, (stamp[3] - stamp[2]) * 1e-3,
             (stamp[4] - stamp[3]) * 1e-3, (stamp[5] - stamp[4]) * 1e-3,
             (stamp[6] - stamp[5]) * 1e-3, (stamp[7] - stamp[6]) * 1e-3,
             (stamp[8] - stamp[7]) * 1e-3, (stamp[8] - stamp[0]) * 1e-3);
  }
}

// ---------------------------------------------------------------- K3, long rows (and v1)
// The blocks of one row, keyed by score; the newest block scores +inf unless its score is NaN.
struct RowBlocks {
  const float *x; // the row's logits, columns = request-local positions
  int64_t len;    // visible positions
  int64_t n;      // blocks: ceil(len / cbs)
  int cbs;
  int how;        // ixl_block_score
  bool aligned4;  // cbs % 4 == 0 and the row starts 16-byte aligned

  __device__ uint32_t key_at(int64_t b) const {
    const uint32_t key = ixl_order_key_f32(block_score(x, len, cbs, how, aligned4, b));
    return b == n - 1 && key != IXL_KEY_NAN ? IXL_KEY_POS_INF : key;
  }
  static constexpr int W = 1;
  template <class F>
  __device__ void visit(int64_t lo, int64_t hi, F &&f) const {
    for (int64_t base = lo; base < hi; base += NT) { // the same trip count in every thread
      const int64_t b = base + threadIdx.x;
      const uint32_t k[1] = {b < hi ? key_at(b) : 0u};
      f(b, k, b < hi ? 1u : 0u);
    }
  }
};

__global__ void __launch_bounds__(NT, 1) candidate_select_kernel(
    const float *__restrict__ logits, int64_t C, const int32_t *__restrict__ lens, int cbs,
    int how, int64_t T, int32_t *__restrict__ out, int B, int flags) {
  extern __shared__ uint64_t smem[];
  __shared__ SelectShared sh;
  pdl_wait();
  pdl_trigger();
  const int64_t r = blockIdx.x;
  int64_t len = lens[r];
  if (len < 0) len = 0; // validated on the host when visible there; clamp so bad data never faults
  if (len > C) len = C;
  const float *row = logits + r * C;
  const bool aligned4 = cbs % 4 == 0 && ((uintptr_t)row & 15u) == 0;
  RowBlocks src{row, len, (len + cbs - 1) / cbs, cbs, how, aligned4};
  radix_select_row<NT>(src, T, true, out + r * T, smem, B, false, sh, flags);
}

// ---------------------------------------------------------------- the candidate mask
// Grid (rows, column chunks). A CTA marks the candidate blocks that meet its chunk in a
// shared bitmap (all T candidates of the row are read; ids outside the row are ignored), then
// writes -inf to every column of the chunk outside them or at/after lens[r]. Kept columns are
// never touched.
constexpr int MASK_THREADS = 256;
constexpr int64_t MASK_CHUNK = 8192; // columns per CTA
constexpr int MASK_WORDS = (int)(MASK_CHUNK / 32) + 2;

template <typename T>
__global__ void __launch_bounds__(MASK_THREADS) mask_kernel(T *__restrict__ logits, int64_t C,
                                                            const int32_t *__restrict__ lens,
                                                            const int32_t *__restrict__ cand,
                                                            int64_t NC, int cbs, T neg_inf) {
  __shared__ uint32_t keep[MASK_WORDS];
  pdl_wait();
  pdl_trigger();
  const int64_t r = blockIdx.x;
  const int64_t c0 = (int64_t)blockIdx.y * MASK_CHUNK;
  if (c0 >= C) return;
  const int64_t c1 = c0 + MASK_CHUNK < C ? c0 + MASK_CHUNK : C;
  int64_t len = lens[r];
  if (len < 0) len = 0;
  if (len > C) len = C;
  const int64_t nb = (len + cbs - 1) / cbs;
  const int64_t b0 = c0 / cbs;                         // first block meeting the chunk
  const int64_t b1 = (c1 - 1) / cbs;                   // last one
  for (int w = threadIdx.x; w < MASK_WORDS; w += MASK_THREADS) keep[w] = 0;
  __syncthreads();
  const int32_t *cr = cand + r * NC;
  for (int64_t t = threadIdx.x; t < NC; t += MASK_THREADS) {
    const int64_t c = cr[t];
    if (c >= 0 && c < nb && c >= b0 && c <= b1) {
      const int64_t bit = c - b0; // < MASK_CHUNK / cbs + 2
      atomicOr(&keep[bit >> 5], 1u << (bit & 31));
    }
  }
  __syncthreads();
  T *row = logits + r * C;
  for (int64_t j = c0 + threadIdx.x; j < c1; j += MASK_THREADS) {
    const int64_t bit = j / cbs - b0;
    const bool kept = j < len && (keep[bit >> 5] >> (bit & 31) & 1u);
    if (!kept) row[j] = neg_inf;
  }
}

// The previous kernel, for rows of K3_NMAX blocks or more and for comparison.
ixl_status candidate_select_v1(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *lens,
                               int cbs, ixl_block_score score, ixl_tensor *out) {
  const int64_t R = logits->shape[0], C = logits->shape[1], T = out->shape[1];
  const int B = select_buffer_entries(T, (C + cbs - 1) / cbs);
  const size_t smem = select_smem_bytes(B);
  ixl_status st = ixl_cuda_status(
      ctx, cudaFuncSetAttribute(candidate_select_kernel,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "candidate_select: cudaFuncSetAttribute");
  if (st) return st;
  return launch_pdl(ctx, "candidate_select", candidate_select_kernel, dim3((unsigned)R),
                    dim3(NT), smem, 1, (const float *)logits->data, C,
                    (const int32_t *)lens->data, cbs, (int)score, T, (int32_t *)out->data, B,
                    select_flags());
}

// Test-only switches read from the environment: IXL_CANDIDATES_V1=1 (every call takes the
// previous kernel), IXL_CANDIDATES_NT=512|1024 and IXL_CANDIDATES_CS=1|2|4|8 (threads per CTA
// and CTAs per row instead of the defaults), IXL_CANDIDATES_PROFILE=1 (the profile
// instantiation).
int env_int(const char *name, int dflt) {
  const char *e = getenv(name);
  return e && *e ? atoi(e) : dflt;
}

// The dynamic shared memory a CTA may take (the opt-in limit less the kernel's static part)
// and the device's major compute capability, read once: every context of the process is on
// one device.
struct DeviceFacts {
  int smem, major, sms;
};
const DeviceFacts &device_facts() {
  static DeviceFacts f = {-1, 0, 0};
  if (f.smem < 0) {
    int dev = 0, v = 48 * 1024, major = 0, sms = 1;
    if (cudaGetDevice(&dev) == cudaSuccess) {
      cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    }
    cudaGetLastError();
    f.major = major;
    f.sms = sms;
    f.smem = v - (int)sizeof(K3Shared<1024>) - 1024;
  }
  return f;
}

typedef void (*k3_kernel_fn)(const float *, int64_t, const int32_t *, int, int, int64_t,
                             int32_t *, int, int, int, int, int, int);

// [vec][nt == 1024][profile]
template <int kMode>
k3_kernel_fn k3_kernel_of(int vec, int big, int prof) {
  static const k3_kernel_fn table[2][2][2] = {
      {{candidate_select_smem_kernel<false, 512, false, kMode>,
        candidate_select_smem_kernel<false, 512, true, kMode>},
       {candidate_select_smem_kernel<false, 1024, false, kMode>,
        candidate_select_smem_kernel<false, 1024, true, kMode>}},
      {{candidate_select_smem_kernel<true, 512, false, kMode>,
        candidate_select_smem_kernel<true, 512, true, kMode>},
       {candidate_select_smem_kernel<true, 1024, false, kMode>,
        candidate_select_smem_kernel<true, 1024, true, kMode>}}};
  return table[vec][big][prof];
}

// IXL_K3_NEXT (see the file's header), read once per process, as the index of its
// instantiation: 0 -> mode 0, 1 -> mode 3, 2 -> mode 2, 6 -> mode 6 (index 3), 16 -> mode 26
// (index 5: mode 10 with the staggered first wave), 8 -> mode 10 (index 4), else (unset too,
// or 48) mode 58 (index 6: mode 26 with the sort over fewer bits, the default).
int k3_mode_index() {
  static const int index = [] {
    const int v = env_int("IXL_K3_NEXT", 48);
    return v == 0 ? 0 : v == 1 ? 1 : v == 2 ? 2 : v == 6 ? 3 : v == 16 ? 5 : v == 8 ? 4 : 6;
  }();
  return index;
}

// Mode 26's delay of the first wave's second half (IXL_K3_STAGGER_NS, read once; 0 = none)
// and its L2 prefetch distance in load rounds (IXL_K3_PF, read once; 0 = none, at most 4)
int k3_stagger_ns() {
  static const int ns = env_int("IXL_K3_STAGGER_NS", 19000);
  return ns;
}
int k3_pf_rounds() {
  static const int d = std::min(std::max(env_int("IXL_K3_PF", 0), 0), 4);
  return d;
}

} // namespace

extern "C" ixl_status ixl_cuda_candidate_select(ixl_ctx *ctx, const ixl_tensor *logits,
                                                const ixl_tensor *lens, int candidate_block_size,
                                                ixl_block_score score, ixl_tensor *out) {
  const int64_t R = logits->shape[0], C = logits->shape[1], T = out->shape[1];
  const int cbs = candidate_block_size;
  if (R == 0 || T == 0) return IXL_OK;
  if (R > INT32_MAX / 8)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "candidate_select: logits: shape[0] = %lld: must be <= %d rows on the GPU",
                         (long long)R, INT32_MAX / 8);
  const int64_t ncap = (C + cbs - 1) / cbs; // blocks of the longest possible row
  const DeviceFacts &dev = device_facts();
  if (ncap <= K3_NMAX && env_int("IXL_CANDIDATES_V1", 0) != 1) {
    const int64_t kmax = T < ncap ? T : ncap;
    int64_t P = 1;
    while (P < kmax) P <<= 1;
    const int64_t region = P * 8 > K3_HIST * 4 ? P * 8 : K3_HIST * 4;
    const int64_t smem = region + (ncap + 4095) / 4096 * 4096 * 4; // keys in whole rounds
    // mode 10's sort storage is static shared memory beside K3Shared (the larger of the two
    // thread counts': IXL_CANDIDATES_NT may pick either)
    const int64_t cub_bytes =
        k3_mode_index() < 4 ? 0
                             : (int64_t)std::max(sizeof(K3CubSort<1024>::Storage),
                                                 sizeof(K3CubSort<512>::Storage));
    if (smem + cub_bytes <= dev.smem) {
      // one wave of rows: 1024 threads per row, two CTAs per row on sm_90 where they fit in
      // one wave (the load is the row's cost); more rows: 512 threads, two CTAs per SM (one
      // row's selection overlaps another's load)
      int nt = R <= dev.sms ? 1024 : 512;
      int cs = dev.major >= 9 && 2 * R <= dev.sms ? 2 : 1;
      nt = env_int("IXL_CANDIDATES_NT", nt) == 512 ? 512 : 1024;
      cs = env_int("IXL_CANDIDATES_CS", cs);
      if (cs != 2 && cs != 4 && cs != 8) cs = 1;
      if (dev.major < 9) cs = 1;
      const int q = cbs / 4;
      const bool vec = score == IXL_SCORE_MAX && cbs % 4 == 0 && q <= 32 && (q & (q - 1)) == 0 &&
                       C % 4 == 0 && ((uintptr_t)logits->data & 15u) == 0;
      int lq = 0;
      while (vec && (1 << lq) < q) lq++;
      const int prof = env_int("IXL_CANDIDATES_PROFILE", 0) == 1;
      const int next = k3_mode_index();
      const k3_kernel_fn kern = next == 1   ? k3_kernel_of<3>(vec, nt == 1024, prof)
                                : next == 2 ? k3_kernel_of<2>(vec, nt == 1024, prof)
                                : next == 3 ? k3_kernel_of<6>(vec, nt == 1024, prof)
                                : next == 4 ? k3_kernel_of<10>(vec, nt == 1024, prof)
                                : next == 5 ? k3_kernel_of<26>(vec, nt == 1024, prof)
                                : next == 6 ? k3_kernel_of<58>(vec, nt == 1024, prof)
                                            : k3_kernel_of<0>(vec, nt == 1024, prof);
      // mode 26: more rows than one wave of 512-thread CTAs holds (two an SM): the CTAs
      // [SMs, 2 SMs) start IXL_K3_STAGGER_NS late, so each SM's second CTA loads while its
      // first selects, and the CTAs that replace them keep that phase
      const int stg = next >= 5 && nt == 512 && cs == 1 && R > 2 * (int64_t)dev.sms
                          ? k3_stagger_ns()
                          : 0;
      static int64_t set_bytes[7][2][2][2]; // the attribute already set, per instantiation
      int64_t &set = set_bytes[next][vec][nt == 1024][prof];
      if (smem > set) {
        ixl_status st = ixl_cuda_status(
            ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)smem),
            "candidate_select: cudaFuncSetAttribute");
        if (st) return st;
        set = smem;
      }
      return launch_pdl(ctx, "candidate_select", kern, dim3((unsigned)(R * cs)), dim3(nt),
                        (size_t)smem, (unsigned)cs, (const float *)logits->data, C,
                        (const int32_t *)lens->data, cbs, (int)score, T, (int32_t *)out->data,
                        (int)P, lq, cs, dev.sms, stg, next >= 5 ? k3_pf_rounds() : 0);
    }
  }
  return candidate_select_v1(ctx, logits, lens, cbs, score, out);
}

extern "C" ixl_status ixl_cuda_mask_candidates(ixl_ctx *ctx, ixl_tensor *logits,
                                               const ixl_tensor *lens, const ixl_tensor *cand,
                                               int candidate_block_size) {
  const int64_t R = logits->shape[0], C = logits->shape[1], NC = cand->shape[1];
  if (R == 0 || C == 0) return IXL_OK;
  const int64_t chunks = (C + MASK_CHUNK - 1) / MASK_CHUNK;
  if (R > INT32_MAX || chunks > 65535)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "mask_candidates: logits: shape [%lld, %lld]: the GPU takes at most "
                         "%d rows of at most %lld columns",
                         (long long)R, (long long)C, INT32_MAX, 65535LL * MASK_CHUNK);
  const dim3 grid((unsigned)R, (unsigned)chunks);
  const int32_t *cd = NC ? (const int32_t *)cand->data : nullptr;
  if (logits->dtype == IXL_BF16)
    return launch_pdl(ctx, "mask_candidates", mask_kernel<uint16_t>, grid, dim3(MASK_THREADS), 0,
                      1, (uint16_t *)logits->data, C, (const int32_t *)lens->data, cd, NC,
                      candidate_block_size, (uint16_t)0xff80);
  return launch_pdl(ctx, "mask_candidates", mask_kernel<float>, grid, dim3(MASK_THREADS), 0, 1,
                    (float *)logits->data, C, (const int32_t *)lens->data, cd, NC,
                    candidate_block_size, -INFINITY);
}
