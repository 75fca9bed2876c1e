/* tensor_check.h - overflow-checked size arithmetic and the tensor argument checks every op
 * entry runs before it dispatches (core/tensor.c). Private to the library. */
#ifndef IXL_TENSOR_CHECK_H
#define IXL_TENSOR_CHECK_H

#include "idxlab.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif
