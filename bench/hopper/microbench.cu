// microbench.cu - Visit 1 of the Hopper kernel brief (shared/research/hopper_kernels.md, §9.2).
//
// Standalone: CUDA headers and CCCL only, no idxlab headers. Build (sm_90a, H100/H200):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -lineinfo \
//        -o microbench bench/hopper/microbench.cu
// Run one part at a time: microbench PART [--csv FILE] [--tiles N] [--seed S]
//   PART: exact | tensor | mem | instr | cluster | all
// Each part prints its log, then "| ..." table rows (bench/hopper/run.sh collects them) and
// appends rows to the CSV (part,name,metric,value,unit,detail).
//
// Parts:
//   exact   wgmma e4m3 (QGMMA, SS and RS) and s8 (IGMMA) k32 group sums of e2m1-valued groups
//           against exact host integer arithmetic; one k32 group per accumulator (scale-d = 0),
//           plus a chained control (4 groups in one accumulator), which is expected inexact.
//   tensor  QGMMA/IGMMA m64nNk32 rates, SS and RS, 1-3 warpgroups per CTA, 132 CTAs.
//   mem     D2D copy ceiling; HBM/L2 -> SMEM pull with TMA 2D vs cp.async.bulk vs
//           ld.global.nc; issue rate of 512-B copies.
//   instr   CUDA-core instruction throughput per SM-clock.
//   cluster cluster barrier latency and DSMEM bandwidth.
//
// Every CUDA call is checked, every launch followed by cudaGetLastError, outputs are
// poisoned before kernels write them, inputs are random (never zeros), and every device wait
// loop is bounded by clock64 (trap after ~2 s).
#include <cuda.h>  // CUtensorMap and the cuTensorMapEncodeTiled types (no libcuda link)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda/ptx>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ptx = cuda::ptx;

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, \
              #x);                                                                                \
      exit(2);                                                                                    \
    }                                                                                             \
  } while (0)
#define CKL() CK(cudaGetLastError())

static FILE* g_csv = nullptr;
static std::vector<std::string> g_table;

static void rec(const char* part, const std::string& name, const char* metric, double v,
                const char* unit, const std::string& detail = "") {
  if (g_csv) {
    fprintf(g_csv, "%s,%s,%s,%.6g,%s,%s\n", part, name.c_str(), metric, v, unit, detail.c_str());
    fflush(g_csv);
  }
}
static void row(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void row(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_table.push_back(buf);
}
static void print_table() {
  for (auto& s : g_table) printf("%s\n", s.c_str());
  fflush(stdout);
  g_table.clear();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

static int g_sms = 0;
static cudaDeviceProp g_prop;

// ---------------------------------------------------------------------------------------------
// Device helpers

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__host__ __device__ __forceinline__ uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Bounded mbarrier wait: traps after ~4e9 cycles (about 2 s) so a hang cannot burn the visit.
__device__ __forceinline__ void bar_wait(uint64_t* bar, uint32_t parity) {
  if (ptx::mbarrier_try_wait_parity(bar, parity)) return;
  long long t0 = clock64();
  while (!ptx::mbarrier_try_wait_parity(bar, parity)) {
    if (clock64() - t0 > 4000000000LL) {
      printf("bar_wait timeout block %d thread %d parity %u\n", blockIdx.x, threadIdx.x, parity);
      __trap();
    }
  }
}

__device__ __forceinline__ void wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Ties accumulator registers to the surrounding asm so that no access moves across a wait.
template <int n>
__device__ __forceinline__ void fence_regs(float (&d)[n]) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int n>
__device__ __forceinline__ void fence_regs(int (&d)[n]) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"):
// bits 0-13 start>>4, 16-29 LBO>>4, 32-45 SBO>>4, 49-51 base offset (0 here), 62-63 swizzle
// (0 none, 1 = 128B, 2 = 64B, 3 = 32B).
__host__ __device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo,
                                                       uint32_t swz) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
         ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | ((uint64_t)swz << 62);
}

// Tile layouts for a K-major tile of R rows x 128 bytes (four k32 groups of e4m3/s8).
// layout 0, no swizzle ("interleave"): each k32 group is its own R x 32-byte block; inside it,
//   core matrices of 8 rows x 16 bytes, LBO = 128 (the two 16-byte K halves), SBO = 256
//   (8-row groups); canonical ((8,m),(T,2k)):((1T,SBO),(1,LBO)).
// layout 1, 128B swizzle: rows of 128 bytes, the 16-byte chunk index XOR (row % 8), 1024-byte
//   atoms of 8 rows (SBO = 1024), group g starts 32*g bytes into the row (DeepGEMM's k-step).
// Byte offset of 16-byte chunk c (0..7) of row r:
__host__ __device__ __forceinline__ uint32_t tile_off(int layout, int R, int r, int c) {
  if (layout == 0) return (c >> 1) * R * 32 + (r >> 3) * 256 + (c & 1) * 128 + (r & 7) * 16;
  return r * 128 + ((c ^ (r & 7)) << 4);
}
__host__ __device__ __forceinline__ uint32_t group_start(int layout, int R, int g) {
  return layout == 0 ? g * R * 32 : g * 32;
}

// RS A fragment of wgmma m64nNk32 for 8-bit types: thread t (0..127) of the warpgroup holds
// four b32 registers; register j holds 4 consecutive k of one row.  var 0 is the layout read
// off CUTLASS's SM90 ALayout for 8-bit k32 (the mma.m16n8k32 A layout per warp):
//   j=0: (16w+g, 4q..4q+3)   j=1: (16w+g+8, 4q..)   j=2: (16w+g, 16+4q..)   j=3: (16w+g+8, 16+4q..)
// with w = warp, g = lane/4, q = lane%4.  var 1 swaps j=1 and j=2 (a fallback probe only).
__host__ __device__ __forceinline__ void afrag_rc(int var, int t, int j, int& r, int& k) {
  int w = t >> 5, l = t & 31, g = l >> 2, q = l & 3;
  if (var == 0) {
    r = 16 * w + g + 8 * (j & 1);
    k = 4 * q + 16 * (j >> 1);
  } else {
    r = 16 * w + g + 8 * (j >> 1);
    k = 4 * q + 16 * (j & 1);
  }
}
// Accumulator fragment: element i (0..N/2-1) of thread t is D[row][col].
__host__ __device__ __forceinline__ void dfrag_rc(int t, int i, int& r, int& c) {
  int w = t >> 5, l = t & 31;
  r = 16 * w + (l >> 2) + 8 * ((i >> 1) & 1);
  c = 8 * (i >> 2) + 2 * (l & 3) + (i & 1);
}

// ---------------------------------------------------------------------------------------------
// wgmma wrappers: one asm operand per accumulator register (MB_ACC*: C(d[i]) for each, C the
// constraint, "+f" or "+r"); scale-d is a predicate computed from a register (operand S), so
// scale-d = 0 reads no accumulator. e4m3 takes imm-scale-a/b 1 (IMM ", 1, 1"); s8 takes none.
#define MB_ACC4(C, i) C(d[i]), C(d[i + 1]), C(d[i + 2]), C(d[i + 3])
#define MB_ACC16(C, i) MB_ACC4(C, i), MB_ACC4(C, i + 4), MB_ACC4(C, i + 8), MB_ACC4(C, i + 12)
#define MB_ACC32(C) MB_ACC16(C, 0), MB_ACC16(C, 16)
#define MB_ACC64(C) MB_ACC16(C, 0), MB_ACC16(C, 16), MB_ACC16(C, 32), MB_ACC16(C, 48)
#define MB_D16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define MB_D32 \
  MB_D16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MB_D64                                                                                  \
  MB_D32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
         "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define MB_PRED(S) "{\n.reg .pred p;\nsetp.ne.b32 p, %" #S ", 0;\n"
// NAME(d, da, db, scale_d): A and B by descriptor (SS); OPS their asm text, "%N, %N+1".
#define MB_WGMMA_SS(NAME, T, NR, SHAPE, TYPES, IMM, DL, ACC, OPS, S)                             \
  __device__ __forceinline__ void NAME(T(&d)[NR], uint64_t da, uint64_t db, uint32_t scale_d) { \
    asm volatile(MB_PRED(S) "wgmma.mma_async.sync.aligned." SHAPE "." TYPES "\n{" DL "}, " OPS  \
                            ", p" IMM ";\n}\n"                                                 \
                 : ACC                                                                          \
                 : "l"(da), "l"(db), "r"(scale_d));                                             \
  }
// NAME(d, a, db, scale_d): A in four registers (RS); OPS "{%N, .., %N+3}, %N+4".
#define MB_WGMMA_RS(NAME, T, NR, SHAPE, TYPES, IMM, DL, ACC, OPS, S)                             \
  __device__ __forceinline__ void NAME(T(&d)[NR], const uint32_t(&a)[4], uint64_t db,          \
                                       uint32_t scale_d) {                                      \
    asm volatile(MB_PRED(S) "wgmma.mma_async.sync.aligned." SHAPE "." TYPES "\n{" DL "}, " OPS  \
                            ", p" IMM ";\n}\n"                                                 \
                 : ACC                                                                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));          \
  }
MB_WGMMA_SS(qgmma_ss_n32, float, 16, "m64n32k32", "f32.e4m3.e4m3", ", 1, 1",
            MB_D16, MB_ACC16("+f", 0), "%16, %17", 18)
MB_WGMMA_SS(qgmma_ss_n64, float, 32, "m64n64k32", "f32.e4m3.e4m3", ", 1, 1",
            MB_D32, MB_ACC32("+f"), "%32, %33", 34)
MB_WGMMA_SS(qgmma_ss_n128, float, 64, "m64n128k32", "f32.e4m3.e4m3", ", 1, 1",
            MB_D64, MB_ACC64("+f"), "%64, %65", 66)
MB_WGMMA_RS(qgmma_rs_n32, float, 16, "m64n32k32", "f32.e4m3.e4m3", ", 1, 1",
            MB_D16, MB_ACC16("+f", 0), "{%16, %17, %18, %19}, %20", 21)
MB_WGMMA_RS(qgmma_rs_n64, float, 32, "m64n64k32", "f32.e4m3.e4m3", ", 1, 1",
            MB_D32, MB_ACC32("+f"), "{%32, %33, %34, %35}, %36", 37)
MB_WGMMA_RS(qgmma_rs_n128, float, 64, "m64n128k32", "f32.e4m3.e4m3", ", 1, 1",
            MB_D64, MB_ACC64("+f"), "{%64, %65, %66, %67}, %68", 69)
MB_WGMMA_SS(igmma_ss_n32, int, 16, "m64n32k32", "s32.s8.s8", "",
            MB_D16, MB_ACC16("+r", 0), "%16, %17", 18)
MB_WGMMA_SS(igmma_ss_n64, int, 32, "m64n64k32", "s32.s8.s8", "",
            MB_D32, MB_ACC32("+r"), "%32, %33", 34)
MB_WGMMA_RS(igmma_rs_n32, int, 16, "m64n32k32", "s32.s8.s8", "",
            MB_D16, MB_ACC16("+r", 0), "{%16, %17, %18, %19}, %20", 21)
