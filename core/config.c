/* config.c - the SPEC 4 config: its defaults, the engine-start checks of ixl_config_validate
 * (every rule, with a message naming the fields the user can change, their values and the
 * rule) and the sparse_block_kv rule. It depends on nothing but the runtime, so the builder and
 * the chunker both build on it without needing each other. */
#include "ctx.h"
#include "tensor_check.h"

#include <stdio.h>
#include <string.h>


/* Scratch larger than this is refused as absurd before anything is allocated. */
#define IXL_SCRATCH_LIMIT ((int64_t)1 << 40)
#define IXL_MAX_PAGE_SIZE ((int64_t)1 << 20)

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
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "valid_sparse_block_kv: cfg and n must not be NULL");
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
