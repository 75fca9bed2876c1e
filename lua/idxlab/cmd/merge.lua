-- `idxlab merge OUT DIR1 DIR2 ...`: combines the results of an experiment's shards (each run
-- with --shard i/n) into OUT, checking that they come from the same experiment: the same
-- name, the same point configs for the same indices, no point twice; a different git commit
-- is a warning. Then writes OUT's CSV, summary and plots (docs/experiments.md).
local USAGE = "usage: idxlab merge OUT_DIR SHARD_DIR ..."

return function(argv)
  local dirs = {}
  for _, a in ipairs(argv) do
    if a == "-h" or a == "--help" then
      print(USAGE)
      return 0
    elseif a:sub(1, 1) == "-" then
      error(("idxlab: merge: unknown option %s\n%s"):format(a, USAGE), 0)
    else
      dirs[#dirs + 1] = (a:gsub("/+$", ""))
    end
  end
  if #dirs < 2 then error("idxlab: merge needs an output directory and at least one shard directory\n" .. USAGE, 0) end
  local out = table.remove(dirs, 1)
  local results = require("idxlab.results")
  local ok, res = pcall(results.merge, out, dirs)
  if not ok then
    local msg = tostring(res)
    local at = msg:find("idxlab: ", 1, true)
    io.stderr:write((at and msg:sub(at) or msg), "\n")
    return 1
  end
  for _, w in ipairs(res.warnings) do io.stderr:write("idxlab: warning: ", w, "\n") end
  io.stdout:write(res.summary)
  for _, m in ipairs(res.messages or {}) do io.stderr:write("idxlab: ", m, "\n") end
  io.stdout:write(("merged %d rows from %d directories into %s\n"):format(#res.rows, #dirs, out))
  return 0
end
