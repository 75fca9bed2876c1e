// sm90.cuh - the Hopper (sm_90a) primitives the v2 logits kernels build on, hand-written only
// where the CUDA toolkit has none: wgmma (fence, commit, wait, the e4m3 m64nNk32 SS and RS
// forms) and its shared-memory descriptor, setmaxnreg, elect.sync; on the host, 2-D tensor
// maps through the runtime's driver entry point (no libcuda link). mbarrier, cp.async.bulk
// (.tensor) and fence.proxy.async come from CCCL's cuda::ptx (<cuda/ptx>, in the toolkit);
// mbar_wait is the one helper over it (a bounded wait). The layout rules (descriptor bits,
// swizzle, fragment maps, widening) are C functions in sm90_layout.h, tested on the CPU.
//
// Each device wrapper names its PTX ISA (CUDA 13.0) instruction. They exist only in the
// sm_90a device pass (IXL_SM90_DEVICE): wgmma and setmaxnreg are not in plain sm_90 nor in
// the compute_80 build the Makefile also makes, so a kernel using them wraps its body in
// `#if IXL_SM90_DEVICE` (and traps otherwise: IXL_SM90_TRAP_ELSEWHERE). Every wrapper must be
// called by all threads of a warpgroup (wgmma, setmaxnreg) or a warp (elect_one) together.
#ifndef IXL_CUDA_SM90_CUH
#define IXL_CUDA_SM90_CUH

#include <cuda.h> // CUtensorMap and its enums only: types, no libcuda symbol
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda/ptx>

#include "cuda/sm90_layout.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define IXL_SM90_DEVICE 1
#else
#define IXL_SM90_DEVICE 0
#endif

