-- idxlab.interrupt: Ctrl-C as a flag (core/interrupt.c). The REPL installs the handler, so
-- SIGINT no longer ends the session: it only sets a flag, which the REPL reads at the prompt,
-- the experiment runner between points and the step between kernels (M.check). Where nothing
-- installed it (`idxlab run`, a script), SIGINT keeps LuaJIT's own behaviour ("interrupted!"
-- raised at the next instruction), and the polls find the flag clear.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local C = core.C

local M = {}

-- The text of an interrupt, LuaJIT's own for SIGINT, which the runner and `idxlab run`
-- already recognise (is below).
M.MESSAGE = "interrupted!"

-- SIGINT sets the flag from now on; false when sigaction failed.
function M.install() return C.ixl_interrupt_install() == 0 end
-- The disposition install replaced comes back.
function M.restore() C.ixl_interrupt_restore() end
function M.installed() return C.ixl_interrupt_installed() ~= 0 end
function M.pending() return C.ixl_interrupt_pending() ~= 0 end
function M.clear() C.ixl_interrupt_clear() end

-- Raises the interrupt error (code "INTERRUPTED") when Ctrl-C was pressed; the flag stays
-- set, so every loop above stops too, until the REPL clears it at the next prompt.
function M.check()
  if C.ixl_interrupt_pending() ~= 0 then errors.raise("INTERRUPTED", M.MESSAGE) end
end

-- True for an interrupt: this module's error or LuaJIT's, or a message carrying either.
function M.is(e)
  return tostring(e):find(M.MESSAGE, 1, true) ~= nil
end

return M
