/* bench_logits.c - times the CUDA logits kernels (K1 dense ragged, K2 dense paged, K5 sparse)
 * at the V4.1-Flash shape (mxfp4, H = 32) and the V3.2 shape (fp8, H = 64), including the
 * peer shapes of GPU.md. Built and run on the GPU machine by bench/bench_logits.sh:
 *
 *   bin/idxlab script bench/cases.lua out=build-gpu/bench_cases.json
 *   gcc -std=c11 -O2 -Iinclude bench/bench_logits.c -o build-gpu/bench_logits \
 *       -Lbuild-gpu -Wl,-rpath,$PWD/build-gpu -lidxlab -lm
 *   build-gpu/bench_logits build-gpu/bench_cases.json [reps [case-substring]] > bench_c.csv
 *   build-gpu/bench_logits --list build-gpu/bench_cases.json   (the cases as read; no GPU)
 *
 * case-substring may be a comma-separated list (a case runs when its name holds any of them);
 * IXL_LOGITS_VARIANT=NAME pins the logits variant (e.g. v2: its K2 beside the default v1's).
 *
 * The cases come from bench/cases.lua, the one list (bench/logits.lua and
 * bench/torch/logits.py use it too), through its JSON export; read_cases() below reads it.
 *
 * Method (STYLE.md, METHOD.md): CUDA events around each launch on the context's stream,
 * 3 warm-up runs, then `reps` timed runs (default 20) each preceded by a 256 MiB device
 * memset that flushes the 60 MB L2; the median is reported with the minimum and the 90th
 * percentile. Inputs are random codes with realistic UE8M0 exponents (bytes 120..134) so the
 * kernels take their common path. One CSV line per case on stdout:
 *   name,kernel,fmt,H,R,cols,valid_pairs,flops,bytes,us_median,us_min,us_p90
 * flops = 2 * valid (row, position) pairs * H * 128; bytes = keys read once (values and
 * scales of the valid positions) + queries + weights + logits written.
 *
 * IXL_BENCH_K3=cbs,T (issue 14's fused K3): each fp32 K1/K2 case is timed again with K3's
 * block scores emitted (K1 in the compressed layout, which is the full one here: ks = 0),
 * then the sorted top-T over the scores (ixl_topk) and, for comparison, the unfused K3
 * (ixl_candidate_select, block_score max) over the same logits, each with its own L2 flush;
 * one line on stderr: "k3 <case>: ..." with the emission's extra time (with - without, same
 * run), the top-T, their sum (the fused K3) and the unfused K3, and whether the variant
 * emitted (the fused and unfused candidates are compared, "same" or "DIFFER"). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idxlab.h"

static ixl_ctx *g;
static ixl_tensor *g_flush;

#define DIE(...)                                  \
  do {                                            \
    fprintf(stderr, "bench_logits: " __VA_ARGS__); \
    fprintf(stderr, ": %s\n", ixl_last_error(g)); \
    exit(1);                                      \
  } while (0)
#define OK(expr) \
  do {           \
    if ((expr) != IXL_OK) DIE("%s", #expr); \
  } while (0)

static uint64_t rs = 0x1234567ull;
static uint64_t rnd64(void) {
  uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A pool of random code bytes (e4m3 without NaN codes) that inputs are tiled from. */
#define POOL (32u << 20)
static uint8_t *pool;
static void fill_codes(uint8_t *p, int64_t n) {
  for (int64_t i = 0; i < n;) {
    int64_t off = (int64_t)(rnd64() % (POOL / 2)), len = n - i < POOL / 2 ? n - i : POOL / 2;
    memcpy(p + i, pool + off, (size_t)len);
    i += len;
  }
}
static uint32_t mx_word(void) {
  uint64_t r = rnd64();
  uint32_t w = 0;
  for (int k = 0; k < 4; k++) w |= (uint32_t)(120 + (r >> (8 * k)) % 15) << (8 * k);
  return w;
}

