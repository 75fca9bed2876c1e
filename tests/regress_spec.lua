-- regress_spec: bench/regress.lua, the GPU benchmarks' regression guard, on temp files: the
-- baseline block and the three results formats parse, a figure 12% slower is listed and one
-- 5% slower is not, a baseline figure the run did not measure is "missing", malformed input
-- is refused naming its line; and BENCHMARKS.md's own block parses.
local root = os.getenv("IDXLAB_ROOT") or "."
local regress = dofile(root .. "/bench/regress.lua")

local function write(text)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

local BASE = table.concat({
  "# Benchmarks", "", "text", "```bench-baseline", "# a comment",
  "topk/64x16384_bf16_k512/v2 100 2026-12-01",
  "topk/1x131072_f32_k2048/v2 20 2026-12-01",
  "logits/k2_decode_1x128k_fp8_h64/v2 10 2026-12-01",
  "step/quick_gpu/time_step_us 1000 2026-12-01",
  "```", "after", "" }, "\n")

describe("bench/regress.lua", function()
  local tmp = {}
  local function file(text)
    local p = write(text)
    tmp[#tmp + 1] = p
    return p
  end
  after_each(function()
    for _, p in ipairs(tmp) do os.remove(p) end
    tmp = {}
  end)

  local function run(current, extra)
    local opts = { baseline = file(BASE), current = file(current) }
    for k, v in pairs(extra or {}) do opts[k] = v end
    return regress.run(opts)
  end
  local function names(rows)
    local t = {}
    for _, r in ipairs(rows) do t[#t + 1] = type(r) == "table" and r.name or r end
    return t
  end

  it("parses the baseline block", function()
    local lines = {}
    for l in (BASE):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
    local b = regress.parse_baseline(lines, "B")
    assert.same({ "topk/64x16384_bf16_k512/v2", "topk/1x131072_f32_k2048/v2",
      "logits/k2_decode_1x128k_fp8_h64/v2", "step/quick_gpu/time_step_us" }, b.list)
    assert.same({ us = 20, date = "2026-12-01" }, b["topk/1x131072_f32_k2048/v2"])
  end)

  it("lists a figure 12% slower, not one 5% slower, in plain text", function()
    local out = run("# now\ntopk/64x16384_bf16_k512/v2 112\n\nstep/quick_gpu/time_step_us 1050\n")
    assert.same({ "topk/64x16384_bf16_k512/v2", "step/quick_gpu/time_step_us" },
      names(out.rows))
    assert.same({ "topk/64x16384_bf16_k512/v2" }, names(out.slower))
    assert.near(0.12, out.slower[1].change, 1e-12)
    local text = table.concat(out.lines, "\n")
    assert.truthy(text:find("SLOWER topk/64x16384_bf16_k512/v2 100.00 us -> 112.00 us", 1, true))
    assert.falsy(text:find("SLOWER step/", 1, true))
  end)

  it("reports a baseline figure of a measured family as missing", function()
    local out = run("topk/64x16384_bf16_k512/v2 95\n")
    assert.same({ "topk/1x131072_f32_k2048/v2" }, out.missing) -- logits, step: not this run's
    assert.same({}, out.slower)
    local text = table.concat(out.lines, "\n")
    assert.truthy(text:find("topk/1x131072_f32_k2048/v2%s+missing"))
    assert.truthy(text:find("more than 10%: none", 1, true))
  end)

  it("reads topk_gpu.sh's log (batch medians) and bench_logits' CSV (us_median)", function()
    local out = run(table.concat({ "noise line",
      "# topkbench 64x16384_bf16_k512     v2       single    20.00 us batch   105.00 us"
        .. "    10 GB/s (128 copies)",
      "# torchtopk 1x131072_f32_k2048     torch    single   120.00 us batch   111.90 us 5 GB/s",
      "| table | 1 |" }, "\n") .. "\n")
    assert.same({ "topk/64x16384_bf16_k512/v2" }, names(out.rows))
    assert.equals(105, out.rows[1].now)
    assert.same({ "topk/1x131072_f32_k2048/v2" }, out.missing)
    local csv = "name,kernel,fmt,H,R,cols,valid_pairs,flops,bytes,us_median,us_min,us_p90\n"
      .. "k2_decode_1x128k_fp8_h64,K2,fp8,64,1,131072,131072,1e9,1e7,11.5,11.0,12.0\n"
    out = run(csv, { variant = "v2" })
    assert.same({ "logits/k2_decode_1x128k_fp8_h64/v2" }, names(out.rows))
    assert.same({ "logits/k2_decode_1x128k_fp8_h64/v2" }, names(out.slower))
    out = run(csv) -- no variant pinned: logits/.../default, not the v2 figure
    assert.same({}, out.rows)
    assert.same({ "logits/k2_decode_1x128k_fp8_h64/v2" }, out.missing)
  end)

  it("honours threshold=", function()
    assert.same({}, run("topk/64x16384_bf16_k512/v2 112\n", { threshold = 0.15 }).slower)
  end)

  local function refused(fn, pattern)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    assert.truthy(tostring(err):match(pattern), tostring(err))
  end

  it("refuses a malformed baseline block, naming the line", function()
    local function with_base(text)
      return function()
        regress.run({ baseline = file(text), current = file("a/b/c 1\n") })
      end
    end
    refused(with_base("x\n```bench-baseline\ntopk/a/v2 100 2026-12-01\ntopk/b/v2 fast 2026\n```\n"),
      "idxlab: regress: .*:4: expected `family/case/variant value_us YYYY%-MM%-DD`")
    refused(with_base("```bench-baseline\ntopk/a/v2 1 2026-12-01\ntopk/a/v2 2 2026-12-01\n```\n"),
      ":3: topk/a/v2 recorded twice")
    refused(with_base("```bench-baseline\ntopk/a/v2 1 2026-12-01\n"), ":1: .* not closed")
    refused(with_base("no block\n"), "no ```bench%-baseline block")
  end)

  it("refuses a malformed results file, naming the line", function()
    refused(function() run("# c\ntopk/a/v2 1\ntopk/b/v2 -3\n") end,
      "idxlab: regress: .*:3: expected `family/case/variant value_us`")
    refused(function() run("noname 3\n") end, ":1: bad figure name \"noname\"")
    refused(function() run("# topkbench a v2 single x\n") end,
      ":1: expected `# topkbench NAME MODE")
    refused(function()
      run("name,kernel,fmt,H,R,cols,valid_pairs,flops,bytes,us_median,us_min,us_p90\nk,K2,fp8\n")
    end, ":2: expected 12 CSV fields")
    refused(function() run("# only comments\n") end, "no figures")
    refused(function() regress.run({ current = "/nonexistent/x" }) end, "cannot open")
  end)

  it("parses BENCHMARKS.md's own baseline block", function()
    local lines = {}
    for l in io.lines(root .. "/BENCHMARKS.md") do lines[#lines + 1] = l end
    local b = regress.parse_baseline(lines, "BENCHMARKS.md")
    -- every figure line of the block, read here by a plain match: the parser gives the same
    -- names and values (the figures change with each recorded run; the format does not)
    local want, inside = {}, false
    for _, l in ipairs(lines) do
      if l == "```bench-baseline" then
        inside = true
      elseif inside and l:match("^```") then
        break
      elseif inside and not l:match("^%s*#") and l:match("%S") then
        local name, us = l:match("^(%S+)%s+(%S+)")
        want[#want + 1] = { name = name, us = tonumber(us) }
      end
    end
    assert.is_true(#want >= 18, "figures in the block: " .. #want)
    assert.equals(#want, #b.list)
    for _, w in ipairs(want) do
      assert.equals(w.us, b[w.name] and b[w.name].us, w.name)
    end
    for _, name in ipairs({ "step/quick_gpu/time_step_us", "step/torch_twin/median_us",
      "topk/64x16384_bf16_k512/v2" }) do
      assert.is_number(b[name] and b[name].us, name)
    end
  end)
end)
