-- idxlab.chunker: the prefill chunker of SPEC 5 on its own, so an experiment can sweep the
-- budgets and read back chunk counts, rows per chunk and peak logits bytes without running
-- any kernel (and without a builder's scratch).
--
--   local chunks, summary = chunker.plan(cfg, { {seq_len = 40000, query_len = 512}, ... },
--                                        {sparse = true})
--
-- seq_len is in positions (the request's keys, its query rows included) and query_len in
-- rows. Each chunk: requests = {first, last} (1-based, inclusive, into the given list),
-- rows, seq_tokens (the budgeted, clamped seq_lens summed), logits_bytes (rows * seq_tokens
-- * 4), sub_chunk, query_start, query_end (0-based rows of the first request, end exclusive).
-- summary = { num_chunks, max_rows_per_chunk, peak_logits_bytes, peak_seq_tokens,
-- min_split_seq_len }.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local util = require("idxlab.util")
local config = require("idxlab.config")
local ffi, C = core.ffi, core.C
local fail = errors.fail

local M = {}

-- The most chunks one plan may return: each becomes a Lua table (and a C record first), so a
-- plan of billions of one-row sub-chunks is refused before anything is allocated or walked.
M.MAX_CHUNKS = 2 ^ 20

local function check_int(v, what)
  if not util.is_int(v, 0) then
    fail("%s = %s: must be a non-negative integer", what, tostring(v))
  end
  return v
end

function M.plan(cfg, requests, opts)
  local described, info = config.describe(cfg)
  if type(requests) ~= "table" then
    fail("chunker.plan: requests must be a list of {seq_len = n, query_len = n}")
  end
  opts = opts or {}
  if type(opts) ~= "table" then fail("chunker.plan: options must be a table") end
  for k in pairs(opts) do
    if k ~= "sparse" then fail("chunker.plan: unknown option '%s' (sparse)", tostring(k)) end
  end
  local sparse = opts.sparse
  if sparse == nil then sparse = true end
  if type(sparse) ~= "boolean" then fail("chunker.plan: sparse must be true or false") end
  local n = #requests
  local W = described.config.workspace_tokens
  local min_split = described.derived.min_split_seq_len
  local ratio = described.config.compress_ratio
  local seq, q = ffi.new("int64_t[?]", math.max(n, 1)), ffi.new("int64_t[?]", math.max(n, 1))
  -- Sub-chunks: a request whose rows do not fit the logits budget together is split into
  -- ceil(query_len / per) chunks of per = max(1, (max_logits_bytes / 4) / width) rows each,
  -- exactly as the C chunker does; counted here (int64) to refuse an unreturnable plan.
  local budget_elems = ffi.new("int64_t", described.config.max_logits_bytes) / 4
  local sub_total = 0
  for i, r in ipairs(requests) do
    if type(r) ~= "table" then fail("chunker.plan: requests[%d] must be a table", i) end
    local s = check_int(r.seq_len, ("requests[%d].seq_len"):format(i))
    local ql = check_int(r.query_len, ("requests[%d].query_len"):format(i))
    if ql < 1 then
      fail("requests[%d].query_len = 0: must be >= 1 (a prefill request has at least one row)",
        i)
    end
    if s < math.floor(ql / ratio) then
      fail("requests[%d].seq_len = %d positions is less than query_len (%d) / compress_ratio "
        .. "(%d): the query rows are part of the sequence", i, s, ql, ratio)
    end
    local b = (sparse and s < min_split) and min_split or s
    if b > W then
      fail("requests[%d].seq_len = %d exceeds workspace_tokens = %d (one request's keys must "
        .. "fit the workspace)", i, s, W)
    end
    seq[i - 1], q[i - 1] = s, ql
    if b > 0 then
      local fit = budget_elems / b -- rows of this width the budget holds
      if ffi.new("int64_t", ql) > fit then
        local per = fit < 1 and 1 or fit
        local subs = tonumber((ql + per - 1) / per)
        sub_total = sub_total + subs
        if sub_total > M.MAX_CHUNKS then
          fail("chunker.plan: requests[%d] (seq_len = %d, query_len = %d) splits into %d "
            .. "sub-chunks of %d row(s) under max_logits_bytes = %d%s: the plan has more than "
            .. "the %d chunks (chunker.MAX_CHUNKS) one plan may return",
            i, s, ql, subs, tonumber(per), described.config.max_logits_bytes,
            fit < 1 and (" (one row of %d positions is %.0f bytes of logits)"):format(b, b * 4)
              or "", M.MAX_CHUNKS)
        end
      end
    end
  end
  local ctx = config.msg_ctx()
  local nc = ffi.new("int32_t[1]")
  local cap = n + 16
  local out = ffi.new("ixl_chunk[?]", cap)
  local st = C.ixl_chunk_plan(ctx, info, n, seq, q, sparse and 1 or 0, out, cap, nc)
  if st ~= 0 and nc[0] > cap then
    cap = nc[0]
    out = ffi.new("ixl_chunk[?]", cap)
    st = C.ixl_chunk_plan(ctx, info, n, seq, q, sparse and 1 or 0, out, cap, nc)
  end
  core.check(ctx, st)
  local chunks = {}
  local summary = { num_chunks = nc[0], max_rows_per_chunk = 0, peak_logits_bytes = 0,
    peak_seq_tokens = 0, min_split_seq_len = min_split, sparse = sparse }
  for i = 0, nc[0] - 1 do
    local c = out[i]
    local t = {
      requests = { c.request_start + 1, c.request_end },
      rows = tonumber(c.rows), seq_tokens = tonumber(c.seq_tokens),
      logits_bytes = tonumber(c.logits_bytes), sub_chunk = c.is_sub_chunk ~= 0,
      query_start = tonumber(c.query_start), query_end = tonumber(c.query_end),
    }
    t.requests.first, t.requests.last = t.requests[1], t.requests[2]
    chunks[#chunks + 1] = t
    summary.max_rows_per_chunk = math.max(summary.max_rows_per_chunk, t.rows)
    summary.peak_logits_bytes = math.max(summary.peak_logits_bytes, t.logits_bytes)
    summary.peak_seq_tokens = math.max(summary.peak_seq_tokens, t.seq_tokens)
  end
  return chunks, summary
end

return errors.wrap(M)
