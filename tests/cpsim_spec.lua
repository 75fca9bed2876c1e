-- cpsim_spec: the context-parallel simulation (idxlab.cpsim, issue 17) on the CPU: the
-- striping rule, c = 1 reproducing the single-rank row bitwise, global selection with
-- block_score = max equal to the single-rank K3 for any c and I (random rows and the
-- structured workload), the global top-k merge equal to the top-k of the union, a rank reading
-- only its own keys (the others poisoned), the local policy's rules, and the knob in the
-- experiment schema and --set.
local idxlab = require("idxlab")
local cpsim = require("idxlab.cpsim")
local step = require("idxlab.step")
local summary = require("idxlab.summary")
local measure = require("idxlab.measure")
local workload = require("idxlab.workload")
local schema = require("idxlab.experiment.schema")
local sets = require("idxlab.experiment.sets")

-- printed on failure
local SEED = tonumber(os.getenv("IXL_TEST_SEED") or "") or (os.time() % 100000)

local function small_cfg(over)
  local cfg = { heads = 8, index_topk = 64, candidate_block_size = 8, candidate_topk_blocks = 64,
    max_rows = 64, max_model_len = 65536, page_size = 64 }
  for k, v in pairs(over or {}) do cfg[k] = v end
  return cfg
end

-- The single-rank step and the simulation over the same inputs.
local function simulate(ctx, cfg, inputs, sim, opts)
  local p = step.new(ctx, cfg)
  local keep = cpsim.collector()
  local acc, acc2, cp = summary.new_acc(), summary.new_acc(), cpsim.new_cp()
  p:step(inputs, { acc = acc, keep = keep })
  local s = cpsim.check(sim)
  cpsim.sim_step(ctx, p.cfg, s, inputs, keep, acc2, cp, opts)
  local row = cpsim.finish(summary.summarize(acc, nil), acc2, cp, s)
  local base = summary.summarize(acc, nil)
  p:free()
  return row, base, keep, p.cfg
end

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do if v >= 0 then s[v] = true end end
  return s
end

local function same_set(a, b)
  local sa, sb = set_of(a), set_of(b)
  for k in pairs(sa) do if not sb[k] then return false end end
  for k in pairs(sb) do if not sa[k] then return false end end
  return true
end

-- The non-timing metrics of a row, per_layer included.
local function quality(row)
  local out = {}
  for k, v in pairs(row) do
    if type(k) == "string" and not k:match("^time_") and not k:match("^speedup")
        and not k:match("^cp_")
        and not k:match("^context_parallel_sim") and k ~= "per_layer" and k ~= "variant" then
      out[k] = v
    end
  end
  out.per_layer = {}
  for l, pl in ipairs(row.per_layer or {}) do
    local q = {}
    for k, v in pairs(pl) do
      if not k:match("^time_") and not k:match("^speedup") then q[k] = v end
    end
    out.per_layer[l] = q
  end
  return out
end

