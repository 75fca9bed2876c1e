-- idxlab.util: small pure helpers several modules share, each written once: the integer test
-- behind every "integer in range" check, sorted names, median and minimum. No FFI, no errors
-- raised here: callers decide what a failed test means.
local M = {}

-- True when v is a Lua number holding an integer in [lo, hi] (both optional; default: any
-- integer of magnitude below 2^53, where every integer is exact in a double). NaN and +-inf
-- fail (NaN ~= floor(NaN); inf is outside every finite bound).
function M.is_int(v, lo, hi)
  if type(v) ~= "number" or v ~= math.floor(v) then return false end
  lo = lo or -(2 ^ 53 - 1)
  hi = hi or 2 ^ 53 - 1
  return v >= lo and v <= hi
end

-- The keys of t as a sorted list (by `less`, default the natural order of the keys).
function M.sorted_keys(t, less)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out, less)
  return out
end

-- The median of a list of numbers (the mean of the two middle ones for an even count); the
-- list is not changed. nil for an empty list.
function M.median(xs)
  local s = {}
  for i, v in ipairs(xs) do s[i] = v end
  local n = #s
  if n == 0 then return nil end
  table.sort(s)
  return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end

-- The smallest number of a list (math.huge for an empty one).
function M.minimum(xs)
  local m = math.huge
  for _, x in ipairs(xs) do m = math.min(m, x) end
  return m
end

-- The views the step and the context-parallel simulation cut their [R, ...] and [L, R, ...]
-- inputs into (t:view, so nothing is copied, the view does not own its data, and an error is
-- t:view's):
-- rows_view(t, r0, n): rows r0 .. r0 + n - 1 of a [R, ...] tensor, as [n, ...];
-- layer_view(t, l): entry l of a [L, ...] tensor, as [...].
local function inner_elems(s)
  local inner = 1
  for d = 2, #s do inner = inner * s[d] end
  return inner
end

function M.rows_view(t, r0, n)
  local s = t:shape()
  local inner = inner_elems(s)
  s[1] = n
  return t:view(s, r0 * inner)
end

function M.layer_view(t, l)
  local s = t:shape()
  local shape = {}
  for d = 2, #s do shape[#shape + 1] = s[d] end
  return t:view(shape, l * inner_elems(s))
end

return M