MB_WGMMA_RS(igmma_rs_n64, int, 32, "m64n64k32", "s32.s8.s8", "",
            MB_D32, MB_ACC32("+r"), "{%32, %33, %34, %35}, %36", 37)
#undef MB_WGMMA_RS
#undef MB_WGMMA_SS
#undef MB_PRED
#undef MB_D64
#undef MB_D32
#undef MB_D16
#undef MB_ACC64
#undef MB_ACC32
#undef MB_ACC16
#undef MB_ACC4

// ---------------------------------------------------------------------------------------------
// Part 1: exactness.
//
// Tile t: A is 64 rows x 128 bytes, B is 32 rows x 128 bytes (K-major; 4 k32 groups per row).
// Each CTA (one warpgroup) loads a tile into shared memory in the chosen layout, issues four
// m64n32k32 wgmma (one per k32 group g) into four accumulators with scale-d = 0 (accumulators
// pre-set to NaN, so a scale-d that read them would show), and stores D_g[m][n] =
// sum_{k in g} A[m][k] * B[n][k].  CHAIN puts the four groups into one accumulator
// (scale-d = 0 then 1, 1, 1): the control that must come out inexact.

template <int LAYOUT, bool RS, bool INT8, bool CHAIN>
__global__ void __launch_bounds__(128, 1)
    exact_kernel(const uint8_t* __restrict__ A, const uint8_t* __restrict__ B,
                 uint32_t* __restrict__ out, int ntiles, uint32_t lbo, uint32_t sbo, int avar) {
  __shared__ __align__(1024) uint8_t sA[64 * 128];
  __shared__ __align__(1024) uint8_t sB[32 * 128];
  using Acc = typename std::conditional<INT8, int, float>::type;
  constexpr int NG = CHAIN ? 1 : 4;
  const int t = threadIdx.x;
  const uint32_t swz = LAYOUT == 1 ? 1u : 0u;
  for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const uint4* gA = reinterpret_cast<const uint4*>(A + (size_t)tile * 64 * 128);
    const uint4* gB = reinterpret_cast<const uint4*>(B + (size_t)tile * 32 * 128);
    for (int q = t; q < 512; q += 128)
      *reinterpret_cast<uint4*>(sA + tile_off(LAYOUT, 64, q >> 3, q & 7)) = gA[q];
    for (int q = t; q < 256; q += 128)
      *reinterpret_cast<uint4*>(sB + tile_off(LAYOUT, 32, q >> 3, q & 7)) = gB[q];
    ptx::fence_proxy_async(ptx::space_shared);  // generic stores -> async-proxy (wgmma) reads
    __syncthreads();
    Acc acc[NG][16];
#pragma unroll
    for (int g = 0; g < NG; ++g)
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        if constexpr (INT8)
          acc[g][i] = 0x7fc0dead;
        else
          acc[g][i] = __int_as_float(0x7fc0dead);
      }
    uint32_t afr[4][4];
    if constexpr (RS) {
#pragma unroll
      for (int g = 0; g < 4; ++g)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          int r, k;
          afrag_rc(avar, t, j, r, k);
          int kk = 32 * g + k;
          afr[g][j] =
              *reinterpret_cast<const uint32_t*>(sA + tile_off(LAYOUT, 64, r, kk >> 4) + (kk & 15));
        }
    }
    const uint32_t a0 = smem_u32(sA), b0 = smem_u32(sB);
    wg_fence();
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      uint64_t da = make_desc(a0 + group_start(LAYOUT, 64, g), lbo, sbo, swz);
      uint64_t db = make_desc(b0 + group_start(LAYOUT, 32, g), lbo, sbo, swz);
      const int ai = CHAIN ? 0 : g;
      const uint32_t sd = CHAIN ? (g > 0) : 0u;
      if constexpr (INT8) {
        if constexpr (RS)
          igmma_rs_n32(acc[ai], afr[g], db, sd);
        else
          igmma_ss_n32(acc[ai], da, db, sd);
      } else {
        if constexpr (RS)
          qgmma_rs_n32(acc[ai], afr[g], db, sd);
        else
          qgmma_ss_n32(acc[ai], da, db, sd);
      }
    }
    wg_commit();
    wg_wait<0>();
#pragma unroll
    for (int g = 0; g < NG; ++g) fence_regs(acc[g]);
#pragma unroll
    for (int g = 0; g < NG; ++g)
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        int r, c;
        dfrag_rc(t, i, r, c);
        uint32_t v;
        if constexpr (INT8)
          v = (uint32_t)acc[g][i];
        else
          v = __float_as_uint(acc[g][i]);
        out[(((size_t)tile * NG + g) * 64 + r) * 32 + c] = v;
      }
    __syncthreads();  // before the next tile overwrites shared memory
  }
}

__global__ void fill_u32(uint32_t* p, size_t n, uint32_t v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = v;
}

// e4m3 decode to an integer count of 2^-9 (the smallest subnormal).  Never fed NaN codes.
static int32_t e4m3_units(uint8_t b) {
  int ef = (b >> 3) & 15, m = b & 7;
  int32_t v = ef == 0 ? m : (8 + m) << (ef - 1);
  return (b & 0x80) ? -v : v;
}
// e2m1 magnitudes times 2 (integers): index 0..7 -> 0, 1, 2, 3, 4, 6, 8, 12.
static const int kV2[8] = {0, 1, 2, 3, 4, 6, 8, 12};
// enc[mag index][placement + 8]: the e4m3 byte of e2m1 value (kV2/2) * 2^s, s in [-8, 6].
static uint8_t g_enc[8][15];
static void build_enc() {
  for (int mi = 0; mi < 8; ++mi)
    for (int s = -8; s <= 6; ++s) {
      // target value in units of 2^-9: kV2 * 2^(s-1) * 2^9 = kV2 << (s + 8)
      int64_t target = (int64_t)kV2[mi] << (s + 8);
      int found = -1;
      for (int b = 0; b < 0x7f; ++b)
        if (e4m3_units((uint8_t)b) == target) {
          found = b;
          break;
        }
      if (found < 0) {
        fprintf(stderr, "e4m3 encode table: no code for %d * 2^%d\n", kV2[mi], s - 1);
        exit(3);
      }
      g_enc[mi][s + 8] = (uint8_t)found;
    }
}

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return (uint32_t)(s >> 16);
  }
  int uni(int n) { return (int)(next() % (uint32_t)n); }
};

// One signed e2m1 value as (sign, magnitude index).
struct E2 {
  int8_t neg, mi;
};
static int mag_index(int v2) {
  for (int i = 0; i < 8; ++i)
    if (kV2[i] == v2) return i;
  return -1;
}

struct ExactData {
  int ntiles = 0;
  std::vector<uint8_t> A, B;    // e4m3 bytes
  std::vector<uint8_t> A8, B8;  // s8 bytes
  std::vector<int> mode;        // per tile
  std::vector<int8_t> pA, pB;   // placements [tile][row][g]
};

static const char* kModeName[8] = {"random",     "random",     "random",      "random",
                                   "extreme-pl", "max+cancel", "1big+smalls", "ordered-cancel"};

// Fill the signed e2m1 values of one tile according to its mode (see README for the list).
static void gen_tile_values(Rng& R, int mode, E2 (*va)[128], E2 (*vb)[128], int8_t (*pa)[4],
                            int8_t (*pb)[4]) {
  auto rnd = [&](void) { return E2{(int8_t)R.uni(2), (int8_t)R.uni(8)}; };
  auto pl_any = [&]() { return (int8_t)(R.uni(15) - 8); };
  for (int g = 0; g < 4; ++g) {
    for (int n = 0; n < 32; ++n) pb[n][g] = pl_any();
    for (int m = 0; m < 64; ++m) pa[m][g] = pl_any();
    if (mode == 4) {
      static const int8_t ext[3] = {-8, -6, 6};
      for (int n = 0; n < 32; ++n) pb[n][g] = ext[R.uni(3)];
      for (int m = 0; m < 64; ++m) pa[m][g] = ext[R.uni(3)];
    }
    if (mode >= 5) {  // half of the rows at placement 0
      for (int n = 0; n < 32; ++n)
        if (R.uni(2)) pb[n][g] = 0;
      for (int m = 0; m < 64; ++m)
        if (R.uni(2)) pa[m][g] = 0;
    }
    const int k0 = 32 * g;
    if (mode <= 4) {
      for (int n = 0; n < 32; ++n)
        for (int k = 0; k < 32; ++k) vb[n][k0 + k] = rnd();
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 32; ++k) va[m][k0 + k] = rnd();
      continue;
    }
    const int i6 = mag_index(12), i05 = mag_index(1), i15 = mag_index(3);
    for (int n = 0; n < 32; ++n) {
      bool small[32] = {};
      int8_t bs[32];
      for (int k = 0; k < 32; ++k) bs[k] = (int8_t)R.uni(2);
      int pbig = R.uni(32);
      if (mode == 5) {
        int ns = (n % 4 == 0) ? 1 : (n % 4 == 1) ? 0 : 1 + R.uni(3);
        for (int c = 0; c < ns;) {
          int p = R.uni(32);
          if (!small[p]) {
            small[p] = true;
            ++c;
          }
        }
      } else if (mode == 6) {
        for (int k = 0; k < 32; ++k) small[k] = k != pbig;
      } else {  // mode 7: one small at the end (n even) or at the start (n odd)
        small[(n & 1) ? 0 : 31] = true;
      }
      for (int k = 0; k < 32; ++k) {
        int8_t mi = (int8_t)i6;
        if (small[k]) mi = (int8_t)((mode == 5 && n % 4 == 0) || R.uni(2) ? i05 : i15);
        vb[n][k0 + k] = E2{bs[k], mi};
      }
      for (int half = 0; half < 2; ++half) {
        int m = n + 32 * half;
        int8_t ps[32];  // target product signs (0 = +)
        int nb = 0;
        for (int k = 0; k < 32; ++k) nb += !small[k];
        if (mode == 5 && half == 0) {
          int8_t s = (n % 8 == 1) ? 1 : 0;  // n%8==1: all products -36 (sum -1152)
          for (int k = 0; k < 32; ++k) ps[k] = s;
        } else if (mode == 5 || (mode == 7 && (m & 3) == 3)) {
          int d = (nb & 1) ? (R.uni(2) ? 1 : -1) : 0;  // n_plus - n_minus in {-1, 0, 1}
          int nplus = (nb + d) / 2, cnt = 0;
          int8_t tmp[32];
          for (int k = 0; k < 32; ++k)
            tmp[k] = small[k] ? (int8_t)R.uni(2) : (int8_t)(cnt++ >= nplus);
          // shuffle the big-position signs among big positions
          for (int k = 31; k > 0; --k) {
            if (small[k]) continue;
            int j = R.uni(k + 1);
            while (small[j]) j = R.uni(k + 1);
            std::swap(tmp[k], tmp[j]);
          }
          for (int k = 0; k < 32; ++k) ps[k] = tmp[k];
        } else if (mode == 7) {
          int pat = m & 3, cnt = 0;
          for (int k = 0; k < 32; ++k) {
            if (small[k]) {
              ps[k] = 0;
              continue;
            }
            if (pat == 0)
              ps[k] = (int8_t)(cnt >= 16);  // +36 x16 then -36 x15
            else if (pat == 1)
              ps[k] = (int8_t)(cnt & 1);  // alternating
            else
              ps[k] = (int8_t)(cnt < 15);  // -36 x15 then +36 x16
            ++cnt;
          }
        } else {  // mode 6: random signs
          for (int k = 0; k < 32; ++k) ps[k] = (int8_t)R.uni(2);
        }
        for (int k = 0; k < 32; ++k) {
          int8_t mi;
          if (mode == 6)
            mi = (int8_t)((k == pbig) == (half == 0) ? i6 : (R.uni(2) ? i05 : i15));
          else
            mi = small[k] ? (int8_t)(mode == 5 && n % 4 == 0 ? i05 : (R.uni(2) ? i05 : i15))
                          : (int8_t)i6;
          va[m][k0 + k] = E2{(int8_t)(bs[k] ^ ps[k]), mi};
        }
      }
    }
  }
}

