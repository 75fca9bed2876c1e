-- `idxlab report DIR`: re-renders the summary table, results.csv and the plots of a results
-- directory from its results.jsonl and experiment.json (docs/experiments.md).
local USAGE = "usage: idxlab report DIR [--no-plots]   (DIR: a results directory, e.g. results/NAME)"

return function(argv)
  local dir
  local opts = {}
  for _, a in ipairs(argv) do
    if a == "-h" or a == "--help" then
      print(USAGE)
      return 0
    elseif a == "--no-plots" then
      opts.gnuplot = "none"
    elseif a:sub(1, 1) == "-" then
      error(("idxlab: report: unknown option %s\n%s"):format(a, USAGE), 0)
    elseif dir then
      error(("idxlab: report: one directory only (got %s and %s)\n%s"):format(dir, a, USAGE), 0)
    else
      dir = a
    end
  end
  if not dir then error("idxlab: report: no results directory given\n" .. USAGE, 0) end
  dir = dir:gsub("/+$", "")
  local report = require("idxlab.report")
  local ok, out = pcall(report.render, dir, opts)
  if not ok then
    local msg = tostring(out)
    local at = msg:find("idxlab: ", 1, true)
    io.stderr:write((at and msg:sub(at) or msg), "\n")
    return 1
  end
  io.stdout:write(out.summary)
  for _, m in ipairs(out.messages) do io.stderr:write("idxlab: ", m, "\n") end
  io.stdout:write(("written: %s\n"):format(table.concat(out.files, ", ")))
  return 0
end
