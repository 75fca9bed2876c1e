-- idxlab.cpsim: the context-parallel simulation (issue 17), a research mode apart from the
-- production config (whose context_parallel > 1 stays refused, SPEC 4). It runs the decode rows
-- of a step as c ranks of decode context parallelism would, on one device: position p of a
-- request lives on rank floor(p / I) mod c (I = the interleave), each rank scores only its own
-- keys, the ranks keep candidate blocks globally (an all-gather of block scores) or locally
-- (each its own top-ceil(T/c) block parts), each runs the consumers over the parts it kept,
-- and a global top-k merge of the ranks' lists gives the layer's selection. docs/
-- context_parallel.md states the rules, what is exact and what is measured.
--
-- The simulation sits beside the single-rank step (idxlab.step), which still runs unchanged:
-- its dense top-k is the oracle, its candidate blocks the reference for the global policy.
-- Every kernel call goes through the op modules (formats, logits, select, metrics) on the
-- context's device; the per-block bookkeeping is host Lua.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local formats = require("idxlab.formats")
local logits = require("idxlab.logits")
local metrics = require("idxlab.metrics")
local sel = require("idxlab.select")
local summary = require("idxlab.summary")
local Tensor = require("idxlab.tensor")
local util = require("idxlab.util")
local ffi = core.ffi

local fail = errors.fail

local M = {}

-- The knob's fields, in the order the result columns show them, with their defaults.
M.FIELDS = { "size", "interleave", "candidates" }
M.DEFAULTS = { size = 1, interleave = 1, candidates = "global" }
M.POLICIES = { global = true, ["local"] = true }
M.MAX_SIZE = 1024

-- The metrics the simulation adds to a row (SPEC 6), beside recall_at_k, mass_recall and
-- candidate_coverage, which it replaces by its own (against the single-rank dense top-k).
M.METRICS = { "cp_bytes_block_scores", "cp_bytes_candidates", "cp_bytes_topk",
  "cp_work_imbalance", "cp_kept_blocks", "cp_candidate_agreement" }
local OVERRIDDEN = { "recall_at_k", "mass_recall", "candidate_coverage" }

---------------------------------------------------------------------------- the knob

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  return tostring(v)
end

local is_int = util.is_int

-- check_value(field, v) -> nil, or the reason v is not a value of context_parallel_sim.field.
function M.check_value(field, v)
  if field == "size" then
    if not is_int(v, 1, M.MAX_SIZE) then
      return ("must be an integer in [1, %d] (the simulated ranks)"):format(M.MAX_SIZE)
    end
  elseif field == "interleave" then
    if not is_int(v, 1, 2 ^ 31 - 1) then
      return "must be a positive integer (positions per stripe: p lives on rank floor(p / I) mod c)"
    end
  elseif field == "candidates" then
    if not M.POLICIES[v] then return "must be \"global\" or \"local\"" end
  else
    return ("unknown (fields: %s)"):format(table.concat(M.FIELDS, ", "))
  end
  return nil
end

-- check(t, where) -> a copy with the defaults filled in; raises naming `where`.field.
function M.check(t, where)
  where = where or "context_parallel_sim"
  if type(t) ~= "table" then
    fail("%s = %s: must be { size = c, interleave = I, candidates = \"global\" | \"local\" }",
      where, show(t))
  end
  local out = {}
  for k, v in pairs(t) do
    local why = M.check_value(k, v)
    if why then fail("%s.%s = %s: %s", where, tostring(k), show(v), why) end
    out[k] = v
  end
  for _, f in ipairs(M.FIELDS) do if out[f] == nil then out[f] = M.DEFAULTS[f] end end
  return out
end

---------------------------------------------------------------------------- striping

-- The rank of position p: floor(p / I) mod c.
function M.rank_of(p, c, I) return math.floor(p / I) % c end

