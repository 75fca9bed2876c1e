/* tensor.c - tensor descriptors: allocation on host or device, views, copies, fills, and
 * the checks every kernel runs on its arguments. */
#include "ctx.h"
#include "cuda_rt.h"
#include "tensor_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t dtype_sizes[IXL_DTYPE_COUNT] = {4, 2, 2, 1, 1, 4, 1};
static const char *const dtype_names[IXL_DTYPE_COUNT] = {"f32",    "f16", "bf16", "e4m3",
                                                         "e2m1x2", "i32", "u8"};

size_t ixl_dtype_size(ixl_dtype dt) {
  return (int)dt >= 0 && dt < IXL_DTYPE_COUNT ? dtype_sizes[dt] : 0;
}
const char *ixl_dtype_name(ixl_dtype dt) {
  return (int)dt >= 0 && dt < IXL_DTYPE_COUNT ? dtype_names[dt] : "unknown";
}

ixl_status ixl_tensor_new(ixl_ctx *ctx, ixl_dtype dtype, int ndim, const int64_t *shape,
                          ixl_device_kind device, ixl_tensor **out) {
  if (!out) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "tensor_new: out is NULL");
  *out = NULL;
  if ((int)dtype < 0 || dtype >= IXL_DTYPE_COUNT)
    return ixl_set_error(ctx, IXL_ERR_DTYPE, "dtype = %d: not a known dtype", (int)dtype);
  if (ndim < 0 || ndim > 4)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "ndim = %d: must be in [0, 4]", ndim);
  if (ndim > 0 && !shape)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "tensor_new: shape is NULL");
  if (device != IXL_HOST && device != IXL_DEVICE)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "device = %d: must be host (0) or device (1)",
                         (int)device);
  /* numel, and the product of the nonzero dims: the strides (and every partial product
   * ixl_tensor_numel or ixl_tensor_is_contiguous forms) stay below it, so a zero dim cannot
   * hide dims whose strides overflow. */
  int64_t numel = 1, span = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return ixl_set_error(ctx, IXL_ERR_SHAPE, "shape[%d] = %lld: must be >= 0", i,
                           (long long)shape[i]);
    if (!ixl_mul_ok(numel, shape[i], &numel) ||
        !ixl_mul_ok(span, shape[i] ? shape[i] : 1, &span))
      return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                           "tensor of shape[%d] = %lld overflows int64 (the product of the "
                           "nonzero dims must fit, for the strides)",
                           i, (long long)shape[i]);
  }
  int64_t bytes;
  if (!ixl_mul_ok(numel, (int64_t)dtype_sizes[dtype], &bytes) || bytes > ((int64_t)1 << 48))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "tensor of %lld %s elements: too large",
                         (long long)numel, dtype_names[dtype]);
  ixl_tensor *t = calloc(1, sizeof *t);
  if (!t) return ixl_set_error(ctx, IXL_ERR_OOM, "out of host memory for a tensor descriptor");
  ixl_status st = device == IXL_DEVICE ? ixl_device_alloc(ctx, bytes, &t->data)
                                       : ixl_host_alloc(ctx, bytes, &t->data);
  if (st != IXL_OK) {
    free(t);
    return st;
  }
  t->ndim = ndim;
  t->dtype = dtype;
  t->device = device;
  t->owns = 1;
  t->nbytes = bytes;
  t->ctx = ctx;
  ixl_ctx_retain(ctx);
  int64_t s = 1;
  for (int i = 3; i >= 0; i--) {
    t->shape[i] = i < ndim ? shape[i] : 1;
    t->stride[i] = i < ndim ? s : 0;
    if (i < ndim) s *= shape[i];
  }
  *out = t;
  return IXL_OK;
}

void ixl_tensor_free(ixl_tensor *t) {
  if (!t) return;
  if (t->owns) {
    if (t->device == IXL_DEVICE)
      ixl_device_free(t->ctx, t->data, t->nbytes);
    else
      ixl_host_free(t->ctx, t->data, t->nbytes);
    ixl_ctx_release(t->ctx);
  }
  free(t);
}