static void gen_exact(ExactData& D, int ntiles, uint64_t seed) {
  D.ntiles = ntiles;
  D.A.resize((size_t)ntiles * 64 * 128);
  D.B.resize((size_t)ntiles * 32 * 128);
  D.A8.resize(D.A.size());
  D.B8.resize(D.B.size());
  D.mode.resize(ntiles);
  D.pA.resize((size_t)ntiles * 64 * 4);
  D.pB.resize((size_t)ntiles * 32 * 4);
  Rng R(seed);
  static E2 va[64][128], vb[32][128];
  for (int t = 0; t < ntiles; ++t) {
    int mode = t & 7;
    D.mode[t] = mode;
    int8_t(*pa)[4] = reinterpret_cast<int8_t(*)[4]>(&D.pA[(size_t)t * 256]);
    int8_t(*pb)[4] = reinterpret_cast<int8_t(*)[4]>(&D.pB[(size_t)t * 128]);
    gen_tile_values(R, mode, va, vb, pa, pb);
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < 128; ++k) {
        E2 e = va[m][k];
        size_t i = ((size_t)t * 64 + m) * 128 + k;
        D.A[i] = (uint8_t)(g_enc[e.mi][pa[m][k >> 5] + 8] | (e.neg ? 0x80 : 0));
        int v = kV2[e.mi] * (e.neg ? -1 : 1);
        D.A8[i] = (uint8_t)(int8_t)(mode == 7 ? (int)(R.next() & 255) - 128 : v);
      }
    for (int n = 0; n < 32; ++n)
      for (int k = 0; k < 128; ++k) {
        E2 e = vb[n][k];
        size_t i = ((size_t)t * 32 + n) * 128 + k;
        D.B[i] = (uint8_t)(g_enc[e.mi][pb[n][k >> 5] + 8] | (e.neg ? 0x80 : 0));
        int v = kV2[e.mi] * (e.neg ? -1 : 1);
        D.B8[i] = (uint8_t)(int8_t)(mode == 7 ? (int)(R.next() & 255) - 128 : v);
      }
  }
}

// Exact group sums: e4m3 in units of 2^-18 (int64), s8 as int32.  [tile][g][64][32]
static void ref_exact(const ExactData& D, std::vector<int64_t>& r8, std::vector<int32_t>& ri) {
  size_t n = (size_t)D.ntiles * 4 * 64 * 32;
  r8.assign(n, 0);
  ri.assign(n, 0);
  static int32_t lut[256];
  for (int b = 0; b < 256; ++b) lut[b] = e4m3_units((uint8_t)b);
  for (int t = 0; t < D.ntiles; ++t) {
    const uint8_t* A = &D.A[(size_t)t * 64 * 128];
    const uint8_t* B = &D.B[(size_t)t * 32 * 128];
    const int8_t* A8 = reinterpret_cast<const int8_t*>(&D.A8[(size_t)t * 64 * 128]);
    const int8_t* B8 = reinterpret_cast<const int8_t*>(&D.B8[(size_t)t * 32 * 128]);
    for (int g = 0; g < 4; ++g)
      for (int m = 0; m < 64; ++m)
        for (int c = 0; c < 32; ++c) {
          int64_t s = 0;
          int32_t si = 0;
          for (int k = 32 * g; k < 32 * g + 32; ++k) {
            s += (int64_t)lut[A[m * 128 + k]] * lut[B[c * 128 + k]];
            si += (int32_t)A8[m * 128 + k] * B8[c * 128 + k];
          }
          size_t i = (((size_t)t * 4 + g) * 64 + m) * 32 + c;
          r8[i] = s;
          ri[i] = si;
        }
  }
}

struct ExactStats {
  uint64_t total = 0, bad = 0, nan = 0, exact_repr = 0;
  uint64_t bad_mode[8] = {};
  uint64_t tot_mode[8] = {};
  double max_rel = 0;
};

// Compare GPU output to the reference.  For one-group outputs the reference is exactly
// representable in fp32 (<= 13 significant bits); for the chained control it is the fp32
// round-to-nearest of the exact 4-group sum.
static ExactStats check_exact(const ExactData& D, const std::vector<uint32_t>& out, bool int8,
                              bool chain, const std::vector<int64_t>& r8,
                              const std::vector<int32_t>& ri, const char* name) {
  ExactStats S;
  int shown = 0;
  const int NG = chain ? 1 : 4;
  for (int t = 0; t < D.ntiles; ++t)
    for (int g = 0; g < NG; ++g)
      for (int m = 0; m < 64; ++m)
        for (int c = 0; c < 32; ++c) {
          size_t o = (((size_t)t * NG + g) * 64 + m) * 32 + c;
          uint32_t got = out[o];
          bool bad;
          double refd, gotd;
          if (int8) {
            int64_t ref = 0;
            for (int gg = 0; gg < 4; ++gg) {
              if (!chain && gg != g) continue;
              ref += ri[(((size_t)t * 4 + gg) * 64 + m) * 32 + c];
            }
            refd = (double)ref;
            gotd = (double)(int32_t)got;
            bad = (int64_t)(int32_t)got != ref;
            if (got == 0x7fc0deadu) S.nan++;
            S.exact_repr++;
          } else {
            int64_t ref = 0;
            for (int gg = 0; gg < 4; ++gg) {
              if (!chain && gg != g) continue;
              ref += r8[(((size_t)t * 4 + gg) * 64 + m) * 32 + c];
            }
            refd = std::ldexp((double)ref, -18);  // exact: |ref| < 2^53
            float rn = (float)refd;
            if ((double)rn == refd) S.exact_repr++;
            float gf;
            memcpy(&gf, &got, 4);
            gotd = gf;
            if (std::isnan(gf)) S.nan++;
            bad = !(gf == rn);
          }
          S.total++;
          S.tot_mode[D.mode[t]]++;
          if (bad) {
            S.bad++;
            S.bad_mode[D.mode[t]]++;
            double rel = refd != 0 ? std::fabs(gotd - refd) / std::fabs(refd) : std::fabs(gotd);
            if (!(rel <= S.max_rel)) S.max_rel = std::isnan(rel) ? INFINITY : rel;
            if (shown < 6) {
              ++shown;
              printf(
                  "  %s mismatch: tile %d (mode %d) g %d m %d n %d ref %.10g got %.10g"
                  " (placements A %d B %d)\n",
                  name, t, D.mode[t], g, m, c, refd, gotd, D.pA[((size_t)t * 64 + m) * 4 + g],
                  D.pB[((size_t)t * 32 + c) * 4 + g]);
            }
          }
        }
  return S;
}

// Host self-checks of the layout and fragment math (no GPU): bijections and the canonical forms.
static void host_layout_checks() {
  for (int layout = 0; layout < 2; ++layout)
    for (int R : {32, 64}) {
      std::vector<int> seen(R * 8, 0);
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < 8; ++c) {
          uint32_t o = tile_off(layout, R, r, c);
          if (o % 16 || o >= (uint32_t)R * 128) {
            printf("layout %d bad offset\n", layout);
            exit(4);
          }
          seen[o / 16]++;
          // canonical form, relative to the group start
          int g = c >> 1;
          uint32_t rel = o - group_start(layout, R, g);
          uint32_t want;
          if (layout == 0)
            want = (r & 7) * 16 + (r >> 3) * 256 + (c & 1) * 128;
          else {  // Swizzle<3,4,3> of the row-major address (bits 4-6 ^= bits 7-9)
            uint32_t lin = r * 128 + c * 16;
            want = (lin ^ (((lin >> 7) & 7) << 4)) - group_start(layout, R, g);
          }
          if (rel != want) {
            printf("layout %d canonical mismatch\n", layout);
            exit(4);
          }
        }
      for (int v : seen)
        if (v != 1) {
          printf("layout %d not a bijection\n", layout);
          exit(4);
        }
    }
  for (int var = 0; var < 2; ++var) {
    std::vector<int> seen(64 * 8, 0);
    for (int t = 0; t < 128; ++t)
      for (int j = 0; j < 4; ++j) {
        int r, k;
        afrag_rc(var, t, j, r, k);
        seen[r * 8 + k / 4]++;
      }
    for (int v : seen)
      if (v != 1) {
        printf("A fragment var %d not a bijection\n", var);
        exit(4);
      }
  }
  for (int N : {32, 64, 128}) {
    std::vector<int> seen(64 * N, 0);
    for (int t = 0; t < 128; ++t)
      for (int i = 0; i < N / 2; ++i) {
        int r, c;
        dfrag_rc(t, i, r, c);
        seen[r * N + c]++;
      }
    for (int v : seen)
      if (v != 1) {
        printf("D fragment N=%d not a bijection\n", N);
        exit(4);
      }
  }
  // e2m1 -> e4m3 zero-table widening: nibble s e1 e0 m -> byte s 0 0 e1 e0 m 0 0 is value*2^-6
  for (int nib = 0; nib < 16; ++nib) {
    static const int e2m1_v2[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    uint8_t b = (uint8_t)(((nib & 8) << 4) | ((nib & 7) << 2));
    int64_t want = (int64_t)e2m1_v2[nib & 7] << 2;  // v2/2 * 2^-6 in units of 2^-9
    if (nib & 8) want = -want;
    if (e4m3_units(b) != want) {
      printf("widening check failed for nibble %d\n", nib);
      exit(4);
    }
  }
  printf("host layout checks: tile layouts, A/D fragments, widening: ok\n");
}

