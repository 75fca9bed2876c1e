-- idxlab.results: the results files of an experiment and how they are written so that they
-- never read as complete when they are not.
--   results.jsonl  one JSON object per finished point, appended one whole line at a time and
--                  flushed, so a killed run loses at most the point in flight; a half-written
--                  last line is detected on reading and removed by repair (--resume).
--   results.csv    the same rows' scalars for spreadsheets, written whole (temp + rename).
--   experiment.json  the normalised experiment and its planned points (for report and merge).
-- Numbers are written with %.17g (integers as integers), so a double reads back bit-exact.
local M = {}

M.SCHEMA = 1

local json = require("idxlab.json")

local function argcheck(cond, msg)
  if not cond then error("idxlab: " .. msg, 3) end
end

---------------------------------------------------------------------------- JSON

-- Integers (exact in a double) as integers; everything else with 17 significant digits so
-- the value reads back bit-exact; NaN and infinities have no JSON form and become null.
-- (The same rule as idxlab.json, which writes the JSON; this one is for the plot data files.)
local function encode_number(x)
  if x ~= x or x == math.huge or x == -math.huge then return "null" end
  if x == math.floor(x) and math.abs(x) < 2 ^ 53 then
    if x == 0 and 1 / x < 0 then return "-0" end
    return ("%d"):format(x)
  end
  return ("%.17g"):format(x)
end
M.encode_number = encode_number

-- encode(value, order) -> JSON text on one line; order lists keys written first in every
-- object (idxlab.json; the rest follow sorted).
function M.encode(v, order)
  argcheck(order == nil or type(order) == "table", "results.encode: order must be a list of keys")
  local ok, text = pcall(json.encode, v, order)
  if not ok then error(text, 2) end
  return text
end

-- Canonical text (every key sorted): equal tables give equal text, for hashing.
function M.canonical(v)
  local ok, text = pcall(json.encode, v)
  if not ok then error(text, 2) end
  return text
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

-- decode(text) -> value, or nil and the reason. JSON null becomes nil.
function M.decode(text)
  argcheck(type(text) == "string", "results.decode: text must be a string")
  local ok, v = pcall(json.decode, text)
  if not ok then return nil, (tostring(v):gsub("^.-idxlab: ", "")) end
  return strip_nulls(v)
end

---------------------------------------------------------------------------- hashing

-- FNV-1a, 32 bits, as 8 hex digits: a short stable fingerprint of a point's config.
local bit = require("bit")
function M.hash(s)
  local h = 0x811c9dc5
  for i = 1, #s do
    h = bit.bxor(h, s:byte(i))
    -- h * 16777619 mod 2^32, split so no intermediate exceeds 2^53
    h = bit.tobit((h * 0x193) + bit.lshift(bit.band(h, 0xff), 24))
  end
  return bit.tohex(h)
end

---------------------------------------------------------------------------- files

local ffi = require("ffi")
pcall(ffi.cdef, "int getpid(void);")
local function pid()
  local ok, p = pcall(function() return ffi.C.getpid() end)
  return ok and tonumber(p) or math.random(1, 1e9)
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

