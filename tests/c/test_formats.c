/* test_formats.c - quantize, dequantize, prepare_weights and the paged layout (SPEC 2, 8):
 * known vectors per format and quantizer (saturation, tiny and huge amax, -0, NaN, the ties of
 * ties_down's strict thresholds, the exact scale exponent), the e4m3 and f16 conversions
 * against their plain definitions, round trips, a padded page stride, and one test per
 * validation rule. Random inputs use a fresh seed (IXL_TEST_SEED repeats a
 * run); failures print it. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "numerics/scalar.h"
#include "rand.h"

static uint64_t seed_;
static float *F(ixl_tensor *t) { return (float *)t->data; }
static uint8_t *U8(ixl_tensor *t) { return (uint8_t *)t->data; }
static int32_t *I32(ixl_tensor *t) { return (int32_t *)t->data; }
static uint8_t scale_byte(ixl_tensor *scales, int64_t v, int g) { return U8(scales)[v * 4 + g]; }
static uint8_t nib(ixl_tensor *codes, int64_t v, int d) {
  uint8_t b = U8(codes)[v * 64 + d / 2];
  return d % 2 ? b >> 4 : b & 15;
}

/* Quantizes one 128-vector given as floats. */
static ixl_status quant1(ixl_ctx *ctx, ixl_kv_format fmt, ixl_quantizer qz, ixl_role role,
                         const float *x, ixl_tensor **codes, ixl_tensor **scales) {
  ixl_tensor *xt = tnew(ctx, IXL_F32, 2, 1, 128, 0);
  memcpy(xt->data, x, 128 * 4);
  *codes = tnew(ctx, IXL_U8, 2, 1, ixl_format_value_bytes(fmt), 0);
  *scales = tnew(ctx, fmt == IXL_FP8 ? IXL_F32 : IXL_I32, 1, 1, 0, 0);
  ixl_status st = ixl_quantize(ctx, fmt, qz, role, xt, *codes, *scales);
  ixl_tensor_free(xt);
  return st;
}

TEST(mxfp4_rne_known_vectors) {
  ixl_ctx *ctx = test_ctx(2);
  float x[128] = {0};
  /* group 0: amax 6 -> e = 0 (byte 127); the ties of RNE go to the even code */
  const float g0[] = {6,    0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5,
                      0.3f, -0.1f, -0.0f, 5.5f,  -6,    0.2f, 2.9f, 4.4f};
  const uint8_t c0[] = {7, 0, 2, 2, 4, 4, 6, 6, 1, 8, 8, 7, 15, 0, 5, 6};
  for (int i = 0; i < 16; i++) x[i] = g0[i];
  /* group 1: amax 12 exactly -> e = 1; group 2: just above 12 -> e = 2; group 3: amax 3 ->
   * e = -1 */
  x[32] = 12.0f;
  x[33] = 1.0f; /* 1 / 2 = 0.5 -> code 1 */
  x[64] = nextafterf(12.0f, 100.0f);
  x[65] = 1.0f; /* 1 / 4 = 0.25 -> tie -> 0, sign kept: +0 */
  x[96] = -3.0f;
  ixl_tensor *codes, *scales;
  CHECK_OK(ctx, quant1(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, &codes, &scales));
  CHECK(scale_byte(scales, 0, 0) == 127);
  for (int i = 0; i < 16; i++)
    CHECK_MSG(nib(codes, 0, i) == c0[i], "element %d: code %d, expected %d", i, nib(codes, 0, i),
              c0[i]);
  CHECK(scale_byte(scales, 0, 1) == 128 && nib(codes, 0, 32) == 7 && nib(codes, 0, 33) == 1);
  CHECK(scale_byte(scales, 0, 2) == 129 && nib(codes, 0, 64) == 5 &&
        nib(codes, 0, 65) == 0); /* 3.0000002 -> 3 */
  CHECK(scale_byte(scales, 0, 3) == 126 && nib(codes, 0, 96) == 15);
  CHECK(nib(codes, 0, 97) == 0); /* +0 stays +0 */
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  ixl_ctx_free(ctx);
}

TEST(mxfp4_ties_down_known_vectors) {
  ixl_ctx *ctx = test_ctx(2);
  float x[128] = {0};
  /* strict '>': a value exactly on a threshold takes the smaller magnitude; zero drops the sign */
  const float g0[] = {6,     0.25f, 0.75f, 1.25f, 1.75f, 2.5f,   3.5f,   5,
                      0.26f, -0.1f, -0.0f, 5.01f, -6,    -0.25f, -0.76f, 4.9f};
  const uint8_t c0[] = {7, 0, 1, 2, 3, 4, 5, 6, 1, 0, 0, 7, 15, 0, 10, 6};
  for (int i = 0; i < 16; i++) x[i] = g0[i];
  x[32] = 12.0f;                       /* exactly 6 * 2: e = 1 */
  x[64] = nextafterf(12.0f, 100.0f);   /* e = 2 */
  ixl_tensor *codes, *scales;
  CHECK_OK(ctx, quant1(ctx, IXL_MXFP4, IXL_Q_TIES_DOWN, IXL_ROLE_K, x, &codes, &scales));
  CHECK(scale_byte(scales, 0, 0) == 127);
  for (int i = 0; i < 16; i++)
    CHECK_MSG(nib(codes, 0, i) == c0[i], "element %d: code %d, expected %d", i, nib(codes, 0, i),
              c0[i]);
  CHECK(scale_byte(scales, 0, 1) == 128 && scale_byte(scales, 0, 2) == 129);
  /* group 3 is all zeros: amax clamps to 1e-4 -> smallest e with 6 * 2^e >= 1e-4 is -15 */
  CHECK_MSG(scale_byte(scales, 0, 3) == 127 - 15, "byte %d", scale_byte(scales, 0, 3));
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  ixl_ctx_free(ctx);
}

