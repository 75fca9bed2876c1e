-- idxlab.experiment.run: runs a plan's points (or this shard's), one results.jsonl line per
-- point as it finishes, so a kill loses at most the point in flight and --resume continues;
-- Ctrl-C stops cleanly (status 130); a point that fails is reported and the rest run. Then the
-- CSV, the summary and the plots (idxlab.report).
--
-- The measure: idxlab.measure by default (a context per backend), opts.measure, or a
-- stand-in for the kernels (opts.fake, or the test hook IDXLAB_FAKE_MEASURE = the path of a
-- Lua file returning one), which runs without a context.
local errors = require("idxlab.errors")
local Context = require("idxlab.context")
local measure_mod = require("idxlab.measure")
local progress = require("idxlab.progress")
local report = require("idxlab.report")
local fs = require("idxlab.fs")
local interrupt = require("idxlab.interrupt")
local results = require("idxlab.results")
local util = require("idxlab.experiment.util")
local schema = require("idxlab.experiment.schema")
local wschema = require("idxlab.experiment.workload_schema")
local plan_mod = require("idxlab.experiment.plan")
local rows = require("idxlab.experiment.rows")
local chunks = require("idxlab.experiment.chunks")

local M = {}

local fail = errors.fail
local show, deep_copy = util.show, util.deep_copy

local OPTIONS = { "set", "dry_run", "resume", "shard", "out", "dir", "measure", "fake", "progress",
  "stdout", "stderr", "gnuplot", "quiet", "command" }
local known_option = {}
for _, k in ipairs(OPTIONS) do known_option[k] = true end

-- Options a run only reads later are checked now, before any file is touched.
function M.check_options(opts)
  if type(opts) ~= "table" then fail("run: options must be a table") end
  for k in pairs(opts) do
    if not known_option[k] then
      fail(("run: option %s: unknown (set, dry_run, resume, shard, out, dir, measure, progress, "
        .. "stdout, stderr, gnuplot, quiet)"):format(tostring(k)))
    end
  end
  for _, k in ipairs({ "out", "dir" }) do
    if opts[k] ~= nil and (type(opts[k]) ~= "string" or opts[k] == "") then
      fail(("run: %s = %s: must be a non-empty directory path"):format(k == "out" and "--out"
        or "dir", show(opts[k])))
    end
  end
  if opts.progress ~= nil and not progress.STYLES[opts.progress] then
    fail(("run: --progress = %s: must be bar, plain or off"):format(show(opts.progress)))
  end
end

---------------------------------------------------------------------------- the measure

-- A Lua file that returns a measure function (the IDXLAB_FAKE_MEASURE test hook).
local function load_measure_file(path)
  local ok, fn = pcall(dofile, path)
  if not ok or type(fn) ~= "function" then
    fail(("run: IDXLAB_FAKE_MEASURE = %s: must be the path of a Lua file returning a measure "
      .. "function%s"):format(show(path), ok and "" or (": " .. errors.message(fn))))
  end
  return fn
end

-- -> { fn = function(ctx, point) -> row, contexts = whether it gets real contexts,
--      replaces_chunks = whether it also stands in for the chunker }.
local function resolve_measure(opts)
  local m, fake = opts.measure, opts.fake
  if m ~= nil then
    if type(m) ~= "function" then
      fail(("run: measure = %s: must be a function(ctx, point) -> row"):format(show(m)))
    end
    return { fn = m, contexts = true, replaces_chunks = true }
  end
  if fake == nil then
    local path = os.getenv("IDXLAB_FAKE_MEASURE")
    if path and path ~= "" then
      fake = load_measure_file(path)
    end
  end
  if fake ~= nil then
    if type(fake) ~= "function" then
      fail(("run: fake = %s: must be a function(ctx, point) -> row"):format(show(fake)))
    end
    -- a stand-in for the kernels: no context, and the chunker (no kernels) runs as it is
    return { fn = fake, contexts = false, replaces_chunks = false }
  end
  -- only the kernels' own measure warms up (Runner:warm_up); a stand-in has nothing to warm
  return { fn = measure_mod.measure, contexts = true, replaces_chunks = false, warmup = true }
