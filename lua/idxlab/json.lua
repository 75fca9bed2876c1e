-- idxlab.json: a small JSON encoder with a chosen key order (results.jsonl rows, `idxlab
-- config`), and a strict decoder. Encoding rules: integers print as integers, other numbers
-- with %.17g (so they read back bit-exact), NaN and +-inf as null, strings escaped (UTF-8
-- passes through). A table whose keys are 1..n is an array (holes become null); an empty
-- table is an array unless made with json.object(). json.null stands for null in both ways.
-- Failures are idxlab errors (code "ARG"); decode's message names the line and byte.
local errors = require("idxlab.errors")
local fail = errors.fail

local M = {}

M.null = setmetatable({}, { __tostring = function() return "null" end })
local object_mt = { __json_object = true }
-- Marks a table to be encoded as an object even when empty.
function M.object(t) return setmetatable(t or {}, object_mt) end

local escapes = {
  ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
  ["\r"] = "\\r", ["\t"] = "\\t",
}
local function escape_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or ("\\u%04x"):format(c:byte())
  end) .. '"'
end

-- The one number rule of every file idxlab writes (JSON, and the CSV and plot data through
-- results): integers exact in a double as integers (-0 kept), everything else with 17
-- significant digits so the value reads back bit-exact; NaN and infinities have no JSON
-- form and become null.
local function number_text(v)
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then
    if v == 0 and 1 / v < 0 then return "-0" end
    return ("%d"):format(v)
  end
  return ("%.17g"):format(v)
end
M.number_text = number_text

-- Array length when every key is a positive integer (holes allowed), else nil.
local function array_length(t)
  local n, count = 0, 0
  for k in pairs(t) do
    if type(k) ~= "number" or k < 1 or k ~= math.floor(k) then return nil end
    if k > n then n = k end
    count = count + 1
  end
  -- Very sparse integer keys are an object with numeric keys, not an array of nulls.
  if n > 2 * count + 8 then return nil end
  return n
end

local encode_value

