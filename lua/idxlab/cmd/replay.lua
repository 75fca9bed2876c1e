-- `idxlab replay IN OUT [--set key=value ...]`: replays the step(s) in IN (a safetensors file
-- or a folder of them) and writes every output of SPEC 7 to OUT. The --set keys are the
-- builder's config fields plus `backend` (cpu, cuda, auto) and `seed`.
local config = require("idxlab.config")
local replay = require("idxlab.replay")

local USAGE = "usage: idxlab replay IN.safetensors|DIR OUT.safetensors [--set key=value ...]"

return function(argv)
  local o, pos = require("idxlab.cmd.args").parse(argv, { ["--set"] = "list" }, USAGE, "replay")
  if o.help then
    print(USAGE)
    return 0
  end
  local sets = o.set
  if #pos ~= 2 then error("idxlab: replay needs IN and OUT\n" .. USAGE, 0) end
  local kv = config.parse_sets(sets)
  local overrides, opts = {}, {}
  for k, v in pairs(kv) do
    if k == "backend" then
      opts.backend = v
    elseif k == "seed" then
      opts.seed = v
    elseif config.is_field(k) then
      overrides[k] = v
    else
      error(("idxlab: --set %s: unknown key (builder config fields, backend, seed)"):format(k), 0)
    end
  end
  local summaries, ctx = replay.run(pos[1], pos[2], overrides, opts)
  for si, row in ipairs(summaries) do
    io.stderr:write(("step %d: %s, active_rows %d, logit_mismatches %d, selection_agreement %s, recall_at_k %s\n"):format(
      si - 1, ctx:backend(), row.active_rows or 0, row.logit_mismatches or 0,
      row.selection_agreement and ("%.4f"):format(row.selection_agreement) or "null",
      row.recall_at_k and ("%.4f"):format(row.recall_at_k) or "null"))
  end
  return 0
end