static ixl_tensor *dev(ixl_dtype dt, int nd, int64_t a, int64_t b, int64_t c, const void *src) {
  int64_t shape[3] = {a, b, c};
  ixl_tensor *t = NULL, *h = NULL;
  OK(ixl_tensor_new(g, dt, nd, shape, IXL_DEVICE, &t));
  if (src) {
    OK(ixl_tensor_new(g, dt, nd, shape, IXL_HOST, &h));
    memcpy(h->data, src, (size_t)h->nbytes);
    OK(ixl_tensor_copy(g, t, h));
    ixl_tensor_free(h);
  }
  return t;
}

/* One case of bench/cases.lua (its header says what each field means). */
typedef struct {
  char name[64];
  int kernel; /* 1: dense ragged, 2: dense paged, 5: sparse (paged if P > 0) */
  int fmt, H;
  int64_t R, N; /* K1/K5 ragged: K positions; K2/K5 paged: context per row */
  int P;        /* page size (paged) */
  int bf16;     /* bf16 reduction */
  int nsb, sbk; /* K5: sparse blocks per row, positions per block */
} bcase;

/* The reader of bench/cases.lua's JSON export, and of nothing else: an array of objects, each
 * with exactly the fields name, kernel, kv_format, heads, rows, positions, page_size, bf16,
 * sparse_blocks, sparse_block_kv in that order; strings without escapes, integers as plain
 * digits in [0, 2^31), booleans; any whitespace between tokens. Anything else is an error
 * naming the file and line, so a changed export fails here rather than benchmarking the
 * wrong case. The rules cases.lua's check() keeps are checked again where C relies on them. */
typedef struct {
  const char *path, *s;
  int line;
} jreader;

