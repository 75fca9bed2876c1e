/* rng.c - the counter-based RNG: Philox4x32-10 and the uniform and normal fills. The CPU
 * stream is cuRAND's PHILOX4_32_10 generator stream (same seed and offset, same bits); device
 * tensors go to kernels/gen/rng.cu. The math shared with the GPU lives in
 * kernels/gen/rng_math.h. */
#include "ops.h"
#include "gen/rng_math.h"

void ixl_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  if (!counter || !key || !out) return;
  ixl_philox_block(counter, key[0], key[1], out);
}

/* Checks shared by both fills; `op` names the call in messages. */
static ixl_status check_out(ixl_ctx *ctx, const ixl_tensor *out, const char *op, int *device) {
  if (!ctx) return IXL_ERR_INVALID_ARG;
  ixl_status st = ixl_check_tensor(ctx, out, op, IXL_F32, -1);
  if (st) return st;
  const ixl_tensor *ts[1] = {out};
  const char *names[1] = {op};
  return ixl_check_same_device(ctx, device, 1, ts, names);
}

/* Positions wrap modulo 2^64 like cuRAND's offset arithmetic; chunks are independent, so the
 * loop splits over threads in 4-value chunks. */
ixl_status ixl_rng_uniform(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset) {
  int device;
  ixl_status st = check_out(ctx, out, "rng_uniform: out", &device);
  if (st) return st;
  if (device == IXL_DEVICE) return ixl_cuda_rng_uniform(ctx, out, seed, offset);
  int64_t n = ixl_tensor_numel(out);
  if (n == 0) return IXL_OK;
  float *y = (float *)out->data;
  /* Values before the first chunk boundary, so the parallel loop starts on whole chunks. */
  int64_t head = (int64_t)((4 - offset % 4) % 4);
  if (head > n) head = n;
  for (int64_t i = 0; i < head; i++)
    y[i] = ixl_u32_to_uniform(ixl_philox_at(seed, offset + (uint64_t)i));
  uint64_t first_chunk = (offset + (uint64_t)head) / 4;
  int64_t nchunks = ixl_ceil_div(n - head, 4);
#pragma omp parallel for schedule(static) num_threads(ixl_ctx_threads(ctx)) if (nchunks > 4096)
  for (int64_t c = 0; c < nchunks; c++) {
    uint32_t blk[4];
    ixl_philox_chunk(seed, first_chunk + (uint64_t)c, blk);
    int64_t base = head + 4 * c;
    for (int l = 0; l < 4 && base + l < n; l++) y[base + l] = ixl_u32_to_uniform(blk[l]);
  }
  return IXL_OK;
}

ixl_status ixl_rng_normal(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset, float mean,
                          float stddev) {
  int device;
  ixl_status st = check_out(ctx, out, "rng_normal: out", &device);
  if (st) return st;
  if (!isfinite(mean))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "rng_normal: mean = %g: must be finite",
                         (double)mean);
  if (!isfinite(stddev) || stddev < 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "rng_normal: stddev = %g: must be finite and >= 0", (double)stddev);
  if (device == IXL_DEVICE) return ixl_cuda_rng_normal(ctx, out, seed, offset, mean, stddev);
  int64_t n = ixl_tensor_numel(out);
  int64_t pairs = ixl_ceil_div(n, 2);
  float *y = (float *)out->data;
#pragma omp parallel for schedule(static) num_threads(ixl_ctx_threads(ctx)) if (pairs > 2048)
  for (int64_t j = 0; j < pairs; j++) {
    uint64_t p = offset + 2 * (uint64_t)j;
    uint32_t blk[4], x1, x2;
    ixl_philox_chunk(seed, p / 4, blk);
    x1 = blk[p % 4];
    x2 = p % 4 != 3 ? blk[p % 4 + 1] : ixl_philox_at(seed, p + 1); /* a pair may span chunks */
    float u1 = ixl_u32_to_uniform(x1), u2 = ixl_u32_to_uniform(x2);
    float z0, z1;
    ixl_rng_box_muller(u1, u2, mean, stddev, &z0, &z1);
    y[2 * j] = z0;
    if (2 * j + 1 < n) y[2 * j + 1] = z1; /* an odd length drops the pair's second value */
  }
  return IXL_OK;
}
