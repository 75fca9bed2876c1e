-- idxlab.workload: the structured synthetic workload (docs/workload.md). It turns an
-- experiment's `workload` table into a step's inputs: q, weights and k of the source layer
-- and q/weights of the consumer layers, for a batch of decode and prefill requests, generated
-- by the C library (seeded; the same bits on the CPU and the GPU).
--
--   local workload = require("idxlab.workload")
--   local inputs = workload.generate(ctx, { decode = { rows = 8, context = 32768 },
--     prefill = { { query_len = 64, context_len = 32704 } }, consumer_layers = 4,
--     locality = 2 }, { heads = 32, head_dim = 128 }, 1)
--   ...
--   workload.free(inputs)
--
-- The inputs table (the contract with idxlab.pipeline): q F32 [R,H,D], weights F32 [R,H],
-- k F32 [N,D], q_consumer F32 [L,R,H,D], weights_consumer F32 [L,R,H], n_decode, row_start and
-- context_lens I32 [n_decode], n_prefill, ks and ke I32 [n_prefill], requests (one table per
-- request: kind, k_start, seq_len, query_len, context_len, first_row) and lengths (each row's
-- visible length). Rows: decode rows first, then prefill rows, in request order.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local util = require("idxlab.util")
local Tensor = require("idxlab.tensor")
local Context = require("idxlab.context")
local ffi, C = core.ffi, core.C
local fail = errors.fail

local M = {}

-- The knobs, in the C struct's order: name, kind ("int" or "float"), meaning.
M.knobs = {
  { "sinks", "int", "sink positions at the start of each request" },
  { "sink_strength", "float", "how much every query likes the sinks" },
  { "locality", "float", "how much a query likes the keys near its own position" },
  { "locality_window", "int", "positions between positional anchors (the recent window's scale)" },
  { "topics", "int", "document spans per request, of random lengths" },
  { "topic_strength", "float", "how much a query likes its preferred documents" },
  { "topics_per_query", "int", "documents each query prefers, among those it sees" },
  { "needles", "int", "isolated far positions per request, each wanted by one of its rows" },
  { "needle_strength", "float", "how much that row wants its needle" },
  { "needle_source", "float", "share of needle_strength in the source layer's query (0..1)" },
  { "noise", "float", "query noise, drawn per layer" },
  { "key_noise", "float", "key noise, shared by every layer" },
  { "head_spread", "float", "spread of the per-head strengths around 1" },
  { "weight_spread", "float", "spread of the head weights around their mean" },
  { "layer_correlation", "float",
    "0: consumers' random parts independent of the source's; 1: identical" },
  { "activation_scale", "float", "RMS of the q and k elements outside outlier channels" },
  { "outlier_channels", "int",
    "channels with outlier_scale times larger keys (queries as much smaller)" },
  { "outlier_scale", "float", "the outlier channels' factor" },
}
local knob_kind = {}
for _, k in ipairs(M.knobs) do knob_kind[k[1]] = k[2] end

-- Keys of a synthetic workload table besides the knobs.
local batch_keys = { kind = true, decode = true, prefill = true, consumer_layers = true }

M.default_decode = { rows = 8, context = 32768 }
M.default_prefill = { { query_len = 64, context_len = 32704 } }
M.default_consumer_layers = 4

local is_int = util.is_int

-- The defaults of every knob, from the C library (the one place they are kept).
function M.defaults()
  local p = ffi.new("ixl_workload_params")
  C.ixl_workload_defaults(p)
  local out = {}
  for _, k in ipairs(M.knobs) do
    local v = tonumber(p[k[1]])
    -- floats as the decimal they were written as (0.7, not 0.699999988)
    out[k[1]] = k[2] == "int" and v or tonumber(("%.7g"):format(v))
  end
  return out
end

