// remap.cu - K7 on the GPU (ixl_cuda_remap): sparse column c of a row -> request-local
// position (id[c / sbk] - ks / sbk) * sbk + c % sbk, -1 for c < 0; the same results as
// kernels/index/remap.c. One thread per element; out may be cols itself (each element is read
// before the same thread writes it). The host refuses bad columns when it can see them; on the
// device a column past the row's sparse columns, or a position outside [0, INT32_MAX], gives -1
// rather than a read outside sparse_ids. PDL (cuda/launch.cuh): the kernel waits at entry (cols
// and ids are previous kernels' outputs), then lets a dependent PDL launch start.
#include "cuda/common.cuh"

namespace {

using namespace ixl;
constexpr int NT = 256;

__global__ void __launch_bounds__(NT)
    remap_kernel(const int32_t *cols, const int32_t *__restrict__ ids,
                 const int32_t *__restrict__ row_ks, int sbk, int64_t R, int64_t k, int64_t nsb,
                 int32_t *out) {
  pdl_wait();    // before the first global access (cuda/launch.cuh's rule)
  pdl_trigger(); // safe anywhere: a dependent waits for this grid's end, not for this
  const int64_t total = R * k, ncols = nsb * sbk;
  for (int64_t e = (int64_t)blockIdx.x * NT + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * NT) {
    const int64_t r = e / k;
    const int64_t c = cols[e];
    int32_t p = -1;
    if (c >= 0 && c < ncols) {
      const int64_t ks = row_ks ? row_ks[r] : 0;
      const int64_t pos = ((int64_t)ids[r * nsb + c / sbk] - ks / sbk) * sbk + c % sbk;
      if (pos >= 0 && pos <= INT32_MAX) p = (int32_t)pos;
    }
    out[e] = p;
  }
}

} // namespace

extern "C" ixl_status ixl_cuda_remap(ixl_ctx *ctx, const ixl_tensor *cols,
                                     const ixl_tensor *sparse_ids, const ixl_tensor *row_ks,
                                     int sparse_block_kv, ixl_tensor *out) {
  const int64_t R = cols->shape[0], k = cols->shape[1], nsb = sparse_ids->shape[1];
  if (R == 0 || k == 0) return IXL_OK;
  return launch_pdl(ctx, "remap", remap_kernel, dim3(grid_for(R * k, NT)), dim3(NT), 0, 1,
                    (const int32_t *)cols->data,
                    nsb ? (const int32_t *)sparse_ids->data : nullptr,
                    row_ks ? (const int32_t *)row_ks->data : nullptr, sparse_block_kv, R, k, nsb,
                    (int32_t *)out->data);
}
