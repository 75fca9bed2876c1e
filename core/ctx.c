/* ctx.c - the context: backend choice, seed, threads, counted allocation and timers. Nothing
 * in idxlab is global; everything hangs off an ixl_ctx. */
#include "ctx.h"
#include "cuda_rt.h"
#include "tensor_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int cpu_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

ixl_status ixl_ctx_new(ixl_backend backend, int device, uint64_t seed, ixl_ctx **out) {
  if (!out) return IXL_ERR_INVALID_ARG;
  *out = NULL;
  ixl_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return IXL_ERR_OOM;
  *out = ctx;
  ctx->seed = seed;
  ctx->threads = cpu_cores();
  ctx->device = device;
  ctx->backend = IXL_BACKEND_CPU;
  if (backend != IXL_BACKEND_CPU && backend != IXL_BACKEND_CUDA && backend != IXL_BACKEND_AUTO)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "backend = %d: must be cpu (1), cuda (2) or auto (0)", (int)backend);
  if (device < 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "device = %d: must be >= 0", device);
  snprintf(ctx->device_name, sizeof ctx->device_name, "cpu (%d threads)", ctx->threads);
  if (backend == IXL_BACKEND_CPU) return IXL_OK;
  char why[512];
  if (!ixl_cuda_available(why, sizeof why)) {
    if (backend == IXL_BACKEND_AUTO) return IXL_OK;
    return ixl_set_error(ctx, IXL_ERR_BACKEND, "backend = cuda: no usable CUDA device (%s)", why);
  }
  ctx->backend = IXL_BACKEND_CUDA;
  ixl_status st = ixl_cuda_init(ctx);
  if (st != IXL_OK) {
    if (backend == IXL_BACKEND_AUTO) { /* fall back, but keep the reason readable */
      ctx->backend = IXL_BACKEND_CPU;
      snprintf(ctx->device_name, sizeof ctx->device_name, "cpu (%d threads)", ctx->threads);
      return IXL_OK;
    }
    return st;
  }
  return IXL_OK;
}

static void ctx_destroy(ixl_ctx *ctx) {
  /* the frees below subtract from the live counters, which never held the scratch */
  ctx->stats.host_bytes_live += ctx->stats.host_scratch_bytes;
  ctx->stats.device_bytes_live += ctx->stats.device_scratch_bytes;
  for (int i = 0; i < IXL_SCRATCH_SLOTS; i++) {
    ixl_host_free(ctx, ctx->scratch[IXL_HOST][i], ctx->scratch_bytes[IXL_HOST][i]);
    ixl_device_free(ctx, ctx->scratch[IXL_DEVICE][i], ctx->scratch_bytes[IXL_DEVICE][i]);
  }
  if (ctx->backend == IXL_BACKEND_CUDA) ixl_cuda_shutdown(ctx);
  free(ctx);
}

void ixl_ctx_free(ixl_ctx *ctx) {
  if (!ctx || ctx->released) return;
  ctx->released = 1;
  if (ctx->refs == 0) ctx_destroy(ctx);
}

void ixl_ctx_retain(ixl_ctx *ctx) {
  if (ctx) ctx->refs++;
}

void ixl_ctx_release(ixl_ctx *ctx) {
  if (!ctx) return;
  if (--ctx->refs == 0 && ctx->released) ctx_destroy(ctx);
}

ixl_backend ixl_ctx_backend(const ixl_ctx *ctx) { return ctx ? ctx->backend : IXL_BACKEND_CPU; }
ixl_device_kind ixl_ctx_device_kind(const ixl_ctx *ctx) {
  return ctx && ctx->backend == IXL_BACKEND_CUDA ? IXL_DEVICE : IXL_HOST;
}
int ixl_ctx_device(const ixl_ctx *ctx) { return ctx ? ctx->device : 0; }
const char *ixl_ctx_device_name(const ixl_ctx *ctx) { return ctx ? ctx->device_name : ""; }
const char *ixl_ctx_device_bus_id(const ixl_ctx *ctx) { return ctx ? ctx->device_bus_id : ""; }
uint64_t ixl_ctx_seed(const ixl_ctx *ctx) { return ctx ? ctx->seed : 0; }
void ixl_ctx_set_seed(ixl_ctx *ctx, uint64_t seed) { if (ctx) ctx->seed = seed; }
int ixl_ctx_threads(const ixl_ctx *ctx) { return ctx ? ctx->threads : 1; }
void ixl_ctx_set_threads(ixl_ctx *ctx, int threads) {
  if (!ctx) return;
  ctx->threads = threads > 0 ? threads : cpu_cores();
  if (ctx->backend == IXL_BACKEND_CPU)
    snprintf(ctx->device_name, sizeof ctx->device_name, "cpu (%d threads)", ctx->threads);
}
void *ixl_ctx_stream(const ixl_ctx *ctx) { return ctx ? ctx->stream : NULL; }
int ixl_ctx_poisoned(const ixl_ctx *ctx) { return ctx ? ctx->poisoned : 0; }
void ixl_ctx_alloc_stats(const ixl_ctx *ctx, ixl_alloc_stats *out) {
  if (!out) return;
  if (!ctx) { memset(out, 0, sizeof *out); return; }
  *out = ctx->stats;
}