TEST(mx_tiny_huge_nan_and_inf) {
  ixl_ctx *ctx = test_ctx(2);
  float x[128] = {0};
  for (int i = 0; i < 32; i++) x[i] = (i % 2 ? -1 : 1) * 1e-45f; /* subnormal: clamped amax */
  x[32] = FLT_MAX;
  x[33] = -1.0f;
  x[64] = 1.0f;
  x[70] = NAN;
  x[96] = INFINITY;
  x[97] = -INFINITY;
  x[98] = 1e30f;
  ixl_tensor *codes, *scales;
  CHECK_OK(ctx, quant1(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, &codes, &scales));
  CHECK(scale_byte(scales, 0, 0) == 1);                 /* e = -126 */
  CHECK(nib(codes, 0, 0) == 0 && nib(codes, 0, 1) == 8); /* rounds to zero, rne keeps the sign */
  CHECK(scale_byte(scales, 0, 1) == 253);               /* FLT_MAX <= 6 * 2^126 */
  CHECK(nib(codes, 0, 32) == 6);                        /* 3.99999976 -> 4 */
  CHECK(nib(codes, 0, 33) == 8);                        /* -1 / 2^126 -> -0 */
  CHECK(scale_byte(scales, 0, 2) == 0xFF);              /* NaN group */
  for (int d = 64; d < 96; d++) CHECK(nib(codes, 0, d) == 0);
  CHECK(scale_byte(scales, 0, 3) == 253);               /* inf quantizes as FLT_MAX */
  CHECK(nib(codes, 0, 96) == 6 && nib(codes, 0, 97) == 14);
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  CHECK_OK(ctx, quant1(ctx, IXL_MXFP8, IXL_Q_RNE, IXL_ROLE_K, x, &codes, &scales));
  CHECK(scale_byte(scales, 0, 0) == 1);                 /* amax clamp 448 * 2^-126 */
  CHECK(scale_byte(scales, 0, 2) == 0xFF);
  CHECK(scale_byte(scales, 0, 1) == 127 + 120);         /* 448 * 2^120 >= FLT_MAX > 448 * 2^119 */
  CHECK(U8(codes)[32] == 0x78);                         /* 255.99998 -> 256 */
  CHECK(U8(codes)[96] == 0x78 && U8(codes)[97] == 0xF8); /* +-inf as +-FLT_MAX */
  ixl_tensor *out = tnew(ctx, IXL_F32, 2, 1, 128, 0);
  CHECK_OK(ctx, ixl_dequantize(ctx, IXL_MXFP8, IXL_ROLE_K, codes, scales, out));
  for (int d = 64; d < 96; d++) CHECK(isnan(F(out)[d]));
  CHECK(!isnan(F(out)[0]) && !isnan(F(out)[33]));
  ixl_tensor_free(out);
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  ixl_ctx_free(ctx);
}

TEST(mxfp8_known_vectors) {
  ixl_ctx *ctx = test_ctx(2);
  float x[128] = {0};
  x[0] = 448.0f;
  x[1] = 1.0f;
  x[2] = -0.0f;
  x[3] = 0x1p-9f;    /* the smallest e4m3 subnormal */
  x[4] = 0x1p-10f;   /* a tie between 0 and 2^-9 -> even: 0 */
  x[5] = 0x1.1p0f;   /* 1.0625: a tie between 1 and 1.125 -> even: 1 */
  x[6] = 0x1.3p0f;   /* 1.1875: a tie between 1.125 and 1.25 -> even: 1.25 */
  x[32] = 449.0f;    /* amax just above 448 -> e = 1 */
  /* group 2 all zeros */
  ixl_tensor *codes, *scales;
  CHECK_OK(ctx, quant1(ctx, IXL_MXFP8, IXL_Q_RNE, IXL_ROLE_K, x, &codes, &scales));
  const uint8_t *c = U8(codes);
  CHECK(scale_byte(scales, 0, 0) == 127);
  CHECK(c[0] == 0x7E && c[1] == 0x38 && c[2] == 0x80 && c[3] == 0x01 && c[4] == 0x00);
  CHECK_MSG(c[5] == 0x38 && c[6] == 0x3A, "codes %02x %02x", c[5], c[6]);
  CHECK(scale_byte(scales, 0, 1) == 128 && c[32] == 0x76); /* 224.5 -> 224 */
  CHECK(scale_byte(scales, 0, 2) == 1);
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  CHECK_OK(ctx, quant1(ctx, IXL_MXFP8, IXL_Q_TIES_DOWN, IXL_ROLE_K, x, &codes, &scales));
  CHECK(scale_byte(scales, 0, 0) == 127 && scale_byte(scales, 0, 1) == 128);
  /* zeros: amax 1e-4 -> smallest e with 448 * 2^e >= 1e-4 is -22 */
  CHECK_MSG(scale_byte(scales, 0, 2) == 127 - 22, "byte %d", scale_byte(scales, 0, 2));
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  ixl_ctx_free(ctx);
}

TEST(fp8_known_vectors) {
  ixl_ctx *ctx = test_ctx(2);
  float x[128] = {0};
  x[0] = 448.0f;
  x[1] = -2.0f;
  x[2] = NAN;
  ixl_tensor *codes, *scales;
  CHECK_OK(ctx, quant1(ctx, IXL_FP8, IXL_Q_RNE, IXL_ROLE_Q, x, &codes, &scales));
  CHECK(F(scales)[0] == 1.0f && U8(codes)[0] == 0x7E && U8(codes)[1] == 0xC0);
  CHECK((U8(codes)[2] & 0x7F) == 0x7F); /* NaN element stays NaN; amax ignores it */
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  x[0] = 449.0f;
  CHECK_OK(ctx, quant1(ctx, IXL_FP8, IXL_Q_TIES_DOWN, IXL_ROLE_Q, x, &codes, &scales));
  CHECK(F(scales)[0] == 2.0f && U8(codes)[1] == 0xB8); /* Q: always a power of two; -1 */
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  float z[128] = {0};
  CHECK_OK(ctx, quant1(ctx, IXL_FP8, IXL_Q_RNE, IXL_ROLE_K, z, &codes, &scales));
  CHECK(F(scales)[0] == 0x1p-22f); /* 1e-4 / 448 rounded up to a power of two */
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  /* K ties_down: fp32 amax / 448, values times its fp32 reciprocal; saturates at 448 */
  float y[128] = {0};
  y[0] = 100.0f;
  y[1] = -50.0f;
  CHECK_OK(ctx, quant1(ctx, IXL_FP8, IXL_Q_TIES_DOWN, IXL_ROLE_K, y, &codes, &scales));
  float sc = 100.0f / 448.0f;
  CHECK(F(scales)[0] == sc);
  CHECK(U8(codes)[0] == ixl_f32_to_e4m3(100.0f * (1.0f / sc)) && U8(codes)[0] == 0x7E);
  CHECK(U8(codes)[1] == ixl_f32_to_e4m3(-50.0f * (1.0f / sc)));
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  ixl_ctx_free(ctx);
}

/* fp8 K ties_down is scale = fp32(amax / 448) and codes e4m3(x * fp32(1 / scale)): elements
 * placed on e4m3 midpoints make the codes depend on the last bit of that reciprocal. */
