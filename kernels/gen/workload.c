/* workload.c - the structured synthetic workload generator: knob defaults and checks, the
 * per-batch plan (topic spans, needles, preferred topics, head strengths, channel factors),
 * and the CPU generation of q, weights and k. The per-element math lives in
 * kernels/gen/workload_math.h, shared with the CUDA path (kernels/gen/workload.cu), so both
 * backends give the same bits. The model is described in docs/workload.md. */
#include "internal.h"
#include "gen/workload_math.h"
#include "ops.h"

#include <math.h>
#include <string.h>

/* Limits that keep the plan's integer math exact and its tables small. */
#define WL_MAX_TOPICS 4096
#define WL_MAX_PREF 64
#define WL_MAX_NEEDLES 4096
#define WL_MAX_LAYERS 1024
#define WL_MAX_POSITIONS ((int64_t)1 << 31)

void ixl_workload_defaults(ixl_workload_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->sinks = 4;
  p->sink_strength = 16.0f;
  p->locality = 10.0f;
  p->locality_window = 256;
  p->topics = 8;
  p->topic_strength = 2.0f;
  p->topics_per_query = 2;
  p->needles = 1;
  p->needle_strength = 32.0f;
  p->needle_source = 1.0f;
  p->noise = 6.0f;
  p->key_noise = 2.0f;
  p->head_spread = 0.5f;
  p->weight_spread = 0.3f;
  p->layer_correlation = 0.4f;
  p->activation_scale = 1.0f;
  p->outlier_channels = 2;
  p->outlier_scale = 16.0f;
}

static ixl_status check_float(ixl_ctx *ctx, const char *name, float v, float lo, float hi) {
  /* Written so that NaN fails. */
  if (!(v >= lo && v <= hi))
    return ixl_set_error(ctx, IXL_ERR_CONFIG, "workload %s = %g: must be in [%g, %g]", name,
                         (double)v, (double)lo, (double)hi);
  return IXL_OK;
}

static ixl_status check_int(ixl_ctx *ctx, const char *name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    return ixl_set_error(ctx, IXL_ERR_CONFIG, "workload %s = %lld: must be in [%lld, %lld]", name,
                         (long long)v, (long long)lo, (long long)hi);
  return IXL_OK;
}

ixl_status ixl_workload_check(ixl_ctx *ctx, const ixl_workload_params *p) {
  if (!p) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "workload params: NULL");
  const float big = 1e6f;
  ixl_status st;
  if ((st = check_int(ctx, "sinks", p->sinks, 0, WL_MAX_POSITIONS))) return st;
  if ((st = check_float(ctx, "sink_strength", p->sink_strength, 0, big))) return st;
  if ((st = check_float(ctx, "locality", p->locality, 0, big))) return st;
  /* The anchor spacing must be exact as a float (window_f). */
  if ((st = check_int(ctx, "locality_window", p->locality_window, 1, (int64_t)1 << 24))) return st;
  if ((st = check_int(ctx, "topics", p->topics, 0, WL_MAX_TOPICS))) return st;
  if ((st = check_float(ctx, "topic_strength", p->topic_strength, 0, big))) return st;
  if ((st = check_int(ctx, "topics_per_query", p->topics_per_query, 0, WL_MAX_PREF))) return st;
  if ((st = check_int(ctx, "needles", p->needles, 0, WL_MAX_NEEDLES))) return st;
  if ((st = check_float(ctx, "needle_strength", p->needle_strength, 0, big))) return st;
  if ((st = check_float(ctx, "needle_source", p->needle_source, 0, 1))) return st;
  if ((st = check_float(ctx, "noise", p->noise, 0, big))) return st;
  if ((st = check_float(ctx, "key_noise", p->key_noise, 0, big))) return st;
  if ((st = check_float(ctx, "head_spread", p->head_spread, 0, big))) return st;
  if ((st = check_float(ctx, "weight_spread", p->weight_spread, 0, big))) return st;
  if ((st = check_float(ctx, "layer_correlation", p->layer_correlation, 0, 1))) return st;
  if (!(p->activation_scale > 0 && p->activation_scale <= big))
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "workload activation_scale = %g: must be in (0, %g]",
                         (double)p->activation_scale, (double)big);
  if ((st = check_int(ctx, "outlier_channels", p->outlier_channels, 0, 1 << 20))) return st;
  if ((st = check_float(ctx, "outlier_scale", p->outlier_scale, 1, big))) return st;
  return IXL_OK;
}