ixl_status ixl_host_alloc(ixl_ctx *ctx, int64_t bytes, void **out) {
  *out = NULL;
  if (bytes < 0)
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "host allocation of %lld bytes: negative size",
                         (long long)bytes);
  if (bytes == 0) return IXL_OK;
  int64_t rounded;
  if (!ixl_add_ok(bytes, 63, &rounded))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "host allocation of %lld bytes overflows",
                         (long long)bytes);
  rounded &= ~(int64_t)63;
  void *p = aligned_alloc(64, (size_t)rounded);
  if (!p)
    return ixl_set_error(ctx, IXL_ERR_OOM, "out of host memory: asked for %lld bytes",
                         (long long)bytes);
  *out = p;
  if (ctx) {
    ctx->stats.host_bytes_live += bytes;
    ctx->stats.host_allocs++;
  }
  return IXL_OK;
}

void ixl_host_free(ixl_ctx *ctx, void *p, int64_t bytes) {
  if (!p) return;
  free(p);
  if (ctx) {
    ctx->stats.host_bytes_live -= bytes;
    ctx->stats.host_frees++;
  }
}

double ixl_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

ixl_status ixl_timer_record(ixl_ctx *ctx, int slot) {
  if (!ctx) return IXL_ERR_INVALID_ARG;
  if (slot < 0 || slot >= IXL_MAX_TIMERS)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "timer slot = %d: must be in [0, %d)", slot,
                         IXL_MAX_TIMERS);
  if (ctx->backend == IXL_BACKEND_CUDA) {
    return ixl_cuda_timer_record(ctx, slot);
  }
  ctx->host_times_us[slot] = ixl_now_us();
  return IXL_OK;
}

ixl_status ixl_timer_elapsed_us(ixl_ctx *ctx, int a, int b, double *us) {
  if (!ctx || !us) return IXL_ERR_INVALID_ARG;
  if (a < 0 || a >= IXL_MAX_TIMERS || b < 0 || b >= IXL_MAX_TIMERS)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "timer slots %d, %d: must be in [0, %d)", a, b,
                         IXL_MAX_TIMERS);
  if (ctx->backend == IXL_BACKEND_CUDA) {
    return ixl_cuda_timer_elapsed(ctx, a, b, us);
  }
  *us = ctx->host_times_us[b] - ctx->host_times_us[a];
  return IXL_OK;
}

ixl_status ixl_ctx_scratch(ixl_ctx *ctx, int slot, int64_t bytes, ixl_device_kind device,
                           void **out) {
  *out = NULL;
  if (!ctx || slot < 0 || slot >= IXL_SCRATCH_SLOTS || (device != IXL_HOST && device != IXL_DEVICE))
    return ixl_set_error(ctx, IXL_ERR_INTERNAL, "scratch slot %d on device kind %d: out of range",
                         slot, (int)device);
  if (bytes < 0)
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "scratch of %lld bytes: negative size",
                         (long long)bytes);
  if (bytes > ctx->scratch_bytes[device][slot]) {
    void *p = NULL;
    int64_t old = ctx->scratch_bytes[device][slot];
    ixl_status st = device == IXL_DEVICE ? ixl_device_alloc(ctx, bytes, &p)
                                         : ixl_host_alloc(ctx, bytes, &p);
    if (st) return st;
    if (device == IXL_DEVICE)
      ixl_device_free(ctx, ctx->scratch[device][slot], old);
    else
      ixl_host_free(ctx, ctx->scratch[device][slot], old);
    ctx->scratch[device][slot] = p;
    ctx->scratch_bytes[device][slot] = bytes;
    /* scratch is reported on its own, not as live data: it stays until the context goes */
    if (device == IXL_DEVICE) {
      ctx->stats.device_bytes_live -= bytes - old;
      ctx->stats.device_scratch_bytes += bytes - old;
    } else {
      ctx->stats.host_bytes_live -= bytes - old;
      ctx->stats.host_scratch_bytes += bytes - old;
    }
  }
  *out = ctx->scratch[device][slot];
  return IXL_OK;
}