TEST(fp8_ties_down_k_formula) {
  ixl_ctx *ctx = test_ctx(2);
  const int M = 200;
  static const float mids[6] = {1.0625f, 1.1875f, 3.25f, 13.0f, 0.0703125f, 208.0f};
  ixl_tensor *x = tnew(ctx, IXL_F32, 2, M, 128, 0), *c = tnew(ctx, IXL_U8, 2, M, 128, 0);
  ixl_tensor *s = tnew(ctx, IXL_F32, 1, M, 0, 0);
  for (int m = 0; m < M; m++) {
    float amax = (float)(1.0 + rand_unit() * 999.0), sc = amax / 448.0f;
    F(x)[m * 128] = amax;
    for (int d = 1; d < 128; d++)
      F(x)[m * 128 + d] = mids[rand_u64() % 6] * sc * (d % 2 ? 1.0f : -1.0f);
  }
  CHECK_OK(ctx, ixl_quantize(ctx, IXL_FP8, IXL_Q_TIES_DOWN, IXL_ROLE_K, x, c, s));
  int bad = 0;
  for (int m = 0; m < M; m++) {
    float sc = F(x)[m * 128] / 448.0f, inv = 1.0f / sc;
    bad += F(s)[m] != sc;
    for (int d = 0; d < 128; d++)
      bad += U8(c)[m * 128 + d] != ixl_f32_to_e4m3(F(x)[m * 128 + d] * inv);
  }
  CHECK_MSG(bad == 0, "%d codes or scales differ (seed %llu)", bad, (unsigned long long)seed_);
  ixl_tensor_free(x);
  ixl_tensor_free(c);
  ixl_tensor_free(s);
  ixl_ctx_free(ctx);
}

TEST(dequantize_rules) {
  ixl_ctx *ctx = test_ctx(2);
  ixl_tensor *codes = tnew(ctx, IXL_U8, 2, 1, 64, 0), *scales = tnew(ctx, IXL_I32, 1, 1, 0, 0);
  ixl_tensor *out = tnew(ctx, IXL_F32, 2, 1, 128, 0);
  memset(codes->data, 0, 64);
  U8(codes)[0] = 0x87; /* element 0: 6 (code 7), element 1: -0 (code 8) */
  U8(codes)[16] = 0x0D; /* element 32: -3 */
  uint8_t sb[4] = {127 + 3, 127 - 2, 0xFF, 1};
  memcpy(scales->data, sb, 4);
  CHECK_OK(ctx, ixl_dequantize(ctx, IXL_MXFP4, IXL_ROLE_K, codes, scales, out));
  CHECK(F(out)[0] == 48.0f);
  CHECK(F(out)[1] == 0.0f && !signbit(F(out)[1])); /* -0 dequantizes to +0 */
  CHECK(F(out)[32] == -0.75f);
  for (int d = 64; d < 96; d++) CHECK(isnan(F(out)[d]));
  CHECK(F(out)[96] == 0.0f);
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  /* fp8 Q excludes the scale (it lives in the weights); K multiplies it; scales may be NULL
   * for Q */
  codes = tnew(ctx, IXL_U8, 2, 1, 128, 0);
  scales = tnew(ctx, IXL_F32, 1, 1, 0, 0);
  memset(codes->data, 0, 128);
  U8(codes)[0] = 0x38; /* 1.0 */
  F(scales)[0] = 0.375f;
  CHECK_OK(ctx, ixl_dequantize(ctx, IXL_FP8, IXL_ROLE_Q, codes, NULL, out));
  CHECK(F(out)[0] == 1.0f);
  CHECK_OK(ctx, ixl_dequantize(ctx, IXL_FP8, IXL_ROLE_Q, codes, scales, out));
  CHECK(F(out)[0] == 1.0f);
  CHECK_OK(ctx, ixl_dequantize(ctx, IXL_FP8, IXL_ROLE_K, codes, scales, out));
  CHECK(F(out)[0] == 0.375f);
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  ixl_tensor_free(out);
  ixl_ctx_free(ctx);
}

/* quantize(dequantize(codes)) == codes, for codes whose groups reach the top magnitude (which
 * pins the scale) and that hold no -0 for mxfp4 (it dequantizes to +0). */
/* e4m3 by the plain definition (round the magnitude to 3 mantissa bits at exponents >= -6,
 * to multiples of 2^-9 below; ties to even; saturate at 448; NaN to 0x7f): the oracle for the
 * library's bit-level conversion. */
static uint8_t e4m3_oracle(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint8_t)(sign | 0x7f);
  const double a = fabs((double)x);
  if (a >= 448.0) return (uint8_t)(sign | 0x7e);
  if (a == 0) return sign;
  int e;
  frexp(a, &e);
  e = e - 1 < -6 ? -6 : e - 1;
  const double q = ldexp(1.0, e - 3), r = rint(a / q) * q; /* a / q exact; rint: to even */
  if (r >= 448.0) return (uint8_t)(sign | 0x7e);
  if (r == 0) return sign;
  const double f = frexp(r, &e);
  if (e - 1 < -6) return (uint8_t)(sign | (uint8_t)(r / ldexp(1.0, -9)));
  return (uint8_t)(sign | (uint8_t)((e - 1 + 7) << 3) | (uint8_t)((f * 2.0 - 1.0) * 8.0));
}

/* A float -> code conversion of the library against its plain definition, codes widened to 32
 * bits: every float exponent with 2048 random mantissas and signs (an LCG from s), every rounding
 * boundary between the codes 0..top (the midpoint of two neighbours, decoded by dec, and one
 * float ulp either side, both signs), and all 2^32 floats with IXL_EXHAUSTIVE=1. */
static void check_conversion(uint32_t (*lib)(float), uint32_t (*def)(float),
                             float (*dec)(uint32_t), uint32_t top, uint64_t s) {
  int64_t bad = 0, n = 0;
  uint32_t first = 0;
#define CONV_CASE(bits)                                  \
  do {                                                   \
    const uint32_t b_ = (bits);                          \
    const float f_ = ixl_bits_f32(b_);                   \
    if (lib(f_) != def(f_) && bad++ == 0) first = b_;    \
    n++;                                                 \
  } while (0)
  for (uint32_t ex = 0; ex < 256; ex++)
    for (int i = 0; i < 2048; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      CONV_CASE((uint32_t)(s >> 63) << 31 | ex << 23 | ((uint32_t)(s >> 20) & 0x7fffffu));
    }
  for (uint32_t c = 0; c < top; c++) {
    const float lo = dec(c), hi = dec(c + 1);
    const float mid = (float)(((double)lo + (double)hi) / 2); /* exact: one more bit */
    const uint32_t mb = ixl_f32_bits(mid);
    for (int d = -1; d <= 1; d++) {
      CONV_CASE(mb + (uint32_t)d);
      CONV_CASE((mb + (uint32_t)d) | 0x80000000u);
    }
  }
#undef CONV_CASE
  const char *ex = getenv("IXL_EXHAUSTIVE");
  if (ex && ex[0] == '1') {
    int64_t bad_all = 0;
#pragma omp parallel for reduction(+ : bad_all)
    for (int64_t i = 0; i <= 0xffffffffll; i++) {
      const float f = ixl_bits_f32((uint32_t)i);
      bad_all += lib(f) != def(f);
    }
    CHECK_MSG(bad_all == 0, "%lld of 2^32 floats convert differently", (long long)bad_all);
  }
  CHECK_MSG(bad == 0, "%lld of %lld inputs differ from the definition, first 0x%08x",
            (long long)bad, (long long)n, first);
}