/* ---------------------------------------------------------------- the plan */

static uint32_t plan_bits(const wl_plan *p, uint32_t tag, uint32_t req, uint32_t c1, uint32_t c0,
                          int word) {
  const uint32_t ctr[4] = {c0, c1, req, tag};
  uint32_t r[4];
  ixl_philox_block(ctr, p->key0, p->key1, r);
  return r[word];
}

/* Bytes at `*off`, aligned to 8, overflow-checked. */
static int blob_take(int64_t *off, int64_t count, int64_t size, int64_t *at) {
  int64_t bytes;
  if (!ixl_mul_ok(count, size, &bytes)) return 0;
  *at = (*off + 7) & ~(int64_t)7;
  return ixl_add_ok(*at, bytes, off);
}

/* Validates the batch and builds the plan: *blob (host, counted) holds everything but the
 * direction tables. The caller frees it with ixl_host_free(ctx, *blob, plan->blob_bytes). */
static ixl_status build_plan(ixl_ctx *ctx, const ixl_workload_params *wp,
                             const ixl_workload_request *reqs, int32_t n, uint64_t seed,
                             int64_t R, int64_t N, int64_t H, int64_t D, int64_t layers,
                             wl_plan *p, unsigned char **blob_out) {
  *blob_out = NULL;
  ixl_status st = ixl_workload_check(ctx, wp);
  if (st) return st;
  if (n < 0) return ixl_set_error(ctx, IXL_ERR_BATCH, "n_requests = %d: must be >= 0", n);
  if (n > 0 && !reqs)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "requests: NULL with n_requests = %d", n);
  if (D < 4 || D % 4 != 0 || D > 65536)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "head_dim = %lld: must be a multiple of 4 in [4, 65536]", (long long)D);
  if (H < 1 || H > 65536)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "heads = %lld: must be in [1, 65536]", (long long)H);
  if (wp->outlier_channels > D)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "workload outlier_channels = %lld: must be <= head_dim (%lld)",
                         (long long)wp->outlier_channels, (long long)D);
  if ((int64_t)H * (D / 2) > (int64_t)UINT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_SHAPE, "heads * head_dim = %lld: too large",
                         (long long)(H * D));
  int64_t k_end = 0, row_end = 0, n_anchor = 0, n_topic = 0, n_needle = 0;
  for (int32_t i = 0; i < n; i++) {
    const ixl_workload_request *q = &reqs[i];
    /* seq_len = 0 is a decode request whose indexer cache is empty (SPEC 4's empty row): no
     * keys, and its one row is generated as a row no request covers (zero q and weights),
     * since it has nothing to score. */
    if (q->seq_len < 0 || q->seq_len >= WL_MAX_POSITIONS)
      return ixl_set_error(ctx, IXL_ERR_BATCH, "request %d: seq_len = %lld: must be in [0, 2^31)",
                           i, (long long)q->seq_len);
    if (q->seq_len == 0 && q->query_len != 1)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "request %d: query_len = %lld with seq_len = 0: must be 1 (an empty "
                           "request is one decode row)",
                           i, (long long)q->query_len);
    if (q->seq_len > 0 && (q->query_len < 1 || q->query_len > q->seq_len))
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "request %d: query_len = %lld: must be in [1, seq_len (%lld)]", i,
                           (long long)q->query_len, (long long)q->seq_len);
    if (q->k_start < k_end)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "request %d: k_start = %lld: must be >= %lld (requests ascend without "
                           "overlapping)", i, (long long)q->k_start, (long long)k_end);
    if (q->k_start > N - q->seq_len)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "request %d: keys [%lld, %lld) lie outside k's %lld rows", i,
                           (long long)q->k_start, (long long)(q->k_start + q->seq_len),
                           (long long)N);
    if (q->first_row < row_end)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "request %d: first_row = %lld: must be >= %lld (requests ascend "
                           "without overlapping)", i, (long long)q->first_row, (long long)row_end);
    if (q->first_row > R - q->query_len)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "request %d: rows [%lld, %lld) lie outside q's %lld rows", i,
                           (long long)q->first_row, (long long)(q->first_row + q->query_len),
                           (long long)R);
    k_end = q->k_start + q->seq_len;
    row_end = q->first_row + q->query_len;
    /* an empty request gets 1 or 2 anchors ((-1) / window truncates to 0 or -1): unused */
    n_anchor += (q->seq_len - 1) / wp->locality_window + 2;
    n_topic += q->seq_len < wp->topics ? q->seq_len : wp->topics;
    n_needle += wp->needles; /* an upper bound here; the exact count comes below */
  }
  memset(p, 0, sizeof *p);
  p->key0 = (uint32_t)seed;
  p->key1 = (uint32_t)(seed >> 32);
  p->D = (int32_t)D;
  p->H = (int32_t)H;
  p->layers = (int32_t)layers;
  /* Rows prefer at most as many topics as there are. */
  p->pref_stride = (int32_t)(wp->topics_per_query < wp->topics ? wp->topics_per_query : wp->topics);
  p->n_req = n;
  p->R = R;
  p->N = N;
  p->window = wp->locality_window;
  p->sinks = wp->sinks;
  p->window_f = (float)wp->locality_window;
  p->rinv_d = (float)(1.0 / sqrt((double)D));
  /* Noise vectors are scaled like the unit directions: norm about key_noise (noise). */
  p->key_noise = (float)((double)wp->key_noise / sqrt((double)D));
  p->noise = (float)((double)wp->noise / sqrt(2.0 * (double)D)); /* two draws summed */
  p->rho = wp->layer_correlation;
  p->rho_c = (float)sqrt(1.0 - (double)wp->layer_correlation * (double)wp->layer_correlation);
  p->w_scale = (float)(1.0 / sqrt((double)H * (double)D));
  p->w_spread = wp->weight_spread;
  p->n_anchor = n_anchor;
  p->n_topic = n_topic;

  int64_t off = 0;
  int ok = blob_take(&off, n, sizeof(wl_req), &p->off_req) &&
           blob_take(&off, n_topic, 8, &p->off_tstart) &&
           blob_take(&off, n_needle, 8, &p->off_npos) &&
           blob_take(&off, n_needle, 8, &p->off_nrow) &&
           blob_take(&off, R, 4, &p->off_rowreq) &&
           blob_take(&off, R * (int64_t)p->pref_stride, 4, &p->off_pref) &&
           blob_take(&off, R, 4, &p->off_tcoef) &&
           blob_take(&off, layers * H, 16, &p->off_coef) &&
           blob_take(&off, D, 4, &p->off_kf) &&
           blob_take(&off, D, 4, &p->off_qf);
  if (!ok)
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "workload plan for %lld rows and %d requests: size "
                         "overflows", (long long)R, n);
  p->blob_bytes = (off + 7) & ~(int64_t)7;
  unsigned char *blob;
  if ((st = ixl_host_alloc(ctx, p->blob_bytes, (void **)&blob))) return st;
  memset(blob, 0, (size_t)p->blob_bytes);
  wl_req *rq = (wl_req *)(blob + p->off_req);
  int64_t *tstart = (int64_t *)(blob + p->off_tstart);
  int64_t *npos = (int64_t *)(blob + p->off_npos);
  int64_t *nrow = (int64_t *)(blob + p->off_nrow);
  int32_t *rowreq = (int32_t *)(blob + p->off_rowreq);
  int32_t *pref = (int32_t *)(blob + p->off_pref);
  float *tcoef = (float *)(blob + p->off_tcoef);
  float *coef = (float *)(blob + p->off_coef);
  float *kf = (float *)(blob + p->off_kf);
  float *qf = (float *)(blob + p->off_qf);

  for (int64_t r = 0; r < R; r++) rowreq[r] = -1;
  for (int64_t i = 0; i < R * (int64_t)p->pref_stride; i++) pref[i] = -1;
  int64_t a0 = 0, t0 = 0, n0 = 0;
  for (int32_t i = 0; i < n; i++) {
    const ixl_workload_request *q = &reqs[i];
    wl_req *w = &rq[i];
    w->k_start = q->k_start;
    w->seq_len = q->seq_len;
    w->query_len = q->query_len;
    w->first_row = q->first_row;
    w->anchor0 = a0;
    w->topic0 = t0;
    w->needle0 = n0;
    a0 += (q->seq_len - 1) / wp->locality_window + 2;

    /* Topic spans: random lengths from weights in [2^15, 3 * 2^15); integer math, so exact. */
    int32_t nt = (int32_t)(q->seq_len < wp->topics ? q->seq_len : wp->topics);
    w->n_topics = nt;
    if (nt > 0) {
      int64_t wsum[WL_MAX_TOPICS + 1];
      wsum[0] = 0;
      for (int32_t t = 0; t < nt; t++)
        wsum[t + 1] = wsum[t] + 32768 + wl_below(plan_bits(p, WL_TAG_PLAN_TOPIC, (uint32_t)i, 0,
                                                           (uint32_t)t, 0), 65536);
      /* Spans stay non-empty: with nt <= seq_len, start t lies in [t, seq_len - nt + t]. */
      for (int32_t t = 0; t < nt; t++) {
        int64_t s = (q->seq_len - nt) * wsum[t] / wsum[nt] + t;
        tstart[t0 + t] = s;
      }
    }

    /* Needles: distinct positions far from the query rows (outside the sinks and the window
     * before the first query row when the request is long enough). */
    int64_t qpos = q->seq_len - q->query_len;
    int64_t lo = wp->sinks, hi = qpos - wp->locality_window;
    if (hi <= lo) hi = qpos;
    if (hi <= lo) lo = 0;
    int64_t cnt = hi > lo ? (hi - lo < wp->needles ? hi - lo : wp->needles) : 0;
    int64_t *np = npos + n0, *nr = nrow + n0;
    int64_t got = 0;
    for (uint32_t draw = 0; got < cnt && draw < 64u * (uint32_t)cnt + 64u; draw++) {
      const uint32_t ctr[4] = {draw, 0, (uint32_t)i, WL_TAG_PLAN_NEEDLE};
      uint32_t bits[4];
      ixl_philox_block(ctr, p->key0, p->key1, bits);
      int64_t pos = lo + (int64_t)wl_below(bits[0], (uint32_t)(hi - lo));
      int dup = 0;
      for (int64_t j = 0; j < got; j++) dup |= np[j] == pos;
      if (dup) continue;
      np[got] = pos;
      nr[got] = (int64_t)wl_below(bits[1], (uint32_t)q->query_len);
      got++;
    }
    for (int64_t pos = lo; got < cnt && pos < hi; pos++) { /* only if the draws ran out */
      int dup = 0;
      for (int64_t j = 0; j < got; j++) dup |= np[j] == pos;
      if (!dup) {
        np[got] = pos;
        nr[got] = 0;
        got++;
      }
    }
    for (int64_t a = 1; a < got; a++) /* ascending positions, for the keys' binary search */
      for (int64_t b = a; b > 0 && np[b - 1] > np[b]; b--) {
        int64_t t = np[b]; np[b] = np[b - 1]; np[b - 1] = t;
        t = nr[b]; nr[b] = nr[b - 1]; nr[b - 1] = t;
      }
    w->n_needles = (int32_t)got;

    /* Rows: request, preferred topics among those the row sees. An empty request's row
     * keeps rowreq = -1 (zeros): its query would sit at position -1. */
    for (int64_t j = 0; q->seq_len > 0 && j < q->query_len; j++) {
      int64_t row = q->first_row + j, pos = qpos + j;
      rowreq[row] = i;
      if (nt == 0) continue;
      int32_t vis = (int32_t)wl_topic_of(tstart + t0, nt, pos) + 1;
      int32_t want = p->pref_stride < vis ? p->pref_stride : vis;
      int32_t *pr = pref + row * p->pref_stride;
      int32_t have = 0;
      for (uint32_t draw = 0; have < want; draw++) {
        int32_t t = draw < 64u * (uint32_t)want
                        ? (int32_t)wl_below(plan_bits(p, WL_TAG_PLAN_PREF, (uint32_t)i,
                                                      (uint32_t)j, draw, 0), (uint32_t)vis)
                        : (int32_t)(draw % (uint32_t)vis);
        int dup = 0;
        for (int32_t k = 0; k < have; k++) dup |= pr[k] == t;
        if (!dup) pr[have++] = t;
      }
      tcoef[row] = (float)(1.0 / sqrt((double)want));
    }
    t0 += nt;
    n0 += got;
  }
  p->n_needle = n0;

  /* Head strengths: strength * max(0, 1 + head_spread * z), z drawn per layer and head and
   * mixed with the source's by layer_correlation. */
  const float strength[4] = {wp->sinks > 0 ? wp->sink_strength / WL_SPLIT_KEY : 0.0f,
                             wp->locality, wp->topics > 0 ? wp->topic_strength : 0.0f,
                             wp->needle_strength / WL_SPLIT_KEY};
  for (int64_t l = 0; l < layers; l++)
    for (int64_t h = 0; h < H; h++)
      for (int f = 0; f < 4; f++) {
        float z, unused;
        wl_layer_normal2(p, (int)l, (uint32_t)(h * 4 + f), 0, 0, WL_TAG_GAIN, &z, &unused);
        float g = 1.0f + wp->head_spread * z;
        if (g < 0) g = 0;
        float c = strength[f] * g;
        if (f == 3 && l == 0) c *= wp->needle_source;
        coef[(l * H + h) * 4 + f] = c;
      }

  /* Activation scales: the element RMS of k and q is activation_scale outside outliers. */
  double kvar = 1.0 + (wp->topics > 0 ? 1.0 : 0.0) + (double)wp->key_noise * wp->key_noise;
  /* Needles are left out of the query's scale: they touch one row per request. */
  double qvar = (double)strength[0] * strength[0] + (double)strength[1] * strength[1] +
                (double)strength[2] * strength[2] + (double)wp->noise * wp->noise;
  float kscale = (float)(wp->activation_scale / sqrt(kvar / (double)D));
  float qscale = qvar > 0 ? (float)(wp->activation_scale / sqrt(qvar / (double)D))
                          : wp->activation_scale;
  for (int64_t d = 0; d < D; d++) {
    kf[d] = kscale;
    qf[d] = qscale;
  }
  /* Outlier channels: distinct, marked with a sentinel first (kf < 0 never happens otherwise). */
  for (int64_t c = 0, draw = 0; c < wp->outlier_channels; draw++) {
    int64_t ch = draw < 64 * D ? (int64_t)wl_below(plan_bits(p, WL_TAG_PLAN_OUTLIER, 0, 0,
                                                              (uint32_t)draw, 0), (uint32_t)D)
                               : draw % D;
    if (kf[ch] < 0) continue;
    kf[ch] = -1.0f;
    c++;
  }
  for (int64_t d = 0; d < D; d++)
    if (kf[d] < 0) {
      kf[d] = kscale * wp->outlier_scale;
      qf[d] = qscale / wp->outlier_scale;
    }
  *blob_out = blob;
  return IXL_OK;
}

