/* fuzz_config.c - libFuzzer harness for the builder (core/builder.c): a config decoded from
 * the fuzz bytes goes through ixl_config_validate; an accepted one must obey SPEC 4's rules,
 * and when its scratch is small, ixl_builder_new and a few ixl_builder_build calls on batches
 * decoded from the rest of the bytes must give a consistent step or a clean error, allocate
 * nothing per build, and give back every counted byte at the end. */
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int32_t pick_enum(fz_in *in, int32_t dflt, int32_t count) {
  uint8_t s = fz_u8(in);
  if (s < 64) return dflt;
  if (s < 224) return (int32_t)(s % count);
  return (int32_t)fz_u32(in); /* out of range */
}

static void check_accepted(const ixl_config *in, const ixl_builder_info *info) {
  const ixl_config *c = &info->config;
  const int64_t cbs = c->candidate_block_size, sbk = c->sparse_block_kv;
  FZ_REQUIRE(cbs > 0 && c->candidate_topk_blocks > 0, "cbs %lld T %lld", (long long)cbs,
             (long long)c->candidate_topk_blocks);
  FZ_REQUIRE(sbk >= 4 && sbk <= 128 && (sbk & (sbk - 1)) == 0 && sbk <= cbs && cbs % sbk == 0,
             "sbk %lld with cbs %lld", (long long)sbk, (long long)cbs);
  FZ_REQUIRE(in->sparse_block_kv == 0 || in->sparse_block_kv == sbk,
             "explicit sbk %lld became %lld", (long long)in->sparse_block_kv, (long long)sbk);
  FZ_REQUIRE(in->sparse_block_kv != 0 || sbk == (cbs % 16 == 0 ? 16 : 8),
             "auto sbk %lld for cbs %lld", (long long)sbk, (long long)cbs);
  FZ_REQUIRE(c->page_size > 0 && c->page_size % sbk == 0, "page_size %lld, sbk %lld",
             (long long)c->page_size, (long long)sbk);
  FZ_REQUIRE(info->num_sparse_blocks == c->candidate_topk_blocks * (cbs / sbk),
             "num_sparse_blocks %lld", (long long)info->num_sparse_blocks);
  FZ_REQUIRE(info->num_sparse_cols == c->candidate_topk_blocks * cbs &&
                 info->num_sparse_cols % 512 == 0 && info->num_sparse_cols < (1 << 23),
             "num_sparse_cols %lld", (long long)info->num_sparse_cols);
  FZ_REQUIRE(c->index_topk >= 8 && c->index_topk <= 4096 && c->index_topk % 8 == 0,
             "index_topk %lld", (long long)c->index_topk);
  FZ_REQUIRE(c->heads >= 4 && c->heads <= 128 && c->heads % 4 == 0 && c->head_dim == 128,
             "heads %lld head_dim %lld", (long long)c->heads, (long long)c->head_dim);
  FZ_REQUIRE(c->context_parallel == 1, "context_parallel %lld", (long long)c->context_parallel);
  FZ_REQUIRE(c->kv_format >= 0 && c->kv_format <= 2 && c->quantizer >= 0 && c->quantizer <= 1 &&
                 c->ks_mode >= 0 && c->ks_mode <= 1 && c->block_score >= 0 && c->block_score <= 3 &&
                 c->split_width >= 0 && c->split_width <= 1,
             "an enum out of range");
  FZ_REQUIRE(c->max_rows > 0 && c->max_model_len > 0 && c->compress_ratio > 0 &&
                 c->workspace_tokens > 0 && c->max_logits_bytes > 0,
             "a non-positive size was accepted");
  FZ_REQUIRE(info->scratch_bytes > 0, "scratch_bytes %lld", (long long)info->scratch_bytes);
}

/* A host I32 block table [rows, max_pages], mostly valid page ids. Caller frees. */
static ixl_tensor *block_table(ixl_ctx *ctx, fz_in *in, int32_t rows) {
  int64_t shape[2] = {rows, fz_u8(in) % 9};
  ixl_tensor *t = NULL;
  if (ixl_tensor_new(ctx, IXL_I32, 2, shape, IXL_HOST, &t) != IXL_OK) abort();
  int32_t *p = t->data;
  for (int64_t i = 0; i < shape[0] * shape[1]; i++) {
    uint8_t k = fz_u8(in);
    p[i] = k < 240 ? (int32_t)k : -1;
  }
  return t;
}