static void jfail(const jreader *j, const char *what) {
  fprintf(stderr, "bench_logits: %s:%d: expected %s\n", j->path, j->line, what);
  exit(1);
}
static void jws(jreader *j) {
  for (; *j->s == ' ' || *j->s == '\t' || *j->s == '\r' || *j->s == '\n'; j->s++)
    if (*j->s == '\n') j->line++;
}
static int jpeek(jreader *j, char c) { /* skips whitespace; 1 and consumes c if next */
  jws(j);
  if (*j->s != c) return 0;
  j->s++;
  return 1;
}
static void jexpect(jreader *j, char c) {
  char what[4] = {'\'', c, '\'', 0};
  if (!jpeek(j, c)) jfail(j, what);
}
/* A string of letters, digits and _ into out (size n). */
static void jstring(jreader *j, char *out, size_t n, const char *what) {
  size_t k = 0;
  jexpect(j, '"');
  for (; *j->s != '"'; j->s++) {
    const char c = *j->s;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!(ok || c == '_') || k + 1 >= n) jfail(j, what);
    out[k++] = c;
  }
  j->s++;
  out[k] = 0;
}
static void jkey(jreader *j, const char *key, int first) {
  char got[32], what[48];
  snprintf(what, sizeof what, "field \"%s\"", key);
  if (!first && !jpeek(j, ',')) jfail(j, what);
  jstring(j, got, sizeof got, what);
  if (strcmp(got, key) != 0) jfail(j, what);
  jexpect(j, ':');
}
static int64_t jint(jreader *j, const char *key) {
  char what[64];
  int64_t v = 0;
  snprintf(what, sizeof what, "an integer in [0, 2^31) for \"%s\"", key);
  jws(j);
  if (*j->s < '0' || *j->s > '9') jfail(j, what);
  for (; *j->s >= '0' && *j->s <= '9'; j->s++)
    if ((v = v * 10 + (*j->s - '0')) >= (1ll << 31)) jfail(j, what);
  return v;
}
static int jbool(jreader *j, const char *key) {
  char what[64];
  snprintf(what, sizeof what, "true or false for \"%s\"", key);
  jws(j);
  if (strncmp(j->s, "true", 4) == 0) return j->s += 4, 1;
  if (strncmp(j->s, "false", 5) == 0) return j->s += 5, 0;
  jfail(j, what);
  return 0;
}
static void jcase(jreader *j, bcase *c) {
  char v[16];
  jexpect(j, '{');
  jkey(j, "name", 1);
  jstring(j, c->name, sizeof c->name, "a name of letters, digits and _ (at most 63)");
  jkey(j, "kernel", 0);
  jstring(j, v, sizeof v, "\"K1\", \"K2\" or \"K5\"");
  c->kernel = !strcmp(v, "K1") ? 1 : !strcmp(v, "K2") ? 2 : !strcmp(v, "K5") ? 5 : 0;
  if (!c->kernel) jfail(j, "\"K1\", \"K2\" or \"K5\"");
  jkey(j, "kv_format", 0);
  jstring(j, v, sizeof v, "\"mxfp4\", \"mxfp8\" or \"fp8\"");
  c->fmt = !strcmp(v, "mxfp4") ? IXL_MXFP4 : !strcmp(v, "mxfp8") ? IXL_MXFP8
         : !strcmp(v, "fp8")   ? IXL_FP8 : -1;
  if (c->fmt < 0) jfail(j, "\"mxfp4\", \"mxfp8\" or \"fp8\"");
  jkey(j, "heads", 0);
  c->H = (int)jint(j, "heads");
  jkey(j, "rows", 0);
  c->R = jint(j, "rows");
  jkey(j, "positions", 0);
  c->N = jint(j, "positions");
  jkey(j, "page_size", 0);
  c->P = (int)jint(j, "page_size");
  jkey(j, "bf16", 0);
  c->bf16 = jbool(j, "bf16");
  jkey(j, "sparse_blocks", 0);
  c->nsb = (int)jint(j, "sparse_blocks");
  jkey(j, "sparse_block_kv", 0);
  c->sbk = (int)jint(j, "sparse_block_kv");
  if (!jpeek(j, '}')) jfail(j, "'}' after \"sparse_block_kv\" (no other fields)");
  if (c->H < 1 || c->R < 1 || c->N < 1) jfail(j, "heads, rows and positions >= 1");
  if ((c->kernel == 1) != (c->P == 0) && c->kernel != 5) jfail(j, "page_size 0 for K1, > 0 for K2");
  if (c->kernel == 5 && (!c->bf16 || c->nsb < 1 || c->sbk < 1))
    jfail(j, "bf16 true and sparse_blocks, sparse_block_kv >= 1 for K5");
  if (c->kernel != 5 && (c->nsb || c->sbk)) jfail(j, "sparse_blocks, sparse_block_kv 0");
}
/* The cases of the file at path; *n their number. */
static bcase *read_cases(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "bench_logits: cannot open %s\n", path);
    exit(1);
  }
  size_t cap = 1 << 16, len = 0, got;
  char *text = malloc(cap + 1);
  while ((got = fread(text + len, 1, cap - len, f)) > 0)
    if ((len += got) == cap) text = realloc(text, (cap *= 2) + 1);
  fclose(f);
  text[len] = 0;
  if (strlen(text) != len) {
    fprintf(stderr, "bench_logits: %s: a NUL byte\n", path);
    exit(1);
  }
  jreader j = {path, text, 1};
  bcase *cs = NULL;
  *n = 0;
  jexpect(&j, '[');
  if (!jpeek(&j, ']')) {
    do {
      cs = realloc(cs, (*n + 1) * sizeof *cs);
      jcase(&j, &cs[(*n)++]);
    } while (jpeek(&j, ','));
    jexpect(&j, ']');
  }
  jws(&j);
  if (*j.s) jfail(&j, "the end of the file after ']'");
  if (*n == 0) jfail(&j, "at least one case");
  free(text);
  return cs;
}

