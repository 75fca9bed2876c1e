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
// arrive (release.cta), one count.
__device__ __forceinline__ void ixl_mxk1_arrive(uint32_t addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
#endif

#endif
