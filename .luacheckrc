-- .luacheckrc - luacheck's settings for idxlab (scripts/check.sh runs
-- `luacheck lua experiments bench tests` from the repository root; 0 warnings is the rule).
-- LuaJIT 2.1's globals (bit, jit, ffi through require, unpack, table.new, ...) and nothing
-- of Lua 5.2+: `table.unpack` is not there unless LuaJIT was built with 5.2 compatibility.
std = "luajit"

-- The same limit as the awk pass over C, CUDA and shell (and .editorconfig); code, strings
-- and comments alike.
max_line_length = 100

-- The specs run under busted, which provides describe, it, pending, setup, teardown,
-- before_each, finally, spy, stub, mock, assert's extensions, ... as globals.
files["tests/"] = { std = "+busted" }

-- No warning is ignored, anywhere. An unused argument that a fixed signature requires is
-- named with a leading underscore (luacheck's own convention) or `_`, not silenced here.
-- Should an ignore ever be needed, list it by code beside the files it concerns, with the
-- reason, e.g. files["x/"] = { ignore = { "212" } } -- why.
