/* test_core.c - context, status table, counted allocation, tensors and views, scalar
 * conversions. */
#include <math.h>

#include "check.h"

TEST(status_table_names_every_code) {
  CHECK(strcmp(ixl_status_name(IXL_OK), "IXL_OK") == 0);
  CHECK(strcmp(ixl_status_name(IXL_ERR_CONFIG), "IXL_ERR_CONFIG") == 0);
  CHECK(strcmp(ixl_status_message(IXL_ERR_OOM), "out of memory") == 0);
  CHECK(strcmp(ixl_status_name((ixl_status)999), "IXL_ERR_UNKNOWN") == 0);
}

TEST(cpu_context_and_bad_backend) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 7, &ctx));
  CHECK(ixl_ctx_backend(ctx) == IXL_BACKEND_CPU);
  CHECK(ixl_ctx_seed(ctx) == 7);
  ixl_ctx_free(ctx);
  ctx = NULL;
  CHECK(ixl_ctx_new((ixl_backend)9, 0, 0, &ctx) == IXL_ERR_INVALID_ARG);
  CHECK(strstr(ixl_last_error(ctx), "backend = 9") != NULL);
  ixl_ctx_free(ctx);
  ixl_ctx_free(NULL);
}

/* The host clock is monotonic and in microseconds: a 20 ms sleep reads as at least 20000, and
 * (with a loose bound for a loaded machine) less than 10 s; CPU timers use the same clock. */
TEST(host_clock_is_monotonic_microseconds) {
  double t0 = ixl_now_us(), prev = t0;
  for (int i = 0; i < 1000; i++) {
    double t = ixl_now_us();
    CHECK(t >= prev);
    prev = t;
  }
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  double dt = ixl_now_us() - t0;
  CHECK_MSG(dt >= 20000.0 && dt < 1e7, "dt = %.1f us", dt);
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 0, &ctx));
  double us = -1;
  CHECK_OK(ctx, ixl_timer_record(ctx, 0));
  nanosleep(&ts, NULL);
  CHECK_OK(ctx, ixl_timer_record(ctx, 1));
  CHECK_OK(ctx, ixl_timer_elapsed_us(ctx, 0, 1, &us));
  CHECK_MSG(us >= 20000.0 && us < 1e7, "us = %.1f", us);
  ixl_ctx_free(ctx);
}

TEST(auto_backend_never_fails_without_gpu) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_AUTO, 0, 0, &ctx));
  char why[256];
  if (!ixl_cuda_available(why, sizeof why)) {
    CHECK(ixl_ctx_backend(ctx) == IXL_BACKEND_CPU);
    ixl_ctx *c2 = NULL;
    CHECK(ixl_ctx_new(IXL_BACKEND_CUDA, 0, 0, &c2) == IXL_ERR_BACKEND);
    CHECK(strstr(ixl_last_error(c2), "backend = cuda") != NULL);
    ixl_ctx_free(c2);
  }
  ixl_ctx_free(ctx);
}

TEST(tensor_alloc_counts_and_frees) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 0, &ctx));
  int64_t shape[2] = {3, 5};
  ixl_tensor *t = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_F32, 2, shape, IXL_HOST, &t));
  ixl_alloc_stats s;
  ixl_ctx_alloc_stats(ctx, &s);
  CHECK(s.host_bytes_live == 60 && s.host_allocs == 1);
  CHECK(ixl_tensor_numel(t) == 15 && ixl_tensor_is_contiguous(t));
  CHECK(t->stride[0] == 5 && t->stride[1] == 1);
  ixl_tensor_free(t);
  ixl_ctx_alloc_stats(ctx, &s);
  CHECK(s.host_bytes_live == 0 && s.host_frees == 1);
  ixl_tensor_free(NULL);
  ixl_ctx_free(ctx);
}

TEST(tensor_free_after_context_free_is_safe) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 0, &ctx));
  int64_t shape[1] = {4};
  ixl_tensor *t = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_I32, 1, shape, IXL_HOST, &t));
  ixl_ctx_free(ctx); /* the tensor keeps the context alive */
  ixl_tensor_free(t);
}

