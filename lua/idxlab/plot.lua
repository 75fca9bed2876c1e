-- idxlab.plot: an experiment's plots. The one owner of the plot schema ({ x, y, series, title,
-- logx, logy, name }: what a plot may say, checked here for the saved experiment.json and
-- used by the experiment file's stricter check), the axis labels with units, the data behind
-- a plot (one line per swept series, never averaging a swept field away), and rendering:
-- plot_<name>.dat (the data) and .gp (the gnuplot script) always, .png and .svg through
-- gnuplot when it is present. Every file is written whole (temp + rename).
-- gnuplot always runs with stdin from /dev/null: on a terminal, `gnuplot -e 'set terminal'`
-- pages its list and waits at "Press return for more:" (issue 19).
local errors = require("idxlab.errors")
local fs = require("idxlab.fs")
local json = require("idxlab.json")
local results = require("idxlab.results")
local stats = require("idxlab.stats")

local M = {}

local show, is_list = results.show, results.is_list
local fmt_field = stats.fmt_field
local shell_quote = fs.shell_quote

---------------------------------------------------------------------------- schema

-- The fields a plot may have, in the order messages list them.
M.KEYS = { "x", "y", "series", "title", "logx", "logy", "name" }

local SHAPE = "{ x = field, y = metric, series = field }"

local function string_list(v)
  if not is_list(v) then return false end
  for _, x in ipairs(v) do if type(x) ~= "string" then return false end end
  return true
end

-- problem(p, w) -> nil, or what is wrong with plot p (w names it: "plots[1]"), e.g.
-- "field 'plots[1].x' = 1: must name a field (a string)". The union of what a plot may be:
-- x a field; y a metric or a non-empty list of metrics; series nil, a field or a list of
-- fields; title a string; logx, logy booleans; name a file name. Whether the fields are swept
-- and the metrics exist is the experiment file's check (it knows the sweep and the mode).
function M.problem(p, w)
  if type(p) ~= "table" or is_list(p) and next(p) ~= nil then
    return ("field '%s' = %s: must be a plot %s"):format(w, show(p), SHAPE)
  end
  if type(p.x) ~= "string" then
    return ("field '%s.x' = %s: must name a field (a string)"):format(w, show(p.x))
  end
  if not (type(p.y) == "string" or string_list(p.y) and #p.y > 0) then
    return ("field '%s.y' = %s: must be a metric or a non-empty list of metrics (strings)")
      :format(w, show(p.y))
  end
  if p.series ~= nil and type(p.series) ~= "string" and not string_list(p.series) then
    return ("field '%s.series' = %s: must name a field (a string) or list fields")
      :format(w, show(p.series))
  end
  if p.title ~= nil and type(p.title) ~= "string" then
    return ("field '%s.title' = %s: must be a string"):format(w, show(p.title))
  end
  for _, b in ipairs({ "logx", "logy" }) do
    if p[b] ~= nil and type(p[b]) ~= "boolean" then
      return ("field '%s.%s' = %s: must be true or false"):format(w, b, show(p[b]))
    end
  end
  if p.name ~= nil and (type(p.name) ~= "string" or not p.name:match("^[%w_%-]+$")) then
    return ("field '%s.name' = %s: must be a file name of letters, digits, '_' and '-'")
      :format(w, show(p.name))
  end
  return nil
end

-- list_problem(plots) -> nil, or what is wrong with the field 'plots' (nil: no plots).
function M.list_problem(plots)
  if plots == nil then return nil end
  if not is_list(plots) then
    return ("field 'plots' = %s: must be a list of plots %s"):format(show(plots), SHAPE)
  end
  for i, p in ipairs(plots) do
    local bad = M.problem(p, ("plots[%d]"):format(i))
    if bad then return bad end
  end
  return nil
end

-- check(p, w, prefix): raises problem(p, w), after prefix (e.g. "quick.lua: "), if any.
function M.check(p, w, prefix)
  local bad = M.problem(p, w)
  if bad then errors.fail("%s%s", prefix or "", bad) end
end

---------------------------------------------------------------------------- labels

local units = {
  candidate_block_size = "positions", sparse_block_kv = "positions", page_size = "positions",
  index_topk = "positions", candidate_topk_blocks = "blocks", max_logits_bytes = "bytes",
  workspace_tokens = "positions", max_model_len = "tokens", max_rows = "rows", heads = "heads",
  head_dim = "elements", logit_mismatches = "count", active_rows = "rows",
  recall_at_k = "share of the dense top-k kept",
  mass_recall = "share of the dense top-k softmax mass",
  candidate_coverage = "share of the dense top-k in candidate blocks",
  selection_agreement = "share", fp32_selection_agreement = "share",
  logit_diff = "1 - 2 sum(xy) / sum(x^2 + y^2)", num_chunks = "chunks",
  dense_num_chunks = "chunks", max_rows_per_chunk = "rows", mean_rows_per_chunk = "rows",
  dense_max_rows_per_chunk = "rows", sub_chunks = "chunks", min_split_seq_len = "positions",
}

-- "recall_at_k (share of the dense top-k kept)", "time_step_us (µs)", ...
function M.label(name)
  if type(name) ~= "string" then return tostring(name) end
  local u = units[name]
  if not u then
    if name:match("_us$") then u = "µs"
    elseif name:match("bytes$") then u = "bytes"
    elseif name:match("^workload%..*context") or name:match("^workload%..*len") then
      u = "positions"
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

---------------------------------------------------------------------------- quoting

-- Text for one line of a gnuplot script or data file: control characters (a newline would
-- end the command, and gnuplot would run the next line as one) become spaces.
local function one_line(s)
  return (tostring(s):gsub("%c", " "))
end

-- A gnuplot string literal: single-quoted, ' doubled. gnuplot expands `...` (a shell
-- command) and escapes inside double quotes only, so the text stays literal.
function M.gnuplot_quote(s)
  return "'" .. one_line(s):gsub("'", "''") .. "'"
