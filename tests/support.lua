-- support.lua: what several spec files share (loaded with dofile, not a spec itself): private
-- temporary directories, removed with `teardown(support.cleanup)`, writing a file, and the
-- experiment runner's fake measure.
local fs = require("idxlab.fs")

local M = {}

local made = {}

-- A fresh directory named after a unique os.tmpname() file (mkstemp), so two test runs at
-- once (another build dir, the same second, the same random seed) never share one.
function M.tmpdir(tag)
  local reserve = os.tmpname()
  local d = reserve .. "-idxlab-" .. (tag or "spec")
  fs.mkdir_p(d)
  made[#made + 1] = { d, reserve }
  return d
end

function M.cleanup()
  for _, t in ipairs(made) do
    os.execute("rm -rf " .. fs.shell_quote(t[1]))
    os.remove(t[2])
  end
  made = {}
end

-- The experiment runner's stand-in for the kernels (tests/support/fake_measure.lua): the
-- function, for experiment.run's `fake` option, and its path, for IDXLAB_FAKE_MEASURE.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests"
M.FAKE_MEASURE = here .. "/support/fake_measure.lua"
M.fake_measure = dofile(M.FAKE_MEASURE)

function M.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

return M