TEST(tensor_bad_shapes_and_overflow) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 0, &ctx));
  ixl_tensor *t = NULL;
  int64_t neg[2] = {3, -1};
  CHECK_ERR(ctx, ixl_tensor_new(ctx, IXL_F32, 2, neg, IXL_HOST, &t), IXL_ERR_SHAPE,
            "shape[1] = -1");
  int64_t huge[3] = {1LL << 40, 1LL << 40, 1LL << 40};
  CHECK_ERR(ctx, ixl_tensor_new(ctx, IXL_F32, 3, huge, IXL_HOST, &t), IXL_ERR_OVERFLOW,
            "overflows");
  int64_t big[2] = {1LL << 30, 1LL << 30};
  CHECK_ERR(ctx, ixl_tensor_new(ctx, IXL_F32, 2, big, IXL_HOST, &t), IXL_ERR_OVERFLOW, "too large");
  CHECK_ERR(ctx, ixl_tensor_new(ctx, IXL_F32, 5, big, IXL_HOST, &t), IXL_ERR_SHAPE, "ndim = 5");
  CHECK_ERR(ctx, ixl_tensor_new(ctx, (ixl_dtype)42, 1, big, IXL_HOST, &t), IXL_ERR_DTYPE,
            "dtype = 42");
  int64_t one[1] = {4};
  char why[128];
  if (!ixl_cuda_available(why, sizeof why))
    CHECK(ixl_tensor_new(ctx, IXL_F32, 1, one, IXL_DEVICE, &t) == IXL_ERR_BACKEND);
  CHECK(t == NULL);
  ixl_ctx_free(ctx);
}

TEST(views_stay_inside_their_base) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 0, &ctx));
  int64_t shape[2] = {4, 8};
  ixl_tensor *t = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_I32, 2, shape, IXL_HOST, &t));
  for (int i = 0; i < 32; i++) ((int32_t *)t->data)[i] = i;
  ixl_tensor v;
  int64_t vs[2] = {2, 8};
  CHECK_OK(ctx, ixl_tensor_view(ctx, t, 2, vs, NULL, 16, &v));
  CHECK(((int32_t *)v.data)[0] == 16 && v.owns == 0);
  CHECK_ERR(ctx, ixl_tensor_view(ctx, t, 2, vs, NULL, 17, &v), IXL_ERR_SHAPE, "outside its base");
  ixl_alloc_stats s;
  ixl_ctx_alloc_stats(ctx, &s);
  CHECK(s.host_allocs == 1); /* views allocate nothing */
  ixl_tensor_free(t);
  ixl_ctx_free(ctx);
}

TEST(copy_and_f64_round_trip_every_dtype) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 0, &ctx));
  const double vals[4] = {1.0, 2.5, 0.0, 3.0};
  for (int dt = 0; dt < IXL_DTYPE_COUNT; dt++) {
    int64_t shape[1] = {4};
    ixl_tensor *a = NULL, *b = NULL;
    CHECK_OK(ctx, ixl_tensor_new(ctx, (ixl_dtype)dt, 1, shape, IXL_HOST, &a));
    CHECK_OK(ctx, ixl_tensor_new(ctx, (ixl_dtype)dt, 1, shape, IXL_HOST, &b));
    int is_int = dt == IXL_I32 || dt == IXL_U8 || dt == IXL_E4M3 || dt == IXL_E2M1X2;
    double in[4];
    for (int i = 0; i < 4; i++) in[i] = is_int ? (double)(int)(vals[i] * 2) : vals[i];
    CHECK_OK(ctx, ixl_tensor_from_f64(ctx, a, in, 4));
    CHECK_OK(ctx, ixl_tensor_copy(ctx, b, a));
    double out[4];
    CHECK_OK(ctx, ixl_tensor_to_f64(ctx, b, out, 4));
    for (int i = 0; i < 4; i++)
      CHECK_MSG(out[i] == in[i], "dtype %s value %d", ixl_dtype_name(dt), i);
    ixl_tensor_free(a);
    ixl_tensor_free(b);
  }
  ixl_ctx_free(ctx);
}

