/* test_rng.c - Philox4x32-10 known answers, the uniform stream against cuRAND's host generator
 * (loaded with dlopen at run time, so CUDA=0 builds need no libcurand), the normal transform's
 * accuracy and statistics, its odd lengths and offsets, and the argument checks. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "rand.h"
#include "gen/rng_math.h"

static ixl_tensor *f32(ixl_ctx *ctx, int64_t n) {
  ixl_tensor *t = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_F32, 1, &n, IXL_HOST, &t));
  return t;
}

/* Known answers: Random123's published Philox4x32-10 vectors, and cuRAND's first block for
 * seed 1234 (key = the seed's two halves, counter 0). */
TEST(philox_known_answers) {
  struct {
    uint32_t ctr[4], key[2], out[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
      {{0, 0, 0, 0}, {1234, 0}, {546353992u, 3665621163u, 1140953199u, 3419031310u}},
  };
  for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
    uint32_t out[4];
    ixl_philox4x32_10(kat[k].ctr, kat[k].key, out);
    for (int i = 0; i < 4; i++)
      CHECK_MSG(out[i] == kat[k].out[i], "vector %zu word %d: %08x, expected %08x", k, i, out[i],
                kat[k].out[i]);
  }
  ixl_philox4x32_10(NULL, NULL, NULL); /* ignored, no crash */
}

/* ---- cuRAND's host generator through dlopen */
typedef int (*cr_create_t)(void **, int);
typedef int (*cr_u64_t)(void *, unsigned long long);
typedef int (*cr_uniform_t)(void *, float *, size_t);
typedef int (*cr_destroy_t)(void *);
static struct {
  void *lib;
  cr_create_t create;
  cr_u64_t seed, offset;
  cr_uniform_t uniform;
  cr_destroy_t destroy;
} curand;

static int load_curand(void) {
  const char *paths[] = {"libcurand.so.10", "/usr/local/cuda/lib64/libcurand.so.10",
                         "libcurand.so"};
  for (size_t i = 0; i < 3 && !curand.lib; i++)
    curand.lib = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
  if (!curand.lib) return 0;
  curand.create = (cr_create_t)dlsym(curand.lib, "curandCreateGeneratorHost");
  curand.seed = (cr_u64_t)dlsym(curand.lib, "curandSetPseudoRandomGeneratorSeed");
  curand.offset = (cr_u64_t)dlsym(curand.lib, "curandSetGeneratorOffset");
  curand.uniform = (cr_uniform_t)dlsym(curand.lib, "curandGenerateUniform");
  curand.destroy = (cr_destroy_t)dlsym(curand.lib, "curandDestroyGenerator");
  return curand.create && curand.seed && curand.offset && curand.uniform && curand.destroy;
}

/* curandGenerateUniform of a host PHILOX4_32_10 generator (rng type 161). 0 on failure. */
static int curand_uniform(uint64_t seed, uint64_t offset, float *out, size_t n) {
  void *g = NULL;
  if (curand.create(&g, 161) != 0) return 0;
  int ok =
      curand.seed(g, seed) == 0 && curand.offset(g, offset) == 0 && curand.uniform(g, out, n) == 0;
  curand.destroy(g);
  return ok;
}

TEST(uniform_matches_curand_host_generator) {
  if (!load_curand()) {
    printf(
        "# skipped: libcurand.so.10 not found (%s); the stream is still checked against the "
        "known answers above\n",
        dlerror());
    return;
  }
  ixl_ctx *ctx = test_ctx(0);
  const uint64_t seeds[] = {0, 1, 1234, 0xffffffffull, 0x0123456789abcdefull, ~0ull};
  /* offsets around the 2^16-subsequence wrap (262144 values) and far out */
  const uint64_t offsets[] = {0, 1, 3, 6, 262143, 262145, (1ull << 34) + 7, (1ull << 62) + 1};
  const int64_t lens[] = {1, 3, 7, 66, 262151};
  int64_t compared = 0;
  for (size_t a = 0; a < 6; a++)
    for (size_t b = 0; b < 8; b++)
      for (size_t c = 0; c < 5; c++) {
        int64_t n = lens[c];
        if (n > 1000 && (a + b) % 3) continue; /* the long length on a third of the pairs */
        float *ref = malloc((size_t)n * 4);
        ixl_tensor *t = f32(ctx, n);
        CHECK(curand_uniform(seeds[a], offsets[b], ref, (size_t)n));
        CHECK_OK(ctx, ixl_rng_uniform(ctx, t, seeds[a], offsets[b]));
        const float *y = t->data;
        int bad = 0;
        for (int64_t i = 0; i < n && bad < 3; i++) {
          if (ixl_f32_bits(y[i]) != ixl_f32_bits(ref[i])) {
            CHECK_MSG(0, "seed %llu offset %llu n %lld: value %lld is %a, cuRAND gives %a",
                      (unsigned long long)seeds[a], (unsigned long long)offsets[b], (long long)n,
                      (long long)i, y[i], ref[i]);
            bad++;
          }
        }
        compared += n;
        ixl_tensor_free(t);
        free(ref);
      }
  printf("# compared %lld uniforms with cuRAND's host generator bitwise\n", (long long)compared);
  ixl_ctx_free(ctx);
}

