/* rand.h - the C tests' seeded random inputs, one copy: the generator the tests draw from, the
 * numbers made of its draws, random byte fills, and the CPU context and host tensors the fills
 * go into. Include it after check.h.
 *
 * Each test file is one translation unit, so the statics here are that test binary's own: one
 * generator state, set by rand_seed (in main, or per test for streams that must reproduce
 * alone) and stepped by rand_u64. Two stepping rules, because a seed given with IXL_TEST_SEED
 * must draw what it drew before the helpers moved here: test_formats and test_logits step
 * xorshift64 (shifts 13, 7, 17; the state must not be 0), the others splitmix64. Every helper
 * takes its draws in a fixed order (C leaves the order of a call's arguments open, so no draw
 * is ever an argument next to another). */
#ifndef IXL_TEST_RAND_H
#define IXL_TEST_RAND_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "idxlab.h"

typedef enum { RAND_SPLITMIX64, RAND_XORSHIFT64 } rand_rule;

static uint64_t rand_state_;
static rand_rule rand_rule_;

static inline void rand_seed(rand_rule rule, uint64_t state) {
  rand_rule_ = rule;
  rand_state_ = state;
}

static inline uint64_t rand_u64(void) {
  if (rand_rule_ == RAND_XORSHIFT64) {
    rand_state_ ^= rand_state_ << 13;
    rand_state_ ^= rand_state_ >> 7;
    rand_state_ ^= rand_state_ << 17;
    return rand_state_;
  }
  uint64_t z = (rand_state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* The top half of one draw. */
static inline uint32_t rand_u32(void) { return (uint32_t)(rand_u64() >> 32); }
/* [0, n) from one draw (modulo: the bias is far below what a test can see); n <= 0: 0, and
 * nothing drawn. */
static inline int64_t rand_below(int64_t n) {
  return n <= 0 ? 0 : (int64_t)(rand_u64() % (uint64_t)n);
}
/* [lo, hi] from one draw, lo <= hi. */
static inline int64_t rand_range(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rand_u64() % (uint64_t)(hi - lo + 1));
}
/* [0, 1) from the top 53 bits of one draw. */
static inline double rand_unit(void) { return (double)(rand_u64() >> 11) * 0x1p-53; }
/* A standard normal from two draws (Box-Muller, u then v; u moved off 0 for the log). */
static inline double rand_normal(void) {
  const double u = rand_unit() + 1e-300, v = rand_unit();
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
/* n random bytes, each the low 8 bits of one draw. */
static inline void rand_bytes(void *p, int64_t n) {
  uint8_t *b = p;
  for (int64_t i = 0; i < n; i++) b[i] = (uint8_t)rand_u64();
}

/* ---------------------------------------------------------------- where the draws go */
/* A CPU context with `threads` OpenMP threads (0: the context's default); exits when it
 * cannot be made, as nothing can be tested then. */
static inline ixl_ctx *test_ctx(int threads) {
  ixl_ctx *ctx = NULL;
  if (ixl_ctx_new(IXL_BACKEND_CPU, 0, 1, &ctx) != IXL_OK) {
    fprintf(stderr, "cannot make a CPU context\n");
    exit(1);
  }
  if (threads > 0) ixl_ctx_set_threads(ctx, threads);
  return ctx;
}
/* A host tensor of shape {a, b, c}[0, ndim); exits with the library's message when it cannot
 * be made. The caller frees it. */
static inline ixl_tensor *tnew(ixl_ctx *ctx, ixl_dtype dt, int ndim, int64_t a, int64_t b,
                               int64_t c) {
  int64_t shape[3] = {a, b, c};
  ixl_tensor *t = NULL;
  if (ixl_tensor_new(ctx, dt, ndim, shape, IXL_HOST, &t) != IXL_OK) {
    fprintf(stderr, "tensor_new: %s\n", ixl_last_error(ctx));
    exit(1);
  }
  return t;
}
#endif
