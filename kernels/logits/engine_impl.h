/* logits/engine_impl.h - the CPU logits engine's private state, shared by its two halves:
 * engine.c (state, packing, the reference path) and engine_avx2.c (the AVX2 + FMA fast path).
 * Nothing outside those two files includes it; kernels use logits/engine.h. */
#ifndef IXL_ENGINE_IMPL_H
#define IXL_ENGINE_IMPL_H

#include "logits/engine.h"

#define STRIP 16                        /* positions per register tile */
#define NSTRIPS (IXL_KBLOCK / STRIP)
#define MR 4                            /* heads per register tile */

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

/* ixl_decode_values through the engine's tables. */
static inline void ixl_engine_decode_tab(const ixl_engine *e, const uint8_t *codes, float *out) {
  if (e->fmt == IXL_MXFP4) {
    for (int i = 0; i < IXL_D / 2; i++) {
      out[2 * i] = e->e2m1[codes[i] & 15];
      out[2 * i + 1] = e->e2m1[codes[i] >> 4];
    }
  } else {
    for (int i = 0; i < IXL_D; i++) out[i] = e->e4m3[codes[i]];
  }
}

/* engine_avx2.c. Only called when ixl_engine_fast_available() said 1 (e->fast). */
/* mxfp4 strip: 16 keys' 64 code bytes -> [128][16] floats, value * fk[group][key]. */
void ixl_engine_pack_strip_mxfp4(const uint8_t *const codes[STRIP], const float fk[4][STRIP],
                                 float *dst);
/* The fast path's ixl_engine_row. */
void ixl_engine_row_fast(ixl_engine *e, worker *w, int64_t r, int p0, int p1, float *res);

#endif
