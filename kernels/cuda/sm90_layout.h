/* sm90_layout.h - the pure layout rules of Hopper's wgmma, in C, for the host and the device:
 * the shared-memory matrix descriptor's bits, the swizzle XOR, the K-major tile layouts the
 * descriptors describe, which thread and register of a warpgroup hold which (row, col) of an
 * m64nNk32 accumulator and of an RS A operand (8-bit types), and the e2m1 -> e4m3 widening with
 * the k permutation it implies. kernels/cuda/sm90.cuh uses them on the device;
 * tests/c/test_sm90_layout.c checks them on the CPU (CUDA=0 too), so a layout bug dies
 * before a GPU visit. References are to the PTX ISA (CUDA 13.0), section "Asynchronous
 * Warpgroup Level Matrix Multiply-Accumulate Instructions" (wgmma): "Matrix Descriptor
 * Format", "Shared Memory Matrix Layout", "Register Fragments". */
#ifndef IXL_CUDA_SM90_LAYOUT_H
#define IXL_CUDA_SM90_LAYOUT_H

#include <stdint.h>

#ifdef __CUDACC__
#define IXL_SM90_FN static __host__ __device__ __forceinline__
#else
#define IXL_SM90_FN static inline
#endif

/* wgmma's swizzle modes, as the descriptor's bits 62-63 encode them. */
enum {
  IXL_SM90_SWIZZLE_NONE = 0,
  IXL_SM90_SWIZZLE_128B = 1,
  IXL_SM90_SWIZZLE_64B = 2,
  IXL_SM90_SWIZZLE_32B = 3
};

/* ---------------------------------------------------------------- descriptor */
/* The 64-bit shared-memory matrix descriptor ("Matrix Descriptor Format"): bits 0-13 the start
 * address >> 4, 16-29 the leading-dimension byte offset (LBO) >> 4, 32-45 the stride byte
 * offset (SBO) >> 4, 49-51 the base offset (0: every tile here starts on its swizzle
 * pattern's period, 1024 B for 128B), 62-63 the swizzle mode. Addresses are shared-window
 * byte addresses (< 256 KB: 18 bits, 16-B aligned). For K-major 8-bit tiles:
 * - 128B swizzle: rows of 128 B, SBO = 1024 (8-row atoms), LBO unused (16 by convention);
 *   k32 group g starts 32 g bytes into the row (the start address moves inside the atom);
 * - no swizzle: core matrices of 8 rows x 16 B; LBO = the distance of the two 16-B k halves,
 *   SBO = the distance of consecutive 8-row groups (ixl_sm90_tile_off layout NONE). */
IXL_SM90_FN uint64_t ixl_sm90_desc_bits(uint32_t saddr, int swizzle, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) |
         ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32) | ((uint64_t)(swizzle & 3) << 62);
}

/* ---------------------------------------------------------------- swizzle */
/* The byte offset at which a swizzled tile stores the byte whose unswizzled (row-major)
 * offset is `off`, relative to a base aligned to the pattern's period ("Shared Memory Matrix
 * Layout"; TMA's CU_TENSOR_MAP_SWIZZLE_* write the same): the 16-byte chunk index XOR the row
 * within the period. 128B: bits 4-6 ^= bits 7-9 (period 1024 B); 64B: bits 4-5 ^= bits 7-8
 * (512 B); 32B: bit 4 ^= bit 7 (256 B); none: unchanged. An involution: applying it twice
 * gives `off` back. */
IXL_SM90_FN uint32_t ixl_sm90_swizzle(uint32_t off, int swizzle) {
  switch (swizzle) {
  case IXL_SM90_SWIZZLE_128B: return off ^ (((off >> 7) & 7u) << 4);
  case IXL_SM90_SWIZZLE_64B: return off ^ (((off >> 7) & 3u) << 4);
  case IXL_SM90_SWIZZLE_32B: return off ^ (((off >> 7) & 1u) << 4);
  default: return off;
  }
}

/* ---------------------------------------------------------------- K-major tiles */
/* An R-row tile of 8-bit operands, 128 bytes (four k32 groups) per row, K-major (fp8 and int8
 * wgmma take only K-major operands). The byte offset of byte `kb` (0..127) of row `r`:
 * - IXL_SM90_SWIZZLE_128B: row-major rows of 128 B, swizzled (TMA's SWIZZLE_128B box of
 *   128 B x R rows lands exactly so); descriptor of group g: start + 32 g, SBO 1024;
 * - IXL_SM90_SWIZZLE_NONE: each k32 group a block of R x 32 B; inside it core matrices of
 *   8 rows x 16 B (rows 16 B apart), the two k halves 128 B apart (LBO 128), 8-row groups
 *   256 B apart (SBO 256); descriptor of group g: start + 32 R g.
 * R is a multiple of 8. */
