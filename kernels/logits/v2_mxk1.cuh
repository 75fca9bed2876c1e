// logits/v2_mxk1.cuh - the warp-specialized MXFP4 K1 kernel of logits v2 (issue 13,
// logits_v2_mxk1_sm90.cu): its switch, its entry point for logits_v2_mx_sm90.cu's dense branch,
// and the host-side rule its producer applies to each key slot (so it can be checked on the CPU).
#ifndef IXL_LOGITS_V2_MXK1_CUH
#define IXL_LOGITS_V2_MXK1_CUH

#include <stdint.h>

#include "logits/logits.h"
#include "logits/v2_mx.cuh"

#ifdef __cplusplus
extern "C" {
#endif
// K1 (IXL_LOGITS_DENSE) at H 32 on the warp-specialized kernel unless IXL_LOGITS_V2_MX_WS is 0
// (read once a process; unset: the default variant) and when the call suits it (no K3 block
// scores, N % 4 == 0, 16-B aligned keys, the tensor maps encode). Returns 1 when it launched
// (*st: the launch's status), 0 when the caller's kernels run the call (nothing launched).
int ixl_cuda_logits_v2_mxk1(ixl_ctx *ctx, const ixl_logits_call *c, ixl_status *st);
#ifdef __cplusplus
}
#endif

// The per-slot key factors the producer stores for the math warpgroups (V3's deferred key
// factor, v2_mx.cuh): the fp32 bits of k0 = 2^(ke0 - 127), r1 = 2^(ke1 - ke0),
// r2 = 2^(ke2 - ke0), r3 = 2^(ke3 - ke2), or k0 = 0 (the slot takes the exact slow path) when
// any byte of the scale word lies outside ixl_v2mx_comb_word's window (then r1..r3 are 0).
IXL_V2MX_FN void ixl_v2mxk1_factors(uint32_t kw, uint32_t f[4]) {
  const uint32_t e0 = kw & 0xFFu, e1 = (kw >> 8) & 0xFFu, e2 = (kw >> 16) & 0xFFu, e3 = kw >> 24;
  const int ok = ixl_v2mx_comb_word(kw);
  f[0] = ok ? e0 << 23 : 0u;
  f[1] = ok ? (e1 + 127u - e0) << 23 : 0u;
  f[2] = ok ? (e2 + 127u - e0) << 23 : 0u;
  f[3] = ok ? (e3 + 127u - e2) << 23 : 0u;
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
// x through an opaque move: ptxas then keeps the value in a register instead of recomputing it
// from its inputs in the loop (it rematerializes shared-window addresses, ~40 instructions a
// tile in the math loop).
__device__ __forceinline__ uint32_t ixl_mxk1_keep(uint32_t x) {
  asm volatile("mov.b32 %0, %0;\n" : "+r"(x));
  return x;
}
// arrive (release.cta), one count.
__device__ __forceinline__ void ixl_mxk1_arrive(uint32_t addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
#endif

#endif