// Coverage of the one-group references: significant bits of each group sum counted in quanta
// of 0.25 * 2^(sA + sB) (the e2m1 product grid at the group's placement).  13 is the most.
static void exact_coverage(const ExactData& D, const std::vector<int64_t>& r8) {
  uint64_t hist[16] = {}, zero = 0;
  size_t n = r8.size();
  for (size_t i = 0; i < n; ++i) {
    size_t t = i / 8192, g = (i / 2048) % 4, m = (i / 32) % 64, c = i % 32;
    int sh = D.pA[(t * 64 + m) * 4 + g] + D.pB[(t * 32 + c) * 4 + g] - 2 + 18;
    int64_t q = r8[i] >> sh;  // exact: r8 is a multiple of 2^sh
    if (q < 0) q = -q;
    if (!q) {
      ++zero;
      continue;
    }
    int hi = 63 - __builtin_clzll((unsigned long long)q),
        lo = __builtin_ctzll((unsigned long long)q);
    hist[std::min(15, hi - lo + 1)]++;
  }
  printf("coverage (one-group refs): zero %llu;", (unsigned long long)zero);
  for (int b = 1; b < 16; ++b)
    if (hist[b]) printf(" %d bits: %llu;", b, (unsigned long long)hist[b]);
  printf("\n");
  rec("exact", "coverage", "refs_13_significant_bits", (double)hist[13], "count");
  rec("exact", "coverage", "refs_12_significant_bits", (double)hist[12], "count");
}

using ExactFn = void (*)(const uint8_t*, const uint8_t*, uint32_t*, int, uint32_t, uint32_t, int);

static int part_exact(int ntiles, uint64_t seed) {
  printf("== exact: %d tiles, %d dots per one-group variant ==\n", ntiles, ntiles * 4 * 2048);
  host_layout_checks();
  build_enc();
  ExactData D;
  gen_exact(D, ntiles, seed);
  std::vector<int64_t> r8;
  std::vector<int32_t> ri;
  ref_exact(D, r8, ri);
  exact_coverage(D, r8);
  uint8_t *dA, *dB, *dA8, *dB8;
  uint32_t* dOut;
  size_t outn = (size_t)ntiles * 4 * 64 * 32;
  CK(cudaMalloc(&dA, D.A.size()));
  CK(cudaMalloc(&dB, D.B.size()));
  CK(cudaMalloc(&dA8, D.A8.size()));
  CK(cudaMalloc(&dB8, D.B8.size()));
  CK(cudaMalloc(&dOut, outn * 4));
  CK(cudaMemcpy(dA, D.A.data(), D.A.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, D.B.data(), D.B.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dA8, D.A8.data(), D.A8.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB8, D.B8.data(), D.B8.size(), cudaMemcpyHostToDevice));
  std::vector<uint32_t> out(outn);
  struct V {
    const char* name;
    ExactFn fn;
    int layout;
    bool int8, chain, rs;
  };
  V vars[] = {
      {"qgmma_ss_sw128", exact_kernel<1, false, false, false>, 1, false, false, false},
      {"qgmma_rs_sw128", exact_kernel<1, true, false, false>, 1, false, false, true},
      {"qgmma_ss_noswz", exact_kernel<0, false, false, false>, 0, false, false, false},
      {"qgmma_rs_noswz", exact_kernel<0, true, false, false>, 0, false, false, true},
      {"igmma_ss_sw128", exact_kernel<1, false, true, false>, 1, true, false, false},
      {"igmma_rs_sw128", exact_kernel<1, true, true, false>, 1, true, false, true},
      {"qgmma_ss_chain4_control", exact_kernel<1, false, false, true>, 1, false, true, false},
      {"igmma_ss_chain4_control", exact_kernel<1, false, true, true>, 1, true, true, false},
  };
  row("| exact | variant | dots | inexact | NaN | note |");
  row("|---|---|---|---|---|---|");
  int failures = 0;
  for (auto& v : vars) {
    // default descriptors; fallbacks tried only when a variant fails wholesale
    struct Try {
      uint32_t lbo, sbo;
      int avar;
    };
    std::vector<Try> tries;
    if (v.layout == 0)
      tries = {{128, 256, 0}, {256, 128, 0}, {128, 256, 1}, {256, 128, 1}};
    else
      tries = {{16, 1024, 0}, {16, 1024, 1}};
    if (!v.rs)
      tries.erase(std::remove_if(tries.begin(), tries.end(), [](const Try& x) { return x.avar; }),
                  tries.end());
    for (size_t ti = 0; ti < tries.size(); ++ti) {
      const Try& tr = tries[ti];
      fill_u32<<<1024, 256>>>(dOut, outn, 0x7fc0deadu);  // poison: a NaN, and no s32 result
      CKL();
      const uint8_t* a = v.int8 ? dA8 : dA;
      const uint8_t* b = v.int8 ? dB8 : dB;
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      CK(cudaEventRecord(e0));
      v.fn<<<g_sms * 4, 128>>>(a, b, dOut, ntiles, tr.lbo, tr.sbo, tr.avar);
      CKL();
      CK(cudaEventRecord(e1));
      CK(cudaDeviceSynchronize());
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
      size_t n = (size_t)ntiles * (v.chain ? 1 : 4) * 64 * 32;
      CK(cudaMemcpy(out.data(), dOut, n * 4, cudaMemcpyDeviceToHost));
      char nm[128];
      snprintf(nm, sizeof nm, "%s[lbo=%u,sbo=%u,avar=%d]", v.name, tr.lbo, tr.sbo, tr.avar);
      ExactStats S = check_exact(D, out, v.int8, v.chain, r8, ri, nm);
      printf(
          "%s: %llu dots, %llu inexact, %llu NaN, %llu exact-representable refs, max rel err "
          "%.3g, %.3f ms\n",
          nm, (unsigned long long)S.total, (unsigned long long)S.bad, (unsigned long long)S.nan,
          (unsigned long long)S.exact_repr, S.max_rel, ms);
      for (int md = 0; md < 8; ++md)
        if (S.tot_mode[md] && (md == 0 || md >= 4))
          printf("    mode %d %-14s: %llu / %llu inexact%s\n", md, kModeName[md],
                 (unsigned long long)S.bad_mode[md], (unsigned long long)S.tot_mode[md],
                 md == 0 ? " (modes 0-3 alike)" : "");
      uint64_t rb = 0, rt = 0;
      for (int md = 0; md < 4; ++md) {
        rb += S.bad_mode[md];
        rt += S.tot_mode[md];
      }
      rec("exact", nm, "dots", (double)S.total, "count");
      rec("exact", nm, "inexact", (double)S.bad, "count");
      rec("exact", nm, "nan", (double)S.nan, "count");
      rec("exact", nm, "inexact_random_modes", (double)rb, "count", std::to_string(rt) + " dots");
      for (int md = 4; md < 8; ++md)
        rec("exact", nm, (std::string("inexact_mode") + std::to_string(md)).c_str(),
            (double)S.bad_mode[md], "count", kModeName[md]);
      bool wholesale = S.bad * 2 > S.total;
      bool last = ti + 1 == tries.size();
      if (!wholesale || last || v.chain) {
        char note[160];
        if (v.chain && v.int8)
          snprintf(note, sizeof note, "4 groups chained in s32: exact by construction");
        else if (v.chain)
          snprintf(note, sizeof note, "control: 4 groups chained; inexact expected (fp32 RN ref)");
        else
          snprintf(note, sizeof note, "random %llu/%llu; adversarial %llu/%llu%s",
                   (unsigned long long)rb, (unsigned long long)rt, (unsigned long long)(S.bad - rb),
                   (unsigned long long)(S.total - rt),
                   ti ? " (fallback descriptor/fragment!)" : "");
        row("| exact | %s | %llu | %llu | %llu | %s |", nm, (unsigned long long)S.total,
            (unsigned long long)S.bad, (unsigned long long)S.nan, note);
        if ((!v.chain || v.int8) && S.bad) ++failures;
        break;
      }
      printf("  -> wholesale mismatch, trying the next descriptor/fragment variant\n");
    }
  }
  CK(cudaFree(dA));
  CK(cudaFree(dB));
  CK(cudaFree(dA8));
  CK(cudaFree(dB8));
  CK(cudaFree(dOut));
  return failures;
}

// ---------------------------------------------------------------------------------------------
// Part 2: tensor rates.  One CTA per SM, 1-3 warpgroups; every warpgroup loops over "tiles" of
// BATCH k32 wgmma (k-group g = b % 4, accumulator b % NACC), then commit + wait_group 0, as a
// kernel with one accumulator per scale group must do before its epilogue.  A (64 x 128 B) is
// shared by the warpgroups, each has its own B (N x 128 B); 128B swizzle, as in DeepGEMM.

template <int N, bool RS, bool INT8>
__device__ __forceinline__ void mma_any(
    typename std::conditional<INT8, int, float>::type (&d)[N / 2], const uint32_t (&a)[4],
    uint64_t da, uint64_t db, uint32_t sd) {
  if constexpr (INT8) {
    static_assert(N == 32 || N == 64, "IGMMA wrappers exist for N = 32, 64");
    if constexpr (N == 32) {
      if constexpr (RS)
        igmma_rs_n32(d, a, db, sd);
      else
        igmma_ss_n32(d, da, db, sd);
    } else {
      if constexpr (RS)
        igmma_rs_n64(d, a, db, sd);
      else
        igmma_ss_n64(d, da, db, sd);
    }
  } else if constexpr (N == 32) {
    if constexpr (RS)
      qgmma_rs_n32(d, a, db, sd);
    else
      qgmma_ss_n32(d, da, db, sd);
  } else if constexpr (N == 64) {
    if constexpr (RS)
      qgmma_rs_n64(d, a, db, sd);
    else
      qgmma_ss_n64(d, da, db, sd);
  } else {
    static_assert(N == 128, "N");
    if constexpr (RS)
      qgmma_rs_n128(d, a, db, sd);
    else
      qgmma_ss_n128(d, da, db, sd);
  }
}

template <int N, bool RS, int NACC, int BATCH, bool INT8, int MAXT>
__global__ void __launch_bounds__(MAXT, 1) rate_kernel(int iters, uint32_t* sink, long long* cyc) {
  extern __shared__ uint8_t dsm[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(dsm) + 1023) &
                                             ~static_cast<uintptr_t>(1023));
  const int nwg = blockDim.x / 128, wg = threadIdx.x / 128, t = threadIdx.x % 128;
  uint8_t* sA = base;
  uint8_t* sB = base + 8192 + wg * N * 128;
  const int words = (8192 + nwg * N * 128) / 4;
  for (int i = threadIdx.x; i < words; i += blockDim.x) {
    uint32_t h = hash32(i * 2654435761u + blockIdx.x * 7919u + 1u), w;
    // e4m3: |x| < 2, never NaN (exponent field <= 7); s8: small integers in [-4, 3]
    if (INT8)
      w = ((h & 0x07070707u) + 0xFCFCFCFCu);
    else
      w = (h & 0xBFBFBFBFu) & ~0x40404040u;
    reinterpret_cast<uint32_t*>(base)[i] = w;
  }
  ptx::fence_proxy_async(ptx::space_shared);
  __syncthreads();
  using Acc = typename std::conditional<INT8, int, float>::type;
  Acc acc[NACC][N / 2];
