/* stubs.c - the CUDA twins for a CUDA=0 build, generated from IXL_CUDA_OPS (ops.h): each
 * answers IXL_ERR_BACKEND with "<name>: device tensors need a CUDA build (this one is
 * CUDA=0)", so a device tensor on a CPU-only build is a clear error, never a crash. */
#include "ops.h"

#ifndef IXL_WITH_CUDA
/* A stub reads only ctx; naming the other parameters unused one by one would need them
 * listed a second time. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define IXL_CUDA_STUB(name, params)                                                            \
  ixl_status ixl_cuda_##name params {                                                          \
    return ixl_set_error(ctx, IXL_ERR_BACKEND,                                                 \
                         #name ": device tensors need a CUDA build (this one is CUDA=0)");     \
  }
IXL_CUDA_OPS(IXL_CUDA_STUB)
#undef IXL_CUDA_STUB
#endif
