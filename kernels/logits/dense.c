/* dense_logits_cpu.c - K1 (dense logits, ragged) and K2 (dense logits, paged) on the CPU, and
 * the logits engine that K1, K2 and K5 share.
 *
 * Two paths compute the same bits (logits/engine.h fixes the arithmetic):
 * - the reference path: per position and head, ixl_dot_ref then ixl_reduce_heads. It is the
 *   definition, written to be read;
 * - the fast path (AVX2 + FMA, chosen at run time): per block of IXL_KBLOCK keys, the key
 *   values are decoded once into strips of 16 positions ([strip][d][16] floats; MX values
 *   already times their group's 2^(ke - 127) where that is exact, see ixl_engine_pack); a 4x16
 *   register tile then computes the group partials of 4 heads x 16 positions with one fma
 *   chain per group in increasing element order. The products are exact (<= 8 significant
 *   bits), so each fma rounds exactly as the reference's add does, and the partials are
 *   bitwise the reference's (times the key scale) for every format. The epilogue applies the
 *   query scale (one exact power-of-two multiply, or the reference's scalar formula for
 *   blocks outside the exact range and NaN scales), relu, the weights and the head reduction;
 *   the bf16 reduction runs 8 positions at a time as an fp32 TwoSum with a correction on bf16
 *   midpoints, and falls back to the double-precision reference per lane when a product could
 *   be inexact in fp32 (underflow) or a value is not finite. The tests compare both paths
 *   bitwise.
 * Threads: OpenMP over blocks of keys (K1) or (row, block) pairs (K2, K5), ixl_ctx_threads. */
#include "ops.h"
#include "logits/engine.h"

#include <float.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IXL_HAVE_X86 1
#else
#define IXL_HAVE_X86 0
#endif

#define STRIP 16                        /* positions per register tile */
#define NSTRIPS (IXL_KBLOCK / STRIP)
#define MR 4                            /* heads per register tile */

/* ---------------------------------------------------------------- engine state */
typedef struct worker {
  float *b;                     /* fast: [NSTRIPS][128][STRIP] key values */
  int32_t ke[4][IXL_KBLOCK];    /* fast, MX: scale bytes per group; 127 in empty slots */
  float kscale[IXL_KBLOCK];     /* fast, fp8: the keys' fp32 scales */
  uint8_t valid[IXL_KBLOCK];
  int prescaled;                /* fast, MX: b holds value * 2^(ke - 127), else the value */
  int n;
  ixl_kref keys[IXL_KBLOCK];    /* reference: the keys themselves */
  float *qf;                    /* reference: [H][128] one row's query values */
  int64_t qf_row;               /* the row qf holds, -1 for none */
} worker;

struct ixl_engine {
  ixl_ctx *ctx;
  int fmt, reduction, fast, threads;
  int64_t R, H, vb;
  const uint8_t *qc;            /* [R][H][vb] */
  const uint8_t *qs;            /* [R][H][4] scale bytes, NULL for fp8 */
  const void *w;                /* [R][H] F32 or BF16 */
  int64_t chunk_rows, r0, nrows;
  float *qa;                    /* fast: [chunk][H/4][128][MR] query values */
  int32_t *qe;                  /* fast, MX: [chunk][H][4] scale bytes */
  float *fq;                    /* fast, MX: [chunk][H][4] 2^(qe - 127) (0 for a 0xFF byte) */
  float *wf;                    /* [chunk][H] weights as floats */
  int32_t *qff;                 /* fast, MX: [chunk] the row has a 0xFF (NaN) scale byte */
  worker *wk;
  float e2m1[16], e4m3[256];    /* decoding tables (unscaled values) */
  int64_t qa_bytes, qe_bytes, fq_bytes, wf_bytes, qff_bytes, b_bytes, qf_bytes; /* workspace */
};

/* Kernel workspace comes from the context's grow-only scratch (ixl_ctx_scratch): the engine
 * is carved out of slot 1 in one piece and K2's page prefix takes slot 2, so a steady stream of
 * steps allocates nothing. The carve keeps every piece 64-byte aligned. */
#define IXL_WS_ENGINE_SLOT 1
#define IXL_WS_PREFIX_SLOT 2

static int64_t ws_round(int64_t bytes) { return (bytes + 63) & ~(int64_t)63; }

/* Takes `bytes` from *cursor (NULL for 0 bytes). */
static void *ws_carve(char **cursor, int64_t bytes) {
  if (bytes == 0) return NULL;
  void *p = *cursor;
  *cursor += ws_round(bytes);
  return p;
}

