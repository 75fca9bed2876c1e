-- sparse_block_kv: for each candidate block size, which sparse block size (the unit the
-- sparse kernel reads) is fastest, and is every choice exact?
--
-- Every valid sparse_block_kv (sparse_block_kv = "all": powers of two from 4 up to the block
-- size that divide it and page_size) for candidate_block_size 8..64, at a fixed budget of
-- 4096 candidate positions per row (the two lists are zipped). logit_mismatches must be 0 and
-- selection_agreement 1 for every choice (the sparse logits are bitwise those of the dense
-- bf16 path); the times show the cost of smaller reads.
--
-- CPU default: 4 decode rows at 16384 positions, 1 consumer layer, 14 points, 2 repeats with
-- the stages timed as the median of 3 runs after a warm-up: a minute or two on 2 cores.
-- On a GPU: --set workload.decode.rows=64 --set workload.decode.context=131072.
return {
  name = "sparse_block_kv",
  question = "For each candidate block size, how do time and exactness depend on the sparse "
    .. "block size?",
  seed = 1,
  backend = "auto",
  workload = { decode = { rows = 4, context = 16384 }, prefill = false, consumer_layers = 1 },
  config = { index_topk = 256, max_rows = 64, max_model_len = 131072 },
  sweep = {
    candidate_block_size = { 8, 16, 32, 64 },
    candidate_topk_blocks = { 512, 256, 128, 64 },
    sparse_block_kv = "all",
  },
  zip = { { "candidate_block_size", "candidate_topk_blocks" } },
  repeats = 2,
  timing = { warmup = 1, iters = 3 },
  metrics = { "logit_mismatches", "selection_agreement", "recall_at_k", "time_expand_us",
    "time_sparse_logits_us", "time_topk_us", "time_step_us" },
  plots = {
    { x = "sparse_block_kv", y = "time_sparse_logits_us", series = "candidate_block_size" },
    { x = "sparse_block_kv", y = "logit_mismatches", series = "candidate_block_size" },
  },
}
