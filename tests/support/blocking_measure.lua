-- tests/support/blocking_measure.lua: a measure for IDXLAB_FAKE_MEASURE whose first point
-- finishes at once (fake_measure's row) and whose later points block, as a long kernel
-- would, until Ctrl-C sets idxlab.interrupt's flag; then the point stops the way the step
-- does between kernels (interrupt.check raises). Bounded: with no Ctrl-C within
-- IDXLAB_BLOCK_TIMEOUT seconds (default 10) the point fails instead of hanging the spec.
local binding = require("idxlab.ffi")
local interrupt = require("idxlab.interrupt")
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/support"
local fake = dofile(here .. "/fake_measure.lua")

local calls = 0

return function(ctx, point)
  calls = calls + 1
  if calls > 1 then
    local t_end = binding.now_us() + (tonumber(os.getenv("IDXLAB_BLOCK_TIMEOUT")) or 10) * 1e6
    while not interrupt.pending() do
      if binding.now_us() > t_end then error("blocking_measure: no Ctrl-C came") end
      binding.sleep_us(20000)
    end
    interrupt.check()
  end
  return fake(ctx, point)
end
