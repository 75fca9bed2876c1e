-- `idxlab diff A.safetensors B.safetensors`: compares two replay outputs (CPU against GPU,
-- before a change against after it) tensor by tensor. For each tensor: the elements that
-- differ (+0 and -0 equal, NaN equal to NaN, SPEC 8), for float tensors the -inf mask
-- mismatches and SPEC 3's diff measure 1 - 2*sum(xy) / sum(x^2 + y^2) over the entries finite
-- in both. Tensors in only one file, or with another dtype or shape, are listed. Exit status
-- 0 when everything is equal, 1 otherwise.
-- The module is callable (the command) and exposes compare(a_path, b_path) for tests and the
-- REPL: require("idxlab.cmd.diff").compare("a.safetensors", "b.safetensors").
local ffi = require("ffi")
local bit = require("bit")
local args = require("idxlab.cmd.args")
local errors = require("idxlab.errors")
local safetensors = require("idxlab.safetensors")

local USAGE = "usage: idxlab diff A.safetensors B.safetensors"

local M = {}

-- bf16 -> its value, from the bits alone (no float read through an integer buffer: LuaJIT's
-- JIT may reorder such type-punned loads and stores, which returned stale values here).
-- Exact: every bf16 value is a double.
local function bf16_value(h)
  local sign = bit.band(h, 0x8000) ~= 0 and -1 or 1
  local e = bit.band(bit.rshift(h, 7), 0xff)
  local m = bit.band(h, 0x7f)
  if e == 0 then return sign * math.ldexp(m, -133) end
  if e == 255 then return m == 0 and sign * math.huge or 0 / 0 end
  return sign * math.ldexp(128 + m, e - 134)
end

-- SPEC 8's equality of two bf16 bit patterns: the same bits, or both zeros (+0 = -0), or both
-- NaN (any payload).
local function bf16_same(a, b)
  if a == b then return true end
  local ma, mb = bit.band(a, 0x7fff), bit.band(b, 0x7fff)
  if ma == 0 and mb == 0 then return true end
  return ma > 0x7f80 and mb > 0x7f80
end

local function f16_value(h)
  local sign = bit.band(h, 0x8000) ~= 0 and -1 or 1
  local e = bit.band(bit.rshift(h, 10), 0x1f)
  local m = bit.band(h, 0x3ff)
  if e == 0 then return sign * m * 2 ^ -24 end
  if e == 31 then return m == 0 and sign * math.huge or 0 / 0 end
  return sign * (1 + m / 1024) * 2 ^ (e - 15)
end

-- OCP e4m3 (fn): bias 7, no infinities, S.1111.111 is NaN.
local function e4m3_value(b)
  local sign = bit.band(b, 0x80) ~= 0 and -1 or 1
  local e = bit.band(bit.rshift(b, 3), 0xf)
  local m = bit.band(b, 0x7)
  if e == 15 and m == 7 then return 0 / 0 end
  if e == 0 then return sign * m * 2 ^ -9 end
  return sign * (1 + m / 8) * 2 ^ (e - 7)
end

-- dtype -> { pointer type, (typed pointer, index) -> value, is a float format, equality of
-- two raw elements (nil: compare the values) }.
local readers = {
  F32 = { "const float *", function(p, i) return p[i] end, true },
  BF16 = { "const uint16_t *", function(p, i) return bf16_value(p[i]) end, true,
    function(p, q, i) return bf16_same(p[i], q[i]) end },
  F16 = { "const uint16_t *", function(p, i) return f16_value(p[i]) end, true },
  F8_E4M3 = { "const uint8_t *", function(p, i) return e4m3_value(p[i]) end, true },
  I32 = { "const int32_t *", function(p, i) return p[i] end, false },
  U8 = { "const uint8_t *", function(p, i) return p[i] end, false },
}
M.bf16_value, M.bf16_same, M.f16_value, M.e4m3_value = bf16_value, bf16_same, f16_value, e4m3_value