TEST(copy_and_f64_buffers_must_not_share_memory) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 0, &ctx));
  int64_t s8[1] = {8}, s4[1] = {4};
  ixl_tensor *t = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_F32, 1, s8, IXL_HOST, &t));
  for (int i = 0; i < 8; i++) ((float *)t->data)[i] = (float)i;
  ixl_tensor lo, hi;
  CHECK_OK(ctx, ixl_tensor_view(ctx, t, 1, s4, NULL, 0, &lo));
  CHECK_OK(ctx, ixl_tensor_view(ctx, t, 1, s4, NULL, 2, &hi));
  CHECK_ERR(ctx, ixl_tensor_copy(ctx, &hi, &lo), IXL_ERR_INVALID_ARG,
            "copy: dst overlaps src: an output must not share memory with an input");
  CHECK_ERR(ctx, ixl_tensor_copy(ctx, t, t), IXL_ERR_INVALID_ARG, "copy: dst overlaps src");
  CHECK(((float *)t->data)[2] == 2.0f);
  CHECK_OK(ctx, ixl_tensor_view(ctx, t, 1, s4, NULL, 4, &hi)); /* the other half: fine */
  CHECK_OK(ctx, ixl_tensor_copy(ctx, &hi, &lo));
  CHECK(((float *)t->data)[4] == 0.0f && ((float *)t->data)[7] == 3.0f);
  /* 4 doubles (32 bytes) over an 8-float tensor (32 bytes), read from or written into it */
  double *inside = (double *)t->data;
  CHECK_ERR(ctx, ixl_tensor_to_f64(ctx, &lo, inside, 4), IXL_ERR_INVALID_ARG,
            "read: dst overlaps tensor: an output must not share memory with an input");
  CHECK_ERR(ctx, ixl_tensor_from_f64(ctx, &lo, inside, 4), IXL_ERR_INVALID_ARG,
            "fill: tensor overlaps src: an output must not share memory with an input");
  CHECK(((float *)t->data)[1] == 1.0f);
  double buf[4];
  CHECK_OK(ctx, ixl_tensor_to_f64(ctx, &lo, buf, 4));
  CHECK(buf[3] == 3.0);
  ixl_tensor_free(t);
  ixl_ctx_free(ctx);
}

TEST(scalar_conversions_known_vectors) {
  CHECK(ixl_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(ixl_f32_to_bf16(1.00390625f) == 0x3f80);  /* tie -> even */
  CHECK(ixl_f32_to_bf16(1.01171875f) == 0x3f82);  /* tie -> even (up) */
  CHECK(isnan(ixl_bf16_to_f32(ixl_f32_to_bf16(NAN))));
  CHECK(ixl_f32_to_e4m3(448.0f) == 0x7e && ixl_f32_to_e4m3(1e6f) == 0x7e);
  CHECK(ixl_f32_to_e4m3(-1e6f) == 0xfe);
  CHECK(ixl_e4m3_to_f32(0x01) == ldexpf(1.0f, -9)); /* smallest subnormal */
  CHECK(ixl_f32_to_e4m3(ldexpf(1.0f, -10)) == 0x00); /* tie to even -> 0 */
  CHECK(ixl_f32_to_e4m3(ldexpf(3.0f, -10)) == 0x02); /* 1.5 quanta -> 2 */
  CHECK(ixl_f32_to_e4m3(1.0625f) == 0x38);           /* tie between 1 and 1.125 -> 1 */
  CHECK(ixl_f32_to_e4m3(1.1875f) == 0x3a);           /* tie between 1.125 and 1.25 -> 1.25 */
  for (int c = 0; c < 256; c++) {
    float v = ixl_e4m3_to_f32((uint8_t)c);
    if (isnan(v)) continue;
    CHECK_MSG(ixl_f32_to_e4m3(v) == c || (v == 0 && (c & 0x7f) == 0), "e4m3 code %d", c);
  }
  CHECK(ixl_f16_to_f32(ixl_f32_to_f16(65504.0f)) == 65504.0f);
  CHECK(isinf(ixl_f16_to_f32(ixl_f32_to_f16(65520.0f))));
  CHECK(ixl_f16_to_f32(ixl_f32_to_f16(ldexpf(1.0f, -24))) == ldexpf(1.0f, -24));
  CHECK(ixl_e2m1_to_f32(0x7) == 6.0f && ixl_e2m1_to_f32(0xf) == -6.0f);
  CHECK(!signbit(ixl_e2m1_to_f32(0x8))); /* -0 dequantizes to +0 */
}

TEST(shape_and_stride_arithmetic_is_checked) {
  /* A zero dim makes numel 0, but the strides of the other dims must still fit int64. */
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 0, &ctx));
  ixl_tensor *t = NULL;
  int64_t lead0[3] = {0, 1LL << 52, 1LL << 52}, tail0[3] = {1LL << 52, 1LL << 52, 0};
  CHECK_ERR(
      ctx, ixl_tensor_new(ctx, IXL_F32, 3, lead0, IXL_HOST, &t), IXL_ERR_OVERFLOW,
      "tensor of shape[2] = 4503599627370496 overflows int64 (the product of the nonzero dims");
  CHECK_ERR(ctx, ixl_tensor_new(ctx, IXL_F32, 3, tail0, IXL_HOST, &t), IXL_ERR_OVERFLOW,
            "shape[1] = 4503599627370496 overflows int64");
  CHECK(t == NULL);
  int64_t fits[3] = {0, 1LL << 20, 1LL << 20};
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_F32, 3, fits, IXL_HOST, &t));
  CHECK(t && ixl_tensor_numel(t) == 0 && t->stride[0] == 1LL << 40 && t->stride[1] == 1LL << 20);
  ixl_tensor_free(t);

  int64_t one[1] = {1}, base8[1] = {8};
  ixl_tensor *a = NULL, *b = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_F32, 1, one, IXL_HOST, &a));
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_I32, 1, base8, IXL_HOST, &b));
  for (int i = 0; i < 8; i++) ((int32_t *)b->data)[i] = i;
  ixl_tensor v;
  int64_t vs[1] = {4097}, huge[1] = {1LL << 52}, neg[1] = {-(1LL << 52)};
  CHECK_ERR(ctx, ixl_tensor_view(ctx, a, 1, vs, huge, 0, &v), IXL_ERR_OVERFLOW,
            "view shape [4097] with stride [4503599627370496]: the elements it spans");
  CHECK_ERR(ctx, ixl_tensor_view(ctx, a, 1, vs, neg, 0, &v), IXL_ERR_OVERFLOW,
            "with stride [-4503599627370496]");
  int64_t two[1] = {2}, unit[1] = {1}, four[1] = {4}, back[1] = {-2}, zero[1] = {0};
  CHECK_ERR(
      ctx, ixl_tensor_view(ctx, b, 1, two, unit, INT64_MAX, &v), IXL_ERR_OVERFLOW,
      "view at offset 9223372036854775807 spanning elements [0, 2) from it: the sum overflows");
  CHECK_ERR(ctx, ixl_tensor_view(ctx, b, 1, zero, NULL, 1LL << 60, &v), IXL_ERR_SHAPE,
            "empty view at offset 1152921504606846976: must start inside its base [0, 8]");
  CHECK_OK(ctx, ixl_tensor_view(ctx, b, 1, zero, NULL, 8, &v)); /* empty, at the end */
  CHECK_OK(ctx, ixl_tensor_view(ctx, b, 1, four, back, 7, &v)); /* 7, 5, 3, 1 */
  CHECK(((int32_t *)v.data)[0] == 7 && ((int32_t *)v.data)[-6] == 1);
  CHECK_ERR(ctx, ixl_tensor_view(ctx, b, 1, four, back, 5, &v), IXL_ERR_SHAPE, "outside its base");
  ixl_tensor_free(a);
  ixl_tensor_free(b);
  ixl_ctx_free(ctx);
}