static int cpu_has_avx2_fma(void) {
#if IXL_HAVE_X86 && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

/* The engine's memory belongs to the context's scratch: nothing to release. */
void ixl_engine_free(ixl_engine *e) { (void)e; }

ixl_status ixl_engine_new(ixl_ctx *ctx, int fmt, int reduction, const ixl_tensor *q_codes,
                          const ixl_tensor *q_scales, const ixl_tensor *weights, int threads,
                          int path, ixl_engine **out) {
  *out = NULL;
  ixl_engine tmp;
  ixl_engine *e = &tmp;
  memset(e, 0, sizeof *e);
  e->ctx = ctx;
  e->fmt = fmt;
  e->reduction = reduction;
  e->threads = threads < 1 ? 1 : threads;
  e->R = q_codes->shape[0];
  e->H = q_codes->shape[1];
  e->vb = q_codes->shape[2];
  e->qc = q_codes->data;
  e->qs = q_scales ? q_scales->data : NULL;
  e->w = weights->data;
  e->fast = path != IXL_PATH_REFERENCE && cpu_has_avx2_fma();
  ixl_e2m1_table(e->e2m1);
  ixl_e4m3_table(e->e4m3);
  /* Rows per chunk: keep the prepared query values near 4 MiB. */
  int64_t per_row = e->H * IXL_D * 4;
  e->chunk_rows = (4 << 20) / per_row;
  if (e->chunk_rows < 1) e->chunk_rows = 1;
  if (e->chunk_rows > e->R) e->chunk_rows = e->R > 0 ? e->R : 1;
  /* Every size below is bounded: H <= 128, chunk_rows * per_row <= 4 MiB + per_row. */
  e->qa_bytes = e->fast ? e->chunk_rows * per_row : 0;
  e->qe_bytes = e->fast && fmt != IXL_FP8 ? e->chunk_rows * e->H * 4 * 4 : 0;
  e->fq_bytes = e->qe_bytes;
  e->wf_bytes = e->chunk_rows * e->H * 4;
  e->qff_bytes = e->chunk_rows * 4;
  e->b_bytes = e->fast ? (int64_t)IXL_KBLOCK * IXL_D * 4 : 0;
  e->qf_bytes = e->fast ? 0 : e->H * IXL_D * 4;
  int64_t wk_bytes = (int64_t)sizeof(worker) * e->threads;
  int64_t total = ws_round(sizeof *e) + ws_round(e->qa_bytes) + ws_round(e->qe_bytes) +
                  ws_round(e->fq_bytes) + ws_round(e->wf_bytes) + ws_round(e->qff_bytes) +
                  ws_round(wk_bytes) + e->threads * (ws_round(e->b_bytes) + ws_round(e->qf_bytes));
  char *cursor;
  ixl_status st = ixl_ctx_scratch(ctx, IXL_WS_ENGINE_SLOT, total, IXL_HOST, (void **)&cursor);
  if (st) return st;
  e = ws_carve(&cursor, sizeof *e);
  *e = tmp;
  e->qa = ws_carve(&cursor, e->qa_bytes);
  e->qe = ws_carve(&cursor, e->qe_bytes);
  e->fq = ws_carve(&cursor, e->fq_bytes);
  e->wf = ws_carve(&cursor, e->wf_bytes);
  e->qff = ws_carve(&cursor, e->qff_bytes);
  e->wk = ws_carve(&cursor, wk_bytes);
  memset(e->wk, 0, (size_t)wk_bytes);
  for (int t = 0; t < e->threads; t++) {
    e->wk[t].qf_row = -1;
    e->wk[t].b = ws_carve(&cursor, e->b_bytes);
    e->wk[t].qf = ws_carve(&cursor, e->qf_bytes);
  }
  *out = e;
  return IXL_OK;
}

int64_t ixl_engine_chunk_rows(const ixl_engine *e) { return e->chunk_rows; }

static float weight_at(const ixl_engine *e, int64_t r, int64_t h) {
  if (e->reduction == IXL_REDUCE_FP32) return ((const float *)e->w)[r * e->H + h];
  return ixl_bf16_to_f32(((const uint16_t *)e->w)[r * e->H + h]);
}

/* ixl_decode_values through the engine's tables. */
static void decode_values_tab(const ixl_engine *e, const uint8_t *codes, float *out) {
  if (e->fmt == IXL_MXFP4) {
    for (int i = 0; i < IXL_D / 2; i++) {
      out[2 * i] = e->e2m1[codes[i] & 15];
      out[2 * i + 1] = e->e2m1[codes[i] >> 4];
    }
  } else {
    for (int i = 0; i < IXL_D; i++) out[i] = e->e4m3[codes[i]];
  }
}

void ixl_engine_load_rows(ixl_engine *e, int64_t r0, int64_t n) {
  e->r0 = r0;
  e->nrows = n;
  for (int t = 0; t < e->threads; t++) e->wk[t].qf_row = -1;
  const int64_t H = e->H;
#pragma omp parallel for num_threads(e->threads) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    int64_t r = r0 + i;
    for (int64_t h = 0; h < H; h++) e->wf[i * H + h] = weight_at(e, r, h);
    if (!e->fast) continue;
    float v[IXL_D];
    int ff = 0;
    for (int64_t h = 0; h < H; h++) {
      decode_values_tab(e, e->qc + (r * H + h) * e->vb, v);
      float *dst = e->qa + ((i * (H / MR) + h / MR) * IXL_D) * MR + h % MR;
      for (int d = 0; d < IXL_D; d++) dst[d * MR] = v[d];
      if (e->fmt != IXL_FP8) {
        for (int g = 0; g < 4; g++) {
          int b = e->qs[(r * H + h) * 4 + g];
          e->qe[(i * H + h) * 4 + g] = b;
          e->fq[(i * H + h) * 4 + g] = b == IXL_NAN_SCALE ? 0.0f : ldexpf(1.0f, b - 127);
          ff |= b == IXL_NAN_SCALE;
        }
      }
    }
    e->qff[i] = ff;
  }
}

/* ---------------------------------------------------------------- packing keys */
#if IXL_HAVE_X86
#define AVX2 __attribute__((target("avx2,fma")))

/* Transposes a 16 x 16 byte block: dst[j] = column j of the rows src[0..15]. */
AVX2 static inline void transpose16(const __m128i r[16], __m128i w[16]) {
  __m128i t[16], u[16], v[16];
  for (int k = 0; k < 8; k++) {
    t[2 * k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; k++) { /* rows 4k..4k+3 */
    u[4 * k + 0] = _mm_unpacklo_epi16(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm_unpackhi_epi16(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm_unpacklo_epi16(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm_unpackhi_epi16(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int k = 0; k < 2; k++) { /* rows 8k..8k+7 */
    for (int c = 0; c < 4; c++) {
      v[8 * k + 2 * c] = _mm_unpacklo_epi32(u[8 * k + c], u[8 * k + 4 + c]);
      v[8 * k + 2 * c + 1] = _mm_unpackhi_epi32(u[8 * k + c], u[8 * k + 4 + c]);
    }
  }
  for (int c = 0; c < 8; c++) {
    w[2 * c] = _mm_unpacklo_epi64(v[c], v[8 + c]);
    w[2 * c + 1] = _mm_unpackhi_epi64(v[c], v[8 + c]);
  }
}

/* 16 int8 values (twice the e2m1 value) times the keys' factors f0 (keys 0-7), f1 (8-15) -> 16
 * floats at dst. Exact: the factors are powers of two in range (ixl_engine_pack). */
AVX2 static inline void store_e2m1x2(__m128i q, __m256 f0, __m256 f1, float *dst) {
  _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), f0));
  _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), f1));
}

/* mxfp4 strip: 16 keys' 64 code bytes -> [128][16] floats, value * fk[group][key]. */
AVX2 static void pack_strip_mxfp4(const uint8_t *const codes[STRIP], const float fk[4][STRIP], float *dst) {
  /* e2m1 codes 0..15 as twice their value (exact in int8); -0 -> 0 */
  const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i lo4 = _mm_set1_epi8(0x0F);
  for (int blk = 0; blk < 4; blk++) { /* bytes 16 * blk .. + 15 of every key */
    __m128i r[16], w[16];
    for (int i = 0; i < STRIP; i++)
      r[i] = codes[i] ? _mm_loadu_si128((const __m128i *)(codes[i] + 16 * blk)) : _mm_setzero_si128();
    transpose16(r, w);
    /* bytes 16 * blk .. + 15 hold elements 32 * blk .. + 31: group blk */
    const __m256 half = _mm256_set1_ps(0.5f);
    const __m256 f0 = _mm256_mul_ps(half, _mm256_loadu_ps(fk[blk])), f1 = _mm256_mul_ps(half, _mm256_loadu_ps(fk[blk] + 8));
    for (int j = 0; j < 16; j++) { /* byte 16 * blk + j holds elements 2 * that and + 1 */
      int d = 2 * (16 * blk + j);
      store_e2m1x2(_mm_shuffle_epi8(lut, _mm_and_si128(w[j], lo4)), f0, f1, dst + d * STRIP);
      store_e2m1x2(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(w[j], 4), lo4)), f0, f1, dst + (d + 1) * STRIP);
    }
  }
}
#endif

