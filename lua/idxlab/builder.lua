-- idxlab.builder: the metadata builder (SPEC 4) from Lua.
--
--   local b = idxlab.builder{candidate_block_size = 16}          -- CPU context made for it
--   local b = idxlab.builder(ctx, {candidate_topk_blocks = 1024}) -- on ctx's backend
--   b:info()     -- resolved config, derived sizes, every scratch buffer's bytes
--   local step = b:build{ decode = {{context_len = 40000}},
--                         prefill = {{query_len = 64, context_len = 0}} }
--   step.decode, step.chunks[i]  -- rows tables whose tensors are views of the scratch
--   b:free()
--
-- Every config check runs at creation (in C) and raises a message naming the fields, their
-- values and the rule. Row, request and query numbers in a step are 0-based, as in C and in
-- the step's tensors; `requests = {first, last}` is the 1-based inclusive range over the
-- batch's request list (decode requests first). Views are valid until the next build.
-- Without a ctx, a builder makes a CPU context of its own (b.ctx): the scratch lives there.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local util = require("idxlab.util")
local config = require("idxlab.config")
local Tensor = require("idxlab.tensor")
local Context = require("idxlab.context")
local ffi, C = core.ffi, core.C
local fail = errors.fail

local M = {}
local Builder = {}
Builder.__index = Builder
M.Builder = Builder

local builder_out = ffi.typeof("ixl_builder *[1]")
local i64arr = ffi.typeof("int64_t[?]")

local function is_context(x) return getmetatable(x) == Context end

-- M.new(ctx_or_nil, cfg) or M.new(cfg).
function M.new(a, b)
  local ctx, cfg
  if is_context(a) then
    ctx, cfg = a, b
  elseif a == nil then
    cfg = b
  elseif type(a) == "table" and b == nil then
    cfg = a
  else
    fail("builder(ctx, cfg) or builder(cfg): the first argument must be a context, a config "
      .. "table or nil")
  end
  if cfg ~= nil and type(cfg) ~= "table" then
    fail("builder config must be a table of fields, got %s", type(cfg))
  end
  ctx = ctx or Context.new({ backend = "cpu" })
  if ctx.cd == nil then fail("the builder's context was freed") end
  local c, resolved = config.to_c(cfg)
  local out = builder_out()
  core.check(ctx.cd, C.ixl_builder_new(ctx.cd, c, out))
  local self = setmetatable({ cd = ffi.gc(out[0], C.ixl_builder_free), ctx = ctx,
    requested = resolved, cap = 0 }, Builder)
  local info = ffi.new("ixl_builder_info")
  C.ixl_builder_get_info(self.cd, info)
  self.cinfo = info
  self.config, self.derived = config.from_info(info)
  self.valid_sbk = config.valid_sparse_block_kv(resolved)
  return self
end

function M.valid_sparse_block_kv(cfg) return config.valid_sparse_block_kv(cfg) end
function M.describe(cfg) return config.describe(cfg) end

local function live(self)
  if self.cd == nil then fail("builder was freed") end
  return self.cd
end

-- Flat table: every config field (resolved), every derived value, valid_sparse_block_kv,
-- plus `device` ("host" or "device", where the scratch lives).
function Builder:info()
  live(self)
  local t = {}
  for k, v in pairs(self.config) do t[k] = v end
  for k, v in pairs(self.derived) do t[k] = v end
  local list = {}
  for i, v in ipairs(self.valid_sbk) do list[i] = v end
  t.valid_sparse_block_kv = list
  t.device = self.ctx:device_kind()
  return t
end

local function check_int(v, what)
  if not util.is_int(v) then fail("%s = %s: must be an integer", what, tostring(v)) end
  return v
end

local function check_table_arg(t, what)
  if t == nil then return nil end
  if not Tensor.is_tensor(t) then fail("%s must be an i32 Tensor", what) end
  local why = Tensor.dead_reason(t)
  if why then fail("%s: %s", what, why) end
  return t
end