#pragma unroll
  for (int a = 0; a < NACC; ++a)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[a][i] = 0;
  uint32_t afr[4][4];
  uint64_t da[4], db[4];
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    da[g] = make_desc(smem_u32(sA) + 32 * g, 16, 1024, 1);
    db[g] = make_desc(smem_u32(sB) + 32 * g, 16, 1024, 1);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r, k;
      afrag_rc(0, t, j, r, k);
      int kk = 32 * g + k;
      afr[g][j] =
          RS ? *reinterpret_cast<const uint32_t*>(sA + tile_off(1, 64, r, kk >> 4) + (kk & 15))
             : 0u;
    }
  }
  __syncthreads();
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    wg_fence();
#pragma unroll
    for (int b = 0; b < BATCH; ++b)
      mma_any<N, RS, INT8>(acc[b % NACC], afr[b & 3], da[b & 3], db[b & 3], 1u);
    wg_commit();
    wg_wait<0>();
#pragma unroll
    for (int a = 0; a < NACC; ++a) fence_regs(acc[a]);
  }
  __syncthreads();
  long long t1 = clock64();
  uint32_t s = 0;
#pragma unroll
  for (int a = 0; a < NACC; ++a)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      if constexpr (INT8)
        s += (uint32_t)acc[a][i];
      else
        s += __float_as_uint(acc[a][i]);
    }
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}

struct RateCfg {
  void (*fn)(int, uint32_t*, long long*);
  int N, nacc, batch, nwg;
  bool rs, int8;
};

static void part_tensor() {
  printf("== tensor: wgmma k32 rates, %d CTAs (1 per SM) ==\n", g_sms);
#define RC(N, RS, NACC, B, I8, MAXT, NWG) \
  RateCfg{rate_kernel<N, RS, NACC, B, I8, MAXT>, N, NACC, B, NWG, RS, I8}
  std::vector<RateCfg> cfgs = {
      RC(32, false, 4, 4, false, 384, 1),   RC(32, false, 4, 4, false, 384, 2),
      RC(32, false, 4, 4, false, 384, 3),   RC(32, true, 4, 4, false, 384, 1),
      RC(32, true, 4, 4, false, 384, 2),    RC(32, true, 4, 4, false, 384, 3),
      RC(64, false, 4, 4, false, 256, 1),   RC(64, false, 4, 4, false, 256, 2),
      RC(64, true, 4, 4, false, 256, 1),    RC(64, true, 4, 4, false, 256, 2),
      RC(128, false, 1, 4, false, 256, 1),  RC(128, false, 1, 4, false, 256, 2),
      RC(128, true, 1, 4, false, 256, 1),   RC(128, true, 1, 4, false, 256, 2),
      RC(32, false, 4, 16, false, 256, 2),  RC(32, true, 4, 16, false, 256, 2),
      RC(64, false, 4, 16, false, 256, 1),  RC(64, false, 4, 16, false, 256, 2),
      RC(64, true, 4, 16, false, 256, 1),   RC(64, true, 4, 16, false, 256, 2),
      RC(128, false, 1, 16, false, 256, 1), RC(128, false, 1, 16, false, 256, 2),
      RC(128, true, 1, 16, false, 256, 2),  RC(64, false, 4, 4, true, 256, 2),
      RC(64, true, 4, 4, true, 256, 2),     RC(64, false, 4, 16, true, 256, 2),
  };
#undef RC
  uint32_t* sink;
  long long* cyc;
  CK(cudaMalloc(&sink, (size_t)g_sms * 384 * 4));
  CK(cudaMalloc(&cyc, (size_t)g_sms * 8));
  row("| tensor | config | WGs | TFLOP/s | FLOP/clk/SM | of 8192 | SM MHz |");
  row("|---|---|---|---|---|---|---|");
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (auto& c : cfgs) {
    size_t smem = 1024 + 8192 + (size_t)c.nwg * c.N * 128;
    CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    double flop_iter = 2.0 * 64 * c.N * 32 * c.batch * c.nwg;  // per CTA
    int iters = (int)std::max(64.0, 6.0e6 / (flop_iter / 8192.0));
    iters -= iters % 4;  // no remainder loop (ptxas unrolls the main loop by 4)
    std::vector<double> ms;
    for (int rep = 0; rep < 6; ++rep) {
      CK(cudaEventRecord(e0));
      c.fn<<<g_sms, 128 * c.nwg, smem>>>(iters, sink, cyc);
      CKL();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float m;
      CK(cudaEventElapsedTime(&m, e0, e1));
      if (rep) ms.push_back(m);
    }
    std::vector<long long> cy(g_sms);
    CK(cudaMemcpy(cy.data(), cyc, g_sms * 8, cudaMemcpyDeviceToHost));
    std::vector<double> cyd(cy.begin(), cy.end());
    double mcy = median(cyd), mms = median(ms);
    double flop_cta = flop_iter * iters;
    double tflops = flop_cta * g_sms / (mms * 1e-3) / 1e12;
    double fpc = flop_cta / mcy;
    double mhz = *std::max_element(cyd.begin(), cyd.end()) / (mms * 1e3);
    char cname[64];
    snprintf(cname, sizeof cname, "%s_%s_n%d_acc%d_b%d", c.int8 ? "igmma" : "qgmma",
             c.rs ? "rs" : "ss", c.N, c.nacc, c.batch);
    std::string nm = std::string(cname) + "_wg" + std::to_string(c.nwg);
    printf(
        "%-28s WGs %d iters %6d: %.3f ms, %.1f TFLOP/s, %.0f FLOP/clk/SM (%.1f%% of 8192),"
        " ~%.0f MHz\n",
        cname, c.nwg, iters, mms, tflops, fpc, 100.0 * fpc / 8192, mhz);
    rec("tensor", nm, "tflops", tflops, "TFLOP/s");
    rec("tensor", nm, "flop_per_clk_sm", fpc, "FLOP/clk/SM");
    rec("tensor", nm, "sm_mhz", mhz, "MHz");
    row("| tensor | %s | %d | %.0f | %.0f | %.0f%% | %.0f |", cname, c.nwg, tflops, fpc,
        100.0 * fpc / 8192, mhz);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(sink));
  CK(cudaFree(cyc));
}

// ---------------------------------------------------------------------------------------------
// Part 3: memory paths.
//
// pull_kernel: one CTA per SM with 1 or 4 producer warps; lane 0 of each keeps its own ring of
// NST shared-memory stages in flight.  A stage is CPS copies of CB bytes completing on one
// mbarrier (arrive.expect_tx + complete_tx).  MODE 0: cp.async.bulk.tensor.2d (TMA) boxes;
// MODE 1: 1-D cp.async.bulk.  The copy unit u picks the source: sequential or an odd-multiplier
// permutation (random), masked to the region (a power of two of units).  On completion the
// lane reads one word of the stage (checksum) and refills it.

static PFN_cuTensorMapEncodeTiled_v12000 g_encode = nullptr;

static void get_encode() {
  if (g_encode) return;
  cudaDriverEntryPointQueryResult q;
  void* fn = nullptr;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || !fn) {
    fprintf(stderr, "cuTensorMapEncodeTiled not found (%d)\n", (int)q);
    exit(2);
  }
  g_encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

// 2-D map over bytes: rows of `inner` bytes, box {inner, box_rows}.
static CUtensorMap make_map(const void* base, uint64_t bytes, uint32_t inner, uint32_t box_rows,
                            CUtensorMapSwizzle swz) {
  get_encode();
  CUtensorMap m;
  memset(&m, 0, sizeof m);
  cuuint64_t dims[2] = {inner, bytes / inner};
  cuuint64_t strides[1] = {inner};
  cuuint32_t box[2] = {inner, box_rows};
  cuuint32_t es[2] = {1, 1};
  CUresult r = g_encode(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims,
                        strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, swz,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r);
    exit(2);
  }
  return m;
}

struct PullArgs {
  const uint8_t* src;
  uint64_t unit_mask;     // region units - 1 (units of CB bytes)
  uint32_t stages_total;  // stages per producer warp
  uint32_t nstages;       // ring depth per producer warp
  uint32_t cps;           // copies per stage
  uint32_t cb;            // bytes per copy
  uint32_t box_rows;      // TMA: rows per box (CB = inner * box_rows)
  uint32_t random;
};

__device__ __forceinline__ uint32_t sm_id() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
// Per-CTA timing record: clock64 at start and end (after a CTA barrier) and the SM id, so that
// the host can compute per-SM rates even when several CTAs share an SM.
__device__ __forceinline__ void stamp(long long* cyc, long long t0, long long t1) {
  if (threadIdx.x == 0) {
    cyc[3 * blockIdx.x] = t0;
    cyc[3 * blockIdx.x + 1] = t1;
    cyc[3 * blockIdx.x + 2] = sm_id();
  }
}

// Lane 0 of each warp is a producer with its own ring (what a TMA warp's elected lane does):
// wait for a stage, read one word of it, refill it.  No proxy fence on this path (visit 1 had
// fence.proxy.async here: MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S per stage capped every copy at
// ~550 clk); the word's value does not matter to a benchmark, and a real consumer releases a
// stage through an "empty" mbarrier, as in CUTLASS/DeepGEMM rings.
template <int MODE>
__global__ void __launch_bounds__(128, 1) pull_kernel(const __grid_constant__ CUtensorMap map,
                                                      PullArgs a, uint32_t* sink, long long* cyc) {
  extern __shared__ uint8_t dsm[];
  __shared__ __align__(8) uint64_t bars[64];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(dsm) + 1023) &
                                             ~static_cast<uintptr_t>(1023));
  const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const uint32_t sbytes = a.cps * a.cb;
  const uint32_t gw = blockIdx.x * nwarps + warp, nw = gridDim.x * nwarps;
  uint64_t* wb = bars + warp * a.nstages;
  const uint32_t wbase = smem_u32(base) + warp * a.nstages * sbytes;
  uint32_t sum = 0;
  __syncthreads();
  long long t0 = clock64();
  if (lane == 0) {
    for (uint32_t s = 0; s < a.nstages; ++s) ptx::mbarrier_init(&wb[s], 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
    auto issue = [&](uint32_t st, uint32_t s) {
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &wb[s],
                                     sbytes);
      const uint32_t gc0 = st * a.cps;
      for (uint32_t c = 0; c < a.cps; ++c) {
        const uint32_t gc = gc0 + c;
        // random: an odd-multiplier permutation of the units (one IMAD), else sequential
        uint64_t u =
            a.random ? (uint64_t)(gc * 0x9E3779B1u + gw * 0x85EBCA77u) : gw + (uint64_t)gc * nw;
        u &= a.unit_mask;
        void* dst = __cvta_shared_to_generic(wbase + s * sbytes + c * a.cb);
        if constexpr (MODE == 0) {
          int32_t crd[2] = {0, (int32_t)(u * a.box_rows)};
          ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst, &map, crd, &wb[s]);
        } else {
          ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, dst, a.src + u * a.cb, a.cb,
                             &wb[s]);
        }
      }
    };
    const uint32_t pro = a.stages_total < a.nstages ? a.stages_total : a.nstages;
    for (uint32_t s = 0; s < pro; ++s) issue(s, s);
    uint32_t s = 0, ph = 0;
    for (uint32_t st = 0; st < a.stages_total; ++st) {
      bar_wait(&wb[s], ph);
      uint32_t v;
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(wbase + s * sbytes + 4 * (st & 7)));
      sum += v;
      if (st + a.nstages < a.stages_total) issue(st + a.nstages, s);
      if (++s == a.nstages) {
        s = 0;
        ph ^= 1;
      }
    }
  }
  __syncthreads();
  long long t1 = clock64();
  sink[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  stamp(cyc, t0, t1);
}

