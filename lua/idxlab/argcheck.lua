-- idxlab.argcheck: the argument checks the public Lua op modules share (formats, logits,
-- select, ...). Each raises an idxlab error (code "ARG") whose message names the function
-- (`where`, e.g. "formats.quantize"), the argument, its value and the rule; the line it
-- points at is set by the module's public boundary (errors.public), not counted here.
-- Where `where` is nil the message names only the argument (select's messages).
local errors = require("idxlab.errors")
local util = require("idxlab.util")
local Tensor = require("idxlab.tensor")
local Context = require("idxlab.context")

local M = {}

local fail = errors.fail

-- The one "integer in range" check: raises fail(fmt, ...) unless v is an integer in [lo, hi].
function M.want_int(v, lo, hi, fmt, ...)
  if not util.is_int(v, lo, hi) then fail(fmt, ...) end
  return v
end

function M.ctx(ctx, where)
  if not Context.is_context(ctx) then
    if where then fail("%s: ctx must be an idxlab context", where) end
    fail("ctx = %s: must be a live context (idxlab.context{...})", tostring(ctx))
  end
  return ctx.cd
end

-- A live Tensor (nil passes when `optional`); returns its ixl_tensor* (or nil).
function M.tensor(t, name, where, optional)
  if t == nil and optional then return nil end
  if not Tensor.is_tensor(t) then
    if where then fail("%s: %s must be a Tensor, got %s", where, name, type(t)) end
    fail("%s = %s: must be a tensor%s", name, tostring(t), optional and " or nil" or "")
  end
  local why = Tensor.dead_reason(t)
  if why then
    if where then fail("%s: %s: %s", where, name, why) end
    fail("%s: %s", name, why)
  end
  return t.cd
end

-- An integer >= min (default 0), and <= max when given (pass 2^31 - 1 for a C int: the FFI
-- would truncate a fraction or wrap a large value silently).
function M.int(v, name, where, min, max)
  min = min or 0
  M.want_int(v, min, nil, "%s: %s = %s: must be an integer >= %d", where, name, tostring(v), min)
  if max and v > max then
    fail("%s: %s = %s: must be at most %d", where, name, tostring(v), max)
  end
  return v
end

-- An integer that C receives as an int32 (a fraction would be truncated silently by the FFI).
function M.c_int(v, name)
  return M.want_int(v, -2 ^ 31, 2 ^ 31 - 1, "%s = %s: must be an integer in [-2^31, 2^31)",
    name, tostring(v))
end

-- opts must be nil or a table whose keys are all in `allowed` (a set); returns opts or {}.
-- Messages: "<where>: opts must be a table, got <type>" and "<where>: option <k>: unknown
-- (<sorted names>)".
function M.opts(opts, allowed, where)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail("%s: opts must be a table, got %s", where, type(opts)) end
  for k in pairs(opts) do
    if not allowed[k] then
      fail("%s: option %s: unknown (%s)", where, tostring(k),
        table.concat(util.sorted_keys(allowed), ", "))
    end
  end
  return opts
end

return M
