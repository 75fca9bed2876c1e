/* cuda_rt.c - the CUDA runtime glue: device detection at run time, the stream, device
 * allocation, error translation (sticky faults poison the context), timers and graphs.
 * Built with plain cc against cudart; with CUDA=0 every entry answers "built without CUDA". */
#include "ctx.h"
#include "cuda_rt.h"
#include "tensor_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef IXL_WITH_CUDA
#include <cuda_runtime_api.h>

int ixl_built_with_cuda(void) { return 1; }

int ixl_cuda_available(char *why, size_t why_len) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) snprintf(why, why_len, "cudaGetDeviceCount: %s (%s)", cudaGetErrorName(e),
                      cudaGetErrorString(e));
    cudaGetLastError();
    return 0;
  }
  if (n <= 0) {
    if (why) snprintf(why, why_len, "no CUDA device found");
    return 0;
  }
  if (why && why_len) why[0] = '\0';
  return 1;
}

/* Errors after which the CUDA context is unusable (driver_types.h: "the process must be
 * terminated and relaunched"). */
static int is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return 1;
    default:
      return 0;
  }
}

ixl_status ixl_cuda_status(ixl_ctx *ctx, int err, const char *what) {
  cudaError_t e = (cudaError_t)err;
  if (e == cudaSuccess) return IXL_OK;
  if (is_sticky(e)) {
    if (ctx) ctx->poisoned = 1;
    return ixl_set_error(ctx, IXL_ERR_DEVICE_FAULT,
                         "%s: %s (%s): sticky device fault, the CUDA context is unusable; "
                         "restart the process",
                         what, cudaGetErrorName(e), cudaGetErrorString(e));
  }
  cudaGetLastError(); /* clear a non-sticky error so later calls work */
  return ixl_set_error(ctx, IXL_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorName(e),
                       cudaGetErrorString(e));
}

static ixl_status poisoned(ixl_ctx *ctx) {
  return ixl_set_error(ctx, IXL_ERR_DEVICE_FAULT,
                       "the CUDA context had a sticky device fault earlier; restart the process");
}

ixl_status ixl_cuda_check_launch(ixl_ctx *ctx, const char *kernel) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, kernel);
  const char *sync = getenv("IXL_CUDA_SYNC");
  if (sync && sync[0] == '1' && ctx && !ctx->capturing) {
    e = cudaStreamSynchronize((cudaStream_t)ctx->stream);
    if (e != cudaSuccess) return ixl_cuda_status(ctx, e, kernel);
  }
  return IXL_OK;
}

/* Allocations and launches run on the thread's current device, which is set once, when a
 * context starts: so every live CUDA context of the process is on one device. (One process
 * per GPU is the way to use several: CUDA_VISIBLE_DEVICES and --shard.) */
static int live_device = -1, live_contexts = 0;

ixl_status ixl_cuda_init(ixl_ctx *ctx) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaGetDeviceCount");
  if (ctx->device >= n)
    return ixl_set_error(ctx, IXL_ERR_BACKEND, "device = %d: only %d CUDA device(s) present",
                         ctx->device, n);
  if (live_contexts > 0 && ctx->device != live_device)
    return ixl_set_error(ctx, IXL_ERR_BACKEND,
                         "device = %d: this process already has %d CUDA context(s) on device %d; "
                         "idxlab uses one GPU per process (free those contexts first, or run one "
                         "process per GPU with CUDA_VISIBLE_DEVICES and --shard)",
                         ctx->device, live_contexts, live_device);
  e = cudaSetDevice(ctx->device);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaSetDevice");
  struct cudaDeviceProp prop;
  e = cudaGetDeviceProperties(&prop, ctx->device);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaGetDeviceProperties");
  snprintf(ctx->device_name, sizeof ctx->device_name, "%.200s (sm_%d%d, %d SMs)", prop.name,
           prop.major, prop.minor, prop.multiProcessorCount);
  /* which physical GPU ran: two shards on two GPUs of one host differ here, not in the name */
  e = cudaDeviceGetPCIBusId(ctx->device_bus_id, (int)sizeof ctx->device_bus_id, ctx->device);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaDeviceGetPCIBusId");
  cudaStream_t s;
  e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaStreamCreate");
  ctx->stream = s;
  live_device = ctx->device;
  live_contexts++;
  return IXL_OK;
}

void ixl_cuda_shutdown(ixl_ctx *ctx) {
  if (ctx->stream && --live_contexts == 0) live_device = -1; /* a stream: init succeeded */
  if (ctx->poisoned) return; /* every CUDA call would fail; leave teardown to the process */
  cudaSetDevice(ctx->device);
  for (int i = 0; i < IXL_MAX_TIMERS; i++)
    if (ctx->cuda_events[i]) cudaEventDestroy((cudaEvent_t)ctx->cuda_events[i]);
  if (ctx->graph_exec) cudaGraphExecDestroy((cudaGraphExec_t)ctx->graph_exec);
  if (ctx->graph) cudaGraphDestroy((cudaGraph_t)ctx->graph);
  if (ctx->stream) cudaStreamDestroy((cudaStream_t)ctx->stream);
}

