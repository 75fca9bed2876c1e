/* sm90_stub.c - the Hopper kit's self-test in a CUDA=0 build (kernels/cuda/sm90.h): there is
 * no device to test, so it answers IXL_ERR_BACKEND as kernels/stubs.c's twins do. With CUDA
 * the definition is kernels/cuda/sm90_selftest.cu and this file compiles to nothing. */
#include <stdio.h>

#include "cuda/sm90.h"

#ifndef IXL_WITH_CUDA
ixl_status ixl_cuda_sm90_selftest(ixl_ctx *ctx, uint64_t seed, char *report, size_t n) {
  (void)seed;
  if (report && n) snprintf(report, n, "sm90 self-test: not built (CUDA=0)\n");
  return ixl_set_error(ctx, IXL_ERR_BACKEND,
                       "sm90_selftest: device tensors need a CUDA build (this one is CUDA=0)");
}
#endif