end

---------------------------------------------------------------------------- the results dir

local function default_dir(plan, opts)
  local dir = (opts.out or "results") .. "/" .. plan.exp.name
  if plan.shard and plan.shard.n > 1 then
    dir = ("%s/shard-%d-of-%d"):format(dir, plan.shard.i, plan.shard.n)
  end
  return dir
end

-- Makes the results dir and writes the plan; -> the points done earlier (resume) and count.
local function prepare_dir(plan, rec, dir, opts, stderr)
  fs.mkdir_p(dir)
  local done, prior = {}, 0
  if opts.resume then
    done, prior = rows.resumable(plan, rec, dir, stderr)
  else
    rows.set_aside(dir, stderr)
  end
  fs.write_atomic(dir .. "/experiment.json",
    results.encode(rec, { "schema", "name", "question", "source" }) .. "\n")
  return done, prior
end

---------------------------------------------------------------------------- one point

local is_interrupt = interrupt.is

-- The failure text of a point: an idxlab error's "idxlab: message"; anything else (a bug) in
-- full, so it can be found.
local function failure_text(e)
  if errors.is(e) then return "idxlab: " .. e.message end
  return tostring(e)
end

-- The runner's state over one run.
local Runner = {}
Runner.__index = Runner

function Runner:context(backend)
  if not self.measure.contexts then return nil end
  if not self.ctxs[backend] then
    -- IDXLAB_THREADS: the CPU threads a local shard gets (idxlab.shards sets it)
    local threads = tonumber(os.getenv("IDXLAB_THREADS") or "")
    self.ctxs[backend] = Context.new({ backend = backend, threads = threads })
  end
  return self.ctxs[backend]
end

function Runner:free_contexts()
  -- the run's steps first: their buffers live in the contexts
  if self.steps then self.steps:free() end
  for _, c in pairs(self.ctxs) do c:free() end
  self.ctxs = {}
end

-- on_backend[<backend>] replaces the workload and timing where that backend runs; the
-- point's swept workload values apply on top of the backend's workload.
function Runner:apply_on_backend(mpoint, pt, backend)
  local ob = type(self.e.on_backend) == "table" and self.e.on_backend[backend]
  if type(ob) ~= "table" then return end
  if ob.workload ~= nil then
    mpoint.workload = deep_copy(ob.workload)
    for _, k in ipairs(self.plan.swept) do
      local v = pt.params[k]
      if v ~= nil and schema.sweep_key_kind(k) == "workload" then
        wschema.set_swept(mpoint.workload, k, v, self.plan.source or "experiment")
      end
    end
  end
  if ob.timing ~= nil then mpoint.timing = deep_copy(ob.timing) end
end

-- What the measure function sees of a point; the config carries the variant pins (as
-- config.variant) when the point has any.
local function measure_point(e, pt)
  local mpoint = { config = deep_copy(pt.config), workload = deep_copy(pt.workload),
    seed = pt.seed, by = e.by, timing = e.timing }
  if next(pt.variant) ~= nil then mpoint.config.variant = deep_copy(pt.variant) end
  if pt.context_parallel_sim ~= nil then
    mpoint.context_parallel_sim = deep_copy(pt.context_parallel_sim)
  end
  return mpoint
end

-- Measures one point: ok, the measured row (or the error), and where it ran.
function Runner:measure_one(pt, mpoint)
  local ran = {}
  local ok, measured = pcall(function()
    if self.e.mode == "chunks" then
      -- the chunker runs no kernel: only an injected measure replaces it
      mpoint.info = pt.info
      if self.measure.replaces_chunks then return self.measure.fn(nil, mpoint) end
      return chunks.measure(mpoint)
    end
    local ctx = self:context(pt.backend)
    if ctx then
      ran.backend, ran.device = ctx:backend(), ctx:device_name()
      ran.device_bus_id = ctx:device_bus_id()
      self:apply_on_backend(mpoint, pt, ran.backend)
    end
    -- the kernels' measure reuses one Step per config across points (idxlab.measure)
    if self.measure.warmup then mpoint.steps = self.steps end
    return self.measure.fn(ctx, mpoint)
  end)
  if self.e.mode == "chunks" then
    ran.backend, ran.device = "none", "chunker (no kernels)"
  elseif not self.measure.contexts then
    ran.backend, ran.device = pt.backend, "fake"
  end
  return ok, measured, ran