ixl_status ixl_device_alloc(ixl_ctx *ctx, int64_t bytes, void **out) {
  *out = NULL;
  if (!ctx || ctx->backend != IXL_BACKEND_CUDA)
    return ixl_set_error(ctx, IXL_ERR_BACKEND, "device tensor on a CPU context: use backend=cuda");
  if (ctx->poisoned) return poisoned(ctx);
  if (bytes < 0)
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "device allocation of %lld bytes: negative size",
                         (long long)bytes);
  if (bytes == 0) return IXL_OK;
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, (size_t)bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    return ixl_set_error(ctx, IXL_ERR_OOM,
                         "out of device memory: asked for %lld bytes, %lld bytes free of %lld",
                         (long long)bytes, (long long)fr, (long long)tot);
  }
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaMalloc");
  *out = p;
  ctx->stats.device_bytes_live += bytes;
  ctx->stats.device_allocs++;
  return IXL_OK;
}

void ixl_device_free(ixl_ctx *ctx, void *p, int64_t bytes) {
  if (!p) return;
  if (!ctx->poisoned) cudaFree(p);
  ctx->stats.device_bytes_live -= bytes;
  ctx->stats.device_frees++;
}

ixl_status ixl_ctx_sync(ixl_ctx *ctx) {
  if (!ctx) return IXL_ERR_INVALID_ARG;
  if (ctx->backend != IXL_BACKEND_CUDA) return IXL_OK;
  if (ctx->poisoned) return poisoned(ctx);
  return ixl_cuda_status(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream),
                         "cudaStreamSynchronize");
}

ixl_status ixl_ctx_mem_info(ixl_ctx *ctx, int64_t *free_bytes, int64_t *total_bytes) {
  if (!free_bytes || !total_bytes)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "mem_info: %s is NULL",
                         !free_bytes ? "free_bytes" : "total_bytes");
  *free_bytes = 0;
  *total_bytes = 0;
  if (!ctx || ctx->backend != IXL_BACKEND_CUDA) return IXL_OK;
  if (ctx->poisoned) return poisoned(ctx);
  size_t fr = 0, tot = 0;
  cudaError_t e = cudaMemGetInfo(&fr, &tot);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaMemGetInfo");
  *free_bytes = (int64_t)fr;
  *total_bytes = (int64_t)tot;
  return IXL_OK;
}

ixl_status ixl_cuda_memcpy(ixl_ctx *ctx, void *dst, const void *src, int64_t bytes, int dst_dev,
                           int src_dev) {
  if (ctx->poisoned) return poisoned(ctx);
  if (bytes == 0) return IXL_OK;
  enum cudaMemcpyKind kind = dst_dev ? (src_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                     : (src_dev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  cudaStream_t s = (cudaStream_t)ctx->stream;
  cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)bytes, kind, s);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaMemcpyAsync");
  if (!dst_dev || !src_dev) {
    /* host memory is pageable and the caller may reuse it at once */
    e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaStreamSynchronize after copy");
  }
  return IXL_OK;
}

ixl_status ixl_cuda_memset(ixl_ctx *ctx, void *dst, int byte, int64_t bytes) {
  if (ctx->poisoned) return poisoned(ctx);
  if (bytes == 0) return IXL_OK;
  return ixl_cuda_status(ctx, cudaMemsetAsync(dst, byte, (size_t)bytes, (cudaStream_t)ctx->stream),
                         "cudaMemsetAsync");
}

ixl_status ixl_cuda_timer_record(ixl_ctx *ctx, int slot) {
  if (ctx->poisoned) return poisoned(ctx);
  if (!ctx->cuda_events[slot]) {
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreate(&ev);
    if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaEventCreate");
    ctx->cuda_events[slot] = ev;
  }
  return ixl_cuda_status(ctx, cudaEventRecord((cudaEvent_t)ctx->cuda_events[slot],
                                              (cudaStream_t)ctx->stream),
                         "cudaEventRecord");
}

ixl_status ixl_cuda_timer_elapsed(ixl_ctx *ctx, int a, int b, double *us) {
  if (ctx->poisoned) return poisoned(ctx);
  if (!ctx->cuda_events[a] || !ctx->cuda_events[b])
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "timer slots %d, %d: not recorded", a, b);
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)ctx->cuda_events[b]);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaEventSynchronize");
  float ms = 0;
  e = cudaEventElapsedTime(&ms, (cudaEvent_t)ctx->cuda_events[a], (cudaEvent_t)ctx->cuda_events[b]);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaEventElapsedTime");
  *us = (double)ms * 1000.0;
  return IXL_OK;
}