static uint32_t e4m3_lib(float x) { return ixl_f32_to_e4m3(x); }
static uint32_t e4m3_def(float x) { return e4m3_oracle(x); }
static float e4m3_dec(uint32_t c) { return ixl_e4m3_to_f32((uint8_t)c); }

TEST(e4m3_conversion_matches_its_definition) {
  /* Every float exponent with random mantissas, and every e4m3 rounding boundary (the
   * midpoints between neighbours, and one float ulp either side), both signs; all 2^32
   * floats with IXL_EXHAUSTIVE=1. */
  check_conversion(e4m3_lib, e4m3_def, e4m3_dec, 0x7e, seed_ ^ 0xe4e3u);
}

/* f16 by the plain definition (round the magnitude to 10 mantissa bits at exponents >= -14,
 * to multiples of 2^-24 below; ties to even; inf from 65536 on; NaN to 0x7e00): the oracle for
 * the library's bit-level conversion (numerics/scalar.h). */
static uint16_t f16_oracle(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
  const double a = fabs((double)x);
  if (a == 0) return sign;
  int e;
  frexp(a, &e);
  e = e - 1 < -14 ? -14 : e - 1;
  const double q = ldexp(1.0, e - 10), r = rint(a / q) * q; /* a / q exact; rint: to even */
  if (r >= 65536.0) return (uint16_t)(sign | 0x7c00); /* inf included */
  if (r == 0) return sign;
  const double f = frexp(r, &e);
  if (e - 1 < -14) return (uint16_t)(sign | (uint16_t)(r / ldexp(1.0, -24)));
  return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((f * 2.0 - 1.0) * 1024.0));
}

static uint32_t f16_lib(float x) { return ixl_f32_to_f16(x); }
static uint32_t f16_def(float x) { return f16_oracle(x); }
static float f16_dec(uint32_t c) { return ixl_f16_to_f32((uint16_t)c); }

TEST(f16_conversion_matches_its_definition) {
  /* As for e4m3: every float exponent with random mantissas, every f16 rounding boundary and
   * one float ulp either side, both signs; all 2^32 floats with IXL_EXHAUSTIVE=1. And the
   * way back, exact, on every code (NaNs by class). */
  check_conversion(f16_lib, f16_def, f16_dec, 0x7c00, seed_ ^ 0xf16u);
  for (int c = 0; c < 65536; c++) {
    const int e = (c >> 10) & 31, m = c & 1023;
    const float v = ixl_f16_to_f32((uint16_t)c);
    double want = e == 0 ? ldexp((double)m, -24) : ldexp(1.0 + m / 1024.0, e - 15);
    if (c & 0x8000) want = -want;
    const int ok = e == 31 ? (m ? isnan(v) : isinf(v) && (v < 0) == !!(c & 0x8000))
                           : (double)v == want && !signbit(v) == !(c & 0x8000);
    CHECK_MSG(ok, "f16 code 0x%04x -> %a", c, (double)v);
    if (e != 31 || m) CHECK_MSG(ixl_f32_to_f16(v) == (e == 31 ? (c & 0x8000) | 0x7e00 : c),
                                "f16 code 0x%04x does not round-trip", c);
  }
}

TEST(round_trips) {
  ixl_ctx *ctx = test_ctx(2);
  const int M = 200;
  for (int fmt = 0; fmt < 3; fmt++) {
    for (int qz = 0; qz < 2; qz++) {
      for (int role = 0; role < 2; role++) {
        if (fmt != IXL_FP8 && role == IXL_ROLE_Q) continue; /* same rules as K */
        int vb = ixl_format_value_bytes((ixl_kv_format)fmt);
        ixl_tensor *codes = tnew(ctx, IXL_U8, 2, M, vb, 0), *c2 = tnew(ctx, IXL_U8, 2, M, vb, 0);
        ixl_dtype sdt = fmt == IXL_FP8 ? IXL_F32 : IXL_I32;
        ixl_tensor *scales = tnew(ctx, sdt, 1, M, 0, 0), *s2 = tnew(ctx, sdt, 1, M, 0, 0);
        ixl_tensor *x = tnew(ctx, IXL_F32, 2, M, 128, 0);
        for (int m = 0; m < M; m++) {
          uint8_t *c = U8(codes) + m * vb;
          for (int i = 0; i < vb; i++) {
            uint8_t b = (uint8_t)rand_u64();
            if (fmt == IXL_MXFP4) {
              if ((b & 15) == 8) b &= 0xF0;
              if ((b >> 4) == 8) b &= 0x0F;
            } else if ((b & 0x7F) == 0x7F) {
              b = 0x10; /* no NaN codes */
            }
            c[i] = b;
          }
          for (int g = 0; g < (fmt == IXL_FP8 ? 1 : 4); g++) { /* each group reaches the top code */
            int at = (int)(rand_u64() % (fmt == IXL_FP8 ? 128 : 32));
            if (fmt == IXL_MXFP4) {
              int d = g * 32 + at;
              uint8_t top = rand_u64() & 1 ? 0x7 : 0xF;
              c[d / 2] = d % 2 ? (uint8_t)((c[d / 2] & 0x0F) | top << 4)
                               : (uint8_t)((c[d / 2] & 0xF0) | top);
            } else {
              c[g * 32 + at] = rand_u64() & 1 ? 0x7E : 0xFE;
            }
          }
          if (fmt == IXL_FP8) {
            F(scales)[m] = ldexpf(1.0f, (int)(rand_u64() % 30) - 10);
          } else {
            uint8_t sb[4];
            /* ties_down clamps amax below at 1e-4, so stay above 2^-12 */
            for (int g = 0; g < 4; g++) sb[g] = (uint8_t)(115 + rand_u64() % 100);
            memcpy(I32(scales) + m, sb, 4);
          }
        }
        CHECK_OK(ctx, ixl_dequantize(ctx, (ixl_kv_format)fmt, (ixl_role)role, codes, scales, x));
        if (fmt == IXL_FP8 && role == IXL_ROLE_Q) /* Q's dequantization leaves the scale out */
          for (int m = 0; m < M; m++)
            for (int d = 0; d < 128; d++) F(x)[m * 128 + d] *= F(scales)[m];
        CHECK_OK(ctx, ixl_quantize(ctx, (ixl_kv_format)fmt, (ixl_quantizer)qz, (ixl_role)role, x,
                                   c2, s2));
        int bad = 0;
        for (int64_t i = 0; i < (int64_t)M * vb; i++) bad += U8(codes)[i] != U8(c2)[i];
        for (int m = 0; m < M; m++)
          bad += memcmp((uint8_t *)scales->data + m * 4, (uint8_t *)s2->data + m * 4, 4) != 0;
        CHECK_MSG(bad == 0, "fmt %d quantizer %d role %d: %d mismatches (seed %llu)", fmt, qz, role,
                  bad, (unsigned long long)seed_);
        ixl_tensor_free(codes);
        ixl_tensor_free(c2);
        ixl_tensor_free(scales);
        ixl_tensor_free(s2);
        ixl_tensor_free(x);
      }
    }
  }
  ixl_ctx_free(ctx);
}