/* The stream is one sequence: offset o + i gives value i + o of offset 0, whatever the threads. */
TEST(uniform_offsets_and_threads_agree) {
  ixl_ctx *ctx = test_ctx(0);
  const int64_t n = 300007;
  ixl_tensor *all = f32(ctx, n), *part = f32(ctx, n - 1001);
  ixl_ctx_set_threads(ctx, 1);
  CHECK_OK(ctx, ixl_rng_uniform(ctx, all, 99, 0));
  ixl_ctx_set_threads(ctx, 2);
  CHECK_OK(ctx, ixl_rng_uniform(ctx, part, 99, 1001));
  const float *a = all->data, *p = part->data;
  int64_t bad = 0;
  double sum = 0;
  float lo = 1, hi = 0;
  for (int64_t i = 0; i < n - 1001; i++) bad += ixl_f32_bits(a[i + 1001]) != ixl_f32_bits(p[i]);
  for (int64_t i = 0; i < n; i++) {
    sum += a[i];
    lo = a[i] < lo ? a[i] : lo;
    hi = a[i] > hi ? a[i] : hi;
  }
  CHECK_MSG(bad == 0, "%lld values differ between offset 1001 and offset 0 shifted",
            (long long)bad);
  CHECK_MSG(lo > 0 && hi <= 1, "uniforms outside (0, 1]: min %g max %g", lo, hi);
  CHECK_MSG(fabs(sum / n - 0.5) < 5 * sqrt(1.0 / 12 / n), "mean %g", sum / n);
  /* seed 1234: the first 4 values come from subsequence 0, the next 4 from subsequence 1 */
  ixl_tensor *t = f32(ctx, 8);
  CHECK_OK(ctx, ixl_rng_uniform(ctx, t, 1234, 0));
  const float *y = t->data;
  CHECK_MSG(ixl_f32_bits(y[0]) == ixl_f32_bits(ixl_u32_to_uniform(546353992u)), "first uniform %a",
            y[0]);
  CHECK_MSG(fabs(y[4] - 0.816736) < 1e-6 && fabs(y[7] - 0.058918) < 1e-6,
            "values 4..7: %g %g %g %g", y[4], y[5], y[6], y[7]);
  ixl_tensor_free(t);
  ixl_tensor_free(all);
  ixl_tensor_free(part);
  ixl_ctx_free(ctx);
}

/* Our log and sincos against libm in double, over their whole input range. */
TEST(transform_math_is_accurate) {
  double worst_log = 0, worst_sc = 0;
  uint32_t state[4] = {1, 2, 3, 4};
  for (int i = 0; i < 200000; i++) {
    uint32_t blk[4];
    state[0] = (uint32_t)i;
    ixl_philox4x32_10(state, state + 2, blk);
    float u = ixl_u32_to_uniform(blk[0]);
    double x = i < 1000 ? ldexp(1.0, -33 + i % 34) * (1 + (i / 34) * 1e-3) : (double)u;
    if (x > 1) x = 1;
    double l = ixl_rng_log(x), ref = log(x);
    double err = fabs(l - ref) / (fabs(ref) > 1e-300 ? fabs(ref) : 1);
    if (!(x == 1 ? l == 0 : 1)) err = 1;
    worst_log = err > worst_log ? err : worst_log;
    double s, c;
    double t = (double)ixl_u32_to_uniform(blk[1]);
    if (i < 8) t = i / 8.0 + (i == 0 ? 1e-9 : 0); /* quarter and eighth turns */
    ixl_rng_sincos_2pi(t, &s, &c);
    double es = fabs(s - sin(2 * M_PI * t)), ec = fabs(c - cos(2 * M_PI * t));
    if (es > worst_sc) worst_sc = es;
    if (ec > worst_sc) worst_sc = ec;
  }
  CHECK_MSG(worst_log < 1e-15, "log: worst relative error %g", worst_log);
  /* libm's sin(2*pi*t) carries the rounding of 2*pi*t itself (~1e-16 absolute) */
  CHECK_MSG(worst_sc < 2e-15, "sincos: worst absolute error %g", worst_sc);
  CHECK(ixl_rng_log(1.0) == 0.0);
}

