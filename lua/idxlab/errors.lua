-- idxlab.errors: the one error mechanism of the Lua layer.
--
-- Every failure is an error object {code, message, where}:
--   code     "ARG" for a Lua-side check, or the C status name (ixl_status_name: "CONFIG",
--            "SHAPE", ...) for a failure the library reported;
--   message  the text, naming the field, the value and the rule it broke (no "idxlab: ");
--   where    the public caller's "source:line", filled in once, at the library's public
--            boundary (M.public), never by counting stack levels.
-- tostring(err) is "where: idxlab: message" ("idxlab: message" while where is unknown), the
-- text a REPL user sees and the text specs match against.
--
-- Internal code raises with M.raise(code, fmt, ...) or M.fail(fmt, ...) (code "ARG"); every
-- module passes its exported functions once through M.public (or M.wrap(module)). A probe
-- that answers a question (is CUDA usable?) returns false, reason instead of raising.
local M = {}

local Error = {}
Error.__index = Error
function Error.__tostring(e)
  if e.where then return e.where .. ": idxlab: " .. e.message end
  return "idxlab: " .. e.message
end
M.Error = Error

local function new(code, message, where)
  return setmetatable({ code = code, message = message, where = where }, Error)
end
M.new = new

-- true for an idxlab error object.
function M.is(e) return getmetatable(e) == Error end

-- Raises an idxlab error; fmt is formatted only when arguments follow.
function M.raise(code, fmt, ...)
  local msg = select("#", ...) > 0 and fmt:format(...) or fmt
  error(new(code, msg), 0)
end

-- M.fail(fmt, ...) = M.raise("ARG", fmt, ...): a Lua-side argument or file check.
function M.fail(fmt, ...) M.raise("ARG", fmt, ...) end

-- The message of any error value, without where and without "idxlab: " (for composing a
-- new message from a caught one). A foreign error (a bug) gives its whole text.
function M.message(e)
  if M.is(e) then return e.message end
  local s = tostring(e)
  local i = s:find("idxlab: ", 1, true)
  if i then return s:sub(i + 8) end
  return s
end

-- Re-raises e, an idxlab error caught by pcall, keeping its code and where; a foreign error
-- is re-raised unchanged. With a prefix, the message becomes prefix .. message.
function M.rethrow(e, prefix)
  if M.is(e) then
    if prefix then e = new(e.code, prefix .. e.message, e.where) end
    error(e, 0)
  end
  error(e, 0)
end

-- Where the library's Lua sources live: a caller inside it is not "the public caller".
local lib_dir = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "")

local function outside_lib(info)
  if not info or not info.source then return false end
  local src = info.source
  if src:sub(1, 1) ~= "@" then return true end -- a chunk: the REPL, a string loaded by a user
  return lib_dir == "" or src:sub(2, #lib_dir + 2) ~= lib_dir .. "/"
end

-- The "source:line" of the first Lua caller outside the library, searching from stack level
-- `level` as seen by this function (1 = public_caller itself).
local function public_caller(level)
  for l = level, level + 40 do
    local info = debug.getinfo(l, "Sl")
    if not info then return nil end
    if info.what ~= "C" and outside_lib(info) then
      return ("%s:%d"):format(info.short_src, info.currentline or 0)
    end
  end
  return nil
end
M.public_caller = public_caller

-- An error leaving a public function: an idxlab error gets `where`, the public caller's line,
-- if it has none yet; any other error passes unchanged. Called as `return pass(pcall(...))`
-- (a tail call: the wrapper's frame is gone), so from public_caller the stack reads
-- 1 public_caller, 2 pass, 3 the wrapper's caller; public_caller skips the library's own
-- frames and C frames (pcall) from there on, so an internal caller is never taken for it.
local function pass(ok, ...)
  if ok then return ... end
  local e = ...
  if M.is(e) and not e.where then e.where = public_caller(3) end
  error(e, 0)
end

-- fn wrapped as a public entry point (see pass). No table per call: the results pass
-- through as varargs.
function M.public(fn)
  return function(...) return pass(pcall(fn, ...)) end
end

-- Wraps every function field of a module table in place (skipping names in `except`) and
-- returns it.
function M.wrap(mod, except)
  local skip = {}
  for _, k in ipairs(except or {}) do skip[k] = true end
  for k, v in pairs(mod) do
    if type(v) == "function" and not skip[k] then mod[k] = M.public(v) end
  end
  return mod
end

return M
