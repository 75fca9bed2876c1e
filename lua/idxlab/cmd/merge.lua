-- `idxlab merge OUT DIR1 DIR2 ...`: combines the results of an experiment's shards (each run
-- with --shard i/n) into OUT, checking that they come from the same experiment: the same
-- name, the same point configs for the same indices, no point twice; a different git commit
-- is a warning. Then writes OUT's CSV, summary and plots (docs/experiments.md). Failures
-- raise; bin/idxlab prints them as one line (exit status 1).
local errors = require("idxlab.errors")
local args = require("idxlab.cmd.args")
local merge = require("idxlab.merge")
local report = require("idxlab.report")

local USAGE = "usage: idxlab merge OUT_DIR SHARD_DIR ..."

return function(argv)
  local o, pos = args.parse(argv, {}, USAGE, "merge")
  if o.help then
    print(USAGE)
    return 0
  end
  local dirs = {}
  for i, a in ipairs(pos) do dirs[i] = (a:gsub("/+$", "")) end
  if #dirs < 2 then
    errors.fail("merge needs an output directory and at least one shard directory\n" .. USAGE)
  end
  local out = table.remove(dirs, 1)
  local res = merge.merge(out, dirs, { width = report.terminal_width(io.stdout) })
  for _, w in ipairs(res.warnings) do io.stderr:write("idxlab: warning: ", w, "\n") end
  io.stdout:write(res.screen)
  for _, m in ipairs(res.messages or {}) do io.stderr:write("idxlab: ", m, "\n") end
  io.stdout:write(("merged %d rows from %d directories into %s\n"):format(#res.rows, #dirs, out))
  return 0
end
