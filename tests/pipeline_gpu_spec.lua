-- pipeline_gpu_spec (#gpu): the whole step on the GPU against the CPU reference, through the
-- same replay outputs (SPEC 7), and the production path captured in a CUDA graph and replayed:
-- the whole step (decode group and every chunk) as one graph, timed by its replays.
local idxlab = require("idxlab")
local pipeline = require("idxlab.pipeline")
local Tensor = require("idxlab.tensor")
local support = dofile((os.getenv("IDXLAB_ROOT") or ".") .. "/tests/support.lua")

-- fixed by default: CPU and GPU selections from fp32 logits agree exactly except at near-ties,
-- so a fixed seed keeps a failure reproducible (IXL_TEST_SEED picks another)
local SEED = tonumber(os.getenv("IXL_TEST_SEED") or "") or 4242

-- host inputs, copied to `ctx`'s memory
local function inputs_on(ctx, host)
  local out = {}
  for k, v in pairs(host) do
    if Tensor.is_tensor(v) and ctx:device_kind() == "device" then
      out[k] = Tensor.new(ctx, v:dtype(), v:shape(), "device"):copy_from(v)
    else
      out[k] = v
    end
  end
  return out
end

local function make_host(ctx, H, lens, decode, seed)
  return require("idxlab.workload").random(ctx, { heads = H, lens = lens, decode = decode,
    seed = seed })
end

-- The small config of the step specs: H heads, with `extra`'s fields on top.
local function small_cfg(H, extra)
  local cfg = { heads = H, index_topk = 64, candidate_block_size = 8, candidate_topk_blocks = 64,
    max_rows = 64, max_model_len = 16384, page_size = 64 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return cfg
end

-- One step of a fresh Step on ctx -> its kept outputs, its summarized row and the variants it
-- ran (the Step freed).
local function step_once(ctx, cfg, inputs)
  local p = pipeline.new(ctx, cfg)
  local acc = pipeline.new_acc()
  local outs, keep = support.keep_outputs()
  local r = p:step(inputs, { acc = acc, keep = keep })
  p:free()
  return { outs = outs, row = pipeline.summarize(acc, nil), ran = r.variant }
end

-- The graph specs' step: a decode group and a prefill request the chunker splits into 3
-- chunks under the 1 MiB logits budget
local GRAPH_CFG = { heads = 32, index_topk = 64, candidate_block_size = 8,
  candidate_topk_blocks = 64, max_rows = 128, max_model_len = 16384, page_size = 64,
  max_logits_bytes = 1048576 }
local GRAPH_WL = { decode = { rows = 4, context = 8192 },
  prefill = { { query_len = 96, context_len = 8000 } }, consumer_layers = 2 }

describe("#gpu the step on the GPU", function()
  local ok_cuda = idxlab.cuda_available()
  local cpu = idxlab.context{ backend = "cpu", seed = SEED }
  local gpu = ok_cuda and idxlab.context{ backend = "cuda", seed = SEED } or nil

  for _, case in ipairs({
    { fmt = "mxfp4", H = 32, decode = false }, { fmt = "mxfp4", H = 64, decode = true },
    { fmt = "mxfp8", H = 8, decode = false }, { fmt = "fp8", H = 16, decode = true },
  }) do
    local title = ("matches the CPU step: %s, H = %d, %s"):format(case.fmt, case.H,
      case.decode and "decode" or "ragged")
    it(title, function()
      assert.is_true(ok_cuda, "no usable CUDA device")
      local cfg = small_cfg(case.H, { kv_format = case.fmt })
      -- a decode row always sees at least its own token; a ragged row may be empty
      local lens = { 3000, 513, 100, case.decode and 1 or 0, 1999 }
      local host = make_host(cpu, case.H, lens, case.decode, SEED + case.H)
      local res = {}
      for name, ctx in pairs({ cpu = cpu, gpu = gpu }) do
        res[name] = step_once(ctx, cfg, inputs_on(ctx, host))
      end
      -- the default logits variant: v2 for mxfp4 at H 32/64 (its own kernels, bitwise the
      -- CPU's), v1 for the others
      assert.equals(case.fmt == "mxfp4" and "v2" or "v1", res.gpu.ran.logits)
      assert.equals(0, res.gpu.row.logit_mismatches)
      assert.equals(1, res.gpu.row.selection_agreement)
      for _, name in ipairs({ "cand_blocks", "sparse_ids", "end", "source_topk_pos", "topk_pos1",
        "topk_pos2", "dense_topk_pos1", "masked_topk_pos1" }) do
        assert.are.same(res.cpu.outs[name], res.gpu.outs[name], name .. " seed " .. SEED)
      end
      if case.fmt == "mxfp4" then
        assert.are.same(res.cpu.outs.sparse_logits1, res.gpu.outs.sparse_logits1,
          "sparse logits bitwise")
      end
    end)
  end

  it("allocates nothing on the host or the device after the first step", function()
    assert.is_true(ok_cuda, "no usable CUDA device")
    local cfg = small_cfg(32)
    local p = pipeline.new(gpu, cfg)
    local inputs = inputs_on(gpu, make_host(cpu, 32, { 2500, 800, 1600 }, false, SEED + 9))
    p:step(inputs, { acc = pipeline.new_acc() })
    collectgarbage(); collectgarbage() -- earlier specs' dropped tensors go now, not mid-check
    local before = gpu:alloc_stats()
    for _ = 1, 3 do p:step(inputs, { acc = pipeline.new_acc() }) end
    collectgarbage(); collectgarbage()
    local after = gpu:alloc_stats()
    assert.equals(before.device_allocs, after.device_allocs)
    assert.equals(before.host_allocs, after.host_allocs)
    p:free()
  end)

  it("captures the production path in a CUDA graph and replays it", function()
    assert.is_true(ok_cuda, "no usable CUDA device")
    local cfg = small_cfg(32)
    local host = make_host(cpu, 32, { 2500, 800, 1600 }, true, SEED + 7)
    local p = pipeline.new(gpu, cfg)
    local inputs = inputs_on(gpu, host)
    local eager_outs, keep = support.keep_outputs()
    p:step(inputs, { acc = pipeline.new_acc(), keep = keep })
    local before = gpu:alloc_stats()
    local G = p:capture(inputs, 3)
    assert.equals(before.device_bytes_live, gpu:alloc_stats().device_bytes_live)
    assert.are.same(eager_outs.topk_pos1[0], G.layers[1].pos:to_table())
    assert.are.same(eager_outs.topk_pos2[0], G.layers[2].pos:to_table())
    p:free()
  end)

  it("fuses K7 into K6 under select v2 (remap 0 us, fused = {remap}); v1 times it apart",
  function()
    assert.is_true(ok_cuda, "no usable CUDA device")
    local host = make_host(cpu, 32, { 2500, 800, 1600 }, true, SEED + 11)
    local res = {}
    for _, sv in ipairs({ "v2", "v1" }) do
      res[sv] = step_once(gpu, small_cfg(32, { variant = { select = sv } }), inputs_on(gpu, host))
    end
    assert.equals("v2", res.v2.ran.select)
    assert.are.same({ "remap" }, res.v2.row.fused)
    assert.equals(0, res.v2.row.time_remap_us)
    assert.equals("v1", res.v1.ran.select)
    assert.is_nil(res.v1.row.fused)
    assert.is_true(res.v1.row.time_remap_us > 0)
    for _, name in ipairs({ "topk_pos1", "topk_pos2" }) do
      assert.are.same(res.v1.outs[name], res.v2.outs[name], name .. " seed " .. SEED)
    end
  end)

  it("fuses K3 into the source logits under logits v1 (candidate_select 0 us, fused lists it)",
  function()
    assert.is_true(ok_cuda, "no usable CUDA device")
    local step = require("idxlab.step")
    local was = step.fuse_candidate_select
    for _, case in ipairs({ { fmt = "fp8", H = 16, decode = true, cbs = 8 },
      { fmt = "mxfp4", H = 32, decode = false, cbs = 16 } }) do
      local cfg = small_cfg(case.H, { kv_format = case.fmt, candidate_block_size = case.cbs,
        variant = { logits = "v1" } })
      local host = make_host(cpu, case.H, { 3000, 513, 100, case.decode and 1 or 0, 1999 },
        case.decode, SEED + 13)
      local res = {}
      for _, on in ipairs({ true, false }) do
        step.fuse_candidate_select = on
        local ok, r = pcall(step_once, gpu, cfg, inputs_on(gpu, host))
        step.fuse_candidate_select = was
        assert(ok, tostring(r))
        res[on] = r
      end
      res.cpu = step_once(cpu, small_cfg(case.H, { kv_format = case.fmt,
        candidate_block_size = case.cbs }), inputs_on(cpu, host))
      local what = ("%s H %d seed %d"):format(case.fmt, case.H, SEED)
      assert.equals("v1", res[true].ran.logits)
      assert.is_truthy(res[true].row.fused, what)
      local listed = {}
      for _, f in ipairs(res[true].row.fused) do listed[f] = true end
      assert.is_true(listed.candidate_select, what)
      assert.equals(0, res[true].row.time_candidate_select_us, what)
      local unlisted = true
      for _, f in ipairs(res[false].row.fused or {}) do
        unlisted = unlisted and f ~= "candidate_select"
      end
      assert.is_true(unlisted, what)
      assert.is_true(res[false].row.time_candidate_select_us > 0, what)
      for _, name in ipairs({ "cand_blocks", "sparse_ids", "end", "source_topk_pos", "topk_pos1",
        "topk_pos2" }) do
        assert.are.same(res[false].outs[name], res[true].outs[name], name .. " " .. what)
        assert.are.same(res.cpu.outs[name], res[true].outs[name], name .. " (CPU) " .. what)
      end
      assert.equals(1, res[true].row.selection_agreement, what)
    end
  end)
end)

describe("#gpu the step as one CUDA graph (SPEC 6, issue 15)", function()
  local config = require("idxlab.config")
  local workload = require("idxlab.workload")
  local ok_cuda = idxlab.cuda_available()
  local gpu = ok_cuda and idxlab.context{ backend = "cuda", seed = SEED } or nil
  -- GRAPH_WL's four groups (checked below): one graph must hold them all
  local cfg, wl = GRAPH_CFG, GRAPH_WL

  -- every eager output by name and group start (the comparison path's keep)
  local function keeper()
    local got = {}
    return got, {
      put = function(name, t, r0) got[name .. "@" .. r0] = t:to_table() end,
      put_layer = function(name, l, t, r0) got[name .. l .. "@" .. r0] = t:to_table() end,
    }
  end

  -- gpu's graph calls counted while f runs
  local function counting(f)
    local n = { begin = 0, launch = 0 }
    local Context = getmetatable(gpu)
    gpu.graph_begin = function(c) n.begin = n.begin + 1; return Context.graph_begin(c) end
    gpu.graph_launch = function(c) n.launch = n.launch + 1; return Context.graph_launch(c) end
    local ok, err = pcall(f)
    gpu.graph_begin, gpu.graph_launch = nil, nil
    assert(ok, tostring(err))
    return n
  end

  it("captures the decode group and every chunk as one graph, replayed warmup + iters times",
  function()
    assert.is_true(ok_cuda, "no usable CUDA device")
    local inputs = workload.generate(gpu, wl, config.describe(cfg).config, SEED)
    local p = pipeline.new(gpu, cfg)
    local acc = pipeline.new_acc()
    local got, keep = keeper()
    local res
    local n = counting(function()
      res = p:step(inputs, { acc = acc, keep = keep, timing = { warmup = 2, iters = 7 } })
    end)
    assert.equals(3, res.num_chunks)
    assert.equals(4, #res.groups)
    assert.is_true(res.logits_bytes <= cfg.max_logits_bytes)
    assert.equals(1, n.begin)
    assert.equals(2 + 7, n.launch)
    assert.is_true(res.times.graph)
    local row = pipeline.summarize(acc, nil)
    assert.equals(0, row.logit_mismatches)
    assert.equals(1, row.selection_agreement)
    assert.is_true(row.time_step_us > 0)
    assert.is_true(row.time_step_us <= row.time_step_eager_us, ("graph %.1f us > eager %.1f us")
      :format(row.time_step_us, row.time_step_eager_us))
    assert.is_number(row.speedup_sparse)
    -- the shared buffers hold the last group's outputs of the last replay: bitwise the eager
    -- run's; the builder's per-group outputs (layer 1's columns, the expansion) all groups'
    local last = res.groups[4]
    for l = 1, 2 do
      assert.are.same(got["topk_pos" .. l .. "@" .. last.r0], last.layers[l].pos:to_table(),
        "layer " .. l .. " seed " .. SEED)
      assert.are.same(got["sparse_logits" .. l .. "@" .. last.r0], last.layers[l].S:to_table(),
        "sparse logits, layer " .. l)
    end
    for _, G in ipairs(res.groups) do
      assert.are.same(got["sparse_ids@" .. G.r0], G.sparse_ids:to_table(), "group at " .. G.r0)
      assert.are.same(got["end@" .. G.r0], G.end_:to_table(), "group at " .. G.r0)
    end
    p:free()
    for _, t in pairs(inputs) do if Tensor.is_tensor(t) then t:free() end end
  end)

  it("allocates nothing after the first graph step; graph = false times it eagerly only",
  function()
    assert.is_true(ok_cuda, "no usable CUDA device")
    local inputs = workload.generate(gpu, wl, config.describe(cfg).config, SEED + 1)
    local p = pipeline.new(gpu, cfg)
    p:step(inputs, { acc = pipeline.new_acc(), timing = { warmup = 1, iters = 2 } })
    collectgarbage(); collectgarbage()
    local before = gpu:alloc_stats()
    for _ = 1, 3 do p:step(inputs, { acc = pipeline.new_acc(), timing = { iters = 2 } }) end
    collectgarbage(); collectgarbage()
    local after = gpu:alloc_stats()
    assert.equals(before.device_allocs, after.device_allocs)
    assert.equals(before.host_allocs, after.host_allocs)
    assert.equals(before.device_bytes_live, after.device_bytes_live)
    local res
    local n = counting(function() res = p:step(inputs, { graph = false }) end)
    assert.are.same({ begin = 0, launch = 0 }, n)
    assert.is_false(res.times.graph)
    assert.equals(res.times.step_eager, res.times.step)
    p:free()
    for _, t in pairs(inputs) do if Tensor.is_tensor(t) then t:free() end end
  end)
end)

describe("#gpu one graph per step shape across steps (issue 15)", function()
  local config = require("idxlab.config")
  local workload = require("idxlab.workload")
  local measure = require("idxlab.measure")
  local ok_cuda = idxlab.cuda_available()
  local gpu = ok_cuda and idxlab.context{ backend = "cuda", seed = SEED } or nil
  local cfg, wl = GRAPH_CFG, GRAPH_WL
  local wl2 = { decode = { rows = 6, context = 4096 },
    prefill = { { query_len = 40, context_len = 6000 } }, consumer_layers = 2 }

  local function gen(w, seed)
    return workload.generate(gpu, w, config.describe(cfg).config, seed)
  end
  local function free_inputs(x)
    for _, t in pairs(x) do if Tensor.is_tensor(t) then t:free() end end
  end

  -- one step, with gpu's graph captures counted and the eager outputs kept
  local function step(p, inputs)
    local n = 0
    local Context = getmetatable(gpu)
    gpu.graph_begin = function(c) n = n + 1; return Context.graph_begin(c) end
    local got = {}
    local keep = {
      put = function(name, t, r0) got[name .. "@" .. r0] = t:to_table() end,
      put_layer = function(name, l, t, r0) got[name .. l .. "@" .. r0] = t:to_table() end,
    }
    local ok, res = pcall(p.step, p, inputs, { acc = pipeline.new_acc(), keep = keep,
      timing = { iters = 2 } })
    gpu.graph_begin = nil
    assert(ok, tostring(res))
    return n, res, got
  end

  -- the replayed graph's outputs (the last group's, in the shared buffers) against the eager
  -- run's of the same step
  local function replay_matches(res, got)
    local last = res.groups[#res.groups]
    for l = 1, 2 do
      assert.are.same(got["topk_pos" .. l .. "@" .. last.r0], last.layers[l].pos:to_table(),
        "layer " .. l .. " seed " .. SEED)
    end
  end

  it("replays the context's graph for a step of the same shape; captures another shape",
  function()
    assert.is_true(ok_cuda, "no usable CUDA device")
    local a, b, c = gen(wl, SEED + 2), gen(wl, SEED + 3), gen(wl2, SEED + 4)
    local p = pipeline.new(gpu, cfg)
    local n, res, got = step(p, a)
    assert.equals(1, n)
    assert.is_true(res.times.captured)
    local got_a = got
    n, res, got = step(p, b)
    assert.equals(0, n)
    assert.is_false(res.times.captured)
    assert.is_true(res.times.graph)
    replay_matches(res, got)
    local r0 = res.groups[#res.groups].r0
    assert.are_not.same(got_a["topk_pos1@" .. r0], got["topk_pos1@" .. r0])
    n, res, got = step(p, c)
    assert.equals(1, n)
    replay_matches(res, got)
    n, res, got = step(p, b) -- the context now holds c's graph
    assert.equals(1, n)
    replay_matches(res, got)
    -- another Step of the same config captures its own
    local p2 = pipeline.new(gpu, cfg)
    n = step(p2, b)
    assert.equals(1, n)
    n, res, got = step(p, b)
    assert.equals(1, n)
    replay_matches(res, got)
    p:free()
    p2:free()
    free_inputs(a); free_inputs(b); free_inputs(c)
  end)

  it("measure with a step cache gives the rows of fresh Steps, capturing once per shape",
  function()
    assert.is_true(ok_cuda, "no usable CUDA device")
    local function untimed(v)
      if type(v) ~= "table" then return v end
      local out = {}
      for k, x in pairs(v) do
        if not (type(k) == "string" and (k:match("^time_") or k == "speedup_sparse")) then
          out[k] = untimed(x)
        end
      end
      return out
    end
    local cache = measure.step_cache()
    local n = 0
    local Context = getmetatable(gpu)
    gpu.graph_begin = function(cx) n = n + 1; return Context.graph_begin(cx) end
    local ok, err = pcall(function()
      for i, w in ipairs({ wl, wl, wl2, wl2 }) do
        local pt = { config = cfg, workload = w, seed = SEED + 10 + i, by = "length" }
        local fresh = measure.measure(gpu, pt)
        pt.steps = cache
        local before = n
        local reused = measure.measure(gpu, pt)
        assert.are.same(untimed(fresh), untimed(reused), "point " .. i .. " seed " .. SEED)
        -- a fresh Step between the cached ones took the context's graph: one capture each
        assert.equals(before + 1, n)
      end
      -- the next point of the last shape, on the cached Step: no capture
      local before = n
      measure.measure(gpu, { config = cfg, workload = wl2, seed = SEED + 20, steps = cache })
      assert.equals(before, n)
    end)
    gpu.graph_begin = nil
    cache:free()
    assert(ok, tostring(err))
  end)
end)

describe("#gpu errors on the GPU", function()
  it("reports an out-of-memory with the bytes asked for and free, and the context keeps working",
  function()
    assert.is_true(require("idxlab").cuda_available(), "no usable CUDA device")
    local gpu = require("idxlab").context{ backend = "cuda" }
    local ok, err = pcall(function() return gpu:tensor("f32", { 2 ^ 40 }) end) -- 4 TiB
    assert.is_false(ok)
    assert.matches("out of device memory: asked for 4398046511104 bytes, %d+ bytes free of %d+",
      err)
    assert.is_false(gpu:poisoned())
    local t = gpu:tensor("i32", { 4 }):from_table({ 1, 2, 3, 4 })
    assert.are.same({ 1, 2, 3, 4 }, t:to_table())
    t:free()
  end)
end)
