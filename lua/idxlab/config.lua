-- idxlab.config: the one table of builder config fields (SPEC 4) -- name, type, default,
-- allowed values and a one-line doc -- used by the builder, the chunker, experiments, replay
-- and the command line. Also the --set grammar of SPEC 8 (integers, decimals, true/false,
-- strings, byte sizes with KiB/MiB/GiB, lists a,b,c, sparse_block_kv=all/auto).
--
-- Types: "int" (an integer), "int|auto" (an integer or "auto": the production rule), "bytes"
-- (an integer byte count; strings such as "512MiB" are accepted), "enum" (one of `values`).
local core = require("idxlab.ffi")
local ffi, C = core.ffi, core.C

local M = {}

local fields = {
  { name = "heads", type = "int", default = 32,
    doc = "indexer heads H: a multiple of 4 in [4, 128] (V4.1-Flash 32, V3.2 64)" },
  { name = "head_dim", type = "int", default = 128,
    doc = "indexer head dim D: 128" },
  { name = "index_topk", type = "int", default = 512,
    doc = "positions each row selects (k): a multiple of 8 in [8, 4096]" },
  { name = "candidate_block_size", type = "int", default = 8,
    doc = "positions per candidate block (cbs) the source layer scores" },
  { name = "candidate_topk_blocks", type = "int", default = 2048,
    doc = "candidate blocks the source layer publishes per row (T); T * cbs must be a multiple of 512" },
  { name = "sparse_block_kv", type = "int|auto", default = "auto",
    doc = "positions per sparse block the sparse kernel reads (sbk); auto = pick_sparse_block_kv(cbs): 16 or 8" },
  { name = "kv_format", type = "enum", default = "mxfp4", values = { "mxfp4", "mxfp8", "fp8" },
    doc = "number format of the indexer K cache and Q" },
  { name = "quantizer", type = "enum", default = "rne", values = { "rne", "ties_down" },
    doc = "rounding of the quantizer: production rne, or DeepGEMM's test quantizer ties_down" },
  { name = "page_size", type = "int", default = 128,
    doc = "positions per page of the paged K cache (decode); a multiple of sparse_block_kv" },
  { name = "max_rows", type = "int", default = 8192,
    doc = "most rows (query tokens) in one step; sizes the builder's per-row scratch" },
  { name = "max_model_len", type = "int", default = 1048576,
    doc = "longest request, in tokens" },
  { name = "compress_ratio", type = "int", default = 1,
    doc = "tokens per indexer key (r): a row at token pos sees (pos + 1) / r positions" },
  { name = "workspace_tokens", type = "int|auto", default = "auto",
    doc = "positions of one prefill chunk's gathered K workspace; auto = 40 * max_model_len / compress_ratio" },
  { name = "max_logits_bytes", type = "bytes", default = 512 * 1024 * 1024,
    doc = "budget of one prefill chunk's fp32 [rows, seq_len] dense logits" },
  { name = "split_width", type = "enum", default = "bf16", values = { "bf16", "bf16+fp32" },
    doc = "sparse rows budget as num_sparse_cols * B / 4 positions: B = 2 (bf16) or 6 (bf16+fp32)" },
  { name = "ks_mode", type = "enum", default = "unaligned", values = { "unaligned", "aligned" },
    doc = "how sparse block ids map to K rows when a row's ks is not a multiple of sbk" },
  { name = "block_score", type = "enum", default = "max", values = { "max", "mean", "sum", "logsumexp" },
    doc = "score of a candidate block: production max, or the ablations mean, sum, logsumexp" },
  { name = "context_parallel", type = "int", default = 1,
    doc = "context-parallel world size: must be 1 (refused, as in production)" },
}
M.fields = fields

local by_name = {}
for _, f in ipairs(fields) do by_name[f.name] = f end
M.by_name = by_name

function M.is_field(name) return by_name[name] ~= nil end

function M.defaults()
  local t = {}
  for _, f in ipairs(fields) do t[f.name] = f.default end
  return t
