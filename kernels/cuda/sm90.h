/* sm90.h - the private entry of the Hopper kit's GPU self-test (kernels/cuda/sm90_selftest.cu;
 * kernels/cuda/sm90_stub.c with CUDA=0). Internal: no IXL_API, so libidxlab.so does not export
 * it; tests/c/test_cuda_sm90.c reaches it through the static archive. */
#ifndef IXL_CUDA_SM90_H
#define IXL_CUDA_SM90_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs every sm90.cuh primitive on the context's device on fresh random data from `seed`
 * (wgmma e4m3 SS and RS for N = 32, 64, 128 in both shared-memory layouts, one k32 group of
 * e2m1-valued e4m3 per accumulator compared bitwise with the exact products, 4 chained groups
 * of general e4m3 against float64, the e2m1 widening through RS, and a warp-specialized TMA
 * 2-D load into 128B-swizzled shared memory feeding wgmma, with setmaxnreg and elect) and
 * writes one line per case into report (n bytes, always NUL-terminated when n > 0).
 * IXL_OK when every case passes; IXL_ERR_INTERNAL naming the first failing case;
 * IXL_ERR_UNSUPPORTED on a device other than sm_90; IXL_ERR_BACKEND on a CPU context or a
 * CUDA=0 build; a CUDA error as its status. */
ixl_status ixl_cuda_sm90_selftest(ixl_ctx *ctx, uint64_t seed, char *report, size_t n);

#ifdef __cplusplus
}
#endif
#endif