end

function Runner:failed_point(pt, reason, line)
  self.failed[#self.failed + 1] = { point = pt.index, desc = pt.desc, reason = reason }
  self.prog:fail_point(line)
end

-- Runs one point; false when interrupted.
function Runner:point(pt)
  local e = self.e
  self.prog:start_point(("point %d%s"):format(pt.index, pt.desc ~= "" and (" " .. pt.desc) or ""))
  local t0 = progress.now()
  local mpoint = measure_point(e, pt)
  local ok, measured, ran = self:measure_one(pt, mpoint)
  if not ok and is_interrupt(measured) then return false end
  local desc = pt.desc ~= "" and (" (" .. pt.desc .. ")") or ""
  if not ok then
    local msg = failure_text(measured)
    self:failed_point(pt, msg, ("idxlab: point %d%s failed: %s"):format(pt.index, desc, msg))
  elseif type(measured) ~= "table" then
    self:failed_point(pt, "measure returned " .. type(measured),
      ("idxlab: point %d: measure returned %s, not a row"):format(pt.index, type(measured)))
  else
    local row = rows.build(self.plan, pt, measured, { backend = ran.backend, device = ran.device,
      device_bus_id = ran.device_bus_id,
      wall = progress.now() - t0, workload = mpoint.workload })
    self.app:append(row, self.order)
    self.new_rows = self.new_rows + 1
    self.prog:finish_point(self.main_metric, row[self.main_metric])
  end
  return true
end

-- The metric the progress line shows: recall_at_k when a step table has it, else the first.
local function main_metric(plan)
  local m = plan.metrics[1]
  if plan.exp.mode == "step" then
    for _, x in ipairs(plan.metrics) do if x == "recall_at_k" then m = x end end
  end
  return m
end

-- Before the sweep, an untimed warm-up step of the shape of the first point to run on each
-- backend, repeated for idxlab.measure's WARMUP_S (issue 15: else the first point's times
-- carry the cold start: module loading, the first graph upload, clocks ramping). Nothing is
-- recorded, no point is dropped or re-run; the progress output says so. A warm-up that fails
-- is noted and its point runs as usual.
-- -> false when interrupted.
function Runner:warm_up(todo)
  if not self.measure.warmup or self.e.mode == "chunks" then return true end
  local seen = {}
  for _, pt in ipairs(todo) do
    if not seen[pt.backend] then
      seen[pt.backend] = true
      local mpoint = measure_point(self.e, pt)
      mpoint.warmup = true
      local t0 = progress.now()
      local ok, err, ran = self:measure_one(pt, mpoint)
      if not ok and is_interrupt(err) then return false end
      local runs = ok and type(err) == "table" and err.warmup_runs or 1
      self.prog:note(("warm-up: one untimed step of point %d's shape on %s, run %d time%s "
        .. "(%.1f s), not recorded"):format(pt.index, ran.backend or tostring(pt.backend), runs,
        runs == 1 and "" or "s", progress.now() - t0))
      if not ok then
        self.prog:note("warm-up failed (the point runs as usual): " .. failure_text(err))
      end
    end
  end
  return true
end

-- Runs the points in todo; -> interrupted.
function Runner:loop(todo)
  local interrupted = false
  local loop_ok, loop_err = pcall(function()
    if not self:warm_up(todo) then
      interrupted = true
      return
    end
    for _, pt in ipairs(todo) do
      -- Ctrl-C in the REPL (idxlab.interrupt) stops between points, the finished ones kept
      if interrupt.pending() or not self:point(pt) then
        interrupted = true
        break
      end
    end
  end)
  self.app:close()
  self.prog:finish()
  self:free_contexts()
  if not loop_ok then
    if is_interrupt(loop_err) then interrupted = true else error(loop_err, 0) end
  end
  return interrupted
