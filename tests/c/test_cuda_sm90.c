/* test_cuda_sm90.c - the Hopper kit's GPU unit test: runs ixl_cuda_sm90_selftest
 * (kernels/cuda/sm90_selftest.cu; what each case checks is written there) and prints its
 * report. Without a usable GPU, or on a device other than sm_90, the GPU test prints
 * "ok - NAME # skipped: REASON" and passes, so CI builds and runs this file; a CPU context
 * (and a CUDA=0 build) must answer IXL_ERR_BACKEND. IXL_TEST_SEED repeats a run. */
#include <stdint.h>

#include "check.h"
#include "cuda/sm90.h"

#ifdef IXL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

static uint64_t g_seed;
static char g_report[16384];

TEST(cpu_context_is_a_backend_error) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, g_seed, &ctx));
  CHECK_ERR(ctx, ixl_cuda_sm90_selftest(ctx, g_seed, g_report, sizeof g_report),
            IXL_ERR_BACKEND, "sm90_selftest");
  ixl_ctx_free(ctx);
}

/* The report's lines, "# "-prefixed so they stay comments in the test log. */
static void print_report(void) {
  for (const char *p = g_report; *p;) {
    const char *nl = strchr(p, '\n');
    const int len = nl ? (int)(nl - p) : (int)strlen(p);
    printf("# %.*s\n", len, p);
    p += len + (nl != NULL);
  }
}

static ixl_ctx *g_gpu;

TEST(sm90_selftest_every_primitive) {
  const ixl_status st = ixl_cuda_sm90_selftest(g_gpu, g_seed, g_report, sizeof g_report);
  print_report();
  CHECK_MSG(st == IXL_OK, "%s: %s", ixl_status_name(st), ixl_last_error(g_gpu));
}

/* Twice with another seed: fresh data, the same verdict (and no state left behind). */
TEST(sm90_selftest_again_other_data) {
  const ixl_status st = ixl_cuda_sm90_selftest(g_gpu, g_seed + 1, g_report, sizeof g_report);
  CHECK_MSG(st == IXL_OK, "%s: %s", ixl_status_name(st), ixl_last_error(g_gpu));
  if (st != IXL_OK) print_report();
}

int main(void) {
  char why[256];
  g_seed = test_seed();
  RUN(cpu_context_is_a_backend_error);
  if (!ixl_cuda_available(why, sizeof why)) {
    printf("ok - sm90_selftest_every_primitive # skipped: no GPU (%s)\n", why);
    tests_passed_++;
    DONE();
  }
  int sm = 0;
#ifdef IXL_WITH_CUDA
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  sm = major * 10 + minor;
#endif
  if (sm != 90) {
    printf("ok - sm90_selftest_every_primitive # skipped: the device is sm_%d, not sm_90\n", sm);
    tests_passed_++;
    DONE();
  }
  if (ixl_ctx_new(IXL_BACKEND_CUDA, 0, g_seed, &g_gpu) != IXL_OK) {
    printf("not ok - cuda context: %s\n", ixl_last_error(g_gpu));
    ixl_ctx_free(g_gpu);
    return 1;
  }
  RUN(sm90_selftest_every_primitive);
  RUN(sm90_selftest_again_other_data);
  ixl_ctx_free(g_gpu);
  DONE();
}
