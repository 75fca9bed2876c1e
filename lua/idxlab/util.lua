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

return M
