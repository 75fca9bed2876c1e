-- idxlab.fs: the file helpers of the Lua layer, each written once: existence and directory
-- probes, reading a whole file, writing one atomically (temp + rename, so a reader sees the
-- old file or the new one, never a part), moving an outside program's output into place,
-- mkdir -p, quoting a word for a POSIX shell, and a results folder's advisory lock (lock).
-- Probes answer with true/false (exists, is_dir) or nil and the reason (read_file,
-- move_into_place); every other failure is an idxlab error (code "ARG") naming the path.
local errors = require("idxlab.errors")
local binding = require("idxlab.ffi")

local getpid = binding.getpid

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

---------------------------------------------------------------------------- the folder lock

-- The lock file of a folder. It stays after a run: removing it would let a run that opened
-- it just before lock a file nobody else can see any more.
M.LOCK_NAME = ".idxlab.lock"

local Lock = {}
Lock.__index = Lock

-- Releases the lock (a second call does nothing).
function Lock:release()
  if self.fd then
    binding.unlock(self.fd)
    self.fd = nil
  end
end

-- "pid N" and the command of the process that holds dir's lock, as it wrote them; a holder
-- that has locked but not yet written gets a moment.
local function holder_of(path)
  for _ = 1, 20 do
    local pid, cmd = (M.read_file(path) or ""):match("^pid (%d+)\n(.-)\n?$")
    if pid then return pid, cmd end
    binding.sleep_us(25000)
  end
  return "unknown", "unknown command"
end

-- lock(dir, command) -> a lock held until lock:release() or the end of the process: an
-- advisory flock on dir/.idxlab.lock, which the kernel drops when its holder dies however it
-- dies (SIGKILL included), so a killed run never leaves the folder locked. The file records
-- the holder's pid and command. A folder another process holds is an error naming them.
-- dir must exist.
function M.lock(dir, command)
  if type(dir) ~= "string" or dir == "" then fail("fs.lock: dir must be a non-empty string") end
  local path = dir .. "/" .. M.LOCK_NAME
  local fd, why = binding.try_lock(path)
  if not fd then
    if why == "held" then
      local pid, cmd = holder_of(path)
      fail("%s is in use by a running idxlab (pid %s: %s): two runs would mix their results "
        .. "there; wait for it to finish (or stop it), or use another folder", dir, pid, cmd)
    end
    fail("cannot lock %s: %s", path, tostring(why))
  end
  binding.lock_note(fd, ("pid %d\n%s\n"):format(getpid(), tostring(command):gsub("%c", " ")))
  local lock = setmetatable({ fd = fd, path = path }, Lock)
  -- a lock dropped without release (an error between lock and release) is released when
  -- collected, not only at exit
  local proxy = newproxy(true)
  getmetatable(proxy).__gc = function() lock:release() end
  lock.proxy = proxy
  return lock
end

return errors.wrap(M)