typedef ixl_status (*op_fn)(void *);
typedef struct {
  ixl_qk qk;
  ixl_tensor *w, *ks, *ke, *bt, *ids, *out;
  int bf16, sbk;
} args;
static ixl_status op_k1(void *p) {
  args *a = p;
  return ixl_dense_logits(g, &a->qk, a->w, a->ks, a->ke, IXL_LAYOUT_FULL, 0,
                          a->bf16 ? IXL_REDUCE_BF16 : IXL_REDUCE_FP32, a->out);
}
static ixl_status op_k2(void *p) {
  args *a = p;
  return ixl_dense_logits_paged(g, &a->qk, a->w, a->ke, a->bt,
                                a->bf16 ? IXL_REDUCE_BF16 : IXL_REDUCE_FP32, a->out);
}
static ixl_status op_k5(void *p) {
  args *a = p;
  return ixl_sparse_logits(g, &a->qk, a->w, a->ks, a->ke, a->bt, a->ids, a->sbk, IXL_KS_UNALIGNED,
                           a->out);
}

/* the fused K3's timed ops (IXL_BENCH_K3) */
typedef struct {
  args *a;
  int kernel, T;
  ixl_block_scores bs;
  ixl_tensor *lens, *cand;
} k3args;
static ixl_status op_emit(void *p) {
  k3args *k = p;
  args *a = k->a;
  if (k->kernel == 1)
    return ixl_dense_logits_scored(g, &a->qk, a->w, a->ks, a->ke, IXL_LAYOUT_COMPRESSED, 0,
                                   IXL_REDUCE_FP32, a->out, &k->bs);
  return ixl_dense_logits_paged_scored(g, &a->qk, a->w, a->ke, a->bt, IXL_REDUCE_FP32, a->out,
                                       &k->bs);
}
static ixl_status op_topt(void *p) {
  k3args *k = p;
  return ixl_topk(g, k->bs.scores, NULL, k->bs.nblocks, k->T, 1, k->cand);
}
static ixl_status op_k3(void *p) {
  k3args *k = p;
  return ixl_candidate_select(g, k->a->out, k->lens, k->bs.candidate_block_size, IXL_SCORE_MAX,
                              k->cand);
}

