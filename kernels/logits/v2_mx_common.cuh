// logits/v2_mx_common.cuh - the pieces every MXFP4 kernel of logits v2 shares (the V3 kernels
// and the NEXT kernel of logits_v2_mx_sm90.cu, the warp-specialized K1 / K2 / K5 kernels of
// logits_v2_mxk{1,2,5}_sm90.cu), written once so the kernels that must give the same bits run
// the same code: the device side of the per-column query fold, the query tile's widening, K1's
// row windows and -inf fill, the per-lane weights and slow-head masks, SPEC 3's fp32 head sum
// and bf16 chain, the exact slow path; and the host side of the launch (the env switches, the
// K1 tensor maps, the chunking of the output columns into a grid). The pure rules (layouts,
// windows, the fold) stay in v2_mx.cuh, which runs on the host too; the dispatcher's hooks into
// the warp-specialized files are declared in v2_mx_ws.h.
//
// Everything is in namespace ixl::v2mx; device functions are __forceinline__ (the callers'
// loops unroll them into registers), defined in the sm_90a device pass only (IXL_SM90_DEVICE)
// like the kernels that call them.
#ifndef IXL_LOGITS_V2_MX_COMMON_CUH
#define IXL_LOGITS_V2_MX_COMMON_CUH

#include "logits/logits.h"
#include "logits/k1_window.h"
#include "cuda/launch.cuh"
#include "cuda/sm90.cuh"
#include "logits/v2_mx.cuh"
#include "numerics/scalar.h"

#include <cuda_bf16.h>

#include <stdint.h>
#include <stdlib.h>

