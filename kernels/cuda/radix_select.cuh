// radix_select.cuh - the per-row radix select that K6 (top-k) and K3 (candidate selection)
// share.
#ifndef IXL_CUDA_RADIX_SELECT_CUH
#define IXL_CUDA_RADIX_SELECT_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/launch.cuh"
#include "numerics/scalar.h"
#include "cuda/scan.cuh"

namespace ixl {

// ------------------------------------------------------------------ per-row radix select
//
// One CTA selects the top kk = min(k, n) of one row of n keys (ties to the smaller index)
// and writes their indices, then -1 pads, to out[0..k). Order: sorted -> key descending,
// index ascending; unsorted -> index ascending. Never a full sort of the row:
//  1. n <= B: every key goes to shared memory, which is sorted (bitonic) and cut at kk.
//  2. Sampled threshold (the common case, one pass over the row): B keys sampled at even
//     strides are sorted; the key t0 whose sample rank predicts about (kk + B) / 2 keys >= t0
//     becomes a threshold, and one pass collects every key >= t0. When the count lands in
//     [kk, B] (for a k of 512-2048 on 16K-1M columns, some 3 to 10 standard deviations of
//     the sample's error on either side), those keys are sorted as in case 1. Otherwise the
//     exact paths below run; the result is the same either way.
//  3. Histogram passes over the digits of the key (11/11/10 bits for fp32 keys, 8/8 for bf16
//     keys) narrow the bin holding the kk-th largest key. As soon as the keys at or above that
//     bin fit in B, one more pass collects them into shared memory (case 1).
//  4. If they never fit, the kk-th key t is known exactly (a large tie on t): one ordered pass
//     takes every key > t and the first kk - above keys equal to t, by index.
//  5. kk > B (only K3 with a very large T): the ordered pass of 4 writes straight to out in
//     index order, and sorted mode sorts out in place (bitonic, keys looked up again).
// B is a power of two >= 32: the entries of 64-bit (~key << 32 | index) that shared memory
// holds. A source type provides n, key_at(i), a width W and visit(lo, hi, f): every thread
// of the block calls f(i0, key[W], valid) the same number of times (so f may use warp-wide
// intrinsics), and together the calls cover [lo, hi) exactly once: entry j of a call is
// index i0 + j, present when bit j of `valid` is set.

constexpr int SELECT_THREADS = 512;

struct SelectShared {
  uint32_t prefix, mask, t0;
  int64_t above, inbin;
  int found;
  unsigned count;
  int ws[SELECT_THREADS / 32 + 1];
  int64_t ws64[SELECT_THREADS / 32 + 1];
};

__device__ __forceinline__ uint64_t select_composite(uint32_t key, int64_t i) {
  return ((uint64_t)(~key) << 32) | (uint32_t)i;
}

// Appends the entries (key[j], i0 + j) whose bit j of `take` is set to buf, in any order,
// with one shared atomic per warp. Every lane of the warp must call it (visit's calls are
// block-uniform). Slots past B are counted but not written (the caller sees *count > B).
template <int W>
__device__ __forceinline__ void select_append(unsigned take, const uint32_t (&key)[W], int64_t i0,
                                              uint64_t *buf, int B, unsigned *count) {
  const int c = __popc(take);
  if (!__any_sync(0xffffffffu, c)) return; // the common case: nothing here
  const int lane = threadIdx.x & 31;
  int incl = c;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += y;
  }
  unsigned base = 0;
  if (lane == 31) base = atomicAdd(count, (unsigned)incl);
  base = __shfl_sync(0xffffffffu, base, 31);
  unsigned pos = base + (unsigned)(incl - c);
#pragma unroll
  for (int j = 0; j < W; j++)
    if (take >> j & 1u) {
      if (pos < (unsigned)B) buf[pos] = select_composite(key[j], i0 + j);
      pos++;
    }
}

// hist[bin] += 1 when pred; lanes of a warp with the same bin add together, so a row full of
// equal values does not serialise on one shared address. Every lane must call it.
__device__ __forceinline__ void select_hist_add(unsigned *hist, bool pred, unsigned bin) {
  const unsigned peers = __match_any_sync(0xffffffffu, pred ? bin : 0xffffffffu);
  if (pred && (int)(threadIdx.x & 31) == __ffs(peers) - 1)
    atomicAdd(&hist[bin], (unsigned)__popc(peers));
}