int64_t ixl_tensor_numel(const ixl_tensor *t) {
  if (!t) return 0;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

int ixl_tensor_is_contiguous(const ixl_tensor *t) {
  if (!t) return 0;
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != s) return 0;
    s *= t->shape[i];
  }
  return 1;
}

/* Element range [lo, hi) a tensor touches relative to its data pointer. Strides may be
 * negative. Returns false when the range does not fit int64 (then *lo, *hi are unset). */
static bool extent(const ixl_tensor *t, int64_t *lo, int64_t *hi) {
  int64_t a = 0, b = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 0) {
      *lo = 0;
      *hi = 0;
      return true;
    }
  }
  for (int i = 0; i < t->ndim; i++) {
    int64_t span;
    if (__builtin_mul_overflow(t->shape[i] - 1, t->stride[i], &span)) return false;
    if (span < 0 ? __builtin_add_overflow(a, span, &a) : __builtin_add_overflow(b, span, &b))
      return false;
  }
  if (__builtin_add_overflow(b, 1, &b)) return false;
  *lo = a;
  *hi = b;
  return true;
}

ixl_status ixl_tensor_view(ixl_ctx *ctx, const ixl_tensor *base, int ndim, const int64_t *shape,
                           const int64_t *stride, int64_t offset, ixl_tensor *view) {
  if (!base || !view) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "tensor_view: NULL argument");
  if (ndim < 0 || ndim > 4)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "view ndim = %d: must be in [0, 4]", ndim);
  if (ndim > 0 && !shape)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "tensor_view: shape is NULL with ndim = %d",
                         ndim);
  ixl_tensor v;
  memset(&v, 0, sizeof v);
  v.ndim = ndim;
  v.dtype = base->dtype;
  v.device = base->device;
  v.ctx = base->ctx;
  int64_t s = 1;
  for (int i = 3; i >= 0; i--) {
    if (i < ndim) {
      if (shape[i] < 0)
        return ixl_set_error(ctx, IXL_ERR_SHAPE, "view shape[%d] = %lld: must be >= 0", i,
                             (long long)shape[i]);
      v.shape[i] = shape[i];
      v.stride[i] = stride ? stride[i] : s;
      if (!ixl_mul_ok(s, shape[i] ? shape[i] : 1, &s))
        return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "view shape overflows");
    } else {
      v.shape[i] = 1;
      v.stride[i] = 0;
    }
  }
  int64_t lo, hi, blo, bhi, first, last;
  if (!extent(&v, &lo, &hi)) {
    char sh[96] = "", sd[96] = ""; /* 4 dims of at most 20 digits and a separator each */
    for (int i = 0, a = 0, b = 0; i < ndim; i++) {
      a += snprintf(sh + a, sizeof sh - (size_t)a, "%s%lld", i ? ", " : "", (long long)v.shape[i]);
      b += snprintf(sd + b, sizeof sd - (size_t)b, "%s%lld", i ? ", " : "", (long long)v.stride[i]);
    }
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                         "view shape [%s] with stride [%s]: the elements it spans ((shape - 1) * "
                         "stride, summed) overflow int64",
                         sh, sd);
  }
  if (!extent(base, &blo, &bhi))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "view: its base's extent overflows int64");
  if (hi > lo) {
    if (__builtin_add_overflow(offset, lo, &first) || __builtin_add_overflow(offset, hi, &last))
      return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                           "view at offset %lld spanning elements [%lld, %lld) from it: the sum "
                           "overflows int64, outside its base [%lld, %lld)",
                           (long long)offset, (long long)lo, (long long)hi, (long long)blo,
                           (long long)bhi);
    if (first < blo || last > bhi)
      return ixl_set_error(ctx, IXL_ERR_SHAPE,
                           "view at offset %lld spanning elements [%lld, %lld) lies outside its "
                           "base [%lld, %lld)",
                           (long long)offset, (long long)first, (long long)last, (long long)blo,
                           (long long)bhi);
  } else if (offset < blo || offset > bhi) {
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "empty view at offset %lld: must start inside its base [%lld, %lld]",
                         (long long)offset, (long long)blo, (long long)bhi);
  }
  v.data = base->data ? (char *)base->data + offset * (int64_t)dtype_sizes[base->dtype] : NULL;
  *view = v;
  return IXL_OK;
}

