/* formats.c - the number formats of SPEC 2 and 8 on the CPU: quantize, dequantize, the
 * weights the kernels take, and the paged K layout.
 *
 * Quantizers (x is read as fp32; BF16 and F16 inputs are widened exactly):
 * - mxfp4 / mxfp8, per group of 32 elements, with m = 6 (e2m1) or 448 (e4m3):
 *   rne:       amax clamped below at m * 2^-126; e = the smallest integer with m * 2^e >= amax,
 *              clamped to [-127, 127]; scale byte e + 127.
 *   ties_down: amax clamped below at fp32(1e-4); e as above (amax / m rounded up to a power of
 *              two), the byte clamped to [1, 254].
 *   e is found exactly by comparing amax with m * 2^e in double, never through a float log2
 *   (ixl_mx_scale_exp and ixl_ceil_log2_ratio in numerics/scalar.h, which the GPU runs too).
 *   Values y = x * 2^-e (exact in double):
 *   mxfp4 rne:       nearest e2m1 magnitude, ties to the even code, saturating at 6; the sign
 *                    is kept when the value rounds to zero (-0 = code 8, as the hardware does);
 *   mxfp4 ties_down: thresholds {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} with strict '>' (ties
 *                    to the smaller magnitude), saturating at 6; a zero code drops the sign;
 *   mxfp8 (both):    e4m3 round to nearest even, subnormals, saturating at 448, -0 kept.
 * - fp8, per 128-vector:
 *   Q (both quantizers) and K rne: amax clamped below at fp32(1e-4); scale 2^e with e the
 *              smallest integer with 448 * 2^e >= amax; values e4m3(x * 2^-e).
 *   K ties_down: scale = fp32(amax / 448) (an fp32 division), values e4m3(x * fp32(1 / scale)).
 * Non-finite inputs (a choice SPEC leaves open; deterministic and simple):
 * - +-inf is quantized as +-FLT_MAX (it saturates);
 * - NaN, mxfp4 and mxfp8: a group holding a NaN gets the scale byte 0xFF (the OCP MX NaN scale)
 *   and zero codes; it dequantizes to 32 NaNs, and the kernels make that group's partial NaN;
 * - NaN, fp8: that element's code is the e4m3 NaN (0x7F with its sign); amax ignores it.
 * Dequantization: value * 2^(byte - 127) (MX; byte 0xFF gives NaN) or value * scale (fp8 K),
 * each rounded once to fp32, so a huge code may dequantize to inf; fp8 Q leaves the scale out
 * (it lives in the weights). e2m1 -0 dequantizes to +0. */
#include "ops.h"
#include "logits/engine.h"

#include <float.h>
#include <omp.h>
#include <stdio.h>

/* kv_pages_write's bitmap of page ids seen; slots 0-2 belong to other ops (metrics, select,
 * dense logits) and kv_pages_write calls none of them. */
#define IXL_PAGES_SEEN_SLOT 3


static ixl_status check_fmt(ixl_ctx *ctx, int fmt) {
  if (fmt != IXL_MXFP4 && fmt != IXL_MXFP8 && fmt != IXL_FP8)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "kv_format = %d: must be mxfp4 (0), mxfp8 (1) or fp8 (2)", fmt);
  return IXL_OK;
}

static float load_x(const void *x, int dtype, int64_t i) {
  switch (dtype) {
    case IXL_F32: return ((const float *)x)[i];
    case IXL_BF16: return ixl_bf16_to_f32(((const uint16_t *)x)[i]);
    default: return ixl_f16_to_f32(((const uint16_t *)x)[i]);
  }
}

