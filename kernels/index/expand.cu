// expand.cu - K4 on the GPU (ixl_cuda_expand): candidate blocks -> sparse block ids and end,
// once per step; the same results as kernels/index/expand.c.
//
// Per row (one CTA): a candidate c is valid when c >= 0 and c*ratio < nblocks (nblocks =
// ceil(max(ke-ks, 0) / sbk)), that is c < ncb = ceil(nblocks / ratio); the valid, distinct
// candidates in ascending order expand to the blocks c*ratio + i (i < ratio, < nblocks), each
// written as block + ks/sbk. Instead of sorting the list, the CTA marks the valid candidates in
// a shared bitmap over [0, ncb) (one window of WINDOW_BITS ids holds every row up to 131072
// candidate blocks; longer rows take several windows), and a block-wide scan of the bit counts
// gives every candidate its slot: all runs are ratio long except that of candidate ncb - 1, the
// only one that can be cut short. The ids go to a shared staging row when the row's slots fit
// (STAGE), then out in one coalesced pass together with the pads; slots past n_valid repeat the
// last id (an empty row: ks/sbk). Both ks_modes give the same ids (aligned only refuses, on the
// host, a non-empty row whose ks is not a multiple of sbk).
//
// The candidates are read once per window, straight into registers; the first ones are
// requested before the row's range, so the two loads' latencies overlap. IXL_EXPAND_V1=1
// (test-only) runs the previous kernel (a min/max pass, then windows from the smallest valid
// id), kept for comparison. The kernel has two launch shapes (expand_v2_kernel's comment):
// the narrow one where the rows fill more than one wave of the wide one (use_narrow).
//
// PDL (cuda/launch.cuh, IXL_PDL): both kernels open with pdl_wait() (the candidates and the
// row ranges are a previous kernel's output, and the ids and ends may still be read by one),
// then pdl_trigger(): a dependent PDL launch (K4 after K4 in a batch, K5 after K4 where the
// logits launch so) may start its CTAs while this grid runs; it waits for this grid's end
// before it reads the ids. ixl_cuda_pdl_override, the process switch's hook for the tests'
// A/B in one process, is defined here (once for the library).
#include "cuda/common.cuh"

