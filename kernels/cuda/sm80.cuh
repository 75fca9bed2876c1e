// sm80.cuh - Ampere-class (sm_80+) primitives of the logits engine v1: cp.async copies, the
// f16 mma.sync m16n8k16 and its fragments, and widening e2m1/e4m3 codes to f16 pairs.
#ifndef IXL_CUDA_SM80_CUH
#define IXL_CUDA_SM80_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define IXL_LG_CVT_E4M3 1 // cvt.rn.f16x2.e4m3x2 (sm_89+)
#else
#define IXL_LG_CVT_E4M3 0
#endif

namespace ixl {
namespace sm80 {

__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// e2m1 -> f16 through a byte table: the f16 high bytes of the magnitudes {0, .5, 1, 1.5, 2,
// 3, 4, 6} (the low bytes are 0), with d (|d| <= kFold) added to the exponent of every nonzero
// entry, so that the values come out times 2^d, exactly. No byte carries or borrows: the
// entries stay within [0x04, 0x7A].
__device__ __forceinline__ void e2m1_table(int d, uint32_t &l0, uint32_t &l1) {
  l0 = 0x3E3C3800u + (uint32_t)(d * 4 * 0x01010100);
  l1 = 0x46444240u + (uint32_t)(d * 4 * 0x01010101);
}
// Four e2m1 codes (the low 16 bits of x, element i in nibble i) -> four f16 values as two
// f16x2 words (elements 0, 1 and 2, 3); the sign is bit 15.
__device__ __forceinline__ void e2m1x4_to_f16(uint32_t x, uint32_t l0, uint32_t l1, uint32_t &lo,
                                              uint32_t &hi) {
  const uint32_t v =
      __byte_perm(l0, l1, x & 0x7777u) | __byte_perm(0x8000u, 0u, (x >> 3) & 0x1111u);
  lo = __byte_perm(v, 0u, 0x1404u); // [0, v0, 0, v1]
  hi = __byte_perm(v, 0u, 0x3424u); // [0, v2, 0, v3]
}

// Four e4m3 bytes -> four f16 values (two f16x2 words). sm_89+: the exact values, by the
// hardware conversion. sm_80: each value times 2^-8, exactly: the e4m3 bit pattern placed
// into f16's exponent/mantissa fields (both formats' subnormals line up). Either way the NaN
// codes (0x7F, 0xFF) become NaNs, so a NaN propagates as on the CPU.
#if IXL_LG_CVT_E4M3
constexpr int kE4m3Sh = 0;
#else
constexpr int kE4m3Sh = -16; // products of two values carry 2^-16
#endif
__device__ __forceinline__ void e4m3x4_to_f16(uint32_t r, uint32_t &lo, uint32_t &hi) {
#if IXL_LG_CVT_E4M3
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n"
      " cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(r));
#else
  const uint32_t a = __byte_perm(r, 0u, 0x4140u), b = __byte_perm(r, 0u, 0x4342u);
  const uint32_t nan = __vcmpeq4(r & 0x7F7F7F7Fu, 0x7F7F7F7Fu) & 0x01010101u; // 1 per NaN byte
  lo =
      ((a & 0x007F007Fu) << 7) | ((a & 0x00800080u) << 8) | __byte_perm(nan, 0u, 0x4140u) * 0x7E00u;
  hi =
      ((b & 0x007F007Fu) << 7) | ((b & 0x00800080u) << 8) | __byte_perm(nan, 0u, 0x4342u) * 0x7E00u;
#endif
}

// d += A (16 x 16 f16, 4 registers) x B (16 x 8 f16, 2 registers), fp32 accumulation.
__device__ __forceinline__ void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                        uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One 32-element group: d += Q (16 rows) . K (8 positions). The k order within the group is
// permuted the same way in A and B: thread t4 holds elements 8*t4 .. 8*t4 + 7 of the group,
// as [e0 e1 | e2 e3 | e4 e5 | e6 e7]; the first k16 MMA takes e0..e3, the second e4..e7. So
// a thread's B operand of a group is one 16-byte load, and every product appears once.
// a[h][j]: row gid + 8h, word j; b: the 4 words of position gid.
__device__ __forceinline__ void mma_group(float (&d)[4], const uint32_t (&a)[2][4], uint4 b) {
  mma_f16(d, a[0][0], a[1][0], a[0][1], a[1][1], b.x, b.y);
  mma_f16(d, a[0][2], a[1][2], a[0][3], a[1][3], b.z, b.w);
}

} // namespace sm80
} // namespace ixl

#endif
