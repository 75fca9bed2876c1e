/* test_chunker.c - the prefill chunker of SPEC 5 on its own (ixl_chunk_plan): hand-worked
 * examples, budget edges at exactly the limit and one byte under, query sub-chunks, the
 * min_split_seq_len clamp, its errors, and a seeded property run against a direct model. */
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "rand.h"

/* T = 64, cbs = 8: num_sparse_cols 512, min_split_seq_len 256 (bf16) or 768 (bf16+fp32). */
static ixl_builder_info small_info(ixl_ctx *ctx, int64_t workspace, int64_t logits_bytes) {
  ixl_config c;
  ixl_config_defaults(&c);
  c.candidate_topk_blocks = 64;
  c.max_model_len = 65536;
  c.max_rows = 1024;
  c.workspace_tokens = workspace;
  c.max_logits_bytes = logits_bytes;
  ixl_builder_info info;
  memset(&info, 0, sizeof info);
  CHECK_OK(ctx, ixl_config_validate(ctx, &c, &info));
  return info;
}

static int plan(ixl_ctx *ctx, const ixl_builder_info *info, int n, const int64_t *seq,
                const int64_t *q, int sparse, ixl_chunk *out) {
  int32_t nc = -1;
  ixl_status st = ixl_chunk_plan(ctx, info, n, seq, q, sparse, out, 64, &nc);
  if (st) {
    fprintf(stderr, "  chunk_plan: %s\n", ixl_last_error(ctx));
    return -1;
  }
  return nc;
}

TEST(a_batch_that_fits_is_one_chunk) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_builder_info info = small_info(ctx, 10000, 1 << 20);
  int64_t seq[2] = {100, 200}, q[2] = {10, 20};
  ixl_chunk ch[64];
  CHECK(plan(ctx, &info, 2, seq, q, 0, ch) == 1);
  CHECK(ch[0].request_start == 0 && ch[0].request_end == 2);
  CHECK(ch[0].rows == 30 && ch[0].seq_tokens == 300 && ch[0].logits_bytes == 36000);
  CHECK(ch[0].is_sub_chunk == 0 && ch[0].query_start == 0 && ch[0].query_end == 10);
  ixl_ctx_free(ctx);
}

TEST(logits_budget_edge_exact_and_one_byte_under) {
  ixl_ctx *ctx = test_ctx(0);
  int64_t seq[2] = {300, 300}, q[2] = {10, 20};
  ixl_chunk ch[64];
  /* Both together: 30 rows * 600 positions * 4 = 72000 bytes. */
  ixl_builder_info at = small_info(ctx, 10000, 72000);
  CHECK(plan(ctx, &at, 2, seq, q, 0, ch) == 1);
  CHECK(ch[0].logits_bytes == 72000);
  ixl_builder_info under = small_info(ctx, 10000, 71999);
  CHECK(plan(ctx, &under, 2, seq, q, 0, ch) == 2);
  CHECK(ch[0].request_start == 0 && ch[0].request_end == 1 && ch[0].rows == 10);
  CHECK(ch[1].request_start == 1 && ch[1].request_end == 2 && ch[1].rows == 20);
  CHECK(ch[1].logits_bytes == 20 * 300 * 4 && !ch[1].is_sub_chunk);
  ixl_ctx_free(ctx);
}

TEST(workspace_budget_edge_exact_and_one_under) {
  ixl_ctx *ctx = test_ctx(0);
  int64_t seq[3] = {300, 200, 100}, q[3] = {1, 1, 1};
  ixl_chunk ch[64];
  ixl_builder_info at = small_info(ctx, 500, 1 << 20);
  CHECK(plan(ctx, &at, 3, seq, q, 0, ch) == 2);
  CHECK(ch[0].request_end == 2 && ch[0].seq_tokens == 500);
  CHECK(ch[1].request_start == 2 && ch[1].seq_tokens == 100);
  ixl_builder_info under = small_info(ctx, 499, 1 << 20);
  CHECK(plan(ctx, &under, 3, seq, q, 0, ch) == 2);
  CHECK(ch[0].request_end == 1 && ch[0].seq_tokens == 300);
  CHECK(ch[1].request_start == 1 && ch[1].request_end == 3 && ch[1].seq_tokens == 300);
  ixl_ctx_free(ctx);
}

