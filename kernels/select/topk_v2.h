/* topk_v2.h - the development switches of select v2's top-k (kernels/select/topk_v2.cu):
 * IXL_TOPK_V2_CS, IXL_TOPK_V2_PROFILE, IXL_TOPK_V2_GATHER, IXL_TOPK_V2_NEXT (round 2, off by
 * default; bits: 1 rows of one CTA on persistent CTAs that prefetch the next row, 2 a cluster
 * row's first find by DSMEM atomics into CTA 0), IXL_TOPK_V2_GRID (the persistent kernel's
 * grid cap, for tests), IXL_TOPK_V2_STREAM (round 3: 1, the default, many long rows on the
 * streaming kernel, one pass over each row from a sampled threshold; 0 off; 2 every shape it
 * fits, 3 the same on its exact streaming radix, for tests), IXL_TOPK_V2_SUNR (4 or 8 vectors
 * per thread in flight in the streaming kernel), IXL_TOPK_V2_SMU (its sample's mu target, 16;
 * 64 before 2026-12-02),
 * IXL_TOPK_V2_SPROF (its per-phase cycle print), IXL_TOPK_V2_SPF (KB it prefetches into L2
 * ahead, 64; 0 = off, the default before 2026-12-02) and IXL_TOPK_V2_S3 (three of its CTAs per
 * SM; off by default),
 * IXL_TOPK_V2_SHORT (round 4, off by default: 1 rows of one CTA up to 16384 bf16 / 8192 fp32
 * columns on the short-row kernel, the row in registers and a sampled threshold, 512 threads
 * while R <= SMs, else 256; 2 the same on its exact fallback, for tests; 3 its profile; 4 / 5
 * always 512 / 256 threads), IXL_TOPK_V2_SHMU (its sample's mu, 64) and
 * IXL_TOPK_V2_SPIPE (the streaming kernel's loads one round ahead: 1, the default since
 * 2026-12-02; 0 off; 2 also no histogram atomics in the stream, off by default) are read
 * from the environment at the first call; a test or benchmark
 * that changes them calls this to read them again. A no-op without CUDA (kernels/select/topk.c). */
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
