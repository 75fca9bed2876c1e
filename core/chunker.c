/* chunker.c - the prefill chunker of SPEC 5: the greedy workspace and logits budgets, query
 * sub-chunks for a request that alone exceeds the logits budget, and the min_split_seq_len
 * clamp of the sparse path. ixl_chunk_plan is the public entry; the builder (builder.c) runs
 * the same greedy walk through ixl_chunk_greedy (chunker.h) so that both always agree. The
 * config rules come from config.c; nothing here calls the builder. */
#include "ctx.h"
#include "tensor_check.h"
#include "chunker.h"

#include <string.h>


/* Request i's seq_len in positions: given directly, or (context + query tokens) / ratio. */
static int64_t seq_of(const ixl_builder_info *info, const int64_t *seq_lens,
                      const int64_t *context_lens, const int64_t *query_lens, int32_t i) {
  if (seq_lens) return seq_lens[i];
  return (context_lens[i] + query_lens[i]) / info->config.compress_ratio;
}

/* The width a request is budgeted at: its seq_len, clamped up to min_split_seq_len for the
 * sparse path (the clamped value counts against both budgets, as in production). */
static int64_t budget_seq(const ixl_builder_info *info, int64_t seq, int sparse) {
  return sparse && seq < info->min_split_seq_len ? info->min_split_seq_len : seq;
}

/* rows * seq <= max_logits_bytes / 4, i.e. the fp32 [rows, seq] logits fit the budget
 * (equivalent to rows * seq * 4 <= max_logits_bytes for integers); overflow never fits. */
static int logits_fit(const ixl_builder_info *info, int64_t rows, int64_t seq) {
  int64_t elems;
  if (!ixl_mul_ok(rows, seq, &elems)) return 0;
  return elems <= info->config.max_logits_bytes / 4;
}

static int64_t bytes_of(int64_t rows, int64_t seq) {
  int64_t e, b;
  if (!ixl_mul_ok(rows, seq, &e) || !ixl_mul_ok(e, 4, &b)) return INT64_MAX;
  return b;
}

/* The greedy walk. Lengths must already be validated (seq >= 0, query >= 1, sums of rows
 * within int32). Returns -1 when the plan exists, else the index of the first request whose
 * budgeted seq_len alone exceeds workspace_tokens (nothing after it is emitted). */
int32_t ixl_chunk_greedy(const ixl_builder_info *info, int32_t n, const int64_t *seq_lens,
                         const int64_t *context_lens, const int64_t *query_lens, int sparse,
                         ixl_chunk_emit_fn emit, void *arg, int64_t *n_chunks) {
  const int64_t W = info->config.workspace_tokens;
  int64_t count = 0;
  int32_t i = 0;
  while (i < n) {
    int32_t start = i;
    int64_t rows = 0, seq = 0;
    /* Add requests while both budgets hold with the request included. */
    while (i < n) {
      int64_t q = query_lens[i];
      int64_t s = budget_seq(info, seq_of(info, seq_lens, context_lens, query_lens, i), sparse);
      int64_t nrows, nseq;
      if (!ixl_add_ok(rows, q, &nrows) || !ixl_add_ok(seq, s, &nseq)) break;
      if (nseq > W || !logits_fit(info, nrows, nseq)) break;
      rows = nrows;
      seq = nseq;
      i++;
    }
    if (i > start) {
      if (emit) {
        ixl_chunk c;
        memset(&c, 0, sizeof c);
        c.request_start = start;
        c.request_end = i;
        c.query_start = 0;
        c.query_end = query_lens[start];
        c.rows = rows;
        c.seq_tokens = seq;
        c.logits_bytes = bytes_of(rows, seq);
        c.is_sub_chunk = 0;
        emit(arg, &c);
      }
      count++;
      continue;
    }
    /* Request i alone breaks a budget: the workspace is an error, the logits a split. */
    int64_t q = query_lens[i];
    int64_t s = budget_seq(info, seq_of(info, seq_lens, context_lens, query_lens, i), sparse);
    if (s > W) {
      *n_chunks = count;
      return i;
    }
    /* s > 0 here: a request of width 0 always fits the logits budget. */
    int64_t per = info->config.max_logits_bytes / 4 / s;
    if (per < 1) per = 1;
    for (int64_t qs = 0; qs < q; qs += per) {
      int64_t qe = q - qs > per ? qs + per : q;
      if (emit) {
        ixl_chunk c;
        memset(&c, 0, sizeof c);
        c.request_start = i;
        c.request_end = i + 1;
        c.query_start = qs;
        c.query_end = qe;
        c.rows = qe - qs;
        c.seq_tokens = s;
        c.logits_bytes = bytes_of(qe - qs, s);
        c.is_sub_chunk = 1;
        emit(arg, &c);
      }
      count++;
    }
    i++;
  }
  *n_chunks = count;
  return -1;
}

