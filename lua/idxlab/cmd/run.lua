-- `idxlab run FILE [--set key=value ...] [--dry-run] [--resume] [--shard i/n] [--out DIR]
-- [--progress bar|plain|off] [--local-shards N]`: runs an experiment file
-- (docs/experiments.md); --local-shards hands it to idxlab.shards. Exit status 0,
-- 1 when a point failed or the file is invalid, 130 when interrupted (Ctrl-C; what is done is
-- kept and `--resume` continues it). Other failures raise; bin/idxlab prints them as one line.
local USAGE = [[usage: idxlab run FILE.lua [options]
  --set key=value   override a field (repeatable): a builder field (a,b,c sweeps it),
                    seed, backend, repeats, mode, by, metrics, workload.<knob>, sweep.<field>
  --dry-run         print the expanded points and the skipped ones; run nothing
  --resume          skip the points already in results.jsonl (after a kill or Ctrl-C)
  --shard i/n       run only the points whose index % n == i (0 <= i < n)
  --out DIR         base directory of the results (default: results); they go in DIR/<name>/
  --progress STYLE  bar, plain or off (default: bar on a terminal, plain otherwise)
  --local-shards N  run the sweep as N processes (--shard i/N each, one GPU each, in turn,
                    or cores/N CPU threads each), then merge them into DIR/<name>/]]

local errors = require("idxlab.errors")
local args = require("idxlab.cmd.args")
local experiment = require("idxlab.experiment")
local shards = require("idxlab.shards")

-- LuaJIT's own error for SIGINT ("interrupted!") or idxlab's, wherever the run was
local is_interrupt = require("idxlab.interrupt").is

return function(argv)
  local spec = { ["--set"] = "list", ["--dry-run"] = "flag", ["--resume"] = "flag",
    ["--shard"] = "value", ["--out"] = "value", ["--progress"] = "value",
    ["--local-shards"] = "value" }
  local o, positional, words = args.parse(argv, spec, USAGE, "run")
  if o.help then
    print(USAGE)
    return 0
  end
  if #positional > 1 then
    errors.fail("run: one experiment file only (got %s and %s)\n%s", positional[1], positional[2],
      USAGE)
  end
  local file = positional[1]
  local opts = { set = o.set, dry_run = o["dry-run"], resume = o.resume, shard = o.shard,
    out = o.out, progress = o.progress }
  -- the resume hint repeats every option but the progress style
  local kept = {}
  for _, w in ipairs(words) do
    if not w:match("^%-%-progress ") then kept[#kept + 1] = w end
  end
  words = kept
  if not file then errors.fail("run: no experiment file given\n" .. USAGE) end
  if o["local-shards"] then
    local n = args.positive_int("run", "--local-shards", o["local-shards"], USAGE)
    if o.shard then errors.fail("run: --shard and --local-shards: choose one\n" .. USAGE) end
    return shards.run(file, { n = n, set = #o.set > 0 and o.set
      or nil, out = o.out, resume = o.resume, dry_run = o["dry-run"] })
  end
  if #opts.set == 0 then opts.set = nil end
  opts.command = "idxlab run " .. args.shell_word(file)
    .. (#words > 0 and (" " .. table.concat(words, " ")) or "")
  local ok, res = pcall(experiment.run, file, opts)
  if not ok then
    if is_interrupt(res) then
      io.stderr:write("idxlab: interrupted\n")
      return 130
    end
    errors.rethrow(res)
  end
  return res.status or 0
end