/* ---------------------------------------------------------------- CPU generation */

static ixl_status generate_cpu(ixl_ctx *ctx, const wl_plan *p, const unsigned char *blob,
                               ixl_tensor *q, ixl_tensor *weights, ixl_tensor *k,
                               ixl_tensor *q_consumer, ixl_tensor *weights_consumer) {
  const int64_t D = p->D, H = p->H;
  int64_t n_vec = p->n_anchor + p->n_topic + p->n_needle + 1, tab_elems, tab_bytes;
  if (!ixl_mul_ok(n_vec, D, &tab_elems) || !ixl_mul_ok(tab_elems, 4, &tab_bytes))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "workload tables of %lld vectors: too large",
                         (long long)n_vec);
  float *tables;
  ixl_status st = ixl_host_alloc(ctx, tab_bytes, (void **)&tables);
  if (st) return st;
  const int threads = ixl_ctx_threads(ctx);
  (void)threads; /* unused where the compiler runs OpenMP pragmas serially */
  const wl_req *rq = (const wl_req *)(blob + p->off_req);

#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t v = 0; v < n_vec; v++) wl_table_row(p, blob, v, tables + v * D, 0, (int)D);

  float *kd = (float *)k->data;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t n = 0; n < p->N; n++) {
    /* The request holding key n: the last whose k_start <= n, if n is inside it. */
    int32_t lo = 0, hi = p->n_req - 1;
    while (lo < hi) {
      int32_t mid = (lo + hi + 1) >> 1;
      if (rq[mid].k_start <= n) lo = mid; else hi = mid - 1;
    }
    float *out = kd + n * D;
    if (p->n_req > 0 && n >= rq[lo].k_start && n < rq[lo].k_start + rq[lo].seq_len)
      wl_key_elems(p, blob, tables, lo, n - rq[lo].k_start, out, 0, (int)D);
    else
      for (int64_t d = 0; d < D; d++) out[d] = 0.0f;
  }

  const int64_t rows = (int64_t)p->layers * p->R;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t lr = 0; lr < rows; lr++) {
    int layer = (int)(lr / p->R);
    int64_t row = lr % p->R;
    float *qo = layer == 0 ? (float *)q->data + row * H * D
                           : (float *)q_consumer->data + ((layer - 1) * p->R + row) * H * D;
    float *wo = layer == 0 ? (float *)weights->data + row * H
                           : (float *)weights_consumer->data + ((layer - 1) * p->R + row) * H;
    for (int h = 0; h < H; h++)
      wl_query_elems(p, blob, tables, layer, row, h, qo + h * D, 0, (int)D);
    for (int h = 0; h < H; h += 2) wl_weight_pair(p, blob, layer, row, h, wo + h);
  }
  ixl_host_free(ctx, tables, tab_bytes);
  return IXL_OK;
}

