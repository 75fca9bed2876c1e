/* logits/k1_window.h - K1's row window inside a chunk of output columns: the rule every CUDA K1
 * kernel applies per query row (logits_v1.cuh's tile engine, logits v2's MXFP4 kernels through
 * v2_mx_common.cuh), written once, as a function that runs on the host too (C included).
 *
 * Row r reads keys [ks, ke) of K's N rows (clamped: 0 <= ks' <= ke' <= N). A CTA owns the
 * output columns [c0, chunk_hi) of the row. Full layout: output column n is key n, so the CTA
 * reads keys [max(ks', c0), min(ke', chunk_hi)); compressed: output column n is key ks' + n, so
 * it reads keys [ks' + c0, ks' + min(ke' - ks', chunk_hi)). Either window is empty (hi = lo)
 * when it would be negative. */
#ifndef IXL_LOGITS_K1_WINDOW_H
#define IXL_LOGITS_K1_WINDOW_H

#include <stdint.h>

#ifdef __CUDACC__
#define IXL_K1W_FN static __host__ __device__ __forceinline__
#else
#define IXL_K1W_FN static inline
#endif

typedef struct {
  int64_t lo, hi; /* the keys [lo, hi) the CTA reads for the row */
  int64_t co;     /* output column of key n: n - co (compressed: ks'; full: 0) */
  int64_t keys;   /* ke' - ks': the row's length (its compressed columns) */
} ixl_k1_window;

IXL_K1W_FN ixl_k1_window ixl_k1_window_of(int64_t ks, int64_t ke, int64_t N, int compressed,
                                          int64_t c0, int64_t chunk_hi) {
  ixl_k1_window w;
  const int64_t ksr = ks < 0 ? 0 : ks > N ? N : ks;
  const int64_t ker = ke < ksr ? ksr : ke > N ? N : ke;
  w.keys = ker - ksr;
  if (compressed) {
    w.co = ksr;
    w.lo = ksr + c0;
    w.hi = ksr + (ker - ksr < chunk_hi ? ker - ksr : chunk_hi);
  } else {
    w.co = 0;
    w.lo = ksr > c0 ? ksr : c0;
    w.hi = ker < chunk_hi ? ker : chunk_hi;
  }
  if (w.hi < w.lo) w.hi = w.lo;
  return w;
}

#if defined(__CUDACC__) && defined(__cplusplus)
/* K1: the windows of rows row0 + tid of a CTA (tid < nrows; rows past R empty) in the chunk
 * [c0, chunk_hi) into s_lo / s_hi / s_co. EMIT (K3's fused block scores): also s_len[tid], the
 * row's length in output columns (at most out_cols; 0 past R), and, where nblocks is given (the
 * chunk-0 CTAs of a call with block scores), nblocks[r] = its number of blocks of cbs. */
template <bool EMIT>
__device__ __forceinline__ void ixl_k1_row_windows(int tid, int nrows, int64_t row0, int64_t R,
                                                   const int32_t *ks, const int32_t *ke,
                                                   int64_t N, int compressed, int64_t c0,
                                                   int64_t chunk_hi, int64_t *s_lo,
                                                   int64_t *s_hi, int64_t *s_co, int64_t *s_len,
                                                   int32_t *nblocks, int64_t out_cols, int cbs) {
  if (tid >= nrows) return;
  int64_t lo = 0, hi = 0, co = 0;
  const int64_t r = row0 + tid;
  if (r < R) {
    const ixl_k1_window w = ixl_k1_window_of(ks[r], ke[r], N, compressed, c0, chunk_hi);
    lo = w.lo;
    hi = w.hi;
    co = w.co;
    if (EMIT) {
      const int64_t len = w.keys < out_cols ? w.keys : out_cols;
      s_len[tid] = len;
      if (nblocks) nblocks[r] = (int32_t)((len + cbs - 1) / cbs);
    }
  } else if (EMIT) {
    s_len[tid] = 0;
  }
  s_lo[tid] = lo;
  s_hi[tid] = hi;
  s_co[tid] = co;
}
#endif

#endif
