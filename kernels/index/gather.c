/* gather.c - gather_cols, the dispatching op the pipeline uses to bring compared values
 * together: out[r, j] = src[r, idx[r, j]], with the type's "no value" (-inf, bf16 -inf, -1) for
 * an index outside the row. The CUDA twin is gather.cu. */
#include <math.h>
#include <stdint.h>

#include "ops.h"

ixl_status ixl_gather_cols(ixl_ctx *ctx, const ixl_tensor *src, const ixl_tensor *idx,
                           ixl_tensor *out) {
  ixl_status st;
  if ((st = ixl_check_tensor(ctx, src, "src", -1, 2))) return st;
  if (src->dtype != IXL_F32 && src->dtype != IXL_BF16 && src->dtype != IXL_I32)
    return ixl_set_error(ctx, IXL_ERR_DTYPE, "src: dtype %s, expected f32, bf16 or i32",
                         ixl_dtype_name((ixl_dtype)src->dtype));
  if ((st = ixl_check_tensor(ctx, idx, "idx", IXL_I32, 2))) return st;
  if ((st = ixl_check_tensor(ctx, out, "out", src->dtype, 2))) return st;
  if ((st = ixl_check_dim(ctx, idx, "idx", 0, src->shape[0]))) return st;
  if ((st = ixl_check_dim(ctx, out, "out", 0, idx->shape[0]))) return st;
  if ((st = ixl_check_dim(ctx, out, "out", 1, idx->shape[1]))) return st;
  const ixl_tensor *ts[3] = {src, idx, out};
  const char *names[3] = {"src", "idx", "out"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 3, ts, names, 2))) return st;
  if (dev == IXL_DEVICE) return ixl_cuda_gather_cols(ctx, src, idx, out);
  const int64_t R = idx->shape[0], K = idx->shape[1], C = src->shape[1];
  const int32_t *ix = idx->data;
  for (int64_t r = 0; r < R; r++) {
    for (int64_t j = 0; j < K; j++) {
      int64_t c = ix[r * K + j];
      int ok = c >= 0 && c < C;
      switch (src->dtype) {
        case IXL_F32:
          ((float *)out->data)[r * K + j] = ok ? ((const float *)src->data)[r * C + c] : -INFINITY;
          break;
        case IXL_BF16:
          ((uint16_t *)out->data)[r * K + j] =
              ok ? ((const uint16_t *)src->data)[r * C + c] : 0xff80;
          break;
        default:
          ((int32_t *)out->data)[r * K + j] = ok ? ((const int32_t *)src->data)[r * C + c] : -1;
      }
    }
  }
  return IXL_OK;
}