ixl_status ixl_workload_generate(ixl_ctx *ctx, const ixl_workload_params *wp,
                                 const ixl_workload_request *requests, int32_t n_requests,
                                 uint64_t seed, ixl_tensor *q, ixl_tensor *weights, ixl_tensor *k,
                                 ixl_tensor *q_consumer, ixl_tensor *weights_consumer) {
  ixl_status st;
  if ((st = ixl_check_tensor(ctx, q, "q", IXL_F32, 3))) return st;
  if ((st = ixl_check_tensor(ctx, k, "k", IXL_F32, 2))) return st;
  if ((st = ixl_check_tensor(ctx, weights, "weights", IXL_F32, 2))) return st;
  const int64_t R = q->shape[0], H = q->shape[1], D = q->shape[2], N = k->shape[0];
  if ((st = ixl_check_dim(ctx, k, "k", 1, D))) return st;
  if ((st = ixl_check_dim(ctx, weights, "weights", 0, R))) return st;
  if ((st = ixl_check_dim(ctx, weights, "weights", 1, H))) return st;
  if (!q_consumer != !weights_consumer)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "q_consumer and weights_consumer: give both or neither (got %s only)",
                         q_consumer ? "q_consumer" : "weights_consumer");
  int64_t L = 0;
  if (q_consumer) {
    if ((st = ixl_check_tensor(ctx, q_consumer, "q_consumer", IXL_F32, 4))) return st;
    if ((st = ixl_check_tensor(ctx, weights_consumer, "weights_consumer", IXL_F32, 3))) return st;
    L = q_consumer->shape[0];
    if (L < 1 || L > WL_MAX_LAYERS)
      return ixl_set_error(ctx, IXL_ERR_SHAPE, "q_consumer: shape[0] = %lld consumer layers: must "
                           "be in [1, %d]", (long long)L, WL_MAX_LAYERS);
    if ((st = ixl_check_dim(ctx, q_consumer, "q_consumer", 1, R)) ||
        (st = ixl_check_dim(ctx, q_consumer, "q_consumer", 2, H)) ||
        (st = ixl_check_dim(ctx, q_consumer, "q_consumer", 3, D)) ||
        (st = ixl_check_dim(ctx, weights_consumer, "weights_consumer", 0, L)) ||
        (st = ixl_check_dim(ctx, weights_consumer, "weights_consumer", 1, R)) ||
        (st = ixl_check_dim(ctx, weights_consumer, "weights_consumer", 2, H)))
      return st;
  }
  int device;
  const ixl_tensor *const ts[] = {q, weights, k, q_consumer, weights_consumer};
  const char *const names[] = {"q", "weights", "k", "q_consumer", "weights_consumer"};
  if ((st = ixl_check_op(ctx, &device, 5, ts, names, 0)))
    return st;

  wl_plan plan;
  unsigned char *blob;
  if ((st = build_plan(ctx, wp, requests, n_requests, seed, R, N, H, D, L + 1, &plan, &blob)))
    return st;
  if (device == IXL_DEVICE)
    st = ixl_cuda_workload_generate(ctx, &plan, blob, q, weights, k, q_consumer, weights_consumer);
  else
    st = generate_cpu(ctx, &plan, blob, q, weights, k, q_consumer, weights_consumer);
  ixl_host_free(ctx, blob, plan.blob_bytes);
  return st;
}