local function encode_table(t, order, out, seen)
  if seen[t] then fail("json.encode: a table contains itself") end
  seen[t] = true
  local mt = getmetatable(t)
  local n = (mt ~= object_mt) and array_length(t) or nil
  if n then
    out[#out + 1] = "["
    for i = 1, n do
      if i > 1 then out[#out + 1] = "," end
      encode_value(t[i], order, out, seen)
    end
    out[#out + 1] = "]"
  else
    local keys, done = {}, {}
    for _, k in ipairs(order or {}) do
      if t[k] ~= nil and not done[k] then keys[#keys + 1] = k; done[k] = true end
    end
    local rest = {}
    for k in pairs(t) do
      if not done[k] then
        if type(k) ~= "string" and type(k) ~= "number" then
          fail("json.encode: a key of type %s cannot be a JSON key", type(k))
        end
        rest[#rest + 1] = k
      end
    end
    table.sort(rest, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(rest) do keys[#keys + 1] = k end
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      out[#out + 1] = escape_string(tostring(k))
      out[#out + 1] = ":"
      encode_value(t[k], order, out, seen)
    end
    out[#out + 1] = "}"
  end
  seen[t] = nil
end

encode_value = function(v, order, out, seen)
  local tv = type(v)
  if v == nil or v == M.null then
    out[#out + 1] = "null"
  elseif tv == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif tv == "number" then
    out[#out + 1] = number_text(v)
  elseif tv == "string" then
    out[#out + 1] = escape_string(v)
  elseif tv == "table" then
    encode_table(v, order, out, seen)
  elseif tv == "cdata" then
    local n = tonumber(v)
    if n == nil then fail("json.encode: a cdata value that is not a number") end
    out[#out + 1] = number_text(n)
  else
    fail("json.encode: cannot encode a %s", tv)
  end
end

-- encode(value, order) -> text on one line. order: a list of keys that come first, in that
-- order, in every object (the other keys follow, sorted).
function M.encode(value, order)
  local out = {}
  encode_value(value, order, out, {})
  return table.concat(out)
end

-- ------------------------------------------------------------------ decoder

local function decode_error(s, i, what)
  local line = 1
  for _ in s:sub(1, i - 1):gmatch("\n") do line = line + 1 end
  fail("json: %s at line %d (byte %d)", what, line, i)
end

local function skip(s, i)
  return s:find("[^ \t\r\n]", i) or #s + 1
end

local function utf8_char(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40,
      0x80 + cp % 0x40)
  end
  return string.char(0xF0 + math.floor(cp / 0x40000), 0x80 + math.floor(cp / 0x1000) % 0x40,
    0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local simple = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n",
  r = "\r", t = "\t" }

local function decode_string(s, i)
  -- s:sub(i, i) == '"'
  local parts, j = {}, i + 1
  while true do
    local a = s:find('["\\%c]', j)
    if not a then decode_error(s, i, "unterminated string") end
    parts[#parts + 1] = s:sub(j, a - 1)
    local c = s:sub(a, a)
    if c == '"' then return table.concat(parts), a + 1 end
    if c ~= "\\" then decode_error(s, a, "control character in a string") end
    local e = s:sub(a + 1, a + 1)
    if simple[e] then
      parts[#parts + 1] = simple[e]
      j = a + 2
    elseif e == "u" then
      local hex = s:match("^%x%x%x%x", a + 2)
      if not hex then decode_error(s, a, "bad \\u escape") end
      local cp = tonumber(hex, 16)
      j = a + 6
      if cp >= 0xD800 and cp <= 0xDBFF then
        local lo = s:match("^\\u(%x%x%x%x)", j)
        local lov = lo and tonumber(lo, 16)
        if not lov or lov < 0xDC00 or lov > 0xDFFF then decode_error(s, a, "unpaired surrogate") end
        cp = 0x10000 + (cp - 0xD800) * 0x400 + (lov - 0xDC00)
        j = j + 6
      elseif cp >= 0xDC00 and cp <= 0xDFFF then
        decode_error(s, a, "unpaired surrogate")
      end
      parts[#parts + 1] = utf8_char(cp)
    else
      decode_error(s, a, "bad escape")
    end
  end
end

local decode_value

local function decode_array(s, i)
  local out, n = {}, 0
  i = skip(s, i + 1)
  if s:sub(i, i) == "]" then return out, i + 1 end
  while true do
    local v
    v, i = decode_value(s, i)
    n = n + 1
    out[n] = v
    i = skip(s, i)
    local c = s:sub(i, i)
    if c == "]" then return out, i + 1 end
    if c ~= "," then decode_error(s, i, "expected , or ] in an array") end
    i = skip(s, i + 1)
  end
end

local function decode_object(s, i)
  local out = M.object({})
  i = skip(s, i + 1)
  if s:sub(i, i) == "}" then return out, i + 1 end
  while true do
    if s:sub(i, i) ~= '"' then decode_error(s, i, "expected a string key") end
    local k
    k, i = decode_string(s, i)
    i = skip(s, i)
    if s:sub(i, i) ~= ":" then decode_error(s, i, "expected :") end
    local v
    v, i = decode_value(s, skip(s, i + 1))
    out[k] = v
    i = skip(s, i)
    local c = s:sub(i, i)
    if c == "}" then return out, i + 1 end
    if c ~= "," then decode_error(s, i, "expected , or } in an object") end
    i = skip(s, i + 1)
  end
end

decode_value = function(s, i)
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == "{" then return decode_object(s, i) end
  if c == "[" then return decode_array(s, i) end
  if c == '"' then return decode_string(s, i) end
  if s:sub(i, i + 3) == "true" then return true, i + 4 end
  if s:sub(i, i + 4) == "false" then return false, i + 5 end
  if s:sub(i, i + 3) == "null" then return M.null, i + 4 end
  local num = s:match("^-?%d+%.?%d*[eE]?[+-]?%d*", i)
  if num and num ~= "" then
    local v = tonumber(num)
    if v == nil or num:match("^-?0%d") then
      decode_error(s, i, "bad number")
    end
    return v, i + #num
  end
  decode_error(s, i, c == "" and "unexpected end of text" or ("unexpected '%s'"):format(c))
end

-- decode(text) -> value. null decodes to json.null; objects carry json.object's metatable,
-- so they re-encode as objects even when empty.
function M.decode(s)
  if type(s) ~= "string" then fail("json.decode expects a string") end
  local v, i = decode_value(s, 1)
  i = skip(s, i)
  if i <= #s then
    decode_error(s, i, "trailing text")
  end
  return v
end

-- The public boundary: encode and decode (null and object are plain values and a marker).
return errors.wrap(M, { "object", "number_text" })
