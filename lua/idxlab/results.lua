-- idxlab.results: the rows of an experiment's results files, and how they are written so that
-- they never read as complete when they are not.
--   results.jsonl  one JSON object per finished point, appended one whole line at a time and
--                  flushed, so a killed run loses at most the point in flight; a half-written
--                  last line is detected on reading and removed by repair (--resume).
--   results.csv    the same rows' scalars for spreadsheets, written whole (temp + rename).
-- Numbers are written with %.17g (integers as integers), so a double reads back bit-exact.
-- The file helpers are idxlab.fs's; the saved experiment.json is read by idxlab.report,
-- merging shards is idxlab.merge (both sit above this module).
local errors = require("idxlab.errors")
local fs = require("idxlab.fs")
local json = require("idxlab.json")
local util = require("idxlab.util")
local bit = require("bit")

local fail = errors.fail

local M = {}

M.SCHEMA = 1

---------------------------------------------------------------------------- values

-- Numbers in the CSV and the plot data: json.number_text, the one rule (bit-exact read-back,
-- NaN and infinities as null).
local encode_number = json.number_text

-- An integer exact in a double (|v| < 2^53).
local function is_int(v) return util.is_int(v) end

-- A list: keys 1..n and nothing else (JSON null items count as holes, so not a list).
local function is_list(t)
  if type(t) ~= "table" then return false end
  local n, count = #t, 0
  for k in pairs(t) do
    if not is_int(k) or k < 1 or k > n then return false end
    count = count + 1
  end
  return count == n
end
M.is_int, M.is_list = is_int, is_list

---------------------------------------------------------------------------- JSON

-- encode(value, order) -> JSON text on one line; order lists keys written first in every
-- object (idxlab.json; the rest follow sorted).
function M.encode(v, order)
  if order ~= nil and type(order) ~= "table" then
    fail("results.encode: order must be a list of keys")
  end
  return json.encode(v, order)
end

-- Canonical text (every key sorted): equal tables give equal text, for hashing.
function M.canonical(v) return json.encode(v) end

