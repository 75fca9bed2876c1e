-- tests/support/fake_measure.lua: a deterministic stand-in for pipeline.measure, for tests of
-- the experiment runner (no kernels run). Metrics follow simple smooth laws of the config
-- (recall rises with the candidate budget) plus seeded noise. The file returns the measure
-- function, so a spec passes it as experiment.run's `fake` option and a CLI test names this
-- file in IDXLAB_FAKE_MEASURE (the runner's test hook). IDXLAB_FAKE_DELAY = seconds makes
-- every point take that long first (the kill-mid-run tests).
local results = require("idxlab.results")
local binding = require("idxlab.ffi")

local function fake_rand(seed, salt)
  local h = results.hash(("%s/%s"):format(tostring(seed), salt))
  return tonumber(h, 16) / 4294967296
end

-- Sleeps in slices of at most 50 ms (the binding's usleep) until `seconds` have passed on the
-- library's clock, so a SIGKILL or a SIGINT lands while the point is in flight: SIGINT ends
-- the usleep early (EINTR) and LuaJIT's "interrupted!" hook runs at the next instruction this
-- interpreted function executes (jit.off: a compiled trace would not return to the hook).
local function wait(seconds)
  local t_end = binding.now_us() + seconds * 1e6
  while true do
    local left = t_end - binding.now_us()
    if left <= 0 then return end
    binding.sleep_us(math.min(left, 50000))
  end
end
jit.off(wait)

-- One layer's metrics.
local function layer_metrics(point, l, budget, context, locality, active)
  local noise = (fake_rand(point.seed, "l" .. l) - 0.5) * 0.01
  local recall = math.min(1, 1 - math.exp(-budget / context * 4 * locality) + noise)
  local m = {
    logit_mismatches = 0, logit_diff = 0, selection_agreement = 1,
    fp32_selection_agreement = 0.99, recall_at_k = recall, mass_recall = math.min(1, recall + 0.02),
    candidate_coverage = math.min(1, recall + 0.01), active_rows = active,
    time_sparse_logits_us = budget * 0.01 * (1 + noise), time_topk_us = 5, time_remap_us = 1,
  }
  if active == 0 then
    m.recall_at_k, m.mass_recall, m.candidate_coverage = nil, nil, nil
    m.selection_agreement, m.fp32_selection_agreement = nil, nil
  end
  return m
end

return function(_, point)
  local delay = tonumber(os.getenv("IDXLAB_FAKE_DELAY") or "")
  if delay and delay > 0 then wait(delay) end
  local cfg, wl = point.config, point.workload or {}
  local T, cbs = cfg.candidate_topk_blocks or 2048, cfg.candidate_block_size or 8
  local context = (wl.decode and wl.decode.context) or 32768
  local locality = tonumber(wl.locality) or 1
  local budget = T * cbs
  local L = wl.consumer_layers or 2
  local row = { per_layer = {} }
  local sums = {}
  local active = budget < context and 4 or 0
  for l = 1, L do
    local m = layer_metrics(point, l, budget, context, locality, active)
    row.per_layer[l] = m
    for k, v in pairs(m) do sums[k] = (sums[k] or 0) + v end
  end
  -- stage times: summed over layers; the rest: averaged
  for k, v in pairs(sums) do row[k] = k:match("^time_") and v or v / L end
  row.logit_mismatches = 0
  row.active_rows = active
  row.time_dense_logits_us = context * 0.05
  row.time_candidate_select_us = context * 0.001
  row.time_expand_us = 2
  row.time_step_us = row.time_dense_logits_us + (row.time_sparse_logits_us or 0)
  local sbk = (cfg.sparse_block_kv == "auto" and 8 or cfg.sparse_block_kv or 8)
  row.scratch_bytes = (cfg.max_rows or 8192) * (T * cbs / sbk + 8) * 4
  row.logits_bytes = context * 4 * 4
  row.num_chunks = 0
  if point.by == "length" then
    row.by_length = {
      { bucket = 1024, rows = 2, active_rows = 0, active = false },
      { bucket = 32768, rows = 4, active_rows = active, active = active > 0,
        recall_at_k = row.recall_at_k },
    }
  end
  return row
end