/* One MX group of 32 values -> codes (mxfp4: 16 bytes, mxfp8: 32 bytes) and its scale byte. */
static uint8_t quantize_mx_group(int fmt, int quantizer, const float *v, uint8_t *codes) {
  const double m = fmt == IXL_MXFP4 ? 6.0 : 448.0;
  double amax = 0.0;
  for (int i = 0; i < IXL_GROUP; i++) {
    if (isnan(v[i])) {
      memset(codes, 0, fmt == IXL_MXFP4 ? IXL_GROUP / 2 : IXL_GROUP);
      return IXL_NAN_SCALE;
    }
    double a = fabs((double)v[i]);
    if (a > FLT_MAX) a = FLT_MAX;
    if (a > amax) amax = a;
  }
  /* amax is a float's magnitude (at most FLT_MAX), so the conversion is exact */
  const int e = ixl_mx_scale_exp((float)amax, (float)m, quantizer == IXL_Q_TIES_DOWN);
  /* x * 2^-e is exact in double (|x| <= FLT_MAX, |e| <= 127: no overflow, no subnormal), so
   * one power of two per group gives ldexp's bits without a libm call per element */
  const double pw = ldexp(1.0, -e);
  for (int i = 0; i < IXL_GROUP; i++) {
    double x = v[i];
    if (x > FLT_MAX) x = FLT_MAX;
    if (x < -FLT_MAX) x = -FLT_MAX;
    double y = x * pw; /* exact */
    if (fmt == IXL_MXFP4) {
      /* e2m1 codes (numerics/scalar.h) of the float |y|: exact, as y has x's 24 significant
       * bits unless |y| < 2^-126, which is code 0 either way */
      const float a = (float)fabs(y);
      uint8_t c;
      if (quantizer == IXL_Q_RNE) {
        c = ixl_e2m1_rne(a);
        if (signbit(y)) c |= 8; /* -0 kept */
      } else {
        c = ixl_e2m1_ties_down(a);
        if (c && y < 0) c |= 8;
      }
      if (i % 2 == 0) codes[i / 2] = c;
      else codes[i / 2] |= (uint8_t)(c << 4);
    } else {
      /* |y| <= 448 here, so the float is exact unless |y| < 2^-126, which e4m3 rounds to +-0 */
      codes[i] = ixl_f32_to_e4m3((float)y);
    }
  }
  return (uint8_t)(e + 127);
}

/* One fp8 128-vector -> 128 e4m3 codes and its fp32 scale. */
static float quantize_fp8_vec(int role, int quantizer, const float *v, uint8_t *codes) {
  float amax = 0.0f;
  for (int i = 0; i < IXL_D; i++) {
    float a = fabsf(v[i]);
    if (a > FLT_MAX) a = FLT_MAX; /* inf; NaN fails both comparisons and is skipped */
    if (a > amax) amax = a;
  }
  if (amax < 1e-4f) amax = 1e-4f;
  if (role == IXL_ROLE_K && quantizer == IXL_Q_TIES_DOWN) {
    float scale = amax / 448.0f, inv = 1.0f / scale;
    for (int i = 0; i < IXL_D; i++) {
      float x = v[i] > FLT_MAX ? FLT_MAX : v[i] < -FLT_MAX ? -FLT_MAX : v[i];
      codes[i] = ixl_f32_to_e4m3(x * inv);
    }
    return scale;
  }
  const int e = ixl_ceil_log2_ratio(amax, 448.0f);
  const double pw = ldexp(1.0, -e); /* exact products, as in quantize_mx_group */
  for (int i = 0; i < IXL_D; i++) {
    double x = v[i] > FLT_MAX ? FLT_MAX : v[i] < -FLT_MAX ? -FLT_MAX : v[i];
    codes[i] = ixl_f32_to_e4m3((float)(x * pw)); /* NaN stays NaN (0x7F | sign) */
  }
  return (float)ldexp(1.0, e);
}

/* The vector count M of x [..., 128], and checks that t holds M vectors of `last` elements
 * (last = 0: t holds M elements). */
static ixl_status check_vectors(ixl_ctx *ctx, const ixl_tensor *t, const char *name, int dtype,
                                int64_t M, int64_t last, const char *why) {
  ixl_status st = ixl_check_tensor(ctx, t, name, dtype, -1);
  if (st) return st;
  if (last) {
    if (t->ndim < 1 || t->shape[t->ndim - 1] != last)
      return ixl_set_error(ctx, IXL_ERR_SHAPE, "%s: shape[%d] = %lld, expected %lld (%s)", name,
                           t->ndim - 1, (long long)(t->ndim ? t->shape[t->ndim - 1] : 0),
                           (long long)last, why);
    if (ixl_tensor_numel(t) / last != M)
      return ixl_set_error(ctx, IXL_ERR_SHAPE, "%s: holds %lld vectors, expected %lld",
                           name, (long long)(ixl_tensor_numel(t) / last), (long long)M);
  } else if (ixl_tensor_numel(t) != M) {
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "%s: holds %lld scales, expected one per vector (%lld)", name,
                         (long long)ixl_tensor_numel(t), (long long)M);
  }
  return IXL_OK;
}

