// common.cuh - the CUDA primitives the op kernels of kernels/{formats,select,index}/ use, in
// one include: the exact scalar rules and order keys (core/numerics/scalar.h), block-wide
// scans (scan.cuh), launch helpers and the kernels' conventions (launch.cuh), and the per-row
// radix select (radix_select.cuh).
#ifndef IXL_CUDA_COMMON_CUH
#define IXL_CUDA_COMMON_CUH

#include <stdlib.h>
#include <string.h>

#include "cuda/launch.cuh"
#include "cuda/radix_select.cuh"
#include "cuda/scan.cuh"
#include "numerics/scalar.h"

#endif
