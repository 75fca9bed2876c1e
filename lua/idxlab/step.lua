-- idxlab.step: one step of the two-level indexer (SPEC 6): the step's buffers, the checks of
-- its inputs, the preparation (quantization, weights, paging), the production path and the
-- comparison path. The accumulator it fills is idxlab.summary's; measure.lua runs steps for an
-- experiment point.
--
-- A step, for each group of rows (the decode rows, then each prefill chunk the builder plans):
--   production path (timed):  source dense logits (K1/K2, fp32) -> candidate blocks (K3) and
--     the source's own top-k (K6) -> one expansion (K4) -> per consumer layer: sparse logits
--     (K5, bf16) -> top-k over [0, end) (K6) -> remap to positions (K7).
--   comparison path (untimed): per consumer layer, the dense fp32 logits (unrestricted top-k,
--     then masked to the candidate blocks and top-k again) and the dense bf16-reduction logits
--     (masked top-k; gathered at the sparse positions and compared bitwise with K5).
-- The production path issues no host synchronisation between its stages; the timers are read
-- after it. Buffers are sized on the first step and reused, so later steps of the same or
-- smaller shapes allocate nothing (the context's counters prove it).
--
-- Timing (SPEC 6). Each group's production path runs stage by stage with an event (CPU: the
-- clock) between stages: the time_<stage>_us, and their sum over groups, time_step_eager_us,
-- which counts the host's launch latency between kernels. On a CUDA context the production
-- path of the whole step (the decode group and every prefill chunk, in order, the chunks
-- reusing one logits buffer) is then captured as ONE CUDA graph (never timed; nothing is
-- allocated or synchronised under capture) and replayed back to back: time_step_us is the
-- median replay. On the CPU there is no graph and time_step_us is the eager time. The metrics
-- come from the eager run. The comparison path also times the masked-dense path per consumer
-- layer (dense bf16 logits over the whole context, the candidate mask, top-k), the numerator
-- of speedup_sparse.
--
-- The graph is captured once per step shape, not once per step: the context holds one graph,
-- and a step whose launches would be the very ones of the graph the context holds (the same
-- Step object, hence config and pins; the same variants; every tensor argument at the same
-- address with the same shape and strides; the same groups; the context's op scratch not
-- grown since) replays it without a capture (times.captured = false). Steps of one shape in
-- a row -- the runner's warm-up and a point's repeats, with one Step reused (idxlab.measure),
-- or a replay file's steps -- so capture once. The step copies the small index inputs
-- (context_lens, ks, ke) into its own buffers, so the graph never reads the caller's tensors
-- (pre-quantized codes excepted: their addresses are part of the key).
--
-- Kernel variants (idxlab.variants): cfg.variant = {logits = "v2", ...} (optional) pins a
-- variant per family on the context for the duration of each step (the context's own pins
-- come back after it, so a pinned step never leaks into the next one); without cfg.variant a
-- step runs whatever the context has pinned, else each family's default. A step's result
-- names, per family it ran, the variant that ran.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local config = require("idxlab.config")
local formats = require("idxlab.formats")
local logits = require("idxlab.logits")
local sel = require("idxlab.select") -- not `select`: that is Lua's builtin
local Builder = require("idxlab.builder")
local Context = require("idxlab.context")
local Tensor = require("idxlab.tensor")
local util = require("idxlab.util")
local interrupt = require("idxlab.interrupt")
local ffi = core.ffi

local variants = require("idxlab.variants")
local metrics = require("idxlab.metrics")

local fail = errors.fail

local M = {}

-- Each Step's serial number: part of its graph key, so a graph is never taken for another
-- Step's (a freed Step's buffers may come back at the same addresses in a new one).
local serial = 0
-- The key of the graph each context holds (set by the capture that made it), by context.
local graph_of = setmetatable({}, { __mode = "k" })

-- A step times 5 stages for the source layer and the expansion and 3 per consumer layer, in
-- the context's 256 timer slots: at most 83 consumer layers.
M.MAX_CONSUMER_LAYERS = math.floor((256 - 5) / 3)

-- Issue 14's fused K3: with block_score max, the source layer's K1/K2 emit the block scores
-- where the logits variant that runs can (the registry says: logits v1), and K3 is one top-T
-- over them; the row lists candidate_select in `fused`. Off by default (IXL_FUSED_K3=1, or
-- setting this true, turns it on; the candidates are the same either way): on the H200 the
-- emission cost more than the unfused K3 (64x131072, cbs 8, T 2048: K2 +143 to +161 us, the
-- top-T 36 us, against 49 us unfused); the one GPU replay whose graph capture failed with it
-- on (cudaErrorStreamCaptureInvalidated, BENCHMARKS.md) points at a finalizer run under
-- capture, which capture_groups now prevents for every step.
M.fuse_candidate_select = os.getenv("IXL_FUSED_K3") == "1"
-- K6's largest k (ixl_topk): a larger T runs the unfused K3
local TOPK_MAX_K = 4096

local Step = {}
Step.__index = Step
M.Step = Step

-- cfg without its `variant` table (not a builder field), and the checked pins.
local function split_variant(cfg, fn)
  if cfg.variant == nil then return cfg, nil end
  local pins = cfg.variant
  if type(pins) ~= "table" then
    fail("%s: config.variant must be a table of family = variant name, got %s", fn, type(pins))
  end
  for family, name in pairs(pins) do
    if type(family) ~= "string" or type(name) ~= "string" then
      fail("%s: config.variant.%s = %s: a variant name must be a string", fn, tostring(family),
        tostring(name))
    end
  end
  local rest = {}
  for k, v in pairs(cfg) do if k ~= "variant" then rest[k] = v end end
  return rest, pins
end
M.split_variant = split_variant