end
local gnuplot_quote = M.gnuplot_quote

-- A label in a plot's data file (read as data, never as a command): double-quoted.
local function data_quote(s)
  return '"' .. one_line(s):gsub('\\', '\\\\'):gsub('"', '\\"') .. '"'
end

local function as_list(v)
  if v == nil then return {} end
  if type(v) == "table" then return v end
  return { v }
end

---------------------------------------------------------------------------- data

-- The plot's file stem: plot_<y>_vs_<x> (several y joined with "+").
function M.name(p)
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
  if f == "seed" and type(r.seed) == "number" and type(r["repeat"]) == "number" then
    return r.seed - r["repeat"]
  end
  return r[f]
end

-- data(rows, p, swept) -> { lines = { { title, points = { {x, label, mean, lo, hi, n} } } },
-- numeric, categories }. A line per combination of the series field and every other swept
-- field (so values of a field the plot does not show are never averaged together), times
-- each y metric.
function M.data(rows, p, swept)
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
      local s = stats.stats(e.vals)
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

---------------------------------------------------------------------------- gnuplot

local function succeeded(ok) return ok == 0 or ok == true end

-- The gnuplot command to run (opts.gnuplot, else $IDXLAB_GNUPLOT, else gnuplot on the PATH),
-- or nil when there is none ("none" or "" turn plotting off).
function M.find_gnuplot(opts)
  local g = (opts or {}).gnuplot or os.getenv("IDXLAB_GNUPLOT")
  if g == "none" or g == "" then return nil end
  if g then
    return succeeded(os.execute("command -v " .. shell_quote(g) .. " >/dev/null 2>&1")) and g
      or nil
  end
  return succeeded(os.execute("command -v gnuplot >/dev/null 2>&1")) and "gnuplot" or nil
end

-- The PNG terminal this gnuplot has (pngcairo when built with cairo), asked once per
-- command per process.
local png_terminals = {}
local function png_term(gp)
  if png_terminals[gp] == nil then
    local f = io.popen(shell_quote(gp) .. " -e 'set terminal' </dev/null 2>&1")
    local text = f and f:read("*a") or ""
    if f then f:close() end
    png_terminals[gp] = text:find("pngcairo", 1, true) and "pngcairo" or "png"
  end
  return png_terminals[gp]
