/* internal.h - what the C files of idxlab share and users never see, one private header per
 * seam, included together here for kernels/ (core/ files include the ones they use):
 *   ctx.h           the context's layout, error messages, counted allocation, op scratch
 *   tensor_check.h  overflow-checked sizes and the tensor argument checks of op entries
 *   cuda_rt.h       the CUDA runtime glue (core/cuda_rt.c)
 * The chunker's walk (chunker.h) and the text tools (json.h) are core's alone. */
#ifndef IXL_INTERNAL_H
#define IXL_INTERNAL_H

#include "idxlab.h"

#include <stdarg.h>
#include <stdbool.h>

#include "ctx.h"
#include "cuda_rt.h"
#include "tensor_check.h"

#endif
