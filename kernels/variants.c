/* variants.c - the kernel variant registry (variants.h): the one table of every variant, the
 * choice for an op, and the per-context pins and last-ran records of the public API.
 *
 * Built twice: into the library (`make`), and with -DIXL_TEST_VARIANTS into the test copy of
 * the library that `make test` runs against, which adds test-only variants (pin_only, so the
 * defaults are the same in both): `ref_alt` (the logits reference under another name) and
 * `v1_alt` (CUDA logits v1 on another grid: 1024 output columns per CTA instead of up to
 * 4096). ref_alt accepts at most 64 heads, so the tests can show a pin refused by name;
 * v1_alt accepts every problem, so the GPU parity tests run it on all their shapes.
 *
 * Pins are per backend: a pin applies to the ops on its variant's backend (a CUDA context
 * also runs host-tensor ops, on the CPU variants), and a CPU context refuses a CUDA pin.
 *
 * Per-context state (pins, last ran) lives in the context itself (ctx.h), so it ends with
 * the context and a new context never sees an old one's records. */
#include "variants.h"
#include "logits/engine.h"
#include "logits/logits.h"
#include "ops.h"

#include <stdlib.h> /* getenv: v2_emits */

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifdef IXL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---------------------------------------------------------------- the variants */
static ixl_status logits_ref(ixl_ctx *ctx, const ixl_logits_call *c) {
  return ixl_logits_cpu(ctx, c, IXL_PATH_REFERENCE);
}
static ixl_status logits_fast(ixl_ctx *ctx, const ixl_logits_call *c) {
  return ixl_logits_cpu(ctx, c, IXL_PATH_FAST);
}
static ixl_status logits_v1(ixl_ctx *ctx, const ixl_logits_call *c) {
  return c->mode == IXL_LOGITS_SPARSE ? ixl_cuda_logits_v1_sparse(ctx, c, 4096)
                                      : ixl_cuda_logits_v1_dense(ctx, c, 4096);
}
/* v2 (logits/logits_v2_sm90.cu): fp8 K1, K2 (both reductions) and K5 on wgmma + TMA, MXFP4
 * (every mode) on logits_v2_mx_sm90.cu, the rest on v1's kernels. CUDA=0: v1's stubs answer
 * (device tensors cannot exist there). */
static ixl_status logits_v2(ixl_ctx *ctx, const ixl_logits_call *c) {
#ifdef IXL_WITH_CUDA
  return ixl_cuda_logits_v2(ctx, c);
#else
  return logits_v1(ctx, c);
#endif
}
/* v2 takes fp8 and mxfp4 at H 32 and 64 (head_dim 128) for every mode: its own kernels where
 * it has them (logits_v2_sm90.cu for fp8, logits_v2_mx_sm90.cu for mxfp4), else v1's, so
 * K1/K2/K5 of a config still run on one variant. */
static int v2_supports(const ixl_problem *p) {
  return (p->kv_format == IXL_FP8 || p->kv_format == IXL_MXFP4) &&
         (p->heads == 32 || p->heads == 64) && p->head_dim == 128;
}
/* v2 is the default for MXFP4, where all four modes run its own kernels, bitwise equal to the
 * CPU reference with the bf16 reduction (logits_v2_mx_sm90.cu); fp8 stays on v1 by default
 * (v2's wgmma dot is within the fp8 tolerance of the CPU, not v1's bits, and its fp8 K1 and
 * ragged K5 ran on the H200 only in one visit's targeted checks). */
static int v2_default_for(const ixl_problem *p) { return p->kv_format == IXL_MXFP4; }
static int fast_runs_here(const char **why) {
  *why = "needs AVX2 and FMA, which this CPU lacks";
  return ixl_engine_fast_available();
}
static const ixl_logits_ops logits_ref_ops = {logits_ref, NULL};
static const ixl_logits_ops logits_fast_ops = {logits_fast, NULL};
/* v1's K1 (compressed) and K2 emit K3's block scores for every cbs and any ks: a warp's
 * segmented max, then one float atomic max per block segment (logits_v1.cuh) */
