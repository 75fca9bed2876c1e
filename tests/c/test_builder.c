/* test_builder.c - the metadata builder of SPEC 4: the V4.1-Flash derived values, every
 * engine-start check and its message, absurd configs refused before any allocation, the
 * scratch, build(batch) allocating nothing, batch errors that name the request with nothing
 * half-built, and seeded random batches checked row by row. */
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "rand.h"

TEST(v41_flash_defaults_match_spec_1) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_config c;
  ixl_config_defaults(&c);
  CHECK(c.heads == 32 && c.head_dim == 128 && c.index_topk == 512);
  CHECK(c.candidate_block_size == 8 && c.candidate_topk_blocks == 2048);
  CHECK(c.page_size == 128 && c.max_rows == 8192 && c.max_model_len == 1048576);
  CHECK(c.compress_ratio == 1 && c.max_logits_bytes == 512 * 1024 * 1024 &&
        c.context_parallel == 1);
  CHECK(c.kv_format == IXL_MXFP4 && c.quantizer == IXL_Q_RNE && c.ks_mode == IXL_KS_UNALIGNED);
  CHECK(c.block_score == IXL_SCORE_MAX && c.split_width == IXL_SPLIT_BF16);
  ixl_builder_info info;
  CHECK_OK(ctx, ixl_config_validate(ctx, &c, &info));
  CHECK(info.config.sparse_block_kv == 8);
  CHECK(info.num_sparse_cols == 16384 && info.num_sparse_blocks == 2048);
  CHECK(info.min_split_seq_len == 8192);
  CHECK(info.config.workspace_tokens == 40 * 1048576);
  CHECK(info.sparse_ids_bytes == 8192LL * 2048 * 4 && info.col_indices_bytes == 8192LL * 512 * 4);
  CHECK(info.end_bytes == 8192 * 4 && info.zero_row_starts_bytes == 8192 * 4);
  CHECK(info.row_ks_bytes == 8192 * 4 && info.row_ke_bytes == 8192 * 4);
  CHECK(info.scratch_bytes == 8192LL * (2048 + 512 + 5) * 4);
  c.split_width = IXL_SPLIT_BF16_FP32;
  CHECK_OK(ctx, ixl_config_validate(ctx, &c, &info));
  CHECK(info.min_split_seq_len == 24576);
  /* cbs 16 picks 16 by the production rule. */
  ixl_config_defaults(&c);
  c.candidate_block_size = 16;
  c.candidate_topk_blocks = 1024;
  CHECK_OK(ctx, ixl_config_validate(ctx, &c, &info));
  CHECK(info.config.sparse_block_kv == 16 && info.num_sparse_blocks == 1024);
  c.sparse_block_kv = 4;
  CHECK_OK(ctx, ixl_config_validate(ctx, &c, &info));
  CHECK(info.config.sparse_block_kv == 4 && info.num_sparse_blocks == 4096 &&
        info.num_sparse_cols == 16384);
  /* Every kv_format is accepted. */
  for (int f = 0; f < 3; f++) {
    ixl_config_defaults(&c);
    c.kv_format = f;
    CHECK_OK(ctx, ixl_config_validate(ctx, &c, NULL));
  }
  ixl_ctx_free(ctx);
}

#define BAD(stmt, needle)                                                          \
  do {                                                                             \
    ixl_config c;                                                                  \
    ixl_config_defaults(&c);                                                       \
    stmt;                                                                          \
    CHECK_ERR(ctx, ixl_config_validate(ctx, &c, NULL), IXL_ERR_CONFIG, needle);    \
  } while (0)

