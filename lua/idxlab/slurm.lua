-- idxlab.slurm: a sweep's shards as Slurm jobs, with no scheduler of our own. What
-- `idxlab submit` and `idxlab status` share (docs/experiments.md, "Sweeps on Slurm"):
--   the record    DIR/submit.json: the checkout, its commit, the build, the experiment (a
--                 copy of the file, DIR/experiment.lua, and the --set list), the shard count,
--                 the sbatch options and every submission's job ids
--   the scripts   DIR/array.sh (one array task per shard) and DIR/merge.sh (after the array)
--   the calls     sbatch --parsable, scancel, and squeue/sacct for the states of tasks still
--                 queued or running (where the commands and accounting exist)
--   the status    finished, failed and missing points per shard, from the results files
--                 (DIR/shard-i-of-n/results.jsonl and the task logs) alone
--   merge_status  what the merge job runs: merges what exists into DIR, writes
--                 DIR/status.json, and names the missing points
-- Errors are idxlab errors (code "ARG" for bad input, "SLURM" when a Slurm command fails).
local errors = require("idxlab.errors")
local fs = require("idxlab.fs")
local merge = require("idxlab.merge")
local results = require("idxlab.results")
local shell_word = require("idxlab.cmd.args").shell_word

local fail = errors.fail
local q = fs.shell_quote

local M = {}

M.RECORD = "submit.json"
M.SCHEMA = 1

---------------------------------------------------------------------------- shell

-- Runs a shell command; -> exit status, stdout, stderr (both whole).
local function capture(cmd)
  local errf = os.tmpname()
  local p = io.popen(("%s 2>%s; echo \"rc=$?\""):format(cmd, q(errf)))
  local out = p:read("*a")
  p:close()
  local err = fs.read_file(errf) or ""
  os.remove(errf)
  local rc = tonumber(out:match("rc=(%d+)%s*$")) or 1
  return rc, (out:gsub("rc=%d+%s*$", "")), err
end
M.capture = capture

-- Whether a program is on PATH.
local function have(prog)
  return (capture("command -v " .. q(prog))) == 0
end
M.have = have

---------------------------------------------------------------------------- layout

-- The results folder of shard i of n, as `idxlab run --shard i/n --out BASE` names it.
function M.shard_dir(dir, i, n)
  if n == 1 then return dir end
  return ("%s/shard-%d-of-%d"):format(dir, i, n)
end

-- An absolute path: relative ones are taken from the working directory.
function M.absolute(path)
  if path:sub(1, 1) == "/" then return path end
  local _, cwd = capture("pwd -P")
  cwd = cwd:gsub("%s+$", "")
  path = path:gsub("^%./", "")
  return cwd .. "/" .. path
end

-- A directory's absolute path without symbolic links or "..", as `pwd -P` prints it.
function M.real_path(dir)
  local rc, out = capture("cd " .. q(dir) .. " && pwd -P")
  out = out:gsub("%s+$", "")
  if rc ~= 0 or out == "" then fail("cannot resolve the directory %s", dir) end
  return out
end

function M.read_record(dir)
  local text = fs.read_file(dir .. "/" .. M.RECORD)
  if not text then
    fail("%s has no %s: not a sweep written by idxlab submit", dir, M.RECORD)
  end
  local rec, err = results.decode(text)
  if type(rec) ~= "table" or type(rec.shards) ~= "number" or type(rec.jobs) ~= "table" then
    fail("%s/%s is damaged: %s", dir, M.RECORD, tostring(err or "no shards or jobs field"))
  end
  return rec
end

local RECORD_ORDER = { "schema", "experiment", "shards", "commit", "dirty", "checkout",
  "libdir", "source", "file", "sets", "out", "dir", "sbatch", "jobs" }

function M.write_record(dir, rec)
  fs.write_atomic(dir .. "/" .. M.RECORD, results.encode(rec, RECORD_ORDER) .. "\n")
end

---------------------------------------------------------------------------- the scripts

-- A value of an #SBATCH line: as it is, or in double quotes (sbatch reads no shell quoting).
local function directive_value(v)
  v = tostring(v)
  if v:match('["\n]') then fail("submit: %q cannot be an #SBATCH value (a quote or newline)", v) end
  if v:match("^[%w_%./=,:+%%%-]+$") then return v end
  return '"' .. v .. '"'
end