/* One strip of 16 keys (NULL = empty slot, zeros) -> dst [128][16]: value * fk[d / 32][key]. */
static void pack_strip(const ixl_engine *e, const uint8_t *const codes[STRIP], const float fk[4][STRIP],
                       float *dst) {
#if IXL_HAVE_X86
  if (e->fmt == IXL_MXFP4) {
    pack_strip_mxfp4(codes, fk, dst);
    return;
  }
#endif
  for (int i = 0; i < STRIP; i++) {
    const uint8_t *c = codes[i];
    float v[IXL_D];
    if (c) decode_values_tab(e, c, v);
    else memset(v, 0, sizeof v);
    for (int d = 0; d < IXL_D; d++) dst[d * STRIP + i] = v[d] * fk[d / IXL_GROUP][i];
  }
}

/* Packs the keys for the tile kernel. MX blocks are "prescaled" when every key's scale byte ke
 * keeps value * 2^(ke - 127), and every partial sum scaled the same way, rounding exactly as
 * the unscaled ones: then b holds the scaled values, each group partial comes out as
 * p_g * 2^(ke - 127) exactly, and the epilogue's single multiply by 2^(qe - 127) rounds as the
 * reference's p_g * 2^(qe + ke - 254) does. In the normal range scaling by a power of two
 * commutes with rounding. Below it, the partial sums are multiples of 2^-2 (mxfp4) or 2^-18
 * (mxfp8, the smallest product of two e4m3 values), so scaled by 2^(ke - 127) >= 2^-127 they
 * are still multiples of 2^-149 and exact, as the unscaled ones are there. Above it, the
 * partials reach 32 * 36 < 2^11 (mxfp4) and 32 * 448^2 < 2^23 (mxfp8): no overflow for
 * ke <= 244 and ke <= 231. Other blocks keep unscaled values and take the scalar epilogue. */
void ixl_engine_pack(ixl_engine *e, int tid, const ixl_kref *keys, int n) {
  worker *w = &e->wk[tid];
  w->n = n;
  if (!e->fast) {
    memcpy(w->keys, keys, sizeof(ixl_kref) * (size_t)n);
    return;
  }
  const int mx = e->fmt != IXL_FP8;
  int mxb = 0, ff = 0; /* the largest scale byte of the keys present, any 0xFF */
  const int nfull = (n + STRIP - 1) / STRIP * STRIP;
  for (int i = 0; i < nfull; i++) {
    const uint8_t *c = i < n ? keys[i].codes : NULL;
    w->valid[i] = c != NULL;
    if (!c) {
      for (int g = 0; g < 4; g++) w->ke[g][i] = 127;
      w->kscale[i] = 1.0f;
      continue;
    }
    const uint8_t *sc = keys[i].scale;
    if (!mx) {
      w->kscale[i] = ixl_load_f32(sc);
      continue;
    }
    for (int g = 0; g < 4; g++) {
      w->ke[g][i] = sc[g];
      mxb = sc[g] > mxb ? sc[g] : mxb;
      ff |= sc[g] == IXL_NAN_SCALE;
    }
  }
  w->prescaled = mx && !ff && mxb <= (e->fmt == IXL_MXFP4 ? 244 : 231);
  for (int s0 = 0; s0 < nfull; s0 += STRIP) {
    const uint8_t *codes[STRIP];
    float fk[4][STRIP];
    for (int i = 0; i < STRIP; i++) {
      codes[i] = s0 + i < n ? keys[s0 + i].codes : NULL;
      for (int g = 0; g < 4; g++) fk[g][i] = w->prescaled ? ldexpf(1.0f, w->ke[g][s0 + i] - 127) : 1.0f;
    }
    pack_strip(e, codes, fk, w->b + (s0 / STRIP) * IXL_D * STRIP);
  }
}

/* ---------------------------------------------------------------- reference path */
static void row_reference(ixl_engine *e, worker *w, int64_t r, int p0, int p1, float *res) {
  const int64_t H = e->H;
  if (w->qf_row != r) {
    for (int64_t h = 0; h < H; h++)
      ixl_decode_values(e->fmt, e->qc + (r * H + h) * e->vb, w->qf + h * IXL_D);
    w->qf_row = r;
  }
  const float *wt = e->wf + (r - e->r0) * H;
  float kf[IXL_D], dots[128];
  for (int i = p0; i < p1; i++) {
    const ixl_kref *k = &w->keys[i];
    if (!k->codes) {
      res[i - p0] = -INFINITY;
      continue;
    }
    ixl_decode_values(e->fmt, k->codes, kf);
    for (int64_t h = 0; h < H; h++)
      dots[h] = ixl_dot_ref(e->fmt, w->qf + h * IXL_D, e->qs ? e->qs + (r * H + h) * 4 : NULL, kf,
                            k->scale);
    res[i - p0] = ixl_reduce_heads(e->reduction, (int)H, wt, dots);
  }
}

/* ---------------------------------------------------------------- fast path (AVX2 + FMA) */
#if IXL_HAVE_X86
/* Group partials of 4 heads x 16 positions: c[g][i][n] = sum over d in group g of
 * a[d][i] * b[d][n], one fma chain per (g, i, n) in increasing d. glen: 32 (MX) or 128 (fp8). */
AVX2 static void tile_4x16(const float *a, const float *b, int glen, float *c) {
  for (int g0 = 0; g0 < IXL_D; g0 += glen) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    const float *ap = a + g0 * MR, *bp = b + g0 * STRIP;
#pragma GCC unroll 4
    for (int d = 0; d < glen; d++, ap += MR, bp += STRIP) {
      __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
      __m256 a0 = _mm256_broadcast_ss(ap), a1 = _mm256_broadcast_ss(ap + 1);
      __m256 a2 = _mm256_broadcast_ss(ap + 2), a3 = _mm256_broadcast_ss(ap + 3);
      c00 = _mm256_fmadd_ps(a0, b0, c00);
      c01 = _mm256_fmadd_ps(a0, b1, c01);
      c10 = _mm256_fmadd_ps(a1, b0, c10);
      c11 = _mm256_fmadd_ps(a1, b1, c11);
      c20 = _mm256_fmadd_ps(a2, b0, c20);
      c21 = _mm256_fmadd_ps(a2, b1, c21);
      c30 = _mm256_fmadd_ps(a3, b0, c30);
      c31 = _mm256_fmadd_ps(a3, b1, c31);
    }
    float *cc = c + (g0 / glen) * MR * STRIP;
    _mm256_storeu_ps(cc + 0, c00);
    _mm256_storeu_ps(cc + 8, c01);
    _mm256_storeu_ps(cc + 16, c10);
    _mm256_storeu_ps(cc + 24, c11);
    _mm256_storeu_ps(cc + 32, c20);
    _mm256_storeu_ps(cc + 40, c21);
    _mm256_storeu_ps(cc + 48, c30);
    _mm256_storeu_ps(cc + 56, c31);
  }
}

