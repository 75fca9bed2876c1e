-- idxlab.report: what a finished (or partly finished) experiment shows. From the rows of
-- results.jsonl and the saved experiment.json it renders
--   the summary table: one line per point config, the swept values, then each metric's mean
--     and spread (sample standard deviation) over the repeats;
--   the plots: plot_<name>.dat (the data) and .gp (the gnuplot script), rendered to .png and
--     .svg through gnuplot when present, with axis labels and units, one line per swept series;
--   results.csv.
-- Every file is written whole (temp + rename). `idxlab report DIR` calls render(DIR).
local results = require("idxlab.results")

local M = {}

-- The metrics each mode reports, in the order tables show them.
M.STEP_METRICS = {
  "logit_mismatches", "logit_diff", "selection_agreement", "fp32_selection_agreement",
  "recall_at_k", "mass_recall", "candidate_coverage", "active_rows",
  "time_dense_logits_us", "time_candidate_select_us", "time_expand_us", "time_sparse_logits_us",
  "time_topk_us", "time_remap_us", "time_step_us", "scratch_bytes", "logits_bytes", "num_chunks",
}
M.CHUNK_METRICS = {
  "num_chunks", "max_rows_per_chunk", "mean_rows_per_chunk", "peak_logits_bytes", "sub_chunks",
  "min_split_seq_len", "dense_num_chunks", "dense_max_rows_per_chunk", "dense_peak_logits_bytes",
}
M.DEFAULT_STEP_TABLE = { "logit_mismatches", "selection_agreement", "recall_at_k", "mass_recall",
  "candidate_coverage", "active_rows", "time_dense_logits_us", "time_sparse_logits_us", "time_step_us" }
M.DEFAULT_CHUNK_TABLE = { "num_chunks", "max_rows_per_chunk", "peak_logits_bytes", "sub_chunks" }

local units = {
  candidate_block_size = "positions", sparse_block_kv = "positions", page_size = "positions",
  index_topk = "positions", candidate_topk_blocks = "blocks", max_logits_bytes = "bytes",
  workspace_tokens = "positions", max_model_len = "tokens", max_rows = "rows", heads = "heads",
  head_dim = "elements", logit_mismatches = "count", active_rows = "rows",
  recall_at_k = "share of the dense top-k kept", mass_recall = "share of the dense top-k softmax mass",
  candidate_coverage = "share of the dense top-k in candidate blocks",
  selection_agreement = "share", fp32_selection_agreement = "share",
  logit_diff = "1 - 2 sum(xy) / sum(x^2 + y^2)", num_chunks = "chunks", dense_num_chunks = "chunks",
  max_rows_per_chunk = "rows", mean_rows_per_chunk = "rows", dense_max_rows_per_chunk = "rows",
  sub_chunks = "chunks", min_split_seq_len = "positions",
}

-- "recall_at_k (share of the dense top-k kept)", "time_step_us (µs)", ...
function M.label(name)
  if type(name) ~= "string" then return tostring(name) end
  local u = units[name]
  if not u then
    if name:match("_us$") then u = "µs"
    elseif name:match("bytes$") then u = "bytes"
    elseif name:match("^workload%..*context") or name:match("^workload%..*len") then u = "positions"
    end
  end
  return u and ("%s (%s)"):format(name, u) or name
end

-- The y label of several metrics: their shared unit ("time (µs)"), or their names.
function M.common_label(names)
  local unit
  for i, n in ipairs(names) do
    local u = M.label(n):match("%((.*)%)$") or ""
    if i == 1 then unit = u elseif u ~= unit then unit = nil break end
  end
  if unit == "µs" then return "time (µs)" end
  if unit == "bytes" then return "size (bytes)" end
  if unit and unit ~= "" then return unit end
  return table.concat(names, ", ")
end

---------------------------------------------------------------------------- statistics

local function stats(values)
  local n, s = 0, 0
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(values) do
    if type(v) == "number" and v == v then
      n = n + 1; s = s + v
      if v < lo then lo = v end
      if v > hi then hi = v end
    end
  end
  if n == 0 then return nil end
  local mean = s / n
  local ss = 0
  for _, v in ipairs(values) do
    if type(v) == "number" and v == v then ss = ss + (v - mean) ^ 2 end
  end
  return { n = n, mean = mean, sd = n > 1 and math.sqrt(ss / (n - 1)) or nil, min = lo, max = hi }