TEST(null_pointers_are_refused) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 0, &ctx));
  int64_t free_b = -1, total_b = -1;
  CHECK_ERR(ctx, ixl_ctx_mem_info(ctx, NULL, NULL), IXL_ERR_INVALID_ARG,
            "mem_info: free_bytes is NULL");
  CHECK_ERR(ctx, ixl_ctx_mem_info(ctx, &free_b, NULL), IXL_ERR_INVALID_ARG,
            "mem_info: total_bytes is NULL");
  CHECK_OK(ctx, ixl_ctx_mem_info(ctx, &free_b, &total_b));
  CHECK(free_b == 0 && total_b == 0);
  int64_t shape[2] = {2, 3};
  ixl_tensor *t = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_F32, 2, shape, IXL_HOST, &t));
  CHECK_ERR(ctx, ixl_tensor_from_f64(ctx, t, NULL, 6), IXL_ERR_INVALID_ARG,
            "fill: src is NULL for 6 values");
  CHECK_ERR(ctx, ixl_tensor_to_f64(ctx, t, NULL, 6), IXL_ERR_INVALID_ARG,
            "read: dst is NULL for 6 values");
  ixl_tensor v;
  CHECK_ERR(ctx, ixl_tensor_view(ctx, t, 2, NULL, NULL, 0, &v), IXL_ERR_INVALID_ARG,
            "tensor_view: shape is NULL with ndim = 2");
  CHECK_OK(ctx, ixl_tensor_view(ctx, t, 0, NULL, NULL, 0, &v)); /* a scalar needs no shape */
  ixl_tensor_free(t);
  ixl_ctx_free(ctx);
}

int main(void) {
  RUN(status_table_names_every_code);
  RUN(cpu_context_and_bad_backend);
  RUN(host_clock_is_monotonic_microseconds);
  RUN(auto_backend_never_fails_without_gpu);
  RUN(tensor_alloc_counts_and_frees);
  RUN(tensor_free_after_context_free_is_safe);
  RUN(tensor_bad_shapes_and_overflow);
  RUN(views_stay_inside_their_base);
  RUN(shape_and_stride_arithmetic_is_checked);
  RUN(null_pointers_are_refused);
  RUN(copy_and_f64_round_trip_every_dtype);
  RUN(copy_and_f64_buffers_must_not_share_memory);
  RUN(scalar_conversions_known_vectors);
  DONE();
}
