-- config_spec: the shared config table (fields, defaults, resolve, to_c), SPEC 8's --set
-- grammar, the JSON encoder/decoder, and `idxlab config` from the shell.
local idxlab = require("idxlab")
local config = require("idxlab.config")
local json = require("idxlab.json")

local function root() return os.getenv("IDXLAB_ROOT") or "." end

local support = dofile(root() .. "/tests/support.lua")
local err_of = support.err_of

describe("config fields", function()
  it("lists every builder field once, in order, with type, default and doc", function()
    local names = {}
    for _, f in ipairs(config.fields) do
      names[#names + 1] = f.name
      assert.is_string(f.doc)
      assert.is_true(#f.doc > 10, f.name)
      assert.is_not_nil(f.default, f.name)
      assert.truthy(({ int = 1, ["int|auto"] = 1, bytes = 1, enum = 1 })[f.type], f.name)
      if f.type == "enum" then assert.equals(f.values[1], f.default) end
    end
    assert.are.same({ "heads", "head_dim", "index_topk", "candidate_block_size",
      "candidate_topk_blocks",
      "sparse_block_kv", "kv_format", "quantizer", "page_size", "max_rows", "max_model_len",
      "compress_ratio", "workspace_tokens", "max_logits_bytes", "split_width", "ks_mode",
        "block_score",
      "context_parallel" }, names)
    assert.is_true(config.is_field("index_topk"))
    assert.is_false(config.is_field("seed"))
    assert.is_false(config.is_field("backend"))
  end)

  it("defaults to the V4.1-Flash reference config", function()
    local d = config.defaults()
    assert.are.same({
      heads = 32, head_dim = 128, index_topk = 512, candidate_block_size = 8,
      candidate_topk_blocks = 2048, sparse_block_kv = "auto", kv_format = "mxfp4",
        quantizer = "rne",
      page_size = 128, max_rows = 8192, max_model_len = 1048576, compress_ratio = 1,
      workspace_tokens = "auto", max_logits_bytes = 512 * 1024 * 1024, split_width = "bf16",
      ks_mode = "unaligned", block_score = "max", context_parallel = 1,
    }, d)
    -- The C defaults agree with the Lua table.
    local c = config.to_c({})
    local ffi = require("ffi")
    local cd = ffi.new("ixl_config")
    require("idxlab.ffi").C.ixl_config_defaults(cd)
    for _, f in ipairs(config.fields) do
      assert.equals(tonumber(cd[f.name]), tonumber(c[f.name]), f.name)
    end
  end)

  it("resolves given values over defaults and type-checks them", function()
    local r = config.resolve({ candidate_block_size = 16, max_logits_bytes = "1GiB",
      sparse_block_kv = 8 })
    assert.equals(16, r.candidate_block_size)
    assert.equals(2 ^ 30, r.max_logits_bytes)
    assert.equals(8, r.sparse_block_kv)
    assert.equals(32, r.heads)
    assert.equals("auto", r.workspace_tokens)
    assert.equals(1536, config.resolve({ max_logits_bytes = "1.5KiB" }).max_logits_bytes)
  end)

  it("refuses an unknown field, suggesting the nearest one, at the caller's line", function()
    local e = err_of(config.resolve, { candidate_blok_size = 8 })
    assert.matches("unknown config field 'candidate_blok_size' %(did you mean "
      .. "candidate_block_size%?%)", e)
    e = err_of(function() local b = idxlab.builder{ index_tpok = 8 }; return b end)
    assert.matches("did you mean index_topk%?", e)
    assert.matches("config_spec.lua:%d+:", e)
    e = err_of(config.resolve, { colour = "red" })
    assert.matches("unknown config field 'colour' %(the fields: heads, head_dim", e)
  end)

  it("refuses values of the wrong type, naming the field and value", function()
    assert.matches("heads = 1.5: must be an integer", err_of(config.resolve, { heads = 1.5 }))
    assert.matches("heads = 32: must be an integer", err_of(config.resolve, { heads = "32" }))
    assert.matches("kv_format = fp4: must be one of mxfp4, mxfp8, fp8",
      err_of(config.resolve, { kv_format = "fp4" }))
    assert.matches('sparse_block_kv = big: must be an integer or "auto"',
      err_of(config.resolve, { sparse_block_kv = "big" }))
    assert.matches("max_logits_bytes = 1.3KiB: must be a byte count",
      err_of(config.resolve, { max_logits_bytes = "1.3KiB" }))
    assert.matches("split_width = fp32: must be one of bf16, bf16%+fp32",
      err_of(config.resolve, { split_width = "fp32" }))
    assert.matches("config must be a table", err_of(config.resolve, 5))
    -- 0 is "auto" only in the C API: from Lua an explicit number means itself
    assert.matches('sparse_block_kv = 0: must be a positive integer or "auto"',
      err_of(config.resolve, { sparse_block_kv = 0 }))
    assert.matches('workspace_tokens = %-5: must be a positive integer or "auto"',
      err_of(config.resolve, { workspace_tokens = -5 }))
  end)

  it("converts to the C struct (auto as 0, enums as their C values)", function()
    local c = config.to_c({ kv_format = "fp8", split_width = "bf16+fp32", sparse_block_kv = 4,
      block_score = "logsumexp" })
    assert.equals(2, c.kv_format)
    assert.equals(1, c.split_width)
    assert.equals(3, c.block_score)
    assert.equals(4, tonumber(c.sparse_block_kv))
    assert.equals(0, tonumber(config.to_c({}).workspace_tokens))
    assert.equals(1e12, tonumber(config.to_c({ max_rows = 1e12 }).max_rows))
  end)

  it("lists every valid sparse_block_kv", function()
    assert.are.same({ 4, 8 }, config.valid_sparse_block_kv({}))
    assert.are.same({ 4, 8, 16, 32 },
      config.valid_sparse_block_kv({ candidate_block_size = 64, page_size = 32 }))
    assert.are.same({}, config.valid_sparse_block_kv({ candidate_block_size = 6 }))
    assert.are.same({ 4, 8, 16 },
      idxlab.builder.valid_sparse_block_kv({ candidate_block_size = 16 }))
  end)

  it("describes a config without allocating scratch", function()
    local d = config.describe({})
    assert.equals(8, d.config.sparse_block_kv)
    assert.equals(41943040, d.config.workspace_tokens)
    assert.equals(16384, d.derived.num_sparse_cols)
    assert.equals(2048, d.derived.num_sparse_blocks)
    assert.equals(8192, d.derived.min_split_seq_len)
    assert.equals(8192 * (2048 + 512 + 5) * 4, d.derived.scratch_bytes)
    assert.equals(24576, config.describe({ split_width = "bf16+fp32" }).derived.min_split_seq_len)
    assert.matches("num_sparse_cols = candidate_topk_blocks %(100%) %* candidate_block_size "
      .. "%(8%) = 800: must be a multiple of 512",
      err_of(config.describe, { candidate_topk_blocks = 100 }))
  end)
end)

describe("the --set grammar (SPEC 8)", function()
  it("parses integers, decimals, booleans, strings and byte sizes", function()
    assert.equals(42, config.parse_value(nil, "42"))
    assert.equals(-7, config.parse_value(nil, "-7"))
    assert.equals(0.25, config.parse_value(nil, "0.25"))
    assert.equals(1e-3, config.parse_value(nil, "1e-3"))
    assert.equals(true, config.parse_value(nil, "true"))
    assert.equals(false, config.parse_value(nil, "false"))
    assert.equals("cuda", config.parse_value(nil, "cuda"))
    assert.equals("0x10", config.parse_value(nil, "0x10"))
    assert.equals(3 * 2 ^ 20, config.parse_value(nil, "3MiB"))
    assert.equals(2 ^ 30, config.parse_value("max_logits_bytes", "1GiB"))
    assert.equals(512 * 2 ^ 20, config.parse_value("max_logits_bytes", "512 MiB"))
    assert.equals(1536, config.parse_value("max_logits_bytes", "1.5KiB"))
    assert.equals(123456, config.parse_value("max_logits_bytes", "123456"))
    assert.equals(10000, config.parse_value("max_rows", "1e4"))
  end)

  it("parses lists, auto and all", function()
    assert.are.same({ 8, 16, 32 }, config.parse_value("candidate_block_size", "8,16,32"))
    assert.are.same({ 1, 2.5, "x", true }, config.parse_value(nil, "1, 2.5 ,x,true"))
    assert.are.same({ 2 ^ 20, 2 ^ 30 }, config.parse_value("max_logits_bytes", "1MiB,1GiB"))
    assert.equals("auto", config.parse_value("sparse_block_kv", "auto"))
    assert.equals("all", config.parse_value("sparse_block_kv", "all"))
    assert.equals("auto", config.parse_value("workspace_tokens", "auto"))
    assert.are.same({ "mxfp4", "fp8" }, config.parse_value("kv_format", "mxfp4,fp8"))
  end)

  it("refuses text that does not fit the field, naming field and value", function()
    assert.matches("heads = abc: must be an integer", err_of(config.parse_value, "heads", "abc"))
    assert.matches("page_size = 1.5: must be an integer",
      err_of(config.parse_value, "page_size", "1.5"))
    assert.matches("kv_format = fp4: must be one of mxfp4, mxfp8, fp8",
      err_of(config.parse_value, "kv_format", "fp4"))
    assert.matches("max_logits_bytes = 1TiB: must be a byte count",
      err_of(config.parse_value, "max_logits_bytes", "1TiB"))
    assert.matches("workspace_tokens = all: must be an integer or auto",
      err_of(config.parse_value, "workspace_tokens", "all"))
    assert.matches("sparse_block_kv = x: must be an integer, auto or all",
      err_of(config.parse_value, "sparse_block_kv", "x"))
    assert.matches("heads = 8,,16: empty item in a list",
      err_of(config.parse_value, "heads", "8,,16"))
    assert.matches("unknown config field 'hedas' %(did you mean heads%?%)",
      err_of(config.parse_value, "hedas", "8"))
    assert.matches("heads = '': empty value", err_of(config.parse_value, "heads", ""))
  end)

  it("keeps every integer exact: one a double cannot hold, or text it would round, is refused",
    function()
    -- 9007199254740993 = 2^53 + 1 reads as 2^53 in a double: it used to pass as ...992
    local inexact = "not exactly representable %(it would read as "
    assert.matches("max_logits_bytes = 9007199254740993: " .. inexact .. "9007199254740992%)",
      err_of(config.parse_value, "max_logits_bytes", "9007199254740993"))
    assert.matches("max_model_len = 9007199254740993: " .. inexact .. "9007199254740992%)",
      err_of(config.parse_value, "max_model_len", "9007199254740993"))
    assert.matches("max_rows = 4096%.0000000000000001: " .. inexact .. "4096%)",
      err_of(config.parse_value, "max_rows", "4096.0000000000000001"))
    assert.matches("max_logits_bytes = 1e%-999: " .. inexact .. "0%)",
      err_of(config.parse_value, "max_logits_bytes", "1e-999"))
    assert.matches("max_logits_bytes = 1e30: must be an integer of magnitude at most 2%^53",
      err_of(config.parse_value, "max_logits_bytes", "1e30"))
    assert.matches("max_logits_bytes = 8388609GiB: must be an integer of magnitude at most 2%^53",
      err_of(config.parse_value, "max_logits_bytes", "8388609GiB"))
    assert.matches("value = 9007199254740993: " .. inexact .. "9007199254740992%)",
      err_of(config.parse_value, nil, "9007199254740993"))
    assert.matches("max_logits_bytes = 9007199254740993: " .. inexact,
      err_of(config.parse_sets, { "max_logits_bytes=1GiB,9007199254740993" }))
    -- the same rule for values given from Lua: shown in full, not as 1.1529215046068e+18
    assert.matches("max_logits_bytes = 1152921504606846976: must be an integer of magnitude at "
      .. "most 2%^53",
      err_of(config.resolve, { max_logits_bytes = 2 ^ 60 }))
    assert.matches("max_logits_bytes = 9007199254740993: " .. inexact,
      err_of(config.resolve, { max_logits_bytes = "9007199254740993" }))
    assert.matches('workspace_tokens = %-1152921504606846976: must be an integer of magnitude '
      .. 'at most 2%^53 %(9007199254740992%) or "auto"',
      err_of(config.resolve, { workspace_tokens = -2 ^ 60 }))
    -- what a double holds exactly still passes: 2^53 itself, exact decimals, byte units
    assert.equals(2 ^ 53, config.parse_value("max_logits_bytes", "9007199254740992"))
    assert.equals(2 ^ 53 - 1, config.parse_value("max_logits_bytes", "9007199254740991"))
    assert.equals(2 ^ 53, config.parse_value("max_logits_bytes", "8388608GiB"))
    assert.equals(1536, config.parse_value("max_logits_bytes", "1.5KiB"))
    assert.equals(4096, config.parse_value("max_rows", "4096.000"))
    assert.equals(4096, config.parse_value("max_rows", "4.096e3"))
    assert.equals(2 ^ 53, config.resolve({ max_logits_bytes = 2 ^ 53 }).max_logits_bytes)
    assert.equals(0.1, config.parse_value(nil, "0.1"))
  end)

  it("parses --set lists into raw key/value pairs in order", function()
    local map, order = config.parse_sets({ "candidate_block_size=16", "backend=cuda", "seed=7",
      "max_logits_bytes=256MiB", "index_topk=256,512", "verbose=true" })
    assert.are.same({ "candidate_block_size", "backend", "seed", "max_logits_bytes", "index_topk",
      "verbose" }, order)
    assert.equals(16, map.candidate_block_size)
    assert.equals("cuda", map.backend)
    assert.equals(7, map.seed)
    assert.equals(256 * 2 ^ 20, map.max_logits_bytes)
    assert.are.same({ 256, 512 }, map.index_topk)
    assert.equals(true, map.verbose)
    assert.matches("%-%-set heads=8: heads is set twice",
      err_of(config.parse_sets, { "heads=4", "heads=8" }))
    assert.matches("%-%-set heads: expected key=value", err_of(config.parse_sets, { "heads" }))
    assert.matches("'1x' is not a key name", err_of(config.parse_sets, { "1x=3" }))
    assert.matches("heads = many: must be an integer", err_of(config.parse_sets, { "heads=many" }))
  end)
end)

describe("json", function()
  it("encodes with the given key order, integers as integers, NaN/inf as null", function()
    local s = json.encode({ b = 2, a = 1, c = { 1, 2.5, 0 / 0, math.huge }, d = "x" }, { "d", "c" })
    assert.equals('{"d":"x","c":[1,2.5,null,null],"a":1,"b":2}', s)
    assert.equals("1099511627776", json.encode(2 ^ 40))
    assert.equals('"a\\"b\\\\c\\n\\t\\u0001é"', json.encode('a"b\\c\n\t\1é'))
    assert.equals("[]", json.encode({}))
    assert.equals("{}", json.encode(json.object()))
    assert.equals("[1,null,3]", json.encode({ 1, nil, 3 }))
    assert.equals("null", json.encode(json.null))
    assert.matches("cannot encode a function", err_of(json.encode, { f = print }))
    local t = {}
    t.self = t
    assert.matches("contains itself", err_of(json.encode, t))
  end)

  it("round-trips random doubles bit-exactly", function()
    local seed = os.time()
    math.randomseed(seed)
    for _ = 1, 500 do
      local v = (math.random() - 0.5) * 10 ^ math.random(-30, 30)
      local back = json.decode(json.encode({ v }))[1]
      assert.equals(v, back, ("seed %d, value %.17g"):format(seed, v))
    end
  end)

  it("decodes every JSON form and reports malformed text with its place", function()
    local v = json.decode(' {"a": [1, -2.5e3, true, false, null, "\\u00e9\\ud83d\\ude00\\n"], '
      .. '"b": {}, "c": ""} ')
    assert.equals(1, v.a[1])
    assert.equals(-2500, v.a[2])
    assert.equals(true, v.a[3])
    assert.equals(false, v.a[4])
    assert.equals(json.null, v.a[5])
    assert.equals("é😀\n", v.a[6])
    assert.equals("{}", json.encode(v.b))
    assert.equals("", v.c)
    assert.matches("expected , or %] in an array at line 1", err_of(json.decode, "[1, 2"))
    assert.matches("trailing text at line 2", err_of(json.decode, "{}\n x"))
    assert.matches("bad number", err_of(json.decode, "[012]"))
    assert.matches("unterminated string", err_of(json.decode, '"abc'))
    assert.matches("unpaired surrogate", err_of(json.decode, '"\\ud83d"'))
    local nested = { x = { 1, 2, { y = "z", w = { 0.1, -0.0 } } }, n = 3 }
    assert.are.same(nested, json.decode(json.encode(nested)))
  end)
end)

describe("idxlab config (the command)", function()
  local bin = root() .. "/bin/idxlab"

  local function run(args)
    local errf = os.tmpname()
    local p = io.popen(("cd / && %s config %s 2>%s; echo \"rc=$?\""):format(bin, args, errf))
    local out = p:read("*a")
    p:close()
    local f = io.open(errf, "rb")
    local err = f:read("*a")
    f:close()
    os.remove(errf)
    local rc = tonumber(out:match("rc=(%d+)%s*$"))
    return out:gsub("rc=%d+%s*$", ""), err, rc
  end

  it("prints the V4.1-Flash reference config as one JSON object, from any directory", function()
    local out, err, rc = run("")
    assert.equals(0, rc)
    assert.equals("", err)
    assert.equals(1, select(2, out:gsub("\n", "")))
    local v = json.decode(out)
    for _, f in ipairs(config.fields) do assert.is_not_nil(v[f.name], f.name) end
    assert.equals(8, v.sparse_block_kv)
    assert.equals(32, v.heads)
    assert.equals("mxfp4", v.kv_format)
    assert.equals(41943040, v.workspace_tokens)
    assert.equals(16384, v.derived.num_sparse_cols)
    assert.equals(2048, v.derived.num_sparse_blocks)
    assert.equals(8192, v.derived.min_split_seq_len)
    assert.equals(8192 * 2048 * 4, v.derived.sparse_ids_bytes)
    assert.equals(8192 * 512 * 4, v.derived.col_indices_bytes)
    assert.equals(8192 * (2048 + 512 + 5) * 4, v.derived.scratch_bytes)
    assert.are.same({ 4, 8 }, v.valid_sparse_block_kv)
  end)

  it("applies --set values", function()
    local out, err,
      rc = run("--set candidate_block_size=16 --set max_logits_bytes=1GiB --set "
      .. "split_width=bf16+fp32 --set=sparse_block_kv=4")
    assert.equals(0, rc, err)
    assert.equals("", err)
    local v = json.decode(out)
    assert.equals(16, v.candidate_block_size)
    assert.equals(4, v.sparse_block_kv)
    assert.equals(2 ^ 30, v.max_logits_bytes)
    assert.equals("bf16+fp32", v.split_width)
    assert.equals(32768 * 6 / 4, v.derived.min_split_seq_len)
    assert.equals(8192, v.derived.num_sparse_blocks)
    assert.are.same({ 4, 8, 16 }, v.valid_sparse_block_kv)
  end)

  it("exits 1 with the error on stderr for a bad --set", function()
    local cases = {
      { "--set heads=30", "heads = 30: must be a multiple of 4 in %[4, 128%]" },
      { "--set candidate_blok_size=16",
        "unknown config field 'candidate_blok_size' %(did you mean candidate_block_size%?%)" },
      { "--set candidate_block_size=16 --set sparse_block_kv=12",
        "sparse_block_kv = 12: must be a power of two.*valid choices for this config: 4, 8, 16" },
      { "--set seed=3", "unknown config field 'seed'" },
      { "--set heads=8,16", "heads: idxlab config takes one value per field" },
      { "--set sparse_block_kv=all", "sparse_block_kv = all is for sweeps" },
      { "--set heads", "%-%-set heads: expected key=value" },
      { "--set max_logits_bytes=9007199254740993",
        "max_logits_bytes = 9007199254740993: not exactly representable %(it would read as "
        .. "9007199254740992%)" },
      { "--set", "config: %-%-set needs a value" },
      { "--frobnicate", "config: unknown option %-%-frobnicate" },
      { "stray", "config: unknown argument 'stray'" },
    }
    for _, c in ipairs(cases) do
      local out, err, rc = run(c[1])
      assert.equals(1, rc, c[1])
      assert.equals("", out, c[1])
      assert.matches("^idxlab: " .. c[2], err, 1)
      assert.equals(1, select(2, err:gsub("idxlab: ", "")), c[1] .. ": " .. err)
    end
  end)
end)
