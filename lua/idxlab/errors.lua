-- idxlab.errors: the one error mechanism of the Lua layer.
--
-- Every failure is an error object {code, message, where}:
--   code     "ARG" for a Lua-side check, or the C status name (ixl_status_name: "CONFIG",
--            "SHAPE", ...) for a failure the library reported;
--   message  the text, naming the field, the value and the rule it broke (no "idxlab: ");
--   where    the public caller's "source:line": the first Lua frame outside the library's
--            sources, found when the error is raised (M.raise), never by counting stack
--            levels.
-- tostring(err) is "where: idxlab: message" ("idxlab: message" while where is unknown), the
-- text a REPL user sees and the text specs match against.
--
-- Internal code raises with M.raise(code, fmt, ...) or M.fail(fmt, ...) (code "ARG"). A probe
-- that answers a question (is CUDA usable?) returns false, reason instead of raising.
-- Modules still mark their exported functions with M.public (or M.wrap(module)); that costs
-- nothing: where is set at the raise, so no call of a public function (an accessor the step
-- calls dozens of times per group) pays for a pcall frame.
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

-- Raises an idxlab error whose where is the public caller's line (public_caller from here:
-- 1 public_caller, 2 raise, then raise's callers; the library's frames, fail's included, and
-- C frames such as pcall are skipped); fmt is formatted only when arguments follow.
function M.raise(code, fmt, ...)
  local msg = select("#", ...) > 0 and fmt:format(...) or fmt
  error(new(code, msg, public_caller(2)), 0)
end

-- M.fail(fmt, ...) = M.raise("ARG", fmt, ...): a Lua-side argument or file check.
function M.fail(fmt, ...) M.raise("ARG", fmt, ...) end

-- Raises e, an idxlab error made with M.new, with where set as M.raise sets it (when it has
-- none yet).
function M.throw(e)
  if M.is(e) and not e.where then e.where = public_caller(2) end
  error(e, 0)
end

-- fn as a public entry point: fn itself. Errors already carry where from their raise, so the
-- boundary adds no frame and no pcall (results and foreign errors pass unchanged).
function M.public(fn) return fn end

-- Marks every function field of a module table public (M.public: nothing changes) and
-- returns it; `except` names fields to leave out.
function M.wrap(mod, except)
  local skip = {}
  for _, k in ipairs(except or {}) do skip[k] = true end
  for k, v in pairs(mod) do
    if type(v) == "function" and not skip[k] then mod[k] = M.public(v) end
  end
  return mod
end

return M
