-- `idxlab submit FILE.lua --shards N [options]`: hands a sweep to Slurm as a job array (one
-- task per shard) and a merge job that runs after it, whatever became of the tasks
-- (docs/experiments.md, "Sweeps on Slurm"). The experiment is planned and validated here,
-- before anything is submitted. `idxlab submit DIR --resume` resubmits the shards of DIR
-- with missing points, and a new merge job. The scripts, the record and the job ids are
-- idxlab.slurm's. Failures raise; bin/idxlab prints them as one line (exit status 1).
local USAGE = [[usage: idxlab submit FILE.lua --shards N [options]
       idxlab submit results/NAME --resume [sbatch options]
  --shards N            one array task per shard (--shard i/N), N >= 1
  --set key=value       as for idxlab run (repeatable)
  --out DIR             base directory of the results (default: results): DIR/<name>/
  --partition P, --account A, --qos Q, --time T
                        #SBATCH options of both jobs
  --gpus-per-task G, --cpus-per-task C
                        #SBATCH options of the array tasks
  --sbatch-arg ARG      any other sbatch option, as one word (repeatable): --sbatch-arg=--mem=8G
  --dry-run             print the two scripts and the sbatch commands; submit nothing
  --resume              (with a results folder) resubmit the shards with missing points]]

local errors = require("idxlab.errors")
local args = require("idxlab.cmd.args")
local experiment = require("idxlab.experiment")
local fs = require("idxlab.fs")
local results = require("idxlab.results")
local slurm = require("idxlab.slurm")
local provenance = require("idxlab.experiment.provenance")

local fail = errors.fail

local SPEC = { ["--shards"] = "value", ["--set"] = "list", ["--out"] = "value",
  ["--partition"] = "value", ["--account"] = "value", ["--qos"] = "value",
  ["--time"] = "value", ["--gpus-per-task"] = "value", ["--cpus-per-task"] = "value",
  ["--sbatch-arg"] = "list", ["--dry-run"] = "flag", ["--resume"] = "flag" }

local function positive_int(name, v) return args.positive_int("submit", name, v, USAGE) end

-- The sbatch options as the record keeps them.
local function sbatch_opts(o)
  local s = { partition = o.partition, account = o.account, qos = o.qos, time = o.time,
    extra = o["sbatch-arg"] }
  if o["gpus-per-task"] then s.gpus_per_task = positive_int("--gpus-per-task",
    o["gpus-per-task"]) end
  if o["cpus-per-task"] then s.cpus_per_task = positive_int("--cpus-per-task",
    o["cpus-per-task"]) end
  for _, a in ipairs(s.extra) do
    if not a:match("^%-") then
      fail("submit: --sbatch-arg %s: must be one sbatch option such as --mem=8G", a)
    end
  end
  return s
end

