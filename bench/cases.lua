-- bench/cases.lua: the one list of the logits benchmark cases (K1 dense ragged prefill, K2
-- dense paged decode, K5 sparse) at the V4.1-Flash shape (mxfp4, H = 32) and the V3.2 shape
-- (fp8, H = 64), including GPU.md's peer shapes. bench/logits.lua loads it; bench/bench_logits.c
-- and bench/torch/logits.py read its JSON export, which bench/bench_logits.sh writes first:
--
--   bin/idxlab script bench/cases.lua out=PATH     (or: luajit bench/cases.lua PATH)
--
-- A case: name, kernel ("K1" | "K2" | "K5"), kv_format, heads, rows, positions, page_size,
-- bf16, sparse_blocks, sparse_block_kv.
--   K1: the causal rows of one request over `positions` shared keys (row r sees the first
--       positions - rows + r + 1); page_size 0.
--   K2: each row its own `positions` keys in pages of page_size, in a shuffled order.
--   K5: sparse_blocks sorted blocks of sparse_block_kv positions per row, over each row's own
--       pages when page_size > 0, else over causal rows as K1's.
--   bf16: the reduction and the logits are bf16 (K5 always: sparse logits are bf16 only).
-- The export writes every field of every case, in this order, one case per line; that fixed
-- form is what bench_logits.c's reader accepts (see its read_cases).
local M = {}

