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

local function shell_word(s)
  if s:match("^[%w_%./=,:+%-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

return function(argv)
  local file
  local opts = { set = {} }
  local words = {}
  local i = 1
  local function value_of(flag)
    local v = argv[i + 1]
    if v == nil then error(("idxlab: run: %s needs a value\n%s"):format(flag, USAGE), 0) end
    i = i + 2
    return v
  end
  while i <= #argv do
    local a = argv[i]
    local flag, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    if flag then
      -- --set=k=v, --shard=0/2, --out=DIR
      table.insert(argv, i + 1, inline)
      a = flag
    end
    if a == "--set" then
      local v = value_of(a)
      opts.set[#opts.set + 1] = v
      words[#words + 1] = "--set " .. shell_word(v)
    elseif a == "--dry-run" then
      opts.dry_run = true
      i = i + 1
    elseif a == "--resume" then
      opts.resume = true
      i = i + 1
    elseif a == "--shard" then
      opts.shard = value_of(a)
      words[#words + 1] = "--shard " .. shell_word(opts.shard)
    elseif a == "--out" then
      opts.out = value_of(a)
      words[#words + 1] = "--out " .. shell_word(opts.out)
    elseif a == "--progress" then
      opts.progress = value_of(a)
    elseif a == "-h" or a == "--help" then
      print(USAGE)
      return 0
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      error(("idxlab: run: unknown option %s\n%s"):format(a, USAGE), 0)
    elseif file then
      error(("idxlab: run: one experiment file only (got %s and %s)\n%s"):format(file, a, USAGE), 0)
    else
      file = a
      i = i + 1
    end
  end
  if not file then error("idxlab: run: no experiment file given\n" .. USAGE, 0) end
  if #opts.set == 0 then opts.set = nil end
  opts.command = "idxlab run " .. shell_word(file) .. (#words > 0 and (" " .. table.concat(words, " ")) or "")
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
