-- builder_spec: the metadata builder from Lua (SPEC 4): V4.1-Flash derived values, one spec
-- per engine-start check with its message, build(batch) returning views that allocate
-- nothing, batch errors naming the request, seeded random batches checked row by row, and
-- (#gpu) the same metadata from a CUDA builder as from a CPU one.
local idxlab = require("idxlab")
local chunker = require("idxlab.chunker")

local support = dofile((os.getenv("IDXLAB_ROOT") or ".") .. "/tests/support.lua")
local err_of = support.err_of

-- 64 sparse blocks of 8, top-k 64, pages of 16, 256 rows.
local function small(over)
  local c = { candidate_topk_blocks = 64, index_topk = 64, page_size = 16, max_rows = 256,
    max_model_len = 8192, workspace_tokens = 2048, max_logits_bytes = 65536 }
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

describe("builder config", function()
  local ctx = idxlab.context{ backend = "cpu" }

  it("derives the V4.1-Flash values of SPEC 1", function()
    local b = idxlab.builder(ctx, { max_rows = 64 })
    local i = b:info()
    assert.equals(8, i.sparse_block_kv)
    assert.equals(16384, i.num_sparse_cols)
    assert.equals(2048, i.num_sparse_blocks)
    assert.equals(8192, i.min_split_seq_len)
    assert.equals(32, i.heads)
    assert.equals(512, i.index_topk)
    assert.equals("mxfp4", i.kv_format)
    assert.equals(41943040, i.workspace_tokens)
    assert.equals(64 * 2048 * 4, i.sparse_ids_bytes)
    assert.equals(64 * 512 * 4, i.col_indices_bytes)
    assert.equals(64 * 4, i.end_bytes)
    assert.equals(64 * 4, i.zero_row_starts_bytes)
    assert.equals(64 * 4, i.row_ks_bytes)
    assert.equals(64 * 4, i.row_ke_bytes)
    assert.equals(64 * 4, i.row_indices_bytes)
    assert.equals(64 * (2048 + 512 + 5) * 4, i.scratch_bytes)
    assert.are.same({ 4, 8 }, i.valid_sparse_block_kv)
    assert.equals("host", i.device)
    b:free()
    local b2 = idxlab.builder(ctx, { max_rows = 64, split_width = "bf16+fp32" })
    assert.equals(24576, b2:info().min_split_seq_len)
    b2:free()
    -- A builder with no context gets a CPU one; the defaults are the reference config.
    local d = idxlab.builder.describe({})
    assert.equals(16384, d.derived.num_sparse_cols)
    assert.equals(2048, d.derived.num_sparse_blocks)
  end)

  it("holds its scratch on the context and frees it", function()
    local c2 = idxlab.context{ backend = "cpu" }
    local before = c2:alloc_stats().host_bytes_live
    local b = idxlab.builder(c2, small())
    local i = b:info()
    assert.is_true(c2:alloc_stats().host_bytes_live - before >= i.scratch_bytes)
    b:free()
    assert.equals(before, c2:alloc_stats().host_bytes_live)
    assert.matches("builder was freed", err_of(function() return b:build{} end))
    b:free()
    -- the views of an earlier step die with the builder: an error, never a read of freed memory
    local b4 = idxlab.builder(c2, small())
    local step = b4:build{ decode = { { context_len = 100 } } }
    b4:free()
    assert.matches("builder this view looks into was freed",
      err_of(function() return step.decode.sparse_ids:to_table() end))
    assert.matches("cols: the tensor or builder this view looks into was freed",
      err_of(function() return require("idxlab.select").remap(c2, step.decode.col_indices,
        step.decode.sparse_ids, nil, 8) end))
    local b3 = idxlab.builder(small())
    assert.equals("host", b3:info().device)
    b3:free()
  end)

  -- One spec per SPEC 4 check: the config and the message it must give.
  local rules = {
    { "a two-level model", { candidate_block_size = 0 },
      "candidate_block_size = 0, candidate_topk_blocks = 2048: both must be > 0" },
    { "a two-level model (T)", { candidate_topk_blocks = 0 },
      "candidate_topk_blocks = 0: both must be > 0" },
    { "no context parallelism", { context_parallel = 2 }, "context_parallel = 2: must be 1" },
    { "kv_format", { kv_format = "fp4" }, "kv_format = fp4: must be one of mxfp4, mxfp8, fp8" },
    { "pick_sparse_block_kv needs 16 or 8", { candidate_block_size = 12 },
      "sparse_block_kv = auto: pick_sparse_block_kv%(candidate_block_size = 12%) needs 16 or 8 "
        .. "to divide candidate_block_size; set sparse_block_kv explicitly %(valid choices for "
        .. "this config: 4%)" },
    { "explicit sbk: a listed choice", { candidate_block_size = 16, sparse_block_kv = 12 },
      "sparse_block_kv = 12: must be a power of two in %[4, min%(candidate_block_size, 128%)%] "
        .. "that divides candidate_block_size %(16%) and page_size %(128%); valid choices for "
        .. "this config: 4, 8, 16" },
    { "explicit sbk: at most cbs", { sparse_block_kv = 16 },
      "sparse_block_kv = 16: .*valid choices for this config: 4, 8$" },
    { "explicit sbk: divides page_size",
      { candidate_block_size = 16, page_size = 24, sparse_block_kv = 16 },
      "page_size %(24%); valid choices for this config: 4, 8" },
    { "page_size a multiple of sbk", { page_size = 4 },
      "page_size = 4: must be a multiple of sparse_block_kv = 8 %(auto: "
        .. "pick_sparse_block_kv%(candidate_block_size = 8%)%)" },
    { "num_sparse_cols % 512", { candidate_topk_blocks = 100 },
      "num_sparse_cols = candidate_topk_blocks %(100%) %* candidate_block_size %(8%) = 800: "
        .. "must be a multiple of 512" },
    { "num_sparse_cols < 2^23", { candidate_topk_blocks = 2 ^ 20 },
      "= 8388608: must be < 8388608 %(2%^23" },
    { "index_topk a multiple of 8", { index_topk = 100 },
      "index_topk = 100: must be a multiple of 8 in %[8, 4096%]" },
    { "index_topk <= 4096", { index_topk = 4104 },
      "index_topk = 4104: must be a multiple of 8 in %[8, 4096%]" },
    { "heads range", { heads = 130 }, "heads = 130: must be a multiple of 4 in %[4, 128%]" },
    { "heads multiple of 4", { heads = 6 }, "heads = 6: must be a multiple of 4" },
    { "head_dim", { head_dim = 64 }, "head_dim = 64: must be 128" },
    { "max_rows sane", { max_rows = 1e12 },
      "max_rows = 1000000000000: must be in %[1, 2147483647%]" },
    { "candidate_topk_blocks sane", { candidate_topk_blocks = 2 ^ 31 },
      "= 17179869184: must be < 8388608" },
    { "scratch under 2^40 bytes", { max_rows = 2 ^ 31 - 1 },
      "scratch = max_rows %(2147483647%) %* %(num_sparse_blocks %(2048, from "
        .. "candidate_topk_blocks 2048 %* candidate_block_size 8 / sparse_block_kv 8%) %+ "
        .. "index_topk %(512%) %+ 5%) %* 4 bytes: more than 2%^40 bytes" },
    { "auto workspace_tokens >= min_split_seq_len names max_model_len", { max_model_len = 128 },
      "workspace_tokens = auto = 40 %* max_model_len %(128%) / compress_ratio %(1%) = 5120: "
        .. "must be >= min_split_seq_len = .* raise max_model_len or set workspace_tokens" },
    { "workspace_tokens >= min_split_seq_len", { workspace_tokens = 1000 },
      "workspace_tokens = 1000: must be >= min_split_seq_len = ceil%(candidate_topk_blocks "
        .. "%(2048%) %* candidate_block_size %(8%) %* 2 / 4%) = 8192" },
    { "workspace_tokens auto fits int32", { max_model_len = 2 ^ 30 },
      "workspace_tokens = auto = 40 %* max_model_len %(1073741824%) / compress_ratio %(1%) = "
        .. "42949672960" },
    { "max_model_len range", { max_model_len = 0 },
      "max_model_len = 0: must be in %[1, 2147483647%]" },
    { "compress_ratio range", { compress_ratio = 0 },
      "compress_ratio = 0: must be in %[1, max_model_len" },
    { "max_logits_bytes", { max_logits_bytes = 2 }, "max_logits_bytes = 2: must be >= 4" },
    { "page_size range", { page_size = 0 }, "page_size = 0: must be in %[1, 1048576%]" },
  }
  for _, r in ipairs(rules) do
    it("checks at creation: " .. r[1], function()
      local before = ctx:alloc_stats().host_allocs
      local e = err_of(function() local b = idxlab.builder(ctx, r[2]); return b end)
      assert.matches("^[^\n]*builder_spec.lua:%d+: idxlab: ", e)
      assert.matches(r[3], e)
      assert.equals(before, ctx:alloc_stats().host_allocs)
    end)
  end

  it("refuses bad arguments to builder()", function()
    assert.matches("first argument must be a context",
      err_of(function() return idxlab.builder(5, {}) end))
    assert.matches("builder config must be a table",
      err_of(function() return idxlab.builder(ctx, "x") end))
  end)
end)

-- Checks one Lua step against its batch; returns nil or what is wrong.
local function check_step(cfg, info, dl, pq, pl, step, sparse)
  local r, nd = cfg.compress_ratio or 1, #dl
  local rows = nd
  for _, q in ipairs(pq) do rows = rows + q end
  if step.n_rows ~= rows or step.n_decode_rows ~= nd then return "row counts" end
  local seen = {}
  if nd > 0 then
    local d = step.decode
    if not d or not d.is_decode or d.token_start ~= 0 or d.token_end ~= nd then return "decode "
      .. "range" end
    local ks, ke, ri = d.row_ks:to_table(), d.row_ke:to_table(), d.row_indices:to_table()
    for i = 1, nd do
      seen[i - 1] = (seen[i - 1] or 0) + 1
      if ks[i] ~= 0 then return "decode row_ks not zero" end
      if ke[i] ~= math.floor(dl[i] / r) then return ("decode row_ke[%d] = %d"):format(i - 1,
        ke[i]) end
      if ri[i] ~= i - 1 then return "decode row_indices" end
    end
    if d.sparse_ids:shape()[2] ~= info.num_sparse_blocks
        or d.col_indices:shape()[2] ~= info.index_topk then
      return "decode view shapes"
    end
  elseif step.decode then
    return "decode rows without decode requests"
  end
  local reqs = {}
  for i = 1, #pq do reqs[i] = { seq_len = math.floor((pl[i] + pq[i]) / r), query_len = pq[i] } end
  local plan = chunker.plan(cfg, reqs, { sparse = sparse })
  if #plan ~= #step.chunks or step.num_chunks ~= #plan then return "chunk count differs from "
    .. "chunker.plan" end
  local cursor, req, qpos = nd, 1, 0
  for ci, ch in ipairs(step.chunks) do
    local p = plan[ci]
    if ch.is_decode or ch.token_start ~= cursor then return ("chunk %d not "
      .. "contiguous"):format(ci) end
    if ch.requests.first ~= nd + p.requests.first or ch.requests.last ~= nd + p.requests.last
        or ch.rows ~= p.rows or ch.query_start ~= p.query_start or ch.query_end ~= p.query_end
        or ch.logits_bytes ~= p.logits_bytes or ch.sub_chunk ~= p.sub_chunk then
      return ("chunk %d differs from chunker.plan"):format(ci)
    end
    if p.seq_tokens > info.workspace_tokens then return ("chunk %d breaks the workspace "
      .. "budget"):format(ci) end
    if p.rows * p.seq_tokens * 4 > info.max_logits_bytes and not (p.sub_chunk and p.rows == 1) then
      return ("chunk %d breaks the logits budget"):format(ci)
    end
    local ks, ke, ri = ch.row_ks:to_table(), ch.row_ke:to_table(), ch.row_indices:to_table()
    if #ks ~= ch.rows or ch.sparse_ids:shape()[1] ~= ch.rows or ch["end"]:shape()[1] ~= ch.rows then
      return "chunk view shapes"
    end
    local row, ws = 0, 0
    for q = p.requests.first, p.requests.last do
      local q0, q1 = 0, pq[q]
      if p.sub_chunk then q0, q1 = p.query_start, p.query_end end
      if q ~= req or q0 ~= qpos then return ("chunk %d: request %d rows out of order"):format(ci,
        q) end
      for i = q0, q1 - 1 do
        row = row + 1
        local g = ch.token_start + row - 1
        seen[g] = (seen[g] or 0) + 1
        local eks, eke = ws, ws + math.floor((pl[q] + i + 1) / r)
        if ks[row] ~= eks or ke[row] ~= eke then
          return ("row %d (request %d, query row %d): ks/ke %d/%d, expected %d/%d"):format(g, q, i,
            ks[row], ke[row], eks, eke)
        end
        if ri[row] ~= nd + q - 1 then return ("row %d row_indices"):format(g) end
      end
      ws = ws + math.floor((pl[q] + pq[q]) / r)
      if q1 == pq[q] then req, qpos = req + 1, 0 else qpos = q1 end
    end
    if row ~= ch.rows then return ("chunk %d rows"):format(ci) end
    cursor = ch.token_end
  end
  if cursor ~= rows or req ~= #pq + 1 then return "chunks do not end at the last row" end
  for g = 0, rows - 1 do
    if seen[g] ~= 1 then return ("row %d is in %d places"):format(g, seen[g] or 0) end
  end
  return nil
end

local function random_batch(cfg)
  local r = cfg.compress_ratio or 1
  local dl, pq, pl = {}, {}, {}
  local rows = 0
  for i = 1, math.random(0, 20) do
    dl[i] = math.random(1, cfg.max_model_len)
    rows = rows + 1
  end
  for i = 1, math.random(0, 10) do
    local q = math.min(math.random(1, 40), cfg.max_rows - rows)
    if q < 1 then break end -- full: the batch ends here
    rows = rows + q
    pq[i] = q
    local most = math.min(cfg.workspace_tokens * r - q, cfg.max_model_len - q)
    pl[i] = math.random(0, math.max(most, 0))
  end
  return dl, pq, pl
end

local function as_batch(dl, pq, pl, sparse)
  local pre = {}
  for i = 1, #pq do pre[i] = { query_len = pq[i], context_len = pl[i] } end
  return { decode = dl, prefill = pre, sparse = sparse }
end

describe("builder build", function()
  local ctx = idxlab.context{ backend = "cpu" }

  it("ties a step's block_table view to the caller's table, not to the builder", function()
    local b = idxlab.builder(ctx, small())
    -- a temporary table: the step's view keeps it alive through the collector
    local step = b:build{ decode = { 40 },
      decode_block_table = ctx:tensor("i32", { 1, 4 }):from_table({ 3, 1, 4, 1 }) }
    collectgarbage(); collectgarbage()
    assert.are.same({ 3, 1, 4, 1 }, step.decode.block_table:to_table())
    -- a freed table: the view refuses, never reads freed memory
    local table_ = ctx:tensor("i32", { 1, 4 }):from_table({ 2, 7, 1, 8 })
    step = b:build{ decode = { 40 }, decode_block_table = table_ }
    table_:free()
    local ok, err = pcall(function() return step.decode.block_table:to_table() end)
    assert.is_false(ok)
    assert.matches("the tensor or builder this view looks into was freed", err)
    b:free()
  end)

  it("builds decode rows then prefill chunks as views of its scratch", function()
    local b = idxlab.builder(ctx, small())
    local table_ = ctx:tensor("i32", { 2, 4 }):from_table({ 3, 1, 4, 1, 5, 9, 2, 6 })
    local step = b:build{ decode = { { context_len = 40 }, 17 },
      prefill = { { query_len = 3, context_len = 10 }, { query_len = 2 } },
      decode_block_table = table_ }
    assert.equals(7, step.n_rows)
    assert.equals(2, step.n_decode_rows)
    assert.equals(1, step.num_chunks)
    local d = step.decode
    assert.are.same({ 0, 0 }, d.row_ks:to_table())
    assert.are.same({ 40, 17 }, d.row_ke:to_table())
    assert.are.same({ 0, 1 }, d.row_indices:to_table())
    assert.are.same({ 2, 4 }, d.block_table:shape())
    assert.are.same({ 3, 1, 4, 1, 5, 9, 2, 6 }, d.block_table:to_table())
    assert.are.same({ 2, 64 }, d.sparse_ids:shape())
    assert.are.same({ 2, 64 }, d.col_indices:shape())
    local c = step.chunks[1]
    assert.equals(2, c.token_start)
    assert.equals(7, c.token_end)
    assert.are.same({ 3, 4, first = 3, last = 4 }, c.requests)
    assert.are.same({ 0, 0, 0, 13, 13 }, c.row_ks:to_table())
    assert.are.same({ 11, 12, 13, 14, 15 }, c.row_ke:to_table())
    assert.are.same({ 2, 2, 2, 3, 3 }, c.row_indices:to_table())
    assert.equals(15, c.workspace_tokens)
    assert.equals(5 * 512 * 4, c.logits_bytes) -- sparse: both clamped up to 256
    assert.is_nil(c.block_table)
    assert.is_false(c.sub_chunk)
    assert.equals(2, #step.calls)
    assert.equals(d, step.calls[1])
    assert.equals(c, step.calls[2])
    -- Views write through to the builder's scratch.
    c["end"]:from_table({ 1, 2, 3, 4, 5 })
    local again = b:build{ decode = {}, prefill = { { query_len = 5, context_len = 0 } } }
    assert.are.same({ 0, 0, 1, 2, 3 }, again.chunks[1]["end"]:to_table())
    assert.is_nil(again.decode)
    b:free()
  end)

  it("takes the step-inputs request list too", function()
    local b = idxlab.builder(ctx, small())
    local step = b:build{ requests = {
      { kind = "decode", context_len = 99, query_len = 1, seq_len = 100 },
      { kind = "prefill", context_len = 5, query_len = 2, seq_len = 7 },
    }, sparse = false }
    assert.are.same({ 100 }, step.decode.row_ke:to_table())
    assert.are.same({ 6, 7 }, step.chunks[1].row_ke:to_table())
    assert.equals(2 * 7 * 4, step.chunks[1].logits_bytes)
    assert.matches("decode request after a prefill one", err_of(function()
      return b:build{ requests = { { kind = "prefill", context_len = 0, query_len = 1 },
        { kind = "decode", context_len = 3 } } }
    end))
    assert.matches("requests%[1%].kind = mixed: must be decode or prefill", err_of(function()
      return b:build{ requests = { { kind = "mixed" } } }
    end))
    b:free()
  end)

  it("builds a decode row of 0 tokens as an empty row, at any compress_ratio", function()
    for _, ratio in ipairs({ 1, 2, 4 }) do
      local b = idxlab.builder(ctx, small{ compress_ratio = ratio })
      local function c(tokens) return math.floor(tokens / ratio) end
      -- 0 tokens, and 1 to ratio - 1 tokens (compressed length 0), beside a 40-token row
      local step = b:build{ decode = { 0, 40, { context_len = 0 }, ratio - 1 },
        prefill = { { query_len = 2, context_len = 6 } } }
      assert.are.same({ 0, c(40), 0, 0 }, step.decode.row_ke:to_table())
      assert.are.same({ 0, 0, 0, 0 }, step.decode.row_ks:to_table())
      assert.are.same({ 0, 1, 2, 3 }, step.decode.row_indices:to_table())
      assert.equals(6, step.n_rows)
      assert.are.same({ c(7), c(8) }, step.chunks[1].row_ke:to_table())
      -- the step-inputs form: the workload's empty decode request (context_len = -1, no
      -- position before a query row that has no position either) is 0 tokens
      local reqs = require("idxlab.workload").requests({ decode = { contexts = { 0, 40 } },
        prefill = false })
      assert.equals(-1, reqs[1].context_len)
      step = b:build{ requests = reqs }
      assert.are.same({ 0, c(40) }, step.decode.row_ke:to_table())
      assert.matches("decode request 0: context_len = %-3: must be >= 0 %(0 is an empty row%)",
        err_of(function() local s = b:build{ decode = { -3 } }; return s end))
      b:free()
    end
  end)

  it("splits a request over the logits budget into query sub-chunks", function()
    local b = idxlab.builder(ctx, small{ max_logits_bytes = 40000 })
    local step = b:build{ prefill = { { query_len = 25, context_len = 975 },
      { query_len = 3, context_len = 10 } }, sparse = false }
    assert.equals(4, step.num_chunks)
    local want = { { 0, 10 }, { 10, 20 }, { 20, 25 } }
    for i, w in ipairs(want) do
      local c = step.chunks[i]
      assert.is_true(c.sub_chunk)
      assert.are.same({ w[1], w[2] }, { c.query_start, c.query_end })
      assert.equals(w[1], c.token_start)
      assert.equals(975 + w[1] + 1, c.row_ke:to_table()[1])
      assert.equals(0, c.row_ks:to_table()[1])
    end
    assert.is_false(step.chunks[4].sub_chunk)
    b:free()
  end)

  it("allocates nothing in build, over many steps of different shapes", function()
    local own = idxlab.context{ backend = "cpu" } -- its own, so no other tensor's GC shows
    local b = idxlab.builder(own, small())
    local seed = os.time()
    math.randomseed(seed)
    collectgarbage(); collectgarbage() -- earlier specs' dropped tensors go now, not mid-check
    local before = own:alloc_stats()
    local shapes = {}
    for t = 1, 200 do
      local dl, pq, pl = random_batch(small())
      local step = b:build(as_batch(dl, pq, pl, t % 2 == 0))
      shapes[step.n_rows .. "/" .. step.num_chunks] = true
    end
    collectgarbage(); collectgarbage()
    local after = own:alloc_stats()
    local n = 0
    for _ in pairs(shapes) do n = n + 1 end
    assert.is_true(n > 10, "seed " .. seed)
    assert.are.same(before, after, "seed " .. seed)
    b:free()
  end)

  it("puts every row in exactly one place, over hundreds of random batches", function()
    local seed = os.time()
    math.randomseed(seed)
    for _, over in ipairs({ {}, { compress_ratio = 4 }, { max_logits_bytes = 16384 },
      { compress_ratio = 2, max_logits_bytes = 20000 } }) do
      local cfg = small(over)
      local b = idxlab.builder(ctx, cfg)
      local info = b:info()
      for t = 1, 100 do
        local dl, pq, pl = random_batch(cfg)
        local sparse = t % 2 == 0
        local step = b:build(as_batch(dl, pq, pl, sparse))
        local bad = check_step(cfg, info, dl, pq, pl, step, sparse)
        assert.is_nil(bad,
          ("seed %d, trial %d, compress_ratio %s: %s"):format(seed, t,
          tostring(cfg.compress_ratio), tostring(bad)))
      end
      b:free()
    end
  end)

  it("names the request in batch errors, at the caller's line, and builds nothing", function()
    local b = idxlab.builder(ctx, small())
    local good = b:build{ decode = { 40 }, prefill = { { query_len = 2, context_len = 3 } } }
    local cases = {
      -- 0 tokens is an empty row ("builds a decode row of 0 tokens as an empty row")
      { { decode = { 5, -1 } }, "decode request 1: context_len = %-1: must be >= 0" },
      { { decode = { 9000 } },
        "decode request 0: context_len = 9000 tokens: more than max_model_len = 8192" },
      { { decode = { 1 }, prefill = { { query_len = 200 }, { query_len = 56 } } },
        "prefill request 1 %(step request 2%): the batch reaches 257 rows with its 56 query "
          .. "rows: more than max_rows = 256" },
      { { prefill = { { query_len = 0 } } },
        "prefill request 0 %(step request 0%): query_len = 0: must be >= 1" },
      { { prefill = { { query_len = 1, context_len = -3 } } }, "context_len = %-3: must be >= 0" },
      { { prefill = { { query_len = 1, context_len = 10 }, { query_len = 3, context_len = 2046 } },
        sparse = false },
        "prefill request 1 %(step request 1%): seq_len = %(context_len 2046 %+ query_len 3%) / "
          .. "compress_ratio 1 = 2049 positions exceeds workspace_tokens = 2048" },
      { { decode = { 40, 49 },
        decode_block_table = ctx:tensor("i32", { 2, 3 }):from_table({ 0, 1, 2, 3, 4, 5 }) },
        "decode request 1: 49 positions need 4 pages of page_size = 16, but decode_block_table "
          .. "has 3 columns" },
      { { decode = { 40, 33 },
        decode_block_table = ctx:tensor("i32", { 2, 3 }):from_table({ 0, 1, 2, 3, -1, 5 }) },
        "decode request 1: page 1 of its 3 is missing %(decode_block_table%[1%]%[1%] = %-1%)" },
      { { decode = { 4 }, decode_block_table = ctx:tensor("f32", { 1, 3 }) },
        "decode_block_table: dtype f32, expected i32" },
      { { decode = { 4 }, decode_block_table = ctx:tensor("i32", { 2, 3 }) },
        "decode_block_table: shape%[0%] = 2, expected one row per request %(1%)" },
      { { decode = { 1.5 } }, "decode%[1%] = 1.5: must be an integer" },
      { { prefill = { { context_len = 3 } } }, "prefill%[1%].query_len = nil: must be an integer" },
      { { decode = {}, colour = 1 }, "unknown batch field 'colour'" },
      { { decode = {}, sparse = 1 }, "sparse must be true or false" },
      { { decode = {}, decode_block_table = {} }, "decode_block_table must be an i32 Tensor" },
    }
    for _, c in ipairs(cases) do
      local e = err_of(function() local s = b:build(c[1]); return s end)
      assert.matches(c[2], e)
      assert.matches("^[^\n]*builder_spec.lua:%d+: idxlab: ", e)
    end
    -- The good step's metadata survived every failure.
    assert.are.same({ 40 }, good.decode.row_ke:to_table())
    assert.are.same({ 4, 5 }, good.chunks[1].row_ke:to_table())
    b:free()
  end)
end)

describe("builder on CUDA #gpu", function()
  it("gives the same metadata as the CPU builder, and allocates nothing per step", function()
    local cctx = idxlab.context{ backend = "cpu" }
    local gctx = idxlab.context{ backend = "cuda" }
    local seed = os.time()
    math.randomseed(seed)
    for _, over in ipairs({ {}, { compress_ratio = 4, max_logits_bytes = 16384 } }) do
      local cfg = small(over)
      local cb, gb = idxlab.builder(cctx, cfg), idxlab.builder(gctx, cfg)
      assert.equals("device", gb:info().device)
      local before = gctx:alloc_stats()
      for t = 1, 60 do
        local dl, pq, pl = random_batch(cfg)
        local batch = as_batch(dl, pq, pl, t % 2 == 0)
        local a = cb:build(batch)
        local g = gb:build(batch)
        local msg = ("seed %d, trial %d"):format(seed, t)
        assert.equals(a.n_rows, g.n_rows, msg)
        assert.equals(a.num_chunks, g.num_chunks, msg)
        local pairs_ = { { a.decode, g.decode } }
        for i = 1, a.num_chunks do pairs_[#pairs_ + 1] = { a.chunks[i], g.chunks[i] } end
        for _, p in ipairs(pairs_) do
          local x, y = p[1], p[2]
          if x then
            for _, k in ipairs({ "token_start", "token_end", "query_start", "query_end",
              "workspace_tokens", "logits_bytes", "sub_chunk" }) do
              assert.equals(x[k], y[k], msg .. " " .. k)
            end
            assert.equals("device", y.row_ke:device())
            assert.are.same(x.row_ks:to_table(), y.row_ks:to_table(), msg)
            assert.are.same(x.row_ke:to_table(), y.row_ke:to_table(), msg)
            assert.are.same(x.row_indices:to_table(), y.row_indices:to_table(), msg)
          end
        end
        local bad = check_step(cfg, gb:info(), dl, pq, pl, g, t % 2 == 0)
        assert.is_nil(bad, msg .. ": " .. tostring(bad))
      end
      -- Reading views back above copies through host staging; the builds themselves are
      -- checked here without reads in between.
      local mid = gctx:alloc_stats()
      for _ = 1, 50 do
        local dl, pq, pl = random_batch(cfg)
        gb:build(as_batch(dl, pq, pl, true))
      end
      local after = gctx:alloc_stats()
      assert.equals(mid.device_allocs, after.device_allocs)
      assert.equals(mid.host_allocs, after.host_allocs)
      assert.is_true(before.device_bytes_live == after.device_bytes_live)
      cb:free()
      gb:free()
    end
    -- Block tables must live where the scratch lives.
    local gb = idxlab.builder(gctx, small())
    local e = err_of(function()
      local s = gb:build{ decode = { 4 },
        decode_block_table = cctx:tensor("i32", { 1, 1 }):from_table({ 0 }) }
      return s
    end)
    assert.matches("decode_block_table is in host memory but the builder's scratch is in device "
      .. "memory", e)
    local dt = gctx:tensor("i32", { 1, 2 }):from_table({ 7, 3 })
    local s = gb:build{ decode = { 20 }, decode_block_table = dt }
    assert.equals("device", s.decode.block_table:device())
    assert.are.same({ 7, 3 }, s.decode.block_table:to_table())
    assert.are.same({ 20 }, s.decode.row_ke:to_table())
    assert.are.same({ 0 }, s.decode.row_ks:to_table())
    dt:free()
    gb:free()
  end)
end)