namespace {

using namespace ixl;
constexpr int NT = 256; // the previous kernel (v1)
constexpr int WINDOW_WORDS = 1024; // 32768 candidate ids per window, 4 KiB of shared memory
constexpr int WORDS_PER_THREAD = WINDOW_WORDS / NT;
constexpr int64_t WINDOW_BITS = (int64_t)WINDOW_WORDS * 32;

__global__ void __launch_bounds__(NT) expand_kernel(const int32_t *__restrict__ cand, int64_t T,
                                                    const int32_t *__restrict__ row_ks,
                                                    const int32_t *__restrict__ row_ke, int ratio,
                                                    int sbk, int32_t *__restrict__ ids, int64_t nsb,
                                                    int32_t *__restrict__ end) {
  __shared__ uint32_t bits[WINDOW_WORDS];
  __shared__ int64_t ws[NT / 32 + 1];
  __shared__ int64_t cmin_s, cmax_s;
  pdl_wait();
  pdl_trigger();
  const int64_t r = blockIdx.x;
  const int64_t ks = row_ks ? row_ks[r] : 0, ke = row_ke[r];
  const int64_t len = ke > ks ? ke - ks : 0;
  const int64_t nblocks = (len + sbk - 1) / sbk;
  const int64_t ncb = (nblocks + ratio - 1) / ratio; // valid candidate ids: [0, ncb)
  const int64_t base = ks / sbk;
  const int32_t *cr = cand + r * T;
  int32_t *out = ids + r * nsb;

  // the smallest and largest valid candidate bound the windows to scan
  if (threadIdx.x == 0) {
    cmin_s = INT64_MAX;
    cmax_s = -1;
  }
  __syncthreads();
  int64_t lo = INT64_MAX, hi = -1;
  for (int64_t t = threadIdx.x; t < T; t += NT) {
    const int64_t c = cr[t];
    if (c >= 0 && c < ncb) {
      lo = c < lo ? c : lo;
      hi = c > hi ? c : hi;
    }
  }
  if (hi >= 0) {
    atomicMin((unsigned long long *)&cmin_s, (unsigned long long)lo);
    atomicMax((long long *)&cmax_s, (long long)hi);
  }
  __syncthreads();
  const int64_t cmin = cmin_s, cmax = cmax_s;

  int64_t placed = 0; // distinct valid candidates placed so far
  if (cmax >= 0) {
    for (int64_t w0 = cmin; w0 <= cmax; w0 += WINDOW_BITS) {
      for (int w = threadIdx.x; w < WINDOW_WORDS; w += NT) bits[w] = 0;
      __syncthreads();
      const int64_t w1 = w0 + WINDOW_BITS; // window [w0, w1)
      for (int64_t t = threadIdx.x; t < T; t += NT) {
        const int64_t c = cr[t];
        if (c >= w0 && c < w1 && c <= cmax) atomicOr(&bits[(c - w0) >> 5], 1u << ((c - w0) & 31));
      }
      __syncthreads();
      // this thread's words are [tid*WPT, tid*WPT + WPT): contiguous, so order is kept
      uint32_t mine[WORDS_PER_THREAD];
      int64_t cnt = 0;
#pragma unroll
      for (int u = 0; u < WORDS_PER_THREAD; u++) {
        mine[u] = bits[threadIdx.x * WORDS_PER_THREAD + u];
        cnt += __popc(mine[u]);
      }
      int64_t total;
      int64_t q = placed + block_exclusive_scan<NT, int64_t>(cnt, &total, ws);
#pragma unroll
      for (int u = 0; u < WORDS_PER_THREAD; u++) {
        uint32_t m = mine[u];
        while (m) {
          const int bit = __ffs(m) - 1;
          m &= m - 1;
          const int64_t c = w0 + (int64_t)(threadIdx.x * WORDS_PER_THREAD + u) * 32 + bit;
          for (int i = 0; i < ratio; i++) {
            const int64_t b = c * ratio + i;
            if (b >= nblocks) break;
            if (q * ratio + i < nsb) out[q * ratio + i] = (int32_t)(b + base);
          }
          q++;
        }
      }
      placed += total;
      __syncthreads(); // bits is cleared for the next window
    }
  }
  // every run is ratio long except the last candidate's, cut at nblocks
  int64_t n_valid = 0, last = -1;
  if (placed > 0) {
    last = cmax * ratio + ratio - 1 < nblocks - 1 ? cmax * ratio + ratio - 1 : nblocks - 1;
    n_valid = (placed - 1) * ratio + (last - cmax * ratio + 1);
  }
  const int32_t pad = (int32_t)(n_valid > 0 ? last + base : base);
  for (int64_t j = n_valid + threadIdx.x; j < nsb; j += NT) out[j] = pad;
  if (threadIdx.x == 0) {
    int64_t e = 0;
    if (n_valid > 0) {
      int64_t tail = ke - (last * sbk + ks);
      if (tail > sbk) tail = sbk;
      e = (n_valid - 1) * sbk + tail;
    }
    end[r] = (int32_t)e;
  }
}

// ---------------------------------------------------------------- K4
// One CTA a row, NT2 threads, a bitmap window of WWORDS words and STAGE staged slots. The wide
// shape (512 threads, 16 KiB + 16 KiB, 59 registers: 2 CTAs an SM) holds a 1M-position row in
// one window; the narrow one (use_narrow: 128 threads, 8 KiB + 8 KiB, held to 48
// registers by MINB, no spills) runs 10 rows at once on an SM for the many rows of a prefill
// chunk, and takes two windows (the candidates read twice) only past 65536 candidate blocks.
constexpr int CREG = 8; // candidates per thread per load round

template <int NT2, int WWORDS, int STAGE, int MINB>
__global__ void __launch_bounds__(NT2, MINB) expand_v2_kernel(
    const int32_t *__restrict__ cand, int64_t T, const int32_t *__restrict__ row_ks,
    const int32_t *__restrict__ row_ke, int ratio, int sbk, int32_t *__restrict__ ids,
    int64_t nsb, int32_t *__restrict__ end) {
  constexpr int64_t WBITS = (int64_t)WWORDS * 32; // candidate ids per window
  constexpr int WPT2 = WWORDS / NT2;              // words per thread at most
  __shared__ uint32_t bits[WWORDS];
  __shared__ int32_t stage[STAGE];
  __shared__ int ws[NT2 / 32 + 1];
  const int tid = (int)threadIdx.x;
  const int64_t r = blockIdx.x;
  const int32_t *cr = cand + r * T;
  pdl_wait();    // before the first global access (cuda/launch.cuh's rule)
  pdl_trigger(); // safe anywhere: a dependent waits for this grid's end, not for this
  // the first candidates go to registers before anything else: their loads do not wait for
  // the row's range
  int32_t c[CREG];
#pragma unroll
  for (int u = 0; u < CREG; u++) {
    const int64_t t = (int64_t)u * NT2 + tid;
    c[u] = t < T ? cr[t] : -1;
  }
  const int64_t ks = row_ks ? row_ks[r] : 0, ke = row_ke[r];
  const int64_t len = ke > ks ? ke - ks : 0;
  const int64_t nblocks = (len + sbk - 1) / sbk;
  const int64_t ncb = T > 0 ? (nblocks + ratio - 1) / ratio : 0; // candidate ids: [0, ncb)
  const int64_t base = ks / sbk;
  int32_t *out = ids + r * nsb;
  const bool staged = nsb <= STAGE;

  int64_t placed = 0;   // distinct valid candidates placed so far
  bool last_cut = false; // candidate ncb - 1 is present (its run is cut at nblocks)
  for (int64_t w0 = 0; w0 < ncb; w0 += WBITS) {
    const int64_t span = ncb - w0 < WBITS ? ncb - w0 : WBITS;
    const int nw = (int)((span + 31) >> 5);
    if (w0 > 0) // a later window reads the candidates again
#pragma unroll
      for (int u = 0; u < CREG; u++) {
        const int64_t t = (int64_t)u * NT2 + tid;
        c[u] = t < T ? cr[t] : -1;
      }
    for (int i = tid; i < nw; i += NT2) bits[i] = 0;
    __syncthreads();
    for (int64_t t0 = 0;;) {
#pragma unroll
      for (int u = 0; u < CREG; u++) {
        const int64_t d = (int64_t)c[u] - w0;
        if (d >= 0 && d < span) atomicOr(&bits[d >> 5], 1u << (d & 31));
      }
      t0 += (int64_t)CREG * NT2;
      if (t0 >= T) break;
#pragma unroll
      for (int u = 0; u < CREG; u++) {
        const int64_t t = t0 + (int64_t)u * NT2 + tid;
        c[u] = t < T ? cr[t] : -1;
      }
    }
    __syncthreads();
    // this thread's words are [tid*wpt, tid*wpt + wpt): contiguous, so order is kept
    const int wpt = (nw + NT2 - 1) / NT2;
    uint32_t mine[WPT2];
    int cnt = 0;
#pragma unroll
    for (int u = 0; u < WPT2; u++) {
      const int w = tid * wpt + u;
      mine[u] = u < wpt && w < nw ? bits[w] : 0u;
      cnt += __popc(mine[u]);
    }
    if (w0 + span == ncb) {
      const int64_t d = ncb - 1 - w0;
      last_cut = (bits[d >> 5] >> (d & 31)) & 1u;
    }
    int total;
    const int before = block_exclusive_scan<NT2, int>(cnt, &total, ws);
    int64_t q = placed + before;
#pragma unroll
    for (int u = 0; u < WPT2; u++) {
      uint32_t m = mine[u];
      while (m) {
        const int bit = __ffs(m) - 1;
        m &= m - 1;
        const int64_t cid = w0 + (int64_t)(tid * wpt + u) * 32 + bit;
        for (int i = 0; i < ratio; i++) {
          const int64_t b = cid * ratio + i, slot = q * ratio + i;
          if (b >= nblocks) break;
          if (staged) stage[slot] = (int32_t)(b + base);
          else if (slot < nsb) out[slot] = (int32_t)(b + base);
        }
        q++;
      }
    }
    placed += total;
    if (w0 + span < ncb) __syncthreads(); // bits is cleared for the next window
  }
  // every run is ratio long except that of candidate ncb - 1, cut at nblocks
  const int64_t n_valid =
      placed > 0 ? placed * ratio - (last_cut ? ncb * ratio - nblocks : 0) : 0;
  __syncthreads(); // the ids (staged or in global memory) are visible to the whole CTA
  const int32_t pad =
      n_valid > 0 ? (staged ? stage[n_valid - 1] : out[n_valid - 1]) : (int32_t)base;
  if (staged) {
    for (int64_t j = tid; j < nsb; j += NT2) out[j] = j < n_valid ? stage[j] : pad;
  } else {
    for (int64_t j = n_valid + tid; j < nsb; j += NT2) out[j] = pad;
  }
  if (tid == 0) {
    int64_t e = 0;
    if (n_valid > 0) {
      const int64_t last = (int64_t)pad - base;
      int64_t tail = ke - (last * sbk + ks);
      if (tail > sbk) tail = sbk;
      e = (n_valid - 1) * sbk + tail;
    }
    end[r] = (int32_t)e;
  }
}

bool env_on(const char *name) { // read at each launch: the tests switch it in one process
  const char *e = getenv(name);
  return e && e[0] == '1';
}

// The narrow shape where the rows fill more than the wide shape's one wave (2 CTAs an SM): on
// the H200 (session 8 visit 2) 4096 prefill rows 85.3 -> 47.3 us batch, but 64 decode rows
// 5.5 -> 8.3 us (a row's CTA has a quarter of the threads). IXL_EXPAND_NARROW=1 / 0 forces it
// on / off (read at each launch: the tests switch it in one process).
bool use_narrow(ixl_ctx *ctx, int64_t R) {
  const char *e = getenv("IXL_EXPAND_NARROW");
  if (e && e[0] == '1' && e[1] == '\0') return true;
  if (e && e[0] == '0' && e[1] == '\0') return false;
  return R > 2 * (int64_t)sm_count(ctx);
}

} // namespace

