/* internal.h - what the C files of idxlab share and users never see: the context's layout,
 * error helpers, counted allocation, overflow-checked sizes and tensor argument checks. */
#ifndef IXL_INTERNAL_H
#define IXL_INTERNAL_H

#include "idxlab.h"

#include <stdarg.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IXL_MAX_TIMERS 256
#define IXL_ERRLEN 1024
#define IXL_SCRATCH_SLOTS 8

struct ixl_ctx {
  ixl_backend backend;      /* resolved: CPU or CUDA */
  int device;
  uint64_t seed;
  int threads;
  int poisoned;             /* sticky device fault seen */
  void *stream;             /* cudaStream_t */
  void *cuda_events[IXL_MAX_TIMERS];
  double host_times_us[IXL_MAX_TIMERS];
  void *graph;              /* cudaGraph_t */
  void *graph_exec;         /* cudaGraphExec_t */
  int capturing;
  ixl_alloc_stats stats;
  void *scratch[2][IXL_SCRATCH_SLOTS];     /* [host/device][slot]: grow-only op scratch */
  int64_t scratch_bytes[2][IXL_SCRATCH_SLOTS];
  int refs;                 /* owners besides the user: tensors, builders, files */
  int released;             /* ixl_ctx_free was called; freed when refs reaches 0 */
  char device_name[256];
  char err[IXL_ERRLEN];
};

/* Records a formatted message (field, value, rule) and returns status. ctx may be NULL. */
ixl_status ixl_set_error(ixl_ctx *ctx, ixl_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Objects that keep a pointer to their context retain it, so ixl_ctx_free from a garbage
 * collector in any order never leaves them dangling. */
void ixl_ctx_retain(ixl_ctx *ctx);
void ixl_ctx_release(ixl_ctx *ctx);

/* Counted allocation. Host memory is 64-byte aligned. bytes == 0 gives NULL and succeeds. */
ixl_status ixl_host_alloc(ixl_ctx *ctx, int64_t bytes, void **out);
void ixl_host_free(ixl_ctx *ctx, void *p, int64_t bytes);
ixl_status ixl_device_alloc(ixl_ctx *ctx, int64_t bytes, void **out);
void ixl_device_free(ixl_ctx *ctx, void *p, int64_t bytes);

/* Temporary memory for one op, owned by the context and reused by every later op: grows only
 * when an op needs more than any before, so a steady stream of steps allocates nothing.
 * `slot` (0..IXL_SCRATCH_SLOTS-1) separates buffers one op needs at the same time; an op
 * must not expect its contents to survive the op, nor call another op that uses the same
 * slot. device: IXL_HOST or IXL_DEVICE. */
ixl_status ixl_ctx_scratch(ixl_ctx *ctx, int slot, int64_t bytes, ixl_device_kind device,
                           void **out);

/* Overflow-checked arithmetic on non-negative sizes: false on overflow or negative input. */
static inline bool ixl_mul_ok(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) return false;
  if (a != 0 && b > INT64_MAX / a) return false;
  *out = a * b;
  return true;
}
static inline bool ixl_add_ok(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0 || a > INT64_MAX - b) return false;
  *out = a + b;
  return true;
}
static inline int64_t ixl_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Argument checks for kernels. `name` is the argument's name in messages. ndim < 0 skips
 * the rank check; dtype < 0 skips the dtype check. They return IXL_OK or set the error. */
ixl_status ixl_check_tensor(ixl_ctx *ctx, const ixl_tensor *t, const char *name, int dtype,
                            int ndim);
ixl_status ixl_check_dim(ixl_ctx *ctx, const ixl_tensor *t, const char *name, int dim,
                         int64_t expect);
/* Whether the bytes of two contiguous tensors intersect (NULL or empty tensors never do).
 * Tensors on different device kinds are refused by ixl_check_same_device first. */
bool ixl_tensors_overlap(const ixl_tensor *a, const ixl_tensor *b);
/* IXL_OK when output `out` shares no memory with input `in`; otherwise IXL_ERR_INVALID_ARG
 * naming both (an op reading `in` while writing `out` would read values it already wrote). */
ixl_status ixl_check_disjoint(ixl_ctx *ctx, const ixl_tensor *out, const char *out_name,
                              const ixl_tensor *in, const char *in_name);
/* The same check over all of an op's tensors: ts[0 .. n_in) are its inputs, ts[n_in .. n) its
 * outputs (NULL entries skipped). Refuses an output that shares memory with an input (in
 * ixl_check_disjoint's words) or with another output ("a overlaps b: two outputs must not
 * share memory"). Pointer ranges only, so host and device tensors are checked alike; call it
 * after ixl_check_same_device and before the CPU/CUDA dispatch. */
ixl_status ixl_check_outputs(ixl_ctx *ctx, int n, const ixl_tensor *const *ts,
                             const char *const *names, int n_in);
/* All non-NULL tensors on one device kind; *device gets it. */
ixl_status ixl_check_same_device(ixl_ctx *ctx, int *device, int n, const ixl_tensor *const *ts,
                                 const char *const *names);
/* An op's entry check: ixl_check_same_device, then ixl_check_outputs (ts[0 .. n_in) inputs,
 * the rest outputs). */
ixl_status ixl_check_op(ixl_ctx *ctx, int *device, int n, const ixl_tensor *const *ts,
                        const char *const *names, int n_in);

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
