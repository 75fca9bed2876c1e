// logits/logits_v2_mx_sm90.cu - variant v2 of the logits family for MXFP4 keys (issue 13):
// K1 (ragged), K2 (paged) and K5 (ragged and paged) on Hopper's e4m3 wgmma with e2m1 widened
// to e4m3 (exact) and one k32 wgmma per 32-element scale group into its own accumulator, the
// groups combined in SPEC 3's order, so the bf16 reduction stays bitwise equal to the CPU
// reference. logits_v2_sm90.cu's ixl_cuda_logits_v2 sends every MXFP4 call here.
//
// Until a mode has its kernel here, it runs v1's kernels (max_chunk 4096).
#include "logits/logits.h"

extern "C" ixl_status ixl_cuda_logits_v2_mx(ixl_ctx *ctx, const ixl_logits_call *c) {
  return c->mode == IXL_LOGITS_SPARSE ? ixl_cuda_logits_v1_sparse(ctx, c, 4096)
                                      : ixl_cuda_logits_v1_dense(ctx, c, 4096);
}
