-- idxlab.experiment: experiment files -> validated plan -> points run -> results.
--
--   load(path)            runs the file in a sandbox (no io/os/require, bounded time) and
--                         returns its table
--   apply_sets(exp, sets) --set key=value overrides (SPEC 8 grammar, via config.parse_sets)
--   plan(file_or_table, opts) validates everything (errors name the file, the field and the
--                         reason, before anything runs) and expands the sweep into points;
--                         a point the builder refuses is skipped with its reason
--   dry_run(...)          prints the plan, runs nothing
--   run(file_or_table, opts) runs the points (or this shard's), appends one results line per
--                         point, resumes, survives Ctrl-C, then writes CSV, summary and plots
--
-- The file format and the CLI are documented in docs/experiments.md. Internal errors are
-- raised without a position (error(msg, 0)) and re-raised at the public entry points with
-- error(msg, 2), so a REPL user sees the line of the call.
local results = require("idxlab.results")
local report = require("idxlab.report")
local progress = require("idxlab.progress")

local M = {}

local function fail(msg) error("idxlab: " .. msg, 0) end

-- The "idxlab: ..." part of an error raised anywhere below (drops "file:line: " prefixes).
local function clean(err)
  err = tostring(err)
  local i = err:find("idxlab: ", 1, true)
  if i then return err:sub(i) end
  return err
end

-- Calls f(...) and re-raises an idxlab error at the caller of the public function.
local function public(f, ...)
  local res = { pcall(f, ...) }
  if not res[1] then
    local msg = clean(res[2])
    if not msg:find("^idxlab: ") then
      -- not one of ours: a bug; keep the whole message so it can be found
      error(res[2], 0)
    end
    error(msg, 3)
  end
  return unpack(res, 2, table.maxn(res))
end

---------------------------------------------------------------------------- the config API

-- The builder's config module ("bld" helper): fields, resolve, parse_sets, valid sbk.
local function cfgmod()
  local ok, c = pcall(require, "idxlab.config")
  if not ok then fail("the builder config module idxlab.config is missing: " .. clean(c)) end
  return c
end

local function field_names()
  local c = cfgmod()
  local out = {}
  for _, f in ipairs(c.fields or {}) do
    out[#out + 1] = type(f) == "table" and (f.name or f[1]) or f
  end
  return out
end

local function is_config_field(name)
  local c = cfgmod()
  if c.is_field then return c.is_field(name) and true or false end
  for _, f in ipairs(field_names()) do if f == name then return true end end
  return false
end

-- config.<fn>(arg) -> its result, or nil and the reason (the message without "idxlab: ").
local function try_config(fn, arg)
  local ok, res = pcall(cfgmod()[fn], arg)
  if not ok then return nil, (clean(res):gsub("^idxlab: ", "")) end
  return res
end

-- resolve(tbl) -> resolved table, or nil and the reason.
local function resolve_config(tbl) return try_config("resolve", tbl) end

-- Builder validation of a resolved config: every SPEC 4 check, in C, allocating nothing
-- (config.describe). Returns info (sparse_block_kv and workspace_tokens as the builder chose
-- them, and the derived sizes), or nil and the reason.
local function validate_config(resolved)
  local d, why = try_config("describe", resolved)
  if not d then return nil, why end
  local info = {}
  for k, v in pairs(d.derived or {}) do info[k] = v end
  info.sparse_block_kv = d.config and d.config.sparse_block_kv
  info.workspace_tokens = d.config and d.config.workspace_tokens
  return info
end

local function valid_sbk(resolved)
  local list, why = try_config("valid_sparse_block_kv", resolved)
  if not list then return nil, why end
  if type(list) ~= "table" then return nil, "no list of valid sparse_block_kv" end
  return list
end

---------------------------------------------------------------------------- helpers

-- " (did you mean x?)" when a known name is close to `name`.
local function suggest(name, known)
  local best = cfgmod().closest(name, known)
  if best then return (" (did you mean %s?)"):format(best) end
  return ""
end
M.suggest = suggest

local function deep_copy(v, seen)
  if type(v) ~= "table" then return v end
  seen = seen or {}
  if seen[v] then return seen[v] end
  local out = {}
  seen[v] = out
  for k, x in pairs(v) do out[deep_copy(k, seen)] = deep_copy(x, seen) end
  return out
end
M.deep_copy = deep_copy

local show, is_int, is_list = results.show, results.is_int, results.is_list

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == "string" or type(a) == "number") then return a < b end
    return type(a) < type(b)
  end)
  return keys
end

---------------------------------------------------------------------------- sandboxed loading

M.MAX_INSTRUCTIONS = 2e7

