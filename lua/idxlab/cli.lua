-- idxlab.cli: `idxlab COMMAND ...`. Each command lives in lua/idxlab/cmd/<name>.lua and
-- returns function(argv) -> exit status; its options go through idxlab.cmd.args. A command
-- that fails raises, and this is the one place that prints it: one line on stderr,
-- "idxlab: " and the message without its where (a Lua file:line means nothing on the
-- shell), exit status 1. IDXLAB_DEBUG=1 adds where and the traceback.
local errors = require("idxlab.errors")

local commands = {
  run = "run an experiment file: idxlab run FILE.lua [--set key=value ...] [--dry-run] "
    .. "[--resume] [--shard i/n] [--out DIR] [--progress bar|plain|off]",
  script = "run a Lua script (benchmarks, the soak run): idxlab script FILE.lua [ARGS ...]",
  config = "print the validated builder config as JSON: idxlab config [--set key=value ...]",
  replay = "replay a step from a safetensors file: idxlab replay IN.safetensors OUT.safetensors "
    .. "[--set key=value ...]",
  report = "re-render tables and plots from saved results: idxlab report results/NAME",
  merge = "combine sharded results: idxlab merge OUT_DIR SHARD_DIR ...",
  submit = "run a sweep on Slurm: idxlab submit FILE.lua --shards N [--set ...] [sbatch "
    .. "options] [--dry-run]; idxlab submit results/NAME --resume",
  status = "a submitted sweep's points per shard: idxlab status results/NAME [--merge]",
  diff = "compare two replay outputs: idxlab diff A.safetensors B.safetensors",
  compare = "two runs of a sweep point for point, timing and device aside: idxlab compare A B",
  help = "this list",
}

local function usage(out)
  out:write("usage: idxlab [COMMAND ...]   (no command: the REPL)\n\ncommands:\n")
  local names = {}
  for k in pairs(commands) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do out:write(("  %-8s %s\n"):format(k, commands[k])) end
  out:write("  --version\n")
end

local function main(argv)
  local cmd = argv[1]
  if cmd == "--version" or cmd == "version" then
    print("idxlab " .. require("idxlab").version) -- loads the library: only when asked
    return 0
  end
  if cmd == "help" or cmd == "--help" or cmd == "-h" then
    usage(io.stdout)
    return 0
  end
  if not commands[cmd] then
    io.stderr:write(("idxlab: unknown command %q\n"):format(tostring(cmd)))
    usage(io.stderr)
    return 2
  end
  local rest = {}
  for i = 2, #argv do rest[#rest + 1] = argv[i] end
  -- a command whose module cannot load (no library built) is named as such
  local ok, mod = pcall(require, "idxlab.cmd." .. cmd)
  if not ok then
    io.stderr:write(("idxlab: command %s is not available: %s\n"):format(cmd, tostring(mod)))
    return 1
  end
  return mod(rest) or 0
end

local debugging = os.getenv("IDXLAB_DEBUG") == "1"
local argv = { ... }
local ok, rc = xpcall(main, function(e)
  return { err = e, traceback = debugging and debug.traceback("", 2) or nil }
end, argv)
if not ok then
  local e = rc.err
  io.stderr:write("idxlab: ", errors.message(e), "\n")
  if debugging then
    if errors.is(e) and e.where then io.stderr:write("at ", e.where, "\n") end
    io.stderr:write((rc.traceback:gsub("^\n", "")), "\n")
  end
  os.exit(1)
end
io.stdout:flush()
os.exit(rc or 0)
