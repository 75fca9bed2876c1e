-- idxlab.pipeline: the name callers have used for one step and its measurement; kept so
-- that they keep working. It only re-exports: the step lives in idxlab.step, the accumulator
-- and the result row in idxlab.summary, the measurement of an experiment point in
-- idxlab.measure (the already-wrapped public functions, so errors still point at the
-- caller's line).
local step = require("idxlab.step")
local summary = require("idxlab.summary")
local measure = require("idxlab.measure")

return {
  new = step.new,                             -- pipeline.new(ctx, cfg) -> step (p:step, ...)
  MAX_CONSUMER_LAYERS = step.MAX_CONSUMER_LAYERS,
  new_acc = summary.new_acc,
  summarize = summary.summarize,
  QUALITY = summary.QUALITY,
  measure = measure.measure,
}
