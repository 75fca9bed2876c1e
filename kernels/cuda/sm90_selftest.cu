// sm90_selftest.cu - the GPU unit test of the Hopper kit (kernels/cuda/sm90.cuh), compiled into
// the library as the internal ixl_cuda_sm90_selftest (kernels/cuda/sm90.h), run by
// tests/c/test_cuda_sm90.c. Every case runs on fresh random data from the seed (no zero
// operand), writes outputs poisoned with NaN first, and is compared on the host:
//
// - e2m1 cases: e4m3 codes carrying e2m1 values (+-0.5 .. +-6) times 2^s, s in [-8, 6] per
//   (row, k32 group) and operand (e4m3 subnormals included); one k32 group per accumulator
//   (scale-d = 0, accumulators preset to NaN so a read would show). The group sum needs at most
//   13 significant bits and the H200 was shown exact there (bench/hopper/README.md), so the
//   f32 result must equal the exact sum bit for bit (+0 == -0).
// - chain cases: any finite nonzero e4m3 codes, 4 k32 groups chained into one accumulator
//   (scale-d 0, 1, 1, 1). The tensor core's fp8 accumulation is not fp32-exact (it aligns each
//   k32 step's products and keeps about 14 bits), so the reference is the float64 sum and the
//   tolerance |got - exact| <= 2^-8 * sum |a_k b_k|, test_cuda_logits.c's fp8 bound (room for
//   any accumulator with 13 fraction bits below the largest term); the worst ratio is printed.
// - widen: K as raw e2m1 nibbles widened in registers (ixl_sm90_e2m1x8_widen) into RS A
//   operands, Q (B) stored with ixl_sm90_widen_perm: "Q permuted x K widened" = 2^-6 x the dot.
// - tma: one producer warpgroup (setmaxnreg.dec 40, one elected lane) loads 2 A boxes and a
//   B box by cp.async.bulk.tensor.2d into 128B-swizzled shared memory on one mbarrier; two
//   consumer warpgroups (setmaxnreg.inc 232) wait on it and run SS wgmma on their A box.
//
// Layouts: SS and RS, 128B swizzle (LBO 16, SBO 1024, +32 B per k32 group) and no swizzle
// (LBO 128, SBO 256, a 32 R-byte block per group), for N = 32, 64, 128. The wgmma ordering
// exercises wait_group 1 (two accumulators in flight) as well as 0.
//
// Verified on the H200 (2026-12-01): 24 of 24 cases, twice with fresh seeds, compute-sanitizer
// memcheck clean; every e2m1 case bitwise, the chained fp8 cases at worst 0.00088 x sum|ab|
// (the bound is 0.0039); scripts/sass_check.sh 8 of 8 rules.
//
// What scripts/sass_check.sh holds these kernels to (the 384-thread kernel starts at 168, the
// register cap of its launch bounds, which setmaxnreg then moves between warpgroups):
// sass-limits: mma_kernel registers 192 shared 24576
// sass-limits: tma_kernel registers 168 shared 33792
// sass-expect: tma_kernel UTMALDG USETMAXREG ELECT SYNCS
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda/launch.cuh"
#include "cuda/sm90.cuh"
#include "cuda/sm90.h"
#include "numerics/scalar.h"

namespace {

using namespace ixl::sm90;

enum Mode { SS_SW128, SS_NONE, RS_SW128, RS_NONE, RS_WIDEN };
static const char *const kModeName[] = {"ss-sw128", "ss-none", "rs-sw128", "rs-none",
                                        "rs-widen"};

// ------------------------------------------------------------------ device
// The accumulators' preset: a NaN, so that a wgmma with scale-d = 0 that read them would show.
#if IXL_SM90_DEVICE
__device__ __forceinline__ float poison() { return __int_as_float(0x7fc0dead); }
#endif

// Copies an R x 128-byte row-major tile from global into shared memory in layout SWZ, 16 B per
// thread-step, then makes the generic stores visible to the async proxy (wgmma).
template <int SWZ, int R>
__device__ __forceinline__ void stage_tile(uint8_t *s, const uint8_t *g) {
  const uint4 *src = reinterpret_cast<const uint4 *>(g);
  for (int q = threadIdx.x; q < R * 8; q += 128)
    *reinterpret_cast<uint4 *>(s + ixl_sm90_tile_off(SWZ, R, q >> 3, 16 * (q & 7))) = src[q];
}

template <int N>
__device__ __forceinline__ void store_acc(float *out, const float (&acc)[N / 2], int t) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    int r, c;
    ixl_sm90_acc_rc(t, i, &r, &c);
    out[r * N + c] = acc[i];
  }
}

