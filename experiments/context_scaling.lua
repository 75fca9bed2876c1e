-- context_scaling: how do the dense and the sparse logits' times grow with the context, from
-- 4K positions up to 1M, and what does the whole step cost, sparse against masked dense?
--
-- The source layer scores every position densely (time_dense_logits_us grows linearly with
-- the context); a consumer layer scores only its candidate blocks (time_sparse_logits_us
-- stays flat at a fixed T * candidate_block_size), where the masked-dense path it replaces
-- (time_masked_dense_us: dense logits over the whole context, the candidate mask, top-k)
-- grows with the context too. The plot shows the step (time_step_us: the CUDA graph's replay
-- on a GPU), the source's dense logits, the consumers' sparse logits and their masked-dense
-- path against the context on log axes.
--
-- CPU default: 2 decode rows, 1 consumer layer, contexts 4K..64K, 3 repeats with the stages
-- timed as the median of 3 runs after a warm-up: under a minute on 2 cores.
-- The CPU stops at what fits; the full range on a GPU (the README's plot, docs/
-- context_scaling_gpu.png, from `bin/idxlab script bench/step.lua`, which runs this):
--   idxlab run experiments/context_scaling.lua --set workload.decode.rows=64 \
--     --set sweep.workload.decode.context=4096,16384,65536,262144,1048576
return {
  name = "context_scaling",
  question = "How do dense and sparse logits time scale with the context length?",
  seed = 1,
  backend = "auto",
  workload = { decode = { rows = 2, context = 4096 }, prefill = false, consumer_layers = 1 },
  config = { index_topk = 256, candidate_topk_blocks = 256, max_rows = 64 },
  repeats = 3,
  timing = { warmup = 1, iters = 3 },
  sweep = {
    ["workload.decode.context"] = { 4096, 8192, 16384, 32768, 65536 },
  },
  metrics = { "time_dense_logits_us", "time_candidate_select_us", "time_sparse_logits_us",
    "time_topk_us", "time_masked_dense_us", "speedup_sparse", "time_step_us",
    "time_step_eager_us", "recall_at_k" },
  plots = {
    { x = "workload.decode.context",
      y = { "time_step_us", "time_dense_logits_us", "time_sparse_logits_us",
        "time_masked_dense_us" },
      name = "time_vs_context", logx = true, logy = true,
      title = "the step, dense and sparse logits, masked dense against sparse" },
    { x = "workload.decode.context", y = "recall_at_k" },
  },
}
