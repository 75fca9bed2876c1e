-- idxlab.summary: the metric accumulator that steps fill (idxlab.step's compare and step) and
-- its summary as a result row (SPEC 6): per-layer metrics, their mean over consumer layers at
-- the top level, the timings per step (with speedup_sparse), and optionally the metrics by
-- row length.
local errors = require("idxlab.errors")

local M = {}

-- The per-row quality metrics (SPEC 6), in report order.
local QUALITY = { "recall_at_k", "mass_recall", "candidate_coverage", "selection_agreement",
  "fp32_selection_agreement" }
M.QUALITY = QUALITY

-- A new accumulator over the rows of one or more steps. acc.layer(l) is consumer layer l's
-- record (made on first use): its rows, bf16 mismatches, diff sums and stage times.
function M.new_acc()
  local acc = { layers = {} }
  function acc.layer(l)
    local la = acc.layers[l]
    if not la then
      la = { rows = {}, mismatches = 0, sum_dd = 0, sum_sq = 0, time = {} }
      acc.layers[l] = la
    end
    return la
  end
  return acc
end

local function is_active(r) return r.active end

-- SPEC 6's speedup_sparse: the masked-dense time over the sparse time (sparse logits, top-k,
-- remap) of `t`'s time_*_us fields; nil without a masked-dense time or a sparse one.
function M.speedup(masked_dense_us, t)
  local sparse = (t.time_sparse_logits_us or 0) + (t.time_topk_us or 0) + (t.time_remap_us or 0)
  if not masked_dense_us or sparse <= 0 then return nil end
  return masked_dense_us / sparse
end

local function mean_over(rows, name, pred)
  local s, n = 0, 0
  for _, r in ipairs(rows) do
    if pred(r) and r[name] ~= nil then s = s + r[name]; n = n + 1 end
  end
  if n == 0 then return nil end
  return s / n
end

local function layer_metrics(la, steps)
  local m = {}
  local active = 0
  for _, r in ipairs(la.rows) do if r.active then active = active + 1 end end
  m.active_rows = active
  for _, q in ipairs(QUALITY) do
    m[q] = active > 0 and mean_over(la.rows, q, is_active) or nil
  end
  m.logit_mismatches = la.mismatches
  -- SPEC 3's 1 - 2 sum(xy) / sum(x^2 + y^2), as sum (x - y)^2 / sum (x^2 + y^2)
  m.logit_diff = la.sum_sq > 0 and la.sum_dd / la.sum_sq or 0
  for k2, v in pairs(la.time) do m[k2] = v / steps end -- per step
  m.speedup_sparse = M.speedup(m.time_masked_dense_us, m)
  return m
end

-- The rows in power-of-two length buckets (a row of length len in the bucket b with
-- b <= max(len, 1) < 2b); rows are counted once, on layer 1.
local function by_length(acc)
  local buckets = {}
  for l, la in ipairs(acc.layers) do
    for _, r in ipairs(la.rows) do
      local b = 1
      while b * 2 <= math.max(r.len, 1) do b = b * 2 end
      buckets[b] = buckets[b] or { bucket = b, rows = 0, active_rows = 0, list = {} }
      local bk = buckets[b]
      if l == 1 then
        bk.rows = bk.rows + 1
        if r.active then bk.active_rows = bk.active_rows + 1 end
      end
      bk.list[#bk.list + 1] = r
    end
  end
  local out = {}
  for _, bk in pairs(buckets) do
    local e = { bucket = bk.bucket, rows = bk.rows, active_rows = bk.active_rows,
      active = bk.active_rows > 0 }
    for _, q in ipairs(QUALITY) do
      e[q] = bk.active_rows > 0 and mean_over(bk.list, q, is_active) or nil
    end
    out[#out + 1] = e
  end
  table.sort(out, function(a, b) return a.bucket < b.bucket end)
  return out
end

-- Turns an accumulator into a result row (SPEC 6): per-layer metrics, their mean over layers
-- at the top level, and the timings per step (a consumer stage summed over the layers).
-- info: a builder's info() (for scratch_bytes) or nil; by = "length" adds row.by_length.
function M.summarize(acc, info, by)
  if type(acc) ~= "table" or type(acc.layers) ~= "table" then
    errors.fail("pipeline.summarize: acc must be an accumulator from pipeline.new_acc()")
  end
  if info ~= nil and type(info) ~= "table" then
    errors.fail("pipeline.summarize: info must be a builder's info() table or nil")
  end
  local row = { per_layer = {} }
  local L = #acc.layers
  local steps = math.max(acc.steps or 1, 1)
  for l = 1, L do row.per_layer[l] = layer_metrics(acc.layers[l], steps) end
  local function over_layers(key, mean)
    local s, n = 0, 0
    for l = 1, L do
      local v = row.per_layer[l][key]
      if v ~= nil then s = s + v; n = n + 1 end
    end
    if n == 0 then return nil end
    return mean and s / n or s
  end
  -- metrics: the mean over consumer layers; consumer stage times: their sum (SPEC 6)
  for _, key in ipairs({ "recall_at_k", "mass_recall", "candidate_coverage",
    "selection_agreement", "fp32_selection_agreement", "logit_diff", "logit_mismatches" }) do
    row[key] = over_layers(key, true)
  end
  row.logit_mismatches = row.logit_mismatches or 0
  for _, key in ipairs({ "time_sparse_logits_us", "time_topk_us", "time_remap_us",
    "time_masked_dense_us" }) do
    row[key] = over_layers(key, false)
  end
  -- at the top level the ratio of the sums over consumer layers (SPEC 6)
  row.speedup_sparse = M.speedup(row.time_masked_dense_us, row)
  row.active_rows = L > 0 and row.per_layer[1].active_rows or 0
  row.time_dense_logits_us = (acc.time_dense_logits or 0) / steps
  row.time_candidate_select_us = (acc.time_candidate_select or 0) / steps
  row.time_expand_us = (acc.time_expand or 0) / steps
  row.time_source_topk_us = (acc.time_source_topk or 0) / steps
  -- time_step_us: the CUDA graph's median replay on the GPU, the eager step on the CPU
  -- (idxlab.step); an accumulator from before time_step existed keeps its eager total
  row.time_step_us = (acc.time_step or acc.time_total or 0) / steps
  row.time_step_eager_us = (acc.time_step_eager or acc.time_total or 0) / steps
  -- the stages fused into another (reported as 0 µs), e.g. {"remap"} (SPEC 6); absent if none
  row.fused = acc.fused
  row.num_chunks = acc.num_chunks or 0
  row.logits_bytes = acc.logits_bytes or 0
  row.scratch_bytes = info and info.derived and info.derived.scratch_bytes
    or (info and info.scratch_bytes) or 0
  row.steps = acc.steps or 0
  if by == "length" then row.by_length = by_length(acc) end
  return row
end

return errors.wrap(M)
