/* test_variants.c - the kernel variant registry (kernels/variants.c) on the CPU: the listing,
 * the default choice (the last variant that runs and accepts, never a test-only one), a pin
 * selecting a variant and its read-back, the refusals (unknown family or name, a pin that
 * refuses the problem or runs on the other backend) with their messages, K1 and K5 of one
 * problem choosing the same variant, and the per-context state of freed contexts. Built
 * against the test archive, which registers the test-only variants ref_alt and v1_alt. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "rand.h"
#include "logits/engine.h"

/* One mxfp4 K1/K5 problem with H heads: random codes, scale bytes near 127, N keys, R rows. */
typedef struct problem {
  ixl_tensor *qc, *qs, *kc, *ks_, *w32, *wbf, *ks, *ke, *ids, *out32, *outbf;
  ixl_qk qk;
  int R, H, N, nsb, sbk;
} problem;

static void problem_make(ixl_ctx *ctx, problem *p, int H) {
  p->R = 3, p->H = H, p->N = 96, p->sbk = 8, p->nsb = 4;
  p->qc = tnew(ctx, IXL_U8, 3, p->R, H, 64);
  p->qs = tnew(ctx, IXL_I32, 2, p->R, H, 0);
  p->kc = tnew(ctx, IXL_U8, 2, p->N, 64, 0);
  p->ks_ = tnew(ctx, IXL_I32, 1, p->N, 0, 0);
  p->w32 = tnew(ctx, IXL_F32, 2, p->R, H, 0);
  p->wbf = tnew(ctx, IXL_BF16, 2, p->R, H, 0);
  p->ks = tnew(ctx, IXL_I32, 1, p->R, 0, 0);
  p->ke = tnew(ctx, IXL_I32, 1, p->R, 0, 0);
  p->ids = tnew(ctx, IXL_I32, 2, p->R, p->nsb, 0);
  p->out32 = tnew(ctx, IXL_F32, 2, p->R, p->N, 0);
  p->outbf = tnew(ctx, IXL_BF16, 2, p->R, (int64_t)p->nsb * p->sbk, 0);
  uint8_t *b = p->qc->data;
  for (int64_t i = 0; i < ixl_tensor_numel(p->qc); i++) b[i] = (uint8_t)rand_u32();
  b = p->kc->data;
  for (int64_t i = 0; i < ixl_tensor_numel(p->kc); i++) b[i] = (uint8_t)rand_u32();
  b = p->qs->data;
  for (int64_t i = 0; i < 4 * ixl_tensor_numel(p->qs); i++) b[i] = (uint8_t)(120 + rand_u32() % 15);
  b = p->ks_->data;
  for (int64_t i = 0; i < 4 * ixl_tensor_numel(p->ks_); i++)
    b[i] = (uint8_t)(120 + rand_u32() % 15);
  for (int i = 0; i < p->R * H; i++) {
    float w = (float)(rand_u32() % 1000) / 1000.0f + 0.25f;
    ((float *)p->w32->data)[i] = w;
    ((uint16_t *)p->wbf->data)[i] = ixl_f32_to_bf16(w);
  }
  for (int r = 0; r < p->R; r++) {
    ((int32_t *)p->ks->data)[r] = 8 * r;
    ((int32_t *)p->ke->data)[r] = p->N - 8 * r;
    for (int j = 0; j < p->nsb; j++) ((int32_t *)p->ids->data)[r * p->nsb + j] = r + 2 * j;
  }
  p->qk = (ixl_qk){.q_codes = p->qc, .q_scales = p->qs, .k_codes = p->kc, .k_scales = p->ks_,
                   .kv_format = IXL_MXFP4};
}

static void problem_free(problem *p) {
  ixl_tensor *all[] = {p->qc, p->qs, p->kc, p->ks_, p->w32, p->wbf,
                       p->ks, p->ke, p->ids, p->out32, p->outbf};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ixl_tensor_free(all[i]);
}

static ixl_status k1(ixl_ctx *ctx, problem *p) {
  return ixl_dense_logits(ctx, &p->qk, p->w32, p->ks, p->ke, IXL_LAYOUT_FULL, 1,
                          IXL_REDUCE_FP32, p->out32);
}
static ixl_status k5(ixl_ctx *ctx, problem *p) {
  return ixl_sparse_logits(ctx, &p->qk, p->wbf, p->ks, p->ke, NULL, p->ids, p->sbk,
                           IXL_KS_UNALIGNED, p->outbf);
}

static const char *best_cpu(void) { return ixl_engine_fast_available() ? "fast" : "ref"; }

