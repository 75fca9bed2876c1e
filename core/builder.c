/* builder.c - the metadata builder of SPEC 4: creation (the config checked by config.c), the
 * per-row scratch allocated once, and build(batch), which writes one step's row metadata into
 * that scratch and hands back views of it without allocating anything. It chunks prefill with
 * the chunker's greedy walk (chunker.h), so a step and ixl_chunk_plan always agree. */
#include "ctx.h"
#include "tensor_check.h"
#include "chunker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct ixl_builder {
  ixl_ctx *ctx;                /* retained: the builder may outlive the user's handle */
  ixl_builder_info info;
  ixl_device_kind device;      /* where every scratch tensor lives */
  ixl_tensor *sparse_ids;      /* I32 [max_rows, num_sparse_blocks] */
  ixl_tensor *end;             /* I32 [max_rows] */
  ixl_tensor *col_indices;     /* I32 [max_rows, index_topk] */
  ixl_tensor *zero_row_starts; /* I32 [max_rows], zeros forever: decode rows' row_ks */
  /* I32 [3 * max_rows]. For a step of n rows: row_ks at [0, n), row_ke at [n, 2n) and
   * row_indices at [2n, 3n), packed so a device builder uploads them in one copy. */
  ixl_tensor *row_meta;
  ixl_tensor *staging;         /* host twin of row_meta for device builders; NULL on the CPU */
  ixl_rows *chunks;            /* max_rows entries: a chunk holds at least one row */
  int64_t chunks_bytes;
};

#define LL(x) ((long long)(x))

/* ---------------------------------------------------------------- lifecycle */

void ixl_builder_free(ixl_builder *b) {
  if (!b) return;
  ixl_tensor_free(b->sparse_ids);
  ixl_tensor_free(b->end);
  ixl_tensor_free(b->col_indices);
  ixl_tensor_free(b->zero_row_starts);
  ixl_tensor_free(b->row_meta);
  ixl_tensor_free(b->staging);
  ixl_host_free(b->ctx, b->chunks, b->chunks_bytes);
  ixl_ctx_release(b->ctx);
  free(b);
}

static ixl_status new_i32(ixl_ctx *ctx, int ndim, int64_t d0, int64_t d1, ixl_device_kind dev,
                          ixl_tensor **out) {
  int64_t shape[2] = {d0, d1};
  ixl_status st = ixl_tensor_new(ctx, IXL_I32, ndim, shape, dev, out);
  if (st) return st;
  return ixl_tensor_fill_bytes(ctx, *out, 0);
}

ixl_status ixl_builder_new(ixl_ctx *ctx, const ixl_config *cfg, ixl_builder **out) {
  if (!out) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "builder_new: out is NULL");
  *out = NULL;
  if (!ctx) return IXL_ERR_INVALID_ARG;
  ixl_builder_info info;
  ixl_status st = ixl_config_validate(ctx, cfg, &info);
  if (st) return st;
  ixl_builder *b = calloc(1, sizeof *b);
  if (!b) return ixl_set_error(ctx, IXL_ERR_OOM, "out of host memory for a builder");
  b->ctx = ctx;
  ixl_ctx_retain(ctx);
  b->info = info;
  b->device = ixl_ctx_device_kind(ctx);
  const int64_t R = info.config.max_rows;
  if ((st = new_i32(ctx, 2, R, info.num_sparse_blocks, b->device, &b->sparse_ids)) ||
      (st = new_i32(ctx, 1, R, 0, b->device, &b->end)) ||
      (st = new_i32(ctx, 2, R, info.config.index_topk, b->device, &b->col_indices)) ||
      (st = new_i32(ctx, 1, R, 0, b->device, &b->zero_row_starts)) ||
      (st = new_i32(ctx, 1, 3 * R, 0, b->device, &b->row_meta)) ||
      (b->device == IXL_DEVICE && (st = new_i32(ctx, 1, 3 * R, 0, IXL_HOST, &b->staging)))) {
    ixl_builder_free(b);
    return st;
  }
  /* R < 2^31 and sizeof(ixl_rows) is small: no overflow. */
  b->chunks_bytes = R * (int64_t)sizeof(ixl_rows);
  if ((st = ixl_host_alloc(ctx, b->chunks_bytes, (void **)&b->chunks))) {
    b->chunks_bytes = 0;
    ixl_builder_free(b);
    return st;
  }
  *out = b;
  return IXL_OK;
}

void ixl_builder_get_info(const ixl_builder *b, ixl_builder_info *info) {
  if (!b || !info) return;
  *info = b->info;
}

