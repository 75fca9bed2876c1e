/* numerics/exact.h - how the exact numeric rules of idxlab are compiled: one function qualifier
 * for code that is both host and device (IXL_NUM_FN) and one set of exact-op macros, each a
 * single IEEE-754 operation rounded to nearest even.
 *
 * Why macros: the CPU reference and the CUDA kernels must give the same bits, so nothing may be
 * fused or approximated:
 * - device code spells every operation as an _rn intrinsic (__fadd_rn, __dmul_rn, ...), which
 *   nvcc never contracts into an FMA and never replaces by a fast approximation;
 * - host code is C11 with FP_CONTRACT off (the Makefile passes -ffp-contract=off to every C
 *   build; gcc -std=c11 does not contract anyway, clang obeys the pragma below), on x86-64
 *   SSE2 arithmetic (FLT_EVAL_METHOD 0: no excess precision), where + - * / and sqrt are
 *   correctly rounded.
 * Every header of core/numerics/ compiles as C11 (gcc, clang) and as CUDA C++ (nvcc, host and
 * device); it includes nothing from kernels/ and declares no symbol (all static inline). */
#ifndef IXL_NUMERICS_EXACT_H
#define IXL_NUMERICS_EXACT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define IXL_NUM_FN static __host__ __device__ __forceinline__
#else
#define IXL_NUM_FN static inline
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif
#endif

#if defined(__CUDA_ARCH__)
#define IXL_FADD(a, b) __fadd_rn((a), (b))
#define IXL_FSUB(a, b) __fsub_rn((a), (b))
#define IXL_FMUL(a, b) __fmul_rn((a), (b))
#define IXL_FDIV(a, b) __fdiv_rn((a), (b))
#define IXL_FSQRT(a) __fsqrt_rn(a)
#define IXL_DADD(a, b) __dadd_rn((a), (b))
#define IXL_DSUB(a, b) __dsub_rn((a), (b))
#define IXL_DMUL(a, b) __dmul_rn((a), (b))
#define IXL_DDIV(a, b) __ddiv_rn((a), (b))
#define IXL_DSQRT(a) __dsqrt_rn(a)
#define IXL_D2F(a) __double2float_rn(a)
#define IXL_U2F(x) __uint2float_rn(x)
#else
#include <math.h>
#define IXL_FADD(a, b) ((float)(a) + (float)(b))
#define IXL_FSUB(a, b) ((float)(a) - (float)(b))
#define IXL_FMUL(a, b) ((float)(a) * (float)(b))
#define IXL_FDIV(a, b) ((float)(a) / (float)(b))
#define IXL_FSQRT(a) sqrtf(a)
#define IXL_DADD(a, b) ((double)(a) + (double)(b))
#define IXL_DSUB(a, b) ((double)(a) - (double)(b))
#define IXL_DMUL(a, b) ((double)(a) * (double)(b))
#define IXL_DDIV(a, b) ((double)(a) / (double)(b))
#define IXL_DSQRT(a) sqrt(a)
#define IXL_D2F(a) ((float)(a))
#define IXL_U2F(x) ((float)(uint32_t)(x))
#endif

#endif