-- Reads a batch table into per-request lists: decode context lens (tokens, the new token
-- included), prefill query and context lens (tokens).
local function read_batch(batch)
  local dl, pq, pl = {}, {}, {}
  if batch.requests ~= nil then
    if batch.decode ~= nil or batch.prefill ~= nil then
      fail("build: give either requests or decode/prefill, not both")
    end
    -- The step-inputs form: decode requests have context_len positions before their one
    -- query row; lengths are read as tokens (equal to positions with compress_ratio 1).
    local seen_prefill = false
    for i, r in ipairs(batch.requests) do
      if type(r) ~= "table" then fail("build: requests[%d] must be a table", i) end
      if r.kind == "decode" then
        if seen_prefill then
          fail("build: requests[%d] is a decode request after a prefill one (decode requests "
            .. "come first)", i)
        end
        local q = r.query_len or 1
        check_int(q, ("requests[%d].query_len"):format(i))
        if q ~= 1 then
          fail("build: requests[%d].query_len = %s: a decode request has one row", i, tostring(q))
        end
        dl[#dl + 1] = check_int(r.context_len, ("requests[%d].context_len"):format(i)) + 1
      elseif r.kind == "prefill" then
        seen_prefill = true
        pq[#pq + 1] = check_int(r.query_len, ("requests[%d].query_len"):format(i))
        pl[#pl + 1] = check_int(r.context_len, ("requests[%d].context_len"):format(i))
      else
        fail("build: requests[%d].kind = %s: must be decode or prefill", i, tostring(r.kind))
      end
    end
    return dl, pq, pl
  end
  for i, r in ipairs(batch.decode or {}) do
    if type(r) == "number" then
      dl[i] = check_int(r, ("decode[%d]"):format(i))
    elseif type(r) == "table" then
      dl[i] = check_int(r.context_len, ("decode[%d].context_len"):format(i))
    else
      fail("build: decode[%d] must be a context length or {context_len = n}", i)
    end
  end
  for i, r in ipairs(batch.prefill or {}) do
    if type(r) ~= "table" then
      fail("build: prefill[%d] must be {query_len = n, context_len = n}", i)
    end
    pq[i] = check_int(r.query_len, ("prefill[%d].query_len"):format(i))
    pl[i] = check_int(r.context_len or 0, ("prefill[%d].context_len"):format(i))
  end
  return dl, pq, pl
end

local batch_keys = { decode = true, prefill = true, requests = true, decode_block_table = true,
  prefill_block_table = true, sparse = true }

local function view_of(self, v)
  return Tensor.wrap_view(self.ctx, ffi.new("ixl_tensor", v), self)
end

-- table: the caller's block table tensor these rows' block_table view looks into (it owns
-- that memory, not the builder: the view keeps it alive and dies with it).
local function rows_table(self, r, qlens, nd, table)
  local t = {
    is_decode = r.is_decode ~= 0,
    token_start = tonumber(r.token_start), token_end = tonumber(r.token_end),
    request_start = r.request_start, request_end = r.request_end,
    requests = { r.request_start + 1, r.request_end },
    query_start = tonumber(r.query_start), query_end = tonumber(r.query_end),
    workspace_tokens = tonumber(r.workspace_tokens), logits_bytes = tonumber(r.logits_bytes),
    row_ks = view_of(self, r.row_ks), row_ke = view_of(self, r.row_ke),
    sparse_ids = view_of(self, r.sparse_ids), ["end"] = view_of(self, r["end"]),
    col_indices = view_of(self, r.col_indices), row_indices = view_of(self, r.row_indices),
  }
  t.rows = t.token_end - t.token_start
  t.requests.first, t.requests.last = t.requests[1], t.requests[2]
  if r.block_table.data ~= nil and table then
    t.block_table = Tensor.wrap_view(self.ctx, ffi.new("ixl_tensor", r.block_table),
      table.base or table)
  end
  if not t.is_decode then
    local q = qlens[r.request_start - nd + 1]
    t.sub_chunk = t.query_start > 0 or t.query_end < q
  else
    t.sub_chunk = false
  end
  return t
end

-- build(batch) -> step. batch = { decode = { {context_len = tokens incl. the new one; 0: an
-- empty row} or n, ... }, prefill = { {query_len = rows, context_len = tokens before}, ... },
-- decode_block_table = i32 Tensor [n_decode, max_pages] or nil, prefill_block_table = ... or
-- nil, sparse = true } (or requests = inputs.requests instead of decode/prefill). step = {
-- n_rows, n_decode_rows, num_chunks, decode = rows or nil, chunks = { rows, ... }, calls =
-- decode and chunks in row order, sparse }, rows = { token_start, token_end, rows, requests =
-- {first, last}, request_start, request_end, query_start, query_end, sub_chunk,
-- workspace_tokens, logits_bytes, is_decode, row_ks, row_ke, sparse_ids, end, col_indices,
-- row_indices, block_table (decode with a table) }.
function Builder:build(batch)
  local cd = live(self)
  if type(batch) ~= "table" then fail("build expects a batch table") end
  for k in pairs(batch) do
    if not batch_keys[k] then
      fail("build: unknown batch field '%s' (decode, prefill, requests, decode_block_table, "
        .. "prefill_block_table, sparse)", tostring(k))
    end
  end
  local sparse = batch.sparse
  if sparse == nil then sparse = true end
  if type(sparse) ~= "boolean" then fail("build: sparse must be true or false") end
  local dl, pq, pl = read_batch(batch)
  local dt = check_table_arg(batch.decode_block_table, "decode_block_table")
  local pt = check_table_arg(batch.prefill_block_table, "prefill_block_table")
  local n = math.max(#dl, #pq, 1)
  if self.cap < n then
    self.dl, self.pq, self.pl, self.cap = i64arr(n), i64arr(n), i64arr(n), n
  end
  for i = 1, #dl do self.dl[i - 1] = dl[i] end
  for i = 1, #pq do
    self.pq[i - 1] = pq[i]
    self.pl[i - 1] = pl[i]
  end
  local cb = ffi.new("ixl_batch")
  cb.n_decode = #dl
  cb.decode_context_lens = self.dl
  cb.decode_block_table = dt and dt.cd or nil
  cb.n_prefill = #pq
  cb.prefill_query_lens = self.pq
  cb.prefill_context_lens = self.pl
  cb.prefill_block_table = pt and pt.cd or nil
  local step = ffi.new("ixl_step")
  core.check(self.ctx.cd, C.ixl_builder_build(cd, cb, sparse and 1 or 0, step))
  local nd = #dl
  local out = {
    n_rows = tonumber(step.n_rows), n_decode_rows = tonumber(step.n_decode_rows),
    num_chunks = step.n_chunks, chunks = {}, sparse = sparse,
  }
  -- calls: every sparse-logits call of the step in row order (the decode rows, then chunks).
  out.calls = {}
  if step.has_decode ~= 0 then
    out.decode = rows_table(self, step.decode, pq, nd, dt)
    out.calls[1] = out.decode
  end
  for i = 0, step.n_chunks - 1 do
    out.chunks[i + 1] = rows_table(self, step.chunks[i], pq, nd, pt)
    out.calls[#out.calls + 1] = out.chunks[i + 1]
  end
  return out
end

function Builder:free()
  if self.cd ~= nil then
    local cd = self.cd
    ffi.gc(cd, nil)
    C.ixl_builder_free(cd)
    self.cd = nil
  end
end

function Builder:__tostring()
  if self.cd == nil then return "Builder(freed)" end
  return ("Builder(cbs %d, T %d, sbk %d, %d rows, %s)"):format(self.config.candidate_block_size,
    self.config.candidate_topk_blocks, self.config.sparse_block_kv, self.config.max_rows,
    self.ctx:device_kind())
end

-- The public boundary: the module's functions and the builder's methods.
errors.wrap(Builder, { "__tostring" })
errors.wrap(M)
return setmetatable(M, { __call = function(_, a, b) return M.new(a, b) end })