-- The same options as sbatch command-line words (a resubmission's overrides).
local function sbatch_words(s, array)
  local w = {}
  for _, o in ipairs(slurm.sbatch_options(s, array)) do
    w[#w + 1] = o[1] .. "=" .. tostring(o[2])
  end
  for _, a in ipairs(s.extra or {}) do w[#w + 1] = a end
  return w
end

local function write_scripts(dir, rec)
  fs.mkdir_p(dir .. "/logs")
  fs.write_atomic(dir .. "/array.sh", slurm.array_script(rec))
  fs.write_atomic(dir .. "/merge.sh", slurm.merge_script(rec))
end

-- Submits the array (only `tasks` when given: a resubmission) and the merge job after it;
-- records both in dir/submit.json. -> the job entry.
local function submit_jobs(dir, rec, tasks, extra_array, extra_merge)
  local array_args = {}
  for _, a in ipairs(extra_array or {}) do array_args[#array_args + 1] = a end
  local list = {}
  for _, t in ipairs(tasks) do list[#list + 1] = tostring(t) end
  if #tasks < rec.shards then
    array_args[#array_args + 1] = "--array=" .. table.concat(list, ",")
  end
  local aid = slurm.sbatch(array_args, dir .. "/array.sh")
  local merge_args = { "--dependency=afterany:" .. aid }
  for _, a in ipairs(extra_merge or {}) do merge_args[#merge_args + 1] = a end
  local ok, mid = pcall(slurm.sbatch, merge_args, dir .. "/merge.sh")
  if not ok then
    -- no task runs without the merge job that collects it
    slurm.scancel(aid)
    errors.rethrow(mid, "the array job " .. aid .. " was cancelled: ")
  end
  local job = { array = aid, merge = mid, tasks = tasks, submitted_at = provenance.utc_now() }
  rec.jobs[#rec.jobs + 1] = job
  slurm.write_record(dir, rec)
  return job
end

local function print_jobs(dir, rec, job)
  local list = {}
  for _, t in ipairs(job.tasks) do list[#list + 1] = tostring(t) end
  print(("submitted %s: job array %s (shard%s %s of %d), merge job %s after it")
    :format(rec.experiment, job.array, #list > 1 and "s" or "", table.concat(list, ","),
      rec.shards, job.merge))
  print(("  task logs: %s/logs/task-%s_<shard>.log"):format(dir, job.array))
  print(("  merge log: %s/logs/merge-%s.log"):format(dir, job.merge))
  print(("  results:   %s (merged)%s"):format(dir, rec.shards > 1
    and (", " .. dir .. "/shard-<i>-of-" .. rec.shards) or ""))
  print(("  status:    idxlab status %s"):format(dir))
end

-- A fresh submission of FILE.
local function submit_file(file, o)
  local n = positive_int("--shards", o.shards or fail("submit: --shards N is required\n%s",
    USAGE))
  local sets = #o.set > 0 and o.set or nil
  local sb = sbatch_opts(o)
  -- everything is checked before anything is written or submitted
  local plan = experiment.plan(file, { set = sets })
  if #plan.points == 0 then fail("submit: %s plans no points", file) end
  if n > #plan.points then
    fail("submit: --shards %d but %s plans %d points: at most one shard per point", n, file,
      #plan.points)
  end
  local src = fs.read_file(file) or fail("submit: cannot read %s", file)
  local out = slurm.absolute(o.out or "results")
  local dir = out .. "/" .. plan.exp.name
  local git = provenance.git_info()
  local checkout = slurm.real_path(provenance.repo_root())
  local libdir = slurm.absolute(os.getenv("IDXLAB_LIBDIR") or (checkout .. "/build"))
  local rec = { schema = slurm.SCHEMA, experiment = plan.exp.name, shards = n,
    commit = git.commit, dirty = git.dirty, checkout = checkout, libdir = libdir,
    source = slurm.absolute(file), file = dir .. "/experiment.lua", sets = sets, out = out,
    dir = dir, sbatch = sb, jobs = {} }
  local merge_words = sbatch_words(sb, false)
  if o["dry-run"] then
    io.stdout:write(("# %s/array.sh\n"):format(dir), slurm.array_script(rec), "\n")
    io.stdout:write(("# %s/merge.sh\n"):format(dir), slurm.merge_script(rec), "\n")
    print("# submitted with:")
    print(slurm.sbatch_text({}, dir .. "/array.sh"))
    local mw = { "--dependency=afterany:<array job id>" }
    for _, w in ipairs(merge_words) do mw[#mw + 1] = w end
    print(slurm.sbatch_text(mw, dir .. "/merge.sh"))
    print(("# dry run: %d points in %d shards; nothing written or submitted"):format(
      #plan.points, n))
    return 0
  end
  if fs.exists(dir .. "/" .. slurm.RECORD) then
    fail("submit: %s already holds a submitted sweep (%s): continue it with `idxlab submit %s "
      .. "--resume`, or choose another --out", dir, slurm.RECORD, dir)
  end
  if not slurm.have("sbatch") then
    fail("submit: sbatch is not on PATH (run this on a Slurm login node; --dry-run prints the "
      .. "scripts anywhere)")
  end
  if git.commit == "unknown" then
    io.stderr:write("idxlab: warning: ", checkout, " is not a git checkout: the tasks cannot ",
      "check that they run the submitted code\n")
  elseif git.dirty then
    io.stderr:write("idxlab: warning: ", checkout, " has uncommitted changes: the tasks run ",
      "the working tree as it is when they start\n")
  end
  fs.mkdir_p(dir)
  -- the experiment as planned here: the file's text and the --set list (the tasks run these)
  fs.write_atomic(rec.file, src)
  fs.write_atomic(dir .. "/experiment.json", results.encode(experiment.plan_record(plan),
    { "schema", "name", "question", "source" }) .. "\n")
  write_scripts(dir, rec)
  slurm.write_record(dir, rec)
  local tasks = {}
  for i = 0, n - 1 do tasks[#tasks + 1] = i end
  local job = submit_jobs(dir, rec, tasks, nil, merge_words)
  print_jobs(dir, rec, job)
  return 0
end

-- The shards of an earlier submission with missing points, again.
local function resume_dir(dir, o)
  dir = slurm.absolute((dir:gsub("/+$", "")))
  local rec = slurm.read_record(dir)
  if rec.launcher == "local" then
    fail("submit --resume: %s ran with --local-shards: continue it with `idxlab run FILE "
      .. "--local-shards %d --resume`", dir, rec.shards)
  end
  local git = provenance.git_info()
  if rec.commit ~= "unknown" and git.commit ~= rec.commit then
    fail("submit --resume: the checkout is at commit %s but %s was submitted at %s: check out "
      .. "%s to resume it (or submit afresh with another --out)", git.commit, dir, rec.commit,
      rec.commit)
  end
  local st = slurm.status(dir)
  local tasks, busy = {}, {}
  for _, sh in ipairs(st.shards) do
    if #sh.missing + #sh.failed > 0 then
      local s = sh.state
      if s == "PENDING" or s == "RUNNING" or s == "CONFIGURING" or s == "COMPLETING"
        or s == "REQUEUED" or s == "SUSPENDED" then
        busy[#busy + 1] = ("shard %d is %s (%s)"):format(sh.index, s, sh.task)
      else
        tasks[#tasks + 1] = sh.index
      end
    end
  end
  if #busy > 0 then
    fail("submit --resume: %s: wait for it or scancel it first", table.concat(busy, ", "))
  end
  if #tasks == 0 then
    print(("%s: every point has a result; nothing to resubmit"):format(dir))
    return 0
  end
  local sb = sbatch_opts(o)
  if o["dry-run"] then
    local list = {}
    for _, t in ipairs(tasks) do list[#list + 1] = tostring(t) end
    local w = sbatch_words(sb, true)
    w[#w + 1] = "--array=" .. table.concat(list, ",")
    print(slurm.sbatch_text(w, dir .. "/array.sh"))
    local mw = { "--dependency=afterany:<array job id>" }
    for _, x in ipairs(sbatch_words(sb, false)) do mw[#mw + 1] = x end
    print(slurm.sbatch_text(mw, dir .. "/merge.sh"))
    print(("# dry run: would resubmit %d shard(s) with %d missing point(s)"):format(#tasks,
      st.missing + st.failed))
    return 0
  end
  -- the scripts as recorded, written again (the checkout is the same commit)
  write_scripts(dir, rec)
  local job = submit_jobs(dir, rec, tasks, sbatch_words(sb, true), sbatch_words(sb, false))
  print_jobs(dir, rec, job)
  return 0
end

return function(argv)
  local o, positional = args.parse(argv, SPEC, USAGE, "submit")
  if o.help then
    print(USAGE)
    return 0
  end
  if #positional ~= 1 then
    fail("submit: one experiment file (or, with --resume, one results folder)\n%s", USAGE)
  end
  local target = positional[1]
  if o.resume then
    if not fs.is_dir(target) then
      fail("submit --resume: %s is not a results folder (idxlab submit results/NAME --resume)",
        target)
    end
    for _, k in ipairs({ "shards", "out" }) do
      if o[k] then fail("submit --resume: --%s is the recorded one; leave it out", k) end
    end
    if #o.set > 0 then fail("submit --resume: --set is the recorded one; leave it out") end
    return resume_dir(target, o)
  end
  if fs.is_dir(target) then
    fail("submit: %s is a folder: resubmit its missing shards with --resume", target)
  end
  return submit_file(target, o)
end
