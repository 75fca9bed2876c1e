/* logits/bench_peak.c - ixl_bench_fma_peak_gflops (idxlab.h): the machine's AVX2 FMA rate,
 * the ceiling that bench/cpu.lua prints beside each CPU kernel's GFLOP/s. A benchmark helper,
 * not a kernel: nothing in the library calls it. */
#include "logits/engine.h"

#include <omp.h>

#if IXL_HAVE_X86
#include <immintrin.h>
#endif

#if IXL_HAVE_X86
/* 10 independent 8-wide fma chains (2 ports x 4 cycles of latency need 8). The seeds come
 * through a volatile pointer and differ, so the compiler can neither merge the chains nor
 * hoist the call out of a timing loop. */
IXL_AVX2 __attribute__((noinline)) static double fma_loop(int64_t iters,
                                                          const volatile float *seed) {
  __m256 a0 = _mm256_set1_ps(seed[0]), a1 = _mm256_set1_ps(seed[1]), a2 = _mm256_set1_ps(seed[2]),
         a3 = _mm256_set1_ps(seed[3]), a4 = _mm256_set1_ps(seed[4]), a5 = _mm256_set1_ps(seed[5]),
         a6 = _mm256_set1_ps(seed[6]), a7 = _mm256_set1_ps(seed[7]), a8 = _mm256_set1_ps(seed[8]),
         a9 = _mm256_set1_ps(seed[9]);
  const __m256 m = _mm256_set1_ps(seed[10]), c = _mm256_set1_ps(seed[11]);
  for (int64_t i = 0; i < iters; i++) {
    a0 = _mm256_fmadd_ps(a0, m, c);
    a1 = _mm256_fmadd_ps(a1, m, c);
    a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c);
    a4 = _mm256_fmadd_ps(a4, m, c);
    a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c);
    a7 = _mm256_fmadd_ps(a7, m, c);
    a8 = _mm256_fmadd_ps(a8, m, c);
    a9 = _mm256_fmadd_ps(a9, m, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
  float o[8];
  _mm256_storeu_ps(o, s);
  return o[0];
}
#endif

static double now_s(void) { return ixl_now_us() * 1e-6; } /* the one host clock */

double ixl_bench_fma_peak_gflops(int threads, double seconds) {
#if IXL_HAVE_X86
  if (!ixl_engine_fast_available()) return 0.0;
  if (threads < 1) threads = 1;
  /* Each thread runs slices of 2^14 iterations (10 * 8 * 2 * 2^14 = 2.6 MFLOP) until `seconds`
   * have passed; the rate is the total over the whole interval, so it is measured the way a
   * kernel call of the same duration is. */
  const int64_t iters = 1 << 14;
  static const volatile float seed[12] = {1.0f, 1.1f, 1.2f, 1.3f, 1.4f,      1.5f,
                                          1.6f, 1.7f, 1.8f, 1.9f, 0.999999f, 1e-7f};
  double sink = 0.0, flops = 0.0;
  const double t0 = now_s(), t_end = t0 + seconds;
#pragma omp parallel num_threads(threads) reduction(+ : sink, flops)
  {
    do {
      sink += fma_loop(iters, seed);
      flops += (double)iters * 160.0;
    } while (now_s() < t_end);
  }
  const double dt = now_s() - t0;
  return sink == 12345.0 ? 0.0 : flops / dt * 1e-9; /* the test keeps the loop's result alive */
#else
  (void)threads;
  (void)seconds;
  return 0.0;
#endif
}
