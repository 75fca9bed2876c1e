// select.cu - K3 candidate selection (ixl_cuda_candidate_select) and the comparison path's
// candidate mask (ixl_cuda_mask_candidates) on the GPU; the same results as
// kernels/select/candidates.c.
//
// K3 reuses the top-k radix select of cuda/common.cuh with the block scores as keys. The
// scores are never stored: every pass of the select recomputes a block's score from its cbs
// logits (a few loads from L2), so the op needs no scratch. Block scores follow the CPU
// definition exactly: max in fp32 with NaN propagating; sum and mean accumulated in double in
// increasing position order, then rounded to fp32; logsumexp as m + log(sum exp(x - m)) in
// double. CUDA's double exp/log may differ from glibc's by an ulp, which can change the order
// of two blocks only when their scores are within about 1e-7 relative (a near-tie).
#include "cuda/common.cuh"

namespace {

using namespace ixl;
constexpr int NT = SELECT_THREADS;

// The blocks of one row, keyed by score; the newest block scores +inf unless its score is NaN.
struct RowBlocks {
  const float *x; // the row's logits, columns = request-local positions
  int64_t len;    // visible positions
  int64_t n;      // blocks: ceil(len / cbs)
  int cbs;
  int how;        // ixl_block_score
  bool aligned4;  // cbs % 4 == 0 and the row starts 16-byte aligned

  __device__ float score(int64_t b) const {
    const int64_t lo = b * cbs, hi = lo + cbs < len ? lo + cbs : len;
    if (how == IXL_SCORE_SUM || how == IXL_SCORE_MEAN) {
      double acc = 0;
      for (int64_t i = lo; i < hi; i++) acc += (double)x[i];
      return how == IXL_SCORE_SUM ? (float)acc : (float)(acc / (double)(hi - lo));
    }
    float m = -INFINITY;
    bool nan = false;
    int64_t i = lo;
    if (aligned4) // 16-byte loads: blocks start at multiples of cbs, a multiple of 4 here
      for (; i + 4 <= hi; i += 4) {
        const float4 v = *reinterpret_cast<const float4 *>(x + i);
        nan |= isnan(v.x) | isnan(v.y) | isnan(v.z) | isnan(v.w);
        m = fmaxf(fmaxf(m, v.x), fmaxf(fmaxf(v.y, v.z), v.w)); // NaN is tracked apart
      }
    for (; i < hi; i++) {
      const float v = x[i];
      nan |= isnan(v);
      m = fmaxf(m, v);
    }
    if (nan) return __int_as_float(0x7fc00000);
    if (how == IXL_SCORE_MAX || isinf(m)) return m;
    double s = 0;
    for (int64_t i = lo; i < hi; i++) s += exp((double)x[i] - (double)m);
    return (float)((double)m + log(s));
  }
  __device__ uint32_t key_at(int64_t b) const {
    const uint32_t key = ixl_order_key_f32(score(b));
    return b == n - 1 && key != IXL_KEY_NAN ? IXL_KEY_POS_INF : key;
  }
  static constexpr int W = 1;
  template <class F>
  __device__ void visit(int64_t lo, int64_t hi, F &&f) const {
    for (int64_t base = lo; base < hi; base += NT) { // the same trip count in every thread
      const int64_t b = base + threadIdx.x;
      const uint32_t k[1] = {b < hi ? key_at(b) : 0u};
      f(b, k, b < hi ? 1u : 0u);
    }
  }
};

__global__ void __launch_bounds__(NT, 1) candidate_select_kernel(
    const float *__restrict__ logits, int64_t C, const int32_t *__restrict__ lens, int cbs,
    int how, int64_t T, int32_t *__restrict__ out, int B, int flags) {
  extern __shared__ uint64_t smem[];
  __shared__ SelectShared sh;
  const int64_t r = blockIdx.x;
  int64_t len = lens[r];
  if (len < 0) len = 0; // validated on the host when visible there; clamp so bad data never faults
  if (len > C) len = C;
  const float *row = logits + r * C;
  const bool aligned4 = cbs % 4 == 0 && ((uintptr_t)row & 15u) == 0;
  RowBlocks src{row, len, (len + cbs - 1) / cbs, cbs, how, aligned4};
  radix_select_row<NT>(src, T, true, out + r * T, smem, B, false, sh, flags);
}

// ---------------------------------------------------------------- the candidate mask
// Grid (rows, column chunks). A CTA marks the candidate blocks that meet its chunk in a
// shared bitmap (all T candidates of the row are read; ids outside the row are ignored), then
// writes -inf to every column of the chunk outside them or at/after lens[r]. Kept columns are
// never touched.
constexpr int MASK_THREADS = 256;
constexpr int64_t MASK_CHUNK = 8192; // columns per CTA
constexpr int MASK_WORDS = (int)(MASK_CHUNK / 32) + 2;

template <typename T>
__global__ void __launch_bounds__(MASK_THREADS) mask_kernel(T *__restrict__ logits, int64_t C,
                                                            const int32_t *__restrict__ lens,
                                                            const int32_t *__restrict__ cand,
                                                            int64_t NC, int cbs, T neg_inf) {
  __shared__ uint32_t keep[MASK_WORDS];
  const int64_t r = blockIdx.x;
  const int64_t c0 = (int64_t)blockIdx.y * MASK_CHUNK;
  if (c0 >= C) return;
  const int64_t c1 = c0 + MASK_CHUNK < C ? c0 + MASK_CHUNK : C;
  int64_t len = lens[r];
  if (len < 0) len = 0;
  if (len > C) len = C;
  const int64_t nb = (len + cbs - 1) / cbs;
  const int64_t b0 = c0 / cbs;                         // first block meeting the chunk
  const int64_t b1 = (c1 - 1) / cbs;                   // last one
  for (int w = threadIdx.x; w < MASK_WORDS; w += MASK_THREADS) keep[w] = 0;
  __syncthreads();
  const int32_t *cr = cand + r * NC;
  for (int64_t t = threadIdx.x; t < NC; t += MASK_THREADS) {
    const int64_t c = cr[t];
    if (c >= 0 && c < nb && c >= b0 && c <= b1) {
      const int64_t bit = c - b0; // < MASK_CHUNK / cbs + 2
      atomicOr(&keep[bit >> 5], 1u << (bit & 31));
    }
  }
  __syncthreads();
  T *row = logits + r * C;
  for (int64_t j = c0 + threadIdx.x; j < c1; j += MASK_THREADS) {
    const int64_t bit = j / cbs - b0;
    const bool kept = j < len && (keep[bit >> 5] >> (bit & 31) & 1u);
    if (!kept) row[j] = neg_inf;
  }
}

} // namespace

