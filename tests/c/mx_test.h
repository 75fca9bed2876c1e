/* mx_test.h - the harness the MXFP4 v2 GPU tests share (test_cuda_logits_mxk1.c, _mxk2.c,
 * _mxk5.c): tensors that become host ones under IXL_TEST_HOST_AS_DEVICE=1, the UE8M0 scale
 * fill, bf16 equality, and main's frame (the kernel switch, the skips without an sm_90 GPU, the
 * seed, the context pinned to logits v2, one seeded run per case, the tally). One test program
 * includes it once (beside check.h and rand.h); its statics are that program's.
 *
 * A main with it:
 *   int main(void) {
 *     const int st = mx_test_start("mxk1", "IXL_LOGITS_V2_MX_WS", "1");
 *     if (st <= 0) return st < 0;            // skipped (a counted pass printed) or no context
 *     for (int i = 0; i < n; i++)
 *       if (test_wanted(cs[i].name)) mx_test_case(cs[i].name, i, run_one, &cs[i]);
 *     return mx_test_end();
 *   }
 * (g_small is set before mx_test_start returns, so the case list can depend on it after.) */
#ifndef IXL_MX_TEST_H
#define IXL_MX_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "rand.h"

#ifdef IXL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

static ixl_ctx *g;
static int g_small; /* IXL_TEST_SMALL=1 (the compute-sanitizer runs): tiny shapes */
static int g_fake;  /* IXL_TEST_HOST_AS_DEVICE=1: "device" tensors are host ones (the CPU checks
                       the test's own logic: inputs, comparisons, tolerances), no GPU needed */
static uint64_t g_seed;

/* A tensor of up to 3 dimensions on device kind d (the host under g_fake); exits on failure
 * (a test that cannot allocate has nothing to check). */
static ixl_tensor *tn(ixl_dtype dt, int nd, int64_t a, int64_t b, int64_t c, ixl_device_kind d) {
  int64_t shape[3] = {a, b, c};
  ixl_tensor *t = NULL;
  if (g_fake) d = IXL_HOST;
  if (ixl_tensor_new(g, dt, nd, shape, d, &t) != IXL_OK) {
    fprintf(stderr, "  tensor_new: %s\n", ixl_last_error(g));
    exit(1);
  }
  return t;
}
/* A device copy of host tensor h (the caller frees it). */
static ixl_tensor *to_dev(const ixl_tensor *h) {
  ixl_tensor *d =
      tn((ixl_dtype)h->dtype, h->ndim, h->shape[0], h->shape[1], h->shape[2], IXL_DEVICE);
  CHECK_OK(g, ixl_tensor_copy(g, d, h));
  return d;
}

/* n packed UE8M0 words at p (int32 or uint32 storage), bytes in [lo, hi], a share
 * nan_pct / 100 of them 0xFF. */
static void fill_scales(void *p, int64_t n, int lo, int hi, int nan_pct) {
  uint32_t *w32 = (uint32_t *)p;
  for (int64_t i = 0; i < n; i++) {
    uint32_t w = 0;
    for (int b = 0; b < 4; b++) {
      uint32_t e = (uint32_t)rand_range(lo, hi);
      if (nan_pct && rand_range(0, 99) < nan_pct) e = 0xFF;
      w |= e << (8 * b);
    }
    w32[i] = w;
  }
}

/* bf16 equality as the tests compare: bit for bit, but +0 == -0 and any NaN == any NaN. */
static int same16(uint16_t a, uint16_t b) {
  const int na = (a & 0x7F80) == 0x7F80 && (a & 0x7F), nb = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
  if (na || nb) return na && nb;
  return a == b || ((a | b) & 0x7FFF) == 0; /* +0 == -0 */
}

