/* logits/engine.c - the CPU logits engine that K1, K2 and K5 share: its state (carved from the
 * context's scratch), the query rows, the packing of key blocks, and the reference path.
 *
 * Two paths compute the same bits (logits/engine.h fixes the arithmetic):
 * - the reference path (here): per position and head, ixl_dot_ref then ixl_reduce_heads. It is
 *   the definition, written to be read;
 * - the fast path (engine_avx2.c, AVX2 + FMA): register tiles over strips of 16 positions,
 *   bitwise equal to the reference (its header says why).
 * Which path runs is the caller's choice (the logits variants `ref` and `fast`); the fast path
 * is refused, never silently replaced, on a CPU without AVX2 and FMA. */
#include "logits/engine_impl.h"

#include <omp.h>
#include <stdlib.h>

/* The engine is carved out of its scratch slot (engine.h) in one piece; the carve keeps every
 * piece 64-byte aligned. */

static int64_t ws_round(int64_t bytes) { return (bytes + 63) & ~(int64_t)63; }

/* Takes `bytes` from *cursor (NULL for 0 bytes). */
static void *ws_carve(char **cursor, int64_t bytes) {
  if (bytes == 0) return NULL;
  void *p = *cursor;
  *cursor += ws_round(bytes);
  return p;
}

ixl_status ixl_engine_new(ixl_ctx *ctx, int fmt, int reduction, const ixl_tensor *q_codes,
                          const ixl_tensor *q_scales, const ixl_tensor *weights, int threads,
                          int path, ixl_engine **out) {
  *out = NULL;
  if (path == IXL_PATH_FAST && !ixl_engine_fast_available())
    return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED,
                         "logits: the fast CPU path needs AVX2 and FMA, which this CPU lacks "
                         "(the ref path runs everywhere)");
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
  e->fast = path == IXL_PATH_FAST;
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
      ixl_engine_decode_tab(e, e->qc + (r * H + h) * e->vb, v);
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

/* One strip of 16 keys (NULL = empty slot, zeros) -> dst [128][16]: value * fk[d / 32][key]. */
static void pack_strip(const ixl_engine *e, const uint8_t *const codes[STRIP],
                       const float fk[4][STRIP], float *dst) {
#if IXL_HAVE_X86
  if (e->fmt == IXL_MXFP4) {
    ixl_engine_pack_strip_mxfp4(codes, fk, dst);
    return;
  }
#endif
  for (int i = 0; i < STRIP; i++) {
    const uint8_t *c = codes[i];
    float v[IXL_D];
    if (c) ixl_engine_decode_tab(e, c, v);
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
      for (int g = 0; g < 4; g++)
        fk[g][i] = w->prescaled ? ldexpf(1.0f, w->ke[g][s0 + i] - 127) : 1.0f;
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

void ixl_engine_row(ixl_engine *e, int tid, int64_t r, int p0, int p1, float *res) {
  worker *w = &e->wk[tid];
  if (e->fast) {
    ixl_engine_row_fast(e, w, r, p0, p1, res);
    return;
  }
  row_reference(e, w, r, p0, p1, res);
}
