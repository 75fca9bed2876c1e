/* rng_math.h - the uniform and normal transforms of the rng ops, written once and compiled
 * both by the C compiler (kernels/gen/rng.c) and by nvcc (kernels/gen/rng.cu), so one seed
 * gives the same floats on the CPU and the GPU. The random bits come from numerics/philox.h.
 *
 * Why our own log and sin/cos: libm and CUDA's math library round differently, so Box-Muller
 * through them differs in the last bits between backends. Here every floating-point step is
 * one IEEE-754 double operation (+, -, *, /, sqrt), each correctly rounded and never fused:
 * the exact-op macros of numerics/exact.h (IXL_DADD ...: __dadd_rn etc. on the device, plain
 * C11 without contraction on the host). The double results are far more accurate than the
 * float outputs need (< 1e-15 relative). */
#ifndef IXL_RNG_MATH_H
#define IXL_RNG_MATH_H

#include "numerics/philox.h"
#include "numerics/scalar.h"

/* curand_uniform's map: x * 2^-32 + 2^-33 in float, in (0, 1]. The product is exact (a power
 * of two), so fusing or not gives the same float. */
IXL_NUM_FN float ixl_u32_to_uniform(uint32_t x) {
  return IXL_FADD(IXL_FMUL(IXL_U2F(x), 2.3283064365386963e-10f), 1.1641532182693481e-10f);
}

/* Natural log of a positive, finite, normal double x (the transform feeds it uniforms in
 * [2^-33, 1]). x = m * 2^e with m in [sqrt(1/2), sqrt(2)) by exponent bits (exact); then
 * log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716, by its odd series to s^27 (the
 * next term is below 1e-22); ln 2 is split so that e * ln2_hi is exact. */
IXL_NUM_FN double ixl_rng_log(double x) {
  uint64_t b = ixl_f64_bits(x);
  int64_t e = (int64_t)((b >> 52) & 0x7ff) - 1023;
  double m = ixl_bits_f64((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
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
IXL_NUM_FN void ixl_rng_sincos_2pi(double t, double *sin_out, double *cos_out) {
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
 * mean + stddev * z rounded once to float. u1 = 1 gives radius 0. Normal value i of the
 * stream at `offset`: pair j = i / 2 uses stream values offset + 2j and offset + 2j + 1,
 * giving outputs 2j and 2j + 1. */
IXL_NUM_FN void ixl_rng_box_muller(float u1, float u2, float mean, float stddev, float *z0,
                                   float *z1) {
  double radius = IXL_DSQRT(IXL_DMUL(-2.0, ixl_rng_log((double)u1)));
  double s, c;
  ixl_rng_sincos_2pi((double)u2, &s, &c);
  *z0 = IXL_D2F(IXL_DADD((double)mean, IXL_DMUL((double)stddev, IXL_DMUL(radius, c))));
  *z1 = IXL_D2F(IXL_DADD((double)mean, IXL_DMUL((double)stddev, IXL_DMUL(radius, s))));
}

#endif