/* ---------------------------------------------------------------- build */

/* Checks a caller's block table: I32 [rows, max_pages], contiguous, in the scratch's memory. */
static ixl_status check_table(ixl_builder *b, const ixl_tensor *t, const char *name, int64_t rows) {
  ixl_ctx *ctx = b->ctx;
  ixl_status st = ixl_check_tensor(ctx, t, name, IXL_I32, 2);
  if (st) return st;
  if (t->shape[0] != rows)
    return ixl_set_error(ctx, IXL_ERR_BATCH,
                         "%s: shape[0] = %lld, expected one row per request (%lld)", name,
                         LL(t->shape[0]), LL(rows));
  if ((int)t->device != (int)b->device)
    return ixl_set_error(ctx, IXL_ERR_BACKEND,
                         "%s is in %s memory but the builder's scratch is in %s memory", name,
                         t->device == IXL_DEVICE ? "device" : "host",
                         b->device == IXL_DEVICE ? "device" : "host");
  return IXL_OK;
}

/* A request of `positions` keys needs ceil(positions / page_size) pages of its table row; on
 * host tables each of them must be a page id (>= 0). Device tables are checked for size only:
 * reading them back would need a per-step copy. */
static ixl_status check_pages(ixl_builder *b, const ixl_tensor *t, const char *table, int64_t row,
                              const char *who, int64_t positions) {
  if (!t) return IXL_OK;
  int64_t need = ixl_ceil_div(positions, b->info.config.page_size);
  if (need > t->shape[1])
    return ixl_set_error(b->ctx, IXL_ERR_BATCH,
                         "%s: %lld positions need %lld pages of page_size = %lld, but %s has %lld "
                         "columns (max_pages)",
                         who, LL(positions), LL(need), LL(b->info.config.page_size), table,
                         LL(t->shape[1]));
  if (t->device == IXL_HOST && need > 0) {
    const int32_t *p = (const int32_t *)t->data + row * t->shape[1];
    for (int64_t j = 0; j < need; j++)
      if (p[j] < 0)
        return ixl_set_error(b->ctx, IXL_ERR_BATCH,
                             "%s: page %lld of its %lld is missing (%s[%lld][%lld] = %d)", who,
                             LL(j), LL(need), table, LL(row), LL(j), p[j]);
  }
  return IXL_OK;
}

/* Everything the chunk callback needs to write rows. */
typedef struct fill_state {
  ixl_builder *b;
  const ixl_batch *batch;
  int32_t *meta;       /* host row_meta (or its staging twin) */
  int64_t n_rows;      /* packing stride of meta */
  int64_t cursor;      /* next step row */
  int32_t n_chunks;
  int failed;          /* a view could not be made: an internal invariant broke */
} fill_state;

static void make_view(fill_state *s, const ixl_tensor *base, int ndim, int64_t rows, int64_t cols,
                      int64_t offset, ixl_tensor *view) {
  int64_t shape[2] = {rows, cols};
  if (ixl_tensor_view(s->b->ctx, base, ndim, shape, NULL, offset, view) != IXL_OK) s->failed = 1;
}

/* Views of rows [start, start + rows) of every scratch buffer into r. */
static void fill_views(fill_state *s, ixl_rows *r, int64_t start, int64_t rows) {
  ixl_builder *b = s->b;
  make_view(s, b->row_meta, 1, rows, 0, start, &r->row_ks);
  make_view(s, b->row_meta, 1, rows, 0, s->n_rows + start, &r->row_ke);
  make_view(s, b->row_meta, 1, rows, 0, 2 * s->n_rows + start, &r->row_indices);
  make_view(s, b->sparse_ids, 2, rows, b->info.num_sparse_blocks, start * b->info.num_sparse_blocks,
            &r->sparse_ids);
  make_view(s, b->end, 1, rows, 0, start, &r->end);
  make_view(s, b->col_indices, 2, rows, b->info.config.index_topk,
            start * b->info.config.index_topk, &r->col_indices);
  /* No block table: an empty [rows, 0] tensor on the scratch's memory. */
  memset(&r->block_table, 0, sizeof r->block_table);
  r->block_table.ndim = 2;
  r->block_table.shape[0] = rows;
  r->block_table.shape[1] = 0;
  r->block_table.stride[0] = 0;
  r->block_table.stride[1] = 1;
  r->block_table.shape[2] = r->block_table.shape[3] = 1;
  r->block_table.dtype = IXL_I32;
  r->block_table.device = b->device;
  r->block_table.ctx = b->ctx;
}