-- slurm.sbatch_options(opts, array) -> { {flag, value}, ... }: the sbatch options submit
-- takes that opts sets, in the one order the scripts and a resubmission's command line give
-- them; `array` adds the per-task resources (the merge job needs no GPU). opts.extra (whole
-- words such as --mem=8G, given after these) is not among them.
function M.sbatch_options(opts, array)
  local out = {}
  local function add(flag, v) if v ~= nil then out[#out + 1] = { flag, v } end end
  add("--partition", opts.partition)
  add("--account", opts.account)
  add("--qos", opts.qos)
  add("--time", opts.time)
  if array then
    add("--gpus-per-task", opts.gpus_per_task)
    add("--cpus-per-task", opts.cpus_per_task)
  end
  return out
end

-- The #SBATCH lines of those options, then opts.extra.
local function sbatch_lines(opts, array)
  local l = {}
  for _, o in ipairs(M.sbatch_options(opts, array)) do
    l[#l + 1] = ("#SBATCH %s=%s"):format(o[1], directive_value(o[2]))
  end
  for _, a in ipairs(opts.extra or {}) do l[#l + 1] = "#SBATCH " .. a end
  return l
end

-- The lines every job script starts with after its #SBATCH block: to the checkout, the
-- commit check, the build.
local function preamble(rec, who)
  local check = {
    "set -euo pipefail",
    "cd " .. shell_word(rec.checkout),
  }
  if rec.commit ~= "unknown" then
    check[#check + 1] = "want=" .. rec.commit
    check[#check + 1] = 'have=$(git rev-parse HEAD 2>/dev/null || echo unknown)'
    check[#check + 1] = 'if [ "$have" != "$want" ]; then'
    check[#check + 1] = ('  echo "idxlab: %s: the checkout %s is at commit $have, but this '
      .. 'sweep was submitted at $want: check out $want there (or submit again)" >&2'):format(who,
      rec.checkout:gsub('["$`\\]', "\\%0"))
    check[#check + 1] = "  exit 1"
    check[#check + 1] = "fi"
  end
  check[#check + 1] = "export IDXLAB_LIBDIR=" .. shell_word(rec.libdir)
  return check
end

-- The job-array script: task i runs shard i of n into DIR/shard-i-of-n (always with
-- --resume, so a requeued or resubmitted task keeps the points it finished).
function M.array_script(rec)
  local o = rec.sbatch
  local l = { "#!/bin/bash",
    "#SBATCH --job-name=" .. directive_value("idxlab-" .. rec.experiment),
    ("#SBATCH --array=0-%d"):format(rec.shards - 1),
    "#SBATCH --output=" .. directive_value(rec.dir .. "/logs/task-%A_%a.log"),
  }
  for _, s in ipairs(sbatch_lines(o, true)) do l[#l + 1] = s end
  l[#l + 1] = ("# idxlab submit: shard $SLURM_ARRAY_TASK_ID of %d of sweep %s; its results go "
    .. "to"):format(rec.shards, rec.experiment)
  l[#l + 1] = ("# %s/shard-<i>-of-%d (docs/experiments.md, \"Sweeps on Slurm\")"):format(rec.dir,
    rec.shards)
  for _, s in ipairs(preamble(rec, "task $SLURM_ARRAY_TASK_ID")) do l[#l + 1] = s end
  local cmd = { "exec bin/idxlab run", shell_word(rec.file) }
  for _, s in ipairs(rec.sets or {}) do cmd[#cmd + 1] = "--set " .. shell_word(s) end
  cmd[#cmd + 1] = ('--shard "$SLURM_ARRAY_TASK_ID/%d"'):format(rec.shards)
  cmd[#cmd + 1] = "--out " .. shell_word(rec.out)
  cmd[#cmd + 1] = "--progress plain --resume"
  l[#l + 1] = table.concat(cmd, " ")
  return table.concat(l, "\n") .. "\n"
end

-- The merge job's script: `idxlab status DIR --merge` (see merge_status).
function M.merge_script(rec)
  local l = { "#!/bin/bash",
    "#SBATCH --job-name=" .. directive_value("idxlab-" .. rec.experiment .. "-merge"),
    "#SBATCH --output=" .. directive_value(rec.dir .. "/logs/merge-%j.log"),
  }
  for _, s in ipairs(sbatch_lines(rec.sbatch, false)) do l[#l + 1] = s end
  l[#l + 1] = ("# idxlab submit: merges the shards of sweep %s that exist into %s, writes its "
    .. "status;"):format(rec.experiment, rec.dir)
  l[#l + 1] = "# exits 1 naming the missing points when any are missing"
  for _, s in ipairs(preamble(rec, "merge job")) do l[#l + 1] = s end
  l[#l + 1] = "exec bin/idxlab status " .. shell_word(rec.dir) .. " --merge"
  return table.concat(l, "\n") .. "\n"
end

---------------------------------------------------------------------------- the calls

-- sbatch --parsable ARGS SCRIPT -> the job id (the number before any ";cluster").
function M.sbatch(args, script)
  local cmd = { "sbatch", "--parsable" }
  for _, a in ipairs(args or {}) do cmd[#cmd + 1] = q(a) end
  cmd[#cmd + 1] = q(script)
  local line = table.concat(cmd, " ")
  local rc, out, err = capture(line)
  local id = out:match("^%s*(%d+)")
  if rc ~= 0 or not id then
    errors.raise("SLURM", ("%s failed (exit %d): %s"):format(line, rc,
      ((err .. out):gsub("%s+$", "")):gsub("\n", "; ")))
  end
  return id
end

-- The sbatch command line as text, for --dry-run and the record.
function M.sbatch_text(args, script)
  local w = { "sbatch", "--parsable" }
  for _, a in ipairs(args or {}) do
    w[#w + 1] = a:match("<array job id>") and a or shell_word(a)
  end
  w[#w + 1] = shell_word(script)
  return table.concat(w, " ")
end

function M.scancel(id)
  capture("scancel " .. q(id))
end

-- The Slurm states of the jobs and array tasks with these ids: "<id>" or "<id>_<task>" ->
-- state, from sacct (where accounting exists) and then squeue (the live state wins). Empty
-- when neither command is there or answers.
function M.states(ids)
  local states = {}
  if #ids == 0 then return states end
  local list = table.concat(ids, ",")
  if have("sacct") then
    local rc, out = capture("sacct -n -P -X -o JobID,State -j " .. q(list))
    if rc == 0 then
      for id, s in out:gmatch("([%d_]+)|(%S+)[^\n]*") do states[id] = s end
    end
  end
  if have("squeue") then
    local function ask(l)
      local rc, out = capture("squeue -h -r -t all -o '%i|%T' -j " .. q(l))
      if rc == 0 then
        for id, s in out:gmatch("([%d_]+)|(%S+)") do states[id] = s end
      end
      return rc == 0
    end
    -- squeue refuses the whole list when one id is no longer known: then one at a time
    if not ask(list) then for _, id in ipairs(ids) do ask(id) end end
  end
  return states
end

---------------------------------------------------------------------------- the status

-- The swept values of a planned point, as the dry run shows them.
local function point_desc(p, swept)
  return results.describe_params(type(p.params) == "table" and p.params or {}, swept or {})
end

-- "idxlab: point N failed: reason" lines of a shard's task logs (every submission's:
-- logs/task-<array id>_<i>.log; --local-shards writes logs/task-local_<i>.log).
local function logged_failures(dir, i)
  local failed = {}
  local _, names = capture(("ls -1 %s 2>/dev/null"):format(q(dir .. "/logs")))
  for name in names:gmatch("[^\n]+") do
    if name:match("^task%-%w+_" .. i .. "%.log$") then
      local text = fs.read_file(dir .. "/logs/" .. name) or ""
      for p, why in text:gmatch("idxlab: point (%d+) failed: ([^\n]*)") do
        failed[tonumber(p)] = why
      end
    end
  end
  return failed
end

-- The job that ran shard i last, and its task's id ("<array>_<i>").
local function last_task(rec, i)
  for j = #rec.jobs, 1, -1 do
    local job = rec.jobs[j]
    for _, t in ipairs(job.tasks or {}) do
      if t == i then return ("%s_%d"):format(job.array, i), job end
    end
  end
end

-- status(dir, opts) -> { experiment, points = count, shards = { { index, points, finished,
-- failed, missing (lists of point indices), reasons = point -> failure, task, state } },
-- finished, failed, missing (counts), missing_points = list, merge = { id, state } }.
-- opts.slurm = false leaves squeue and sacct out.
function M.status(dir, opts)
  opts = opts or {}
  local rec = M.read_record(dir)
  local etext = fs.read_file(dir .. "/experiment.json")
  local exp = etext and results.decode(etext)
  if type(exp) ~= "table" or type(exp.points) ~= "table" then
    fail("%s/experiment.json is missing or damaged (idxlab submit writes it)", dir)
  end
  local n = rec.shards
  local st = { experiment = rec.experiment, points = #exp.points, shards = {}, finished = 0,
    failed = 0, missing = 0, missing_points = {}, desc = {} }
  local ids = {}
  for _, job in ipairs(rec.jobs) do
    ids[#ids + 1] = job.array
    ids[#ids + 1] = job.merge
  end
  local states = opts.slurm == false and {} or M.states(ids)
  for i = 0, n - 1 do
    local sd = M.shard_dir(dir, i, n)
    local done = {}
    for _, r in ipairs((results.read_jsonl(sd .. "/results.jsonl"))) do
      if type(r.point) == "number" then done[r.point] = r.config_hash end
    end
    local logged = logged_failures(dir, i)
    local task = last_task(rec, i)
    local sh = { index = i, points = 0, finished = {}, failed = {}, missing = {}, reasons = {},
      task = task, state = task and (states[task] or states[task:match("^(%d+)")]) }
    for _, p in ipairs(exp.points) do
      if p.point % n == i then
        sh.points = sh.points + 1
        st.desc[p.point] = point_desc(p, exp.swept)
        if done[p.point] and done[p.point] == p.config_hash then
          sh.finished[#sh.finished + 1] = p.point
        elseif logged[p.point] then
          sh.failed[#sh.failed + 1] = p.point
          sh.reasons[p.point] = logged[p.point]
        else
          sh.missing[#sh.missing + 1] = p.point
        end
      end
    end
    st.finished = st.finished + #sh.finished
    st.failed = st.failed + #sh.failed
    st.missing = st.missing + #sh.missing
    st.shards[#st.shards + 1] = sh
  end
  for _, sh in ipairs(st.shards) do
    for _, p in ipairs(sh.failed) do st.missing_points[#st.missing_points + 1] = p end
    for _, p in ipairs(sh.missing) do st.missing_points[#st.missing_points + 1] = p end
  end
  table.sort(st.missing_points)
  local last = rec.jobs[#rec.jobs]
  if last and last.merge then
    st.merge = { id = last.merge, state = states[last.merge] }
  end
  return st
end

-- The status as the table `idxlab status` prints.
function M.format_status(st, dir)
  local l = {}
  l[#l + 1] = ("sweep %s in %s: %d points in %d shards: %d finished, %d failed, %d missing")
    :format(st.experiment, dir, st.points, #st.shards, st.finished, st.failed, st.missing)
  l[#l + 1] = ("%-6s %7s %9s %7s %8s  %s"):format("shard", "points", "finished", "failed",
    "missing", "slurm")
  for _, sh in ipairs(st.shards) do
    local slurm = sh.task and ((sh.state or "not known to squeue") .. " (" .. sh.task .. ")")
      or "-"
    l[#l + 1] = ("%-6d %7d %9d %7d %8d  %s"):format(sh.index, sh.points, #sh.finished,
      #sh.failed, #sh.missing, slurm)
  end
  if st.merge then
    l[#l + 1] = ("merge job %s: %s"):format(st.merge.id, st.merge.state or "not known to squeue")
  end
  for _, sh in ipairs(st.shards) do
    for _, p in ipairs(sh.failed) do
      l[#l + 1] = ("failed: point %d (shard %d%s): %s"):format(p, sh.index,
        st.desc[p] ~= "" and (": " .. st.desc[p]) or "", sh.reasons[p])
    end
    for _, p in ipairs(sh.missing) do
      l[#l + 1] = ("missing: point %d (shard %d%s)"):format(p, sh.index,
        st.desc[p] ~= "" and (": " .. st.desc[p]) or "")
    end
  end
  return table.concat(l, "\n") .. "\n"
end

-- The missing points in one line: "points 1, 4 (shard 1)".
function M.missing_text(st)
  local parts = {}
  for _, sh in ipairs(st.shards) do
    local ps = {}
    for _, p in ipairs(sh.failed) do ps[#ps + 1] = p end
    for _, p in ipairs(sh.missing) do ps[#ps + 1] = p end
    table.sort(ps)
    if #ps > 0 then
      local t = {}
      for _, p in ipairs(ps) do t[#t + 1] = tostring(p) end
      parts[#parts + 1] = ("point%s %s (shard %d)"):format(#ps > 1 and "s" or "",
        table.concat(t, ", "), sh.index)
    end
  end
  return table.concat(parts, "; ")
end

-- merge_status(dir, opts) -> status, merged (merge.merge's result or nil). Merges the shards
-- that have results into dir (idxlab.merge), then writes dir/status.json. opts: merge's.
function M.merge_status(dir, opts)
  local rec = M.read_record(dir)
  local dirs = {}
  for i = 0, rec.shards - 1 do
    local sd = M.shard_dir(dir, i, rec.shards)
    if fs.exists(sd .. "/experiment.json") and fs.exists(sd .. "/results.jsonl") then
      dirs[#dirs + 1] = sd
    end
  end
  local merged
  if #dirs > 0 and rec.shards > 1 then
    merged = merge.merge(dir, dirs, opts)
  end
  local st = M.status(dir, { slurm = false })
  local shards = {}
  for _, sh in ipairs(st.shards) do
    shards[#shards + 1] = { shard = sh.index, points = sh.points, finished = sh.finished,
      failed = sh.failed, missing = sh.missing }
  end
  fs.write_atomic(dir .. "/status.json", results.encode({ experiment = st.experiment,
    points = st.points, finished = st.finished, failed = st.failed, missing = st.missing,
    missing_points = st.missing_points, shards = shards, written_at = os.date("!%FT%TZ") },
    { "experiment", "points", "finished", "failed", "missing", "missing_points" }) .. "\n")
  return st, merged
end

return errors.wrap(M)
