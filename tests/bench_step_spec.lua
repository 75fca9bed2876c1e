-- bench_step_spec: bench/step.lua, issue 15's one-command benchmark, at CPU scale on small
-- experiment files in a temp dir: the quick step with its stage times and the masked-dense
-- path, the PyTorch twin skipped without a GPU, a context_scaling sweep whose every point is
-- recorded once and whose first point is re-run last in a run of its own (the warm-up check),
-- the figures file, and the regression guard fed from it against a baseline block.
local root = os.getenv("IDXLAB_ROOT") or "."
local bench = dofile(root .. "/bench/step.lua")
local fs = require("idxlab.fs")

local CFG = "config = { heads = 8, index_topk = 32, candidate_block_size = 8, "
  .. "candidate_topk_blocks = 64, max_rows = 16, max_model_len = 16384 }, "
  .. "timing = { warmup = 1, iters = 2 }, seed = 1, backend = 'cpu', "

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function read(path)
  local f = assert(io.open(path, "r"))
  local s = f:read("*a")
  f:close()
  return s
end

describe("bench/step.lua at CPU scale", function()
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    fs.mkdir_p(dir)
  end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("runs the step, the masked-dense path and the sweep in one call, and feeds the guard",
  function()
    write(dir .. "/q.lua", "return { name = 'quick', question = 'tiny step', " .. CFG
      .. "workload = { decode = { rows = 2, context = 4096 }, "
      .. "prefill = { { query_len = 8, context_len = 4000 } }, consumer_layers = 2 } }\n")
    write(dir .. "/s.lua", "return { name = 'context_scaling', question = 'tiny sweep', " .. CFG
      .. "workload = { decode = { rows = 2, context = 2048 }, prefill = false, "
      .. "consumer_layers = 1 }, repeats = 2, "
      .. "sweep = { ['workload.decode.context'] = { 2048, 8192 } } }\n")
    write(dir .. "/B.md", "```bench-baseline\nstep-cpu/quick/time_step_us 1 2026-12-01\n"
      .. "step/quick_gpu/time_step_us 69497 2026-12-01\n```\n")
    local text = {}
    local res = bench.main({ out = dir .. "/out", quick = dir .. "/q.lua",
      scaling_file = dir .. "/s.lua", scaling_set = "", baseline = dir .. "/B.md",
      progress = "off", gnuplot = "none",
      stdout = { write = function(_, ...)
        for _, s in ipairs({ ... }) do text[#text + 1] = s end
      end } })
    local q = res.quick
    assert.equals(0, q.logit_mismatches)
    assert.equals(1, q.selection_agreement)
    assert.is_true(q.time_step_us > 0)
    assert.equals(q.time_step_eager_us, q.time_step_us) -- no graph on the CPU
    assert.is_true(q.time_masked_dense_us > 0)
    assert.is_number(q.speedup_sparse)
    assert.is_nil(res.torch_us)
    -- the consumer part: the decode group alone (no prefill request), its own results folder
    local c = res.consumers.row
    assert.is_false(c.workload.prefill)
    assert.equals(2, c.workload.decode.rows)
    assert.equals(0, c.logit_mismatches)
    assert.near(c.time_expand_us + c.time_sparse_logits_us + c.time_topk_us + c.time_remap_us,
      res.consumers.us, 1e-9)
    assert.is_true(fs.exists(dir .. "/out/quick_decode/results.jsonl"))
    -- two contexts, two repeats each: four rows, each recorded once
    assert.equals(2, #res.scaling)
    assert.equals(2048, res.scaling[1].context)
    assert.equals(8192, res.scaling[2].context)
    local rows = require("idxlab.results").read_jsonl(dir .. "/out/context_scaling/results.jsonl")
    assert.equals(4, #rows)
    -- the warm-up check's re-run: its own results folder, one row, the first point's seed
    local again = require("idxlab.results").read_jsonl(
      dir .. "/out/context_scaling_rerun/results.jsonl")
    assert.equals(1, #again)
    assert.equals(1, again[1].seed)
    assert.is_true(res.warmup.first > 0 and res.warmup.last > 0)
    assert.is_boolean(res.warmup.ok)
    -- the figures (family step-cpu on the CPU) and the guard on them
    local figs = read(dir .. "/out/figures.txt")
    assert.truthy(figs:find("\nstep%-cpu/quick/time_step_us [%d.]+\n"))
    assert.truthy(figs:find("\nstep%-cpu/context_scaling_8192/time_sparse_logits_us [%d.]+\n"))
    assert.truthy(figs:find("\nstep%-cpu/quick_decode/consumer_us [%d.]+\n"))
    assert.equals(1, #res.regress.rows)
    assert.equals("step-cpu/quick/time_step_us", res.regress.slower[1].name)
    local all = table.concat(text)
    assert.truthy(all:find("PyTorch twin: skipped (no GPU", 1, true))
    assert.truthy(all:find("consumer part, decode group alone (2 rows at 4096, 2 consumer", 1,
      true))
    assert.truthy(all:find("warm-up check: point 0 (context 2048, seed 1) re-run last", 1, true))
    assert.truthy(all:find("SLOWER step-cpu/quick/time_step_us", 1, true))
    assert.equals(all, read(dir .. "/out/table.txt"))
  end)
end)
