-- idxlab.experiment: experiment files -> validated plan -> points run -> results.
--
--   load(path)            runs the file in a sandbox (no io/os/require, bounded time) and
--                         returns its table
--   apply_sets(exp, sets) --set key=value overrides (SPEC 8 grammar, via config.parse_sets)
--   plan(file_or_table, opts) validates everything (errors name the file, the field and the
--                         reason, before anything runs) and expands the sweep into points;
--                         a point the builder refuses is skipped with its reason
--   dry_run(...)          prints the plan, runs nothing
--   run(file_or_table, opts) runs the points (or this shard's), appends one results line per
--                         point, resumes, survives Ctrl-C, then writes CSV, summary and plots
--
-- The parts: sandbox (loading), schema and workload_schema (validation), sets (--set), plan
-- (expansion, the dry run's text), run (the points), rows (results.jsonl, experiment.json,
-- resume), chunks (mode = "chunks"), provenance (version, git, time), util (shared helpers).
-- The file format and the CLI are documented in docs/experiments.md. Errors are idxlab error
-- objects (idxlab.errors), their `where` set at these public functions.
local errors = require("idxlab.errors")
local util = require("idxlab.experiment.util")
local sandbox = require("idxlab.experiment.sandbox")
local schema = require("idxlab.experiment.schema")
local sets = require("idxlab.experiment.sets")
local plan_mod = require("idxlab.experiment.plan")
local run_mod = require("idxlab.experiment.run")
local rows = require("idxlab.experiment.rows")
local chunks = require("idxlab.experiment.chunks")
local provenance = require("idxlab.experiment.provenance")

local M = {}

local fail = errors.fail

-- The sandbox's instruction budget for one file (tests lower it).
M.MAX_INSTRUCTIONS = 2e7
M.MAX_POINTS = plan_mod.MAX_POINTS
M.TOP_FIELDS = schema.TOP_FIELDS

M.suggest = util.suggest
M.deep_copy = util.deep_copy
M.check_workload = schema.check_workload
M.parse_shard = plan_mod.parse_shard
M.describe = plan_mod.describe
M.plan_record = rows.plan_record
M.same_plan = rows.same_plan
M.git_info = provenance.git_info
M.measure_chunks = chunks.measure

function M.load(path) return sandbox.load(path, M.MAX_INSTRUCTIONS) end

function M.validate(exp, src) return schema.validate(exp, src or "experiment table") end

function M.apply_sets(exp, list) return sets.apply(exp, list, "experiment table") end

-- plan(file_or_table, opts) -> plan { exp, points, skipped, swept, metrics, combos, shard }.
-- opts: set = {"k=v", ...}, shard = "i/n".
local function plan(src_in, opts)
  opts = opts or {}
  if type(opts) ~= "table" then fail("options must be a table") end
  local exp, src, path
  if type(src_in) == "string" then
    path, src = src_in, src_in
    exp = M.load(src_in)
  elseif type(src_in) == "table" then
    src = "experiment table"
    exp = src_in
    schema.check_plain(exp, src)
  else
    fail(("run: the experiment must be a file path or a table, got %s"):format(type(src_in)))
  end
  if opts.set ~= nil then
    schema.check_plain(exp, src)
    exp = sets.apply(exp, opts.set, src)
  end
  local p = plan_mod.build(schema.validate(exp, src), src, path)
  p.sets = opts.set
  p.shard = plan_mod.parse_shard(opts.shard)
  return p
end
M.plan = plan

function M.dry_run(src, opts)
  local p = plan(src, opts)
  local text = plan_mod.describe(p)
  local stream = (opts and opts.stdout) or io.stdout
  stream:write(text)
  return p, text
end

-- run(file_or_table, opts) -> result { dir, rows, new_rows, skipped, failed, interrupted,
-- status (0, 1 when a point failed, 130 when interrupted), summary, files }.
-- opts: set = {"k=v"...}, dry_run, resume, shard = "i/n", out = base dir (default "results"),
-- dir = exact results dir, measure = function(ctx, point) -> row (default idxlab.measure,
-- with a context per backend), fake = a stand-in for the kernels, function(nil, point) -> row
-- (no context; a test hook, as is IDXLAB_FAKE_MEASURE = a Lua file returning one),
-- progress = "bar"|"plain"|"off", stdout/stderr = streams, gnuplot = command or "none", quiet.
function M.run(src, opts)
  opts = opts or {}
  run_mod.check_options(opts)
  local p = plan(src, opts)
  if opts.dry_run then
    local stream = opts.stdout or io.stdout
    stream:write(plan_mod.describe(p))
    return { plan = p, status = 0, dry_run = true }
  end
  return run_mod.run(p, opts)
end

return errors.wrap(M)