extern "C" ixl_status ixl_cuda_candidate_select(ixl_ctx *ctx, const ixl_tensor *logits,
                                                const ixl_tensor *lens, int candidate_block_size,
                                                ixl_block_score score, ixl_tensor *out) {
  const int64_t R = logits->shape[0], C = logits->shape[1], T = out->shape[1];
  if (R == 0 || T == 0) return IXL_OK;
  if (R > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "candidate_select: logits: shape[0] = %lld: must be <= %d rows on the GPU",
                         (long long)R, INT32_MAX);
  const int B = select_buffer_entries(T, (C + candidate_block_size - 1) / candidate_block_size);
  const size_t smem = select_smem_bytes(B);
  ixl_status st = ixl_cuda_status(
      ctx, cudaFuncSetAttribute(candidate_select_kernel,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "candidate_select: cudaFuncSetAttribute");
  if (st) return st;
  candidate_select_kernel<<<(unsigned)R, NT, smem, stream_of(ctx)>>>(
      (const float *)logits->data, C, (const int32_t *)lens->data, candidate_block_size,
      (int)score, T, (int32_t *)out->data, B, select_flags());
  return ixl_cuda_check_launch(ctx, "candidate_select");
}

extern "C" ixl_status ixl_cuda_mask_candidates(ixl_ctx *ctx, ixl_tensor *logits,
                                               const ixl_tensor *lens, const ixl_tensor *cand,
                                               int candidate_block_size) {
  const int64_t R = logits->shape[0], C = logits->shape[1], NC = cand->shape[1];
  if (R == 0 || C == 0) return IXL_OK;
  const int64_t chunks = (C + MASK_CHUNK - 1) / MASK_CHUNK;
  if (R > INT32_MAX || chunks > 65535)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "mask_candidates: logits: shape [%lld, %lld]: the GPU takes at most "
                         "%d rows of at most %lld columns",
                         (long long)R, (long long)C, INT32_MAX, 65535LL * MASK_CHUNK);
  const dim3 grid((unsigned)R, (unsigned)chunks);
  const int32_t *cd = NC ? (const int32_t *)cand->data : nullptr;
  if (logits->dtype == IXL_BF16)
    mask_kernel<uint16_t><<<grid, MASK_THREADS, 0, stream_of(ctx)>>>(
        (uint16_t *)logits->data, C, (const int32_t *)lens->data, cd, NC, candidate_block_size,
        (uint16_t)0xff80);
  else
    mask_kernel<float><<<grid, MASK_THREADS, 0, stream_of(ctx)>>>(
        (float *)logits->data, C, (const int32_t *)lens->data, cd, NC, candidate_block_size,
        -INFINITY);
  return ixl_cuda_check_launch(ctx, "mask_candidates");
}
