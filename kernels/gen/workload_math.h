/* workload_math.h - the synthetic workload generator's per-element math (SPEC-free: the model
 * is described in docs/workload.md). One copy, compiled for the host by kernels/gen/workload.c
 * and for the device by kernels/gen/workload.cu, so both backends give the same floats bit for
 * bit:
 * - random bits come from Philox4x32-10 (numerics/philox.h, Random123's function, as cuRAND's
 *   PHILOX4_32_10), keyed by the seed, with counters that name what is drawn (see wl_tag);
 * - the float math uses only +, -, *, / and sqrt, each rounded once: the exact-op macros of
 *   numerics/exact.h (plain C11 without contraction on the host, the __f*_rn intrinsics on
 *   the device, which nvcc never fuses);
 * - integers become floats only below 2^24, where the conversion is exact;
 * - every constant that needs more (1/sqrt(D), head gains, scales) is computed once on the
 *   host and handed to both backends in wl_plan / the plan blob.
 * Normal variates are Irwin-Hall sums of four 16-bit uniforms (mean 0, variance 1, tails cut
 * at +-3.46): exact integer sums, then one rounded multiply, so no log/cos is needed. */
#ifndef IXL_WORKLOAD_MATH_H
#define IXL_WORKLOAD_MATH_H

#include <stdint.h>

#include "idxlab.h"

#include "numerics/philox.h"

/* What a Philox counter draws: counter = {c0, c1, c2, tag | layer << 8}. */
enum wl_tag {
  WL_TAG_PLAN_TOPIC = 1,  /* c2 request, c0 topic: span length weight */
  WL_TAG_PLAN_NEEDLE = 2, /* c2 request, c0 draw: needle position and target row */
  WL_TAG_PLAN_PREF = 3,   /* c2 request, c1 local row, c0 draw: preferred topics */
  WL_TAG_PLAN_OUTLIER = 4,/* c0 draw: outlier channels */
  WL_TAG_GAIN = 5,        /* c0 head * 4 + feature (layer in the tag) */
  WL_TAG_SINK = 6,        /* c0 pair: the sink direction */
  WL_TAG_ANCHOR = 7,      /* c2 request, c1 anchor, c0 pair: positional directions */
  WL_TAG_TOPIC = 8,       /* c2 request, c1 topic, c0 pair: topic directions */
  WL_TAG_NEEDLE = 9,      /* c2 request, c1 needle, c0 pair: needle directions */
  WL_TAG_KNOISE = 10,     /* c2 request, c1 position, c0 pair: key noise */
  WL_TAG_QNOISE = 11,     /* c2 request, c1 local row, c0 head * D/2 + pair (layer in tag) */
  WL_TAG_WNOISE = 12,     /* c2 request, c1 local row, c0 head pair (layer in tag) */
  WL_TAG_QCONTENT = 13    /* c2 request, c1 local row, c0 pair: query noise every head shares */
};

/* 1 / the standard deviation of a sum of four uniform integers in [0, 65535]:
 * sqrt(3 / (2^32 - 1)). */
#define WL_IH_SCALE 2.6428997921303018e-05f

IXL_NUM_FN float wl_ih(uint32_t a, uint32_t b) {
  /* The sum of four 16-bit halves minus its mean 4 * 32767.5 is an integer below 2^18 in
   * magnitude, so the float conversion is exact. */
  int32_t s = (int32_t)((a & 0xffffu) + (a >> 16) + (b & 0xffffu) + (b >> 16)) - 131070;
  return IXL_FMUL((float)s, WL_IH_SCALE);
}

/* Two standard normals from one Philox block. */
IXL_NUM_FN void wl_normal2(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                      uint32_t k1, float *z0, float *z1) {
  const uint32_t ctr[4] = {c0, c1, c2, c3};
  uint32_t r[4];
  ixl_philox_block(ctr, k0, k1, r);
  *z0 = wl_ih(r[0], r[1]);
  *z1 = wl_ih(r[2], r[3]);
}

