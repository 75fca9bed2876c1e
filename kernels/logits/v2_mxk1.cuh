// logits/v2_mxk1.cuh - the warp-specialized MXFP4 K1 kernel of logits v2 (issue 13,
// logits_v2_mxk1_sm90.cu): its mbarrier helpers on 32-bit shared-window addresses. (Its entry
// point is in v2_mx_ws.h; the per-slot key factors its producer stores are v2_mx.cuh's
// ixl_v2mx_comb_factors_or0.)
#ifndef IXL_LOGITS_V2_MXK1_CUH
#define IXL_LOGITS_V2_MXK1_CUH

#include <stdint.h>

#include "logits/logits.h"
#include "logits/v2_mx.cuh"

// The entry point, ixl_cuda_logits_v2_mxk1 (K1 at H 32 unless IXL_LOGITS_V2_MX_WS is 0), is
// declared in v2_mx_ws.h beside the dispatcher's other hooks.


// ------------------------------------------------------------------ s8 path (kVarS8, WS=s)
// Session 8 (issue 13): MXFP4 K1 on s8 IGMMA with ONE accumulator a tile, where the group
// exponents allow it, so the epilogue converts one integer per head-logit (I2FP) instead of
// combining four group partials (3 FFMA). The rules, host-testable:
// - values: 2 e2m1 in {0, 1, 2, 3, 4, 6, 8, 12} times 2^a (a in [0, 3]) as s8, at most 96;
// - a key slot (scale word kw) folds when its exponents lie in V3's combine window
//   (ixl_v2mx_comb_word) and, after the CTA's per-group offsets G_g (byte g of G, 0 or 1),
//   within a window of 4: a_g = ke_g - G_g - kb in [0, 4], kb = min_g (ke_g - G_g). An a_g of
//   4 is written as 3 into the main k block and once more into an "overflow" k block (the same
//   query values there), so the tensor core sums q k 2^3 twice;
// - a query head (scale word qw) folds when no byte is 0xFF and b_g = qe_g - qmin + G_g <= 3;
// - then one s32 accumulator of 8 chained k32 IGMMA holds I = sum_g 4 s_g 2^(a_g + b_g) (s_g:
//   SPEC 3's unscaled group partial, a multiple of 1/4, |s_g| <= 1152), so |I| < 2^22 and the
//   dot is I 2^(qmin - 129) 2^(kb - 127) EXACTLY: a_g + b_g = (qe_g + ke_g) - (qmin + kb), the
//   exponent sums' spread is <= 7, and the CPU's fp32 (p0 + p1) + (p2 + p3) of those p_g is
//   exact (every partial a multiple of 2^(qmin + kb - 256) below 2^24 of them), so it equals
//   the integer sum scaled. The kernel folds 2^(qmin - 129) into the weight and defers
//   2^(kb - 127) (k0) to the head sum's end, as V3's deferred key factor (v2_mx.cuh): every
//   scaled value stays a normal number (the windows), so the bf16 chain rounds alike.
// A tile any of whose 64 slots does not fold, and a CTA any of whose 128 heads does not (or is
// not V3-fast), takes the e4m3 QGMMA path as before (the producer widens that tile so).
#ifdef __CUDACC__
#define IXL_MXK1_FN static __host__ __device__ __forceinline__
#else
#define IXL_MXK1_FN static inline
#endif

// PTX prmt.b32's default mode: byte i of the result is byte c[4i+2:4i] of {b, a} (a: bytes
// 0..3), or that byte's sign replicated when c[4i+3] is set (c's low 16 bits).
IXL_MXK1_FN uint32_t ixl_mxk1_prmt(uint32_t a, uint32_t b, uint32_t c) {
#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  const uint64_t ab = (uint64_t)b << 32 | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; i++) {
    const uint32_t sel = (c >> (4 * i)) & 15u;
    uint32_t byte = (uint32_t)(ab >> (8 * (sel & 7u))) & 0xFFu;
    if (sel & 8u) byte = byte & 0x80u ? 0xFFu : 0u;
    d |= byte << (8 * i);
  }
  return d;
#endif
}