/* Every normal equals the libm Box-Muller of the same uniform pair to within one float ulp,
 * and the sample has the moments and tails of N(mean, stddev^2). */
TEST(normal_values_and_statistics) {
  ixl_ctx *ctx = test_ctx(0);
  const int64_t n = 400001; /* odd */
  const uint64_t seed = 20251129, offset = 5;
  ixl_tensor *z = f32(ctx, n), *u = f32(ctx, n + 1);
  CHECK_OK(ctx, ixl_rng_normal(ctx, z, seed, offset, 0.0f, 1.0f));
  CHECK_OK(ctx, ixl_rng_uniform(ctx, u, seed, offset));
  const float *y = z->data, *uu = u->data;
  int64_t far = 0;
  double m1 = 0, m2 = 0, m3 = 0, m4 = 0;
  int64_t tail1 = 0, tail2 = 0, tail3 = 0, neg = 0;
  for (int64_t i = 0; i < n; i++) {
    double r = sqrt(-2 * log((double)uu[i & ~1])), a = 2 * M_PI * (double)uu[i | 1];
    float ref = (float)(i % 2 ? r * sin(a) : r * cos(a));
    float d = fabsf(y[i] - ref), ulp = nextafterf(fabsf(ref), INFINITY) - fabsf(ref);
    if (d > ulp + 1e-12f) {
      if (far < 3)
        CHECK_MSG(0, "seed %llu: normal %lld = %.9g, libm Box-Muller gives %.9g",
                  (unsigned long long)seed, (long long)i, y[i], ref);
      far++;
    }
    double v = y[i];
    m1 += v;
    m2 += v * v;
    m3 += v * v * v;
    m4 += v * v * v * v;
    tail1 += fabs(v) > 1;
    tail2 += fabs(v) > 2;
    tail3 += fabs(v) > 3;
    neg += v < 0;
  }
  m1 /= n;
  m2 /= n;
  m3 /= n;
  m4 /= n;
  double var = m2 - m1 * m1;
  CHECK_MSG(fabs(m1) < 5 / sqrt((double)n), "seed %llu: mean %g", (unsigned long long)seed, m1);
  CHECK_MSG(fabs(var - 1) < 5 * sqrt(2.0 / n), "seed %llu: variance %g", (unsigned long long)seed,
            var);
  CHECK_MSG(fabs(m3) < 5 * sqrt(15.0 / n), "seed %llu: third moment %g", (unsigned long long)seed,
            m3);
  CHECK_MSG(fabs(m4 - 3) < 5 * sqrt(96.0 / n), "seed %llu: fourth moment %g",
            (unsigned long long)seed, m4);
  /* two-sided tail shares of N(0,1), each within 5 binomial sigmas */
  const double p[3] = {0.31731050786291415, 0.04550026389635842, 0.0026997960632601866};
  const int64_t got[3] = {tail1, tail2, tail3};
  for (int k = 0; k < 3; k++)
    CHECK_MSG(fabs((double)got[k] / n - p[k]) < 5 * sqrt(p[k] * (1 - p[k]) / n),
              "seed %llu: P(|z| > %d) = %g, expected %g", (unsigned long long)seed, k + 1,
              (double)got[k] / n, p[k]);
  CHECK_MSG(fabs((double)neg / n - 0.5) < 5 * sqrt(0.25 / n), "share below 0: %g", (double)neg / n);

  /* mean and stddev: mean + stddev * z rounded once */
  ixl_tensor *w = f32(ctx, n);
  CHECK_OK(ctx, ixl_rng_normal(ctx, w, seed, offset, 3.0f, 0.5f));
  const float *yw = w->data;
  int64_t off = 0;
  for (int64_t i = 0; i < n; i++) off += fabsf(yw[i] - (3.0f + 0.5f * y[i])) > 1e-6f;
  CHECK_MSG(off == 0, "%lld values of N(3, 0.25) are not 3 + 0.5 z", (long long)off);
  ixl_tensor_free(w);
  ixl_tensor_free(z);
  ixl_tensor_free(u);
  ixl_ctx_free(ctx);
}