/* relu(x) = x < 0 ? 0 : x: vmaxps returns its second operand when either is NaN or both are
 * zeros, so NaN and -0 pass through as in ixl_relu. */
AVX2 static inline __m256 relu8(__m256 x) { return _mm256_max_ps(_mm256_setzero_ps(), x); }

/* bf16(x) for 8 floats, round to nearest even (NaN lanes are caught by the caller). */
AVX2 static inline __m256 bf16_round8(__m256 x) {
  __m256i b = _mm256_castps_si256(x);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  b = _mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
  return _mm256_castsi256_ps(_mm256_and_si256(b, _mm256_set1_epi32((int)0xffff0000u)));
}

/* bf16_fma(w, v, s) for 8 lanes with one rounding: p = w*v is exact in fp32 when it is a
 * normal number (16 significant bits); TwoSum gives hi + lo = p + s exactly; hi rounds to
 * bf16 by nearest even unless it sits on a midpoint with lo != 0. *bad gets the lanes where
 * the premises fail (p below the normal range with nonzero factors, anything not finite). */
AVX2 static inline __m256 bf16_fma8(__m256 w, __m256 v, __m256 s, int *bad) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 p = _mm256_mul_ps(w, v);
  __m256 hi = _mm256_add_ps(p, s);
  __m256 bb = _mm256_sub_ps(hi, p);
  __m256 lo = _mm256_add_ps(_mm256_sub_ps(p, _mm256_sub_ps(hi, bb)), _mm256_sub_ps(s, bb));
  __m256i hb = _mm256_castps_si256(hi);
  __m256i himask = _mm256_set1_epi32((int)0xffff0000u);
  __m256i trunc = _mm256_and_si256(hb, himask);
  __m256i rnd = _mm256_castps_si256(bf16_round8(hi));
  __m256i mid = _mm256_cmpeq_epi32(_mm256_and_si256(hb, _mm256_set1_epi32(0xffff)),
                                   _mm256_set1_epi32(0x8000));
  __m256i lonz = _mm256_castps_si256(_mm256_cmp_ps(lo, zero, _CMP_NEQ_OQ));
  /* same sign: the exact value lies beyond the midpoint, away from zero */
  __m256i diff = _mm256_srai_epi32(_mm256_xor_si256(hb, _mm256_castps_si256(lo)), 31);
  __m256i away = _mm256_add_epi32(trunc, _mm256_set1_epi32(0x10000));
  __m256i dir = _mm256_blendv_epi8(away, trunc, diff);
  __m256i res = _mm256_blendv_epi8(rnd, dir, _mm256_and_si256(mid, lonz));
  __m256 finite = _mm256_cmp_ps(_mm256_and_ps(hi, absmask), _mm256_set1_ps(FLT_MAX), _CMP_LE_OQ);
  __m256 small = _mm256_cmp_ps(_mm256_and_ps(p, absmask), _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ);
  __m256 zf = _mm256_or_ps(_mm256_cmp_ps(v, zero, _CMP_EQ_OQ), _mm256_cmp_ps(w, zero, _CMP_EQ_OQ));
  __m256 badm = _mm256_or_ps(_mm256_andnot_ps(finite, _mm256_castsi256_ps(_mm256_set1_epi32(-1))),
                             _mm256_andnot_ps(zf, small));
  *bad = _mm256_movemask_ps(badm);
  return _mm256_castsi256_ps(res);
}

/* s = bf16_fma(w, bf16(relu(dot)), s) for 8 positions, exact lane fallback where needed. */
AVX2 static inline void bf16_step8(float wv, __m256 dot, float *s) {
  __m256 sv = _mm256_loadu_ps(s);
  int bad;
  __m256 r = bf16_fma8(_mm256_set1_ps(wv), bf16_round8(relu8(dot)), sv, &bad);
  bad |= _mm256_movemask_ps(_mm256_cmp_ps(dot, dot, _CMP_UNORD_Q));
  if (bad) {
    float dl[8], rl[8];
    _mm256_storeu_ps(dl, dot);
    _mm256_storeu_ps(rl, r);
    for (int l = 0; l < 8; l++)
      if (bad >> l & 1) rl[l] = ixl_bf16_fma_ref(wv, ixl_bf16_roundf(ixl_relu(dl[l])), s[l]);
    r = _mm256_loadu_ps(rl);
  }
  _mm256_storeu_ps(s, r);
}

AVX2 static inline __m256 bf16_add8(__m256 a, __m256 b) {
  int bad;
  __m256 r = bf16_fma8(_mm256_set1_ps(1.0f), a, b, &bad);
  if (bad) {
    float al[8], bl[8], rl[8];
    _mm256_storeu_ps(al, a);
    _mm256_storeu_ps(bl, b);
    _mm256_storeu_ps(rl, r);
    for (int l = 0; l < 8; l++)
      if (bad >> l & 1) rl[l] = ixl_bf16_add_ref(al[l], bl[l]);
    r = _mm256_loadu_ps(rl);
  }
  return r;
}

/* Scalar epilogue of one head tile (keys not prescaled, or a 0xFF scale on the query side):
 * the reference's formula on the tile's partials. */
static void tile_dots_scalar(const ixl_engine *e, const worker *w, int64_t li, int64_t h0,
                             int s0, const float *c, float dots[MR][STRIP]) {
  for (int i = 0; i < MR; i++) {
    const int32_t *qe = e->qe + ((li * e->H) + h0 + i) * 4;
    for (int n = 0; n < STRIP; n++) {
      int slot = s0 + n;
      float pg[4];
      for (int g = 0; g < 4; g++) {
        float p = c[(g * MR + i) * STRIP + n]; /* prescaled: p_g * 2^(ke - 127), exactly */
        int ke = w->ke[g][slot];
        pg[g] = qe[g] == IXL_NAN_SCALE || ke == IXL_NAN_SCALE
                    ? NAN
                    : ixl_scale_pow2f(p, qe[g] - 127 + (w->prescaled ? 0 : ke - 127));
      }
      dots[i][n] = (pg[0] + pg[1]) + (pg[2] + pg[3]);
    }
  }
}

