/* test_cuda_index.c - GPU parity and timing of K4 (expansion, kernels/index/expand.cu) and the
 * unfused K3 (candidate selection, kernels/select/candidates.cu) against the CPU reference.
 *
 * Parity: fresh seeded inputs (IXL_TEST_SEED repeats a run); the device outputs are poisoned
 * (0xff, then 0x00) before each of two runs, and both runs must equal the CPU's results
 * exactly (integers). K4 runs every (cbs, sbk) pair the builder accepts, both ks_modes, paged
 * and ragged rows, empty rows, rows shorter than T * cbs, garbage and duplicate candidates,
 * rows needing several bitmap windows and rows whose slots do not fit the staging buffer. K3
 * runs every block_score (logsumexp up to near-ties of an ulp of libm), ties, NaN, +-inf and
 * +-0, empty and one-block rows, aligned and unaligned rows (the vector and the scalar load),
 * and the shapes that fall back to the long-row kernel. The previous kernels
 * (IXL_EXPAND_V1=1, IXL_CANDIDATES_V1=1, test-only switches) are checked the same way, briefly.
 *
 * Without a usable GPU every test prints "ok - NAME # skipped: no GPU" and passes. Environment:
 * IXL_TEST_SMALL=1 (tiny shapes only: compute-sanitizer runs every test_cuda_* program),
 * IXL_TEST_ONLY=WORD,... (only the GPU tests whose names contain one of the words),
 * IXL_BENCH=1 (then a timing table), IXL_BENCH=only (just the table), IXL_BENCH=k3k4 (a short
 * table: the default launch shape only, no v1) or IXL_BENCH=k3prof (K3's per-phase cycles, from
 * the profile instantiation) or IXL_BENCH=pdl (only the PDL A/B lines of the decode shapes).
 * IXL_K3_NEXT=0, 1 or 6 (read once per process by the library) switches K3 from its default
 * (mode 2, the register sort) to another of candidates.cu's modes: every K3 test then checks
 * it, and the table names it `mode0`, `next` or `next6` instead of `new`.
 *
 * PDL (issue 15; kernels/cuda/launch.cuh): pdl_switch tests IXL_PDL's parsing on any build and
 * the process switch's hook (ixl_cuda_pdl_override) on a CUDA build; pdl_chain_matches_cpu runs
 * K3 -> K4 -> K7 -> K4 -> K7 -> gather, PDL off then on, eagerly and as a replayed graph, with
 * poisoned outputs, against the CPU. The other tests run under the process's IXL_PDL. The
 * bench's `pdl-off` / `pdl-on` lines time K4 and the K3 + K4 pair both ways in one process,
 * `graph` as a captured graph of back-to-back launches (the step's way).
 *
 * Timing: CUDA events on the context's stream; inputs rotated over copies filling at least
 * 128 MB (so no launch finds its input in the 60 MB L2); `single` = median of 21 launches timed
 * alone (includes the launch's host cost), `batch` = median of 21 groups of 10 back-to-back
 * launches, per launch; `graph` = one graph of n >= 20 launches (one per copy), median of 11
 * replays, per launch; the current kernel beside the previous one (v1) in the same run. */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "rand.h"
/* IXL_PDL's parsing only (plain C, no CUDA header): the pdl_switch test */
#define IXL_LAUNCH_SWITCH_ONLY
#include "cuda/launch.cuh"
#ifdef IXL_WITH_CUDA
int ixl_cuda_pdl_override(int mode); /* kernels/index/expand.cu: the tests' A/B hook */
#endif

static ixl_ctx *g_ctx;
static int g_small;
static uint64_t g_seed;

/* ---------------------------------------------------------------- tensors */
static ixl_tensor *mk(int dtype, int64_t a, int64_t b, int device) { /* b < 0: 1-D */
  int64_t shape[2] = {a, b};
  ixl_tensor *t = NULL;
  if (ixl_tensor_new(g_ctx, (ixl_dtype)dtype, b < 0 ? 1 : 2, shape, (ixl_device_kind)device,
                     &t) != IXL_OK) {
    fprintf(stderr, "  tensor_new: %s\n", ixl_last_error(g_ctx));
    check_failed_ = 1;
    return NULL;
  }
  return t;
}
static ixl_tensor *dev_copy(const ixl_tensor *h) {
  ixl_tensor *d = mk(h->dtype, h->shape[0], h->ndim == 2 ? h->shape[1] : -1, IXL_DEVICE);
  if (d) CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, d, h));
  return d;
}
static ixl_tensor *host_copy(const ixl_tensor *d) {
  ixl_tensor *h = mk(d->dtype, d->shape[0], d->ndim == 2 ? d->shape[1] : -1, IXL_HOST);
  if (h) CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, h, d));
  return h;
}
static void free_all(ixl_tensor **ts, int n) {
  for (int i = 0; i < n; i++) ixl_tensor_free(ts[i]);
}
static int32_t *I32(const ixl_tensor *t) { return (int32_t *)t->data; }

/* The int32 device tensor d equals the host tensor h; the first differences are printed. */
static int equal_i32(const ixl_tensor *d, const ixl_tensor *h, const char *what, int run) {
  ixl_tensor *g = host_copy(d);
  if (!g) return 0;
  const int64_t n = ixl_tensor_numel(h), cols = h->ndim == 2 ? h->shape[1] : 1;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (I32(g)[i] != I32(h)[i]) {
      if (bad < 4)
        fprintf(stderr, "  %s (run %d): row %lld col %lld: gpu %d, cpu %d (seed %llu)\n", what,
                run, (long long)(i / cols), (long long)(i % cols), I32(g)[i], I32(h)[i],
                (unsigned long long)g_seed);
      bad++;
    }
  if (bad) {
    fprintf(stderr, "  %s (run %d): %lld of %lld differ\n", what, run, (long long)bad,
            (long long)n);
    check_failed_ = 1;
  }
  ixl_tensor_free(g);
  return bad == 0;
}

static void set_env(const char *name, int on) {
  if (on) setenv(name, "1", 1);
  else unsetenv(name);
}

/* K3's launch shape (test-only switches of candidates.cu): threads per CTA and CTAs per row;
 * 0 = the default. */
static void set_k3_shape(int nt, int cs) {
  char v[16];
  if (nt) {
    snprintf(v, sizeof v, "%d", nt);
    setenv("IXL_CANDIDATES_NT", v, 1);
  } else {
    unsetenv("IXL_CANDIDATES_NT");
  }
  if (cs) {
    snprintf(v, sizeof v, "%d", cs);
    setenv("IXL_CANDIDATES_CS", v, 1);
  } else {
    unsetenv("IXL_CANDIDATES_CS");
  }
}

/* ---------------------------------------------------------------- K4 */

/* R rows with T candidates each; lens drawn around T * cbs (shorter rows, empty rows, long
 * rows); `longrow` makes row 1 long enough for several bitmap windows. */