// In-place ascending bitonic sort of buf[0..P), P a power of two; every comparator puts the
// smaller value at the lower index, so entries at the top that are already maximal (pads)
// never move.
template <int NT>
__device__ void block_bitonic_sort(uint64_t *buf, int P) {
  // sizes and strides are powers of two: index arithmetic by shifts and masks (an integer
  // division per comparator would cost more than the comparator)
  for (int ls = 1; (1 << ls) <= P; ls++) {
    const int size = 1 << ls, lh = ls - 1;
    for (int t = threadIdx.x; t < P / 2; t += NT) {
      const int blk = t >> lh, off = t & ((1 << lh) - 1);
      const int i = (blk << ls) + off, j = (blk << ls) + size - 1 - off;
      const uint64_t a = buf[i], b = buf[j];
      if (b < a) {
        buf[i] = b;
        buf[j] = a;
      }
    }
    __syncthreads();
    for (int ld = lh - 1; ld >= 0; ld--) {
      for (int t = threadIdx.x; t < P / 2; t += NT) {
        const int i = ((t >> ld) << (ld + 1)) + (t & ((1 << ld) - 1)), j = i + (1 << ld);
        const uint64_t a = buf[i], b = buf[j];
        if (b < a) {
          buf[i] = b;
          buf[j] = a;
        }
      }
      __syncthreads();
    }
  }
}

// The same network over out[0..m) in global memory (m need not be a power of two: missing
// partners count as maximal pads), comparing (key desc, index asc) with keys looked up.
template <int NT, class Src>
__device__ void global_bitonic_sort(const Src &src, int32_t *out, int64_t m) {
  int64_t P = 1;
  while (P < m) P <<= 1;
  for (int64_t size = 2; size <= P; size <<= 1) {
    const int64_t half = size >> 1;
    for (int64_t d = half; d >= 1; d >>= 1) {
      for (int64_t t = threadIdx.x; t < P / 2; t += NT) {
        int64_t i, j;
        if (d == half) {
          const int64_t blk = t / half, off = t % half;
          i = blk * size + off;
          j = blk * size + size - 1 - off;
        } else {
          i = (t / d) * 2 * d + t % d;
          j = i + d;
        }
        if (j >= m) continue;
        const int32_t ia = out[i], ib = out[j];
        const uint64_t a = select_composite(src.key_at(ia), ia);
        const uint64_t b = select_composite(src.key_at(ib), ib);
        if (b < a) {
          out[i] = ib;
          out[j] = ia;
        }
      }
      __syncthreads();
    }
  }
}

