-- idxlab.shards: `idxlab run FILE --local-shards N`, a sweep's shards as N processes on this
-- host, without Slurm: shard i runs `idxlab run FILE --shard i/N` on the (i mod G)-th visible
-- GPU (the inherited CUDA_VISIBLE_DEVICES list, else all G devices; N > G shares them) and,
-- for the CPU backend, with max(1, cores / N) threads (IDXLAB_THREADS and OMP_NUM_THREADS in
-- its environment). This process only plans (it never creates a context, so it never
-- initializes CUDA), waits, and merges what finished into results/<name> (idxlab.merge).
-- Ctrl-C stops every shard and keeps what they finished (each shard writes its rows as it
-- goes); --resume continues. The results folder has the layout of `idxlab submit`'s, with
-- the record (submit.json, no job ids), so `idxlab status` reads it too.
local errors = require("idxlab.errors")
local fs = require("idxlab.fs")
local results = require("idxlab.results")
local slurm = require("idxlab.slurm")
local experiment = require("idxlab.experiment")
local provenance = require("idxlab.experiment.provenance")

local fail = errors.fail
local q = fs.shell_quote

local M = {}

-- The GPUs a child may be given: the inherited CUDA_VISIBLE_DEVICES entries (set but empty:
-- none), else one per device nvidia-smi or the driver lists. Asked without CUDA.
function M.visible_devices()
  local env = os.getenv("CUDA_VISIBLE_DEVICES")
  local list = {}
  if env ~= nil then
    for d in env:gmatch("[^,]+") do
      d = d:match("^%s*(.-)%s*$")
      if d ~= "" then list[#list + 1] = d end
    end
    return list
  end
  local rc, out = slurm.capture("nvidia-smi -L")
  local n = 0
  if rc == 0 then for _ in out:gmatch("GPU %d+") do n = n + 1 end end
  if n == 0 then
    local _, ls = slurm.capture("ls -1 /proc/driver/nvidia/gpus 2>/dev/null")
    for _ in ls:gmatch("[^\n]+") do n = n + 1 end
  end
  for i = 0, n - 1 do list[#list + 1] = tostring(i) end
  return list
end

-- The CPU cores this process may use (its affinity, as nproc counts them).
function M.cores()
  local rc, out = slurm.capture("nproc")
  local n = rc == 0 and tonumber(out:match("%d+")) or nil
  return n and n >= 1 and n or 1
end

-- The environment of shard i of n: { {name, value}, ... }.
function M.shard_env(i, n, devices, cores)
  local env = {}
  if #devices > 0 then env[#env + 1] = { "CUDA_VISIBLE_DEVICES", devices[i % #devices + 1] } end
  local threads = tostring(math.max(1, math.floor(cores / n)))
  env[#env + 1] = { "IDXLAB_THREADS", threads }
  env[#env + 1] = { "OMP_NUM_THREADS", threads }
  return env
end

local function threads_text(cores, n)
  local t = math.max(1, math.floor(cores / n))
  return ("%d thread%s"):format(t, t == 1 and "" or "s")
end

-- The driver: starts the shards, each in a session of its own (so a Ctrl-C at the terminal
-- reaches this driver only, and each shard gets exactly one SIGINT from it), reports each
-- as it ends, and writes "i rc" lines to the rc file and "interrupted" when stopped.
local function driver_text(cmds, rcfile)
  local l = { "#!/bin/bash", "set -u", "interrupted=0", "declare -A shard_of",
    "stop() {",
    "  trap '' INT TERM HUP",
    "  interrupted=1",
    "  echo 'idxlab: stopping the shards; what they finished is kept' >&2",
    '  for p in "${!shard_of[@]}"; do kill -INT "$p" 2>/dev/null; done',
    "}",
    "trap stop INT TERM HUP",
  }
  for i, c in ipairs(cmds) do
    l[#l + 1] = ("setsid %s >%s 2>&1 </dev/null &"):format(c.cmd, q(c.log))
    l[#l + 1] = ("shard_of[$!]=%d"):format(i - 1)
  end
  l[#l + 1] = ("left=%d"):format(#cmds)
  l[#l + 1] = "while [ \"$left\" -gt 0 ]; do"
  l[#l + 1] = "  done_pid=''"
  l[#l + 1] = "  wait -n -p done_pid; rc=$?"
  l[#l + 1] = "  [ -n \"${done_pid:-}\" ] || continue # a signal ended the wait"
  l[#l + 1] = "  i=${shard_of[$done_pid]}; unset \"shard_of[$done_pid]\"; left=$((left - 1))"
  l[#l + 1] = ("  echo \"$i $rc\" >>%s"):format(q(rcfile))
  l[#l + 1] = ("  if [ \"$rc\" -eq 0 ]; then w=finished; else w=\"ended with exit status $rc\"; "
    .. "fi")
  l[#l + 1] = ("  echo \"idxlab: shard $i/%d $w ($left running)\" >&2"):format(#cmds)
  l[#l + 1] = "done"
  l[#l + 1] = ("[ \"$interrupted\" = 1 ] && echo interrupted >>%s"):format(q(rcfile))
  l[#l + 1] = "exit 0"
  return table.concat(l, "\n") .. "\n"
end

-- run(file, opts) -> exit status. opts: n, set (list or nil), out, resume, dry_run.
function M.run(file, opts)
  local n = opts.n
  local plan = experiment.plan(file, { set = opts.set })
  if #plan.points == 0 then fail("run: %s plans no points", file) end
  if n > #plan.points then
    fail("run: --local-shards %d but %s plans %d points: at most one shard per point", n, file,
      #plan.points)
  end
  local devices, cores = M.visible_devices(), M.cores()
  local out = slurm.absolute(opts.out or "results")
  local dir = out .. "/" .. plan.exp.name
  local bin = os.getenv("IDXLAB_BIN") or (provenance.repo_root() .. "/bin/idxlab")
  local cmds = {}
  for i = 0, n - 1 do
    local w = {}
    for _, e in ipairs(M.shard_env(i, n, devices, cores)) do w[#w + 1] = e[1] .. "=" .. q(e[2]) end
    local cmd = { "env", table.concat(w, " "), q(bin), "run", q(file) }
    for _, s in ipairs(opts.set or {}) do cmd[#cmd + 1] = "--set " .. q(s) end
    cmd[#cmd + 1] = ("--shard %d/%d --out %s --progress plain"):format(i, n, q(out))
    if opts.resume then cmd[#cmd + 1] = "--resume" end
    cmds[#cmds + 1] = { cmd = table.concat(cmd, " "),
      log = ("%s/logs/task-local_%d.log"):format(dir, i) }
  end
  if opts.dry_run then
    io.stdout:write(experiment.describe(plan))
    print(("# --local-shards %d: these processes (cores %d, visible GPUs: %s), then the merge "
      .. "into %s"):format(n, cores, #devices > 0 and table.concat(devices, ",") or "none", dir))
    for _, c in ipairs(cmds) do print(c.cmd .. " >" .. q(c.log) .. " 2>&1") end
    return 0
  end
  fs.mkdir_p(dir .. "/logs")
  local git = provenance.git_info()
  local rec = { schema = slurm.SCHEMA, launcher = "local", experiment = plan.exp.name,
    shards = n, commit = git.commit, dirty = git.dirty, source = slurm.absolute(file),
    sets = opts.set, out = out, dir = dir, jobs = {} }
  slurm.write_record(dir, rec)
  fs.write_atomic(dir .. "/experiment.json", results.encode(experiment.plan_record(plan),
    { "schema", "name", "question", "source" }) .. "\n")
  local rcfile = os.tmpname()
  local driver = os.tmpname()
  fs.write_atomic(driver, driver_text(cmds, rcfile))
  local where = #devices > 0 and ("GPUs " .. table.concat(devices, ","))
    or ("the CPU (%s each)"):format(threads_text(cores, n))
  io.stderr:write(("idxlab: %s: %d shards on %s; logs in %s/logs/task-local_<i>.log\n")
    :format(plan.exp.name, n, where, dir))
  -- system() ignores SIGINT here while the driver runs: the driver stops the shards
  os.execute("exec bash " .. q(driver))
  local text = fs.read_file(rcfile) or ""
  os.remove(rcfile)
  os.remove(driver)
  local failed, ended = {}, 0
  for i, rc in text:gmatch("(%d+) (%d+)") do
    ended = ended + 1
    if rc ~= "0" then failed[#failed + 1] = ("shard %s (exit %s, log %s/logs/task-local_%s.log)")
      :format(i, rc, dir, i) end
  end
  local interrupted = text:find("interrupted", 1, true) ~= nil
  local st, merged = slurm.merge_status(dir)
  if merged then
    for _, w in ipairs(merged.warnings) do io.stderr:write("idxlab: warning: ", w, "\n") end
    io.stdout:write("\n", merged.summary)
    for _, m in ipairs(merged.messages or {}) do io.stdout:write(m, "\n") end
  end
  print(("results in %s (merged from %d shards: results.jsonl, results.csv, summary.txt)")
    :format(dir, n))
  local resume = ("idxlab run %s --local-shards %d --resume"):format(q(file), n)
  if interrupted then
    io.stderr:write(("idxlab: interrupted: %d of %d points done, kept in %s; continue with: "
      .. "%s\n"):format(st.finished, st.points, dir, resume))
    return 130
  end
  if #failed > 0 or ended < n then
    io.stderr:write(("idxlab: %s failed\n"):format(#failed > 0 and table.concat(failed, ", ")
      or "a shard"))
  end
  if #st.missing_points > 0 then
    io.stderr:write(("idxlab: %d of %d points missing: %s (continue with: %s)\n"):format(
      #st.missing_points, st.points, slurm.missing_text(st), resume))
    return 1
  end
  return (#failed > 0 or ended < n) and 1 or 0
end

return errors.wrap(M)
