/* check.h - the C tests' tiny harness. Each TEST(name) is one counted test; CHECK records a
 * failure with file:line and goes on. main() comes from RUN_TESTS(...). The last line a test
 * binary prints is "# N passed, N failed", which scripts/run_tests.sh adds up. */
#ifndef IXL_CHECK_H
#define IXL_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "idxlab.h"

static int check_failed_;
static int tests_passed_, tests_failed_;

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      check_failed_ = 1;                                                          \
    }                                                                             \
  } while (0)
#define CHECK_MSG(cond, ...)                                         \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "  %s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                  \
      fprintf(stderr, "\n");                                         \
      check_failed_ = 1;                                             \
    }                                                                \
  } while (0)
#define CHECK_OK(ctx, expr)                                                          \
  do {                                                                               \
    ixl_status st_ = (expr);                                                         \
    if (st_ != IXL_OK) {                                                             \
      fprintf(stderr, "  %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr,          \
              ixl_status_name(st_), ixl_last_error(ctx));                            \
      check_failed_ = 1;                                                             \
    }                                                                                \
  } while (0)
/* The call fails with `code` and the message contains `needle`. */
#define CHECK_ERR(ctx, expr, code, needle)                                               \
  do {                                                                                   \
    ixl_status st_ = (expr);                                                             \
    if (st_ != (code) || !strstr(ixl_last_error(ctx), (needle))) {                       \
      fprintf(stderr, "  %s:%d: %s -> %s \"%s\", expected %s containing \"%s\"\n",       \
              __FILE__, __LINE__, #expr, ixl_status_name(st_), ixl_last_error(ctx),      \
              ixl_status_name(code), (needle));                                          \
      check_failed_ = 1;                                                                 \
    }                                                                                    \
  } while (0)

/* The run's seed: IXL_TEST_SEED when set, else fresh from the clock and the pid. Printed, so a
 * failing run can be repeated. */
static inline uint64_t test_seed(void) {
  const char *env = getenv("IXL_TEST_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
  printf("# seed %llu (IXL_TEST_SEED=%llu repeats this run)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  return seed;
}

/* IXL_TEST_ONLY=WORD[,WORD...]: 1 when it is unset or empty, or `name` contains one of the
 * words (empty words are skipped); the GPU tests run only those. */
static inline int test_wanted(const char *name) {
  const char *only = getenv("IXL_TEST_ONLY");
  if (!only || !*only) return 1;
  for (const char *w = only; *w;) {
    const size_t n = strcspn(w, ",");
    char word[256];
    if (n > 0 && n < sizeof word) {
      memcpy(word, w, n);
      word[n] = '\0';
      if (strstr(name, word)) return 1;
    }
    w += n + (w[n] == ',');
  }
  return 0;
}

/* The GPU tests' CUDA context (seeded): NULL without a usable GPU ("# no GPU: why" printed,
 * the GPU tests then skip); NULL with one failure counted when the context cannot be made
 * ("# CUDA context failed: ..."); else the context, its device named ("# device: NAME"). The
 * caller frees it. */
static inline ixl_ctx *test_cuda_ctx(uint64_t seed) {
  char why[256];
  ixl_ctx *ctx = NULL;
  if (!ixl_cuda_available(why, sizeof why)) {
    printf("# no GPU: %s\n", why);
    return NULL;
  }
  if (ixl_ctx_new(IXL_BACKEND_CUDA, 0, seed, &ctx) != IXL_OK) {
    printf("# CUDA context failed: %s\n", ixl_last_error(ctx));
    ixl_ctx_free(ctx);
    tests_failed_++;
    return NULL;
  }
  printf("# device: %s\n", ixl_ctx_device_name(ctx));
  return ctx;
}

#define TEST(name) static void name(void)
#define RUN(name)                                 \
  do {                                            \
    check_failed_ = 0;                            \
    name();                                       \
    if (check_failed_) {                          \
      tests_failed_++;                            \
      printf("not ok - %s\n", #name);             \
    } else {                                      \
      tests_passed_++;                            \
      printf("ok - %s\n", #name);                 \
    }                                             \
    fflush(stdout);                               \
  } while (0)
/* RUN(name) when IXL_TEST_ONLY wants it and `ctx` (a GPU context, test_cuda_ctx's) is there;
 * without one, "ok - NAME # skipped: no GPU", counted as passed. */
#define RUN_ON_GPU(ctx, name)                       \
  do {                                              \
    if (!test_wanted(#name)) {                      \
      /* not asked for */                           \
    } else if (ctx) {                               \
      RUN(name);                                    \
    } else {                                        \
      printf("ok - %s # skipped: no GPU\n", #name); \
      tests_passed_++;                              \
    }                                               \
  } while (0)
#define DONE()                                                          \
  do {                                                                  \
    printf("# %d passed, %d failed\n", tests_passed_, tests_failed_);  \
    return tests_failed_ ? 1 : 0;                                       \
  } while (0)
#endif