namespace ixl {
namespace sm90 {

namespace ptx = cuda::ptx;

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

#if IXL_SM90_DEVICE

// ------------------------------------------------------------------ descriptor
// The wgmma shared-memory matrix descriptor of the tile at `smem` (PTX ISA "Matrix Descriptor
// Format"; the bits and the LBO/SBO of each layout: sm90_layout.h).
__device__ __forceinline__ uint64_t wgmma_desc(const void *smem, int swizzle, uint32_t lbo,
                                               uint32_t sbo) {
  return ixl_sm90_desc_bits(smem_u32(smem), swizzle, lbo, sbo);
}

// ------------------------------------------------------------------ wgmma ordering
// wgmma.fence: orders this thread's register writes (accumulators, RS A operands) before the
// wgmma that reads them; needed before the first wgmma of a batch and after touching them.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
// wgmma.commit_group: closes the batch of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// wgmma.wait_group N: waits until at most N committed batches are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// No PTX: an empty asm that "reads and writes" each register, so the compiler keeps accesses
// to accumulators and A registers on their side of a wgmma issue or wait (a wgmma reads and
// writes them asynchronously, which the compiler cannot see).
template <int n>
__device__ __forceinline__ void fence_operand(float (&d)[n]) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int n>
__device__ __forceinline__ void fence_operand(uint32_t (&d)[n]) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// ------------------------------------------------------------------ wgmma e4m3
// wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3 (PTX ISA "wgmma.mma_async"): D[64][N]
// (f32, N/2 registers per thread, layout ixl_sm90_acc_rc) = A[64][32] * B[N][32]^T
// (+ D when scale_d != 0), both operands K-major. SS: A and B by descriptor; RS: A in four
// registers per thread (layout ixl_sm90_a8_rk), B by descriptor. scale_d is a predicate set
// from a register, so scale_d == 0 reads no accumulator (no zeroing needed). imm-scale-a and
// imm-scale-b are 1 (no negation).
#define IXL_SM90_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define IXL_SM90_F16(i) IXL_SM90_F4(i), IXL_SM90_F4(i + 4), IXL_SM90_F4(i + 8), IXL_SM90_F4(i + 12)
#define IXL_SM90_D16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define IXL_SM90_D32                                                                           \
  IXL_SM90_D16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, " \
               "%31"
#define IXL_SM90_D64                                                                           \
  IXL_SM90_D32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, " \
               "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "   \
               "%62, %63"
#define IXL_SM90_MMA(shape) "wgmma.mma_async.sync.aligned." shape ".f32.e4m3.e4m3 "
#define IXL_SM90_PRED(n) "{\n.reg .pred p;\nsetp.ne.b32 p, %" #n ", 0;\n"
// The asm text: PRED sets p from operand n (scale_d), then "wgmma... {d...}, a, b-desc, p, 1, 1;".

__device__ __forceinline__ void wgmma_m64n32k32_e4m3_ss(float (&d)[16], uint64_t da, uint64_t db,
                                                        int scale_d) {
  asm volatile(IXL_SM90_PRED(18) IXL_SM90_MMA("m64n32k32")
               "{" IXL_SM90_D16 "}, %16, %17, p, 1, 1;\n}\n"
               : IXL_SM90_F16(0)
               : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_m64n64k32_e4m3_ss(float (&d)[32], uint64_t da, uint64_t db,
                                                        int scale_d) {
  asm volatile(IXL_SM90_PRED(34) IXL_SM90_MMA("m64n64k32")
               "{" IXL_SM90_D32 "}, %32, %33, p, 1, 1;\n}\n"
               : IXL_SM90_F16(0), IXL_SM90_F16(16)
               : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_m64n128k32_e4m3_ss(float (&d)[64], uint64_t da,
                                                         uint64_t db, int scale_d) {
  asm volatile(IXL_SM90_PRED(66) IXL_SM90_MMA("m64n128k32")                                //
               "{" IXL_SM90_D64 "}, %64, %65, p, 1, 1;\n}\n"
               : IXL_SM90_F16(0), IXL_SM90_F16(16), IXL_SM90_F16(32), IXL_SM90_F16(48)
               : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_m64n32k32_e4m3_rs(float (&d)[16], const uint32_t (&a)[4],
                                                        uint64_t db, int scale_d) {
  asm volatile(IXL_SM90_PRED(21) IXL_SM90_MMA("m64n32k32")
               "{" IXL_SM90_D16 "}, {%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
               : IXL_SM90_F16(0)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_m64n64k32_e4m3_rs(float (&d)[32], const uint32_t (&a)[4],
                                                        uint64_t db, int scale_d) {
  asm volatile(IXL_SM90_PRED(37) IXL_SM90_MMA("m64n64k32")
               "{" IXL_SM90_D32 "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
               : IXL_SM90_F16(0), IXL_SM90_F16(16)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_m64n128k32_e4m3_rs(float (&d)[64], const uint32_t (&a)[4],
                                                         uint64_t db, int scale_d) {
  asm volatile(IXL_SM90_PRED(69) IXL_SM90_MMA("m64n128k32")                                //
               "{" IXL_SM90_D64 "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
               : IXL_SM90_F16(0), IXL_SM90_F16(16), IXL_SM90_F16(32), IXL_SM90_F16(48)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
#undef IXL_SM90_F4
#undef IXL_SM90_F16
#undef IXL_SM90_D16
#undef IXL_SM90_D32
#undef IXL_SM90_D64
#undef IXL_SM90_MMA
#undef IXL_SM90_PRED

// The same, by N (32, 64 or 128), for kernels templated on the tile width.
template <int N>
__device__ __forceinline__ void wgmma_e4m3_ss(float (&d)[N / 2], uint64_t da, uint64_t db,
                                              int scale_d) {
  static_assert(N == 32 || N == 64 || N == 128, "wgmma e4m3: N is 32, 64 or 128 here");
  if constexpr (N == 32) wgmma_m64n32k32_e4m3_ss(d, da, db, scale_d);
  else if constexpr (N == 64) wgmma_m64n64k32_e4m3_ss(d, da, db, scale_d);
  else wgmma_m64n128k32_e4m3_ss(d, da, db, scale_d);
}
template <int N>
__device__ __forceinline__ void wgmma_e4m3_rs(float (&d)[N / 2], const uint32_t (&a)[4],
                                              uint64_t db, int scale_d) {
  static_assert(N == 32 || N == 64 || N == 128, "wgmma e4m3: N is 32, 64 or 128 here");
  if constexpr (N == 32) wgmma_m64n32k32_e4m3_rs(d, a, db, scale_d);
  else if constexpr (N == 64) wgmma_m64n64k32_e4m3_rs(d, a, db, scale_d);
  else wgmma_m64n128k32_e4m3_rs(d, a, db, scale_d);
}

// ------------------------------------------------------------------ registers, election
// setmaxnreg.inc / .dec.sync.aligned.u32 R (PTX ISA "setmaxnreg"): a warpgroup's per-thread
// register count becomes R (a multiple of 8 in 24..256). inc blocks until the CTA's pool has
// the registers; the kernel needs a register cap at entry (__launch_bounds__(threads, 1)) and
// each warpgroup's role in its own branch (else ptxas warns C7508).
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg: a multiple of 8 in 24..256");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg: a multiple of 8 in 24..256");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
// elect.sync (PTX ISA "elect.sync"): true in exactly one lane of the (fully active) warp, the
// same lane for every caller of one call; all 32 lanes must call it.
__device__ __forceinline__ bool elect_one() {
  uint32_t is = 0;
  asm volatile("{\n.reg .pred p;\n.reg .b32 r;\nelect.sync r|p, 0xffffffff;\n"
               "selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(is));
  return is != 0;
}

// ------------------------------------------------------------------ mbarrier wait
// ptx::mbarrier_try_wait_parity (mbarrier.try_wait.parity, acquire.cta) in a loop bounded by
// clock64: a lost arrival or a wrong expect_tx count traps after about 2 s instead of hanging
// the GPU for the rest of the run. Silent by default: a printf is a function call, which costs a
// stack frame and makes ptxas serialize every wgmma of the kernel (C7510); build with
// -DIXL_SM90_WAIT_PRINT to name the block and thread first.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  if (ptx::mbarrier_try_wait_parity(bar, parity)) return;
  const long long t0 = clock64();
  while (!ptx::mbarrier_try_wait_parity(bar, parity)) {
    // ~30 s at the H200's clock: far past any real wait, yet bounded; compute-sanitizer's
    // racecheck slows a wait by orders of magnitude, and a 2 s bound trapped under it
    if (clock64() - t0 > 60000000000LL) {
#ifdef IXL_SM90_WAIT_PRINT
      printf("ixl::sm90::mbar_wait: timeout, block %d thread %d parity %u\n", (int)blockIdx.x,
             (int)threadIdx.x, parity);
#endif
      __trap();
    }
  }
}

#endif // IXL_SM90_DEVICE

// A kernel's body outside the sm_90a device pass: trap if it is ever launched there (the
// host picks such kernels only on sm_90 devices; the sm_80 image never runs them).
#if defined(__CUDA_ARCH__) && !IXL_SM90_DEVICE
#define IXL_SM90_TRAP_ELSEWHERE() __trap()
#else
#define IXL_SM90_TRAP_ELSEWHERE() ((void)0)
#endif

// ------------------------------------------------------------------ host: tensor maps
// cuTensorMapEncodeTiled, a driver API, through cudaGetDriverEntryPointByVersion(..., 12000)
// (the older cudaGetDriverEntryPoint is deprecated in CUDA 13), looked up once; NULL with a
// message when the driver has none.
static inline PFN_cuTensorMapEncodeTiled_v12000 tma_encode_fn(char *why, size_t why_len) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    cudaGetLastError(); // a failed lookup leaves no error behind for the next launch check
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  if (!fn && why) snprintf(why, why_len, "cuTensorMapEncodeTiled: not in this driver");
  return fn;
}

// A 2-D tiled tensor map over a row-major array [rows][cols] of 1-, 2- or 4-byte elements at
// `base` (device memory, 16-B aligned), consecutive rows row_stride bytes apart (a multiple of
// 16), boxes of box_rows x box_cols (each 1..256; box_cols * element bytes a multiple of 16
// and, when swizzled, at most the swizzle span: 32, 64 or 128 B). A box lands in shared memory
// row-major and swizzled as ixl_sm90_swizzle says, OOB elements zero-filled; the mbarrier's
// expect_tx counts the whole box, OOB included. Returns 0, or -1 with a message in why.
static inline int tma_map_2d(CUtensorMap *map, const void *base, CUtensorMapDataType dtype,
                             uint64_t cols, uint64_t rows, uint64_t row_stride,
                             uint32_t box_cols, uint32_t box_rows, CUtensorMapSwizzle swizzle,
                             char *why, size_t why_len) {
  uint32_t esz = 0;
  switch (dtype) {
  case CU_TENSOR_MAP_DATA_TYPE_UINT8: esz = 1; break;
  case CU_TENSOR_MAP_DATA_TYPE_UINT16:
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
  case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: esz = 2; break;
  case CU_TENSOR_MAP_DATA_TYPE_UINT32:
  case CU_TENSOR_MAP_DATA_TYPE_INT32:
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: esz = 4; break;
  default: break;
  }
  const uint32_t span = swizzle == CU_TENSOR_MAP_SWIZZLE_128B  ? 128
                        : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                        : swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32
                                                               : 0;
  const char *bad = !esz                                       ? "element type not 1, 2 or 4 B"
                    : ((uintptr_t)base & 15)                   ? "base not 16-B aligned"
                    : row_stride % 16 || row_stride >= (1ull << 40) ? "row stride"
                    : cols == 0 || rows == 0 || cols > (1ull << 32) || rows > (1ull << 32)
                        ? "extent"
                    : box_cols < 1 || box_cols > 256 || box_rows < 1 || box_rows > 256 ? "box"
                    : (box_cols * esz) % 16                    ? "box row not a multiple of 16 B"
                    : span && box_cols * esz > span            ? "box row wider than the swizzle"
                    : row_stride < cols * esz                  ? "row stride below the row"
                                                               : nullptr;
  if (bad) {
    if (why) snprintf(why, why_len, "tma_map_2d: %s", bad);
    return -1;
  }
  PFN_cuTensorMapEncodeTiled_v12000 encode = tma_encode_fn(why, why_len);
  if (!encode) return -1;
  memset(map, 0, sizeof *map);
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {row_stride};
  cuuint32_t box[2] = {box_cols, box_rows};
  cuuint32_t estr[2] = {1, 1};
  const CUresult r =
      encode(map, dtype, 2, const_cast<void *>(base), dims, strides, box, estr,
             CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    if (why) snprintf(why, why_len, "cuTensorMapEncodeTiled: CUresult %d", (int)r);
    return -1;
  }
  return 0;
}

} // namespace sm90
} // namespace ixl

#endif
