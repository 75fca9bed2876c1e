-- idxlab.config: the one table of builder config fields (SPEC 4) -- name, type, default,
-- allowed values and a one-line doc -- used by the builder, the chunker, experiments, replay
-- and the command line. Also the --set grammar of SPEC 8 (integers, decimals, true/false,
-- strings, byte sizes with KiB/MiB/GiB, lists a,b,c, sparse_block_kv=all/auto).
--
-- Types: "int" (an integer), "int|auto" (an integer or "auto": the production rule), "bytes"
-- (an integer byte count; strings such as "512MiB" are accepted), "enum" (one of `values`).
--
-- Names, C types, enum values and defaults come from the header: the cdef's struct
-- ixl_config, its enums (idxlab.ffi) and ixl_config_defaults. Kept here is only what the
-- header cannot say: the display order (CSV columns, `idxlab config`), a one-line doc per
-- field, and which int64 fields read 0 as "auto" or count bytes. A field the struct has and
-- this list lacks, or the reverse, stops the module from loading.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local util = require("idxlab.util")
local Context = require("idxlab.context")
local ffi, C = core.ffi, core.C
local fail = errors.fail

local M = {}

-- { name, doc } in display order.
local presentation = {
  { "heads", "indexer heads H: a multiple of 4 in [4, 128] (V4.1-Flash 32, V3.2 64)" },
  { "head_dim", "indexer head dim D: 128" },
  { "index_topk", "positions each row selects (k): a multiple of 8 in [8, 4096]" },
  { "candidate_block_size", "positions per candidate block (cbs) the source layer scores" },
  { "candidate_topk_blocks", "candidate blocks the source layer publishes per row (T); "
    .. "T * cbs must be a multiple of 512" },
  { "sparse_block_kv", "positions per sparse block the sparse kernel reads (sbk); "
    .. "auto = pick_sparse_block_kv(cbs): 16 or 8" },
  { "kv_format", "number format of the indexer K cache and Q" },
  { "quantizer", "rounding of the quantizer: production rne, or DeepGEMM's test quantizer "
    .. "ties_down" },
  { "page_size", "positions per page of the paged K cache (decode); a multiple of "
    .. "sparse_block_kv" },
  { "max_rows", "most rows (query tokens) in one step; sizes the builder's per-row scratch" },
  { "max_model_len", "longest request, in tokens" },
  { "compress_ratio", "tokens per indexer key (r): a row at token pos sees (pos + 1) / r "
    .. "positions" },
  { "workspace_tokens", "positions of one prefill chunk's gathered K workspace; auto = 40 * "
    .. "max_model_len / compress_ratio" },
  { "max_logits_bytes", "budget of one prefill chunk's fp32 [rows, seq_len] dense logits" },
  { "split_width", "sparse rows budget as num_sparse_cols * B / 4 positions: B = 2 (bf16) or "
    .. "6 (bf16+fp32)" },
  { "ks_mode", "how sparse block ids map to K rows when a row's ks is not a multiple of sbk" },
  { "block_score", "score of a candidate block: production max, or the ablations mean, sum, "
    .. "logsumexp" },
  { "context_parallel", "context-parallel world size: must be 1 (refused, as in production)" },
}
-- The int64 fields that are not plain integers: 0 means auto (C picks), or a byte count.
local INT_KIND = { sparse_block_kv = "int|auto", workspace_tokens = "int|auto",
  max_logits_bytes = "bytes" }

