-- candidate_block_size: at a fixed candidate budget per row, should the source layer publish
-- many small candidate blocks or a few large ones?
--
-- The budget is candidate_block_size * candidate_topk_blocks = 4096 positions per row, held
-- fixed by zipping the two lists (8 x 512, 16 x 256, ..., 128 x 32). Smaller blocks follow the
-- scores more closely (higher recall_at_k); larger blocks make fewer, longer reads (the sparse
-- kernel's time) and a cheaper candidate selection. The plots show recall and time per stage
-- against the block size.
--
-- CPU default: 8 decode rows at 32768 positions, 2 consumer layers, 2 repeats with the
-- stages timed as the median of 3 runs after a warm-up: a minute or two on 2 cores.
-- Larger, on a GPU:
--   idxlab run experiments/candidate_block_size.lua --set workload.decode.rows=64 \
--     --set workload.decode.context=131072 --set index_topk=512 \
--     --set sweep.candidate_topk_blocks=2048,1024,512,256,128   (16384 positions per row)
local budget = 4096
local sizes = { 8, 16, 32, 64, 128 }
local blocks = {}
for i, cbs in ipairs(sizes) do blocks[i] = budget / cbs end

return {
  name = "candidate_block_size",
  question = "At a fixed candidate budget (positions per row), how do recall and time change "
    .. "with the candidate block size?",
  seed = 1,
  backend = "auto",
  workload = { decode = { rows = 8, context = 32768 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 256, max_rows = 64, max_model_len = 131072 },
  sweep = { candidate_block_size = sizes, candidate_topk_blocks = blocks },
  zip = true,
  repeats = 2,
  timing = { warmup = 1, iters = 3 },
  metrics = { "recall_at_k", "mass_recall", "candidate_coverage", "time_candidate_select_us",
    "time_sparse_logits_us", "time_step_us" },
  plots = {
    { x = "candidate_block_size", y = { "recall_at_k", "mass_recall", "candidate_coverage" },
      name = "quality_vs_candidate_block_size",
      title = "quality at a budget of 4096 candidate positions per row" },
    { x = "candidate_block_size",
      y = { "time_candidate_select_us", "time_sparse_logits_us", "time_step_us" },
      name = "time_vs_candidate_block_size",
      title = "time per stage at a budget of 4096 candidate positions per row" },
  },
}