namespace ixl {
namespace v2mx {

constexpr int kTile = 64; // key slots a tile (the wgmma M) in every MXFP4 v2 kernel

#if IXL_SM90_DEVICE
// ------------------------------------------------------------------ device: scalar helpers
__device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}
__device__ __forceinline__ int64_t mn64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t mx64(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ __forceinline__ float relu(float x) { return x < 0.0f ? 0.0f : x; } // NaN stays NaN

// -inf at element i of an fp32 or bf16 output.
template <bool BF16>
__device__ __forceinline__ void store_ninf(void *out, int64_t i) {
  if (BF16) reinterpret_cast<uint16_t *>(out)[i] = 0xFF80u;
  else reinterpret_cast<float *>(out)[i] = __uint_as_float(0xff800000u);
}
// x / P (x >= 0) by a shift when P is a power of two (Plog >= 0).
__device__ __forceinline__ int64_t div_p(int64_t x, int P, int Plog) {
  return Plog >= 0 ? x >> Plog : x / P;
}

// bf16x2 of relu(lo), relu(hi), rounded to nearest even (cvt.rn.relu.bf16x2.f32: a NaN stays
// NaN, a negative value becomes +0), lo in the low half.
__device__ __forceinline__ uint32_t cvt_relu_bf16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.relu.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// A column's weight: element i of an fp32 or bf16 [R, H] array, as fp32 (bf16 exactly).
template <bool BF16>
__device__ __forceinline__ float load_weight(const void *w, int64_t i) {
  return BF16 ? __uint_as_float((uint32_t)reinterpret_cast<const uint16_t *>(w)[i] << 16)
              : reinterpret_cast<const float *>(w)[i];
}

// ------------------------------------------------------------------ device: the query side
// What the kernels keep per column (row, head): the fold of its query exponents
// (ixl_v2mx_head_fold) and its weight, as the fast and slow paths read them.
struct ColInfo {
  float wo;     // the column's weight (slow path)
  float wq;     // the weight times 2^(qc - 127) where the column is fast, else the weight
  float hc;     // 2^(qc - 127) where the column is fast, else 1
  uint32_t hq;  // the slow path's exponents qeff_g = qe_g - d_g (the fold's, not the fast flag's)
  uint32_t ht;  // the packed t_g + 8 the query tile is widened with (byte g)
  uint8_t fast; // the column takes the fast path
};

// The packed t_g + 8 of ixl_v2mx_head_fold's t (byte g).
__device__ __forceinline__ uint32_t pack_t(const int t[4]) {
  return (uint32_t)(t[0] + 8) | (uint32_t)(t[1] + 8) << 8 | (uint32_t)(t[2] + 8) << 16 |
         (uint32_t)(t[3] + 8) << 24;
}

// The column's info from its query scale word qw and its weight, element wi of the [R, H]
// weights w (fp32, or bf16 when BF16; 0 where !valid, a column past R, nothing read). COMB: the
// fast path is V3's deferred key factor (v2_mx.cuh, IXL_V2MX_COMB_E), which also needs the
// weight and qc in its window.
template <bool COMB, bool BF16>
__device__ __forceinline__ ColInfo col_info(uint32_t qw, const void *w_arr, int64_t wi,
                                            bool valid) {
  int qc, t[4];
  const int fold = ixl_v2mx_head_fold(qw, &qc, t); // the query tile is widened so (ht)
  int fast = fold;
  float w = 0.0f;
  if (valid) w = load_weight<BF16>(w_arr, wi);
  // the fast path multiplies the weight by 2^(qc - 127) instead of each dot: exact when the
  // product is a normal number (then bf16 weights stay bf16 values) whose half is normal too
  const float wc = __fmul_rn(w, __uint_as_float((uint32_t)qc << 23));
  const uint32_t we = (__float_as_uint(wc) >> 23) & 0xFFu;
  if (fast && w == w && w != 0.0f && (we < 2 || we == 0xFF)) fast = 0;
  if (COMB && fast) { // the deferred key factor's window (v2_mx.cuh, IXL_V2MX_COMB_E)
    const float aw = fabsf(w);
    if (aw != 0.0f && aw <= 3.4028235e38f && (aw < 0x1p-25f || aw > 0x1p25f)) fast = 0;
    if (qc < 127 - IXL_V2MX_COMB_E || qc > 127 + IXL_V2MX_COMB_E) fast = 0;
  }
  ColInfo ci;
  ci.wo = w;
  ci.wq = fast ? wc : w;
  ci.fast = (uint8_t)fast;
  // the slow path's exponents, qeff_g = qe_g - d_g: the fold's, not the fast flag's (a folded
  // head the checks above turn slow keeps its folded query tile; the fast flag's were wrong
  // exactly when the weight check turned a folded head slow: test
  // mxfp4_tiny_weights_on_folded_heads)
  ci.hq = fold ? (uint32_t)qc * 0x01010101u : qw;
  ci.hc = fast ? __uint_as_float((uint32_t)qc << 23) : 1.0f; // qc in [77, 177]
  ci.ht = pack_t(t);
  return ci;
}

// Where a kernel keeps its per-column info in shared memory (ht may be null: a kernel that
// widens its query tile from the scale words directly).
struct ColArrays {
  uint32_t *hq, *ht;
  float *hc, *wo, *wq;
  uint8_t *hf;
  __device__ __forceinline__ void store(int n, const ColInfo &ci) const {
    wo[n] = ci.wo;
    wq[n] = ci.wq;
    hf[n] = ci.fast;
    hq[n] = ci.hq;
    hc[n] = ci.hc;
    if (ht) ht[n] = ci.ht;
  }
};

// Column n (row row0 + n / H, head n % H) of a CTA's columns: its info from the [R, H] query
// scale words and weights (a row past R: scale words 2^0, weight 0, nothing read) into a.
template <int H, bool COMB, bool BF16>
__device__ __forceinline__ void col_setup(int n, int64_t row0, int64_t R,
                                          const uint32_t *q_scales, const void *w,
                                          const ColArrays &a) {
  const int64_t r = row0 + n / H;
  uint32_t qw = 0x7F7F7F7Fu;
  if (r < R) qw = q_scales[r * H + n % H];
  a.store(n, col_info<COMB, BF16>(qw, w, r * H + n % H, r < R));
}

// Query tile word (column n, group g, word p4) into the 128B-swizzled K-major tile s_q:
// column n's element perm(p) of group g at byte 32 g + p, as e4m3 (ixl_v2mx_q_word) of the
// head's 64 code bytes at q_codes + 64 head, each group times 2^(t_g) (ht: pack_t's word);
// zeros where !valid (a column past R, nothing read).
__device__ __forceinline__ void q_tile_word(uint8_t *s_q, const uint8_t *q_codes, int64_t head,
                                            bool valid, int n, int g, int p4, uint32_t ht) {
  uint32_t o = 0;
  if (valid) {
    const uint32_t x =
        *reinterpret_cast<const uint32_t *>(q_codes + head * 64 + 16 * g + 4 * (p4 & 3));
    o = ixl_v2mx_q_word(x, p4, (int)((ht >> (8 * g)) & 0xFFu) - 8);
  }
  *reinterpret_cast<uint32_t *>(s_q + ixl_sm90_swizzle((uint32_t)(n * 128 + 32 * g + 4 * p4),
                                                       IXL_SM90_SWIZZLE_128B)) = o;
}

// The query tiles of NCT columns (row0 + n / H, head n % H; rows past R zero), their packed
// t_g in s_ht[n], by threads tid of NT: tile columns n at 128 n.
template <int H, int NCT, int NT>
__device__ __forceinline__ void q_tiles(uint8_t *s_q, const uint8_t *q_codes,
                                        const uint32_t *s_ht, int64_t row0, int64_t R, int tid) {
  for (int i = tid; i < NCT * 32; i += NT) {
    const int n = i >> 5, g = (i >> 3) & 3, p4 = i & 7;
    const int64_t r = row0 + n / H;
    q_tile_word(s_q, q_codes, r * H + n % H, r < R, n, g, p4, s_ht[n]);
  }
}

// ------------------------------------------------------------------ device: K1's row windows
// Row r's keys [ks, ke) clamped to [0, N), and its part of the chunk [c0, chunk_hi): the key
// positions [lo, hi) it reads there, co its output column offset (compressed: output column
// n - co of key n; else 0); keys = its key count (the compressed row's length). The rule is
// logits/k1_window.h's (logits v1 applies the same).
using K1Window = ixl_k1_window;
__device__ __forceinline__ K1Window k1_window(int64_t ks, int64_t ke, int64_t N, int compressed,
                                              int64_t c0, int64_t chunk_hi) {
  return ixl_k1_window_of(ks, ke, N, compressed, c0, chunk_hi);
}

// K1: rows row0 + r (r = tid < RB) of the CTA: their windows in the chunk [c0, chunk_hi) into
// s_lo / s_hi / s_co (k1_window; empty for rows past R).
template <int RB>
__device__ __forceinline__ void k1_windows(int tid, int64_t row0, int64_t R, const int32_t *ks,
                                           const int32_t *ke, int64_t N, int compressed,
                                           int64_t c0, int64_t chunk_hi, int64_t *s_lo,
                                           int64_t *s_hi, int64_t *s_co) {
  ixl_k1_row_windows<false>(tid, RB, row0, R, ks, ke, N, compressed, c0, chunk_hi, s_lo, s_hi,
                            s_co, nullptr, nullptr, 0, 1);
}

// K5: *s_nvalid (preset to min(nsb, 2^31 - 1)) lowered to the length of the strictly increasing
// prefix of the row's sparse ids (those up to the chunk's end chunk_hi; sbk = 2^sbklog
// positions a block), by threads tid of NT.
template <int NT>
__device__ __forceinline__ void ids_valid_prefix(const int32_t *ids, int64_t nsb, int64_t chunk_hi,
                                                 int sbk, int sbklog, int tid, int *s_nvalid) {
  const int64_t jmax = mn64(nsb, (chunk_hi + sbk - 1) >> sbklog);
  for (int64_t j = 1 + tid; j < jmax; j += NT)
    if (ids[j] <= ids[j - 1]) atomicMin(s_nvalid, (int)j);
}

// K1: -inf at the chunk's columns outside each of the RB rows' windows (s_lo / s_hi / s_co, as
// k1_window; rows past R skipped), by threads tid of NT; *hull_lo, *hull_hi: the hull of the
// non-empty windows (0, 0 when none).
template <bool BF16, int RB, int NT>
__device__ __forceinline__ void k1_fill_hull(void *out, int64_t out_cols, int64_t row0,
                                             int64_t R, const int64_t *s_lo, const int64_t *s_hi,
                                             const int64_t *s_co, int64_t c0, int64_t chunk_hi,
                                             int tid, int64_t *hull_lo, int64_t *hull_hi) {
  int64_t hl = INT64_MAX, hh = INT64_MIN;
#pragma unroll
  for (int r = 0; r < RB; r++) {
    if (row0 + r >= R) break;
    const int64_t lo = s_lo[r], hi = s_hi[r], co = s_co[r];
    if (hi > lo) {
      hl = mn64(hl, lo);
      hh = mx64(hh, hi);
    }
    const int64_t a1 = hi > lo ? lo - co : chunk_hi, b0 = hi > lo ? hi - co : chunk_hi;
    const int64_t base = (row0 + r) * out_cols;
    for (int64_t c = c0 + tid; c < a1; c += NT) store_ninf<BF16>(out, base + c);
    for (int64_t c = b0 + tid; c < chunk_hi; c += NT) store_ninf<BF16>(out, base + c);
  }
  if (hh <= hl) hl = hh = 0;
  *hull_lo = hl;
  *hull_hi = hh;
}

// ------------------------------------------------------------------ device: per lane
// The lane's columns 8 j + 2 t4 + c (j < NJ, c < 2; register 4 j + 2 half + c) of the
// per-column arrays at s_hf: *slow_heads bit 2 j + c set where the column is slow; returns 1
// when any lane of the quad (the lanes of the same two slots) has a slow column.
template <int NJ>
__device__ __forceinline__ int lane_slow(const uint8_t *s_hf, int t4, uint32_t *slow_heads) {
  uint32_t sh = 0;
#pragma unroll
  for (int j = 0; j < NJ; j++)
#pragma unroll
    for (int c = 0; c < 2; c++) sh |= (uint32_t)(s_hf[8 * j + 2 * t4 + c] == 0) << (2 * j + c);
  *slow_heads = sh;
  int quad_slow = sh != 0;
  quad_slow |= __shfl_xor_sync(0xffffffffu, quad_slow, 1);
  quad_slow |= __shfl_xor_sync(0xffffffffu, quad_slow, 2);
  return quad_slow;
}

// The fast path's weights (s_wq: times 2^(qc - 127)): fp32: wf[2 j + c] = half of the lane's
// own columns' (relu(x) w = (x + |x|) (w / 2), NaN kept); bf16: wb[2 j + k] = the pairs its
// chains take, heads 8 j + 4 k + 2 (t4 & 1) + {0, 1} (exact: bf16 values).
template <bool BF16, int NJ>
__device__ __forceinline__ void lane_weights(const float *s_wq, int t4, float *wf,
                                             __nv_bfloat162 *wb) {
#pragma unroll
  for (int j = 0; j < NJ; j++) {
    if (BF16) {
#pragma unroll
      for (int k = 0; k < 2; k++) {
        const int n = 8 * j + 4 * k + 2 * (t4 & 1);
        wb[2 * j + k] = __floats2bfloat162_rn(s_wq[n], s_wq[n + 1]); // exact: bf16 values
      }
    } else {
#pragma unroll
      for (int c = 0; c < 2; c++) wf[2 * j + c] = __fmul_rn(s_wq[8 * j + 2 * t4 + c], 0.5f);
    }
  }
}

// ------------------------------------------------------------------ device: the key side
// The lane's A fragments of one raw tile st (ixl_v2mx_raw_off's layout): slots i0 and i0 + 8,
// word q4 of each group (sw = (i0 >> 1) & 3), widened (ixl_sm90_e2m1x8_widen).
__device__ __forceinline__ void load_widen_a(const uint8_t *st, int i0, int sw, int q4,
                                             uint32_t a[4][4]) {
#pragma unroll
  for (int g = 0; g < 4; g++) {
    const uint32_t w0 =
        *reinterpret_cast<const uint32_t *>(st + i0 * 64 + 16 * (g ^ sw) + 4 * q4);
    const uint32_t w1 =
        *reinterpret_cast<const uint32_t *>(st + (i0 + 8) * 64 + 16 * (g ^ sw) + 4 * q4);
    ixl_sm90_e2m1x8_widen(w0, &a[g][0], &a[g][2]);
    ixl_sm90_e2m1x8_widen(w1, &a[g][1], &a[g][3]);
  }
}

// The tile's four RS wgmma (one k32 scale group each into its own accumulator, scale-d 0; B at
// descriptor db + 2 g, 32 B a group): groups 0 and 1, commit, then 2 and 3, commit, so the
// caller's wgmma_wait<1> lets groups 0-1's combine overlap groups 2-3's wgmma.
template <int NC>
__device__ __forceinline__ void rs_wgmma_groups(float (&acc)[4][NC / 2], uint32_t (&a)[4][4],
                                                uint64_t db) {
  ixl::sm90::wgmma_fence();
#pragma unroll
  for (int g = 0; g < 2; g++) ixl::sm90::wgmma_e4m3_rs<NC>(acc[g], a[g], db + 2 * g, 0);
  ixl::sm90::wgmma_commit();
#pragma unroll
  for (int g = 2; g < 4; g++) ixl::sm90::wgmma_e4m3_rs<NC>(acc[g], a[g], db + 2 * g, 0);
  ixl::sm90::wgmma_commit();
}

// The fast path's group combine into acc[0] (element e: slot h = (e >> 1) & 1), in SPEC 3's
// order (p0 + p1) + (p2 + p3), as two halves: 01 while groups 2-3's wgmma run, then 23.
// Deferred key factor (COMB, v2_mx.cuh): acc0 + acc1 r1, then (acc0 + acc1 r1) + (acc2 +
// acc3 r3) r2; else (key_pow2's kf): acc0 k0 + acc1 k1, then + (acc2 k2 + acc3 k3).
template <int NE>
__device__ __forceinline__ void comb01_deferred(float (&acc)[4][NE], const float cr1[2]) {
#pragma unroll
  for (int e = 0; e < NE; e++) {
    const int h = (e >> 1) & 1;
    acc[0][e] = __fmaf_rn(acc[1][e], cr1[h], acc[0][e]);
  }
}
template <int NE>
__device__ __forceinline__ void comb23_deferred(float (&acc)[4][NE], const float cr2[2],
                                                const float cr3[2]) {
#pragma unroll
  for (int e = 0; e < NE; e++) {
    const int h = (e >> 1) & 1;
    acc[0][e] = __fmaf_rn(__fmaf_rn(acc[3][e], cr3[h], acc[2][e]), cr2[h], acc[0][e]);
  }
}
template <int NE>
__device__ __forceinline__ void comb01_scaled(float (&acc)[4][NE], const float (&kf)[2][4]) {
#pragma unroll
  for (int e = 0; e < NE; e++) {
    const int h = (e >> 1) & 1;
    acc[0][e] = __fmaf_rn(acc[1][e], kf[h][1], __fmul_rn(acc[0][e], kf[h][0]));
  }
}
template <int NE>
__device__ __forceinline__ void comb23_scaled(float (&acc)[4][NE], const float (&kf)[2][4]) {
#pragma unroll
  for (int e = 0; e < NE; e++) {
    const int h = (e >> 1) & 1;
    const float t23 = __fmaf_rn(acc[3][e], kf[h][3], __fmul_rn(acc[2][e], kf[h][2]));
    acc[0][e] = __fadd_rn(acc[0][e], t23);
  }
}

// kf[g] = 2^(ke_g - 127) of scale word kw (byte g), as fp32.
__device__ __forceinline__ void key_pow2(uint32_t kw, float kf[4]) {
#pragma unroll
  for (int g = 0; g < 4; g++) kf[g] = __uint_as_float(((kw >> (8 * g)) & 0xFFu) << 23);
}

// ------------------------------------------------------------------ device: the dots
// SPEC 3's dot from the four exact group sums (slow path: the CPU's formula).
__device__ __forceinline__ float slow_dot(float a0, float a1, float a2, float a3, uint32_t qe,
                                          uint32_t kw) {
  const float a[4] = {a0, a1, a2, a3};
  float pg[4];
#pragma unroll
  for (int g = 0; g < 4; g++) {
    const int qb = (int)((qe >> (8 * g)) & 0xFFu), kb = (int)((kw >> (8 * g)) & 0xFFu);
    pg[g] = qb == 0xFF || kb == 0xFF ? __uint_as_float(0x7fc00000u)
                                     : ixl_scale_pow2f(a[g], qb + kb - 254);
  }
  return __fadd_rn(__fadd_rn(pg[0], pg[1]), __fadd_rn(pg[2], pg[3]));
}

// The slow branch (a quad with a slow column or a slot outside the fast window): the exact dots
// d into acc[0] for the lane's NE = NC / 2 accumulator elements: the fast formula times
// 2^(qc - 127) (s_hc) where the column is fast and the slot's exponents in the fast window,
// else the CPU's formula (slow_dot, s_hq). kf: key_pow2 of the two slots' scale words kw;
// pslow[h]: slot h outside the fast window (!ixl_v2mx_fast_word); s_hq, s_hc at the
// warpgroup's first column.
template <int NE>
__device__ __forceinline__ void slow_branch(float (&acc)[4][NE], const float (&kf)[2][4],
                                            const uint32_t kw[2], const bool pslow[2],
                                            uint32_t slow_heads, const uint32_t *s_hq,
                                            const float *s_hc, int t4) {
#pragma unroll
  for (int e = 0; e < NE; e++) {
    const int h = (e >> 1) & 1, c = 2 * (e >> 2) + (e & 1);
    const int n = 8 * (e >> 2) + 2 * t4 + (e & 1);
    if (((slow_heads >> c) & 1) || pslow[h]) {
      acc[0][e] = slow_dot(acc[0][e], acc[1][e], acc[2][e], acc[3][e], s_hq[n], kw[h]);
    } else {
      const float t01 = __fmaf_rn(acc[1][e], kf[h][1], __fmul_rn(acc[0][e], kf[h][0]));
      const float t23 = __fmaf_rn(acc[3][e], kf[h][3], __fmul_rn(acc[2][e], kf[h][2]));
      acc[0][e] = __fmul_rn(s_hc[n], __fadd_rn(t01, t23));
    }
  }
}

// ------------------------------------------------------------------ device: the head reduction
// SPEC 3's fp32 head sum of the lane's two slots over column blocks [j0, j1) (8 heads each) of
// the dots acc0: FOLD: the fast path (weights wf of lane_weights, relu through x + |x|), else
// the stored weights s_wo (at the warpgroup's first column). sum[h]: slot i0 + 8 h's sum over
// the quad (every lane holds it).
template <bool FOLD, int NE>
__device__ __forceinline__ void head_sum_f32(const float (&acc0)[NE], int j0, int j1,
                                             const float *wf, const float *s_wo, int t4,
                                             float sum[2]) {
  sum[0] = sum[1] = 0.0f;
#pragma unroll
  for (int j = j0; j < j1; j++)
#pragma unroll
    for (int c = 0; c < 2; c++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float x = acc0[4 * j + 2 * h + c];
        sum[h] = FOLD ? __fmaf_rn(wf[2 * j + c], __fadd_rn(x, fabsf(x)), sum[h])
                      : __fmaf_rn(s_wo[8 * j + 2 * t4 + c], relu(x), sum[h]);
      }
#pragma unroll
  for (int h = 0; h < 2; h++) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
  }
}

// SPEC 3's bf16 chain over column blocks [j0, j1): the heads h % 4 in {0, 1} of a position lie
// in lanes t4 = 0 and 2, {2, 3} in 1 and 3; lanes t4 = 0, 2 run (s0, s1), lanes 1, 3 run
// (s2, s3); lanes 0, 1 keep slot i0 and lanes 2, 3 slot i0 + 8 (keep = t4 >> 1), each sending
// the other slot's pair to lane t4 ^ 2, so each chain runs in head order in one lane
// (fma.rn.bf16x2); then one shfl_xor(1) + add.bf16x2 + add.bf16: bf16(bf16(s0 + s2) +
// bf16(s1 + s3)), valid in lanes t4 = 0 (slot i0) and 2 (slot i0 + 8). FOLD: weights wb of
// lane_weights, else the stored ones s_wo (at the warpgroup's first column).
template <bool FOLD, int NE>
__device__ __forceinline__ __nv_bfloat16 head_chain_bf16(const float (&acc0)[NE], int j0, int j1,
                                                         const __nv_bfloat162 *wb,
                                                         const float *s_wo, int t4) {
  const int keep = t4 >> 1;
  __nv_bfloat162 ch2 = __floats2bfloat162_rn(0.0f, 0.0f);
#pragma unroll
  for (int j = j0; j < j1; j++) {
    const uint32_t v0 = cvt_relu_bf16x2(acc0[4 * j], acc0[4 * j + 1]);     // slot i0
    const uint32_t v1 = cvt_relu_bf16x2(acc0[4 * j + 2], acc0[4 * j + 3]); // i0 + 8
    const uint32_t mine = keep ? v1 : v0;
    const uint32_t got = __shfl_xor_sync(0xffffffffu, keep ? v0 : v1, 2);
    // heads 8 j + {0,1} (+2 for lanes 1, 3) come from lane 0 or 1, 8 j + {4,5} from 2, 3
    const uint32_t first = keep ? got : mine, second = keep ? mine : got;
    __nv_bfloat162 w0, w1;
    if (FOLD) {
      w0 = wb[2 * j];
      w1 = wb[2 * j + 1];
    } else {
      const int n = 8 * j + 2 * (t4 & 1);
      w0 = __floats2bfloat162_rn(s_wo[n], s_wo[n + 1]);
      w1 = __floats2bfloat162_rn(s_wo[n + 4], s_wo[n + 5]);
    }
    ch2 = __hfma2(w0, *reinterpret_cast<const __nv_bfloat162 *>(&first), ch2);
    ch2 = __hfma2(w1, *reinterpret_cast<const __nv_bfloat162 *>(&second), ch2);
  }
  const uint32_t cu = *reinterpret_cast<const uint32_t *>(&ch2);
  const uint32_t ou = __shfl_xor_sync(0xffffffffu, cu, 1);
  // lane t4 even: (s0 + s2, s1 + s3); then bf16(low + high)
  const __nv_bfloat162 pair = __hadd2(ch2, *reinterpret_cast<const __nv_bfloat162 *>(&ou));
  return __hadd(__low2bfloat16(pair), __high2bfloat16(pair));
}
#endif // IXL_SM90_DEVICE

// ------------------------------------------------------------------ host
// log2 of v when v is a power of two (v >= 1), else -1.
inline int log2_exact(int64_t v) {
  if (v <= 0 || (v & (v - 1))) return -1;
  int l = 0;
  while ((1LL << l) < v) l++;
  return l;
}

// A kernel switch's environment variable: `unset` when it is not set, its one character when
// that is one of `allowed`, else 0 (every other value: "not one of the allowed ones"). The
// callers read it once a process (a function-local static).
inline int env_switch(const char *name, const char *allowed, int unset) {
  const char *e = getenv(name);
  if (!e) return unset;
  if (!e[0] || e[1]) return 0;
  for (const char *a = allowed; *a; a++)
    if (*a == e[0]) return e[0];
  return 0;
}

// K1's tensor maps (V3's mx3_kernel and the WS K1 kernel): maps[0] the key codes [N][64] B,
// box 64 x 64 B, SWIZZLE_64B (lands as ixl_v2mx_raw_off's layout); maps[1] the scale words
// viewed as [N / 4][4], box 17 x 4 (positions 4 floor(n0 / 4) .. + 67: position n0 + i is word
// (n0 & 3) + i) at inner coordinate 0. False when the call does not suit them (N % 4 != 0,
// keys not 16-B aligned, positions past int32 with a chunk of max_chunk).
inline bool k1_maps(const uint8_t *k_codes, const uint32_t *k_scales, int64_t N,
                    int64_t max_chunk, CUtensorMap maps[2]) {
  if (N <= 0 || N % 4 || N > INT32_MAX - 2 * max_chunk) return false;
  if ((uintptr_t)k_codes % 16 || (uintptr_t)k_scales % 16) return false;
  const uint64_t n = (uint64_t)N;
  return ixl::sm90::tma_map_2d(&maps[0], k_codes, CU_TENSOR_MAP_DATA_TYPE_UINT8, 64, n, 64, 64,
                               kTile, CU_TENSOR_MAP_SWIZZLE_64B, nullptr, 0) == 0 &&
         ixl::sm90::tma_map_2d(&maps[1], k_scales, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, n / 4, 16,
                               4, 17, CU_TENSOR_MAP_SWIZZLE_NONE, nullptr, 0) == 0;
}

// Occupancy of `kern` (threads a CTA, alloc bytes of dynamic shared memory, set as its
// maximum): *occ resident CTAs an SM as the runtime reports it (may be 0), *sms the device's
// SMs (132 when the query fails). `what` names the caller in the error.
template <typename Kern>
ixl_status occupancy(ixl_ctx *ctx, Kern kern, int threads, int alloc, const char *what, int *occ,
                     int *sms) {
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, alloc);
  *occ = 0;
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(occ, kern, threads, alloc);
  if (e != cudaSuccess) return ixl_cuda_status(ctx, e, what);
  *sms = 132;
  if (cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, ixl_ctx_device(ctx)) !=
          cudaSuccess ||
      *sms <= 0) {
    cudaGetLastError();
    *sms = 132;
  }
  return IXL_OK;
}

