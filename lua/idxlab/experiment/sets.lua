-- idxlab.experiment.sets: --set key=value overrides on an experiment table (the SPEC 8
-- grammar, parsed by config.parse_sets). A value fixes a field and drops it from the sweep,
-- the zip groups and the plots; a list a,b,c sweeps it.
local errors = require("idxlab.errors")
local config = require("idxlab.config")
local util = require("idxlab.experiment.util")
local schema = require("idxlab.experiment.schema")

local M = {}

local fail = errors.fail
local show, suggest, deep_copy = util.show, util.suggest, util.deep_copy

-- {"k=v", ...} -> { {key, value}, ... } in the order given; values as config.parse_sets
-- gives them: numbers, booleans, strings, lists (a,b,c).
local function parse_sets(sets, src)
  if sets == nil then return {} end
  if type(sets) ~= "table" then
    fail(("%s: --set values must be a list of \"key=value\" strings"):format(src))
  end
  local list = {}
  for _, s in ipairs(sets) do
    if type(s) ~= "string" or not s:find("=", 1, true) then
      fail(("--set %s: must be key=value"):format(show(s)))
    end
    list[#list + 1] = s
  end
  if #list == 0 then return {} end
  local ok, kv, order = pcall(config.parse_sets, list)
  if not ok then fail(errors.message(kv)) end
  local out = {}
  for _, k in ipairs(order) do out[#out + 1] = { k, kv[k] } end
  return out
end

local function remove_from_zip(e, key)
  if type(e.zip) ~= "table" then return end
  for gi = #e.zip, 1, -1 do
    local g = e.zip[gi]
    if type(g) == "table" then
      for fi = #g, 1, -1 do
        if g[fi] == key or g[fi] == "config." .. key then table.remove(g, fi) end
      end
      if #g == 0 then table.remove(e.zip, gi) end
    end
  end
  if #e.zip == 0 then e.zip = nil end
end

-- A field that --set fixes is no longer swept: plots along it go, series by it are dropped.
local function unplot(e, key)
  if type(e.plots) ~= "table" then return end
  for i = #e.plots, 1, -1 do
    local p = e.plots[i]
    if type(p) == "table" then
      local x = type(p.x) == "string" and (p.x:match("^config%.(.+)$") or p.x)
      local s = type(p.series) == "string" and (p.series:match("^config%.(.+)$") or p.series)
      if x == key then table.remove(e.plots, i) elseif s == key then p.series = nil end
    end
  end
end

-- The field is fixed now: out of the sweep's zip groups and plots.
local function unsweep(e, key)
  remove_from_zip(e, key)
  unplot(e, key)
end

local function set_path(t, path, value, full)
  local parts = {}
  for p in path:gmatch("[^%.]+") do parts[#parts + 1] = p end
  local cur = t
  for i = 1, #parts - 1 do
    if cur[parts[i]] == nil then cur[parts[i]] = {} end
    if type(cur[parts[i]]) ~= "table" then
      fail(("--set %s: %s is a %s, not a table"):format(full, table.concat(parts, ".", 1, i),
        type(cur[parts[i]])))
    end
    cur = cur[parts[i]]
  end
  cur[parts[#parts]] = value
end

-- The sweep kinds whose knobs live in a table of their own: kind -> the experiment field
-- (the --set key is "<field>.<name>").
local NESTED = { variant = "variant", cpsim = "context_parallel_sim" }

-- fn(t) on each on_backend[<backend>][field] table (those a backend replaces the experiment's
-- field with), in a stable order.
local function for_backends(e, field, fn)
  if type(e.on_backend) ~= "table" then return end
  local names = {}
  for b, ob in pairs(e.on_backend) do
    if type(ob) == "table" and type(ob[field]) == "table" then names[#names + 1] = b end
  end
  table.sort(names)
  for _, b in ipairs(names) do fn(e.on_backend[b][field]) end
end

local function table_field(e, k)
  if type(e[k]) ~= "table" then e[k] = {} end
  return e[k]
end

-- sweep.<field>=a,b,c (a single value sweeps one value).
local function set_sweep(e, sweep_key, value, full)
  local kind, norm = schema.sweep_key_kind(sweep_key)
  if not kind then
    fail(("--set %s: sweep.%s: unknown field%s; a sweep varies a builder config field, seed, "
      .. "backend, workload.<knob> or variant.<family>")
      :format(full, sweep_key, suggest(sweep_key, schema.sweep_known())))
  end
  local sweep = table_field(e, "sweep")
  sweep[sweep_key] = nil
  sweep[norm] = (value == "all" or type(value) == "table") and value or { value }
  if kind == "config" and type(e.config) == "table" then e.config[norm] = nil end
  local nest = NESTED[kind]
  if nest and type(e[nest]) == "table" then e[nest][norm:sub(#nest + 2)] = nil end
  if kind == "seed" then e.seed = nil end
  if kind == "backend" then e.backend = nil end
end

local function set_config(e, bare, value)
  local sweep, cfg = table_field(e, "sweep"), table_field(e, "config")
  sweep[bare] = nil
  sweep["config." .. bare] = nil
  if type(value) == "table" or (bare == "sparse_block_kv" and value == "all") then
    sweep[bare] = value
    cfg[bare] = nil
  else
    cfg[bare] = value
    unsweep(e, bare)
  end
end

-- <table>.<field>=v sets a field of a knob table of its own (variant.<family>=name pins that
-- family, context_parallel_sim.<field>=v sets the research mode's field); a list sweeps it.
local function set_nested(e, kind, key, value)
  local nest = NESTED[kind]
  local sweep, t, field = table_field(e, "sweep"), table_field(e, nest), key:sub(#nest + 2)
  sweep[key] = nil
  if type(value) == "table" then
    sweep[key] = value
    t[field] = nil
  else
    t[field] = value
    unsweep(e, key)
  end
end

local ONE_VALUE = { name = true, question = true, repeats = true, mode = true, by = true,
  zip = true }

local function set_one(e, key, value, full)
  local listy = type(value) == "table"
  local bare = key:match("^config%.(.+)$") or key
  if util.is_config_field(bare) then
    set_config(e, bare, value)
  elseif NESTED[schema.sweep_key_kind(key)] then
    set_nested(e, schema.sweep_key_kind(key), key, value)
  elseif key == "seed" or key == "backend" then
    local sweep = table_field(e, "sweep")
    sweep[key] = nil
    if listy then sweep[key] = value else e[key] = value; unsweep(e, key) end
  elseif key:match("^timing%.") then
    if listy then fail(("--set %s: %s takes one value"):format(full, key)) end
    table_field(e, "timing")[key:sub(8)] = value
    for_backends(e, "timing", function(t) t[key:sub(8)] = value end)
  elseif key == "metrics" then
    e.metrics = listy and value or { value }
  elseif ONE_VALUE[key] then
    if listy then fail(("--set %s: %s takes one value"):format(full, key)) end
    e[key] = value
  else
    local known = { "name", "question", "seed", "backend", "repeats", "mode", "by", "metrics",
      "zip" }
    for _, f in ipairs(util.field_names()) do known[#known + 1] = f end
    fail(("--set %s: unknown key %s%s (builder config fields, seed, backend, repeats, mode, by, "
      .. "metrics, zip, name, question, timing.warmup, timing.iters, workload.<knob>, "
      .. "variant.<family>, sweep.<field>)"):format(full, key, suggest(key, known)))
  end
end

-- apply(exp, {"key=value", ...}, src) -> a new experiment table with the overrides:
--   builder field (or config.<field>): a value sets config.<field> and drops it from the sweep;
--     a list a,b,c (or sparse_block_kv=all) sweeps it
--   variant.<family>: a name pins that kernel family; a list sweeps it
--   sweep.<field>=a,b,c: sweeps it;  workload.<path>=v: sets that workload knob (a list value
--   stays a list: sweep a knob with sweep.workload.<path>=a,b)
--   name, question, seed, backend, repeats, mode, by, metrics, zip: set the field (seed and
--   backend also sweep given a list)
function M.apply(exp, sets, src)
  local e = deep_copy(exp)
  for _, kvp in ipairs(parse_sets(sets, src)) do
    local key, value = kvp[1], kvp[2]
    local full = ("%s=%s"):format(tostring(key), show(value))
    if type(key) ~= "string" then fail(("--set %s: the key must be a name"):format(full)) end
    local sweep_key = key:match("^sweep%.(.+)$")
    if sweep_key then
      set_sweep(e, sweep_key, value, full)
    elseif key:match("^workload%.") then
      set_path(table_field(e, "workload"), key:sub(10), value, full)
      -- an on_backend workload replaces the experiment's where that backend runs: the value
      -- fixes the knob there too, or a GPU run would silently keep the file's value
      for_backends(e, "workload", function(w) set_path(w, key:sub(10), value, full) end)
      if type(e.sweep) == "table" then e.sweep[key] = nil end
      unsweep(e, key)
    else
      set_one(e, key, value, full)
    end
  end
  return e
end

return M
