-- report_spec: the summary table (mean and spread over repeats against a float64
-- computation), the plot data (one line per swept series, never averaging a swept field
-- away), axis labels with units, the PNG/SVG files gnuplot renders (checked by their
-- signature), the message when gnuplot is absent, and `idxlab report DIR` regenerating
-- everything from results.jsonl.
local fs = require("idxlab.fs")
local results = require("idxlab.results")
local report = require("idxlab.report")
local plot = require("idxlab.plot")
local experiment = require("idxlab.experiment")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"
local q = fs.shell_quote

local support = dofile(ROOT .. "/tests/support.lua")
local function tmpdir() return support.tmpdir("report-spec") end
teardown(support.cleanup)

local sink = { write = function(self) return self end, flush = function(self) return self end }

local function exp_table()
  return {
    name = "rep", question = "does the report render?", seed = 4, backend = "cpu",
    workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
    config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
    sweep = { candidate_block_size = { 8, 16 }, candidate_topk_blocks = { 64, 128, 256 } },
    repeats = 3,
    metrics = { "recall_at_k", "time_step_us", "scratch_bytes" },
    plots = {
      { x = "candidate_topk_blocks", y = "recall_at_k", series = "candidate_block_size" },
      { x = "candidate_topk_blocks", y = { "time_sparse_logits_us", "time_step_us" },
        name = "times" },
    },
  }
end

-- experiment.run's options for these specs: the fake measure, no output; more on top.
local function run_opts(d, more)
  local o = { out = d, fake = support.fake_measure, progress = "off", stdout = sink,
    stderr = sink }
  for k, v in pairs(more or {}) do o[k] = v end
  return o
end

local NO_GNUPLOT = "gnuplot is not installed (apt-get install gnuplot-nox)"

local function gnuplot_present()
  local ok = os.execute("command -v gnuplot >/dev/null 2>&1")
  return ok == 0 or ok == true
end

local have = support.have -- under CI=true a missing tool fails the spec

