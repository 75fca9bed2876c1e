/* topk_v2.h - the development switches of select v2's top-k (kernels/select/topk_v2.cu):
 * IXL_TOPK_V2_CS, IXL_TOPK_V2_PROFILE, IXL_TOPK_V2_GATHER, IXL_TOPK_V2_NEXT (rows of one CTA
 * on persistent CTAs that prefetch the next row; off by default) and IXL_TOPK_V2_GRID (that
 * kernel's grid cap, for tests) are read from
 * the environment at the first call; a test or benchmark that changes them calls this to read
 * them again. A no-op without CUDA (kernels/select/topk.c). */
#ifndef IXL_SELECT_TOPK_V2_H
#define IXL_SELECT_TOPK_V2_H

#ifdef __cplusplus
extern "C" {
#endif

void ixl_topk_v2_dev_reload(void);

#ifdef __cplusplus
}
#endif
#endif