-- The field order of the export (and of bench_logits.c's reader).
M.fields = { "name", "kernel", "kv_format", "heads", "rows", "positions", "page_size", "bf16",
  "sparse_blocks", "sparse_block_kv" }

-- V4.1-Flash's sparse step: T = 2048 candidate blocks of cbs = sbk = 8, 16384 columns per row.
local V41_SPARSE = { sparse_blocks = 2048, sparse_block_kv = 8 }

local function case(t)
  t.page_size = t.page_size or 0
  t.bf16 = t.bf16 or false
  t.sparse_blocks = t.kernel == "K5" and V41_SPARSE.sparse_blocks or 0
  t.sparse_block_kv = t.kernel == "K5" and V41_SPARSE.sparse_block_kv or 0
  return t
end

M.logits = {
  -- ragged prefill (K1), causal rows, fp32 logits as DeepGEMM's peers
  case{ name = "k1_prefill_2048x8192_mxfp4_h32", kernel = "K1", kv_format = "mxfp4",
    heads = 32, rows = 2048, positions = 8192 },
  case{ name = "k1_prefill_2048x8192_mxfp4_h32_bf16", kernel = "K1", kv_format = "mxfp4",
    heads = 32, rows = 2048, positions = 8192, bf16 = true },
  case{ name = "k1_prefill_2048x8192_fp8_h64", kernel = "K1", kv_format = "fp8",
    heads = 64, rows = 2048, positions = 8192 },
  case{ name = "k1_prefill_4096x65536_mxfp4_h32", kernel = "K1", kv_format = "mxfp4",
    heads = 32, rows = 4096, positions = 65536 },
  case{ name = "k1_prefill_4096x65536_fp8_h64", kernel = "K1", kv_format = "fp8",
    heads = 64, rows = 4096, positions = 65536 },
  -- paged decode (K2), page 64, one row per sequence
  case{ name = "k2_decode_1x128k_mxfp4_h32", kernel = "K2", kv_format = "mxfp4",
    heads = 32, rows = 1, positions = 131072, page_size = 64 },
  case{ name = "k2_decode_1x128k_fp8_h64", kernel = "K2", kv_format = "fp8",
    heads = 64, rows = 1, positions = 131072, page_size = 64 },
  case{ name = "k2_decode_64x128k_mxfp4_h32", kernel = "K2", kv_format = "mxfp4",
    heads = 32, rows = 64, positions = 131072, page_size = 64 },
  case{ name = "k2_decode_64x128k_fp8_h64", kernel = "K2", kv_format = "fp8",
    heads = 64, rows = 64, positions = 131072, page_size = 64 },
  case{ name = "k2_decode_16x128k_fp8_h64", kernel = "K2", kv_format = "fp8",
    heads = 64, rows = 16, positions = 131072, page_size = 64 },
  case{ name = "k2_decode_256x8k_fp8_h64", kernel = "K2", kv_format = "fp8",
    heads = 64, rows = 256, positions = 8192, page_size = 64 },
  -- sparse logits (K5), V4.1-Flash: 2048 blocks of 8 = 16384 columns per row
  case{ name = "k5_decode_64x16k_paged128_mxfp4_h32", kernel = "K5", kv_format = "mxfp4",
    heads = 32, rows = 64, positions = 131072, page_size = 128, bf16 = true },
  case{ name = "k5_prefill_4096x16k_ragged_mxfp4_h32", kernel = "K5", kv_format = "mxfp4",
    heads = 32, rows = 4096, positions = 131072, bf16 = true },
}

-- The rules every case keeps, so that the three readers need not re-check them: an error
-- naming the case and the field.
local formats = { mxfp4 = true, mxfp8 = true, fp8 = true }
function M.check(list)
  for i, c in ipairs(list) do
    local function bad(field, why)
      error(("bench/cases.lua: case %d (%s): %s %s"):format(i, tostring(c.name), field, why), 2)
    end
    if type(c.name) ~= "string" or not c.name:match("^[%w_]+$") then
      bad("name", "must be letters, digits and _")
    end
    if c.kernel ~= "K1" and c.kernel ~= "K2" and c.kernel ~= "K5" then
      bad("kernel", "must be K1, K2 or K5")
    end
    if not formats[c.kv_format] then bad("kv_format", "must be mxfp4, mxfp8 or fp8") end
    for _, f in ipairs{ "heads", "rows", "positions", "page_size", "sparse_blocks",
      "sparse_block_kv" } do
      local v = c[f]
      if type(v) ~= "number" or v ~= math.floor(v) or v < 0 or v >= 2 ^ 31 then
        bad(f, "must be an integer in [0, 2^31)")
      end
    end
    if c.heads < 1 or c.rows < 1 or c.positions < 1 then bad("heads/rows/positions", "< 1") end
    if type(c.bf16) ~= "boolean" then bad("bf16", "must be a boolean") end
    if c.kernel == "K1" and c.page_size ~= 0 then bad("page_size", "must be 0 for K1") end
    if c.kernel == "K2" and c.page_size < 1 then bad("page_size", "must be > 0 for K2") end
    if c.kernel == "K5" and not c.bf16 then bad("bf16", "must be true for K5") end
    if (c.kernel == "K5") ~= (c.sparse_blocks > 0 and c.sparse_block_kv > 0) then
      bad("sparse_blocks/sparse_block_kv", "must be > 0 for K5 and 0 otherwise")
    end
  end
  return list
end
M.check(M.logits)

-- The JSON text of a case list: an array, one case object per line with M.fields in order.
function M.json(list)
  local json = require("idxlab.json")
  local lines = {}
  for i, c in ipairs(list or M.logits) do
    lines[i] = json.encode(c, M.fields)
  end
  return "[\n" .. table.concat(lines, ",\n") .. "\n]\n"
end

-- Writes the JSON export to path.
function M.write(path, list)
  local f = assert(io.open(path, "w"))
  assert(f:write(M.json(list)))
  assert(f:close())
end

-- `bin/idxlab script bench/cases.lua out=PATH`: writes the export to PATH (stdout without).
function M.main(opts)
  opts = opts or {}
  if opts.out then M.write(opts.out) else io.write(M.json()) end
end

-- `luajit bench/cases.lua [PATH]` from anywhere: the checkout's lua/ goes on the module path.
local direct = arg and type(arg[0]) == "string" and arg[0]:match("[^/]*$") == "cases.lua"
  and not rawget(_G, "IDXLAB_SCRIPT")
if direct then
  local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
  package.path = here .. "/../lua/?.lua;" .. here .. "/../lua/?/init.lua;" .. package.path
  M.main{ out = arg[1] }
end

return M
