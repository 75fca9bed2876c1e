-- quick.lua -- the main job (`make run`). Question: on one real V4.1-Flash step (H = 32,
-- MXFP4, index_topk 512, 2048 candidate blocks of 8, sparse_block_kv 8, four consumer
-- layers), is the sparse path exact and in agreement with the masked dense selection, how much
-- of the dense top-k does it keep, how long does each stage take, and how much memory does it
-- need?
--
-- Exactness: logit_mismatches must be 0 and selection_agreement 1 (they check the
-- implementation); recall_at_k, mass_recall and candidate_coverage measure the two-level
-- approximation on the default synthetic workload (docs/workload.md).
--
-- On the CPU: 8 decode rows and one prefill request of 64 rows, at 32768 positions (every
-- row is longer than T * cbs = 16384, so the sparse path is active), in under a minute on
-- 2 cores. On a GPU (backend auto picks it): 64 decode rows at 131072 positions and a
-- 4096-row prefill chunk.
return {
  name = "quick",
  question = "Is one V4.1-Flash sparse-indexer step exact, what recall does it keep, and what "
    .. "does each stage cost?",
  seed = 1,
  backend = "auto",
  config = {}, -- the V4.1-Flash reference config (idxlab config prints it)
  workload = {
    decode = { rows = 8, context = 32768 },
    prefill = { { query_len = 64, context_len = 32704 } },
    consumer_layers = 4,
  },
  -- the production scale where the backend is a GPU
  on_backend = {
    cuda = {
      workload = {
        decode = { rows = 64, context = 131072 },
        prefill = { { query_len = 4096, context_len = 126976 } },
        consumer_layers = 4,
      },
      timing = { warmup = 1, iters = 5 },
    },
  },
  repeats = 1,
  by = "length",
  metrics = {
    "logit_mismatches", "selection_agreement", "fp32_selection_agreement", "recall_at_k",
    "mass_recall", "candidate_coverage", "active_rows", "time_dense_logits_us",
    "time_candidate_select_us", "time_expand_us", "time_sparse_logits_us", "time_topk_us",
    "time_remap_us", "time_step_us", "scratch_bytes", "logits_bytes", "num_chunks",
  },
}