typedef struct plan_out {
  ixl_chunk *out;
  int64_t max, next;
} plan_out;

static void plan_emit(void *arg, const ixl_chunk *c) {
  plan_out *p = arg;
  if (p->out && p->next < p->max) p->out[p->next] = *c;
  p->next++;
}

ixl_status ixl_chunk_plan(ixl_ctx *ctx, const ixl_builder_info *info, int32_t n_requests,
                          const int64_t *seq_lens, const int64_t *query_lens, int sparse,
                          ixl_chunk *out, int32_t max_chunks, int32_t *n_chunks) {
  if (!info || !n_chunks)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "chunk_plan: info and n_chunks must not be NULL");
  *n_chunks = 0;
  if (n_requests < 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "n_requests = %d: must be >= 0", n_requests);
  if (n_requests > 0 && (!seq_lens || !query_lens))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "chunk_plan: seq_lens and query_lens must not be NULL for %d requests",
                         n_requests);
  if (max_chunks < 0 || (max_chunks > 0 && !out))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "max_chunks = %d: must be >= 0, with out non-NULL when > 0", max_chunks);
  if (sparse != 0 && sparse != 1)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "sparse = %d: must be 0 or 1", sparse);
  /* The derived values are recomputed from the config, so a hand-edited info cannot make the
   * chunker disagree with the builder. */
  ixl_builder_info fresh;
  ixl_status st = ixl_config_validate(ctx, &info->config, &fresh);
  if (st) return st;
  const int64_t ratio = fresh.config.compress_ratio;
  int64_t total_rows = 0;
  for (int32_t i = 0; i < n_requests; i++) {
    if (query_lens[i] < 1)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "request %d: query_len = %lld: must be >= 1 (a prefill request has "
                           "at least one row)",
                           i, (long long)query_lens[i]);
    if (seq_lens[i] < 0)
      return ixl_set_error(ctx, IXL_ERR_BATCH, "request %d: seq_len = %lld: must be >= 0", i,
                           (long long)seq_lens[i]);
    /* Every query row is one of the request's tokens, so its positions cover them. */
    if (seq_lens[i] < query_lens[i] / ratio)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "request %d: seq_len = %lld positions is less than query_len (%lld) / "
                           "compress_ratio (%lld) = %lld: the query rows are part of the sequence",
                           i, (long long)seq_lens[i], (long long)query_lens[i], (long long)ratio,
                           (long long)(query_lens[i] / ratio));
    if (!ixl_add_ok(total_rows, query_lens[i], &total_rows) || total_rows > INT32_MAX)
      return ixl_set_error(ctx, IXL_ERR_BATCH,
                           "request %d: the sum of query_len passes %d rows (rows are numbered "
                           "with int32)",
                           i, INT32_MAX);
  }
  plan_out p = {out, max_chunks, 0};
  int64_t count = 0;
  int32_t bad = ixl_chunk_greedy(&fresh, n_requests, seq_lens, NULL, query_lens, sparse,
                                 plan_emit, &p, &count);
  if (bad >= 0)
    /* Not the clamp: the config guarantees workspace_tokens >= min_split_seq_len. */
    return ixl_set_error(ctx, IXL_ERR_BATCH,
                         "request %d: seq_len = %lld exceeds workspace_tokens = %lld (one "
                         "request's keys must fit the workspace)",
                         bad, (long long)seq_lens[bad], (long long)fresh.config.workspace_tokens);
  /* count <= total_rows <= INT32_MAX: every chunk has at least one row. */
  *n_chunks = (int32_t)count;
  if (count > max_chunks)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "max_chunks = %d: the plan has %lld chunks (only the first %d written)",
                         max_chunks, (long long)count, max_chunks);
  return IXL_OK;
}
