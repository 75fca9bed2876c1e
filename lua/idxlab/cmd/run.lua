-- `idxlab run FILE [--set key=value ...] [--dry-run] [--resume] [--shard i/n] [--out DIR]
-- [--progress bar|plain|off]`: runs an experiment file (docs/experiments.md). Exit status 0,
-- 1 when a point failed or the file is invalid, 130 when interrupted (Ctrl-C; what is done is
-- kept and `--resume` continues it).
local USAGE = [[usage: idxlab run FILE.lua [options]
  --set key=value   override a field (repeatable): a builder field (a,b,c sweeps it),
                    seed, backend, repeats, mode, by, metrics, workload.<knob>, sweep.<field>
  --dry-run         print the expanded points and the skipped ones; run nothing
  --resume          skip the points already in results.jsonl (after a kill or Ctrl-C)
  --shard i/n       run only the points whose index % n == i (0 <= i < n)
  --out DIR         base directory of the results (default: results); they go in DIR/<name>/
  --progress STYLE  bar, plain or off (default: bar on a terminal, plain otherwise)]]

local args = require("idxlab.cmd.args")

return function(argv)
  local spec = { ["--set"] = "list", ["--dry-run"] = "flag", ["--resume"] = "flag", ["--shard"] = "value",
    ["--out"] = "value", ["--progress"] = "value" }
  local o, positional, words = args.parse(argv, spec, USAGE, "run")
  if o.help then
    print(USAGE)
    return 0
  end
  if #positional > 1 then
    error(("idxlab: run: one experiment file only (got %s and %s)\n%s"):format(positional[1], positional[2], USAGE), 0)
  end
  local file = positional[1]
  local opts = { set = o.set, dry_run = o["dry-run"], resume = o.resume, shard = o.shard, out = o.out,
    progress = o.progress }
  -- the resume hint repeats every option but the progress style
  local kept = {}
  for _, w in ipairs(words) do
    if not w:match("^%-%-progress ") then kept[#kept + 1] = w end
  end
  words = kept
  if not file then error("idxlab: run: no experiment file given\n" .. USAGE, 0) end
  if #opts.set == 0 then opts.set = nil end
  opts.command = "idxlab run " .. args.shell_word(file) .. (#words > 0 and (" " .. table.concat(words, " ")) or "")
  local experiment = require("idxlab.experiment")
  local ok, res = pcall(experiment.run, file, opts)
  if not ok then
    local msg = tostring(res)
    local at = msg:find("idxlab: ", 1, true)
    if msg:find("interrupted!", 1, true) then
      io.stderr:write("idxlab: interrupted\n")
      return 130
    end
    io.stderr:write((at and msg:sub(at) or msg), "\n")
    return 1
  end
  return res.status or 0
end