ixl_status ixl_quantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_quantizer quantizer, ixl_role role,
                        const ixl_tensor *x, ixl_tensor *codes, ixl_tensor *scales) {
  ixl_status st;
  if ((st = check_fmt(ctx, fmt))) return st;
  if (quantizer != IXL_Q_RNE && quantizer != IXL_Q_TIES_DOWN)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "quantizer = %d: must be rne (0) or ties_down (1)", (int)quantizer);
  if (role != IXL_ROLE_Q && role != IXL_ROLE_K)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "role = %d: must be q (0) or k (1)", (int)role);
  if ((st = ixl_check_tensor(ctx, x, "x", -1, -1))) return st;
  if (x->dtype != IXL_F32 && x->dtype != IXL_BF16 && x->dtype != IXL_F16)
    return ixl_set_error(ctx, IXL_ERR_DTYPE, "x: dtype %s, expected f32, bf16 or f16",
                         ixl_dtype_name((ixl_dtype)x->dtype));
  if (x->ndim < 1 || x->shape[x->ndim - 1] != IXL_D)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "x: shape[%d] = %lld, expected %d (the head dim D)",
                         x->ndim - 1, (long long)(x->ndim ? x->shape[x->ndim - 1] : 0), IXL_D);
  const int64_t M = ixl_tensor_numel(x) / IXL_D, vb = ixl_format_value_bytes(fmt);
  char why[64];
  snprintf(why, sizeof why, "the value bytes of %s", ixl_kv_format_name(fmt));
  if ((st = check_vectors(ctx, codes, "codes", IXL_U8, M, vb, why)) ||
      (st = check_vectors(ctx, scales, "scales", fmt == IXL_FP8 ? IXL_F32 : IXL_I32, M, 0, NULL)))
    return st;
  const ixl_tensor *all[] = {x, codes, scales};
  const char *names[] = {"x", "codes", "scales"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 3, all, names, 1)))
    return st;
  if (dev == IXL_DEVICE) return ixl_cuda_quantize(ctx, fmt, quantizer, role, x, codes, scales);

  uint8_t *cp = codes->data;
  const int xdt = x->dtype;
#pragma omp parallel for num_threads(ixl_ctx_threads(ctx)) schedule(static) if (M > 256)
  for (int64_t i = 0; i < M; i++) {
    float v[IXL_D];
    for (int d = 0; d < IXL_D; d++) v[d] = load_x(x->data, xdt, i * IXL_D + d);
    uint8_t *c = cp + i * vb;
    if (fmt == IXL_FP8) {
      ((float *)scales->data)[i] = quantize_fp8_vec(role, quantizer, v, c);
    } else {
      uint8_t b[4];
      for (int g = 0; g < 4; g++)
        b[g] = quantize_mx_group(fmt, quantizer, v + g * IXL_GROUP, c + g * (vb / 4));
      memcpy((uint8_t *)scales->data + i * 4, b, 4); /* byte j scales group j (little-endian) */
    }
  }
  return IXL_OK;
}

ixl_status ixl_dequantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_role role, const ixl_tensor *codes,
                          const ixl_tensor *scales, ixl_tensor *out) {
  ixl_status st;
  if ((st = check_fmt(ctx, fmt))) return st;
  if (role != IXL_ROLE_Q && role != IXL_ROLE_K)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "role = %d: must be q (0) or k (1)", (int)role);
  const int64_t vb = ixl_format_value_bytes(fmt);
  if ((st = ixl_check_tensor(ctx, codes, "codes", IXL_U8, -1))) return st;
  if (codes->ndim < 1 || codes->shape[codes->ndim - 1] != vb)
    return ixl_set_error(
        ctx, IXL_ERR_SHAPE, "codes: shape[%d] = %lld, expected %lld (the value bytes of %s)",
        codes->ndim - 1, (long long)(codes->ndim ? codes->shape[codes->ndim - 1] : 0),
        (long long)vb, ixl_kv_format_name(fmt));
  const int64_t M = ixl_tensor_numel(codes) / vb;
  const int need_scales = !(fmt == IXL_FP8 && role == IXL_ROLE_Q);
  if (need_scales || scales)
    if ((st = check_vectors(ctx, scales, "scales", fmt == IXL_FP8 ? IXL_F32 : IXL_I32, M, 0, NULL)))
      return st;
  if ((st = check_vectors(ctx, out, "out", IXL_F32, M, IXL_D, "the head dim D"))) return st;
  const ixl_tensor *all[] = {codes, scales, out};
  const char *names[] = {"codes", "scales", "out"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 3, all, names, 2)))
    return st;
  if (dev == IXL_DEVICE) return ixl_cuda_dequantize(ctx, fmt, role, codes, scales, out);

  const uint8_t *cp = codes->data, *sp = scales ? scales->data : NULL;
  float *op = out->data;
