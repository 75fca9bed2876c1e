-- `idxlab compare A B`: two runs of one sweep, point for point (results.compare_rows): the
-- same points, each with the same config hash and the same value of every field that does
-- not depend on timing or on where it ran (time_*, speedup*, wall time, clock, shard, device
-- and device_bus_id left out). A and B are results folders (results/NAME) or results.jsonl
-- files. It is how a sharded run (--local-shards, idxlab submit) is checked against the same
-- sweep unsharded. Prints the differences, each naming its point; exit status 0 when there
-- are none, 1 otherwise. Failures (a missing file) raise.
local USAGE = [[usage: idxlab compare A B
  A, B: results folders (results/NAME) or results.jsonl files of the same sweep]]

local errors = require("idxlab.errors")
local args = require("idxlab.cmd.args")
local fs = require("idxlab.fs")
local results = require("idxlab.results")

local function rows_of(p)
  local path = p:match("%.jsonl$") and p or (p:gsub("/+$", "") .. "/results.jsonl")
  if not fs.exists(path) then errors.fail("compare: %s: no such file", path) end
  return (results.read_jsonl(path)), path
end

return function(argv)
  local o, pos = args.parse(argv, {}, USAGE, "compare")
  if o.help then
    print(USAGE)
    return 0
  end
  if #pos ~= 2 then errors.fail("compare: two results (folders or results.jsonl)\n%s", USAGE) end
  local a, pa = rows_of(pos[1])
  local b, pb = rows_of(pos[2])
  local rep = results.compare_rows(a, b)
  for _, l in ipairs(rep.lines) do print(l) end
  if rep.more > 0 then print(("... and %d more differences"):format(rep.more)) end
  if #rep.only_ref > 0 then
    print(("only in %s: points %s"):format(pa, table.concat(rep.only_ref, ", ")))
  end
  if #rep.only_got > 0 then
    print(("only in %s: points %s"):format(pb, table.concat(rep.only_got, ", ")))
  end
  print(("%d points compared (%d and %d rows): %s"):format(rep.points, #a, #b,
    rep.same and "the same, timing and device aside" or "they differ"))
  return rep.same and 0 or 1
end
