-- context_parallel: the sparse path under decode context parallelism, simulated on one device
-- (idxlab.cpsim, docs/context_parallel.md). Production engines refuse DCP/PCP for the sparse
-- indexer (idxlab's context_parallel > 1 stays refused); the research mode
-- context_parallel_sim stripes each row's keys over c ranks (position p on rank
-- floor(p / I) mod c) and runs the step as the ranks would.
--
-- The answer: `global` selection (an all-gather of per-block scores) keeps exactly the
-- single-rank candidates (block_score = max), so its recall_at_k equals c = 1's for every c and
-- interleave, at the price of cp_bytes_block_scores per step (cp_bytes_candidates: the exact
-- top-T alternative for max); `local` selection (each rank its own top-ceil(T/c) block parts,
-- no exchange before the consumers) loses recall as c grows, most where a rank's parts are
-- short (interleave 1: every block is split over the ranks). cp_bytes_topk is the top-k
-- merge's all-gather, paid by both; cp_work_imbalance the busiest rank's share.
--
-- CPU default: one decode row at 128K and at 1M positions, one consumer layer, production
-- T = 2048, cbs = 8, k = 512; c in {1, 2, 4, 8} x interleave in {1, cbs, page_size} x both
-- policies: 48 points, about three minutes on 2 cores. On a GPU, more rows and layers:
--   idxlab run experiments/context_parallel.lua --set workload.decode.rows=16 \
--     --set workload.consumer_layers=4
return {
  name = "context_parallel",
  question = "At 128K and 1M positions, how much recall does local candidate selection lose "
    .. "against global selection, for c in {1, 2, 4, 8} and interleave in {1, cbs, "
    .. "page_size}, and how many bytes does global selection exchange per step?",
  seed = 1,
  backend = "auto",
  workload = { decode = { rows = 1, context = 131072 }, prefill = false, consumer_layers = 1 },
  config = { index_topk = 512, candidate_topk_blocks = 2048, candidate_block_size = 8,
    page_size = 128, max_rows = 64, max_model_len = 1048576 },
  context_parallel_sim = { size = 1, interleave = 1, candidates = "global" },
  sweep = {
    ["workload.decode.context"] = { 131072, 1048576 },
    ["context_parallel_sim.size"] = { 1, 2, 4, 8 },
    ["context_parallel_sim.interleave"] = { 1, 8, 128 },
    ["context_parallel_sim.candidates"] = { "global", "local" },
  },
  metrics = { "recall_at_k", "mass_recall", "candidate_coverage", "cp_candidate_agreement",
    "cp_kept_blocks", "cp_bytes_block_scores", "cp_bytes_candidates", "cp_bytes_topk",
    "cp_work_imbalance" },
  plots = {
    { x = "context_parallel_sim.size", y = "recall_at_k",
      series = "context_parallel_sim.candidates", name = "recall_vs_ranks",
      title = "recall@k: global against local candidate selection" },
    { x = "context_parallel_sim.size", y = "cp_bytes_block_scores",
      series = "workload.decode.context", name = "bytes_vs_ranks", logy = true,
      title = "bytes one rank sends per step (global block scores)" },
  },
}