/* Random normal inputs: dequantize(quantize(x)) is close to x (bounded by the format's step),
 * and bf16/f16 inputs give the codes of their fp32 values. */
TEST(random_quantization_error_and_input_dtypes) {
  ixl_ctx *ctx = test_ctx(2);
  const int M = 64;
  ixl_tensor *x = tnew(ctx, IXL_F32, 3, 2, M / 2, 128), *xb = tnew(ctx, IXL_BF16, 3, 2, M / 2, 128);
  ixl_tensor *xh = tnew(ctx, IXL_F16, 3, 2, M / 2, 128);
  for (int i = 0; i < M * 128; i++) {
    float v = (float)(rand_normal() * ldexp(1.0, (int)(rand_u64() % 9) - 4));
    if (fabsf(v) < 0x1p-14f) v = copysignf(0x1p-14f, v); /* stay a normal f16 */
    uint16_t b = ixl_f32_to_bf16(v);
    ((uint16_t *)xb->data)[i] = b;
    F(x)[i] = ixl_bf16_to_f32(b); /* exactly representable in bf16 and f16 (small exponents) */
    ((uint16_t *)xh->data)[i] = ixl_f32_to_f16(F(x)[i]);
  }
  for (int fmt = 0; fmt < 3; fmt++) {
    for (int qz = 0; qz < 2; qz++) {
      int vb = ixl_format_value_bytes((ixl_kv_format)fmt);
      ixl_dtype sdt = fmt == IXL_FP8 ? IXL_F32 : IXL_I32;
      ixl_tensor *c = tnew(ctx, IXL_U8, 3, 2, M / 2, vb), *s = tnew(ctx, sdt, 2, 2, M / 2, 0);
      ixl_tensor *c2 = tnew(ctx, IXL_U8, 3, 2, M / 2, vb), *s2 = tnew(ctx, sdt, 2, 2, M / 2, 0);
      ixl_tensor *y = tnew(ctx, IXL_F32, 3, 2, M / 2, 128);
      CHECK_OK(ctx, ixl_quantize(ctx, (ixl_kv_format)fmt, (ixl_quantizer)qz, IXL_ROLE_K, x, c, s));
      CHECK_OK(ctx, ixl_dequantize(ctx, (ixl_kv_format)fmt, IXL_ROLE_K, c, s, y));
      double worst = 0;
      for (int m = 0; m < M; m++) {
        for (int g = 0; g < 4; g++) {
          double amax = 0;
          for (int d = g * 32; d < g * 32 + 32; d++) amax = fmax(amax, fabs(F(x)[m * 128 + d]));
          if (fmt == IXL_FP8) /* one scale per vector */
            for (int d = 0; d < 128; d++) amax = fmax(amax, fabs(F(x)[m * 128 + d]));
          for (int d = g * 32; d < g * 32 + 32; d++) {
            double err = fabs(F(y)[m * 128 + d] - F(x)[m * 128 + d]);
            double rel = err / fmax(amax, 1e-30);
            worst = fmax(worst, rel);
          }
        }
      }
      /* e2m1: a step of up to 2 at the top of [0, 6] -> error <= 1 / 6 of the scale's amax, and
       * amax may sit just above a power-of-two boundary (up to 2x): <= 1/3 of amax; e4m3: 1/16 */
      double bound = fmt == IXL_MXFP4 ? 1.0 / 3.0 + 1e-6 : 1.0 / 16 + 1e-6;
      CHECK_MSG(worst <= bound, "fmt %d quantizer %d: worst error %.4f of amax > %.4f (seed %llu)",
                fmt, qz, worst, bound, (unsigned long long)seed_);
      CHECK_OK(ctx,
               ixl_quantize(ctx, (ixl_kv_format)fmt, (ixl_quantizer)qz, IXL_ROLE_K, xb, c2, s2));
      CHECK(memcmp(c->data, c2->data, (size_t)M * vb) == 0 &&
            memcmp(s->data, s2->data, (size_t)M * 4) == 0);
      CHECK_OK(ctx,
               ixl_quantize(ctx, (ixl_kv_format)fmt, (ixl_quantizer)qz, IXL_ROLE_K, xh, c2, s2));
      CHECK(memcmp(c->data, c2->data, (size_t)M * vb) == 0 &&
            memcmp(s->data, s2->data, (size_t)M * 4) == 0);
      ixl_tensor_free(c);
      ixl_tensor_free(s);
      ixl_tensor_free(c2);
      ixl_tensor_free(s2);
      ixl_tensor_free(y);
    }
  }
  ixl_tensor_free(x);
  ixl_tensor_free(xb);
  ixl_tensor_free(xh);
  ixl_ctx_free(ctx);
}

TEST(quantize_errors) {
  ixl_ctx *ctx = test_ctx(2);
  ixl_tensor *x = tnew(ctx, IXL_F32, 2, 3, 128, 0), *xi = tnew(ctx, IXL_I32, 2, 3, 128, 0);
  ixl_tensor *x127 = tnew(ctx, IXL_F32, 2, 3, 127, 0);
  ixl_tensor *c = tnew(ctx, IXL_U8, 2, 3, 64, 0), *c63 = tnew(ctx, IXL_U8, 2, 3, 63, 0);
  ixl_tensor *c2 = tnew(ctx, IXL_U8, 2, 2, 64, 0);
  ixl_tensor *s = tnew(ctx, IXL_I32, 1, 3, 0, 0), *sf = tnew(ctx, IXL_F32, 1, 3, 0, 0);
  ixl_tensor *s4 = tnew(ctx, IXL_I32, 1, 4, 0, 0);
  memset(x->data, 0, 3 * 128 * 4);
  CHECK_ERR(ctx, ixl_quantize(ctx, (ixl_kv_format)5, IXL_Q_RNE, IXL_ROLE_K, x, c, s),
            IXL_ERR_INVALID_ARG, "kv_format = 5");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, (ixl_quantizer)2, IXL_ROLE_K, x, c, s),
            IXL_ERR_INVALID_ARG, "quantizer = 2");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, (ixl_role)3, x, c, s), IXL_ERR_INVALID_ARG,
            "role = 3");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, xi, c, s), IXL_ERR_DTYPE,
            "x: dtype i32, expected f32, bf16 or f16");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x127, c, s), IXL_ERR_SHAPE,
            "x: shape[1] = 127, expected 128");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, c63, s), IXL_ERR_SHAPE,
            "codes: shape[1] = 63, expected 64 (the value bytes of mxfp4)");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP8, IXL_Q_RNE, IXL_ROLE_K, x, c, s), IXL_ERR_SHAPE,
            "expected 128 (the value bytes of mxfp8)");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, c2, s), IXL_ERR_SHAPE,
            "codes: holds 2 vectors, expected 3");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, c, sf), IXL_ERR_DTYPE,
            "scales: dtype f32, expected i32");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, c, s4), IXL_ERR_SHAPE,
            "scales: holds 4 scales, expected one per vector (3)");
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, NULL, c, s),
            IXL_ERR_INVALID_ARG, "x: missing tensor");
  ixl_tensor *out = tnew(ctx, IXL_F32, 2, 3, 128, 0), *out2 = tnew(ctx, IXL_F32, 2, 3, 64, 0);
  CHECK_ERR(ctx, ixl_dequantize(ctx, IXL_MXFP4, IXL_ROLE_K, c63, s, out), IXL_ERR_SHAPE,
            "codes: shape[1] = 63, expected 64");
  CHECK_ERR(ctx, ixl_dequantize(ctx, IXL_MXFP4, IXL_ROLE_K, c, NULL, out), IXL_ERR_INVALID_ARG,
            "scales: missing tensor");
  CHECK_ERR(ctx, ixl_dequantize(ctx, IXL_MXFP4, IXL_ROLE_K, c, s, out2), IXL_ERR_SHAPE,
            "out: shape[1] = 64, expected 128 (the head dim D)");
  CHECK_ERR(ctx, ixl_dequantize(ctx, IXL_MXFP4, (ixl_role)7, c, s, out), IXL_ERR_INVALID_ARG,
            "role = 7");
  ixl_tensor *tensors[] = {x, xi, x127, c, c63, c2, s, sf, s4, out, out2};
  for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) ixl_tensor_free(tensors[i]);
  ixl_ctx_free(ctx);
}

