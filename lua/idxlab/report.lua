-- idxlab.report: what a finished (or partly finished) experiment shows. From the rows of
-- results.jsonl and the saved experiment.json it writes
--   summary.txt: one line per point config, the swept values, then each metric's mean and
--     spread (sample standard deviation) over the repeats, and a note when the points ran on
--     different kernel variants (SPEC 6);
--   results.csv (idxlab.results), with every variant.<family> column the rows carry;
--   the plots (idxlab.plot draws each one).
-- It also reads a results directory back (load_dir), checking the saved experiment's fields.
-- Every file is written whole (temp + rename). `idxlab report DIR` calls render(DIR).
local errors = require("idxlab.errors")
local binding = require("idxlab.ffi")
local config = require("idxlab.config")
local fs = require("idxlab.fs")
local plot = require("idxlab.plot")
local results = require("idxlab.results")
local stats = require("idxlab.stats")

local fail = errors.fail
local show, is_int, is_list = results.show, results.is_int, results.is_list
local fmt_num, fmt_field = stats.fmt_num, stats.fmt_field

local M = {}

-- The metrics each mode reports, in the order tables show them.
M.STEP_METRICS = {
  "logit_mismatches", "logit_diff", "selection_agreement", "fp32_selection_agreement",
  "recall_at_k", "mass_recall", "candidate_coverage", "active_rows",
  "time_dense_logits_us", "time_candidate_select_us", "time_expand_us", "time_sparse_logits_us",
  "time_topk_us", "time_remap_us", "time_step_us", "time_step_eager_us", "time_source_topk_us",
  "time_masked_dense_us", "speedup_sparse", "scratch_bytes", "logits_bytes", "num_chunks",
}
M.CHUNK_METRICS = {
  "num_chunks", "max_rows_per_chunk", "mean_rows_per_chunk", "peak_logits_bytes", "sub_chunks",
  "min_split_seq_len", "dense_num_chunks", "dense_max_rows_per_chunk", "dense_peak_logits_bytes",
}
M.DEFAULT_STEP_TABLE = { "logit_mismatches", "selection_agreement", "recall_at_k", "mass_recall",
  "candidate_coverage", "active_rows", "time_dense_logits_us", "time_sparse_logits_us",
  "time_step_us" }
M.DEFAULT_CHUNK_TABLE = { "num_chunks", "max_rows_per_chunk", "peak_logits_bytes", "sub_chunks" }

-- The statistics and number formats, idxlab.stats's (report.stats(values) and friends).
M.stats, M.fmt_num, M.fmt_field = stats.stats, fmt_num, fmt_field

---------------------------------------------------------------------------- a results directory

local function string_list(v)
  if not is_list(v) then return false end
  for _, x in ipairs(v) do if type(x) ~= "string" then return false end end
  return true
end

-- check_experiment(exp) -> nil, or what is wrong with a saved experiment (experiment.json)
-- in the fields report and merge read: "field 'plots' = 5: must be ...". A "what is wrong"
-- answer rather than an error, so that each caller names the file or the function before it.
function M.check_experiment(exp)
  if type(exp) ~= "table" or is_list(exp) and next(exp) ~= nil then
    return ("the experiment = %s: must be a JSON object"):format(show(exp))
  end
  for _, k in ipairs({ "name", "question", "mode" }) do
    if exp[k] ~= nil and type(exp[k]) ~= "string" then
      return ("field '%s' = %s: must be a string"):format(k, show(exp[k]))
    end
  end
  for _, k in ipairs({ "metrics", "swept" }) do
    if exp[k] ~= nil and not string_list(exp[k]) then
      return ("field '%s' = %s: must be a list of names (strings)"):format(k, show(exp[k]))
    end
  end
  local bad = plot.list_problem(exp.plots)
  if bad then return bad end
  if exp.points ~= nil then
    local shape = "{ point = n, config_hash = hex }"
    if not is_list(exp.points) then
      return ("field 'points' = %s: must be a list of planned points %s")
        :format(show(exp.points), shape)
    end
    for i, p in ipairs(exp.points) do
      local w = ("points[%d]"):format(i)
      if type(p) ~= "table" or is_list(p) and next(p) ~= nil then
        return ("field '%s' = %s: must be a planned point %s"):format(w, show(p), shape)
      end
      if not is_int(p.point) or p.point < 0 then
        return ("field '%s.point' = %s: must be a non-negative integer"):format(w, show(p.point))
      end
      if type(p.config_hash) ~= "string" then
        return ("field '%s.config_hash' = %s: must be a string"):format(w, show(p.config_hash))
      end
    end
  end
  return nil
