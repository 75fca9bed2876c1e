-- idxlab.experiment.rows: what a run writes. The saved plan (experiment.json, read by report
-- and merge), one results.jsonl row per point (the measure's metrics, the point's full
-- config, seed, backend, device, variants and provenance), and --resume: which rows of an
-- earlier run this plan can keep.
local errors = require("idxlab.errors")
local json = require("idxlab.json")
local fs = require("idxlab.fs")
local results = require("idxlab.results")
local util = require("idxlab.experiment.util")
local schema = require("idxlab.experiment.schema")
local provenance = require("idxlab.experiment.provenance")

local M = {}

local fail = errors.fail

local QUALITY = { "selection_agreement", "fp32_selection_agreement", "recall_at_k", "mass_recall",
  "candidate_coverage" }

local META_HEAD = { "schema", "experiment", "point", "shard", "repeat", "config_hash", "seed",
  "backend", "device", "device_bus_id", "mode" }
local META_TAIL = { "per_layer", "by_length", "workload", "idxlab_version", "git_commit",
  "git_dirty", "wall_time_s", "finished_at" }

-- The column of a kernel family's variant (SPEC 6).
local function variant_column(family) return "variant." .. family end

-- The order of a row's fields in results.jsonl.
function M.row_order(plan)
  local order = {}
  for _, k in ipairs(META_HEAD) do order[#order + 1] = k end
  for _, k in ipairs(plan.swept) do order[#order + 1] = k end
  for _, k in ipairs(util.field_names()) do order[#order + 1] = k end
  for _, f in ipairs(util.families()) do order[#order + 1] = variant_column(f) end
  for _, k in ipairs(schema.metric_names(plan.exp.mode)) do order[#order + 1] = k end
  for _, k in ipairs(META_TAIL) do order[#order + 1] = k end
  return order
end

-- The saved form of the experiment and its plan (experiment.json): what report and merge read.
function M.plan_record(plan)
  local e = plan.exp
  local pts = {}
  for _, pt in ipairs(plan.points) do
    pts[#pts + 1] = { point = pt.index, ["repeat"] = pt["repeat"], config_hash = pt.hash,
      params = pt.params }
  end
  local skipped = {}
  for _, s in ipairs(plan.skipped) do
    skipped[#skipped + 1] = { params = s.params, reason = s.reason }
  end
  return {
    schema = results.SCHEMA, name = e.name, question = e.question, source = plan.source,
    sets = plan.sets, seed = e.seed, backend = e.backend, mode = e.mode, by = e.by,
    repeats = e.repeats, timing = e.timing, workload = e.workload, config = e.config,
    variant = next(e.variant) ~= nil and e.variant or nil, sweep = e.sweep, zip = e.zip,
    metrics = plan.metrics, plots = e.plots, swept = plan.swept, points = pts, skipped = skipped,
  }
end

-- A metric without a value (no active rows) is written as null, not left out.
local function fill_nulls(row, mode)
  local null = json.null
  for _, m in ipairs(schema.metric_names(mode)) do
    if row[m] == nil then row[m] = null end
  end
  if type(row.per_layer) == "table" then
    for _, l in ipairs(row.per_layer) do
      if type(l) == "table" then
        for _, m in ipairs(QUALITY) do if l[m] == nil then l[m] = null end end
      end
    end
  end
end

-- variant.<family> for every family: what the measure says ran (its row's `variant` table),
-- else the point's pin, else "default".
local function set_variants(row, ran, pins)
  ran = type(ran) == "table" and ran or {}
  for _, f in ipairs(util.families()) do
    local v = ran[f]
    if type(v) ~= "string" then v = pins[f] or "default" end
    row[variant_column(f)] = v
  end
end

-- build(plan, pt, measured, run) -> the row; run = { backend, device, wall, workload (what the
-- measure ran, on_backend applied) }.
function M.build(plan, pt, measured, run)
  local row = {}
  -- metrics first, so the point's own fields below always win a name clash
  for k, v in pairs(measured or {}) do
    if type(k) == "string" then row[k] = v end
  end
  local ran = row.variant
  row.variant = nil
  row.schema = results.SCHEMA
  row.experiment = plan.exp.name
  row.point = pt.index
  row["repeat"] = pt["repeat"]
  row.config_hash = pt.hash
  row.backend = run.backend
  row.device = run.device
  row.device_bus_id = run.device_bus_id -- the GPU's PCI bus id (nil on the CPU)
  row.mode = plan.exp.mode
  if plan.shard then row.shard = ("%d/%d"):format(plan.shard.i, plan.shard.n) end
  for k, v in pairs(pt.effective) do row[k] = v end
  -- swept values that are not builder fields (workload.<knob>); builder fields are already
  -- there as the builder resolved them (a swept "64MiB" shows as its byte count)
  for k, v in pairs(pt.params) do
    if type(v) ~= "table" and pt.effective[k] == nil and k ~= "seed" and k ~= "backend" then
      row[k] = v
    end
  end
  row.seed = pt.seed
  set_variants(row, ran, pt.variant)
  fill_nulls(row, plan.exp.mode)
  local git = provenance.git_info()
  row.workload = run.workload or pt.workload
  row.idxlab_version = provenance.version
  row.git_commit = git.commit
  row.git_dirty = git.dirty
  row.wall_time_s = run.wall
  row.finished_at = provenance.utc_now()
  return row
end

-- Compares a saved plan (experiment.json) with this one: the same points, the same configs.
function M.same_plan(saved, rec)
  if type(saved) ~= "table" or type(saved.points) ~= "table" then return false, "no saved plan" end
  if saved.name ~= rec.name then
    return false, ("the experiment's name was %s"):format(tostring(saved.name))
  end
  if #saved.points ~= #rec.points then
    return false, ("%d points then, %d now"):format(#saved.points, #rec.points)
  end
  for i, p in ipairs(rec.points) do
    local s = saved.points[i]
    if type(s) ~= "table" or s.config_hash ~= p.config_hash or s.point ~= p.point then
      return false, ("point %d's config differs (%s then, %s now)"):format(p.point,
        tostring(s and s.config_hash), p.config_hash)
    end
  end
  return true
end

-- The points an earlier run in dir already measured (index -> true) and their count, for
-- --resume; refuses results of another plan. A half-written last line is removed (and said).
function M.resumable(plan, rec, dir, stderr)
  local jpath = dir .. "/results.jsonl"
  local saved_text = fs.read_file(dir .. "/experiment.json")
  if saved_text then
    local ok, why = M.same_plan(results.decode(saved_text), rec)
    if not ok then
      fail(("--resume: %s holds results of a different plan (%s): run without --resume to start "
        .. "over, or use another --out"):format(dir, why))
    end
  end
  local repaired, info = results.repair_jsonl(jpath)
  if repaired then
    stderr:write(("idxlab: %s: removed a half-written last line (line %d: %s)\n"):format(jpath,
      info.torn_line, info.torn_reason))
  end
  local done, prior = {}, 0
  for _, r in ipairs(results.read_jsonl(jpath)) do
    local pt = type(r.point) == "number" and plan.points[r.point + 1]
    if not pt or pt.hash ~= r.config_hash then
      fail(("--resume: %s has point %s with config %s, which this plan does not have: the "
        .. "experiment changed; run without --resume or use another --out"):format(jpath,
        tostring(r.point), tostring(r.config_hash)))
    end
    if done[r.point] then fail(("--resume: %s has point %d twice"):format(jpath, r.point)) end
    done[r.point] = true
    prior = prior + 1
  end
  return done, prior
end

-- A fresh run keeps an earlier results.jsonl aside as results.jsonl.prev.
function M.set_aside(dir, stderr)
  local jpath = dir .. "/results.jsonl"
  if not fs.exists(jpath) then return end
  local old = fs.read_file(jpath)
  if old and old ~= "" then
    os.rename(jpath, jpath .. ".prev")
    stderr:write(("idxlab: %s: earlier results moved to results.jsonl.prev (use --resume to "
      .. "continue a run instead)\n"):format(jpath))
  end
end

return M