static void expand_case(int64_t R, int64_t T, int cbs, int sbk, int mode, int paged, int longrow,
                        int v1) {
  const int64_t ratio = cbs / sbk, nsb = T * ratio;
  ixl_tensor *cand = mk(IXL_I32, R, T, IXL_HOST), *ks = mk(IXL_I32, R, -1, IXL_HOST);
  ixl_tensor *ke = mk(IXL_I32, R, -1, IXL_HOST), *hid = mk(IXL_I32, R, nsb, IXL_HOST);
  ixl_tensor *hend = mk(IXL_I32, R, -1, IXL_HOST);
  if (!cand || !ks || !ke || !hid || !hend) return;
  for (int64_t r = 0; r < R; r++) {
    int64_t s = paged ? 0 : rand_range(0, 300000), len;
    switch (rand_below(6)) {
      case 0: len = rand_range(0, cbs); break;
      case 1: len = rand_range(0, T * cbs); break; /* shorter than T * cbs */
      case 2: len = T * cbs + rand_range(-2, 2); break;
      default: len = rand_range(T * cbs, 4 * T * cbs + 5000);
    }
    if (r == 0) len = 0;
    if (r == 1 && longrow) len = 131072LL * cbs + rand_range(1, 5000) * sbk + rand_below(sbk);
    if (len < 0) len = 0;
    if (mode == IXL_KS_ALIGNED) s -= s % sbk;
    I32(ks)[r] = (int32_t)s;
    I32(ke)[r] = (int32_t)(s + len);
    const int64_t nb = (len + sbk - 1) / sbk, ncb = (nb + ratio - 1) / ratio;
    const int order = (int)rand_below(3); /* 0 random, 1 descending run, 2 ascending run */
    const int64_t start = rand_range(0, ncb + 2);
    for (int64_t t = 0; t < T; t++) {
      int64_t c = order == 0 ? rand_range(0, ncb + 2) : order == 1 ? start - t : start + t;
      const int p = (int)rand_below(24);
      if (p == 0) c = -1;
      if (p == 1) c = -7;
      if (p == 2) c = 2000000000;
      if (p == 3 && t > 0) c = I32(cand)[r * T + t - 1]; /* a duplicate */
      if (p == 4) c = ncb - 1;                          /* the cut candidate */
      if (p == 5) c = ncb;                              /* just past the row */
      if (c < INT32_MIN) c = -1;
      I32(cand)[r * T + t] = (int32_t)c;
    }
  }
  CHECK_OK(g_ctx, ixl_expand(g_ctx, cand, paged ? NULL : ks, ke, cbs, sbk, mode, hid, hend));
  ixl_tensor *dc = dev_copy(cand), *dks = dev_copy(ks), *dke = dev_copy(ke);
  ixl_tensor *did = mk(IXL_I32, R, nsb, IXL_DEVICE), *dend = mk(IXL_I32, R, -1, IXL_DEVICE);
  if (dc && dks && dke && did && dend) {
    char what[128];
    snprintf(what, sizeof what, "expand%s R=%lld T=%lld cbs=%d sbk=%d mode %d paged %d",
             v1 ? " v1" : "", (long long)R, (long long)T, cbs, sbk, mode, paged);
    set_env("IXL_EXPAND_V1", v1);
    /* runs 0-1: the wide shape, 2-3: the narrow one (v1 ignores it), two poisons each */
    for (int run = 0; run < (v1 ? 2 : 4); run++) {
      setenv("IXL_EXPAND_NARROW", run >= 2 ? "1" : "0", 1);
      CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, did, run & 1 ? 0x00 : 0xff));
      CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, dend, run & 1 ? 0x00 : 0xff));
      CHECK_OK(g_ctx,
               ixl_expand(g_ctx, dc, paged ? NULL : dks, dke, cbs, sbk, mode, did, dend));
      CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
      if (nsb > 0) equal_i32(did, hid, what, run);
      equal_i32(dend, hend, what, run);
    }
    set_env("IXL_EXPAND_V1", 0);
    unsetenv("IXL_EXPAND_NARROW");
  }
  ixl_tensor *all[] = {cand, ks, ke, hid, hend, dc, dks, dke, did, dend};
  free_all(all, 10);
}

/* Every (cbs, sbk) the builder accepts for these cbs: sbk a power of two, 4 <= sbk <=
 * min(cbs, 128), dividing cbs. */
static const int k4_cbs[] = {4, 8, 16, 24, 32, 48, 64, 128, 256};

TEST(expand_matches_cpu) {
  const int ncbs = (int)(sizeof k4_cbs / sizeof k4_cbs[0]);
  for (int ci = 0; ci < ncbs; ci++) {
    const int cbs = k4_cbs[ci];
    for (int sbk = 4; sbk <= cbs && sbk <= 128; sbk *= 2) {
      if (cbs % sbk) continue;
      if (g_small && !((cbs == 8 && sbk == 8) || (cbs == 24 && sbk == 8) ||
                       (cbs == 128 && sbk == 4)))
        continue;
      for (int mode = 0; mode < 2; mode++)
        for (int paged = 0; paged < 2; paged++) {
          if (g_small) {
            expand_case(4, 1 + rand_below(24), cbs, sbk, mode, paged, 0, 0);
            continue;
          }
          static const int64_t Ts[] = {1, 7, 300, 2048};
          const int64_t T = Ts[rand_below(4)];
          expand_case(12, T, cbs, sbk, mode, paged, 0, 0);
        }
    }
  }
  /* several windows (over 131072 candidate blocks in a row), more than one load round per
   * thread (T > 4096), and slots beyond the staging buffer (T * ratio > 4096) */
  expand_case(2, g_small ? 8 : 600, 4, 4, IXL_KS_UNALIGNED, 1, 1, 0);
  expand_case(3, g_small ? 8 : 2048, 8, 4, IXL_KS_ALIGNED, 0, 1, 0);
  expand_case(3, g_small ? 130 : 2048, 128, 4, IXL_KS_UNALIGNED, 0, 0, 0);
  if (!g_small) {
    expand_case(5, 9000, 8, 8, IXL_KS_UNALIGNED, 0, 0, 0);
    expand_case(5, 5000, 16, 8, IXL_KS_UNALIGNED, 1, 0, 0);
    expand_case(64, 2048, 8, 8, IXL_KS_UNALIGNED, 1, 0, 0); /* the decode shape */
  }
}

