-- idxlab config [--set key=value ...]: prints the validated builder config as one JSON
-- object on stdout -- every config field at the top level with its resolved value
-- (sparse_block_kv as the number chosen), `derived` (num_sparse_blocks, num_sparse_cols,
-- min_split_seq_len, every scratch buffer's bytes) and `valid_sparse_block_kv`. With no
-- options: the V4.1-Flash reference config. A bad config raises; bin/idxlab prints the
-- message on stderr, status 1.
local errors = require("idxlab.errors")
local args = require("idxlab.cmd.args")
local config = require("idxlab.config")
local json = require("idxlab.json")

local fail = errors.fail

local usage = [[
usage: idxlab config [--set key=value ...]
  prints the validated builder config as one JSON object; fields and defaults: docs/config.md]]

return function(argv)
  local o, positional = args.parse(argv, { ["--set"] = "list" }, usage, "config")
  if o.help then
    io.stdout:write(usage, "\n")
    return 0
  end
  if #positional > 0 then
    fail("config: unknown argument '%s'\n%s", positional[1], usage)
  end
  local map, order = config.parse_sets(o.set)
  local cfg = {}
  for _, k in ipairs(order) do
    local v = map[k]
    if not config.is_field(k) then fail("%s", config.unknown_field(k)) end
    if type(v) == "table" then
      fail("%s: idxlab config takes one value per field (lists are for sweeps in experiments)",
        k)
    end
    if v == "all" then
      fail("sparse_block_kv = all is for sweeps in experiments; idxlab config takes one value "
        .. "(or auto)")
    end
    cfg[k] = v
  end
  local d = config.describe(cfg)
  local obj = {}
  for _, k in ipairs(config.field_names()) do obj[k] = d.config[k] end
  obj.derived = d.derived
  obj.valid_sparse_block_kv = d.valid_sparse_block_kv
  local order_keys = config.field_names()
  order_keys[#order_keys + 1] = "derived"
  order_keys[#order_keys + 1] = "valid_sparse_block_kv"
  for _, k in ipairs(config.derived_order) do order_keys[#order_keys + 1] = k end
  io.stdout:write(json.encode(obj, order_keys), "\n")
  return 0
end