TEST(a_request_over_the_logits_budget_splits_into_query_sub_chunks) {
  ixl_ctx *ctx = test_ctx(0);
  /* 100 rows * 1000 positions; budget 30 rows: (120000 / 4) / 1000 = 30. */
  ixl_builder_info info = small_info(ctx, 10000, 120000);
  int64_t seq[3] = {1000, 1000, 50}, q[3] = {100, 100, 5};
  ixl_chunk ch[64];
  int n = plan(ctx, &info, 3, seq, q, 0, ch);
  CHECK_MSG(n == 9, "n = %d", n);
  int64_t expect[4][2] = {{0, 30}, {30, 60}, {60, 90}, {90, 100}};
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 4; i++) {
      ixl_chunk *c = &ch[r * 4 + i];
      CHECK(c->request_start == r && c->request_end == r + 1 && c->is_sub_chunk == 1);
      CHECK(c->query_start == expect[i][0] && c->query_end == expect[i][1]);
      CHECK(c->rows == expect[i][1] - expect[i][0] && c->seq_tokens == 1000);
      CHECK(c->logits_bytes == c->rows * 4000 && c->logits_bytes <= 120000);
    }
  /* The request after a split starts a fresh chunk. */
  CHECK(ch[8].request_start == 2 && ch[8].request_end == 3 && !ch[8].is_sub_chunk &&
        ch[8].rows == 5);
  /* One byte under the budget of 30 rows leaves 29 per sub-chunk. */
  ixl_builder_info under = small_info(ctx, 10000, 119999);
  n = plan(ctx, &under, 1, seq, q, 0, ch);
  CHECK_MSG(n == 4 && ch[0].rows == 29 && ch[3].query_start == 87 && ch[3].query_end == 100,
            "n = %d", n);
  ixl_ctx_free(ctx);
}

TEST(sub_chunks_keep_at_least_one_row) {
  ixl_ctx *ctx = test_ctx(0);
  /* One row of 1000 positions needs 4000 bytes; the budget is 400: one row per sub-chunk. */
  ixl_builder_info info = small_info(ctx, 10000, 400);
  int64_t seq[1] = {1000}, q[1] = {3};
  ixl_chunk ch[64];
  CHECK(plan(ctx, &info, 1, seq, q, 0, ch) == 3);
  for (int i = 0; i < 3; i++)
    CHECK(ch[i].rows == 1 && ch[i].query_start == i && ch[i].query_end == i + 1 &&
          ch[i].is_sub_chunk);
  ixl_ctx_free(ctx);
}

TEST(sparse_clamps_seq_lens_up_to_min_split_seq_len) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_builder_info info = small_info(ctx, 511, 1 << 20);
  CHECK(info.min_split_seq_len == 256);
  int64_t seq[2] = {100, 100}, q[2] = {2, 3};
  ixl_chunk ch[64];
  /* Dense: 200 positions fit. Sparse: 256 + 256 = 512 > 511. */
  CHECK(plan(ctx, &info, 2, seq, q, 0, ch) == 1 && ch[0].seq_tokens == 200);
  CHECK(plan(ctx, &info, 2, seq, q, 1, ch) == 2);
  CHECK(ch[0].seq_tokens == 256 && ch[0].logits_bytes == 2 * 256 * 4);
  ixl_builder_info at = small_info(ctx, 512, 1 << 20);
  CHECK(plan(ctx, &at, 2, seq, q, 1, ch) == 1 && ch[0].seq_tokens == 512);
  /* The clamp counts against the logits budget too: 5 rows * 512 * 4 = 10240. */
  ixl_builder_info lg = small_info(ctx, 100000, 10240);
  CHECK(plan(ctx, &lg, 2, seq, q, 1, ch) == 1);
  ixl_builder_info lg1 = small_info(ctx, 100000, 10239);
  CHECK(plan(ctx, &lg1, 2, seq, q, 1, ch) == 2);
  /* A seq_len above the clamp is budgeted as itself. */
  int64_t seq2[1] = {300}, q2[1] = {1};
  CHECK(plan(ctx, &at, 1, seq2, q2, 1, ch) == 1 && ch[0].seq_tokens == 300);
  ixl_ctx_free(ctx);
}