// The chunking of out_cols output columns for `units` independent work units (row blocks,
// rows): tiles of 64, at most `cap` columns a chunk (rounded down to tiles, within
// [kTile, max_chunk]); as few chunks per unit as fill whole waves of the occ * sms resident
// CTAs (units * nchunks just below a multiple of it: equal CTAs finish together, so a last wave
// a tenth full would cost a whole wave's time). An error when the grid would exceed 2^31 - 1
// CTAs ("NAME (TAG): N CTAs: ...").
struct Grid {
  int64_t chunk, nchunks, blocks;
};
inline ixl_status chunk_grid(ixl_ctx *ctx, int64_t out_cols, int64_t units, int64_t cap,
                             int64_t max_chunk, int occ, int sms, const char *name,
                             const char *tag, Grid *g) {
  if (occ < 1) occ = 1;
  const int64_t tiles = ixl_ceil_div(out_cols, kTile);
  cap = cap / kTile * kTile;
  if (cap > max_chunk) cap = max_chunk;
  if (cap < kTile) cap = kTile;
  const int64_t slots = (int64_t)occ * sms, nmin = ixl_ceil_div(tiles, cap / kTile);
  const int64_t waves = ixl_ceil_div(nmin * units, slots);
  int64_t nch = waves * slots / units;
  if (nch < nmin) nch = nmin;
  if (nch > tiles) nch = tiles;
  g->chunk = ixl_ceil_div(tiles, nch) * kTile;
  g->nchunks = ixl_ceil_div(out_cols, g->chunk);
  g->blocks = g->nchunks * units;
  if (g->blocks > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED, "%s (%s): %lld CTAs: more than a grid holds",
                         name, tag, (long long)g->blocks);
  return IXL_OK;
}

} // namespace v2mx
} // namespace ixl

#endif
