/* builder.c - the metadata builder of SPEC 4: the config, its engine-start checks (every one
 * at creation, with a message naming the fields the user can change, their values and the
 * rule), the per-row scratch allocated once, and build(batch), which writes one step's row
 * metadata into that scratch and hands back views of it without allocating anything. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Scratch larger than this is refused as absurd before anything is allocated. */
#define IXL_SCRATCH_LIMIT ((int64_t)1 << 40)
#define IXL_MAX_PAGE_SIZE ((int64_t)1 << 20)

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

void ixl_config_defaults(ixl_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->heads = 32;
  cfg->head_dim = 128;
  cfg->index_topk = 512;
  cfg->candidate_block_size = 8;
  cfg->candidate_topk_blocks = 2048;
  cfg->sparse_block_kv = 0;
  cfg->page_size = 128;
  cfg->max_rows = 8192;
  cfg->max_model_len = 1048576;
  cfg->compress_ratio = 1;
  cfg->workspace_tokens = 0;
  cfg->max_logits_bytes = (int64_t)512 << 20;
  cfg->context_parallel = 1;
  cfg->kv_format = IXL_MXFP4;
  cfg->quantizer = IXL_Q_RNE;
  cfg->ks_mode = IXL_KS_UNALIGNED;
  cfg->block_score = IXL_SCORE_MAX;
  cfg->split_width = IXL_SPLIT_BF16;
}

/* A power of two in [4, 128] that divides cbs and page_size (SPEC 4, explicit sbk). */
static int sbk_ok(int64_t sbk, int64_t cbs, int64_t page_size) {
  if (sbk < 4 || sbk > 128 || (sbk & (sbk - 1)) != 0) return 0;
  if (cbs <= 0 || sbk > cbs || cbs % sbk != 0) return 0;
  return page_size > 0 && page_size % sbk == 0;
}

static int valid_sbk_list(const ixl_config *cfg, int32_t out[6]) {
  int n = 0;
  for (int64_t p = 4; p <= 128; p *= 2)
    if (sbk_ok(p, cfg->candidate_block_size, cfg->page_size)) out[n++] = (int32_t)p;
  return n;
}

/* "4, 8, 16" or "none". */
static void format_sbk_list(const ixl_config *cfg, char *buf, size_t len) {
  int32_t v[6];
  int n = valid_sbk_list(cfg, v);
  if (n == 0) {
    snprintf(buf, len, "none");
    return;
  }
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, i ? ", %d" : "%d", v[i]);
}

ixl_status ixl_valid_sparse_block_kv(ixl_ctx *ctx, const ixl_config *cfg, int32_t *out,
                                     int32_t max_out, int32_t *n) {
  if (!cfg || !n)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "valid_sparse_block_kv: cfg and n must not be NULL");
  if (max_out < 0 || (max_out > 0 && !out))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "max_out = %d: must be >= 0, with out non-NULL when > 0", max_out);
  int32_t v[6];
  int count = valid_sbk_list(cfg, v);
  for (int i = 0; i < count && i < max_out; i++) out[i] = v[i];
  *n = count;
  return IXL_OK;
}

#define LL(x) ((long long)(x))