TEST(bf16_fp32_split_width_triples_the_clamp) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_config c;
  ixl_config_defaults(&c);
  c.candidate_topk_blocks = 64;
  c.split_width = IXL_SPLIT_BF16_FP32;
  c.workspace_tokens = 1536;
  ixl_builder_info info;
  CHECK_OK(ctx, ixl_config_validate(ctx, &c, &info));
  CHECK(info.min_split_seq_len == 768);
  int64_t seq[3] = {1, 1, 1}, q[3] = {1, 1, 1};
  ixl_chunk ch[64];
  CHECK(plan(ctx, &info, 3, seq, q, 1, ch) == 2);
  CHECK(ch[0].request_end == 2 && ch[0].seq_tokens == 1536);
  ixl_ctx_free(ctx);
}

TEST(errors_name_the_request) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_builder_info info = small_info(ctx, 500, 1 << 20);
  ixl_chunk ch[4];
  int32_t nc;
  int64_t seq[3] = {10, 501, 10}, q[3] = {1, 1, 1};
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 3, seq, q, 0, ch, 4, &nc), IXL_ERR_BATCH,
            "request 1: seq_len = 501 exceeds workspace_tokens = 500");
  int64_t seq0[2] = {10, 10}, q0[2] = {1, 0};
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 2, seq0, q0, 0, ch, 4, &nc), IXL_ERR_BATCH,
            "request 1: query_len = 0: must be >= 1");
  int64_t seqn[1] = {-1}, q1[1] = {1};
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 1, seqn, q1, 0, ch, 4, &nc), IXL_ERR_BATCH,
            "request 0: seq_len = -1: must be >= 0");
  int64_t seqs[1] = {4}, q5[1] = {5};
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 1, seqs, q5, 0, ch, 4, &nc), IXL_ERR_BATCH,
            "request 0: seq_len = 4 positions is less than query_len (5)");
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, -1, seqs, q5, 0, ch, 4, &nc), IXL_ERR_INVALID_ARG,
            "n_requests = -1");
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 1, seqs, q1, 2, ch, 4, &nc), IXL_ERR_INVALID_ARG,
            "sparse = 2");
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 1, NULL, q1, 0, ch, 4, &nc), IXL_ERR_INVALID_ARG,
            "must not be NULL");
  int64_t big[2] = {INT64_MAX / 2, INT64_MAX / 2}, qb[2] = {1, 1};
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 2, big, qb, 0, ch, 4, &nc), IXL_ERR_BATCH,
            "request 0: seq_len = 4611686018427387903 exceeds workspace_tokens = 500");
  int64_t qhuge[2] = {INT32_MAX, 1}, sh[2] = {INT32_MAX, 1};
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 2, sh, qhuge, 0, ch, 4, &nc), IXL_ERR_BATCH,
            "request 1: the sum of query_len passes 2147483647 rows");
  /* A config that is not valid is refused as such. */
  ixl_builder_info bad = info;
  bad.config.candidate_block_size = 12;
  bad.config.sparse_block_kv = 0;
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &bad, 1, seqs, q1, 0, ch, 4, &nc), IXL_ERR_CONFIG,
            "pick_sparse_block_kv(candidate_block_size = 12)");
  ixl_ctx_free(ctx);
}

TEST(max_chunks_too_small_reports_the_count) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_builder_info info = small_info(ctx, 500, 1 << 20);
  int64_t seq[5] = {400, 400, 400, 400, 400}, q[5] = {1, 1, 1, 1, 1};
  ixl_chunk ch[2];
  int32_t nc = 0;
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 5, seq, q, 0, ch, 2, &nc), IXL_ERR_INVALID_ARG,
            "max_chunks = 2: the plan has 5 chunks");
  CHECK(nc == 5);
  CHECK(ch[1].request_start == 1);
  CHECK_ERR(ctx, ixl_chunk_plan(ctx, &info, 5, seq, q, 0, NULL, 0, &nc), IXL_ERR_INVALID_ARG,
            "max_chunks = 0");
  CHECK(nc == 5);
  CHECK_OK(ctx, ixl_chunk_plan(ctx, &info, 0, NULL, NULL, 0, NULL, 0, &nc));
  CHECK(nc == 0);
  ixl_ctx_free(ctx);
}