TEST(every_engine_start_check_names_fields_values_and_rule) {
  ixl_ctx *ctx = test_ctx(0);
  BAD(c.candidate_block_size = 0,
      "candidate_block_size = 0, candidate_topk_blocks = 2048: both must be > 0 (the sparse path "
      "needs a two-level");
  BAD(c.candidate_topk_blocks = -1, "candidate_block_size = 8, candidate_topk_blocks = -1");
  BAD(c.context_parallel = 2, "context_parallel = 2: must be 1");
  BAD(c.context_parallel = 0, "context_parallel = 0: must be 1");
  BAD(c.kv_format = 3, "kv_format = 3: must be mxfp4 (0), mxfp8 (1) or fp8 (2)");
  BAD(c.quantizer = 2, "quantizer = 2: must be rne (0) or ties_down (1)");
  BAD(c.ks_mode = -1, "ks_mode = -1: must be unaligned (0) or aligned (1)");
  BAD(c.block_score = 4, "block_score = 4: must be max (0), mean (1), sum (2) or logsumexp (3)");
  BAD(c.split_width = 2, "split_width = 2: must be bf16 (0) or bf16+fp32 (1)");
  BAD(c.heads = 30, "heads = 30: must be a multiple of 4 in [4, 128]");
  BAD(c.heads = 132, "heads = 132: must be a multiple of 4 in [4, 128]");
  BAD(c.heads = 0, "heads = 0:");
  BAD(c.head_dim = 64, "head_dim = 64: must be 128");
  BAD(c.index_topk = 4104, "index_topk = 4104: must be a multiple of 8 in [8, 4096]");
  BAD(c.index_topk = 12, "index_topk = 12: must be a multiple of 8");
  BAD(c.index_topk = 0, "index_topk = 0:");
  BAD(c.page_size = 0, "page_size = 0: must be in [1, 1048576]");
  BAD(c.page_size = (int64_t)1 << 40, "page_size = 1099511627776: must be in [1, 1048576]");
  BAD(c.candidate_block_size = 12,
      "sparse_block_kv = auto: pick_sparse_block_kv(candidate_block_size = 12) needs 16 or 8 to "
      "divide candidate_block_size; set sparse_block_kv explicitly (valid choices for this "
      "config: 4)");
  BAD(c.page_size = 4,
      "page_size = 4: must be a multiple of sparse_block_kv = 8 (auto: "
      "pick_sparse_block_kv(candidate_block_size = 8))");
  BAD((c.candidate_block_size = 16, c.sparse_block_kv = 12),
      "sparse_block_kv = 12: must be a power of two in [4, min(candidate_block_size, 128)] that "
      "divides candidate_block_size (16) and page_size (128); valid choices for this config: 4, "
      "8, 16");
  BAD((c.candidate_block_size = 16, c.sparse_block_kv = 32),
      "valid choices for this config: 4, 8, 16");
  BAD((c.candidate_block_size = 16, c.page_size = 24, c.sparse_block_kv = 16),
      "page_size (24); valid choices for this config: 4, 8");
  BAD((c.candidate_block_size = 512, c.candidate_topk_blocks = 32, c.page_size = 512,
       c.sparse_block_kv = 256),
      "sparse_block_kv = 256: must be a power of two in [4, min(candidate_block_size, 128)] that "
      "divides candidate_block_size (512) and page_size (512); valid choices for this config: 4, "
      "8, 16, 32, 64, 128");
  BAD((c.candidate_block_size = 6, c.sparse_block_kv = 2), "valid choices for this config: none");
  BAD(c.sparse_block_kv = -8, "sparse_block_kv = -8: must be a power of two");
  BAD(c.candidate_topk_blocks = 100,
      "num_sparse_cols = candidate_topk_blocks (100) * candidate_block_size (8) = 800: must be a "
      "multiple of 512");
  BAD(c.candidate_topk_blocks = (int64_t)1 << 20,
      "num_sparse_cols = candidate_topk_blocks (1048576) * candidate_block_size (8) = 8388608: "
      "must be < 8388608 (2^23");
  BAD(c.candidate_topk_blocks = (int64_t)1 << 31, "= 17179869184: must be < 8388608");
  BAD(c.candidate_topk_blocks = INT64_MAX / 2,
      "num_sparse_cols = candidate_topk_blocks (4611686018427387903) * candidate_block_size (8) "
      "overflows int64");
  BAD(c.max_model_len = 0, "max_model_len = 0: must be in [1, 2147483647]");
  BAD(c.max_model_len = (int64_t)1 << 31, "max_model_len = 2147483648: must be in [1, 2147483647]");
  BAD(c.compress_ratio = 0, "compress_ratio = 0: must be in [1, max_model_len (1048576)]");
  BAD(c.compress_ratio = 2097152,
      "compress_ratio = 2097152: must be in [1, max_model_len (1048576)]");
  BAD(c.workspace_tokens = (int64_t)1 << 31,
      "workspace_tokens = 2147483648: must be in [1, 2147483647] (or auto)");
  BAD(c.max_rows = 0, "max_rows = 0: must be in [1, 2147483647]");
  BAD(c.max_rows = 1000000000000LL, "max_rows = 1000000000000: must be in [1, 2147483647]");
  BAD(c.max_model_len = (int64_t)1 << 30,
      "workspace_tokens = auto = 40 * max_model_len (1073741824) / compress_ratio (1) = "
      "42949672960: must be <= 2147483647");
  BAD(c.workspace_tokens = -5, "workspace_tokens = -5: must be in [1, 2147483647] (or auto)");
  BAD(c.workspace_tokens = 8191,
      "workspace_tokens = 8191: must be >= min_split_seq_len = ceil(candidate_topk_blocks (2048) "
      "* candidate_block_size (8) * 2 / 4) = 8192 (split_width bf16)");
  BAD((c.workspace_tokens = 24575, c.split_width = IXL_SPLIT_BF16_FP32),
      "* 6 / 4) = 24576 (split_width bf16+fp32)");
  BAD(c.max_logits_bytes = 3, "max_logits_bytes = 3: must be >= 4 (one fp32 logit)");
  BAD(c.max_rows = INT32_MAX,
      "scratch = max_rows (2147483647) * (num_sparse_blocks (2048, from candidate_topk_blocks "
      "2048 * candidate_block_size 8 / sparse_block_kv 8) + index_topk (512) + 5) * 4 bytes: more "
      "than 2^40 bytes");
  CHECK_ERR(ctx, ixl_config_validate(ctx, NULL, NULL), IXL_ERR_INVALID_ARG, "cfg is NULL");
  /* Just inside the limits is fine. */
  ixl_config c;
  ixl_config_defaults(&c);
  c.workspace_tokens = 8192;
  c.heads = 128;
  c.index_topk = 4096;
  CHECK_OK(ctx, ixl_config_validate(ctx, &c, NULL));
  ixl_ctx_free(ctx);
}

