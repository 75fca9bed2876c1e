// logits/v2_mxk2.cuh - the warp-specialized MXFP4 K2 kernel of logits v2 (issue 13,
// logits_v2_mxk2_sm90.cu): its entry point for logits_v2_mx_sm90.cu's paged branch, and the
// host-side rules of its work split and its page pieces (C, so they can be checked on the CPU).
#ifndef IXL_LOGITS_V2_MXK2_CUH
#define IXL_LOGITS_V2_MXK2_CUH

#include <stdint.h>

#include "logits/logits.h"
#include "logits/v2_mx.cuh"

#ifdef __cplusplus
extern "C" {
#endif
// K2 (IXL_LOGITS_DENSE_PAGED) at H 32 on the warp-specialized kernel when IXL_LOGITS_V2_MX_K2WS
// asks for it (read once a process; 0: off; unset: the kernel file's kK2wsDefault for fp32
// calls, kK2wsDefaultBf16 for bf16 ones) and the call suits it (no K3 block scores, a page
// size of 8, 16, 32 or a multiple of 64, a page stride that is a multiple of 64 B, the tensor
// map encodes). Returns 1 when it launched (*st: the launch's
// status), 0 when the caller's kernels run the call (nothing launched).
int ixl_cuda_logits_v2_mxk2(ixl_ctx *ctx, const ixl_logits_call *c, ixl_status *st);
#ifdef __cplusplus
}
#endif

// The positions of one TMA piece (a page's slice inside a 64-position tile): the page size
// when it is below 64 (8, 16, 32: several pages a tile), else 64 (one slice of a page); 0 when
// the kernel does not take that page size (then today's kernel runs the call).
IXL_V2MX_FN int ixl_v2mxk2_piece(int64_t P) {
  if (P == 8 || P == 16 || P == 32) return (int)P;
  return P >= 64 && P % 64 == 0 ? 64 : 0;
}

// The persistent split: CTA b of G takes the flattened (row, tile) units [lo(b), lo(b + 1)) of
// total, lo(b) = floor(b total / G), so every CTA gets floor or ceil of total / G units, in
// order (the host keeps total below 2^31, so b total cannot overflow).
IXL_V2MX_FN int64_t ixl_v2mxk2_split(int64_t total, int64_t G, int64_t b) {
  return total * b / G;
}

#endif
