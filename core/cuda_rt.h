/* cuda_rt.h - the CUDA runtime glue of core/cuda_rt.c: context set-up and teardown, status
 * translation, launch checks, copies and timers (stubs answering IXL_ERR_BACKEND when built
 * without CUDA). Not the ops' twins: those are kernels/ops.h. Private to the library. */
#ifndef IXL_CUDA_RT_H
#define IXL_CUDA_RT_H

#include "idxlab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA glue implemented in core/cuda_rt.c (stubs when built without CUDA). */
ixl_status ixl_cuda_init(ixl_ctx *ctx);
void ixl_cuda_shutdown(ixl_ctx *ctx);
/* Turns a cudaError_t into a status and message; marks the context poisoned on a sticky
 * fault. `what` names the call. */
ixl_status ixl_cuda_status(ixl_ctx *ctx, int cuda_err, const char *what);
/* Checks cudaGetLastError after a launch (and synchronises when IXL_CUDA_SYNC=1). */
ixl_status ixl_cuda_check_launch(ixl_ctx *ctx, const char *kernel);
/* Copies bytes on the context's stream (synchronous when either side is host memory). */
ixl_status ixl_cuda_memcpy(ixl_ctx *ctx, void *dst, const void *src, int64_t bytes, int dst_dev,
                           int src_dev);
ixl_status ixl_cuda_memset(ixl_ctx *ctx, void *dst, int byte, int64_t bytes);
ixl_status ixl_cuda_timer_record(ixl_ctx *ctx, int slot);
ixl_status ixl_cuda_timer_elapsed(ixl_ctx *ctx, int a, int b, double *us);

#ifdef __cplusplus
}
#endif

#endif
