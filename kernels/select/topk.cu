// topk.cu - K6 top-k on the GPU (ixl_cuda_topk): per row, the k largest of the columns
// [row_start, row_end) of fp32 or bf16 logits, ties to the smaller column, NaN above every
// number, -0 equal to +0, -1 pads last; unsorted = ascending column order, sorted = (value
// descending, column ascending). The same results as kernels/select/topk.c, exactly.
//
// One CTA per row runs the radix select of cuda/radix_select.cuh over order-preserving keys:
// histogram passes over the row (11/11/10 key bits for fp32, 8/8 for bf16) until the keys at
// or above the k-th largest fit in shared memory, one pass to collect them, then a bitonic
// sort of those few thousand entries. No full sort of a row, no scratch in device memory,
// nothing allocated, nothing synchronised: the op is graph-capturable. PDL (cuda/launch.cuh):
// the kernel waits at entry (the logits and ranges are previous kernels' outputs), then lets a
// dependent PDL launch start.
#include "cuda/common.cuh"

namespace {

using namespace ixl;
constexpr int NT = SELECT_THREADS;

// A row of fp32 (W = 4) or bf16 (W = 8) logits, W keys per call: one 16-byte load per call
// where the row is aligned (a head of fewer than W elements before that, and a tail after, go
// to thread 0). Every thread makes the same calls (visit's contract in cuda/radix_select.cuh).
template <typename T, int W_> struct Row {
  static_assert(W_ * sizeof(T) == 16, "one 16-byte vector per call");
  static constexpr int W = W_;
  const T *x;
  int64_t n;
  __device__ static uint32_t key(float v) { return ixl_order_key_f32(v); }
  __device__ static uint32_t key(uint16_t v) { return ixl_order_key_bf16(v); }
  __device__ uint32_t key_at(int64_t i) const { return key(x[i]); }
  template <class F>
  __device__ void visit(int64_t lo, int64_t hi, F &&f) const {
    constexpr unsigned all = (1u << W) - 1u;
    const T *p = x + lo;
    const int64_t m = hi - lo;
    int64_t head = (int64_t)(((16u - ((uintptr_t)p & 15u)) & 15u) / sizeof(T));
    if (head > m) head = m;
    const int64_t nv = (m - head) / W, tail = m - head - W * nv;
    uint32_t k[W];
#pragma unroll
    for (int j = 0; j < W; j++) k[j] = 0u;
    if (head > 0) {
      if (threadIdx.x == 0)
        for (int j = 0; j < head; j++) k[j] = key(p[j]);
      f(lo, k, threadIdx.x == 0 ? (1u << head) - 1u : 0u);
    }
    const uint4 *q = reinterpret_cast<const uint4 *>(p + head);
    // 4 loads of 16 bytes in flight per thread, 32 KiB per CTA (two CTAs fit an SM)
    for (int64_t base = 0; base < nv; base += 4 * NT) {
      uint4 a[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int64_t v = base + u * NT + threadIdx.x;
        if (v < nv) a[u] = q[v];
      }
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int64_t v = base + u * NT + threadIdx.x;
        const bool ok = v < nv;
        T e[W];
        memcpy(e, &a[u], 16);
#pragma unroll
        for (int j = 0; j < W; j++) k[j] = ok ? key(e[j]) : 0u;
        f(lo + head + W * v, k, ok ? all : 0u);
      }
    }
    if (tail > 0) {
      const int64_t t0 = head + W * nv;
      if (threadIdx.x == 0)
        for (int j = 0; j < tail; j++) k[j] = key(p[t0 + j]);
      f(lo + t0, k, threadIdx.x == 0 ? (1u << tail) - 1u : 0u);
    }
  }
};
using RowF32 = Row<float, 4>;
using RowBF16 = Row<uint16_t, 8>;

template <typename T, class Row, bool KEY16>
__global__ void __launch_bounds__(NT, 1) topk_kernel(const T *__restrict__ logits, int64_t C,
                                                  const int32_t *__restrict__ row_start,
                                                  const int32_t *__restrict__ row_end, int k,
                                                  int sorted, int32_t *__restrict__ out, int B,
                                                  int flags) {
  extern __shared__ uint64_t smem[];
  __shared__ SelectShared sh;
  pdl_wait();    // before the first global access (cuda/launch.cuh's rule)
  pdl_trigger(); // safe anywhere: a dependent waits for this grid's end, not for this
  const int64_t r = blockIdx.x;
  // the op validated the ranges on the host when it could; clamp so bad data never faults
  int64_t s = row_start ? row_start[r] : 0, e = row_end[r];
  if (s < 0) s = 0;
  if (e > C) e = C;
  const int64_t n = e > s ? e - s : 0;
  Row src{n > 0 ? logits + r * C + s : logits, n};
  radix_select_row<NT>(src, k, sorted != 0, out + r * (int64_t)k, smem, B, KEY16, sh, flags);
}

template <typename T, class Row, bool KEY16>
ixl_status launch_topk(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                       const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out) {
  const int64_t R = logits->shape[0], C = logits->shape[1];
  const int B = select_buffer_entries(k, C);
  const size_t smem = select_smem_bytes(B);
  auto kern = topk_kernel<T, Row, KEY16>;
  ixl_status st = ixl_cuda_status(
      ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "topk: cudaFuncSetAttribute");
  if (st) return st;
  return launch_pdl(ctx, "topk", kern, dim3((unsigned)R), dim3(NT), smem, 1,
                    (const T *)logits->data, C,
                    row_start ? (const int32_t *)row_start->data : nullptr,
                    (const int32_t *)row_end->data, k, sorted, (int32_t *)out->data, B,
                    select_flags());
}

} // namespace

extern "C" ixl_status ixl_cuda_topk(ixl_ctx *ctx, const ixl_tensor *logits,
                                    const ixl_tensor *row_start, const ixl_tensor *row_end, int k,
                                    int sorted, ixl_tensor *out) {
  const int64_t R = logits->shape[0];
  if (R == 0) return IXL_OK;
  if (R > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "topk: logits: shape[0] = %lld: must be <= %d rows on the GPU",
                         (long long)R, INT32_MAX);
  if (logits->dtype == IXL_BF16)
    return launch_topk<uint16_t, RowBF16, true>(ctx, logits, row_start, row_end, k, sorted, out);
  return launch_topk<float, RowF32, false>(ctx, logits, row_start, row_end, k, sorted, out);
}