end
M.stats = stats

local function fmt_num(v)
  if v == nil then return "null" end
  if type(v) ~= "number" then return tostring(v) end
  if v ~= v then return "nan" end
  if v == math.floor(v) and math.abs(v) < 1e15 then return ("%d"):format(v) end
  local a = math.abs(v)
  if a >= 1000 then return ("%.1f"):format(v) end
  if a >= 1 then return ("%.3f"):format(v) end
  return ("%.4g"):format(v)
end
M.fmt_num = fmt_num

-- Byte counts read better in KiB/MiB/GiB.
local function fmt_bytes(v)
  if type(v) ~= "number" or v ~= v or math.abs(v) < 1024 then return fmt_num(v) end
  local units = { { 2 ^ 30, "GiB" }, { 2 ^ 20, "MiB" }, { 2 ^ 10, "KiB" } }
  for _, u in ipairs(units) do
    if math.abs(v) >= u[1] then
      local x = v / u[1]
      if x == math.floor(x) then return ("%d %s"):format(x, u[2]) end
      return ("%.4g %s"):format(x, u[2])
    end
  end
  return fmt_num(v)
end

local function fmt_field(name, v)
  if type(name) == "string" and name:match("bytes$") then return fmt_bytes(v) end
  return fmt_num(v)
end
M.fmt_field = fmt_field

---------------------------------------------------------------------------- grouping