/* A uniform integer in [0, n) from 32 random bits (n < 2^32; the bias is below n / 2^32). */
IXL_NUM_FN uint32_t wl_below(uint32_t bits, uint32_t n) {
  return (uint32_t)(((uint64_t)bits * n) >> 32);
}

/* ---------------------------------------------------------------- the plan
 * Everything about a batch that is not per element: computed on the host (kernels/gen/workload.c),
 * copied as one blob to the device for the CUDA path. Offsets are in bytes into the blob. */
typedef struct wl_req {
  int64_t k_start, seq_len, query_len, first_row;
  int64_t anchor0;  /* its first anchor vector in the anchor table */
  int64_t topic0;   /* its first topic (span start and direction) */
  int64_t needle0;  /* its first needle */
  int32_t n_topics; /* spans; fewer than the knob for a request shorter than it */
  int32_t n_needles;
} wl_req;

typedef struct wl_plan {
  uint32_t key0, key1; /* the seed */
  int32_t D, H;
  int32_t layers;      /* 1 + consumer layers */
  int32_t pref_stride; /* topics_per_query: preferred-topic slots per row */
  int32_t n_req;
  int32_t pad_;
  int64_t R, N;
  int64_t window;      /* locality_window: anchor spacing */
  int64_t sinks;
  float window_f;      /* window as a float (exact below 2^24, checked) */
  float rinv_d;        /* 1 / sqrt(D): a unit vector's elements are N(0,1) * rinv_d */
  float key_noise, noise; /* per-element noise scales: key_noise / sqrt(D), noise / sqrt(2D) */
  float rho, rho_c;    /* layer_correlation and sqrt(1 - rho^2) */
  float w_scale, w_spread;
  /* Table sizes (vectors of D floats), in table order: anchors, topics, needles, sink. */
  int64_t n_anchor, n_topic, n_needle;
  /* Blob offsets. */
  int64_t off_req;     /* wl_req [n_req] */
  int64_t off_tstart;  /* int64 [n_topic]: each topic's first position (request-local) */
  int64_t off_npos;    /* int64 [n_needle]: needle positions, ascending per request */
  int64_t off_nrow;    /* int64 [n_needle]: the request-local row that wants each needle */
  int64_t off_rowreq;  /* int32 [R]: request of each row, -1 for rows no request covers */
  int64_t off_pref;    /* int32 [R * pref_stride]: preferred topics (request-local), -1 pads */
  int64_t off_tcoef;   /* float [R]: 1 / sqrt(count of the row's preferred topics) */
  int64_t off_coef;    /* float [layers * H * 4]: per head, the strength times the head's gain
                        * of: sink, locality, topic, needle (sink and needle strengths divided
                        * by WL_SPLIT_KEY) */
  int64_t off_kf;      /* float [D]: per-channel key factor (activation scale, outliers) */
  int64_t off_qf;      /* float [D]: per-channel query factor */
  int64_t blob_bytes;
} wl_plan;

#define WL_PTR(type, blob, off) ((const type *)((const unsigned char *)(blob) + (off)))