static int v1_emits(const ixl_problem *p) { return p->candidate_block_size >= 1; }
static const ixl_logits_ops logits_v1_ops = {logits_v1, v1_emits};
/* v2's MXFP4 K1 (compressed) and K2 emit K3's block scores the same way (logits_v2_mx_sm90.cu's
 * EMIT kernels, every cbs, any ks) only with IXL_LOGITS_V2_MX_EMIT=1 (read once a process;
 * else never: the step keeps the unfused K3), and never for fp8 (v1's kernels, via v2) */
static int v2_emits(const ixl_problem *p) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("IXL_LOGITS_V2_MX_EMIT");
    on = e && e[0] == '1' && e[1] == 0;
  }
  return on && p->kv_format == IXL_MXFP4 && p->candidate_block_size >= 1;
}
static const ixl_logits_ops logits_v2_ops = {logits_v2, v2_emits};

static const ixl_select_ops select_ref_ops = {ixl_candidate_select_ref, ixl_topk_ref, NULL};
static const ixl_select_ops select_v1_ops = {ixl_cuda_candidate_select, ixl_cuda_topk, NULL};
/* select v2: its own K6 (select/topk_v2.cu), K7 fusable into it; K3 is v1's */
static const ixl_select_ops select_v2_ops = {ixl_cuda_candidate_select, ixl_cuda_topk_v2,
                                             ixl_cuda_topk_v2_remap};

#ifdef IXL_TEST_VARIANTS
static ixl_status logits_v1_alt(ixl_ctx *ctx, const ixl_logits_call *c) {
  return c->mode == IXL_LOGITS_SPARSE ? ixl_cuda_logits_v1_sparse(ctx, c, 1024)
                                      : ixl_cuda_logits_v1_dense(ctx, c, 1024);
}
static int at_most_64_heads(const ixl_problem *p) { return p->heads <= 64; }
static const ixl_logits_ops logits_v1_alt_ops = {logits_v1_alt, v1_emits};
#endif

/* Per family, in preference order: the default is the last one that can run and accepts. */
static const ixl_variant table[] = {
    {IXL_FAMILY_LOGITS, "ref", IXL_BACKEND_CPU, 0, 0, NULL, NULL, &logits_ref_ops,
     "the reference engine path: per position and head, SPEC 3's dot and reduction", NULL},
    {IXL_FAMILY_LOGITS, "fast", IXL_BACKEND_CPU, 0, 0, fast_runs_here, NULL, &logits_fast_ops,
     "AVX2 + FMA register tiles, bitwise equal to ref", NULL},
#ifdef IXL_TEST_VARIANTS
    {IXL_FAMILY_LOGITS, "ref_alt", IXL_BACKEND_CPU, 0, 1, NULL, at_most_64_heads,
     &logits_ref_ops, "test only: ref under another name, at most 64 heads", NULL},
#endif
    {IXL_FAMILY_LOGITS, "v1", IXL_BACKEND_CUDA, 80, 0, NULL, NULL, &logits_v1_ops,
     "mma.sync f16 tile engine, cp.async pipeline (sm_80+), every format and mode", NULL},
#ifdef IXL_TEST_VARIANTS
    {IXL_FAMILY_LOGITS, "v1_alt", IXL_BACKEND_CUDA, 80, 1, NULL, NULL, &logits_v1_alt_ops,
     "test only: v1 with at most 1024 output columns per CTA", NULL},
#endif
    {IXL_FAMILY_LOGITS, "v2", IXL_BACKEND_CUDA, 90, 0, NULL, v2_supports, &logits_v2_ops,
     "H 32/64 on wgmma (sm_90a). mxfp4, the default: K1, K2, K5 ragged and paged, one k32 "
     "wgmma per scale group, bitwise the CPU's (bf16). fp8, pin only: K1, K2 and K5 with TMA "
     "(K5 == K1/K2 bf16 bitwise, not v1's bits); other shapes and mxfp8 run v1",
     v2_default_for},
    {IXL_FAMILY_SELECT, "ref", IXL_BACKEND_CPU, 0, 0, NULL, NULL, &select_ref_ops,
     "the reference: block scores, then a radix select per row (OpenMP over rows)", NULL},
    {IXL_FAMILY_SELECT, "v1", IXL_BACKEND_CUDA, 80, 0, NULL, NULL, &select_v1_ops,
     "one CTA per row, block-wide radix select in shared memory", NULL},
    {IXL_FAMILY_SELECT, "v2", IXL_BACKEND_CUDA, 80, 0, NULL, NULL, &select_v2_ops,
     "K6: radix select over keys kept in shared memory, column-order compaction (no sort "
     "unsorted), a cluster per long row (sm_90) finished in CTA 0, K7 fusable; K3 as v1", NULL},
};
#define NTABLE ((int)(sizeof table / sizeof table[0]))

