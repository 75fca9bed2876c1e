-- chunk_budget: how many prefill chunks, how many rows per chunk and how many bytes of dense
-- logits does a mixed prefill batch need, against the logits budget (max_logits_bytes) and the
-- sparse split width (split_width)?
--
-- Budget-only (mode = "chunks"): the chunker of SPEC 5 plans the batch; no kernel runs. With
-- the V4.1-Flash config (16384 candidate positions per row), every sparse row is budgeted as at
-- least min_split_seq_len positions wide: 8192 for split_width bf16, 24576 for bf16+fp32, so
-- bf16+fp32 needs more, smaller chunks for the short requests. dense_* columns are the same
-- batch planned for the dense path (no clamp). Runs in a second anywhere.
local MiB = 1024 * 1024
return {
  name = "chunk_budget",
  question = "How do chunks, rows per chunk and peak logits bytes follow the logits budget and "
    .. "the split width on a mixed prefill batch?",
  seed = 1,
  backend = "cpu",
  mode = "chunks",
  workload = {
    prefill = {
      { query_len = 8192, context_len = 0 },        -- a fresh long prompt
      { query_len = 2048, context_len = 129024 },   -- a continuation at 128K
      { query_len = 512, context_len = 32256 },
      { query_len = 64, context_len = 524224 },     -- a short turn on a 512K context
      { query_len = 4096, context_len = 61440 },
      { query_len = 16, context_len = 1008 },       -- short requests: the min_split_seq_len clamp
      { query_len = 32, context_len = 2016 },
      { query_len = 128, context_len = 3968 },
    },
  },
  config = {},
  sweep = {
    max_logits_bytes = { 64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB, 1024 * MiB, 2048 * MiB },
    split_width = { "bf16", "bf16+fp32" },
  },
  metrics = { "num_chunks", "max_rows_per_chunk", "mean_rows_per_chunk", "peak_logits_bytes",
    "sub_chunks", "min_split_seq_len", "dense_num_chunks", "dense_peak_logits_bytes" },
  plots = {
    { x = "max_logits_bytes", y = "num_chunks", series = "split_width" },
    { x = "max_logits_bytes", y = "max_rows_per_chunk", series = "split_width" },
    { x = "max_logits_bytes", y = "peak_logits_bytes", series = "split_width" },
  },
}