-- fn(...) with `pins` set on the context, in a fixed order (families sorted, so a refusal
-- names the same family every run); the context's previous pins are restored afterwards,
-- also when fn fails.
local function with_pins(ctx, pins, fn, ...)
  if not pins then return fn(...) end
  local families = util.sorted_keys(pins)
  local before = {}
  for _, family in ipairs(families) do before[family] = variants.get(ctx, family) end
  local args = { n = select("#", ...), ... }
  local ok, res = pcall(function()
    for _, family in ipairs(families) do variants.set(ctx, family, pins[family]) end
    return fn(unpack(args, 1, args.n))
  end)
  for _, family in ipairs(families) do
    -- after a failure, that failure is the one to report, not a second one from restoring
    local rok, rerr = pcall(variants.set, ctx, family, before[family])
    if ok and not rok then errors.rethrow(rerr) end
  end
  if not ok then errors.rethrow(res) end
  return res
end

-- {family = the variant that ran} over the registry's families, read after the step: the
-- variant of the context's last op of each family (absent for a family it never ran).
local function variants_ran(ctx)
  local out = {}
  for _, family in ipairs(variants.families()) do out[family] = variants.ran(ctx, family) end
  return out
end

-- step.new(ctx, cfg) -> Step. cfg: a builder config table (validated here), plus the optional
-- variant pins cfg.variant.
function M.new(ctx, cfg)
  if not Context.is_context(ctx) then fail("pipeline.new: first argument must be a context") end
  if type(cfg) ~= "table" then fail("pipeline.new: config must be a table") end
  local fields, pins = split_variant(cfg, "pipeline.new")
  -- describe() runs every engine-start check and resolves "auto" values to numbers
  local resolved = config.describe(fields).config
  serial = serial + 1
  return setmetatable({ ctx = ctx, cfg = resolved, variant = pins, bufs = {}, builder = nil,
    serial = serial }, Step)
end

-- A named buffer of at least `shape`'s elements, returned as a view of exactly `shape`.
-- Reallocates only when a step needs more than any step before.
-- device: "host" for a host buffer, nil for the context's own memory.
function Step:buf(name, dtype, shape, device)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local key = device == "host" and ("host:" .. name) or name
  local b = self.bufs[key]
  if not b or b.dtype ~= dtype or b.cap < n then
    if b then b.t:free() end
    local cap = math.max(n, 1)
    b = { t = Tensor.new(self.ctx, dtype, { cap }, device), dtype = dtype, cap = cap }
    self.bufs[key] = b
  end
  return b.t:view(shape, 0)
end

-- A host copy of t (t itself when it is host memory), in a reused host buffer.
function Step:host(t, name)
  if t:device() == "host" then return t end
  local h = self:buf(name, t:dtype(), t:shape(), "host")
  h:copy_from(t)
  return h
end

function Step:free()
  for _, b in pairs(self.bufs) do b.t:free() end
  self.bufs = {}
  if self.builder then self.builder:free() end
  self.builder = nil
end

local rows_view, layer_view = util.rows_view, util.layer_view

-- Reads a small I32 tensor into a 0-based Lua list; a device tensor goes through one of the
-- step's reused host buffers (named `tag`), so reading allocates nothing after step one.
local function i32_list(step, t, tag)
  local h = step:host(t, "inputs_" .. tag)
  local p = ffi.cast("int32_t *", h.cd.data)
  local out = {}
  for i = 0, h:numel() - 1 do out[i] = p[i] end
  return out
end

local function shape_str(s) return table.concat(s, ", ") end