TEST(expand_spec_vectors) {
  /* SPEC 3's vectors */
  struct { int cbs, sbk, ks, ke, n, cand[2], ids[4], end; } v[] = {
      {8, 8, 64, 72, 1, {0, 0}, {8, 8, 8, 8}, 8},
      {8, 8, 13, 30, 2, {2, 0}, {1, 3, 3, 3}, 9},
      {8, 8, 100, 100, 1, {0, 0}, {12, 12, 12, 12}, 0},
      {16, 8, 0, 48, 2, {1, 0}, {0, 1, 2, 3}, 32},
  };
  for (int i = 0; i < 4; i++) {
    const int T = 4 / (v[i].cbs / v[i].sbk);
    ixl_tensor *cand = mk(IXL_I32, 1, T, IXL_HOST), *ks = mk(IXL_I32, 1, -1, IXL_HOST);
    ixl_tensor *ke = mk(IXL_I32, 1, -1, IXL_HOST);
    if (!cand || !ks || !ke) return;
    for (int t = 0; t < T; t++) I32(cand)[t] = t < v[i].n ? v[i].cand[t] : -1;
    I32(ks)[0] = v[i].ks;
    I32(ke)[0] = v[i].ke;
    ixl_tensor *dc = dev_copy(cand), *dks = dev_copy(ks), *dke = dev_copy(ke);
    ixl_tensor *did = mk(IXL_I32, 1, 4, IXL_DEVICE), *dend = mk(IXL_I32, 1, -1, IXL_DEVICE);
    if (!dc || !dks || !dke || !did || !dend) return;
    CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, did, 0xff));
    CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, dend, 0xff));
    CHECK_OK(g_ctx, ixl_expand(g_ctx, dc, dks, dke, v[i].cbs, v[i].sbk, IXL_KS_UNALIGNED, did,
                               dend));
    ixl_tensor *gid = host_copy(did), *gend = host_copy(dend);
    for (int j = 0; gid && j < 4; j++)
      CHECK_MSG(I32(gid)[j] == v[i].ids[j], "vector %d slot %d: %d, expected %d", i, j,
                I32(gid)[j], v[i].ids[j]);
    if (gend) CHECK_MSG(I32(gend)[0] == v[i].end, "vector %d: end %d, expected %d", i,
                        I32(gend)[0], v[i].end);
    ixl_tensor *all[] = {cand, ks, ke, dc, dks, dke, did, dend, gid, gend};
    free_all(all, 10);
  }
}

TEST(expand_v1_matches_cpu) {
  expand_case(4, g_small ? 16 : 2048, 8, 8, IXL_KS_UNALIGNED, 1, 0, 1);
  expand_case(4, g_small ? 16 : 300, 16, 8, IXL_KS_ALIGNED, 0, 0, 1);
}

/* ---------------------------------------------------------------- K3 */

/* Logit distributions: 0 normal, 1 few distinct values (heavy ties), 2 normal with NaN, +-inf
 * and -0 sprinkled, 3 a plateau of zeros (the relu-sum case), 4 quarter steps with NaN of both
 * signs, +-inf, +-0, 5 all equal, 6 all NaN, 7 +0 and -0 only. */
static float logit(int dist) {
  switch (dist) {
    case 1: return (float)rand_range(-3, 3) * 0.5f;
    case 2: {
      const int p = (int)rand_below(150);
      return p == 0 ? NAN : p == 1 ? INFINITY : p == 2 ? -INFINITY : p == 3 ? -0.0f
                                                                          : (float)rand_normal();
    }
    case 3: return rand_below(4) ? 0.0f : (float)fabs(rand_normal());
    case 4: {
      const int p = (int)rand_below(20);
      if (p == 0) return rand_below(2) ? NAN : -NAN;
      if (p == 1) return rand_below(2) ? INFINITY : -INFINITY;
      if (p == 2) return rand_below(2) ? 0.0f : -0.0f;
      return (float)rand_range(-8, 8) * 0.25f;
    }
    case 5: return -2.5f;
    case 6: return rand_below(2) ? NAN : -NAN;
    case 7: return rand_below(2) ? 0.0f : -0.0f;
    default: return (float)(rand_normal() * 3.0);
  }
}

/* Scores in double as the CPU defines them (for the near-tie rule of logsumexp). */
static double lse_score(const float *x, int64_t n) {
  double m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(x[i])) return NAN;
    if (x[i] > m) m = x[i];
  }
  if (isinf(m)) return m;
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - m);
  return m + log(s);
}
static double block_lse(const float *row, int64_t len, int cbs, int32_t b) {
  const int64_t nb = (len + cbs - 1) / cbs, lo = (int64_t)b * cbs;
  if (b == nb - 1) return INFINITY;
  return lse_score(row + lo, lo + cbs < len ? cbs : len - lo);
}

/* One K3 case on R rows of C columns. `offset` > 0 places the device rows that many floats
 * into their allocation (not 16-byte aligned: the scalar load). */
static void candidate_case(int64_t R, int64_t C, int cbs, int64_t T, int how, int dist,
                           int offset, int v1) {
  ixl_tensor *lg = mk(IXL_F32, R, C, IXL_HOST), *lens = mk(IXL_I32, R, -1, IXL_HOST);
  ixl_tensor *ho = mk(IXL_I32, R, T, IXL_HOST);
  ixl_tensor *big = mk(IXL_F32, R * C + offset + 1, -1, IXL_DEVICE);
  ixl_tensor *dn = NULL, *dout = NULL;
  if (!lg || !lens || !ho || !big) goto out;
  for (int64_t i = 0; i < R * C; i++) ((float *)lg->data)[i] = logit(dist);
  for (int64_t r = 0; r < R; r++) {
    int64_t len = rand_range(0, C);
    if (r == 0) len = 0;
    if (r == 1) len = C;
    if (r == 2) len = rand_range(1, cbs < C ? cbs : C); /* one block */
    if (r == 3) len = rand_range(0, T * cbs < C ? T * cbs : C); /* at most T blocks */
    I32(lens)[r] = (int32_t)len;
  }
  CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, lg, lens, cbs, how, ho));
  {
    ixl_tensor dl;
    int64_t shape[2] = {R, C};
    CHECK_OK(g_ctx, ixl_tensor_view(g_ctx, big, 2, shape, NULL, offset, &dl));
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, &dl, lg));
    dn = dev_copy(lens);
    dout = mk(IXL_I32, R, T, IXL_DEVICE);
    if (!dn || !dout) goto out;
    char what[160];
    snprintf(what, sizeof what,
             "candidate_select%s R=%lld C=%lld cbs=%d T=%lld score %d dist %d offset %d",
             v1 ? " v1" : "", (long long)R, (long long)C, cbs, (long long)T, how, dist, offset);
    set_env("IXL_CANDIDATES_V1", v1);
    for (int run = 0; run < 2; run++) {
      CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, dout, run ? 0x00 : 0xff));
      CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, &dl, dn, cbs, how, dout));
      CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
      if (how != IXL_SCORE_LOGSUMEXP) {
        equal_i32(dout, ho, what, run);
        continue;
      }
      ixl_tensor *go = host_copy(dout);
      for (int64_t r = 0; go && r < R; r++) {
        const float *row = (const float *)lg->data + r * C;
        for (int64_t j = 0; j < T; j++) {
          const int32_t a = I32(go)[r * T + j], b = I32(ho)[r * T + j];
          if (a == b) continue;
          const double sa = a < 0 ? NAN : block_lse(row, I32(lens)[r], cbs, a);
          const double sb = b < 0 ? NAN : block_lse(row, I32(lens)[r], cbs, b);
          if (!(isfinite(sa) && isfinite(sb) &&
                fabs(sa - sb) <= 1e-6 * fmax(1.0, fmax(fabs(sa), fabs(sb))))) {
            fprintf(stderr, "  %s (run %d): row %lld slot %lld: gpu %d, cpu %d, not a near-tie "
                    "(seed %llu)\n", what, run, (long long)r, (long long)j, a, b,
                    (unsigned long long)g_seed);
            check_failed_ = 1;
            break;
          }
        }
      }
      ixl_tensor_free(go);
    }
    set_env("IXL_CANDIDATES_V1", 0);
  }