AVX2 static void row_fast(ixl_engine *e, worker *w, int64_t r, int p0, int p1, float *res) {
  const int64_t H = e->H, li = r - e->r0;
  const float *wt = e->wf + li * H;
  const float *qa = e->qa + li * (H / MR) * IXL_D * MR;
  const int mx = e->fmt != IXL_FP8;
  /* prescaled keys and no NaN scale on the query side: one multiply per group partial */
  const int scale_fast = !mx || (w->prescaled && !e->qff[li]);
  const int glen = mx ? IXL_GROUP : IXL_D;
  const int bf16 = e->reduction == IXL_REDUCE_BF16;
  float c[4 * MR * STRIP];
  float dots[MR][STRIP];
  for (int sidx = p0 / STRIP; sidx * STRIP < p1; sidx++) {
    const int s0 = sidx * STRIP;
    int any = 0;
    for (int n = 0; n < STRIP; n++) any |= w->valid[s0 + n];
    if (!any) {
      for (int n = s0 < p0 ? p0 : s0; n < s0 + STRIP && n < p1; n++) res[n - p0] = -INFINITY;
      continue;
    }
    const float *bs = w->b + sidx * IXL_D * STRIP;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float sacc[4][STRIP];
    memset(sacc, 0, sizeof sacc);
    __m256 ksv0 = _mm256_setzero_ps(), ksv1 = _mm256_setzero_ps();
    if (!mx) {
      ksv0 = _mm256_loadu_ps(&w->kscale[s0]);
      ksv1 = _mm256_loadu_ps(&w->kscale[s0 + 8]);
    }
    for (int64_t t = 0; t < H / MR; t++) {
      const int64_t h0 = t * MR;
      tile_4x16(qa + t * IXL_D * MR, bs, glen, c);
      if (mx && !scale_fast) tile_dots_scalar(e, w, li, h0, s0, c, dots);
      for (int i = 0; i < MR; i++) {
        __m256 d0, d1;
        if (!mx) {
          d0 = _mm256_mul_ps(_mm256_loadu_ps(c + i * STRIP), ksv0);
          d1 = _mm256_mul_ps(_mm256_loadu_ps(c + i * STRIP + 8), ksv1);
        } else if (scale_fast) {
          const float *fq = e->fq + (li * H + h0 + i) * 4;
          __m256 x[4][2];
          for (int g = 0; g < 4; g++) {
            __m256 f = _mm256_broadcast_ss(fq + g);
            for (int j = 0; j < 2; j++) x[g][j] = _mm256_mul_ps(_mm256_loadu_ps(c + (g * MR + i) * STRIP + 8 * j), f);
          }
          d0 = _mm256_add_ps(_mm256_add_ps(x[0][0], x[1][0]), _mm256_add_ps(x[2][0], x[3][0]));
          d1 = _mm256_add_ps(_mm256_add_ps(x[0][1], x[1][1]), _mm256_add_ps(x[2][1], x[3][1]));
        } else {
          d0 = _mm256_loadu_ps(dots[i]);
          d1 = _mm256_loadu_ps(dots[i] + 8);
        }
        const float wv = wt[h0 + i];
        if (!bf16) {
          __m256 wb = _mm256_set1_ps(wv);
          acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(wb, relu8(d0)));
          acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(wb, relu8(d1)));
        } else {
          bf16_step8(wv, d0, sacc[i]);
          bf16_step8(wv, d1, sacc[i] + 8);
        }
      }
    }
    float out[STRIP];
    if (!bf16) {
      _mm256_storeu_ps(out, acc0);
      _mm256_storeu_ps(out + 8, acc1);
    } else {
      for (int j = 0; j < 2; j++) {
        __m256 a = bf16_add8(_mm256_loadu_ps(sacc[0] + 8 * j), _mm256_loadu_ps(sacc[2] + 8 * j));
        __m256 b = bf16_add8(_mm256_loadu_ps(sacc[1] + 8 * j), _mm256_loadu_ps(sacc[3] + 8 * j));
        _mm256_storeu_ps(out + 8 * j, bf16_add8(a, b));
      }
    }
    for (int n = s0 < p0 ? p0 : s0; n < s0 + STRIP && n < p1; n++)
      res[n - p0] = w->valid[n] ? out[n - s0] : -INFINITY;
  }
}
#endif

void ixl_engine_row(ixl_engine *e, int tid, int64_t r, int p0, int p1, float *res) {
  worker *w = &e->wk[tid];
#if IXL_HAVE_X86
  if (e->fast) {
    row_fast(e, w, r, p0, p1, res);
    return;
  }
#endif
  row_reference(e, w, r, p0, p1, res);
}

/* ---------------------------------------------------------------- shared argument checks */
static const char *fmt_name(int fmt) {
  return fmt == IXL_MXFP4 ? "mxfp4" : fmt == IXL_MXFP8 ? "mxfp8" : fmt == IXL_FP8 ? "fp8" : "?";
}

/* A 2-D tensor whose dtype the reduction fixes (F32 for fp32, BF16 for bf16), with `rows`
 * rows and, when cols >= 0, `cols` columns: the weights and the outputs of K1/K2. */
static ixl_status check_reduction_tensor(ixl_ctx *ctx, const ixl_tensor *t, const char *name,
                                         ixl_reduction reduction, int64_t rows, int64_t cols) {
  ixl_status st;
  int dt = reduction == IXL_REDUCE_FP32 ? IXL_F32 : IXL_BF16;
  if (t && t->dtype != dt)
    return ixl_set_error(ctx, IXL_ERR_DTYPE, "%s: dtype %s, expected %s for the %s reduction", name,
                         ixl_dtype_name((ixl_dtype)t->dtype), ixl_dtype_name((ixl_dtype)dt),
                         reduction == IXL_REDUCE_FP32 ? "fp32" : "bf16");
  if ((st = ixl_check_tensor(ctx, t, name, dt, 2)) || (st = ixl_check_dim(ctx, t, name, 0, rows)))
    return st;
  if (cols >= 0 && (st = ixl_check_dim(ctx, t, name, 1, cols))) return st;
  return IXL_OK;
}

ixl_status ixl_check_query(ixl_ctx *ctx, const char *op, const ixl_qk *in,
                           const ixl_tensor *weights, int reduction, int64_t *R, int64_t *H) {
  ixl_status st;
  if (!in) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s: in (the ixl_qk inputs) is NULL", op);
  int fmt = in->kv_format;
  if (fmt != IXL_MXFP4 && fmt != IXL_MXFP8 && fmt != IXL_FP8)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: kv_format = %d: must be mxfp4 (0), mxfp8 (1) or fp8 (2)", op, fmt);
  if (reduction != IXL_REDUCE_FP32 && reduction != IXL_REDUCE_BF16)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s: reduction = %d: must be fp32 (0) or bf16 (1)",
                         op, reduction);
  int vb = ixl_format_value_bytes((ixl_kv_format)fmt);
  if ((st = ixl_check_tensor(ctx, in->q_codes, "q_codes", IXL_U8, 3))) return st;
  if (in->q_codes->shape[2] != vb)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "q_codes: shape[2] = %lld, expected %d (the value bytes of %s)",
                         (long long)in->q_codes->shape[2], vb, fmt_name(fmt));
  *R = in->q_codes->shape[0];
  *H = in->q_codes->shape[1];
  if (*H < 4 || *H > 128 || *H % 4)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "q_codes: shape[1] (H) = %lld: must be a multiple of 4 in [4, 128]",
                         (long long)*H);
  if (fmt == IXL_FP8) {
    if (in->q_scales)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "q_scales: must be NULL for fp8 (the Q scale is folded into the weights by "
                           "ixl_prepare_weights)");
  } else {
    if ((st = ixl_check_tensor(ctx, in->q_scales, "q_scales", IXL_I32, 2)) ||
        (st = ixl_check_dim(ctx, in->q_scales, "q_scales", 0, *R)) ||
        (st = ixl_check_dim(ctx, in->q_scales, "q_scales", 1, *H)))
      return st;
  }
  return check_reduction_tensor(ctx, weights, "weights", reduction, *R, *H);
}