/* Fills table row `v` (0 .. n_anchor + n_topic + n_needle, then the sink) of D floats. */
IXL_NUM_FN void wl_table_row(const wl_plan *p, const void *blob, int64_t v, float *out, int d0,
                        int d1) {
  uint32_t tag, req = 0, item = 0;
  const wl_req *rq = WL_PTR(wl_req, blob, p->off_req);
  if (v < p->n_anchor + p->n_topic + p->n_needle) {
    int64_t base;
    if (v < p->n_anchor) {
      tag = WL_TAG_ANCHOR;
      base = v;
    } else if (v < p->n_anchor + p->n_topic) {
      tag = WL_TAG_TOPIC;
      base = v - p->n_anchor;
    } else {
      tag = WL_TAG_NEEDLE;
      base = v - p->n_anchor - p->n_topic;
    }
    /* Find the request owning this row of its kind's table (requests in order). */
    int lo = 0, hi = p->n_req - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) >> 1;
      int64_t first = tag == WL_TAG_ANCHOR ? rq[mid].anchor0
                      : tag == WL_TAG_TOPIC ? rq[mid].topic0 : rq[mid].needle0;
      if (first <= base) lo = mid; else hi = mid - 1;
    }
    int64_t first = tag == WL_TAG_ANCHOR ? rq[lo].anchor0
                    : tag == WL_TAG_TOPIC ? rq[lo].topic0 : rq[lo].needle0;
    req = (uint32_t)lo;
    item = (uint32_t)(base - first);
  } else {
    tag = WL_TAG_SINK;
  }
  for (int d = d0; d < d1; d += 2) {
    float z0, z1;
    wl_normal2((uint32_t)(d >> 1), item, req, tag, p->key0, p->key1, &z0, &z1);
    out[d] = IXL_FMUL(z0, p->rinv_d);
    out[d + 1] = IXL_FMUL(z1, p->rinv_d);
  }
}

/* The positional direction at request-local position m: the anchors j = m / window and j + 1
 * mixed linearly, renormalised so its length stays about 1. */
typedef struct wl_locmix {
  int64_t j;
  float c0, c1;
} wl_locmix;

IXL_NUM_FN wl_locmix wl_locality_mix(const wl_plan *p, int64_t m) {
  wl_locmix r;
  r.j = m / p->window;
  float t = IXL_FDIV((float)(m - r.j * p->window), p->window_f);
  float a = IXL_FSUB(1.0f, t);
  float inv = IXL_FDIV(1.0f, IXL_FSQRT(IXL_FADD(IXL_FMUL(a, a), IXL_FMUL(t, t))));
  r.c0 = IXL_FMUL(a, inv);
  r.c1 = IXL_FMUL(t, inv);
  return r;
}

/* The topic span holding position m: the last topic whose start is <= m. */
IXL_NUM_FN int64_t wl_topic_of(const int64_t *tstart, int32_t n, int64_t m) {
  int32_t lo = 0, hi = n - 1;
  while (lo < hi) {
    int32_t mid = (lo + hi + 1) >> 1;
    if (tstart[mid] <= m) lo = mid; else hi = mid - 1;
  }
  return lo;
}

/* The needle at position m of a request (-1 if none); positions ascend. */
IXL_NUM_FN int64_t wl_needle_at(const int64_t *npos, int32_t n, int64_t m) {
  int32_t lo = 0, hi = n;
  while (lo < hi) {
    int32_t mid = (lo + hi) >> 1;
    if (npos[mid] < m) lo = mid + 1; else hi = mid;
  }
  return lo < n && npos[lo] == m ? lo : -1;
}

/* The length of a sink or needle key's own direction; a query carries strength / WL_SPLIT_KEY
 * of it. Splitting the product keeps both the query's chance overlaps with other keys and the
 * special key's chance overlaps with other queries small next to the signal. */
#define WL_SPLIT_KEY 2.0f

/* Key k[n, d0..d1) (d0, d1 even) of request r at request-local position m:
 *   k = kf[d] * (L(m) + T(topic of m) + [m < sinks] WL_SPLIT_KEY E
 *                + [needle at m] WL_SPLIT_KEY U + key_noise * z). */