ixl_status ixl_check_tensor(ixl_ctx *ctx, const ixl_tensor *t, const char *name, int dtype,
                            int ndim) {
  if (!t) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s: missing tensor", name);
  if (dtype >= 0 && t->dtype != dtype)
    return ixl_set_error(ctx, IXL_ERR_DTYPE, "%s: dtype %s, expected %s", name,
                         ixl_dtype_name((ixl_dtype)t->dtype), ixl_dtype_name((ixl_dtype)dtype));
  if (ndim >= 0 && t->ndim != ndim)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "%s: %d dims, expected %d", name, t->ndim, ndim);
  if (!ixl_tensor_is_contiguous(t))
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "%s: must be contiguous", name);
  if (!t->data && ixl_tensor_numel(t) > 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s: no data", name);
  return IXL_OK;
}

ixl_status ixl_check_dim(ixl_ctx *ctx, const ixl_tensor *t, const char *name, int dim,
                         int64_t expect) {
  if (t->shape[dim] != expect)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "%s: shape[%d] = %lld, expected %lld", name, dim,
                         (long long)t->shape[dim], (long long)expect);
  return IXL_OK;
}

/* The bytes a tensor's elements span, [*start, *end), from its strides (a strided or
 * negative-stride view spans more, or other, bytes than numel * size from its data pointer).
 * False for a tensor of no elements. */
static bool byte_span(const ixl_tensor *t, intptr_t *start, intptr_t *end) {
  const intptr_t size = (intptr_t)ixl_dtype_size((ixl_dtype)t->dtype);
  int64_t lo, hi;
  if (!extent(t, &lo, &hi)) { /* views are checked when made; keep a safe answer anyway */
    lo = 0;
    hi = ixl_tensor_numel(t);
  }
  if (hi <= lo || ixl_tensor_numel(t) == 0) return false;
  *start = (intptr_t)t->data + (intptr_t)lo * size;
  *end = (intptr_t)t->data + (intptr_t)hi * size;
  return true;
}

bool ixl_tensors_overlap(const ixl_tensor *a, const ixl_tensor *b) {
  if (!a || !b || !a->data || !b->data) return false;
  intptr_t a0, a1, b0, b1;
  if (!byte_span(a, &a0, &a1) || !byte_span(b, &b0, &b1)) return false;
  return a0 < b1 && b0 < a1;
}

ixl_status ixl_check_disjoint(ixl_ctx *ctx, const ixl_tensor *out, const char *out_name,
                              const ixl_tensor *in, const char *in_name) {
  if (ixl_tensors_overlap(out, in))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s overlaps %s: an output must not share memory with an input (pass a "
                         "separate tensor)",
                         out_name, in_name);
  return IXL_OK;
}

ixl_status ixl_check_outputs(ixl_ctx *ctx, int n, const ixl_tensor *const *ts,
                             const char *const *names, int n_in) {
  for (int o = n_in; o < n; o++) {
    if (!ts[o]) continue;
    for (int i = 0; i < n_in; i++) {
      ixl_status st = ixl_check_disjoint(ctx, ts[o], names[o], ts[i], names[i]);
      if (st) return st;
    }
    for (int p = n_in; p < o; p++)
      if (ixl_tensors_overlap(ts[o], ts[p]))
        return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                             "%s overlaps %s: two outputs must not share memory (pass separate "
                             "tensors)",
                             names[o], names[p]);
  }
  return IXL_OK;
}

ixl_status ixl_check_same_device(ixl_ctx *ctx, int *device, int n, const ixl_tensor *const *ts,
                                 const char *const *names) {
  int dev = -1;
  const char *first = NULL;
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    if (dev < 0) {
      dev = ts[i]->device;
      first = names[i];
    } else if (ts[i]->device != dev) {
      return ixl_set_error(ctx, IXL_ERR_BACKEND, "%s is in %s memory but %s is in %s memory",
                           names[i], ts[i]->device ? "device" : "host", first,
                           dev ? "device" : "host");
    }
  }
  if (dev == IXL_DEVICE && (!ctx || ctx->backend != IXL_BACKEND_CUDA))
    return ixl_set_error(ctx, IXL_ERR_BACKEND, "%s is device memory but the context is not cuda",
                         first);
  if (dev == IXL_DEVICE && ctx->poisoned)
    return ixl_set_error(ctx, IXL_ERR_DEVICE_FAULT,
                         "the CUDA context had a sticky device fault earlier; restart the process");
  *device = dev < 0 ? IXL_HOST : dev;
  return IXL_OK;
}