-- results.describe_params(params, order) -> "k=v k=v ...": the values params holds for the
-- keys of `order`, in that order (tables as canonical JSON), as a point's one-line
-- description (the progress output, the dry run, an error's context).
function M.describe_params(params, order)
  local parts = {}
  for _, k in ipairs(order) do
    local v = params[k]
    if v ~= nil then
      parts[#parts + 1] = ("%s=%s"):format(k, type(v) == "table" and M.canonical(v)
        or tostring(v))
    end
  end
  return table.concat(parts, " ")
end

-- A value as an error message shows it: strings quoted, short tables as canonical JSON.
function M.show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" then
    local ok, s = pcall(json.encode, v)
    if ok and #s <= 80 then return s end
    return "a table"
  end
  return tostring(v)
end

local function strip_nulls(v)
  if type(v) == "table" then
    setmetatable(v, nil)
    for k, x in pairs(v) do
      if x == json.null then v[k] = nil else strip_nulls(x) end
    end
  end
  return v
end

-- decode(text) -> value, or nil and the reason (text that is not JSON is an answer here:
-- read_jsonl tells a torn last line from a damaged one by it). JSON null becomes nil.
function M.decode(text)
  if type(text) ~= "string" then fail("results.decode: text must be a string") end
  local ok, v = pcall(json.decode, text)
  if not ok then return nil, errors.message(v) end
  return strip_nulls(v)
end

---------------------------------------------------------------------------- hashing

-- FNV-1a, 32 bits, as 8 hex digits: a short stable fingerprint of a point's config.
function M.hash(s)
  local h = 0x811c9dc5
  for i = 1, #s do
    h = bit.bxor(h, s:byte(i))
    -- h * 16777619 mod 2^32, split so no intermediate exceeds 2^53
    h = bit.tobit((h * 0x193) + bit.lshift(bit.band(h, 0xff), 24))
  end
  return bit.tohex(h)
end

---------------------------------------------------------------------------- results.jsonl

-- read_jsonl(path) -> rows, info. info.valid_bytes: the length of the prefix made of whole,
-- parseable lines; info.torn: a half-written last line (no newline, or not JSON) that repair
-- removes; info.raw[i]: row i's line as written. A broken line that is not the last is
-- corruption, not a kill: an error naming it. A missing file reads as no rows.
function M.read_jsonl(path)
  if type(path) ~= "string" then fail("results.read_jsonl: path must be a string") end
  local text = fs.read_file(path)
  local info = { valid_bytes = 0, torn = false, lines = 0, raw = {} }
  if not text then return {}, info end
  local rows, pos, lineno = {}, 1, 0
  while pos <= #text do
    local nl = text:find("\n", pos, true)
    lineno = lineno + 1
    local line = text:sub(pos, (nl or #text + 1) - 1)
    local v, err
    if line:match("^%s*$") then
      v, err = nil, "empty line"
    else
      v, err = M.decode(line)
      if v ~= nil and type(v) ~= "table" then v, err = nil, "not a JSON object" end
    end
    if v == nil or not nl then
      local rest = nl and text:find("%S", nl + 1)
      if rest then
        fail("%s line %d is damaged (%s) and is not the last line: the file is corrupt, not "
          .. "just cut short", path, lineno, tostring(err or "no newline"))
      end
      info.torn = true
      info.torn_line = lineno
      info.torn_reason = v == nil and err or "no newline at the end"
      break
    end
    rows[#rows + 1] = v
    info.raw[#rows] = line
    pos = nl + 1
    info.valid_bytes = nl
  end
  info.lines = #rows
  return rows, info
end

-- Removes a half-written last line (what a kill mid-write leaves). Returns true when it
-- removed something, and read_jsonl's info.
function M.repair_jsonl(path)
  local _, info = M.read_jsonl(path)
  if not info.torn then return false, info end
  local text = fs.read_file(path)
  if not text then fail("cannot read %s", path) end
  fs.write_atomic(path, text:sub(1, info.valid_bytes))
  return true, info
end

-- An appender: :append(row, order) writes one whole line and flushes it; :close().
local Appender = {}
Appender.__index = Appender

function M.open_jsonl(path, fresh)
  if type(path) ~= "string" then fail("results.open_jsonl: path must be a string") end
  if fresh then fs.write_atomic(path, "") end
  local f, err = io.open(path, "ab")
  if not f then fail("cannot open %s for appending: %s", path, tostring(err)) end
  -- Fully buffered: the whole line leaves in one write at the flush.
  f:setvbuf("full", 1048576)
  return setmetatable({ f = f, path = path }, Appender)
end

Appender.append = errors.public(function(self, row, order)
  local line = M.encode(row, order)
  -- json.encode escapes control characters, so a row is always one line
  assert(not line:find("\n", 1, true))
  local ok, err = self.f:write(line, "\n")
  if ok then ok, err = self.f:flush() end
  if not ok then fail("cannot append to %s: %s", self.path, tostring(err)) end
end)

function Appender:close()
  if self.f then self.f:close() self.f = nil end
end

---------------------------------------------------------------------------- CSV

local function csv_field(v)
  local tv = type(v)
  if v == nil then return "" end
  if tv == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return "" end
    return encode_number(v)
  end
  if tv == "boolean" then return v and "true" or "false" end
  if tv == "table" then v = M.canonical(v) end
  v = tostring(v)
  if v:find('[,"\r\n]') then return '"' .. v:gsub('"', '""') .. '"' end
  return v
end

-- Columns: the given order first, then every other scalar key seen in any row (sorted), so a
-- key the order does not know (variant.<family>, a new metric) is carried, never dropped.
-- Lists and objects (per_layer, by_length, workload) stay in the JSON file.
function M.csv_columns(rows, order)
  local cols, seen = {}, {}
  for _, k in ipairs(order or {}) do
    for _, r in ipairs(rows) do
      if not seen[k] and r[k] ~= nil and type(r[k]) ~= "table" then
        cols[#cols + 1] = k
        seen[k] = true
        break
      end
    end
  end
  local extra = {}
  for _, r in ipairs(rows) do
    for k, v in pairs(r) do
      if not seen[k] and type(v) ~= "table" then
        seen[k] = true
        extra[#extra + 1] = k
      end
    end
  end
  table.sort(extra)
  for _, k in ipairs(extra) do cols[#cols + 1] = k end
  return cols
end

-- csv_text(rows, order) -> the CSV text (a header line, a line per row), the columns.
function M.csv_text(rows, order)
  local cols = M.csv_columns(rows, order)
  local head = {}
  for i, c in ipairs(cols) do head[i] = csv_field(c) end
  local lines = { table.concat(head, ",") }
  for _, r in ipairs(rows) do
    local cells = {}
    for i, c in ipairs(cols) do cells[i] = csv_field(r[c]) end
    lines[#lines + 1] = table.concat(cells, ",")
  end
  return table.concat(lines, "\n") .. "\n", cols
end

function M.write_csv(path, rows, order)
  local text = M.csv_text(rows, order)
  fs.write_atomic(path, text)
end

-- Parses CSV text (RFC 4180 quoting) into a header and rows of strings; for tests and tools.
function M.parse_csv(text)
  if type(text) ~= "string" then fail("results.parse_csv: text must be a string") end
  local records, record, field, i, n = {}, {}, {}, 1, #text
  local quoted = false
  while i <= n do
    local c = text:sub(i, i)
    if quoted then
      if c == '"' then
        if text:sub(i + 1, i + 1) == '"' then
          field[#field + 1] = '"'; i = i + 1
        else
          quoted = false
        end
      else
        field[#field + 1] = c
      end
    elseif c == '"' then
      quoted = true
    elseif c == "," then
      record[#record + 1] = table.concat(field); field = {}
    elseif c == "\n" then
      record[#record + 1] = table.concat(field); field = {}
      records[#records + 1] = record; record = {}
    elseif c ~= "\r" then
      field[#field + 1] = c
    end
    i = i + 1
  end
  if #field > 0 or #record > 0 then
    record[#record + 1] = table.concat(field)
    records[#records + 1] = record
  end
  local header = table.remove(records, 1) or {}
  return header, records
end

---------------------------------------------------------------------------- comparing runs

-- What does not depend on timing or on where it ran: the row without its time_* and speedup*
-- fields, wall time, clock, shard, device and device_bus_id (two shards on two GPUs differ
-- there and nowhere else), its per_layer entries likewise; drop(k), when given, is true for
-- more keys to leave out.
function M.timeless(r, drop)
  local t = {}
  for k, v in pairs(r) do
    if type(k) == "string" and not k:match("^time_") and not k:match("^speedup")
      and k ~= "wall_time_s" and k ~= "finished_at" and k ~= "per_layer" and k ~= "shard"
      and k ~= "device" and k ~= "device_bus_id" and not (drop and drop(k)) then
      t[k] = v
    end
  end
  t.per_layer = {}
  for i, l in ipairs(r.per_layer or {}) do t.per_layer[i] = M.timeless(l, drop) end
  return t
end

-- The differences between two values, as "path: a vs b" lines appended to out (at most
-- limit of them); NaN equals NaN (a metric of an empty set is NaN in both runs).
local function differences(a, b, path, out, limit)
  if #out >= limit then return end
  if type(a) == "table" and type(b) == "table" then
    local keys, seen = {}, {}
    for k in pairs(a) do keys[#keys + 1] = k; seen[k] = true end
    for k in pairs(b) do if not seen[k] then keys[#keys + 1] = k end end
    table.sort(keys, function(x, y) return tostring(x) < tostring(y) end)
    for _, k in ipairs(keys) do
      differences(a[k], b[k], path == "" and tostring(k) or (path .. "." .. tostring(k)), out,
        limit)
    end
  elseif a ~= b and not (a ~= a and b ~= b) then
    out[#out + 1] = ("%s: %s vs %s"):format(path, M.show(a), M.show(b))
  end
end

-- compare_rows(ref, got, drop) -> report: two runs' rows point for point (a row's key is its
-- point and repeat), on their config hashes and their timeless fields (drop as for timeless).
-- report.points (rows compared), .same (true when nothing differs), .lines (the differences,
-- each naming the point; at most 50, .more counts the rest), .only_ref / .only_got (points
-- one side lacks).
function M.compare_rows(ref, got, drop)
  local function keyed(rows, side)
    local m, order = {}, {}
    for _, r in ipairs(rows) do
      local k = ("%s/%s"):format(tostring(r.point), tostring(r["repeat"] or 0))
      if m[k] then fail("%s: point %s (repeat %s) appears twice", side, tostring(r.point),
        tostring(r["repeat"] or 0)) end
      m[k] = r
      order[#order + 1] = k
    end
    return m, order
  end
  local a, aorder = keyed(ref, "the reference")
  local b, border = keyed(got, "the other run")
  local rep = { points = 0, lines = {}, more = 0, only_ref = {}, only_got = {} }
  local limit = 50
  for _, k in ipairs(aorder) do
    local r, g = a[k], b[k]
    if not g then
      rep.only_ref[#rep.only_ref + 1] = k
    else
      rep.points = rep.points + 1
      local out = {}
      if r.config_hash ~= g.config_hash then
        out[1] = ("config_hash: %s vs %s"):format(M.show(r.config_hash), M.show(g.config_hash))
      end
      differences(M.timeless(r, drop), M.timeless(g, drop), "", out, math.huge)
      for _, l in ipairs(out) do
        if #rep.lines < limit then rep.lines[#rep.lines + 1] = ("point %s: %s"):format(k, l)
        else rep.more = rep.more + 1 end
      end
    end
  end
  for _, k in ipairs(border) do if not a[k] then rep.only_got[#rep.only_got + 1] = k end end
  rep.same = #rep.lines == 0 and rep.more == 0 and #rep.only_ref == 0 and #rep.only_got == 0
  return rep
end

-- The plain helpers stay unwrapped: they raise nothing, and is_int/is_list run in loops; the
-- fs names are fs's own public functions already.
return errors.wrap(M, { "is_int", "is_list", "show", "hash", "describe_params" })