static int cmp_d(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static void time_op(op_fn f, void *a, int reps, double *med, double *mn, double *p90) {
  double *t = malloc(sizeof(double) * (size_t)reps);
  for (int i = 0; i < 3; i++) OK(f(a));
  OK(ixl_ctx_sync(g));
  for (int i = 0; i < reps; i++) {
    OK(ixl_tensor_fill_bytes(g, g_flush, (uint8_t)i)); /* L2 flush */
    OK(ixl_timer_record(g, 0));
    OK(f(a));
    OK(ixl_timer_record(g, 1));
    OK(ixl_timer_elapsed_us(g, 0, 1, &t[i]));
  }
  qsort(t, (size_t)reps, sizeof(double), cmp_d);
  *med = t[reps / 2];
  *mn = t[0];
  *p90 = t[(reps * 9) / 10 < reps ? (reps * 9) / 10 : reps - 1];
  free(t);
}

/* Sorted distinct blocks of [0, nblk), as many as fit nsb (all if fewer): K4's ids. */
static void pick_blocks(int32_t *ids, int64_t nsb, int64_t nblk, int64_t base) {
  int64_t want = nblk < nsb ? nblk : nsb, n = 0;
  for (int64_t b = 0; b < nblk && n < want; b++)
    if ((double)(want - n) > (double)(rnd64() >> 11) * 0x1p-53 * (double)(nblk - b))
      ids[n++] = (int32_t)(b + base);
  for (int64_t j = n; j < nsb; j++) ids[j] = n ? ids[n - 1] : (int32_t)base;
}

/* IXL_BENCH_K3 (see the header): times the emission, the top-T and the unfused K3 of a case
 * whose plain time is plain_us (this run). */
static void k3_case(const bcase *c, args *a, op_fn plain, int reps, double plain_us,
                    const char *spec) {
  int cbs = 0, T = 0;
  if (sscanf(spec, "%d,%d", &cbs, &T) != 2 || cbs < 1 || T < 1 || T > 4096) {
    fprintf(stderr, "IXL_BENCH_K3=%s: expected cbs,T (cbs >= 1, 1 <= T <= 4096)\n", spec);
    exit(2);
  }
  const int64_t R = c->R, cols = a->out->shape[1], nb = (cols + cbs - 1) / cbs;
  k3args k = {.a = a, .kernel = c->kernel, .T = T};
  k.bs.candidate_block_size = cbs;
  k.bs.scores = dev(IXL_F32, 2, R, nb, 0, NULL);
  k.bs.nblocks = dev(IXL_I32, 1, R, 0, 0, NULL);
  k.lens = a->ke; /* ks = 0 in every case here: len = ke */
  k.cand = dev(IXL_I32, 2, R, T, 0, NULL);
  double emit, topt, unf, mn, p90, plain2;
  time_op(op_emit, &k, reps, &emit, &mn, &p90);
  const int emitted = k.bs.emitted;
  time_op(plain, a, reps, &plain2, &mn, &p90); /* again, beside the emission */
  time_op(op_topt, &k, reps, &topt, &mn, &p90);
  const int64_t ncand = R * T;
  double *fused = malloc((size_t)ncand * sizeof(double));
  double *unfused = malloc((size_t)ncand * sizeof(double));
  OK(ixl_tensor_to_f64(g, k.cand, fused, ncand));
  time_op(op_k3, &k, reps, &unf, &mn, &p90);
  OK(ixl_tensor_to_f64(g, k.cand, unfused, ncand));
  const int same = memcmp(fused, unfused, (size_t)ncand * sizeof(double)) == 0;
  const double base = plain_us < plain2 ? plain_us : plain2;
  fprintf(stderr,
          "k3 %s (cbs %d, T %d): logits %.1f us, with scores %.1f (+%.1f), top-T %.1f, "
          "fused K3 %.1f us; unfused K3 %.1f us; emitted %d, candidates %s\n",
          c->name, cbs, T, base, emit, emit - base, topt, emit - base + topt, unf, emitted,
          same ? "same" : "DIFFER");
  free(fused);
  free(unfused);
  ixl_tensor_free(k.bs.scores);
  ixl_tensor_free(k.bs.nblocks);
  ixl_tensor_free(k.cand);
}

static void run_case(const bcase *c, int reps) {
  const int fmt = c->fmt, H = c->H, vb = ixl_format_value_bytes((ixl_kv_format)fmt);
  const int64_t R = c->R, N = c->N;
  const int mx = fmt != IXL_FP8;
  /* query side */
  uint8_t *qc = malloc((size_t)(R * H * vb));
  fill_codes(qc, R * H * vb);
  uint32_t *qs = malloc((size_t)(R * H * 4));
  float *wf = malloc((size_t)(R * H * 4));
  uint16_t *wb = malloc((size_t)(R * H * 2));
  for (int64_t i = 0; i < R * H; i++) {
    qs[i] = mx_word();
    wf[i] = (float)((double)(rnd64() >> 11) * 0x1p-52 - 1.0);
    wb[i] = ixl_f32_to_bf16(wf[i]);
  }
  args a;
  memset(&a, 0, sizeof a);
  a.bf16 = c->bf16 || c->kernel == 5;
  a.qk.kv_format = fmt;
  a.qk.q_codes = dev(IXL_U8, 3, R, H, vb, qc);
  a.qk.q_scales = mx ? dev(IXL_I32, 2, R, H, 0, qs) : NULL;
  a.w = a.bf16 ? dev(IXL_BF16, 2, R, H, 0, wb) : dev(IXL_F32, 2, R, H, 0, wf);
  int32_t *ks = calloc((size_t)R, 4), *ke = calloc((size_t)R, 4);
  double valid = 0, kbytes = 0;
  int64_t cols = 0;
  op_fn f = NULL;
  const int paged = c->kernel == 2 || (c->kernel == 5 && c->P > 0);
  int32_t *bt = NULL, *ids = NULL;
  const int sbk = c->sbk;
  const int64_t nsb = c->nsb;
  if (paged) {
    const int64_t P = c->P, mp = (N + P - 1) / P, stride = (P * (vb + 4) + 511) / 512 * 512;
    const int64_t np = R * mp;
    uint8_t *pages = malloc((size_t)(np * stride));
    fill_codes(pages, np * stride);
    for (int64_t p = 0; p < np; p++)
      for (int64_t s = 0; s < P; s++) {
        uint32_t w =
            mx ? mx_word() : 0x3B800000u + (uint32_t)(rnd64() % 0x800000u); /* fp8: ~2^-8 */
        memcpy(pages + p * stride + P * vb + s * 4, &w, 4);
      }
    bt = malloc((size_t)(R * mp * 4));
    for (int64_t r = 0; r < R; r++) { /* each row its own pages, in a shuffled order */
      for (int64_t j = 0; j < mp; j++) bt[r * mp + j] = (int32_t)(r * mp + j);
      for (int64_t j = mp - 1; j > 0; j--) {
        int64_t k = (int64_t)(rnd64() % (uint64_t)(j + 1));
        int32_t t = bt[r * mp + j];
        bt[r * mp + j] = bt[r * mp + k];
        bt[r * mp + k] = t;
      }
      ke[r] = (int32_t)N;
    }
    a.qk.k_pages = dev(IXL_U8, 2, np, stride, 0, pages);
    a.qk.page_size = c->P;
    a.bt = dev(IXL_I32, 2, R, mp, 0, bt);
    a.ke = dev(IXL_I32, 1, R, 0, 0, ke);
    free(pages);
  } else {
    uint8_t *kc = malloc((size_t)(N * vb));
    fill_codes(kc, N * vb);
    uint32_t *ksc = malloc((size_t)(N * 4));
    for (int64_t i = 0; i < N; i++)
      ksc[i] = mx ? mx_word() : 0x3B800000u + (uint32_t)(rnd64() % 0x800000u);
    a.qk.k_codes = dev(IXL_U8, 2, N, vb, 0, kc);
    a.qk.k_scales = dev(mx ? IXL_I32 : IXL_F32, 1, N, 0, 0, ksc);
    for (int64_t r = 0; r < R;
         r++) { /* causal rows of one request: row r is the last R rows' r-th */
      ks[r] = 0;
      ke[r] = (int32_t)(N - R + r + 1);
    }
    a.ks = dev(IXL_I32, 1, R, 0, 0, ks);
    a.ke = dev(IXL_I32, 1, R, 0, 0, ke);
    free(kc);
    free(ksc);
  }
  if (c->kernel == 5) {
    ids = malloc((size_t)(R * nsb * 4));
    for (int64_t r = 0; r < R; r++) {
      const int64_t len = ke[r] - (paged ? 0 : ks[r]);
      pick_blocks(ids + r * nsb, nsb, (len + sbk - 1) / sbk, 0);
      const int64_t nv = (len + sbk - 1) / sbk < nsb ? (len + sbk - 1) / sbk : nsb;
      valid += (double)(nv < nsb ? len : nsb * sbk); /* full blocks for long rows */
    }
    a.ids = dev(IXL_I32, 2, R, nsb, 0, ids);
    a.sbk = sbk;
    if (paged) a.ks = NULL;
    cols = nsb * sbk;
    f = op_k5;
  } else {
    cols = N;
    for (int64_t r = 0; r < R; r++) valid += (double)(ke[r] - ks[r]);
    f = c->kernel == 1 ? op_k1 : op_k2;
  }
  a.out = dev(a.bf16 ? IXL_BF16 : IXL_F32, 2, R, cols, 0, NULL);
  kbytes = (c->kernel == 1 ? (double)N : valid) * (vb + 4); /* K1 rows share one K */
  const double flops = 2.0 * valid * H * 128;
  const double bytes = kbytes + (double)R * H * (vb + 8) + (double)R * cols * (a.bf16 ? 2 : 4);
  double med, mn, p90;
  time_op(f, &a, reps, &med, &mn, &p90);
  printf("%s,K%d,%s,%d,%lld,%lld,%.0f,%.6g,%.6g,%.2f,%.2f,%.2f\n", c->name, c->kernel,
         fmt == IXL_MXFP4   ? "mxfp4"
         : fmt == IXL_MXFP8 ? "mxfp8"
                            : "fp8",
         H, (long long)R, (long long)cols, valid, flops, bytes, med, mn, p90);
  fflush(stdout);
  fprintf(stderr, "%-34s %9.1f us  %7.1f TFLOP/s  %7.0f GB/s\n", c->name, med, flops / med * 1e-6,
          bytes / med * 1e-3);
  const char *k3 = getenv("IXL_BENCH_K3");
  if (k3 && *k3 && c->kernel != 5 && !a.bf16) k3_case(c, &a, f, reps, med, k3);
  ixl_tensor *ts[] = {(ixl_tensor *)a.qk.q_codes,
                      (ixl_tensor *)a.qk.q_scales,
                      (ixl_tensor *)a.qk.k_codes,
                      (ixl_tensor *)a.qk.k_scales,
                      (ixl_tensor *)a.qk.k_pages,
                      a.w,
                      a.ks,
                      a.ke,
                      a.bt,
                      a.ids,
                      a.out};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) ixl_tensor_free(ts[i]);
  free(qc);
  free(qs);
  free(wf);
  free(wb);
  free(ks);
  free(ke);
  free(bt);
  free(ids);
}