/* Ragged K: k_codes U8 [N, VB] and k_scales [N]; returns N. */
static ixl_status check_ragged_k(ixl_ctx *ctx, const char *op, const ixl_qk *in, int64_t *N) {
  ixl_status st;
  int fmt = in->kv_format, vb = ixl_format_value_bytes((ixl_kv_format)fmt);
  if (in->k_pages)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: k_pages must be NULL for ragged rows (the keys come from k_codes)", op);
  if ((st = ixl_check_tensor(ctx, in->k_codes, "k_codes", IXL_U8, 2))) return st;
  if (in->k_codes->shape[1] != vb)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "k_codes: shape[1] = %lld, expected %d (the value bytes of %s)",
                         (long long)in->k_codes->shape[1], vb, fmt_name(fmt));
  *N = in->k_codes->shape[0];
  if ((st = ixl_check_tensor(ctx, in->k_scales, "k_scales", fmt == IXL_FP8 ? IXL_F32 : IXL_I32, 1)) ||
      (st = ixl_check_dim(ctx, in->k_scales, "k_scales", 0, *N)))
    return st;
  return IXL_OK;
}

ixl_status ixl_check_pages(ixl_ctx *ctx, const char *op, const ixl_qk *in, int64_t *num_pages,
                           int64_t *stride) {
  ixl_status st;
  int vb = ixl_format_value_bytes((ixl_kv_format)in->kv_format);
  if (in->k_codes || in->k_scales)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "%s: k_codes and k_scales must be NULL for paged rows (the keys come from k_pages)",
                         op);
  if ((st = ixl_check_tensor(ctx, in->k_pages, "k_pages", IXL_U8, 2))) return st;
  if (in->page_size <= 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "page_size = %d: must be > 0", (int)in->page_size);
  *num_pages = in->k_pages->shape[0];
  *stride = in->k_pages->shape[1];
  int64_t need = (int64_t)in->page_size * (vb + 4);
  if (*stride < need || *stride % 512)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "k_pages: shape[1] (page stride) = %lld: must be a multiple of 512 and >= "
                         "page_size * %d = %lld",
                         (long long)*stride, vb + 4, (long long)need);
  return IXL_OK;
}

ixl_status ixl_check_block_table(ixl_ctx *ctx, const char *lens_name, const int32_t *lens,
                                 const int32_t *bt, int64_t R, int64_t max_pages, int page_size,
                                 int64_t num_pages) {
  for (int64_t r = 0; r < R; r++) {
    if (lens[r] < 0 || (int64_t)lens[r] > max_pages * page_size)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "%s[%lld] = %d: must be in [0, max_pages * page_size] = [0, %lld] "
                           "(block_table shape[1] = %lld)",
                           lens_name, (long long)r, lens[r], (long long)(max_pages * page_size),
                           (long long)max_pages);
    int64_t used = ixl_ceil_div(lens[r], page_size);
    for (int64_t j = 0; j < used; j++) {
      int32_t p = bt[r * max_pages + j];
      if (p < 0 || p >= num_pages)
        return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                             "block_table[%lld][%lld] = %d: must be in [0, num_pages) = [0, %lld) "
                             "(row %lld uses %lld pages)",
                             (long long)r, (long long)j, p, (long long)num_pages, (long long)r,
                             (long long)used);
    }
  }
  return IXL_OK;
}

/* Ragged row ranges: 0 <= ks <= ke <= N. */
static ixl_status check_ranges(ixl_ctx *ctx, const int32_t *ks, const int32_t *ke, int64_t R,
                               int64_t N, const char *ks_name, const char *ke_name) {
  for (int64_t r = 0; r < R; r++) {
    if (ks[r] < 0)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s[%lld] = %d: must be >= 0", ks_name,
                           (long long)r, ks[r]);
    if (ke[r] > N)
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "%s[%lld] = %d: must be <= N (%lld), the rows of k_codes", ke_name,
                           (long long)r, ke[r], (long long)N);
    if (ke[r] < ks[r])
      return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                           "%s[%lld] = %d < %s[%lld] = %d: a row's range must not be reversed",
                           ke_name, (long long)r, ke[r], ks_name, (long long)r, ks[r]);
  }
  return IXL_OK;
}

/* Every element of a 2-D F32/BF16 output to -inf. */
static void fill_neg_inf(ixl_tensor *out, int threads) {
  (void)threads; /* unused when the compiler ignores OpenMP */
  int64_t n = ixl_tensor_numel(out);
  if (out->dtype == IXL_F32) {
    float *p = out->data;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) p[i] = -INFINITY;
  } else {
    uint16_t *p = out->data;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) p[i] = 0xFF80;
  }
}

static inline void store_logits(ixl_tensor *out, int64_t idx, const float *res, int n) {
  if (out->dtype == IXL_F32) {
    memcpy((float *)out->data + idx, res, sizeof(float) * (size_t)n);
  } else {
    uint16_t *p = (uint16_t *)out->data + idx;
    for (int i = 0; i < n; i++) p[i] = ixl_f32_to_bf16(res[i]); /* exact: res holds bf16 values */
  }
}

