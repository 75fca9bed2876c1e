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
// K1 (IXL_LOGITS_DENSE) at H 32 on the warp-specialized kernel when IXL_LOGITS_V2_MX_WS is set
// (read once a process; unset or 0: off) and the call suits it (no K3 block scores, N % 4 == 0,
// 16-B aligned keys, the tensor maps encode). Returns 1 when it launched (*st: the launch's
// status), 0 when the caller's kernels run the call (nothing launched).
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

#endif
