-- tests/support/pty.lua: drives an interactive command through a pseudo-terminal, as a user
-- at a terminal would: util-linux `script -qfec CMD /dev/null` owns the pty; the spec's
-- keystrokes go in through a FIFO (so Ctrl-C is the byte 0x03 and the pty's line discipline
-- turns it into SIGINT for the foreground process group, exactly as a real terminal does),
-- and the output lands in a file the spec polls. Every wait is bounded (expect's timeout),
-- never a fixed sleep; close() ends the session and makes sure no process is left behind.
--
--   local p = pty.start(dir, "bin/idxlab", { IDXLAB_RLWRAP = "0" })
--   p:expect("> ")            -- waits (at most 5 s) for the text after what was matched
--   p:send("= 6 * 7\n")
--   p:close()
local binding = require("idxlab.ffi")
local fs = require("idxlab.fs")

local M = {}

local q = fs.shell_quote

local Pty = {}
Pty.__index = Pty

-- Starts cmd (a shell command line) under a pty of 120 x 40 in directory dir (its files:
-- in, the FIFO; out, the output; pid, script's pid). env: extra environment variables.
function M.start(dir, cmd, env)
  local assigns = {}
  for k, v in pairs(env or {}) do assigns[#assigns + 1] = k .. "=" .. q(v) end
  table.sort(assigns)
  local fifo, out = dir .. "/in", dir .. "/out"
  assert(os.execute("mkfifo " .. q(fifo)) == 0, "mkfifo failed")
  local inner = "stty cols 120 rows 40; exec " .. cmd
  -- setsid: script leads its own process group, so close() can end it and only it
  local line = ("(env %s setsid script -qfec %s /dev/null < %s > %s 2>&1 & echo $! > %s)")
    :format(table.concat(assigns, " "), q(inner), q(fifo), q(out), q(dir .. "/pid"))
  assert(os.execute(line) == 0, "could not start script")
  local self = setmetatable({ dir = dir, out = out, pos = 1 }, Pty)
  self.input = assert(io.open(fifo, "w")) -- returns once script opened its end
  self.pid = (fs.read_file(dir .. "/pid") or ""):match("%d+")
  return self
end

-- The output so far, without carriage returns and terminal escape sequences.
function Pty:text()
  local s = fs.read_file(self.out) or ""
  s = s:gsub("\r", ""):gsub("\27%[[%d;?]*[%a]", ""):gsub("\27[%(%)][%w]", ""):gsub("\27[=>]", "")
  return s
end

-- Waits until `text` (plain, or a Lua pattern with opts.pattern) appears after the last
-- match, at most `timeout` seconds (default 5); -> the output from the last match to the end
-- of this one. Fails with the output seen when it does not come.
function Pty:expect(text, timeout, pattern)
  local t_end = binding.now_us() + (timeout or 5) * 1e6
  while true do
    local s = self:text()
    local i, j = s:find(text, self.pos, not pattern)
    if i then
      local seen = s:sub(self.pos, j)
      self.pos = j + 1
      return seen
    end
    if binding.now_us() > t_end then
      error(("pty: %q did not appear within %gs; output after the last match:\n%s")
        :format(text, timeout or 5, s:sub(self.pos)), 2)
    end
    binding.sleep_us(20000)
  end
end

-- The parent of process pid (rlwrap, for the REPL it wraps), or nil.
function M.ppid(pid)
  local stat = fs.read_file("/proc/" .. pid .. "/stat") or ""
  return stat:match("^%d+ %b() %S+ (%d+)")
end

-- Waits until `stty -a` on the terminal that is process pid's stdin shows `text` (e.g.
-- "intr = <undef>;"), at most `timeout` seconds (default 5): terminal settings that a program
-- changes show nowhere in the output, so this is how a spec waits for them.
function M.expect_tty(pid, text, timeout)
  local t_end = binding.now_us() + (timeout or 5) * 1e6
  local last
  while true do
    local f = io.popen(("stty -a -F \"$(readlink /proc/%d/fd/0)\" 2>&1"):format(pid))
    last = f:read("*a")
    f:close()
    if last:find(text, 1, true) then return end
    if binding.now_us() > t_end then
      error(("pty: %q did not appear in the terminal settings of %s within %gs:\n%s")
        :format(text, pid, timeout or 5, last), 2)
    end
    binding.sleep_us(20000)
  end
end

function Pty:send(bytes)
  self.input:write(bytes)
  self.input:flush()
end

-- Whether process pid (a number or its digits) still runs.
function M.alive(pid)
  return pid ~= nil and os.execute("kill -0 " .. pid .. " 2>/dev/null") == 0
end
local alive = M.alive

-- Ends the session: `bye` (default: Ctrl-D, the end of input; false: nothing, for a command
-- that ended by itself, as a write to a FIFO nobody reads any more raises SIGPIPE) is sent,
-- then script and every process given in `pids` (those the spec learned from inside) get at
-- most `timeout` seconds (default 5) to end before SIGKILL. -> true when all ended on their own.
function Pty:close(pids, bye, timeout)
  if bye ~= false then pcall(self.send, self, bye or "\4") end
  pcall(io.close, self.input)
  local all = { self.pid }
  for _, p in ipairs(pids or {}) do all[#all + 1] = tostring(p) end
  local t_end = binding.now_us() + (timeout or 5) * 1e6
  local clean = true
  while true do
    local left = {}
    for _, p in ipairs(all) do if alive(p) then left[#left + 1] = p end end
    if #left == 0 then break end
    if binding.now_us() > t_end then
      clean = false
      os.execute("kill -KILL -" .. self.pid .. " 2>/dev/null")
      for _, p in ipairs(left) do os.execute("kill -KILL " .. p .. " 2>/dev/null") end
      break
    end
    binding.sleep_us(20000)
  end
  return clean
end

return M
