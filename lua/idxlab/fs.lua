-- idxlab.fs: the file helpers of the Lua layer, each written once: existence and directory
-- probes, reading a whole file, writing one atomically (temp + rename, so a reader sees the
-- old file or the new one, never a part), moving an outside program's output into place,
-- mkdir -p, and quoting a word for a POSIX shell.
-- Probes answer with true/false (exists, is_dir) or nil and the reason (read_file,
-- move_into_place); every other failure is an idxlab error (code "ARG") naming the path.
local errors = require("idxlab.errors")
local getpid = require("idxlab.ffi").getpid

local fail = errors.fail

local M = {}

-- A string as one single-quoted word of a POSIX shell command.
function M.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- True when path names something that can be opened for reading.
function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

local EACCES = 13 -- Linux and the BSDs

-- True when dir is a directory, as `test -d` answers: dir/. opens only for a directory; a
-- directory without read permission refuses that open (EACCES), and then test -d, which
-- needs none, decides. "" and a name holding NUL are no directory to test -d ("/." and the
-- name cut at the NUL would open).
function M.is_dir(dir)
  dir = tostring(dir)
  if dir == "" or dir:find("%z") then return false end
  local f, _, code = io.open(dir .. "/.", "rb")
  if f then f:close() return true end
  if code ~= EACCES then return false end
  local ok = os.execute("test -d " .. M.shell_quote(dir))
  return ok == 0 or ok == true
end

-- The whole file as a string, or nil and io.open's reason (a missing file is an answer).
function M.read_file(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local s = f:read("*a")
  f:close()
  return s
end

-- Writes a whole file under a temporary name in the same directory (the pid keeps two
-- processes apart), then renames it over the target.
function M.write_atomic(path, text)
  if type(path) ~= "string" then fail("fs.write_atomic: path must be a string") end
  if type(text) ~= "string" then fail("fs.write_atomic: text must be a string") end
  local tmp = ("%s.tmp.%d"):format(path, getpid())
  local f, err = io.open(tmp, "wb")
  if not f then fail("cannot write %s: %s", path, tostring(err)) end
  local ok, werr = f:write(text)
  if ok then ok, werr = f:flush() end
  f:close()
  if not ok then
    os.remove(tmp)
    fail("cannot write %s: %s", path, tostring(werr))
  end
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    os.remove(tmp)
    fail("cannot rename %s to %s: %s", tmp, path, tostring(rerr))
  end
end

-- Renames a file an outside program (gnuplot) wrote under a temporary name into place; true,
-- or nil and the reason (the temporary is removed either way).
function M.move_into_place(tmp, path)
  local ok, err = os.rename(tmp, path)
  if not ok then
    os.remove(tmp)
    return nil, err
  end
  return true
end

-- mkdir -p: dir and its parents; an error naming dir when it is not a directory afterwards.
function M.mkdir_p(dir)
  if type(dir) ~= "string" or dir == "" then
    fail("fs.mkdir_p: dir must be a non-empty string")
  end
  local ok = os.execute("mkdir -p -- " .. M.shell_quote(dir))
  if (ok ~= 0 and ok ~= true) or not M.is_dir(dir) then
    fail("cannot create directory %s", dir)
  end
end

return errors.wrap(M)