-- Groups rows by point config (config_hash; repeats of one config share it), ordered by the
-- first point index of each group.
function M.groups(rows)
  local by, order = {}, {}
  for _, r in ipairs(rows) do
    local key = r.config_hash or ("point " .. tostring(r.point))
    local g = by[key]
    if not g then
      g = { key = key, rows = {}, first = r.point or math.huge }
      by[key] = g
      order[#order + 1] = g
    end
    g.rows[#g.rows + 1] = r
    if r.point and r.point < g.first then g.first = r.point end
  end
  table.sort(order, function(a, b) return a.first < b.first end)
  return order
end

-- The saved experiment's fields this module reads, checked (results.check_experiment) so a
-- hand-edited experiment.json gives a message, not a Lua error deep inside.
local function check_exp(exp, where)
  if exp == nil then return end
  local bad = results.check_experiment(exp)
  if bad then error(("idxlab: %s: experiment %s"):format(where, bad), 3) end
end

local function metric_list(exp)
  if exp and type(exp.metrics) == "table" and #exp.metrics > 0 then return exp.metrics end
  if exp and exp.mode == "chunks" then return M.DEFAULT_CHUNK_TABLE end
  return M.DEFAULT_STEP_TABLE
end

local function swept_list(exp, rows)
  if exp and type(exp.swept) == "table" then return exp.swept end
  -- No saved experiment: the scalar keys whose values differ between rows, among a few
  -- likely ones.
  local out = {}
  for _, k in ipairs({ "candidate_block_size", "candidate_topk_blocks", "sparse_block_kv", "index_topk",
    "block_score", "max_logits_bytes", "split_width", "kv_format", "backend", "seed" }) do
    local first, differs = nil, false
    for _, r in ipairs(rows) do
      if first == nil then first = r[k] elseif r[k] ~= first then differs = true end
    end
    if differs then out[#out + 1] = k end
  end
  return out
end

---------------------------------------------------------------------------- summary table

local function render_table(header, body)
  local widths = {}
  for i, h in ipairs(header) do widths[i] = #h end
  for _, row in ipairs(body) do
    for i, c in ipairs(row) do widths[i] = math.max(widths[i] or 0, #c) end
  end
  local function line(cells)
    local parts = {}
    for i, c in ipairs(cells) do parts[i] = (" "):rep(widths[i] - #c) .. c end
    return table.concat(parts, "  ")
  end
  local out = { line(header) }
  local rule = {}
  for i = 1, #header do rule[i] = ("-"):rep(widths[i]) end
  out[#out + 1] = table.concat(rule, "  ")
  for _, row in ipairs(body) do out[#out + 1] = line(row) end
  return table.concat(out, "\n")
end

-- summary(rows, exp) -> text. exp: the saved experiment (name, question, metrics, swept).
function M.summary(rows, exp)
  if type(rows) ~= "table" then error("idxlab: report.summary: rows must be a list", 2) end
  check_exp(exp, "report.summary")
  exp = exp or {}
  local metrics, swept = metric_list(exp), swept_list(exp, rows)
  local groups = M.groups(rows)
  local header = {}
  for _, f in ipairs(swept) do header[#header + 1] = f end
  header[#header + 1] = "n"
  for _, m in ipairs(metrics) do header[#header + 1] = m end
  local body = {}
  local any_spread = false
  for _, g in ipairs(groups) do
    local cells = {}
    for _, f in ipairs(swept) do cells[#cells + 1] = fmt_field(f, g.rows[1][f]) end
    cells[#cells + 1] = tostring(#g.rows)
    for _, m in ipairs(metrics) do
      local vals = {}
      for _, r in ipairs(g.rows) do vals[#vals + 1] = r[m] end
      local s = stats(vals)
      if not s then
        cells[#cells + 1] = "null"
      elseif s.sd then
        any_spread = true
        cells[#cells + 1] = fmt_field(m, s.mean) .. " ±" .. fmt_field(m, s.sd)
      else
        cells[#cells + 1] = fmt_field(m, s.mean)
      end
    end
    body[#body + 1] = cells
  end
  -- by = "length": the quality metrics per row-length bucket, active buckets marked
  local blen_header, blen_body = nil, {}
  local QUAL = { "recall_at_k", "mass_recall", "candidate_coverage", "selection_agreement", "fp32_selection_agreement" }
  for _, g in ipairs(groups) do
    local buckets, order = {}, {}
    for _, r in ipairs(g.rows) do
      for _, b in ipairs(type(r.by_length) == "table" and r.by_length or {}) do
        -- a bucket is a row length: an integer (anything else is not a bucket idxlab wrote)
        if type(b) == "table" and type(b.bucket) == "number" and b.bucket == math.floor(b.bucket) then
          local e = buckets[b.bucket]
          if not e then
            e = { bucket = b.bucket, rows = {}, active = false, q = {} }
            buckets[b.bucket] = e
            order[#order + 1] = b.bucket
          end
          e.rows[#e.rows + 1] = b.rows
          e.active = e.active or b.active == true
          for _, m in ipairs(QUAL) do
            e.q[m] = e.q[m] or {}
            e.q[m][#e.q[m] + 1] = b[m]
          end
        end
      end
    end
    table.sort(order)
    for _, bk in ipairs(order) do
      local e = buckets[bk]
      if not blen_header then
        blen_header = {}
        for _, f in ipairs(swept) do blen_header[#blen_header + 1] = f end
        for _, h in ipairs({ "length bucket", "rows", "active" }) do blen_header[#blen_header + 1] = h end
        for _, m in ipairs(QUAL) do blen_header[#blen_header + 1] = m end
      end
      local cells = {}
      for _, f in ipairs(swept) do cells[#cells + 1] = fmt_field(f, g.rows[1][f]) end
      cells[#cells + 1] = ">= " .. fmt_num(bk)
      local rs = stats(e.rows)
      cells[#cells + 1] = rs and fmt_num(rs.mean) or "0"
      cells[#cells + 1] = e.active and "yes" or "no"
      for _, m in ipairs(QUAL) do
        local st = stats(e.q[m])
        cells[#cells + 1] = st and fmt_num(st.mean) or "null"
      end
      blen_body[#blen_body + 1] = cells
    end
  end
  local lines = {}
  if exp.name then lines[#lines + 1] = ("experiment %s%s"):format(exp.name, exp.question and (": " .. exp.question) or "") end
  local first = rows[1]
  if first then
    lines[#lines + 1] = ("%d result rows, %d point configs; backend %s (%s); idxlab %s, commit %s%s")
      :format(#rows, #groups, tostring(first.backend), tostring(first.device), tostring(first.idxlab_version),
        tostring(first.git_commit), first.git_dirty and " (dirty)" or "")
  else
    lines[#lines + 1] = "no finished points"
  end
  if #groups == 1 and #swept == 0 then
    -- one point (quick.lua): a metric per line reads better than one very wide row
    local tbody = {}
    for i, h in ipairs(header) do tbody[#tbody + 1] = { h, body[1][i] } end
    header, body = { "metric", "value" }, tbody
  end
  if #groups > 0 then
    lines[#lines + 1] = ""
    lines[#lines + 1] = render_table(header, body)
    lines[#lines + 1] = ""
    lines[#lines + 1] = any_spread and "mean ±sd over repeats (n = repeats); null: no active rows"
      or "one repeat per point: no spread; null: no active rows"
  end
  if blen_header then
    lines[#lines + 1] = ""
    lines[#lines + 1] = "by row length (rows of length >= bucket and < 2 * bucket; active: longer than T * cbs)"
    lines[#lines + 1] = render_table(blen_header, blen_body)
  end
  return table.concat(lines, "\n") .. "\n"
end

---------------------------------------------------------------------------- plots

-- Text for one line of a gnuplot script or data file: control characters (a newline would
-- end the command, and gnuplot would run the next line as one) become spaces.
local function one_line(s)
  return (tostring(s):gsub("%c", " "))
end

-- A gnuplot string literal: single-quoted, ' doubled. gnuplot expands `...` (a shell
-- command) and escapes inside double quotes only, so the text stays literal.
local function gnuplot_quote(s)
  return "'" .. one_line(s):gsub("'", "''") .. "'"
end
M.gnuplot_quote = gnuplot_quote

-- A label in a plot's data file (read as data, never as a command): double-quoted.
local function data_quote(s)
  return '"' .. one_line(s):gsub('\\', '\\\\'):gsub('"', '\\"') .. '"'
end

local function as_list(v)
  if v == nil then return {} end
  if type(v) == "table" then return v end
  return { v }
end

-- The plot's file stem: plot_<y>_vs_<x> (several y joined with "+").
function M.plot_name(p)
  if p.name then return "plot_" .. p.name end
  local ys = table.concat(as_list(p.y), "+")
  return ("plot_%s_vs_%s"):format(ys, p.x):gsub("[^%w_+%.%-]", "_")
end

local function value_key(v)
  if type(v) == "number" then return ("%.17g"):format(v) end
  return tostring(v)
end

-- A row's value of a swept field: a swept seed is the point's base seed (a row's seed is the
-- one its repeat used, seed + repeat).
local function field_of(r, f)
  if f == "seed" and type(r.seed) == "number" and type(r["repeat"]) == "number" then return r.seed - r["repeat"] end
  return r[f]
end

-- The data behind one plot: a list of lines { title, points = { {x, label, mean, lo, hi, n} } }.
-- A line per combination of the series field and every other swept field (so values of a
-- field the plot does not show are never averaged together), times each y metric.
function M.plot_data(rows, p, swept)
  local xs_numeric = true
  for _, r in ipairs(rows) do
    local x = field_of(r, p.x)
    if x ~= nil and type(x) ~= "number" then xs_numeric = false end
  end
  local series_fields = {}
  for _, s in ipairs(as_list(p.series)) do series_fields[#series_fields + 1] = s end
  for _, f in ipairs(swept or {}) do
    local used = (f == p.x)
    for _, s in ipairs(series_fields) do if s == f then used = true end end
    if not used then series_fields[#series_fields + 1] = f end
  end
  local ys = as_list(p.y)
  local lines, line_by = {}, {}
  local cat_index, cats = {}, {}
  for _, r in ipairs(rows) do
    local x = field_of(r, p.x)
    if x ~= nil then
      if not xs_numeric then
        local k = value_key(x)
        if not cat_index[k] then cats[#cats + 1] = k; cat_index[k] = #cats end
      end
      -- a line per exact value (the title shows it rounded; see the clash pass below)
      local sparts, kparts, exact = {}, {}, {}
      for _, f in ipairs(series_fields) do
        local v = field_of(r, f)
        sparts[#sparts + 1] = ("%s=%s"):format(f, fmt_field(f, v))
        exact[#exact + 1] = ("%s=%s"):format(f, value_key(v))
        kparts[#kparts + 1] = value_key(v)
      end
      for _, y in ipairs(ys) do
        local title = table.concat(sparts, ", ")
        local full = table.concat(exact, ", ")
        if #ys > 1 then
          title = title == "" and y or (y .. ", " .. title)
          full = full == "" and y or (y .. ", " .. full)
        end
        local key = y .. "\0" .. table.concat(kparts, "\0")
        local ln = line_by[key]
        if not ln then
          ln = { title = title, full = full, by_x = {}, xs = {} }
          line_by[key] = ln
          lines[#lines + 1] = ln
        end
        local xk = value_key(x)
        if not ln.by_x[xk] then ln.by_x[xk] = { x = x, vals = {} }; ln.xs[#ln.xs + 1] = xk end
        table.insert(ln.by_x[xk].vals, r[y])
      end
    end
  end
  for _, ln in ipairs(lines) do
    ln.points = {}
    for _, xk in ipairs(ln.xs) do
      local e = ln.by_x[xk]
      local s = stats(e.vals)
      if s then
        ln.points[#ln.points + 1] = {
          x = xs_numeric and e.x or cat_index[xk], label = tostring(e.x),
          mean = s.mean, lo = s.min, hi = s.max, n = s.n,
        }
      end
    end
    table.sort(ln.points, function(a, b) return a.x < b.x end)
    ln.by_x, ln.xs = nil, nil
  end
  -- lines whose rounded titles clash are titled with their exact values
  local count = {}
  for _, ln in ipairs(lines) do count[ln.title] = (count[ln.title] or 0) + 1 end
  for _, ln in ipairs(lines) do
    if count[ln.title] > 1 then ln.title = ln.full end
    ln.full = nil
  end
  return { lines = lines, numeric = xs_numeric, categories = cats }
end

local function find_gnuplot(opts)
  local g = opts.gnuplot or os.getenv("IDXLAB_GNUPLOT")
  if g == "none" or g == "" then return nil end
  if g then
    local ok = os.execute("command -v " .. results.shell_quote(g) .. " >/dev/null 2>&1")
    return (ok == 0 or ok == true) and g or nil
  end
  local ok = os.execute("command -v gnuplot >/dev/null 2>&1")
  return (ok == 0 or ok == true) and "gnuplot" or nil
end
M.find_gnuplot = find_gnuplot

local png_terminal
local function png_term(gp)
  if png_terminal == nil then
    local f = io.popen(results.shell_quote(gp) .. " -e 'set terminal' 2>&1")
    local text = f and f:read("*a") or ""
    if f then f:close() end
    png_terminal = text:find("pngcairo", 1, true) and "pngcairo" or "png"
  end
  return png_terminal
end

-- plot(dir, rows, p, exp, gp) -> files written; renders one plot spec p = { x, y, series,
-- title, logx, logy, name }. gp: the gnuplot command or nil (data and script only).
function M.plot(dir, rows, p, exp, gp)
  local stem = M.plot_name(p)
  local data = M.plot_data(rows, p, exp and exp.swept)
  local files = {}
  -- the data file: one gnuplot index block per line
  local dat = { ("# %s\n"):format(one_line(("%s: %s against %s"):format(exp and exp.name or "", table.concat(as_list(p.y), ", "), p.x))),
    "# columns: x mean min max n label\n" }
  local spread = false
  for i, ln in ipairs(data.lines) do
    if i > 1 then dat[#dat + 1] = "\n\n" end
    dat[#dat + 1] = ("# line %d: %s\n"):format(i - 1, one_line(ln.title))
    for _, pt in ipairs(ln.points) do
      if pt.n > 1 and pt.hi > pt.lo then spread = true end
      dat[#dat + 1] = ("%s %s %s %s %d %s\n"):format(results.encode_number(pt.x), results.encode_number(pt.mean),
        results.encode_number(pt.lo), results.encode_number(pt.hi), pt.n, data_quote(pt.label))
    end
  end
  local datpath = dir .. "/" .. stem .. ".dat"
  results.write_atomic(datpath, table.concat(dat))
  files[#files + 1] = datpath
  -- the script
  local logx = p.logx
  if logx == nil and data.numeric then
    local lo, hi = math.huge, -math.huge
    for _, ln in ipairs(data.lines) do
      for _, pt in ipairs(ln.points) do lo = math.min(lo, pt.x); hi = math.max(hi, pt.x) end
    end
    logx = lo > 0 and hi / lo >= 16
  end
  local title = p.title or ("%s: %s against %s"):format(exp and exp.name or "", table.concat(as_list(p.y), ", "), p.x)
  local ylabel = #as_list(p.y) == 1 and M.label(as_list(p.y)[1]) or M.common_label(as_list(p.y))
  -- gnuplot runs in dir (cd below), so its script names files relative to dir; Lua names
  -- them dir/NAME.
  local pngname, svgname = ("." .. stem .. ".png.tmp"), ("." .. stem .. ".svg.tmp")
  local pngtmp, svgtmp = dir .. "/" .. pngname, dir .. "/" .. svgname
  local gpl = {
    "# gnuplot script written by idxlab report; run from the results directory",
    "set termoption noenhanced",
    "set title " .. gnuplot_quote(title),
    "set xlabel " .. gnuplot_quote(M.label(p.x)),
    "set ylabel " .. gnuplot_quote(ylabel),
    "set key outside right top",
    "set grid",
  }
  if logx then gpl[#gpl + 1] = "set logscale x 2" end
  if p.logy then gpl[#gpl + 1] = "set logscale y" end
  if not data.numeric then
    gpl[#gpl + 1] = ("set xrange [0.5:%d.5]"):format(#data.categories)
  end
  local clauses = {}
  local using = spread and "1:2:3:4" or "1:2"
  if not data.numeric then using = using .. ":xtic(6)" end
  local style = spread and "yerrorlines" or "linespoints"
  for i, ln in ipairs(data.lines) do
    clauses[#clauses + 1] = ("%s index %d using %s with %s title %s"):format(gnuplot_quote(stem .. ".dat"), i - 1,
      using, style, gnuplot_quote(ln.title == "" and as_list(p.y)[1] or ln.title))
  end
  if #clauses == 0 then return files, "no data for " .. stem end
  local plotcmd = "plot " .. table.concat(clauses, ", \\\n     ")
  local body = table.concat(gpl, "\n") .. "\n"
  local script = body
    .. ("set terminal %s size 1000,620 noenhanced\nset output %s\n%s\n"):format("PNGTERM", gnuplot_quote(stem .. ".png"), plotcmd)
    .. ("set terminal svg size 1000,620 noenhanced\nset output %s\nreplot\nset output\n"):format(gnuplot_quote(stem .. ".svg"))
  local gppath = dir .. "/" .. stem .. ".gp"
  results.write_atomic(gppath, (script:gsub("PNGTERM", "pngcairo")))
  files[#files + 1] = gppath
  if not gp then return files end
  -- gnuplot writes to temporary names (in dir, where it runs), which are renamed when it
  -- succeeds.
  local run = body
    .. ("set terminal %s size 1000,620 noenhanced\nset output %s\n%s\n"):format(png_term(gp), gnuplot_quote(pngname), plotcmd)
    .. ("set terminal svg size 1000,620 noenhanced\nset output %s\nreplot\nset output\n"):format(gnuplot_quote(svgname))
  local runpath = ("%s/.%s.gp.tmp"):format(dir, stem)
  results.write_atomic(runpath, run)
  -- "./" keeps a directory named "-x" from reading as an option of cd
  local cddir = dir:sub(1, 1) == "-" and ("./" .. dir) or dir
  local cmd = ("cd %s && %s %s 2>&1"):format(results.shell_quote(cddir), results.shell_quote(gp),
    results.shell_quote("." .. stem .. ".gp.tmp"))
  local f = io.popen(cmd)
  local out = f:read("*a")
  f:close()
  os.remove(runpath)
  local problems = {}
  for _, pair in ipairs({ { pngtmp, dir .. "/" .. stem .. ".png" }, { svgtmp, dir .. "/" .. stem .. ".svg" } }) do
    if results.exists(pair[1]) then
      local ok, err = results.move_into_place(pair[1], pair[2])
      if ok then files[#files + 1] = pair[2] else problems[#problems + 1] = tostring(err) end
    else
      problems[#problems + 1] = "gnuplot wrote no " .. pair[2]
    end
  end
  if #problems > 0 then
    return files, ("%s: %s %s"):format(stem, table.concat(problems, "; "), (out or ""):gsub("%s+$", ""))
  end
  return files
end

-- plots(dir, rows, exp, opts) -> files, messages.
function M.plots(dir, rows, exp, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("idxlab: report.plots: opts must be a table", 2) end
  if type(rows) ~= "table" then error("idxlab: report.plots: rows must be a list", 2) end
  check_exp(exp, "report.plots")
  local files, msgs = {}, {}
  local specs = exp and exp.plots or {}
  if #specs == 0 or #rows == 0 then return files, msgs end
  local gp = find_gnuplot(opts)
  if not gp then
    msgs[#msgs + 1] = ("gnuplot not found: plots not rendered (apt-get install gnuplot-nox); their data and scripts are in %s"):format(dir)
  end
  for _, p in ipairs(specs) do
    local f, msg = M.plot(dir, rows, p, exp, gp)
    for _, x in ipairs(f) do files[#files + 1] = x end
    if msg then msgs[#msgs + 1] = msg end
  end
  return files, msgs
end

---------------------------------------------------------------------------- render a directory

-- The CSV's leading columns, in this order; the rest follow sorted.
function M.csv_order(exp)
  local order = { "schema", "experiment", "point", "repeat", "config_hash", "seed", "backend", "device", "mode" }
  for _, f in ipairs(exp and exp.swept or {}) do order[#order + 1] = f end
  for _, m in ipairs((exp and exp.mode == "chunks") and M.CHUNK_METRICS or M.STEP_METRICS) do order[#order + 1] = m end
  local ok, config = pcall(require, "idxlab.config")
  if ok and type(config.field_names) == "function" then
    for _, f in ipairs(config.field_names()) do order[#order + 1] = f end
  end
  for _, k in ipairs({ "idxlab_version", "git_commit", "git_dirty", "wall_time_s", "finished_at" }) do order[#order + 1] = k end
  return order
end

-- write(dir, rows, exp, opts) -> { summary = text, files = {...}, messages = {...} }: the
-- CSV, summary.txt and the plots, from rows already read.
function M.write(dir, rows, exp, opts)
  opts = opts or {}
  if type(dir) ~= "string" then error("idxlab: report.write: dir must be a string (a results directory)", 2) end
  if type(rows) ~= "table" then error("idxlab: report.write: rows must be a list", 2) end
  if type(opts) ~= "table" then error("idxlab: report.write: opts must be a table", 2) end
  check_exp(exp, "report.write")
  local sorted = {}
  for i, r in ipairs(rows) do sorted[i] = r end
  table.sort(sorted, function(a, b) return (a.point or 0) < (b.point or 0) end)
  local files = {}
  results.write_csv(dir .. "/results.csv", sorted, M.csv_order(exp))
  files[#files + 1] = dir .. "/results.csv"
  local text = M.summary(sorted, exp)
  results.write_atomic(dir .. "/summary.txt", text)
  files[#files + 1] = dir .. "/summary.txt"
  local pf, msgs = M.plots(dir, sorted, exp, opts)
  for _, f in ipairs(pf) do files[#files + 1] = f end
  return { summary = text, files = files, messages = msgs }
end

-- render(dir, opts) -> same as write, from the saved results.jsonl and experiment.json.
function M.render(dir, opts)
  if type(dir) ~= "string" then error("idxlab: report.render: dir must be a string (a results directory)", 2) end
  local ok, loaded = pcall(results.load_dir, dir)
  if not ok then error(loaded, 2) end
  local out = M.write(dir, loaded.rows, loaded.experiment, opts)
  if loaded.info.torn then
    table.insert(out.messages, 1, ("%s/results.jsonl: the last line is half-written (a killed run); it was ignored, and `idxlab run ... --resume` removes it")
      :format(dir))
  end
  out.rows = loaded.rows
  return out
end

return M