describe("context_parallel_sim on the CPU", function()
  local ctx = idxlab.context{ backend = "cpu", seed = SEED, threads = 2 }

  it("stripes position p onto rank floor(p / I) mod c, parts contiguous in local K", function()
    for _, c in ipairs({ 1, 2, 3, 4, 8 }) do
      for _, I in ipairs({ 1, 3, 8, 64, 1000 }) do
        local len, cbs = 1234, 8
        local seen = {}
        for r = 0, c - 1 do
          local parts, n = cpsim.parts(len, c, I, cbs, r)
          local at = 0
          for _, p in ipairs(parts) do
            assert.are.equal(at, p.lo) -- one contiguous run of local K per part
            for j = p.lo, p.lo + p.n - 1 do
              local pos = cpsim.pos_of(r, j, { size = c, interleave = I })
              assert.are.equal(r, cpsim.rank_of(pos, c, I))
              assert.are.equal(p.block, math.floor(pos / cbs))
              assert.is_nil(seen[pos])
              seen[pos] = true
            end
            at = at + p.n
          end
          assert.are.equal(at, n)
        end
        for p = 0, len - 1 do assert.is_true(seen[p], ("c=%d I=%d p=%d"):format(c, I, p)) end
      end
    end
  end)

  it("c = 1 reproduces the single-rank row bitwise (global and local, any interleave)", function()
    local pt = { config = { heads = 8, index_topk = 64, candidate_topk_blocks = 64,
      max_rows = 8, max_model_len = 65536 },
      workload = { decode = { rows = 3, context = 4096 }, prefill = false, consumer_layers = 2 },
      seed = SEED }
    local base = measure.measure(ctx, pt)
    for _, sim in ipairs({ { size = 1 }, { size = 1, interleave = 8, candidates = "local" },
      { size = 1, interleave = 7 } }) do
      local p2 = {}
      for k, v in pairs(pt) do p2[k] = v end
      p2.context_parallel_sim = sim
      local row = measure.measure(ctx, p2)
      assert.are.same(quality(base), quality(row))
      assert.are.equal(1, row.cp_work_imbalance)
      assert.are.equal(0, row.cp_bytes_block_scores)
      assert.are.equal(0, row.cp_bytes_topk)
      assert.are.equal(1, row.cp_candidate_agreement)
      assert.are.equal(1, row["context_parallel_sim.size"])
    end
  end)

  it("global selection with block_score = max equals the single-rank K3 (random rows)", function()
    local cfg = small_cfg()
    local inputs = workload.random(ctx, { heads = 8, lens = { 3000, 777, 4096, 513, 1 },
      decode = true, layers = 2, seed = SEED })
    for _, c in ipairs({ 2, 3, 4, 8 }) do
      for _, I in ipairs({ 1, 3, 8, 64 }) do
        local rec = {}
        local row, base, keep = simulate(ctx, cfg, inputs, { size = c, interleave = I }, {
          record = rec })
        assert.are.equal(1, row.cp_candidate_agreement)
        for i, r in pairs(rec) do
          -- the blocks kept on some rank are exactly the single-rank candidates
          local kept = {}
          for _, rk in ipairs(r.ranks) do
            for _, p in ipairs(rk.parts) do if p.kept then kept[#kept + 1] = p.block end end
          end
          assert.is_true(same_set(kept, keep.rows[i]), ("c=%d I=%d row %d"):format(c, I, i))
          -- the merge equals the single-rank sparse top-k: the union is the same positions
          for l = 1, 2 do
            assert.is_true(same_set(r.merged[l], keep.topk[l][i]),
              ("c=%d I=%d row %d layer %d"):format(c, I, i, l))
          end
        end
        assert.are.equal(base.recall_at_k, row.recall_at_k)
        assert.are.equal(base.mass_recall, row.mass_recall)
        assert.are.equal(base.candidate_coverage, row.candidate_coverage)
      end
    end
    workload.free(inputs)
  end)

  it("global selection with block_score = max equals K3 on the structured workload", function()
    local cfg = small_cfg({ candidate_topk_blocks = 64, index_topk = 64 })
    local inputs = workload.generate(ctx, { decode = { rows = 2, context = 8192 },
      prefill = false, consumer_layers = 1 }, require("idxlab.config").resolve(cfg), SEED)
    for _, sim in ipairs({ { size = 2, interleave = 1 }, { size = 4, interleave = 8 },
      { size = 8, interleave = 64 }, { size = 3, interleave = 5 } }) do
      local row, base = simulate(ctx, cfg, inputs, sim)
      assert.are.equal(1, row.cp_candidate_agreement)
      assert.are.equal(base.recall_at_k, row.recall_at_k)
      assert.are.equal(base.mass_recall, row.mass_recall)
    end
    workload.free(inputs)
  end)

  it("reports the difference for sum, mean and logsumexp (combined partials)", function()
    local inputs = workload.random(ctx, { heads = 8, lens = { 3000, 2048 }, decode = true,
      layers = 1, seed = SEED })
    for _, how in ipairs({ "sum", "mean", "logsumexp" }) do
      local row = simulate(ctx, small_cfg({ block_score = how }), inputs,
        { size = 4, interleave = 3 })
      assert.is_true(row.cp_candidate_agreement > 0.9 and row.cp_candidate_agreement <= 1)
      assert.is_nil(row.cp_bytes_candidates) -- the top-T exchange is exact for max only
    end
    workload.free(inputs)
  end)

  it("merges the ranks' top-k lists into the top-k of their union (local policy)", function()
    local cfg = small_cfg()
    local inputs = workload.random(ctx, { heads = 8, lens = { 4000, 2500 }, decode = true,
      layers = 2, seed = SEED })
    local rec = {}
    simulate(ctx, cfg, inputs, { size = 4, interleave = 3, candidates = "local" },
      { record = rec })
    local f = require("ffi")
    local box = f.new("uint32_t[1]")
    local function val(raw) box[0] = bit.lshift(raw, 16); return f.cast("float *", box)[0] end
    for _, r in pairs(rec) do
      for l = 1, 2 do
        -- the union, sorted by (value desc, position asc): its first k are the merge
        local all = {}
        for _, e in ipairs(r.lists[l]) do all[#all + 1] = e end
        table.sort(all, function(a, b)
          local va, vb = val(a.raw), val(b.raw)
          if va ~= vb then return va > vb end
          return a.pos < b.pos
        end)
        local want = {}
        for j = 1, math.min(cfg.index_topk, #all) do want[j] = all[j].pos end
        assert.is_true(same_set(want, r.merged[l]))
      end
    end
    workload.free(inputs)
  end)

  it("keeps top-ceil(T/c) parts per rank and the newest block on every rank (local)", function()
    local cfg = small_cfg({ candidate_topk_blocks = 64 })
    local inputs = workload.random(ctx, { heads = 8, lens = { 4001, 2500 }, decode = true,
      layers = 1, seed = SEED })
    for _, sim in ipairs({ { size = 3, interleave = 3 }, { size = 8, interleave = 1 },
      { size = 4, interleave = 64 } }) do
      sim.candidates = "local"
      local rec = {}
      local row = simulate(ctx, cfg, inputs, sim, { record = rec })
      local total, rows = 0, 0
      for _, r in pairs(rec) do
        local len = 0
        for _, rk in ipairs(r.ranks) do len = len + rk.n end
        local newest = math.ceil(len / 8) - 1
        local row_kept = 0
        for _, rk in ipairs(r.ranks) do
          local n = 0
          for _, p in ipairs(rk.parts) do
            if p.kept then n = n + 1 end
            if p.block == newest then assert.is_true(p.kept) end
          end
          assert.are.equal(math.min(math.ceil(64 / sim.size), #rk.parts), n)
          row_kept = row_kept + n
        end
        total, rows = total + row_kept, rows + 1
      end
      assert.are.equal(total / rows, row.cp_kept_blocks)
      assert.are.equal(0, row.cp_bytes_block_scores)
    end
    workload.free(inputs)
  end)

  it("each rank reads only its own keys (the other ranks' positions poisoned)", function()
    local cfg = small_cfg()
    local inputs = workload.random(ctx, { heads = 8, lens = { 3000, 1500 }, decode = true,
      layers = 2, seed = SEED })
    for _, sim in ipairs({ { size = 4, interleave = 3, candidates = "local" },
      { size = 2, interleave = 8, candidates = "global" } }) do
      local clean = {}
      simulate(ctx, cfg, inputs, sim, { record = clean })
      for r = 0, sim.size - 1 do
        local dirty = {}
        simulate(ctx, cfg, inputs, sim, { record = dirty, poison_except = r })
        local bites = false
        for i, rec in pairs(clean) do
          -- the poison reaches the other ranks (so the check below can fail)
          for r2, rk in ipairs(rec.ranks) do
            -- (by text: a poisoned max may be NaN, which equals nothing)
            if r2 ~= r + 1 and rk.parts[1] and tostring(rk.parts[1].partial.max)
                ~= tostring(dirty[i].ranks[r2].parts[1].partial.max) then
              bites = true
            end
          end
          local a, b = rec.ranks[r + 1], dirty[i].ranks[r + 1]
          assert.are.equal(#a.parts, #b.parts)
          for j, p in ipairs(a.parts) do
            -- its source scores: from its own keys only
            assert.are.same(p.partial, b.parts[j].partial)
          end
          if sim.candidates == "local" then
            -- and its consumers' lists (its selection needs no other rank)
            for l = 1, 2 do
              local la, lb = {}, {}
              for _, e in ipairs(rec.lists[l]) do if e.rank == r then la[#la + 1] = e end end
              for _, e in ipairs(dirty[i].lists[l]) do if e.rank == r then lb[#lb + 1] = e end end
              assert.are.same(la, lb)
            end
          end
        end
        assert.is_true(bites)
      end
    end
    workload.free(inputs)
  end)

  it("is a knob: schema, sweep and --set, refusals named", function()
    local exp = { name = "x", workload = { decode = { rows = 1, context = 4096 }, prefill = false },
      context_parallel_sim = { size = 2, interleave = 8 } }
    local e = schema.validate(exp, "t")
    assert.are.same({ size = 2, interleave = 8, candidates = "global" }, e.context_parallel_sim)
    local e2 = sets.apply(exp, { "context_parallel_sim.size=1,2,4,8",
      "context_parallel_sim.candidates=local" }, "t")
    local v = schema.validate(e2, "t")
    assert.are.same({ 1, 2, 4, 8 }, v.sweep["context_parallel_sim.size"])
    assert.are.equal("local", v.context_parallel_sim.candidates)
    assert.is_nil(v.context_parallel_sim.size)
    local ok, err = pcall(schema.validate, { name = "x", context_parallel_sim = { size = 0 } }, "t")
    assert.is_false(ok)
    local want = "'context_parallel_sim.size' = 0: must be an integer"
    assert.truthy(tostring(err):find(want, 1, true))
    ok, err = pcall(schema.validate, { name = "x", sweep = {
      ["context_parallel_sim.candidates"] = { "global", "nearby" } } }, "t")
    assert.is_false(ok)
    assert.truthy(tostring(err):match("global"))
    -- the production refusal stays
    ok, err = pcall(step.new, ctx, small_cfg({ context_parallel = 2 }))
    assert.is_false(ok)
    assert.truthy(tostring(err):match("context_parallel"))
  end)
end)
