// common.cuh - the CUDA primitives the op kernels of kernels/{formats,select,index}/ use, in
// one include: scalar conversions and order keys (scalar.cuh), block-wide scans (scan.cuh),
// launch helpers and the kernels' conventions (launch.cuh), and the per-row radix select
// (radix_select.cuh).
#ifndef IXL_CUDA_COMMON_CUH
#define IXL_CUDA_COMMON_CUH

#include <stdlib.h>
#include <string.h>

#include "cuda/launch.cuh"
#include "cuda/radix_select.cuh"
#include "cuda/scalar.cuh"
#include "cuda/scan.cuh"

#endif