TEST(listing_per_family) {
  const char *want[] = {"ref", "fast", "ref_alt", "v1", "v1_alt", "v2"};
  const char *backend[] = {"cpu", "cpu", "cpu", "cuda", "cuda", "cuda"};
  const int min_sm[] = {0, 0, 0, 80, 80, 90};
  CHECK(ixl_variant_count("logits") == 6);
  for (int i = 0; i < 6; i++) {
    CHECK_MSG(strcmp(ixl_variant_name("logits", i), want[i]) == 0, "%d: %s", i,
              ixl_variant_name("logits", i));
    CHECK(strcmp(ixl_variant_backend("logits", i), backend[i]) == 0);
    CHECK(ixl_variant_min_sm("logits", i) == min_sm[i]);
    CHECK(ixl_variant_about("logits", i) && ixl_variant_about("logits", i)[0]);
  }
  CHECK(ixl_variant_name("logits", 6) == NULL && ixl_variant_name("logits", -1) == NULL);
  CHECK(ixl_variant_backend("logits", 9) == NULL && ixl_variant_min_sm("logits", 9) == -1);
  CHECK(ixl_variant_count("select") == 3);
  CHECK(strcmp(ixl_variant_name("select", 0), "ref") == 0);
  CHECK(strcmp(ixl_variant_name("select", 1), "v1") == 0);
  CHECK(strcmp(ixl_variant_name("select", 2), "v2") == 0);
  CHECK(ixl_variant_min_sm("select", 2) >= 80);
  CHECK(ixl_variant_count("index") == 0 && ixl_variant_count("formats") == 0);
  CHECK(ixl_variant_count("gen") == 0);
  CHECK(ixl_variant_count("bogus") == -1 && ixl_variant_count(NULL) == -1);
  CHECK(ixl_variant_name("bogus", 0) == NULL);
}

/* The default is the best that runs here, never the test-only ref_alt, and one problem's K1
 * and K5 choose the same variant (supports() cannot tell the modes apart). */
TEST(default_choice) {
  ixl_ctx *ctx = test_ctx(2);
  problem p;
  problem_make(ctx, &p, 32);
  CHECK(strcmp(ixl_ctx_variant_ran(ctx, "logits"), "") == 0);
  CHECK(strcmp(ixl_ctx_variant(ctx, "logits"), "") == 0);
  CHECK_OK(ctx, k1(ctx, &p));
  CHECK(strcmp(ixl_ctx_variant_ran(ctx, "logits"), best_cpu()) == 0);
  CHECK_OK(ctx, k5(ctx, &p));
  CHECK(strcmp(ixl_ctx_variant_ran(ctx, "logits"), best_cpu()) == 0);
  CHECK(strcmp(ixl_ctx_variant_ran(ctx, "select"), "") == 0); /* per family */
  problem_free(&p);
  ixl_ctx_free(ctx);
}

/* A pin selects its variant for K1 and K5, reads back, and "" or NULL clears it. */
TEST(pin_selects_and_reads_back) {
  ixl_ctx *ctx = test_ctx(2);
  problem p;
  problem_make(ctx, &p, 32);
  CHECK_OK(ctx, k1(ctx, &p));
  ixl_tensor *want = tnew(ctx, IXL_F32, 2, p.R, p.N, 0);
  CHECK_OK(ctx, ixl_tensor_copy(ctx, want, p.out32));
  const char *names[] = {"ref", "ref_alt", "fast"};
  for (int i = 0; i < 3; i++) {
    if (strcmp(names[i], "fast") == 0 && !ixl_engine_fast_available()) continue;
    CHECK_OK(ctx, ixl_ctx_set_variant(ctx, "logits", names[i]));
    CHECK(strcmp(ixl_ctx_variant(ctx, "logits"), names[i]) == 0);
    ixl_tensor_fill_bytes(ctx, p.out32, 0x5A);
    CHECK_OK(ctx, k1(ctx, &p));
    CHECK_MSG(strcmp(ixl_ctx_variant_ran(ctx, "logits"), names[i]) == 0, "%s ran %s", names[i],
              ixl_ctx_variant_ran(ctx, "logits"));
    CHECK(memcmp(want->data, p.out32->data, (size_t)p.R * p.N * 4) == 0);
    CHECK_OK(ctx, k5(ctx, &p));
    CHECK(strcmp(ixl_ctx_variant_ran(ctx, "logits"), names[i]) == 0);
  }
  CHECK_OK(ctx, ixl_ctx_set_variant(ctx, "logits", ""));
  CHECK(strcmp(ixl_ctx_variant(ctx, "logits"), "") == 0);
  CHECK_OK(ctx, k1(ctx, &p));
  CHECK(strcmp(ixl_ctx_variant_ran(ctx, "logits"), best_cpu()) == 0);
  CHECK_OK(ctx, ixl_ctx_set_variant(ctx, "logits", "ref"));
  CHECK_OK(ctx, ixl_ctx_set_variant(ctx, "logits", NULL));
  CHECK(strcmp(ixl_ctx_variant(ctx, "logits"), "") == 0);
  ixl_tensor_free(want);
  problem_free(&p);
  ixl_ctx_free(ctx);
}