-- Checks the inputs table (the README's "Replay files" section and "One step from Lua")
-- against the config; returns the row lengths (host Lua list) and sizes.
local function check_inputs(step, cfg, inputs)
  if type(inputs) ~= "table" then fail("step inputs must be a table") end
  -- pre-quantized tensors (q_codes, k_codes, q_consumer_codes) stand in for q, k, q_consumer
  local need = {
    { "q", "q_codes" }, { "weights" }, { "k", "k_codes" }, { "q_consumer", "q_consumer_codes" },
    { "weights_consumer" },
  }
  for _, alts in ipairs(need) do
    local found = false
    for _, name in ipairs(alts) do if Tensor.is_tensor(inputs[name]) then found = true end end
    if not found then
      fail("step inputs: %s is missing or not a tensor", table.concat(alts, " or "))
    end
  end
  local qs = (inputs.q or inputs.q_codes):shape()
  local R, H, D = qs[1], qs[2], cfg.head_dim
  if #qs ~= 3 then fail("q: %d dims, expected [R, H, D]", #qs) end
  if H ~= cfg.heads then fail("q: shape[2] = %d, expected heads = %d", H, cfg.heads) end
  if inputs.q and qs[3] ~= D then fail("q: shape[3] = %d, expected head_dim = %d", qs[3], D) end
  local nd, np = inputs.n_decode or 0, inputs.n_prefill or 0
  if nd + np ~= R then
    fail("step inputs: n_decode (%d) + n_prefill (%d) = %d rows, but q has %d", nd, np, nd + np,
      R)
  end
  local qc = (inputs.q_consumer or inputs.q_consumer_codes):shape()
  if #qc ~= 4 or qc[2] ~= R or qc[3] ~= H or (inputs.q_consumer and qc[4] ~= D) then
    fail("q_consumer: shape {%s}, expected [L, %d, %d, %d]", shape_str(qc), R, H, D)
  end
  local wc = inputs.weights_consumer:shape()
  if #wc ~= 3 or wc[1] ~= qc[1] or wc[2] ~= R or wc[3] ~= H then
    fail("weights_consumer: shape {%s}, expected [%d, %d, %d]", shape_str(wc), qc[1], R, H)
  end
  local ws = inputs.weights:shape()
  if #ws ~= 2 or ws[1] ~= R or ws[2] ~= H then
    fail("weights: shape {%s}, expected [%d, %d]", shape_str(ws), R, H)
  end
  local ks = (inputs.k or inputs.k_codes):shape()
  if #ks ~= 2 or (inputs.k and ks[2] ~= D) then
    fail("k: shape {%s}, expected [N, %d]", shape_str(ks), D)
  end
  local N = ks[1]
  local lens, starts = {}, {}
  if nd > 0 then
    local cl = i32_list(step, inputs.context_lens, "context_lens")
    local rs = i32_list(step, inputs.row_start, "row_start")
    for i = 0, nd - 1 do
      local len, start = cl[i], rs[i]
      if len < 0 or start < 0 or start + len > N then
        fail("decode row %d: row_start %d + context_len %d must lie within k's %d rows", i, start,
          len, N)
      end
      lens[#lens + 1] = len
      starts[#starts + 1] = start
    end
  end
  if np > 0 then
    local ksp = i32_list(step, inputs.ks, "ks")
    local kep = i32_list(step, inputs.ke, "ke")
    for i = 0, np - 1 do
      local a, b = ksp[i], kep[i]
      if a < 0 or b < a or b > N then
        fail("prefill row %d: ks = %d, ke = %d: need 0 <= ks <= ke <= N (%d)", i, a, b, N)
      end
      -- checked here for both backends: the device expansion cannot refuse a row itself
      if cfg.ks_mode == "aligned" and b > a and a % cfg.sparse_block_kv ~= 0 then
        fail("prefill row %d: ks = %d is not a multiple of sparse_block_kv (%d), which ks_mode"
          .. " aligned requires for a non-empty row", i, a, cfg.sparse_block_kv)
      end
      lens[#lens + 1] = b - a
      starts[#starts + 1] = a
    end
  end
  return { R = R, H = H, D = D, N = N, L = qc[1], nd = nd, np = np, lens = lens,
    starts = starts }
end

-- The builder batch for these inputs: decode requests as given; prefill requests from
-- inputs.requests when present, else one single-row request per prefill row.
local function make_batch(cfg, inputs, sz, block_table)
  local ratio = cfg.compress_ratio
  local batch = { decode = {}, prefill = {} }
  for i = 1, sz.nd do
    batch.decode[i] = { context_len = sz.lens[i] * ratio }
  end
  batch.decode_block_table = block_table
  local reqs = inputs.requests
  local have = false
  if reqs then
    for _, rq in ipairs(reqs) do
      if rq.kind == "prefill" then
        have = true
        batch.prefill[#batch.prefill + 1] = { query_len = rq.query_len,
          context_len = rq.context_len * ratio }
      end
    end
  end
  if not have then
    for i = sz.nd + 1, sz.nd + sz.np do
      local len = sz.lens[i]
      batch.prefill[#batch.prefill + 1] = { query_len = 1,
        context_len = math.max(len - 1, 0) * ratio }
    end
  end
  return batch
end

-- Quantizes the step's tensors into reused buffers and pages the decode rows. Returns the
-- prepared tensors (prep): codes, scales, weights, per-layer ones, pages, block table, lens.
function Step:prepare(inputs, sz)
  local ctx, cfg = self.ctx, self.cfg
  local fmt, quant = cfg.kv_format, cfg.quantizer
  local vb = formats.value_bytes(fmt)
  local sdt = formats.scale_dtype(fmt)
  local R, H, L = sz.R, sz.H, sz.L
  local prep = {}
  local function q_into(role, x, codes, scales)
    formats.quantize(ctx, fmt, quant, role, x, codes, scales)
  end
  if inputs.k_codes then
    prep.k_codes, prep.k_scales = inputs.k_codes, inputs.k_scales
  else
    prep.k_codes = self:buf("k_codes", "u8", { sz.N, vb })
    prep.k_scales = self:buf("k_scales", sdt, { sz.N })
    q_into("k", inputs.k, prep.k_codes, prep.k_scales)
  end
  if inputs.q_codes then
    prep.q_codes, prep.q_scales = inputs.q_codes, inputs.q_scales
  else
    prep.q_codes = self:buf("q_codes", "u8", { R, H, vb })
    prep.q_scales = self:buf("q_scales", sdt, { R, H })
    q_into("q", inputs.q, prep.q_codes, prep.q_scales)
  end
  -- fp8 folds its per-(row, head) Q scales into the weights; the MX formats keep them
  local function weights(w, qs, name)
    local wd = self:buf(name .. "_dense", "f32", { R, H })
    local ws = self:buf(name .. "_sparse", "bf16", { R, H })
    formats.prepare_weights(ctx, fmt, w, fmt == "fp8" and qs or nil, wd, ws)
    return wd, ws
  end
  prep.w_dense, prep.w_sparse = weights(inputs.weights, prep.q_scales, "w")
  prep.layers = {}
  for l = 0, L - 1 do
    local ly = {}
    if inputs.q_consumer_codes then
      ly.q_codes = layer_view(inputs.q_consumer_codes, l)
      ly.q_scales = layer_view(inputs.q_consumer_scales, l)
    else
      ly.q_codes = self:buf("q_codes_" .. l, "u8", { R, H, vb })
      ly.q_scales = self:buf("q_scales_" .. l, sdt, { R, H })
      q_into("q", layer_view(inputs.q_consumer, l), ly.q_codes, ly.q_scales)
    end
    ly.w_dense, ly.w_sparse = weights(layer_view(inputs.weights_consumer, l), ly.q_scales,
      "w_" .. l)
    prep.layers[l + 1] = ly
  end
  -- decode rows read a paged cache: page each row's keys into its own pages
  if sz.nd > 0 then
    local P = cfg.page_size
    local max_pages, total = 0, 0
    for i = 1, sz.nd do
      local np = math.ceil(sz.lens[i] / P)
      max_pages = math.max(max_pages, np)
      total = total + np
    end
    max_pages = math.max(max_pages, 1)
    prep.pages = self:buf("pages", "u8", { math.max(total, 1), formats.page_stride(fmt, P) })
    local bth = self:buf("block_table", "i32", { sz.nd, max_pages }, "host")
    local bp = ffi.cast("int32_t *", bth.cd.data)
    local next_page = 0
    for i = 1, sz.nd do
      local np = math.ceil(sz.lens[i] / P)
      for j = 1, max_pages do
        local v = -1
        if j <= np then v = next_page; next_page = next_page + 1 end
        bp[(i - 1) * max_pages + j - 1] = v
      end
    end
    prep.block_table = bth
    if ctx:device_kind() == "device" then
      prep.block_table = self:buf("block_table", "i32", { sz.nd, max_pages })
      prep.block_table:copy_from(bth)
    end
    for i = 1, sz.nd do
      local np = math.ceil(sz.lens[i] / P)
      if np > 0 then
        local ids = prep.block_table:view({ np }, (i - 1) * max_pages)
        formats.write_pages(ctx, fmt, prep.k_codes, prep.k_scales, sz.starts[i], sz.lens[i],
          prep.pages, P, ids)
      end
    end
  end
  -- the index inputs the production path reads, in the step's own buffers (see the header)
  local function own(name)
    local t = inputs[name]
    if not Tensor.is_tensor(t) then return nil end
    local b = self:buf("in_" .. name, "i32", t:shape())
    b:copy_from(t)
    return b
  end
  if sz.nd > 0 then prep.context_lens = own("context_lens") end
  if sz.np > 0 then prep.ks, prep.ke = own("ks"), own("ke") end
  -- per-row lengths on the context's device
  local lh = self:buf("lens", "i32", { math.max(R, 1) }, "host")
  local lp = ffi.cast("int32_t *", lh.cd.data)
  for i = 1, R do lp[i - 1] = sz.lens[i] end
  prep.lens = lh
  if ctx:device_kind() == "device" then
    prep.lens = self:buf("lens", "i32", { math.max(R, 1) })
    prep.lens:copy_from(lh)
  end
  return prep
end

-- The groups of rows of a step: the decode group, then each prefill chunk.
local function groups_of(step)
  local out = {}
  if step.decode then out[#out + 1] = step.decode end
  for _, ch in ipairs(step.chunks or {}) do out[#out + 1] = ch end
  return out
end

-- The dense logits of a group's rows into out ([n, maxlen]): the paged cache for the decode
-- group, the ragged keys (compressed layout) for a prefill chunk. The production path (the
-- source layer, fp32) and the comparison path (each consumer, fp32 and bf16) both use it.
-- bs: K3's block scores to emit where the variant can (logits.dense's option), or nil.
-- -> whether they were emitted.
local function dense_logits(ctx, G, qk, w, reduction, out, bs)
  local _, emitted
  if G.decode then
    _, emitted = logits.dense_paged(ctx, qk, w, G.row_ke, G.block_table,
      { reduction = reduction, out = out, max_len = G.maxlen, block_scores = bs })
  else
    _, emitted = logits.dense(ctx, qk, w, G.row_ks, G.row_ke, { layout = "compressed",
      clean = true, reduction = reduction, out = out, max_len = G.maxlen, block_scores = bs })
  end
  return emitted
end

-- One group's production path. Records timers (nil under graph capture: no timers); returns
-- the per-group state the comparison path needs.
function Step:production(g, gi, prep, sz, timers)
  local ctx, cfg = self.ctx, self.cfg
  local r0, n = g.token_start, g.token_end - g.token_start
  local T, cbs = cfg.candidate_topk_blocks, cfg.candidate_block_size
  local sbk, k = cfg.sparse_block_kv, cfg.index_topk
  local nsc = T * cbs
  local maxlen = 0
  for i = r0 + 1, r0 + n do maxlen = math.max(maxlen, sz.lens[i]) end
  maxlen = math.max(maxlen, 1)
  local decode = g.is_decode
  if timers and sz.L > M.MAX_CONSUMER_LAYERS then
    fail("%d consumer layers: the step's timers hold at most %d", sz.L, M.MAX_CONSUMER_LAYERS)
  end
  local G = { r0 = r0, n = n, maxlen = maxlen, decode = decode }
  local qk = {
    q_codes = rows_view(prep.q_codes, r0, n),
    -- fp8: the Q scale is folded into the weights
    q_scales = cfg.kv_format ~= "fp8" and rows_view(prep.q_scales, r0, n) or nil,
    kv_format = cfg.kv_format,
  }
  if decode then
    qk.k_pages, qk.page_size = prep.pages, cfg.page_size
    G.row_ks = nil
    G.row_ke = rows_view(prep.context_lens, r0, n)
    G.block_table = rows_view(prep.block_table, r0, n)
  else
    qk.k_codes, qk.k_scales = prep.k_codes, prep.k_scales
    G.row_ks = rows_view(prep.ks, r0 - sz.nd, n)
    G.row_ke = rows_view(prep.ke, r0 - sz.nd, n)
  end
  G.qk = qk
  G.lens = rows_view(prep.lens, r0, n)
  G.w_src = rows_view(prep.w_dense, r0, n)
  G.src_logits = self:buf("src_logits", "f32", { n, maxlen })
  G.cand = self:buf("cand", "i32", { n, T })
  G.src_topk = self:buf("src_topk", "i32", { n, k })
  G.sparse_ids, G.end_ = g.sparse_ids, g["end"]
  local slot = 0
  local function mark(name)
    if not timers then return end
    ctx:timer_record(slot)
    timers[#timers + 1] = { group = gi, name = name, slot = slot }
    slot = slot + 1
    -- Ctrl-C in the REPL stops the step here, after the kernel in flight (never under capture)
    interrupt.check()
  end
  mark("start")
  local bs
  -- (asked on CUDA only: no CPU variant emits, so a CPU step allocates nothing for them)
  if M.fuse_candidate_select and (cfg.block_score or "max") == "max" and T <= TOPK_MAX_K
    and ctx:backend() == "cuda" then
    bs = { cbs = cbs, nblocks = self:buf("src_nblocks", "i32", { n }),
      scores = self:buf("src_bscores", "f32", { n, math.ceil(maxlen / cbs) }) }
  end
  -- fused K3: the block scores come with the logits, and the top-T over them is timed with
  -- them (the fused stage reports 0, SPEC 6)
  G.fused_k3 = dense_logits(ctx, G, qk, G.w_src, "fp32", G.src_logits, bs)
  if G.fused_k3 then
    sel.topk(ctx, bs.scores, nil, bs.nblocks, T, true, G.cand)
    mark("dense_logits")
  else
    mark("dense_logits")
    sel.candidates(ctx, G.src_logits, G.lens, cbs, T, cfg.block_score, G.cand)
    mark("candidate_select")
  end
  sel.topk(ctx, G.src_logits, nil, G.lens, k, false, G.src_topk)
  mark("source_topk")
  -- K7 fused into K6's store where the select variant that ran has it (the registry says:
  -- select v2): the remap stage then reports 0 and the row lists it in `fused` (SPEC 6)
  G.fused = variants.fuses("select", variants.ran(ctx, "select")).remap == true
  sel.expand(ctx, G.cand, G.row_ks, G.row_ke, cbs, sbk, cfg.ks_mode, G.sparse_ids, G.end_)
  mark("expand")
  G.layers = {}
  for l = 1, sz.L do
    local ly = prep.layers[l]
    local lqk = {}
    for kk, v in pairs(qk) do lqk[kk] = v end
    lqk.q_codes = rows_view(ly.q_codes, r0, n)
    lqk.q_scales = ly.q_scales and cfg.kv_format ~= "fp8" and rows_view(ly.q_scales, r0, n)
      or nil
    local S = self:buf("sparse_" .. l, "bf16", { n, nsc })
    local pos = self:buf("topk_pos_" .. l, "i32", { n, k })
    logits.sparse(ctx, lqk, rows_view(ly.w_sparse, r0, n), G.row_ks, G.row_ke, G.block_table,
      G.sparse_ids, sbk, cfg.ks_mode, S)
    mark("sparse_logits_" .. l)
    if G.fused then
      sel.topk_remap(ctx, S, nil, G.end_, k, false, G.sparse_ids, G.row_ks, sbk, pos)
      mark("topk_" .. l)
    else
      local cols = l == 1 and g.col_indices or self:buf("cols_" .. l, "i32", { n, k })
      sel.topk(ctx, S, nil, G.end_, k, false, cols)
      mark("topk_" .. l)
      sel.remap(ctx, cols, G.sparse_ids, G.row_ks, sbk, pos)
      mark("remap_" .. l)
    end
    G.layers[l] = { qk = lqk, S = S, pos = pos,
      w_dense = rows_view(ly.w_dense, r0, n), w_sparse = rows_view(ly.w_sparse, r0, n) }
  end
  return G
end

-- Reads the group's timers into per-stage microseconds.
local function read_timers(ctx, timers)
  local t = { layers = {} }
  for i = 2, #timers do
    local us = ctx:timer_elapsed_us(timers[i - 1].slot, timers[i].slot)
    local name = timers[i].name
    local stage, l = name:match("^(.-)_(%d+)$")
    if stage and (stage == "sparse_logits" or stage == "topk" or stage == "remap") then
      l = tonumber(l)
      t.layers[l] = t.layers[l] or {}
      t.layers[l][stage] = (t.layers[l][stage] or 0) + us
    else
      t[name] = (t[name] or 0) + us
    end
  end
  t.total = ctx:timer_elapsed_us(timers[1].slot, timers[#timers].slot)
  return t
end

-- The share counts[r] / valid[r] of each row with valid rows, nil for the others (1-based).
local function shares(n, cp, vp)
  local out = {}
  for r = 0, n - 1 do out[r + 1] = vp[r] > 0 and cp[r] / vp[r] or nil end
  return out
end

local iota_cache = setmetatable({}, { __mode = "k" })

-- The comparison path of one group: per-row statistics into `acc` (an idxlab.summary
-- accumulator), outputs into `keep`, and per layer the masked-dense path's time (the median
-- of `iters` runs after `warmup` untimed ones; the last run's outputs are the ones compared)
-- into acc.layer(l).time.time_masked_dense_us. Its timers reuse the production's slots 0-3,
-- which have been read by then.
function Step:compare(G, sz, acc, keep, warmup, iters)
  local ctx, cfg = self.ctx, self.cfg
  warmup, iters = warmup or 0, iters or 1
  local n, maxlen, r0 = G.n, G.maxlen, G.r0
  local T, cbs = cfg.candidate_topk_blocks, cfg.candidate_block_size
  local sbk, k = cfg.sparse_block_kv, cfg.index_topk
  local nsc = T * cbs
  local function host(t, name) return self:host(t, name) end
  local cand_h = host(G.cand, "cand")
  local end_h = host(G.end_, "end")
  -- positions of every sparse column, for the bitwise comparison with the dense bf16 logits
  local iota = self:buf("iota", "i32", { n, nsc })
  if (iota_cache[iota.base] or 0) < n * nsc then
    local ih = iota:device() == "host" and iota or self:buf("iota", "i32", { n, nsc }, "host")
    local p = ffi.cast("int32_t *", ih.cd.data)
    for r = 0, n - 1 do for c = 0, nsc - 1 do p[r * nsc + c] = c end end
    if ih ~= iota then iota:copy_from(ih) end
    iota_cache[iota.base] = n * nsc
  end
  local spos = self:buf("sparse_pos", "i32", { n, nsc })
  sel.remap(ctx, iota, G.sparse_ids, G.row_ks, sbk, spos)
  -- the outputs the collector takes (keep.wants, when it says, else all), each copied to the
  -- host only when taken
  local function wants(name) return keep and (not keep.wants or keep.wants[name]) end
  if wants("dense_logits") then
    keep.put("dense_logits", host(G.src_logits, "src_logits"), r0, n, maxlen)
  end
  if wants("cand_blocks") then keep.put("cand_blocks", cand_h, r0, n) end
  if wants("sparse_ids") then keep.put("sparse_ids", host(G.sparse_ids, "sparse_ids"), r0, n) end
  if wants("end") then keep.put("end", end_h, r0, n) end
  if wants("source_topk_pos") then
    keep.put("source_topk_pos", host(G.src_topk, "src_topk"), r0, n)
  end
  local D = self:buf("cmp_dense", "f32", { n, maxlen })
  local Db = self:buf("cmp_dense_bf16", "bf16", { n, maxlen })
  local dtop = self:buf("cmp_dense_topk", "i32", { n, k })
  local mtop = self:buf("cmp_masked_topk", "i32", { n, k })
  local btop = self:buf("cmp_masked_bf16_topk", "i32", { n, k })
  local dvals = self:buf("cmp_dense_vals", "f32", { n, k })
  local gath = self:buf("cmp_gathered", "bf16", { n, nsc })
  local counts = self:buf("st_counts", "i32", { n }, "host")
  local valid = self:buf("st_valid", "i32", { n }, "host")
  local mass = self:buf("st_mass", "f32", { n }, "host")
  local mism = self:buf("st_mism", "i32", { n }, "host")
  local cp = ffi.cast("int32_t *", counts.cd.data)
  local vp = ffi.cast("int32_t *", valid.cd.data)
  local mp = ffi.cast("float *", mass.cd.data)
  local active_len = T * cbs
  for l, ly in ipairs(G.layers) do
    local qk = ly.qk
    dense_logits(ctx, G, qk, ly.w_dense, "fp32", D)
    sel.topk(ctx, D, nil, G.lens, k, false, dtop)
    metrics.gather_cols(ctx, D, dtop, dvals)
    sel.mask_candidates(ctx, D, G.lens, G.cand, cbs)
    sel.topk(ctx, D, nil, G.lens, k, false, mtop)
    -- the masked-dense path (timed) around the gathering of its unmasked logits (not timed,
    -- last run only): the same op sequence as an untimed run, so the results are the same
    local md = {}
    for it = 1, warmup + iters do
      ctx:timer_record(0)
      dense_logits(ctx, G, qk, ly.w_sparse, "bf16", Db)
      ctx:timer_record(1)
      if it == warmup + iters then metrics.gather_cols(ctx, Db, spos, gath) end
      ctx:timer_record(2)
      sel.mask_candidates(ctx, Db, G.lens, G.cand, cbs)
      sel.topk(ctx, Db, nil, G.lens, k, false, btop)
      ctx:timer_record(3)
      if it > warmup then
        md[#md + 1] = ctx:timer_elapsed_us(0, 1) + ctx:timer_elapsed_us(2, 3)
      end
    end
    local pos_h, dtop_h = host(ly.pos, "pos"), host(dtop, "dtop")
    local mtop_h, btop_h = host(mtop, "mtop"), host(btop, "btop")
    local S_h, gath_h, dvals_h = host(ly.S, "S"), host(gath, "gath"), host(dvals, "dvals")
    local la = acc.layer(l)
    la.time.time_masked_dense_us = (la.time.time_masked_dense_us or 0) + util.median(md)
    local dd, sq = metrics.rows_bf16_compare(ctx, S_h, gath_h, end_h, mism)
    local mmp = ffi.cast("int32_t *", mism.cd.data)
    for r = 0, n - 1 do la.mismatches = la.mismatches + mmp[r] end
    la.sum_dd, la.sum_sq = la.sum_dd + dd, la.sum_sq + sq
    local function per_row(a, b)
      metrics.rows_overlap(ctx, a, b, counts, valid)
      return shares(n, cp, vp)
    end
    local recall = per_row(dtop_h, pos_h)
    local agree = per_row(pos_h, btop_h)
    local agree32 = per_row(pos_h, mtop_h)
    metrics.rows_in_candidates(ctx, dtop_h, cand_h, cbs, counts)
    metrics.rows_overlap(ctx, dtop_h, dtop_h, valid)
    local cover = shares(n, cp, vp)
    metrics.rows_mass_recall(ctx, dtop_h, dvals_h, pos_h, mass)
    for r = 0, n - 1 do
      local len = sz.lens[r0 + r + 1]
      local m = mp[r]
      la.rows[#la.rows + 1] = {
        len = len, active = len > active_len, recall_at_k = recall[r + 1],
        selection_agreement = agree[r + 1], fp32_selection_agreement = agree32[r + 1],
        candidate_coverage = cover[r + 1], mass_recall = m == m and m or nil,
      }
    end
    if wants("sparse_logits") then keep.put_layer("sparse_logits", l, S_h, r0, n) end
    if wants("topk_pos") then keep.put_layer("topk_pos", l, pos_h, r0, n) end
    if wants("masked_topk_pos") then keep.put_layer("masked_topk_pos", l, mtop_h, r0, n) end
    if wants("dense_topk_pos") then keep.put_layer("dense_topk_pos", l, dtop_h, r0, n) end
  end
end

local SOURCE_STAGES = { "dense_logits", "candidate_select", "source_topk", "expand", "total" }
local LAYER_STAGES = { "sparse_logits", "topk", "remap" }

-- The step's inputs checked and prepared: (sizes, prepared tensors, the builder's step).
local function start(self, inputs)
  local ctx, cfg = self.ctx, self.cfg
  local sz = check_inputs(self, cfg, inputs)
  local prep = self:prepare(inputs, sz)
  if not self.builder then self.builder = Builder(ctx, cfg) end
  local step = self.builder:build(make_batch(cfg, inputs, sz, prep.block_table))
  return sz, prep, step
end

-- The production path of every group of a step, in order, captured as one CUDA graph on the
-- context's stream (the context keeps it for graph_launch). The buffers must already be sized
-- (an eager run), so nothing is allocated under capture, and no stage synchronises. -> the
-- groups' states, whose tensors the graph writes.
local function capture_groups(self, groups, prep, sz)
  local ctx = self.ctx
  local states = {}
  ctx:sync()
  -- no Lua finalizer may run under capture: a dead context's ixl_ctx_free (cudaGraphExecDestroy,
  -- cudaStreamDestroy) or a dead tensor's cudaFree is an unsafe call, which invalidates it
  collectgarbage("collect")
  local gc_on = collectgarbage("isrunning")
  collectgarbage("stop")
  local ok_begin, err_begin = pcall(ctx.graph_begin, ctx)
  if not ok_begin then
    if gc_on then collectgarbage("restart") end
    errors.rethrow(err_begin)
  end
  local ok, err = pcall(function()
    for gi, g in ipairs(groups) do states[gi] = self:production(g, gi, prep, sz, nil) end
  end)
  -- the capture always ends, so a failure inside it leaves the stream usable; that failure,
  -- not graph_end's, is the one raised
  local ok_end, err_end = pcall(ctx.graph_end, ctx)
  if gc_on then collectgarbage("restart") end
  if not ok then errors.rethrow(err) end
  if not ok_end then errors.rethrow(err_end) end
  return states
end

-- What a captured graph's launches depend on, as one string: the Step (its serial: config,
-- pins), the variants the eager run picked, the context's op scratch (grow-only: a growth
-- moves a slot), and every group's scalars and tensors (address, dtype, shape, strides) as
-- the production path passes them -- the eager run's states, whose views the capture makes
-- again. Two steps with one key issue the same launches with the same arguments.
local function key_of(v, out, depth)
  if Tensor.is_tensor(v) then
    local cd = v.cd
    out[#out + 1] = ("%s:%d:%d"):format(tostring(ffi.cast("uintptr_t", cd.data)),
      tonumber(cd.dtype), tonumber(cd.device))
    for i = 0, cd.ndim - 1 do
      out[#out + 1] = ("%d/%d"):format(tonumber(cd.shape[i]), tonumber(cd.stride[i]))
    end
  elseif type(v) == "table" then
    if depth > 4 then fail("step: graph key: tables nested deeper than 4") end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    out[#out + 1] = "{"
    for _, k in ipairs(keys) do
      out[#out + 1] = tostring(k) .. "="
      key_of(v[k], out, depth + 1)
    end
    out[#out + 1] = "}"
  else
    out[#out + 1] = tostring(v)
  end
end

local function graph_key(self, states, ran)
  local st = self.ctx:alloc_stats()
  local out = { "step", self.serial, "scratch", st.device_scratch_bytes, st.host_scratch_bytes }
  key_of(ran, out, 0)
  key_of(states, out, 0)
  return table.concat(out, " ")
end

-- The context's captured graph replayed: max(warmup, 1) untimed replays (the first launch of
-- a new graph uploads it), then `iters` timed ones, launched back to back between the events
-- of one chain (slot j - 1 before replay j, slot j after it), so no replay waits for the host
-- and each interval is the replay's own time. -> the replay times in microseconds.
local function time_replays(ctx, warmup, iters)
  for _ = 1, math.max(warmup, 1) do ctx:graph_launch() end
  local out = {}
  while #out < iters do
    local n = math.min(iters - #out, 255) -- the chain's slots 0..n of the context's 256
    ctx:timer_record(0)
    for j = 1, n do
      ctx:graph_launch()
      ctx:timer_record(j)
    end
    for j = 1, n do out[#out + 1] = ctx:timer_elapsed_us(j - 1, j) end
  end
  ctx:sync()
  return out
end

-- The production path keeps every group's buffers until the comparisons run (and a graph
-- captures their addresses), so the shared buffers are sized for the largest group first: no
-- buffer may move under a live view or a captured graph.
local function size_buffers(self, groups, sz)
  local cfg = self.cfg
  local T, cbs, k = cfg.candidate_topk_blocks, cfg.candidate_block_size, cfg.index_topk
  local maxn, maxcells = 1, 1
  for _, g in ipairs(groups) do
    local n = g.token_end - g.token_start
    local ml = 1
    for i = g.token_start + 1, g.token_end do ml = math.max(ml, sz.lens[i]) end
    maxn = math.max(maxn, n)
    maxcells = math.max(maxcells, n * ml)
  end
  self:buf("src_logits", "f32", { maxcells })
  self:buf("cand", "i32", { maxn, T })
  self:buf("src_topk", "i32", { maxn, k })
  for l = 1, sz.L do
    self:buf("sparse_" .. l, "bf16", { maxn, T * cbs })
    if l > 1 then self:buf("cols_" .. l, "i32", { maxn, k }) end
    self:buf("topk_pos_" .. l, "i32", { maxn, k })
  end
end

-- Runs one step. opts: { acc = accumulator (idxlab.summary.new_acc, for the metrics), keep =
-- output collector (replay; its put/put_layer get host tensors; keep.wants = {name = true},
-- optional, names the outputs it takes, and the others are not copied), timing = { warmup =
-- 0, iters = 1 }, graph = false to time a CUDA step eagerly only }. Returns the step's
-- timings (times.step: the graph's median replay, or the eager time; times.step_eager;
-- times.graph: whether a graph ran; times.captured: whether this step captured it, false when
-- it replayed the graph the context held) and sizes, (with a variant registry) the variant
-- that ran per family, and the groups' states (groups[i], as capture's; after a graph, they
-- hold its last replay's outputs).
local function run_step(self, inputs, opts)
  opts = opts or {}
  if opts.graph ~= nil and type(opts.graph) ~= "boolean" then
    fail("step: opts.graph = %s: must be a boolean (false: no CUDA graph)", tostring(opts.graph))
  end
  local ctx = self.ctx
  local sz, prep, step = start(self, inputs)
  local groups = groups_of(step)
  size_buffers(self, groups, sz)
  local timing = opts.timing or {}
  local warmup, iters = timing.warmup or 0, math.max(timing.iters or 1, 1)
  -- per group: the production path (warm-up and timed iterations), then its comparisons,
  -- which reuse the shared buffers before the next group overwrites them
  local runs, states = {}, {}
  for it = 1, iters do runs[it] = { layers = {} } end
  local peak_logits = 0
  for gi, g in ipairs(groups) do
    local G
    for it = 1, warmup + iters do
      local timers = {}
      G = self:production(g, gi, prep, sz, timers)
      local t = read_timers(ctx, timers)
      if it > warmup then
        local tsum = runs[it - warmup]
        for k2, v in pairs(t) do
          if k2 ~= "layers" then tsum[k2] = (tsum[k2] or 0) + v end
        end
        for l, lt in pairs(t.layers) do
          tsum.layers[l] = tsum.layers[l] or {}
          for k2, v in pairs(lt) do tsum.layers[l][k2] = (tsum.layers[l][k2] or 0) + v end
        end
      end
    end
    peak_logits = math.max(peak_logits, G.n * G.maxlen * 4)
    if opts.acc then self:compare(G, sz, opts.acc, opts.keep, warmup, iters) end
    states[gi] = G
  end
  -- medians over the timed iterations (at least one)
  local times = { layers = {} }
  local function med(get)
    local l2 = {}
    for _, r in ipairs(runs) do l2[#l2 + 1] = get(r) or 0 end
    return util.median(l2)
  end
  for _, name in ipairs(SOURCE_STAGES) do
    times[name] = med(function(r) return r[name] end)
  end
  for l = 1, sz.L do
    times.layers[l] = {}
    for _, name in ipairs(LAYER_STAGES) do
      times.layers[l][name] = med(function(r) return r.layers[l] and r.layers[l][name] end)
    end
  end
  -- the whole step: the graph's median replay on a CUDA context, else the eager time
  times.step_eager = times.total
  times.step, times.graph = times.total, false
  local fused = {}
  for _, G in ipairs(states) do
    if G.fused then fused.remap = true end
    if G.fused_k3 then fused.candidate_select = true end
  end
  for _, name in ipairs({ "remap", "candidate_select" }) do
    if fused[name] then
      times.fused = times.fused or {}
      times.fused[#times.fused + 1] = name
    end
  end
  local ran = variants_ran(ctx)
  if opts.graph ~= false and ctx:backend() == "cuda" then
    -- the graph the context holds when it is this step's (see the header), else a capture
    local key = graph_key(self, states, ran)
    times.captured = graph_of[ctx] ~= key
    if times.captured then
      graph_of[ctx] = nil
      states = capture_groups(self, groups, prep, sz)
      graph_of[ctx] = key
      self.captures = (self.captures or 0) + 1
    end
    times.step, times.graph = util.median(time_replays(ctx, warmup, iters)), true
  end
  local acc = opts.acc
  if acc then
    for l = 1, sz.L do
      local la = acc.layer(l)
      for _, name in ipairs(LAYER_STAGES) do
        local key = "time_" .. name .. "_us"
        la.time[key] = (la.time[key] or 0) + times.layers[l][name]
      end
    end
    acc.steps = (acc.steps or 0) + 1
    for _, name in ipairs({ "dense_logits", "candidate_select", "source_topk", "expand", "total",
      "step", "step_eager" }) do
      acc["time_" .. name] = (acc["time_" .. name] or 0) + times[name]
    end
    if times.fused then acc.fused = times.fused end
    acc.num_chunks = (acc.num_chunks or 0) + #(step.chunks or {})
    acc.logits_bytes = math.max(acc.logits_bytes or 0, peak_logits)
  end
  return { times = times, sz = sz, num_chunks = #(step.chunks or {}), logits_bytes = peak_logits,
    variant = ran, groups = states }
end

-- p:capture(inputs, replays): the production path of every group of one step (the decode
-- group, then each chunk) sized by one eager run, captured as one CUDA graph (CUDA contexts
-- only) and replayed `replays` times. Returns the last group's state (G.layers[l].pos holds
-- layer l's remapped top-k positions), for comparison with an eager run, and every group's.
local function run_capture(self, inputs, replays)
  local ctx = self.ctx
  local sz, prep, step = start(self, inputs)
  local groups = groups_of(step)
  size_buffers(self, groups, sz)
  -- an eager run first sizes every buffer, so nothing is allocated under capture
  local eager = {}
  for gi, g in ipairs(groups) do eager[gi] = self:production(g, gi, prep, sz, {}) end
  local key = graph_key(self, eager, variants_ran(ctx))
  graph_of[ctx] = nil
  local states = capture_groups(self, groups, prep, sz)
  graph_of[ctx] = key
  self.captures = (self.captures or 0) + 1
  for _ = 1, replays or 1 do ctx:graph_launch() end
  ctx:sync()
  return states[#states], states
end

function Step:step(inputs, opts)
  return with_pins(self.ctx, self.variant, run_step, self, inputs, opts)
end

function Step:capture(inputs, replays)
  return with_pins(self.ctx, self.variant, run_capture, self, inputs, replays)
end

-- The public boundary: errors leaving these get the caller's line (idxlab.errors). The
-- stages (prepare, production, compare) stay unwrapped: they run only inside step/capture.
for _, name in ipairs({ "buf", "host", "free", "step", "capture" }) do
  Step[name] = errors.public(Step[name])
end

return errors.wrap(M)