IXL_SM90_FN uint32_t ixl_sm90_tile_off(int swizzle, int R, int r, int kb) {
  if (swizzle == IXL_SM90_SWIZZLE_NONE)
    return (uint32_t)((kb >> 5) * R * 32 + (r >> 3) * 256 + ((kb >> 4) & 1) * 128 + (r & 7) * 16 +
                      (kb & 15));
  return ixl_sm90_swizzle((uint32_t)(r * 128 + kb), swizzle);
}
/* The offset of k32 group g's descriptor start address within the tile (see above). */
IXL_SM90_FN uint32_t ixl_sm90_tile_group(int swizzle, int R, int g) {
  return (uint32_t)(swizzle == IXL_SM90_SWIZZLE_NONE ? g * R * 32 : g * 32);
}

/* ---------------------------------------------------------------- register fragments */
/* Accumulator D of m64nNk32 (f32 or s32; "Register Fragments", the m64nNk* D figure):
 * thread t (0..127) of the warpgroup holds N/2 registers; register i is
 *   row = 16 w + l/4 + 8 ((i >> 1) & 1),  col = 8 (i >> 2) + 2 (l % 4) + (i & 1),
 * with w = t / 32 (the warp), l = t % 32 (the lane). So a warp owns 16 rows, a lane quad one
 * row pair (r, r + 8), and registers 4j..4j+3 cover columns 8j..8j+7. */
IXL_SM90_FN void ixl_sm90_acc_rc(int t, int i, int *row, int *col) {
  const int w = t >> 5, l = t & 31;
  *row = 16 * w + (l >> 2) + 8 * ((i >> 1) & 1);
  *col = 8 * (i >> 2) + 2 * (l & 3) + (i & 1);
}
/* The inverse: the thread and register holding D[row][col]. */
IXL_SM90_FN void ixl_sm90_acc_owner(int row, int col, int *t, int *i) {
  *t = 32 * (row >> 4) + 4 * (row & 7) + ((col >> 1) & 3);
  *i = 4 * (col >> 3) + 2 * ((row >> 3) & 1) + (col & 1);
}

/* A operand in registers (RS) of m64nNk32 for 8-bit types (e4m3, e5m2, s8, u8; the "A" figure
 * of m64nNk32): thread t holds four .b32 registers; register j packs 4 consecutive k of one
 * row, byte b (bits 8b..8b+7) being k + b:
 *   row = 16 w + l/4 + 8 (j & 1),  k = 4 (l % 4) + 16 (j >> 1).
 * This is the per-warp A layout of mma.m16n8k32, warp w taking rows 16w..16w+15; verified
 * bit-exact on the H200 (bench/hopper/README.md). */
IXL_SM90_FN void ixl_sm90_a8_rk(int t, int j, int *row, int *k) {
  const int w = t >> 5, l = t & 31;
  *row = 16 * w + (l >> 2) + 8 * (j & 1);
  *k = 4 * (l & 3) + 16 * (j >> 1);
}
/* The inverse: the thread, register and byte holding A[row][k]. */
IXL_SM90_FN void ixl_sm90_a8_owner(int row, int k, int *t, int *j, int *b) {
  *t = 32 * (row >> 4) + 4 * (row & 7) + ((k >> 2) & 3);
  *j = ((row >> 3) & 1) + 2 * (k >> 4);
  *b = k & 3;
}

/* ---------------------------------------------------------------- e2m1 widening */
/* The zero-table widening: the e2m1 nibble s e1 e0 m becomes the e4m3 byte s 0 0 e1 e0 m 0 0,
 * exactly the e2m1 value times 2^-6 (e2m1's 0.5 lands on e4m3's subnormal 2^-7, its exponent
 * field lines up with e4m3's biased one minus 6). One raw word w holds 8 codes (element e in
 * nibble e); the even elements 0, 2, 4, 6 widen into bytes 0..3 of *even, the odd ones into
 * bytes 0..3 of *odd: two shifts and masks each, no table. */
IXL_SM90_FN void ixl_sm90_e2m1x8_widen(uint32_t w, uint32_t *even, uint32_t *odd) {
  *even = ((w << 2) & 0x1C1C1C1Cu) | ((w << 4) & 0x80808080u);
  *odd = ((w >> 2) & 0x1C1C1C1Cu) | (w & 0x80808080u);
}
/* The k permutation of RS widening: the K side (A, positions as rows) of a 32-element e2m1
 * group is a row of 16 raw bytes, 4 words; the thread of lane quad index q (= l % 4) widens
 * raw word q (elements 8q..8q+7) and puts *even into A register j = (0 or 1) (k = 4q..4q+3)
 * and *odd into j + 2 (k = 16+4q..16+4q+3). So the wgmma's k position p multiplies element
 *   ixl_sm90_widen_perm(p) = 8 ((p >> 2) & 3) + 2 (p & 3) + (p >> 4),
 * and the other operand (Q, B in shared memory) is stored with its element perm(p) at k
 * position p; the dot is unchanged because the permutation is the same on both sides. */
IXL_SM90_FN int ixl_sm90_widen_perm(int p) {
  return 8 * ((p >> 2) & 3) + 2 * (p & 3) + (p >> 4);
}

#endif