-- The field records { name, type, default, values (enums), doc } from the header.
local function build_fields()
  local cdefaults = ffi.new("ixl_config")
  C.ixl_config_defaults(cdefaults)
  local in_struct = {}
  for _, f in ipairs(core.struct_fields("ixl_config")) do in_struct[f.name] = f end
  local out = {}
  for _, p in ipairs(presentation) do
    local name = p[1]
    if not in_struct[name] then
      errors.raise("INTERNAL", "config field %s is not in struct ixl_config", name)
    end
    in_struct[name] = nil
    local v = tonumber(cdefaults[name])
    local f = { name = name, doc = p[2] }
    if core.enums[name] then
      f.type, f.values, f.default = "enum", core.enum_names(name), core.enum_name(name, v)
    else
      f.type = INT_KIND[name] or "int"
      f.default = (f.type == "int|auto" and v == 0) and "auto" or v
    end
    out[#out + 1] = f
  end
  local missing = next(in_struct)
  if missing then
    errors.raise("INTERNAL", "struct ixl_config field %s has no entry in idxlab.config",
      missing)
  end
  return out
end

local fields = build_fields()
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

-- The message for a name that is no config field (without "idxlab: ").
local function unknown_field(name)
  local s = suggest(tostring(name))
  if s then
    return ("unknown config field '%s' (did you mean %s?)"):format(tostring(name), s)
  end
  return ("unknown config field '%s' (the fields: %s)"):format(tostring(name),
    table.concat(M.field_names(), ", "))
end
M.unknown_field = unknown_field

-- ------------------------------------------------------------------ value grammar (SPEC 8)

local units = { KiB = 1024, MiB = 1024 ^ 2, GiB = 1024 ^ 3 }
-- Integers up to 2^53 in magnitude: beyond it a double no longer holds every integer, so a
-- value given as text (9007199254740993) would silently become a neighbour.
local LIMIT = 2 ^ 53

local function is_integer(v) return util.is_int(v, -LIMIT, LIMIT) end

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
  if s:match("^[+-]?%d*%.?%d*[eE]?[+-]?%d*$") and s:match("^[+-]?%.?%d") then
    return tonumber(s)
  end
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
-- double holds exactly (the unit multiplies by a power of two, which is exact). Raises
-- otherwise.
local function check_exact(key, s, v, text)
  if math.abs(v) > LIMIT then
    fail("%s = %s: must be an integer of magnitude at most 2^53 (9007199254740992): larger "
      .. "ones are not exact in a double", key, s)
  end
  local unit = units[s:match("([KMG]iB)$") or ""] or 1
  if not is_exact(text, v / unit) then
    fail("%s = %s: not exactly representable (it would read as %s): integers must be at most "
      .. "2^53 (9007199254740992) in magnitude and written exactly", key, s, ("%.0f"):format(v))
  end
end

local function one_value(f, s, key)
  if s == "" then fail("%s = '': empty value", key) end
  if not f then
    if s == "true" then return true end
    if s == "false" then return false end
    local n = parse_number(s)
    -- an integer written out must be that integer (decimals such as 0.1 round as usual)
    if n and s:match("^[+-]?%d+$") then check_exact(key, s, n, s) end
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
    fail("%s = %s: must be one of %s", key, s, table.concat(f.values, ", "))
  end
  if t == "int|auto" and s == "auto" then return "auto" end
  if f.name == "sparse_block_kv" and s == "all" then return "all" end
  local v, text
  if t == "bytes" then v, text = parse_bytes(s) else v, text = parse_number(s), s end
  if v == nil then
    local what = t == "bytes" and "a byte count (a number, or with KiB, MiB or GiB)"
      or t == "int|auto" and "an integer or auto" or "an integer"
    if f.name == "sparse_block_kv" then what = "an integer, auto or all" end
    fail("%s = %s: must be %s", key, s, what)
  end
  if v == math.floor(v) and v == v and math.abs(v) ~= math.huge then
    check_exact(key, s, v, text)
  end
  if not is_integer(v) then
    fail("%s = %s: must be an integer%s", key, s, t == "bytes" and " number of bytes" or "")
  end
  return v
end

-- parse_value(field_name_or_nil, "text") -> value, or a list of values for "a,b,c".
-- With a config field the text must fit the field's type; without one, true/false become
-- booleans, numbers (and byte sizes) numbers, anything else a string.
function M.parse_value(field, str)
  if type(str) ~= "string" then fail("parse_value: expected a string, got %s", type(str)) end
  local f = nil
  if field ~= nil then
    f = by_name[field]
    if not f then fail("%s", unknown_field(field)) end
  end
  local key = field or "value"
  if str:find(",", 1, true) then
    local list = {}
    for item in (str .. ","):gmatch("([^,]*),") do
      item = item:match("^%s*(.-)%s*$")
      if item == "" then fail("%s = %s: empty item in a list", key, str) end
      list[#list + 1] = one_value(f, item, key)
    end
    return list
  end
  return one_value(f, str:match("^%s*(.-)%s*$"), key)
end

-- parse_sets{"key=value", ...} -> map key -> value (lists for a,b,c), and the keys in order.
-- Keys are not restricted to config fields (the caller decides which it accepts); config
-- fields' values are parsed by the field's type.
function M.parse_sets(list)
  if type(list) ~= "table" then
    fail("parse_sets expects a list of \"key=value\" strings")
  end
  local map, order = {}, {}
  for _, item in ipairs(list) do
    if type(item) ~= "string" then fail("--set %s: expected key=value", tostring(item)) end
    local k, v = item:match("^%s*([^=]-)%s*=(.*)$")
    if not k then fail("--set %s: expected key=value", item) end
    if not k:match("^[%a_][%w_%.]*$") then fail("--set %s: '%s' is not a key name", item, k) end
    if map[k] ~= nil then
      fail("--set %s: %s is set twice (one --set per field; a,b,c for a list)", item, k)
    end
    local f = by_name[k] and k or nil
    local val = M.parse_value(f, v)
    map[k] = val
    order[#order + 1] = k
  end
  return map, order
end

-- ------------------------------------------------------------------ resolve / to_c

local function check_value(f, v)
  local t = f.type
  if t == "enum" then
    if type(v) == "string" then
      for _, x in ipairs(f.values) do
        if x == v then return v end
      end
    end
    fail("%s = %s: must be one of %s", f.name, tostring(v), table.concat(f.values, ", "))
  end
  if t == "int|auto" and v == "auto" then return v end
  if t == "bytes" and type(v) == "string" then
    local b, text = parse_bytes(v)
    if b and b == math.floor(b) and math.abs(b) ~= math.huge then
      check_exact(f.name, v, b, text)
    end
    if b and is_integer(b) then return b end
    fail("%s = %s: must be a byte count (a number, or with KiB, MiB or GiB)", f.name, v)
  end
  if not is_integer(v) then
    local what = t == "int|auto" and "an integer or \"auto\"" or "an integer"
    local shown = tostring(v)
    if type(v) == "number" and v == math.floor(v) and math.abs(v) ~= math.huge then
      -- an integer past 2^53: shown in full (tostring would round it to 14 digits)
      shown = ("%.0f"):format(v)
      what = (t == "int|auto"
        and "an integer of magnitude at most 2^53 (9007199254740992) or \"auto\""
        or "an integer of magnitude at most 2^53 (9007199254740992)")
        .. ": larger ones are not exact in a double"
    end
    fail("%s = %s: must be %s", f.name, shown, what)
  end
  -- 0 is the C API's "auto": an explicit number must mean itself
  if t == "int|auto" and v <= 0 then
    fail("%s = %s: must be a positive integer or \"auto\"", f.name, tostring(v))
  end
  return v
end

-- resolve(tbl) -> a new table with every field: the given values (type-checked) and the
-- defaults for the rest. Unknown fields are errors. The SPEC 4 rules run in C (describe).
function M.resolve(tbl)
  if tbl == nil then return M.defaults() end
  if type(tbl) ~= "table" then
    fail("config must be a table of fields, got %s", type(tbl))
  end
  for k in pairs(tbl) do
    if type(k) ~= "string" or not by_name[k] then fail("%s", unknown_field(k)) end
  end
  local out = {}
  for _, f in ipairs(fields) do
    local v = tbl[f.name]
    if v == nil then out[f.name] = f.default else out[f.name] = check_value(f, v) end
  end
  return out
end

-- to_c(tbl) -> ixl_config cdata ("auto" becomes 0, enums their C values).
function M.to_c(tbl)
  local r = M.resolve(tbl)
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

-- The ixl_ctx* that carries the messages of config checks: Context.default()'s.
local function msg_ctx() return Context.default().cd end
M.msg_ctx = msg_ctx

local function sbk_list(c)
  local buf = ffi.new("int32_t[8]")
  local n = ffi.new("int32_t[1]")
  local ctx = msg_ctx()
  core.check(ctx, C.ixl_valid_sparse_block_kv(ctx, c, buf, 8, n))
  local out = {}
  for i = 0, math.min(n[0], 8) - 1 do out[#out + 1] = buf[i] end
  return out
end

-- Every valid sparse_block_kv for this config (ascending): what sparse_block_kv=all means.
function M.valid_sparse_block_kv(tbl)
  return sbk_list(M.to_c(tbl))
end

-- The builder_info cdata -> plain tables: the resolved config (sparse_block_kv and
-- workspace_tokens as the numbers chosen) and the derived values.
function M.from_info(info)
  if type(info) ~= "cdata" or not ffi.istype("ixl_builder_info", info) then
    fail("config.from_info: info must be an ixl_builder_info (from config.describe)")
  end
  local cfg = {}
  for _, f in ipairs(fields) do
    local v = info.config[f.name]
    if f.type == "enum" then
      cfg[f.name] = core.enum_name(f.name, tonumber(v))
    else
      cfg[f.name] = tonumber(v)
    end
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
function M.describe(tbl)
  local c = M.to_c(tbl)
  local ctx = msg_ctx()
  local info = ffi.new("ixl_builder_info")
  core.check(ctx, C.ixl_config_validate(ctx, c, info))
  local cfg, derived = M.from_info(info)
  return { config = cfg, derived = derived, valid_sparse_block_kv = sbk_list(c) }, info
end

-- The ordered key list for JSON output of a described config.
function M.field_names()
  local names = {}
  for _, f in ipairs(fields) do names[#names + 1] = f.name end
  return names
end

-- The public boundary: everything above but the pure lookups (is_field, defaults, closest,
-- field_names, unknown_field), which raise nothing.
return errors.wrap(M, { "is_field", "defaults", "closest", "field_names", "unknown_field" })