static void emit_chunk(void *arg, const ixl_chunk *c) {
  fill_state *s = arg;
  ixl_builder *b = s->b;
  const ixl_batch *bt = s->batch;
  const int64_t ratio = b->info.config.compress_ratio;
  const int32_t nd = bt->n_decode;
  int32_t *ks = s->meta, *ke = s->meta + s->n_rows, *ri = s->meta + 2 * s->n_rows;
  int64_t row = s->cursor, ws = 0;
  for (int32_t p = c->request_start; p < c->request_end; p++) {
    int64_t ctxl = bt->prefill_context_lens[p], q = bt->prefill_query_lens[p];
    int64_t q0 = c->is_sub_chunk ? c->query_start : 0, q1 = c->is_sub_chunk ? c->query_end : q;
    for (int64_t i = q0; i < q1; i++, row++) {
      ks[row] = (int32_t)ws;
      ke[row] = (int32_t)(ws + (ctxl + i + 1) / ratio);
      ri[row] = nd + p;
    }
    ws += (ctxl + q) / ratio; /* the request's real keys; the clamp is for budgets only */
  }
  ixl_rows *r = &b->chunks[s->n_chunks++];
  fill_views(s, r, s->cursor, row - s->cursor);
  r->token_start = s->cursor;
  r->token_end = row;
  r->request_start = nd + c->request_start;
  r->request_end = nd + c->request_end;
  r->query_start = c->query_start;
  r->query_end = c->query_end;
  r->workspace_tokens = ws;
  r->logits_bytes = c->logits_bytes;
  r->is_decode = 0;
  s->cursor = row;
}