// ld.global.nc 16-byte loads, UNROLL in flight per thread.
template <int UNROLL>
__global__ void ldg_kernel(const uint4* __restrict__ src, uint64_t vec_mask, uint32_t iters,
                           uint32_t* sink, long long* cyc) {
  const uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  uint32_t acc = 0;
  __syncthreads();
  long long t0 = clock64();
  for (uint32_t i = 0; i < iters; i += UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const uint4* p = src + ((tid + (uint64_t)(i + u) * stride) & vec_mask);
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                   : "l"(p));
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  __syncthreads();
  long long t1 = clock64();
  sink[tid & 0xFFFFF] = acc;
  stamp(cyc, t0, t1);
}

__global__ void fill_rand(uint4* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = hash32((uint32_t)i ^ seed) ^ (uint32_t)(i >> 32);
    p[i] = make_uint4(h, hash32(h), hash32(h + 1), hash32(h + 2));
  }
}

struct Timed {
  double ms;      // median event time
  double per_sm;  // median over SMs of (work on the SM) / (its busy span in SM clocks)
  double span;    // median per-SM busy span (clocks)
  int nsm;        // SMs that ran CTAs
  double mhz;     // max span / event time
};

// Times `launch` (reps after one warm-up); per-SM rates from the stamp() records: for each SM,
// the work of its CTAs over max(end) - min(start) of those CTAs (one SM's clock64 counter).
template <typename F>
static Timed time_kernel(F launch, long long* dcyc, int nblk, int reps, double work_per_cta) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> ms, rate, spans, mhz;
  std::vector<long long> cy(3 * (size_t)nblk);
  int nsm = 0;
  for (int r = 0; r < reps + 1; ++r) {
    CK(cudaMemset(dcyc, 0, 3 * (size_t)nblk * 8));
    CK(cudaEventRecord(e0));
    launch();
    CKL();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float m;
    CK(cudaEventElapsedTime(&m, e0, e1));
    if (r == 0) continue;  // warm-up
    CK(cudaMemcpy(cy.data(), dcyc, cy.size() * 8, cudaMemcpyDeviceToHost));
    std::vector<long long> lo(1024, LLONG_MAX), hi(1024, LLONG_MIN);
    std::vector<int> cnt(1024, 0);
    for (int b = 0; b < nblk; ++b) {
      int s = (int)cy[3 * b + 2] & 1023;
      lo[s] = std::min(lo[s], cy[3 * b]);
      hi[s] = std::max(hi[s], cy[3 * b + 1]);
      cnt[s]++;
    }
    std::vector<double> rs, sp;
    for (int s = 0; s < 1024; ++s)
      if (cnt[s]) {
        rs.push_back(work_per_cta * cnt[s] / (double)(hi[s] - lo[s]));
        sp.push_back((double)(hi[s] - lo[s]));
      }
    nsm = (int)rs.size();
    ms.push_back(m);
    rate.push_back(median(rs));
    spans.push_back(median(sp));
    mhz.push_back(*std::max_element(sp.begin(), sp.end()) / (m * 1e3));
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return {median(ms), median(rate), median(spans), nsm, median(mhz)};
}

