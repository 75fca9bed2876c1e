-- compare_spec: results.compare_rows and `idxlab compare A B` (two runs of a sweep point for
-- point: config hashes and every field that depends neither on timing nor on where it ran),
-- and the device_bus_id a row records (only a GPU context has one).
local results = require("idxlab.results")
local fs = require("idxlab.fs")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"
local support = dofile(ROOT .. "/tests/support.lua")
local q = fs.shell_quote
teardown(support.cleanup)

local function row(point, over)
  local r = { schema = 1, experiment = "x", point = point, ["repeat"] = 0,
    config_hash = "h" .. point, recall_at_k = 0.5 + point / 10, time_step_us = 100 + point,
    speedup_sparse = 3, wall_time_s = 1, finished_at = "t", shard = "0/2", device = "GPU A",
    device_bus_id = "0000:19:00.0", mass_recall = 0 / 0,
    per_layer = { { layer = 1, recall_at_k = 0.4, time_sparse_logits_us = 5 } } }
  for k, v in pairs(over or {}) do r[k] = v end
  return r
end

describe("results.compare_rows", function()
  it("ignores timing, shard and device (and NaN equals NaN)", function()
    local a = { row(0), row(1) }
    local b = { row(1, { time_step_us = 7, shard = "1/2", device = "GPU B",
      device_bus_id = "0000:2a:00.0", wall_time_s = 9,
      per_layer = { { layer = 1, recall_at_k = 0.4, time_sparse_logits_us = 50 } } }), row(0) }
    local rep = results.compare_rows(a, b)
    assert.is_true(rep.same)
    assert.equals(2, rep.points)
  end)

  it("names the point and the field of each difference, and the points one side lacks",
    function()
      local a = { row(0), row(1), row(2) }
      local b = { row(0, { recall_at_k = 0.25 }),
        row(1, { config_hash = "other", per_layer = { { layer = 1, recall_at_k = 0.3 } } }),
        row(3) }
      local rep = results.compare_rows(a, b)
      assert.is_false(rep.same)
      assert.equals(2, rep.points)
      local text = table.concat(rep.lines, "\n")
      assert.matches("point 0/0: recall_at_k: 0.5 vs 0.25", text, 1, true)
      assert.matches('point 1/0: config_hash: "h1" vs "other"', text, 1, true)
      assert.matches("point 1/0: per_layer.1.recall_at_k: 0.4 vs 0.3", text, 1, true)
      assert.same({ "2/0" }, rep.only_ref)
      assert.same({ "3/0" }, rep.only_got)
    end)

  it("keys rows by point and repeat, and refuses a point twice", function()
    local a = { row(0), row(0, { ["repeat"] = 1, recall_at_k = 0.9 }) }
    local b = { row(0, { ["repeat"] = 1, recall_at_k = 0.9 }), row(0) }
    assert.is_true(results.compare_rows(a, b).same)
    local ok, err = pcall(results.compare_rows, { row(0), row(0) }, b)
    assert.is_false(ok)
    assert.matches("point 0 %(repeat 0%) appears twice", tostring(err))
  end)
end)

describe("idxlab compare", function()
  local d
  setup(function() d = support.tmpdir("compare") end)

  local function write_rows(path, rows)
    fs.mkdir_p(path:match("^(.*)/[^/]*$"))
    local lines = {}
    for i, r in ipairs(rows) do lines[i] = results.encode(r) end
    support.write(path, table.concat(lines, "\n") .. "\n")
  end

  it("exits 0 for the same sweep (a folder or a results.jsonl) and 1 naming a difference",
    function()
      write_rows(d .. "/a/x/results.jsonl", { row(0), row(1) })
      write_rows(d .. "/b/x/results.jsonl", { row(1, { time_step_us = 1 }), row(0) })
      write_rows(d .. "/c.jsonl", { row(0), row(1, { recall_at_k = 0.125 }) })
      local rc, out = support.sh(BIN .. " compare " .. q(d .. "/a/x") .. " "
        .. q(d .. "/b/x/results.jsonl"))
      assert.equals(0, rc, out)
      assert.matches("2 points compared %(2 and 2 rows%): the same", out)
      rc, out = support.sh(BIN .. " compare " .. q(d .. "/a/x") .. " " .. q(d .. "/c.jsonl"))
      assert.equals(1, rc, out)
      assert.matches("point 1/0: recall_at_k: 0.6 vs 0.125", out, 1, true)
      assert.matches("they differ", out)
      rc, out = support.sh(BIN .. " compare " .. q(d .. "/a/x") .. " " .. q(d .. "/none"))
      assert.equals(1, rc, out)
      assert.matches("idxlab: compare: .*/none/results.jsonl: no such file", out)
    end)
end)

describe("device_bus_id", function()
  it("is nil on the CPU backend", function()
    local idxlab = require("idxlab")
    local ctx = idxlab.context { backend = "cpu" }
    assert.is_nil(ctx:device_bus_id())
  end)

  it("is the PCI bus id of a GPU context #gpu", function()
    local idxlab = require("idxlab")
    local ok, ctx = pcall(idxlab.context, { backend = "cuda" })
    if not ok then return pending("no usable GPU: " .. tostring(ctx)) end
    assert.matches("^%x+:%x+:%x+%.%x$", ctx:device_bus_id())
  end)
end)