static void check_rows(const ixl_rows *r, const ixl_config *c, int64_t n_rows) {
  const int64_t rows = r->token_end - r->token_start;
  FZ_REQUIRE(rows >= 0 && r->token_start >= 0 && r->token_end <= n_rows,
             "rows [%lld, %lld) of %lld", (long long)r->token_start, (long long)r->token_end,
             (long long)n_rows);
  FZ_REQUIRE(r->row_ks.shape[0] == rows && r->row_ke.shape[0] == rows && r->end.shape[0] == rows &&
                 r->sparse_ids.shape[0] == rows && r->col_indices.shape[0] == rows &&
                 r->col_indices.shape[1] == c->index_topk,
             "views sized %lld, %lld for %lld rows", (long long)r->row_ks.shape[0],
             (long long)r->sparse_ids.shape[0], (long long)rows);
  const int32_t *ks = r->row_ks.data, *ke = r->row_ke.data;
  for (int64_t i = 0; i < rows; i++) {
    FZ_REQUIRE(ks[i] >= 0 && ks[i] <= ke[i], "row %lld: ks %d ke %d",
               (long long)(r->token_start + i), ks[i], ke[i]);
    FZ_REQUIRE(r->is_decode || ke[i] <= r->workspace_tokens,
               "row %lld: ke %d past the chunk's workspace %lld", (long long)(r->token_start + i),
               ke[i], (long long)r->workspace_tokens);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ixl_ctx *ctx = fz_ctx();
  fz_in in = {data, size, 0};
  ixl_config cfg, in_cfg;
  ixl_config_defaults(&cfg);
  cfg.heads = fz_pick(&in, cfg.heads);
  cfg.head_dim = fz_pick(&in, cfg.head_dim);
  cfg.index_topk = fz_pick(&in, cfg.index_topk);
  cfg.candidate_block_size = fz_pick(&in, cfg.candidate_block_size);
  cfg.candidate_topk_blocks = fz_pick(&in, cfg.candidate_topk_blocks);
  cfg.sparse_block_kv = fz_pick(&in, cfg.sparse_block_kv);
  cfg.page_size = fz_pick(&in, cfg.page_size);
  cfg.max_rows = fz_pick(&in, 64); /* small by default so that builders get made */
  cfg.max_model_len = fz_pick(&in, 65536);
  cfg.compress_ratio = fz_pick(&in, cfg.compress_ratio);
  cfg.workspace_tokens = fz_pick(&in, cfg.workspace_tokens);
  cfg.max_logits_bytes = fz_pick(&in, cfg.max_logits_bytes);
  cfg.context_parallel = fz_pick(&in, cfg.context_parallel);
  cfg.kv_format = pick_enum(&in, cfg.kv_format, 3);
  cfg.quantizer = pick_enum(&in, cfg.quantizer, 2);
  cfg.ks_mode = pick_enum(&in, cfg.ks_mode, 2);
  cfg.block_score = pick_enum(&in, cfg.block_score, 4);
  cfg.split_width = pick_enum(&in, cfg.split_width, 2);
  in_cfg = cfg;

  ixl_alloc_stats s1, sb;
  const int64_t live0 = fz_live_bytes(ctx);
  ixl_builder_info info;
  ixl_status st = ixl_config_validate(ctx, &cfg, &info);
  int32_t sbks[16], nsbk = 0;
  ixl_status st2 = ixl_valid_sparse_block_kv(ctx, &cfg, sbks, 16, &nsbk);
  if (st2 == IXL_OK)
    for (int32_t i = 1; i < nsbk && i < 16; i++)
      FZ_REQUIRE(sbks[i] > sbks[i - 1], "valid sparse_block_kv not ascending");
  if (st != IXL_OK) {
    fz_check_error(ctx, st, "ixl_config_validate");
    return 0;
  }
  check_accepted(&in_cfg, &info);
  if (info.scratch_bytes > (32 << 20) || info.config.max_rows > (1 << 16)) return 0;

  ixl_builder *b = NULL;
  st = ixl_builder_new(ctx, &cfg, &b);
  if (st != IXL_OK) {
    fz_check_error(ctx, st, "ixl_builder_new");
    FZ_REQUIRE(b == NULL, "a failed builder_new returned a builder");
    return 0;
  }
  for (int round = 0; round < 4 && in.i < in.n; round++) {
    int64_t dl[8], ql[8], cl[8];
    ixl_batch batch;
    memset(&batch, 0, sizeof batch);
    uint8_t shape = fz_u8(&in);
    batch.n_decode = shape & 7;
    batch.n_prefill = (shape >> 3) & 7;
    if ((shape & 0xc0) == 0xc0) batch.n_decode = -batch.n_decode - 1;
    for (int i = 0; i < 8; i++) {
      dl[i] = fz_u8(&in) < 200 ? 1 + fz_u8(&in) * (1 + fz_u8(&in) % 64) : fz_pick(&in, 1);
      ql[i] = fz_u8(&in) < 200 ? 1 + fz_u8(&in) % 32 : fz_pick(&in, 1);
      cl[i] = fz_u8(&in) < 200 ? fz_u8(&in) * (1 + fz_u8(&in) % 64) : fz_pick(&in, 0);
    }
    batch.decode_context_lens = dl;
    batch.prefill_query_lens = ql;
    batch.prefill_context_lens = cl;
    uint8_t tables = fz_u8(&in);
    ixl_tensor *dt = NULL, *pt = NULL;
    if ((tables & 1) && batch.n_decode > 0) dt = block_table(ctx, &in, batch.n_decode);
    if ((tables & 2) && batch.n_prefill > 0) pt = block_table(ctx, &in, batch.n_prefill);
    batch.decode_block_table = dt;
    batch.prefill_block_table = pt;
    ixl_step step;
    ixl_ctx_alloc_stats(ctx, &sb);
    st = ixl_builder_build(b, &batch, (tables >> 2) & 1, &step);
    ixl_ctx_alloc_stats(ctx, &s1);
    FZ_REQUIRE(s1.host_allocs == sb.host_allocs && s1.device_allocs == sb.device_allocs,
               "builder_build allocated %lld times", (long long)(s1.host_allocs - sb.host_allocs));
    if (st != IXL_OK) {
      fz_check_error(ctx, st, "ixl_builder_build");
    } else {
      const ixl_config *c = &info.config;
      int64_t want = batch.n_decode;
      for (int32_t p = 0; p < batch.n_prefill; p++) want += ql[p];
      FZ_REQUIRE(step.n_rows == want && step.n_decode_rows == batch.n_decode,
                 "n_rows %lld, expected %lld", (long long)step.n_rows, (long long)want);
      if (step.has_decode) {
        check_rows(&step.decode, c, step.n_rows);
        const int32_t *ke = step.decode.row_ke.data;
        for (int32_t d = 0; d < batch.n_decode; d++)
          FZ_REQUIRE(ke[d] == dl[d] / c->compress_ratio, "decode row %d: ke %d", d, ke[d]);
      }
      int64_t next = batch.n_decode;
      for (int32_t k = 0; k < step.n_chunks; k++) {
        const ixl_rows *r = &step.chunks[k];
        FZ_REQUIRE(r->token_start == next, "chunk %d starts at row %lld, expected %lld", k,
                   (long long)r->token_start, (long long)next);
        FZ_REQUIRE(r->workspace_tokens <= c->workspace_tokens,
                   "chunk %d gathers %lld > workspace %lld", k, (long long)r->workspace_tokens,
                   (long long)c->workspace_tokens);
        check_rows(r, c, step.n_rows);
        next = r->token_end;
      }
      FZ_REQUIRE(next == step.n_rows, "chunks end at row %lld of %lld", (long long)next,
                 (long long)step.n_rows);
    }
    ixl_tensor_free(dt);
    ixl_tensor_free(pt);
  }
  ixl_builder_free(b);
  FZ_REQUIRE(fz_live_bytes(ctx) == live0, "counted host memory leaked: %lld bytes",
             (long long)(fz_live_bytes(ctx) - live0));
  return 0;
}
