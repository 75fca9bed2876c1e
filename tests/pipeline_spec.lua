-- pipeline_spec: one step of the two-level indexer on the CPU, end to end, against the
-- definitions of SPEC 6: exactness (K5 == dense bf16 reduction, bitwise), agreement with the
-- masked dense selection, recall bounds, active rows, edge rows, every kv_format and
-- quantizer, no allocation after the first step, and replay files in and out.
local idxlab = require("idxlab")
local pipeline = require("idxlab.pipeline")
local Tensor = require("idxlab.tensor")
local support = dofile((os.getenv("IDXLAB_ROOT") or ".") .. "/tests/support.lua")

-- printed on failure
local SEED = tonumber(os.getenv("IXL_TEST_SEED") or "") or (os.time() % 100000)

-- Small random step inputs (workload.random): `lens` are prefill rows' lengths (ragged, each
-- row its own range of a shared k) or decode context lengths (decode = true).
local function make_inputs(ctx, cfg, lens, opts)
  opts = opts or {}
  return require("idxlab.workload").random(ctx, { heads = cfg.heads, lens = lens,
    decode = opts.decode, layers = opts.layers or 2, seed = opts.seed or SEED,
    extra_k = opts.extra_k })
end

local function small_cfg(over)
  local cfg = {
    heads = 8, index_topk = 64, candidate_block_size = 8, candidate_topk_blocks = 64,
    max_rows = 64, max_model_len = 8192, page_size = 64,
  }
  for k, v in pairs(over or {}) do cfg[k] = v end
  return cfg
end

local function run_step(ctx, cfg, inputs, keep)
  local p = pipeline.new(ctx, cfg)
  local acc = pipeline.new_acc()
  p:step(inputs, { acc = acc, keep = keep })
  local row = pipeline.summarize(acc, p.builder:info())
  return row, p
end

-- Step outputs row by row: rows[name][row] = the row's values (a list), for the per-row
-- outputs of keep (per layer: name .. l).
local function row_collector()
  local rows = {}
  local function put(name, t, r0, n)
    local v, w = t:to_table(), t:shape()[2] or 1
    rows[name] = rows[name] or {}
    for r = 0, n - 1 do
      local one = {}
      for j = 1, w do one[j] = v[r * w + j] end
      rows[name][r0 + r] = one
    end
  end
  return rows, { put = put,
    put_layer = function(name, l, t, r0, n) put(name .. l, t, r0, n) end }
end