out:;
  ixl_tensor *all[] = {lg, lens, ho, big, dn, dout};
  free_all(all, 6);
}

TEST(candidate_select_matches_cpu) {
  static const int cbss[] = {1, 4, 8, 12, 16, 64, 128, 256};
  const int ncbs = (int)(sizeof cbss / sizeof cbss[0]);
  for (int how = 0; how < 4; how++)
    for (int ci = 0; ci < ncbs; ci++) {
      const int cbs = cbss[ci];
      if (g_small && !(cbs == 8 || cbs == 12 || (how == 0 && (cbs == 1 || cbs == 128))))
        continue;
      if (g_small && how != 0 && how != 3) continue;
      const int64_t C = g_small ? 1000 + 4 * rand_below(200) : 20000 + 4 * rand_below(10000);
      const int64_t nb = (C + cbs - 1) / cbs;
      const int64_t Ts[4] = {1, 16, g_small ? 40 : 2048, nb + 5};
      for (int ti = 0; ti < 4; ti++) {
        const int dist = (int)rand_below(8);
        candidate_case(g_small ? 4 : 9, C, cbs, Ts[ti], how, dist, 0, 0);
      }
      /* rows not 16-byte aligned (odd C; an offset allocation) */
      candidate_case(g_small ? 4 : 7, C + 3, cbs, 16 + rand_below(100), how, (int)rand_below(8),
                     0, 0);
      candidate_case(g_small ? 4 : 7, C, cbs, 16 + rand_below(100), how, (int)rand_below(8), 1,
                     0);
    }
  /* every tie and NaN distribution at the production block size */
  for (int dist = 0; dist < 8; dist++)
    candidate_case(g_small ? 4 : 9, g_small ? 2000 : 40000, 8, g_small ? 50 : 2048,
                   IXL_SCORE_MAX, dist, 0, 0);
  if (!g_small) {
    /* rows of 65536 blocks or more, and a T whose sort buffer does not fit: the long-row
     * kernel */
    candidate_case(3, 70000, 1, 2048, IXL_SCORE_MAX, 0, 0, 0);
    candidate_case(3, 30000, 1, 30000, IXL_SCORE_MAX, 1, 0, 0);
    /* the decode shape, every row checked */
    candidate_case(64, 131072, 8, 2048, IXL_SCORE_MAX, 0, 0, 0);
    candidate_case(64, 131072, 16, 1024, IXL_SCORE_MAX, 4, 0, 0);
  }
}

TEST(candidate_select_v1_matches_cpu) {
  candidate_case(4, g_small ? 1500 : 20000, 8, g_small ? 40 : 2048, IXL_SCORE_MAX, 0, 0, 1);
  candidate_case(4, g_small ? 1500 : 20000, 8, 20, IXL_SCORE_SUM, 1, 0, 1);
}

/* Every launch shape (threads per CTA, CTAs per row as a cluster) on the same cases. */
TEST(candidate_select_shapes_match_cpu) {
  static const int shapes[][2] = {{1024, 1}, {512, 1}, {1024, 2}, {512, 2}, {512, 4}, {512, 8}};
  for (int si = 0; si < 6; si++) {
    if (g_small && si != 1 && si != 2 && si != 4) continue;
    set_k3_shape(shapes[si][0], shapes[si][1]);
    for (int how = 0; how < 4; how += g_small ? 3 : 1) {
      const int64_t C = g_small ? 800 + 4 * rand_below(100) : 30000 + 4 * rand_below(5000);
      static const int cbss[] = {8, 12, 1, 128};
      for (int ci = 0; ci < 4; ci++) {
        if (g_small && ci > 1) continue;
        const int cbs = cbss[ci];
        const int64_t nb = (C + cbs - 1) / cbs;
        candidate_case(g_small ? 3 : 9, C, cbs, g_small ? 24 : 2048, how, (int)rand_below(8), 0,
                       0);
        if (!g_small) candidate_case(5, C, cbs, nb + 5, how, (int)rand_below(8), 0, 0);
        if (!g_small) candidate_case(5, C + 1, cbs, 100, how, (int)rand_below(8), 0, 0);
      }
    }
    if (!g_small) candidate_case(64, 131072, 8, 2048, IXL_SCORE_MAX, (int)rand_below(8), 0, 0);
    /* a sort of 2048 winners (2 or 4 per lane in IXL_K3_NEXT's register sort) on a small row */
    candidate_case(3, 2100 + 4 * rand_below(50), 1, 1100, IXL_SCORE_MAX, (int)rand_below(8), 0,
                   0);
  }
  set_k3_shape(0, 0);
}

/* The prefill shape (4096 rows of 131072 positions, generated on the device): K3 on sampled
 * rows and K4 on every row against the CPU. */
TEST(prefill_shape_matches_cpu) {
  const int64_t R = 4096, C = 131072, T = 2048;
  const int cbs = 8;
  ixl_tensor *dl = mk(IXL_F32, R, C, IXL_DEVICE), *lens = mk(IXL_I32, R, -1, IXL_HOST);
  ixl_tensor *cand = mk(IXL_I32, R, T, IXL_DEVICE), *ids = mk(IXL_I32, R, T, IXL_DEVICE);
  ixl_tensor *end = mk(IXL_I32, R, -1, IXL_DEVICE), *dn = NULL;
  ixl_tensor *row = mk(IXL_F32, 1, C, IXL_HOST), *rl = mk(IXL_I32, 1, -1, IXL_HOST);
  ixl_tensor *ho = mk(IXL_I32, 1, T, IXL_HOST), *hc = NULL, *hid = NULL, *hend = NULL;
  if (!dl || !lens || !cand || !ids || !end || !row || !rl || !ho) goto out;
  CHECK_OK(g_ctx, ixl_rng_normal(g_ctx, dl, g_seed, 0, 0.0f, 3.0f));
  for (int64_t r = 0; r < R; r++) I32(lens)[r] = (int32_t)(C - R + 1 + r); /* causal */
  dn = dev_copy(lens);
  CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, cand, 0xff));
  CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, dl, dn, cbs, IXL_SCORE_MAX, cand));
  hc = host_copy(cand);
  for (int i = 0; hc && i < 6; i++) {
    const int64_t r = i == 0 ? 0 : i == 1 ? R - 1 : rand_below(R);
    ixl_tensor view;
    int64_t vs[2] = {1, C};
    CHECK_OK(g_ctx, ixl_tensor_view(g_ctx, dl, 2, vs, NULL, r * C, &view));
    CHECK_OK(g_ctx, ixl_tensor_copy(g_ctx, row, &view));
    I32(rl)[0] = I32(lens)[r];
    CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, row, rl, cbs, IXL_SCORE_MAX, ho));
    if (memcmp(ho->data, I32(hc) + r * T, (size_t)T * 4) != 0) {
      fprintf(stderr, "  prefill candidate_select: row %lld differs from the CPU (seed %llu)\n",
              (long long)r, (unsigned long long)g_seed);
      check_failed_ = 1;
    }
  }
  hid = mk(IXL_I32, R, T, IXL_HOST);
  hend = mk(IXL_I32, R, -1, IXL_HOST);
  if (!hc || !hid || !hend) goto out;
  CHECK_OK(g_ctx, ixl_expand(g_ctx, hc, NULL, lens, cbs, 8, IXL_KS_UNALIGNED, hid, hend));
  CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, ids, 0xff));
  CHECK_OK(g_ctx, ixl_expand(g_ctx, cand, NULL, dn, cbs, 8, IXL_KS_UNALIGNED, ids, end));
  equal_i32(ids, hid, "prefill expand ids", 0);
  equal_i32(end, hend, "prefill expand end", 0);