end

-- load_dir(dir) -> { experiment = table or nil, rows = list, info = read info, dir }: a
-- results directory read back (experiment.json is optional, results.jsonl is not).
function M.load_dir(dir)
  if type(dir) ~= "string" then fail("report.load_dir: dir must be a string") end
  local exp
  local etext = fs.read_file(dir .. "/experiment.json")
  if etext then
    local err
    exp, err = results.decode(etext)
    if type(exp) ~= "table" then
      fail("%s/experiment.json is not valid JSON: %s", dir, tostring(err))
    end
    local bad = M.check_experiment(exp)
    if bad then fail("%s/experiment.json: %s", dir, bad) end
  end
  local jpath = dir .. "/results.jsonl"
  if not fs.exists(jpath) then
    fail("%s: no results.jsonl here (is it a results directory?)", dir)
  end
  local rows, info = results.read_jsonl(jpath)
  for i, r in ipairs(rows) do
    if r.point ~= nil and (not is_int(r.point) or r.point < 0) then
      fail("%s line %d: field 'point' = %s: must be a non-negative integer", jpath, i,
        show(r.point))
    end
  end
  return { experiment = exp, rows = rows, info = info, dir = dir }
end

-- The saved experiment's fields this module reads, checked so a hand-edited experiment.json
-- gives a message naming the function, not a Lua error deep inside.
local function check_exp(exp, where)
  if exp == nil then return end
  local bad = M.check_experiment(exp)
  if bad then fail("%s: experiment %s", where, bad) end
end

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

local function metric_list(exp)
  if exp and type(exp.metrics) == "table" and #exp.metrics > 0 then return exp.metrics end
  if exp and exp.mode == "chunks" then return M.DEFAULT_CHUNK_TABLE end
  return M.DEFAULT_STEP_TABLE
end

-- The fields a table without a saved experiment shows when their values differ.
local GUESS_SWEPT = { "candidate_block_size", "candidate_topk_blocks", "sparse_block_kv",
  "index_topk", "block_score", "max_logits_bytes", "split_width", "kv_format", "backend", "seed" }

local function differs(rows, k)
  local first
  for _, r in ipairs(rows) do
    if first == nil then first = r[k] elseif r[k] ~= first then return true end
  end
  return false
end