ixl_status ixl_workload_structure(ixl_ctx *ctx, const ixl_workload_params *wp,
                                  const ixl_workload_request *requests, int32_t n_requests,
                                  uint64_t seed, int32_t request, int64_t *topic_starts,
                                  int32_t max_topics, int32_t *n_topics, int64_t *needle_pos,
                                  int64_t *needle_rows, int32_t max_needles, int32_t *n_needles) {
  if (n_requests < 0 || request < 0 || request >= n_requests)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "request = %d: must be in [0, n_requests (%d))",
                         request, n_requests);
  if (!requests)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "requests: NULL with n_requests = %d",
                         n_requests);
  /* The structure does not depend on the tensors: size them just to hold the batch. */
  int64_t R = 0, N = 0;
  for (int32_t i = 0; i < n_requests; i++) {
    int64_t re, ke;
    if (!ixl_add_ok(requests[i].first_row, requests[i].query_len, &re) ||
        !ixl_add_ok(requests[i].k_start, requests[i].seq_len, &ke))
      return ixl_set_error(ctx, IXL_ERR_BATCH, "request %d: negative or overflowing ranges", i);
    if (re > R) R = re;
    if (ke > N) N = ke;
  }
  wl_plan plan;
  unsigned char *blob;
  /* the structure does not depend on H or D; D only has to hold the outlier channels */
  const int64_t D = wp->outlier_channels > 4 ? (wp->outlier_channels + 3) / 4 * 4 : 4;
  ixl_status st = build_plan(ctx, wp, requests, n_requests, seed, R, N, 4, D, 1, &plan, &blob);
  if (st) return st;
  const wl_req *rq = (const wl_req *)(blob + plan.off_req) + request;
  const int64_t *ts = (const int64_t *)(blob + plan.off_tstart) + rq->topic0;
  const int64_t *np = (const int64_t *)(blob + plan.off_npos) + rq->needle0;
  const int64_t *nr = (const int64_t *)(blob + plan.off_nrow) + rq->needle0;
  if (n_topics) *n_topics = rq->n_topics;
  if (n_needles) *n_needles = rq->n_needles;
  for (int32_t t = 0; topic_starts && t < rq->n_topics && t < max_topics; t++)
    topic_starts[t] = ts[t];
  for (int32_t i = 0; i < rq->n_needles && i < max_needles; i++) {
    if (needle_pos) needle_pos[i] = np[i];
    if (needle_rows) needle_rows[i] = nr[i];
  }
  ixl_host_free(ctx, blob, plan.blob_bytes);
  return IXL_OK;
}