/* ---------------------------------------------------------------- K1 */
ixl_status ixl_dense_logits_path(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                 const ixl_tensor *ks, const ixl_tensor *ke, ixl_layout layout,
                                 int clean, ixl_reduction reduction, ixl_tensor *out, int path) {
  ixl_status st;
  int64_t R, H, N;
  if ((st = ixl_check_query(ctx, "dense_logits", in, weights, reduction, &R, &H)) ||
      (st = check_ragged_k(ctx, "dense_logits", in, &N)))
    return st;
  if ((st = ixl_check_tensor(ctx, ks, "ks", IXL_I32, 1)) || (st = ixl_check_dim(ctx, ks, "ks", 0, R)) ||
      (st = ixl_check_tensor(ctx, ke, "ke", IXL_I32, 1)) || (st = ixl_check_dim(ctx, ke, "ke", 0, R)))
    return st;
  if (layout != IXL_LAYOUT_FULL && layout != IXL_LAYOUT_COMPRESSED)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "layout = %d: must be full (0) or compressed (1)",
                         (int)layout);
  if ((st = check_reduction_tensor(ctx, out, "out", reduction, R, -1))) return st;
  if (layout == IXL_LAYOUT_FULL && out->shape[1] != N)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "out: shape[1] = %lld, expected N = %lld (the rows of k_codes) in the full layout",
                         (long long)out->shape[1], (long long)N);
  const ixl_tensor *all[] = {in->q_codes, in->q_scales, in->k_codes, in->k_scales, weights, ks, ke, out};
  const char *names[] = {"q_codes", "q_scales", "k_codes", "k_scales", "weights", "ks", "ke", "out"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 8, all, names, 7)))
    return st;
  if (dev == IXL_DEVICE)
    return ixl_cuda_dense_logits(ctx, in, weights, ks, ke, layout, clean, reduction, out);
  (void)clean; /* the CPU always writes -inf outside [ks, ke) (SPEC leaves it open unclean) */

  const int32_t *ksp = ks->data, *kep = ke->data;
  if ((st = check_ranges(ctx, ksp, kep, R, N, "ks", "ke"))) return st;
  const int64_t max_len = out->shape[1];
  if (layout == IXL_LAYOUT_COMPRESSED)
    for (int64_t r = 0; r < R; r++)
      if (kep[r] - ksp[r] > max_len)
        return ixl_set_error(ctx, IXL_ERR_SHAPE,
                             "ke[%lld] - ks[%lld] = %d: must be <= max_len = %lld (out shape[1]) in "
                             "the compressed layout",
                             (long long)r, (long long)r, kep[r] - ksp[r], (long long)max_len);
  const int threads = ixl_ctx_threads(ctx);
  fill_neg_inf(out, threads);
  if (R == 0 || N == 0) return IXL_OK;
  ixl_engine *e;
  if ((st = ixl_engine_new(ctx, in->kv_format, reduction, in->q_codes, in->q_scales, weights, threads,
                           path, &e)))
    return st;
  const int64_t vb = in->k_codes->shape[1];
  const uint8_t *kc = in->k_codes->data;
  const uint8_t *ksc = in->k_scales->data;
  const int64_t cr = ixl_engine_chunk_rows(e);
  for (int64_t r0 = 0; r0 < R; r0 += cr) {
    int64_t nr = R - r0 < cr ? R - r0 : cr;
    int64_t lo = N, hi = 0;
    for (int64_t r = r0; r < r0 + nr; r++)
      if (kep[r] > ksp[r]) {
        lo = ksp[r] < lo ? ksp[r] : lo;
        hi = kep[r] > hi ? kep[r] : hi;
      }
    if (lo >= hi) continue;
    ixl_engine_load_rows(e, r0, nr);
    const int64_t b0 = lo / IXL_KBLOCK, b1 = (hi - 1) / IXL_KBLOCK;
#pragma omp parallel num_threads(threads)
    {
      const int tid = omp_get_thread_num();
      ixl_kref keys[IXL_KBLOCK];
      float res[IXL_KBLOCK];
#pragma omp for schedule(dynamic, 1)
      for (int64_t b = b0; b <= b1; b++) {
        const int64_t n0 = b * IXL_KBLOCK, n1 = n0 + IXL_KBLOCK < N ? n0 + IXL_KBLOCK : N;
        int used = 0;
        for (int64_t r = r0; r < r0 + nr && !used; r++) used = ksp[r] < n1 && kep[r] > n0;
        if (!used) continue;
        for (int64_t n = n0; n < n1; n++) {
          keys[n - n0].codes = kc + n * vb;
          keys[n - n0].scale = ksc + n * 4;
        }
        ixl_engine_pack(e, tid, keys, (int)(n1 - n0));
        for (int64_t r = r0; r < r0 + nr; r++) {
          int64_t a = ksp[r] > n0 ? ksp[r] : n0, z = kep[r] < n1 ? kep[r] : n1;
          if (a >= z) continue;
          ixl_engine_row(e, tid, r, (int)(a - n0), (int)(z - n0), res);
          int64_t col = layout == IXL_LAYOUT_FULL ? a : a - ksp[r];
          store_logits(out, r * max_len + col, res, (int)(z - a));
        }
      }
    }
  }
  ixl_engine_free(e);
  return IXL_OK;
}

ixl_status ixl_dense_logits(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                            const ixl_tensor *ks, const ixl_tensor *ke, ixl_layout layout,
                            int clean, ixl_reduction reduction, ixl_tensor *out) {
  return ixl_dense_logits_path(ctx, in, weights, ks, ke, layout, clean, reduction, out,
                               IXL_PATH_AUTO);
}

/* ---------------------------------------------------------------- K2 */
ixl_status ixl_dense_logits_paged_path(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                       const ixl_tensor *context_lens,
                                       const ixl_tensor *block_table, ixl_reduction reduction,
                                       ixl_tensor *out, int path) {
  ixl_status st;
  int64_t R, H, num_pages, stride;
  if ((st = ixl_check_query(ctx, "dense_logits_paged", in, weights, reduction, &R, &H)) ||
      (st = ixl_check_pages(ctx, "dense_logits_paged", in, &num_pages, &stride)))
    return st;
  if ((st = ixl_check_tensor(ctx, context_lens, "context_lens", IXL_I32, 1)) ||
      (st = ixl_check_dim(ctx, context_lens, "context_lens", 0, R)) ||
      (st = ixl_check_tensor(ctx, block_table, "block_table", IXL_I32, 2)) ||
      (st = ixl_check_dim(ctx, block_table, "block_table", 0, R)))
    return st;
  if ((st = check_reduction_tensor(ctx, out, "out", reduction, R, -1))) return st;
  const ixl_tensor *all[] = {in->q_codes, in->q_scales, in->k_pages, weights, context_lens, block_table, out};
  const char *names[] = {"q_codes", "q_scales", "k_pages", "weights", "context_lens", "block_table", "out"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 7, all, names, 6)))
    return st;
  if (dev == IXL_DEVICE)
    return ixl_cuda_dense_logits_paged(ctx, in, weights, context_lens, block_table, reduction, out);

  const int32_t *lens = context_lens->data, *bt = block_table->data;
  const int64_t max_pages = block_table->shape[1], max_len = out->shape[1];
  const int P = in->page_size;
  if ((st = ixl_check_block_table(ctx, "context_lens", lens, bt, R, max_pages, P, num_pages))) return st;
  for (int64_t r = 0; r < R; r++)
    if (lens[r] > max_len)
      return ixl_set_error(ctx, IXL_ERR_SHAPE, "context_lens[%lld] = %d: must be <= max_len = %lld (out shape[1])",
                           (long long)r, lens[r], (long long)max_len);
  const int threads = ixl_ctx_threads(ctx);
  fill_neg_inf(out, threads);
  if (R == 0) return IXL_OK;
  ixl_engine *e;
  if ((st = ixl_engine_new(ctx, in->kv_format, reduction, in->q_codes, in->q_scales, weights, threads,
                           path, &e)))
    return st;
  const int64_t vb = ixl_format_value_bytes((ixl_kv_format)in->kv_format);
  const uint8_t *pages = in->k_pages->data;
  const int64_t cr = ixl_engine_chunk_rows(e);
  /* tasks are (row, block of positions); first[i] = the first task of row r0 + i */
  int64_t *first, first_bytes = (cr + 1) * (int64_t)sizeof(int64_t);
  if ((st = ixl_ctx_scratch(ctx, IXL_WS_PREFIX_SLOT, first_bytes, IXL_HOST, (void **)&first))) {
    ixl_engine_free(e);
    return st;
  }
  for (int64_t r0 = 0; r0 < R; r0 += cr) {
    int64_t nr = R - r0 < cr ? R - r0 : cr;
    first[0] = 0;
    for (int64_t i = 0; i < nr; i++) first[i + 1] = first[i] + ixl_ceil_div(lens[r0 + i], IXL_KBLOCK);
    const int64_t ntask = first[nr];
    if (ntask == 0) continue;
    ixl_engine_load_rows(e, r0, nr);
#pragma omp parallel num_threads(threads)
    {
      const int tid = omp_get_thread_num();
      ixl_kref keys[IXL_KBLOCK];
      float res[IXL_KBLOCK];
      /* no assumption on the order a thread gets its tasks (dynamic is nonmonotonic) */
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < ntask; t++) {
        int64_t lo = 0, hi = nr; /* the row i with first[i] <= t < first[i + 1] */
        while (hi - lo > 1) {
          int64_t mid = (lo + hi) / 2;
          if (first[mid] <= t) lo = mid;
          else hi = mid;
        }
        const int64_t row = r0 + lo;
        const int64_t p0 = (t - first[lo]) * IXL_KBLOCK;
        const int64_t p1 = p0 + IXL_KBLOCK < lens[row] ? p0 + IXL_KBLOCK : lens[row];
        for (int64_t p = p0; p < p1; p++) {
          const uint8_t *base = pages + (int64_t)bt[row * max_pages + p / P] * stride;
          keys[p - p0].codes = base + (p % P) * vb;
          keys[p - p0].scale = base + (int64_t)P * vb + (p % P) * 4;
        }
        ixl_engine_pack(e, tid, keys, (int)(p1 - p0));
        ixl_engine_row(e, tid, row, 0, (int)(p1 - p0), res);
        store_logits(out, row * max_len + p0, res, (int)(p1 - p0));
      }
    }
  }
  ixl_engine_free(e);
  return IXL_OK;
}