/* main's start. Sets the kernel switch `switch_name` to `switch_default` unless the
 * environment sets it (switches are read once a process, at the first call: before any; NULL:
 * none), reads IXL_TEST_SMALL and IXL_TEST_HOST_AS_DEVICE, skips (one counted pass, "ok - tag #
 * skipped: ...") without a CUDA GPU of sm_90 or newer, prints the seed (IXL_TEST_SEED, else the
 * clock) and makes the context g (CPU under g_fake, else CUDA with logits pinned to v2).
 * Returns 1 to run the cases, 0 when skipped (the tally printed), -1 when the context failed
 * (a "not ok" line printed). */
static int mx_test_start(const char *tag, const char *switch_name, const char *switch_default) {
  char why[256] = "";
  if (switch_name && switch_default && !getenv(switch_name))
    setenv(switch_name, switch_default, 1);
  g_small = getenv("IXL_TEST_SMALL") && getenv("IXL_TEST_SMALL")[0] == '1';
  g_fake = getenv("IXL_TEST_HOST_AS_DEVICE") && getenv("IXL_TEST_HOST_AS_DEVICE")[0] == '1';
  if (!g_fake && !ixl_cuda_available(why, sizeof why)) {
    printf("ok - %s # skipped: no GPU (%s)\n", tag, why);
    tests_passed_++;
    printf("# %d passed, %d failed\n", tests_passed_, tests_failed_);
    return 0;
  }
#ifdef IXL_WITH_CUDA
  int major = 9;
  if (!g_fake) cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major < 9) {
    printf("ok - %s # skipped: sm_%d0 device, the kernel needs sm_90\n", tag, major);
    tests_passed_++;
    printf("# %d passed, %d failed\n", tests_passed_, tests_failed_);
    return 0;
  }
#endif
  const char *env = getenv("IXL_TEST_SEED");
  g_seed = env && *env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
  printf("# seed %llu%s (IXL_TEST_SEED reproduces a run)", (unsigned long long)g_seed,
         g_small ? ", small shapes" : "");
  if (switch_name) printf(", %s=%s", switch_name, getenv(switch_name) ? getenv(switch_name) : "");
  printf("\n");
  if (ixl_ctx_new(g_fake ? IXL_BACKEND_CPU : IXL_BACKEND_CUDA, 0, g_seed, &g) != IXL_OK) {
    printf("not ok - cuda context: %s\n", ixl_last_error(g));
    return -1;
  }
  if (!g_fake && ixl_ctx_set_variant(g, "logits", "v2") != IXL_OK) {
    printf("not ok - pin logits v2: %s\n", ixl_last_error(g));
    ixl_ctx_free(g);
    return -1;
  }
  return 1;
}

/* A test of host rules (no GPU; it runs and counts on every machine, before mx_test_start):
 * the generator seeded with 12345, rules() true for "ok - name", else "not ok - name". */
static inline void mx_test_host(const char *name, int (*rules)(void)) {
  rand_seed(RAND_SPLITMIX64, 12345);
  if (rules()) {
    tests_passed_++;
    printf("ok - %s\n", name);
  } else {
    tests_failed_++;
    printf("not ok - %s\n", name);
  }
}

/* One case: the generator seeded from the run's seed and the case's index i (so a case repeats
 * alone under IXL_TEST_ONLY), run(c), then "ok" or "not ok - name" counted. */
static void mx_test_case(const char *name, int i, void (*run)(const void *), const void *c) {
  rand_seed(RAND_SPLITMIX64, g_seed * 1000003ull + (uint64_t)i);
  check_failed_ = 0;
  run(c);
  if (check_failed_) {
    tests_failed_++;
    printf("not ok - %s\n", name);
  } else {
    tests_passed_++;
    printf("ok - %s\n", name);
  }
  fflush(stdout);
}

/* main's end: unpins logits, frees g, prints the tally; returns main's exit status. */
static int mx_test_end(void) {
  ixl_ctx_set_variant(g, "logits", NULL);
  ixl_ctx_free(g);
  printf("# %d passed, %d failed\n", tests_passed_, tests_failed_);
  return tests_failed_ ? 1 : 0;
}

#endif
