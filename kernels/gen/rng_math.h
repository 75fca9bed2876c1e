/* rng_math.h - the Philox4x32-10 block and the uniform -> normal transform, written once and
 * compiled both by the C compiler (core/rng.c) and by nvcc (kernels/gen/rng.cu), so one seed gives
 * the same floats on the CPU and the GPU.
 *
 * Why our own log and sin/cos: libm and CUDA's math library round differently, so Box-Muller
 * through them differs in the last bits between backends. Here every floating-point step is
 * one IEEE-754 double operation (+, -, *, /, sqrt), each correctly rounded, so the results are
 * the same on any conforming hardware provided nothing is fused:
 * - device code spells every operation as __dadd_rn/__dsub_rn/__dmul_rn/__ddiv_rn/__dsqrt_rn,
 *   which nvcc never contracts into an FMA;
 * - host code is C11 with FP_CONTRACT off (gcc -std=c11 does not contract; clang obeys the
 *   pragma), on x86-64 SSE2 double arithmetic.
 * The double results are far more accurate than the float outputs need (< 1e-15 relative). */
#ifndef IXL_RNG_MATH_H
#define IXL_RNG_MATH_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define IXL_RNG_FN static __host__ __device__ __forceinline__
#else
#define IXL_RNG_FN static inline
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif
#endif

#if defined(__CUDA_ARCH__)
#define IXL_DADD(a, b) __dadd_rn((a), (b))
#define IXL_DSUB(a, b) __dsub_rn((a), (b))
#define IXL_DMUL(a, b) __dmul_rn((a), (b))
#define IXL_DDIV(a, b) __ddiv_rn((a), (b))
#define IXL_DSQRT(a) __dsqrt_rn(a)
#define IXL_D2F(a) __double2float_rn(a)
#define IXL_FMUL(a, b) __fmul_rn((a), (b))
#define IXL_FADD(a, b) __fadd_rn((a), (b))
#define IXL_U2F(x) __uint2float_rn(x)
#else
#include <math.h>
#define IXL_DADD(a, b) ((double)(a) + (double)(b))
#define IXL_DSUB(a, b) ((double)(a) - (double)(b))
#define IXL_DMUL(a, b) ((double)(a) * (double)(b))
#define IXL_DDIV(a, b) ((double)(a) / (double)(b))
#define IXL_DSQRT(a) sqrt(a)
#define IXL_D2F(a) ((float)(a))
#define IXL_FMUL(a, b) ((float)(a) * (float)(b))
#define IXL_FADD(a, b) ((float)(a) + (float)(b))
#define IXL_U2F(x) ((float)(uint32_t)(x))
#endif

/* cuRAND's PHILOX4_32_10 generators hand out the stream in 4-value chunks that walk across
 * 2^16 subsequences before the counter advances: stream value p comes from the block with
 * counter (p/4) / 65536 (words 0-1) and subsequence (p/4) % 65536 (words 2-3), lane p % 4.
 * Checked against cuRAND's host generator for offsets up to 2^62 (tests/c/test_rng.c). */
#define IXL_PHILOX_SUBSEQUENCES 65536u

IXL_RNG_FN void ixl_philox_block(const uint32_t ctr_in[4], uint32_t key0, uint32_t key1,
                                 uint32_t out[4]) {
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ key0;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ key1;
    c0 = n0;
    c1 = (uint32_t)p1;
    c2 = n2;
    c3 = (uint32_t)p0;
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* The Philox block holding stream chunk `chunk` (= stream position / 4) for `seed`. */
IXL_RNG_FN void ixl_philox_chunk(uint64_t seed, uint64_t chunk, uint32_t out[4]) {
  uint64_t ctr = chunk / IXL_PHILOX_SUBSEQUENCES, sub = chunk % IXL_PHILOX_SUBSEQUENCES;
  uint32_t c[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), (uint32_t)sub, (uint32_t)(sub >> 32)};
  ixl_philox_block(c, (uint32_t)seed, (uint32_t)(seed >> 32), out);
}

/* curand_uniform's map: x * 2^-32 + 2^-33 in float, in (0, 1]. The product is exact (a power
 * of two), so fusing or not gives the same float. */
IXL_RNG_FN float ixl_u32_to_uniform(uint32_t x) {
  return IXL_FADD(IXL_FMUL(IXL_U2F(x), 2.3283064365386963e-10f), 1.1641532182693481e-10f);
}

IXL_RNG_FN uint64_t ixl_rng_d2bits(double x) {
#if defined(__CUDA_ARCH__)
  return (uint64_t)__double_as_longlong(x);
#else
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
#endif
}
IXL_RNG_FN double ixl_rng_bits2d(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double((long long)b);
#else
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
#endif
}

/* Natural log of a positive, finite, normal double x (the transform feeds it uniforms in
 * [2^-33, 1]). x = m * 2^e with m in [sqrt(1/2), sqrt(2)) by exponent bits (exact); then
 * log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716, by its odd series to s^27 (the
 * next term is below 1e-22); ln 2 is split so that e * ln2_hi is exact. */
