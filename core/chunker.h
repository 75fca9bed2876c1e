/* chunker.h - the prefill chunker's greedy walk (core/chunker.c), private to core/. The public
 * ixl_chunk_plan and the builder (core/builder.c) both run it, so a step's chunks and the plan
 * always agree. It reads a validated ixl_builder_info only: it depends on config.c (through
 * ixl_config_validate, in ixl_chunk_plan) and on nothing in the builder. */
#ifndef IXL_CHUNKER_H
#define IXL_CHUNKER_H

#include "idxlab.h"

/* Lengths must already be validated (seq >= 0, query >= 1, sums of rows within int32).
 * Returns -1, or the index of the first request whose budgeted seq_len alone exceeds
 * workspace_tokens (nothing after it is emitted). seq(i) = seq_lens ? seq_lens[i] :
 * (context_lens[i] + query_lens[i]) / ratio. emit(arg, chunk), when emit is non-NULL, is called
 * once per chunk in order; *n_chunks gets their count. */
typedef void (*ixl_chunk_emit_fn)(void *arg, const ixl_chunk *chunk);
int32_t ixl_chunk_greedy(const ixl_builder_info *info, int32_t n, const int64_t *seq_lens,
                         const int64_t *context_lens, const int64_t *query_lens, int sparse,
                         ixl_chunk_emit_fn emit, void *arg, int64_t *n_chunks);

#endif