ixl_status ixl_dense_logits_paged(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                  const ixl_tensor *context_lens, const ixl_tensor *block_table,
                                  ixl_reduction reduction, ixl_tensor *out) {
  return ixl_dense_logits_paged_path(ctx, in, weights, context_lens, block_table, reduction, out,
                                     IXL_PATH_AUTO);
}

/* ---------------------------------------------------------------- test hook */
#if IXL_HAVE_X86
AVX2 static void bf16_fma_batch_avx2(const float *w, const float *v, const float *s, float *out,
                                     int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int bad;
    __m256 r = bf16_fma8(_mm256_loadu_ps(w + i), _mm256_loadu_ps(v + i), _mm256_loadu_ps(s + i), &bad);
    _mm256_storeu_ps(out + i, r);
    for (int l = 0; l < 8; l++)
      if (bad >> l & 1) out[i + l] = ixl_bf16_fma_ref(w[i + l], v[i + l], s[i + l]);
  }
  for (; i < n; i++) out[i] = ixl_bf16_fma_ref(w[i], v[i], s[i]);
}
#endif

int ixl_bf16_fma_batch(const float *w, const float *v, const float *s, float *out, int64_t n) {
#if IXL_HAVE_X86
  if (cpu_has_avx2_fma()) {
    bf16_fma_batch_avx2(w, v, s, out, n);
    return 1;
  }
#endif
  for (int64_t i = 0; i < n; i++) out[i] = ixl_bf16_fma_ref(w[i], v[i], s[i]);
  return 0;
}

/* ---------------------------------------------------------------- benchmark helper */
#if IXL_HAVE_X86
/* 10 independent 8-wide fma chains (2 ports x 4 cycles of latency need 8). The seeds come
 * through a volatile pointer and differ, so the compiler can neither merge the chains nor
 * hoist the call out of a timing loop. */
AVX2 __attribute__((noinline)) static double fma_loop(int64_t iters, const volatile float *seed) {
  __m256 a0 = _mm256_set1_ps(seed[0]), a1 = _mm256_set1_ps(seed[1]), a2 = _mm256_set1_ps(seed[2]),
         a3 = _mm256_set1_ps(seed[3]), a4 = _mm256_set1_ps(seed[4]), a5 = _mm256_set1_ps(seed[5]),
         a6 = _mm256_set1_ps(seed[6]), a7 = _mm256_set1_ps(seed[7]), a8 = _mm256_set1_ps(seed[8]),
         a9 = _mm256_set1_ps(seed[9]);
  const __m256 m = _mm256_set1_ps(seed[10]), c = _mm256_set1_ps(seed[11]);
  for (int64_t i = 0; i < iters; i++) {
    a0 = _mm256_fmadd_ps(a0, m, c);
    a1 = _mm256_fmadd_ps(a1, m, c);
    a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c);
    a4 = _mm256_fmadd_ps(a4, m, c);
    a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c);
    a7 = _mm256_fmadd_ps(a7, m, c);
    a8 = _mm256_fmadd_ps(a8, m, c);
    a9 = _mm256_fmadd_ps(a9, m, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
  float o[8];
  _mm256_storeu_ps(o, s);
  return o[0];
}
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double ixl_bench_fma_peak_gflops(int threads, double seconds) {
#if IXL_HAVE_X86
  if (!cpu_has_avx2_fma()) return 0.0;
  if (threads < 1) threads = 1;
  /* Each thread runs slices of 2^14 iterations (10 * 8 * 2 * 2^14 = 2.6 MFLOP) until `seconds`
   * have passed; the rate is the total over the whole interval, so it is measured the way a
   * kernel call of the same duration is. */
  const int64_t iters = 1 << 14;
  static const volatile float seed[12] = {1.0f, 1.1f, 1.2f, 1.3f, 1.4f, 1.5f, 1.6f, 1.7f, 1.8f, 1.9f, 0.999999f, 1e-7f};
  double sink = 0.0, flops = 0.0;
  const double t0 = now_s(), t_end = t0 + seconds;
#pragma omp parallel num_threads(threads) reduction(+ : sink, flops)
  {
    do {
      sink += fma_loop(iters, seed);
      flops += (double)iters * 160.0;
    } while (now_s() < t_end);
  }
  const double dt = now_s() - t0;
  return sink == 12345.0 ? 0.0 : flops / dt * 1e-9; /* the test keeps the loop's result alive */
#else
  (void)threads;
  (void)seconds;
  return 0.0;
#endif
}
