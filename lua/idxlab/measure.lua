-- idxlab.measure: the measurement of one experiment point (SPEC 6): generates its synthetic
-- workload (idxlab.workload) or loads its replay files (idxlab.replay), runs the step(s)
-- (idxlab.step) and summarises them into a result row (idxlab.summary). It sits above step and
-- replay, so neither needs the other's caller. The contract is in docs/experiments.md.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local cpsim = require("idxlab.cpsim")
local replay = require("idxlab.replay")
local results = require("idxlab.results")
local step = require("idxlab.step")
local summary = require("idxlab.summary")
local Tensor = require("idxlab.tensor")
local workload = require("idxlab.workload")

local M = {}

-- The runner's warm-up (point.warmup): the point's first step, production path only, run
-- until WARMUP_S seconds have passed (at least once, at most WARMUP_MAX_RUNS times), so the
-- GPU's clocks have ramped and every kernel and graph has run before the first timed point.
M.WARMUP_S = 0.2
M.WARMUP_MAX_RUNS = 200

-- A run's steps, one per context (idxlab.experiment.run makes one per run and frees it at
-- the end): a point whose config and pins are those of the previous point on its context
-- reuses that point's Step -- its buffers, its builder and so its CUDA graph (idxlab.step
-- replays a graph of the same step shape without capturing it again) -- so the runner's
-- warm-up, a point's repeats and a sweep over the workload capture once per step shape and
-- describe (validate) the config once. A point of another config frees the Step it replaces.
local Steps = {}
Steps.__index = Steps

function M.step_cache() return setmetatable({ by_ctx = {} }, Steps) end

-- The Step for (ctx, the point's config with its pins), made on first use.
function Steps:get(ctx, cfg)
  local key = results.canonical(cfg)
  local e = self.by_ctx[ctx]
  if e and e.key == key then return e.step end
  self:drop(ctx)
  local p = step.new(ctx, cfg)
  self.by_ctx[ctx] = { key = key, step = p }
  return p
end

-- Frees ctx's Step (after a failure: a step that raised midway is not reused).
function Steps:drop(ctx)
  local e = self.by_ctx[ctx]
  self.by_ctx[ctx] = nil
  if e then e.step:free() end
end

function Steps:free()
  for ctx in pairs(self.by_ctx) do self:drop(ctx) end
end

-- measure(ctx, point) -> row. point: { config = builder fields (+ variant = {family = name},
-- optional), workload = synthetic spec or { kind = "replay", ... }, seed, timing, by,
-- steps = a M.step_cache() (optional: the Step then outlives the call, for the next point) }.
-- With a variant registry, row.variant names the variant that ran per family. With
-- point.context_parallel_sim (the research mode, idxlab.cpsim) the step's decode rows also run
-- as c simulated ranks: the row's recall_at_k, mass_recall and candidate_coverage are then the
-- simulation's, beside its cp_* metrics. With point.warmup (the runner's untimed warm-up,
-- idxlab.experiment.run) only the production path of the point's first step runs (and on a
-- GPU its CUDA graph), with the point's timing, for M.WARMUP_S: no comparison path, nothing
-- summarised; -> { warmup_runs = n } instead of a row.
function M.measure(ctx, point)
  if type(point) ~= "table" then errors.fail("measure: point must be a table") end
  local cache = point.steps
  if cache ~= nil and getmetatable(cache) ~= Steps then
    errors.fail("measure: point.steps must be a measure.step_cache(), got %s", type(cache))
  end
  local cfg_in = point.config or {}
  step.split_variant(cfg_in, "measure") -- the pins' checks, with measure's name
  -- the step describes (validates and resolves) the config once; its cfg is the resolved one
  local p = cache and cache:get(ctx, cfg_in) or step.new(ctx, cfg_in)
  local cfg = p.cfg
  local wl = point.workload or {}
  local ok_in, steps = pcall(function()
    if wl.kind == "replay" then return replay.load_workload(ctx, wl, cfg) end
    return { workload.generate(ctx, wl, cfg, point.seed or 0) }
  end)
  if not ok_in then
    if not cache then p:free() end
    errors.rethrow(steps)
  end
  local acc = summary.new_acc()
  local sim = point.context_parallel_sim ~= nil and cpsim.check(point.context_parallel_sim)
  local sim_acc, cp = sim and summary.new_acc(), sim and cpsim.new_cp()
  local ran, warm_runs = nil, 0
  local ok, err = pcall(function()
    if point.warmup then
      if not steps[1] then return end
      local t0 = core.now_us()
      repeat
        p:step(steps[1], { timing = point.timing })
        warm_runs = warm_runs + 1
      until warm_runs >= M.WARMUP_MAX_RUNS or (core.now_us() - t0) * 1e-6 >= M.WARMUP_S
      return
    end
    for _, inputs in ipairs(steps) do
      local keep = sim and cpsim.collector() or nil
      ran = p:step(inputs, { acc = acc, timing = point.timing, keep = keep }).variant
      if sim then cpsim.sim_step(ctx, p.cfg, sim, inputs, keep, sim_acc, cp) end
    end
  end)
  local info = p.builder and p.builder:info() or nil
  if not cache then
    p:free()
  elseif not ok then
    cache:drop(ctx)
  end
  for _, inputs in ipairs(steps) do
    for _, t in pairs(inputs) do
      if Tensor.is_tensor(t) then t:free() end
    end
  end
  if not ok then errors.rethrow(err) end
  if point.warmup then return { warmup_runs = warm_runs } end
  local row = summary.summarize(acc, info, point.by)
  row.variant = ran
  if sim then cpsim.finish(row, sim_acc, cp, sim) end
  return row
end

return errors.wrap(M)