TEST(valid_sparse_block_kv_lists_every_choice) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_config c;
  ixl_config_defaults(&c);
  int32_t v[8], n = 0;
  CHECK_OK(ctx, ixl_valid_sparse_block_kv(ctx, &c, v, 8, &n));
  CHECK(n == 2 && v[0] == 4 && v[1] == 8);
  c.candidate_block_size = 64;
  c.page_size = 32;
  CHECK_OK(ctx, ixl_valid_sparse_block_kv(ctx, &c, v, 8, &n));
  CHECK(n == 4 && v[0] == 4 && v[3] == 32);
  /* Each listed choice passes validation; the count is given even past max_out. */
  c.candidate_topk_blocks = 256;
  for (int i = 0; i < n; i++) {
    c.sparse_block_kv = v[i];
    CHECK_OK(ctx, ixl_config_validate(ctx, &c, NULL));
  }
  v[1] = -7;
  CHECK_OK(ctx, ixl_valid_sparse_block_kv(ctx, &c, v, 1, &n));
  CHECK(n == 4 && v[0] == 4 && v[1] == -7);
  c.candidate_block_size = 6;
  CHECK_OK(ctx, ixl_valid_sparse_block_kv(ctx, &c, v, 8, &n));
  CHECK(n == 0);
  CHECK_ERR(ctx, ixl_valid_sparse_block_kv(ctx, &c, NULL, 2, &n), IXL_ERR_INVALID_ARG,
            "max_out = 2");
  ixl_ctx_free(ctx);
}

TEST(absurd_configs_fail_before_any_allocation) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_config c;
  ixl_builder *b = (ixl_builder *)1;
  ixl_config_defaults(&c);
  c.max_rows = 1000000000000LL;
  CHECK_ERR(ctx, ixl_builder_new(ctx, &c, &b), IXL_ERR_CONFIG, "max_rows = 1000000000000");
  CHECK(b == NULL);
  ixl_config_defaults(&c);
  c.candidate_topk_blocks = (int64_t)1 << 31;
  CHECK_ERR(ctx, ixl_builder_new(ctx, &c, &b), IXL_ERR_CONFIG, "must be < 8388608");
  ixl_config_defaults(&c);
  c.max_rows = 200000000; /* 2e8 rows * 2565 * 4 bytes: past 2^40 */
  CHECK_ERR(ctx, ixl_builder_new(ctx, &c, &b), IXL_ERR_CONFIG, "more than 2^40 bytes");
  ixl_alloc_stats s;
  ixl_ctx_alloc_stats(ctx, &s);
  CHECK(s.host_allocs == 0 && s.device_allocs == 0 && s.host_bytes_live == 0);
  ixl_ctx_free(ctx);
}

/* The small config the build tests use: 64 sparse blocks of 8, top-k 64, pages of 16. */
static void small_config(ixl_config *c, int64_t ratio) {
  ixl_config_defaults(c);
  c->candidate_topk_blocks = 64;
  c->index_topk = 64;
  c->page_size = 16;
  c->max_rows = 256;
  c->max_model_len = 8192;
  c->compress_ratio = ratio;
  c->workspace_tokens = 2048;
  c->max_logits_bytes = 64 * 1024;
}

TEST(builder_allocates_its_scratch_once_and_outlives_its_context_handle) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_config c;
  small_config(&c, 1);
  ixl_builder *b = NULL;
  CHECK_OK(ctx, ixl_builder_new(ctx, &c, &b));
  ixl_builder_info info;
  ixl_builder_get_info(b, &info);
  CHECK(info.num_sparse_blocks == 64 && info.config.sparse_block_kv == 8);
  CHECK(info.scratch_bytes == 256 * (64 + 64 + 5) * 4);
  ixl_alloc_stats s;
  ixl_ctx_alloc_stats(ctx, &s);
  /* Scratch on the host for a CPU context, plus the chunk array. */
  CHECK_MSG(s.host_bytes_live >= info.scratch_bytes, "live %lld", (long long)s.host_bytes_live);
  CHECK(s.device_allocs == 0);
  ixl_ctx_free(ctx); /* the builder keeps the context alive */
  int64_t L[1] = {40};
  ixl_batch batch = {1, L, NULL, 0, NULL, NULL, NULL};
  ixl_step step;
  CHECK(ixl_builder_build(b, &batch, 1, &step) == IXL_OK);
  CHECK(step.n_rows == 1 && ((int32_t *)step.decode.row_ke.data)[0] == 40);
  ixl_builder_free(b);
  ixl_builder_free(NULL);
}

typedef struct rand_batch {
  int32_t nd, np;
  int64_t dl[24], pq[10], pl[10];
  ixl_batch batch;
} rand_batch;