#pragma omp parallel for num_threads(ixl_ctx_threads(ctx)) schedule(static) if (M > 256)
  for (int64_t i = 0; i < M; i++) {
    float v[IXL_D];
    ixl_decode_values(fmt, cp + i * vb, v);
    for (int d = 0; d < IXL_D; d++) {
      float y;
      if (fmt == IXL_FP8) {
        y = role == IXL_ROLE_Q ? v[d] : v[d] * ixl_load_f32(sp + i * 4);
      } else {
        int b = sp[i * 4 + d / IXL_GROUP];
        y = b == IXL_NAN_SCALE ? NAN : ixl_scale_pow2f(v[d], b - 127);
      }
      op[i * IXL_D + d] = y;
    }
  }
  return IXL_OK;
}

ixl_status ixl_prepare_weights(ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *weights,
                               const ixl_tensor *q_scales, ixl_tensor *dense_f32,
                               ixl_tensor *sparse_bf16) {
  ixl_status st;
  if ((st = check_fmt(ctx, fmt))) return st;
  if ((st = ixl_check_tensor(ctx, weights, "weights", IXL_F32, 2))) return st;
  const int64_t R = weights->shape[0], H = weights->shape[1];
  if (fmt == IXL_FP8) {
    if ((st = ixl_check_tensor(ctx, q_scales, "q_scales", IXL_F32, 2)) ||
        (st = ixl_check_dim(ctx, q_scales, "q_scales", 0, R)) ||
        (st = ixl_check_dim(ctx, q_scales, "q_scales", 1, H)))
      return st;
  } else if (q_scales) {
    return ixl_set_error(
        ctx, IXL_ERR_INVALID_ARG,
        "q_scales: must be NULL for %s (its Q scales stay with the codes; only fp8 "
        "folds them into the weights)",
        ixl_kv_format_name(fmt));
  }
  if (!dense_f32 && !sparse_bf16)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "prepare_weights: dense_f32 and sparse_bf16 are both NULL");
  if (dense_f32 && ((st = ixl_check_tensor(ctx, dense_f32, "dense_f32", IXL_F32, 2)) ||
                    (st = ixl_check_dim(ctx, dense_f32, "dense_f32", 0, R)) ||
                    (st = ixl_check_dim(ctx, dense_f32, "dense_f32", 1, H))))
    return st;
  if (sparse_bf16 && ((st = ixl_check_tensor(ctx, sparse_bf16, "sparse_bf16", IXL_BF16, 2)) ||
                      (st = ixl_check_dim(ctx, sparse_bf16, "sparse_bf16", 0, R)) ||
                      (st = ixl_check_dim(ctx, sparse_bf16, "sparse_bf16", 1, H))))
    return st;
  const ixl_tensor *all[] = {weights, q_scales, dense_f32, sparse_bf16};
  const char *names[] = {"weights", "q_scales", "dense_f32", "sparse_bf16"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 4, all, names, 2)))
    return st;
  if (dev == IXL_DEVICE)
    return ixl_cuda_prepare_weights(ctx, fmt, weights, q_scales, dense_f32, sparse_bf16);

  const float *w = weights->data, *qs = q_scales ? q_scales->data : NULL;
  for (int64_t i = 0; i < R * H; i++) {
    float v = qs ? w[i] * qs[i] : w[i]; /* fp32(w * q_scale), then bf16 of that fp32 */
    if (dense_f32) ((float *)dense_f32->data)[i] = v;
    if (sparse_bf16) ((uint16_t *)sparse_bf16->data)[i] = ixl_f32_to_bf16(v);
  }
  return IXL_OK;
}

