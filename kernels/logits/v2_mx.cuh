// logits/v2_mx.cuh - the pure rules of logits v2's MXFP4 kernels (logits_v2_mx_sm90.cu), in
// functions that run on the host too, so the layout and the exactness argument can be checked
// without a GPU:
// - the raw key tile in shared memory: 64 slots of 64 B (four 16-B scale groups), group g of
//   slot i at 16 (g ^ ((i >> 1) & 3)): the RS A-fragment reads of a warp (rows 16w + l/4, word
//   l % 4 of a group) hit 32 different banks;
// - the key side (wgmma A, in registers): ixl_sm90_e2m1x8_widen's zero-table widening, so a
//   key value v sits in e4m3 as v * 2^-6 (0.5 is the subnormal 2^-7), k permuted within each
//   32-element group by ixl_sm90_widen_perm;
// - the query side (wgmma B, shared memory, 128B-swizzled K-major rows of 128 B): element
//   perm(p) of group g at byte 32 g + p, as e4m3 of v * 2^(6 + d_g) where d_g = qe_g - qc
//   (qc the head's largest group exponent) when the head folds (every d_g >= -kFoldW, no NaN
//   scale, qc within the fast window), else d_g = 0. Every such value is exact in e4m3
//   (6 * 2^6 = 384 <= 448; 0.5 * 2^(6 - 14) = 2^-9, e4m3's smallest subnormal);
// - so one k32 wgmma of group g sums 32 exact products v_q v_k 2^(d_g): S_g 2^(d_g), where
//   S_g (a multiple of 1/4, |S_g| <= 1152, 13 significant bits) is SPEC 3's unscaled group
//   partial; the fp8 tensor core keeps it exactly (../GPU.md: one k32 group per accumulator).
// Fast path (the head folds, and every key exponent of the position lies in the window):
//   d = 2^(qc - 127) * ((acc0 k0 + acc1 k1) + (acc2 k2 + acc3 k3)), k_g = 2^(ke_g - 127), as
//   fmul, fma, fmul, fma, fadd, fmul. Every product by a power of two is exact and every sum
//   rounds once, and all values stay normal fp32 numbers (|S_g 2^d_g| in [2^-16, 2^11],
//   exponents within +-kFastE), so each rounding is the CPU's scaled by 2^(127 - qc): the
//   result is SPEC's (p0 + p1) + (p2 + p3) bit for bit.
// Slow path (anything else: NaN scale bytes, exponents outside the window, spread heads):
//   p_g = ixl_scale_pow2f(acc_g, qeff_g + ke_g - 254) with qeff_g = qe_g - d_g (the CPU's
//   formula on the same exact S_g), NaN where either byte is 0xFF.
#ifndef IXL_LOGITS_V2_MX_CUH
#define IXL_LOGITS_V2_MX_CUH

#include <stdint.h>

#include "cuda/sm90_layout.h"

#ifdef __CUDACC__
#define IXL_V2MX_FN static __host__ __device__ __forceinline__
#else
#define IXL_V2MX_FN static inline
#endif

// the deepest fold of a query group below its head's largest exponent (e4m3 subnormals
// included: 0.5 * 2^(6 - 14) = 2^-9)
#define IXL_V2MX_FOLD_W 14
// the fast path's exponent window: qc - 127 and every ke_g - 127 within +-kFastE
#define IXL_V2MX_FAST_E 50

// Byte offset of 16-B group g of slot i in a raw key tile of 64 B slots.
IXL_V2MX_FN uint32_t ixl_v2mx_raw_off(int i, int g) {
  return (uint32_t)(i * 64 + 16 * (g ^ ((i >> 1) & 3)));
}

// The e4m3 byte of the e2m1 code `nib` (sign in bit 3) times 2^t, t in [-8, 6] (exact there;
// -0 becomes +0).
IXL_V2MX_FN uint32_t ixl_v2mx_e2m1_e4m3(uint32_t nib, int t) {
  const uint32_t m = nib & 7u;
  if (m == 0) return 0;
  const int v = (int)(m >> 1) + t + 6; // the biased exponent when the value is normal
  const uint32_t f = m > 1 ? (m & 1u) : 0u;
  const uint32_t s = (nib & 8u) << 4;
  if (v >= 1) return s | ((uint32_t)v << 3) | (f << 2);
  // subnormal (t < -4): the value in units of 2^-9 is 2 |v| * 2^(t + 8), below 8
  return s | (((0xC8643210u >> (4 * m)) & 15u) << (t + 8));
}

// The four e4m3 bytes of query word p4 (0..7) of group g: the bytes at k positions
// 32 g + 4 p4 .. + 3, elements 32 g + perm(4 p4 + b), from raw word x = the 4 code bytes
// 16 g + 4 (p4 & 3) .. + 3 of the head (element 32 g + 8 (p4 & 3) + 2 b + (p4 >> 2) is nibble
// p4 >> 2 of byte b), each times 2^t.
IXL_V2MX_FN uint32_t ixl_v2mx_q_word(uint32_t x, int p4, int t) {
  const int sh = 4 * (p4 >> 2);
  uint32_t o = 0;
  for (int b = 0; b < 4; b++) o |= ixl_v2mx_e2m1_e4m3((x >> (8 * b + sh)) & 15u, t) << (8 * b);
  return o;
}