TEST(prepare_weights_rules_and_errors) {
  ixl_ctx *ctx = test_ctx(2);
  const int R = 3, H = 8;
  ixl_tensor *w = tnew(ctx, IXL_F32, 2, R, H, 0), *qs = tnew(ctx, IXL_F32, 2, R, H, 0);
  ixl_tensor *d = tnew(ctx, IXL_F32, 2, R, H, 0), *b = tnew(ctx, IXL_BF16, 2, R, H, 0);
  for (int i = 0; i < R * H; i++) {
    F(w)[i] = (float)rand_normal();
    F(qs)[i] = ldexpf(1.0f, (int)(rand_u64() % 20) - 10);
  }
  CHECK_OK(ctx, ixl_prepare_weights(ctx, IXL_FP8, w, qs, d, b));
  for (int i = 0; i < R * H; i++) {
    CHECK(F(d)[i] == F(w)[i] * F(qs)[i]);
    CHECK(((uint16_t *)b->data)[i] == ixl_f32_to_bf16(F(w)[i] * F(qs)[i]));
  }
  CHECK_OK(ctx, ixl_prepare_weights(ctx, IXL_MXFP4, w, NULL, d, NULL));
  CHECK_OK(ctx, ixl_prepare_weights(ctx, IXL_MXFP4, w, NULL, NULL, b));
  for (int i = 0; i < R * H; i++) {
    CHECK(F(d)[i] == F(w)[i]);
    CHECK(((uint16_t *)b->data)[i] == ixl_f32_to_bf16(F(w)[i]));
  }
  ixl_tensor *bad = tnew(ctx, IXL_F32, 2, R, H + 4, 0), *bi = tnew(ctx, IXL_I32, 2, R, H, 0);
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_MXFP4, w, qs, d, b), IXL_ERR_INVALID_ARG,
            "q_scales: must be NULL for mxfp4");
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_FP8, w, NULL, d, b), IXL_ERR_INVALID_ARG,
            "q_scales: missing tensor");
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_FP8, w, bad, d, b), IXL_ERR_SHAPE,
            "q_scales: shape[1] = 12, expected 8");
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_MXFP8, bi, NULL, d, b), IXL_ERR_DTYPE,
            "weights: dtype i32, expected f32");
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_MXFP8, w, NULL, bad, b), IXL_ERR_SHAPE,
            "dense_f32: shape[1] = 12, expected 8");
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_MXFP8, w, NULL, d, d), IXL_ERR_DTYPE,
            "sparse_bf16: dtype f32, expected bf16");
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_MXFP8, w, NULL, NULL, NULL), IXL_ERR_INVALID_ARG,
            "both NULL");
  ixl_tensor *tensors[] = {w, qs, d, b, bad, bi};
  for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) ixl_tensor_free(tensors[i]);
  ixl_ctx_free(ctx);
}

TEST(formats_refuse_shared_memory) {
  /* quantize, dequantize and prepare_weights with an output over an input or over another
   * output (descriptors pointed into another tensor's bytes: nothing is written on refusal);
   * disjoint outputs side by side in one buffer are fine. */
  ixl_ctx *ctx = test_ctx(2);
  ixl_tensor *x = tnew(ctx, IXL_F32, 2, 3, 128, 0), *c = tnew(ctx, IXL_U8, 2, 3, 64, 0);
  ixl_tensor *s = tnew(ctx, IXL_I32, 1, 3, 0, 0), *buf = tnew(ctx, IXL_U8, 1, 256, 0, 0);
  for (int i = 0; i < 3 * 128; i++) F(x)[i] = (float)(i % 7) - 3.0f;
  ixl_tensor cv = *c, sv = *s;
  cv.data = x->data;
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, &cv, s),
            IXL_ERR_INVALID_ARG, "codes overlaps x: an output must not share memory with an input");
  CHECK(F(x)[1] == -2.0f);
  cv.data = buf->data;
  sv.data = U8(buf) + 188; /* the last 4 bytes of codes */
  CHECK_ERR(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, &cv, &sv),
            IXL_ERR_INVALID_ARG, "scales overlaps codes: two outputs must not share memory");
  sv.data = U8(buf) + 192; /* right after codes */
  CHECK_OK(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, &cv, &sv));
  CHECK_OK(ctx, ixl_quantize(ctx, IXL_MXFP4, IXL_Q_RNE, IXL_ROLE_K, x, c, s));
  CHECK(memcmp(buf->data, c->data, 192) == 0 && memcmp(U8(buf) + 192, s->data, 12) == 0);

  ixl_tensor *out = tnew(ctx, IXL_F32, 2, 3, 128, 0);
  ixl_tensor ov = *out;
  ov.data = x->data; /* codes and scales copied into x's bytes, out = x */
  memcpy(U8(x), c->data, 192);
  memcpy(U8(x) + 1024, s->data, 12);
  cv.data = x->data;
  sv.data = U8(x) + 1024;
  CHECK_ERR(ctx, ixl_dequantize(ctx, IXL_MXFP4, IXL_ROLE_K, &cv, &sv, &ov), IXL_ERR_INVALID_ARG,
            "out overlaps codes: an output must not share memory with an input");
  CHECK_ERR(ctx, ixl_dequantize(ctx, IXL_MXFP4, IXL_ROLE_K, c, &sv, &ov), IXL_ERR_INVALID_ARG,
            "out overlaps scales");
  CHECK(memcmp(U8(x), c->data, 192) == 0);
  CHECK_OK(ctx, ixl_dequantize(ctx, IXL_MXFP4, IXL_ROLE_K, &cv, &sv, out));

  const int R = 3, H = 8;
  ixl_tensor *w = tnew(ctx, IXL_F32, 2, R, H, 0), *qs = tnew(ctx, IXL_F32, 2, R, H, 0);
  ixl_tensor *d = tnew(ctx, IXL_F32, 2, R, H, 0), *b = tnew(ctx, IXL_BF16, 2, R, H, 0);
  for (int i = 0; i < R * H; i++) F(w)[i] = 1.5f, F(qs)[i] = 2.0f;
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_FP8, w, qs, w, b), IXL_ERR_INVALID_ARG,
            "dense_f32 overlaps weights: an output must not share memory with an input");
  ixl_tensor bv = *b;
  bv.data = qs->data;
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_FP8, w, qs, d, &bv), IXL_ERR_INVALID_ARG,
            "sparse_bf16 overlaps q_scales");
  bv.data = F(d) + 4;
  CHECK_ERR(ctx, ixl_prepare_weights(ctx, IXL_FP8, w, qs, d, &bv), IXL_ERR_INVALID_ARG,
            "sparse_bf16 overlaps dense_f32: two outputs must not share memory");
  CHECK(F(w)[0] == 1.5f && F(qs)[0] == 2.0f);
  CHECK_OK(ctx, ixl_prepare_weights(ctx, IXL_FP8, w, qs, d, b));
  CHECK(F(d)[0] == 3.0f);
  ixl_tensor *tensors[] = {x, c, s, buf, out, w, qs, d, b};
  for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) ixl_tensor_free(tensors[i]);
  ixl_ctx_free(ctx);
}