-- The C params for a workload table: defaults, then the table's knobs. Unknown keys are errors.
local function params_of(spec)
  local p = ffi.new("ixl_workload_params")
  C.ixl_workload_defaults(p)
  for key, v in pairs(spec) do
    local kind = knob_kind[key]
    if kind then
      if kind == "int" then
        if not is_int(v) then fail("workload %s = %s: must be an integer", key, tostring(v)) end
      elseif type(v) ~= "number" then
        fail("workload %s = %s: must be a number", key, tostring(v))
      end
      p[key] = v
    elseif not batch_keys[key] then
      local names = {}
      for _, k in ipairs(M.knobs) do names[#names + 1] = k[1] end
      fail("workload key %s: unknown (batch: kind, decode, prefill, consumer_layers; knobs: %s)",
        tostring(key), table.concat(names, ", "))
    end
  end
  return p
end

local function positive_int(v, what, min)
  if not is_int(v) or v < (min or 1) then
    fail("%s = %s: must be an integer >= %d", what, tostring(v), min or 1)
  end
  return v
end

-- The requests of a workload table, in row order: decode requests, then prefill requests.
-- Each: kind, seq_len (positions), query_len (rows), context_len (positions before the query).
local function requests(spec)
  if type(spec) ~= "table" then
    fail("workload.requests: spec = %s: must be a workload table", tostring(spec))
  end
  local reqs = {}
  local dec, pre = spec.decode, spec.prefill
  if dec == nil and pre == nil then dec, pre = M.default_decode, M.default_prefill end
  if dec ~= nil and dec ~= false then
    if type(dec) ~= "table" then
      fail("workload decode = %s: must be a table {rows = n, context = c} or "
        .. "{contexts = {...}}", tostring(dec))
    end
    for k in pairs(dec) do
      if k ~= "rows" and k ~= "context" and k ~= "contexts" then
        fail("workload decode.%s: unknown (rows, context, contexts)", tostring(k))
      end
    end
    local contexts = {}
    if dec.contexts ~= nil then
      if type(dec.contexts) ~= "table" then
        fail("workload decode.contexts = %s: must be a list of lengths", tostring(dec.contexts))
      end
      if dec.rows ~= nil and dec.rows ~= #dec.contexts then
        fail("workload decode.rows = %s: must equal #decode.contexts (%d)", tostring(dec.rows),
          #dec.contexts)
      end
      for i, c in ipairs(dec.contexts) do
        contexts[i] = positive_int(c, ("workload decode.contexts[%d]"):format(i), 0)
      end
    else
      local rows = positive_int(dec.rows == nil and M.default_decode.rows or dec.rows,
        "workload decode.rows", 0)
      local c = positive_int(dec.context == nil and M.default_decode.context or dec.context,
        "workload decode.context", 0)
      for i = 1, rows do contexts[i] = c end
    end
    -- a context of 0 is an empty row (SPEC 4; its indexer cache is empty): no keys, a zero
    -- q row, and context_len = -1, so the builder's requests form counts it as 0 tokens
    for _, c in ipairs(contexts) do
      reqs[#reqs + 1] = { kind = "decode", seq_len = c, query_len = 1, context_len = c - 1 }
    end
  end
  if pre ~= nil and pre ~= false then
    if type(pre) ~= "table" then
      fail("workload prefill = %s: must be a list of {query_len, context_len} or {requests, "
        .. "query_len, context}", tostring(pre))
    end
    local list = {}
    if pre.requests ~= nil or pre.query_len ~= nil then
      for k in pairs(pre) do
        if k ~= "requests" and k ~= "query_len" and k ~= "context" and k ~= "context_len" then
          fail("workload prefill.%s: unknown (requests, query_len, context, context_len)",
            tostring(k))
        end
      end
      local n = positive_int(pre.requests == nil and 1 or pre.requests,
        "workload prefill.requests", 0)
      local q = positive_int(pre.query_len, "workload prefill.query_len")
      local cl
      if pre.context_len ~= nil then
        if pre.context ~= nil then
          fail("workload prefill: give context or context_len, not both")
        end
        cl = positive_int(pre.context_len, "workload prefill.context_len", 0)
      else
        -- context: the visible length of the request's last row, as for decode
        local c = positive_int(pre.context, "workload prefill.context")
        if c < q then fail("workload prefill.context = %d: must be >= query_len (%d)", c, q) end
        cl = c - q
      end
      for i = 1, n do list[i] = { query_len = q, context_len = cl } end
    else
      for i, r in ipairs(pre) do
        if type(r) ~= "table" then
          fail("workload prefill[%d] = %s: must be a table {query_len, context_len}", i,
            tostring(r))
        end
        for k in pairs(r) do
          if k ~= "query_len" and k ~= "context_len" then
            fail("workload prefill[%d].%s: unknown (query_len, context_len)", i, tostring(k))
          end
        end
        list[i] = {
          query_len = positive_int(r.query_len, ("workload prefill[%d].query_len"):format(i)),
          context_len = positive_int(r.context_len,
            ("workload prefill[%d].context_len"):format(i), 0),
        }
      end
    end
    for _, r in ipairs(list) do
      reqs[#reqs + 1] = { kind = "prefill", seq_len = r.context_len + r.query_len,
        query_len = r.query_len, context_len = r.context_len }
    end
  end
  local k, row = 0, 0
  for _, r in ipairs(reqs) do
    r.k_start, r.first_row = k, row
    k, row = k + r.seq_len, row + r.query_len
  end
  if k >= 2 ^ 31 then
    fail("workload: %d key positions in all: must be below 2^31 (I32 ranges)", k)
  end
  return reqs, k, row
end
M.requests = requests

local function check_spec(spec)
  if spec == nil then spec = {} end
  if type(spec) ~= "table" then fail("workload = %s: must be a table", tostring(spec)) end
  if spec.kind ~= nil and spec.kind ~= "synthetic" then
    fail("workload kind = %s: generate makes synthetic workloads only (replay files go "
      .. "through idxlab.replay)", tostring(spec.kind))
  end
  return spec
end

local function dims_of(cfg)
  if cfg == nil then cfg = {} end
  if type(cfg) ~= "table" then
    fail("config = %s: must be a table (heads, head_dim)", tostring(cfg))
  end
  local H = cfg.heads == nil and 32 or cfg.heads
  local D = cfg.head_dim == nil and 128 or cfg.head_dim
  positive_int(H, "heads")
  positive_int(D, "head_dim")
  return H, D
end

local function c_requests(reqs)
  local cr = ffi.new("ixl_workload_request[?]", math.max(#reqs, 1))
  for i, r in ipairs(reqs) do
    cr[i - 1].k_start = r.k_start
    cr[i - 1].seq_len = r.seq_len
    cr[i - 1].query_len = r.query_len
    cr[i - 1].first_row = r.first_row
  end
  return cr
end

local function check_seed(seed, ctx)
  if seed == nil then seed = ctx and ctx:seed() or 0 end
  if not is_int(seed, 0) then fail("seed = %s: must be an integer in [0, 2^53)", tostring(seed)) end
  return seed
end

-- A failed C call's message as an idxlab error of code "ARG", as every workload refusal is
-- reported (the C status is not part of the workload contract).
local function c_check(ctx_cd, st)
  if st ~= 0 then fail("%s", ffi.string(C.ixl_last_error(ctx_cd))) end
end

-- check(spec, cfg) -> true, or false and the reason: what generate() would refuse for this
-- workload under this (resolved) builder config, found before anything runs: the knobs'
-- ranges (the C rules), the requests, and that the step fits the config (rows <= max_rows,
-- every request within max_model_len). Experiment plans call it for every point.
function M.check(spec, cfg)
  local ok, why = pcall(function()
    spec = check_spec(spec)
    local p = params_of(spec)
    local mctx = Context.default().cd
    c_check(mctx, C.ixl_workload_check(mctx, p))
    local reqs, _, R = requests(spec)
    if spec.consumer_layers ~= nil then
      positive_int(spec.consumer_layers, "workload consumer_layers")
    end
    cfg = cfg or {}
    if type(cfg) ~= "table" then
      fail("workload.check: cfg = %s: must be a config table (config.resolve) or nil",
        tostring(cfg))
    end
    if cfg.head_dim and p.outlier_channels > cfg.head_dim then
      fail("workload outlier_channels = %d: must be <= head_dim (%d)",
        tonumber(p.outlier_channels), cfg.head_dim)
    end
    if cfg.max_rows and R > cfg.max_rows then
      fail("workload: %d rows (decode rows and prefill query rows): more than max_rows = %d", R,
        cfg.max_rows)
    end
    -- the builder counts tokens: a workload's positions are compressed (compress_ratio tokens
    -- each) except a prefill request's query rows, as the pipeline hands them over
    local ratio = cfg.compress_ratio or 1
    for i, r in ipairs(reqs) do
      local tokens = r.kind == "decode" and r.seq_len * ratio or r.context_len * ratio + r.query_len
      if cfg.max_model_len and tokens > cfg.max_model_len then
        fail("workload: %s request %d is %d tokens long (%d positions, compress_ratio %d): more "
          .. "than max_model_len = %d", r.kind, i - 1, tokens, r.seq_len, ratio,
          cfg.max_model_len)
      end
    end
  end)
  if ok then return true end
  -- a probe: the refusal's text is the answer; anything else is a bug and propagates
  if errors.is(why) then return false, "idxlab: " .. why.message end
  errors.rethrow(why)
end

-- generate(ctx, spec, cfg, seed) -> inputs (see the top of this file).
function M.generate(ctx, spec, cfg, seed)
  if not Context.is_context(ctx) then
    fail("workload.generate: first argument must be a context")
  end
  spec = check_spec(spec)
  local H, D = dims_of(cfg)
  local p = params_of(spec)
  c_check(ctx.cd, C.ixl_workload_check(ctx.cd, p))
  local L = spec.consumer_layers == nil and M.default_consumer_layers or spec.consumer_layers
  positive_int(L, "workload consumer_layers")
  seed = check_seed(seed, ctx)
  local reqs, N, R = requests(spec)
  local made = {}
  local function new(dtype, shape)
    local ok, t = pcall(Tensor.new, ctx, dtype, shape)
    if not ok then
      for _, x in ipairs(made) do x:free() end
      fail("%s", errors.message(t))
    end
    made[#made + 1] = t
    return t
  end
  local inputs = {
    q = new("f32", { R, H, D }), weights = new("f32", { R, H }), k = new("f32", { N, D }),
    q_consumer = new("f32", { L, R, H, D }), weights_consumer = new("f32", { L, R, H }),
  }
  local st = C.ixl_workload_generate(ctx.cd, p, c_requests(reqs), #reqs, seed, inputs.q.cd,
    inputs.weights.cd, inputs.k.cd, inputs.q_consumer.cd, inputs.weights_consumer.cd)
  if st ~= 0 then
    local msg = ffi.string(C.ixl_last_error(ctx.cd))
    for _, x in ipairs(made) do x:free() end
    fail("%s", msg)
  end
  -- Row ranges: decode rows see [row_start, row_start + context_len); prefill row j of a
  -- request sees [k_start, k_start + context_len + j + 1) (causal).
  local row_start, context_lens, ks, ke, lengths = {}, {}, {}, {}, {}
  for _, r in ipairs(reqs) do
    if r.kind == "decode" then
      row_start[#row_start + 1] = r.k_start
      context_lens[#context_lens + 1] = r.seq_len
      lengths[#lengths + 1] = r.seq_len
    else
      for j = 0, r.query_len - 1 do
        ks[#ks + 1] = r.k_start
        ke[#ke + 1] = r.k_start + r.context_len + j + 1
        lengths[#lengths + 1] = r.context_len + j + 1
      end
    end
  end
  inputs.n_decode, inputs.n_prefill = #row_start, #ks
  inputs.row_start = new("i32", { #row_start }):from_table(row_start)
  inputs.context_lens = new("i32", { #context_lens }):from_table(context_lens)
  inputs.ks = new("i32", { #ks }):from_table(ks)
  inputs.ke = new("i32", { #ke }):from_table(ke)
  inputs.requests = reqs
  inputs.lengths = lengths
  inputs.seed = seed
  return inputs
end

-- structure(spec, seed, request) -> { topic_starts = {...}, needles = { {pos =, row =}, ... } }:
-- the hidden structure of request `request` (1-based, in row order) of the workload, for tests
-- and plots. Positions and rows are request-local and 0-based.
function M.structure(spec, seed, request)
  spec = check_spec(spec)
  local p = params_of(spec)
  local reqs = requests(spec)
  if not is_int(request) or request < 1 or request > #reqs then
    fail("request = %s: must be in [1, %d]", tostring(request), #reqs)
  end
  seed = check_seed(seed or 0)
  local nt, nn = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
  local maxt, maxn = math.max(tonumber(p.topics), 1), math.max(tonumber(p.needles), 1)
  local ts = ffi.new("int64_t[?]", maxt)
  local np, nr = ffi.new("int64_t[?]", maxn), ffi.new("int64_t[?]", maxn)
  -- no context is given: the default one carries the messages
  local mctx = Context.default().cd
  c_check(mctx, C.ixl_workload_structure(mctx, p, c_requests(reqs), #reqs, seed, request - 1, ts,
    maxt, nt, np, nr, maxn, nn))
  local out = { topic_starts = {}, needles = {} }
  for i = 0, nt[0] - 1 do out.topic_starts[i + 1] = tonumber(ts[i]) end
  for i = 0, nn[0] - 1 do
    out.needles[i + 1] = { pos = tonumber(np[i]), row = tonumber(nr[i]) }
  end
  return out
end

-- Frees every tensor of an inputs table.
function M.free(inputs)
  if type(inputs) ~= "table" then fail("workload.free expects an inputs table") end
  for key, t in pairs(inputs) do
    if Tensor.is_tensor(t) then
      t:free()
      inputs[key] = nil
    end
  end
end

-- workload.random(ctx, opts) -> inputs: unstructured step inputs (Gaussian q and k, uniform
-- (0, 1] weights) from the Philox stream, so the same seed gives the same tensors on either
-- backend. For tests and soak runs, where structure does not matter. opts: heads, lens (a
-- list of row lengths; each row gets its own range of k, in order), decode (true: decode rows
-- with row_start/context_lens; else ragged ks/ke), layers (consumer layers, default 2), seed,
-- extra_k (positions appended to k beyond every row), head_dim (128).
function M.random(ctx, opts)
  if not Context.is_context(ctx) then fail("workload.random: ctx must be an idxlab context") end
  if type(opts) ~= "table" or type(opts.lens) ~= "table" or type(opts.heads) ~= "number" then
    fail("workload.random: opts must give heads (a number) and lens (a list of row lengths)")
  end
  local H, D, L = opts.heads, opts.head_dim or 128, opts.layers or 2
  local R, N = #opts.lens, 0
  local starts = {}
  for i, len in ipairs(opts.lens) do
    if not is_int(len, 0, math.huge) then
      fail("workload.random: lens[%d] = %s: must be a non-negative integer", i, tostring(len))
    end
    starts[i] = N
    N = N + len
  end
  N = math.max(N + (opts.extra_k or 0), 1)
  local seed, offset = opts.seed or 0, 0
  local function gen(shape, normal)
    local t = Tensor.new(ctx, "f32", shape)
    local st = normal and C.ixl_rng_normal(ctx.cd, t.cd, seed, offset, 0, 1)
      or C.ixl_rng_uniform(ctx.cd, t.cd, seed, offset)
    core.check(ctx.cd, st)
    offset = offset + t:numel() -- disjoint draws from one stream
    return t
  end
  local x = {
    q = gen({ R, H, D }, true), weights = gen({ R, H }, false), k = gen({ N, D }, true),
    q_consumer = gen({ L, R, H, D }, true), weights_consumer = gen({ L, R, H }, false),
  }
  local function i32(vals)
    local t = Tensor.new(ctx, "i32", { math.max(#vals, 1) }, "host")
    local p = ffi.cast("int32_t *", t.cd.data)
    for i, v in ipairs(vals) do p[i - 1] = v end
    if ctx:device_kind() == "device" then
      local d = Tensor.new(ctx, "i32", { math.max(#vals, 1) }, "device"):copy_from(t)
      t:free()
      return d
    end
    return t
  end
  local ends = {}
  for i, len in ipairs(opts.lens) do ends[i] = starts[i] + len end
  if opts.decode then
    x.n_decode, x.n_prefill = R, 0
    x.row_start, x.context_lens = i32(starts), i32(opts.lens)
  else
    x.n_decode, x.n_prefill = 0, R
    x.ks, x.ke = i32(starts), i32(ends)
  end
  return x
end

-- The public boundary; check is a probe (true, or false and the reason) and stays unwrapped.
return errors.wrap(M, { "check" })
