/* numerics/philox.h - the one Philox4x32-10 (Random123's function, as cuRAND's PHILOX4_32_10)
 * and the layout of cuRAND's stream over its blocks. Host and device (IXL_NUM_FN): the rng ops
 * (kernels/gen/rng_math.h) and the workload generator (kernels/gen/workload_math.h) draw
 * every random bit from here, on both backends. test_rng.c checks it against Random123's
 * known answers and cuRAND's host generator; test_workload.c against the known answers. */
#ifndef IXL_NUMERICS_PHILOX_H
#define IXL_NUMERICS_PHILOX_H

#include "numerics/exact.h"

/* Ten rounds of the Philox round function on the counter, the key bumped after each round
 * (the bump after the last one is unused). The device takes the high words with __umulhi;
 * the host from one 64-bit product: the same bits. */
IXL_NUM_FN void ixl_philox_block(const uint32_t ctr[4], uint32_t key0, uint32_t key1,
                                 uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  for (int r = 0; r < 10; r++) {
#if defined(__CUDA_ARCH__)
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
#else
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
#endif
    c0 = hi1 ^ c1 ^ key0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ key1;
    c3 = lo0;
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* cuRAND's PHILOX4_32_10 generators hand out the stream in 4-value chunks that walk across
 * 2^16 subsequences before the counter advances: stream value p comes from the block with
 * counter (p/4) / 65536 (words 0-1) and subsequence (p/4) % 65536 (words 2-3), lane p % 4.
 * Checked against cuRAND's host generator for offsets up to 2^62 (tests/c/test_rng.c). */
#define IXL_PHILOX_SUBSEQUENCES 65536u

/* The Philox block holding stream chunk `chunk` (= stream position / 4) for `seed`. */
IXL_NUM_FN void ixl_philox_chunk(uint64_t seed, uint64_t chunk, uint32_t out[4]) {
  uint64_t ctr = chunk / IXL_PHILOX_SUBSEQUENCES, sub = chunk % IXL_PHILOX_SUBSEQUENCES;
  uint32_t c[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), (uint32_t)sub, (uint32_t)(sub >> 32)};
  ixl_philox_block(c, (uint32_t)seed, (uint32_t)(seed >> 32), out);
}

/* Stream value `pos` of `seed`'s stream (32 random bits). */
IXL_NUM_FN uint32_t ixl_philox_at(uint64_t seed, uint64_t pos) {
  uint32_t blk[4];
  ixl_philox_chunk(seed, pos / 4, blk);
  return blk[pos % 4];
}

#endif