out:;
  ixl_tensor *all[] = {dl, lens, cand, ids, end, dn, row, rl, ho, hc, hid, hend};
  free_all(all, 12);
}

/* ---------------------------------------------------------------- PDL (issue 15) */

/* IXL_PDL's parsing (kernels/cuda/launch.cuh's plain-C part), on any build; with CUDA, the
 * process switch's test hook too (no device needed). */
TEST(pdl_switch) {
  CHECK(ixl_pdl_parse("0") == 0);
  CHECK(ixl_pdl_parse("1") == 1);
  static const char *other[] = {NULL, "", "2", "10", "01", " 1", "on", "off", "-1"};
  for (int i = 0; i < 9; i++)
    CHECK_MSG(ixl_pdl_parse(other[i]) == IXL_PDL_DEFAULT, "IXL_PDL=%s: %d, expected the default %d",
              other[i] ? other[i] : "(unset)", ixl_pdl_parse(other[i]), IXL_PDL_DEFAULT);
#ifdef IXL_WITH_CUDA
  const int env = ixl_pdl_parse(getenv("IXL_PDL"));
  const int before = ixl_cuda_pdl_override(1);
  CHECK(ixl_cuda_pdl_override(0) == 1);
  CHECK(ixl_cuda_pdl_override(-1) == 0);
  CHECK(ixl_cuda_pdl_override(before) == env); /* -1 gave IXL_PDL's value back */
  CHECK(ixl_cuda_pdl_override(-1) == before);
#endif
}

/* The process switch's hook (a no-op on a CPU build, where no test here reaches a device). */
static void pdl_set(int mode) {
#ifdef IXL_WITH_CUDA
  ixl_cuda_pdl_override(mode);
#else
  (void)mode;
#endif
}

/* The device tensors of the chain below. */
typedef struct {
  ixl_tensor *lg, *lens, *cand, *cand2, *cols, *ids, *end, *pos1, *pos2, *gv;
} pdl_chain_t;

/* Poisons every output (byte `poison`), then K3 -> K4 -> K7 -> K4 again (other candidates, the
 * same ids and end: it may not write them before the K7 before it has read them) -> K7 -> gather:
 * every kernel reads the one before it. */
static void pdl_chain(const pdl_chain_t *d, int cbs, int sbk, int poison) {
  ixl_tensor *outs[] = {d->cand, d->ids, d->end, d->pos1, d->pos2, d->gv};
  for (int i = 0; i < 6; i++) CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, outs[i], poison));
  CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, d->lg, d->lens, cbs, IXL_SCORE_MAX, d->cand));
  CHECK_OK(g_ctx, ixl_expand(g_ctx, d->cand, NULL, d->lens, cbs, sbk, IXL_KS_UNALIGNED, d->ids,
                             d->end));
  CHECK_OK(g_ctx, ixl_remap(g_ctx, d->cols, d->ids, NULL, sbk, d->pos1));
  CHECK_OK(g_ctx, ixl_expand(g_ctx, d->cand2, NULL, d->lens, cbs, sbk, IXL_KS_UNALIGNED, d->ids,
                             d->end));
  CHECK_OK(g_ctx, ixl_remap(g_ctx, d->cols, d->ids, NULL, sbk, d->pos2));
  CHECK_OK(g_ctx, ixl_gather_cols(g_ctx, d->lg, d->pos2, d->gv));
}

/* A chain of PDL launches (every kernel of this file's ops with the attribute), eagerly and as
 * a captured graph replayed, PDL off then on in one process, poisoned outputs: each result
 * equals the CPU's (so PDL's results equal the non-PDL ones). The decode shape, where K3 runs
 * about 45 us: a K4 that did not wait would read poison. */