ixl_status ixl_builder_build(ixl_builder *b, const ixl_batch *batch, int sparse, ixl_step *step) {
  if (!b) return IXL_ERR_INVALID_ARG;
  ixl_ctx *ctx = b->ctx;
  if (!batch || !step)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "builder_build: batch and step must not be NULL");
  if (sparse != 0 && sparse != 1)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "sparse = %d: must be 0 or 1", sparse);
  const ixl_config *c = &b->info.config;
  const int32_t nd = batch->n_decode, np = batch->n_prefill;
  if (nd < 0 || np < 0)
    return ixl_set_error(ctx, IXL_ERR_BATCH, "n_decode = %d, n_prefill = %d: both must be >= 0",
                         nd, np);
  if (nd > 0 && !batch->decode_context_lens)
    return ixl_set_error(ctx, IXL_ERR_BATCH, "decode_context_lens is NULL with n_decode = %d", nd);
  if (np > 0 && (!batch->prefill_query_lens || !batch->prefill_context_lens))
    return ixl_set_error(ctx, IXL_ERR_BATCH,
                         "prefill_query_lens and prefill_context_lens must be given with "
                         "n_prefill = %d",
                         np);
  ixl_status st;
  if (batch->decode_block_table &&
      (st = check_table(b, batch->decode_block_table, "decode_block_table", nd)))
    return st;
  if (batch->prefill_block_table &&
      (st = check_table(b, batch->prefill_block_table, "prefill_block_table", np)))
    return st;

  /* Validate every request before writing anything. */
  char who[96];
  int64_t rows = 0;
  for (int32_t d = 0; d < nd; d++) {
    int64_t L = batch->decode_context_lens[d];
    snprintf(who, sizeof who, "decode request %d", d);
    /* 0 tokens is an empty row (K3 keeps no block, K4 gives end 0, K6 all -1), as 1 to
     * compress_ratio - 1 tokens already are (their compressed length is 0): a request whose
     * indexer cache is empty, or a padding row. Production never builds a decode request of 0
     * tokens (its seq_len counts the new token); idxlab accepts one so that a dump's empty rows
     * replay as they are. */
    if (L < 0)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "%s: context_len = %lld: must be >= 0 (0 is an empty row)", who,
                           LL(L));
    if (L > c->max_model_len)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "%s: context_len = %lld tokens: more than max_model_len = %lld", who,
                           LL(L), LL(c->max_model_len));
    if (++rows > c->max_rows)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "%s: the batch reaches %lld rows with it (decode rows first): more than "
                           "max_rows = %lld",
                           who, LL(rows), LL(c->max_rows));
    if ((st = check_pages(b, batch->decode_block_table, "decode_block_table", d, who,
                          L / c->compress_ratio)))
      return st;
  }
  for (int32_t p = 0; p < np; p++) {
    int64_t q = batch->prefill_query_lens[p], L = batch->prefill_context_lens[p];
    snprintf(who, sizeof who, "prefill request %d (step request %lld)", p, LL((int64_t)nd + p));
    if (q < 1)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "%s: query_len = %lld: must be >= 1 (a prefill request has at least "
                           "one row)",
                           who, LL(q));
    if (L < 0)
      return ixl_set_error(ctx, IXL_ERR_BATCH, "%s: context_len = %lld: must be >= 0", who, LL(L));
    if (q > c->max_model_len || L > c->max_model_len - q)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "%s: context_len (%lld) + query_len (%lld) tokens: more than "
                           "max_model_len = %lld",
                           who, LL(L), LL(q), LL(c->max_model_len));
    rows += q; /* no overflow: rows <= max_rows < 2^31 before, q < 2^31 */
    if (rows > c->max_rows)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "%s: the batch reaches %lld rows with its %lld query rows: more than "
                           "max_rows = %lld",
                           who, LL(rows), LL(q), LL(c->max_rows));
    if ((st = check_pages(b, batch->prefill_block_table, "prefill_block_table", p, who,
                          (L + q) / c->compress_ratio)))
      return st;
  }
  int64_t n_chunks = 0;
  int32_t bad = ixl_chunk_greedy(&b->info, np, NULL, batch->prefill_context_lens,
                                 batch->prefill_query_lens, sparse, NULL, NULL, &n_chunks);
  if (bad >= 0) {
    int64_t q = batch->prefill_query_lens[bad], L = batch->prefill_context_lens[bad];
    int64_t s = (L + q) / c->compress_ratio;
    snprintf(who, sizeof who, "prefill request %d (step request %lld)", bad, LL((int64_t)nd + bad));
    /* Never the clamp: the config guarantees workspace_tokens >= min_split_seq_len. */
    return ixl_set_error(ctx, IXL_ERR_BATCH,
                         "%s: seq_len = (context_len %lld + query_len %lld) / compress_ratio %lld "
                         "= %lld positions exceeds workspace_tokens = %lld",
                         who, LL(L), LL(q), LL(c->compress_ratio), LL(s), LL(c->workspace_tokens));
  }

  /* Write: rows and chunks into the scratch (or the host staging of a device builder). */
  fill_state s;
  memset(&s, 0, sizeof s);
  s.b = b;
  s.batch = batch;
  s.n_rows = rows;
  s.meta = (int32_t *)(b->staging ? b->staging->data : b->row_meta->data);
  s.cursor = nd;
  ixl_rows decode;
  memset(&decode, 0, sizeof decode);
  for (int32_t d = 0; d < nd; d++) {
    s.meta[d] = 0;
    s.meta[rows + d] = (int32_t)(batch->decode_context_lens[d] / c->compress_ratio);
    s.meta[2 * rows + d] = d;
  }
  if (nd > 0) {
    fill_views(&s, &decode, 0, nd);
    /* Decode rows read the shared zeros, as production's zero_row_ks[:rows]. */
    make_view(&s, b->zero_row_starts, 1, nd, 0, 0, &decode.row_ks);
    if (batch->decode_block_table)
      make_view(&s, batch->decode_block_table, 2, nd, batch->decode_block_table->shape[1], 0,
                &decode.block_table);
    decode.token_start = 0;
    decode.token_end = nd;
    decode.request_start = 0;
    decode.request_end = nd;
    decode.query_start = 0;
    decode.query_end = 1;
    decode.is_decode = 1;
  }
  int64_t counted = 0;
  ixl_chunk_greedy(&b->info, np, NULL, batch->prefill_context_lens, batch->prefill_query_lens,
                   sparse, emit_chunk, &s, &counted);
  if (s.failed || s.cursor != rows || counted != n_chunks)
    return ixl_set_error(ctx, IXL_ERR_INTERNAL,
                         "builder_build: the chunk walk wrote %lld of %lld rows (views %s)",
                         LL(s.cursor), LL(rows), s.failed ? "failed" : "ok");
  if (b->staging && rows > 0) {
    ixl_tensor src, dst;
    int64_t n3 = 3 * rows;
    if ((st = ixl_tensor_view(ctx, b->staging, 1, &n3, NULL, 0, &src)) ||
        (st = ixl_tensor_view(ctx, b->row_meta, 1, &n3, NULL, 0, &dst)) ||
        (st = ixl_tensor_copy(ctx, &dst, &src)))
      return st;
  }
  memset(step, 0, sizeof *step);
  step->n_rows = rows;
  step->n_decode_rows = nd;
  step->has_decode = nd > 0;
  step->decode = decode;
  step->n_chunks = (int32_t)n_chunks;
  step->chunks = b->chunks;
  return IXL_OK;
}