// Finds, after a histogram pass, the bin holding the kk-th largest of the keys that match
// the current prefix; sets sh.prefix/mask/above/inbin for that bin.
template <int NT>
__device__ void select_find_bin(const unsigned *hist, int nbins, int shift, int64_t kk,
                                SelectShared &sh) {
  const int per = (nbins + NT - 1) / NT;
  const int lo = threadIdx.x * per, hi = min(lo + per, nbins);
  int64_t s = 0;
  for (int b = lo; b < hi; b++) s += hist[b];
  const int64_t above0 = sh.above; // read before the scan's barriers; written after them
  int64_t total;
  const int64_t before = block_exclusive_scan<NT, int64_t>(s, &total, sh.ws64);
  int64_t acc = above0 + (total - before - s); // keys in the bins above this thread's range
  if (acc < kk && kk <= acc + s) {
    for (int b = hi - 1; b >= lo; b--) {
      if (acc + hist[b] >= kk) {
        sh.found = b;
        sh.inbin = hist[b];
        sh.above = acc;
        break;
      }
      acc += hist[b];
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sh.prefix |= (uint32_t)sh.found << shift;
    sh.mask |= (uint32_t)(nbins - 1) << shift;
  }
  __syncthreads();
}

// The ordered pass (cases 4 and 5): over [0, n) in stripes of NT consecutive indices, takes
// every key > t and the first `need` keys == t. to_out: write indices to out (in index
// order); else append composites to buf (any order; sorted later). Returns the count taken.
template <int NT, class Src>
__device__ int64_t select_ordered_pass(const Src &src, int64_t n, uint32_t t, int64_t need,
                                       bool to_out, int32_t *out, uint64_t *buf, int B,
                                       SelectShared &sh) {
  int64_t written = 0, eq_seen = 0, i0 = 0;
  for (; i0 < n; i0 += NT) {
    const int64_t i = i0 + threadIdx.x;
    const uint32_t key = i < n ? src.key_at(i) : 0u;
    const int gt = i < n && key > t, eq = i < n && key == t;
    int total;
    const int packed = block_exclusive_scan<NT, int>(gt | (eq << 16), &total, sh.ws);
    const int64_t left = need - eq_seen > 0 ? need - eq_seen : 0;
    const int64_t eq_before = packed >> 16, gt_before = packed & 0xffff;
    const int64_t eq_total = total >> 16, gt_total = total & 0xffff;
    const bool take = gt || (eq && eq_before < left);
    if (to_out) {
      if (take) out[written + gt_before + min(eq_before, left)] = (int32_t)i;
    } else {
      const uint32_t k1[1] = {key};
      select_append<1>(take ? 1u : 0u, k1, i, buf, B, &sh.count);
    }
    written += gt_total + min(eq_total, left);
    eq_seen += eq_total;
    if (!to_out && eq_seen >= need) {
      i0 += NT;
      break;
    }
  }
  if (!to_out && i0 < n) {
    // the ties are all taken: the rest of the row adds only keys > t, in any order
    src.visit(i0, n, [&](int64_t i, const uint32_t(&key)[Src::W], unsigned valid) {
      unsigned take = 0;
#pragma unroll
      for (int j = 0; j < Src::W; j++) take |= (unsigned)(key[j] > t) << j;
      select_append<Src::W>(take & valid, key, i, buf, B, &sh.count);
    });
  }
  __syncthreads();
  if (!to_out) written = sh.count;
  __syncthreads();
  return written;
}

// flags: SELECT_NO_SAMPLE skips case 2 (to time the exact paths alone). Building with
// -DIXL_SELECT_PROFILE makes the first row print the cycles of each phase (device printf).
constexpr int SELECT_NO_SAMPLE = 1;
#ifdef IXL_SELECT_PROFILE
#define IXL_PROF(...) __VA_ARGS__
#else
#define IXL_PROF(...)
#endif

template <int NT, class Src>
__device__ void radix_select_row(const Src &src, int64_t k, bool sorted, int32_t *out,
                                 uint64_t *buf, int B, bool key16, SelectShared &sh, int flags) {
  IXL_PROF(const bool prof = blockIdx.x == 0 && threadIdx.x == 0;
           long long tp[8] = {clock64(), 0, 0, 0, 0, 0, 0, 0}; int path = 0;)
  const int64_t n = src.n;
  const int64_t kk = k < n ? k : n;
  unsigned *hist = reinterpret_cast<unsigned *>(buf); // the histogram and buf never overlap in time
  int64_t M = 0;                                      // entries in buf to sort
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.mask = 0;
    sh.above = 0;
    sh.count = 0;
  }
  __syncthreads();
  bool collected = false;
  if (kk <= 0) {
    collected = true;
  } else if (n <= B) {
    src.visit(0, n, [&](int64_t i, const uint32_t(&key)[Src::W], unsigned valid) {
#pragma unroll
      for (int j = 0; j < Src::W; j++)
        if (valid >> j & 1u) buf[i + j] = select_composite(key[j], i + j);
    });
    M = n;
    collected = true;
  } else if (2 * kk <= B && !(flags & SELECT_NO_SAMPLE)) {
    // case 2: a threshold from B evenly spaced samples
    for (int s = threadIdx.x; s < B; s += NT) {
      const int64_t i = (int64_t)s * n / B;
      buf[s] = select_composite(src.key_at(i), i);
    }
    __syncthreads();
    IXL_PROF(if (prof) tp[1] = clock64();)
    block_bitonic_sort<NT>(buf, B);
    IXL_PROF(if (prof) tp[2] = clock64();)
    if (threadIdx.x == 0) {
      int64_t j = ((kk + B) / 2) * (int64_t)B / n; // sample rank of the wanted count
      if (j >= B) j = B - 1;
      sh.t0 = ~(uint32_t)(buf[j] >> 32);
    }
    __syncthreads();
    const uint32_t t0 = sh.t0;
    src.visit(0, n, [&](int64_t i, const uint32_t(&key)[Src::W], unsigned valid) {
      unsigned take = 0;
#pragma unroll
      for (int j = 0; j < Src::W; j++) take |= (unsigned)(key[j] >= t0) << j;
      select_append<Src::W>(take & valid, key, i, buf, B, &sh.count);
    });
    __syncthreads();
    IXL_PROF(if (prof) tp[3] = clock64();)
    const int64_t c = sh.count;
    if (c >= kk && c <= B) {
      M = c;
      collected = true;
      IXL_PROF(path = 2;)
    }
    __syncthreads();
    if (threadIdx.x == 0) sh.count = 0;
    __syncthreads();
  }
  if (!collected) {
    const int npass = key16 ? 2 : 3;
    for (int p = 0; p < npass && !collected; p++) {
      // digits from the top: fp32 keys 11/11/10 bits, bf16 keys (top 16 bits) 8/8
      const int shift = key16 ? (p == 0 ? 24 : 16) : (p == 0 ? 21 : p == 1 ? 10 : 0);
      const int nbins = key16 ? 256 : (p < 2 ? 2048 : 1024);
      for (int b = threadIdx.x; b < nbins; b += NT) hist[b] = 0;
      __syncthreads();
      const uint32_t prefix = sh.prefix, mask = sh.mask;
      src.visit(0, n, [&](int64_t, const uint32_t(&key)[Src::W], unsigned valid) {
#pragma unroll
        for (int j = 0; j < Src::W; j++)
          select_hist_add(hist, (valid >> j & 1u) && (key[j] & mask) == prefix,
                          (key[j] >> shift) & (unsigned)(nbins - 1));
      });
      __syncthreads();
      select_find_bin<NT>(hist, nbins, shift, kk, sh);
      IXL_PROF(if (prof) tp[4] = clock64(); path = 30 + p;)
      if (kk <= B && sh.above + sh.inbin <= B) {
        // every key >= the new prefix fits: collect them (all keys above the bin, the bin)
        const uint32_t lo = sh.prefix;
        src.visit(0, n, [&](int64_t i, const uint32_t(&key)[Src::W], unsigned valid) {
          unsigned take = 0;
#pragma unroll
          for (int j = 0; j < Src::W; j++) take |= (unsigned)(key[j] >= lo) << j;
          select_append<Src::W>(take & valid, key, i, buf, B, &sh.count);
        });
        __syncthreads();
        M = sh.above + sh.inbin;
        collected = true;
      }
    }
    if (!collected) {
      IXL_PROF(path = 4;)
      const uint32_t t = sh.prefix; // every digit known: the kk-th largest key itself
      const int64_t need = kk - sh.above;
      if (kk <= B) {
        M = select_ordered_pass<NT>(src, n, t, need, false, out, buf, B, sh);
      } else {
        select_ordered_pass<NT>(src, n, t, need, true, out, buf, B, sh);
        if (sorted) global_bitonic_sort<NT>(src, out, kk);
        for (int64_t j = kk + threadIdx.x; j < k; j += NT) out[j] = -1;
        return;
      }
    }
  }
  __syncthreads();
  IXL_PROF(if (prof) tp[5] = clock64();)
  // sort buf[0..M) by (key desc, index asc), keep kk; unsorted mode re-sorts those by index
  if (M > 1) {
    int P = 1;
    while (P < M) P <<= 1;
    for (int j = (int)M + threadIdx.x; j < P; j += NT) buf[j] = ~0ull;
    __syncthreads();
    block_bitonic_sort<NT>(buf, P);
    if (!sorted && kk > 1) {
      int P2 = 1;
      while (P2 < kk) P2 <<= 1;
      for (int j = threadIdx.x; j < P2; j += NT) buf[j] = j < kk ? (buf[j] & 0xffffffffull) : ~0ull;
      __syncthreads();
      block_bitonic_sort<NT>(buf, P2);
    }
  }
  for (int64_t j = threadIdx.x; j < k; j += NT)
    out[j] = j < kk ? (int32_t)(uint32_t)(buf[j] & 0xffffffffull) : -1;
#ifdef IXL_SELECT_PROFILE
  if (prof) {
    tp[6] = clock64();
    printf("select profile: n %lld k %lld B %d path %d M %lld | cycles: sample %lld, "
           "sample sort %lld, filter %lld, histogram passes %lld, to collected %lld, "
           "sorts+write %lld, total %lld\n",
           (long long)n, (long long)k, B, path, (long long)M, tp[1] ? tp[1] - tp[0] : 0,
           tp[2] ? tp[2] - tp[1] : 0, tp[3] ? tp[3] - tp[2] : 0,
           tp[4] ? tp[4] - (tp[3] ? tp[3] : tp[0]) : 0, tp[5] - tp[0], tp[6] - tp[5],
           tp[6] - tp[0]);
  }
#endif
}