IXL_NUM_FN void wl_key_elems(const wl_plan *p, const void *blob, const float *tables, int32_t r,
                        int64_t m, float *out, int d0, int d1) {
  const wl_req *rq = WL_PTR(wl_req, blob, p->off_req) + r;
  const float *kf = WL_PTR(float, blob, p->off_kf);
  const int D = p->D;
  wl_locmix lm = wl_locality_mix(p, m);
  const float *a0 = tables + (rq->anchor0 + lm.j) * D;
  const float *a1 = a0 + D;
  const float *tv = 0, *nv = 0, *sv = 0;
  if (rq->n_topics > 0) {
    int64_t t = wl_topic_of(WL_PTR(int64_t, blob, p->off_tstart) + rq->topic0, rq->n_topics, m);
    tv = tables + (p->n_anchor + rq->topic0 + t) * D;
  }
  if (rq->n_needles > 0) {
    int64_t nd = wl_needle_at(WL_PTR(int64_t, blob, p->off_npos) + rq->needle0, rq->n_needles, m);
    if (nd >= 0) nv = tables + (p->n_anchor + p->n_topic + rq->needle0 + nd) * D;
  }
  if (m < p->sinks) sv = tables + (p->n_anchor + p->n_topic + p->n_needle) * D;
  for (int d = d0; d < d1; d += 2) {
    float z[2];
    wl_normal2((uint32_t)(d >> 1), (uint32_t)m, (uint32_t)r, WL_TAG_KNOISE, p->key0, p->key1,
               &z[0], &z[1]);
    for (int e = 0; e < 2; e++) {
      int c = d + e;
      float v = IXL_FADD(IXL_FMUL(a0[c], lm.c0), IXL_FMUL(a1[c], lm.c1));
      if (tv) v = IXL_FADD(v, tv[c]);
      if (sv) v = IXL_FADD(v, IXL_FMUL(WL_SPLIT_KEY, sv[c]));
      if (nv) v = IXL_FADD(v, IXL_FMUL(WL_SPLIT_KEY, nv[c]));
      v = IXL_FADD(v, IXL_FMUL(p->key_noise, z[e]));
      out[c] = IXL_FMUL(v, kf[c]);
    }
  }
}

/* The noise of layer `layer`: the source's draw, mixed with the layer's own for consumers. */
IXL_NUM_FN void wl_layer_normal2(const wl_plan *p, int layer, uint32_t c0, uint32_t c1, uint32_t c2,
                            uint32_t tag, float *z0, float *z1) {
  wl_normal2(c0, c1, c2, tag, p->key0, p->key1, z0, z1);
  if (layer > 0) {
    float y0, y1;
    wl_normal2(c0, c1, c2, tag | ((uint32_t)layer << 8), p->key0, p->key1, &y0, &y1);
    *z0 = IXL_FADD(IXL_FMUL(p->rho, *z0), IXL_FMUL(p->rho_c, y0));
    *z1 = IXL_FADD(IXL_FMUL(p->rho, *z1), IXL_FMUL(p->rho_c, y1));
  }
}

/* Query q[layer, row, head, d0..d1) (d0, d1 even):
 *   q = qf[d] * (cs E + cl L(pos) + ct * tcoef * sum of preferred T + cn * sum of wanted U
 *                + noise * (z_head + z_row)),
 * where z_row, the query's content, is the same for every head of the layer, so it moves the
 * layer's logits coherently (z_head averages out over heads);
 * with cs, cl, ct, cn the layer's per-head coefficients. Rows no request covers are zeros. */