end

-- Edit distance, for "did you mean" on unknown names.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

-- The name of `known` closest to `name` (case ignored) when it is close enough to be what was
-- meant, else nil. Names longer than 64 characters get no suggestion (bounded work).
function M.closest(name, known)
  if type(name) ~= "string" or #name > 64 or type(known) ~= "table" then return nil end
  local best, bestd = nil, math.huge
  for _, k in ipairs(known) do
    if type(k) == "string" and #k <= 64 then
      local d = distance(name:lower(), k:lower())
      if d < bestd then best, bestd = k, d end
    end
  end
  if best and bestd <= math.max(2, math.floor(#name / 3)) then return best end
  return nil
end

local function suggest(name)
  local names = {}
  for _, f in ipairs(fields) do names[#names + 1] = f.name end
  return M.closest(name, names)
end

function M.unknown_field_message(name)
  local s = suggest(tostring(name))
  if s then
    return ("idxlab: unknown config field '%s' (did you mean %s?)"):format(tostring(name), s)
  end
  local names = {}
  for _, f in ipairs(fields) do names[#names + 1] = f.name end
  return ("idxlab: unknown config field '%s' (the fields: %s)"):format(tostring(name), table.concat(names, ", "))
end

-- ------------------------------------------------------------------ value grammar (SPEC 8)

local units = { KiB = 1024, MiB = 1024 ^ 2, GiB = 1024 ^ 3 }
-- Integers up to 2^53 in magnitude: beyond it a double no longer holds every integer, so a
-- value given as text (9007199254740993) would silently become a neighbour.
local LIMIT = 2 ^ 53

local function is_integer(v)
  return type(v) == "number" and v == math.floor(v) and v >= -LIMIT and v <= LIMIT
end

-- The exact decimal value of number text ("12", "-1.5e3", ".5") as an integer part and a
-- fraction part (digits, no leading / trailing zeros), or nil when its exponent is too large
-- to expand (such text is never an exact integer within LIMIT anyway).
local function exact_decimal(s)
  local int, frac, exp = s:match("^[+-]?(%d*)%.?(%d*)[eE]?([+-]?%d*)$")
  if not int then return nil end
  local e = tonumber(exp ~= "" and exp or "0")
  if not e or math.abs(e) > 400 then return nil end
  local digits = int .. frac
  local point = #int + e -- the decimal point's place after this many digits
  if point < 0 then digits = ("0"):rep(-point) .. digits; point = 0 end
  if point > #digits then digits = digits .. ("0"):rep(point - #digits) end
  local ip, fp = digits:sub(1, point):gsub("^0+", ""), digits:sub(point + 1):gsub("0+$", "")
  return ip, fp
end

-- True when the double v is exactly the number the text s writes (s: a decimal without
-- unit; v: tonumber(s), an integer within LIMIT times a power of two at most 2^30).
local function is_exact(s, v)
  local ip, fp = exact_decimal(s)
  if not ip then return false end
  local vi, vf = ("%.40f"):format(math.abs(v)):match("^(%d*)%.?(%d*)$")
  return ip == vi:gsub("^0+", "") and fp == vf:gsub("0+$", "")
end

-- Decimal numbers only: no hex, inf or nan, which tonumber would also take.
local function parse_number(s)
  if s:match("^[+-]?%d*%.?%d*[eE]?[+-]?%d*$") and s:match("^[+-]?%.?%d") then return tonumber(s) end
  return nil
end

-- "512MiB", "1.5 GiB", "4096" -> bytes (nil when not a byte size), and the number's text.
local function parse_bytes(s)
  local num, unit = s:match("^(%S-)%s*([KMG]iB)$")
  if num then
    local v = parse_number(num)
    if v then return v * units[unit], num end
    return nil
  end
  return parse_number(s), s
end

-- A value given as text must be the number it reads as: an integer within 2^53 that the
-- double holds exactly (the unit multiplies by a power of two, which is exact).
local function exact_message(key, s, v, text)
  if math.abs(v) > LIMIT then
    return ("idxlab: %s = %s: must be an integer of magnitude at most 2^53 (9007199254740992): larger ones are not exact in a double")
      :format(key, s)
  end
  local unit = units[s:match("([KMG]iB)$") or ""] or 1
  if not is_exact(text, v / unit) then
    return ("idxlab: %s = %s: not exactly representable (it would read as %s): integers must be at most 2^53 (9007199254740992) in magnitude and written exactly")
      :format(key, s, ("%.0f"):format(v))
  end
  return nil
end

local function one_value(f, s, key)
  if s == "" then
    error(("idxlab: %s = '': empty value"):format(key), 0)
  end
  if not f then
    if s == "true" then return true end
    if s == "false" then return false end
    local n = parse_number(s)
    -- an integer written out must be that integer (decimals such as 0.1 round as usual)
    if n and s:match("^[+-]?%d+$") then
      local msg = exact_message(key, s, n, s)
      if msg then error(msg, 0) end
    end
    if n then return n end
    local b = s:match("[KMG]iB$") and parse_bytes(s)
    if b then return b end
    return s
  end
  local t = f.type
  if t == "enum" then
    for _, v in ipairs(f.values) do
      if v == s then return s end
    end
    error(("idxlab: %s = %s: must be one of %s"):format(key, s, table.concat(f.values, ", ")), 0)
  end
  if t == "int|auto" and s == "auto" then return "auto" end
  if f.name == "sparse_block_kv" and s == "all" then return "all" end
  local v, text
  if t == "bytes" then v, text = parse_bytes(s) else v, text = parse_number(s), s end
  if v == nil then
    local what = t == "bytes" and "a byte count (a number, or with KiB, MiB or GiB)"
      or t == "int|auto" and "an integer or auto" or "an integer"
    if f.name == "sparse_block_kv" then what = "an integer, auto or all" end
    error(("idxlab: %s = %s: must be %s"):format(key, s, what), 0)
  end
  if v == math.floor(v) and v == v and math.abs(v) ~= math.huge then
    local msg = exact_message(key, s, v, text)
    if msg then error(msg, 0) end
  end
  if not is_integer(v) then
    error(("idxlab: %s = %s: must be an integer%s"):format(key, s, t == "bytes" and " number of bytes" or ""), 0)
  end
  return v
end

-- parse_value(field_name_or_nil, "text") -> value, or a list of values for "a,b,c".
-- With a config field the text must fit the field's type; without one, true/false become
-- booleans, numbers (and byte sizes) numbers, anything else a string.
function M.parse_value(field, str, level)
  level = type(level) == "number" and level or 1
  if type(str) ~= "string" then
    error(("idxlab: parse_value: expected a string, got %s"):format(type(str)), level + 1)
  end
  local f = nil
  if field ~= nil then
    f = by_name[field]
    if not f then error(M.unknown_field_message(field), level + 1) end
  end
  local key = field or "value"
  local ok, res = pcall(function()
    if str:find(",", 1, true) then
      local list = {}
      for item in (str .. ","):gmatch("([^,]*),") do
        item = item:match("^%s*(.-)%s*$")
        if item == "" then error(("idxlab: %s = %s: empty item in a list"):format(key, str), 0) end
        list[#list + 1] = one_value(f, item, key)
      end
      return list
    end
    return one_value(f, str:match("^%s*(.-)%s*$"), key)
  end)
  if not ok then error(res, level + 1) end
  return res
end

-- parse_sets{"key=value", ...} -> map key -> value (lists for a,b,c), and the keys in order.
-- Keys are not restricted to config fields (the caller decides which it accepts); config
-- fields' values are parsed by the field's type.
function M.parse_sets(list, level)
  level = type(level) == "number" and level or 1
  if type(list) ~= "table" then
    error("idxlab: parse_sets expects a list of \"key=value\" strings", level + 1)
  end
  local map, order = {}, {}
  for _, item in ipairs(list) do
    if type(item) ~= "string" then
      error(("idxlab: --set %s: expected key=value"):format(tostring(item)), level + 1)
    end
    local k, v = item:match("^%s*([^=]-)%s*=(.*)$")
    if not k then
      error(("idxlab: --set %s: expected key=value"):format(item), level + 1)
    end
    if not k:match("^[%a_][%w_%.]*$") then
      error(("idxlab: --set %s: '%s' is not a key name"):format(item, k), level + 1)
    end
    if map[k] ~= nil then
      error(("idxlab: --set %s: %s is set twice (one --set per field; a,b,c for a list)"):format(item, k), level + 1)
    end
    local f = by_name[k] and k or nil
    local ok, val = pcall(M.parse_value, f, v)
    if not ok then error(val, level + 1) end
    map[k] = val
    order[#order + 1] = k
  end
  return map, order
end

-- ------------------------------------------------------------------ resolve / to_c

local function check_value(f, v, level)
  local t = f.type
  if t == "enum" then
    if type(v) == "string" then
      for _, x in ipairs(f.values) do
        if x == v then return v end
      end
    end
    error(("idxlab: %s = %s: must be one of %s"):format(f.name, tostring(v), table.concat(f.values, ", ")), level + 1)
  end
  if t == "int|auto" and v == "auto" then return v end
  if t == "bytes" and type(v) == "string" then
    local b, text = parse_bytes(v)
    if b and b == math.floor(b) and math.abs(b) ~= math.huge then
      local msg = exact_message(f.name, v, b, text)
      if msg then error(msg, level + 1) end
    end
    if b and is_integer(b) then return b end
    error(("idxlab: %s = %s: must be a byte count (a number, or with KiB, MiB or GiB)"):format(f.name, v), level + 1)
  end
  if not is_integer(v) then
    local what = t == "int|auto" and "an integer or \"auto\"" or "an integer"
    local shown = tostring(v)
    if type(v) == "number" and v == math.floor(v) and math.abs(v) ~= math.huge then
      -- an integer past 2^53: shown in full (tostring would round it to 14 digits)
      shown = ("%.0f"):format(v)
      what = (t == "int|auto" and "an integer of magnitude at most 2^53 (9007199254740992) or \"auto\""
        or "an integer of magnitude at most 2^53 (9007199254740992)") .. ": larger ones are not exact in a double"
    end
    error(("idxlab: %s = %s: must be %s"):format(f.name, shown, what), level + 1)
  end
  if t == "int|auto" and v <= 0 then -- 0 is the C API's "auto": an explicit number must mean itself
    error(("idxlab: %s = %s: must be a positive integer or \"auto\""):format(f.name, tostring(v)), level + 1)
  end
  return v
end

-- resolve(tbl) -> a new table with every field: the given values (type-checked) and the
-- defaults for the rest. Unknown fields are errors. The SPEC 4 rules run in C (describe).
function M.resolve(tbl, level)
  level = type(level) == "number" and level or 1
  if tbl == nil then return M.defaults() end
  if type(tbl) ~= "table" then
    error(("idxlab: config must be a table of fields, got %s"):format(type(tbl)), level + 1)
  end
  for k in pairs(tbl) do
    if type(k) ~= "string" or not by_name[k] then error(M.unknown_field_message(k), level + 1) end
  end
  local out = {}
  for _, f in ipairs(fields) do
    local v = tbl[f.name]
    if v == nil then out[f.name] = f.default else out[f.name] = check_value(f, v, level + 1) end
  end
  return out
end

-- to_c(tbl) -> ixl_config cdata ("auto" becomes 0, enums their C values).
function M.to_c(tbl, level)
  level = type(level) == "number" and level or 1
  local r = M.resolve(tbl, level + 1)
  local c = ffi.new("ixl_config")
  for _, f in ipairs(fields) do
    local v = r[f.name]
    if f.type == "enum" then
      c[f.name] = core.enums[f.name][v]
    elseif v == "auto" then
      c[f.name] = 0
    else
      c[f.name] = v
    end
  end
  return c, r
end

-- A private CPU context that carries the messages of config checks.
local function msg_ctx()
  local st = core.once.config_ctx
  if not st then
    local out = ffi.new("ixl_ctx *[1]")
    local rc = C.ixl_ctx_new(1, 0, 0, out)
    if rc ~= 0 then error("idxlab: cannot make a CPU context for config checks", 3) end
    st = out[0] -- lives as long as the process
    core.once.config_ctx = st
  end
  return st
end
M.msg_ctx = msg_ctx

local function sbk_list(c)
  local buf = ffi.new("int32_t[8]")
  local n = ffi.new("int32_t[1]")
  local ctx = msg_ctx()
  core.check(ctx, C.ixl_valid_sparse_block_kv(ctx, c, buf, 8, n), 3)
  local out = {}
  for i = 0, math.min(n[0], 8) - 1 do out[#out + 1] = buf[i] end
  return out
end

-- Every valid sparse_block_kv for this config (ascending): what sparse_block_kv=all means.
function M.valid_sparse_block_kv(tbl)
  local c = M.to_c(tbl, 2)
  return sbk_list(c)
end

-- The builder_info cdata -> plain tables: the resolved config (sparse_block_kv and
-- workspace_tokens as the numbers chosen) and the derived values.
function M.from_info(info)
  if type(info) ~= "cdata" or not ffi.istype("ixl_builder_info", info) then
    error("idxlab: config.from_info: info must be an ixl_builder_info (from config.describe)", 2)
  end
  local cfg = {}
  for _, f in ipairs(fields) do
    local v = info.config[f.name]
    if f.type == "enum" then cfg[f.name] = core.enum_name(f.name, tonumber(v)) else cfg[f.name] = tonumber(v) end
  end
  local max_rows = cfg.max_rows
  local derived = {
    num_sparse_blocks = tonumber(info.num_sparse_blocks),
    num_sparse_cols = tonumber(info.num_sparse_cols),
    min_split_seq_len = tonumber(info.min_split_seq_len),
    sparse_ids_bytes = tonumber(info.sparse_ids_bytes),
    end_bytes = tonumber(info.end_bytes),
    col_indices_bytes = tonumber(info.col_indices_bytes),
    zero_row_starts_bytes = tonumber(info.zero_row_starts_bytes),
    row_ks_bytes = tonumber(info.row_ks_bytes),
    row_ke_bytes = tonumber(info.row_ke_bytes),
    row_indices_bytes = max_rows * 4,
    scratch_bytes = tonumber(info.scratch_bytes),
  }
  return cfg, derived
end

M.derived_order = {
  "num_sparse_blocks", "num_sparse_cols", "min_split_seq_len", "sparse_ids_bytes", "end_bytes",
  "col_indices_bytes", "zero_row_starts_bytes", "row_ks_bytes", "row_ke_bytes",
  "row_indices_bytes", "scratch_bytes",
}

-- describe(tbl) runs every SPEC 4 check (in C) without allocating any scratch and returns
-- { config = resolved values (sparse_block_kv, workspace_tokens as chosen), derived = {...},
--   valid_sparse_block_kv = {...} }, or raises the check's message at the caller's line.
function M.describe(tbl, level)
  level = type(level) == "number" and level or 1
  local c = M.to_c(tbl, level + 1)
  local ctx = msg_ctx()
  local info = ffi.new("ixl_builder_info")
  local st = C.ixl_config_validate(ctx, c, info)
  if st ~= 0 then error("idxlab: " .. ffi.string(C.ixl_last_error(ctx)), level + 1) end
  local cfg, derived = M.from_info(info)
  return { config = cfg, derived = derived, valid_sparse_block_kv = sbk_list(c) }, info
end

-- The ordered key list for JSON output of a described config.
function M.field_names()
  local names = {}
  for _, f in ipairs(fields) do names[#names + 1] = f.name end
  return names
end

return M
