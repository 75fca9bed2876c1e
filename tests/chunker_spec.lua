-- chunker_spec: the prefill chunker of SPEC 5 from Lua, without any kernel: hand-worked
-- examples (a batch that fits, one that needs splitting, budget edges at exactly the limit
-- and one byte under), query sub-chunks, the min_split_seq_len clamp, errors, and seeded
-- random plans against a model written from the SPEC text.
local chunker = require("idxlab.chunker")

local support = dofile((os.getenv("IDXLAB_ROOT") or ".") .. "/tests/support.lua")
local err_of = support.err_of

-- T = 64, cbs = 8: num_sparse_cols 512, min_split_seq_len 256 (bf16).
local function cfg(W, M, over)
  local c = { candidate_topk_blocks = 64, max_model_len = 65536, max_rows = 1024,
    workspace_tokens = W, max_logits_bytes = M }
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

local function reqs(list)
  local out = {}
  for i, r in ipairs(list) do out[i] = { seq_len = r[1], query_len = r[2] } end
  return out
end

-- SPEC 5 written out directly: the greedy walk, sub-chunks of max(1, (M / 4) / seq) rows.
local function model(W, M, min_split, requests, sparse)
  local function width(r) return (sparse and r.seq_len < min_split) and min_split or r.seq_len end
  local out, i, n = {}, 1, #requests
  while i <= n do
    local start, rows, seq = i, 0, 0
    while i <= n and seq + width(requests[i]) <= W
        and (rows + requests[i].query_len) * (seq + width(requests[i])) * 4 <= M do
      rows, seq = rows + requests[i].query_len, seq + width(requests[i])
      i = i + 1
    end
    if i > start then
      out[#out + 1] = { first = start, last = i - 1, rows = rows, seq = seq, qs = 0,
        qe = requests[start].query_len, sub = false }
    else
      local s, q = width(requests[i]), requests[i].query_len
      assert(s <= W)
      local per = math.max(1, math.floor(math.floor(M / 4) / s))
      for qs = 0, q - 1, per do
        local qe = math.min(qs + per, q)
        out[#out + 1] = { first = i, last = i, rows = qe - qs, seq = s, qs = qs, qe = qe,
          sub = true }
      end
      i = i + 1
    end
  end
  return out
end