// One raw word x (8 e2m1 codes, element e in nibble e) as s8 values 2 e2m1 2^a (a in 0..3):
// *lo = elements 0..3 (byte j: element j), *hi = elements 4..7. Two lookups a half: the
// positive codes' magnitudes (a negative code's selector has its sign bit, which gives 0 from
// a table of bytes <= 96) and the negative codes' (the same on x ^ 0x8888); then per byte
// p - n + 128 never borrows (|p - n| <= 96) and ^ 0x80 makes it two's complement (-0: 0).
IXL_MXK1_FN void ixl_mxk1_s8_widen(uint32_t x, int a, uint32_t *lo, uint32_t *hi) {
  const uint32_t tl = 0x03020100u << a, th = 0x0C080604u << a, xf = x ^ 0x88888888u;
  const uint32_t pa = ixl_mxk1_prmt(tl, th, x), pb = ixl_mxk1_prmt(tl, th, x >> 16);
  const uint32_t na = ixl_mxk1_prmt(tl, th, xf), nb = ixl_mxk1_prmt(tl, th, xf >> 16);
  *lo = (pa + 0x80808080u - na) ^ 0x80808080u;
  *hi = (pb + 0x80808080u - nb) ^ 0x80808080u;
}

// A key slot's fold (scale word kw, offsets G): returns 1 when it folds; then *sh = the packed
// a_g (byte g, 0..4) and *k0 = the fp32 bits of 2^(kb - 127); else *sh = *k0 = 0.
IXL_MXK1_FN int ixl_mxk1_slot_s8(uint32_t kw, uint32_t G, uint32_t *sh, uint32_t *k0) {
  int e[4], lo = 1 << 20, hi = -(1 << 20);
  for (int g = 0; g < 4; g++) {
    e[g] = (int)((kw >> (8 * g)) & 0xFFu) - (int)((G >> (8 * g)) & 0xFFu);
    lo = e[g] < lo ? e[g] : lo;
    hi = e[g] > hi ? e[g] : hi;
  }
  const int ok = ixl_v2mx_comb_word(kw) && hi - lo <= 4 && lo >= 1;
  uint32_t s = 0;
  for (int g = 0; g < 4; g++) s |= (uint32_t)(e[g] - lo) << (8 * g);
  *sh = ok ? s : 0u;
  *k0 = ok ? (uint32_t)lo << 23 : 0u;
  return ok;
}

// A query head's fold (scale word qw, offsets G): returns 1 when it folds; then *sh = the packed
// b_g (byte g, 0..3) and *qmin its smallest exponent byte; else *sh = 0.
IXL_MXK1_FN int ixl_mxk1_col_s8(uint32_t qw, uint32_t G, uint32_t *sh, int *qmin) {
  int lo = 255, ok = 1;
  for (int g = 0; g < 4; g++) {
    const int b = (int)((qw >> (8 * g)) & 0xFFu);
    lo = b < lo ? b : lo;
    ok &= b != 0xFF;
  }
  uint32_t s = 0;
  for (int g = 0; g < 4; g++) {
    const int d = (int)((qw >> (8 * g)) & 0xFFu) - lo + (int)((G >> (8 * g)) & 0xFFu);
    ok &= d <= 3;
    s |= (uint32_t)(d & 0xFF) << (8 * g);
  }
  *sh = ok ? s : 0u;
  *qmin = lo;
  return ok;
}