TEST(pdl_chain_matches_cpu) {
  const int64_t R = g_small ? 4 : 64, C = g_small ? 2000 : 131072, T = g_small ? 40 : 2048;
  const int64_t k = g_small ? 16 : 512;
  const int cbs = 8, sbk = 8;
  const int64_t nsb = T * (cbs / sbk);
  ixl_tensor *lg = mk(IXL_F32, R, C, IXL_HOST), *lens = mk(IXL_I32, R, -1, IXL_HOST);
  ixl_tensor *cand = mk(IXL_I32, R, T, IXL_HOST), *cand2 = mk(IXL_I32, R, T, IXL_HOST);
  ixl_tensor *cols = mk(IXL_I32, R, k, IXL_HOST), *ids1 = mk(IXL_I32, R, nsb, IXL_HOST);
  ixl_tensor *ids2 = mk(IXL_I32, R, nsb, IXL_HOST), *end1 = mk(IXL_I32, R, -1, IXL_HOST);
  ixl_tensor *end2 = mk(IXL_I32, R, -1, IXL_HOST), *pos1 = mk(IXL_I32, R, k, IXL_HOST);
  ixl_tensor *pos2 = mk(IXL_I32, R, k, IXL_HOST), *gv = mk(IXL_F32, R, k, IXL_HOST);
  pdl_chain_t d = {0};
  ixl_tensor *gg = NULL;
  if (!lg || !lens || !cand || !cand2 || !cols || !ids1 || !ids2 || !end1 || !end2 || !pos1 ||
      !pos2 || !gv)
    goto out;
  for (int64_t i = 0; i < R * C; i++) ((float *)lg->data)[i] = logit(rand_below(4) ? 0 : 4);
  for (int64_t r = 0; r < R; r++) {
    I32(lens)[r] = (int32_t)(r == 0 ? 0 : r == 1 ? C : rand_range(1, C));
    const int64_t ncb = (I32(lens)[r] + cbs - 1) / cbs;
    for (int64_t t = 0; t < T; t++) I32(cand2)[r * T + t] = (int32_t)rand_range(-1, ncb + 1);
    for (int64_t j = 0; j < k; j++)
      I32(cols)[r * k + j] = (int32_t)rand_range(-1, nsb * sbk - 1);
  }
  /* the CPU's results */
  CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, lg, lens, cbs, IXL_SCORE_MAX, cand));
  CHECK_OK(g_ctx, ixl_expand(g_ctx, cand, NULL, lens, cbs, sbk, IXL_KS_UNALIGNED, ids1, end1));
  CHECK_OK(g_ctx, ixl_remap(g_ctx, cols, ids1, NULL, sbk, pos1));
  CHECK_OK(g_ctx, ixl_expand(g_ctx, cand2, NULL, lens, cbs, sbk, IXL_KS_UNALIGNED, ids2, end2));
  CHECK_OK(g_ctx, ixl_remap(g_ctx, cols, ids2, NULL, sbk, pos2));
  for (int64_t r = 0; r < R; r++)
    for (int64_t j = 0; j < k; j++) {
      const int32_t c = I32(pos2)[r * k + j];
      ((float *)gv->data)[r * k + j] =
          c >= 0 && c < C ? ((const float *)lg->data)[r * C + c] : -INFINITY;
    }
  d.lg = dev_copy(lg);
  d.lens = dev_copy(lens);
  d.cand = mk(IXL_I32, R, T, IXL_DEVICE);
  d.cand2 = dev_copy(cand2);
  d.cols = dev_copy(cols);
  d.ids = mk(IXL_I32, R, nsb, IXL_DEVICE);
  d.end = mk(IXL_I32, R, -1, IXL_DEVICE);
  d.pos1 = mk(IXL_I32, R, k, IXL_DEVICE);
  d.pos2 = mk(IXL_I32, R, k, IXL_DEVICE);
  d.gv = mk(IXL_F32, R, k, IXL_DEVICE);
  if (!d.lg || !d.lens || !d.cand || !d.cand2 || !d.cols || !d.ids || !d.end || !d.pos1 ||
      !d.pos2 || !d.gv)
    goto out;
  for (int pdl = 0; pdl < 2; pdl++) {
    pdl_set(pdl);
    for (int graph = 0; graph < 2; graph++) {
      if (graph) {
        CHECK_OK(g_ctx, ixl_graph_begin(g_ctx));
        pdl_chain(&d, cbs, sbk, 0xff);
        CHECK_OK(g_ctx, ixl_graph_end(g_ctx));
      }
      for (int run = 0; run < 2; run++) {
        char what[96];
        snprintf(what, sizeof what, "PDL %s, %s, run %d: ", pdl ? "on" : "off",
                 graph ? "graph replay" : "eager", run);
        if (graph) { /* poisoned outside the graph too, then the graph poisons and runs */
          ixl_tensor *outs[] = {d.cand, d.ids, d.end, d.pos1, d.pos2, d.gv};
          for (int i = 0; i < 6; i++) CHECK_OK(g_ctx, ixl_tensor_fill_bytes(g_ctx, outs[i], 0));
          CHECK_OK(g_ctx, ixl_graph_launch(g_ctx));
        } else {
          pdl_chain(&d, cbs, sbk, run ? 0x00 : 0xff);
        }
        CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
        char nm[160];
        snprintf(nm, sizeof nm, "%sK3 cand", what);
        equal_i32(d.cand, cand, nm, run);
        snprintf(nm, sizeof nm, "%sK7 after the first K4", what);
        equal_i32(d.pos1, pos1, nm, run);
        snprintf(nm, sizeof nm, "%sthe second K4's ids", what);
        equal_i32(d.ids, ids2, nm, run);
        snprintf(nm, sizeof nm, "%sthe second K4's end", what);
        equal_i32(d.end, end2, nm, run);
        snprintf(nm, sizeof nm, "%sK7 after the second K4", what);
        equal_i32(d.pos2, pos2, nm, run);
        gg = host_copy(d.gv);
        if (gg && memcmp(gg->data, gv->data, (size_t)(R * k) * 4) != 0) {
          fprintf(stderr, "  %sgather: differs from the CPU (seed %llu)\n", what,
                  (unsigned long long)g_seed);
          check_failed_ = 1;
        }
        ixl_tensor_free(gg);
        gg = NULL;
      }
    }
  }
  pdl_set(-1);
out:;
  ixl_tensor *all[] = {lg,     lens,   cand,   cand2, cols,   ids1,   ids2,  end1,
                       end2,   pos1,   pos2,   gv,    d.lg,   d.lens, d.cand, d.cand2,
                       d.cols, d.ids,  d.end,  d.pos1, d.pos2, d.gv};
  free_all(all, 22);
}

/* ---------------------------------------------------------------- timing */

static int cmp_dbl(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The op under test, on input copy i (of n). */
typedef ixl_status (*bench_fn)(void *arg, int i);

/* single: median of 21 launches timed alone; batch: median of 21 groups of 10, per launch. */
static void time_op(bench_fn f, void *arg, int ncopies, double *single, double *batch) {
  double t1[21], tb[21];
  int rot = 0;
  for (int w = 0; w < 3; w++) CHECK_OK(g_ctx, f(arg, rot++ % ncopies));
  for (int rep = 0; rep < 21; rep++) {
    CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
    CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 0));
    CHECK_OK(g_ctx, f(arg, rot++ % ncopies));
    CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 1));
    CHECK_OK(g_ctx, ixl_timer_elapsed_us(g_ctx, 0, 1, &t1[rep]));
  }
  for (int rep = 0; rep < 21; rep++) {
    CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
    CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 0));
    for (int j = 0; j < 10; j++) CHECK_OK(g_ctx, f(arg, rot++ % ncopies));
    CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 1));
    CHECK_OK(g_ctx, ixl_timer_elapsed_us(g_ctx, 0, 1, &tb[rep]));
    tb[rep] /= 10;
  }
  qsort(t1, 21, sizeof t1[0], cmp_dbl);
  qsort(tb, 21, sizeof tb[0], cmp_dbl);
  *single = t1[10];
  *batch = tb[10];
}

/* graph: n launches (over the copies in turn; n = ncopies, at least 20) captured as one CUDA
 * graph, median of 11 replays (after one), per launch: the step's way of launching. */
static void time_graph(bench_fn f, void *arg, int ncopies, double *graph) {
  const int n = ncopies < 20 ? 20 : ncopies;
  double tg[11];
  CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
  CHECK_OK(g_ctx, ixl_graph_begin(g_ctx));
  for (int i = 0; i < n; i++) CHECK_OK(g_ctx, f(arg, i % ncopies));
  CHECK_OK(g_ctx, ixl_graph_end(g_ctx));
  CHECK_OK(g_ctx, ixl_graph_launch(g_ctx));
  for (int rep = 0; rep < 11; rep++) {
    CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
    CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 0));
    CHECK_OK(g_ctx, ixl_graph_launch(g_ctx));
    CHECK_OK(g_ctx, ixl_timer_record(g_ctx, 1));
    CHECK_OK(g_ctx, ixl_timer_elapsed_us(g_ctx, 0, 1, &tg[rep]));
    tg[rep] /= n;
  }
  qsort(tg, 11, sizeof tg[0], cmp_dbl);
  *graph = tg[5];
}