end

---------------------------------------------------------------------------- run

-- The summary, the CSV and the plots of everything finished so far (resumed rows included),
-- and the closing lines; -> the exit status.
local function finish(r, dir, jpath, rec, todo, interrupted, opts)
  local e, plan = r.e, r.plan
  local stdout, stderr = opts.stdout or io.stdout, opts.stderr or io.stderr
  local all = results.read_jsonl(jpath)
  local out = report.write(dir, all, rec, { gnuplot = opts.gnuplot,
    width = report.terminal_width(stdout) })
  if not opts.quiet then
    stdout:write("\n", out.screen)
    for _, m in ipairs(out.messages) do stdout:write(m, "\n") end
    stdout:write(("results in %s (results.jsonl, results.csv, summary.txt%s)\n"):format(dir,
      #(e.plots or {}) > 0 and ", plots" or ""))
  end
  for _, f in ipairs(r.failed) do
    stderr:write(("idxlab: point %d failed: %s\n"):format(f.point, f.reason))
  end
  local status = 0
  if interrupted then
    status = 130
    local cmd = opts.command
      or (plan.source and ("idxlab run " .. plan.source) or "idxlab.run(...)")
    stderr:write(("idxlab: interrupted: %d of %d points of this run done, saved in %s; continue "
      .. "with: %s --resume\n"):format(r.new_rows, #todo, jpath, cmd))
  elseif #r.failed > 0 then
    status = 1
  end
  return { plan = plan, dir = dir, rows = all, new_rows = r.new_rows, skipped = plan.skipped,
    failed = r.failed, interrupted = interrupted, status = status, summary = out.summary,
    files = out.files, messages = out.messages }
end

-- The run, in dir, which this process has locked.
local function run_held(plan, opts, dir)
  local stderr = opts.stderr or io.stderr
  local e = plan.exp
  local measure = resolve_measure(opts)
  local rec = rows.plan_record(plan)
  local jpath = dir .. "/results.jsonl"
  local done, prior = prepare_dir(plan, rec, dir, opts, stderr)
  local todo = {}
  for _, pt in ipairs(plan.points) do
    if plan_mod.in_shard(plan, pt) and not done[pt.index] then todo[#todo + 1] = pt end
  end
  for _, s in ipairs(plan.skipped) do
    stderr:write(("idxlab: skipped %s: %s\n"):format(s.desc ~= "" and s.desc or "(base config)",
      s.reason))
  end
  local prog = progress.new({ total = #todo, out = stderr,
    style = opts.progress or (opts.quiet and "off") or nil, title = e.name })
  if prior > 0 then
    prog:note(("resuming: %d points already done, %d to run"):format(prior, #todo))
  end
  local r = setmetatable({ e = e, plan = plan, measure = measure, ctxs = {}, failed = {},
    steps = measure.warmup and measure_mod.step_cache() or nil,
    new_rows = 0, prog = prog, app = results.open_jsonl(jpath, not opts.resume),
    order = rows.row_order(plan), main_metric = main_metric(plan) }, Runner)
  local interrupted = r:loop(todo)
  return finish(r, dir, jpath, rec, todo, interrupted, opts)
end

-- run(plan, opts) -> the result (see idxlab.experiment.run); opts already checked. The
-- results folder is locked for the whole run (fs.lock: a second run, --resume or merge into
-- it is refused with this one's pid and command), and released however the run ends.
function M.run(plan, opts)
  local dir = opts.dir or default_dir(plan, opts)
  fs.mkdir_p(dir)
  local lock = fs.lock(dir, opts.command or (plan.source and ("idxlab.run(%q)"):format(plan.source))
    or "idxlab.run(an experiment table)")
  local ok, res = pcall(run_held, plan, opts, dir)
  lock:release()
  if not ok then error(res, 0) end
  return res
end

return M