const ixl_variant *ixl_variant_table(int *n) {
  *n = NTABLE;
  return table;
}

static const char *const family_names[IXL_FAMILY_COUNT] = {"logits", "select", "index",
                                                           "formats", "gen"};

const char *ixl_family_name(ixl_family f) {
  return (int)f >= 0 && f < IXL_FAMILY_COUNT ? family_names[f] : "?";
}

static int family_of(const char *name) {
  for (int f = 0; name && f < IXL_FAMILY_COUNT; f++)
    if (strcmp(name, family_names[f]) == 0) return f;
  return -1;
}

/* The i-th variant of family f, or NULL. */
static const ixl_variant *nth(int f, int32_t i) {
  for (int t = 0; t < NTABLE; t++)
    if ((int)table[t].family == f && i-- == 0) return &table[t];
  return NULL;
}

static const ixl_variant *by_name(int f, const char *name) {
  for (int t = 0; t < NTABLE; t++)
    if ((int)table[t].family == f && strcmp(table[t].name, name) == 0) return &table[t];
  return NULL;
}

/* ---------------------------------------------------------------- per-context state */
/* The state lives in the context (ctx.h: variant_pin, variant_last_pin, variant_ran,
 * variant_sm), zeroed when it is made and gone with it: no table, no lock, nothing that can
 * outlive the context. A context is used by one thread at a time, like its ops. */
_Static_assert(IXL_FAMILY_COUNT <= IXL_MAX_FAMILIES, "ctx.h's IXL_MAX_FAMILIES is too small");

/* ---------------------------------------------------------------- choosing */
static const char *backend_name(ixl_backend b) { return b == IXL_BACKEND_CUDA ? "cuda" : "cpu"; }

static int device_sm(ixl_ctx *ctx) {
#ifdef IXL_WITH_CUDA
  if (ctx->variant_sm) return ctx->variant_sm;
  int major = 0, minor = 0, dev = ixl_ctx_device(ctx);
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  ctx->variant_sm = major * 10 + minor;
  return major * 10 + minor;
#else
  (void)ctx;
  return 0;
#endif
}

/* 0 when v can run on this machine and accepts p; otherwise why not, in why[0..n) (n = 0:
 * the reason is not wanted). */
static int refuses(const ixl_variant *v, ixl_backend be, int sm, const ixl_problem *p,
                   char *why, size_t n) {
  const char *lack = NULL;
  if (v->backend != be) {
    snprintf(why, n, "runs on %s, but the tensors are on the %s", backend_name(v->backend),
             be == IXL_BACKEND_CUDA ? "device" : "host");
    return 1;
  }
  if (be == IXL_BACKEND_CUDA && sm < v->min_sm) {
    snprintf(why, n, "needs sm_%d, the device is sm_%d", v->min_sm, sm);
    return 1;
  }
  if (v->runs_here && !v->runs_here(&lack)) {
    snprintf(why, n, "cannot run here (%s)", lack);
    return 1;
  }
  if (v->supports && !v->supports(p)) {
    snprintf(why, n, "does not support this problem");
    return 1;
  }
  return 0;
}