ixl_status ixl_config_validate(ixl_ctx *ctx, const ixl_config *in, ixl_builder_info *info_out) {
  if (!in) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "config_validate: cfg is NULL");
  ixl_config c = *in;
  char list[64];

  if (c.candidate_block_size <= 0 || c.candidate_topk_blocks <= 0)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "candidate_block_size = %lld, candidate_topk_blocks = %lld: both must be "
                         "> 0 (the sparse path needs a two-level, candidate-block indexer)",
                         LL(c.candidate_block_size), LL(c.candidate_topk_blocks));
  if (c.context_parallel != 1)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "context_parallel = %lld: must be 1 (the sparse indexer path refuses "
                         "decode/prefill context parallelism, as in production)",
                         LL(c.context_parallel));
  if (c.kv_format < IXL_MXFP4 || c.kv_format > IXL_FP8)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "kv_format = %d: must be mxfp4 (0), mxfp8 (1) or fp8 (2)", c.kv_format);
  if (c.quantizer < IXL_Q_RNE || c.quantizer > IXL_Q_TIES_DOWN)
    return ixl_set_error(ctx, IXL_ERR_CONFIG, "quantizer = %d: must be rne (0) or ties_down (1)",
                         c.quantizer);
  if (c.ks_mode < IXL_KS_UNALIGNED || c.ks_mode > IXL_KS_ALIGNED)
    return ixl_set_error(ctx, IXL_ERR_CONFIG, "ks_mode = %d: must be unaligned (0) or aligned (1)",
                         c.ks_mode);
  if (c.block_score < IXL_SCORE_MAX || c.block_score > IXL_SCORE_LOGSUMEXP)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "block_score = %d: must be max (0), mean (1), sum (2) or logsumexp (3)",
                         c.block_score);
  if (c.split_width < IXL_SPLIT_BF16 || c.split_width > IXL_SPLIT_BF16_FP32)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "split_width = %d: must be bf16 (0) or bf16+fp32 (1)", c.split_width);
  if (c.heads < 4 || c.heads > 128 || c.heads % 4 != 0)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "heads = %lld: must be a multiple of 4 in [4, 128]", LL(c.heads));
  if (c.head_dim != 128)
    return ixl_set_error(ctx, IXL_ERR_CONFIG, "head_dim = %lld: must be 128", LL(c.head_dim));
  if (c.index_topk < 8 || c.index_topk > 4096 || c.index_topk % 8 != 0)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "index_topk = %lld: must be a multiple of 8 in [8, 4096] (the top-k "
                         "layout rule)",
                         LL(c.index_topk));
  if (c.page_size < 1 || c.page_size > IXL_MAX_PAGE_SIZE)
    return ixl_set_error(ctx, IXL_ERR_CONFIG, "page_size = %lld: must be in [1, %lld]",
                         LL(c.page_size), LL(IXL_MAX_PAGE_SIZE));

  /* sparse_block_kv: the production rule by default, else an explicit supported choice. */
  if (c.sparse_block_kv == 0) {
    int64_t pick = c.candidate_block_size % 16 == 0 ? 16 : c.candidate_block_size % 8 == 0 ? 8 : 0;
    if (pick == 0) {
      format_sbk_list(&c, list, sizeof list);
      return ixl_set_error(ctx, IXL_ERR_CONFIG,
                           "sparse_block_kv = auto: pick_sparse_block_kv(candidate_block_size = "
                           "%lld) needs 16 or 8 to divide candidate_block_size; set "
                           "sparse_block_kv explicitly (valid choices for this config: %s)",
                           LL(c.candidate_block_size), list);
    }
    if (c.page_size % pick != 0)
      return ixl_set_error(ctx, IXL_ERR_CONFIG,
                           "page_size = %lld: must be a multiple of sparse_block_kv = %lld (auto: "
                           "pick_sparse_block_kv(candidate_block_size = %lld))",
                           LL(c.page_size), LL(pick), LL(c.candidate_block_size));
    c.sparse_block_kv = pick;
  } else if (!sbk_ok(c.sparse_block_kv, c.candidate_block_size, c.page_size)) {
    format_sbk_list(&c, list, sizeof list);
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "sparse_block_kv = %lld: must be a power of two in [4, min("
                         "candidate_block_size, 128)] that divides candidate_block_size (%lld) and "
                         "page_size (%lld); valid choices for this config: %s",
                         LL(c.sparse_block_kv), LL(c.candidate_block_size), LL(c.page_size), list);
  }
  const int64_t sbk = c.sparse_block_kv;

  int64_t ncols;
  if (!ixl_mul_ok(c.candidate_topk_blocks, c.candidate_block_size, &ncols))
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "num_sparse_cols = candidate_topk_blocks (%lld) * candidate_block_size "
                         "(%lld) overflows int64: must be < 8388608 (2^23, the top-k layout rule)",
                         LL(c.candidate_topk_blocks), LL(c.candidate_block_size));
  if (ncols % 512 != 0)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "num_sparse_cols = candidate_topk_blocks (%lld) * candidate_block_size "
                         "(%lld) = %lld: must be a multiple of 512 (the top-k layout rule)",
                         LL(c.candidate_topk_blocks), LL(c.candidate_block_size), LL(ncols));
  if (ncols >= ((int64_t)1 << 23))
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "num_sparse_cols = candidate_topk_blocks (%lld) * candidate_block_size "
                         "(%lld) = %lld: must be < 8388608 (2^23, the top-k layout rule)",
                         LL(c.candidate_topk_blocks), LL(c.candidate_block_size), LL(ncols));
  const int64_t nsb = ncols / sbk; /* = T * (cbs / sbk), as sbk divides cbs */

  if (c.max_model_len < 1 || c.max_model_len > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "max_model_len = %lld: must be in [1, %d] (positions are int32)",
                         LL(c.max_model_len), INT32_MAX);
  if (c.compress_ratio < 1 || c.compress_ratio > c.max_model_len)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "compress_ratio = %lld: must be in [1, max_model_len (%lld)]",
                         LL(c.compress_ratio), LL(c.max_model_len));
  if (c.max_rows < 1 || c.max_rows > INT32_MAX)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "max_rows = %lld: must be in [1, %d] (rows are numbered with int32)",
                         LL(c.max_rows), INT32_MAX);
  const bool workspace_auto = c.workspace_tokens == 0;
  if (workspace_auto) {
    /* Cannot overflow: max_model_len < 2^31. */
    int64_t w = 40 * c.max_model_len / c.compress_ratio;
    if (w > INT32_MAX)
      return ixl_set_error(ctx, IXL_ERR_CONFIG,
                           "workspace_tokens = auto = 40 * max_model_len (%lld) / compress_ratio "
                           "(%lld) = %lld: must be <= %d (workspace positions are int32); set "
                           "workspace_tokens explicitly",
                           LL(c.max_model_len), LL(c.compress_ratio), LL(w), INT32_MAX);
    c.workspace_tokens = w;
  } else if (c.workspace_tokens < 1 || c.workspace_tokens > INT32_MAX) {
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "workspace_tokens = %lld: must be in [1, %d] (or auto), in positions",
                         LL(c.workspace_tokens), INT32_MAX);
  }
  if (c.max_logits_bytes < 4)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "max_logits_bytes = %lld: must be >= 4 (one fp32 logit)",
                         LL(c.max_logits_bytes));

  /* Sparse rows are budgeted as if num_sparse_cols * B bytes wide (B = 2, or 2 + 4 with the
   * fp32 copy), expressed as fp32 positions. Exact: ncols is a multiple of 512. */
  const int64_t B = c.split_width == IXL_SPLIT_BF16 ? 2 : 6;
  const int64_t min_split = ixl_ceil_div(ncols * B, 4);
  if (c.workspace_tokens < min_split) {
    /* an auto value names the fields it derives from, and what to change */
    char from[128] = "";
    if (workspace_auto)
      snprintf(from, sizeof from, "auto = 40 * max_model_len (%lld) / compress_ratio (%lld) = ",
               LL(c.max_model_len), LL(c.compress_ratio));
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "workspace_tokens = %s%lld: must be >= min_split_seq_len = "
                         "ceil(candidate_topk_blocks (%lld) * candidate_block_size (%lld) * %lld "
                         "/ 4) = %lld (split_width %s), the least every sparse prefill request is "
                         "budgeted at%s",
                         from, LL(c.workspace_tokens), LL(c.candidate_topk_blocks),
                         LL(c.candidate_block_size), LL(B), LL(min_split),
                         c.split_width == IXL_SPLIT_BF16 ? "bf16" : "bf16+fp32",
                         workspace_auto ? "; raise max_model_len or set workspace_tokens explicitly"
                                        : "");
  }

  /* Scratch: 4-byte entries, max_rows * (num_sparse_blocks + index_topk + 5) of them (sparse
   * ids, col indices, then end, zero row starts, row_ks, row_ke and row_indices). Every
   * product is checked before it is used, so the byte counts below cannot overflow. */
  int64_t per_row, entries, total;
  if (!ixl_add_ok(nsb, c.index_topk + 5, &per_row) || !ixl_mul_ok(per_row, c.max_rows, &entries) ||
      !ixl_mul_ok(entries, 4, &total) || total > IXL_SCRATCH_LIMIT)
    return ixl_set_error(ctx, IXL_ERR_CONFIG,
                         "scratch = max_rows (%lld) * (num_sparse_blocks (%lld, from "
                         "candidate_topk_blocks %lld * candidate_block_size %lld / sparse_block_kv "
                         "%lld) + index_topk (%lld) + 5) * 4 bytes: more than 2^40 bytes; lower "
                         "max_rows or candidate_topk_blocks",
                         LL(c.max_rows), LL(nsb), LL(c.candidate_topk_blocks),
                         LL(c.candidate_block_size), LL(sbk), LL(c.index_topk));

  if (info_out) {
    ixl_builder_info info;
    memset(&info, 0, sizeof info);
    info.config = c;
    info.num_sparse_blocks = nsb;
    info.num_sparse_cols = ncols;
    info.min_split_seq_len = min_split;
    info.sparse_ids_bytes = c.max_rows * nsb * 4;
    info.end_bytes = c.max_rows * 4;
    info.col_indices_bytes = c.max_rows * c.index_topk * 4;
    info.zero_row_starts_bytes = c.max_rows * 4;
    info.row_ks_bytes = c.max_rows * 4;
    info.row_ke_bytes = c.max_rows * 4;
    /* Everything the builder allocates on the context's device kind: the fields above plus
     * the row -> request index buffer (max_rows * 4). */
    info.scratch_bytes = info.sparse_ids_bytes + info.end_bytes + info.col_indices_bytes +
                         info.zero_row_starts_bytes + info.row_ks_bytes + info.row_ke_bytes +
                         c.max_rows * 4;
    *info_out = info;
  }
  return IXL_OK;
}

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
    return ixl_set_error(ctx, IXL_ERR_BATCH, "%s: shape[0] = %lld, expected one row per request (%lld)",
                         name, LL(t->shape[0]), LL(rows));
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
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "builder_build: batch and step must not be NULL");
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
    if (L < 1)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "%s: context_len = %lld: must be >= 1 (the new token included)", who,
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
