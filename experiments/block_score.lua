-- block_score: which reduction of a candidate block's logits picks the best blocks: the
-- production max, or the ablations mean, sum and logsumexp?
--
-- max keeps a block for its single best position (what the top-k wants); mean and sum favour
-- blocks that are good throughout; logsumexp lies between. recall_at_k and mass_recall at two
-- candidate budgets show what each choice costs. (mean and sum select the same blocks: every
-- block but the newest is full, and the newest is always kept, so sum = mean * cbs ranks
-- alike.)
--
-- CPU default: 8 decode rows at 16384 positions, 2 consumer layers: under a minute on 2 cores.
-- On a GPU: --set workload.decode.rows=64 --set workload.decode.context=131072.
return {
  name = "block_score",
  question = "How do the candidate block score reductions (max, mean, sum, logsumexp) compare "
    .. "in recall?",
  seed = 1,
  backend = "auto",
  workload = { decode = { rows = 8, context = 16384 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 256, max_rows = 64, max_model_len = 131072 },
  sweep = {
    block_score = { "max", "mean", "sum", "logsumexp" },
    candidate_topk_blocks = { 64, 256 },
  },
  metrics = { "recall_at_k", "mass_recall", "candidate_coverage", "time_candidate_select_us",
    "time_step_us" },
  plots = {
    { x = "block_score", y = "recall_at_k", series = "candidate_topk_blocks" },
    { x = "block_score", y = "mass_recall", series = "candidate_topk_blocks" },
  },
}