local function swept_list(exp, rows)
  if exp and type(exp.swept) == "table" then return exp.swept end
  -- No saved experiment: the scalar keys whose values differ between rows, among a few
  -- likely ones.
  local out = {}
  for _, k in ipairs(GUESS_SWEPT) do
    if differs(rows, k) then out[#out + 1] = k end
  end
  return out
end

-- The variant.<family> keys the rows carry (SPEC 6), sorted.
local function variant_keys(rows)
  local seen, out = {}, {}
  for _, r in ipairs(rows) do
    for k, v in pairs(r) do
      if type(k) == "string" and k:match("^variant%.") and type(v) ~= "table"
        and not seen[k] then
        seen[k] = true
        out[#out + 1] = k
      end
    end
  end
  table.sort(out)
  return out
end

-- One line per family whose rows ran on different variants: "variant.logits = ref (4 rows),
-- fast (2 rows)", the variants in the order the rows first show them.
local function variant_notes(rows)
  local notes, keys = {}, {}
  for _, k in ipairs(variant_keys(rows)) do
    if differs(rows, k) then
      local count, order = {}, {}
      for _, r in ipairs(rows) do
        local v = tostring(r[k])
        if not count[v] then count[v] = 0; order[#order + 1] = v end
        count[v] = count[v] + 1
      end
      local parts = {}
      for _, v in ipairs(order) do
        parts[#parts + 1] = ("%s (%d row%s)"):format(v, count[v], count[v] == 1 and "" or "s")
      end
      notes[#notes + 1] = ("%s = %s"):format(k, table.concat(parts, ", "))
      keys[#keys + 1] = k
    end
  end
  return notes, keys
end

---------------------------------------------------------------------------- summary table

-- The text width of each column.
local function column_widths(header, body)
  local widths = {}
  for i, h in ipairs(header) do widths[i] = #h end
  for _, row in ipairs(body) do
    for i, c in ipairs(row) do widths[i] = math.max(widths[i] or 0, #c) end
  end
  return widths
end

-- One table: the columns cols (indices into header and every row), right-aligned.
local function render_columns(header, body, widths, cols)
  local function line(cells)
    local parts = {}
    for j, i in ipairs(cols) do parts[j] = (" "):rep(widths[i] - #cells[i]) .. cells[i] end
    return table.concat(parts, "  ")
  end
  local out = { line(header) }
  local rule = {}
  for j, i in ipairs(cols) do rule[j] = ("-"):rep(widths[i]) end
  out[#out + 1] = table.concat(rule, "  ")
  for _, row in ipairs(body) do out[#out + 1] = line(row) end
  return table.concat(out, "\n")
end

-- render_table(header, body, keys, width) -> text. Wider than width (a terminal's columns;
-- nil: never split), the table is split into tables that each fit, each repeating the first
-- `keys` columns (the swept fields that name a row) and taking the next columns while they
-- fit (at least one, so a column wider than the terminal still shows); blank lines between.
local function render_table(header, body, keys, width)
  local widths = column_widths(header, body)
  local all = {}
  for i = 1, #header do all[i] = i end
  local function span(cols)
    local w = 0
    for j, i in ipairs(cols) do w = w + widths[i] + (j > 1 and 2 or 0) end
    return w
  end
  keys = math.min(keys or 0, #header)
  if not width or span(all) <= width or keys >= #header then
    return render_columns(header, body, widths, all)
  end
  local parts, i = {}, keys + 1
  while i <= #header do
    local cols = {}
    for k = 1, keys do cols[k] = k end
    cols[#cols + 1] = i
    i = i + 1
    while i <= #header do
      cols[#cols + 1] = i
      if span(cols) > width then cols[#cols] = nil break end
      i = i + 1
    end
    parts[#parts + 1] = render_columns(header, body, widths, cols)
  end
  return table.concat(parts, "\n\n")
end

-- terminal_width(stream) -> the columns to fit a table to, or nil (never split): only for
-- io.stdout on a terminal, its width, else $COLUMNS. summary.txt and a pipe get whole tables.
function M.terminal_width(stream)
  if stream ~= io.stdout or not binding.isatty(1) then return nil end
  local w = binding.tty_columns(1) or tonumber(os.getenv("COLUMNS") or "")
  if w and w >= 20 then return math.floor(w) end
  return nil
end

local QUAL = { "recall_at_k", "mass_recall", "candidate_coverage", "selection_agreement",
  "fp32_selection_agreement" }

-- by = "length": the quality metrics per row-length bucket, active buckets marked; -> the
-- header (nil when no row has buckets) and the body.
local function length_table(groups, swept)
  local header, body = nil, {}
  for _, g in ipairs(groups) do
    local buckets, order = {}, {}
    for _, r in ipairs(g.rows) do
      for _, b in ipairs(type(r.by_length) == "table" and r.by_length or {}) do
        -- a bucket is a row length: an integer (anything else is not a bucket idxlab wrote)
        if type(b) == "table" and type(b.bucket) == "number"
          and b.bucket == math.floor(b.bucket) then
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
      if not header then
        header = {}
        for _, f in ipairs(swept) do header[#header + 1] = f end
        for _, h in ipairs({ "length bucket", "rows", "active" }) do header[#header + 1] = h end
        for _, m in ipairs(QUAL) do header[#header + 1] = m end
      end
      local cells = {}
      for _, f in ipairs(swept) do cells[#cells + 1] = fmt_field(f, g.rows[1][f]) end
      cells[#cells + 1] = ">= " .. fmt_num(bk)
      local rs = stats.stats(e.rows)
      cells[#cells + 1] = rs and fmt_num(rs.mean) or "0"
      cells[#cells + 1] = e.active and "yes" or "no"
      for _, m in ipairs(QUAL) do
        local st = stats.stats(e.q[m])
        cells[#cells + 1] = st and fmt_num(st.mean) or "null"
      end
      body[#body + 1] = cells
    end
  end
  return header, body
end

-- summary(rows, exp, opts) -> text. exp: the saved experiment (name, question, metrics,
-- swept). opts.width: the terminal's columns, to split a wider table (render_table); nil for
-- whole tables (summary.txt is always whole).
function M.summary(rows, exp, opts)
  if type(rows) ~= "table" then fail("report.summary: rows must be a list") end
  if opts ~= nil and type(opts) ~= "table" then fail("report.summary: opts must be a table") end
  local width = opts and opts.width
  if width ~= nil and (type(width) ~= "number" or width < 1) then
    fail("report.summary: opts.width = %s: must be a positive number of columns", show(width))
  end
  check_exp(exp, "report.summary")
  exp = exp or {}
  local metrics, swept = metric_list(exp), swept_list(exp, rows)
  local groups = M.groups(rows)
  -- a variant that differs between rows gets a column (after the swept fields) unless swept
  local notes, vkeys = variant_notes(rows)
  local shown = {}
  for _, f in ipairs(swept) do shown[#shown + 1] = f end
  for _, k in ipairs(vkeys) do
    local listed = false
    for _, f in ipairs(swept) do if f == k then listed = true end end
    if not listed then shown[#shown + 1] = k end
  end
  local header = {}
  for _, f in ipairs(shown) do header[#header + 1] = f end
  header[#header + 1] = "n"
  for _, m in ipairs(metrics) do header[#header + 1] = m end
  local body = {}
  local any_spread = false
  for _, g in ipairs(groups) do
    local cells = {}
    for _, f in ipairs(shown) do cells[#cells + 1] = fmt_field(f, g.rows[1][f]) end
    cells[#cells + 1] = tostring(#g.rows)
    for _, m in ipairs(metrics) do
      local vals = {}
      for _, r in ipairs(g.rows) do vals[#vals + 1] = r[m] end
      local s = stats.stats(vals)
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
  local blen_header, blen_body = length_table(groups, swept)
  local lines = {}
  if exp.name then
    lines[#lines + 1] = ("experiment %s%s"):format(exp.name,
      exp.question and (": " .. exp.question) or "")
  end
  local first = rows[1]
  if first then
    lines[#lines + 1] = ("%d result rows, %d point configs; backend %s (%s); idxlab %s, "
      .. "commit %s%s"):format(#rows, #groups, tostring(first.backend), tostring(first.device),
        tostring(first.idxlab_version), tostring(first.git_commit),
        first.git_dirty and " (dirty)" or "")
  else
    lines[#lines + 1] = "no finished points"
  end
  for _, n in ipairs(notes) do
    lines[#lines + 1] = "the points ran on different kernel variants: " .. n
  end
  local keys = #shown
  if #groups == 1 and #shown == 0 then
    -- one point (quick.lua): a metric per line reads better than one very wide row
    local tbody = {}
    for i, h in ipairs(header) do tbody[#tbody + 1] = { h, body[1][i] } end
    header, body, keys = { "metric", "value" }, tbody, 1
  end
  if #groups > 0 then
    lines[#lines + 1] = ""
    lines[#lines + 1] = render_table(header, body, keys, width)
    lines[#lines + 1] = ""
    lines[#lines + 1] = any_spread and "mean ±sd over repeats (n = repeats); null: no active rows"
      or "one repeat per point: no spread; null: no active rows"
  end
  if blen_header then
    lines[#lines + 1] = ""
    lines[#lines + 1] = "by row length (rows of length >= bucket and < 2 * bucket; active: "
      .. "longer than T * cbs)"
    lines[#lines + 1] = render_table(blen_header, blen_body, #swept + 1, width)
  end
  return table.concat(lines, "\n") .. "\n"
end

---------------------------------------------------------------------------- plots

-- plots(dir, rows, exp, opts) -> files, messages: every plot the saved experiment lists,
-- drawn by idxlab.plot (opts.gnuplot: the command, or "none").
function M.plots(dir, rows, exp, opts)
  opts = opts or {}
  if type(opts) ~= "table" then fail("report.plots: opts must be a table") end
  if type(rows) ~= "table" then fail("report.plots: rows must be a list") end
  check_exp(exp, "report.plots")
  local files, msgs = {}, {}
  local specs = exp and exp.plots or {}
  if #specs == 0 or #rows == 0 then return files, msgs end
  local gp = plot.find_gnuplot(opts)
  if not gp then
    msgs[#msgs + 1] = ("gnuplot not found: plots not rendered (apt-get install gnuplot-nox); "
      .. "their data and scripts are in %s"):format(dir)
  end
  for _, p in ipairs(specs) do
    local f, msg = plot.render(dir, rows, p, exp, gp)
    for _, x in ipairs(f) do files[#files + 1] = x end
    if msg then msgs[#msgs + 1] = msg end
  end
  return files, msgs
end

---------------------------------------------------------------------------- render a directory

-- The CSV's leading columns, in this order (the rows' own order: meta, swept, metrics,
-- config, then every variant.<family> the rows carry, then provenance); the rest follow
-- sorted.
function M.csv_order(exp, rows)
  local order = { "schema", "experiment", "point", "repeat", "config_hash", "seed", "backend",
    "device", "device_bus_id", "mode" }
  for _, f in ipairs(exp and exp.swept or {}) do order[#order + 1] = f end
  local metrics = (exp and exp.mode == "chunks") and M.CHUNK_METRICS or M.STEP_METRICS
  for _, m in ipairs(metrics) do order[#order + 1] = m end
  for _, f in ipairs(config.field_names()) do order[#order + 1] = f end
  for _, k in ipairs(variant_keys(rows or {})) do order[#order + 1] = k end
  for _, k in ipairs({ "idxlab_version", "git_commit", "git_dirty", "wall_time_s",
    "finished_at" }) do
    order[#order + 1] = k
  end
  return order
end

-- write(dir, rows, exp, opts) -> { summary = text, screen = text, files = {...},
-- messages = {...} }: the CSV, summary.txt (summary, never split) and the plots, from rows
-- already read. opts: gnuplot (the command, or "none"), width (screen: the summary split to a
-- terminal of that many columns; without it, the summary).
function M.write(dir, rows, exp, opts)
  opts = opts or {}
  if type(dir) ~= "string" then
    fail("report.write: dir must be a string (a results directory)")
  end
  if type(rows) ~= "table" then fail("report.write: rows must be a list") end
  if type(opts) ~= "table" then fail("report.write: opts must be a table") end
  check_exp(exp, "report.write")
  local sorted = {}
  for i, r in ipairs(rows) do sorted[i] = r end
  table.sort(sorted, function(a, b) return (a.point or 0) < (b.point or 0) end)
  local files = {}
  results.write_csv(dir .. "/results.csv", sorted, M.csv_order(exp, sorted))
  files[#files + 1] = dir .. "/results.csv"
  local text = M.summary(sorted, exp)
  fs.write_atomic(dir .. "/summary.txt", text)
  files[#files + 1] = dir .. "/summary.txt"
  local screen = opts.width and M.summary(sorted, exp, { width = opts.width }) or text
  local pf, msgs = M.plots(dir, sorted, exp, opts)
  for _, f in ipairs(pf) do files[#files + 1] = f end
  return { summary = text, screen = screen, files = files, messages = msgs }
end

-- render(dir, opts) -> same as write, from the saved results.jsonl and experiment.json.
function M.render(dir, opts)
  if type(dir) ~= "string" then
    fail("report.render: dir must be a string (a results directory)")
  end
  local loaded = M.load_dir(dir)
  local out = M.write(dir, loaded.rows, loaded.experiment, opts)
  if loaded.info.torn then
    table.insert(out.messages, 1, ("%s/results.jsonl: the last line is half-written (a killed "
      .. "run); it was ignored, and `idxlab run ... --resume` removes it"):format(dir))
  end
  out.rows = loaded.rows
  return out
end

return errors.wrap(M, { "stats", "fmt_num", "fmt_field" })
