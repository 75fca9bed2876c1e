/* select/radix_ref.h - what the CPU selection kernels (K3 candidates, K6 top-k) share: one
 * radix select over order-preserving 32-bit keys. The keys (ixl_order_key_f32/_bf16: unsigned
 * order = SPEC's value order, NaN on top, -0 = +0, equal keys = equal values, so "ties to the
 * smaller index" is a rule on keys alone) live in numerics/scalar.h, the copy the GPU select
 * uses too. */
#ifndef IXL_SELECT_RADIX_REF_H
#define IXL_SELECT_RADIX_REF_H

#include <stdint.h>

#include "numerics/scalar.h"

/* uint32 words of scratch ixl_select_top needs for n keys and a given k: 2n + 4 min(n, k).
 * Returns -1 when that overflows int64 (callers turn it into an error). */
int64_t ixl_select_top_scratch_words(int64_t n, int64_t k);

/* Selects the k largest of keys[0..n) with ties to the smaller index and writes their
 * indices to idx[0..m), m = min(k, n), which it returns. Order: sorted != 0 -> key
 * descending, then index ascending; sorted == 0 -> index ascending. A radix select, never a
 * full sort: two passes over all n keys (a histogram of the top 11 bits, then a split into
 * sure winners and the k-th largest's bin), then 11 and 10 more bits over that bin only;
 * sorting touches only the m winners. scratch: at least ixl_select_top_scratch_words(n, k)
 * words. n, k >= 0; indices fit int32 (n <= INT32_MAX). */
int64_t ixl_select_top(const uint32_t *keys, int64_t n, int64_t k, int sorted, int32_t *idx,
                       uint32_t *scratch);

#endif