describe("the summary table", function()
  it("shows each metric's mean and sample standard deviation over repeats", function()
    local seed = os.time()
    math.randomseed(seed)
    local rows = {}
    local vals = { a = {}, b = {} }
    for i = 0, 7 do
      local g = i < 4 and "a" or "b"
      local v = math.random() * 10
      vals[g][#vals[g] + 1] = v
      rows[#rows + 1] = { point = i, config_hash = g, candidate_block_size = g == "a" and 8 or 16,
        recall_at_k = v }
    end
    for _, g in ipairs({ "a", "b" }) do
      local s = report.stats(vals[g])
      local sum = 0
      for _, v in ipairs(vals[g]) do sum = sum + v end
      local mean = sum / #vals[g]
      local ss = 0
      for _, v in ipairs(vals[g]) do ss = ss + (v - mean) ^ 2 end
      assert.is_true(math.abs(s.mean - mean) < 1e-12, "seed " .. seed)
      assert.is_true(math.abs(s.sd - math.sqrt(ss / (#vals[g] - 1))) < 1e-12, "seed " .. seed)
    end
    local text = report.summary(rows, { name = "t", swept = { "candidate_block_size" },
      metrics = { "recall_at_k" } })
    assert.matches("candidate_block_size%s+n%s+recall_at_k", text)
    assert.matches("\n%s+8%s+4%s+"
      .. report.fmt_num(report.stats(vals.a).mean):gsub("%.", "%%.") .. " ±", text)
    assert.matches("mean ±sd over repeats", text)
  end)

  it("shows null for a metric without active rows, and bytes in MiB", function()
    local text = report.summary({ { point = 0, config_hash = "x", recall_at_k = nil,
        logits_bytes = 64 * 2 ^ 20 } },
      { swept = {}, metrics = { "recall_at_k", "logits_bytes" } })
    -- one point config and nothing swept: a metric per line
    assert.matches("recall_at_k%s+null\n", text)
    assert.matches("logits_bytes%s+64 MiB\n", text)
  end)
end)

describe("kernel variants (SPEC 6)", function()
  local function vrows(second)
    local rows = {}
    for i = 0, 3 do
      rows[#rows + 1] = { point = i, config_hash = i < 2 and "a" or "b",
        candidate_block_size = i < 2 and 8 or 16, recall_at_k = 0.5 + i / 10,
        ["variant.logits"] = (i % 2 == 0) and "ref" or second, ["variant.select"] = "ref" }
    end
    return rows
  end

  it("says in the summary when the points ran on different variants", function()
    local exp = { swept = { "candidate_block_size" }, metrics = { "recall_at_k" } }
    local text = report.summary(vrows("fast"), exp)
    assert.matches("\nthe points ran on different kernel variants: variant%.logits = "
      .. "ref %(2 rows%), fast %(2 rows%)\n", text)
    assert.is_nil(text:find("variant.select", 1, true), text) -- the same everywhere: no note
    assert.matches("candidate_block_size%s+variant%.logits%s+n%s+recall_at_k", text)
    text = report.summary(vrows("ref"), exp)
    assert.is_nil(text:find("variant", 1, true), text)
  end)

  it("carries every variant.<family> column into the CSV, after the config fields", function()
    local d = tmpdir()
    local rows = vrows("fast")
    rows[1]["variant.index"] = "v1"
    report.write(d, rows, { swept = { "candidate_block_size" }, metrics = { "recall_at_k" } },
      { gnuplot = "none" })
    local header, recs = results.parse_csv(fs.read_file(d .. "/results.csv"))
    local col = {}
    for i, h in ipairs(header) do col[h] = i end
    for _, k in ipairs({ "variant.index", "variant.logits", "variant.select" }) do
      assert.is_not_nil(col[k], k)
    end
    assert.is_true(col["variant.index"] < col["variant.logits"])
    assert.is_true(col["variant.logits"] < col["variant.select"])
    assert.equals("fast", recs[2][col["variant.logits"]])
    assert.equals("", recs[2][col["variant.index"]])
  end)
end)

describe("the plot schema", function()
  it("accepts what a saved plot may be and names the field that is wrong", function()
    assert.is_nil(plot.problem({ x = "a", y = "m" }, "plots[1]"))
    assert.is_nil(plot.problem({ x = "a", y = { "m", "n" }, series = { "b", "c" }, logx = true,
      title = "t", name = "my-plot_1" }, "plots[1]"))
    assert.is_nil(plot.list_problem(nil))
    local cases = {
      { { x = "a", y = "m", series = 3 }, "field 'plots%[2%]%.series' = 3: must name a field" },
      { { x = "a", y = {} }, "field 'plots%[2%]%.y' = %[%]: must be a metric or a non%-empty" },
      { { x = "a", y = "m", logy = "yes" }, "field 'plots%[2%]%.logy' = \"yes\": must be true" },
      { { x = "a", y = "m", title = 1 }, "field 'plots%[2%]%.title' = 1: must be a string" },
      { { 1, 2 }, "field 'plots%[2%]' = %[1,2%]: must be a plot" },
    }
    for _, c in ipairs(cases) do
      assert.matches(c[2], plot.problem(c[1], "plots[2]"))
      local ok, err = pcall(plot.check, c[1], "plots[2]", "f.lua: ")
      assert.is_false(ok)
      assert.matches("report_spec%.lua:%d+: idxlab: f%.lua: " .. c[2], tostring(err))
    end
    assert.matches("field 'plots%[1%]%.x' = nil", plot.list_problem({ {} }))
  end)
end)

describe("the by-length table", function()
  it("shows each bucket's rows, whether it is active, and its quality metrics", function()
    local rows = {}
    for r = 0, 1 do
      rows[#rows + 1] = { point = r, config_hash = "h", candidate_topk_blocks = 64,
        recall_at_k = 0.5,
        by_length = { { bucket = 1024, rows = 2, active_rows = 0, active = false },
          { bucket = 16384, rows = 3, active_rows = 3, active = true,
            recall_at_k = 0.25 + r / 2 } } }
    end
    local text = report.summary(rows, { swept = { "candidate_topk_blocks" },
      metrics = { "recall_at_k" } })
    assert.matches("by row length", text)
    assert.matches("\n%s+64%s+>= 1024%s+2%s+no%s+null", text)
    assert.matches("\n%s+64%s+>= 16384%s+3%s+yes%s+0%.5%s", text)
  end)
end)

describe("plot data", function()
  it("draws one line per series, sorted by x, with min and max over repeats", function()
    local rows = {}
    local i = 0
    for _, cbs in ipairs({ 8, 16 }) do
      for _, T in ipairs({ 256, 64, 128 }) do
        for r = 1, 2 do
          rows[#rows + 1] = { point = i, candidate_block_size = cbs, candidate_topk_blocks = T,
            block_score = "max",
            recall_at_k = T / 1000 + cbs / 100 + r / 1e4 }
          i = i + 1
        end
      end
    end
    local data = plot.data(rows,
      { x = "candidate_topk_blocks", y = "recall_at_k", series = "candidate_block_size" },
      { "candidate_block_size", "candidate_topk_blocks" })
    assert.equals(2, #data.lines)
    assert.equals("candidate_block_size=8", data.lines[1].title)
    local pts = data.lines[1].points
    assert.are.same({ 64, 128, 256 }, { pts[1].x, pts[2].x, pts[3].x })
    assert.equals(2, pts[1].n)
    assert.is_true(math.abs(pts[1].mean - (0.064 + 0.08 + 1.5e-4)) < 1e-12)
    assert.is_true(math.abs(pts[1].lo - (0.064 + 0.08 + 1e-4)) < 1e-12)
    -- a swept field the plot does not name gets its own lines instead of being averaged
    data = plot.data(rows, { x = "candidate_topk_blocks", y = "recall_at_k" },
      { "candidate_block_size", "candidate_topk_blocks" })
    assert.equals(2, #data.lines)
    -- several y metrics: a line each; categorical x keeps first-seen order
    data = plot.data(rows, { x = "block_score", y = { "recall_at_k", "point" } }, {})
    assert.equals(2, #data.lines)
    assert.is_false(data.numeric)
    assert.are.same({ "max" }, data.categories)
  end)

  it("keeps series apart by exact value, and a swept seed by the point's base seed", function()
    local rows = {}
    for _, loc in ipairs({ 0.12341, 0.12342 }) do
      for r = 0, 1 do
        rows[#rows + 1] = { ["workload.locality"] = loc, candidate_topk_blocks = 64, seed = 1 + r,
          ["repeat"] = r,
          recall_at_k = loc }
      end
    end
    local data = plot.data(rows, { x = "candidate_topk_blocks", y = "recall_at_k" },
      { "workload.locality", "candidate_topk_blocks" })
    assert.equals(2, #data.lines) -- 0.1234 twice when rounded: never averaged together
    assert.equals(2, data.lines[1].points[1].n)
    assert.are_not.equal(data.lines[1].title, data.lines[2].title)
    assert.matches("0%.12341", data.lines[1].title)
    -- seeds 0 and 1 swept with 2 repeats each: rows used seeds 0,1 and 1,2
    rows = {}
    for _, base in ipairs({ 0, 1 }) do
      for r = 0, 1 do
        rows[#rows + 1] = { seed = base + r, ["repeat"] = r, candidate_topk_blocks = 64,
          recall_at_k = base }
      end
    end
    data = plot.data(rows, { x = "candidate_topk_blocks", y = "recall_at_k", series = "seed" },
      { "seed" })
    assert.equals(2, #data.lines)
    assert.equals("seed=0", data.lines[1].title)
    assert.equals(2, data.lines[1].points[1].n)
    assert.equals(0, data.lines[1].points[1].mean)
  end)

  it("labels axes with units", function()
    assert.equals("recall_at_k (share of the dense top-k kept)", plot.label("recall_at_k"))
    assert.equals("time_step_us (µs)", plot.label("time_step_us"))
    assert.equals("max_logits_bytes (bytes)", plot.label("max_logits_bytes"))
    assert.equals("candidate_topk_blocks (blocks)", plot.label("candidate_topk_blocks"))
    assert.equals("workload.decode.context (positions)", plot.label("workload.decode.context"))
  end)
end)

describe("plots and report regeneration", function()
  it("renders a valid PNG and an SVG per plot when gnuplot is present", function()
    if not gnuplot_present() then pending(NO_GNUPLOT) return end
    local d = tmpdir()
    local res = experiment.run(exp_table(), run_opts(d))
    for _, stem in ipairs({ "plot_recall_at_k_vs_candidate_topk_blocks", "plot_times" }) do
      local png = fs.read_file(res.dir .. "/" .. stem .. ".png")
      assert.is_string(png, stem .. ".png missing: " .. table.concat(res.messages, "; "))
      assert.equals("\137PNG\r\n\26\n", png:sub(1, 8))
      assert.equals("IHDR", png:sub(13, 16))
      assert.is_true(#png > 2000)
      local svg = fs.read_file(res.dir .. "/" .. stem .. ".svg")
      assert.matches("<svg", svg)
      assert.matches("candidate_topk_blocks %(blocks%)", svg)
      assert.is_string(fs.read_file(res.dir .. "/" .. stem .. ".dat"))
      assert.is_string(fs.read_file(res.dir .. "/" .. stem .. ".gp"))
    end
    local svg = fs.read_file(res.dir .. "/plot_recall_at_k_vs_candidate_topk_blocks.svg")
    assert.matches("candidate_block_size=8", svg)
    assert.matches("candidate_block_size=16", svg)
    -- no temporary file left behind
    local p = io.popen("ls -A " .. q(res.dir))
    local names = p:read("*a")
    p:close()
    assert.is_nil(names:find("tmp", 1, true), names)
  end)

  it("says how to get gnuplot when it is absent, and still writes the data", function()
    local d = tmpdir()
    local res = experiment.run(exp_table(), run_opts(d, { gnuplot = "none" }))
    local msg = table.concat(res.messages, "\n")
    assert.equals(0, res.status, "failed points: " .. require("idxlab.results").encode(res.failed))
    assert.matches("gnuplot not found: plots not rendered %(apt%-get install gnuplot%-nox%)", msg)
    assert.is_false(fs.exists(res.dir .. "/plot_times.png"))
    assert.is_string(fs.read_file(res.dir .. "/plot_times.dat"))
    assert.is_true(fs.exists(res.dir .. "/results.csv"))
  end)

  it("idxlab report DIR re-renders the table, the CSV and the plots from results.jsonl", function()
    local d = tmpdir()
    local res = experiment.run(exp_table(), run_opts(d))
    local summary = fs.read_file(res.dir .. "/summary.txt")
    local csv = fs.read_file(res.dir .. "/results.csv")
    for _, f in ipairs({ "summary.txt", "results.csv", "plot_times.dat", "plot_times.png",
      "plot_times.svg" }) do
      os.remove(res.dir .. "/" .. f)
    end
    local rc, out = support.sh(("cd / && %s report %s"):format(BIN, q(res.dir)))
    assert.equals(0, rc, out)
    assert.equals(summary, fs.read_file(res.dir .. "/summary.txt"))
    assert.equals(csv, fs.read_file(res.dir .. "/results.csv"))
    assert.is_string(fs.read_file(res.dir .. "/plot_times.dat"))
    if gnuplot_present() then
      assert.equals("\137PNG", fs.read_file(res.dir .. "/plot_times.png"):sub(1, 4))
    end
    assert.matches("experiment rep: does the report render%?", out)
  end)

  it("warns about a half-written last line and reports the whole ones", function()
    local d = tmpdir()
    local res = experiment.run(exp_table(), run_opts(d, { gnuplot = "none" }))
    local f = assert(io.open(res.dir .. "/results.jsonl", "ab"))
    f:write('{"schema":1,"point":')
    f:close()
    local out = report.render(res.dir, { gnuplot = "none" })
    assert.equals(#res.rows, #out.rows)
    assert.matches("half%-written", out.messages[1])
  end)

  it("renders the plots of a relative output directory: run, report and merge", function()
    if not gnuplot_present() then pending(NO_GNUPLOT) return end
    -- gnuplot runs in the results directory: the names in its script must be relative to it
    local d = tmpdir()
    support.write(d .. "/rel.lua", [[
return {
  name = "relplot", seed = 1, backend = "cpu",
  workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
  sweep = { candidate_topk_blocks = { 64, 128 } },
  metrics = { "recall_at_k" },
  plots = { { x = "candidate_topk_blocks", y = "recall_at_k" } },
}
]])
    local stem = "plot_recall_at_k_vs_candidate_topk_blocks"
    local function rendered(dir, out)
      local png = fs.read_file(dir .. "/" .. stem .. ".png")
      assert.is_string(png, dir .. ": no png; " .. out)
      assert.equals("\137PNG\r\n\26\n", png:sub(1, 8))
      assert.matches("<svg", fs.read_file(dir .. "/" .. stem .. ".svg") or "", 1, false,
        dir .. ": no svg; " .. out)
      assert.is_nil(out:find("gnuplot wrote no", 1, true), out)
    end
    local function sh(cmd)
      local rc, out = support.sh(cmd)
      assert.equals(0, rc, out)
      return out
    end
    rendered(d .. "/results-rel/relplot",
      sh(("cd %s && env IDXLAB_FAKE_MEASURE=%s %s run rel.lua --out results-rel --progress off")
        :format(q(d), q(support.FAKE_MEASURE), BIN)))
    for _, ext in ipairs({ ".png", ".svg" }) do
      os.remove(d .. "/results-rel/relplot/" .. stem .. ext)
    end
    rendered(d .. "/results-rel/relplot",
      sh(("cd %s && %s report relplot"):format(q(d .. "/results-rel"), BIN)))
    rendered(d .. "/merged", sh(("cd %s && %s merge merged results-rel/relplot"):format(q(d), BIN)))
  end)

  it("gives gnuplot every string literally: a backquote in a title runs nothing", function()
    -- gnuplot runs `...` inside double-quoted strings (and a newline ends a command)
    assert.equals("'a''b `c` \"d\" e'", plot.gnuplot_quote("a'b `c` \"d\"\ne"))
    if not gnuplot_present() then pending(NO_GNUPLOT) return end
    local d = tmpdir()
    local marker, marker2 = d .. "/PWNED", d .. "/PWNED2"
    local title = "x`touch " .. marker .. "`y 'q' \"dq\" \\n\n!touch " .. marker2
    local e = exp_table()
    e.repeats = 1
    e.plots = { { x = "candidate_topk_blocks", y = "recall_at_k", series = "candidate_block_size",
      title = title,
      name = "lit" } }
    local res = experiment.run(e, run_opts(d))
    assert.is_false(fs.exists(marker), "a backquoted command ran")
    assert.is_false(fs.exists(marker2), "a command after a newline ran")
    local png = fs.read_file(res.dir .. "/plot_lit.png")
    assert.is_string(png, "no png: " .. table.concat(res.messages, "; "))
    assert.equals("\137PNG", png:sub(1, 4))
    local svg = assert(fs.read_file(res.dir .. "/plot_lit.svg"))
    assert.truthy(svg:find("x`touch " .. marker .. "`y 'q' &quot;dq&quot; \\n !touch " .. marker2,
        1, true)
      or svg:find("x`touch " .. marker .. "`y 'q' \"dq\" \\n !touch " .. marker2, 1, true),
      "the title is not literal")
    -- the script kept for the user quotes the same way
    local gp = assert(fs.read_file(res.dir .. "/plot_lit.gp"))
    assert.truthy(gp:find("set title 'x`touch " .. marker .. "`y ''q'' \"dq\" \\n !touch "
      .. marker2 .. "'\n", 1, true), gp)
    assert.is_false(fs.exists(marker))
  end)

  it("names the file and the field of a hand-edited experiment.json it cannot use", function()
    local d = tmpdir()
    local res = experiment.run(exp_table(), run_opts(d, { gnuplot = "none" }))
    local saved = assert(fs.read_file(res.dir .. "/experiment.json"))
    local cases = {
      { "5", "field 'plots' = 5: must be a list of plots" },
      { "[5]", "field 'plots%[1%]' = 5: must be a plot" },
      { '[{"x":1,"y":"recall_at_k"}]', "field 'plots%[1%]%.x' = 1: must name a field" },
      { '[{"x":"candidate_topk_blocks","y":[]}]',
        "field 'plots%[1%]%.y' = %[%]: must be a metric or a non%-empty list" },
      { '[{"x":"candidate_topk_blocks","y":"recall_at_k","name":"../up"}]',
        "field 'plots%[1%]%.name' = \"%.%./up\": must be a file name" },
    }
    for _, c in ipairs(cases) do
      local text, n = saved:gsub('"plots":%b[]', '"plots":' .. c[1]:gsub("%%", "%%%%"))
      assert.equals(1, n)
      support.write(res.dir .. "/experiment.json", text)
      local rc, out = support.sh(("%s report %s --no-plots"):format(BIN, q(res.dir)))
      assert.equals(1, rc, out)
      assert.matches("^idxlab: [^\n]*experiment%.json: " .. c[2], out)
      assert.is_nil(out:match("%.lua:%d+:"), out)
      local ok, err = pcall(report.render, res.dir, { gnuplot = "none" })
      assert.is_false(ok)
      assert.matches("experiment%.json: " .. c[2], tostring(err))
    end
    -- the Lua API: the same check, at the caller's line
    local ok, err = pcall(function() local r = report.write(d, {}, { plots = 5 }); return r end)
    assert.is_false(ok)
    assert.matches("report_spec%.lua:%d+: idxlab: report%.write: experiment field 'plots' = 5: "
      .. "must be a list", tostring(err))
  end)

  it("runs gnuplot with stdin from /dev/null, the terminal probe too (issue 19)", function()
    -- a gnuplot that reads a line from stdin: on a terminal the real one waits at "Press
    -- return for more:" there; a pipe with a line in it shows whether anything read it
    local d = tmpdir()
    local log = d .. "/stdin.log"
    local fake = d .. "/gnuplot"
    support.write(fake, ("#!/bin/sh\nif IFS= read -r l; then echo \"read: $l\" >> %s; "
      .. "else echo eof >> %s; fi\n[ \"$1\" = -e ] && echo 'pngcairo svg'\nexit 0\n")
      :format(q(log), q(log)))
    assert.is_true(os.execute("chmod +x " .. q(fake)) == 0 or false)
    local dir = d .. "/res"
    fs.mkdir_p(dir)
    support.write(dir .. "/experiment.json", '{"schema":1,"name":"s","swept":["a"],'
      .. '"plots":[{"x":"a","y":"m"}],"points":[{"point":0,"config_hash":"aa"},'
      .. '{"point":1,"config_hash":"bb"}]}\n')
    support.write(dir .. "/results.jsonl", '{"point":0,"config_hash":"aa","a":1,"m":2}\n'
      .. '{"point":1,"config_hash":"bb","a":2,"m":3}\n')
    local rc, out = support.sh(("printf 'press return\\npress return\\n' | IDXLAB_GNUPLOT=%s %s "
      .. "report %s"):format(q(fake), BIN, q(dir)))
    assert.equals(0, rc, out)
    local seen = fs.read_file(log) or ""
    assert.equals("eof\neof\n", seen, out) -- the probe and the render, neither read stdin
  end)

  it("names a directory without results", function()
    local d = tmpdir()
    local rc, out = support.sh(("%s report %s"):format(BIN, q(d)))
    assert.matches("no results%.jsonl here", out)
    assert.equals(1, rc, out)
  end)
end)

describe("tick labels in the metric's unit (issue 19)", function()
  local function script_of(rows, p, swept)
    local d = tmpdir()
    plot.render(d, rows, p, { name = "t", swept = swept }, nil) -- no gnuplot: .dat and .gp
    return assert(fs.read_file(d .. "/" .. plot.name(p) .. ".gp"))
  end

  it("writes byte axes in KiB/MiB/GiB, positions in K/M and times in µs/ms", function()
    assert.equals("64 MiB", plot.tick_text("bytes", 64 * 2 ^ 20))
    assert.equals("1.5 GiB", plot.tick_text("bytes", 1.5 * 2 ^ 30))
    assert.equals("512 KiB", plot.tick_text("bytes", 2 ^ 19))
    assert.equals("512K", plot.tick_text("count", 524288))
    assert.equals("1M", plot.tick_text("count", 1048576))
    assert.equals("250 µs", plot.tick_text("time", 250))
    assert.equals("1.2 ms", plot.tick_text("time", 1200))
    assert.equals("bytes", plot.tick_style("max_logits_bytes"))
    assert.equals("count", plot.tick_style("workload.decode.context"))
    assert.equals("time", plot.tick_style("time_step_us"))
    assert.is_nil(plot.tick_style("recall_at_k"))
    -- chunk_budget's axes: 64 MiB .. 2 GiB on x (a log scale: the span is 32x), bytes on y
    local rows = {}
    for i, mib in ipairs({ 64, 128, 256, 512, 1024, 2048 }) do
      rows[i] = { point = i - 1, max_logits_bytes = mib * 2 ^ 20,
        peak_logits_bytes = mib * 2 ^ 20 * 0.9 }
    end
    local gp = script_of(rows, { x = "max_logits_bytes", y = "peak_logits_bytes" },
      { "max_logits_bytes" })
    assert.truthy(gp:find("set logscale x 2\n", 1, true), gp)
    assert.truthy(gp:find("set xtics ('64 MiB' 67108864, '128 MiB' 134217728, '256 MiB' "
      .. "268435456, '512 MiB' 536870912, '1 GiB' 1073741824, '2 GiB' 2147483648)\n", 1, true), gp)
    assert.truthy(gp:find("set ytics ('0' 0, '0.5 GiB' 536870912, '1 GiB' 1073741824, "
      .. "'1.5 GiB' 1610612736, '2 GiB' 2147483648)\nset yrange [0:2147483648]\n", 1, true), gp)
    assert.is_nil(gp:find("e+0", 1, true), gp)
    -- context_scaling's: positions to 1M on a log x, times on a log y where the plot says so
    rows = {}
    for i, ctx in ipairs({ 4096, 65536, 524288, 1048576 }) do
      rows[i] = { point = i - 1, ["workload.decode.context"] = ctx, time_step_us = ctx / 40,
        time_dense_logits_us = ctx / 50 }
    end
    gp = script_of(rows, { x = "workload.decode.context", y = { "time_step_us",
      "time_dense_logits_us" }, logy = true, name = "tc" }, { "workload.decode.context" })
    assert.truthy(gp:find("set xtics ('4K' 4096, '64K' 65536, '512K' 524288, '1M' 1048576)\n",
      1, true), gp)
    assert.truthy(gp:find("set logscale y\n", 1, true), gp)
    assert.truthy(gp:find("set ytics ('10 µs' 10, '100 µs' 100, '1 ms' 1000, '10 ms' 10000, "
      .. "'100 ms' 100000)\n", 1, true), gp)
    -- a linear time axis steps by a round number of the unit the largest value is shown in
    rows = { { point = 0, candidate_topk_blocks = 64, time_step_us = 1200 },
      { point = 1, candidate_topk_blocks = 128, time_step_us = 3900 } }
    gp = script_of(rows, { x = "candidate_topk_blocks", y = "time_step_us" },
      { "candidate_topk_blocks" })
    assert.truthy(gp:find("set ytics ('1 ms' 1000, '2 ms' 2000, '3 ms' 3000, '4 ms' 4000)\n"
      .. "set yrange [1000:4000]\n", 1, true), gp)
    assert.is_nil(gp:find("set xtics", 1, true), gp) -- blocks: gnuplot's own ticks
  end)
end)

describe("the pareto plot kind", function()
  local function prow(i, cbs, T, t, rec, backend)
    return { point = i, config_hash = "h" .. i, candidate_block_size = cbs,
      candidate_topk_blocks = T, time_step_us = t, recall_at_k = rec, backend = backend or "cpu",
      device = "cpu (2 threads)" }
  end

  it("joins the non-dominated points and labels them with their swept values", function()
    local rows = {
      prow(0, 8, 64, 100, 0.5), prow(1, 8, 128, 200, 0.75), prow(2, 16, 64, 150, 0.375),
      prow(3, 16, 128, 300, 0.875), prow(4, 32, 64, 120, 0.625), prow(5, 32, 128, 200, 0.6875),
    }
    rows[#rows + 1] = prow(6, 32, 64, 140, 0.625) -- a repeat of point 4 (same config): averaged
    rows[#rows].config_hash = "h4"
    local swept = { "candidate_block_size", "candidate_topk_blocks" }
    local p = { kind = "pareto", x = "time_step_us", y = "recall_at_k", name = "pf" }
    local data = plot.pareto_data(rows, p, swept)
    assert.equals(6, #data.points)
    local front = {}
    for _, pt in ipairs(data.front) do front[#front + 1] = pt.label end
    -- 16x64 (slower than 8x64, worse) and 32x128 (as fast as 8x128, worse) are dominated
    assert.are.same({ "8, 64", "32, 64", "8, 128", "16, 128" }, front)
    assert.equals(130, data.front[2].x)
    local d = tmpdir()
    plot.render(d, rows, p, { name = "e", swept = swept }, nil)
    local gp = assert(fs.read_file(d .. "/plot_pf.gp"))
    assert.truthy(gp:find("set title 'e: recall_at_k against time_step_us (CPU reference "
      .. "times)'\n", 1, true), gp)
    assert.truthy(gp:find("with labels", 1, true), gp)
    assert.truthy(gp:find("labels: candidate_block_size, candidate_topk_blocks", 1, true), gp)
    -- times spanning less than 4x: a linear axis
    assert.truthy(gp:find("set xtics ('100 µs' 100, '150 µs' 150, '200 µs' 200, '250 µs' 250, "
      .. "'300 µs' 300)\n", 1, true), gp)
    assert.is_nil(gp:find("logscale", 1, true), gp)
    local dat = assert(fs.read_file(d .. "/plot_pf.dat"))
    assert.matches('# index 1: the non%-dominated points, by x\n100 0%.5 "8, 64"\n130 0%.625 '
      .. '"32, 64"\n200 0%.75 "8, 128"\n300 0%.875 "16, 128"\n$', dat)
    assert.equals("GPU times (NVIDIA H200)", plot.times_from({ { backend = "cuda",
      device = "NVIDIA H200" } }))
  end)

  it("is checked: x and y one metric each, no series", function()
    assert.is_nil(plot.problem({ kind = "pareto", x = "time_step_us", y = "recall_at_k" }, "p"))
    assert.matches("field 'p%.kind' = \"bars\": must be \"lines\" or \"pareto\"",
      plot.problem({ kind = "bars", x = "a", y = "m" }, "p"))
    assert.matches("field 'p%.y' = %[\"a\",\"b\"%]: a pareto plot's y must be one metric",
      plot.problem({ kind = "pareto", x = "a", y = { "a", "b" } }, "p"))
    assert.matches("field 'p%.series' = \"s\": a pareto plot has no series",
      plot.problem({ kind = "pareto", x = "a", y = "m", series = "s" }, "p"))
    local e = exp_table()
    e.plots = { { kind = "pareto", x = "candidate_topk_blocks", y = "recall_at_k" } }
    local ok, err = pcall(experiment.plan, e)
    assert.is_false(ok)
    assert.matches("field 'plots%[1%]%.x' = \"candidate_topk_blocks\": a pareto plot's x must "
      .. "be one metric of mode step", tostring(err))
  end)

  it("ships experiments/pareto.lua over (candidate_block_size, candidate_topk_blocks)", function()
    local plan = experiment.plan(ROOT .. "/experiments/pareto.lua")
    assert.are.same({ "candidate_block_size", "candidate_topk_blocks" }, plan.swept)
    assert.equals("pareto", plan.exp.plots[1].kind)
    assert.equals(0, #plan.skipped)
    if not have("gnuplot", NO_GNUPLOT) then return end
    local d = tmpdir()
    local res = experiment.run(ROOT .. "/experiments/pareto.lua", run_opts(d,
      { set = { "repeats=1", "backend=cpu" } }))
    local png = fs.read_file(res.dir .. "/plot_pareto_recall_vs_time.png")
    assert.is_string(png, table.concat(res.messages, "; "))
    assert.equals("\137PNG", png:sub(1, 4))
    assert.matches("CPU reference times", fs.read_file(res.dir
      .. "/plot_pareto_recall_vs_time.svg"))
  end)
end)

describe("a summary table wider than the terminal (issue 19)", function()
  local function wide_rows()
    local rows = {}
    for i, T in ipairs({ 64, 128, 256 }) do
      rows[i] = { point = i - 1, config_hash = "h" .. i, candidate_topk_blocks = T,
        candidate_block_size = 8, recall_at_k = 0.5, mass_recall = 0.6, candidate_coverage = 0.7,
        time_dense_logits_us = 1234.5, time_sparse_logits_us = 99.25, time_step_us = 1400.5,
        scratch_bytes = 3 * 2 ^ 20 }
    end
    return rows
  end
  local EXP = { swept = { "candidate_topk_blocks", "candidate_block_size" },
    metrics = { "recall_at_k", "mass_recall", "candidate_coverage", "time_dense_logits_us",
      "time_sparse_logits_us", "time_step_us", "scratch_bytes" } }

  -- the tables of a summary: blocks of lines starting with a header line
  local function tables(text)
    local out = {}
    for block in (text .. "\n\n"):gmatch("(.-)\n\n") do
      if block:match("^[%w_ ]+\n[%- ]+\n") then out[#out + 1] = block end
    end
    return out
  end

  it("splits into tables that each fit, each repeating the swept columns", function()
    local whole = report.summary(wide_rows(), EXP)
    assert.equals(1, #tables(whole))
    assert.is_true(#whole:match("\n(candidate_topk_blocks[^\n]*)") > 60)
    local split = report.summary(wide_rows(), EXP, { width = 70 })
    local ts = tables(split)
    assert.is_true(#ts >= 3, split)
    local seen = {}
    for _, t in ipairs(ts) do
      for l in t:gmatch("[^\n]+") do assert.is_true(#l <= 70, l) end
      assert.matches("^candidate_topk_blocks  candidate_block_size  ", t)
      assert.matches("\n%s+256%s+8%s", t)
      for name in t:match("^[^\n]+"):gmatch("%S+") do seen[name] = true end
    end
    for _, m in ipairs(EXP.metrics) do assert.is_true(seen[m], m) end
    -- what is around the table is the same
    assert.equals(whole:match("^(.-)\n\n"), split:match("^(.-)\n\n"))
    assert.equals(whole:match("\n([^\n]*)\n$"), split:match("\n([^\n]*)\n$"))
    -- wide enough: unchanged
    assert.equals(whole, report.summary(wide_rows(), EXP, { width = 400 }))
  end)

  it("splits on a terminal (its width, else $COLUMNS), never in a pipe or summary.txt", function()
    if not have("script", "script (util-linux) is not installed") then return end
    local d = tmpdir()
    support.write(d .. "/wide.lua", [[
return {
  name = "wide", seed = 1, backend = "cpu",
  workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
  sweep = { candidate_topk_blocks = { 64, 128 }, candidate_block_size = { 8, 16 } },
  metrics = { "recall_at_k", "mass_recall", "candidate_coverage", "time_dense_logits_us",
    "time_sparse_logits_us", "time_step_us", "scratch_bytes" },
}
]])
    local function run(pre, width_env, tty)
      local cmd = ("cd %s && %s env IDXLAB_FAKE_MEASURE=%s %s %s run wide.lua --out res "
        .. "--progress off"):format(q(d), pre, q(support.FAKE_MEASURE), width_env, BIN)
      if tty then cmd = ("script -qfec %s /dev/null < /dev/null"):format(q(cmd)) end
      local rc, out = support.sh(cmd)
      out = out:gsub("\r", "")
      assert.equals(0, rc, out)
      return out
    end
    local function widest(text)
      local w = 0
      for _, t in ipairs(tables(text)) do
        for l in t:gmatch("[^\n]+") do w = math.max(w, #l) end
      end
      return w, #tables(text)
    end
    local file_text = function() return fs.read_file(d .. "/res/wide/summary.txt") end
    -- the tty's own width wins over $COLUMNS
    local out = run("stty cols 70 rows 40;", "COLUMNS=200", true)
    local w, n = widest(out)
    assert.is_true(w <= 70 and n >= 2, out)
    local fw, fn = widest(file_text())
    assert.is_true(fw > 70 and fn == 1, file_text()) -- summary.txt: whole
    -- a pty nobody sized (0 columns): $COLUMNS
    out = run("stty cols 0;", "COLUMNS=90", true)
    w, n = widest(out)
    assert.is_true(w <= 90 and n >= 2, out)
    -- stdout a pipe: whole, whatever $COLUMNS says
    out = run("", "COLUMNS=70", false)
    w, n = widest(out)
    assert.is_true(w > 70 and n == 1, out)
  end)
end)
