// topk.cu - K6 top-k on the GPU (ixl_cuda_topk): per row, the k largest of the columns
// [row_start, row_end) of fp32 or bf16 logits, ties to the smaller column, NaN above every
// number, -0 equal to +0, -1 pads last; unsorted = ascending column order, sorted = (value
// descending, column ascending). The same results as kernels/topk_cpu.c, exactly.
//
// One CTA per row runs the radix select of cuda_common.cuh over order-preserving keys:
// histogram passes over the row (11/11/10 key bits for fp32, 8/8 for bf16) until the keys at
// or above the k-th largest fit in shared memory, one pass to collect them, then a bitonic
// sort of those few thousand entries. No full sort of a row, no scratch in device memory,
// nothing allocated, nothing synchronised: the op is graph-capturable.
#include "cuda_common.cuh"

namespace {

using namespace ixl;
constexpr int NT = SELECT_THREADS;

// A row of fp32 logits: keys read with 16-byte loads where the row is aligned.
struct RowF32 {
  const float *x;
  int64_t n;
  __device__ uint32_t key_at(int64_t i) const { return order_key_f32(x[i]); }
  template <class F>
  __device__ void visit(int64_t lo, int64_t hi, F &&f) const {
    const float *p = x + lo;
    const int64_t m = hi - lo;
    int64_t head = (int64_t)(((16u - ((uintptr_t)p & 15u)) & 15u) >> 2);
    if (head > m) head = m;
    for (int64_t i = threadIdx.x; i < head; i += NT) f(lo + i, order_key_f32(p[i]));
    const float4 *q = reinterpret_cast<const float4 *>(p + head);
    const int64_t nv = (m - head) >> 2;
    // 4 loads of 16 bytes in flight per thread, 32 KiB per CTA (two CTAs fit an SM)
    for (int64_t v = threadIdx.x; v < nv; v += 4 * NT) {
      float4 a[4];
#pragma unroll
      for (int u = 0; u < 4; u++)
        if (v + u * NT < nv) a[u] = q[v + u * NT];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        if (v + u * NT < nv) {
          const int64_t b = lo + head + 4 * (v + u * NT);
          f(b, order_key_f32(a[u].x));
          f(b + 1, order_key_f32(a[u].y));
          f(b + 2, order_key_f32(a[u].z));
          f(b + 3, order_key_f32(a[u].w));
        }
      }
    }
    for (int64_t i = head + 4 * nv + threadIdx.x; i < m; i += NT) f(lo + i, order_key_f32(p[i]));
  }
};

// A row of bf16 logits: 8 values per 16-byte load.
struct RowBF16 {
  const uint16_t *x;
  int64_t n;
  __device__ uint32_t key_at(int64_t i) const { return order_key_bf16(x[i]); }
  template <class F>
  __device__ void visit(int64_t lo, int64_t hi, F &&f) const {
    const uint16_t *p = x + lo;
    const int64_t m = hi - lo;
    int64_t head = (int64_t)(((16u - ((uintptr_t)p & 15u)) & 15u) >> 1);
    if (head > m) head = m;
    for (int64_t i = threadIdx.x; i < head; i += NT) f(lo + i, order_key_bf16(p[i]));
    const uint4 *q = reinterpret_cast<const uint4 *>(p + head);
    const int64_t nv = (m - head) >> 3;
    for (int64_t v = threadIdx.x; v < nv; v += 4 * NT) {
      uint4 a[4];
#pragma unroll
      for (int u = 0; u < 4; u++)
        if (v + u * NT < nv) a[u] = q[v + u * NT];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        if (v + u * NT < nv) {
          const int64_t b = lo + head + 8 * (v + u * NT);
          const uint32_t w[4] = {a[u].x, a[u].y, a[u].z, a[u].w};
#pragma unroll
          for (int h = 0; h < 4; h++) {
            f(b + 2 * h, order_key_bf16((uint16_t)(w[h] & 0xffffu)));
            f(b + 2 * h + 1, order_key_bf16((uint16_t)(w[h] >> 16)));
          }
        }
      }
    }
    for (int64_t i = head + 8 * nv + threadIdx.x; i < m; i += NT) f(lo + i, order_key_bf16(p[i]));
  }
};

template <typename T, class Row, bool KEY16>
__global__ void __launch_bounds__(NT, 2) topk_kernel(const T *__restrict__ logits, int64_t C,
                                                  const int32_t *__restrict__ row_start,
                                                  const int32_t *__restrict__ row_end, int k,
                                                  int sorted, int32_t *__restrict__ out, int B) {
  extern __shared__ uint64_t smem[];
  __shared__ SelectShared sh;
  const int64_t r = blockIdx.x;
  // the op validated the ranges on the host when it could; clamp so bad data never faults
  int64_t s = row_start ? row_start[r] : 0, e = row_end[r];
  if (s < 0) s = 0;
  if (e > C) e = C;
  const int64_t n = e > s ? e - s : 0;
  Row src{n > 0 ? logits + r * C + s : logits, n};
  radix_select_row<NT>(src, k, sorted != 0, out + r * (int64_t)k, smem, B, KEY16, sh);
}

template <typename T, class Row, bool KEY16>
ixl_status launch(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                  const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out) {
  const int64_t R = logits->shape[0], C = logits->shape[1];
  const int B = select_buffer_entries(k, C);
  const size_t smem = select_smem_bytes(B);
  auto kern = topk_kernel<T, Row, KEY16>;
  ixl_status st = ixl_cuda_status(
      ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "topk: cudaFuncSetAttribute");
  if (st) return st;
  kern<<<(unsigned)R, NT, smem, stream_of(ctx)>>>(
      (const T *)logits->data, C, row_start ? (const int32_t *)row_start->data : nullptr,
      (const int32_t *)row_end->data, k, sorted, (int32_t *)out->data, B);
  return ixl_cuda_check_launch(ctx, "topk");
}

} // namespace

extern "C" ixl_status ixl_cuda_topk(ixl_ctx *ctx, const ixl_tensor *logits,
                                    const ixl_tensor *row_start, const ixl_tensor *row_end, int k,
                                    int sorted, ixl_tensor *out) {
  const int64_t R = logits->shape[0];
  if (R == 0) return IXL_OK;
  if (R > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "topk: logits: shape[0] = %lld: must be <= %d rows on the GPU",
                         (long long)R, INT32_MAX);
  if (logits->dtype == IXL_BF16)
    return launch<uint16_t, RowBF16, true>(ctx, logits, row_start, row_end, k, sorted, out);
  return launch<float, RowF32, false>(ctx, logits, row_start, row_end, k, sorted, out);
}