-- The decode inputs without row `drop` (0-based): the same k, every per-row tensor without it.
local function drop_decode_row(ctx, inputs, drop)
  local out = { n_decode = inputs.n_decode - 1, n_prefill = 0, k = inputs.k }
  local function without(t, per, outer)
    local v, keep = t:to_table(), {}
    local rows = #v / per / outer
    for o = 0, outer - 1 do
      for r = 0, rows - 1 do
        if r ~= drop then
          for j = 1, per do keep[#keep + 1] = v[(o * rows + r) * per + j] end
        end
      end
    end
    local shape = t:shape()
    shape[outer > 1 and 2 or 1] = rows - 1
    return ctx:tensor(t:dtype(), shape):from_table(keep)
  end
  local L, R = inputs.q_consumer:shape()[1], inputs.q:shape()[1]
  local H, D = inputs.q:shape()[2], inputs.q:shape()[3]
  out.q, out.weights = without(inputs.q, H * D, 1), without(inputs.weights, H, 1)
  out.q_consumer = without(inputs.q_consumer, H * D, L)
  out.weights_consumer = without(inputs.weights_consumer, H, L)
  out.context_lens = without(inputs.context_lens, 1, 1)
  out.row_start = without(inputs.row_start, 1, 1)
  assert(out.q:shape()[1] == R - 1)
  return out
end

-- Issue 19: a decode row of 0 positions (an empty indexer cache, or padding) is an empty row
-- at any compress_ratio: no candidate, end 0, every top-k -1; the rows beside it get exactly
-- what they get without it (on the same backend), and it counts as a row never active. The
-- inputs are made on the CPU context hctx and run on run_ctx (the CPU's or a GPU's).
local function check_empty_decode_row(hctx, run_ctx, ratio)
  local cfg = small_cfg({ compress_ratio = ratio })
  local host_in = make_inputs(hctx, cfg, { 900, 0, 64, 513 }, { decode = true })
  local function on_run(inp)
    if run_ctx:device_kind() ~= "device" then return inp end
    local out = {}
    for key, v in pairs(inp) do
      out[key] = Tensor.is_tensor(v)
        and Tensor.new(run_ctx, v:dtype(), v:shape(), "device"):copy_from(v) or v
    end
    return out
  end
  local function step_of(inp)
    local rows, keep = row_collector()
    local p = pipeline.new(run_ctx, cfg)
    local acc = pipeline.new_acc()
    p:step(on_run(inp), { acc = acc, keep = keep })
    local row = pipeline.summarize(acc, p.builder:info(), "length")
    p:free()
    return rows, row
  end
  local a, ra = step_of(host_in)
  local b, rb = step_of(drop_decode_row(hctx, host_in, 1))
  local function all(list, v)
    for j = 1, #list do if list[j] ~= v then return false end end
    return true
  end
  assert.is_true(all(a.cand_blocks[1], -1), "cand_blocks")
  assert.is_true(all(a.sparse_ids[1], 0), "sparse_ids: ks / sbk = 0")
  assert.are.same({ 0 }, a["end"][1])
  assert.is_true(all(a.source_topk_pos[1], -1), "source_topk_pos")
  assert.is_true(all(a.dense_logits[1], -math.huge), "dense_logits")
  for l = 1, 2 do
    for _, name in ipairs({ "topk_pos", "masked_topk_pos", "dense_topk_pos" }) do
      assert.is_true(all(a[name .. l][1], -1), name .. l)
    end
  end
  -- rows 0, 2, 3 here are rows 0, 1, 2 without the empty row. On the CPU the fp32 logits are
  -- the same bits whatever the batch; a GPU may sum heads in another order for another row
  -- count (SPEC 3: fp32 in any order), so there only the metrics below are compared.
  local exact = run_ctx:device_kind() ~= "device"
  for name, per_row in pairs(exact and b or {}) do
    for r, vals in pairs(per_row) do
      local ar = r == 0 and 0 or r + 1
      if name:match("^sparse_logits") then -- columns at or past end are unspecified
        for j = 1, b["end"][r][1] do
          assert(vals[j] == a[name][ar][j],
            ("%s row %d col %d, seed %d"):format(name, r, j - 1, SEED))
        end
      else
        assert.are.same(vals, a[name][ar], ("%s row %d, seed %d"):format(name, r, SEED))
      end
    end
  end
  -- SPEC 6: the empty row is never active, so every quality metric is unchanged; it is one
  -- more row of the length-1 bucket
  assert.equals(2, ra.active_rows)
  assert.equals(0, ra.logit_mismatches)
  assert.equals(1, ra.selection_agreement)
  for _, m in ipairs(exact and { "active_rows", "logit_mismatches", "logit_diff",
    "selection_agreement", "fp32_selection_agreement", "recall_at_k", "mass_recall",
    "candidate_coverage" } or {}) do
    assert.equals(rb[m], ra[m], m .. ", seed " .. SEED)
  end
  assert.are.same({ bucket = 1, rows = 1, active_rows = 0, active = false }, ra.by_length[1])
  assert.equals(#rb.by_length + 1, #ra.by_length)
end

describe("pipeline step on the CPU", function()
  local ctx = idxlab.context{ backend = "cpu", seed = SEED, threads = 2 }

  it("is exact and agrees with the masked dense selection (mxfp4, ragged)", function()
    local lens = { 1500, 700, 513, 512, 100, 3, 0, 2000 }
    local cfg = small_cfg()
    local row = run_step(ctx, cfg, make_inputs(ctx, cfg, lens))
    assert.equals(0, row.logit_mismatches, "seed " .. SEED)
    assert.equals(4, row.active_rows) -- rows longer than T * cbs = 512
    assert.equals(1, row.selection_agreement, "seed " .. SEED)
    assert.is_true(row.recall_at_k > 0 and row.recall_at_k <= 1)
    assert.is_true(row.candidate_coverage >= row.recall_at_k - 1e-12)
    assert.is_true(row.mass_recall > 0 and row.mass_recall <= 1 + 1e-9)
    assert.is_true(row.fp32_selection_agreement > 0.8)
    assert.equals(2, #row.per_layer)
    assert.equals(0, row.logit_diff, "seed " .. SEED) -- equal logits: exactly 0 (no cancellation)
  end)

  it("reports null quality metrics when no row is active", function()
    local cfg = small_cfg()
    local row = run_step(ctx, cfg, make_inputs(ctx, cfg, { 100, 512, 7 }))
    assert.equals(0, row.active_rows)
    assert.is_nil(row.recall_at_k)
    assert.is_nil(row.selection_agreement)
    assert.equals(0, row.logit_mismatches)
  end)

  for _, fmt in ipairs({ "mxfp4", "mxfp8", "fp8" }) do
    for _, quant in ipairs({ "rne", "ties_down" }) do
      it(("runs %s with the %s quantizer, decode rows paged"):format(fmt, quant), function()
        local cfg = small_cfg({ kv_format = fmt, quantizer = quant })
        local lens = { 900, 64, 1, 513, 1200 }
        local inputs = make_inputs(ctx, cfg, lens, { decode = true, seed = SEED + #fmt })
        local row = run_step(ctx, cfg, inputs)
        assert.equals(0, row.logit_mismatches, fmt .. " " .. quant .. " seed " .. SEED)
        assert.equals(3, row.active_rows)
        assert.equals(1, row.selection_agreement)
      end)
    end
  end

  for _, ratio in ipairs({ 1, 4 }) do
    it(("runs a decode row of 0 positions as an empty row (compress_ratio %d)"):format(ratio),
    function() check_empty_decode_row(ctx, ctx, ratio) end)
  end

  it("runs a step whose decode rows are all empty (0 positions), from the workload", function()
    for _, ratio in ipairs({ 1, 4 }) do
      local cfg = small_cfg({ compress_ratio = ratio })
      local spec = { decode = { rows = 3, context = 0 }, prefill = false, consumer_layers = 2 }
      assert.is_true(require("idxlab.workload").check(spec, cfg))
      local inputs = require("idxlab.workload").generate(ctx, spec, cfg, SEED)
      local rows, keep = row_collector()
      local p = pipeline.new(ctx, cfg)
      local acc = pipeline.new_acc()
      p:step(inputs, { acc = acc, keep = keep })
      local row = pipeline.summarize(acc, p.builder:info())
      assert.equals(0, row.active_rows)
      assert.is_nil(row.recall_at_k)
      assert.equals(0, row.logit_mismatches)
      for r = 0, 2 do
        assert.are.same({ 0 }, rows["end"][r])
        for _, v in ipairs(rows.topk_pos1[r]) do assert.equals(-1, v) end
        for _, v in ipairs(rows.cand_blocks[r]) do assert.equals(-1, v) end
      end
      p:free()
    end
  end)

  it("summarizes per step: layer times over the steps, consumer stages summed over layers",
  function()
    local acc = pipeline.new_acc()
    acc.steps = 3
    acc.time_dense_logits, acc.time_total = 900, 3000
    local la1, la2 = acc.layer(1), acc.layer(2)
    la1.time.time_sparse_logits_us, la2.time.time_sparse_logits_us = 300, 600
    la1.time.time_topk_us, la2.time.time_topk_us = 30, 60
    la1.mismatches, la2.mismatches = 3, 0
    local row = pipeline.summarize(acc)
    assert.equals(100, row.per_layer[1].time_sparse_logits_us)
    assert.equals(200, row.per_layer[2].time_sparse_logits_us)
    assert.equals(300, row.time_sparse_logits_us)  -- SPEC 6: per step, summed over consumer layers
    assert.equals(30, row.time_topk_us)
    assert.equals(300, row.time_dense_logits_us)
    assert.equals(1000, row.time_step_us)
    assert.equals(1.5, row.logit_mismatches)       -- SPEC 6: the mean over consumer layers
    assert.equals(3, row.per_layer[1].logit_mismatches)
  end)

  it("runs and times a step of many consumer layers (25)", function()
    local cfg = small_cfg()
    local inputs = make_inputs(ctx, cfg, { 900, 700 }, { layers = 25 })
    local row = run_step(ctx, cfg, inputs)
    assert.equals(25, #row.per_layer)
    assert.equals(0, row.logit_mismatches, "seed " .. SEED)
    for l = 1, 25 do assert.is_true(row.per_layer[l].time_sparse_logits_us >= 0) end
  end)

  it("keeps outputs in SPEC 7 layouts; short rows see every position", function()
    local cfg = small_cfg()
    local lens = { 300, 1000, 40 }
    local inputs = make_inputs(ctx, cfg, lens, { extra_k = 5 })
    local p = pipeline.new(ctx, cfg)
    local acc = pipeline.new_acc()
    local outs, keep = support.keep_outputs()
    p:step(inputs, { acc = acc, keep = keep })
    local k, T, cbs = cfg.index_topk, cfg.candidate_topk_blocks, cfg.candidate_block_size
    -- rows 0 (300 positions <= T * cbs = 512) and 2 (40): every block is a candidate, so the
    -- sparse top-k chooses among all positions: min(k, len) distinct positions in [0, len).
    -- (Which ones is the bf16 ranking's choice; selection_agreement checks that it is right.)
    for _, r in ipairs({ 0, 2 }) do
      local len = lens[r + 1]
      local blocks = {}
      for j = 1, T do
        local c = outs.cand_blocks[0][r * T + j]
        if c >= 0 then blocks[c] = true end
      end
      for b = 0, math.ceil(len / cbs) - 1 do
        assert.is_true(blocks[b], ("row %d block %d, seed %d"):format(r, b, SEED))
      end
      local seen, n = {}, 0
      for j = 1, k do
        local pos = outs.topk_pos1[0][r * k + j]
        if pos >= 0 then
          assert.is_true(pos < len and not seen[pos],
            ("row %d pos %d, seed %d"):format(r, pos, SEED))
          seen[pos], n = true, n + 1
        end
      end
      assert.equals(math.min(k, len), n)
    end
    -- a 40-position row has 40 valid positions and 24 pads of -1, pads last
    local tk = outs.topk_pos1[0]
    for j = 1, k do assert.equals(j <= 40, tk[2 * k + j] >= 0, "slot " .. j) end
    assert.equals(0, acc.layers[1].mismatches)
    p:free()
  end)

  it("allocates nothing on the context after the first step", function()
    local cfg = small_cfg()
    local inputs = make_inputs(ctx, cfg, { 1500, 700, 200 })
    local p = pipeline.new(ctx, cfg)
    p:step(inputs, { acc = pipeline.new_acc() })
    -- tensors earlier specs dropped on this context are freed by the collector whenever it
    -- runs: let it run now, so that only the steps are measured
    collectgarbage(); collectgarbage()
    local before = ctx:alloc_stats()
    for _ = 1, 3 do p:step(inputs, {}) end
    collectgarbage(); collectgarbage()
    local after = ctx:alloc_stats()
    local function show(st)
      return ("allocs %d, frees %d, live %d, scratch %d"):format(st.host_allocs, st.host_frees,
        st.host_bytes_live, st.host_scratch_bytes)
    end
    local why = ("before: %s; after: %s; seed %d"):format(show(before), show(after), SEED)
    -- the steps allocate nothing; the collector may still free what earlier specs dropped
    -- (finalizers can take more than one cycle), so live bytes may only fall
    assert.equals(before.host_allocs, after.host_allocs, why)
    assert.is_true(after.host_bytes_live <= before.host_bytes_live, why)
    p:free()
  end)

  it("refuses inputs that do not fit the config, naming the tensor", function()
    local cfg = small_cfg()
    local inputs = make_inputs(ctx, cfg, { 100, 200 })
    local p = pipeline.new(ctx, small_cfg({ heads = 16 }))
    local ok, err = pcall(function() p:step(inputs) end)
    assert.is_false(ok)
    assert.matches("q: shape%[2%] = 8, expected heads = 16", err)
    inputs.n_prefill = 3
    p = pipeline.new(ctx, cfg)
    err = select(2, pcall(function() p:step(inputs) end))
    assert.matches("n_decode %(0%) %+ n_prefill %(3%) = 3 rows, but q has 2", err)
  end)

  it("refuses a misaligned ks under ks_mode aligned before any kernel runs (both backends)",
  function()
    local cfg = small_cfg({ ks_mode = "aligned" })
    local inputs = make_inputs(ctx, cfg, { 100, 200 }) -- row 1 starts at ks = 100
    local p = pipeline.new(ctx, cfg)
    local ok, err = pcall(function() p:step(inputs) end)
    assert.is_false(ok)
    assert.matches("prefill row 1: ks = 100 is not a multiple of sparse_block_kv %(8%), which"
      .. " ks_mode aligned requires", err)
    assert.matches("pipeline_spec.lua", err) -- at the caller's line
    local ok2 = pcall(function() p:step(make_inputs(ctx, cfg, { 96, 200 })) end)
    assert.is_true(ok2, "ks = 96 is aligned")
    p:free()
  end)
end)

describe("empty decode rows on the GPU #gpu", function()
  it("runs a decode row of 0 positions as an empty row on the GPU #gpu", function()
    local hctx = idxlab.context{ backend = "cpu", seed = SEED, threads = 2 }
    local gctx = idxlab.context{ backend = "cuda", seed = SEED }
    for _, ratio in ipairs({ 1, 4 }) do check_empty_decode_row(hctx, gctx, ratio) end
    gctx:free()
  end)
end)

describe("replay files", function()
  local st = require("idxlab.safetensors")
  local tmp = os.tmpname()
  local ctx = idxlab.context{ backend = "cpu", seed = SEED, threads = 2 }

  -- the step's input tensors, as safetensors entries named prefix .. name, added to list
  local function write_inputs(inputs, prefix, list)
    list = list or {}
    for _, name in ipairs({ "q", "weights", "k", "q_consumer", "weights_consumer", "ks", "ke",
      "context_lens", "row_start" }) do
      if inputs[name] then
        list[#list + 1] = { name = (prefix or "") .. name, tensor = inputs[name] }
      end
    end
    return list
  end

  it("replays a ragged step and writes every SPEC 7 output", function()
    local cfg = small_cfg()
    local inputs = make_inputs(ctx, cfg, { 1200, 90, 600 })
    local inp, out = tmp .. "_in.safetensors", tmp .. "_out.safetensors"
    st.write(inp, write_inputs(inputs), {})
    local over = { heads = 8, index_topk = 64, candidate_block_size = 8,
      candidate_topk_blocks = 64, page_size = 64 }
    local summaries = require("idxlab.replay").run(inp, out, over, { backend = "cpu" })
    assert.equals(0, summaries[1].logit_mismatches)
    local f = st.read(out)
    local want = {
      dense_logits = { 3, 1200 }, cand_blocks = { 3, 64 }, sparse_ids = { 3, 64 }, ["end"] = { 3 },
      sparse_logits = { 2, 3, 512 }, topk_pos = { 2, 3, 64 }, masked_topk_pos = { 2, 3, 64 },
      dense_topk_pos = { 2, 3, 64 }, source_topk_pos = { 3, 64 },
    }
    for name, shape in pairs(want) do
      assert.is_not_nil(f.tensors[name], name)
      assert.are.same(shape, f.tensors[name].shape, name)
    end
    local cfgjson = require("idxlab.json").decode(f.metadata.config)
    assert.equals(8, cfgjson.sparse_block_kv)
    assert.equals(3, cfgjson.max_rows)
    os.remove(inp); os.remove(out)
  end)

  it("replays several steps with step<i>/ prefixes", function()
    local cfg = small_cfg()
    local a = make_inputs(ctx, cfg, { 700, 30 }, { seed = SEED + 1 })
    local b = make_inputs(ctx, cfg, { 50, 900, 600 }, { decode = true, seed = SEED + 2 })
    local inp, out = tmp .. "_m.safetensors", tmp .. "_mo.safetensors"
    local list = write_inputs(a, "step0/")
    write_inputs(b, "step1/", list)
    st.write(inp, list, {})
    local over = { heads = 8, index_topk = 64, candidate_block_size = 8,
      candidate_topk_blocks = 64, page_size = 64 }
    local summaries = require("idxlab.replay").run(inp, out, over, { backend = "cpu" })
    assert.equals(2, #summaries)
    local f = st.read(out)
    assert.are.same({ 2, 64 }, f.tensors["step0/source_topk_pos"].shape)
    assert.are.same({ 3, 64 }, f.tensors["step1/source_topk_pos"].shape)
    os.remove(inp); os.remove(out)
  end)

  it("names the tensor and the dimension of a bad input", function()
    local cfg = small_cfg()
    local inputs = make_inputs(ctx, cfg, { 100 })
    local inp = tmp .. "_bad.safetensors"
    local list = write_inputs(inputs)
    list[#list + 1] = { name = "bogus", tensor = inputs.ks }
    st.write(inp, list, {})
    local over = { heads = 8, index_topk = 64, candidate_block_size = 8,
      candidate_topk_blocks = 64, page_size = 64 }
    local replay = require("idxlab.replay")
    local ok, err = pcall(replay.run, inp, tmp .. "_x.safetensors", over, { backend = "cpu" })
    assert.is_false(ok)
    assert.matches('unknown tensor "bogus"', err)
    list[#list] = nil
    st.write(inp, list, {})
    over.heads = 16
    err = select(2, pcall(replay.run, inp, tmp .. "_x.safetensors", over, { backend = "cpu" }))
    assert.matches("tensor q has shape %[1, 8, 128%]: dimension 2 %(heads%) is 8, expected 16", err)
    os.remove(inp)
  end)
end)

describe("kernel variant pins (config.variant)", function()
  local variants = require("idxlab.variants")
  local ctx = idxlab.context{ backend = "cpu", seed = SEED, threads = 2 }

  -- every output of one step, by name and group start
  local function outputs_of(p, inputs)
    local got = {}
    local keep = {
      put = function(name, t, r0) got[name .. "@" .. r0] = t:to_table() end,
      put_layer = function(name, l, t, r0) got[name .. l .. "@" .. r0] = t:to_table() end,
    }
    local res = p:step(inputs, { acc = pipeline.new_acc(), keep = keep })
    return got, res
  end

  it("runs the pinned CPU logits variant, names it in the result, restores the context's pins",
  function()
    local inputs = make_inputs(ctx, small_cfg(), { 1500, 700, 100 })
    variants.set(ctx, "select", "ref") -- a pin of the context's own, which a step keeps
    local outs = {}
    for _, name in ipairs({ "ref", "fast" }) do
      local p = pipeline.new(ctx, small_cfg({ variant = { logits = name } }))
      local got, res = outputs_of(p, inputs)
      assert.equals(name, res.variant.logits)
      assert.equals("ref", res.variant.select)
      assert.is_nil(variants.get(ctx, "logits"), "the step's pin outlived it")
      assert.equals("ref", variants.get(ctx, "select"))
      outs[name] = got
      p:free()
    end
    variants.set(ctx, "select", nil)
    -- the fast CPU path is bitwise the reference (SPEC 3), so every output is the same
    assert.are.same(outs.ref, outs.fast, "seed " .. SEED)
  end)

  it("refuses a variant the family lacks, naming the family, the name and the variants",
  function()
    local inputs = make_inputs(ctx, small_cfg(), { 300, 200 })
    local p = pipeline.new(ctx, small_cfg({ variant = { logits = "v9" } }))
    local ok, err = pcall(function() p:step(inputs) end)
    assert.is_false(ok)
    assert.matches("logits variant v9: no such variant %(logits has: ref, fast", tostring(err))
    assert.matches("pipeline_spec.lua", tostring(err)) -- at the caller's line
    assert.is_nil(variants.get(ctx, "logits"))
    p:free()
    ok, err = pcall(pipeline.new, ctx, small_cfg({ variant = "fast" }))
    assert.is_false(ok)
    assert.matches("config.variant must be a table of family = variant name", tostring(err))
  end)

  it("measure records, per family, the variant that ran", function()
    local row = pipeline.measure(ctx, {
      config = { heads = 8, index_topk = 32, candidate_block_size = 8, candidate_topk_blocks = 64,
        variant = { logits = "ref" } },
      workload = { decode = { rows = 2, context = 2048 }, consumer_layers = 1 }, seed = SEED })
    assert.equals("ref", row.variant.logits)
    assert.equals("ref", row.variant.select)
    assert.is_nil(variants.get(ctx, "logits"))
    assert.equals(0, row.logit_mismatches, "seed " .. SEED)
  end)
end)

describe("step timing (SPEC 6, issue 15)", function()
  local ctx = idxlab.context{ backend = "cpu", seed = SEED, threads = 2 }

  local function outputs_of(p, inputs, opts)
    local got = {}
    opts.keep = {
      put = function(name, t, r0) got[name .. "@" .. r0] = t:to_table() end,
      put_layer = function(name, l, t, r0) got[name .. l .. "@" .. r0] = t:to_table() end,
    }
    local res = p:step(inputs, opts)
    return got, res
  end

  it("times the CPU step eagerly (no graph), with speedup_sparse per layer and overall",
  function()
    local cfg = small_cfg()
    local inputs = make_inputs(ctx, cfg, { 1500, 700, 100 }, { layers = 3 })
    local p = pipeline.new(ctx, cfg)
    local acc = pipeline.new_acc()
    local _, res = outputs_of(p, inputs, { acc = acc })
    assert.is_false(res.times.graph)
    local row = pipeline.summarize(acc, nil)
    assert.equals(row.time_step_eager_us, row.time_step_us)
    assert.is_true(row.time_step_us > 0)
    assert.is_number(row.time_source_topk_us)
    local md, sp = 0, 0
    for l = 1, 3 do
      local pl = row.per_layer[l]
      local sparse = pl.time_sparse_logits_us + pl.time_topk_us + pl.time_remap_us
      assert.is_true(pl.time_masked_dense_us > 0)
      assert.near(pl.time_masked_dense_us / sparse, pl.speedup_sparse, 1e-9)
      md, sp = md + pl.time_masked_dense_us, sp + sparse
    end
    -- the top level: the ratio of the sums over layers, not the mean of the ratios
    assert.near(md, row.time_masked_dense_us, 1e-6)
    assert.near(md / sp, row.speedup_sparse, 1e-9)
    p:free()
  end)

  it("gives the same outputs with timed iterations of the masked-dense path as without",
  function()
    local cfg = small_cfg()
    local inputs = make_inputs(ctx, cfg, { 1500, 700, 600 }, { decode = true })
    local p = pipeline.new(ctx, cfg)
    local once = outputs_of(p, inputs, { acc = pipeline.new_acc() })
    local timed = outputs_of(p, inputs, { acc = pipeline.new_acc(),
      timing = { warmup = 1, iters = 3 } })
    assert.are.same(once, timed, "seed " .. SEED)
    p:free()
  end)

  it("captures with the garbage collector stopped, and restarts it after, on success or error",
  function()
    -- a finalizer run under capture (a dropped context's ixl_ctx_free, a dropped tensor's
    -- cudaFree) is an unsafe CUDA call that invalidates the capture: the GPU replay of the
    -- decode fixture failed so once (BENCHMARKS.md, session 5's last visit). The graph calls
    -- are stubbed here, so the CPU context runs the capture path.
    local cfg = small_cfg()
    local inputs = make_inputs(ctx, cfg, { 300, 200 }, { decode = true })
    local seen = {}
    ctx.graph_begin = function() seen.begin = collectgarbage("isrunning") end
    ctx.graph_end = function() seen.finish = collectgarbage("isrunning") end
    ctx.graph_launch = function() end
    local p = pipeline.new(ctx, cfg)
    local ok, err = pcall(p.capture, p, inputs, 1)
    assert.is_true(ok, tostring(err))
    assert.is_false(seen.begin)
    assert.is_false(seen.finish)
    assert.is_true(collectgarbage("isrunning"))
    -- an error inside the capture (not in the eager run before it): the collector still runs
    -- again afterwards, and the capture was ended
    local real, capturing, ended = p.production, false, false
    ctx.graph_begin = function() capturing = true end
    ctx.graph_end = function() capturing, ended = false, true end
    p.production = function(...)
      if capturing then error("boom") end
      return real(...)
    end
    ok, err = pcall(p.capture, p, inputs, 1)
    p.production = real
    ctx.graph_begin, ctx.graph_end, ctx.graph_launch = nil, nil, nil
    assert.is_false(ok)
    assert.matches("boom", tostring(err))
    assert.is_true(ended)
    assert.is_true(collectgarbage("isrunning"))
    p:free()
  end)

  it("refuses a graph option that is not a boolean", function()
    local cfg = small_cfg()
    local p = pipeline.new(ctx, cfg)
    local ok, err = pcall(function() p:step(make_inputs(ctx, cfg, { 300 }), { graph = 1 }) end)
    assert.is_false(ok)
    assert.matches("opts.graph = 1: must be a boolean", tostring(err))
    p:free()
  end)

  it("the runner warms up once before the sweep, says so, and records every point once",
  function()
    local measure = require("idxlab.measure")
    local real, calls = measure.measure, {}
    measure.measure = function(c, point)
      calls[#calls + 1] = point.warmup == true
      return real(c, point)
    end
    local text = {}
    local function sink(keep)
      return { write = function(self, ...)
        if keep then for _, x in ipairs({ ... }) do text[#text + 1] = tostring(x) end end
        return self
      end, flush = function(self) return self end }
    end
    local err_sink, out_sink = sink(true), sink(false)
    local dir = os.tmpname()
    os.remove(dir)
    local ok, res = pcall(require("idxlab.experiment").run, {
      name = "warm", seed = 3, backend = "cpu", sweep = { index_topk = { 32, 64 } },
      workload = { decode = { rows = 2, context = 2048 }, prefill = false, consumer_layers = 1 },
      config = { heads = 8, candidate_topk_blocks = 64, max_rows = 16, max_model_len = 8192 },
    }, { out = dir, stdout = out_sink, stderr = err_sink, progress = "plain", gnuplot = "none" })
    measure.measure = real
    os.execute("rm -rf '" .. dir .. "'")
    assert.is_true(ok, tostring(res))
    assert.equals(0, res.status, table.concat(text))
    assert.are.same({ true, false, false }, calls)
    assert.equals(2, #res.rows)
    local all = table.concat(text)
    assert.matches("warm%-up: one untimed step of point %d+'s shape on cpu, run %d+ times? "
      .. "%([%d.]+ s%), not recorded", all)
    local _, n = all:gsub("warm%-up:", "")
    assert.equals(1, n)
  end)
end)

describe("one Step across points (idxlab.measure's step cache, issue 15)", function()
  local measure = require("idxlab.measure")
  local ctx = idxlab.context{ backend = "cpu", seed = SEED, threads = 2 }
  local TIMING = { "time_", "speedup_sparse", "wall_" }

  -- the row without its timings (every depth), for comparing two measurements of one point
  local function untimed(v)
    if type(v) ~= "table" then return v end
    local out = {}
    for k, x in pairs(v) do
      local drop = false
      for _, p in ipairs(TIMING) do
        if type(k) == "string" and k:sub(1, #p) == p then drop = true end
      end
      if not drop then out[k] = untimed(x) end
    end
    return out
  end

  local function point(context, seed, over)
    local cfg = { heads = 8, index_topk = 32, candidate_block_size = 8,
      candidate_topk_blocks = 64, max_rows = 16, max_model_len = 16384 }
    for k, v in pairs(over or {}) do cfg[k] = v end
    return { config = cfg, seed = seed, by = "length",
      workload = { decode = { rows = 3, context = context },
        prefill = { { query_len = 5, context_len = context - 5 } }, consumer_layers = 2 } }
  end

  it("gives every point the row a fresh Step gives, over shapes that grow and shrink",
  function()
    local cache = measure.step_cache()
    local pts = { point(4096, SEED), point(4096, SEED + 1), point(8192, SEED + 2),
      point(2048, SEED + 3), point(8192, SEED + 4, { index_topk = 64 }) }
    local steps = {}
    for i, pt in ipairs(pts) do
      local fresh = measure.measure(ctx, pt)
      pt.steps = cache
      local reused = measure.measure(ctx, pt)
      assert.are.same(untimed(fresh), untimed(reused), "point " .. i .. " seed " .. SEED)
      steps[i] = cache.by_ctx[ctx].step
    end
    -- one Step while the config stays; a new one for the point of another config
    for i = 2, 4 do assert.equals(steps[1], steps[i]) end
    assert.are_not.equal(steps[4], steps[5])
    cache:free()
    assert.is_nil(next(cache.by_ctx))
  end)

  it("refuses a steps field that is not a step cache", function()
    local pt = point(2048, SEED)
    pt.steps = {}
    local ok, err = pcall(measure.measure, ctx, pt)
    assert.is_false(ok)
    assert.matches("measure: point.steps must be a measure.step_cache%(%)", tostring(err))
  end)

  it("drops the Step of a point that failed, and the next point makes a new one", function()
    local cache = measure.step_cache()
    local pt = point(2048, SEED)
    pt.steps = cache
    measure.measure(ctx, pt)
    local before = cache.by_ctx[ctx].step
    local bad = point(2048, SEED)
    bad.steps, bad.timing = cache, { iters = "x" }
    assert.is_false(pcall(measure.measure, ctx, bad))
    assert.is_nil(cache.by_ctx[ctx])
    assert.is_nil(before.builder) -- freed
    measure.measure(ctx, pt)
    assert.are_not.equal(before, cache.by_ctx[ctx].step)
    cache:free()
  end)

  it("copies to the host only what a collector's wants names", function()
    local cfg = small_cfg()
    local inputs = make_inputs(ctx, cfg, { 1500, 700 })
    local p = pipeline.new(ctx, cfg)
    local got = {}
    local keep = { wants = { cand_blocks = true, topk_pos = true },
      put = function(name) got[name] = true end,
      put_layer = function(name) got[name] = true end }
    p:step(inputs, { acc = pipeline.new_acc(), keep = keep })
    assert.are.same({ cand_blocks = true, topk_pos = true }, got)
    p:free()
  end)
end)
