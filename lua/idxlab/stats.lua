-- idxlab.stats: what the summary tables (idxlab.report) and the plots (idxlab.plot) share:
-- the statistics of a metric over repeats and the way a number is shown to a reader. Pure
-- functions; nothing here raises.
local M = {}

-- stats(values) -> { n, mean, sd, min, max } over the numbers of the list (nil and NaN are
-- skipped: a metric without active rows), or nil when there are none. sd is the sample
-- standard deviation, nil for a single value.
function M.stats(values)
  local n, s = 0, 0
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(values) do
    if type(v) == "number" and v == v then
      n = n + 1; s = s + v
      if v < lo then lo = v end
      if v > hi then hi = v end
    end
  end
  if n == 0 then return nil end
  local mean = s / n
  local ss = 0
  for _, v in ipairs(values) do
    if type(v) == "number" and v == v then ss = ss + (v - mean) ^ 2 end
  end
  return { n = n, mean = mean, sd = n > 1 and math.sqrt(ss / (n - 1)) or nil, min = lo, max = hi }
end

-- A number as tables show it: integers whole, others with 4 significant digits or 3 decimals.
function M.fmt_num(v)
  if v == nil then return "null" end
  if type(v) ~= "number" then return tostring(v) end
  if v ~= v then return "nan" end
  if v == math.floor(v) and math.abs(v) < 1e15 then return ("%d"):format(v) end
  local a = math.abs(v)
  if a >= 1000 then return ("%.1f"):format(v) end
  if a >= 1 then return ("%.3f"):format(v) end
  return ("%.4g"):format(v)
end
local fmt_num = M.fmt_num

local BYTE_UNITS = { { 2 ^ 30, "GiB" }, { 2 ^ 20, "MiB" }, { 2 ^ 10, "KiB" } }

-- Byte counts read better in KiB/MiB/GiB.
function M.fmt_bytes(v)
  if type(v) ~= "number" or v ~= v or math.abs(v) < 1024 then return fmt_num(v) end
  for _, u in ipairs(BYTE_UNITS) do
    if math.abs(v) >= u[1] then
      local x = v / u[1]
      if x == math.floor(x) then return ("%d %s"):format(x, u[2]) end
      return ("%.4g %s"):format(x, u[2])
    end
  end
  return fmt_num(v)
end

-- A field's value as shown: *bytes fields in byte units, the rest as fmt_num.
function M.fmt_field(name, v)
  if type(name) == "string" and name:match("bytes$") then return M.fmt_bytes(v) end
  return fmt_num(v)
end

return M