/* A random valid batch for small_config(ratio): fits max_rows and the workspace. */
static void make_batch(rand_batch *rb, int64_t ratio, int64_t W, int64_t max_rows) {
  rb->nd = (int32_t)rand_range(0, 24);
  rb->np = (int32_t)rand_range(0, 10);
  int64_t rows = rb->nd;
  for (int i = 0; i < rb->nd; i++) rb->dl[i] = rand_range(1, 8192);
  for (int i = 0; i < rb->np; i++) {
    int64_t q = rand_range(1, 40);
    if (rows + q > max_rows) q = max_rows - rows;
    if (q < 1) { /* full: the batch ends here */
      rb->np = i;
      break;
    }
    rows += q;
    rb->pq[i] = q;
    int64_t most = W * ratio - q; /* (context + q) / ratio <= W */
    if (most > 8192 - q) most = 8192 - q;
    rb->pl[i] = rand_range(0, most < 0 ? 0 : most);
  }
  ixl_batch b = {rb->nd, rb->dl, NULL, rb->np, rb->pq, rb->pl, NULL};
  rb->batch = b;
}

TEST(build_allocates_nothing_over_many_steps_of_different_shapes) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_config c;
  small_config(&c, 1);
  ixl_builder *b = NULL;
  CHECK_OK(ctx, ixl_builder_new(ctx, &c, &b));
  uint64_t seed = test_seed();
  ixl_alloc_stats before, after;
  ixl_ctx_alloc_stats(ctx, &before);
  int64_t shapes = 0;
  for (int t = 0; t < 300; t++) {
    rand_seed(RAND_SPLITMIX64, seed + (uint64_t)t);
    rand_batch rb;
    make_batch(&rb, 1, c.workspace_tokens, c.max_rows);
    ixl_step step;
    ixl_status st = ixl_builder_build(b, &rb.batch, t & 1, &step);
    CHECK_MSG(st == IXL_OK, "seed %llu: %s", (unsigned long long)seed, ixl_last_error(ctx));
    shapes += step.n_rows * 1000 + step.n_chunks;
  }
  ixl_ctx_alloc_stats(ctx, &after);
  CHECK(shapes > 0);
  CHECK_MSG(after.host_allocs == before.host_allocs && after.host_frees == before.host_frees &&
                after.host_bytes_live == before.host_bytes_live &&
                after.device_allocs == before.device_allocs,
            "allocs %lld -> %lld", (long long)before.host_allocs, (long long)after.host_allocs);
  ixl_builder_free(b);
  ixl_ctx_free(ctx);
}

static const int32_t *i32(const ixl_tensor *t) { return (const int32_t *)t->data; }

