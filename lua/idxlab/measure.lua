-- idxlab.measure: the measurement of one experiment point (SPEC 6): generates its synthetic
-- workload (idxlab.workload) or loads its replay files (idxlab.replay), runs the step(s)
-- (idxlab.step) and summarises them into a result row (idxlab.summary). It sits above step and
-- replay, so neither needs the other's caller. The contract is in docs/experiments.md.
local errors = require("idxlab.errors")
local config = require("idxlab.config")
local cpsim = require("idxlab.cpsim")
local replay = require("idxlab.replay")
local step = require("idxlab.step")
local summary = require("idxlab.summary")
local Tensor = require("idxlab.tensor")
local workload = require("idxlab.workload")

local M = {}

-- measure(ctx, point) -> row. point: { config = builder fields (+ variant = {family = name},
-- optional), workload = synthetic spec or { kind = "replay", ... }, seed, timing, by }. With
-- a variant registry, row.variant names the variant that ran per family. With
-- point.context_parallel_sim (the research mode, idxlab.cpsim) the step's decode rows also run
-- as c simulated ranks: the row's recall_at_k, mass_recall and candidate_coverage are then the
-- simulation's, beside its cp_* metrics. With point.warmup (the runner's untimed warm-up,
-- idxlab.experiment.run) only the production path of the point's first step runs, and on a
-- GPU its CUDA graph once: no comparison path, nothing summarised; -> nil.
function M.measure(ctx, point)
  if type(point) ~= "table" then errors.fail("measure: point must be a table") end
  local fields, pins = step.split_variant(point.config or {}, "measure")
  local cfg = config.describe(fields).config
  local wl = point.workload or {}
  local steps
  if wl.kind == "replay" then
    steps = replay.load_workload(ctx, wl, cfg)
  else
    steps = { workload.generate(ctx, wl, cfg, point.seed or 0) }
  end
  cfg.variant = pins
  local p = step.new(ctx, cfg)
  local acc = summary.new_acc()
  local sim = point.context_parallel_sim ~= nil and cpsim.check(point.context_parallel_sim)
  local sim_acc, cp = sim and summary.new_acc(), sim and cpsim.new_cp()
  local ran
  local ok, err = pcall(function()
    if point.warmup then
      if steps[1] then p:step(steps[1], { timing = { warmup = 0, iters = 1 } }) end
      return
    end
    for _, inputs in ipairs(steps) do
      local keep = sim and cpsim.collector() or nil
      ran = p:step(inputs, { acc = acc, timing = point.timing, keep = keep }).variant
      if sim then cpsim.sim_step(ctx, p.cfg, sim, inputs, keep, sim_acc, cp) end
    end
  end)
  local info = p.builder and p.builder:info() or nil
  p:free()
  for _, inputs in ipairs(steps) do
    for _, t in pairs(inputs) do
      if Tensor.is_tensor(t) then t:free() end
    end
  end
  if not ok then errors.rethrow(err) end
  if point.warmup then return nil end
  local row = summary.summarize(acc, info, point.by)
  row.variant = ran
  if sim then cpsim.finish(row, sim_acc, cp, sim) end
  return row
end

return errors.wrap(M)