// Shared-memory entries for a select of k from rows of up to C columns: at least 2k (room
// for the sampled threshold's margin) and 2048, doubled for long rows (C > 32 B, where B
// samples would estimate the threshold too coarsely), at most 8192 (64 KiB).
// IXL_SELECT_BUFFER (a power of two in [32, 8192]) overrides it, so tests reach the
// histogram, tie and large-k paths on small rows.
static inline int select_buffer_entries(int64_t k, int64_t C) {
  const char *env = getenv("IXL_SELECT_BUFFER");
  if (env && *env) {
    const long v = strtol(env, NULL, 10);
    if (v >= 32 && v <= 8192 && (v & (v - 1)) == 0) return (int)v;
  }
  int B = 2048;
  while (B < 2 * k && B < 8192) B <<= 1;
  if (C > 32 * (int64_t)B && B < 8192) B <<= 1;
  return B;
}

// A development switch read from the environment: IXL_SELECT_NO_SAMPLE=1.
static inline int select_flags(void) {
  const char *a = getenv("IXL_SELECT_NO_SAMPLE");
  return a && a[0] == '1' ? SELECT_NO_SAMPLE : 0;
}

static inline size_t select_smem_bytes(int B) {
  // the buffer doubles as the 2048-bin histogram (8 KiB)
  size_t bytes = (size_t)B * sizeof(uint64_t);
  return bytes < 2048 * sizeof(unsigned) ? 2048 * sizeof(unsigned) : bytes;
}

} // namespace ixl

#endif