IXL_NUM_FN void wl_query_elems(const wl_plan *p, const void *blob, const float *tables, int layer,
                          int64_t row, int h, float *out, int d0, int d1) {
  int32_t r = WL_PTR(int32_t, blob, p->off_rowreq)[row];
  if (r < 0) {
    for (int d = d0; d < d1; d++) out[d] = 0.0f;
    return;
  }
  const wl_req *rq = WL_PTR(wl_req, blob, p->off_req) + r;
  const float *qf = WL_PTR(float, blob, p->off_qf);
  const float *coef = WL_PTR(float, blob, p->off_coef) + ((int64_t)layer * p->H + h) * 4;
  const int D = p->D;
  int64_t jr = row - rq->first_row;
  int64_t pos = rq->seq_len - rq->query_len + jr;
  wl_locmix lm = wl_locality_mix(p, pos);
  const float *a0 = tables + (rq->anchor0 + lm.j) * D;
  const float *a1 = a0 + D;
  const float *sv = tables + (p->n_anchor + p->n_topic + p->n_needle) * D;
  const int32_t *pref = WL_PTR(int32_t, blob, p->off_pref) + row * p->pref_stride;
  float tcoef = WL_PTR(float, blob, p->off_tcoef)[row];
  const int64_t *nrow = WL_PTR(int64_t, blob, p->off_nrow) + rq->needle0;
  const float *nbase = tables + (p->n_anchor + p->n_topic + rq->needle0) * D;
  for (int d = d0; d < d1; d += 2) {
    float z[2];
    float y[2];
    wl_layer_normal2(p, layer, (uint32_t)(h * (D >> 1) + (d >> 1)), (uint32_t)jr, (uint32_t)r,
                     WL_TAG_QNOISE, &z[0], &z[1]);
    wl_layer_normal2(p, layer, (uint32_t)(d >> 1), (uint32_t)jr, (uint32_t)r, WL_TAG_QCONTENT,
                     &y[0], &y[1]);
    z[0] = IXL_FADD(z[0], y[0]);
    z[1] = IXL_FADD(z[1], y[1]);
    for (int e = 0; e < 2; e++) {
      int c = d + e;
      float v = IXL_FADD(IXL_FMUL(coef[0], sv[c]),
                       IXL_FMUL(coef[1], IXL_FADD(IXL_FMUL(a0[c], lm.c0), IXL_FMUL(a1[c], lm.c1))));
      if (p->pref_stride > 0 && pref[0] >= 0) {
        float ts = 0.0f;
        for (int i = 0; i < p->pref_stride && pref[i] >= 0; i++)
          ts = IXL_FADD(ts, tables[(p->n_anchor + rq->topic0 + pref[i]) * D + c]);
        v = IXL_FADD(v, IXL_FMUL(coef[2], IXL_FMUL(tcoef, ts)));
      }
      for (int32_t i = 0; i < rq->n_needles; i++)
        if (nrow[i] == jr) v = IXL_FADD(v, IXL_FMUL(coef[3], nbase[(int64_t)i * D + c]));
      v = IXL_FADD(v, IXL_FMUL(p->noise, z[e]));
      out[c] = IXL_FMUL(v, qf[c]);
    }
  }
}

/* Weights w[layer, row, h], h even, two at a time: w_scale * (1 + w_spread * z). */
IXL_NUM_FN void wl_weight_pair(const wl_plan *p, const void *blob, int layer, int64_t row, int h,
                          float *out) {
  int32_t r = WL_PTR(int32_t, blob, p->off_rowreq)[row];
  if (r < 0) {
    out[0] = 0.0f;
    if (h + 1 < p->H) out[1] = 0.0f;
    return;
  }
  const wl_req *rq = WL_PTR(wl_req, blob, p->off_req) + r;
  float z0, z1;
  wl_layer_normal2(p, layer, (uint32_t)(h >> 1), (uint32_t)(row - rq->first_row), (uint32_t)r,
                   WL_TAG_WNOISE, &z0, &z1);
  out[0] = IXL_FMUL(p->w_scale, IXL_FADD(1.0f, IXL_FMUL(p->w_spread, z0)));
  if (h + 1 < p->H) out[1] = IXL_FMUL(p->w_scale, IXL_FADD(1.0f, IXL_FMUL(p->w_spread, z1)));
}

/* The CUDA side, ixl_cuda_workload_generate, is declared in kernels/ops.h (kernels/gen/
 * workload.cu; its CUDA=0 stub is generated in kernels/stubs.c from IXL_CUDA_OPS). The plan
 * and its host blob are already validated and built; the outputs are device tensors. */

#endif