ixl_status ixl_kv_pages_write(ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *codes,
                              const ixl_tensor *scales, int64_t src_start, int64_t count,
                              ixl_tensor *pages, int page_size, const ixl_tensor *page_ids) {
  ixl_status st;
  if ((st = check_fmt(ctx, fmt))) return st;
  const int64_t vb = ixl_format_value_bytes(fmt);
  if ((st = ixl_check_tensor(ctx, codes, "codes", IXL_U8, 2))) return st;
  if (codes->shape[1] != vb)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "codes: shape[1] = %lld, expected %lld (the value bytes of %s)",
                         (long long)codes->shape[1], (long long)vb, ixl_kv_format_name(fmt));
  const int64_t N = codes->shape[0];
  if ((st = ixl_check_tensor(ctx, scales, "scales", fmt == IXL_FP8 ? IXL_F32 : IXL_I32, 1)) ||
      (st = ixl_check_dim(ctx, scales, "scales", 0, N)))
    return st;
  if (page_size <= 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "page_size = %d: must be > 0", page_size);
  if (src_start < 0 || count < 0 || src_start > N || count > N - src_start)
    return ixl_set_error(
        ctx, IXL_ERR_INVALID_ARG,
        "src_start = %lld, count = %lld: positions [src_start, src_start + count) must "
        "lie in [0, N = %lld) (the rows of codes)",
        (long long)src_start, (long long)count, (long long)N);
  if ((st = ixl_check_tensor(ctx, pages, "pages", IXL_U8, 2))) return st;
  const int64_t num_pages = pages->shape[0], stride = pages->shape[1];
  const int64_t need = (int64_t)page_size * (vb + 4);
  if (stride < need || stride % 512)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "pages: shape[1] (page stride) = %lld: must be a multiple of 512 and >= "
                         "page_size * %lld = %lld",
                         (long long)stride, (long long)(vb + 4), (long long)need);
  const int64_t npages = ixl_ceil_div(count, page_size);
  if ((st = ixl_check_tensor(ctx, page_ids, "page_ids", IXL_I32, 1))) return st;
  if (page_ids->shape[0] < npages)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "page_ids: shape[0] = %lld: must be >= ceil(count / page_size) = %lld",
                         (long long)page_ids->shape[0], (long long)npages);
  const ixl_tensor *all[] = {codes, scales, pages, page_ids};
  const char *names[] = {"codes", "scales", "pages", "page_ids"};
  int dev;
  if ((st = ixl_check_same_device(ctx, &dev, 4, all, names))) return st;
  /* The copy reads codes and scales while it writes pages (memcpy on the CPU, one kernel on
   * the GPU): shared memory would give order-dependent bytes. */
  if ((st = ixl_check_disjoint(ctx, pages, "pages", codes, "codes")) ||
      (st = ixl_check_disjoint(ctx, pages, "pages", scales, "scales")) ||
      (st = ixl_check_disjoint(ctx, pages, "pages", page_ids, "page_ids")))
    return st;
  /* Device page_ids are not visible here: the kernel skips ids outside [0, num_pages) and
   * repeated ids are the caller's to avoid (idxlab.h says so). */
  if (dev == IXL_DEVICE)
    return ixl_cuda_kv_pages_write(ctx, fmt, codes, scales, src_start, count, pages, page_size,
                                   page_ids);

  const int32_t *ids = page_ids->data;
  /* Two logical pages in one page would overwrite each other: a bitmap over num_pages marks
   * the ids seen, so the check is linear in npages (plus num_pages / 8 bytes to clear). */
  uint8_t *seen = NULL;
  if (npages > 0) {
    const int64_t map_bytes = num_pages / 8 + 1;
    if ((st = ixl_ctx_scratch(ctx, IXL_PAGES_SEEN_SLOT, map_bytes, IXL_HOST, (void **)&seen)))
      return st;
    memset(seen, 0, (size_t)map_bytes);
  }
  for (int64_t j = 0; j < npages; j++) {
    if (ids[j] < 0 || ids[j] >= num_pages)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "page_ids[%lld] = %d: must be in [0, num_pages) = [0, %lld)",
                           (long long)j, ids[j], (long long)num_pages);
    const uint8_t bit = (uint8_t)(1u << (ids[j] & 7));
    if (seen[ids[j] >> 3] & bit) {
      int64_t k = 0;
      while (k < j && ids[k] != ids[j]) k++; /* the error path only: name the first use */
      return ixl_set_error(
          ctx, IXL_ERR_INVALID_ARG,
          "page_ids[%lld] = %d: already used by page_ids[%lld]; each page holds one "
          "logical page",
          (long long)j, ids[j], (long long)k);
    }
    seen[ids[j] >> 3] |= bit;
  }
  const uint8_t *cp = codes->data, *sp = scales->data;
  uint8_t *pp = pages->data;
  for (int64_t p = 0; p < count; p++) {
    uint8_t *base = pp + (int64_t)ids[p / page_size] * stride;
    int64_t slot = p % page_size;
    memcpy(base + slot * vb, cp + (src_start + p) * vb, (size_t)vb);
    memcpy(base + (int64_t)page_size * vb + slot * 4, sp + (src_start + p) * 4, 4);
  }
  return IXL_OK;
}
