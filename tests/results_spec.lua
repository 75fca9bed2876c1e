-- results_spec: the results files. JSON numbers read back bit-exact (%.17g), results.jsonl is
-- appended one whole flushed line at a time and a half-written last line is detected and
-- removed, whole files are replaced atomically, the CSV's schema and quoting, the config hash,
-- and `idxlab diff` on two safetensors files.
local fs = require("idxlab.fs")
local results = require("idxlab.results")
local report = require("idxlab.report")
local merge = require("idxlab.merge")
local experiment = require("idxlab.experiment")
local config = require("idxlab.config")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"
local q = fs.shell_quote

local support = dofile(ROOT .. "/tests/support.lua")
local function tmpdir() return support.tmpdir("results-spec") end
teardown(support.cleanup)

local write = support.write

local function listing(dir)
  local p = io.popen("ls -A " .. q(dir))
  local names = {}
  for l in p:lines() do names[#names + 1] = l end
  p:close()
  return names
end

describe("JSON numbers", function()
  it("read back bit-exact, integers as integers, NaN and infinities as null", function()
    local seed = os.time()
    math.randomseed(seed)
    local vals = {}
    for i = 1, 2000 do
      local m = math.random() * 2 - 1
      vals[i] = m * 10 ^ math.random(-300, 300)
    end
    vals[#vals + 1] = 0.1 + 0.2
    vals[#vals + 1] = 2 ^ 53 - 1
    vals[#vals + 1] = -2 ^ 52 + 0.5
    vals[#vals + 1] = 5e-324
    local back = results.decode(results.encode(vals))
    for i, v in ipairs(vals) do
      assert.equals(v, back[i], ("value %d = %.17g (seed %d)"):format(i, v, seed))
    end
    assert.equals('{"a":1,"b":-3}', results.encode({ b = -3, a = 1 }))
    assert.equals("[12345678901234,0.5]", results.encode({ 12345678901234, 0.5 }))
    assert.equals('{"x":null,"y":null}', results.encode({ x = 0 / 0, y = math.huge }))
    local t = results.decode('{"a":null,"b":[1,2]}')
    assert.is_nil(t.a)
    assert.are.same({ 1, 2 }, t.b)
  end)

  it("writes the keys of the order list first", function()
    assert.equals('{"z":1,"a":2,"m":3}', results.encode({ a = 2, m = 3, z = 1 }, { "z" }))
  end)

  it("hashes with FNV-1a (32 bits)", function()
    assert.equals("811c9dc5", results.hash(""))
    assert.equals("e40c292c", results.hash("a"))
    assert.equals("bf9cf968", results.hash("foobar"))
    assert.equals(results.canonical({ b = 1, a = { 2, 3 } }),
      results.canonical({ a = { 2, 3 }, b = 1 }))
  end)
end)

describe("results.jsonl", function()
  it("appends whole flushed lines: a reader sees every row while the file is still open", function()
    local d = tmpdir()
    local path = d .. "/results.jsonl"
    local app = results.open_jsonl(path, true)
    for i = 1, 5 do
      app:append({ point = i - 1, value = i / 3, text = "a\nb" })
      local rows, info = results.read_jsonl(path)
      assert.equals(i, #rows)
      assert.is_false(info.torn)
      assert.equals((i - 1) / 1, rows[i].point)
      assert.equals(i / 3, rows[i].value)
      assert.equals("a\nb", rows[i].text)
    end
    app:close()
  end)

  it("detects a half-written last line and repair removes only that", function()
    local d = tmpdir()
    local path = d .. "/results.jsonl"
    local good = '{"point":0,"x":1}\n{"point":1,"x":2}\n'
    for _, torn in ipairs({ '{"point":2,"x":', '{"point":2,"x":3}', '{"po', "\n" }) do
      write(path, good .. torn)
      local rows, info = results.read_jsonl(path)
      assert.equals(2, #rows)
      assert.is_true(info.torn, torn)
      assert.equals(#good, info.valid_bytes)
      local repaired = results.repair_jsonl(path)
      assert.is_true(repaired)
      assert.equals(good, fs.read_file(path))
      assert.is_false(results.repair_jsonl(path))
    end
  end)

  it("refuses a damaged line that is not the last (corruption, not a kill)", function()
    local d = tmpdir()
    local path = d .. "/results.jsonl"
    write(path, '{"point":0}\n{"point":1\n{"point":2}\n')
    local ok, err = pcall(results.read_jsonl, path)
    assert.is_false(ok)
    assert.matches("results%.jsonl line 2 is damaged", tostring(err))
  end)

  it("reads a missing file as no rows", function()
    local rows, info = results.read_jsonl("/nonexistent/results.jsonl")
    assert.equals(0, #rows)
    assert.is_false(info.torn)
  end)
end)

describe("a results directory's experiment.json", function()
  -- a shard as merge reads it: the plan (experiment.json) and one finished point
  local function shard(d, points)
    fs.mkdir_p(d)
    write(d .. "/experiment.json",
      '{"schema":1,"name":"m","mode":"step","swept":[],"plots":[],"points":' .. points .. '}\n')
    write(d .. "/results.jsonl",
      '{"schema":1,"experiment":"m","point":0,"config_hash":"aa","recall_at_k":1}\n')
  end

  it("merges a well-formed one", function()
    local d = tmpdir()
    shard(d .. "/s0", '[{"point":0,"config_hash":"aa"},{"point":1,"config_hash":"bb"}]')
    local res = merge.merge(d .. "/out", { d .. "/s0" }, { gnuplot = "none" })
    assert.equals(1, #res.rows)
    assert.equals(1, res.missing)
  end)

  it("names the file and the field a merge cannot use, in Lua and from the command", function()
    local cases = {
      { "[1,2]", "field 'points%[1%]' = 1: must be a planned point" },
      { "5", "field 'points' = 5: must be a list of planned points" },
      { '[{"point":"0","config_hash":"aa"}]',
        "field 'points%[1%]%.point' = \"0\": must be a non%-negative integer" },
      { '[{"point":0.5,"config_hash":"aa"}]',
        "field 'points%[1%]%.point' = 0%.5: must be a non%-negative integer" },
      { '[{"point":0,"config_hash":7}]', "field 'points%[1%]%.config_hash' = 7: must be a string" },
    }
    for _, c in ipairs(cases) do
      local d = tmpdir()
      shard(d .. "/s0", c[1])
      local ok, err = pcall(function()
        local r = merge.merge(d .. "/out", { d .. "/s0" }, { gnuplot = "none" }); return r
      end)
      assert.is_false(ok, c[1])
      assert.matches("results_spec%.lua:%d+: idxlab: [^\n]*/s0/experiment%.json: " .. c[2],
        tostring(err))
      local rc, out = support.sh(("%s merge %s %s"):format(BIN, q(d .. "/out2"), q(d .. "/s0")))
      assert.equals(1, rc, out)
      assert.matches("^idxlab: [^\n]*/s0/experiment%.json: " .. c[2] .. "[^\n]*\n$", out)
      assert.is_false(fs.exists(d .. "/out2/results.jsonl"))
    end
  end)

  it("refuses a row whose point is not a point index", function()
    local d = tmpdir()
    shard(d, '[{"point":0,"config_hash":"aa"}]')
    write(d .. "/results.jsonl",
      '{"point":0,"config_hash":"aa"}\n{"point":"one","config_hash":"bb"}\n')
    local ok, err = pcall(report.load_dir, d)
    assert.is_false(ok)
    assert.matches(
      "results%.jsonl line 2: field 'point' = \"one\": must be a non%-negative integer",
      tostring(err))
  end)
end)

describe("whole files", function()
  it("are replaced through a temporary name and leave no temporary behind", function()
    local d = tmpdir()
    fs.write_atomic(d .. "/a.txt", "one")
    fs.write_atomic(d .. "/a.txt", "two")
    assert.equals("two", fs.read_file(d .. "/a.txt"))
    assert.are.same({ "a.txt" }, listing(d))
  end)

  it("name the path when they cannot be written", function()
    local ok, err = pcall(fs.write_atomic, "/nonexistent/dir/a.txt", "x")
    assert.is_false(ok)
    assert.matches("cannot write /nonexistent/dir/a%.txt", tostring(err))
  end)
end)

describe("CSV", function()
  it("quotes commas, quotes and newlines and reads back the same cells", function()
    local rows = {
      { a = 1, b = 'say "hi"', c = "x,y" },
      { a = 2.5, b = "line\nbreak", c = true },
      { a = 0 / 0, d = "only here", nested = { 1, 2 } },
    }
    local text, cols = results.csv_text(rows, { "c", "a" })
    assert.are.same({ "c", "a", "b", "d" }, cols) -- tables stay in the JSON file
    local header, recs = results.parse_csv(text)
    assert.are.same(cols, header)
    assert.are.same({ "x,y", "1", 'say "hi"', "" }, recs[1])
    assert.are.same({ "true", "2.5", "line\nbreak", "" }, recs[2])
    assert.are.same({ "", "", "", "only here" }, recs[3])
  end)

  it("of a run: the point's config and every metric, matching the JSON rows", function()
    local d = tmpdir()
    local sink = { write = function(self) return self end, flush = function(self) return self end }
    local res = experiment.run({
      name = "csv", seed = 2, backend = "cpu",
      workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
      config = { index_topk = 64, max_rows = 64, max_model_len = 65536,
        candidate_topk_blocks = 64 },
      sweep = { candidate_block_size = { 8, 16 } }, repeats = 2,
    }, { out = d, fake = support.fake_measure, progress = "off", stdout = sink, stderr = sink,
      gnuplot = "none" })
    local header, recs = results.parse_csv(fs.read_file(res.dir .. "/results.csv"))
    local col = {}
    for i, h in ipairs(header) do col[h] = i end
    local want = { "schema", "experiment", "point", "repeat", "config_hash", "seed", "backend",
      "device", "mode", "candidate_block_size", "idxlab_version", "git_commit", "wall_time_s",
      "logit_mismatches", "logit_diff", "selection_agreement", "fp32_selection_agreement",
      "recall_at_k", "mass_recall", "candidate_coverage", "active_rows", "time_dense_logits_us",
      "time_candidate_select_us", "time_expand_us", "time_sparse_logits_us", "time_topk_us",
      "time_remap_us", "time_step_us", "scratch_bytes", "logits_bytes", "num_chunks" }
    for _, f in ipairs(config.field_names()) do want[#want + 1] = f end
    want[#want + 1] = "variant.logits" -- SPEC 6: the variant that ran, per kernel family
    for _, w in ipairs(want) do assert.is_not_nil(col[w], "CSV column " .. w) end
    assert.equals("schema", header[1])
    local count = {}
    for _, h in ipairs(header) do
      count[h] = (count[h] or 0) + 1
      assert.equals(1, count[h],
        "column " .. h .. " twice (a swept builder field is also a config column)")
    end
    assert.is_nil(col.per_layer)
    assert.equals(#res.rows, #recs)
    for i, r in ipairs(res.rows) do
      assert.equals(r.recall_at_k, tonumber(recs[i][col.recall_at_k]))
      assert.equals(r.config_hash, recs[i][col.config_hash])
      assert.equals(r.candidate_block_size, tonumber(recs[i][col.candidate_block_size]))
      assert.equals(tostring(r.kv_format), recs[i][col.kv_format])
    end
  end)
end)

describe("idxlab diff", function()
  local st_ok, st = pcall(require, "idxlab.safetensors")
  local ffi = require("ffi")

  it("counts mismatches per tensor and gives SPEC's diff measure against a float64 computation",
  function()
    if not st_ok then pending("idxlab.safetensors is not available") return end
    local seed = os.time()
    math.randomseed(seed)
    local d = tmpdir()
    local n = 257
    local a, b = ffi.new("float[?]", n), ffi.new("float[?]", n)
    local want_mism, sxy, sq, mask = 0, 0, 0, 0
    for i = 0, n - 1 do
      a[i] = (math.random() - 0.5) * 100
      b[i] = a[i]
      local r = math.random()
      if r < 0.1 then b[i] = a[i] + (math.random() - 0.5) end
      if r > 0.95 then b[i] = -math.huge end
      if r > 0.97 then a[i] = -math.huge end -- both -inf: equal
      if a[i] ~= b[i] then want_mism = want_mism + 1 end
      if (a[i] == -math.huge) ~= (b[i] == -math.huge) then mask = mask + 1 end
      if a[i] > -math.huge and b[i] > -math.huge then
        sxy = sxy + a[i] * b[i]
        sq = sq + a[i] * a[i] + b[i] * b[i]
      end
    end
    local zero, negzero = ffi.new("float[2]", { 0, 1 }), ffi.new("float[2]", { -0.0, 1 })
    local ia, ib = ffi.new("int32_t[3]", { 1, 2, 3 }), ffi.new("int32_t[3]", { 1, -1, 3 })
    st.write(d .. "/a.safetensors", {
      { name = "x", dtype = "F32", shape = { n }, data = a, nbytes = 4 * n },
      { name = "z", dtype = "F32", shape = { 2 }, data = zero, nbytes = 8 },
      { name = "i", dtype = "I32", shape = { 3 }, data = ia, nbytes = 12 },
      { name = "gone", dtype = "I32", shape = { 3 }, data = ia, nbytes = 12 },
    }, { config = "{}" })
    st.write(d .. "/b.safetensors", {
      { name = "x", dtype = "F32", shape = { n }, data = b, nbytes = 4 * n },
      { name = "z", dtype = "F32", shape = { 2 }, data = negzero, nbytes = 8 },
      { name = "i", dtype = "I32", shape = { 3 }, data = ib, nbytes = 12 },
    }, { config = "{}" })
    local diff = require("idxlab.cmd.diff")
    local out = diff.compare(d .. "/a.safetensors", d .. "/b.safetensors")
    local by = {}
    for _, e in ipairs(out.entries) do by[e.name] = e end
    assert.equals(want_mism, by.x.mismatches, "seed " .. seed)
    assert.equals(mask, by.x.mask_mismatches, "seed " .. seed)
    assert.is_true(math.abs(by.x.diff - (1 - 2 * sxy / sq)) < 1e-12, "seed " .. seed)
    assert.equals(0, by.z.mismatches) -- +0 and -0 are equal
    assert.equals(1, by.i.mismatches)
    assert.equals(1, by.i.first)
    assert.are.same({ "gone" }, out.only_a)
    -- the command: 1 when something differs, 0 for the same file
    local rc, text = support.sh(("%s diff %s %s"):format(BIN, q(d .. "/a.safetensors"),
      q(d .. "/b.safetensors")))
    assert.equals(1, rc, text)
    assert.matches("only in A: gone", text)
    assert.matches("\ni%s+I32%s+%[3%]%s+3%s+1", text)
    rc, text = support.sh(("%s diff %s %s"):format(BIN, q(d .. "/a.safetensors"),
      q(d .. "/a.safetensors")))
    assert.matches("identical", text)
    assert.equals(0, rc, text)
  end)

  it("decodes bf16, f16 and e4m3 as the formats define them", function()
    local diff = require("idxlab.cmd.diff")
    assert.equals(1.0, diff.bf16_value(0x3f80))
    assert.equals(-2.0, diff.bf16_value(0xc000))
    assert.equals(-math.huge, diff.bf16_value(0xff80))
    assert.equals(1.0, diff.f16_value(0x3c00))
    assert.equals(65504, diff.f16_value(0x7bff))
    assert.equals(2 ^ -24, diff.f16_value(0x0001))
    assert.equals(448, diff.e4m3_value(0x7e))
    assert.equals(2 ^ -9, diff.e4m3_value(0x01))
    assert.equals(-1.0, diff.e4m3_value(0xb8))
    local nan = diff.e4m3_value(0x7f)
    assert.is_true(nan ~= nan)
  end)

  it("names a file it cannot read", function()
    local rc, text = support.sh(BIN
      .. " diff /nonexistent/a.safetensors /nonexistent/b.safetensors")
    assert.matches("idxlab: .*/nonexistent/a%.safetensors", text)
    assert.equals(2, rc, text)
  end)
end)