// The four k32 groups of a tile into two accumulators in turn (poisoned first, scale-d 0):
// issue(acc, g) puts group g's wgmma into acc; group g - 1's product is stored (at o +
// (g - 1) 64 N) while group g runs, group 3's after the last wait.
#if IXL_SM90_DEVICE
template <int N, typename Issue>
__device__ __forceinline__ void groups_two_acc(Issue &&issue, float *o, int t) {
  float acc[2][N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[0][i] = acc[1][i] = poison();
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    wgmma_fence(); // orders the last store's reads of acc[g & 1] before the overwrite
    issue(acc[g & 1], g);
    wgmma_commit();
    if (g > 0) {
      wgmma_wait<1>(); // group g - 1 done, g may still run
      fence_operand(acc[(g - 1) & 1]);
      store_acc<N>(o + (g - 1) * 64 * N, acc[(g - 1) & 1], t);
    }
  }
  wgmma_wait<0>();
  fence_operand(acc[1]);
  store_acc<N>(o + 3 * 64 * N, acc[1], t);
}
#endif

// One warpgroup per tile. A: 64 x 128 B (RS_WIDEN: 64 x 64 B of e2m1 nibbles), B: N x 128 B,
// both K-major row-major in global memory. Not CHAIN: out[tile][g][64][N] = group g's product
// (4 groups, scale-d = 0, two accumulators in flight). CHAIN: out[tile][0] = the 4 groups
// chained (scale-d = 0 then 1).
template <int N, int MODE, bool CHAIN>
__global__ void __launch_bounds__(128, 1)
    mma_kernel(const uint8_t *__restrict__ A, const uint8_t *__restrict__ B, float *out) {
#if IXL_SM90_DEVICE
  constexpr int SWZ = MODE == SS_NONE || MODE == RS_NONE ? IXL_SM90_SWIZZLE_NONE
                                                         : IXL_SM90_SWIZZLE_128B;
  constexpr bool RS = MODE != SS_SW128 && MODE != SS_NONE;
  constexpr uint32_t LBO = SWZ == IXL_SM90_SWIZZLE_NONE ? 128 : 16;
  constexpr uint32_t SBO = SWZ == IXL_SM90_SWIZZLE_NONE ? 256 : 1024;
  __shared__ __align__(1024) uint8_t sA[64 * 128];
  __shared__ __align__(1024) uint8_t sB[N * 128];
  const int t = threadIdx.x, tile = blockIdx.x;
  stage_tile<SWZ, N>(sB, B + (size_t)tile * N * 128);
  if (MODE != RS_WIDEN) stage_tile<SWZ, 64>(sA, A + (size_t)tile * 64 * 128);
  ptx::fence_proxy_async(ptx::space_shared);
  __syncthreads();

  uint32_t a[4][4] = {}; // RS: group g's A registers
  if constexpr (MODE == RS_WIDEN) {
    // thread (warp w, lane l) widens raw word q = l % 4 of rows r0 and r0 + 8 of each group:
    // even elements -> registers 0, 1 (k = 4q..), odd ones -> 2, 3 (k = 16 + 4q..)
    const int l = t & 31, q = l & 3, r0 = 16 * (t >> 5) + (l >> 2);
    const uint8_t *raw = A + (size_t)tile * 64 * 64;
#pragma unroll
    for (int g = 0; g < 4; ++g)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t w =
            *reinterpret_cast<const uint32_t *>(raw + (r0 + 8 * h) * 64 + 16 * g + 4 * q);
        ixl_sm90_e2m1x8_widen(w, &a[g][h], &a[g][h + 2]);
      }
  } else if constexpr (RS) {
#pragma unroll
    for (int g = 0; g < 4; ++g)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        int r, k;
        ixl_sm90_a8_rk(t, j, &r, &k);
        a[g][j] = *reinterpret_cast<const uint32_t *>(sA +
                                                      ixl_sm90_tile_off(SWZ, 64, r, 32 * g + k));
      }
  }
  auto issue = [&](float(&acc)[N / 2], int g, int scale_d) {
    const uint64_t db = wgmma_desc(sB + ixl_sm90_tile_group(SWZ, N, g), SWZ, LBO, SBO);
    if constexpr (RS) {
      wgmma_e4m3_rs<N>(acc, a[g], db, scale_d);
    } else {
      const uint64_t da = wgmma_desc(sA + ixl_sm90_tile_group(SWZ, 64, g), SWZ, LBO, SBO);
      wgmma_e4m3_ss<N>(acc, da, db, scale_d);
    }
  };
  if constexpr (CHAIN) {
    float acc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[i] = poison();
    wgmma_fence();
#pragma unroll
    for (int g = 0; g < 4; ++g) issue(acc, g, g > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operand(acc);
    store_acc<N>(out + (size_t)tile * 64 * N, acc, t);
  } else {
    groups_two_acc<N>([&](float(&acc)[N / 2], int g) { issue(acc, g, 0); },
                      out + (size_t)tile * 4 * 64 * N, t);
  }
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// Warp-specialized TMA + wgmma: warpgroup 0 produces (one elected lane of warp 0 issues three
// 2-D tensor copies on one mbarrier and counts itself in elected[tile]), warpgroups 1 and 2
// consume (wait, then 4 SS wgmma over their 64-row A box and the shared N-row B box).
// out[tile][wg - 1][g][64][N].
template <int N>
__global__ void __launch_bounds__(384, 1)
    tma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
               float *out, unsigned *elected) {
#if IXL_SM90_DEVICE
  __shared__ __align__(1024) uint8_t sA[2][64 * 128];
  __shared__ __align__(1024) uint8_t sB[N * 128];
  __shared__ __align__(8) uint64_t full;
  const int wg = threadIdx.x >> 7, tile = blockIdx.x;
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&full, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  if (wg == 0) {
    setmaxnreg_dec<40>();
    if ((threadIdx.x >> 5) == 0 && elect_one()) {
      atomicAdd(&elected[tile], 1u);
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full,
                                     (uint32_t)(2 * 64 * 128 + N * 128));
      const int32_t c0[2] = {0, tile * 128}, c1[2] = {0, tile * 128 + 64}, cb[2] = {0, tile * N};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sA[0], &map_a, c0, &full);
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sA[1], &map_a, c1, &full);
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sB, &map_b, cb, &full);
    }
  } else {
    setmaxnreg_inc<232>();
    mbar_wait(&full, 0);
    const int t = threadIdx.x & 127;
    const uint8_t *sa = sA[wg - 1];
    groups_two_acc<N>(
        [&](float(&acc)[N / 2], int g) {
          const uint64_t da = wgmma_desc(sa + 32 * g, IXL_SM90_SWIZZLE_128B, 16, 1024);
          const uint64_t db = wgmma_desc(sB + 32 * g, IXL_SM90_SWIZZLE_128B, 16, 1024);
          wgmma_e4m3_ss<N>(acc, da, db, 0);
        },
        out + ((size_t)tile * 2 + (wg - 1)) * 4 * 64 * N, t);
  }
