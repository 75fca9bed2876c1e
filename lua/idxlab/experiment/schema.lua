-- idxlab.experiment.schema: what an experiment table may say. validate(exp, src) checks every
-- field (errors name the source, the field and the rule) and returns a normalised copy with
-- the defaults filled in; the sweep is checked here and expanded by the plan.
local errors = require("idxlab.errors")
local cpsim = require("idxlab.cpsim")
local plot = require("idxlab.plot")
local report = require("idxlab.report")
local results = require("idxlab.results")
local util = require("idxlab.experiment.util")
local wschema = require("idxlab.experiment.workload_schema")

local M = {}

local fail = errors.fail
local show, is_int, is_list, suggest = util.show, util.is_int, util.is_list, util.suggest
local sorted_keys = util.sorted_keys
local check_pos_int = wschema.check_pos_int

M.TOP_FIELDS = { "name", "question", "seed", "backend", "workload", "config", "variant", "sweep",
  "zip", "repeats", "metrics", "plots", "by", "mode", "timing", "on_backend",
  "context_parallel_sim" }
local top_known = {}
for _, k in ipairs(M.TOP_FIELDS) do top_known[k] = true end

M.BACKENDS = { cpu = true, cuda = true, auto = true }

M.check_workload = wschema.check

-- Every value in an experiment is plain data: no functions, no cycles, string keys or list
-- indices, bounded depth.
local function check_plain(v, where, src, seen, depth)
  local tv = type(v)
  if tv == "number" then
    if v ~= v then fail(("%s: field '%s': NaN is not a value"):format(src, where)) end
    return
  end
  if tv == "string" or tv == "boolean" then return end
  if tv ~= "table" then
    fail(("%s: field '%s': a %s is not plain data (numbers, strings, booleans and tables only)")
      :format(src, where, tv))
  end
  if depth > 16 then fail(("%s: field '%s': nested deeper than 16 levels"):format(src, where)) end
  if seen[v] then fail(("%s: field '%s': the table refers to itself"):format(src, where)) end
  seen[v] = true
  if getmetatable(v) ~= nil then
    fail(("%s: field '%s': a table with a metatable is not plain data"):format(src, where))
  end
  for k, x in pairs(v) do
    local sub
    if type(k) == "string" then
      sub = where == "" and k or (where .. "." .. k)
    elseif is_int(k) then
      sub = ("%s[%d]"):format(where, k)
    else
      fail(("%s: field '%s': key %s: keys must be names or list indices")
        :format(src, where, show(k)))
    end
    check_plain(x, sub, src, seen, depth + 1)
  end
  seen[v] = nil
end
function M.check_plain(v, src) check_plain(v, "", src, {}, 0) end

function M.metric_names(mode)
  return mode == "chunks" and report.CHUNK_METRICS or report.STEP_METRICS
end

