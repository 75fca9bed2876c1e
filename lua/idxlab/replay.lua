-- idxlab.replay: real tensors in, every result out (SPEC 7). Reads one or more steps of
-- indexer inputs from safetensors files (a file, several files, or a folder), runs each step
-- through idxlab.step, and writes every output under SPEC 7's names. idxlab.measure loads a
-- replay workload of an experiment point through load_workload (this module never calls it).
--
-- Accepted input tensors per step (prefix "step<i>/" when a file holds several steps, i in
-- plain decimal: step0/, step1/, ...; step00/ is refused, not read as a second step 0):
--   q [R,H,D] F32|BF16|F16 (or q_codes U8 [R,H,VB] + q_scales I32|F32 [R,H], pre-quantized)
--   weights [R,H] F32
--   k [N,D] F32|BF16|F16 (or k_codes U8 [N,VB] + k_scales I32|F32 [N], pre-quantized)
--   q_consumer [L,R,H,D] (same dtype as q; any float type beside q_codes) (or
--     q_consumer_codes [L,R,H,VB] + q_consumer_scales [L,R,H])
-- Each of q, k and q_consumer comes plain or pre-quantized, independently of the others;
-- codes come with their scales, and a tensor given in both forms is refused (no input is
-- ignored).
--   weights_consumer [L,R,H] F32
--   ks, ke [R] I32 (ragged rows)  or  context_lens, row_start [R] I32 (decode rows, paged
--   here)
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local config = require("idxlab.config")
local safetensors = require("idxlab.safetensors")
local step = require("idxlab.step")
local summary = require("idxlab.summary")
local Context = require("idxlab.context")
local Tensor = require("idxlab.tensor")
local json = require("idxlab.json")
local fs = require("idxlab.fs")
local shell_quote = fs.shell_quote
local ffi = core.ffi

local VERSION = core.version

local fail = errors.fail

local M = {}

local INPUTS = {
  q = true, weights = true, k = true, q_consumer = true, weights_consumer = true,
  ks = true, ke = true, context_lens = true, row_start = true,
  q_codes = true, q_scales = true, k_codes = true, k_scales = true,
  q_consumer_codes = true, q_consumer_scales = true,
}
M.INPUT_NAMES = INPUTS

