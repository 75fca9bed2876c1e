/* logits/v2_mx_ws.h - the hooks of logits v2's MXFP4 dispatcher (ixl_cuda_logits_v2_mx,
 * logits_v2_mx_sm90.cu): the entry points of the warp-specialized kernels it tries first, one
 * declaration each, so the dispatcher and the files that define them agree on one signature.
 * Each returns 1 when it launched (*st: the launch's status) and 0 when its switch is off or
 * the call does not suit its kernel (nothing launched; the dispatcher's own kernels run it). */
#ifndef IXL_LOGITS_V2_MX_WS_H
#define IXL_LOGITS_V2_MX_WS_H

#include "logits/logits.h"

#ifdef __cplusplus
extern "C" {
#endif
/* K1 (IXL_LOGITS_DENSE) at H 32, IXL_LOGITS_V2_MX_WS (logits_v2_mxk1_sm90.cu, v2_mxk1.cuh). */
int ixl_cuda_logits_v2_mxk1(ixl_ctx *ctx, const ixl_logits_call *c, ixl_status *st);
/* K2 (IXL_LOGITS_DENSE_PAGED) at H 32, IXL_LOGITS_V2_MX_K2WS (logits_v2_mxk2_sm90.cu). */
int ixl_cuda_logits_v2_mxk2(ixl_ctx *ctx, const ixl_logits_call *c, ixl_status *st);
/* K5 (IXL_LOGITS_SPARSE) at H 32, ragged IXL_LOGITS_V2_MX_K5WS and paged
 * IXL_LOGITS_V2_MX_K5PWS (logits_v2_mxk5_sm90.cu). */
int ixl_cuda_logits_v2_mxk5(ixl_ctx *ctx, const ixl_logits_call *c, ixl_status *st);
#ifdef __cplusplus
}
#endif

#endif
