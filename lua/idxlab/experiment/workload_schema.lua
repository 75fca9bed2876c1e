-- idxlab.experiment.workload_schema: the checks of an experiment's `workload` table (and of
-- each on_backend workload): its shape here, its knobs and requests by the generator
-- (idxlab.workload: knobs, check), so a bad workload is refused before anything runs.
local errors = require("idxlab.errors")
local workload = require("idxlab.workload")
local util = require("idxlab.experiment.util")

local M = {}

local fail = errors.fail
local show, is_int, is_list, suggest = util.show, util.is_int, util.is_list, util.suggest

local SYNTH_KEYS = { kind = true, decode = true, prefill = true, consumer_layers = true }
local REPLAY_KEYS = { kind = true, file = true, files = true, dir = true }

-- Positions a workload may ask for: far above any model, far below 2^53.
local MAX_POS = 2 ^ 40

-- The generator's knobs: name -> "int" | "float" (workload.knobs records {name, kind, doc}).
local KNOBS = {}
for _, k in ipairs(workload.knobs) do KNOBS[k[1]] = k[2] end

local function check_pos_int(v, where, src, min, max)
  min = min or 1
  if not is_int(v) or v < min or (max and v > max) then
    fail(("%s: field '%s' = %s: must be an integer %s"):format(src, where, show(v),
      max and ("in [%d, %d]"):format(min, max) or (min == 0 and ">= 0" or "> 0")))
  end
end
M.check_pos_int = check_pos_int