TEST(refusals_name_the_family_the_pin_and_what_would_run) {
  ixl_ctx *ctx = test_ctx(2);
  char would[64];
  snprintf(would, sizeof would, "would run: %s", ixl_engine_fast_available() ? "fast, ref" : "ref");
  CHECK_ERR(ctx, ixl_ctx_set_variant(ctx, "logits", "v9"), IXL_ERR_INVALID_ARG,
            "logits variant v9: no such variant (logits has: ref, fast, ref_alt, v1, v1_alt, v2)");
  CHECK_ERR(ctx, ixl_ctx_set_variant(ctx, "bogus", "v1"), IXL_ERR_INVALID_ARG,
            "variant family bogus: unknown (logits, select, index, formats, gen)");
  CHECK_ERR(ctx, ixl_ctx_set_variant(ctx, "index", "v1"), IXL_ERR_INVALID_ARG,
            "index variant v1: no such variant (index has: none registered)");
  CHECK(strcmp(ixl_ctx_variant(ctx, "logits"), "") == 0); /* a refused pin changes nothing */
  problem p;
  problem_make(ctx, &p, 128);
  CHECK_OK(ctx, ixl_ctx_set_variant(ctx, "logits", "ref_alt"));
  CHECK_ERR(ctx, k1(ctx, &p), IXL_ERR_UNSUPPORTED,
            "logits variant ref_alt does not support this problem (kv_format mxfp4, heads 128, "
            "head_dim 128); ");
  CHECK(strstr(ixl_last_error(ctx), would) != NULL);
  CHECK_ERR(ctx, k5(ctx, &p), IXL_ERR_UNSUPPORTED, "logits variant ref_alt does not support");
  CHECK_ERR(ctx, ixl_ctx_set_variant(ctx, "logits", "v1"), IXL_ERR_UNSUPPORTED,
            "logits variant v1 runs on cuda, but this context is cpu (its logits variants: ref, "
            "fast, ref_alt)");
  CHECK(strcmp(ixl_ctx_variant(ctx, "logits"), "ref_alt") == 0); /* unchanged */
  if (!ixl_engine_fast_available()) { /* the fast path is refused, never replaced */
    CHECK_OK(ctx, ixl_ctx_set_variant(ctx, "logits", "fast"));
    CHECK_ERR(ctx, k1(ctx, &p), IXL_ERR_UNSUPPORTED,
              "logits variant fast cannot run here (needs AVX2 and FMA");
  }
  CHECK_OK(ctx, ixl_ctx_set_variant(ctx, "logits", NULL));
  CHECK_OK(ctx, k1(ctx, &p));
  CHECK_ERR(ctx, ixl_ctx_set_variant(ctx, "select", "v1"), IXL_ERR_UNSUPPORTED,
            "select variant v1 runs on cuda, but this context is cpu (its select variants: ref)");
  ixl_tensor *cols = tnew(ctx, IXL_I32, 2, p.R, 8, 0);
  CHECK_OK(ctx, ixl_ctx_set_variant(ctx, "select", "ref"));
  CHECK_OK(ctx, ixl_topk(ctx, p.out32, NULL, p.ke, 8, 1, cols));
  CHECK(strcmp(ixl_ctx_variant_ran(ctx, "select"), "ref") == 0);
  CHECK_OK(ctx, ixl_ctx_set_variant(ctx, "select", NULL));
  CHECK(ixl_ctx_set_variant(NULL, "logits", "ref") == IXL_ERR_INVALID_ARG);
  CHECK(strcmp(ixl_ctx_variant(NULL, "logits"), "") == 0);
  CHECK(strcmp(ixl_ctx_variant_ran(ctx, "bogus"), "") == 0);
  ixl_tensor_free(cols);
  problem_free(&p);
  ixl_ctx_free(ctx);
}

/* Pins belong to their context: another context runs the default, and a freed context's pin
 * does not reach a context made after it. */
TEST(pins_are_per_context) {
  ixl_ctx *a = test_ctx(2), *b = test_ctx(2);
  problem p;
  problem_make(a, &p, 32);
  CHECK_OK(a, ixl_ctx_set_variant(a, "logits", "ref_alt"));
  CHECK(strcmp(ixl_ctx_variant(b, "logits"), "") == 0);
  ixl_ctx_free(b);
  for (int i = 0; i < 200; i++) { /* more contexts than the registry's table holds */
    ixl_ctx *c = test_ctx(2);
    CHECK(strcmp(ixl_ctx_variant(c, "logits"), "") == 0);
    CHECK_OK(c, ixl_ctx_set_variant(c, "logits", "ref"));
    ixl_ctx_free(c);
  }
  CHECK_OK(a, k1(a, &p));
  CHECK(strcmp(ixl_ctx_variant_ran(a, "logits"), "ref_alt") == 0);
  problem_free(&p);
  ixl_ctx_free(a); /* pinned: released by the registry's next call */
  ixl_ctx *c = test_ctx(2);
  CHECK(strcmp(ixl_ctx_variant(c, "logits"), "") == 0);
  ixl_ctx_free(c);
}

int main(void) {
  rand_seed(RAND_SPLITMIX64, test_seed());
  RUN(listing_per_family);
  RUN(default_choice);
  RUN(pin_selects_and_reads_back);
  RUN(refusals_name_the_family_the_pin_and_what_would_run);
  RUN(pins_are_per_context);
  DONE();
}