TEST(random_plans_respect_both_budgets_and_cover_every_row_once) {
  ixl_ctx *ctx = test_ctx(0);
  uint64_t seed = test_seed();
  ixl_chunk ch[512];
  for (int trial = 0; trial < 400; trial++) {
    rand_seed(RAND_SPLITMIX64, seed * 1000003u + (uint64_t)trial);
    int64_t W = rand_range(768, 5000), M = rand_range(4, 200000);
    ixl_builder_info info = small_info(ctx, W, M);
    int sparse = (int)rand_range(0, 1);
    int n = (int)rand_range(0, 12);
    int64_t seq[12], q[12];
    for (int i = 0; i < n; i++) {
      q[i] = rand_range(1, 40);
      seq[i] = rand_range(q[i], W);
    }
    int32_t nc = 0;
    ixl_status st = ixl_chunk_plan(ctx, &info, n, seq, q, sparse, ch, 512, &nc);
    CHECK_MSG(st == IXL_OK, "seed %llu trial %d: %s", (unsigned long long)seed, trial,
              ixl_last_error(ctx));
    if (st) break;
    /* Walk the chunks: requests in order, sub-chunks cover each split request's rows once. */
    int req = 0;
    int64_t qpos = 0;
    int ok = 1;
    for (int c = 0; c < nc && ok; c++) {
      ixl_chunk *k = &ch[c];
      int64_t bs = 0, rows = 0;
      for (int r = k->request_start; r < k->request_end; r++) {
        int64_t s = sparse && seq[r] < info.min_split_seq_len ? info.min_split_seq_len : seq[r];
        bs += s;
        rows += q[r];
      }
      if (k->is_sub_chunk) {
        ok &= k->request_start == req && k->request_end == req + 1 && k->query_start == qpos;
        ok &= k->query_end > k->query_start && k->rows == k->query_end - k->query_start;
        /* Sub-chunks exist only for a request over the logits budget, sized by SPEC 5. */
        int64_t per = (M / 4) / bs;
        if (per < 1) per = 1;
        ok &= rows * bs * 4 > M && k->rows <= per && (k->query_end == q[req] || k->rows == per);
        ok &= k->seq_tokens == bs && bs <= W;
        qpos = k->query_end;
        if (qpos == q[req]) { req++; qpos = 0; }
      } else {
        ok &= k->request_start == req && qpos == 0 && k->request_end > req;
        ok &= k->rows == rows && k->seq_tokens == bs && bs <= W && rows * bs * 4 <= M;
        ok &= k->logits_bytes == rows * bs * 4;
        /* Greedy: the next request would have broken a budget. */
        if (k->request_end < n) {
          int r = k->request_end;
          int64_t s = sparse && seq[r] < info.min_split_seq_len ? info.min_split_seq_len : seq[r];
          ok &= bs + s > W || (rows + q[r]) * (bs + s) * 4 > M;
        }
        req = k->request_end;
      }
    }
    ok &= req == n && qpos == 0;
    CHECK_MSG(ok, "seed %llu trial %d: the plan breaks a rule (W %lld, M %lld, n %d, sparse %d)",
              (unsigned long long)seed, trial, (long long)W, (long long)M, n, sparse);
    if (!ok) break;
  }
  ixl_ctx_free(ctx);
}

int main(void) {
  RUN(a_batch_that_fits_is_one_chunk);
  RUN(logits_budget_edge_exact_and_one_byte_under);
  RUN(workspace_budget_edge_exact_and_one_under);
  RUN(a_request_over_the_logits_budget_splits_into_query_sub_chunks);
  RUN(sub_chunks_keep_at_least_one_row);
  RUN(sparse_clamps_seq_lens_up_to_min_split_seq_len);
  RUN(bf16_fp32_split_width_triples_the_clamp);
  RUN(errors_name_the_request);
  RUN(max_chunks_too_small_reports_the_count);
  RUN(random_plans_respect_both_budgets_and_cover_every_row_once);
  DONE();
}