static const char *fmt_name(int fmt) {
  return fmt == IXL_MXFP4 ? "mxfp4" : fmt == IXL_MXFP8 ? "mxfp8" : "fp8";
}

/* 1 when name holds any of the comma-separated substrings of list. */
static int matches(const char *name, const char *list) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", list);
  for (char *s = strtok(buf, ","); s; s = strtok(NULL, ","))
    if (strstr(name, s)) return 1;
  return 0;
}

int main(int argc, char **argv) {
  size_t ncases = 0;
  if (argc == 3 && strcmp(argv[1], "--list") == 0) { /* the cases as read; no GPU needed */
    bcase *cs = read_cases(argv[2], &ncases);
    printf("name,kernel,kv_format,heads,rows,positions,page_size,bf16,sparse_blocks,"
           "sparse_block_kv\n");
    for (size_t i = 0; i < ncases; i++)
      printf("%s,K%d,%s,%d,%lld,%lld,%d,%d,%d,%d\n", cs[i].name, cs[i].kernel,
             fmt_name(cs[i].fmt), cs[i].H, (long long)cs[i].R, (long long)cs[i].N, cs[i].P,
             cs[i].bf16, cs[i].nsb, cs[i].sbk);
    free(cs);
    return 0;
  }
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: bench_logits CASES.json [reps [case-substring]]\n"
                    "       bench_logits --list CASES.json\n");
    return 2;
  }
  bcase *cases = read_cases(argv[1], &ncases); /* before the context: a bad file fails fast */
  const int reps = argc > 2 ? atoi(argv[2]) : 20;
  const char *only = argc > 3 ? argv[3] : NULL; /* a substring of the case names */
  if (ixl_ctx_new(IXL_BACKEND_CUDA, 0, 1, &g) != IXL_OK) DIE("cuda context");
  const char *pin = getenv("IXL_LOGITS_VARIANT");
  if (pin && *pin) {
    OK(ixl_ctx_set_variant(g, "logits", pin));
    fprintf(stderr, "bench_logits: logits variant %s pinned\n", pin);
  }
  pool = malloc(POOL);
  for (size_t i = 0; i < POOL; i += 8) {
    uint64_t r = rnd64();
    memcpy(pool + i, &r, 8);
  }
  for (size_t i = 0; i < POOL; i++)
    if ((pool[i] & 0x7F) == 0x7F) pool[i] ^= 1; /* no e4m3 NaN codes */
  int64_t fl = 256ll << 20;
  OK(ixl_tensor_new(g, IXL_U8, 1, &fl, IXL_DEVICE, &g_flush));
  printf("name,kernel,fmt,H,R,cols,valid_pairs,flops,bytes,us_median,us_min,us_p90\n");
  for (size_t i = 0; i < ncases; i++)
    if (!only || matches(cases[i].name, only)) run_case(&cases[i], reps);
  free(cases);
  ixl_tensor_free(g_flush);
  free(pool);
  ixl_ctx_free(g);
  return 0;
}