end

-- render(dir, rows, p, exp, gp) -> files written, and a message when a plot could not be
-- drawn (no data, gnuplot failed): a note for the user, not an error. gp: the gnuplot command
-- or nil (data and script only).
function M.render(dir, rows, p, exp, gp)
  local stem = M.name(p)
  local data = M.data(rows, p, exp and exp.swept)
  local files = {}
  local ynames = table.concat(as_list(p.y), ", ")
  local about = ("%s: %s against %s"):format(exp and exp.name or "", ynames, p.x)
  -- the data file: one gnuplot index block per line
  local dat = { ("# %s\n"):format(one_line(about)), "# columns: x mean min max n label\n" }
  local spread = false
  local num = json.number_text
  for i, ln in ipairs(data.lines) do
    if i > 1 then dat[#dat + 1] = "\n\n" end
    dat[#dat + 1] = ("# line %d: %s\n"):format(i - 1, one_line(ln.title))
    for _, pt in ipairs(ln.points) do
      if pt.n > 1 and pt.hi > pt.lo then spread = true end
      dat[#dat + 1] = ("%s %s %s %s %d %s\n"):format(num(pt.x), num(pt.mean), num(pt.lo),
        num(pt.hi), pt.n, data_quote(pt.label))
    end
  end
  local datpath = dir .. "/" .. stem .. ".dat"
  fs.write_atomic(datpath, table.concat(dat))
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
  local title = p.title or about
  local ys = as_list(p.y)
  local ylabel = #ys == 1 and M.label(ys[1]) or M.common_label(ys)
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
    clauses[#clauses + 1] = ("%s index %d using %s with %s title %s"):format(
      gnuplot_quote(stem .. ".dat"), i - 1, using, style,
      gnuplot_quote(ln.title == "" and ys[1] or ln.title))
  end
  if #clauses == 0 then return files, "no data for " .. stem end
  local plotcmd = "plot " .. table.concat(clauses, ", \\\n     ")
  local body = table.concat(gpl, "\n") .. "\n"
  -- the same script with the given PNG terminal and output names
  local function script(term, png, svg)
    return body
      .. ("set terminal %s size 1000,620 noenhanced\nset output %s\n%s\n"):format(term,
        gnuplot_quote(png), plotcmd)
      .. ("set terminal svg size 1000,620 noenhanced\nset output %s\nreplot\nset output\n")
        :format(gnuplot_quote(svg))
  end
  local gppath = dir .. "/" .. stem .. ".gp"
  fs.write_atomic(gppath, script("pngcairo", stem .. ".png", stem .. ".svg"))
  files[#files + 1] = gppath
  if not gp then return files end
  -- gnuplot writes to temporary names (in dir, where it runs), which are renamed when it
  -- succeeds.
  local runpath = ("%s/.%s.gp.tmp"):format(dir, stem)
  fs.write_atomic(runpath, script(png_term(gp), pngname, svgname))
  -- "./" keeps a directory named "-x" from reading as an option of cd
  local cddir = dir:sub(1, 1) == "-" and ("./" .. dir) or dir
  local cmd = ("cd %s && %s %s </dev/null 2>&1"):format(shell_quote(cddir), shell_quote(gp),
    shell_quote("." .. stem .. ".gp.tmp"))
  local f = io.popen(cmd)
  local out = f:read("*a")
  f:close()
  os.remove(runpath)
  local problems = {}
  for _, pair in ipairs({ { pngtmp, dir .. "/" .. stem .. ".png" },
    { svgtmp, dir .. "/" .. stem .. ".svg" } }) do
    if fs.exists(pair[1]) then
      local ok, err = fs.move_into_place(pair[1], pair[2])
      if ok then files[#files + 1] = pair[2] else problems[#problems + 1] = tostring(err) end
    else
      problems[#problems + 1] = "gnuplot wrote no " .. pair[2]
    end
  end
  if #problems > 0 then
    return files, ("%s: %s %s"):format(stem, table.concat(problems, "; "),
      (out or ""):gsub("%s+$", ""))
  end
  return files
end

return errors.wrap(M)