extern "C" ixl_status ixl_cuda_expand(ixl_ctx *ctx, const ixl_tensor *cand,
                                      const ixl_tensor *row_ks, const ixl_tensor *row_ke,
                                      int candidate_block_size, int sparse_block_kv,
                                      ixl_ks_mode ks_mode, ixl_tensor *sparse_ids,
                                      ixl_tensor *end) {
  (void)ks_mode; // both modes give the same ids; aligned-mode refusals are the host's
  const int64_t R = cand->shape[0], T = cand->shape[1], nsb = sparse_ids->shape[1];
  if (R == 0) return IXL_OK;
  if (R > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "expand: cand: shape[0] = %lld: must be <= %d rows on the GPU",
                         (long long)R, INT32_MAX);
  const int ratio = candidate_block_size / sparse_block_kv;
  const int32_t *cd = T ? (const int32_t *)cand->data : nullptr;
  const int32_t *ksd = row_ks ? (const int32_t *)row_ks->data : nullptr;
  int32_t *idd = nsb ? (int32_t *)sparse_ids->data : nullptr;
  const int32_t *ked = (const int32_t *)row_ke->data;
  int32_t *endd = (int32_t *)end->data;
  if (env_on("IXL_EXPAND_V1"))
    return launch_pdl(ctx, "expand", expand_kernel, dim3((unsigned)R), dim3(NT), 0, 1, cd, T,
                      ksd, ked, ratio, sparse_block_kv, idd, nsb, endd);
  if (use_narrow(ctx, R))
    return launch_pdl(ctx, "expand", expand_v2_kernel<128, 2048, 2048, 10>, dim3((unsigned)R),
                      dim3(128), 0, 1, cd, T, ksd, ked, ratio, sparse_block_kv, idd, nsb, endd);
  return launch_pdl(ctx, "expand", expand_v2_kernel<512, 4096, 4096, 0>, dim3((unsigned)R),
                    dim3(512), 0, 1, cd, T, ksd, ked, ratio, sparse_block_kv, idd, nsb, endd);
}

// The process's PDL switch (cuda/launch.cuh) from C: mode 0 / 1 turns PDL off / on for the rest
// of the process, -1 goes back to IXL_PDL's value; returns the state before (0 / 1). Test-only
// (tests/c/test_cuda_index.c's A/B in one process); not in the public API.
extern "C" int ixl_cuda_pdl_override(int mode) { return ixl::pdl_override(mode); }
