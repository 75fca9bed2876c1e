-- idxlab.experiment.sandbox: runs an experiment file as data. The file sees no io, os,
-- require or load; string patterns (which backtrack inside C, out of any hook's reach) are
-- replaced by plain find; string.rep and table.concat are sized before they build; and an
-- instruction budget stops a runaway loop. The loader always restores the debug hook and the
-- string metatable it borrowed.
local errors = require("idxlab.errors")

local M = {}

local fail = errors.fail

local function copy(t)
  local o = {}
  for k, v in pairs(t) do o[k] = v end
  return o
end

-- string.rep that refuses a result over 16 MiB (its separator counted).
local function bounded_rep(rep)
  return function(s, n, sep)
    if type(n) == "number" and type(s) == "string"
        and (#s + (type(sep) == "string" and #sep or 0)) * n > 2 ^ 24 then
      error("string.rep: result longer than 16 MiB", 2)
    end
    return rep(s, n, sep)
  end
end

-- table.concat sized before it is built (this loop is the loader's, out of the hook's reach:
-- bounded by the piece limit).
local function bounded_concat(concat)
  return function(t, sep, i, j)
    if type(t) == "table" then
      i, j = tonumber(i) or 1, tonumber(j) or #t
      if j - i >= 2 ^ 20 then error("table.concat: more than 2^20 pieces", 2) end
      local n, sl = 0, type(sep) == "string" and #sep or 0
      for k = i, j do
        local v = t[k]
        n = n + (type(v) == "string" and #v or 24) + sl
      end
      if n > 2 ^ 24 then error("table.concat: result longer than 16 MiB", 2) end
    end
    return concat(t, sep, i, j)
  end
end

-- The file's globals, and the string table its string methods must reach.
local function safe_env()
  local str = copy(string)
  str.dump = nil
  str.rep = bounded_rep(string.rep)
  local tab = copy(table)
  tab.concat = bounded_concat(table.concat)
  -- Lua patterns backtrack without bound inside C, where no hook can stop them: an
  -- experiment file is data and gets plain find only.
  local find = string.find
  str.find = function(s, p, init, plain)
    if not plain then
      error("string.find: only plain find (4th argument true) in experiment files", 2)
    end
    return find(s, p, init, plain)
  end
  for _, name in ipairs({ "match", "gmatch", "gsub" }) do
    str[name] = function()
      error(("string.%s: Lua patterns are not available in experiment files"):format(name), 2)
    end
  end
  local env = {
    math = copy(math), string = str, table = tab,
    pairs = pairs, ipairs = ipairs, next = next, select = select, type = type,
    tonumber = tonumber, tostring = tostring, unpack = unpack, error = error, assert = assert,
    pcall = pcall, print = print,
  }
  env._G = env
  return env, str
end

-- The file's text, compiled (errors name the file and, for a syntax error, its line).
local function compile(path)
  if type(path) ~= "string" then
    fail("experiment file path must be a string, got " .. type(path))
  end
  local f, err = io.open(path, "rb")
  if not f then fail(("cannot read experiment file %s: %s"):format(path, tostring(err))) end
  local text = f:read("*a")
  f:close()
  if type(text) ~= "string" then
    fail(("cannot read experiment file %s: not a regular file"):format(path))
  end
  if #text > 1048576 then
    fail(("%s: an experiment file of %d bytes: at most 1 MiB"):format(path, #text))
  end
  local chunk, perr = loadstring(text, "@" .. path)
  if not chunk then
    perr = tostring(perr)
    if perr:sub(1, #path + 1) == path .. ":" then
      local line, what = perr:match("^.-:(%d+): (.*)$")
      if line then fail(("%s:%s: does not parse: %s"):format(path, line, what)) end
    end
    fail(("%s: does not parse: %s"):format(path, perr))
  end
  return chunk
end

-- Runs chunk in env under the instruction budget; returns pcall's ok, result.
local function run_bounded(chunk, env, str, path, max_instructions)
  -- Compiled traces never call hooks: the file runs interpreted, so the count hook can stop
  -- a runaway loop. Once the budget is spent, the sandbox's pcall re-raises, so a file
  -- cannot swallow the stop.
  jit.off(chunk, true)
  local count, spent = 0, false
  local stop = errors.new("ARG", ("%s: still running after %d instructions (an experiment "
    .. "file is data, not a program)"):format(path, max_instructions))
  env.pcall = function(fn, ...)
    local r = { pcall(fn, ...) }
    if spent then errors.throw(stop) end
    return unpack(r, 1, table.maxn(r))
  end
  -- string methods ("x"):rep(n) reach the string metatable, not env.string: point it at the
  -- sandbox's table while the file runs
  local smt = getmetatable("")
  local old_index = smt.__index
  local oldhook, oldmask, oldcount = debug.gethook()
  smt.__index = str
  local source = "@" .. path
  debug.sethook(function()
    count = count + 1
    -- raised only inside the file's own code, so never in the loader's lines that restore
    -- the hook and the string metatable after it returns
    if count * 1000 >= max_instructions and debug.getinfo(2, "S").source == source then
      spent = true
      errors.throw(stop)
    end
  end, "", 1000)
  local ok, res = pcall(chunk)
  debug.sethook(oldhook, oldmask, oldcount)
  smt.__index = old_index
  return ok, res
end

-- load(path, max_instructions) -> the experiment table the file returns.
function M.load(path, max_instructions)
  local chunk = compile(path)
  local env, str = safe_env()
  setfenv(chunk, env)
  local ok, res = run_bounded(chunk, env, str, path, max_instructions)
  if not ok then
    -- the budget's stop (or an idxlab error the file re-raised) passes as it is
    if errors.is(res) then error(res, 0) end
    fail(("%s: error while loading: %s"):format(path, tostring(res)))
  end
  if type(res) ~= "table" then
    fail(("%s: must return a table (the experiment), got %s"):format(path, type(res)))
  end
  return res
end

return M