/* Appends ", " (after the first item) and the formatted text to buf[0..n), at *k. */
__attribute__((format(printf, 4, 5))) static void append(char *buf, size_t n, size_t *k,
                                                         const char *fmt, ...) {
  if (*k >= n) return;
  if (*k) *k += (size_t)snprintf(buf + *k, n - *k, ", ");
  if (*k >= n) return;
  va_list ap;
  va_start(ap, fmt);
  *k += (size_t)vsnprintf(buf + *k, n - *k, fmt, ap);
  va_end(ap);
}

/* "kv_format mxfp4, heads 32, head_dim 128": the known fields of p. */
static void describe(const ixl_problem *p, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = '\0';
  if (p->kv_format >= 0 && p->kv_format <= 2)
    append(buf, n, &k, "kv_format %s", ixl_kv_format_name(p->kv_format));
  if (p->quantizer >= 0) append(buf, n, &k, "quantizer %d", p->quantizer);
  if (p->heads >= 0) append(buf, n, &k, "heads %lld", (long long)p->heads);
  if (p->head_dim >= 0) append(buf, n, &k, "head_dim %lld", (long long)p->head_dim);
  if (p->page_size >= 0) append(buf, n, &k, "page_size %lld", (long long)p->page_size);
  if (p->candidate_block_size >= 0)
    append(buf, n, &k, "candidate_block_size %lld", (long long)p->candidate_block_size);
  if (p->sparse_block_kv >= 0)
    append(buf, n, &k, "sparse_block_kv %lld", (long long)p->sparse_block_kv);
  if (!k) snprintf(buf, n, "any");
}

ixl_status ixl_variant_pick(ixl_ctx *ctx, ixl_family family, int dev, const ixl_problem *p,
                            const ixl_variant **out) {
  const ixl_backend be = dev == IXL_DEVICE ? IXL_BACKEND_CUDA : IXL_BACKEND_CPU;
  char why[160], would[256], pb[256];
  const int sm = be == IXL_BACKEND_CUDA ? device_sm(ctx) : 0;
  const ixl_variant *pin = ctx->variant_pin[family][be == IXL_BACKEND_CUDA];
  const ixl_variant *v = NULL;
  if (pin) {
    if (!refuses(pin, be, sm, p, why, sizeof why)) v = pin;
  } else {
    /* the default: the best (last listed) variant that runs here and is not pin-only */
    for (int t = NTABLE - 1; t >= 0 && !v; t--) {
      const ixl_variant *c = &table[t];
      if (c->family == family && !c->pin_only && (!c->default_for || c->default_for(p)) &&
          !refuses(c, be, sm, p, NULL, 0))
        v = c;
    }
  }
  *out = v;
  if (v) {
    ctx->variant_ran[family] = v;
    return IXL_OK;
  }
  /* the error paths only: what would run, best first, and the problem in words */
  describe(p, pb, sizeof pb);
  if (pin) {
    size_t k = 0;
    would[0] = '\0';
    for (int t = NTABLE - 1; t >= 0; t--)
      if (table[t].family == family && !refuses(&table[t], be, sm, p, NULL, 0))
        append(would, sizeof would, &k, "%s", table[t].name);
    return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED, "%s variant %s %s (%s); would run: %s",
                         family_names[family], pin->name, why, pb, k ? would : "none");
  }
  return ixl_set_error(ctx, IXL_ERR_UNSUPPORTED,
                       "%s: no %s variant runs this problem (%s) on this machine",
                       family_names[family], backend_name(be), pb);
}

/* ---------------------------------------------------------------- public API */
int32_t ixl_variant_count(const char *family) {
  int f = family_of(family), n = 0;
  if (f < 0) return -1;
  for (int t = 0; t < NTABLE; t++) n += (int)table[t].family == f;
  return n;
}

const char *ixl_variant_name(const char *family, int32_t i) {
  const ixl_variant *v = nth(family_of(family), i);
  return v ? v->name : NULL;
}