/* Checks one step against the batch, row by row; returns 1 when every rule holds. */
static int step_ok(const ixl_config *c, const ixl_builder_info *info, const ixl_batch *bt,
                   const ixl_step *st, int sparse, ixl_ctx *ctx, char *why, size_t wl) {
#define FAIL(...) do { snprintf(why, wl, __VA_ARGS__); return 0; } while (0)
  const int64_t r = c->compress_ratio, nd = bt->n_decode;
  int64_t rows = nd;
  for (int p = 0; p < bt->n_prefill; p++) rows += bt->prefill_query_lens[p];
  if (st->n_rows != rows || st->n_decode_rows != nd || st->has_decode != (nd > 0))
    FAIL("row counts: %lld/%lld", (long long)st->n_rows, (long long)rows);
  static int seen[512];
  memset(seen, 0, sizeof seen);
  const char *ids_base = NULL;
  const int64_t nsb = info->num_sparse_blocks, k = c->index_topk;
  if (nd > 0) {
    const ixl_rows *d = &st->decode;
    if (!d->is_decode || d->token_start != 0 || d->token_end != nd) FAIL("decode range");
    if (d->row_ks.shape[0] != nd || d->row_ke.shape[0] != nd || d->sparse_ids.shape[0] != nd ||
        d->sparse_ids.shape[1] != nsb || d->col_indices.shape[1] != k || d->end.shape[0] != nd)
      FAIL("decode view shapes");
    ids_base = (const char *)d->sparse_ids.data;
    for (int64_t i = 0; i < nd; i++) {
      seen[i]++;
      if (i32(&d->row_ks)[i] != 0) FAIL("decode row_ks[%lld] != 0", (long long)i);
      if (i32(&d->row_ke)[i] != bt->decode_context_lens[i] / r)
        FAIL("decode row_ke[%lld]", (long long)i);
      if (i32(&d->row_indices)[i] != i) FAIL("decode row_indices[%lld]", (long long)i);
    }
    if (bt->decode_block_table && (d->block_table.data != bt->decode_block_table->data ||
                                   d->block_table.shape[1] != bt->decode_block_table->shape[1]))
      FAIL("decode block table view");
  }
  /* The chunk list equals the standalone chunker's on the same lengths. */
  int64_t seq[16];
  ixl_chunk plan[512];
  int32_t nplan = 0;
  for (int p = 0; p < bt->n_prefill; p++)
    seq[p] = (bt->prefill_context_lens[p] + bt->prefill_query_lens[p]) / r;
  if (ixl_chunk_plan(ctx, info, bt->n_prefill, seq, bt->prefill_query_lens, sparse, plan, 512,
                     &nplan))
    FAIL("chunk_plan: %s", ixl_last_error(ctx));
  if (nplan != st->n_chunks) FAIL("%d chunks, chunk_plan says %d", st->n_chunks, nplan);
  int64_t cursor = nd;
  int req = 0;
  int64_t qpos = 0;
  for (int ci = 0; ci < st->n_chunks; ci++) {
    const ixl_rows *ch = &st->chunks[ci];
    const ixl_chunk *pc = &plan[ci];
    if (ch->is_decode || ch->token_start != cursor || ch->token_end <= ch->token_start)
      FAIL("chunk %d is not contiguous after row %lld", ci, (long long)cursor);
    if (ch->request_start != nd + pc->request_start || ch->request_end != nd + pc->request_end ||
        ch->query_start != pc->query_start || ch->query_end != pc->query_end ||
        ch->logits_bytes != pc->logits_bytes || ch->token_end - ch->token_start != pc->rows)
      FAIL("chunk %d differs from chunk_plan", ci);
    int64_t n = ch->token_end - ch->token_start;
    if (ch->row_ks.shape[0] != n || ch->row_ke.shape[0] != n || ch->sparse_ids.shape[0] != n ||
        ch->col_indices.shape[0] != n || ch->end.shape[0] != n || ch->row_indices.shape[0] != n ||
        ch->block_table.shape[1] != 0)
      FAIL("chunk %d view shapes", ci);
    const char *base = (const char *)ch->sparse_ids.data - ch->token_start * nsb * 4;
    if (ids_base && base != ids_base) FAIL("chunk %d sparse_ids view is not at its rows", ci);
    ids_base = base;
    /* Budgets (a one-row sub-chunk may exceed the logits budget: max(1, ...) rows). */
    int64_t bs = 0, ws = 0;
    for (int p = pc->request_start; p < pc->request_end; p++)
      bs += sparse && seq[p] < info->min_split_seq_len ? info->min_split_seq_len : seq[p];
    if (bs > c->workspace_tokens) FAIL("chunk %d breaks the workspace budget", ci);
    if (n * bs * 4 > c->max_logits_bytes && !(pc->is_sub_chunk && n == 1))
      FAIL("chunk %d breaks the logits budget", ci);
    int64_t row = 0;
    for (int p = pc->request_start; p < pc->request_end; p++) {
      int64_t q = bt->prefill_query_lens[p], L = bt->prefill_context_lens[p];
      int64_t q0 = pc->is_sub_chunk ? pc->query_start : 0,
              q1 = pc->is_sub_chunk ? pc->query_end : q;
      if (p != req || q0 != qpos) FAIL("chunk %d: request %d rows out of order", ci, p);
      for (int64_t i = q0; i < q1; i++, row++) {
        int64_t g = ch->token_start + row;
        seen[g]++;
        int32_t ks = i32(&ch->row_ks)[row], ke = i32(&ch->row_ke)[row];
        if (ks != ws || ke != ws + (L + i + 1) / r)
          FAIL("row %lld (request %d, query row %lld): ks/ke %d/%d, expected %lld/%lld",
               (long long)g, p, (long long)i, ks, ke, (long long)ws,
               (long long)(ws + (L + i + 1) / r));
        if (i32(&ch->row_indices)[row] != nd + p) FAIL("row %lld row_indices", (long long)g);
      }
      ws += (L + q) / r;
      qpos = q1 == q ? 0 : q1;
      if (q1 == q) req++;
    }
    if (row != n) FAIL("chunk %d has %lld rows, walked %lld", ci, (long long)n, (long long)row);
    if (ch->workspace_tokens != ws) FAIL("chunk %d workspace_tokens", ci);
    cursor = ch->token_end;
  }
  if (cursor != rows || req != bt->n_prefill)
    FAIL("chunks end at row %lld of %lld", (long long)cursor, (long long)rows);
  for (int64_t g = 0; g < rows; g++)
    if (seen[g] != 1) FAIL("row %lld is in %d places", (long long)g, seen[g]);
  return 1;
#undef FAIL
}