IXL_RNG_FN double ixl_rng_log(double x) {
  uint64_t b = ixl_rng_d2bits(x);
  int64_t e = (int64_t)((b >> 52) & 0x7ff) - 1023;
  double m = ixl_rng_bits2d((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
  if (m > 1.4142135623730951) { /* keep m near 1 for a fast series */
    m = IXL_DMUL(m, 0.5);
    e += 1;
  }
  double s = IXL_DDIV(IXL_DSUB(m, 1.0), IXL_DADD(m, 1.0));
  double s2 = IXL_DMUL(s, s);
  /* Horner over 1/(2k+1) for k = 13..1, then * s2 * s + s. */
  double p = 1.0 / 27.0;
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 25.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 23.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 21.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 19.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 17.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 15.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 13.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 11.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 9.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 7.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 5.0);
  p = IXL_DADD(IXL_DMUL(p, s2), 1.0 / 3.0);
  double logm = IXL_DMUL(2.0, IXL_DADD(s, IXL_DMUL(IXL_DMUL(p, s2), s)));
  /* ln2_hi has 32 significant bits, so e * ln2_hi is exact for |e| < 2^20. */
  const double ln2_hi = 0.693147180369123816490, ln2_lo = 1.90821492927058770002e-10;
  double de = (double)e;
  return IXL_DADD(IXL_DMUL(de, ln2_hi), IXL_DADD(IXL_DMUL(de, ln2_lo), logm));
}

/* sin and cos of 2*pi*t for t in [0, 1] (a float uniform, so exact in double). The quarter
 * turn k = round(4t) comes off exactly (t - k/4 is exact), leaving |r| <= 1/8, an angle of at
 * most pi/4, where Taylor series to x^19 / x^18 are accurate below 1e-18. */
IXL_RNG_FN void ixl_rng_sincos_2pi(double t, double *sin_out, double *cos_out) {
  int k = (int)IXL_DADD(IXL_DMUL(t, 4.0), 0.5); /* t >= 0: truncation of t*4 + 0.5 rounds */
  double r = IXL_DSUB(t, IXL_DMUL((double)k, 0.25));
  double x = IXL_DMUL(r, 6.283185307179586476925);
  double x2 = IXL_DMUL(x, x);
  /* sin x = x (1 - x2/(2*3) (1 - x2/(4*5) (1 - ...))), nested from the inside. */
  double sp = 1.0;
  sp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, sp), 342.0)); /* 18*19 */
  sp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, sp), 272.0)); /* 16*17 */
  sp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, sp), 210.0)); /* 14*15 */
  sp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, sp), 156.0)); /* 12*13 */
  sp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, sp), 110.0)); /* 10*11 */
  sp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, sp), 72.0));  /* 8*9 */
  sp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, sp), 42.0));  /* 6*7 */
  sp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, sp), 20.0));  /* 4*5 */
  sp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, sp), 6.0));   /* 2*3 */
  double s = IXL_DMUL(x, sp);
  double cp = 1.0;
  cp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, cp), 306.0)); /* 17*18 */
  cp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, cp), 240.0)); /* 15*16 */
  cp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, cp), 182.0)); /* 13*14 */
  cp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, cp), 132.0)); /* 11*12 */
  cp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, cp), 90.0));  /* 9*10 */
  cp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, cp), 56.0));  /* 7*8 */
  cp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, cp), 30.0));  /* 5*6 */
  cp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, cp), 12.0));  /* 3*4 */
  cp = IXL_DSUB(1.0, IXL_DDIV(IXL_DMUL(x2, cp), 2.0));   /* 1*2 */
  double c = cp;
  /* rotate by k quarter turns: (cos, sin) -> (-sin, cos) per turn */
  switch (k & 3) {
    case 0:
      *sin_out = s;
      *cos_out = c;
      break;
    case 1:
      *sin_out = c;
      *cos_out = -s;
      break;
    case 2:
      *sin_out = -s;
      *cos_out = -c;
      break;
    default:
      *sin_out = -c;
      *cos_out = s;
      break;
  }
}

/* Box-Muller on one pair of uniforms (u1, u2) in (0, 1]: two standard normals, then
 * mean + stddev * z rounded once to float. u1 = 1 gives radius 0. */
IXL_RNG_FN void ixl_rng_box_muller(float u1, float u2, float mean, float stddev, float *z0,
                                   float *z1) {
  double radius = IXL_DSQRT(IXL_DMUL(-2.0, ixl_rng_log((double)u1)));
  double s, c;
  ixl_rng_sincos_2pi((double)u2, &s, &c);
  *z0 = IXL_D2F(IXL_DADD((double)mean, IXL_DMUL((double)stddev, IXL_DMUL(radius, c))));
  *z1 = IXL_D2F(IXL_DADD((double)mean, IXL_DMUL((double)stddev, IXL_DMUL(radius, s))));
}

/* Normal value i of the stream at `offset`: pair j = i / 2 uses stream values offset + 2j
 * and offset + 2j + 1 (uniforms), giving outputs 2j and 2j + 1. */
IXL_RNG_FN uint32_t ixl_philox_at(uint64_t seed, uint64_t pos) {
  uint32_t blk[4];
  ixl_philox_chunk(seed, pos / 4, blk);
  return blk[pos % 4];
}

#endif