const char *ixl_variant_backend(const char *family, int32_t i) {
  const ixl_variant *v = nth(family_of(family), i);
  return v ? backend_name(v->backend) : NULL;
}

int32_t ixl_variant_min_sm(const char *family, int32_t i) {
  const ixl_variant *v = nth(family_of(family), i);
  return v ? v->min_sm : -1;
}

const char *ixl_variant_about(const char *family, int32_t i) {
  const ixl_variant *v = nth(family_of(family), i);
  return v ? v->about : NULL;
}

const char *ixl_variant_fuses(const char *family, int32_t i) {
  const ixl_variant *v = nth(family_of(family), i);
  if (!v) return NULL;
  if (v->family == IXL_FAMILY_SELECT && ((const ixl_select_ops *)v->ops)->topk_remap)
    return "remap";
  /* K1/K2 that emit K3's block scores for some format (asked with cbs 8; a variant whose
   * emission is switched off in this process, v2 without IXL_LOGITS_V2_MX_EMIT=1, says "") */
  if (v->family == IXL_FAMILY_LOGITS && ((const ixl_logits_ops *)v->ops)->emits_block_scores) {
    int (*emits)(const ixl_problem *) = ((const ixl_logits_ops *)v->ops)->emits_block_scores;
    static const int fmts[] = {IXL_MXFP4, IXL_MXFP8, IXL_FP8};
    for (int f = 0; f < 3; f++) {
      ixl_problem pb;
      ixl_problem_unknown(&pb);
      pb.kv_format = fmts[f];
      pb.candidate_block_size = 8;
      if (emits(&pb)) return "candidate_select";
    }
  }
  return "";
}

/* "ref, fast, v1": the names of family f. */
static void names_of(int f, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = '\0';
  for (int t = 0; t < NTABLE; t++)
    if ((int)table[t].family == f) append(buf, n, &k, "%s", table[t].name);
  if (!k) snprintf(buf, n, "none registered");
}

ixl_status ixl_ctx_set_variant(ixl_ctx *ctx, const char *family, const char *name) {
  if (!ctx) return IXL_ERR_INVALID_ARG;
  const int f = family_of(family);
  if (f < 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "variant family %s: unknown (logits, select, index, formats, gen)",
                         family ? family : "(null)");
  const int clear = !name || !name[0];
  const ixl_variant *v = clear ? NULL : by_name(f, name);
  if (!clear && !v) {
    char have[256];
    names_of(f, have, sizeof have);
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s variant %s: no such variant (%s has: %s)",
                         family_names[f], name, family_names[f], have);
  }
  if (v && v->backend == IXL_BACKEND_CUDA && ixl_ctx_backend(ctx) != IXL_BACKEND_CUDA) {
    char have[256];
    size_t k = 0;
    have[0] = '\0';
    for (int t = 0; t < NTABLE; t++)
      if ((int)table[t].family == f && table[t].backend == IXL_BACKEND_CPU)
        append(have, sizeof have, &k, "%s", table[t].name);
    return ixl_set_error(
        ctx, IXL_ERR_UNSUPPORTED,
        "%s variant %s runs on cuda, but this context is cpu (its %s variants: %s)",
        family_names[f], name, family_names[f], k ? have : "none");
  }
  if (clear) ctx->variant_pin[f][0] = ctx->variant_pin[f][1] = NULL;
  else ctx->variant_pin[f][v->backend == IXL_BACKEND_CUDA] = v;
  ctx->variant_last_pin[f] = v;
  return IXL_OK;
}

static const char *read_state(const ixl_ctx *ctx, const char *family, int ran) {
  const int f = family_of(family);
  if (!ctx || f < 0) return "";
  const ixl_variant *v = ran ? ctx->variant_ran[f] : ctx->variant_last_pin[f];
  return v ? v->name : "";
}

const char *ixl_ctx_variant(const ixl_ctx *ctx, const char *family) {
  return read_state(ctx, family, 0);
}

const char *ixl_ctx_variant_ran(const ixl_ctx *ctx, const char *family) {
  return read_state(ctx, family, 1);
}