-- The .safetensors files of a folder, sorted; nil and the reason when it cannot be read.
-- Names travel NUL-separated (a newline is a legal file name character) and the path is
-- single-quoted for the shell, so nothing in it ($, `, \, ") is expanded.
local function list_dir(path)
  local p = io.popen(("CDPATH= cd -- %s 2>/dev/null && printf 'ok\\0' && for f in *.safetensors;"
    .. " do if [ -e \"$f\" ] || [ -L \"$f\" ]; then printf '%%s\\0' \"$f\"; fi; done")
    :format(shell_quote(path)))
  local all = p:read("*a")
  p:close()
  local out, first = {}, true
  for name in all:gmatch("([^%z]*)%z") do
    if first then
      if name ~= "ok" then break end
      first = false
    elseif name:match("%.safetensors$") then
      out[#out + 1] = path .. "/" .. name
    end
  end
  if first then return nil, "cannot read the folder" end
  table.sort(out)
  return out
end

-- Groups a file's tensors into steps: {[0] = {name = entry}, ...}; returns the steps, their
-- count and whether the names carry step<i>/ prefixes.
local function split_steps(file, path)
  local steps, prefixed, plain = {}, false, false
  if #file.names == 0 then
    fail("%s: no tensors (a replay file holds q, weights, k, q_consumer, weights_consumer and"
      .. " the row ranges, SPEC 7)", path)
  end
  local seen = {}
  for _, name in ipairs(file.names) do
    local i, rest = name:match("^step(%d+)/(.+)$")
    local idx, base
    if i then
      prefixed = true
      idx, base = tonumber(i), rest
      -- one spelling per step: step0/ and step00/ would both be step 0
      if tostring(idx) ~= i then
        fail("%s: tensor %s: step prefix step%s/ is not canonical (step<i>/ with i a plain"
          .. " decimal, no leading zeros: step0/, step1/, ...)", path, name, i)
      end
    else
      plain = true
      idx, base = 0, name
    end
    if prefixed and plain then
      fail("%s: mixes step<i>/ names with unprefixed names (tensor %s)", path, name)
    end
    if not INPUTS[base] then
      fail("%s: unknown tensor %q (inputs are q, weights, k, q_consumer, weights_consumer,"
        .. " ks/ke or context_lens/row_start, and the pre-quantized q_codes/q_scales/k_codes/"
        .. "k_scales/q_consumer_codes/q_consumer_scales)", path, name)
    end
    steps[idx] = steps[idx] or {}
    local key = idx .. "/" .. base
    if seen[key] then fail("%s: tensor %s given twice (also as %s)", path, name, seen[key]) end
    seen[key] = name
    steps[idx][base] = file.tensors[name]
  end
  local n = 0
  while steps[n] do n = n + 1 end
  for k in pairs(steps) do
    if k >= n then
      fail("%s: step%d/ present but step%d/ missing: steps count from 0 without gaps", path, k,
        n)
    end
  end
  return steps, n, prefixed
end

-- The pre-quantized stand-ins: codes and scales in place of each float input.
local QUANT = { { "q", "q_codes", "q_scales" }, { "k", "k_codes", "k_scales" },
  { "q_consumer", "q_consumer_codes", "q_consumer_scales" } }
local FLOATS = { "F32", "BF16", "F16" }

-- The checks a step passes before any of its data is read, without the config: which form of
-- q, k and q_consumer it gives (every tensor present is used: no orphan codes or scales), the
-- ranks of q and k, and the row ranges (I32 [R], within k's rows). Returns {R, N, maxlen,
-- ragged, quant = {q = bool, k = bool, q_consumer = bool}}, kept on s (checked once).
local function check_step(s)
  if s.pre then return s.pre end
  local ents, file, path, fn = s.ents, s.file, s.path, s.full_name
  local quant = {}
  for _, t in ipairs(QUANT) do
    local plain, codes, scales = t[1], t[2], t[3]
    local hp, hc, hs = ents[plain] ~= nil, ents[codes] ~= nil, ents[scales] ~= nil
    if hp and (hc or hs) then
      fail("%s: give one: %s or %s/%s, not both (the step has %s and %s)", path, fn(plain),
        fn(codes), fn(scales), fn(plain), fn(hc and codes or scales))
    end
    if hc and not hs then
      fail("%s: tensor %s without %s: pre-quantized %s needs both", path, fn(codes), fn(scales),
        plain)
    end
    if hs and not hc then
      fail("%s: tensor %s without %s: pre-quantized %s needs both", path, fn(scales), fn(codes),
        plain)
    end
    if not hp and not hc then
      fail("%s: tensor %s is missing (or the pre-quantized %s with %s)", path, fn(plain),
        fn(codes), fn(scales))
    end
    quant[plain] = hc
  end
  local q = quant.q
    and file:expect(fn("q_codes"), { dtypes = { "U8" }, rank = 3,
      dims = { "rows", "heads", "value bytes" } })
    or file:expect(fn("q"), { dtypes = FLOATS, rank = 3, dims = { "rows", "heads", "head_dim" } })
  local k = quant.k
    and file:expect(fn("k_codes"), { dtypes = { "U8" }, rank = 2,
      dims = { "positions", "value bytes" } })
    or file:expect(fn("k"), { dtypes = FLOATS, rank = 2, dims = { "positions", "head_dim" } })
  local R, N = q.shape[1], k.shape[1]
  local ragged = ents.ks ~= nil or ents.ke ~= nil
  local decode = ents.context_lens ~= nil or ents.row_start ~= nil
  if ragged == decode then
    fail("%s: give the row ranges as ks/ke (ragged) or as context_lens/row_start (decode),"
      .. " exactly one form", path)
  end
  local names = ragged and { "ks", "ke" } or { "context_lens", "row_start" }
  for _, nm in ipairs(names) do
    if not ents[nm] then fail("%s: tensor %s is missing", path, fn(nm)) end
    file:expect(fn(nm), { dtypes = { "I32" }, shape = { R }, dims = { "rows of q" } })
  end
  local a = ffi.cast("const int32_t *", ents[names[1]].data)
  local b = ffi.cast("const int32_t *", ents[names[2]].data)
  local maxlen = 0
  for r = 0, R - 1 do
    local lo, len
    if ragged then lo, len = a[r], b[r] - a[r] else lo, len = b[r], a[r] end
    if lo < 0 or len < 0 or lo + len > N then
      local what = ragged and ("ks = %d, ke = %d"):format(a[r], b[r])
        or ("row_start = %d, context_lens = %d"):format(b[r], a[r])
      fail("%s: row %d: %s sees k[%d : %d], outside k's %d rows (or negative)", path, r, what,
        lo, lo + len, N)
    end
    if len > maxlen then maxlen = len end
  end
  s.pre = { R = R, N = N, maxlen = maxlen, ragged = ragged, names = names, quant = quant }
  return s.pre
end

-- Validates one step's entries against the config (each through the file's expect, so errors
-- name the file, the tensor and the dimension) and turns them into step inputs.
local function step_inputs(ctx, s, cfg)
  local ents, file, path = s.ents, s.file, s.path
  local pre = check_step(s)
  local function want(base, dtypes, shape, dims)
    if not ents[base] then fail("%s: tensor %s is missing", path, s.full_name(base)) end
    return file:expect(s.full_name(base), { dtypes = dtypes, shape = shape, dims = dims })
  end
  local H, D = cfg.heads, cfg.head_dim
  local vb = cfg.kv_format == "mxfp4" and 64 or 128
  local vbs = "value bytes of " .. cfg.kv_format
  local scale_dt = { cfg.kv_format == "fp8" and "F32" or "I32" }
  local R, N, L
  if pre.quant.q then
    R = want("q_codes", { "U8" }, { false, H, vb }, { "rows", "heads", vbs }).shape[1]
    want("q_scales", scale_dt, { R, H }, { "rows of q", "heads" })
  else
    R = want("q", FLOATS, { false, H, D }, { "rows", "heads", "head_dim" }).shape[1]
  end
  if pre.quant.k then
    N = want("k_codes", { "U8" }, { false, vb }, { "positions", vbs }).shape[1]
    want("k_scales", scale_dt, { N }, { "positions" })
  else
    N = want("k", FLOATS, { false, D }, { "positions", "head_dim" }).shape[1]
  end
  want("weights", { "F32" }, { R, H }, { "rows of q", "heads" })
  if pre.quant.q_consumer then
    L = want("q_consumer_codes", { "U8" }, { false, R, H, vb },
      { "consumer layers", "rows of q", "heads", vbs }).shape[1]
    want("q_consumer_scales", scale_dt, { L, R, H }, { "consumer layers", "rows of q", "heads" })
  else
    -- SPEC 7: the same dtype as q; with a pre-quantized q, any float dtype
    L = want("q_consumer", ents.q and { ents.q.dtype } or FLOATS, { false, R, H, D },
      { "consumer layers", "rows of q", "heads", "head_dim" }).shape[1]
  end
  local qc_name = s.full_name(pre.quant.q_consumer and "q_consumer_codes" or "q_consumer")
  if L < 1 then fail("%s: %s has L = 0 layers: need at least 1", path, qc_name) end
  local max_l = step.MAX_CONSUMER_LAYERS
  if L > max_l then
    fail("%s: %s has L = %d layers: at most %d (a step times 5 + 3 L stages in 256 timer"
      .. " slots)", path, qc_name, L, max_l)
  end
  want("weights_consumer", { "F32" }, { L, R, H }, { "consumer layers", "rows of q", "heads" })
  local inputs = { n_decode = pre.ragged and 0 or R, n_prefill = pre.ragged and R or 0 }
  for base in pairs(ents) do
    inputs[base] = file:load(ctx, s.full_name(base), { device = ctx:device_kind() })
  end
  return inputs, { R = R, N = N, L = L, maxlen = pre.maxlen }
end

-- Opens every step of a workload {files = {...}} or {file = path} or {dir = path} (or a path).
-- Returns a list of {file = parsed, ents = {name = entry}, path = path, index, prefixed,
-- full_name}, one per step.
function M.open(spec)
  local paths = {}
  if type(spec) == "string" then spec = { files = { spec } } end
  if spec.file then paths[#paths + 1] = spec.file end
  for _, f in ipairs(spec.files or {}) do paths[#paths + 1] = f end
  if spec.dir then paths[#paths + 1] = spec.dir end
  local expanded = {}
  for _, p in ipairs(paths) do
    if fs.is_dir(p) then
      local l, why = list_dir(p)
      if not l then fail("%s: %s", p, why) end
      if #l == 0 then fail("%s: a folder with no .safetensors files", p) end
      for _, f in ipairs(l) do expanded[#expanded + 1] = f end
    elseif spec.dir == p then
      fail("dir = %s: not a folder", p)
    else
      expanded[#expanded + 1] = p
    end
  end
  if #expanded == 0 then
    fail("replay workload: no files given (files = {...}, file = ..., or dir = ...)")
  end
  local out = {}
  for _, p in ipairs(expanded) do
    local f = safetensors.read(p)
    local steps, n, prefixed = split_steps(f, p)
    for i = 0, n - 1 do
      local prefix = prefixed and ("step%d/"):format(i) or ""
      out[#out + 1] = { path = p, file = f, ents = steps[i], index = i, prefixed = prefixed,
        full_name = function(base) return prefix .. base end }
    end
  end
  return out
end

-- The config a replay needs: sized from the files (max_rows, max_model_len). Every step's
-- shapes and row ranges are checked before any of them is read.
function M.size_config(opened, base)
  local cfg = {}
  for k, v in pairs(base or {}) do cfg[k] = v end
  local rows, len = 1, 1
  for _, s in ipairs(opened) do
    local pre = check_step(s)
    rows = math.max(rows, pre.R)
    len = math.max(len, pre.maxlen)
  end
  cfg.max_rows = cfg.max_rows or rows
  if cfg.max_rows < rows then cfg.max_rows = rows end
  -- SPEC 7: max_model_len from the file (the longest row), unless given
  local ratio = cfg.compress_ratio or 1
  if cfg.max_model_len == nil or cfg.max_model_len < len * ratio then
    cfg.max_model_len = len * ratio
  end
  -- the default workspace (40 * max_model_len / ratio) of a small file can be narrower than
  -- one sparse row is budgeted (min_split_seq_len), which no request could fit: widen it to
  -- that, when workspace_tokens is not given
  if cfg.workspace_tokens == nil or cfg.workspace_tokens == "auto" then
    local r = config.resolve(cfg)
    local B = r.split_width == "bf16+fp32" and 6 or 2
    local min_split = math.ceil(r.candidate_topk_blocks * r.candidate_block_size * B / 4)
    local ws = math.floor(40 * r.max_model_len / r.compress_ratio)
    if ws < min_split then cfg.workspace_tokens = min_split end
  end
  return cfg
end

-- For idxlab.measure: every step of a replay workload, as step inputs.
function M.load_workload(ctx, wl, cfg)
  local opened = M.open(wl)
  local out = {}
  for _, s in ipairs(opened) do
    local inputs = step_inputs(ctx, s, cfg)
    out[#out + 1] = inputs
  end
  return out
end

-- Output collector for one step: host tensors in SPEC 7's layouts.
local function collector(ctx, cfg, sz)
  local R, L = sz.R, sz.L
  local T, k = cfg.candidate_topk_blocks, cfg.index_topk
  local nsb = T * cfg.candidate_block_size / cfg.sparse_block_kv
  local nsc = T * cfg.candidate_block_size
  local nmax = sz.maxlen -- SPEC 7: N_max = the longest row (0 when every row is empty)
  local function host(dtype, shape) return Tensor.new(ctx, dtype, shape, "host") end
  local outs = {
    dense_logits = host("f32", { R, nmax }),
    cand_blocks = host("i32", { R, T }),
    sparse_ids = host("i32", { R, nsb }),
    ["end"] = host("i32", { R }),
    sparse_logits = host("bf16", { L, R, nsc }),
    topk_pos = host("i32", { L, R, k }),
    masked_topk_pos = host("i32", { L, R, k }),
    dense_topk_pos = host("i32", { L, R, k }),
    source_topk_pos = host("i32", { R, k }),
  }
  -- -inf everywhere in dense_logits first (bf16/f32 0xff.. patterns differ: fill by value)
  local dl = ffi.cast("float *", outs.dense_logits.cd.data)
  for i = 0, R * nmax - 1 do dl[i] = -math.huge end
  local c = { outs = outs, nmax = nmax }
  local function elem(t) return ffi.sizeof(t:dtype() == "bf16" and "uint16_t" or "int32_t") end
  function c.put(name, t, r0, n, width)
    local o = outs[name]
    if name == "dense_logits" then
      local src = ffi.cast("const float *", t.cd.data)
      local w = math.min(width, nmax)
      if w > 0 then
        for r = 0, n - 1 do
          ffi.copy(dl + (r0 + r) * nmax, src + r * width, w * 4)
        end
      end
      return
    end
    local s = o:shape()
    local inner = 1
    for i = 2, #s do inner = inner * s[i] end
    ffi.copy(ffi.cast("uint8_t *", o.cd.data) + r0 * inner * elem(o), t.cd.data,
      n * inner * elem(o))
  end
  function c.put_layer(name, l, t, r0, n)
    local o = outs[name]
    local s = o:shape()
    local inner = s[3]
    local off = ((l - 1) * s[2] + r0) * inner * elem(o)
    ffi.copy(ffi.cast("uint8_t *", o.cd.data) + off, t.cd.data, n * inner * elem(o))
  end
  return c
end

M.OUTPUT_ORDER = { "dense_logits", "cand_blocks", "sparse_ids", "end", "sparse_logits",
  "topk_pos", "masked_topk_pos", "dense_topk_pos", "source_topk_pos" }

-- replay.run(in_path(s), out_path, cfg_overrides, opts) -> summary rows per step, and the
-- context. opts: { backend = "cpu"|"cuda"|"auto", seed = n, ctx = a context to use }.
-- cfg_overrides may pin kernel variants: variant = {logits = "v1", ...} (idxlab.step).
function M.run(inp, out_path, overrides, opts)
  opts = opts or {}
  if type(out_path) ~= "string" then fail("replay: output path must be a string") end
  local opened = M.open(type(inp) == "table" and inp or { files = { inp } })
  local fields, pins = step.split_variant(overrides or {}, "replay")
  local cfg = config.describe(M.size_config(opened, fields)).config
  local ctx = opts.ctx or Context.new({ backend = opts.backend or "auto", seed = opts.seed or 0 })
  local step_cfg = { variant = pins }
  for k, v in pairs(cfg) do step_cfg[k] = v end
  local p = step.new(ctx, step_cfg)
  local entries = {}
  local multi = #opened > 1 or (opened[1] and opened[1].prefixed)
  local summaries = {}
  local ok, err = pcall(function()
    for si, s in ipairs(opened) do
      local inputs, sz = step_inputs(ctx, s, cfg)
      local keep = collector(ctx, cfg, sz)
      local acc = summary.new_acc()
      local res = p:step(inputs, { acc = acc, keep = keep })
      summaries[si] = summary.summarize(acc, p.builder:info())
      summaries[si].variant = res.variant
      local prefix = multi and ("step%d/"):format(si - 1) or ""
      for _, name in ipairs(M.OUTPUT_ORDER) do
        entries[#entries + 1] = { name = prefix .. name, tensor = keep.outs[name] }
      end
      for _, t in pairs(inputs) do if Tensor.is_tensor(t) then t:free() end end
    end
  end)
  p:free()
  if not ok then
    for _, e in ipairs(entries) do e.tensor:free() end
    errors.rethrow(err)
  end
  local meta = { config = json.encode(cfg, config.field_names()), idxlab_version = VERSION,
    backend = ctx:backend(), device = ctx:device_name() }
  local list = {}
  for _, e in ipairs(entries) do
    list[#list + 1] = { name = e.name, tensor = e.tensor }
  end
  safetensors.write(out_path, list, meta)
  for _, e in ipairs(entries) do e.tensor:free() end
  return summaries, ctx
end

return errors.wrap(M)
