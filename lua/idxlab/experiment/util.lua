-- idxlab.experiment.util: what the experiment modules share: plain-data helpers, the
-- builder config as the runner uses it (idxlab.config's own contract: config.fields records,
-- is_field, resolve, describe, valid_sparse_block_kv, closest), and the kernel families a
-- `variant` pin may name (idxlab.variants).
local errors = require("idxlab.errors")
local config = require("idxlab.config")
local results = require("idxlab.results")
local variants = require("idxlab.variants")

local M = {}

M.show, M.is_int, M.is_list = results.show, results.is_int, results.is_list

function M.deep_copy(v, seen)
  if type(v) ~= "table" then return v end
  seen = seen or {}
  if seen[v] then return seen[v] end
  local out = {}
  seen[v] = out
  for k, x in pairs(v) do out[M.deep_copy(k, seen)] = M.deep_copy(x, seen) end
  return out
end

-- The keys of t in a fixed order: names and numbers sorted, mixed types by type name.
function M.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == "string" or type(a) == "number") then return a < b end
    return type(a) < type(b)
  end)
  return keys
end

-- " (did you mean x?)" when a known name is close to `name`.
function M.suggest(name, known)
  local best = config.closest(name, known)
  if best then return (" (did you mean %s?)"):format(best) end
  return ""
end

---------------------------------------------------------------------------- the builder config

M.field_names = config.field_names
M.is_config_field = config.is_field

-- config.<fn>(arg) -> its result, or nil and the reason (the message without "idxlab: "):
-- a config the builder refuses is an answer here (a skipped point), not an error.
local function try_config(fn, arg)
  local ok, res = pcall(fn, arg)
  if not ok then return nil, errors.message(res) end
  return res
end

-- resolve(tbl) -> resolved table, or nil and the reason.
function M.resolve_config(tbl) return try_config(config.resolve, tbl) end

-- Builder validation of a resolved config: every SPEC 4 check, in C, allocating nothing
-- (config.describe). Returns info (sparse_block_kv and workspace_tokens as the builder chose
-- them, and the derived sizes), or nil and the reason.
function M.validate_config(resolved)
  local d, why = try_config(config.describe, resolved)
  if not d then return nil, why end
  local info = {}
  for k, v in pairs(d.derived) do info[k] = v end
  info.sparse_block_kv = d.config.sparse_block_kv
  info.workspace_tokens = d.config.workspace_tokens
  return info
end

-- Every valid sparse_block_kv of a resolved config, or nil and the reason.
function M.valid_sbk(resolved) return try_config(config.valid_sparse_block_kv, resolved) end

---------------------------------------------------------------------------- kernel families

-- The families a `variant` pin names: the registry's own list.
M.families = variants.families

function M.is_family(name)
  for _, f in ipairs(M.families()) do if f == name then return true end end
  return false
end

return M