#else
  IXL_SM90_TRAP_ELSEWHERE();
#endif
}

// ------------------------------------------------------------------ host
struct Rng { // splitmix64
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(int n) { return (int)(next() % (uint64_t)n); }
};

struct Report {
  char *buf;
  size_t cap, len;
  int cases, failed;
  char first[480];
  void line(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (!buf || len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    if (k > 0) len = len + (size_t)k < cap ? len + (size_t)k : cap - 1;
  }
};

// Device memory counted on the context, freed on scope exit.
struct Dev {
  ixl_ctx *ctx;
  void *p = nullptr;
  int64_t n = 0;
  Dev(ixl_ctx *c) : ctx(c) {}
  ~Dev() {
    if (p) ixl_device_free(ctx, p, n);
  }
  ixl_status alloc(int64_t bytes) {
    n = bytes;
    return ixl_device_alloc(ctx, bytes, &p);
  }
};

static double g_e4m3[256]; // e4m3 code -> value (NaN codes never drawn)
static const float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// A nonzero e2m1 value times 2^s as an e4m3 code (exact: s in [-8, 6]).
static uint8_t e2m1_code(Rng &r, int s) {
  const float v = ldexpf(kE2m1[1 + r.below(7)], s);
  return ixl_cvt_f32_to_e4m3(r.next() & 1 ? -v : v);
}
// A finite nonzero e4m3 code, uniform over them.
static uint8_t any_code(Rng &r) {
  for (;;) {
    const uint8_t b = (uint8_t)r.next();
    if ((b & 0x7f) != 0 && (b & 0x7f) != 0x7f) return b;
  }
}
// rows x 128 B of e2m1-valued codes, one placement per (row, k32 group).
static void fill_e2m1(Rng &r, uint8_t *p, int rows) {
  for (int i = 0; i < rows; ++i)
    for (int g = 0; g < 4; ++g) {
      const int s = -8 + r.below(15);
      for (int k = 0; k < 32; ++k) p[i * 128 + 32 * g + k] = e2m1_code(r, s);
    }
}

static bool same_bits(float got, double want) {
  const float w = (float)want;
  uint32_t a, b;
  memcpy(&a, &got, 4);
  memcpy(&b, &w, 4);
  return a == b || (got == 0.0f && w == 0.0f);
}

static ixl_status cuda_step(ixl_ctx *ctx, cudaError_t e, const char *what) {
  return e == cudaSuccess ? IXL_OK : ixl_cuda_status(ctx, (int)e, what);
}

#define IXL_ST_TRY(x)                                                                          \
  do {                                                                                         \
    const ixl_status st_ = (x);                                                                \
    if (st_ != IXL_OK) return st_;                                                             \
  } while (0)

// Records one case's verdict: a report line, and the first failure's text.
static void verdict(Report &rep, const char *name, bool ok, const char *detail) {
  rep.cases++;
  rep.line("%s %-22s %s\n", ok ? "ok  " : "FAIL", name, detail);
  if (!ok && rep.failed++ == 0) snprintf(rep.first, sizeof rep.first, "%s: %s", name, detail);
}

template <int N, int MODE, bool CHAIN>
static ixl_status run_mma(ixl_ctx *ctx, Rng &rng, Report &rep) {
  constexpr int T = 8, G = CHAIN ? 1 : 4;
  const int abytes = MODE == RS_WIDEN ? 64 * 64 : 64 * 128;
  const size_t na = (size_t)T * abytes, nb = (size_t)T * N * 128, no = (size_t)T * G * 64 * N;
  uint8_t *ha = (uint8_t *)malloc(na), *hb = (uint8_t *)malloc(nb);
  float *ho = (float *)malloc(no * 4);
  uint8_t *qcodes = (uint8_t *)malloc(nb); // RS_WIDEN: Q in element order
  if (!ha || !hb || !ho || !qcodes) {
    free(ha), free(hb), free(ho), free(qcodes);
    return ixl_set_error(ctx, IXL_ERR_OOM, "sm90_selftest: host buffers");
  }
  for (int tile = 0; tile < T; ++tile) {
    uint8_t *a = ha + (size_t)tile * abytes, *b = hb + (size_t)tile * N * 128;
    if (CHAIN) {
      for (int i = 0; i < 64 * 128; ++i) a[i] = any_code(rng);
      for (int i = 0; i < N * 128; ++i) b[i] = any_code(rng);
    } else if (MODE == RS_WIDEN) {
      for (int i = 0; i < 64 * 64; ++i) // two nonzero e2m1 codes per byte, random signs
        a[i] = (uint8_t)((1 + rng.below(7)) | (rng.below(2) << 3) |
                         ((1 + rng.below(7)) << 4) | (rng.below(2) << 7));
      uint8_t *q = qcodes + (size_t)tile * N * 128;
      fill_e2m1(rng, q, N);
      for (int c = 0; c < N; ++c)
        for (int g = 0; g < 4; ++g)
          for (int p = 0; p < 32; ++p)
            b[c * 128 + 32 * g + p] = q[c * 128 + 32 * g + ixl_sm90_widen_perm(p)];
    } else {
      fill_e2m1(rng, a, 64);
      fill_e2m1(rng, b, N);
      if (tile == 0) // (31 x 36 + 0.25) x 2^12 in D[0][0] group 0: 13 significant bits
        for (int k = 0; k < 32; ++k) a[k] = b[k] = ixl_cvt_f32_to_e4m3(k < 31 ? 384.0f : 32.0f);
    }
  }
  Dev da(ctx), db(ctx), dout(ctx);
  cudaStream_t s = ixl::stream_of(ctx);
  IXL_ST_TRY(da.alloc((int64_t)na));
  IXL_ST_TRY(db.alloc((int64_t)nb));
  IXL_ST_TRY(dout.alloc((int64_t)(no * 4)));
  ixl_status st = cuda_step(ctx, cudaMemcpyAsync(da.p, ha, na, cudaMemcpyHostToDevice, s), "H2D");
  if (st == IXL_OK)
    st = cuda_step(ctx, cudaMemcpyAsync(db.p, hb, nb, cudaMemcpyHostToDevice, s), "H2D");
  if (st == IXL_OK) st = cuda_step(ctx, cudaMemsetAsync(dout.p, 0xff, no * 4, s), "poison");
  if (st == IXL_OK) {
    mma_kernel<N, MODE, CHAIN><<<T, 128, 0, s>>>((const uint8_t *)da.p, (const uint8_t *)db.p,
                                                 (float *)dout.p);
    st = ixl_cuda_check_launch(ctx, "sm90 mma_kernel");
  }
  if (st == IXL_OK)
    st = cuda_step(ctx, cudaMemcpyAsync(ho, dout.p, no * 4, cudaMemcpyDeviceToHost, s), "D2H");
  if (st == IXL_OK) st = cuda_step(ctx, cudaStreamSynchronize(s), "sm90 mma_kernel");
  if (st != IXL_OK) {
    free(ha), free(hb), free(ho), free(qcodes);
    return st;
  }
  long bad = 0, n = 0;
  double worst = 0;
  char first[200] = "";
  for (int tile = 0; tile < T; ++tile)
    for (int g = 0; g < G; ++g)
      for (int r = 0; r < 64; ++r)
        for (int c = 0; c < N; ++c) {
          double want = 0, mag = 0;
          if (MODE == RS_WIDEN) {
            const uint8_t *raw = ha + (size_t)tile * 64 * 64 + r * 64 + 16 * g;
            const uint8_t *q = qcodes + ((size_t)tile * N + c) * 128 + 32 * g;
            for (int e = 0; e < 32; ++e)
              want += (double)ixl_cvt_e2m1_to_f32((uint8_t)(raw[e / 2] >> (4 * (e & 1)))) *
                      g_e4m3[q[e]];
            want *= 0x1p-6;
          } else {
            const uint8_t *a = ha + (size_t)tile * 64 * 128 + r * 128;
            const uint8_t *b = hb + ((size_t)tile * N + c) * 128;
            for (int k = CHAIN ? 0 : 32 * g; k < (CHAIN ? 128 : 32 * g + 32); ++k) {
              const double p = g_e4m3[a[k]] * g_e4m3[b[k]];
              want += p;
              mag += fabs(p);
            }
          }
          const float got = ho[(((size_t)tile * G + g) * 64 + r) * N + c];
          bool ok;
          if (CHAIN) {
            const double err = fabs((double)got - want);
            ok = err <= 0x1p-8 * mag; // NaN fails
            if (ok && mag > 0 && err / mag > worst) worst = err / mag;
          } else {
            ok = same_bits(got, want);
          }
          n++;
          if (!ok && bad++ == 0)
            snprintf(first, sizeof first, "; first at tile %d group %d D[%d][%d]: %.9g, want %.17g",
                     tile, g, r, c, (double)got, want);
        }
  free(ha), free(hb), free(ho), free(qcodes);
  char name[48], detail[400];
  snprintf(name, sizeof name, "%s %s n%d", kModeName[MODE], CHAIN ? "chain" : "e2m1", N);
  if (CHAIN)
    snprintf(detail, sizeof detail, "%ld/%ld outside 2^-8 sum|ab| (worst %.3g)%s", bad, n, worst,
             first);
  else
    snprintf(detail, sizeof detail, "%ld/%ld differ from the exact sum%s", bad, n, first);
  verdict(rep, name, bad == 0, detail);
  return IXL_OK;
}

template <int N>
static ixl_status run_tma(ixl_ctx *ctx, Rng &rng, Report &rep) {
  constexpr int T = 4; // CTAs, so the box coordinates vary
  const size_t na = (size_t)T * 128 * 128, nb = (size_t)T * N * 128,
               no = (size_t)T * 2 * 4 * 64 * N;
  uint8_t *ha = (uint8_t *)malloc(na), *hb = (uint8_t *)malloc(nb);
  float *ho = (float *)malloc(no * 4);
  unsigned helected[T];
  if (!ha || !hb || !ho) {
    free(ha), free(hb), free(ho);
    return ixl_set_error(ctx, IXL_ERR_OOM, "sm90_selftest: host buffers");
  }
  fill_e2m1(rng, ha, T * 128);
  fill_e2m1(rng, hb, T * N);
  Dev da(ctx), db(ctx), dout(ctx), del(ctx);
  cudaStream_t s = ixl::stream_of(ctx);
  IXL_ST_TRY(da.alloc((int64_t)na));
  IXL_ST_TRY(db.alloc((int64_t)nb));
  IXL_ST_TRY(dout.alloc((int64_t)(no * 4)));
  IXL_ST_TRY(del.alloc((int64_t)sizeof helected));
  CUtensorMap ma, mb;
  char why[160];
  if (tma_map_2d(&ma, da.p, CU_TENSOR_MAP_DATA_TYPE_UINT8, 128, (uint64_t)T * 128, 128, 128, 64,
                 CU_TENSOR_MAP_SWIZZLE_128B, why, sizeof why) ||
      tma_map_2d(&mb, db.p, CU_TENSOR_MAP_DATA_TYPE_UINT8, 128, (uint64_t)T * N, 128, 128, N,
                 CU_TENSOR_MAP_SWIZZLE_128B, why, sizeof why)) {
    free(ha), free(hb), free(ho);
    return ixl_set_error(ctx, IXL_ERR_CUDA, "sm90_selftest: %s", why);
  }
  ixl_status st = cuda_step(ctx, cudaMemcpyAsync(da.p, ha, na, cudaMemcpyHostToDevice, s), "H2D");
  if (st == IXL_OK)
    st = cuda_step(ctx, cudaMemcpyAsync(db.p, hb, nb, cudaMemcpyHostToDevice, s), "H2D");
  if (st == IXL_OK) st = cuda_step(ctx, cudaMemsetAsync(dout.p, 0xff, no * 4, s), "poison");
  if (st == IXL_OK) st = cuda_step(ctx, cudaMemsetAsync(del.p, 0, sizeof helected, s), "zero");
  if (st == IXL_OK) {
    tma_kernel<N><<<T, 384, 0, s>>>(ma, mb, (float *)dout.p, (unsigned *)del.p);
    st = ixl_cuda_check_launch(ctx, "sm90 tma_kernel");
  }
  if (st == IXL_OK)
    st = cuda_step(ctx, cudaMemcpyAsync(ho, dout.p, no * 4, cudaMemcpyDeviceToHost, s), "D2H");
  if (st == IXL_OK)
    st = cuda_step(
        ctx, cudaMemcpyAsync(helected, del.p, sizeof helected, cudaMemcpyDeviceToHost, s), "D2H");
  if (st == IXL_OK) st = cuda_step(ctx, cudaStreamSynchronize(s), "sm90 tma_kernel");
  if (st != IXL_OK) {
    free(ha), free(hb), free(ho);
    return st;
  }
  long bad = 0, n = 0, elect_bad = 0;
  char first[200] = "";
  for (int tile = 0; tile < T; ++tile) {
    elect_bad += helected[tile] != 1;
    for (int w = 0; w < 2; ++w)
      for (int g = 0; g < 4; ++g)
        for (int r = 0; r < 64; ++r)
          for (int c = 0; c < N; ++c) {
            const uint8_t *a = ha + ((size_t)tile * 128 + 64 * w + r) * 128 + 32 * g;
            const uint8_t *b = hb + ((size_t)tile * N + c) * 128 + 32 * g;
            double want = 0;
            for (int k = 0; k < 32; ++k) want += g_e4m3[a[k]] * g_e4m3[b[k]];
            const float got = ho[((((size_t)tile * 2 + w) * 4 + g) * 64 + r) * N + c];
            n++;
            if (!same_bits(got, want) && bad++ == 0)
              snprintf(first, sizeof first, "; first at tile %d wg %d group %d D[%d][%d]: %.9g, "
                       "want %.17g", tile, w + 1, g, r, c, (double)got, want);
          }
  }
  free(ha), free(hb), free(ho);
  char name[48], detail[400];
  snprintf(name, sizeof name, "tma-sw128 ws n%d", N);
  snprintf(detail, sizeof detail, "%ld/%ld differ from the exact sum, %ld/%d CTAs elected not "
           "exactly one lane%s", bad, n, elect_bad, T, first);
  verdict(rep, name, bad == 0 && elect_bad == 0, detail);
  return IXL_OK;
}

template <int N>
static ixl_status run_width(ixl_ctx *ctx, Rng &rng, Report &rep) {
  IXL_ST_TRY((run_mma<N, SS_SW128, false>(ctx, rng, rep)));
  IXL_ST_TRY((run_mma<N, SS_NONE, false>(ctx, rng, rep)));
  IXL_ST_TRY((run_mma<N, RS_SW128, false>(ctx, rng, rep)));
  IXL_ST_TRY((run_mma<N, RS_NONE, false>(ctx, rng, rep)));
  IXL_ST_TRY((run_mma<N, RS_WIDEN, false>(ctx, rng, rep)));
  IXL_ST_TRY((run_mma<N, SS_SW128, true>(ctx, rng, rep)));
  IXL_ST_TRY((run_mma<N, RS_SW128, true>(ctx, rng, rep)));
  return run_tma<N>(ctx, rng, rep);
}

} // namespace