TEST(random_batches_put_every_row_in_exactly_one_place) {
  ixl_ctx *ctx = test_ctx(0);
  uint64_t seed = test_seed();
  char why[256];
  for (int ratio = 1; ratio <= 4; ratio *= 2) {
    ixl_config c;
    small_config(&c, ratio);
    ixl_builder *b = NULL;
    CHECK_OK(ctx, ixl_builder_new(ctx, &c, &b));
    ixl_builder_info info;
    ixl_builder_get_info(b, &info);
    int64_t tshape[2] = {24, 8192 / 16};
    ixl_tensor *table = NULL;
    CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_I32, 2, tshape, IXL_HOST, &table));
    for (int64_t i = 0; i < 24 * 512; i++) ((int32_t *)table->data)[i] = (int32_t)(i % 977);
    for (int t = 0; t < 300; t++) {
      rand_seed(RAND_SPLITMIX64, seed * 7919u + (uint64_t)(t + 1000 * ratio));
      rand_batch rb;
      make_batch(&rb, ratio, c.workspace_tokens, c.max_rows);
      ixl_tensor view;
      if (t % 3 == 0 && rb.nd > 0) {
        int64_t vs[2] = {rb.nd, 512};
        CHECK_OK(ctx, ixl_tensor_view(ctx, table, 2, vs, NULL, 0, &view));
        rb.batch.decode_block_table = &view;
      }
      int sparse = (int)(t & 1);
      ixl_step step;
      ixl_status st = ixl_builder_build(b, &rb.batch, sparse, &step);
      CHECK_MSG(st == IXL_OK, "seed %llu ratio %d trial %d: %s", (unsigned long long)seed, ratio,
                t, ixl_last_error(ctx));
      if (st) break;
      int ok = step_ok(&c, &info, &rb.batch, &step, sparse, ctx, why, sizeof why);
      CHECK_MSG(ok, "seed %llu ratio %d trial %d: %s", (unsigned long long)seed, ratio, t, why);
      if (!ok) break;
    }
    ixl_tensor_free(table);
    ixl_builder_free(b);
  }
  ixl_ctx_free(ctx);
}

TEST(a_request_over_the_logits_budget_becomes_sub_chunks_in_build) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_config c;
  small_config(&c, 1);
  c.max_logits_bytes = 4 * 1000 * 10; /* 10 rows of 1000 positions */
  ixl_builder *b = NULL;
  CHECK_OK(ctx, ixl_builder_new(ctx, &c, &b));
  int64_t dl[2] = {5, 7}, pq[2] = {25, 3}, pl[2] = {975, 10};
  ixl_batch bt = {2, dl, NULL, 2, pq, pl, NULL};
  ixl_step st;
  CHECK_OK(ctx, ixl_builder_build(b, &bt, 0, &st));
  CHECK(st.n_rows == 30 && st.n_chunks == 4);
  int64_t qs[3] = {0, 10, 20}, qe[3] = {10, 20, 25};
  for (int i = 0; i < 3; i++) {
    const ixl_rows *r = &st.chunks[i];
    CHECK(r->request_start == 2 && r->request_end == 3 && r->query_start == qs[i] &&
          r->query_end == qe[i]);
    CHECK(r->token_start == 2 + qs[i] && r->token_end == 2 + qe[i]);
    /* A sub-chunk's rows see their own prefix of the one request in the workspace. */
    CHECK(i32(&r->row_ks)[0] == 0 && i32(&r->row_ke)[0] == 975 + qs[i] + 1);
  }
  CHECK(st.chunks[3].request_start == 3 && st.chunks[3].token_start == 27 &&
        st.chunks[3].token_end == 30);
  CHECK(i32(&st.chunks[3].row_ks)[2] == 0 && i32(&st.chunks[3].row_ke)[2] == 13);
  ixl_builder_free(b);
  ixl_ctx_free(ctx);
}

/* SPEC 4 and issue 19: a decode request of 0 tokens (an empty indexer cache, or a padding
 * row) is an empty row at every compress_ratio: row_ks = row_ke = 0, no page needed (its
 * block table row may hold only -1), beside rows that keep their usual metadata. */
TEST(decode_rows_of_0_tokens_are_empty_rows) {
  ixl_ctx *ctx = test_ctx(0);
  for (int64_t ratio = 1; ratio <= 4; ratio *= 2) {
    ixl_config c;
    small_config(&c, ratio);
    ixl_builder *b = NULL;
    CHECK_OK(ctx, ixl_builder_new(ctx, &c, &b));
    int64_t dl[4] = {0, 40, 0, 3}, pq[1] = {2}, pl[1] = {0};
    ixl_batch only = {1, dl, NULL, 0, NULL, NULL, NULL};
    ixl_step st;
    CHECK_OK(ctx, ixl_builder_build(b, &only, 1, &st));
    CHECK(st.n_rows == 1 && st.has_decode && i32(&st.decode.row_ke)[0] == 0 &&
          i32(&st.decode.row_ks)[0] == 0 && i32(&st.decode.row_indices)[0] == 0);
    int64_t shp[2] = {4, 3};
    ixl_tensor *t = NULL;
    CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_I32, 2, shp, IXL_HOST, &t));
    /* rows 0 and 2 need no page: -1 everywhere; row 1 needs ceil(40 / r / 16) pages */
    const int32_t pages[12] = {-1, -1, -1, 0, 1, 2, -1, -1, -1, 3, -1, -1};
    memcpy(t->data, pages, sizeof pages);
    ixl_batch mixed = {4, dl, t, 1, pq, pl, NULL};
    CHECK_OK(ctx, ixl_builder_build(b, &mixed, 1, &st));
    CHECK(st.n_rows == 6 && st.n_decode_rows == 4 && st.n_chunks == 1);
    for (int i = 0; i < 4; i++) {
      CHECK_MSG(i32(&st.decode.row_ke)[i] == dl[i] / ratio && i32(&st.decode.row_ks)[i] == 0 &&
                    i32(&st.decode.row_indices)[i] == i,
                "ratio %lld row %d: ke %d", (long long)ratio, i, i32(&st.decode.row_ke)[i]);
    }
    CHECK(st.chunks[0].token_start == 4 && st.chunks[0].token_end == 6 &&
          i32(&st.chunks[0].row_ke)[1] == 2 / ratio);
    ixl_builder_info info;
    ixl_builder_get_info(b, &info);
    char why[256] = "";
    CHECK_MSG(step_ok(&c, &info, &mixed, &st, 1, ctx, why, sizeof why), "ratio %lld: %s",
              (long long)ratio, why);
    int64_t neg[2] = {0, -2};
    ixl_batch bad = {2, neg, NULL, 0, NULL, NULL, NULL};
    CHECK_ERR(ctx, ixl_builder_build(b, &bad, 1, &st), IXL_ERR_BATCH,
              "decode request 1: context_len = -2: must be >= 0 (0 is an empty row)");
    ixl_tensor_free(t);
    ixl_builder_free(b);
  }
  ixl_ctx_free(ctx);
}