#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
// mbarrier operations on a 32-bit shared-window address (PTX ISA "mbarrier"): the kernel keeps
// its barriers' base address in one register, so a wait or an arrival costs an add, not the
// generic-to-shared conversion cuda::ptx's pointer forms recompute each time.
// try_wait.parity (acquire.cta): 1 once the phase of the given parity has completed.
__device__ __forceinline__ uint32_t ixl_mxk1_try_wait(uint32_t addr, uint32_t parity) {
  uint32_t ok;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               "selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(ok)
               : "r"(addr), "r"(parity)
               : "memory");
  return ok;
}
// The wait, bounded like ixl::sm90::mbar_wait (a lost arrival traps after ~30 s, no hang).
__device__ __forceinline__ void ixl_mxk1_wait(uint32_t addr, uint32_t parity) {
  if (ixl_mxk1_try_wait(addr, parity)) return;
  const long long t0 = clock64();
  while (!ixl_mxk1_try_wait(addr, parity))
    if (clock64() - t0 > 60000000000LL) __trap();
}
// The same for a waiter with slack (the producer waiting for a free stage): between the polls
// the warp sleeps ~ns nanoseconds, so its spinning takes no issue slots from the math warps
// (in the H200 profile of 2026-12-02 the producer's spin was 7 % of all instructions issued).
__device__ __forceinline__ void ixl_mxk1_wait_sleep(uint32_t addr, uint32_t parity,
                                                    unsigned ns) {
  if (ixl_mxk1_try_wait(addr, parity)) return;
  const long long t0 = clock64();
  while (!ixl_mxk1_try_wait(addr, parity)) {
    __nanosleep(ns);
    if (clock64() - t0 > 60000000000LL) __trap();
  }
}
// x through an opaque move: ptxas then keeps the value in a register instead of recomputing it
// from its inputs in the loop (it rematerializes shared-window addresses, ~40 instructions a
// tile in the math loop).
__device__ __forceinline__ uint32_t ixl_mxk1_keep(uint32_t x) {
  asm volatile("mov.b32 %0, %0;\n" : "+r"(x));
  return x;
}
// The accumulator operands of the IGMMA asm below: d[o] .. d[o + 7] ("+r", in order).
#define IXL_MXK1_D8(o)                                                                          \
  "+r"(d[o]), "+r"(d[o + 1]), "+r"(d[o + 2]), "+r"(d[o + 3]), "+r"(d[o + 4]), "+r"(d[o + 5]),   \
      "+r"(d[o + 6]), "+r"(d[o + 7])
#define IXL_MXK1_D32(o) IXL_MXK1_D8(o), IXL_MXK1_D8(o + 8), IXL_MXK1_D8(o + 16), IXL_MXK1_D8(o + 24)
#define IXL_MXK1_N64_REGS                                                                       \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "            \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define IXL_MXK1_N128_REGS                                                                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "                 \
  "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "                \
  "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "                \
  "%62, %63"
// wgmma.mma_async m64n64k32.s32.s8.s8, both operands by descriptor (the SS form; K-major,
// the same descriptors as the e4m3 kernels'), D (s32, 32 registers a thread, the f32 layout)
// += A B^T when scale_d != 0, else = A B^T. The s8 path's single accumulator (WS=s).
__device__ __forceinline__ void ixl_mxk1_igmma_n64(uint32_t (&d)[32], uint64_t da, uint64_t db,
                                                   int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 "
               "{" IXL_MXK1_N64_REGS "}, %32, %33, "
               "p;\n}\n"
               : IXL_MXK1_D32(0)
               : "l"(da), "l"(db), "r"(scale_d));
}
// The same, m64n128k32 (64 registers a thread): the 8-row ablation's (WS=y) accumulator.
__device__ __forceinline__ void ixl_mxk1_igmma_n128(uint32_t (&d)[64], uint64_t da, uint64_t db,
                                                    int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {"
               IXL_MXK1_N128_REGS
               "}, %64, %65, p;\n}\n"
               : IXL_MXK1_D32(0), IXL_MXK1_D32(32)
               : "l"(da), "l"(db), "r"(scale_d));
}
// By N (64 or 128).
template <int N>
__device__ __forceinline__ void ixl_mxk1_igmma(uint32_t (&d)[N / 2], uint64_t da, uint64_t db,
                                               int scale_d) {
  if constexpr (N == 64) ixl_mxk1_igmma_n64(d, da, db, scale_d);
  else ixl_mxk1_igmma_n128(d, da, db, scale_d);
}
// arrive (release.cta), one count.
__device__ __forceinline__ void ixl_mxk1_arrive(uint32_t addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
#undef IXL_MXK1_D8
#undef IXL_MXK1_D32
#undef IXL_MXK1_N64_REGS
#undef IXL_MXK1_N128_REGS
#endif

#endif
