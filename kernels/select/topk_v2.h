/* topk_v2.h - the development switches of select v2's top-k (kernels/select/topk_v2.cu):
 * IXL_TOPK_V2_CS, IXL_TOPK_V2_PROFILE and IXL_TOPK_V2_GATHER are read from
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