ixl_status ixl_check_op(ixl_ctx *ctx, int *device, int n, const ixl_tensor *const *ts,
                        const char *const *names, int n_in) {
  ixl_status st = ixl_check_same_device(ctx, device, n, ts, names);
  return st ? st : ixl_check_outputs(ctx, n, ts, names, n_in);
}

ixl_status ixl_tensor_copy(ixl_ctx *ctx, ixl_tensor *dst, const ixl_tensor *src) {
  if (!dst || !src) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "copy: NULL tensor");
  if (dst->dtype != src->dtype)
    return ixl_set_error(ctx, IXL_ERR_DTYPE, "copy: dst dtype %s != src dtype %s",
                         ixl_dtype_name((ixl_dtype)dst->dtype),
                         ixl_dtype_name((ixl_dtype)src->dtype));
  if (ixl_tensor_numel(dst) != ixl_tensor_numel(src) || dst->ndim != src->ndim)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "copy: dst and src shapes differ");
  for (int i = 0; i < dst->ndim; i++)
    if (dst->shape[i] != src->shape[i])
      return ixl_set_error(ctx, IXL_ERR_SHAPE, "copy: dst shape[%d] = %lld, src shape[%d] = %lld",
                           i, (long long)dst->shape[i], i, (long long)src->shape[i]);
  if (!ixl_tensor_is_contiguous(dst) || !ixl_tensor_is_contiguous(src))
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "copy: both tensors must be contiguous");
  /* Pointers of one memory kind only: a host and a device address may coincide. */
  if (dst->device == src->device) {
    ixl_status st = ixl_check_disjoint(ctx, dst, "copy: dst", src, "src");
    if (st) return st;
  }
  int64_t bytes = ixl_tensor_numel(src) * (int64_t)dtype_sizes[src->dtype];
  if (dst->device == IXL_HOST && src->device == IXL_HOST) {
    if (bytes) memmove(dst->data, src->data, (size_t)bytes);
    return IXL_OK;
  }
  return ixl_cuda_memcpy(ctx, dst->data, src->data, bytes, dst->device, src->device);
}

ixl_status ixl_tensor_fill_bytes(ixl_ctx *ctx, ixl_tensor *t, uint8_t byte) {
  ixl_status st = ixl_check_tensor(ctx, t, "tensor", -1, -1);
  if (st) return st;
  int64_t bytes = ixl_tensor_numel(t) * (int64_t)dtype_sizes[t->dtype];
  if (t->device == IXL_HOST) {
    if (bytes) memset(t->data, byte, (size_t)bytes);
    return IXL_OK;
  }
  return ixl_cuda_memset(ctx, t->data, byte, bytes);
}

static double load_f64(const void *base, int dtype, int64_t i) {
  switch (dtype) {
    case IXL_F32: return ((const float *)base)[i];
    case IXL_F16: return ixl_f16_to_f32(((const uint16_t *)base)[i]);
    case IXL_BF16: return ixl_bf16_to_f32(((const uint16_t *)base)[i]);
    case IXL_I32: return ((const int32_t *)base)[i];
    default: return ((const uint8_t *)base)[i];
  }
}

static void store_f64(void *base, int dtype, int64_t i, double v) {
  switch (dtype) {
    case IXL_F32: ((float *)base)[i] = (float)v; break;
    case IXL_F16: ((uint16_t *)base)[i] = ixl_f32_to_f16((float)v); break;
    case IXL_BF16: ((uint16_t *)base)[i] = ixl_f32_to_bf16((float)v); break;
    case IXL_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    default: ((uint8_t *)base)[i] = (uint8_t)v; break;
  }
}

/* Whether a host tensor's bytes intersect n doubles at buf (a device tensor never does: the
 * buffer is host memory). n is the tensor's element count, so n * 8 fits (tensors hold at
 * most 2^48 bytes). */
