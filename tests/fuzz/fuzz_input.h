/* fuzz_input.h - what the libFuzzer harnesses share: reading typed values off the fuzz bytes
 * (past the end everything reads as 0, so every input decodes), picking "interesting" sizes,
 * and failing loudly when an invariant breaks (abort() is right here: this is a test
 * harness, and libFuzzer records the input that aborted). */
#ifndef IXL_FUZZ_INPUT_H
#define IXL_FUZZ_INPUT_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idxlab.h"

typedef struct {
  const uint8_t *p;
  size_t n, i;
} fz_in;

static inline uint8_t fz_u8(fz_in *in) {
  return in->i < in->n ? in->p[in->i++] : 0;
}
static inline uint32_t fz_u32(fz_in *in) {
  uint32_t v = 0;
  for (int k = 0; k < 4; k++) v |= (uint32_t)fz_u8(in) << (8 * k);
  return v;
}
static inline int64_t fz_i64(fz_in *in) {
  uint64_t v = 0;
  for (int k = 0; k < 8; k++) v |= (uint64_t)fz_u8(in) << (8 * k);
  return (int64_t)v;
}

/* Sizes near every boundary the library checks. */
static const int64_t fz_interesting[] = {0,
                                         1,
                                         -1,
                                         2,
                                         3,
                                         4,
                                         5,
                                         7,
                                         8,
                                         12,
                                         16,
                                         24,
                                         32,
                                         48,
                                         64,
                                         100,
                                         127,
                                         128,
                                         129,
                                         256,
                                         512,
                                         1000,
                                         1024,
                                         2048,
                                         4095,
                                         4096,
                                         4097,
                                         8192,
                                         16384,
                                         65536,
                                         1 << 20,
                                         1 << 23,
                                         (1 << 23) + 8,
                                         2147483647LL,
                                         2147483648LL,
                                         4294967296LL,
                                         1LL << 40,
                                         1LL << 62,
                                         INT64_MAX,
                                         INT64_MIN,
                                         -8,
                                         40 * 1048576LL,
                                         536870912LL};
#define FZ_NINTERESTING (sizeof fz_interesting / sizeof fz_interesting[0])

/* A field value: the default, an interesting size, a small number, or any 64-bit value. */
static inline int64_t fz_pick(fz_in *in, int64_t dflt) {
  uint8_t sel = fz_u8(in);
  switch (sel % 5) {
    case 0: return dflt;
    case 1:
    case 2: return fz_interesting[fz_u8(in) % FZ_NINTERESTING];
    case 3: return (int64_t)(fz_u8(in) % 64);
    default: return fz_i64(in);
  }
}

#define FZ_REQUIRE(cond, ...)                           \
  do {                                                  \
    if (!(cond)) {                                      \
      fprintf(stderr, "invariant broken: %s: ", #cond); \
      fprintf(stderr, __VA_ARGS__);                     \
      fprintf(stderr, "\n");                            \
      abort();                                          \
    }                                                   \
  } while (0)

/* One CPU context per process, single-threaded (libFuzzer runs one input at a time). */
static inline ixl_ctx *fz_ctx(void) {
  static ixl_ctx *ctx;
  if (!ctx) {
    if (ixl_ctx_new(IXL_BACKEND_CPU, 0, 1, &ctx) != IXL_OK) abort();
    ixl_ctx_set_threads(ctx, 1);
  }
  return ctx;
}

/* Counted host bytes held now; the context's grow-only op scratch is reported apart
 * (host_scratch_bytes), so this must come back to its value after each input. */
static inline int64_t fz_live_bytes(const ixl_ctx *ctx) {
  ixl_alloc_stats s;
  ixl_ctx_alloc_stats(ctx, &s);
  return s.host_bytes_live;
}

/* A failed call must say why: a known status and a message. */
static inline void fz_check_error(ixl_ctx *ctx, ixl_status st, const char *call) {
  FZ_REQUIRE(st > IXL_OK && st < IXL_STATUS_COUNT_, "%s returned status %d", call, (int)st);
  FZ_REQUIRE(strlen(ixl_last_error(ctx)) > 10, "%s: %s with the message \"%s\"", call,
             ixl_status_name(st), ixl_last_error(ctx));
  FZ_REQUIRE(st != IXL_ERR_INTERNAL, "%s: internal error: %s", call, ixl_last_error(ctx));
}
#endif