static void part_mem() {
  printf("== mem ==\n");
  const size_t big = 4ull << 30;  // 4 GiB
  uint8_t *src, *dst;
  CK(cudaMalloc(&src, big));
  CK(cudaMalloc(&dst, big));
  fill_rand<<<4096, 256>>>(reinterpret_cast<uint4*>(src), big / 16, 12345u);
  CKL();
  CK(cudaMemset(dst, 0x5A, big));
  CK(cudaDeviceSynchronize());
  uint32_t* sink;
  long long* cyc;
  CK(cudaMalloc(&sink, 64u << 20));
  CK(cudaMalloc(&cyc, 3 << 20));
  row("| mem | path | footprint | CTAs | GB/s | B/clk/SM | note |");
  row("|---|---|---|---|---|---|---|");
  // (a) D2D copy ceiling
  {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> ms;
    for (int r = 0; r < 6; ++r) {
      CK(cudaEventRecord(e0));
      CK(cudaMemcpyAsync(dst, src, big, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float m;
      CK(cudaEventElapsedTime(&m, e0, e1));
      if (r) ms.push_back(m);
    }
    double m = median(ms), gbs = 2.0 * big / (m * 1e-3) / 1e9;
    printf("D2D cudaMemcpy 4 GiB: %.3f ms, %.0f GB/s (read + write)\n", m, gbs);
    rec("mem", "d2d_memcpy_4GiB", "gbps_rw", gbs, "GB/s", "bytes read + written");
    row("| mem | cudaMemcpy D2D 4 GiB | HBM | - | %.0f | - | read+written |", gbs);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
  }
  CK(cudaFuncSetAttribute(pull_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CK(cudaFuncSetAttribute(pull_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  const uint64_t l2fp = 16ull << 20;                                              // L2-resident
  CUtensorMap map8k = make_map(src, big, 128, 64, CU_TENSOR_MAP_SWIZZLE_128B);    // 8 KB boxes
  CUtensorMap map16k = make_map(src, big, 128, 128, CU_TENSOR_MAP_SWIZZLE_128B);  // 16 KB boxes
  CUtensorMap map512 = make_map(src, big, 64, 8, CU_TENSOR_MAP_SWIZZLE_64B);      // 512 B boxes
  struct P {
    const char* name;
    int mode;  // 0 TMA, 1 bulk, 2 ldg
    int grid;
    uint64_t footprint, bytes_per_cta;
    uint32_t warps, nst, cps, cb, box_rows, random;
    const CUtensorMap* map;
    int ldg_threads, ldg_unroll;
  };
  const int G = g_sms;
  const uint64_t H = big, PC = big / G, S1 = 256u << 20, SC = 32u << 20;
  std::vector<P> ps = {
      // all SMs, HBM (4 GiB read once per launch)
      {"tma2d 8KB box, 1 warp x 16 stages", 0, G, H, PC, 1, 16, 1, 8192, 64, 0, &map8k},
      {"tma2d 8KB box, 1 warp x 4 stages", 0, G, H, PC, 1, 4, 1, 8192, 64, 0, &map8k},
      {"tma2d 8KB box, 4 warps x 4 stages", 0, G, H, PC, 4, 4, 1, 8192, 64, 0, &map8k},
      {"tma2d 16KB box, 1 warp x 8 stages", 0, G, H, PC, 1, 8, 1, 16384, 128, 0, &map16k},
      {"bulk 8KB, 1 warp x 16 stages", 1, G, H, PC, 1, 16, 1, 8192, 0, 0, nullptr},
      {"bulk 8KB, 1 warp x 4 stages", 1, G, H, PC, 1, 4, 1, 8192, 0, 0, nullptr},
      {"bulk 32KB, 1 warp x 4 stages", 1, G, H, PC, 1, 4, 1, 32768, 0, 0, nullptr},
      {"ldg.nc v4, 2 x 512 thr/SM, 8 in flight", 2, 2 * G, H, PC / 2, 0, 0, 0, 0, 0, 0, nullptr,
       512, 8},
      {"ldg.nc v4, 1024 thr/SM, 4 in flight", 2, G, H, PC, 0, 0, 0, 0, 0, 0, nullptr, 1024, 4},
      // all SMs, L2-resident 16 MB region (4 GiB read in total)
      {"tma2d 8KB box, 1 warp x 16 stages", 0, G, l2fp, PC, 1, 16, 1, 8192, 64, 0, &map8k},
      {"tma2d 8KB box, 4 warps x 4 stages", 0, G, l2fp, PC, 4, 4, 1, 8192, 64, 0, &map8k},
      {"bulk 8KB, 1 warp x 16 stages", 1, G, l2fp, PC, 1, 16, 1, 8192, 0, 0, nullptr},
      {"ldg.nc v4, 2 x 512 thr/SM, 8 in flight", 2, 2 * G, l2fp, PC / 2, 0, 0, 0, 0, 0, 0, nullptr,
       512, 8},
      // one SM alone
      {"tma2d 8KB box, 1 warp x 16 stages", 0, 1, H, S1, 1, 16, 1, 8192, 64, 0, &map8k},
      {"tma2d 8KB box, 4 warps x 4 stages", 0, 1, H, S1, 4, 4, 1, 8192, 64, 0, &map8k},
      {"bulk 8KB, 1 warp x 16 stages", 1, 1, H, S1, 1, 16, 1, 8192, 0, 0, nullptr},
      {"ldg.nc v4, 1024 thr, 8 in flight", 2, 1, H, S1, 0, 0, 0, 0, 0, 0, nullptr, 1024, 8},
      {"tma2d 8KB box, 1 warp x 16 stages", 0, 1, l2fp, S1, 1, 16, 1, 8192, 64, 0, &map8k},
      {"tma2d 8KB box, 4 warps x 4 stages", 0, 1, l2fp, S1, 4, 4, 1, 8192, 64, 0, &map8k},
      {"bulk 8KB, 1 warp x 16 stages", 1, 1, l2fp, S1, 1, 16, 1, 8192, 0, 0, nullptr},
      {"ldg.nc v4, 1024 thr, 8 in flight", 2, 1, l2fp, S1, 0, 0, 0, 0, 0, 0, nullptr, 1024, 8},
      // 512-B copies (16 per stage, 128 KB in flight per SM): issue rate
      {"bulk 512B random, 1 warp", 1, G, l2fp, SC, 1, 16, 16, 512, 0, 1, nullptr},
      {"bulk 512B random, 4 warps", 1, G, l2fp, SC, 4, 4, 16, 512, 0, 1, nullptr},
      {"bulk 512B sequential, 1 warp", 1, G, l2fp, SC, 1, 16, 16, 512, 0, 0, nullptr},
      {"tma2d 64Bx8 box random, 1 warp", 0, G, l2fp, SC, 1, 16, 16, 512, 8, 1, &map512},
      {"tma2d 64Bx8 box random, 4 warps", 0, G, l2fp, SC, 4, 4, 16, 512, 8, 1, &map512},
      {"bulk 512B random, 1 warp", 1, G, H, SC, 1, 16, 16, 512, 0, 1, nullptr},
      {"bulk 512B random, 4 warps", 1, G, H, SC, 4, 4, 16, 512, 0, 1, nullptr},
      {"tma2d 64Bx8 box random, 1 warp", 0, G, H, SC, 1, 16, 16, 512, 8, 1, &map512},
      {"tma2d 64Bx8 box random, 4 warps", 0, G, H, SC, 4, 4, 16, 512, 8, 1, &map512},
  };
  for (auto& p : ps) {
    Timed T;
    uint64_t bytes_cta = p.bytes_per_cta;
    char detail[160] = "";
    if (p.mode == 2) {
      uint64_t vec_mask = p.footprint / 16 - 1;
      uint32_t iters = (uint32_t)(p.bytes_per_cta / 16 / p.ldg_threads);
      iters -= iters % p.ldg_unroll;
      bytes_cta = (uint64_t)iters * 16 * p.ldg_threads;
      auto launch = [&]() {
        const uint4* s4 = reinterpret_cast<const uint4*>(src);
        if (p.ldg_unroll == 8)
          ldg_kernel<8><<<p.grid, p.ldg_threads>>>(s4, vec_mask, iters, sink, cyc);
        else
          ldg_kernel<4><<<p.grid, p.ldg_threads>>>(s4, vec_mask, iters, sink, cyc);
      };
      T = time_kernel(launch, cyc, p.grid, 4, (double)bytes_cta);
      snprintf(detail, sizeof detail, "%d B in flight per thread", 16 * p.ldg_unroll);
    } else {
      PullArgs a;
      a.src = src;
      a.unit_mask = p.footprint / p.cb - 1;
      a.nstages = p.nst;
      a.cps = p.cps;
      a.cb = p.cb;
      a.box_rows = p.box_rows;
      a.random = p.random;
      a.stages_total = (uint32_t)(p.bytes_per_cta / p.warps / ((uint64_t)p.cps * p.cb));
      bytes_cta = (uint64_t)a.stages_total * p.cps * p.cb * p.warps;
      size_t smem = 1024 + (size_t)p.warps * p.nst * p.cps * p.cb;
      CUtensorMap m = p.map ? *p.map : map8k;
      auto launch = [&]() {
        int th = 32 * p.warps;
        if (p.mode == 0)
          pull_kernel<0><<<p.grid, th, smem>>>(m, a, sink, cyc);
        else
          pull_kernel<1><<<p.grid, th, smem>>>(m, a, sink, cyc);
      };
      T = time_kernel(launch, cyc, p.grid, 4, (double)bytes_cta);
      snprintf(detail, sizeof detail, "%u KB in flight per SM",
               p.warps * p.nst * p.cps * p.cb / 1024);
    }
    double gbs = (double)bytes_cta * p.grid / (T.ms * 1e-3) / 1e9;
    double bpc = T.per_sm;
    const char* fp = p.footprint == big ? "HBM 4 GiB" : "L2 16 MB";
    std::string nm = std::string(p.name) + " | " + fp + " | " + std::to_string(p.grid);
    printf("%-40s %-10s grid %4d: %.3f ms, %.0f GB/s, %.1f B/clk/SM (%d SMs, ~%.0f MHz)", p.name,
           fp, p.grid, T.ms, gbs, bpc, T.nsm, T.mhz);
    if (p.cb == 512) {
      double clk_copy = 512.0 / bpc;  // per SM
      printf(", %.1f clk per copy per SM, %.1f clk per copy per issuing warp", clk_copy,
             clk_copy * p.warps);
      snprintf(detail + strlen(detail), sizeof detail - strlen(detail),
               "; %.1f clk/copy/SM, %.1f per warp", clk_copy, clk_copy * p.warps);
      rec("mem", nm, "clk_per_512B_copy_per_sm", clk_copy, "clk");
    }
    printf(" (%s)\n", detail);
    rec("mem", nm, "gbps", gbs, "GB/s", detail);
    rec("mem", nm, "bytes_per_clk_sm", bpc, "B/clk/SM", detail);
    row("| mem | %s | %s | %d | %.0f | %.1f | %s |", p.name, fp, p.grid, gbs, bpc, detail);
  }
  CK(cudaFree(src));
  CK(cudaFree(dst));
  CK(cudaFree(sink));
  CK(cudaFree(cyc));
}

// ---------------------------------------------------------------------------------------------
// Part 4: CUDA-core instruction throughput.  1 CTA x 1024 threads per SM (32 warps), each
// thread runs 8 independent chains, 4 steps per loop iteration; rates per SM from stamp().
// Where ptxas could fold a chain (constant shifts), the second operand comes from another chain
// (y = x[(c+3)%8]).  Reported as thread-instructions per SM-clock (warp-instructions x 32).

enum {
  OP_PRMT,
  OP_LOP3,
  OP_SHF,
  OP_IMAD,
  OP_SHL_PRMT,
  OP_IADD,
  OP_FADD,
  OP_FFMA,
  OP_FMNMX,
  OP_F2FP,
  OP_F2FP_RELU,
  OP_HFMA2_BF16,
  OP_HFMA2,
  OP_I2F,
  OP_SHFL,
  OP_COUNT
};
static const char* kOpName[OP_COUNT] = {
    "PRMT (prmt.b32)",
    "LOP3 (lop3.b32 0x96)",
    "SHF (shl.b32 by register)",
    "IMAD (mad.lo.u32)",
    "IMAD.SHL + PRMT pair (prmt(x<<3,y))",
    "int add (ptxas: IADD3 / IMAD.IADD mix)",
    "FADD (add.f32)",
    "FFMA (fma.rn.f32)",
    "FMNMX (max.f32)",
    "F2FP.BF16.F32.PACK_AB (cvt.rn.bf16x2.f32)",
    "F2FP.BF16.F32.PACK_AB.RELU (cvt.rn.relu.bf16x2)",
    "HFMA2.BF16 (fma.rn.bf16x2)",
    "HFMA2 (fma.rn.f16x2)",
    "I2FP.F32.S32 (cvt.rn.f32.s32)",
    "SHFL.BFLY (shfl.sync.bfly.b32)",
};

template <int OP>
__device__ __forceinline__ uint32_t op_step(uint32_t x, uint32_t y, uint32_t k1, uint32_t k2) {
  if constexpr (OP == OP_PRMT) {
    asm volatile("prmt.b32 %0, %0, %1, %2;" : "+r"(x) : "r"(y), "r"(k1));
  } else if constexpr (OP == OP_LOP3) {
    asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(x) : "r"(y), "r"(k1));
  } else if constexpr (OP == OP_SHF) {
    asm volatile("shl.b32 %0, %0, %1;" : "+r"(x) : "r"(k2));
  } else if constexpr (OP == OP_IMAD) {
    asm volatile("mad.lo.u32 %0, %0, %1, %2;" : "+r"(x) : "r"(k1), "r"(y));
  } else if constexpr (OP == OP_SHL_PRMT) {
    asm volatile("{\n.reg .b32 t;\nshl.b32 t, %0, 3;\nprmt.b32 %0, t, %1, %2;\n}"
                 : "+r"(x)
                 : "r"(y), "r"(k1));
  } else if constexpr (OP == OP_IADD) {
    asm volatile("add.u32 %0, %0, %1;" : "+r"(x) : "r"(y));
  } else if constexpr (OP == OP_FADD) {
    asm volatile("add.f32 %0, %0, %1;" : "+r"(x) : "r"(k1));
  } else if constexpr (OP == OP_FFMA) {
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+r"(x) : "r"(k1), "r"(k2));
  } else if constexpr (OP == OP_FMNMX) {
    asm volatile("max.f32 %0, %0, %1;" : "+r"(x) : "r"(y));
  } else if constexpr (OP == OP_F2FP) {
    asm volatile("cvt.rn.bf16x2.f32 %0, %0, %1;" : "+r"(x) : "r"(y));
  } else if constexpr (OP == OP_F2FP_RELU) {
    asm volatile("cvt.rn.relu.bf16x2.f32 %0, %0, %1;" : "+r"(x) : "r"(y));
  } else if constexpr (OP == OP_HFMA2_BF16) {
    asm volatile("fma.rn.bf16x2 %0, %0, %1, %2;" : "+r"(x) : "r"(k1), "r"(k2));
  } else if constexpr (OP == OP_HFMA2) {
    asm volatile("fma.rn.f16x2 %0, %0, %1, %2;" : "+r"(x) : "r"(k1), "r"(k2));
  } else if constexpr (OP == OP_I2F) {
    asm volatile("cvt.rn.f32.s32 %0, %0;" : "+r"(x));
  } else if constexpr (OP == OP_SHFL) {
    asm volatile("shfl.sync.bfly.b32 %0, %0, 1, 0x1f, 0xffffffff;" : "+r"(x));
  }
  return x;
}

template <int OP>
__global__ void __launch_bounds__(1024, 1)
    instr_kernel(int iters, uint32_t seed, uint32_t* sink, long long* cyc) {
  uint32_t x[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    // floats in [1, 2) or their bf16/f16 pairs: finite, no denormals
    uint32_t h = hash32(threadIdx.x * 8 + c + seed);
    x[c] = (h & 0x007FFFFFu) | 0x3F800000u;
    if (OP == OP_HFMA2_BF16) x[c] = (h & 0x007F007Fu) | 0x3F803F80u;
    if (OP == OP_HFMA2) x[c] = (h & 0x03FF03FFu) | 0x3C003C00u;
  }
  uint32_t k1 = hash32(seed + 1), k2 = hash32(seed + 2) & 7;
  if (OP == OP_FADD || OP == OP_FFMA) {
    k1 = 0x3F7FFFF0u;
    k2 = 0x3A000000u;
  }
  if (OP == OP_HFMA2_BF16) {
    k1 = 0x3F7F3F7Fu;
    k2 = 0x3A003A00u;
  }
  if (OP == OP_HFMA2) {
    k1 = 0x3BFF3BFFu;
    k2 = 0x14001400u;
  }
  __syncthreads();
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int c = 0; c < 8; ++c) x[c] = op_step<OP>(x[c], x[(c + 3) & 7], k1, k2);
  }
  __syncthreads();
  long long t1 = clock64();
  uint32_t s = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) s ^= x[c];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
  stamp(cyc, t0, t1);
}

template <int OP>
static void run_instr(uint32_t* sink, long long* cyc) {
  const int grid = g_sms, threads = 1024, iters = 8192;
  auto launch = [&]() { instr_kernel<OP><<<grid, threads>>>(iters, 12345u + OP, sink, cyc); };
  Timed T = time_kernel(launch, cyc, grid, 3, (double)threads * iters * 32);
  double per_clk = T.per_sm;
  double mhz = T.mhz;
  printf("%-50s %.3f ms, %.1f thread-ops/clk/SM (%.2f warp-instr/clk/SM), ~%.0f MHz\n", kOpName[OP],
         T.ms, per_clk, per_clk / 32, mhz);
  rec("instr", kOpName[OP], "thread_ops_per_clk_sm", per_clk, "ops/clk/SM");
  row("| instr | %s | %.1f | %.2f |", kOpName[OP], per_clk, per_clk / 32);
}

template <int... OPS>
static void run_all_instr(std::integer_sequence<int, OPS...>, uint32_t* sink, long long* cyc) {
  (run_instr<OPS>(sink, cyc), ...);
}

static void part_instr() {
  printf("== instr: 1024 threads per SM, 8 chains per thread ==\n");
  uint32_t* sink;
  long long* cyc;
  CK(cudaMalloc(&sink, (size_t)g_sms * 1024 * 4));
  CK(cudaMalloc(&cyc, (size_t)3 * g_sms * 8));
  row("| instr | instruction | thread-ops/clk/SM | warp-instr/clk/SM |");
  row("|---|---|---|---|");
  run_all_instr(std::make_integer_sequence<int, OP_COUNT>{}, sink, cyc);
  CK(cudaFree(sink));
  CK(cudaFree(cyc));
}

// ---------------------------------------------------------------------------------------------
// Part 5: clusters.  Barrier latency: ITERS x (barrier.cluster.arrive.release +
// barrier.cluster.wait.acquire) by 128 threads per CTA.  DSMEM: 1024 threads per CTA read a
// 64 KB buffer of the next CTA in the cluster with ld.shared::cluster.v4 (4 loads in flight per
// thread); the local variant reads the CTA's own buffer with ld.shared.v4.

__global__ void __launch_bounds__(128) cluster_bar_kernel(int iters, int relaxed, long long* cyc) {
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);
  long long t0 = clock64();
  if (relaxed) {
    for (int i = 0; i < iters; ++i)
      asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::
                       : "memory");
  } else {
    for (int i = 0; i < iters; ++i) {
      ptx::barrier_cluster_arrive(ptx::sem_release);
      ptx::barrier_cluster_wait(ptx::sem_acquire);
    }
  }
  long long t1 = clock64();
  if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}