TEST(paged_write_with_padded_stride) {
  ixl_ctx *ctx = test_ctx(2);
  for (int fmt = 0; fmt < 3; fmt++) {
    const int P = 16, N = 100, vb = ixl_format_value_bytes((ixl_kv_format)fmt);
    const int64_t stride =
        ((int64_t)P * (vb + 4) + 511) / 512 * 512 + 512; /* padded past the minimum */
    const int src = 7, count = 70, np = (count + P - 1) / P, num_pages = 9;
    ixl_tensor *codes = tnew(ctx, IXL_U8, 2, N, vb, 0);
    ixl_tensor *scales = tnew(ctx, fmt == IXL_FP8 ? IXL_F32 : IXL_I32, 1, N, 0, 0);
    ixl_tensor *pages = tnew(ctx, IXL_U8, 2, num_pages, stride, 0),
               *ids = tnew(ctx, IXL_I32, 1, np, 0, 0);
    rand_bytes(codes->data, (int64_t)N * vb);
    rand_bytes(scales->data, (int64_t)N * 4);
    const int32_t perm[5] = {4, 0, 8, 2, 6};
    memcpy(ids->data, perm, sizeof perm);
    memset(pages->data, 0xA5, (size_t)(num_pages * stride));
    CHECK_OK(ctx,
             ixl_kv_pages_write(ctx, (ixl_kv_format)fmt, codes, scales, src, count, pages, P, ids));
    int bad = 0;
    for (int p = 0; p < count; p++) {
      const uint8_t *base = U8(pages) + perm[p / P] * stride;
      bad += memcmp(base + (p % P) * vb, U8(codes) + (int64_t)(src + p) * vb, (size_t)vb) != 0;
      bad += memcmp(base + P * vb + (p % P) * 4, U8(scales) + (src + p) * 4, 4) != 0;
    }
    CHECK_MSG(bad == 0, "fmt %d: %d positions misplaced", fmt, bad);
    /* untouched: the padding after the scales, the unused slots of the last page, other pages */
    const uint8_t *last = U8(pages) + perm[np - 1] * stride;
    int untouched = 1;
    for (int64_t i = (int64_t)P * (vb + 4); i < stride; i++)
      untouched &= U8(pages)[perm[0] * stride + i] == 0xA5;
    for (int i = (count % P) * vb; i < P * vb; i++) untouched &= last[i] == 0xA5;
    for (int64_t i = 0; i < stride; i++) untouched &= U8(pages)[1 * stride + i] == 0xA5;
    CHECK_MSG(untouched, "fmt %d: bytes outside the written positions changed", fmt);
    ixl_tensor_free(codes);
    ixl_tensor_free(scales);
    ixl_tensor_free(pages);
    ixl_tensor_free(ids);
  }
  ixl_ctx_free(ctx);
}

TEST(paged_write_errors) {
  ixl_ctx *ctx = test_ctx(2);
  const int P = 16;
  ixl_tensor *codes = tnew(ctx, IXL_U8, 2, 40, 64, 0), *scales = tnew(ctx, IXL_I32, 1, 40, 0, 0);
  ixl_tensor *sf = tnew(ctx, IXL_F32, 1, 40, 0, 0);
  ixl_tensor *pages = tnew(ctx, IXL_U8, 2, 4, 1536, 0), *p_odd = tnew(ctx, IXL_U8, 2, 4, 1100, 0);
  ixl_tensor *p_small = tnew(ctx, IXL_U8, 2, 4, 1024, 0);
  ixl_tensor *ids = tnew(ctx, IXL_I32, 1, 3, 0, 0), *ids1 = tnew(ctx, IXL_I32, 1, 1, 0, 0);
  memset(codes->data, 0, 40 * 64);
  memset(scales->data, 0, 40 * 4);
  int32_t good[3] = {2, 0, 1};
  memcpy(ids->data, good, sizeof good);
  CHECK_OK(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, 40, pages, P, ids));
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, 40, p_odd, P, ids),
            IXL_ERR_SHAPE,
            "pages: shape[1] (page stride) = 1100: must be a multiple of 512 and >= page_size * 68 "
            "= 1088");
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, 40, p_small, P, ids),
            IXL_ERR_SHAPE, "page stride) = 1024");
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 5, 40, pages, P, ids),
            IXL_ERR_INVALID_ARG, "src_start = 5, count = 40");
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, -1, 4, pages, P, ids),
            IXL_ERR_INVALID_ARG, "src_start = -1");
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, 40, pages, 0, ids),
            IXL_ERR_INVALID_ARG, "page_size = 0");
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, 40, pages, P, ids1),
            IXL_ERR_SHAPE, "page_ids: shape[0] = 1: must be >= ceil(count / page_size) = 3");
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, sf, 0, 40, pages, P, ids), IXL_ERR_DTYPE,
            "scales: dtype f32, expected i32");
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_FP8, codes, sf, 0, 40, pages, P, ids), IXL_ERR_SHAPE,
            "codes: shape[1] = 64, expected 128 (the value bytes of fp8)");
  int32_t oob[3] = {2, 4, 1};
  memcpy(ids->data, oob, sizeof oob);
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, 40, pages, P, ids),
            IXL_ERR_INVALID_ARG, "page_ids[1] = 4: must be in [0, num_pages) = [0, 4)");
  int32_t dup[3] = {2, 1, 2};
  memcpy(ids->data, dup, sizeof dup);
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, 40, pages, P, ids),
            IXL_ERR_INVALID_ARG, "page_ids[2] = 2: already used by page_ids[0]");
  ixl_tensor *tensors[] = {codes, scales, sf, pages, p_odd, p_small, ids, ids1};
  for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) ixl_tensor_free(tensors[i]);
  ixl_ctx_free(ctx);
}

