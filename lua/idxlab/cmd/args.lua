-- idxlab.cmd.args: the one command-line parser of bin/idxlab's commands. A spec maps each
-- option to its kind: "flag" (--dry-run), "value" (--out DIR) or "list" (--set k=v, repeated).
-- `--opt=value` works for value and list options. `-h`/`--help` asks for the usage. Every
-- command parses its options here (one option loop); a bad option is an idxlab error (code
-- "ARG") that bin/idxlab prints as one line.
local errors = require("idxlab.errors")

local fail = errors.fail

local M = {}

-- parse(argv, spec, usage, cmd) -> opts, positional, words. opts[name] is true (flag), the
-- string (value) or a list (list), keyed by the option without its dashes ("dry-run");
-- positional holds the other arguments; words are the value and list options again as shell
-- words (for printing a command that repeats them). opts.help is true for -h/--help. Errors
-- name the command and the option and end with the usage.
function M.parse(argv, spec, usage, cmd)
  local opts, positional, words = {}, {}, {}
  for name, kind in pairs(spec) do
    if kind == "list" then opts[name:sub(3)] = {} end
  end
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local flag, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    if flag then a = flag end
    local kind = spec[a]
    if a == "-h" or a == "--help" then
      opts.help = true
      i = i + 1
    elseif kind == "flag" then
      if inline then fail("%s: %s takes no value\n%s", cmd, a, usage) end
      opts[a:sub(3)] = true
      i = i + 1
    elseif kind == "value" or kind == "list" then
      local v = inline
      if v == nil then
        v = argv[i + 1]
        if v == nil then fail("%s: %s needs a value\n%s", cmd, a, usage) end
        i = i + 2
      else
        i = i + 1
      end
      local key = a:sub(3)
      if kind == "list" then
        local l = opts[key]
        l[#l + 1] = v
      else
        opts[key] = v
      end
      words[#words + 1] = a .. " " .. M.shell_word(v)
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      fail("%s: unknown option %s\n%s", cmd, a, usage)
    else
      positional[#positional + 1] = a
      i = i + 1
    end
  end
  return opts, positional, words
end

-- The value v of option `flag` of command `cmd` as a whole number >= 1 (digits only), or an
-- error naming them, followed by the usage text.
function M.positive_int(cmd, flag, v, usage)
  local s = tostring(v)
  if not s:match("^%d+$") or tonumber(s) < 1 then
    fail("%s: %s %s: must be a whole number >= 1\n%s", cmd, flag, s, usage)
  end
  return tonumber(s)
end

-- A string as one word of a POSIX shell command.
function M.shell_word(s)
  if s:match("^[%w_%./=,:+%-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

return errors.wrap(M)
