// logits/v2_mxk5.cuh - the pure rules of the warp-specialized ragged K5 kernel
// (logits_v2_mxk5_sm90.cu, IXL_LOGITS_V2_MX_K5WS), in functions that run on the host too.
//
// The producer warp decodes each gathered slot's UE8M0 scale word once (the kernel before it
// decoded it in each of the 4 lanes of a quad, every tile) into what the math warps' combine
// reads: the deferred key factor's k0, r1, r2, r3 (v2_mx.cuh, IXL_V2MX_COMB_E; the same bit
// formulas as mx_body's COMB path, so the same values) and an info word:
//   bit 0: the slot holds a key of the row (else the logit is -inf and nothing was read),
//   bit 1: every exponent byte lies in the deferred factor's window (ixl_v2mx_comb_word),
//   bit 2: every exponent byte lies in the fast window (ixl_v2mx_fast_word; the slow branch's
//          per-slot test).
#ifndef IXL_LOGITS_V2_MXK5_CUH
#define IXL_LOGITS_V2_MXK5_CUH

#include <stdint.h>

#include "logits/v2_mx.cuh"

#define IXL_MXK5_OK 1u
#define IXL_MXK5_COMB 2u
#define IXL_MXK5_FAST 4u

// The scale word of a slot without a key (as the kernels before: 2^0 in every group).
#define IXL_MXK5_NOKEY 0x7F7F7F7Fu

// f[0..3] = the bit patterns of k0 = 2^(ke0 - 127), r1 = 2^(ke1 - ke0), r2 = 2^(ke2 - ke0),
// r3 = 2^(ke3 - ke2) (meaningful only inside the window; garbage otherwise, never used then);
// returns the info word.
IXL_V2MX_FN uint32_t ixl_mxk5_decode(uint32_t kw, int ok, uint32_t f[4]) {
  const uint32_t e0 = kw & 0xFFu, e1 = (kw >> 8) & 0xFFu, e2 = (kw >> 16) & 0xFFu, e3 = kw >> 24;
  f[0] = e0 << 23;
  f[1] = (e1 + 127u - e0) << 23;
  f[2] = (e2 + 127u - e0) << 23;
  f[3] = (e3 + 127u - e2) << 23;
  return (ok ? IXL_MXK5_OK : 0u) | (ixl_v2mx_comb_word(kw) ? IXL_MXK5_COMB : 0u) |
         (ixl_v2mx_fast_word(kw) ? IXL_MXK5_FAST : 0u);
}

#endif