function M.read_file(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local s = f:read("*a")
  f:close()
  return s
end

-- Writes a whole file under a temporary name in the same directory, then renames it over
-- the target, so a reader sees the old file or the new one, never a part.
function M.write_atomic(path, text)
  argcheck(type(path) == "string", "results.write_atomic: path must be a string")
  argcheck(type(text) == "string", "results.write_atomic: text must be a string")
  local tmp = ("%s.tmp.%d"):format(path, pid())
  local f, err = io.open(tmp, "wb")
  if not f then error(("idxlab: cannot write %s: %s"):format(path, tostring(err)), 2) end
  local ok, werr = f:write(text)
  if ok then ok, werr = f:flush() end
  f:close()
  if not ok then
    os.remove(tmp)
    error(("idxlab: cannot write %s: %s"):format(path, tostring(werr)), 2)
  end
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    os.remove(tmp)
    error(("idxlab: cannot rename %s to %s: %s"):format(tmp, path, tostring(rerr)), 2)
  end
end

-- Renames a file written by an outside program (gnuplot) from its temporary name into place.
function M.move_into_place(tmp, path)
  local ok, err = os.rename(tmp, path)
  if not ok then
    os.remove(tmp)
    return nil, err
  end
  return true
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.shell_quote = shell_quote

function M.mkdir_p(dir)
  argcheck(type(dir) == "string" and dir ~= "", "results.mkdir_p: dir must be a non-empty string")
  local ok = os.execute("mkdir -p -- " .. shell_quote(dir))
  if ok ~= 0 and ok ~= true then error(("idxlab: cannot create directory %s"):format(dir), 2) end
  if not M.is_dir(dir) then error(("idxlab: cannot create directory %s"):format(dir), 2) end
end

function M.is_dir(dir)
  local f = io.open(dir .. "/.", "rb")
  if f then f:close() return true end
  return false
end

---------------------------------------------------------------------------- results.jsonl

-- read_jsonl(path) -> rows, info. info.valid_bytes: the length of the prefix made of whole,
-- parseable lines; info.torn: a half-written last line (no newline, or not JSON) that repair
-- removes. A broken line that is not the last is corruption, not a kill: an error naming it.
function M.read_jsonl(path)
  argcheck(type(path) == "string", "results.read_jsonl: path must be a string")
  local text = M.read_file(path)
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
        error(("idxlab: %s line %d is damaged (%s) and is not the last line: the file is corrupt, not just cut short")
          :format(path, lineno, tostring(err or "no newline")), 2)
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
-- removed something.
function M.repair_jsonl(path)
  local _, info = M.read_jsonl(path)
  if not info.torn then return false, info end
  local text = assert(M.read_file(path))
  M.write_atomic(path, text:sub(1, info.valid_bytes))
  return true, info
end

-- An appender: :append(row, order) writes one whole line and flushes it; :close().
local Appender = {}
Appender.__index = Appender

function M.open_jsonl(path, fresh)
  argcheck(type(path) == "string", "results.open_jsonl: path must be a string")
  if fresh then M.write_atomic(path, "") end
  local f, err = io.open(path, "ab")
  if not f then error(("idxlab: cannot open %s for appending: %s"):format(path, tostring(err)), 2) end
  -- Fully buffered: the whole line leaves in one write at the flush.
  f:setvbuf("full", 1048576)
  return setmetatable({ f = f, path = path }, Appender)
end

function Appender:append(row, order)
  local line = M.encode(row, order)
  assert(not line:find("\n", 1, true))
  local ok, err = self.f:write(line, "\n")
  if ok then ok, err = self.f:flush() end
  if not ok then error(("idxlab: cannot append to %s: %s"):format(self.path, tostring(err)), 2) end
end

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

-- Columns: the given order first, then every other scalar key seen in any row (sorted).
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

function M.csv_text(rows, order)
  local cols = M.csv_columns(rows, order)
  local lines = { table.concat((function()
    local h = {}
    for i, c in ipairs(cols) do h[i] = csv_field(c) end
    return h
  end)(), ",") }
  for _, r in ipairs(rows) do
    local cells = {}
    for i, c in ipairs(cols) do cells[i] = csv_field(r[c]) end
    lines[#lines + 1] = table.concat(cells, ",")
  end
  return table.concat(lines, "\n") .. "\n", cols
end

function M.write_csv(path, rows, order)
  local text = M.csv_text(rows, order)
  M.write_atomic(path, text)
end

-- Parses CSV text (RFC 4180 quoting) into a header and rows of strings; for tests and tools.
function M.parse_csv(text)
  argcheck(type(text) == "string", "results.parse_csv: text must be a string")
  local records, record, field, i, n = {}, {}, {}, 1, #text
  local quoted = false
  while i <= n do
    local c = text:sub(i, i)
    if quoted then
      if c == '"' then
        if text:sub(i + 1, i + 1) == '"' then field[#field + 1] = '"'; i = i + 1 else quoted = false end
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

---------------------------------------------------------------------------- directory

-- A value as an error message shows it: strings quoted, short tables as canonical JSON.
local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" then
    local ok, s = pcall(M.canonical, v)
    if ok and #s <= 80 then return s end
    return "a table"
  end
  return tostring(v)
end
M.show = show

local function is_int(v) return type(v) == "number" and v == math.floor(v) and math.abs(v) < 2 ^ 53 end

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

local function string_list(v)
  if not is_list(v) then return false end
  for _, x in ipairs(v) do if type(x) ~= "string" then return false end end
  return true
end

-- check_experiment(exp) -> nil, or what is wrong with a saved experiment (experiment.json)
-- in the fields report and merge read: "field 'plots' = 5: must be ...".
function M.check_experiment(exp)
  if type(exp) ~= "table" or is_list(exp) and next(exp) ~= nil then
    return ("the experiment = %s: must be a JSON object"):format(show(exp))
  end
  for _, k in ipairs({ "name", "question", "mode" }) do
    if exp[k] ~= nil and type(exp[k]) ~= "string" then
      return ("field '%s' = %s: must be a string"):format(k, show(exp[k]))
    end
  end
  for _, k in ipairs({ "metrics", "swept" }) do
    if exp[k] ~= nil and not string_list(exp[k]) then
      return ("field '%s' = %s: must be a list of names (strings)"):format(k, show(exp[k]))
    end
  end
  if exp.plots ~= nil then
    if not is_list(exp.plots) then
      return ("field 'plots' = %s: must be a list of plots { x = field, y = metric, series = field }"):format(show(exp.plots))
    end
    for i, p in ipairs(exp.plots) do
      local w = ("plots[%d]"):format(i)
      if type(p) ~= "table" or is_list(p) and next(p) ~= nil then
        return ("field '%s' = %s: must be a plot { x = field, y = metric, series = field }"):format(w, show(p))
      end
      if type(p.x) ~= "string" then return ("field '%s.x' = %s: must name a field (a string)"):format(w, show(p.x)) end
      if not (type(p.y) == "string" or string_list(p.y) and #p.y > 0) then
        return ("field '%s.y' = %s: must be a metric or a non-empty list of metrics (strings)"):format(w, show(p.y))
      end
      if p.series ~= nil and type(p.series) ~= "string" and not string_list(p.series) then
        return ("field '%s.series' = %s: must name a field (a string) or list fields"):format(w, show(p.series))
      end
      if p.title ~= nil and type(p.title) ~= "string" then
        return ("field '%s.title' = %s: must be a string"):format(w, show(p.title))
      end
      for _, b in ipairs({ "logx", "logy" }) do
        if p[b] ~= nil and type(p[b]) ~= "boolean" then
          return ("field '%s.%s' = %s: must be true or false"):format(w, b, show(p[b]))
        end
      end
      if p.name ~= nil and (type(p.name) ~= "string" or not p.name:match("^[%w_%-]+$")) then
        return ("field '%s.name' = %s: must be a file name of letters, digits, '_' and '-'"):format(w, show(p.name))
      end
    end
  end
  if exp.points ~= nil then
    if not is_list(exp.points) then
      return ("field 'points' = %s: must be a list of planned points { point = n, config_hash = hex }"):format(show(exp.points))
    end
    for i, p in ipairs(exp.points) do
      local w = ("points[%d]"):format(i)
      if type(p) ~= "table" or is_list(p) and next(p) ~= nil then
        return ("field '%s' = %s: must be a planned point { point = n, config_hash = hex }"):format(w, show(p))
      end
      if not is_int(p.point) or p.point < 0 then
        return ("field '%s.point' = %s: must be a non-negative integer"):format(w, show(p.point))
      end
      if type(p.config_hash) ~= "string" then
        return ("field '%s.config_hash' = %s: must be a string"):format(w, show(p.config_hash))
      end
    end
  end
  return nil
end

-- load_dir(dir) -> { experiment = table or nil, rows = list, info = read info }
function M.load_dir(dir)
  argcheck(type(dir) == "string", "results.load_dir: dir must be a string")
  local exp
  local etext = M.read_file(dir .. "/experiment.json")
  if etext then
    local err
    exp, err = M.decode(etext)
    if type(exp) ~= "table" then
      error(("idxlab: %s/experiment.json is not valid JSON: %s"):format(dir, tostring(err)), 2)
    end
    local bad = M.check_experiment(exp)
    if bad then error(("idxlab: %s/experiment.json: %s"):format(dir, bad), 2) end
  end
  local jpath = dir .. "/results.jsonl"
  if not M.exists(jpath) then
    error(("idxlab: %s: no results.jsonl here (is it a results directory?)"):format(dir), 2)
  end
  local rows, info = M.read_jsonl(jpath)
  for i, r in ipairs(rows) do
    if r.point ~= nil and (not is_int(r.point) or r.point < 0) then
      error(("idxlab: %s line %d: field 'point' = %s: must be a non-negative integer"):format(jpath, i, show(r.point)), 2)
    end
  end
  return { experiment = exp, rows = rows, info = info, dir = dir }
end

---------------------------------------------------------------------------- merge

-- merge(out, dirs) -> { rows, warnings, missing, summary, files }: the shards' results in
-- one directory. Refuses shards of different experiments (name), of different plans (the
-- point configs, by index) and a point present twice; warns on different git commits, torn
-- last lines and missing points. The merged results.jsonl keeps each line's text as written.
function M.merge(out, dirs, opts)
  argcheck(type(out) == "string" and out ~= "", "results.merge: out must be a directory name")
  argcheck(type(dirs) == "table" and #dirs > 0, "results.merge: dirs must be a non-empty list of directories")
  local loaded = {}
  for i, d in ipairs(dirs) do
    argcheck(type(d) == "string", ("results.merge: dirs[%d] must be a string"):format(i))
    local ok, l = pcall(M.load_dir, d)
    if not ok then error(l:match("idxlab: .*") or l, 2) end
    if type(l.experiment) ~= "table" or type(l.experiment.points) ~= "table" then
      error(("idxlab: merge: %s has no experiment.json (not written by idxlab run?)"):format(d), 2)
    end
    loaded[i] = l
  end
  local first = loaded[1].experiment
  local warnings = {}
  local plan = {}
  for _, p in ipairs(first.points) do plan[p.point] = p.config_hash end
  for i = 2, #loaded do
    local e = loaded[i].experiment
    if e.name ~= first.name then
      error(("idxlab: merge: %s holds experiment %s but %s holds %s"):format(dirs[i], tostring(e.name), dirs[1],
        tostring(first.name)), 2)
    end
    if #e.points ~= #first.points then
      error(("idxlab: merge: %s planned %d points but %s planned %d: not the same experiment plan"):format(dirs[i],
        #e.points, dirs[1], #first.points), 2)
    end
    for _, p in ipairs(e.points) do
      if plan[p.point] ~= p.config_hash then
        error(("idxlab: merge: point %s has config %s in %s but %s in %s: not the same experiment plan"):format(
          tostring(p.point), tostring(p.config_hash), dirs[i], tostring(plan[p.point]), dirs[1]), 2)
      end
    end
  end
  local by_point, from, lines = {}, {}, {}
  local commits, commit_order = {}, {}
  for i, l in ipairs(loaded) do
    if l.info.torn then
      warnings[#warnings + 1] = ("%s/results.jsonl: a half-written last line (line %d) was ignored"):format(dirs[i], l.info.torn_line)
    end
    for j, r in ipairs(l.rows) do
      local p = r.point
      if type(p) ~= "number" or plan[p] == nil then
        error(("idxlab: merge: %s/results.jsonl line %d: point %s is not in the plan"):format(dirs[i], j, tostring(p)), 2)
      end
      if r.config_hash ~= plan[p] then
        error(("idxlab: merge: %s/results.jsonl line %d: point %d has config %s, the plan says %s"):format(dirs[i], j, p,
          tostring(r.config_hash), plan[p]), 2)
      end
      if by_point[p] then
        error(("idxlab: merge: point %d is in both %s and %s"):format(p, from[p], dirs[i]), 2)
      end
      by_point[p], from[p] = r, dirs[i]
      lines[p] = l.info.raw[j]
      local c = tostring(r.git_commit) .. (r.git_dirty and " (dirty)" or "")
      if not commits[c] then commits[c] = dirs[i]; commit_order[#commit_order + 1] = c end
    end
  end
  if #commit_order > 1 then
    local parts = {}
    for _, c in ipairs(commit_order) do parts[#parts + 1] = ("%s (%s)"):format(c, commits[c]) end
    warnings[#warnings + 1] = "the shards ran at different git commits: " .. table.concat(parts, ", ")
  end
  local idx = {}
  for p in pairs(by_point) do idx[#idx + 1] = p end
  table.sort(idx)
  local missing = #first.points - #idx
  if missing > 0 then
    warnings[#warnings + 1] = ("%d of %d points have no result (shards not run or not finished)"):format(missing, #first.points)
  end
  M.mkdir_p(out)
  local text, rows = {}, {}
  for _, p in ipairs(idx) do
    text[#text + 1] = lines[p] .. "\n"
    rows[#rows + 1] = by_point[p]
  end
  local exp = {}
  for k, v in pairs(first) do exp[k] = v end
  exp.merged_from = dirs
  M.write_atomic(out .. "/experiment.json", M.encode(exp, { "schema", "name", "question", "source" }) .. "\n")
  M.write_atomic(out .. "/results.jsonl", table.concat(text))
  local report = require("idxlab.report")
  local w = report.write(out, rows, exp, opts)
  return { rows = rows, warnings = warnings, missing = missing, summary = w.summary, files = w.files, messages = w.messages }
end

return M