describe("chunker.plan", function()
  it("keeps a batch that fits in one chunk", function()
    local chunks,
      s = chunker.plan(cfg(10000, 2 ^ 20), reqs{ { 100, 10 }, { 200, 20 } }, { sparse = false })
    assert.equals(1, #chunks)
    local c = chunks[1]
    assert.are.same({ 1, 2, first = 1, last = 2 }, c.requests)
    assert.equals(30, c.rows)
    assert.equals(300, c.seq_tokens)
    assert.equals(36000, c.logits_bytes)
    assert.is_false(c.sub_chunk)
    assert.are.same({ num_chunks = 1, max_rows_per_chunk = 30, peak_logits_bytes = 36000,
      peak_seq_tokens = 300,
      min_split_seq_len = 256, sparse = false }, s)
  end)

  it("closes a chunk at the logits budget: exactly at the limit, and one byte under", function()
    local r = reqs{ { 300, 10 }, { 300, 20 } }
    local at = chunker.plan(cfg(10000, 72000), r, { sparse = false })
    assert.equals(1, #at)
    assert.equals(72000, at[1].logits_bytes)
    local under, s = chunker.plan(cfg(10000, 71999), r, { sparse = false })
    assert.equals(2, #under)
    assert.are.same({ 1, 1 }, { under[1].requests.first, under[1].requests.last })
    assert.are.same({ 2, 2 }, { under[2].requests.first, under[2].requests.last })
    assert.equals(24000, s.peak_logits_bytes)
    assert.equals(20, s.max_rows_per_chunk)
  end)

  it("closes a chunk at the workspace budget: exactly at the limit, and one position under",
    function()
    local r = reqs{ { 300, 1 }, { 200, 1 }, { 100, 1 } }
    local at = chunker.plan(cfg(500, 2 ^ 20), r, { sparse = false })
    assert.equals(2, #at)
    assert.equals(500, at[1].seq_tokens)
    local under = chunker.plan(cfg(499, 2 ^ 20), r, { sparse = false })
    assert.equals(2, #under)
    assert.equals(300, under[1].seq_tokens)
    assert.are.same({ 2, 3 }, { under[2].requests.first, under[2].requests.last })
  end)

  it("splits a request over the logits budget into query sub-chunks", function()
    -- 100 rows of 1000 positions against a budget of 30 rows: 30, 30, 30, 10.
    local chunks,
      s = chunker.plan(cfg(10000, 120000), reqs{ { 1000, 100 }, { 50, 5 } }, { sparse = false })
    assert.equals(5, #chunks)
    local want = { { 0, 30 }, { 30, 60 }, { 60, 90 }, { 90, 100 } }
    for i, w in ipairs(want) do
      assert.is_true(chunks[i].sub_chunk)
      assert.are.same({ 1, 1 }, { chunks[i].requests.first, chunks[i].requests.last })
      assert.are.same(w, { chunks[i].query_start, chunks[i].query_end })
      assert.equals(w[2] - w[1], chunks[i].rows)
    end
    assert.is_false(chunks[5].sub_chunk)
    assert.equals(120000, s.peak_logits_bytes)
    -- One byte under: 29 rows per sub-chunk.
    local under = chunker.plan(cfg(10000, 119999), reqs{ { 1000, 100 } }, { sparse = false })
    assert.equals(4, #under)
    assert.equals(29, under[1].rows)
    assert.are.same({ 87, 100 }, { under[4].query_start, under[4].query_end })
  end)

  it("budgets sparse rows at least min_split_seq_len wide", function()
    local r = reqs{ { 100, 2 }, { 100, 3 } }
    assert.equals(1, #chunker.plan(cfg(511, 2 ^ 20), r, { sparse = false }))
    local sp, s = chunker.plan(cfg(511, 2 ^ 20), r) -- sparse is the default
    assert.equals(2, #sp)
    assert.equals(256, sp[1].seq_tokens)
    assert.equals(256, s.min_split_seq_len)
    assert.is_true(s.sparse)
    assert.equals(1, #chunker.plan(cfg(512, 2 ^ 20), r, { sparse = true }))
    assert.equals(1, #chunker.plan(cfg(100000, 10240), r))
    assert.equals(2, #chunker.plan(cfg(100000, 10239), r))
    local wide = chunker.plan(cfg(2000, 2 ^ 20, { split_width = "bf16+fp32" }),
      reqs{ { 1, 1 }, { 1, 1 }, { 1, 1 } })
    assert.equals(2, #wide)
    assert.equals(1536, wide[1].seq_tokens)
  end)

  it("reports bad requests and options by their place in the list", function()
    assert.matches("requests%[2%].seq_len = 501 exceeds workspace_tokens = 500",
      err_of(chunker.plan, cfg(500, 2 ^ 20), reqs{ { 10, 1 }, { 501, 1 } }, { sparse = false }))
    assert.matches("requests%[1%].query_len = 0: must be >= 1",
      err_of(chunker.plan, cfg(500, 2 ^ 20), reqs{ { 10, 0 } }))
    assert.matches("requests%[1%].seq_len = %-1: must be a non%-negative integer",
      err_of(chunker.plan, cfg(500, 2 ^ 20), reqs{ { -1, 1 } }))
    assert.matches("requests%[1%].seq_len = 4 positions is less than query_len %(5%)",
      err_of(chunker.plan, cfg(500, 2 ^ 20), reqs{ { 4, 5 } }))
    assert.matches("unknown option 'dense'",
      err_of(chunker.plan, cfg(500, 2 ^ 20), {}, { dense = true }))
    assert.matches("sparse must be true or false",
      err_of(chunker.plan, cfg(500, 2 ^ 20), {}, { sparse = "yes" }))
    assert.matches("workspace_tokens = 100: must be >= min_split_seq_len",
      err_of(chunker.plan, cfg(100, 2 ^ 20), {}))
    local chunks, s = chunker.plan(cfg(500, 2 ^ 20), {})
    assert.are.same({}, chunks)
    assert.equals(0, s.num_chunks)
  end)

  it("refuses a plan of more sub-chunks than it may return, before walking it, and returns one "
    .. "at the limit", function()
    -- 2^31 - 1 rows of 2^31 - 1 positions: every row its own sub-chunk (one row is 8 GiB of
    -- logits), 2^31 - 1 chunks; it was a raw "size of C type is unknown or too large"
    local big = 2 ^ 31 - 1
    local t0 = os.clock()
    local err = err_of(function()
      local c = chunker.plan({ max_model_len = big, workspace_tokens = big },
        { { seq_len = big, query_len = big } },
        { sparse = false })
      return c
    end)
    assert.matches("chunker_spec%.lua:%d+: idxlab: chunker%.plan: requests%[1%] %(seq_len = "
      .. "2147483647, query_len = 2147483647%) "
      .. "splits into 2147483647 sub%-chunks of 1 row%(s%) under max_logits_bytes = 536870912 "
        .. "%(one row of 2147483647 positions "
      .. "is 8589934588 bytes of logits%): the plan has more than the 1048576 chunks", err)
    assert.is_true(os.clock() - t0 < 1, "the refusal walked the plan")
    -- the limit counts over the requests (a small limit here, so the spec stays quick): two
    -- requests that pass it together, and two that reach it exactly
    local saved = chunker.MAX_CHUNKS
    chunker.MAX_CHUNKS = 1000
    local ok, e2 = pcall(function()
      local c2 = cfg(2 ^ 20, 4 * 2 ^ 10) -- 1024 logits: one row of 1024 positions each
      assert.matches("requests%[2%] %(seq_len = 1024, query_len = 501%) splits into 501 "
        .. "sub%-chunks of 1 row%(s%) under "
        .. "max_logits_bytes = 4096: the plan has more than the 1000 chunks",
        err_of(chunker.plan, c2, reqs{ { 1024, 500 }, { 1024, 501 } }, { sparse = false }))
      local chunks, s = chunker.plan(c2, reqs{ { 1024, 500 }, { 1024, 500 } }, { sparse = false })
      assert.equals(1000, #chunks)
      assert.equals(1000, s.num_chunks)
      assert.equals(1, chunks[1000].rows)
      -- 2 rows of 512 positions fit: 300 rows are 150 sub-chunks, far under the limit
      assert.equals(150, #chunker.plan(c2, reqs{ { 512, 300 } }, { sparse = false }))
    end)
    chunker.MAX_CHUNKS = saved
    assert(ok, e2)
  end)

  it("matches the SPEC 5 model over hundreds of random plans", function()
    local seed = os.time()
    math.randomseed(seed)
    for t = 1, 400 do
      local W, M = math.random(768, 6000), math.random(4, 300000)
      local sparse = math.random() < 0.5
      local list = {}
      for i = 1, math.random(0, 15) do
        local q = math.random(1, 60)
        list[i] = { seq_len = math.random(q, W), query_len = q }
      end
      local got = chunker.plan(cfg(W, M), list, { sparse = sparse })
      local want = model(W, M, 256, list, sparse)
      local msg = ("seed %d, trial %d (W %d, M %d, %d requests)"):format(seed, t, W, M, #list)
      assert.equals(#want, #got, msg)
      local covered = {}
      for i, w in ipairs(want) do
        local g = got[i]
        assert.are.same({ w.first, w.last, w.rows, w.seq, w.qs, w.qe, w.sub },
          { g.requests.first, g.requests.last, g.rows, g.seq_tokens, g.query_start, g.query_end,
            g.sub_chunk }, msg)
        assert.equals(g.rows * g.seq_tokens * 4, g.logits_bytes, msg)
        assert.is_true(g.seq_tokens <= W, msg)
        assert.is_true(g.logits_bytes <= M or (g.sub_chunk and g.rows == 1), msg)
        for r = g.requests.first, g.requests.last do
          local q0, q1 = 0, list[r].query_len
          if g.sub_chunk then q0, q1 = g.query_start, g.query_end end
          for row = q0, q1 - 1 do
            local key = r .. ":" .. row
            assert.is_nil(covered[key], msg)
            covered[key] = true
          end
        end
      end
      for r, req in ipairs(list) do
        for row = 0, req.query_len - 1 do assert.is_true(covered[r .. ":" .. row], msg) end
      end
    end
  end)
end)