__global__ void __launch_bounds__(1024, 1)
    dsmem_kernel(int iters, int remote, uint32_t* sink, long long* cyc) {
  extern __shared__ uint4 dbuf[];  // 64 KB
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) {
    uint32_t h = hash32(i + blockIdx.x * 4096u);
    dbuf[i] = make_uint4(h, h ^ 1, h ^ 2, h ^ 3);
  }
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);
  uint32_t rank, nrank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nrank));
  uint32_t peer = (rank + 1) % nrank, base = smem_u32(dbuf), rbase;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbase) : "r"(base), "r"(peer));
  uint32_t acc = 0;
  __syncthreads();
  long long t0 = clock64();
  for (int i = 0; i < iters; ++i) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      uint32_t idx = (threadIdx.x + (uint32_t)(i * 4 + u) * blockDim.x) & 4095u;
      if (remote)
        asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "r"(rbase + idx * 16));
      else
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "r"(base + idx * 16));
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  __syncthreads();
  long long t1 = clock64();
  // peers may still read this CTA's buffer: no exit before the whole cluster is done
  ptx::barrier_cluster_arrive(ptx::sem_release);
  ptx::barrier_cluster_wait(ptx::sem_acquire);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}

template <typename... Args>
static cudaError_t launch_cluster(void (*fn)(Args...), int grid, int block, size_t smem, int cs,
                                  Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cs;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, fn, args...);
}

static void part_cluster() {
  printf("== cluster ==\n");
  long long* cyc;
  uint32_t* sink;
  CK(cudaMalloc(&cyc, 4096 * 8));
  CK(cudaMalloc(&sink, (size_t)g_sms * 1024 * 4));
  CK(cudaFuncSetAttribute(cluster_bar_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CK(cudaFuncSetAttribute(dsmem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  row("| cluster | test | cluster size | value | unit |");
  row("|---|---|---|---|---|");
  for (int relaxed : {0, 1})
    for (int cs : {2, 4, 8, 16}) {
      const int iters = 20000, grid = cs * std::max(1, (g_sms / cs) / 2);
      std::vector<double> per;
      bool ok = true;
      for (int rep = 0; rep < 4 && ok; ++rep) {
        cudaError_t e = launch_cluster(cluster_bar_kernel, grid, 128, 0, cs, iters, relaxed, cyc);
        if (e != cudaSuccess) {
          printf("cluster size %d: launch failed: %s\n", cs, cudaGetErrorString(e));
          ok = false;
          break;
        }
        CK(cudaDeviceSynchronize());
        std::vector<long long> cy(grid);
        CK(cudaMemcpy(cy.data(), cyc, grid * 8, cudaMemcpyDeviceToHost));
        std::vector<double> d(cy.begin(), cy.end());
        if (rep) per.push_back(median(d) / iters);
      }
      const char* bn =
          relaxed ? "barrier arrive.relaxed+wait" : "barrier arrive.release+wait.acquire";
      if (!ok) {
        row("| cluster | %s | %d | launch failed | - |", bn, cs);
        continue;
      }
      double c = median(per);
      printf("%s, size %2d, %d CTAs: %.0f clk per arrive+wait\n", bn, cs, grid, c);
      rec("cluster",
          std::string(relaxed ? "barrier_relaxed_cs" : "barrier_cs") + std::to_string(cs),
          "clk_per_barrier", c, "clk");
      row("| cluster | %s | %d | %.0f | clk |", bn, cs, c);
    }
  for (int cs : {2, 4})
    for (int remote : {1, 0}) {
      const int iters = 4096, grid = cs * (g_sms / cs);
      std::vector<double> bpc;
      for (int rep = 0; rep < 4; ++rep) {
        CK(launch_cluster(dsmem_kernel, grid, 1024, (size_t)65536, cs, iters, remote, sink, cyc));
        CKL();
        CK(cudaDeviceSynchronize());
        std::vector<long long> cy(grid);
        CK(cudaMemcpy(cy.data(), cyc, grid * 8, cudaMemcpyDeviceToHost));
        std::vector<double> d(cy.begin(), cy.end());
        if (rep) bpc.push_back(1024.0 * iters * 4 * 16 / median(d));
      }
      double b = median(bpc);
      const char* nm = remote ? "DSMEM read (peer CTA)" : "local smem read";
      printf("%s, cluster %d: %.1f B/clk/SM\n", nm, cs, b);
      rec("cluster",
          std::string(remote ? "dsmem_read_cs" : "local_smem_read_cs") + std::to_string(cs),
          "bytes_per_clk_sm", b, "B/clk/SM");
      row("| cluster | %s | %d | %.1f | B/clk/SM |", nm, cs, b);
    }
  CK(cudaFree(cyc));
  CK(cudaFree(sink));
}

// ---------------------------------------------------------------------------------------------

// CPU-only self-test of the exactness harness: layout maps, the e4m3 table, the generator, and
// the checker (the reference itself must pass; a perturbed copy must fail where perturbed).
static int host_selftest(int tiles, uint64_t seed) {
  host_layout_checks();
  build_enc();
  ExactData D;
  gen_exact(D, tiles, seed);
  std::vector<int64_t> r8;
  std::vector<int32_t> ri;
  ref_exact(D, r8, ri);
  exact_coverage(D, r8);
  size_t n = (size_t)tiles * 4 * 2048;
  std::vector<uint32_t> f(n), fi(n), fc((size_t)tiles * 2048);
  int64_t maxabs = 0, maxq = 0;
  uint64_t odd_quanta = 0, big = 0;
  for (size_t i = 0; i < n; ++i) {
    float v = (float)std::ldexp((double)r8[i], -18);
    memcpy(&f[i], &v, 4);
    fi[i] = (uint32_t)ri[i];
    maxabs = std::max(maxabs, r8[i] < 0 ? -r8[i] : r8[i]);
    // quanta of the group sum relative to its placement: |sum| / 2^(sA+sB-2)
    size_t t = i / 8192, g = (i / 2048) % 4, m = (i / 32) % 64, c = i % 32;
    int sh = D.pA[(t * 64 + m) * 4 + g] + D.pB[(t * 32 + c) * 4 + g] - 2 + 18;
    int64_t q = r8[i] / ((int64_t)1 << sh);
    if (r8[i] % ((int64_t)1 << sh)) {
      printf("reference not a multiple of its quantum\n");
      return 5;
    }
    maxq = std::max(maxq, q < 0 ? -q : q);
    odd_quanta += (q & 1) != 0;
    big += (q < 0 ? -q : q) >= 4096;
  }
  for (size_t t = 0; t < (size_t)tiles; ++t)
    for (int i = 0; i < 2048; ++i) {
      int64_t s = 0;
      for (int g = 0; g < 4; ++g) s += r8[(t * 4 + g) * 2048 + i];
      float v = (float)std::ldexp((double)s, -18);
      memcpy(&fc[t * 2048 + i], &v, 4);
    }
  printf(
      "generator: max |group sum| %lld quanta of 0.25*2^(sA+sB) (bound 4608), %llu odd, %llu"
      " >= 4096 quanta\n",
      (long long)maxq, (unsigned long long)odd_quanta, (unsigned long long)big);
  ExactStats a = check_exact(D, f, false, false, r8, ri, "self-e4m3");
  ExactStats b = check_exact(D, fi, true, false, r8, ri, "self-s8");
  ExactStats c = check_exact(D, fc, false, true, r8, ri, "self-chain");
  for (size_t i = 0; i < n; i += 1000) f[i] ^= 1;  // one ulp off every 1000th
  ExactStats d = check_exact(D, f, false, false, r8, ri, "perturbed");
  printf(
      "self-test: e4m3 %llu/%llu bad, s8 %llu bad, chain %llu bad, perturbed %llu bad (want %zu)"
      "\n",
      (unsigned long long)a.bad, (unsigned long long)a.total, (unsigned long long)b.bad,
      (unsigned long long)c.bad, (unsigned long long)d.bad, (n + 999) / 1000);
  bool ok = a.bad == 0 && b.bad == 0 && c.bad == 0 && d.bad == (n + 999) / 1000 && maxq <= 4608;
  printf("host self-test: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 6;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: %s exact|tensor|mem|instr|cluster|all [--csv F] [--tiles N] "
            "[--seed S]\n",
            argv[0]);
    return 1;
  }
  std::string part = argv[1];
  int tiles = 3072;
  uint64_t seed = 20261201;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--csv")
      g_csv = fopen(argv[i + 1], "a");
    else if (k == "--tiles")
      tiles = atoi(argv[i + 1]);
    else if (k == "--seed")
      seed = strtoull(argv[i + 1], nullptr, 10);
    else {
      fprintf(stderr, "unknown option %s\n", k.c_str());
      return 1;
    }
  }
  if (part == "hostcheck") return host_selftest(tiles, seed);
  CK(cudaSetDevice(0));
  CK(cudaGetDeviceProperties(&g_prop, 0));
  g_sms = g_prop.multiProcessorCount;
  int clk_khz = 0;
  CK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, 0));
  printf("device: %s, cc %d.%d, %d SMs, L2 %d MB, smem/block opt-in %zu KB, max clock %d MHz\n",
         g_prop.name, g_prop.major, g_prop.minor, g_sms, g_prop.l2CacheSize >> 20,
         g_prop.sharedMemPerBlockOptin >> 10, clk_khz / 1000);
  if (g_prop.major != 9) {
    fprintf(stderr, "needs a Hopper GPU (sm_90)\n");
    return 1;
  }
  int rc = 0;
  bool all = part == "all";
  if (all || part == "exact") rc |= part_exact(tiles, seed) ? 8 : 0;
  if (all || part == "tensor") part_tensor();
  if (all || part == "mem") part_mem();
  if (all || part == "instr") part_instr();
  if (all || part == "cluster") part_cluster();
  CK(cudaDeviceSynchronize());
  print_table();
  if (g_csv) fclose(g_csv);
  return rc;
}
