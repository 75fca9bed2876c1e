-- candidate_topk_blocks: how much of the dense top-k does the two-level path keep as the
-- number of candidate blocks T grows, and how much does that depend on the attention pattern
-- being local?
--
-- recall_at_k (the share of the unrestricted dense top-k that the sparse top-k keeps) rises
-- with T: on the default synthetic workload (workload.locality = 10) by well over 0.05 from the
-- smallest to the largest T. The locality knob is how much a query likes the keys near its
-- own position: lowering it (32 -> 8, the default -> 0) spreads what the queries want over the
-- whole context, so the same T keeps less -- recall falls with locality at the small T values
-- (at the large ones every T keeps nearly everything).
--
-- CPU default: 8 decode rows at 16384 positions, 2 consumer layers, T x cbs from 512 to 8192
-- positions, 15 points: about a minute on 2 cores. On a GPU, the production scale:
--   idxlab run experiments/candidate_topk_blocks.lua --set workload.decode.rows=64 \
--     --set workload.decode.context=131072 --set index_topk=512 \
--     --set sweep.candidate_topk_blocks=256,512,1024,2048,4096
return {
  name = "candidate_topk_blocks",
  question = "How does recall@k grow with the number of candidate blocks T, and how does it fall "
    .. "as the workload gets less local?",
  seed = 1,
  backend = "auto",
  workload = { decode = { rows = 8, context = 16384 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 256, max_rows = 64, max_model_len = 131072 },
  sweep = {
    candidate_topk_blocks = { 64, 128, 256, 512, 1024 },
    ["workload.locality"] = { 0, 8, 32 },
  },
  timing = { warmup = 1, iters = 2 },
  metrics = { "recall_at_k", "mass_recall", "candidate_coverage", "active_rows",
    "time_sparse_logits_us", "time_step_us" },
  plots = {
    { x = "candidate_topk_blocks", y = "recall_at_k", series = "workload.locality" },
    { x = "candidate_topk_blocks", y = "mass_recall", series = "workload.locality" },
  },
}