// The NEXT kernels (IXL_LOGITS_V2_MX_NEXT, logits_v2_mx_sm90.cu) widen each key tile once into
// shared memory as wgmma's SS A operand: 64 rows (slots) of 128 B, K-major, 128B-swizzled (the
// layout ixl_sm90_tile_off(IXL_SM90_SWIZZLE_128B, 64, row, kb) reads, as TMA's SWIZZLE_128B
// writes), group g at bytes 32 g .. 32 g + 31 of the row in the RS k order (ixl_sm90_widen_perm,
// so the query tile is the same): raw word q (elements 8 q .. 8 q + 7) of group g widens to
// *even at byte 32 g + 4 q and *odd at byte 32 g + 16 + 4 q. The byte offset of that word:
IXL_V2MX_FN uint32_t ixl_v2mx_ss_off(int i, int g, int q, int odd) {
  return ixl_sm90_swizzle((uint32_t)(i * 128 + 32 * g + 16 * odd + 4 * q), IXL_SM90_SWIZZLE_128B);
}

// 1 when every byte of a packed UE8M0 word lies within 127 +- IXL_V2MX_FAST_E.
IXL_V2MX_FN int ixl_v2mx_fast_word(uint32_t w) {
#ifdef __CUDA_ARCH__
  return (__vcmpgeu4(w, 0x01010101u * (127 - IXL_V2MX_FAST_E)) &
          __vcmpleu4(w, 0x01010101u * (127 + IXL_V2MX_FAST_E))) == 0xFFFFFFFFu;
#else
  int ok = 1;
  for (int g = 0; g < 4; g++) {
    const int b = (int)((w >> (8 * g)) & 0xFFu) - 127;
    ok &= b >= -IXL_V2MX_FAST_E && b <= IXL_V2MX_FAST_E;
  }
  return ok;
#endif
}

// V3's deferred key factor (IXL_LOGITS_V2_MX_V3 bit 4, logits_v2_mx_sm90.cu): the fast path
// combines d / (2^(qc - 127) k0) = (acc0 + acc1 r1) + (acc2 + acc3 r3) r2 in 3 fma, where
// k_g = 2^(ke_g - 127), r1 = k1 / k0, r2 = k2 / k0, r3 = k3 / k2 (powers of two), and the
// head reduction (fp32 fma chain or SPEC 3's bf16 chain) then runs on values 1 / k0 times
// the CPU's, the result multiplied by k0 last. Bitwise the CPU's because every step is a
// correctly rounded operation on exactly scaled operands, and scaling commutes with rounding
// when no value leaves the range where both formats round alike: with qc and every ke_g within
// 127 +- IXL_V2MX_COMB_E and each weight 0, non-finite or of magnitude in [2^-25, 2^25], every
// nonzero value on either side is a multiple of at least 2^-139 (fp32 weights: 2^-48 quanta,
// dots 2^-66) and below 2^118, so subnormal results are exact and normal ones round at the same
// relative bit. Outside that window the kernels take the exact slow path.
#define IXL_V2MX_COMB_E 25
// 1 when every byte of a packed UE8M0 word lies within 127 +- IXL_V2MX_COMB_E (SWAR: d = the
// bytes minus 127 - E without borrows; a byte is out when d > 2E or d's top bit is set).
IXL_V2MX_FN int ixl_v2mx_comb_word(uint32_t w) {
  const uint32_t hb = 0x80808080u;
  const uint32_t d = ((w | hb) - 0x01010101u * (127 - IXL_V2MX_COMB_E)) ^ (~w & hb);
  return (((d + 0x01010101u * (127 - 2 * IXL_V2MX_COMB_E)) | d) & hb) == 0;
}

// The deferred key factors of scale word kw, as fp32 bit patterns: f[0] = k0 = 2^(ke0 - 127),
// f[1] = r1 = 2^(ke1 - ke0), f[2] = r2 = 2^(ke2 - ke0), f[3] = r3 = 2^(ke3 - ke2) (meaningful
// only when ixl_v2mx_comb_word(kw); garbage otherwise, for a caller that never uses them then).
IXL_V2MX_FN void ixl_v2mx_comb_factors(uint32_t kw, uint32_t f[4]) {
  const uint32_t e0 = kw & 0xFFu, e1 = (kw >> 8) & 0xFFu, e2 = (kw >> 16) & 0xFFu, e3 = kw >> 24;
  f[0] = e0 << 23;
  f[1] = (e1 + 127u - e0) << 23;
  f[2] = (e2 + 127u - e0) << 23;
  f[3] = (e3 + 127u - e2) << 23;
}
// The same, all 0 when a byte lies outside ixl_v2mx_comb_word's window (k0 = 0 then marks a
// slot for the exact slow path: inside the window ke0 >= 127 - IXL_V2MX_COMB_E, so k0 != 0);
// returns ixl_v2mx_comb_word(kw).
IXL_V2MX_FN int ixl_v2mx_comb_factors_or0(uint32_t kw, uint32_t f[4]) {
  const int ok = ixl_v2mx_comb_word(kw);
  ixl_v2mx_comb_factors(kw, f);
  for (int g = 0; g < 4; g++) f[g] = ok ? f[g] : 0u;
  return ok;
}

// A head's fold from its packed query scale word: returns 1 when it folds (then *qc is its
// largest exponent byte and *t_g = 6 + qe_g - qc), else 0 (then *t_g = 6).
IXL_V2MX_FN int ixl_v2mx_head_fold(uint32_t qw, int *qc, int t[4]) {
  int lo = 255, hi = 0;
  for (int g = 0; g < 4; g++) {
    const int b = (int)((qw >> (8 * g)) & 0xFFu);
    lo = b < lo ? b : lo;
    hi = b > hi ? b : hi;
  }
  const int ok = hi != 0xFF && hi - lo <= IXL_V2MX_FOLD_W && ixl_v2mx_fast_word(
                                                                  (uint32_t)hi * 0x01010101u);
  *qc = hi;
  for (int g = 0; g < 4; g++) t[g] = ok ? 6 + (int)((qw >> (8 * g)) & 0xFFu) - hi : 6;
  return ok;
}

#endif