TEST(batch_errors_name_the_request_and_nothing_is_half_built) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_config c;
  small_config(&c, 1);
  ixl_builder *b = NULL;
  CHECK_OK(ctx, ixl_builder_new(ctx, &c, &b));
  /* A good step first; every failure below must leave it exactly as it was. */
  int64_t dl[3] = {40, 17, 1}, pq[2] = {5, 9}, pl[2] = {100, 0};
  ixl_batch good = {3, dl, NULL, 2, pq, pl, NULL};
  ixl_step st;
  CHECK_OK(ctx, ixl_builder_build(b, &good, 1, &st));
  int32_t snap_ke[17], snap_ks[17];
  ixl_rows snap_chunks[2];
  memcpy(snap_chunks, st.chunks, sizeof snap_chunks);
  CHECK(st.n_chunks == 1);
  for (int i = 0; i < 3; i++) snap_ke[i] = i32(&st.decode.row_ke)[i];
  for (int i = 0; i < 14; i++) {
    snap_ke[3 + i] = i32(&st.chunks[0].row_ke)[i];
    snap_ks[3 + i] = i32(&st.chunks[0].row_ks)[i];
  }
  ixl_step junk;
  memset(&junk, 0x5a, sizeof junk);
  ixl_step junk0 = junk;

#define BATCH_ERR(batch, sparse, code, needle)                                      \
  do {                                                                              \
    ixl_batch bb_ = batch;                                                          \
    CHECK_ERR(ctx, ixl_builder_build(b, &bb_, sparse, &junk), code, needle);        \
  } while (0)
  {
    int64_t d[2] = {5, 0}, dneg[2] = {5, -1};
    /* 0 tokens is an empty row (decode_rows_of_0_tokens_are_empty_rows); below 0 is refused */
    BATCH_ERR(((ixl_batch){2, dneg, NULL, 0, NULL, NULL, NULL}), 1, IXL_ERR_BATCH,
              "decode request 1: context_len = -1: must be >= 0 (0 is an empty row)");
    int64_t d2[1] = {8193};
    BATCH_ERR(((ixl_batch){1, d2, NULL, 0, NULL, NULL, NULL}), 1, IXL_ERR_BATCH,
              "decode request 0: context_len = 8193 tokens: more than max_model_len = 8192");
    int64_t many[257];
    for (int i = 0; i < 257; i++) many[i] = 3;
    BATCH_ERR(((ixl_batch){257, many, NULL, 0, NULL, NULL, NULL}), 1, IXL_ERR_BATCH,
              "decode request 256: the batch reaches 257 rows with it (decode rows first): more "
              "than max_rows = 256");
    int64_t q[2] = {3, 253}, l[2] = {0, 0};
    BATCH_ERR(((ixl_batch){1, d, NULL, 2, q, l, NULL}), 1, IXL_ERR_BATCH,
              "prefill request 1 (step request 2): the batch reaches 257 rows with its 253 query "
              "rows: more than max_rows = 256");
    int64_t q0[2] = {3, 0};
    BATCH_ERR(((ixl_batch){0, NULL, NULL, 2, q0, l, NULL}), 1, IXL_ERR_BATCH,
              "prefill request 1 (step request 1): query_len = 0: must be >= 1");
    int64_t ln[1] = {-4};
    BATCH_ERR(((ixl_batch){1, d, NULL, 1, q, ln, NULL}), 1, IXL_ERR_BATCH,
              "prefill request 0 (step request 1): context_len = -4: must be >= 0");
    int64_t lbig[1] = {8190};
    BATCH_ERR(((ixl_batch){0, NULL, NULL, 1, q, lbig, NULL}), 1, IXL_ERR_BATCH,
              "prefill request 0 (step request 0): context_len (8190) + query_len (3) tokens: "
              "more than max_model_len = 8192");
    int64_t lw[2] = {10, 2046}, qw[2] = {1, 3};
    BATCH_ERR(((ixl_batch){1, d, NULL, 2, qw, lw, NULL}), 0, IXL_ERR_BATCH,
              "prefill request 1 (step request 2): seq_len = (context_len 2046 + query_len 3) / "
              "compress_ratio 1 = 2049 positions exceeds workspace_tokens = 2048");
    BATCH_ERR(((ixl_batch){-1, d, NULL, 0, NULL, NULL, NULL}), 1, IXL_ERR_BATCH,
              "n_decode = -1, n_prefill = 0: both must be >= 0");
    BATCH_ERR(((ixl_batch){2, NULL, NULL, 0, NULL, NULL, NULL}), 1, IXL_ERR_BATCH,
              "decode_context_lens is NULL with n_decode = 2");
    BATCH_ERR(((ixl_batch){0, NULL, NULL, 1, q, NULL, NULL}), 1, IXL_ERR_BATCH,
              "prefill_query_lens and prefill_context_lens must be given with n_prefill = 1");
    BATCH_ERR(good, 2, IXL_ERR_INVALID_ARG, "sparse = 2: must be 0 or 1");
  }
  {
    /* Block tables: too few pages, a missing page, wrong dtype, wrong row count. */
    int64_t shp[2] = {2, 3};
    ixl_tensor *t = NULL, *f = NULL;
    CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_I32, 2, shp, IXL_HOST, &t));
    CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_F32, 2, shp, IXL_HOST, &f));
    int32_t *p = t->data;
    for (int i = 0; i < 6; i++) p[i] = i;
    int64_t d[2] = {40, 49};
    BATCH_ERR(((ixl_batch){2, d, t, 0, NULL, NULL, NULL}), 1, IXL_ERR_BATCH,
              "decode request 1: 49 positions need 4 pages of page_size = 16, but "
              "decode_block_table has 3 columns (max_pages)");
    d[1] = 33;
    p[4] = -1;
    BATCH_ERR(((ixl_batch){2, d, t, 0, NULL, NULL, NULL}), 1, IXL_ERR_BATCH,
              "decode request 1: page 1 of its 3 is missing (decode_block_table[1][1] = -1)");
    p[4] = 4;
    BATCH_ERR(((ixl_batch){2, d, f, 0, NULL, NULL, NULL}), 1, IXL_ERR_DTYPE,
              "decode_block_table: dtype f32, expected i32");
    BATCH_ERR(((ixl_batch){1, d, t, 0, NULL, NULL, NULL}), 1, IXL_ERR_BATCH,
              "decode_block_table: shape[0] = 2, expected one row per request (1)");
    int64_t q[2] = {4, 4}, l[2] = {40, 45};
    BATCH_ERR(((ixl_batch){0, NULL, NULL, 2, q, l, t}), 1, IXL_ERR_BATCH,
              "prefill request 1 (step request 1): 49 positions need 4 pages of page_size = 16, "
              "but prefill_block_table has 3 columns");
    /* The same table with enough pages builds, and the decode view is the caller's table. */
    ixl_batch ok = {2, d, t, 0, NULL, NULL, NULL};
    ixl_step s2;
    CHECK_OK(ctx, ixl_builder_build(b, &ok, 1, &s2));
    CHECK(s2.decode.block_table.data == t->data && s2.decode.block_table.shape[1] == 3);
    ixl_tensor_free(t);
    ixl_tensor_free(f);
  }
  CHECK(memcmp(&junk, &junk0, sizeof junk) == 0); /* failed builds never touch the step */
  /* Rebuild the good step; then fail once more and check its metadata is intact. */
  CHECK_OK(ctx, ixl_builder_build(b, &good, 1, &st));
  int64_t qz[2] = {5, 0};
  ixl_batch bad = {3, dl, NULL, 2, qz, pl, NULL};
  CHECK(ixl_builder_build(b, &bad, 1, &junk) == IXL_ERR_BATCH);
  CHECK(memcmp(snap_chunks, st.chunks, sizeof(ixl_rows)) == 0);
  for (int i = 0; i < 3; i++) CHECK(i32(&st.decode.row_ke)[i] == snap_ke[i]);
  for (int i = 0; i < 14; i++) {
    CHECK(i32(&st.chunks[0].row_ke)[i] == snap_ke[3 + i]);
    CHECK(i32(&st.chunks[0].row_ks)[i] == snap_ks[3 + i]);
  }
  CHECK(snap_ke[0] == 40 && snap_ke[3] == 101 && snap_ke[3 + 5] == 106 && snap_ks[3 + 5] == 105);
  ixl_builder_free(b);
  ixl_ctx_free(ctx);
#undef BATCH_ERR
}

int main(void) {
  RUN(v41_flash_defaults_match_spec_1);
  RUN(every_engine_start_check_names_fields_values_and_rule);
  RUN(valid_sparse_block_kv_lists_every_choice);
  RUN(absurd_configs_fail_before_any_allocation);
  RUN(builder_allocates_its_scratch_once_and_outlives_its_context_handle);
  RUN(build_allocates_nothing_over_many_steps_of_different_shapes);
  RUN(random_batches_put_every_row_in_exactly_one_place);
  RUN(a_request_over_the_logits_budget_becomes_sub_chunks_in_build);
  RUN(batch_errors_name_the_request_and_nothing_is_half_built);
  RUN(decode_rows_of_0_tokens_are_empty_rows);
  DONE();
}
