-- idxlab.merge: the results of an experiment's shards (each run with --shard i/n) combined in
-- one directory. It sits above idxlab.results (the rows) and idxlab.report (reading a results
-- directory, then the merged CSV, summary and plots), so neither of them needs the other's
-- caller. `idxlab merge OUT DIR ...` calls merge(OUT, {DIR, ...}).
local errors = require("idxlab.errors")
local fs = require("idxlab.fs")
local report = require("idxlab.report")
local results = require("idxlab.results")

local fail = errors.fail

local M = {}

-- The shards read back, each with its saved plan (a shard without one was not written by
-- `idxlab run`).
local function load_shards(dirs)
  local loaded = {}
  for i, d in ipairs(dirs) do
    if type(d) ~= "string" then fail("merge: dirs[%d] must be a string", i) end
    local l = report.load_dir(d)
    if type(l.experiment) ~= "table" or type(l.experiment.points) ~= "table" then
      fail("merge: %s has no experiment.json (not written by idxlab run?)", d)
    end
    loaded[i] = l
  end
  return loaded
end

-- Every shard's plan is the first one's: the same name, the same configs for the same
-- indices. -> the plan as point index -> config hash.
local function same_plan(loaded, dirs)
  local first = loaded[1].experiment
  local plan = {}
  for _, p in ipairs(first.points) do plan[p.point] = p.config_hash end
  for i = 2, #loaded do
    local e = loaded[i].experiment
    if e.name ~= first.name then
      fail("merge: %s holds experiment %s but %s holds %s", dirs[i], tostring(e.name), dirs[1],
        tostring(first.name))
    end
    if #e.points ~= #first.points then
      fail("merge: %s planned %d points but %s planned %d: not the same experiment plan",
        dirs[i], #e.points, dirs[1], #first.points)
    end
    for _, p in ipairs(e.points) do
      if plan[p.point] ~= p.config_hash then
        fail("merge: point %s has config %s in %s but %s in %s: not the same experiment plan",
          tostring(p.point), tostring(p.config_hash), dirs[i], tostring(plan[p.point]), dirs[1])
      end
    end
  end
  return plan
end

-- The merged folder's files (out locked by the caller): results.jsonl with each line's text as
-- written, experiment.json with merged_from, and the report. -> report.write's result and rows.
local function write_merged(out, idx, lines, by_point, first, dirs, opts)
  local text, rows = {}, {}
  for _, p in ipairs(idx) do
    text[#text + 1] = lines[p] .. "\n"
    rows[#rows + 1] = by_point[p]
  end
  local exp = {}
  for k, v in pairs(first) do exp[k] = v end
  exp.merged_from = dirs
  fs.write_atomic(out .. "/experiment.json",
    results.encode(exp, { "schema", "name", "question", "source" }) .. "\n")
  fs.write_atomic(out .. "/results.jsonl", table.concat(text))
  local w = report.write(out, rows, exp, opts)
  w.rows = rows
  return w
end

-- merge(out, dirs, opts) -> { rows, warnings, missing, summary, files, messages }: the
-- shards' results in one directory. Refuses shards of different experiments (name), of
-- different plans (the point configs, by index), a point present twice and an out that a
-- live run or merge holds (fs.lock); warns on different git commits, torn last lines and
-- missing points. The merged results.jsonl keeps each line's text as written. opts:
-- report.write's (gnuplot, width: screen, the summary split to that many columns), command
-- (what the lock records; default "idxlab merge OUT DIR ...").
function M.merge(out, dirs, opts)
  if type(out) ~= "string" or out == "" then
    fail("merge: out must be a directory name")
  end
  if type(dirs) ~= "table" or #dirs == 0 then
    fail("merge: dirs must be a non-empty list of directories")
  end
  local loaded = load_shards(dirs)
  local first = loaded[1].experiment
  local plan = same_plan(loaded, dirs)
  local warnings = {}
  local by_point, from, lines = {}, {}, {}
  local commits, commit_order = {}, {}
  for i, l in ipairs(loaded) do
    if l.info.torn then
      warnings[#warnings + 1] = ("%s/results.jsonl: a half-written last line (line %d) was "
        .. "ignored"):format(dirs[i], l.info.torn_line)
    end
    for j, r in ipairs(l.rows) do
      local p = r.point
      if type(p) ~= "number" or plan[p] == nil then
        fail("merge: %s/results.jsonl line %d: point %s is not in the plan", dirs[i], j,
          tostring(p))
      end
      if r.config_hash ~= plan[p] then
        fail("merge: %s/results.jsonl line %d: point %d has config %s, the plan says %s",
          dirs[i], j, p, tostring(r.config_hash), plan[p])
      end
      if by_point[p] then
        fail("merge: point %d is in both %s and %s", p, from[p], dirs[i])
      end
      by_point[p], from[p] = r, dirs[i]
      lines[p] = l.info.raw[j]
      local c = tostring(r.git_commit) .. (r.git_dirty and " (dirty)" or "")
      if not commits[c] then commits[c] = dirs[i]; commit_order[#commit_order + 1] = c end
    end
  end
  if #commit_order > 1 then
    local parts = {}
    for _, c in ipairs(commit_order) do parts[#parts + 1] = ("%s (%s)"):format(c, commits[c]) end
    warnings[#warnings + 1] = "the shards ran at different git commits: "
      .. table.concat(parts, ", ")
  end
  local idx = {}
  for p in pairs(by_point) do idx[#idx + 1] = p end
  table.sort(idx)
  local missing = #first.points - #idx
  if missing > 0 then
    warnings[#warnings + 1] = ("%d of %d points have no result (shards not run or not "
      .. "finished)"):format(missing, #first.points)
  end
  fs.mkdir_p(out)
  -- out is locked while it is written: a live run there (or another merge) refuses this one
  local lock = fs.lock(out, (opts and opts.command)
    or ("idxlab merge %s %s"):format(out, table.concat(dirs, " ")))
  local ok, res = pcall(write_merged, out, idx, lines, by_point, first, dirs, opts)
  lock:release()
  if not ok then errors.rethrow(res) end
  local w = res
  return { rows = w.rows, warnings = warnings, missing = missing, summary = w.summary,
    screen = w.screen, files = w.files, messages = w.messages }
end

return errors.wrap(M)
