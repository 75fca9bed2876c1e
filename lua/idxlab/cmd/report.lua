-- `idxlab report DIR [--no-plots]`: re-renders the summary table, results.csv and the plots of
-- a results directory from its results.jsonl and experiment.json (docs/experiments.md).
-- Failures raise; bin/idxlab prints them as one line (exit status 1).
local errors = require("idxlab.errors")
local args = require("idxlab.cmd.args")
local report = require("idxlab.report")

local USAGE = "usage: idxlab report DIR [--no-plots]   "
  .. "(DIR: a results directory, e.g. results/NAME)"

return function(argv)
  local o, pos = args.parse(argv, { ["--no-plots"] = "flag" }, USAGE, "report")
  if o.help then
    print(USAGE)
    return 0
  end
  if #pos > 1 then
    errors.fail("report: one directory only (got %s and %s)\n%s", pos[1], pos[2], USAGE)
  end
  if not pos[1] then errors.fail("report: no results directory given\n" .. USAGE) end
  local dir = pos[1]:gsub("/+$", "")
  local out = report.render(dir, {
    gnuplot = o["no-plots"] and "none" or nil, width = report.terminal_width(io.stdout),
  })
  io.stdout:write(out.screen)
  for _, m in ipairs(out.messages) do io.stderr:write("idxlab: ", m, "\n") end
  io.stdout:write(("written: %s\n"):format(table.concat(out.files, ", ")))
  return 0
end
