/* workload.cu - the synthetic workload generator on the GPU. The plan comes built and
 * validated from kernels/gen/workload.c; the math is kernels/gen/workload_math.h, the same code
 * the CPU runs, compiled here with the non-fusing __f*_rn intrinsics, so the bits match the CPU's.
 * One thread writes 4 consecutive channels of one vector (D is a multiple of 4). */
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "ops.h"
}
#include "gen/workload_math.h"

namespace {

constexpr int kThreads = 256;

__global__ void tables_kernel(wl_plan p, const unsigned char *blob, float *tables, int64_t n_vec) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int groups = p.D / 4;
  if (i >= n_vec * groups) return;
  int64_t v = i / groups;
  int d0 = (int)(i % groups) * 4;
  wl_table_row(&p, blob, v, tables + v * p.D, d0, d0 + 4);
}

__global__ void keys_kernel(wl_plan p, const unsigned char *blob, const float *tables, float *k) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int groups = p.D / 4;
  if (i >= p.N * groups) return;
  int64_t n = i / groups;
  int d0 = (int)(i % groups) * 4;
  const wl_req *rq = WL_PTR(wl_req, blob, p.off_req);
  int32_t lo = 0, hi = p.n_req - 1;
  while (lo < hi) {
    int32_t mid = (lo + hi + 1) >> 1;
    if (rq[mid].k_start <= n) lo = mid; else hi = mid - 1;
  }
  float *out = k + n * p.D;
  if (p.n_req > 0 && n >= rq[lo].k_start && n < rq[lo].k_start + rq[lo].seq_len) {
    wl_key_elems(&p, blob, tables, lo, n - rq[lo].k_start, out, d0, d0 + 4);
  } else {
    for (int d = d0; d < d0 + 4; d++) out[d] = 0.0f;
  }
}

/* Layer 0 writes q, layers >= 1 write q_consumer[layer - 1]. */
__global__ void queries_kernel(wl_plan p, const unsigned char *blob, const float *tables, float *q,
                               float *q_consumer) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int groups = p.D / 4;
  const int64_t per_layer = p.R * p.H * groups;
  if (i >= per_layer * p.layers) return;
  int layer = (int)(i / per_layer);
  int64_t j = i % per_layer;
  int64_t row = j / (p.H * groups);
  int h = (int)(j / groups % p.H);
  int d0 = (int)(j % groups) * 4;
  float *out = layer == 0 ? q + (row * p.H + h) * p.D
                          : q_consumer + (((int64_t)(layer - 1) * p.R + row) * p.H + h) * p.D;
  wl_query_elems(&p, blob, tables, layer, row, h, out, d0, d0 + 4);
}

__global__ void weights_kernel(wl_plan p, const unsigned char *blob, float *w, float *w_consumer) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int pairs = (p.H + 1) / 2;
  const int64_t per_layer = p.R * pairs;
  if (i >= per_layer * p.layers) return;
  int layer = (int)(i / per_layer);
  int64_t j = i % per_layer;
  int64_t row = j / pairs;
  int h = (int)(j % pairs) * 2;
  float *out = layer == 0 ? w + row * p.H : w_consumer + ((int64_t)(layer - 1) * p.R + row) * p.H;
  wl_weight_pair(&p, blob, layer, row, h, out + h);
}

unsigned int blocks_for(int64_t threads) {
  return (unsigned int)((threads + kThreads - 1) / kThreads);
}

}  // namespace

extern "C" ixl_status ixl_cuda_workload_generate(ixl_ctx *ctx, const wl_plan *plan,
                                                 const void *blob, ixl_tensor *q,
                                                 ixl_tensor *weights, ixl_tensor *k,
                                                 ixl_tensor *q_consumer,
                                                 ixl_tensor *weights_consumer) {
  const wl_plan p = *plan;
  const int64_t n_vec = p.n_anchor + p.n_topic + p.n_needle + 1;
  int64_t tab_elems, tab_bytes, threads;
  if (!ixl_mul_ok(n_vec, p.D, &tab_elems) || !ixl_mul_ok(tab_elems, 4, &tab_bytes) ||
      !ixl_mul_ok(p.N, p.D / 4, &threads) || threads / kThreads >= INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "workload on the GPU: %lld keys of %d channels: "
                         "too large", (long long)p.N, p.D);
  void *dblob = NULL, *dtab = NULL;
  ixl_status st = ixl_device_alloc(ctx, p.blob_bytes, &dblob);
  if (!st) st = ixl_device_alloc(ctx, tab_bytes, &dtab);
  if (!st) st = ixl_cuda_memcpy(ctx, dblob, blob, p.blob_bytes, 1, 0);
  cudaStream_t stream = (cudaStream_t)ixl_ctx_stream(ctx);
  const unsigned char *b = (const unsigned char *)dblob;
  float *tables = (float *)dtab;
  if (!st) {
    tables_kernel<<<blocks_for(tab_elems / 4), kThreads, 0, stream>>>(p, b, tables, n_vec);
    st = ixl_cuda_check_launch(ctx, "workload tables");
  }
  if (!st && p.N > 0) {
    keys_kernel<<<blocks_for(threads), kThreads, 0, stream>>>(p, b, tables, (float *)k->data);
    st = ixl_cuda_check_launch(ctx, "workload keys");
  }
  float *qc = q_consumer ? (float *)q_consumer->data : NULL;
  float *wc = weights_consumer ? (float *)weights_consumer->data : NULL;
  const int64_t q_threads = p.R * p.H * (p.D / 4) * p.layers;
  if (!st && q_threads > 0) {
    queries_kernel<<<blocks_for(q_threads), kThreads, 0, stream>>>(p, b, tables,
                                                                  (float *)q->data, qc);
    st = ixl_cuda_check_launch(ctx, "workload queries");
  }
  const int64_t w_threads = p.R * ((p.H + 1) / 2) * p.layers;
  if (!st && w_threads > 0) {
    weights_kernel<<<blocks_for(w_threads), kThreads, 0, stream>>>(p, b, (float *)weights->data,
                                                                  wc);
    st = ixl_cuda_check_launch(ctx, "workload weights");
  }
  /* cudaFree waits for the kernels that read these buffers. */
  ixl_device_free(ctx, dtab, tab_bytes);
  ixl_device_free(ctx, dblob, p.blob_bytes);
  return st;
}