typedef struct {
  ixl_tensor **in; /* copies: logits (K3) or candidates (K4) */
  ixl_tensor *lens, *out, *ids, *end;
  int cbs, sbk, how;
  ixl_tensor **lg; /* the logits' copies (the K3 + K4 pair) */
} bench_args;

static ixl_status run_k3(void *p, int i) {
  bench_args *a = p;
  return ixl_candidate_select(g_ctx, a->in[i], a->lens, a->cbs, (ixl_block_score)a->how, a->out);
}
static ixl_status run_k4(void *p, int i) {
  bench_args *a = p;
  return ixl_expand(g_ctx, a->in[i], NULL, a->lens, a->cbs, a->sbk, IXL_KS_UNALIGNED, a->ids,
                    a->end);
}
/* K3 into `out`, then K4 from it: the pair as a step runs it (K4 right after K3) */
static ixl_status run_pair(void *p, int i) {
  bench_args *a = p;
  ixl_status st =
      ixl_candidate_select(g_ctx, a->lg[i], a->lens, a->cbs, (ixl_block_score)a->how, a->out);
  if (st) return st;
  return ixl_expand(g_ctx, a->out, NULL, a->lens, a->cbs, a->sbk, IXL_KS_UNALIGNED, a->ids,
                    a->end);
}
static ixl_status run_memset(void *p, int i) {
  (void)i;
  return ixl_tensor_fill_bytes(g_ctx, ((bench_args *)p)->end, 0);
}

static int g_quick;           /* IXL_BENCH=k3k4: the default launch shape only, no v1 */
static const char *g_k3_label = "new"; /* the default (mode 2); "mode0", "next", "next6" under
                                          IXL_K3_NEXT=0, 1, 6 */

static void bench_line(const char *name, const char *variant, double s, double b, double bytes) {
  printf("# indexbench %-44s %-8s single %8.2f us batch %8.2f us %6.0f GB/s\n", name, variant, s,
         b, bytes / (b * 1e-6) / 1e9);
  fflush(stdout);
}

static int g_pdl_only; /* IXL_BENCH=pdl: the PDL A/B lines of the decode shapes only */

/* The op with PDL off, then on (the process switch's hook), each as single, batch and graph
 * (the graph captured with the switch in force). */
static void bench_pdl(const char *name, bench_fn f, void *arg, int ncopies, double bytes) {
  for (int pdl = 0; pdl < 2; pdl++) {
    pdl_set(pdl);
    double s, b, g;
    time_op(f, arg, ncopies, &s, &b);
    time_graph(f, arg, ncopies, &g);
    printf("# indexbench %-44s %-8s single %8.2f us batch %8.2f us graph %8.2f us %6.0f GB/s\n",
           name, pdl ? "pdl-on" : "pdl-off", s, b, g, bytes / (g * 1e-6) / 1e9);
    fflush(stdout);
  }
  pdl_set(-1);
}

/* K3 then K4 at R rows of C positions, T blocks of cbs (sbk = cbs unless given), rotated over
 * enough copies of the logits and of the candidates that none stays in the L2. */
static void bench_shape(const char *name, int64_t R, int64_t C, int cbs, int sbk, int64_t T,
                        int how, int k4) {
  const int64_t lbytes = R * C * 4, cbytes = R * T * 4;
  int nl = (int)((256LL << 20) / lbytes + 1), nc = (int)((128LL << 20) / cbytes + 1);
  if (nl > 640) nl = 640;
  if (nc > 256) nc = 256;
  ixl_tensor *lg[640] = {0}, *cd[256] = {0};
  ixl_tensor *lens = mk(IXL_I32, R, -1, IXL_HOST), *dn = NULL;
  ixl_tensor *ids = mk(IXL_I32, R, T * (cbs / sbk), IXL_DEVICE);
  ixl_tensor *end = mk(IXL_I32, R, -1, IXL_DEVICE);
  if (!lens || !ids || !end) goto out;
  for (int64_t r = 0; r < R; r++) I32(lens)[r] = (int32_t)(R > 64 ? C - R + 1 + r : C);
  dn = dev_copy(lens);
  for (int i = 0; i < nl; i++) {
    if (!(lg[i] = mk(IXL_F32, R, C, IXL_DEVICE))) goto out;
    CHECK_OK(g_ctx, ixl_rng_normal(g_ctx, lg[i], g_seed + (uint64_t)i, 0, 0.0f, 3.0f));
  }
  for (int i = 0; i < nc; i++) {
    if (!(cd[i] = mk(IXL_I32, R, T, IXL_DEVICE))) goto out;
    CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, lg[i % nl], dn, cbs, IXL_SCORE_MAX, cd[i]));
  }
  bench_args a = {lg, dn, cd[0], ids, end, cbs, sbk, how, lg};
  double s, b;
  char nm[96];
  snprintf(nm, sizeof nm, "K3 %s", name);
  /* the default, then every launch shape (threads/CTAs per row), then v1 */
  static const int shapes[][2] = {{0, 0}, {1024, 1}, {1024, 2}, {512, 1}, {512, 2}, {512, 4},
                                  {512, 8}};
  for (int v = 0; v < 8; v++) {
    if ((g_quick || g_pdl_only) && v > 0) break;
    if (g_pdl_only) break;
    if (v == 7) {
      set_env("IXL_CANDIDATES_V1", 1);
    } else {
      if (v > 0 && how != IXL_SCORE_MAX && v != 1) continue;
      set_k3_shape(shapes[v][0], shapes[v][1]);
    }
    char var[16];
    if (v == 0) snprintf(var, sizeof var, "%s", g_k3_label);
    else if (v == 7) snprintf(var, sizeof var, "v1");
    else snprintf(var, sizeof var, "%d/%d", shapes[v][0], shapes[v][1]);
    time_op(run_k3, &a, nl, &s, &b);
    bench_line(nm, var, s, b, (double)lbytes);
  }
  set_env("IXL_CANDIDATES_V1", 0);
  set_k3_shape(0, 0);
  if (g_pdl_only) bench_pdl(nm, run_k3, &a, nl, (double)lbytes);
  if (k4) {
    a.in = cd;
    snprintf(nm, sizeof nm, "K4 %s", name);
    /* the default (the shape by row count), the wide and the narrow shape forced
     * (IXL_EXPAND_NARROW=0 / 1), then v1 */
    static const char *k4_var[] = {"new", "wide", "narrow", "v1"};
    for (int v = 0; v < (g_pdl_only ? 0 : g_quick ? 3 : 4); v++) {
      if (v == 1 || v == 2) setenv("IXL_EXPAND_NARROW", v == 2 ? "1" : "0", 1);
      else unsetenv("IXL_EXPAND_NARROW");
      set_env("IXL_EXPAND_V1", v == 3);
      time_op(run_k4, &a, nc, &s, &b);
      bench_line(nm, k4_var[v], s, b, (double)cbytes * (1 + cbs / sbk));
    }
    unsetenv("IXL_EXPAND_NARROW");
    set_env("IXL_EXPAND_V1", 0);
    /* K3 then K4 back to back (the K4 launch may overlap K3 under IXL_K3/K4_NEXT=1) */
    snprintf(nm, sizeof nm, "K3+K4 %s", name);
    if (!g_pdl_only) {
      time_op(run_pair, &a, nl, &s, &b);
      bench_line(nm, g_k3_label, s, b, (double)lbytes);
    }
    /* PDL off / on, in this process: K4 alone, then K3 and K4 back to back */
    a.in = cd;
    snprintf(nm, sizeof nm, "K4 %s", name);
    bench_pdl(nm, run_k4, &a, nc, (double)cbytes * (1 + cbs / sbk));
    snprintf(nm, sizeof nm, "K3+K4 %s", name);
    bench_pdl(nm, run_pair, &a, nl, (double)lbytes);
  }