/* Pairs come from stream values (offset + 2j, offset + 2j + 1): an odd length is a prefix of
 * the next even one, offset + 2 shifts by one pair, and the threads do not matter. */
TEST(normal_lengths_offsets_threads) {
  ixl_ctx *ctx = test_ctx(0);
  const int64_t n = 50001;
  ixl_tensor *a = f32(ctx, n + 1), *b = f32(ctx, n), *c = f32(ctx, n - 2), *d = f32(ctx, 5);
  ixl_ctx_set_threads(ctx, 2);
  CHECK_OK(ctx, ixl_rng_normal(ctx, a, 7, 3, 0.0f, 1.0f));
  ixl_ctx_set_threads(ctx, 1);
  CHECK_OK(ctx, ixl_rng_normal(ctx, b, 7, 3, 0.0f, 1.0f));
  CHECK_OK(ctx, ixl_rng_normal(ctx, c, 7, 5, 0.0f, 1.0f));
  CHECK_OK(ctx, ixl_rng_normal(ctx, d, 7, 3, 0.0f, 1.0f));
  const float *ya = a->data, *yb = b->data, *yc = c->data, *yd = d->data;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += ixl_f32_bits(ya[i]) != ixl_f32_bits(yb[i]);
  for (int64_t i = 0; i < n - 2; i++) bad += ixl_f32_bits(ya[i + 2]) != ixl_f32_bits(yc[i]);
  for (int64_t i = 0; i < 5; i++) bad += ixl_f32_bits(ya[i]) != ixl_f32_bits(yd[i]);
  CHECK_MSG(bad == 0, "%lld values differ", (long long)bad);
  /* stddev 0 gives the mean exactly */
  CHECK_OK(ctx, ixl_rng_normal(ctx, d, 7, 3, -2.5f, 0.0f));
  for (int i = 0; i < 5; i++) CHECK(yd[i] == -2.5f);
  ixl_tensor_free(a);
  ixl_tensor_free(b);
  ixl_tensor_free(c);
  ixl_tensor_free(d);
  ixl_ctx_free(ctx);
}

TEST(rng_argument_errors) {
  ixl_ctx *ctx = test_ctx(0);
  int64_t n = 8, shp[2] = {4, 4}, str[2] = {1, 4};
  ixl_tensor *i32 = NULL, *m = NULL, *e = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_I32, 1, &n, IXL_HOST, &i32));
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_F32, 2, shp, IXL_HOST, &m));
  CHECK_ERR(ctx, ixl_rng_uniform(ctx, i32, 1, 0), IXL_ERR_DTYPE,
            "rng_uniform: out: dtype i32, expected f32");
  CHECK_ERR(ctx, ixl_rng_normal(ctx, i32, 1, 0, 0, 1), IXL_ERR_DTYPE, "rng_normal: out: dtype i32");
  CHECK_ERR(ctx, ixl_rng_uniform(ctx, NULL, 1, 0), IXL_ERR_INVALID_ARG,
            "rng_uniform: out: missing tensor");
  ixl_tensor tr;
  CHECK_OK(ctx, ixl_tensor_view(ctx, m, 2, shp, str, 0, &tr));
  CHECK_ERR(ctx, ixl_rng_uniform(ctx, &tr, 1, 0), IXL_ERR_SHAPE,
            "rng_uniform: out: must be contiguous");
  CHECK_ERR(ctx, ixl_rng_normal(ctx, m, 1, 0, 0, -1), IXL_ERR_INVALID_ARG,
            "stddev = -1: must be finite and >= 0");
  CHECK_ERR(ctx, ixl_rng_normal(ctx, m, 1, 0, 0, INFINITY), IXL_ERR_INVALID_ARG, "stddev = inf");
  CHECK_ERR(ctx, ixl_rng_normal(ctx, m, 1, 0, NAN, 1), IXL_ERR_INVALID_ARG,
            "mean = nan: must be finite");
  /* a device tensor on a CPU context */
  ixl_tensor dev = *m;
  dev.device = IXL_DEVICE;
  dev.owns = 0;
  CHECK_ERR(ctx, ixl_rng_uniform(ctx, &dev, 1, 0), IXL_ERR_BACKEND, "the context is not cuda");
  CHECK(ixl_rng_uniform(NULL, m, 1, 0) == IXL_ERR_INVALID_ARG);
  /* an empty tensor is fine and writes nothing */
  int64_t zero = 0;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_F32, 1, &zero, IXL_HOST, &e));
  CHECK_OK(ctx, ixl_rng_uniform(ctx, e, 1, 0));
  CHECK_OK(ctx, ixl_rng_normal(ctx, e, 1, 0, 0, 1));
  ixl_tensor_free(e);
  ixl_tensor_free(i32);
  ixl_tensor_free(m);
  ixl_ctx_free(ctx);
}