ixl_status ixl_graph_begin(ixl_ctx *ctx) {
  if (!ctx) return IXL_ERR_INVALID_ARG;
  if (ctx->backend != IXL_BACKEND_CUDA)
    return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED, "graph capture needs backend=cuda");
  if (ctx->poisoned) return poisoned(ctx);
  if (ctx->capturing) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "graph capture already begun");
  cudaError_t e =
      cudaStreamBeginCapture((cudaStream_t)ctx->stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaStreamBeginCapture");
  ctx->capturing = 1;
  return IXL_OK;
}

ixl_status ixl_graph_end(ixl_ctx *ctx) {
  if (!ctx) return IXL_ERR_INVALID_ARG;
  if (!ctx->capturing) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "no graph capture begun");
  ctx->capturing = 0;
  cudaGraph_t g = NULL;
  cudaError_t e = cudaStreamEndCapture((cudaStream_t)ctx->stream, &g);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaStreamEndCapture");
  /* the old graph goes first; a failed instantiate below leaves no graph to launch */
  if (ctx->graph_exec) cudaGraphExecDestroy((cudaGraphExec_t)ctx->graph_exec);
  ctx->graph_exec = NULL;
  if (ctx->graph) cudaGraphDestroy((cudaGraph_t)ctx->graph);
  ctx->graph = g;
  cudaGraphExec_t ge = NULL;
  e = cudaGraphInstantiate(&ge, g, 0);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, "cudaGraphInstantiate");
  ctx->graph_exec = ge;
  return IXL_OK;
}

ixl_status ixl_graph_launch(ixl_ctx *ctx) {
  if (!ctx) return IXL_ERR_INVALID_ARG;
  if (!ctx->graph_exec)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "no captured graph to launch");
  if (ctx->poisoned) return poisoned(ctx);
  return ixl_cuda_status(ctx, cudaGraphLaunch((cudaGraphExec_t)ctx->graph_exec,
                                              (cudaStream_t)ctx->stream),
                         "cudaGraphLaunch");
}

#else /* built without CUDA */

int ixl_built_with_cuda(void) { return 0; }
int ixl_cuda_available(char *why, size_t why_len) {
  if (why) snprintf(why, why_len, "idxlab was built without CUDA (CUDA=0)");
  return 0;
}
ixl_status ixl_cuda_init(ixl_ctx *ctx) {
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "idxlab was built without CUDA (CUDA=0)");
}
void ixl_cuda_shutdown(ixl_ctx *ctx) { (void)ctx; }
ixl_status ixl_cuda_status(ixl_ctx *ctx, int err, const char *what) {
  return err ? ixl_set_error(ctx, IXL_ERR_CUDA, "%s: CUDA error %d", what, err) : IXL_OK;
}
ixl_status ixl_cuda_check_launch(ixl_ctx *ctx, const char *kernel) {
  (void)ctx; (void)kernel;
  return IXL_OK;
}
ixl_status ixl_device_alloc(ixl_ctx *ctx, int64_t bytes, void **out) {
  (void)bytes;
  *out = NULL;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "device memory needs a CUDA build and a GPU");
}
void ixl_device_free(ixl_ctx *ctx, void *p, int64_t bytes) { (void)ctx; (void)p; (void)bytes; }
ixl_status ixl_ctx_sync(ixl_ctx *ctx) { return ctx ? IXL_OK : IXL_ERR_INVALID_ARG; }
ixl_status ixl_ctx_mem_info(ixl_ctx *ctx, int64_t *f, int64_t *t) {
  if (!f || !t)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "mem_info: %s is NULL",
                         !f ? "free_bytes" : "total_bytes");
  *f = 0;
  *t = 0;
  return IXL_OK;
}
ixl_status ixl_cuda_memcpy(ixl_ctx *ctx, void *dst, const void *src, int64_t bytes, int dd,
                           int sd) {
  (void)dst; (void)src; (void)bytes; (void)dd; (void)sd;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "device copy needs a CUDA build");
}
ixl_status ixl_cuda_memset(ixl_ctx *ctx, void *dst, int byte, int64_t bytes) {
  (void)dst; (void)byte; (void)bytes;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "device memset needs a CUDA build");
}
ixl_status ixl_cuda_timer_record(ixl_ctx *ctx, int slot) {
  (void)slot;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "CUDA timers need a CUDA build");
}
ixl_status ixl_cuda_timer_elapsed(ixl_ctx *ctx, int a, int b, double *us) {
  (void)a; (void)b; (void)us;
  return ixl_set_error(ctx, IXL_ERR_BACKEND, "CUDA timers need a CUDA build");
}
ixl_status ixl_graph_begin(ixl_ctx *ctx) {
  return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED, "graph capture needs backend=cuda");
}
ixl_status ixl_graph_end(ixl_ctx *ctx) {
  return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED, "graph capture needs backend=cuda");
}
ixl_status ixl_graph_launch(ixl_ctx *ctx) {
  return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED, "graph capture needs backend=cuda");
}
#endif