out:
  for (int i = 0; i < nl; i++) ixl_tensor_free(lg[i]);
  for (int i = 0; i < nc; i++) ixl_tensor_free(cd[i]);
  ixl_tensor *all[] = {lens, dn, ids, end};
  free_all(all, 4);
}

TEST(bench_index) {
  {
    ixl_tensor *t = mk(IXL_I32, 1, -1, IXL_DEVICE);
    bench_args a = {0};
    a.end = t;
    double s, b;
    if (t) time_op(run_memset, &a, 1, &s, &b);
    if (t) bench_line("floor: a 4-byte memset", "-", s, b, 4);
    ixl_tensor_free(t);
  }
  bench_shape("decode 64x131072 cbs 8 T 2048", 64, 131072, 8, 8, 2048, IXL_SCORE_MAX, 1);
  if (!g_pdl_only) {
    bench_shape("decode 64x131072 cbs 16 T 1024", 64, 131072, 16, 16, 1024, IXL_SCORE_MAX, 1);
    bench_shape("decode 64x131072 cbs 64 T 256 sbk 16", 64, 131072, 64, 16, 256, IXL_SCORE_MAX,
                1);
  }
  if (!g_quick)
    bench_shape("decode 64x131072 cbs 8 T 2048 sum", 64, 131072, 8, 8, 2048, IXL_SCORE_SUM, 0);
  bench_shape("decode 1x131072 cbs 8 T 2048", 1, 131072, 8, 8, 2048, IXL_SCORE_MAX, 1);
  if (!g_pdl_only)
    bench_shape("prefill 4096x131072 cbs 8 T 2048", 4096, 131072, 8, 8, 2048, IXL_SCORE_MAX, 1);
  /* a 4K context (the step's context_scaling point where launch gaps weigh most) */
  bench_shape("decode 64x4096 cbs 8 T 512", 64, 4096, 8, 8, 512, IXL_SCORE_MAX, 1);
}


/* K3's phases (IXL_BENCH=k3prof): the profile instantiation prints, for the first and the
 * middle row, the cycles of each phase; each launch on a fresh copy (not in the L2). */
TEST(bench_k3_profile) {
  static const int shapes[][2] = {{1024, 1}, {1024, 2}, {512, 4}, {512, 1}};
  static const int64_t rows[] = {64, 64, 64, 4096};
  for (int si = 0; si < 4; si++) {
    const int64_t R = rows[si], C = 131072, T = 2048;
    ixl_tensor *lg[3] = {0}, *lens = mk(IXL_I32, R, -1, IXL_HOST), *dn = NULL;
    ixl_tensor *out = mk(IXL_I32, R, T, IXL_DEVICE);
    if (!lens || !out) return;
    for (int64_t r = 0; r < R; r++) I32(lens)[r] = (int32_t)C;
    dn = dev_copy(lens);
    for (int i = 0; i < 3; i++) {
      if (!(lg[i] = mk(IXL_F32, R, C, IXL_DEVICE))) return;
      CHECK_OK(g_ctx, ixl_rng_normal(g_ctx, lg[i], g_seed + (uint64_t)i, 0, 0.0f, 3.0f));
    }
    set_k3_shape(shapes[si][0], shapes[si][1]);
    setenv("IXL_CANDIDATES_PROFILE", "1", 1);
    for (int i = 0; i < 3; i++) {
      CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
      printf("# k3prof %lldx%lld launch %d\n", (long long)R, (long long)C, i);
      fflush(stdout);
      CHECK_OK(g_ctx, ixl_candidate_select(g_ctx, lg[i], dn, 8, IXL_SCORE_MAX, out));
      CHECK_OK(g_ctx, ixl_ctx_sync(g_ctx));
      fflush(stdout);
    }
    unsetenv("IXL_CANDIDATES_PROFILE");
    set_k3_shape(0, 0);
    ixl_tensor *all[] = {lg[0], lg[1], lg[2], lens, dn, out};
    free_all(all, 6);
  }
}

/* ---------------------------------------------------------------- main */

#define RUN_GPU(name) RUN_ON_GPU(g_ctx, name)

int main(void) {
  g_seed = test_seed();
  rand_seed(RAND_SPLITMIX64, g_seed);
  g_small = getenv("IXL_TEST_SMALL") && getenv("IXL_TEST_SMALL")[0] == '1';
  const char *bench = getenv("IXL_BENCH");
  if (g_small) printf("# small shapes\n");
  g_quick = bench && strcmp(bench, "k3k4") == 0;
  if (getenv("IXL_K3_NEXT")) { /* the library's modes (candidates.cu): 1, 2 and 6 */
    const int m = atoi(getenv("IXL_K3_NEXT"));
    g_k3_label = m == 0 ? "mode0" : m == 1 ? "next" : m == 6 ? "next6" : "new";
  }
  g_pdl_only = bench && strcmp(bench, "pdl") == 0;
  printf("# K3 kernel: %s; PDL by default: %s (IXL_PDL=%s)\n", g_k3_label,
         ixl_pdl_parse(getenv("IXL_PDL")) ? "on" : "off",
         getenv("IXL_PDL") ? getenv("IXL_PDL") : "unset");
  g_ctx = test_cuda_ctx(g_seed);
  if (!(bench && (strcmp(bench, "only") == 0 || strcmp(bench, "k3prof") == 0 || g_quick ||
                 g_pdl_only))) {
    RUN(pdl_switch);
    RUN_GPU(pdl_chain_matches_cpu);
    RUN_GPU(expand_spec_vectors);
    RUN_GPU(expand_matches_cpu);
    RUN_GPU(expand_v1_matches_cpu);
    RUN_GPU(candidate_select_matches_cpu);
    RUN_GPU(candidate_select_v1_matches_cpu);
    RUN_GPU(candidate_select_shapes_match_cpu);
    if (!g_small) RUN_GPU(prefill_shape_matches_cpu);
  }
  if (bench && (bench[0] == '1' || strcmp(bench, "only") == 0 || g_quick || g_pdl_only))
    RUN_GPU(bench_index);
  if (bench && strcmp(bench, "k3prof") == 0) RUN_GPU(bench_k3_profile);
  ixl_ctx_free(g_ctx);
  DONE();
}