/* On a CUDA device: ixl_rng_uniform (cuRAND's device generator) and ixl_rng_normal (our kernel)
 * give the CPU's floats bit for bit. Skipped without a usable device (CUDA=0 builds). */
TEST(device_matches_cpu) {
  char why[256];
  if (!ixl_cuda_available(why, sizeof why)) {
    printf("# skipped: device_matches_cpu needs a CUDA device (%s)\n", why);
    return;
  }
  ixl_ctx *gpu = NULL, *cpu = test_ctx(0);
  CHECK_OK(gpu, ixl_ctx_new(IXL_BACKEND_CUDA, 0, 1, &gpu));
  if (!gpu) return;
  const struct {
    uint64_t seed, offset;
    int64_t n;
  } cases[] = {
      {1234, 0, 1},
      {99, 3, 1000003},
      {(1ull << 40) + 1, 262141, 600001},
      {7, (1ull << 34) + 5, 4099},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    int64_t n = cases[k].n;
    for (int normal = 0; normal < 2; normal++) {
      ixl_tensor *d = NULL, *h = NULL, *back = f32(cpu, n);
      CHECK_OK(gpu, ixl_tensor_new(gpu, IXL_F32, 1, &n, IXL_DEVICE, &d));
      h = f32(cpu, n);
      if (normal) {
        CHECK_OK(gpu, ixl_rng_normal(gpu, d, cases[k].seed, cases[k].offset, 0.25f, 2.0f));
        CHECK_OK(cpu, ixl_rng_normal(cpu, h, cases[k].seed, cases[k].offset, 0.25f, 2.0f));
      } else {
        CHECK_OK(gpu, ixl_rng_uniform(gpu, d, cases[k].seed, cases[k].offset));
        CHECK_OK(cpu, ixl_rng_uniform(cpu, h, cases[k].seed, cases[k].offset));
      }
      CHECK_OK(gpu, ixl_tensor_copy(gpu, back, d));
      const float *a = back->data, *b = h->data;
      int64_t bad = 0, first = -1;
      for (int64_t i = 0; i < n; i++)
        if (ixl_f32_bits(a[i]) != ixl_f32_bits(b[i])) {
          bad++;
          if (first < 0) first = i;
        }
      CHECK_MSG(bad == 0,
                "%s seed %llu offset %llu n %lld: %lld differ, first %lld: gpu %.9g cpu %.9g",
                normal ? "normal" : "uniform", (unsigned long long)cases[k].seed,
                (unsigned long long)cases[k].offset, (long long)n, (long long)bad, (long long)first,
                first >= 0 ? a[first] : 0.0, first >= 0 ? b[first] : 0.0);
      ixl_tensor_free(d);
      ixl_tensor_free(h);
      ixl_tensor_free(back);
    }
  }
  ixl_alloc_stats s;
  ixl_ctx_alloc_stats(gpu, &s);
  CHECK(s.device_bytes_live == 0);
  ixl_ctx_free(gpu);
  ixl_ctx_free(cpu);
}

int main(void) {
  RUN(philox_known_answers);
  RUN(uniform_matches_curand_host_generator);
  RUN(uniform_offsets_and_threads_agree);
  RUN(transform_math_is_accurate);
  RUN(normal_values_and_statistics);
  RUN(normal_lengths_offsets_threads);
  RUN(rng_argument_errors);
  RUN(device_matches_cpu);
  DONE();
}
