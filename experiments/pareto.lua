-- pareto: which (candidate_block_size, candidate_topk_blocks) pairs are worth their time --
-- for each step time, what is the best recall@k any pair reaches?
--
-- Every pair is one point of a pareto plot: recall_at_k (the share of the dense top-k that
-- the sparse top-k keeps) against time_step_us. The non-dominated pairs (none faster with at
-- least the same recall) are joined and labelled; a pair off that line costs time for nothing.
-- Larger budgets (T x cbs) buy recall with sparse-logits time; at one budget, smaller blocks
-- follow the scores more closely and larger blocks read longer runs. The plot's title names
-- the backend the times came from: on the CPU they are the reference path's, whose costs are
-- not the GPU kernels' (the README's figure is a GPU run).
--
-- CPU default: 8 decode rows at 32768 positions, 2 consumer layers, 12 pairs (budgets 512 to
-- 16384 positions per row), 3 repeats with the stages timed as the median of 3 runs after a
-- warm-up: about a minute on 2 cores. On a GPU, the production scale:
--   idxlab run experiments/pareto.lua --set workload.decode.rows=64 \
--     --set workload.decode.context=131072 --set index_topk=512 \
--     --set sweep.candidate_topk_blocks=128,256,512,1024,2048
return {
  name = "pareto",
  question = "Which candidate block sizes and block counts give the most recall@k for their "
    .. "step time?",
  seed = 1,
  backend = "auto",
  workload = { decode = { rows = 8, context = 32768 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 256, max_rows = 64, max_model_len = 131072 },
  sweep = { candidate_block_size = { 8, 16, 32, 64 }, candidate_topk_blocks = { 64, 128, 256 } },
  repeats = 3,
  timing = { warmup = 1, iters = 3 },
  metrics = { "recall_at_k", "mass_recall", "time_sparse_logits_us", "time_step_us" },
  plots = {
    { kind = "pareto", x = "time_step_us", y = "recall_at_k", name = "pareto_recall_vs_time",
      title = "recall@k against step time" },
  },
}