-- A rank's block parts of one row: a list of { block = b, lo = local offset, n = count },
-- ascending in b (and so in lo), and the rank's local length. Local K is the rank's positions
-- in increasing order, so a part (its positions inside one candidate block) is one contiguous
-- run of local K.
function M.parts(len, c, I, cbs, r)
  local parts, nloc = {}, 0
  local last
  local s = r
  while s * I < len do
    local a, e = s * I, math.min((s + 1) * I, len)
    while a < e do
      local b = math.floor(a / cbs)
      local stop = math.min(e, (b + 1) * cbs)
      local n = stop - a
      if last and last.block == b then
        last.n = last.n + n
      else
        last = { block = b, lo = nloc, n = n }
        parts[#parts + 1] = last
      end
      nloc = nloc + n
      a = stop
    end
    s = s + c
  end
  return parts, nloc
end

-- The request-local position of rank r's local index j: every stripe but a row's last is I
-- positions long, so local j sits in the rank's stripe floor(j / I).
local function pos_of(r, j, sim)
  local I = sim.interleave
  return (r + math.floor(j / I) * sim.size) * I + j % I
end
M.pos_of = pos_of

---------------------------------------------------------------------------- helpers

local f32box = ffi.new("float[1]")
local function f32(x) f32box[0] = x; return f32box[0] end

local function on_ctx(ctx, h)
  if ctx:device_kind() ~= "device" then return h end
  return h:to("device")
end

local function to_host(t)
  if t:device() == "host" then return t end
  return t:to("host")
end

-- Tensors made during one call, freed together at its end.
local function arena(ctx)
  local list = {}
  local a = {}
  function a.new(dtype, shape, device)
    local t = Tensor.new(ctx, dtype, shape, device)
    list[#list + 1] = t
    return t
  end
  function a.keep(t) list[#list + 1] = t; return t end
  -- t (kept) on the host: t itself there, else a kept host copy
  function a.host(t)
    a.keep(t)
    if t:device() == "host" then return t end
    return a.keep(t:to("host"))
  end
  function a.i32(values, device)
    local t = a.new("i32", { #values }, "host"):from_table(values)
    if device ~= "host" and ctx:device_kind() == "device" then return a.keep(t:to("device")) end
    return t
  end
  function a.free() for _, t in ipairs(list) do t:free() end; list = {} end
  return a
end

-- K codes and scales of positions [start + p] for the runs {p0, n} into new host tensors:
-- the only way a rank's keys are read (from the whole cache that stands for the c caches).
local function gather_k(A, kc, ksc, vb, sb, runs, count)
  local codes = A.new("u8", { math.max(count, 1), vb }, "host")
  local scales = A.new(ksc:dtype(), { math.max(count, 1) }, "host")
  local cs, cd = ffi.cast("uint8_t *", kc.cd.data), ffi.cast("uint8_t *", codes.cd.data)
  local ss, sd = ffi.cast("uint8_t *", ksc.cd.data), ffi.cast("uint8_t *", scales.cd.data)
  local at = 0
  for _, run in ipairs(runs) do
    ffi.copy(cd + at * vb, cs + run[1] * vb, run[2] * vb)
    ffi.copy(sd + at * sb, ss + run[1] * sb, run[2] * sb)
    at = at + run[2]
  end
  return codes, scales
end

-- A view of row i of a [R, ...] tensor as [1, ...].
local function row_view(t, i) return util.rows_view(t, i, 1) end
local layer_view = util.layer_view

---------------------------------------------------------------------------- block scores

-- The partial of one part over x[lo .. lo+n-1] (host float*): { max, sum (double), m, s
-- (logsumexp: the max and sum exp(x - max) in double), nan }.
local function partial(x, lo, n)
  local m, sum, nan = -math.huge, 0, false
  for j = lo, lo + n - 1 do
    local v = x[j]
    if v ~= v then nan = true end
    if v > m then m = v end
    sum = sum + v
  end
  local s = 0
  if not nan and m > -math.huge and m < math.huge then
    for j = lo, lo + n - 1 do s = s + math.exp(x[j] - m) end
  end
  return { max = m, sum = sum, m = m, s = s, n = n, nan = nan }
end

-- The fp32 score of a list of partials combined in rank order, as K3 scores a block (SPEC 3):
-- max exactly; sum, mean and logsumexp from the exchanged double partials (their rounding may
-- differ from K3's one sequential sum: cp_candidate_agreement reports the difference).
local function combine(ps, how)
  local nan, m, sum, n = false, -math.huge, 0, 0
  for _, p in ipairs(ps) do
    nan = nan or p.nan
    if p.max > m then m = p.max end
    sum = sum + p.sum
    n = n + p.n
  end
  if nan then return 0 / 0 end
  if how == "max" then return f32(m) end
  if how == "sum" then return f32(sum) end
  if how == "mean" then return f32(sum / n) end
  if m == math.huge or m == -math.huge then return f32(m) end
  local s = 0
  for _, p in ipairs(ps) do
    if p.m > -math.huge then s = s + p.s * math.exp(p.m - m) end
  end
  return f32(m + math.log(s))
end

-- The top min(k, n) of scores[1..n] by (NaN first, score descending, index ascending), through
-- K6 on a [1, n] row; returns the chosen 1-based indices.
local function top_indices(ctx, A, scores, k)
  local n = #scores
  if n == 0 or k <= 0 then return {} end
  if k > 4096 then
    fail("context_parallel_sim: %d blocks to keep per rank: the simulation selects through K6 "
      .. "(k <= 4096)", k)
  end
  local h = A.new("f32", { 1, n }, "host")
  local p = ffi.cast("float *", h.cd.data)
  for i = 1, n do p[i - 1] = scores[i] end
  local d = on_ctx(ctx, h)
  if d ~= h then A.keep(d) end
  local out = A.host(sel.topk(ctx, d, nil, A.i32({ n }), k, false))
  local o = ffi.cast("int32_t *", out.cd.data)
  local idx = {}
  for i = 0, k - 1 do if o[i] >= 0 then idx[#idx + 1] = o[i] + 1 end end
  return idx
end
M._top_indices = top_indices

---------------------------------------------------------------------------- one row

-- The ranks' source logits and block parts of one row, and their partials.
local function source_ranks(S, row)
  local ctx, A, sim, cfg = S.ctx, S.A, S.sim, S.cfg
  local c, I, cbs = sim.size, sim.interleave, cfg.candidate_block_size
  local ranks = {}
  for r = 0, c - 1 do
    local parts, nloc = M.parts(row.len, c, I, cbs, r)
    local rk = { r = r, parts = parts, n = nloc }
    if nloc > 0 then
      -- the rank's local K: its stripes, in increasing position order
      local runs = {}
      local stripe = r
      while stripe * I < row.len do
        runs[#runs + 1] = { row.start + stripe * I, math.min(I, row.len - stripe * I) }
        stripe = stripe + c
      end
      rk.runs = runs
      rk.codes, rk.scales = gather_k(A, S.kc, S.ksc, S.vb, S.sb, runs, nloc)
      local dcodes, dscales = on_ctx(ctx, rk.codes), on_ctx(ctx, rk.scales)
      if dcodes ~= rk.codes then A.keep(dcodes); A.keep(dscales) end
      rk.dcodes, rk.dscales = dcodes, dscales
      local qk = { q_codes = row_view(S.qc, row.i), k_codes = dcodes, k_scales = dscales,
        q_scales = cfg.kv_format ~= "fp8" and row_view(S.qs, row.i) or nil,
        kv_format = cfg.kv_format }
      local out = logits.dense(ctx, qk, row_view(S.wd, row.i), A.i32({ 0 }), A.i32({ nloc }),
        { layout = "compressed", clean = true, reduction = "fp32", max_len = nloc })
      A.keep(out)
      local h = to_host(out)
      if h ~= out then A.keep(h) end
      local x = ffi.cast("float *", h.cd.data)
      for _, p in ipairs(parts) do p.partial = partial(x, p.lo, p.n) end
      rk.logits = h
    end
    ranks[r + 1] = rk
  end
  return ranks
end

-- Marks the kept parts (part.kept = true) by the policy; returns the global selection (a set
-- of block ids) for the global policy, and the bytes of the exchanges.
local function select_blocks(S, row, ranks)
  local ctx, A, sim, cfg = S.ctx, S.A, S.sim, S.cfg
  local T, cbs, how = cfg.candidate_topk_blocks, cfg.candidate_block_size, cfg.block_score
  local nblocks = math.ceil(row.len / cbs)
  local newest = nblocks - 1
  local c = sim.size
  local bytes = { scores = 0, cands = nil }
  if sim.candidates == "global" then
    -- the all-gather: every rank contributes one partial per part it holds
    local per = {}
    local unit = how == "max" and 4 or (how == "logsumexp" and 12 or 8)
    local most, most_parts = 0, 0
    for _, rk in ipairs(ranks) do
      most_parts = math.max(most_parts, #rk.parts)
      for _, p in ipairs(rk.parts) do
        local l = per[p.block + 1]
        if not l then l = {}; per[p.block + 1] = l end
        l[#l + 1] = p.partial
      end
      most = math.max(most, #rk.parts * unit)
    end
    bytes.scores = (c - 1) * most
    local scores = {}
    for b = 0, nblocks - 1 do
      local s = combine(per[b + 1], how)
      if b == newest and s == s then s = math.huge end
      scores[b + 1] = s
    end
    local keep = {}
    for _, i in ipairs(top_indices(ctx, A, scores, math.min(T, nblocks))) do keep[i - 1] = true end
    for _, rk in ipairs(ranks) do
      for _, p in ipairs(rk.parts) do p.kept = keep[p.block] or false end
    end
    if how == "max" then
      -- the exact sparse alternative for max: each rank sends its top-T (id, score) pairs
      bytes.cands = (c - 1) * 8 * math.min(T, most_parts)
    end
    return keep, bytes
  end
  -- local: each rank its own top-ceil(T/c) parts; the newest block's parts always
  local kr = math.ceil(T / c)
  for _, rk in ipairs(ranks) do
    local scores = {}
    for i, p in ipairs(rk.parts) do
      local s = combine({ p.partial }, how)
      if p.block == newest and s == s then s = math.huge end
      scores[i] = s
      p.kept = false
    end
    for _, i in ipairs(top_indices(ctx, A, scores, math.min(kr, #rk.parts))) do
      rk.parts[i].kept = true
    end
  end
  bytes.cands = 0
  return nil, bytes
end
M._select_blocks = select_blocks

-- One consumer layer on every rank over its kept parts, and the global merge. Returns the
-- merged positions (a Lua list, ascending column order of K6), the bytes of the top-k
-- exchange and the positions each rank read.
local function consume(S, row, ranks, l)
  local ctx, A, cfg = S.ctx, S.A, S.cfg
  local k, sbk = cfg.index_topk, cfg.sparse_block_kv
  local ly = S.layers[l]
  local entries = {}
  local most = 0
  local reads = {}
  for ri, rk in ipairs(ranks) do
    local runs, pos, m, read = {}, {}, 0, 0
    for _, p in ipairs(rk.parts) do
      if p.kept then
        runs[#runs + 1] = { p.lo, p.n }
        m = m + p.n
        -- read as sparse blocks of min(sbk, run) positions (a size down to 1: this mode only)
        local bs = math.min(sbk, p.n)
        read = read + math.ceil(p.n / bs) * bs
      end
    end
    reads[ri] = read
    if m > 0 then
      -- the rank's kept keys, read from its own local K only
      local codes, scales = gather_k(A, rk.codes, rk.scales, S.vb, S.sb, runs, m)
      local dcodes, dscales = on_ctx(ctx, codes), on_ctx(ctx, scales)
      if dcodes ~= codes then A.keep(dcodes); A.keep(dscales) end
      local qk = { q_codes = row_view(ly.qc, row.i), k_codes = dcodes, k_scales = dscales,
        q_scales = cfg.kv_format ~= "fp8" and row_view(ly.qs, row.i) or nil,
        kv_format = cfg.kv_format }
      -- the bf16 reduction: bitwise K5's values at these positions (SPEC 3)
      local ke = A.i32({ m })
      local Sx = A.keep(logits.dense(ctx, qk, row_view(ly.ws, row.i), A.i32({ 0 }), ke,
        { layout = "compressed", clean = true, reduction = "bf16", max_len = m }))
      local top = A.host(sel.topk(ctx, Sx, nil, ke, k, false))
      local Sh = to_host(Sx)
      if Sh ~= Sx then A.keep(Sh) end
      -- local index -> request-local position
      for _, run in ipairs(runs) do
        for j = run[1], run[1] + run[2] - 1 do pos[#pos + 1] = pos_of(rk.r, j, S.sim) end
      end
      local tp = ffi.cast("int32_t *", top.cd.data)
      local sv = ffi.cast("uint16_t *", Sh.cd.data)
      local sent = 0
      for j = 0, k - 1 do
        local col = tp[j]
        if col >= 0 then
          entries[#entries + 1] = { pos = pos[col + 1], raw = sv[col], rank = rk.r }
          sent = sent + 1
        end
      end
      most = math.max(most, sent * 6)
    end
  end
  -- the merge: the ranks' lists in position order, K6 over them (ties to the smaller column,
  -- so to the smaller position): the top-k of the union
  table.sort(entries, function(a, b) return a.pos < b.pos end)
  local merged = {}
  if #entries > 0 then
    local h = A.new("bf16", { 1, #entries }, "host")
    local hp = ffi.cast("uint16_t *", h.cd.data)
    for i, e in ipairs(entries) do hp[i - 1] = e.raw end
    local d = on_ctx(ctx, h)
    if d ~= h then A.keep(d) end
    local top = A.host(sel.topk(ctx, d, nil, A.i32({ #entries }), k, false))
    local tp = ffi.cast("int32_t *", top.cd.data)
    for j = 0, k - 1 do
      if tp[j] >= 0 then merged[#merged + 1] = entries[tp[j] + 1].pos end
    end
  end
  return merged, (S.sim.size - 1) * most, reads, entries
end
M._consume = consume

-- The dense fp32 logits of layer l at the positions pos (the oracle's values, for mass_recall),
-- read from the whole cache.
local function dense_values(S, row, l, pos)
  local ctx, A, cfg = S.ctx, S.A, S.cfg
  local runs, n = {}, 0
  for _, p in ipairs(pos) do
    if p >= 0 then runs[#runs + 1] = { row.start + p, 1 }; n = n + 1 end
  end
  if n == 0 then return {} end
  local codes, scales = gather_k(A, S.kc, S.ksc, S.vb, S.sb, runs, n)
  local dcodes, dscales = on_ctx(ctx, codes), on_ctx(ctx, scales)
  if dcodes ~= codes then A.keep(dcodes); A.keep(dscales) end
  local ly = S.layers[l]
  local qk = { q_codes = row_view(ly.qc, row.i), k_codes = dcodes, k_scales = dscales,
    q_scales = cfg.kv_format ~= "fp8" and row_view(ly.qs, row.i) or nil,
    kv_format = cfg.kv_format }
  local out = A.keep(logits.dense(ctx, qk, row_view(ly.wd, row.i), A.i32({ 0 }), A.i32({ n }),
    { layout = "compressed", clean = true, reduction = "fp32", max_len = n }))
  local h = to_host(out)
  if h ~= out then A.keep(h) end
  local x = ffi.cast("float *", h.cd.data)
  local vals, j = {}, 0
  for i, p in ipairs(pos) do
    if p >= 0 then vals[i] = x[j]; j = j + 1 else vals[i] = -math.huge end
  end
  return vals
end

---------------------------------------------------------------------------- one step

-- A collector for the single-rank step's outputs (step opts.keep): what the oracle needs.
-- c.wants names them, so the step copies nothing else to the host for it.
local function collector()
  local c = { rows = {}, layers = {},
    wants = { cand_blocks = true, dense_topk_pos = true, topk_pos = true } }
  local function rows_of(t, r0, n, width)
    local s = t:shape()
    local w = width or s[2] or 1
    local stride = s[2] or 1
    local out = {}
    local dt = t:dtype()
    for r = 0, n - 1 do
      local list = {}
      if dt == "i32" then
        local p = ffi.cast("int32_t *", t.cd.data)
        for j = 0, w - 1 do list[j + 1] = p[r * stride + j] end
      end
      out[r0 + r + 1] = list
    end
    return out
  end
  function c.put(name, t, r0, n, width)
    if name == "cand_blocks" then
      for r, list in pairs(rows_of(t, r0, n, width)) do c.rows[r] = list end
    end
  end
  c.topk = {}
  function c.put_layer(name, l, t, r0, n)
    -- the oracle (dense top-k) and, for the specs, the single-rank sparse top-k
    local into = name == "dense_topk_pos" and c.layers or (name == "topk_pos" and c.topk)
    if into then
      into[l] = into[l] or {}
      for r, list in pairs(rows_of(t, r0, n)) do into[l][r] = list end
    end
  end
  return c
end
M.collector = collector

-- The step's quantized inputs as the simulation reads them (the step quantizes its own copy).
local function prepare(ctx, A, cfg, inputs)
  local fmt, quant = cfg.kv_format, cfg.quantizer
  local S = { vb = formats.value_bytes(fmt), sb = 4 }
  local kc, ksc = formats.quantize(ctx, fmt, quant, "k", inputs.k)
  A.keep(kc); A.keep(ksc)
  S.kc, S.ksc = to_host(kc), to_host(ksc)
  if S.kc ~= kc then A.keep(S.kc); A.keep(S.ksc) end
  local function qw(q, w)
    local qc, qs = formats.quantize(ctx, fmt, quant, "q", q)
    A.keep(qc); A.keep(qs)
    local wd, ws = formats.prepare_weights(ctx, fmt, w, fmt == "fp8" and qs or nil)
    A.keep(wd); A.keep(ws)
    return qc, qs, wd, ws
  end
  S.qc, S.qs, S.wd, S.ws = qw(inputs.q, inputs.weights)
  S.layers = {}
  local L = inputs.q_consumer:shape()[1]
  for l = 0, L - 1 do
    local ly = {}
    ly.qc, ly.qs, ly.wd, ly.ws = qw(layer_view(inputs.q_consumer, l),
      layer_view(inputs.weights_consumer, l))
    S.layers[l + 1] = ly
  end
  S.L = L
  return S
end

-- Overwrites the keys of every position of the decode rows that rank `keep_rank` does not hold
-- with garbage codes and scales (the specs' proof that a rank reads only its own keys).
local function poison(S, inputs, sim, keep_rank)
  local lens = to_host(inputs.context_lens):to_table()
  local starts = to_host(inputs.row_start):to_table()
  local cp, sp = ffi.cast("uint8_t *", S.kc.cd.data), ffi.cast("uint8_t *", S.ksc.cd.data)
  for i = 1, inputs.n_decode do
    for p = 0, lens[i] - 1 do
      if M.rank_of(p, sim.size, sim.interleave) ~= keep_rank then
        local at = starts[i] + p
        ffi.fill(cp + at * S.vb, S.vb, 0x77)
        ffi.fill(sp + at * S.sb, S.sb, 0xfe)
      end
    end
  end
end

-- sim_step(ctx, cfg, sim, inputs, collected, acc2, cp [, opts]) simulates the step's decode
-- rows: the per-row metrics into acc2 (a summary accumulator over the overridden metrics) and
-- the cp_* sums into cp. cfg: the resolved config; collected: the single-rank step's
-- collector. opts (the specs): record = a table that gets, per row, each rank's parts and
-- top-k lists and the merged lists; poison_except = r poisons every other rank's keys.
function M.sim_step(ctx, cfg, sim, inputs, collected, acc2, cp, opts)
  opts = opts or {}
  if (inputs.n_prefill or 0) > 0 then
    fail("context_parallel_sim: decode rows only (the workload has %d prefill rows; set "
      .. "workload.prefill = false)", inputs.n_prefill)
  end
  local A = arena(ctx)
  local ok, err = pcall(function()
    local S = prepare(ctx, A, cfg, inputs)
    S.ctx, S.A, S.cfg, S.sim = ctx, A, cfg, sim
    if opts.poison_except then poison(S, inputs, sim, opts.poison_except) end
    local lens = to_host(inputs.context_lens):to_table()
    local starts = to_host(inputs.row_start):to_table()
    local T, cbs = cfg.candidate_topk_blocks, cfg.candidate_block_size
    local c = sim.size
    local work = {}
    for r = 1, c do work[r] = 0 end
    local step_bytes = { scores = 0, cands = 0, topk = 0 }
    local counts = A.new("i32", { 1 }, "host")
    local valid = A.new("i32", { 1 }, "host")
    local mass = A.new("f32", { 1 }, "host")
    local k = cfg.index_topk
    for i = 1, inputs.n_decode do
      local row = { i = i - 1, len = lens[i], start = starts[i] }
      local active = row.len > T * cbs
      local ranks = source_ranks(S, row)
      for _, rk in ipairs(ranks) do work[rk.r + 1] = work[rk.r + 1] + rk.n end
      local _, bytes = select_blocks(S, row, ranks)
      step_bytes.scores = step_bytes.scores + bytes.scores
      if bytes.cands == nil then step_bytes.cands = nil end
      if step_bytes.cands then step_bytes.cands = step_bytes.cands + bytes.cands end
      -- kept[r][b]: rank r keeps its part of block b
      local kept, nkept = {}, 0
      for _, rk in ipairs(ranks) do
        local kb = {}
        for _, p in ipairs(rk.parts) do if p.kept then kb[p.block] = true; nkept = nkept + 1 end end
        kept[rk.r] = kb
      end
      -- the single-rank candidates the simulation also keeps (on some rank)
      local ref = collected.rows[i] or {}
      local agree, nref = 0, 0
      for _, b in ipairs(ref) do
        if b >= 0 then
          nref = nref + 1
          local any = false
          for r = 0, c - 1 do
            if kept[r][b] then any = true end
          end
          if any then agree = agree + 1 end
        end
      end
      if active then
        cp.rows = cp.rows + 1
        cp.kept_blocks = cp.kept_blocks + nkept
        if nref > 0 then cp.agree = cp.agree + agree / nref; cp.agree_rows = cp.agree_rows + 1 end
      end
      local rec = opts.record and { ranks = ranks, merged = {}, lists = {} }
      if rec then opts.record[i] = rec end
      for l = 1, S.L do
        local merged, tb, reads, entries = consume(S, row, ranks, l)
        if rec then rec.merged[l], rec.lists[l] = merged, entries end
        step_bytes.topk = step_bytes.topk + tb
        for r = 1, c do work[r] = work[r] + reads[r] end
        local dtop = (collected.layers[l] or {})[i] or {}
        local function host_i32(list)
          local t = A.new("i32", { 1, k }, "host")
          local p = ffi.cast("int32_t *", t.cd.data)
          for j = 0, k - 1 do p[j] = list[j + 1] or -1 end
          return t
        end
        local dt, mt = host_i32(dtop), host_i32(merged)
        metrics.rows_overlap(ctx, dt, mt, counts, valid)
        local cnt, val = counts:to_table()[1], valid:to_table()[1]
        local recall = val > 0 and cnt / val or nil
        -- coverage: the dense top-k positions inside a part some rank kept
        local inside = 0
        for _, p in ipairs(dtop) do
          if p >= 0 and kept[M.rank_of(p, c, sim.interleave)][math.floor(p / cbs)] then
            inside = inside + 1
          end
        end
        local cover = val > 0 and inside / val or nil
        local dv = A.new("f32", { 1, k }, "host")
        local dvp = ffi.cast("float *", dv.cd.data)
        local vals = dense_values(S, row, l, dtop)
        for j = 0, k - 1 do dvp[j] = vals[j + 1] or -math.huge end
        metrics.rows_mass_recall(ctx, dt, dv, mt, mass)
        local m = ffi.cast("float *", mass.cd.data)[0]
        local la = acc2.layer(l)
        la.rows[#la.rows + 1] = { len = row.len, active = active, recall_at_k = recall,
          candidate_coverage = cover, mass_recall = m == m and m or nil }
      end
    end
    local total, most = 0, 0
    for r = 1, c do total = total + work[r]; most = math.max(most, work[r]) end
    cp.steps = cp.steps + 1
    cp.imbalance = cp.imbalance + (total > 0 and most / (total / c) or 1)
    cp.bytes_scores = cp.bytes_scores + step_bytes.scores
    if step_bytes.cands == nil then cp.no_cands = true end
    cp.bytes_cands = cp.bytes_cands + (step_bytes.cands or 0)
    cp.bytes_topk = cp.bytes_topk + step_bytes.topk
  end)
  A.free()
  if not ok then errors.rethrow(err) end
end

function M.new_cp()
  return { steps = 0, rows = 0, kept_blocks = 0, agree = 0, agree_rows = 0, imbalance = 0,
    bytes_scores = 0, bytes_cands = 0, bytes_topk = 0 }
end

-- finish(row, acc2, cp, sim): the overridden metrics and the cp_* fields into a summary row.
function M.finish(row, acc2, cp, sim)
  local r2 = summary.summarize(acc2, nil)
  for _, key in ipairs(OVERRIDDEN) do
    row[key] = r2[key]
    for l, pl in ipairs(row.per_layer or {}) do
      if r2.per_layer[l] then pl[key] = r2.per_layer[l][key] end
    end
  end
  local steps = math.max(cp.steps, 1)
  row.cp_bytes_block_scores = cp.bytes_scores / steps
  row.cp_bytes_candidates = (not cp.no_cands) and cp.bytes_cands / steps or nil
  row.cp_bytes_topk = cp.bytes_topk / steps
  row.cp_work_imbalance = cp.imbalance / steps
  row.cp_kept_blocks = cp.rows > 0 and cp.kept_blocks / cp.rows or nil
  row.cp_candidate_agreement = cp.agree_rows > 0 and cp.agree / cp.agree_rows or nil
  -- the rank-local consumers read parts as blocks of min(sbk, run) positions: exempt from
  -- the top-k layout rule (SPEC 4), which the single-rank config still passed
  row.cp_layout_rule = "exempt: rank-local consumers"
  for _, f in ipairs(M.FIELDS) do row["context_parallel_sim." .. f] = sim[f] end
  return row
end

return errors.wrap(M)
