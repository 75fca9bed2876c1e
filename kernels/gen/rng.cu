/* rng.cu - the device side of the RNG. Uniforms come from cuRAND's PHILOX4_32_10 generator
 * (the CPU stream in kernels/gen/rng.c reproduces it bit for bit); normals come from our own kernel
 * running the transform of rng_math.h, the same code the CPU runs, so both give the same
 * floats. Arguments were validated by the dispatching op in kernels/gen/rng.c. */
#include <curand.h>

#include "ops.h" // internal.h's headers carry their own extern "C" blocks
#include "gen/rng_math.h"

/* cuRAND has no status-to-string function. */
static const char *curand_name(curandStatus_t s) {
  switch (s) {
    case CURAND_STATUS_SUCCESS: return "CURAND_STATUS_SUCCESS";
    case CURAND_STATUS_VERSION_MISMATCH: return "CURAND_STATUS_VERSION_MISMATCH";
    case CURAND_STATUS_NOT_INITIALIZED: return "CURAND_STATUS_NOT_INITIALIZED";
    case CURAND_STATUS_ALLOCATION_FAILED: return "CURAND_STATUS_ALLOCATION_FAILED";
    case CURAND_STATUS_TYPE_ERROR: return "CURAND_STATUS_TYPE_ERROR";
    case CURAND_STATUS_OUT_OF_RANGE: return "CURAND_STATUS_OUT_OF_RANGE";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return "CURAND_STATUS_LENGTH_NOT_MULTIPLE";
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED: return "CURAND_STATUS_DOUBLE_PRECISION_REQUIRED";
    case CURAND_STATUS_LAUNCH_FAILURE: return "CURAND_STATUS_LAUNCH_FAILURE";
    case CURAND_STATUS_PREEXISTING_FAILURE: return "CURAND_STATUS_PREEXISTING_FAILURE";
    case CURAND_STATUS_INITIALIZATION_FAILED: return "CURAND_STATUS_INITIALIZATION_FAILED";
    case CURAND_STATUS_ARCH_MISMATCH: return "CURAND_STATUS_ARCH_MISMATCH";
    case CURAND_STATUS_INTERNAL_ERROR: return "CURAND_STATUS_INTERNAL_ERROR";
    default: return "CURAND_STATUS_UNKNOWN";
  }
}

/* A failed cuRAND call: a launch failure may hide a sticky CUDA fault, so ask the runtime
 * first and let ixl_cuda_status poison the context when it is one. */
static ixl_status curand_error(ixl_ctx *ctx, curandStatus_t s, const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return ixl_cuda_status(ctx, (int)e, what);
  return ixl_set_error(ctx, s == CURAND_STATUS_ALLOCATION_FAILED ? IXL_ERR_OOM : IXL_ERR_CUDA,
                       "%s: %s", what, curand_name(s));
}

extern "C" ixl_status ixl_cuda_rng_uniform(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed,
                                           uint64_t offset) {
  if (ctx->poisoned)
    return ixl_set_error(ctx, IXL_ERR_DEVICE_FAULT,
                         "the CUDA context had a sticky device fault earlier; restart the process");
  int64_t n = ixl_tensor_numel(out);
  if (n == 0) return IXL_OK;
  /* A generator per call: it is cheap next to the fill, and the context stays free of cuRAND
   * state (the generator is bound to the context's stream). */
  curandGenerator_t g = NULL;
  curandStatus_t s = curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10);
  if (s != CURAND_STATUS_SUCCESS) return curand_error(ctx, s, "curandCreateGenerator");
  const char *what = "curandSetStream";
  s = curandSetStream(g, (cudaStream_t)ctx->stream);
  if (s == CURAND_STATUS_SUCCESS) {
    what = "curandSetPseudoRandomGeneratorSeed";
    s = curandSetPseudoRandomGeneratorSeed(g, (unsigned long long)seed);
  }
  if (s == CURAND_STATUS_SUCCESS) {
    what = "curandSetGeneratorOffset";
    s = curandSetGeneratorOffset(g, (unsigned long long)offset);
  }
  if (s == CURAND_STATUS_SUCCESS) {
    what = "curandGenerateUniform";
    s = curandGenerateUniform(g, (float *)out->data, (size_t)n);
  }
  curandDestroyGenerator(g);
  if (s != CURAND_STATUS_SUCCESS) return curand_error(ctx, s, what);
  return ixl_cuda_check_launch(ctx, "curandGenerateUniform");
}

/* One thread per output pair j: stream values offset + 2j and offset + 2j + 1. */
__global__ void rng_normal_kernel(float *__restrict__ y, int64_t n, int64_t pairs, uint64_t seed,
                                  uint64_t offset, float mean, float stddev) {
  int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; j < pairs; j += (int64_t)gridDim.x * blockDim.x) {
    uint64_t p = offset + 2 * (uint64_t)j;
    uint32_t blk[4];
    ixl_philox_chunk(seed, p / 4, blk);
    uint32_t x1 = blk[p % 4];
    uint32_t x2 = p % 4 != 3 ? blk[p % 4 + 1] : ixl_philox_at(seed, p + 1);
    float z0, z1;
    ixl_rng_box_muller(ixl_u32_to_uniform(x1), ixl_u32_to_uniform(x2), mean, stddev, &z0, &z1);
    y[2 * j] = z0;
    if (2 * j + 1 < n) y[2 * j + 1] = z1;
  }
}

extern "C" ixl_status ixl_cuda_rng_normal(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed,
                                          uint64_t offset, float mean, float stddev) {
  if (ctx->poisoned)
    return ixl_set_error(ctx, IXL_ERR_DEVICE_FAULT,
                         "the CUDA context had a sticky device fault earlier; restart the process");
  int64_t n = ixl_tensor_numel(out);
  if (n == 0) return IXL_OK;
  int64_t pairs = ixl_ceil_div(n, 2);
  const int threads = 256;
  int64_t blocks = ixl_ceil_div(pairs, threads);
  if (blocks > 65536) blocks = 65536; /* grid-stride loop covers the rest */
  rng_normal_kernel<<<(unsigned)blocks, threads, 0, (cudaStream_t)ctx->stream>>>(
      (float *)out->data, n, pairs, seed, offset, mean, stddev);
  return ixl_cuda_check_launch(ctx, "rng_normal_kernel");
}