-- Sets a swept "workload.a.b" value in a workload table (made on the way where missing).
function M.set_swept(wl, k, v, src)
  local parts = {}
  for p in k:sub(10):gmatch("[^%.]+") do parts[#parts + 1] = p end
  local cur = wl
  for i = 1, #parts - 1 do
    if cur[parts[i]] == nil then cur[parts[i]] = {} end
    if type(cur[parts[i]]) ~= "table" then
      fail(("%s: field 'sweep.%s': workload.%s is a %s, not a table"):format(src, k,
        table.concat(parts, ".", 1, i), type(cur[parts[i]])))
    end
    cur = cur[parts[i]]
  end
  cur[parts[#parts]] = util.deep_copy(v)
end

-- check(wl, cfg) -> true, or false and the reason without "idxlab: " (workload.check: what
-- generate would refuse under this resolved config; nil cfg checks the workload alone).
function M.fits(wl, cfg)
  local ok, why = workload.check(wl, cfg)
  if ok then return true end
  return false, errors.message(why)
end

local function check_replay(wl, src, where)
  local n = 0
  for k, v in pairs(wl) do
    if not REPLAY_KEYS[k] then
      fail(("%s: field '%s.%s': unknown for a replay workload (kind, file, files, dir)%s")
        :format(src, where, tostring(k), suggest(k, { "kind", "file", "files", "dir" })))
    end
    if k == "file" or k == "dir" then
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
  if n == 0 then
    fail(("%s: field '%s': a replay workload needs file, files or dir"):format(src, where))
  end
end

local function check_knobs(wl, src, where)
  for k, v in pairs(wl) do
    if type(k) ~= "string" then fail(("%s: field '%s': keys must be names"):format(src, where)) end
    if not SYNTH_KEYS[k] then
      local kind = KNOBS[k]
      if not kind then
        local known = { "kind", "decode", "prefill", "consumer_layers" }
        for n in pairs(KNOBS) do known[#known + 1] = n end
        table.sort(known)
        fail(("%s: field '%s.%s': unknown workload knob%s (knobs: %s)"):format(src, where, k,
          suggest(k, known), table.concat(known, ", ")))
      end
      if kind == "int" and not is_int(v) then
        fail(("%s: field '%s.%s' = %s: must be an integer"):format(src, where, k, show(v)))
      elseif type(v) ~= "number" then
        fail(("%s: field '%s.%s' = %s: must be a number"):format(src, where, k, show(v)))
      end
    end
  end
end

local function check_decode(d, src, where)
  if type(d) ~= "table" then
    fail(("%s: field '%s.decode' = %s: must be a table { rows = n, context = positions }")
      :format(src, where, show(d)))
  end
  for k in pairs(d) do
    if k ~= "rows" and k ~= "context" and k ~= "contexts" then
      fail(("%s: field '%s.decode.%s': unknown (rows, context, contexts)%s"):format(src, where,
        tostring(k), suggest(k, { "rows", "context", "contexts" })))
    end
  end
  if d.rows ~= nil then check_pos_int(d.rows, where .. ".decode.rows", src, 0, 1e7) end
  if d.context ~= nil and d.contexts ~= nil then
    fail(("%s: field '%s.decode': give context or contexts, not both"):format(src, where))
  end
  if d.context ~= nil then check_pos_int(d.context, where .. ".decode.context", src, 0, MAX_POS) end
  if d.contexts ~= nil then
    if not is_list(d.contexts) or #d.contexts == 0 then
      fail(("%s: field '%s.decode.contexts': must be a non-empty list of positions")
        :format(src, where))
    end
    for i, c in ipairs(d.contexts) do
      check_pos_int(c, ("%s.decode.contexts[%d]"):format(where, i), src, 0, MAX_POS)
    end
    if d.rows ~= nil and d.rows ~= #d.contexts then
      fail(("%s: field '%s.decode.rows' = %d: differs from the %d contexts listed")
        :format(src, where, d.rows, #d.contexts))
    end
  end
end

-- prefill as a list of { query_len, context_len }.
local function check_prefill_list(p, src, where)
  if not is_list(p) then
    local k = next(p)
    fail(("%s: field '%s.prefill.%s': unknown (a list of { query_len, context_len }, or "
      .. "requests, query_len, context, context_len)%s"):format(src, where, tostring(k),
      suggest(k, { "requests", "query_len", "context", "context_len" })))
  end
  for i, r in ipairs(p) do
    local w = ("%s.prefill[%d]"):format(where, i)
    if type(r) ~= "table" then
      fail(("%s: field '%s' = %s: must be { query_len = rows, context_len = positions }")
        :format(src, w, show(r)))
    end
    for k in pairs(r) do
      if k ~= "query_len" and k ~= "context_len" then
        fail(("%s: field '%s.%s': unknown (query_len, context_len)%s"):format(src, w, tostring(k),
          suggest(k, { "query_len", "context_len" })))
      end
    end
    check_pos_int(r.query_len, w .. ".query_len", src, 1, MAX_POS)
    check_pos_int(r.context_len, w .. ".context_len", src, 0, MAX_POS)
  end
end

-- prefill as { requests, query_len, context | context_len }.
local function check_prefill_batch(p, src, where)
  for k in pairs(p) do
    if k ~= "requests" and k ~= "query_len" and k ~= "context" and k ~= "context_len" then
      fail(("%s: field '%s.prefill.%s': unknown (requests, query_len, context, context_len)%s")
        :format(src, where, tostring(k),
          suggest(k, { "requests", "query_len", "context", "context_len" })))
    end
  end
  if p.requests ~= nil then check_pos_int(p.requests, where .. ".prefill.requests", src, 0, 1e6) end
  check_pos_int(p.query_len, where .. ".prefill.query_len", src, 1, MAX_POS)
  if p.context ~= nil and p.context_len ~= nil then
    fail(("%s: field '%s.prefill': give context (the last row's visible length) or "
      .. "context_len (positions before the query), not both"):format(src, where))
  end
  if p.context_len ~= nil then
    check_pos_int(p.context_len, where .. ".prefill.context_len", src, 0, MAX_POS)
  end
  if p.context ~= nil then
    check_pos_int(p.context, where .. ".prefill.context", src, 1, MAX_POS)
    if p.context < p.query_len then
      fail(("%s: field '%s.prefill.context' = %d: must be >= query_len (%d): it is the last "
        .. "row's visible length"):format(src, where, p.context, p.query_len))
    end
  elseif p.context_len == nil then
    fail(("%s: field '%s.prefill': needs context or context_len"):format(src, where))
  end
end

local function check_prefill(p, src, where)
  if type(p) ~= "table" then
    fail(("%s: field '%s.prefill' = %s: must be a list of requests or { requests, query_len, "
      .. "context }"):format(src, where, show(p)))
  end
  if p.requests == nil and p.query_len == nil then
    check_prefill_list(p, src, where)
  else
    check_prefill_batch(p, src, where)
  end
end

-- check(wl, src, where) raises on the first thing wrong with the workload table.
function M.check(wl, src, where)
  where = where or "workload"
  if type(wl) ~= "table" then
    fail(("%s: field '%s' = %s: must be a table"):format(src, where, show(wl)))
  end
  local kind = wl.kind or "synthetic"
  if kind ~= "synthetic" and kind ~= "replay" then
    fail(("%s: field '%s.kind' = %s: must be \"synthetic\" or \"replay\"")
      :format(src, where, show(wl.kind)))
  end
  if kind == "replay" then return check_replay(wl, src, where) end
  check_knobs(wl, src, where)
  if wl.consumer_layers ~= nil then
    check_pos_int(wl.consumer_layers, where .. ".consumer_layers", src, 1, 64)
  end
  if wl.decode ~= nil and wl.decode ~= false then check_decode(wl.decode, src, where) end
  if wl.prefill ~= nil and wl.prefill ~= false then check_prefill(wl.prefill, src, where) end
  -- the generator's own checks (the batch's requests, the knobs' C ranges), before anything
  -- runs
  local ok, why = M.fits(wl)
  if not ok then fail(("%s: field '%s': %s"):format(src, where, why)) end
end

return M