extern "C" ixl_status ixl_cuda_sm90_selftest(ixl_ctx *ctx, uint64_t seed, char *report,
                                             size_t n) {
  if (report && n) report[0] = '\0';
  if (!ctx || ctx->backend != IXL_BACKEND_CUDA)
    return ixl_set_error(ctx, IXL_ERR_BACKEND, "sm90_selftest: needs a CUDA context");
  int major = 0, minor = 0;
  IXL_ST_TRY(cuda_step(ctx,
                       cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                              ctx->device),
                       "cudaDeviceGetAttribute"));
  IXL_ST_TRY(cuda_step(ctx,
                       cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                                              ctx->device),
                       "cudaDeviceGetAttribute"));
  if (major != 9 || minor != 0)
    return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED,
                         "sm90_selftest: needs an sm_90 device (this one is sm_%d%d)", major,
                         minor);
  // the sm_90a image must be the one that runs (an sm_80 image would only trap)
  cudaFuncAttributes fa;
  IXL_ST_TRY(cuda_step(ctx, cudaFuncGetAttributes(&fa, mma_kernel<32, SS_SW128, false>),
                       "cudaFuncGetAttributes"));
  if (fa.binaryVersion != 90)
    return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED,
                         "sm90_selftest: the library's image for this device is sm_%d, not "
                         "sm_90a",
                         fa.binaryVersion);
  for (int c = 0; c < 256; ++c) g_e4m3[c] = (double)ixl_cvt_e4m3_to_f32((uint8_t)c);
  Report rep = {report, n, 0, 0, 0, ""};
  Rng rng = {seed ^ 0x5339305f6b6974ull};
  rep.line("sm90 self-test, seed %llu\n", (unsigned long long)seed);
  IXL_ST_TRY(run_width<32>(ctx, rng, rep));
  IXL_ST_TRY(run_width<64>(ctx, rng, rep));
  IXL_ST_TRY(run_width<128>(ctx, rng, rep));
  rep.line("%d passed, %d failed\n", rep.cases - rep.failed, rep.failed);
  if (rep.failed)
    return ixl_set_error(ctx, IXL_ERR_INTERNAL, "sm90_selftest: %d of %d cases failed; %s",
                         rep.failed, rep.cases, rep.first);
  return IXL_OK;
}
