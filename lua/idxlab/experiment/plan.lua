-- idxlab.experiment.plan: a validated experiment expanded into points. Each point config is
-- resolved and checked by the builder (config.describe) and against its workload; a point the
-- builder refuses, one too small for its workload, or one that resolves to a config already
-- planned is skipped with its reason. describe(plan) is the dry run's text.
local errors = require("idxlab.errors")
local report = require("idxlab.report")
local results = require("idxlab.results")
local util = require("idxlab.experiment.util")
local schema = require("idxlab.experiment.schema")
local wschema = require("idxlab.experiment.workload_schema")

local M = {}

local fail = errors.fail
local show, is_int = util.show, util.is_int
local deep_copy, sorted_keys = util.deep_copy, util.sorted_keys

M.MAX_POINTS = 100000

-- The sweep's axes, in a fixed order: by field name, a zip group at the place of its first
-- field; sparse_block_kv = "all" last, since its values depend on the rest of each point.
local function axes_of(e)
  local grouped, axes = {}, {}
  local groups = {}
  if e.zip == true then
    local g = {}
    for _, k in ipairs(sorted_keys(e.sweep)) do if e.sweep[k] ~= "all" then g[#g + 1] = k end end
    if #g > 0 then groups[1] = g end
  elseif type(e.zip) == "table" then
    groups = e.zip
  end
  for _, g in ipairs(groups) do
    for _, f in ipairs(g) do grouped[f] = g end
  end
  local added = {}
  for _, k in ipairs(sorted_keys(e.sweep)) do
    if e.sweep[k] ~= "all" then
      local g = grouped[k]
      if g then
        if not added[g] then
          added[g] = true
          axes[#axes + 1] = { fields = g, n = #e.sweep[g[1]] }
        end
      else
        axes[#axes + 1] = { fields = { k }, n = #e.sweep[k] }
      end
    end
  end
  return axes
end

-- The swept keys in the order the tables show them (the axes' order, then sbk "all").
local function swept_order(e)
  local out = {}
  for _, a in ipairs(axes_of(e)) do for _, f in ipairs(a.fields) do out[#out + 1] = f end end
  if e.sweep.sparse_block_kv == "all" then out[#out + 1] = "sparse_block_kv" end
  return out
end

local describe_params = results.describe_params

-- The point's effective builder config, as the results rows show it: the resolved fields,
-- with sparse_block_kv and workspace_tokens as the builder chose them.
local function effective_config(resolved, info)
  local eff = deep_copy(resolved)
  if info.sparse_block_kv then eff.sparse_block_kv = info.sparse_block_kv end
  if info.workspace_tokens then eff.workspace_tokens = info.workspace_tokens end
  return eff
end

-- The inputs of one combination of swept values: config table, workload, seed, backend and
-- the variant pins (the file's, with swept ones on top).
local function combo_inputs(e, params, order, src)
  local inp = { config = deep_copy(e.config), workload = deep_copy(e.workload), seed = e.seed,
    backend = e.backend, variant = deep_copy(e.variant),
    cpsim = e.context_parallel_sim and deep_copy(e.context_parallel_sim) }
  for _, k in ipairs(order) do
    local v = params[k]
    if v ~= nil then
      local kind, key = schema.sweep_key_kind(k)
      if kind == "config" then inp.config[key] = v
      elseif kind == "seed" then inp.seed = v
      elseif kind == "backend" then inp.backend = v
      elseif kind == "workload" then wschema.set_swept(inp.workload, k, v, src)
      elseif kind == "variant" then inp.variant[key:sub(9)] = v
      elseif kind == "cpsim" then
        inp.cpsim = inp.cpsim or {}
        inp.cpsim[key:sub(22)] = v
      end
    end
  end
  if next(params) ~= nil then
    wschema.check(inp.workload, src, "workload (with " .. describe_params(params, order) .. ")")
  end
  return inp
end

-- The planner's state while it walks the sweep.
local Planner = {}
Planner.__index = Planner

local function new_planner(e, src, source_path)
  local order = swept_order(e)
  local plan = { exp = e, source = source_path, points = {}, skipped = {}, swept = order,
    combos = 0 }
  return setmetatable({ e = e, src = src, order = order, plan = plan, seen_hash = {} }, Planner)
end

function Planner:desc(p) return describe_params(p, self.order) end

function Planner:skip(p, reason, desc)
  local s = self.plan.skipped
  s[#s + 1] = { params = p, reason = reason, desc = desc or self:desc(p) }
end

-- config.resolve refusing a value is a bad value in the file, not a skipped point.
function Planner:resolve(cfg_table, p)
  local resolved, err = util.resolve_config(cfg_table)
  if not resolved then
    local where = next(p) ~= nil and (" (sweep point " .. self:desc(p) .. ")") or ""
    fail(("%s: field 'config'%s: %s"):format(self.src, where, err))
  end
  return resolved
end

-- The point's identity: everything that changes what it measures.
function Planner:hash_of(inp, eff)
  local e = self.e
  local what = { mode = e.mode, backend = inp.backend, config = eff, workload = inp.workload,
    seed = inp.seed, by = e.by or false, timing = e.timing or false }
  -- what a backend's on_backend entry replaces, and the variant pins, are part of the point
  -- too (absent: the hash stays as it was for files without them)
  if e.on_backend ~= nil then what.on_backend = e.on_backend end
  if next(inp.variant) ~= nil then what.variant = inp.variant end
  if inp.cpsim ~= nil then what.context_parallel_sim = inp.cpsim end
  return results.hash(results.canonical(what))
end

-- One point config (its repeats), or a skip with the reason.
function Planner:add(inp, cfg_table, p)
  local e, plan = self.e, self.plan
  local resolved = self:resolve(cfg_table, p)
  local info, verr = util.validate_config(resolved)
  if not info then return self:skip(p, verr) end
  if e.mode == "step" and (inp.workload.kind or "synthetic") == "synthetic" then
    -- a step the config cannot take (more rows than max_rows, a request longer than
    -- max_model_len) is an invalid combination: skipped and reported, like a config rule
    local fits, why = wschema.fits(inp.workload, resolved)
    if not fits then return self:skip(p, why) end
  end
  local eff = effective_config(resolved, info)
  local hash = self:hash_of(inp, eff)
  local same = self.seen_hash[hash]
  if same then
    -- e.g. sparse_block_kv = auto and = 8 resolve to one config: one measurement, not two
    return self:skip(p, ("the same point as %s once resolved (config_hash %s)")
      :format(same ~= "" and same or "the base config", hash))
  end
  self.seen_hash[hash] = self:desc(p)
  for r = 0, e.repeats - 1 do
    plan.points[#plan.points + 1] = {
      index = #plan.points, ["repeat"] = r, params = p, desc = self:desc(p),
      config = resolved, effective = eff, info = info, workload = inp.workload,
      seed = inp.seed + r, base_seed = inp.seed, backend = inp.backend, variant = inp.variant,
      hash = hash, combo = plan.combos, context_parallel_sim = inp.cpsim,
    }
  end
  plan.combos = plan.combos + 1
  if #plan.points > M.MAX_POINTS then
    fail(("%s: the sweep expands to more than %d points; split it"):format(self.src, M.MAX_POINTS))
  end
end

-- One combination of the swept values; sparse_block_kv = "all" expands here into every
-- valid choice of this point's config.
function Planner:combo(params)
  local inp = combo_inputs(self.e, params, self.order, self.src)
  if self.e.sweep.sparse_block_kv ~= "all" then return self:add(inp, inp.config, params) end
  local base = deep_copy(inp.config)
  base.sparse_block_kv = nil
  local list, lerr = util.valid_sbk(self:resolve(base, params))
  if not list or #list == 0 then
    return self:skip(params, lerr or "no valid sparse_block_kv for this config",
      self:desc(params) .. " sparse_block_kv=all")
  end
  for _, sbk in ipairs(list) do
    local p = deep_copy(params)
    p.sparse_block_kv = sbk
    local c2 = deep_copy(inp.config)
    c2.sparse_block_kv = sbk
    self:add(inp, c2, p)
  end
end

-- Walks the product of the axes, the last axis fastest.
local function each_combo(e, axes, fn)
  if #axes == 0 then return fn({}) end
  local idx = {}
  for i = 1, #axes do idx[i] = 1 end
  while true do
    local params = {}
    for ai, a in ipairs(axes) do
      for _, f in ipairs(a.fields) do params[f] = e.sweep[f][idx[ai]] end
    end
    fn(params)
    local ai = #axes
    while ai >= 1 do
      idx[ai] = idx[ai] + 1
      if idx[ai] <= axes[ai].n then break end
      idx[ai] = 1
      ai = ai - 1
    end
    if ai == 0 then return end
  end
end

-- build(e, src, source_path) -> plan { exp, source, points, skipped, swept, combos, metrics }.
function M.build(e, src, source_path)
  local axes = axes_of(e)
  local total = 1
  for _, a in ipairs(axes) do
    total = total * a.n
    if total > M.MAX_POINTS then
      fail(("%s: the sweep expands to more than %d point configs; split it")
        :format(src, M.MAX_POINTS))
    end
  end
  local pl = new_planner(e, src, source_path)
  each_combo(e, axes, function(params) pl:combo(params) end)
  local plan = pl.plan
  if #plan.points == 0 then
    local first = plan.skipped[1]
    fail(("%s: no valid point: every point config is refused by the builder or does not fit "
      .. "its workload%s"):format(src, first and (" (e.g. " .. (first.desc ~= "" and first.desc
      .. ": " or "") .. first.reason .. ")") or ""))
  end
  -- the metrics the table shows
  plan.metrics = e.metrics
    or (e.mode == "chunks" and report.DEFAULT_CHUNK_TABLE or report.DEFAULT_STEP_TABLE)
  return plan
end

-- "i/n" or {i, n} -> { i, n }.
function M.parse_shard(shard)
  if shard == nil then return nil end
  local i, n
  if type(shard) == "string" then
    i, n = shard:match("^(%d+)/(%d+)$")
    i, n = tonumber(i), tonumber(n)
  elseif type(shard) == "table" then
    i, n = shard[1] or shard.index, shard[2] or shard.count
  end
  if not is_int(i) or not is_int(n) or n < 1 or i < 0 or i >= n then
    fail(("shard = %s: must be i/n with 0 <= i < n (e.g. 0/4)"):format(show(shard)))
  end
  return { i = i, n = n }
end

function M.in_shard(plan, pt)
  return not plan.shard or pt.index % plan.shard.n == plan.shard.i
end

---------------------------------------------------------------------------- describe

local function config_line(cfg)
  local parts = {}
  local seen = {}
  for _, f in ipairs(util.field_names()) do
    if cfg[f] ~= nil then
      parts[#parts + 1] = ("%s=%s"):format(f, tostring(cfg[f]))
      seen[f] = true
    end
  end
  for _, f in ipairs(sorted_keys(cfg)) do
    if not seen[f] then parts[#parts + 1] = ("%s=%s"):format(tostring(f), tostring(cfg[f])) end
  end
  return table.concat(parts, " ")
end

local function variant_line(pins)
  local parts = {}
  for _, f in ipairs(sorted_keys(pins)) do parts[#parts + 1] = ("%s=%s"):format(f, pins[f]) end
  return table.concat(parts, " ")
end

local function describe_head(plan, out)
  local e = plan.exp
  out[#out + 1] = ("experiment %s%s%s"):format(e.name, plan.source and (" (" .. plan.source .. ")")
    or "", e.question and (": " .. e.question) or "")
  out[#out + 1] = ("mode %s, backend %s, seed %d, repeats %d%s; workload %s"):format(e.mode,
    e.backend, e.seed, e.repeats, e.by and (", by " .. e.by) or "", results.canonical(e.workload))
  local nrun = 0
  for _, pt in ipairs(plan.points) do if M.in_shard(plan, pt) then nrun = nrun + 1 end end
  out[#out + 1] = ("%d points (%d point configs x %d repeats), %d skipped%s"):format(#plan.points,
    plan.combos, e.repeats, #plan.skipped, plan.shard and (("; shard %d/%d runs %d of them")
      :format(plan.shard.i, plan.shard.n, nrun)) or "")
  if #plan.swept > 0 then out[#out + 1] = "swept: " .. table.concat(plan.swept, ", ") end
  out[#out + 1] = ""
end

local function describe_point(plan, pt, out)
  local e = plan.exp
  local idxs = {}
  for r = 0, e.repeats - 1 do
    local p = pt.index + r
    idxs[#idxs + 1] = tostring(p) .. ((plan.shard and not M.in_shard(plan, plan.points[p + 1]))
      and "(other shard)" or "")
  end
  out[#out + 1] = ("point %s  [%s]%s"):format(table.concat(idxs, ","), pt.hash,
    pt.desc ~= "" and ("  " .. pt.desc) or "")
  out[#out + 1] = "  config: " .. config_line(pt.effective)
  if next(pt.variant) ~= nil then out[#out + 1] = "  variant: " .. variant_line(pt.variant) end
  if pt.backend ~= e.backend then out[#out + 1] = "  backend: " .. pt.backend end
  for _, k in ipairs(plan.swept) do
    if k:match("^workload%.") then
      out[#out + 1] = "  workload: " .. results.canonical(pt.workload)
      break
    end
  end
end

-- describe(plan) -> the plan as text: every point config with its full builder config, and
-- the skipped ones.
function M.describe(plan)
  local out = {}
  describe_head(plan, out)
  local last_combo = -1
  for _, pt in ipairs(plan.points) do
    if pt.combo ~= last_combo then
      last_combo = pt.combo
      describe_point(plan, pt, out)
    end
  end
  if #plan.skipped > 0 then
    out[#out + 1] = ""
    out[#out + 1] = ("skipped (%d: refused by the builder, too small for the workload, or the "
      .. "same as another point):"):format(#plan.skipped)
    for _, s in ipairs(plan.skipped) do
      out[#out + 1] = ("  %s: %s"):format(s.desc ~= "" and s.desc or "(base config)", s.reason)
    end
  end
  return table.concat(out, "\n") .. "\n"
end

return M