TEST(paged_write_refuses_shared_memory) {
  /* pages overlapping codes, scales or page_ids: memcpy would read bytes it already wrote
   * (ASan: memcpy-param-overlap). Disjoint views of one buffer are fine. */
  ixl_ctx *ctx = test_ctx(2);
  ixl_tensor *buf = tnew(ctx, IXL_U8, 1, 2048, 0, 0), *scales = tnew(ctx, IXL_I32, 1, 8, 0, 0);
  ixl_tensor *ids = tnew(ctx, IXL_I32, 1, 1, 0, 0);
  memset(buf->data, 1, 2048);
  memset(scales->data, 0, 32);
  I32(ids)[0] = 0;
  ixl_tensor pages, codes;
  int64_t ps[2] = {2, 1024}, cs[2] = {8, 64};
  CHECK_OK(ctx, ixl_tensor_view(ctx, buf, 2, ps, NULL, 0, &pages));
  CHECK_OK(ctx, ixl_tensor_view(ctx, buf, 2, cs, NULL, 32, &codes));
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, &codes, scales, 0, 8, &pages, 8, ids),
            IXL_ERR_INVALID_ARG,
            "pages overlaps codes: an output must not share memory with an input");
  ixl_tensor sc = *scales, id = *ids; /* the same descriptors pointed into pages */
  sc.data = U8(buf) + 1536;
  id.data = U8(buf) + 1024;
  CHECK_OK(ctx, ixl_tensor_view(ctx, buf, 2, cs, NULL, 1024, &codes)); /* page 1's bytes */
  ps[0] = 1;
  CHECK_OK(ctx, ixl_tensor_view(ctx, buf, 2, ps, NULL, 0, &pages)); /* page 0 only */
  CHECK_OK(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, &codes, scales, 0, 8, &pages, 8, ids));
  CHECK(U8(buf)[0] == 1 && U8(buf)[8 * 64] == 0); /* codes copied, then the zero scales */
  ps[0] = 2;
  CHECK_OK(ctx, ixl_tensor_view(ctx, buf, 2, ps, NULL, 0, &pages));
  ixl_tensor *c2 = tnew(ctx, IXL_U8, 2, 8, 64, 0);
  memset(c2->data, 0, 8 * 64);
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, c2, &sc, 0, 8, &pages, 8, ids),
            IXL_ERR_INVALID_ARG, "pages overlaps scales");
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, c2, scales, 0, 8, &pages, 8, &id),
            IXL_ERR_INVALID_ARG, "pages overlaps page_ids");
  ixl_tensor_free(c2);
  ixl_tensor_free(buf);
  ixl_tensor_free(scales);
  ixl_tensor_free(ids);
  ixl_ctx_free(ctx);
}

TEST(paged_write_many_pages_is_linear) {
  /* The repeated-id check was quadratic in the pages written (80k pages: 2 s). 150k pages of
   * one position each, written in reverse order, then a repeat at the very end. */
  ixl_ctx *ctx = test_ctx(2);
  const int64_t N = 150000;
  ixl_tensor *codes = tnew(ctx, IXL_U8, 2, N, 64, 0), *scales = tnew(ctx, IXL_I32, 1, N, 0, 0);
  ixl_tensor *pages = tnew(ctx, IXL_U8, 2, N, 512, 0), *ids = tnew(ctx, IXL_I32, 1, N, 0, 0);
  for (int64_t i = 0; i < N * 64; i++) U8(codes)[i] = (uint8_t)(i * 7 + (i >> 6));
  for (int64_t i = 0; i < N; i++) I32(scales)[i] = (int32_t)i, I32(ids)[i] = (int32_t)(N - 1 - i);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_OK(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, N, pages, 1, ids));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  CHECK_MSG(secs < 2.0, "%.2f s for %lld pages", secs, (long long)N);
  int bad = 0;
  for (int64_t p = 0; p < N; p += 997) {
    const uint8_t *page = U8(pages) + (N - 1 - p) * 512;
    bad += memcmp(page, U8(codes) + p * 64, 64) != 0;
    bad += memcmp(page + 64, &I32(scales)[p], 4) != 0;
  }
  CHECK_MSG(bad == 0, "%d sampled positions misplaced", bad);
  I32(ids)[N - 1] = I32(ids)[5];
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, N, pages, 1, ids),
            IXL_ERR_INVALID_ARG, "page_ids[149999] = 149994: already used by page_ids[5]");
  I32(ids)[N - 1] = 0;
  I32(ids)[1] = 0; /* page 0 again, now the last page's: its first use is named */
  CHECK_ERR(ctx, ixl_kv_pages_write(ctx, IXL_MXFP4, codes, scales, 0, N, pages, 1, ids),
            IXL_ERR_INVALID_ARG, "page_ids[149999] = 0: already used by page_ids[1]");
  ixl_tensor_free(codes);
  ixl_tensor_free(scales);
  ixl_tensor_free(pages);
  ixl_tensor_free(ids);
  ixl_ctx_free(ctx);
}

int main(void) {
  seed_ = test_seed();
  rand_seed(RAND_XORSHIFT64, seed_ * 0x9E3779B97F4A7C15ull + 1);
  RUN(mxfp4_rne_known_vectors);
  RUN(mxfp4_ties_down_known_vectors);
  RUN(mx_tiny_huge_nan_and_inf);
  RUN(mxfp8_known_vectors);
  RUN(fp8_known_vectors);
  RUN(fp8_ties_down_k_formula);
  RUN(dequantize_rules);
  RUN(e4m3_conversion_matches_its_definition);
  RUN(f16_conversion_matches_its_definition);
  RUN(round_trips);
  RUN(random_quantization_error_and_input_dtypes);
  RUN(quantize_errors);
  RUN(prepare_weights_rules_and_errors);
  RUN(formats_refuse_shared_memory);
  RUN(paged_write_with_padded_stride);
  RUN(paged_write_errors);
  RUN(paged_write_refuses_shared_memory);
  RUN(paged_write_many_pages_is_linear);
  DONE();
}