local function shape_str(s) return "[" .. table.concat(s, ", ") .. "]" end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function elements(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- compare_entries(ea, eb) -> { mismatches, mask_mismatches, diff, elements, first }.
function M.compare_entries(ea, eb)
  local rd = readers[ea.dtype]
  if not rd then
    errors.fail("diff: tensor %s: dtype %s cannot be compared", ea.name, tostring(ea.dtype))
  end
  local read, is_float, same = rd[2], rd[3], rd[4]
  local n = elements(ea.shape)
  local pa, pb = ffi.cast(rd[1], ea.data), ffi.cast(rd[1], eb.data)
  local mism, mask, sdd, sq = 0, 0, 0, 0
  local first
  local ninf = -math.huge
  for i = 0, n - 1 do
    local x, y = read(pa, i), read(pb, i)
    local equal
    if same then equal = same(pa, pb, i) else equal = (x == y) or (x ~= x and y ~= y) end
    if not equal then
      mism = mism + 1
      first = first or i
    end
    if is_float then
      if (x == ninf) ~= (y == ninf) then mask = mask + 1 end
      if x == x and y == y and x ~= math.huge and x ~= ninf and y ~= math.huge and y ~= ninf then
        -- 1 - 2xy/(x^2+y^2) = (x-y)^2/(x^2+y^2): exactly 0 when equal
        sdd = sdd + (x - y) * (x - y)
        sq = sq + x * x + y * y
      end
    end
  end
  local diff
  if is_float then diff = sq > 0 and sdd / sq or 0 end
  return { mismatches = mism, mask_mismatches = is_float and mask or nil, diff = diff,
    elements = n, first = first }
end

-- compare(a_path, b_path) -> { entries = { {name, status, dtype, shape, ...} }, differ = n,
-- only_a = {...}, only_b = {...}, metadata_differs = {...} }.
function M.compare(a_path, b_path)
  if type(a_path) ~= "string" or type(b_path) ~= "string" then
    errors.fail("diff: needs two file paths")
  end
  local ok, fa = pcall(safetensors.read, a_path)
  if not ok then errors.rethrow(fa) end
  local okb, fb = pcall(safetensors.read, b_path)
  if not okb then
    fa:close()
    errors.rethrow(fb)
  end
  local out = { entries = {}, differ = 0, only_a = {}, only_b = {}, metadata_differs = {} }
  local okc, err = pcall(function()
    for _, name in ipairs(fa.names) do
      local ea, eb = fa.tensors[name], fb.tensors[name]
      if not eb then
        out.only_a[#out.only_a + 1] = name
        out.differ = out.differ + 1
      elseif ea.dtype ~= eb.dtype then
        out.entries[#out.entries + 1] = { name = name,
          status = ("dtype %s vs %s"):format(ea.dtype, eb.dtype), dtype = ea.dtype,
          shape = ea.shape }
        out.differ = out.differ + 1
      elseif not same_shape(ea.shape, eb.shape) then
        out.entries[#out.entries + 1] = { name = name,
          status = ("shape %s vs %s"):format(shape_str(ea.shape), shape_str(eb.shape)),
          dtype = ea.dtype, shape = ea.shape }
        out.differ = out.differ + 1
      else
        local r = M.compare_entries(ea, eb)
        r.name, r.dtype, r.shape = name, ea.dtype, ea.shape
        r.status = (r.mismatches == 0) and "equal" or "differs"
        if r.mismatches > 0 then out.differ = out.differ + 1 end
        out.entries[#out.entries + 1] = r
      end
    end
    for _, name in ipairs(fb.names) do
      if not fa.tensors[name] then
        out.only_b[#out.only_b + 1] = name
        out.differ = out.differ + 1
      end
    end
    local keys = {}
    for k in pairs(fa.metadata) do keys[k] = true end
    for k in pairs(fb.metadata) do keys[k] = true end
    for k in pairs(keys) do
      if fa.metadata[k] ~= fb.metadata[k] then
        out.metadata_differs[#out.metadata_differs + 1] = k
      end
    end
    table.sort(out.metadata_differs)
  end)
  fa:close()
  fb:close()
  if not okc then errors.rethrow(err) end
  return out
end

local function fmt_diff(d)
  if d == nil then return "-" end
  if d == 0 then return "0" end
  return ("%.3e"):format(d)
end

function M.format(out, a_path, b_path)
  local lines = { ("A: %s\nB: %s"):format(a_path, b_path) }
  local header = { "tensor", "dtype", "shape", "elements", "mismatches", "-inf mask", "diff",
    "first at" }
  local rows = {}
  for _, e in ipairs(out.entries) do
    if e.status == "equal" or e.status == "differs" then
      rows[#rows + 1] = { e.name, e.dtype, shape_str(e.shape), tostring(e.elements),
        tostring(e.mismatches), e.mask_mismatches and tostring(e.mask_mismatches) or "-",
        fmt_diff(e.diff), e.first and tostring(e.first) or "-" }
    else
      rows[#rows + 1] = { e.name, e.dtype, shape_str(e.shape), "-", e.status, "-", "-", "-" }
    end
  end
  local w = {}
  for i, h in ipairs(header) do w[i] = #h end
  for _, r in ipairs(rows) do for i, c in ipairs(r) do w[i] = math.max(w[i], #c) end end
  local function line(cells)
    local p = {}
    for i, c in ipairs(cells) do
      local pad = (" "):rep(w[i] - #c)
      p[i] = i == 1 and (c .. pad) or (pad .. c) -- the name left-aligned, numbers right
    end
    return table.concat(p, "  ")
  end
  lines[#lines + 1] = line(header)
  for _, r in ipairs(rows) do lines[#lines + 1] = line(r) end
  if #out.only_a > 0 then
    lines[#lines + 1] = "only in A: " .. table.concat(out.only_a, ", ")
  end
  if #out.only_b > 0 then
    lines[#lines + 1] = "only in B: " .. table.concat(out.only_b, ", ")
  end
  if #out.metadata_differs > 0 then
    lines[#lines + 1] = "metadata differs: " .. table.concat(out.metadata_differs, ", ")
  end
  lines[#lines + 1] = out.differ == 0 and "identical: every tensor equal"
    or ("%d tensor(s) differ (mismatches count elements; diff = 1 - 2*sum(xy)/sum(x^2+y^2)"
      .. " over entries finite in both)"):format(out.differ)
  return table.concat(lines, "\n") .. "\n"
end

local function command(argv)
  local o, files = args.parse(argv, {}, USAGE, "diff")
  if o.help then print(USAGE) return 0 end
  if #files ~= 2 then errors.fail("diff needs two files\n" .. USAGE) end
  local ok, out = pcall(M.compare, files[1], files[2])
  if not ok then
    -- an idxlab error without its where: a file:line means nothing on the shell
    io.stderr:write(errors.is(out) and ("idxlab: " .. errors.message(out)) or tostring(out),
      "\n")
    return 2
  end
  io.stdout:write(M.format(out, files[1], files[2]))
  return out.differ == 0 and 0 or 1
end

-- The public boundary; the element readers stay unwrapped (hot loops call them).
errors.wrap(M, { "bf16_value", "bf16_same", "f16_value", "e4m3_value" })

return setmetatable(M, { __call = function(_, argv) return command(argv) end })
