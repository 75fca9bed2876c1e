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

#endif
