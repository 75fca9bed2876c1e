-- idxlab.argcheck: the argument checks the public Lua functions share. Each is called
-- directly from a public function and raises at that function's caller (level 3 from here),
-- with a message that names the function, the argument, its value and the rule.
local Tensor = require("idxlab.tensor")

local M = {}

local function fail(msg) error("idxlab: " .. msg, 4) end

-- where: the public function's name, e.g. "formats.quantize".
function M.ctx(ctx, where)
  if not require("idxlab.context").is_context(ctx) then
    fail(("%s: ctx must be an idxlab context"):format(where))
  end
end

function M.tensor(t, name, where, optional)
  if t == nil and optional then return end
  if not Tensor.is_tensor(t) then
    fail(("%s: %s must be a Tensor, got %s"):format(where, name, type(t)))
  end
  local why = Tensor.dead_reason(t)
  if why then fail(("%s: %s: %s"):format(where, name, why)) end
end

-- An integer >= min (default 0), and <= max when given (pass 2^31 - 1 for a C int: the FFI
-- would truncate a fraction or wrap a large value silently).
function M.int(v, name, where, min, max)
  min = min or 0
  if type(v) ~= "number" or v ~= math.floor(v) or v < min or v >= 2 ^ 53 then
    fail(("%s: %s = %s: must be an integer >= %d"):format(where, name, tostring(v), min))
  end
  if max and v > max then
    fail(("%s: %s = %s: must be at most %d"):format(where, name, tostring(v), max))
  end
end

return M