-- The context-parallel simulation's metrics (idxlab.cpsim) count as step metrics for the
-- metrics list and the plots; metric_names (the row's fixed columns) leaves them out.
local cp_metric = {}
for _, m in ipairs(cpsim.METRICS) do cp_metric[m] = true end

local function is_metric(mode, name)
  for _, m in ipairs(M.metric_names(mode)) do if m == name then return true end end
  return mode ~= "chunks" and cp_metric[name] == true
end

-- Classifies a sweep/--set key: "config" (a builder field), "workload", "variant" (a kernel
-- family's pin), "seed", "backend". Returns kind and the normalised key.
function M.sweep_key_kind(key)
  if type(key) ~= "string" then return nil end
  local bare = key:match("^config%.(.+)$") or key
  if util.is_config_field(bare) then return "config", bare end
  if key == "seed" or key == "backend" then return key, key end
  if key:match("^workload%.[%a_][%w_]*$") or key:match("^workload%.[%a_][%w_]*%.[%a_][%w_]*$") then
    return "workload", key
  end
  local fam = key:match("^variant%.([%a_][%w_]*)$")
  if fam and util.is_family(fam) then return "variant", key end
  local cpf = key:match("^context_parallel_sim%.([%a_]+)$")
  if cpf and cpsim.DEFAULTS[cpf] ~= nil then return "cpsim", key end
  return nil
end

-- What a sweep key may be, for suggestions.
function M.sweep_known()
  local k = util.field_names()
  k[#k + 1] = "seed"
  k[#k + 1] = "backend"
  for _, f in ipairs(util.families()) do k[#k + 1] = "variant." .. f end
  for _, f in ipairs(cpsim.FIELDS) do k[#k + 1] = "context_parallel_sim." .. f end
  return k
end

---------------------------------------------------------------------------- the steps

local function check_top_fields(exp, src)
  for k in pairs(exp) do
    if type(k) ~= "string" or not top_known[k] then
      fail(("%s: field '%s': unknown experiment field%s (fields: %s)"):format(src, tostring(k),
        suggest(k, M.TOP_FIELDS), table.concat(M.TOP_FIELDS, ", ")))
    end
  end
end

-- name, question, seed, backend, mode, repeats, by: one value each, with defaults.
local function check_scalars(e, src)
  -- name: also a directory name
  if type(e.name) ~= "string" or not e.name:match("^[%w][%w_.%-]*$") or #e.name > 100 then
    fail(("%s: field 'name' = %s: must be a name of letters, digits, '_', '.' and '-' (it "
      .. "names results/<name>/)"):format(src, show(e.name)))
  end
  if e.question ~= nil and type(e.question) ~= "string" then
    fail(("%s: field 'question' = %s: must be a string"):format(src, show(e.question)))
  end
  e.seed = e.seed == nil and 0 or e.seed
  if not is_int(e.seed) or e.seed < 0 then
    fail(("%s: field 'seed' = %s: must be an integer in [0, 2^53)"):format(src, show(e.seed)))
  end
  e.backend = e.backend == nil and "auto" or e.backend
  if not M.BACKENDS[e.backend] then
    fail(("%s: field 'backend' = %s: must be cpu, cuda or auto"):format(src, show(e.backend)))
  end
  e.mode = e.mode == nil and "step" or e.mode
  if e.mode ~= "step" and e.mode ~= "chunks" then
    fail(("%s: field 'mode' = %s: must be \"step\" (the pipeline) or \"chunks\" (the chunker "
      .. "only)"):format(src, show(e.mode)))
  end
  e.repeats = e.repeats == nil and 1 or e.repeats
  if not is_int(e.repeats) or e.repeats < 1 or e.repeats > 1000 then
    fail(("%s: field 'repeats' = %s: must be an integer in [1, 1000]"):format(src, show(e.repeats)))
  end
  if e.by ~= nil and e.by ~= "length" then
    fail(("%s: field 'by' = %s: must be \"length\" or left out"):format(src, show(e.by)))
  end
  if e.by ~= nil and e.mode == "chunks" then
    fail(("%s: field 'by' = \"length\": only for mode = \"step\" (the chunker measures no rows)")
      :format(src))
  end
end

local function check_on_backend(e, src)
  if e.on_backend == nil then return end
  if type(e.on_backend) ~= "table" then
    fail(("%s: field 'on_backend' = %s: must be { cpu = {...}, cuda = {...} }")
      :format(src, show(e.on_backend)))
  end
  for b, ob in pairs(e.on_backend) do
    if b ~= "cpu" and b ~= "cuda" then
      fail(("%s: field 'on_backend.%s': unknown backend (cpu, cuda)"):format(src, tostring(b)))
    end
    if type(ob) ~= "table" then
      fail(("%s: field 'on_backend.%s' must be a table { workload = ..., timing = ... }")
        :format(src, b))
    end
    for k in pairs(ob) do
      if k ~= "workload" and k ~= "timing" then
        fail(("%s: field 'on_backend.%s.%s': unknown (workload, timing)")
          :format(src, b, tostring(k)))
      end
    end
    if ob.workload ~= nil then
      wschema.check(ob.workload, src, "on_backend." .. b .. ".workload")
    end
  end
end

local function check_timing(e, src)
  if e.timing == nil then return end
  if type(e.timing) ~= "table" then
    fail(("%s: field 'timing' = %s: must be { warmup = n, iters = n }"):format(src, show(e.timing)))
  end
  for k in pairs(e.timing) do
    if k ~= "warmup" and k ~= "iters" then
      fail(("%s: field 'timing.%s': unknown (warmup, iters)%s"):format(src, tostring(k),
        suggest(k, { "warmup", "iters" })))
    end
  end
  if e.timing.warmup ~= nil then check_pos_int(e.timing.warmup, "timing.warmup", src, 0, 1000) end
  if e.timing.iters ~= nil then check_pos_int(e.timing.iters, "timing.iters", src, 1, 1000) end
end

-- config: builder fields only (values are checked per point by config.resolve).
local function check_config(e, src)
  e.config = e.config == nil and {} or e.config
  if type(e.config) ~= "table" or (next(e.config) ~= nil and is_list(e.config)) then
    fail(("%s: field 'config' = %s: must be a table of builder config fields")
      :format(src, show(e.config)))
  end
  for k in pairs(e.config) do
    if type(k) ~= "string" or not util.is_config_field(k) then
      fail(("%s: field 'config.%s': unknown config field%s"):format(src, tostring(k),
        suggest(k, util.field_names())))
    end
  end
end

-- A variant name as a pin: the registry checks it against the family when the point runs
-- (the variants a family has depend on the build and the device).
local function check_variant_name(v, src, where)
  if type(v) ~= "string" or not v:match("^[%w_][%w_.%-]*$") then
    fail(("%s: field '%s' = %s: must be a variant name (letters, digits, '_', '.' and '-')")
      :format(src, where, show(v)))
  end
end

-- variant: { <family> = "<name>" }, a pin per kernel family (absent: the default variant).
local function check_variants(e, src)
  e.variant = e.variant == nil and {} or e.variant
  if type(e.variant) ~= "table" or (next(e.variant) ~= nil and is_list(e.variant)) then
    fail(("%s: field 'variant' = %s: must map kernel families to variant names, e.g. "
      .. "{ logits = \"v1\" }"):format(src, show(e.variant)))
  end
  local fams = util.families()
  for k, v in pairs(e.variant) do
    if type(k) ~= "string" or not util.is_family(k) then
      fail(("%s: field 'variant.%s': unknown kernel family%s (families: %s)"):format(src,
        tostring(k), suggest(k, fams), table.concat(fams, ", ")))
    end
    check_variant_name(v, src, "variant." .. k)
  end
end

-- context_parallel_sim: the research mode (idxlab.cpsim), apart from the builder config;
-- defaults filled in at plan time, a swept field left out here.
local function check_cpsim(e, src)
  local t = e.context_parallel_sim
  if t == nil then return end
  if type(t) ~= "table" or (next(t) ~= nil and is_list(t)) then
    fail(("%s: field 'context_parallel_sim' = %s: must be { size = c, interleave = I, "
      .. "candidates = \"global\" | \"local\" }"):format(src, show(t)))
  end
  for k, v in pairs(t) do
    local why = cpsim.check_value(k, v)
    if why then
      fail(("%s: field 'context_parallel_sim.%s' = %s: %s%s"):format(src, tostring(k), show(v),
        why, cpsim.DEFAULTS[k] == nil and suggest(k, cpsim.FIELDS) or ""))
    end
  end
end

local function check_workload(e, src)
  e.workload = e.workload == nil and {} or e.workload
  wschema.check(e.workload, src)
  if e.mode == "chunks" and not e.workload.prefill then
    fail(("%s: mode = \"chunks\" needs workload.prefill (the requests the chunker plans)")
      :format(src))
  end
  if e.mode == "chunks" and (e.workload.kind or "synthetic") ~= "synthetic" then
    fail(("%s: mode = \"chunks\" needs a synthetic workload with prefill requests"):format(src))
  end
end

-- One swept list's values; returns the first value listed twice (with its index), if any.
local function check_sweep_values(kind, key, v, src)
  if not is_list(v) or #v == 0 then
    fail(("%s: field 'sweep.%s' = %s: must be a non-empty list of values%s"):format(src, key,
      show(v), key == "sparse_block_kv" and " or \"all\"" or ""))
  end
  if #v > 10000 then
    fail(("%s: field 'sweep.%s': %d values: at most 10000"):format(src, key, #v))
  end
  local seen, dup = {}, nil
  for i, x in ipairs(v) do
    local tx = type(x)
    if tx ~= "number" and tx ~= "string" and tx ~= "boolean"
        and not (kind == "workload" and tx == "table") then
      fail(("%s: field 'sweep.%s[%d]' = %s: must be a number, string or boolean")
        :format(src, key, i, show(x)))
    end
    if x == "all" then
      fail(("%s: field 'sweep.%s[%d]' = \"all\": only sparse_block_kv = \"all\" (alone) means "
        .. "every valid choice"):format(src, key, i))
    end
    local sk = type(x) == "table" and results.canonical(x) or (type(x) .. ":" .. tostring(x))
    if seen[sk] and not dup then dup = { i = i, x = x } end
    seen[sk] = true
    if kind == "seed" and (not is_int(x) or x < 0) then
      fail(("%s: field 'sweep.seed[%d]' = %s: must be an integer in [0, 2^53)")
        :format(src, i, show(x)))
    end
    if kind == "backend" and not M.BACKENDS[x] then
      fail(("%s: field 'sweep.backend[%d]' = %s: must be cpu, cuda or auto")
        :format(src, i, show(x)))
    end
    if kind == "variant" then check_variant_name(x, src, ("sweep.%s[%d]"):format(key, i)) end
    local why = kind == "cpsim" and cpsim.check_value(key:sub(22), x)
    if why then fail(("%s: field 'sweep.%s[%d]' = %s: %s"):format(src, key, i, show(x), why)) end
  end
  return dup
end

-- sweep: normalised keys; a swept config field or variant pin drops the base value (the
-- sweep wins; the base would be silently ignored otherwise). Returns the values listed twice.
local function check_sweep(e, src)
  e.sweep = e.sweep == nil and {} or e.sweep
  if type(e.sweep) ~= "table" or (next(e.sweep) ~= nil and is_list(e.sweep)) then
    fail(("%s: field 'sweep' = %s: must map fields to lists of values"):format(src, show(e.sweep)))
  end
  local norm = {}
  local dup = {} -- a value listed twice: an error unless the list is zipped with others
  for k, v in pairs(e.sweep) do
    local kind, key = M.sweep_key_kind(k)
    if not kind then
      fail(("%s: field 'sweep.%s': unknown field%s; a sweep varies a builder config field, "
        .. "seed, backend, workload.<knob> or variant.<family>")
        :format(src, tostring(k), suggest(k, M.sweep_known())))
    end
    if norm[key] ~= nil then
      fail(("%s: field 'sweep.%s': given twice (as %s and config.%s)"):format(src, key, key, key))
    end
    if key == "sparse_block_kv" and (v == "all" or (is_list(v) and #v == 1 and v[1] == "all")) then
      norm[key] = "all"
    else
      dup[key] = check_sweep_values(kind, key, v, src)
      norm[key] = v
    end
    if kind == "config" and e.config[key] ~= nil then e.config[key] = nil end
    if kind == "variant" then e.variant[key:sub(9)] = nil end
    if kind == "cpsim" then
      e.context_parallel_sim = e.context_parallel_sim or {}
      e.context_parallel_sim[key:sub(22)] = nil
    end
  end
  e.sweep = norm
  return dup
end

local function swept_list(e)
  local swept = sorted_keys(e.sweep)
  return #swept > 0 and table.concat(swept, ", ") or "none", swept
end

local function check_zip_groups(e, src)
  if not is_list(e.zip) or #e.zip == 0 then
    fail(("%s: field 'zip' = %s: must be true, false or a list of groups of swept fields, "
      .. "e.g. { {\"candidate_block_size\", \"candidate_topk_blocks\"} }"):format(src, show(e.zip)))
  end
  local used = {}
  for gi, g in ipairs(e.zip) do
    if not is_list(g) or #g < 1 then
      fail(("%s: field 'zip[%d]' = %s: must be a list of swept field names")
        :format(src, gi, show(g)))
    end
    local len
    for fi, f in ipairs(g) do
      local w = ("zip[%d][%d]"):format(gi, fi)
      if type(f) ~= "string" then
        fail(("%s: field '%s' = %s: must be a swept field name"):format(src, w, show(f)))
      end
      local _, key = M.sweep_key_kind(f)
      key = key or f
      if e.sweep[key] == nil then
        local list, swept = swept_list(e)
        fail(("%s: field '%s' = %s: not a swept field%s (swept: %s)"):format(src, w, show(f),
          suggest(f, swept), list))
      end
      if e.sweep[key] == "all" then
        fail(("%s: field '%s': sparse_block_kv = \"all\" depends on each point and cannot be "
          .. "zipped"):format(src, w))
      end
      if used[key] then fail(("%s: field '%s': %s is in two zip groups"):format(src, w, key)) end
      used[key] = true
      g[fi] = key
      if len and #e.sweep[key] ~= len then
        fail(("%s: field 'zip[%d]': zipped lists must have equal lengths: %s has %d values, %s "
          .. "has %d"):format(src, gi, g[1], len, key, #e.sweep[key]))
      end
      len = len or #e.sweep[key]
    end
  end
end

local function check_zip_all(e, src)
  local len, first = nil, nil
  for _, key in ipairs(sorted_keys(e.sweep)) do
    if e.sweep[key] ~= "all" then
      if len and #e.sweep[key] ~= len then
        fail(("%s: field 'zip' = true: zipped lists must have equal lengths: %s has %d values, "
          .. "%s has %d"):format(src, first, len, key, #e.sweep[key]))
      end
      len = len or #e.sweep[key]
      first = first or key
    end
  end
end

-- zip, then the values listed twice in a list not zipped with another (a point run twice).
local function check_zip(e, src, dup)
  if e.zip ~= nil and type(e.zip) ~= "boolean" then
    check_zip_groups(e, src)
  elseif e.zip == true then
    check_zip_all(e, src)
  end
  local zipped = {}
  if e.zip == true then
    for k, v in pairs(e.sweep) do if v ~= "all" then zipped[k] = true end end
  elseif type(e.zip) == "table" then
    for _, g in ipairs(e.zip) do
      if #g >= 2 then for _, f in ipairs(g) do zipped[f] = true end end
    end
  end
  for _, key in ipairs(sorted_keys(dup)) do
    if not zipped[key] then
      fail(("%s: field 'sweep.%s[%d]' = %s: listed twice (the point would run twice; use "
        .. "repeats)"):format(src, key, dup[key].i, show(dup[key].x)))
    end
  end
end

local function check_metrics(e, src)
  if e.metrics == nil then return end
  if not is_list(e.metrics) or #e.metrics == 0 then
    fail(("%s: field 'metrics' = %s: must be a non-empty list of metric names")
      :format(src, show(e.metrics)))
  end
  local names = M.metric_names(e.mode)
  for i, m in ipairs(e.metrics) do
    if not is_metric(e.mode, m) then
      fail(("%s: field 'metrics[%d]' = %s: not a metric of mode %s%s (metrics: %s)"):format(src,
        i, show(m), e.mode, suggest(m, names), table.concat(names, ", ")))
    end
  end
end

---------------------------------------------------------------------------- plots

-- The plot schema is idxlab.plot's (plot.KEYS, plot.check); an experiment file adds what only
-- it knows: no unknown field, x and series swept fields, one series, y metrics of the mode,
-- series other than x.
local PLOT_KEYS = plot.KEYS
local plot_known = {}
for _, k in ipairs(PLOT_KEYS) do plot_known[k] = true end

-- A plot's x or series: a swept field, normalised ("config.x" -> "x").
local function plot_axis(e, p, k, src, w)
  if type(p[k]) ~= "string" then
    fail(("%s: field '%s.%s' = %s: must name a swept field"):format(src, w, k, show(p[k])))
  end
  local _, key = M.sweep_key_kind(p[k])
  p[k] = key or p[k]
  if e.sweep[p[k]] == nil then
    local list, swept = swept_list(e)
    fail(("%s: field '%s.%s' = %s: not a swept field%s (swept: %s)"):format(src, w, k, show(p[k]),
      suggest(p[k], swept), list))
  end
end

local function check_plot(e, p, src, w)
  if type(p) ~= "table" then
    fail(("%s: field '%s' = %s: must be { x = field, y = metric, series = field }")
      :format(src, w, show(p)))
  end
  for k in pairs(p) do
    if not plot_known[k] then
      fail(("%s: field '%s.%s': unknown (%s)%s"):format(src, w, tostring(k),
        table.concat(PLOT_KEYS, ", "), suggest(k, PLOT_KEYS)))
    end
  end
  if p.kind == "pareto" then
    -- a cost metric against a quality metric: both metrics of the mode, no series
    for _, k in ipairs({ "x", "y" }) do
      if type(p[k]) ~= "string" or not is_metric(e.mode, p[k]) then
        fail(("%s: field '%s.%s' = %s: a pareto plot's %s must be one metric of mode %s%s")
          :format(src, w, k, show(p[k]), k, e.mode,
            type(p[k]) == "string" and suggest(p[k], M.metric_names(e.mode)) or ""))
      end
    end
    plot.check(p, w, src .. ": ")
    return
  end
  plot_axis(e, p, "x", src, w)
  local ys = type(p.y) == "table" and p.y or { p.y }
  if not is_list(ys) or #ys == 0 then
    fail(("%s: field '%s.y': must be a metric or a list of metrics"):format(src, w))
  end
  for _, y in ipairs(ys) do
    if not is_metric(e.mode, y) then
      fail(("%s: field '%s.y' = %s: not a metric of mode %s%s"):format(src, w, show(y), e.mode,
        suggest(y, M.metric_names(e.mode))))
    end
  end
  if p.series ~= nil then
    plot_axis(e, p, "series", src, w)
    if p.series == p.x then
      fail(("%s: field '%s.series' = %s: the same field as x"):format(src, w, show(p.series)))
    end
  end
  plot.check(p, w, src .. ": ")
end

local function check_plots(e, src)
  if e.plots ~= nil then
    if not is_list(e.plots) then
      fail(("%s: field 'plots' = %s: must be a list of { x = field, y = metric, series = field }")
        :format(src, show(e.plots)))
    end
    for i, p in ipairs(e.plots) do check_plot(e, p, src, ("plots[%d]"):format(i)) end
  end
  e.plots = e.plots or {}
end

---------------------------------------------------------------------------- validate

-- validate(exp, src) -> a normalised copy of the experiment (not yet expanded), defaults
-- filled in; raises on the first rule it breaks.
function M.validate(exp, src)
  if type(exp) ~= "table" then
    fail(("%s: the experiment must be a table, got %s"):format(src, type(exp)))
  end
  check_plain(exp, "", src, {}, 0)
  check_top_fields(exp, src)
  local e = util.deep_copy(exp)
  check_scalars(e, src)
  check_on_backend(e, src)
  check_timing(e, src)
  check_config(e, src)
  check_variants(e, src)
  check_workload(e, src)
  check_cpsim(e, src)
  local dup = check_sweep(e, src)
  if e.context_parallel_sim ~= nil then
    local swept = {}
    for k in pairs(e.sweep) do
      local f = k:match("^context_parallel_sim%.(.+)$")
      if f then swept[f] = true end
    end
    for _, f in ipairs(cpsim.FIELDS) do
      if not swept[f] and e.context_parallel_sim[f] == nil then
        e.context_parallel_sim[f] = cpsim.DEFAULTS[f]
      end
    end
  end
  check_zip(e, src, dup)
  check_metrics(e, src)
  check_plots(e, src)
  return e
end

return M