static bool overlaps_f64_buffer(const ixl_tensor *t, const double *buf, int64_t n) {
  if (t->device != IXL_HOST) return false;
  ixl_tensor b;
  memset(&b, 0, sizeof b);
  b.data = (void *)(uintptr_t)buf;
  b.ndim = 1;
  b.shape[0] = n * (int64_t)sizeof(double);
  b.stride[0] = 1;
  b.dtype = IXL_U8;
  b.device = IXL_HOST;
  return ixl_tensors_overlap(t, &b);
}

/* What both directions check first (`what`: "fill" or "read"): t is a valid tensor of n
 * elements, and the host buffer (`buf_name`: src or dst) is given when n > 0 and does not
 * overlap t (`overlap`: the message's words for that). */
static ixl_status check_f64_io(ixl_ctx *ctx, const ixl_tensor *t, const double *buf, int64_t n,
                               const char *what, const char *buf_name, const char *overlap) {
  ixl_status st = ixl_check_tensor(ctx, t, what, -1, -1);
  if (st) return st;
  if (n != ixl_tensor_numel(t))
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "%s: %lld values given for a tensor of %lld elements",
                         what, (long long)n, (long long)ixl_tensor_numel(t));
  if (!buf && n > 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s: %s is NULL for %lld values", what,
                         buf_name, (long long)n);
  if (overlaps_f64_buffer(t, buf, n))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: %s: an output must not share memory with an input (pass a separate "
                         "buffer)",
                         what, overlap);
  return IXL_OK;
}

static ixl_status range_check(ixl_ctx *ctx, int dtype, double v, int64_t i) {
  int is_int = dtype == IXL_I32 || dtype == IXL_U8 || dtype == IXL_E4M3 || dtype == IXL_E2M1X2;
  if (!is_int) return IXL_OK;
  double lo = dtype == IXL_I32 ? -2147483648.0 : 0.0, hi = dtype == IXL_I32 ? 2147483647.0 : 255.0;
  if (!(v >= lo && v <= hi) || v != floor(v))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "value %g at index %lld: not an integer in [%g, %g] for dtype %s", v,
                         (long long)i, lo, hi, ixl_dtype_name((ixl_dtype)dtype));
  return IXL_OK;
}

ixl_status ixl_tensor_from_f64(ixl_ctx *ctx, ixl_tensor *t, const double *src, int64_t n) {
  ixl_status st = check_f64_io(ctx, t, src, n, "fill", "src", "tensor overlaps src");
  if (st) return st;
  for (int64_t i = 0; i < n; i++)
    if ((st = range_check(ctx, t->dtype, src[i], i))) return st;
  if (t->device == IXL_HOST) {
    for (int64_t i = 0; i < n; i++) store_f64(t->data, t->dtype, i, src[i]);
    return IXL_OK;
  }
  int64_t bytes = n * (int64_t)dtype_sizes[t->dtype];
  void *tmp;
  if ((st = ixl_host_alloc(ctx, bytes, &tmp))) return st;
  for (int64_t i = 0; i < n; i++) store_f64(tmp, t->dtype, i, src[i]);
  st = ixl_cuda_memcpy(ctx, t->data, tmp, bytes, 1, 0);
  ixl_host_free(ctx, tmp, bytes);
  return st;
}

ixl_status ixl_tensor_to_f64(ixl_ctx *ctx, const ixl_tensor *t, double *dst, int64_t n) {
  ixl_status st = check_f64_io(ctx, t, dst, n, "read", "dst", "dst overlaps tensor");
  if (st) return st;
  if (t->device == IXL_HOST) {
    for (int64_t i = 0; i < n; i++) dst[i] = load_f64(t->data, t->dtype, i);
    return IXL_OK;
  }
  int64_t bytes = n * (int64_t)dtype_sizes[t->dtype];
  void *tmp;
  if ((st = ixl_host_alloc(ctx, bytes, &tmp))) return st;
  st = ixl_cuda_memcpy(ctx, tmp, t->data, bytes, 0, 1);
  if (!st)
    for (int64_t i = 0; i < n; i++) dst[i] = load_f64(tmp, t->dtype, i);
  ixl_host_free(ctx, tmp, bytes);
  return st;
}