local function safe_env()
  local function copy(t)
    local o = {}
    for k, v in pairs(t) do o[k] = v end
    return o
  end
  local str = copy(string)
  str.dump = nil
  local rep = string.rep
  str.rep = function(s, n, sep)
    if type(n) == "number" and type(s) == "string" and (#s + (type(sep) == "string" and #sep or 0)) * n > 2 ^ 24 then
      error("string.rep: result longer than 16 MiB", 2)
    end
    return rep(s, n, sep)
  end
  local tab = copy(table)
  local concat = table.concat
  tab.concat = function(t, sep, i, j)
    -- sized before it is built (this loop is the loader's, out of the hook's reach: bounded)
    if type(t) == "table" then
      i, j = tonumber(i) or 1, tonumber(j) or #t
      if j - i >= 2 ^ 20 then error("table.concat: more than 2^20 pieces", 2) end
      local n, sl = 0, type(sep) == "string" and #sep or 0
      for k = i, j do
        local v = t[k]
        n = n + (type(v) == "string" and #v or 24) + sl
      end
      if n > 2 ^ 24 then error("table.concat: result longer than 16 MiB", 2) end
    end
    return concat(t, sep, i, j)
  end
  -- Lua patterns backtrack without bound inside C, where no hook can stop them: an
  -- experiment file is data and gets plain find only.
  local find = string.find
  str.find = function(s, p, init, plain)
    if not plain then error("string.find: only plain find (4th argument true) in experiment files", 2) end
    return find(s, p, init, plain)
  end
  for _, name in ipairs({ "match", "gmatch", "gsub" }) do
    str[name] = function() error(("string.%s: Lua patterns are not available in experiment files"):format(name), 2) end
  end
  local env = {
    math = copy(math), string = str, table = tab,
    pairs = pairs, ipairs = ipairs, next = next, select = select, type = type,
    tonumber = tonumber, tostring = tostring, unpack = unpack, error = error, assert = assert,
    pcall = pcall, print = print,
  }
  env._G = env
  return env, str
end

-- load(path) -> the experiment table the file returns.
local function load_file(path)
  if type(path) ~= "string" then fail("experiment file path must be a string, got " .. type(path)) end
  local f, err = io.open(path, "rb")
  if not f then fail(("cannot read experiment file %s: %s"):format(path, tostring(err))) end
  local text = f:read("*a")
  f:close()
  if type(text) ~= "string" then fail(("cannot read experiment file %s: not a regular file"):format(path)) end
  if #text > 1048576 then fail(("%s: an experiment file of %d bytes: at most 1 MiB"):format(path, #text)) end
  local chunk, perr = loadstring(text, "@" .. path)
  if not chunk then
    perr = tostring(perr)
    local at = perr:sub(1, #path + 1) == path .. ":" and perr:match("^.-:(%d+): (.*)$")
    if at then
      local line, what = perr:match("^.-:(%d+): (.*)$")
      fail(("%s:%s: does not parse: %s"):format(path, line, what))
    end
    fail(("%s: does not parse: %s"):format(path, perr))
  end
  local env, str = safe_env()
  setfenv(chunk, env)
  -- Compiled traces never call hooks: the file runs interpreted, so the count hook can stop
  -- a runaway loop. Once the budget is spent, the sandbox's pcall re-raises, so a file
  -- cannot swallow the stop.
  jit.off(chunk, true)
  local count, spent = 0, false
  local stop = ("idxlab: %s: still running after %d instructions (an experiment file is data, not a program)")
    :format(path, M.MAX_INSTRUCTIONS)
  env.pcall = function(fn, ...)
    local r = { pcall(fn, ...) }
    if spent then error(stop, 0) end
    return unpack(r, 1, table.maxn(r))
  end
  -- string methods ("x"):rep(n) reach the string metatable, not env.string: point it at the
  -- sandbox's table while the file runs
  local smt = getmetatable("")
  local old_index = smt.__index
  local oldhook, oldmask, oldcount = debug.gethook()
  smt.__index = str
  local source = "@" .. path
  debug.sethook(function()
    count = count + 1
    -- raised only inside the file's own code, so never in the loader's lines that restore
    -- the hook and the string metatable after it returns
    if count * 1000 >= M.MAX_INSTRUCTIONS and debug.getinfo(2, "S").source == source then
      spent = true
      error(stop, 0)
    end
  end, "", 1000)
  local ok, res = pcall(chunk)
  debug.sethook(oldhook, oldmask, oldcount)
  smt.__index = old_index
  if not ok then
    local msg = tostring(res)
    if msg:find("^idxlab: ") then error(msg, 0) end
    fail(("%s: error while loading: %s"):format(path, msg))
  end
  if type(res) ~= "table" then
    fail(("%s: must return a table (the experiment), got %s"):format(path, type(res)))
  end
  return res
end

---------------------------------------------------------------------------- validation

M.TOP_FIELDS = { "name", "question", "seed", "backend", "workload", "config", "sweep", "zip", "repeats",
  "metrics", "plots", "by", "mode", "timing", "on_backend" }
local top_known = {}
for _, k in ipairs(M.TOP_FIELDS) do top_known[k] = true end

M.MAX_POINTS = 100000

local BACKENDS = { cpu = true, cuda = true, auto = true }

-- Every value in an experiment is plain data: no functions, no cycles, string keys or list
-- indices, bounded depth.
local function check_plain(v, where, src, seen, depth)
  local tv = type(v)
  if tv == "number" then
    if v ~= v then fail(("%s: field '%s': NaN is not a value"):format(src, where)) end
    return
  end
  if tv == "string" or tv == "boolean" then return end
  if tv ~= "table" then
    fail(("%s: field '%s': a %s is not plain data (numbers, strings, booleans and tables only)"):format(src, where, tv))
  end
  if depth > 16 then fail(("%s: field '%s': nested deeper than 16 levels"):format(src, where)) end
  if seen[v] then fail(("%s: field '%s': the table refers to itself"):format(src, where)) end
  seen[v] = true
  if getmetatable(v) ~= nil then fail(("%s: field '%s': a table with a metatable is not plain data"):format(src, where)) end
  for k, x in pairs(v) do
    local sub
    if type(k) == "string" then
      sub = where == "" and k or (where .. "." .. k)
    elseif is_int(k) then
      sub = ("%s[%d]"):format(where, k)
    else
      fail(("%s: field '%s': key %s: keys must be names or list indices"):format(src, where, show(k)))
    end
    check_plain(x, sub, src, seen, depth + 1)
  end
  seen[v] = nil
end

local function metric_names(mode)
  return mode == "chunks" and report.CHUNK_METRICS or report.STEP_METRICS
end

local function is_metric(mode, name)
  for _, m in ipairs(metric_names(mode)) do if m == name then return true end end
  return false
end

-- The workload's shape. Its knobs belong to the generator (idxlab.workload): when that module
-- lists them (workload.knobs or workload.defaults()), an unknown knob is an error here too.
local SYNTH_KEYS = { kind = true, decode = true, prefill = true, consumer_layers = true }
local REPLAY_KEYS = { kind = true, file = true, files = true, dir = true }

local function workload_module()
  local ok, wl = pcall(require, "idxlab.workload")
  if not ok or type(wl) ~= "table" then return nil end
  return wl
end

-- The generator's knobs: name -> "int" | "float" | true (type unknown), or nil when the
-- generator does not list them.
local function workload_knobs()
  local wl = workload_module()
  if not wl then return nil end
  local knobs
  if type(wl.knobs) == "table" then
    knobs = {}
    for k, v in pairs(wl.knobs) do
      if type(k) == "string" then knobs[k] = true
      elseif type(v) == "table" and type(v.name or v[1]) == "string" then knobs[v.name or v[1]] = v.kind or v[2] or true
      elseif type(v) == "string" then knobs[v] = true end
    end
  elseif type(wl.defaults) == "function" then
    local okd, d = pcall(wl.defaults)
    if okd and type(d) == "table" then
      knobs = {}
      for k in pairs(d) do if type(k) == "string" then knobs[k] = true end end
    end
  end
  return knobs
end

local function check_pos_int(v, where, src, min, max)
  min = min or 1
  if not is_int(v) or v < min or (max and v > max) then
    fail(("%s: field '%s' = %s: must be an integer %s"):format(src, where, show(v),
      max and ("in [%d, %d]"):format(min, max) or (min == 0 and ">= 0" or "> 0")))
  end
end

local MAX_POS = 2 ^ 40

-- Sets a swept "workload.a.b" value in a workload table (made on the way where missing).
local function set_workload(wl, k, v, src)
  local parts = {}
  for p in k:sub(10):gmatch("[^%.]+") do parts[#parts + 1] = p end
  local cur = wl
  for i = 1, #parts - 1 do
    if cur[parts[i]] == nil then cur[parts[i]] = {} end
    if type(cur[parts[i]]) ~= "table" then
      fail(("%s: field 'sweep.%s': workload.%s is a %s, not a table"):format(src, k, table.concat(parts, ".", 1, i), type(cur[parts[i]])))
    end
    cur = cur[parts[i]]
  end
  cur[parts[#parts]] = deep_copy(v)
end

local function workload_check(wl, cfg)
  local wm = workload_module()
  if not (wm and type(wm.check) == "function") then return true end
  return wm.check(wl, cfg)
end

local function check_workload(wl, src, where)
  where = where or "workload"
  if type(wl) ~= "table" then fail(("%s: field '%s' = %s: must be a table"):format(src, where, show(wl))) end
  local kind = wl.kind or "synthetic"
  if kind ~= "synthetic" and kind ~= "replay" then
    fail(("%s: field '%s.kind' = %s: must be \"synthetic\" or \"replay\""):format(src, where, show(wl.kind)))
  end
  if kind == "replay" then
    local n = 0
    for k, v in pairs(wl) do
      if not REPLAY_KEYS[k] then
        local known = { "kind", "file", "files", "dir" }
        fail(("%s: field '%s.%s': unknown for a replay workload (kind, file, files, dir)%s"):format(src, where,
          tostring(k), suggest(k, known)))
      end
      if (k == "file" or k == "dir") then
        if type(v) ~= "string" or v == "" then
          fail(("%s: field '%s.%s' = %s: must be a path"):format(src, where, k, show(v)))
        end
        n = n + 1
      elseif k == "files" then
        if not is_list(v) or #v == 0 then
          fail(("%s: field '%s.files': must be a non-empty list of paths"):format(src, where))
        end
        for i, p in ipairs(v) do
          if type(p) ~= "string" or p == "" then
            fail(("%s: field '%s.files[%d]' = %s: must be a path"):format(src, where, i, show(p)))
          end
        end
        n = n + 1
      end
    end
    if n == 0 then fail(("%s: field '%s': a replay workload needs file, files or dir"):format(src, where)) end
    return
  end
  local knobs = workload_knobs()
  for k, v in pairs(wl) do
    if type(k) ~= "string" then fail(("%s: field '%s': keys must be names"):format(src, where)) end
    if not SYNTH_KEYS[k] and knobs then
      local kind = knobs[k]
      if not kind then
        local known = { "kind", "decode", "prefill", "consumer_layers" }
        for n in pairs(knobs) do known[#known + 1] = n end
        table.sort(known)
        fail(("%s: field '%s.%s': unknown workload knob%s (knobs: %s)"):format(src, where, k, suggest(k, known),
          table.concat(known, ", ")))
      end
      if kind == "int" and not is_int(v) then
        fail(("%s: field '%s.%s' = %s: must be an integer"):format(src, where, k, show(v)))
      elseif type(v) ~= "number" then
        fail(("%s: field '%s.%s' = %s: must be a number"):format(src, where, k, show(v)))
      end
    end
  end
  if wl.consumer_layers ~= nil then check_pos_int(wl.consumer_layers, where .. ".consumer_layers", src, 1, 64) end
  local d = wl.decode
  if d ~= nil and d ~= false then
    if type(d) ~= "table" then fail(("%s: field '%s.decode' = %s: must be a table { rows = n, context = positions }"):format(src, where, show(d))) end
    for k in pairs(d) do
      if k ~= "rows" and k ~= "context" and k ~= "contexts" then
        fail(("%s: field '%s.decode.%s': unknown (rows, context, contexts)%s"):format(src, where, tostring(k),
          suggest(k, { "rows", "context", "contexts" })))
      end
    end
    if d.rows ~= nil then check_pos_int(d.rows, where .. ".decode.rows", src, 0, 1e7) end
    if d.context ~= nil and d.contexts ~= nil then
      fail(("%s: field '%s.decode': give context or contexts, not both"):format(src, where))
    end
    if d.context ~= nil then check_pos_int(d.context, where .. ".decode.context", src, 1, MAX_POS) end
    if d.contexts ~= nil then
      if not is_list(d.contexts) or #d.contexts == 0 then
        fail(("%s: field '%s.decode.contexts': must be a non-empty list of positions"):format(src, where))
      end
      for i, c in ipairs(d.contexts) do check_pos_int(c, ("%s.decode.contexts[%d]"):format(where, i), src, 1, MAX_POS) end
      if d.rows ~= nil and d.rows ~= #d.contexts then
        fail(("%s: field '%s.decode.rows' = %d: differs from the %d contexts listed"):format(src, where, d.rows, #d.contexts))
      end
    end
  end
  local p = wl.prefill
  if p ~= nil and p ~= false then
    if type(p) ~= "table" then fail(("%s: field '%s.prefill' = %s: must be a list of requests or { requests, query_len, context }"):format(src, where, show(p))) end
    if p.requests == nil and p.query_len == nil then
      if not is_list(p) then
        local k = next(p)
        fail(("%s: field '%s.prefill.%s': unknown (a list of { query_len, context_len }, or requests, query_len, context, context_len)%s")
          :format(src, where, tostring(k), suggest(k, { "requests", "query_len", "context", "context_len" })))
      end
      for i, r in ipairs(p) do
        local w = ("%s.prefill[%d]"):format(where, i)
        if type(r) ~= "table" then fail(("%s: field '%s' = %s: must be { query_len = rows, context_len = positions }"):format(src, w, show(r))) end
        for k in pairs(r) do
          if k ~= "query_len" and k ~= "context_len" then
            fail(("%s: field '%s.%s': unknown (query_len, context_len)%s"):format(src, w, tostring(k),
              suggest(k, { "query_len", "context_len" })))
          end
        end
        check_pos_int(r.query_len, w .. ".query_len", src, 1, MAX_POS)
        check_pos_int(r.context_len, w .. ".context_len", src, 0, MAX_POS)
      end
    else
      for k in pairs(p) do
        if k ~= "requests" and k ~= "query_len" and k ~= "context" and k ~= "context_len" then
          fail(("%s: field '%s.prefill.%s': unknown (requests, query_len, context, context_len)%s"):format(src, where, tostring(k),
            suggest(k, { "requests", "query_len", "context", "context_len" })))
        end
      end
      if p.requests ~= nil then check_pos_int(p.requests, where .. ".prefill.requests", src, 0, 1e6) end
      check_pos_int(p.query_len, where .. ".prefill.query_len", src, 1, MAX_POS)
      if p.context ~= nil and p.context_len ~= nil then
        fail(("%s: field '%s.prefill': give context (the last row's visible length) or context_len (positions before the query), not both"):format(src, where))
      end
      if p.context_len ~= nil then check_pos_int(p.context_len, where .. ".prefill.context_len", src, 0, MAX_POS) end
      if p.context ~= nil then
        check_pos_int(p.context, where .. ".prefill.context", src, 1, MAX_POS)
        if p.context < p.query_len then
          fail(("%s: field '%s.prefill.context' = %d: must be >= query_len (%d): it is the last row's visible length")
            :format(src, where, p.context, p.query_len))
        end
      elseif p.context_len == nil then
        fail(("%s: field '%s.prefill': needs context or context_len"):format(src, where))
      end
    end
  end
  -- the generator's own checks (the batch's requests, the knobs' C ranges), before anything runs
  local ok, why = workload_check(wl)
  if not ok then fail(("%s: field '%s': %s"):format(src, where, (why:gsub("^idxlab: ", "")))) end
end
M.check_workload = check_workload

-- Classifies a sweep/--set key: "config" (a builder field), "workload", "seed", "backend".
-- Returns kind and the normalised key.
local function sweep_key_kind(key)
  if type(key) ~= "string" then return nil end
  local bare = key:match("^config%.(.+)$") or key
  if is_config_field(bare) then return "config", bare end
  if key == "seed" or key == "backend" then return key, key end
  if key:match("^workload%.[%a_][%w_]*$") or key:match("^workload%.[%a_][%w_]*%.[%a_][%w_]*$") then
    return "workload", key
  end
  return nil
end

local function sweep_known()
  local k = field_names()
  k[#k + 1] = "seed"
  k[#k + 1] = "backend"
  return k
end

-- Normalises and validates an experiment table (not yet expanded). Returns a new table with
-- defaults filled in.
local function validate(exp, src)
  if type(exp) ~= "table" then fail(("%s: the experiment must be a table, got %s"):format(src, type(exp))) end
  check_plain(exp, "", src, {}, 0)
  for k in pairs(exp) do
    if type(k) ~= "string" or not top_known[k] then
      fail(("%s: field '%s': unknown experiment field%s (fields: %s)"):format(src, tostring(k),
        suggest(k, M.TOP_FIELDS), table.concat(M.TOP_FIELDS, ", ")))
    end
  end
  local e = deep_copy(exp)
  -- name: also a directory name
  if type(e.name) ~= "string" or not e.name:match("^[%w][%w_.%-]*$") or #e.name > 100 then
    fail(("%s: field 'name' = %s: must be a name of letters, digits, '_', '.' and '-' (it names results/<name>/)")
      :format(src, show(e.name)))
  end
  if e.question ~= nil and type(e.question) ~= "string" then
    fail(("%s: field 'question' = %s: must be a string"):format(src, show(e.question)))
  end
  e.seed = e.seed == nil and 0 or e.seed
  if not is_int(e.seed) or e.seed < 0 then
    fail(("%s: field 'seed' = %s: must be an integer in [0, 2^53)"):format(src, show(e.seed)))
  end
  e.backend = e.backend == nil and "auto" or e.backend
  if not BACKENDS[e.backend] then
    fail(("%s: field 'backend' = %s: must be cpu, cuda or auto"):format(src, show(e.backend)))
  end
  e.mode = e.mode == nil and "step" or e.mode
  if e.mode ~= "step" and e.mode ~= "chunks" then
    fail(("%s: field 'mode' = %s: must be \"step\" (the pipeline) or \"chunks\" (the chunker only)"):format(src, show(e.mode)))
  end
  e.repeats = e.repeats == nil and 1 or e.repeats
  if not is_int(e.repeats) or e.repeats < 1 or e.repeats > 1000 then
    fail(("%s: field 'repeats' = %s: must be an integer in [1, 1000]"):format(src, show(e.repeats)))
  end
  if e.by ~= nil and e.by ~= "length" then
    fail(("%s: field 'by' = %s: must be \"length\" or left out"):format(src, show(e.by)))
  end
  if e.by ~= nil and e.mode == "chunks" then
    fail(("%s: field 'by' = \"length\": only for mode = \"step\" (the chunker measures no rows)"):format(src))
  end
  if e.on_backend ~= nil then
    if type(e.on_backend) ~= "table" then fail(("%s: field 'on_backend' = %s: must be { cpu = {...}, cuda = {...} }"):format(src, show(e.on_backend))) end
    for b, ob in pairs(e.on_backend) do
      if b ~= "cpu" and b ~= "cuda" then fail(("%s: field 'on_backend.%s': unknown backend (cpu, cuda)"):format(src, tostring(b))) end
      if type(ob) ~= "table" then fail(("%s: field 'on_backend.%s' must be a table { workload = ..., timing = ... }"):format(src, b)) end
      for k in pairs(ob) do
        if k ~= "workload" and k ~= "timing" then fail(("%s: field 'on_backend.%s.%s': unknown (workload, timing)"):format(src, b, tostring(k))) end
      end
      if ob.workload ~= nil then check_workload(ob.workload, src, "on_backend." .. b .. ".workload") end
    end
  end
  if e.timing ~= nil then
    if type(e.timing) ~= "table" then fail(("%s: field 'timing' = %s: must be { warmup = n, iters = n }"):format(src, show(e.timing))) end
    for k in pairs(e.timing) do
      if k ~= "warmup" and k ~= "iters" then
        fail(("%s: field 'timing.%s': unknown (warmup, iters)%s"):format(src, tostring(k), suggest(k, { "warmup", "iters" })))
      end
    end
    if e.timing.warmup ~= nil then check_pos_int(e.timing.warmup, "timing.warmup", src, 0, 1000) end
    if e.timing.iters ~= nil then check_pos_int(e.timing.iters, "timing.iters", src, 1, 1000) end
  end
  -- config: builder fields only (values are checked per point by config.resolve)
  e.config = e.config == nil and {} or e.config
  if type(e.config) ~= "table" or (next(e.config) ~= nil and is_list(e.config)) then
    fail(("%s: field 'config' = %s: must be a table of builder config fields"):format(src, show(e.config)))
  end
  for k in pairs(e.config) do
    if type(k) ~= "string" or not is_config_field(k) then
      fail(("%s: field 'config.%s': unknown config field%s"):format(src, tostring(k), suggest(k, field_names())))
    end
  end
  e.workload = e.workload == nil and {} or e.workload
  check_workload(e.workload, src)
  if e.mode == "chunks" and not e.workload.prefill then
    fail(("%s: mode = \"chunks\" needs workload.prefill (the requests the chunker plans)"):format(src))
  end
  if e.mode == "chunks" and (e.workload.kind or "synthetic") ~= "synthetic" then
    fail(("%s: mode = \"chunks\" needs a synthetic workload with prefill requests"):format(src))
  end
  -- sweep
  e.sweep = e.sweep == nil and {} or e.sweep
  if type(e.sweep) ~= "table" or (next(e.sweep) ~= nil and is_list(e.sweep)) then
    fail(("%s: field 'sweep' = %s: must map fields to lists of values"):format(src, show(e.sweep)))
  end
  local norm = {}
  local dup = {} -- a value listed twice: an error unless the list is zipped with others
  for k, v in pairs(e.sweep) do
    local kind, key = sweep_key_kind(k)
    if not kind then
      fail(("%s: field 'sweep.%s': unknown field%s; a sweep varies a builder config field, seed, backend or workload.<knob>")
        :format(src, tostring(k), suggest(k, sweep_known())))
    end
    if norm[key] ~= nil then fail(("%s: field 'sweep.%s': given twice (as %s and config.%s)"):format(src, key, key, key)) end
    if key == "sparse_block_kv" and (v == "all" or (is_list(v) and #v == 1 and v[1] == "all")) then
      norm[key] = "all"
    else
      if not is_list(v) or #v == 0 then
        fail(("%s: field 'sweep.%s' = %s: must be a non-empty list of values%s"):format(src, key, show(v),
          key == "sparse_block_kv" and " or \"all\"" or ""))
      end
      if #v > 10000 then fail(("%s: field 'sweep.%s': %d values: at most 10000"):format(src, key, #v)) end
      local seen = {}
      for i, x in ipairs(v) do
        local tx = type(x)
        if tx ~= "number" and tx ~= "string" and tx ~= "boolean" and not (kind == "workload" and tx == "table") then
          fail(("%s: field 'sweep.%s[%d]' = %s: must be a number, string or boolean"):format(src, key, i, show(x)))
        end
        if x == "all" then
          fail(("%s: field 'sweep.%s[%d]' = \"all\": only sparse_block_kv = \"all\" (alone) means every valid choice")
            :format(src, key, i))
        end
        local sk = type(x) == "table" and results.canonical(x) or (type(x) .. ":" .. tostring(x))
        if seen[sk] and not dup[key] then dup[key] = { i = i, x = x } end
        seen[sk] = true
        if kind == "seed" and (not is_int(x) or x < 0) then
          fail(("%s: field 'sweep.seed[%d]' = %s: must be an integer in [0, 2^53)"):format(src, i, show(x)))
        end
        if kind == "backend" and not BACKENDS[x] then
          fail(("%s: field 'sweep.backend[%d]' = %s: must be cpu, cuda or auto"):format(src, i, show(x)))
        end
      end
      norm[key] = v
    end
    if kind == "config" and e.config[key] ~= nil then
      -- the sweep wins; the base value would be silently ignored otherwise
      e.config[key] = nil
    end
  end
  e.sweep = norm
  -- zip
  if e.zip ~= nil and type(e.zip) ~= "boolean" then
    if not is_list(e.zip) or #e.zip == 0 then
      fail(("%s: field 'zip' = %s: must be true, false or a list of groups of swept fields, e.g. { {\"candidate_block_size\", \"candidate_topk_blocks\"} }")
        :format(src, show(e.zip)))
    end
    local used = {}
    for gi, g in ipairs(e.zip) do
      if not is_list(g) or #g < 1 then
        fail(("%s: field 'zip[%d]' = %s: must be a list of swept field names"):format(src, gi, show(g)))
      end
      local len
      for fi, f in ipairs(g) do
        local w = ("zip[%d][%d]"):format(gi, fi)
        if type(f) ~= "string" then fail(("%s: field '%s' = %s: must be a swept field name"):format(src, w, show(f))) end
        local _, key = sweep_key_kind(f)
        key = key or f
        if e.sweep[key] == nil then
          local swept = sorted_keys(e.sweep)
          fail(("%s: field '%s' = %s: not a swept field%s (swept: %s)"):format(src, w, show(f), suggest(f, swept),
            #swept > 0 and table.concat(swept, ", ") or "none"))
        end
        if e.sweep[key] == "all" then
          fail(("%s: field '%s': sparse_block_kv = \"all\" depends on each point and cannot be zipped"):format(src, w))
        end
        if used[key] then fail(("%s: field '%s': %s is in two zip groups"):format(src, w, key)) end
        used[key] = true
        g[fi] = key
        if len and #e.sweep[key] ~= len then
          fail(("%s: field 'zip[%d]': zipped lists must have equal lengths: %s has %d values, %s has %d")
            :format(src, gi, g[1], len, key, #e.sweep[key]))
        end
        len = len or #e.sweep[key]
      end
    end
  elseif e.zip == true then
    local group, len, first = {}, nil, nil
    for _, key in ipairs(sorted_keys(e.sweep)) do
      if e.sweep[key] ~= "all" then
        group[#group + 1] = key
        if len and #e.sweep[key] ~= len then
          fail(("%s: field 'zip' = true: zipped lists must have equal lengths: %s has %d values, %s has %d")
            :format(src, first, len, key, #e.sweep[key]))
        end
        len = len or #e.sweep[key]
        first = first or key
      end
    end
  end
  local zipped = {}
  if e.zip == true then
    for k, v in pairs(e.sweep) do if v ~= "all" then zipped[k] = true end end
  elseif type(e.zip) == "table" then
    for _, g in ipairs(e.zip) do
      if #g >= 2 then for _, f in ipairs(g) do zipped[f] = true end end
    end
  end
  for _, key in ipairs(sorted_keys(dup)) do
    if not zipped[key] then
      fail(("%s: field 'sweep.%s[%d]' = %s: listed twice (the point would run twice; use repeats)"):format(src, key,
        dup[key].i, show(dup[key].x)))
    end
  end
  -- metrics
  if e.metrics ~= nil then
    if not is_list(e.metrics) or #e.metrics == 0 then
      fail(("%s: field 'metrics' = %s: must be a non-empty list of metric names"):format(src, show(e.metrics)))
    end
    for i, m in ipairs(e.metrics) do
      if not is_metric(e.mode, m) then
        fail(("%s: field 'metrics[%d]' = %s: not a metric of mode %s%s (metrics: %s)"):format(src, i, show(m), e.mode,
          suggest(m, metric_names(e.mode)), table.concat(metric_names(e.mode), ", ")))
      end
    end
  end
  -- plots
  local swept_keys = sorted_keys(e.sweep)
  local function is_swept(f) return e.sweep[f] ~= nil end
  if e.plots ~= nil then
    if not is_list(e.plots) then fail(("%s: field 'plots' = %s: must be a list of { x = field, y = metric, series = field }"):format(src, show(e.plots))) end
    for i, p in ipairs(e.plots) do
      local w = ("plots[%d]"):format(i)
      if type(p) ~= "table" then fail(("%s: field '%s' = %s: must be { x = field, y = metric, series = field }"):format(src, w, show(p))) end
      for k in pairs(p) do
        if not ({ x = true, y = true, series = true, title = true, logx = true, logy = true, name = true })[k] then
          fail(("%s: field '%s.%s': unknown (x, y, series, title, logx, logy, name)%s"):format(src, w, tostring(k),
            suggest(k, { "x", "y", "series", "title", "logx", "logy", "name" })))
        end
      end
      if type(p.x) ~= "string" then fail(("%s: field '%s.x' = %s: must name a swept field"):format(src, w, show(p.x))) end
      local _, xkey = sweep_key_kind(p.x)
      p.x = xkey or p.x
      if not is_swept(p.x) then
        fail(("%s: field '%s.x' = %s: not a swept field%s (swept: %s)"):format(src, w, show(p.x), suggest(p.x, swept_keys),
          #swept_keys > 0 and table.concat(swept_keys, ", ") or "none"))
      end
      local ys = type(p.y) == "table" and p.y or { p.y }
      if not is_list(ys) or #ys == 0 then fail(("%s: field '%s.y': must be a metric or a list of metrics"):format(src, w)) end
      for j, y in ipairs(ys) do
        if not is_metric(e.mode, y) then
          fail(("%s: field '%s.y' = %s: not a metric of mode %s%s"):format(src, w, show(y), e.mode, suggest(y, metric_names(e.mode))))
        end
        ys[j] = y
      end
      if p.series ~= nil then
        if type(p.series) ~= "string" then fail(("%s: field '%s.series' = %s: must name a swept field"):format(src, w, show(p.series))) end
        local _, skey = sweep_key_kind(p.series)
        p.series = skey or p.series
        if not is_swept(p.series) then
          fail(("%s: field '%s.series' = %s: not a swept field%s (swept: %s)"):format(src, w, show(p.series),
            suggest(p.series, swept_keys), #swept_keys > 0 and table.concat(swept_keys, ", ") or "none"))
        end
        if p.series == p.x then fail(("%s: field '%s.series' = %s: the same field as x"):format(src, w, show(p.series))) end
      end
      for _, b in ipairs({ "logx", "logy" }) do
        if p[b] ~= nil and type(p[b]) ~= "boolean" then fail(("%s: field '%s.%s' = %s: must be true or false"):format(src, w, b, show(p[b]))) end
      end
      if p.title ~= nil and type(p.title) ~= "string" then fail(("%s: field '%s.title' = %s: must be a string"):format(src, w, show(p.title))) end
      if p.name ~= nil and (type(p.name) ~= "string" or not p.name:match("^[%w_%-]+$")) then
        fail(("%s: field '%s.name' = %s: must be a file name of letters, digits, '_' and '-'"):format(src, w, show(p.name)))
      end
    end
  end
  e.plots = e.plots or {}
  return e
end

---------------------------------------------------------------------------- --set

-- The value as config.parse_sets gives it: numbers, booleans, strings, lists (a,b,c).
local function parse_sets(sets, src)
  if sets == nil then return {} end
  if type(sets) ~= "table" then fail(("%s: --set values must be a list of \"key=value\" strings"):format(src)) end
  local list = {}
  for i, s in ipairs(sets) do
    if type(s) ~= "string" or not s:find("=", 1, true) then
      fail(("--set %s: must be key=value"):format(show(s)))
    end
    list[#list + 1] = s
  end
  if #list == 0 then return {} end
  local c = cfgmod()
  local ok, kv, order = pcall(c.parse_sets, list)
  if not ok then fail((clean(kv):gsub("^idxlab: ", ""))) end
  local out = {}
  for _, k in ipairs(order or sorted_keys(kv)) do out[#out + 1] = { k, kv[k] } end
  return out
end

local function remove_from_zip(e, key)
  if type(e.zip) ~= "table" then return end
  for gi = #e.zip, 1, -1 do
    local g = e.zip[gi]
    if type(g) == "table" then
      for fi = #g, 1, -1 do if g[fi] == key or g[fi] == "config." .. key then table.remove(g, fi) end end
      if #g == 0 then table.remove(e.zip, gi) end
    end
  end
  if #e.zip == 0 then e.zip = nil end
end

local function set_path(t, path, value, src, full)
  local parts = {}
  for p in path:gmatch("[^%.]+") do parts[#parts + 1] = p end
  local cur = t
  for i = 1, #parts - 1 do
    if cur[parts[i]] == nil then cur[parts[i]] = {} end
    if type(cur[parts[i]]) ~= "table" then
      fail(("--set %s: %s is a %s, not a table"):format(full, table.concat(parts, ".", 1, i), type(cur[parts[i]])))
    end
    cur = cur[parts[i]]
  end
  cur[parts[#parts]] = value
end

-- apply_sets(exp, {"key=value", ...}) -> a new experiment table with the overrides.
--   builder field (or config.<field>): a value sets config.<field> and drops it from the sweep;
--     a list a,b,c (or sparse_block_kv=all) sweeps it
--   sweep.<field>=a,b,c: sweeps it;  workload.<path>=v: sets that workload knob (a list value
--   stays a list: sweep a knob with sweep.workload.<path>=a,b)
--   name, question, seed, backend, repeats, mode, by, metrics, zip: set the field (seed and
--   backend also sweep given a list)
-- A field that --set fixes is no longer swept: plots along it go, series by it are dropped.
local function unplot(e, key)
  if type(e.plots) ~= "table" then return end
  for i = #e.plots, 1, -1 do
    local p = e.plots[i]
    if type(p) == "table" then
      local x = type(p.x) == "string" and (p.x:match("^config%.(.+)$") or p.x)
      local s = type(p.series) == "string" and (p.series:match("^config%.(.+)$") or p.series)
      if x == key then table.remove(e.plots, i) elseif s == key then p.series = nil end
    end
  end
end

local function apply_sets(exp, sets, src)
  local pairs_list = parse_sets(sets, src)
  local e = deep_copy(exp)
  for _, kvp in ipairs(pairs_list) do
    local key, value = kvp[1], kvp[2]
    local full = ("%s=%s"):format(tostring(key), show(value))
    if type(key) ~= "string" then fail(("--set %s: the key must be a name"):format(full)) end
    local listy = type(value) == "table"
    local sweep_key = key:match("^sweep%.(.+)$")
    if sweep_key then
      local kind, norm = sweep_key_kind(sweep_key)
      if not kind then
        fail(("--set %s: sweep.%s: unknown field%s; a sweep varies a builder config field, seed, backend or workload.<knob>")
          :format(full, sweep_key, suggest(sweep_key, sweep_known())))
      end
      e.sweep = type(e.sweep) == "table" and e.sweep or {}
      e.sweep[sweep_key] = nil
      e.sweep[norm] = (value == "all" or listy) and value or { value }
      if kind == "config" and type(e.config) == "table" then e.config[norm] = nil end
      if kind == "seed" then e.seed = nil end
      if kind == "backend" then e.backend = nil end
    elseif key:match("^workload%.") then
      if type(e.workload) ~= "table" then e.workload = {} end
      set_path(e.workload, key:sub(10), value, src, full)
      if type(e.sweep) == "table" then e.sweep[key] = nil end
      remove_from_zip(e, key)
      unplot(e, key)
    else
      local bare = key:match("^config%.(.+)$") or key
      if is_config_field(bare) then
        e.sweep = type(e.sweep) == "table" and e.sweep or {}
        e.config = type(e.config) == "table" and e.config or {}
        e.sweep[bare] = nil
        e.sweep["config." .. bare] = nil
        if listy or (bare == "sparse_block_kv" and value == "all") then
          e.sweep[bare] = value
          e.config[bare] = nil
        else
          e.config[bare] = value
          remove_from_zip(e, bare)
          unplot(e, bare)
        end
      elseif key == "seed" or key == "backend" then
        e.sweep = type(e.sweep) == "table" and e.sweep or {}
        e.sweep[key] = nil
        if listy then e.sweep[key] = value else e[key] = value; remove_from_zip(e, key); unplot(e, key) end
      elseif key:match("^timing%.") then
        if listy then fail(("--set %s: %s takes one value"):format(full, key)) end
        if type(e.timing) ~= "table" then e.timing = {} end
        e.timing[key:sub(8)] = value
      elseif key == "metrics" then
        e.metrics = listy and value or { value }
      elseif key == "name" or key == "question" or key == "repeats" or key == "mode" or key == "by" or key == "zip" then
        if listy then fail(("--set %s: %s takes one value"):format(full, key)) end
        e[key] = value
      else
        local known = { "name", "question", "seed", "backend", "repeats", "mode", "by", "metrics", "zip" }
        for _, f in ipairs(field_names()) do known[#known + 1] = f end
        fail(("--set %s: unknown key %s%s (builder config fields, seed, backend, repeats, mode, by, metrics, zip, name, question, timing.warmup, timing.iters, workload.<knob>, sweep.<field>)")
          :format(full, key, suggest(key, known)))
      end
    end
  end
  return e
end

---------------------------------------------------------------------------- expansion

-- The sweep's axes, in a fixed order: by field name, a zip group at the place of its first
-- field; sparse_block_kv = "all" last, since its values depend on the rest of each point.
local function axes_of(e)
  local grouped, axes = {}, {}
  local groups = {}
  if e.zip == true then
    local g = {}
    for _, k in ipairs(sorted_keys(e.sweep)) do if e.sweep[k] ~= "all" then g[#g + 1] = k end end
    if #g > 0 then groups[1] = g end
  elseif type(e.zip) == "table" then
    groups = e.zip
  end
  for _, g in ipairs(groups) do
    for _, f in ipairs(g) do grouped[f] = g end
  end
  local added = {}
  for _, k in ipairs(sorted_keys(e.sweep)) do
    if e.sweep[k] ~= "all" then
      local g = grouped[k]
      if g then
        if not added[g] then
          added[g] = true
          axes[#axes + 1] = { fields = g, n = #e.sweep[g[1]] }
        end
      else
        axes[#axes + 1] = { fields = { k }, n = #e.sweep[k] }
      end
    end
  end
  return axes
end

-- The swept keys in the order the tables show them (the axes' order, then sbk "all").
local function swept_order(e)
  local out = {}
  for _, a in ipairs(axes_of(e)) do for _, f in ipairs(a.fields) do out[#out + 1] = f end end
  if e.sweep.sparse_block_kv == "all" then out[#out + 1] = "sparse_block_kv" end
  return out
end

local function describe_params(params, order)
  local parts = {}
  for _, k in ipairs(order) do
    if params[k] ~= nil then parts[#parts + 1] = ("%s=%s"):format(k, type(params[k]) == "table" and results.canonical(params[k]) or tostring(params[k])) end
  end
  return table.concat(parts, " ")
end

-- The point's effective builder config, as the results rows show it: the resolved fields,
-- with sparse_block_kv and workspace_tokens as the builder chose them.
local function effective_config(resolved, info)
  local eff = deep_copy(resolved)
  if info.sparse_block_kv then eff.sparse_block_kv = info.sparse_block_kv end
  if info.workspace_tokens then eff.workspace_tokens = info.workspace_tokens end
  return eff
end

local function build_plan(e, src, source_path)
  local axes = axes_of(e)
  local order = swept_order(e)
  local total = 1
  for _, a in ipairs(axes) do
    total = total * a.n
    if total > M.MAX_POINTS then
      fail(("%s: the sweep expands to more than %d point configs; split it"):format(src, M.MAX_POINTS))
    end
  end
  local plan = { exp = e, source = source_path, points = {}, skipped = {}, swept = order, combos = 0 }
  local idx = { }
  for i = 1, #axes do idx[i] = 1 end
  local combo_index = 0
  local seen_hash = {}
  local function add_combo(params)
    -- the point's inputs
    local cfg_in = deep_copy(e.config)
    local wl = deep_copy(e.workload)
    local seed, backend = e.seed, e.backend
    for _, k in ipairs(order) do
      local v = params[k]
      if v ~= nil then
        local kind, key = sweep_key_kind(k)
        if kind == "config" then cfg_in[key] = v
        elseif kind == "seed" then seed = v
        elseif kind == "backend" then backend = v
        elseif kind == "workload" then
          set_workload(wl, k, v, src)
        end
      end
    end
    if next(params) ~= nil then check_workload(wl, src, "workload (with " .. describe_params(params, order) .. ")") end
    local function try(cfg_table, p)
      local resolved, err = resolve_config(cfg_table)
      if not resolved then
        -- a value config.resolve refuses is a bad value in the file, not a skipped point
        local where = next(p) ~= nil and (" (sweep point " .. describe_params(p, order) .. ")") or ""
        fail(("%s: field 'config'%s: %s"):format(src, where, err))
      end
      local info, verr = validate_config(resolved)
      combo_index = combo_index + 1
      if not info then
        plan.skipped[#plan.skipped + 1] = { params = p, reason = verr, desc = describe_params(p, order) }
        return
      end
      if e.mode == "step" and (wl.kind or "synthetic") == "synthetic" then
        -- a step the config cannot take (more rows than max_rows, a request longer than
        -- max_model_len) is an invalid combination: skipped and reported, like a config rule
        local fits, why = workload_check(wl, resolved)
        if not fits then
          plan.skipped[#plan.skipped + 1] = { params = p, reason = (why:gsub("^idxlab: ", "")), desc = describe_params(p, order) }
          return
        end
      end
      local eff = effective_config(resolved, info)
      local what = { mode = e.mode, backend = backend, config = eff, workload = wl,
        seed = seed, by = e.by or false, timing = e.timing or false }
      -- what a backend's on_backend entry replaces is part of the point too (absent: the
      -- hash stays as it was for files without one)
      if e.on_backend ~= nil then what.on_backend = e.on_backend end
      local hash = results.hash(results.canonical(what))
      local same = seen_hash[hash]
      if same then
        -- e.g. sparse_block_kv = auto and = 8 resolve to one config: one measurement, not two
        plan.skipped[#plan.skipped + 1] = { params = p, desc = describe_params(p, order),
          reason = ("the same point as %s once resolved (config_hash %s)"):format(same ~= "" and same or "the base config", hash) }
        return
      end
      seen_hash[hash] = describe_params(p, order)
      for r = 0, e.repeats - 1 do
        local pt = {
          index = #plan.points, ["repeat"] = r, params = p, desc = describe_params(p, order),
          config = resolved, effective = eff, info = info, workload = wl, seed = seed + r, base_seed = seed,
          backend = backend, hash = hash, combo = plan.combos,
        }
        plan.points[#plan.points + 1] = pt
      end
      plan.combos = plan.combos + 1
      if #plan.points > M.MAX_POINTS then
        fail(("%s: the sweep expands to more than %d points; split it"):format(src, M.MAX_POINTS))
      end
    end
    if e.sweep.sparse_block_kv == "all" then
      local base = deep_copy(cfg_in)
      base.sparse_block_kv = nil
      local resolved, err = resolve_config(base)
      if not resolved then
        local where = next(params) ~= nil and (" (sweep point " .. describe_params(params, order) .. ")") or ""
        fail(("%s: field 'config'%s: %s"):format(src, where, err))
      end
      local list, lerr = valid_sbk(resolved)
      if not list or #list == 0 then
        plan.skipped[#plan.skipped + 1] = { params = params, desc = describe_params(params, order) .. " sparse_block_kv=all",
          reason = lerr or "no valid sparse_block_kv for this config" }
        return
      end
      for _, sbk in ipairs(list) do
        local p = deep_copy(params)
        p.sparse_block_kv = sbk
        local c2 = deep_copy(cfg_in)
        c2.sparse_block_kv = sbk
        try(c2, p)
      end
    else
      try(cfg_in, params)
    end
  end
  if #axes == 0 then
    add_combo({})
  else
    while true do
      local params = {}
      for ai, a in ipairs(axes) do
        for _, f in ipairs(a.fields) do params[f] = e.sweep[f][idx[ai]] end
      end
      add_combo(params)
      -- the last axis varies fastest
      local ai = #axes
      while ai >= 1 do
        idx[ai] = idx[ai] + 1
        if idx[ai] <= axes[ai].n then break end
        idx[ai] = 1
        ai = ai - 1
      end
      if ai == 0 then break end
    end
  end
  if #plan.points == 0 then
    local first = plan.skipped[1]
    fail(("%s: no valid point: every point config is refused by the builder or does not fit its workload%s"):format(src,
      first and (" (e.g. " .. (first.desc ~= "" and first.desc .. ": " or "") .. first.reason .. ")") or ""))
  end
  -- the metrics the table shows
  plan.metrics = e.metrics or (e.mode == "chunks" and report.DEFAULT_CHUNK_TABLE or report.DEFAULT_STEP_TABLE)
  return plan
end

---------------------------------------------------------------------------- plan (public)

local function parse_shard(shard)
  if shard == nil then return nil end
  local i, n
  if type(shard) == "string" then
    i, n = shard:match("^(%d+)/(%d+)$")
    i, n = tonumber(i), tonumber(n)
  elseif type(shard) == "table" then
    i, n = shard[1] or shard.index, shard[2] or shard.count
  end
  if not is_int(i) or not is_int(n) or n < 1 or i < 0 or i >= n then
    fail(("shard = %s: must be i/n with 0 <= i < n (e.g. 0/4)"):format(show(shard)))
  end
  return { i = i, n = n }
end
M.parse_shard = parse_shard

local function plan_impl(src_in, opts)
  opts = opts or {}
  if type(opts) ~= "table" then fail("options must be a table") end
  local exp, src, path
  if type(src_in) == "string" then
    path = src_in
    src = src_in
    exp = load_file(src_in)
  elseif type(src_in) == "table" then
    src = "experiment table"
    exp = src_in
    check_plain(exp, "", src, {}, 0)
  else
    fail(("run: the experiment must be a file path or a table, got %s"):format(type(src_in)))
  end
  if opts.set ~= nil then
    if type(exp) ~= "table" then fail(("%s: the experiment must be a table, got %s"):format(src, type(exp))) end
    check_plain(exp, "", src, {}, 0)
    exp = apply_sets(exp, opts.set, src)
  end
  local e = validate(exp, src)
  local plan = build_plan(e, src, path)
  plan.sets = opts.set
  plan.shard = parse_shard(opts.shard)
  return plan
end

-- plan(file_or_table, opts) -> plan { exp, points, skipped, swept, metrics, combos, shard }.
-- opts: set = {"k=v", ...}, shard = "i/n".
-- (Each public function keeps its own frame, no tail call, so level 3 in public() is its caller.)
function M.plan(src, opts) local p = public(plan_impl, src, opts) return p end

function M.load(path) local t = public(load_file, path) return t end

function M.validate(exp, src) local e = public(validate, exp, src or "experiment table") return e end

function M.apply_sets(exp, sets) local e = public(apply_sets, exp, sets, "experiment table") return e end

---------------------------------------------------------------------------- dry run

local function config_line(cfg)
  local parts = {}
  local names = field_names()
  local seen = {}
  for _, f in ipairs(names) do
    if cfg[f] ~= nil then parts[#parts + 1] = ("%s=%s"):format(f, tostring(cfg[f])); seen[f] = true end
  end
  for _, f in ipairs(sorted_keys(cfg)) do
    if not seen[f] then parts[#parts + 1] = ("%s=%s"):format(tostring(f), tostring(cfg[f])) end
  end
  return table.concat(parts, " ")
end

local function in_shard(plan, pt)
  return not plan.shard or pt.index % plan.shard.n == plan.shard.i
end

-- The plan as text: every point config with its full builder config, and the skipped ones.
function M.describe(plan)
  local e = plan.exp
  local out = {}
  out[#out + 1] = ("experiment %s%s%s"):format(e.name, plan.source and (" (" .. plan.source .. ")") or "",
    e.question and (": " .. e.question) or "")
  out[#out + 1] = ("mode %s, backend %s, seed %d, repeats %d%s; workload %s"):format(e.mode, e.backend, e.seed, e.repeats,
    e.by and (", by " .. e.by) or "", results.canonical(e.workload))
  local nrun = 0
  for _, pt in ipairs(plan.points) do if in_shard(plan, pt) then nrun = nrun + 1 end end
  out[#out + 1] = ("%d points (%d point configs x %d repeats), %d skipped%s"):format(#plan.points, plan.combos,
    e.repeats, #plan.skipped, plan.shard and (("; shard %d/%d runs %d of them"):format(plan.shard.i, plan.shard.n, nrun)) or "")
  if #plan.swept > 0 then out[#out + 1] = "swept: " .. table.concat(plan.swept, ", ") end
  out[#out + 1] = ""
  local last_combo = -1
  for _, pt in ipairs(plan.points) do
    if pt.combo ~= last_combo then
      last_combo = pt.combo
      local idxs = {}
      for r = 0, e.repeats - 1 do
        local p = pt.index + r
        idxs[#idxs + 1] = tostring(p) .. ((plan.shard and not in_shard(plan, plan.points[p + 1])) and "(other shard)" or "")
      end
      out[#out + 1] = ("point %s  [%s]%s"):format(table.concat(idxs, ","), pt.hash, pt.desc ~= "" and ("  " .. pt.desc) or "")
      out[#out + 1] = "  config: " .. config_line(pt.effective)
      if pt.backend ~= e.backend then out[#out + 1] = "  backend: " .. pt.backend end
      for _, k in ipairs(plan.swept) do
        if k:match("^workload%.") then out[#out + 1] = "  workload: " .. results.canonical(pt.workload) break end
      end
    end
  end
  if #plan.skipped > 0 then
    out[#out + 1] = ""
    out[#out + 1] = ("skipped (%d: refused by the builder, too small for the workload, or the same as another point):"):format(#plan.skipped)
    for _, s in ipairs(plan.skipped) do
      out[#out + 1] = ("  %s: %s"):format(s.desc ~= "" and s.desc or "(base config)", s.reason)
    end
  end
  return table.concat(out, "\n") .. "\n"
end

function M.dry_run(src, opts)
  local plan = public(plan_impl, src, opts)
  local text = M.describe(plan)
  local stream = (opts and opts.stdout) or io.stdout
  stream:write(text)
  return plan, text
end

---------------------------------------------------------------------------- measuring

-- A deterministic stand-in for pipeline.measure, for tests of the runner (no kernels run):
-- metrics follow simple smooth laws of the config (recall rises with the candidate budget)
-- plus seeded noise. The slow variant sleeps first (kill-mid-run tests).
local function fake_rand(seed, salt)
  local h = results.hash(("%s/%s"):format(tostring(seed), salt))
  return tonumber(h, 16) / 4294967296
end

function M.fake_measure(ctx, point, delay_s)
  if delay_s and delay_s > 0 then
    local ffi = require("ffi")
    pcall(ffi.cdef, "int usleep(unsigned int usec);")
    ffi.C.usleep(math.floor(delay_s * 1e6))
  end
  local cfg, wl = point.config, point.workload or {}
  local T, cbs = cfg.candidate_topk_blocks or 2048, cfg.candidate_block_size or 8
  local context = (wl.decode and wl.decode.context) or 32768
  local locality = tonumber(wl.locality) or 1
  local budget = T * cbs
  local L = wl.consumer_layers or 2
  local row = { per_layer = {} }
  local sums = {}
  local active = budget < context and 4 or 0
  for l = 1, L do
    local noise = (fake_rand(point.seed, "l" .. l) - 0.5) * 0.01
    local recall = math.min(1, 1 - math.exp(-budget / context * 4 * locality) + noise)
    local m = {
      logit_mismatches = 0, logit_diff = 0, selection_agreement = 1, fp32_selection_agreement = 0.99,
      recall_at_k = recall, mass_recall = math.min(1, recall + 0.02), candidate_coverage = math.min(1, recall + 0.01),
      active_rows = active, time_sparse_logits_us = budget * 0.01 * (1 + noise), time_topk_us = 5, time_remap_us = 1,
    }
    if active == 0 then
      m.recall_at_k, m.mass_recall, m.candidate_coverage, m.selection_agreement, m.fp32_selection_agreement = nil, nil, nil, nil, nil
    end
    row.per_layer[l] = m
    for k, v in pairs(m) do sums[k] = (sums[k] or 0) + v end
  end
  for k, v in pairs(sums) do row[k] = k:match("^time_") and v or v / L end -- stage times: summed over layers
  row.logit_mismatches = 0
  row.active_rows = active
  row.time_dense_logits_us = context * 0.05
  row.time_candidate_select_us = context * 0.001
  row.time_expand_us = 2
  row.time_step_us = row.time_dense_logits_us + (row.time_sparse_logits_us or 0)
  row.scratch_bytes = (point.config.max_rows or 8192) * (T * cbs / (cfg.sparse_block_kv == "auto" and 8 or cfg.sparse_block_kv or 8) + 8) * 4
  row.logits_bytes = context * 4 * 4
  row.num_chunks = 0
  if point.by == "length" then
    row.by_length = {
      { bucket = 1024, rows = 2, active_rows = 0, active = false },
      { bucket = 32768, rows = 4, active_rows = active, active = active > 0, recall_at_k = row.recall_at_k },
    }
  end
  return row
end

-- Budget-only measurement (mode = "chunks"): the chunker's plan for the workload's prefill
-- requests, sparse (min_split_seq_len clamp) and dense; no kernels.
-- The prefill requests of the workload, as the generator lays them out (seq_len = positions
-- the request's K spans, query_len = its rows).
local function prefill_requests(wl)
  local wm = workload_module()
  if not wm or type(wm.requests) ~= "function" then fail("mode = \"chunks\" needs idxlab.workload (its requests)") end
  local only = deep_copy(wl)
  only.decode = false
  local reqs = {}
  for _, r in ipairs(wm.requests(only)) do
    if r.kind == "prefill" then reqs[#reqs + 1] = { seq_len = r.seq_len, query_len = r.query_len } end
  end
  return reqs
end

local function chunk_stats(chunks, summary)
  local list = chunks
  if type(chunks) == "table" and chunks.chunks then list = chunks.chunks end
  summary = summary or (type(chunks) == "table" and chunks.summary) or {}
  local n, maxrows, sumrows, peak, subs = 0, 0, 0, 0, 0
  for _, c in ipairs(list) do
    n = n + 1
    local rows = c.rows or 0
    maxrows = math.max(maxrows, rows)
    sumrows = sumrows + rows
    peak = math.max(peak, c.logits_bytes or 0)
    if c.sub_chunk or c.is_sub_chunk then subs = subs + 1 end
  end
  return {
    num_chunks = summary.num_chunks or n,
    max_rows_per_chunk = summary.max_rows_per_chunk or maxrows,
    mean_rows_per_chunk = n > 0 and sumrows / n or 0,
    peak_logits_bytes = summary.peak_logits_bytes or peak,
    sub_chunks = subs,
  }
end

function M.measure_chunks(point)
  local ok, chunker = pcall(require, "idxlab.chunker")
  if not ok then fail("mode = \"chunks\" needs idxlab.chunker: " .. clean(chunker)) end
  local reqs = prefill_requests(point.workload)
  local s_chunks, s_sum = chunker.plan(point.config, reqs, { sparse = true })
  local d_chunks, d_sum = chunker.plan(point.config, reqs, { sparse = false })
  local s, d = chunk_stats(s_chunks, s_sum), chunk_stats(d_chunks, d_sum)
  local row = s
  row.dense_num_chunks = d.num_chunks
  row.dense_max_rows_per_chunk = d.max_rows_per_chunk
  row.dense_peak_logits_bytes = d.peak_logits_bytes
  row.min_split_seq_len = point.info and point.info.min_split_seq_len
  return row
end

---------------------------------------------------------------------------- provenance

local function repo_root()
  local r = os.getenv("IDXLAB_ROOT")
  if r and r ~= "" then return r end
  local src = debug.getinfo(1, "S").source
  src = src:sub(1, 1) == "@" and src:sub(2) or src
  local dir = src:match("^(.*)/[^/]*$") or "."
  return dir .. "/../.."
end

local git_cache
function M.git_info()
  if git_cache then return git_cache end
  local root = results.shell_quote(repo_root())
  local f = io.popen("git -C " .. root .. " rev-parse HEAD 2>/dev/null")
  local commit = f and f:read("*l") or nil
  if f then f:close() end
  local info = { commit = "unknown", dirty = nil }
  if commit and commit:match("^%x+$") and #commit >= 40 then
    info.commit = commit
    local g = io.popen("git -C " .. root .. " status --porcelain --untracked-files=no 2>/dev/null")
    local text = g and g:read("*a") or ""
    if g then g:close() end
    info.dirty = text:match("%S") ~= nil
  end
  git_cache = info
  return info
end

local function utc_now() return os.date("!%Y-%m-%dT%H:%M:%SZ") end

---------------------------------------------------------------------------- run

local QUALITY = { "selection_agreement", "fp32_selection_agreement", "recall_at_k", "mass_recall", "candidate_coverage" }

local META_HEAD = { "schema", "experiment", "point", "repeat", "config_hash", "seed", "backend", "device", "mode" }
local META_TAIL = { "per_layer", "by_length", "workload", "idxlab_version", "git_commit", "git_dirty", "wall_time_s", "finished_at" }

local function row_order(plan)
  local order = {}
  for _, k in ipairs(META_HEAD) do order[#order + 1] = k end
  for _, k in ipairs(plan.swept) do order[#order + 1] = k end
  for _, k in ipairs(field_names()) do order[#order + 1] = k end
  for _, k in ipairs(metric_names(plan.exp.mode)) do order[#order + 1] = k end
  for _, k in ipairs(META_TAIL) do order[#order + 1] = k end
  return order
end

-- The saved form of the experiment and its plan (experiment.json): what report and merge read.
local function plan_record(plan)
  local e = plan.exp
  local pts = {}
  for _, pt in ipairs(plan.points) do
    pts[#pts + 1] = { point = pt.index, ["repeat"] = pt["repeat"], config_hash = pt.hash, params = pt.params }
  end
  local skipped = {}
  for _, s in ipairs(plan.skipped) do skipped[#skipped + 1] = { params = s.params, reason = s.reason } end
  return {
    schema = results.SCHEMA, name = e.name, question = e.question, source = plan.source, sets = plan.sets,
    seed = e.seed, backend = e.backend, mode = e.mode, by = e.by, repeats = e.repeats, timing = e.timing,
    workload = e.workload, config = e.config, sweep = e.sweep, zip = e.zip, metrics = plan.metrics,
    plots = e.plots, swept = plan.swept, points = pts, skipped = skipped,
  }
end
M.plan_record = plan_record

local function build_row(plan, pt, measured, ctx_backend, device, version, git, wall, measured_workload)
  local row = {}
  -- metrics first, so the point's own fields below always win a name clash
  for k, v in pairs(measured or {}) do
    if type(k) == "string" then row[k] = v end
  end
  row.schema = results.SCHEMA
  row.experiment = plan.exp.name
  row.point = pt.index
  row["repeat"] = pt["repeat"]
  row.config_hash = pt.hash
  row.seed = pt.seed
  row.backend = ctx_backend
  row.device = device
  row.mode = plan.exp.mode
  for k, v in pairs(pt.effective) do row[k] = v end
  -- swept values that are not builder fields (workload.<knob>); builder fields are already
  -- there as the builder resolved them (a swept "64MiB" shows as its byte count)
  for k, v in pairs(pt.params) do
    if type(v) ~= "table" and pt.effective[k] == nil and k ~= "seed" and k ~= "backend" then row[k] = v end
  end
  row.seed = pt.seed
  -- a metric without a value (no active rows) is written as null, not left out
  local null = require("idxlab.json").null
  for _, m in ipairs(metric_names(plan.exp.mode)) do
    if row[m] == nil then row[m] = null end
  end
  if type(row.per_layer) == "table" then
    for _, l in ipairs(row.per_layer) do
      if type(l) == "table" then
        for _, m in ipairs(QUALITY) do if l[m] == nil then l[m] = null end end
      end
    end
  end
  row.workload = measured_workload or pt.workload -- what the measure ran (on_backend applied)
  row.idxlab_version = version
  row.git_commit = git.commit
  row.git_dirty = git.dirty
  row.wall_time_s = wall
  row.finished_at = utc_now()
  return row
end

local function is_interrupt(err)
  return tostring(err):find("interrupted!", 1, true) ~= nil
end

local function default_dir(plan, opts)
  local base = opts.out or "results"
  local dir = base .. "/" .. plan.exp.name
  if plan.shard and plan.shard.n > 1 then dir = ("%s/shard-%d-of-%d"):format(dir, plan.shard.i, plan.shard.n) end
  return dir
end

-- Compares a saved plan (experiment.json) with this one: the same points, the same configs.
local function same_plan(saved, rec)
  if type(saved) ~= "table" or type(saved.points) ~= "table" then return false, "no saved plan" end
  if saved.name ~= rec.name then return false, ("the experiment's name was %s"):format(tostring(saved.name)) end
  if #saved.points ~= #rec.points then
    return false, ("%d points then, %d now"):format(#saved.points, #rec.points)
  end
  for i, p in ipairs(rec.points) do
    local s = saved.points[i]
    if type(s) ~= "table" or s.config_hash ~= p.config_hash or s.point ~= p.point then
      return false, ("point %d's config differs (%s then, %s now)"):format(p.point, tostring(s and s.config_hash), p.config_hash)
    end
  end
  return true
end
M.same_plan = same_plan

local function resolve_measure(opts)
  local m = opts.measure
  local fake = os.getenv("IDXLAB_FAKE_MEASURE")
  if m == nil and fake and fake ~= "" then m = fake end
  if type(m) == "function" then return m, false end -- an injected measure gets real contexts
  if m == "fake" or m == "fast" then return function(ctx, pt) return M.fake_measure(ctx, pt) end, true end
  if m == "slow" then
    local delay = tonumber(os.getenv("IDXLAB_FAKE_DELAY") or "") or opts.fake_delay or 0.3
    return function(ctx, pt) return M.fake_measure(ctx, pt, delay) end, true
  end
  if m ~= nil then fail(("run: measure = %s: must be a function, \"fake\" or \"slow\""):format(show(m))) end
  return nil, false
end

local function run_impl(src, opts)
  opts = opts or {}
  if type(opts) ~= "table" then fail("run: options must be a table") end
  for k in pairs(opts) do
    local known = { set = 1, dry_run = 1, resume = 1, shard = 1, out = 1, dir = 1, measure = 1, fake_delay = 1,
      progress = 1, stdout = 1, stderr = 1, gnuplot = 1, quiet = 1, command = 1 }
    if not known[k] then
      fail(("run: option %s: unknown (set, dry_run, resume, shard, out, dir, measure, progress, stdout, stderr, gnuplot, quiet)")
        :format(tostring(k)))
    end
  end
  local stdout = opts.stdout or io.stdout
  local stderr = opts.stderr or io.stderr
  -- options that a run only reads later are checked now, before any file is touched
  for _, k in ipairs({ "out", "dir" }) do
    if opts[k] ~= nil and (type(opts[k]) ~= "string" or opts[k] == "") then
      fail(("run: %s = %s: must be a non-empty directory path"):format(k == "out" and "--out" or "dir", show(opts[k])))
    end
  end
  if opts.progress ~= nil and not progress.STYLES[opts.progress] then
    fail(("run: --progress = %s: must be bar, plain or off"):format(show(opts.progress)))
  end
  local plan = plan_impl(src, opts)
  if opts.dry_run then
    stdout:write(M.describe(plan))
    return { plan = plan, status = 0, dry_run = true }
  end
  local e = plan.exp
  local measure, is_fake = resolve_measure(opts)
  local dir = opts.dir or default_dir(plan, opts)
  results.mkdir_p(dir)
  local rec = plan_record(plan)
  local jpath = dir .. "/results.jsonl"
  local done = {}
  local prior = 0
  if opts.resume then
    local saved_text = results.read_file(dir .. "/experiment.json")
    if saved_text then
      local saved = results.decode(saved_text)
      local ok, why = same_plan(saved, rec)
      if not ok then
        fail(("--resume: %s holds results of a different plan (%s): run without --resume to start over, or use another --out")
          :format(dir, why))
      end
    end
    local repaired, info = results.repair_jsonl(jpath)
    if repaired then
      stderr:write(("idxlab: %s: removed a half-written last line (line %d: %s)\n"):format(jpath, info.torn_line, info.torn_reason))
    end
    local rows = results.read_jsonl(jpath)
    for _, r in ipairs(rows) do
      local pt = type(r.point) == "number" and plan.points[r.point + 1]
      if not pt or pt.hash ~= r.config_hash then
        fail(("--resume: %s has point %s with config %s, which this plan does not have: the experiment changed; run without --resume or use another --out")
          :format(jpath, tostring(r.point), tostring(r.config_hash)))
      end
      if done[r.point] then
        fail(("--resume: %s has point %d twice"):format(jpath, r.point))
      end
      done[r.point] = true
      prior = prior + 1
    end
  elseif results.exists(jpath) then
    local old = results.read_file(jpath)
    if old and old ~= "" then
      os.rename(jpath, jpath .. ".prev")
      stderr:write(("idxlab: %s: earlier results moved to results.jsonl.prev (use --resume to continue a run instead)\n"):format(jpath))
    end
  end
  results.write_atomic(dir .. "/experiment.json", results.encode(rec, { "schema", "name", "question", "source" }) .. "\n")
  local todo = {}
  for _, pt in ipairs(plan.points) do
    if in_shard(plan, pt) and not done[pt.index] then todo[#todo + 1] = pt end
  end
  for _, s in ipairs(plan.skipped) do
    stderr:write(("idxlab: skipped %s: %s\n"):format(s.desc ~= "" and s.desc or "(base config)", s.reason))
  end
  local prog = progress.new({ total = #todo, out = stderr, style = opts.progress or (opts.quiet and "off") or nil, title = e.name })
  if prior > 0 then prog:note(("resuming: %d points already done, %d to run"):format(prior, #todo)) end
  local app = results.open_jsonl(jpath, not opts.resume)
  local version = require("idxlab").version
  local git = M.git_info()
  local ctxs = {}
  local failed, new_rows = {}, 0
  local interrupted = false
  local main_metric = plan.metrics[1]
  if e.mode == "step" then
    for _, m in ipairs(plan.metrics) do if m == "recall_at_k" then main_metric = m end end
  end
  local function get_ctx(backend)
    if is_fake or e.mode == "chunks" then return nil end
    if not ctxs[backend] then ctxs[backend] = require("idxlab").context({ backend = backend }) end
    return ctxs[backend]
  end
  local real_measure = measure
  if not real_measure and e.mode == "step" then
    local okp, pipeline = pcall(require, "idxlab.pipeline")
    if not okp then fail("run: the pipeline (idxlab.pipeline) is not available: " .. clean(pipeline)) end
    real_measure = pipeline.measure
  end
  local loop_ok, loop_err = pcall(function()
    for _, pt in ipairs(todo) do
      prog:start_point(("point %d%s"):format(pt.index, pt.desc ~= "" and (" " .. pt.desc) or ""))
      local t0 = progress.now()
      local mpoint = { config = deep_copy(pt.config), workload = deep_copy(pt.workload), seed = pt.seed, by = e.by,
        timing = e.timing }
      local ok, measured, ctx_backend, device
      ok, measured = pcall(function()
        if e.mode == "chunks" then
          -- the chunker runs no kernel: the fake measures only replace an injected function
          mpoint.info = pt.info
          if type(opts.measure) == "function" then return opts.measure(nil, mpoint) end
          return M.measure_chunks(mpoint)
        end
        local ctx = get_ctx(pt.backend)
        if ctx then
          ctx_backend, device = ctx:backend(), ctx:device_name()
          -- on_backend[<backend>] replaces the workload and timing where that backend runs
          local ob = type(e.on_backend) == "table" and e.on_backend[ctx_backend]
          if type(ob) == "table" then
            if ob.workload ~= nil then
              -- the point's swept workload values apply on top of the backend's workload
              mpoint.workload = deep_copy(ob.workload)
              for _, k in ipairs(plan.swept or {}) do
                local v = pt.params[k]
                if v ~= nil and sweep_key_kind(k) == "workload" then set_workload(mpoint.workload, k, v, plan.source or "experiment") end
              end
            end
            if ob.timing ~= nil then mpoint.timing = deep_copy(ob.timing) end
          end
        end
        return real_measure(ctx, mpoint)
      end)
      if not ok and is_interrupt(measured) then
        interrupted = true
        break
      end
      if not ok then
        local msg = clean(measured)
        failed[#failed + 1] = { point = pt.index, desc = pt.desc, reason = msg }
        prog:fail_point(("idxlab: point %d%s failed: %s"):format(pt.index, pt.desc ~= "" and (" (" .. pt.desc .. ")") or "", msg))
      else
        if type(measured) ~= "table" then
          failed[#failed + 1] = { point = pt.index, desc = pt.desc, reason = "measure returned " .. type(measured) }
          prog:fail_point(("idxlab: point %d: measure returned %s, not a row"):format(pt.index, type(measured)))
        else
          if e.mode == "chunks" then ctx_backend, device = "none", "chunker (no kernels)"
          elseif is_fake then ctx_backend, device = ctx_backend or pt.backend, device or "fake" end
          local row = build_row(plan, pt, measured, ctx_backend, device, version, git, progress.now() - t0, mpoint.workload)
          app:append(row, row_order(plan))
          new_rows = new_rows + 1
          prog:finish_point(main_metric, row[main_metric])
        end
      end
    end
  end)
  app:close()
  prog:finish()
  for _, c in pairs(ctxs) do c:free() end
  if not loop_ok then
    if is_interrupt(loop_err) then interrupted = true else error(loop_err, 0) end
  end
  -- everything finished so far, resumed rows included
  local rows = results.read_jsonl(jpath)
  local saved = rec
  local out = report.write(dir, rows, saved, opts)
  if not opts.quiet then
    stdout:write("\n", out.summary)
    for _, m in ipairs(out.messages) do stdout:write(m, "\n") end
    stdout:write(("results in %s (results.jsonl, results.csv, summary.txt%s)\n"):format(dir,
      #(e.plots or {}) > 0 and ", plots" or ""))
  end
  for _, f in ipairs(failed) do
    stderr:write(("idxlab: point %d failed: %s\n"):format(f.point, f.reason))
  end
  local status = 0
  if interrupted then
    status = 130
    local cmd = opts.command or (plan.source and ("idxlab run " .. plan.source) or "idxlab.run(...)")
    stderr:write(("idxlab: interrupted: %d of %d points of this run done, saved in %s; continue with: %s --resume\n")
      :format(new_rows, #todo, jpath, cmd))
  elseif #failed > 0 then
    status = 1
  end
  return { plan = plan, dir = dir, rows = rows, new_rows = new_rows, skipped = plan.skipped, failed = failed,
    interrupted = interrupted, status = status, summary = out.summary, files = out.files, messages = out.messages }
end

-- run(file_or_table, opts) -> result { dir, rows, new_rows, skipped, failed, interrupted,
-- status (0, 1 when a point failed, 130 when interrupted), summary, files }.
-- opts: set = {"k=v"...}, dry_run, resume, shard = "i/n", out = base dir (default "results"),
-- dir = exact results dir, measure = function(ctx, point) -> row (default pipeline.measure),
-- progress = "bar"|"plain"|"off", stdout/stderr = streams, gnuplot = command or "none", quiet.
function M.run(src, opts) local r = public(run_impl, src, opts) return r end

return M
