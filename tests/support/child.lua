-- tests/support/child.lua: a real child process for specs that signal a run (kill it, see
-- what it leaves). start(cmd, dir) runs cmd in the background through sh, which records its
-- own pid before exec (so a signal reaches the program itself), with stdout, stderr and the
-- exit status in files under dir; every wait is bounded. Load with dofile.
local fs = require("idxlab.fs")

local q = fs.shell_quote

local M = {}

-- wait_for(pred, seconds) -> whether pred() came true within seconds (polled every 0.1 s).
function M.wait_for(pred, seconds)
  local t0 = os.time()
  while os.time() - t0 < seconds do
    if pred() then return true end
    os.execute("sleep 0.1")
  end
  return pred() and true or false
end

-- start(cmd, dir) -> a child { dir, pid() , rc(), out(), err(), kill(sig) }.
function M.start(cmd, dir)
  fs.mkdir_p(dir)
  local script = ("( sh -c 'echo $$ > %s; exec %s' > %s 2> %s; echo $? > %s ) &"):format(
    q(dir .. "/pid"), cmd:gsub("'", "'\\''"), q(dir .. "/out"), q(dir .. "/err"),
    q(dir .. "/rc"))
  os.execute(script)
  local c = { dir = dir }
  -- the pid, once the child has written it (nil after 10 s)
  function c.pid()
    M.wait_for(function() return (fs.read_file(dir .. "/pid") or ""):match("%d+") ~= nil end, 10)
    return (fs.read_file(dir .. "/pid") or ""):match("%d+")
  end
  -- the exit status, or nil while it runs
  function c.rc() return tonumber((fs.read_file(dir .. "/rc") or ""):match("%d+")) end
  function c.out() return fs.read_file(dir .. "/out") or "" end
  function c.err() return fs.read_file(dir .. "/err") or "" end
  -- sends sig (e.g. "KILL") unless it has ended, then waits (10 s at most) for its status
  function c.kill(sig)
    local pid = c.pid()
    if pid and not c.rc() then os.execute(("kill -%s %s 2>/dev/null"):format(sig, pid)) end
    M.wait_for(function() return c.rc() ~= nil end, 10)
    return c.rc()
  end
  return c
end

return M
