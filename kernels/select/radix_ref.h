/* select/radix_ref.h - what the CPU selection kernels (K3 candidates, K6 top-k) share: the
 * order-preserving 32-bit key of a float and one radix select over such keys.
 *
 * The key makes unsigned integer order equal SPEC's value order: NaN (any payload) above
 * +inf above every number above -inf, and -0 equal to +0. Equal keys are equal values, so
 * "ties to the smaller index" is a rule on keys alone. */
#ifndef IXL_SELECT_CPU_H
#define IXL_SELECT_CPU_H

#include <stdint.h>
#include <string.h>

/* The key of the float whose bits are u. Branch-free on the sign (random signs would
 * mispredict): a negative value flips every bit (larger magnitude is smaller), a positive one
 * sets the sign bit (positives sit above all negatives). */
static inline uint32_t ixl_order_key_bits(uint32_t u) {
  if (u == 0x80000000u) u = 0; /* -0 equals +0 */
  const uint32_t key = u ^ ((0u - (u >> 31)) | 0x80000000u);
  return (u & 0x7fffffffu) > 0x7f800000u ? 0xffffffffu : key; /* every NaN is one, top value */
}

static inline uint32_t ixl_order_key_f32(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return ixl_order_key_bits(u);
}

/* bf16 is the top half of an f32, so its key is the f32 key of the widened value. */
static inline uint32_t ixl_order_key_bf16(uint16_t x) {
  return ixl_order_key_bits((uint32_t)x << 16);
}

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
