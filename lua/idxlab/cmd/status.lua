-- `idxlab status results/NAME [--merge]`: a submitted sweep's points, finished, failed and
-- missing, per shard, from its results files (idxlab.slurm.status); squeue and sacct, where
-- they are, only add the state of tasks still queued or running. --merge is what the merge
-- job runs: it merges the shards that have results into results/NAME, writes
-- results/NAME/status.json, and exits 1 naming the missing points when any are missing.
-- Without --merge the exit status is 0 whatever the points' state. Failures raise.
local USAGE = [[usage: idxlab status results/NAME [--merge]
  --merge   merge what exists into results/NAME, write status.json; exit 1 when points are
            missing (what the merge job of idxlab submit runs)]]

local errors = require("idxlab.errors")
local args = require("idxlab.cmd.args")
local slurm = require("idxlab.slurm")

return function(argv)
  local o, positional = args.parse(argv, { ["--merge"] = "flag" }, USAGE, "status")
  if o.help then
    print(USAGE)
    return 0
  end
  if #positional ~= 1 then errors.fail("status: one results folder\n%s", USAGE) end
  local dir = (positional[1]:gsub("/+$", ""))
  if not o.merge then
    io.stdout:write(slurm.format_status(slurm.status(dir), dir))
    return 0
  end
  local st, merged = slurm.merge_status(dir)
  if merged then
    for _, w in ipairs(merged.warnings) do io.stderr:write("idxlab: warning: ", w, "\n") end
    io.stdout:write(merged.summary)
  end
  io.stdout:write(slurm.format_status(st, dir))
  if #st.missing_points > 0 then
    io.stderr:write(("idxlab: %d of %d points missing: %s; resubmit them with: idxlab submit "
      .. "%s --resume\n"):format(#st.missing_points, st.points, slurm.missing_text(st), dir))
    return 1
  end
  print(("merged %d points into %s"):format(st.finished, dir))
  return 0
end
