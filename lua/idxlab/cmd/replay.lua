-- `idxlab replay IN OUT [--set key=value ...]`: replays the step(s) in IN (a safetensors file
-- or a folder of them) and writes every output of SPEC 7 to OUT. The --set keys are the
-- builder's config fields plus `backend` (cpu, cuda, auto) and `seed`.
local errors = require("idxlab.errors")
local args = require("idxlab.cmd.args")
local config = require("idxlab.config")
local replay = require("idxlab.replay")

local USAGE = "usage: idxlab replay IN.safetensors|DIR OUT.safetensors [--set key=value ...]"

-- "%.4f" of a metric, or "null" when no row was active.
local function metric(v) return v and ("%.4f"):format(v) or "null" end

return function(argv)
  local o, pos = args.parse(argv, { ["--set"] = "list" }, USAGE, "replay")
  if o.help then
    print(USAGE)
    return 0
  end
  if #pos ~= 2 then errors.fail("replay needs IN and OUT\n" .. USAGE) end
  local kv = config.parse_sets(o.set)
  local overrides, opts = {}, {}
  for k, v in pairs(kv) do
    if k == "backend" then
      opts.backend = v
    elseif k == "seed" then
      opts.seed = v
    elseif config.is_field(k) then
      overrides[k] = v
    else
      errors.fail("--set %s: unknown key (builder config fields, backend, seed)", k)
    end
  end
  local summaries, ctx = replay.run(pos[1], pos[2], overrides, opts)
  for si, row in ipairs(summaries) do
    io.stderr:write(("step %d: %s, active_rows %d, logit_mismatches %d, selection_agreement %s,"
      .. " recall_at_k %s\n"):format(si - 1, ctx:backend(), row.active_rows or 0,
      row.logit_mismatches or 0, metric(row.selection_agreement), metric(row.recall_at_k)))
  end
  return 0
end
