-- idxlab.experiment.chunks: the measurement of mode = "chunks": the chunker's plan
-- (idxlab.chunker) for the workload's prefill requests, sparse (min_split_seq_len clamp) and
-- dense, summarised; no kernel runs.
local chunker = require("idxlab.chunker")
local workload = require("idxlab.workload")
local util = require("idxlab.experiment.util")

local M = {}

-- The prefill requests of the workload, as the generator lays them out (seq_len = positions
-- the request's K spans, query_len = its rows).
local function prefill_requests(wl)
  local only = util.deep_copy(wl)
  only.decode = false
  local reqs = {}
  for _, r in ipairs(workload.requests(only)) do
    if r.kind == "prefill" then
      reqs[#reqs + 1] = { seq_len = r.seq_len, query_len = r.query_len }
    end
  end
  return reqs
end

-- chunker.plan's chunks and summary -> the row's chunk metrics.
local function chunk_stats(chunks, summary)
  local n, sumrows, subs = 0, 0, 0
  for _, c in ipairs(chunks) do
    n = n + 1
    sumrows = sumrows + c.rows
    if c.sub_chunk then subs = subs + 1 end
  end
  return {
    num_chunks = summary.num_chunks,
    max_rows_per_chunk = summary.max_rows_per_chunk,
    mean_rows_per_chunk = n > 0 and sumrows / n or 0,
    peak_logits_bytes = summary.peak_logits_bytes,
    sub_chunks = subs,
  }
end

-- measure(point) -> row.
function M.measure(point)
  local reqs = prefill_requests(point.workload)
  local s = chunk_stats(chunker.plan(point.config, reqs, { sparse = true }))
  local d = chunk_stats(chunker.plan(point.config, reqs, { sparse = false }))
  local row = s
  row.dense_num_chunks = d.num_chunks
  row.dense_max_rows_per_chunk = d.max_rows_per_chunk
  row.dense_peak_logits_bytes = d.peak_logits_bytes
  row.min_split_seq_len = point.info and point.info.min_split_seq_len
  return row
end

return M
