/* index/remap.h - what K7's entry (remap.c) shares with the fused K6 + K7 op (select/topk.c). */
#ifndef IXL_INDEX_REMAP_H
#define IXL_INDEX_REMAP_H
#include "internal.h"

/* The checks of K7's map for R rows: sparse_block_kv a power of two, sparse_ids I32 [R, NSB]
 * with NSB * sparse_block_kv representable, row_ks NULL or I32 [R]. */
ixl_status ixl_remap_check_map(ixl_ctx *ctx, int64_t R, const ixl_tensor *sparse_ids,
                               const ixl_tensor *row_ks, int sparse_block_kv);

#endif
