-- idxlab.plot: an experiment's plots. The one owner of the plot schema ({ kind, x, y, series,
-- title, logx, logy, name }: what a plot may say, checked here for the saved experiment.json
-- and used by the experiment file's stricter check), the axis labels with units, the tick
-- labels in the unit's own steps (bytes in KiB/MiB/GiB, positions in K/M, times in µs/ms/s),
-- the data behind a plot (kind "lines": one line per swept series, never averaging a swept
-- field away; kind "pareto": a cost metric against a quality metric, one point per point
-- config, the non-dominated ones joined and labelled with their swept values), and
-- rendering: plot_<name>.dat (the data) and .gp (the gnuplot script) always, .png and .svg
-- through gnuplot when it is present. Every file is written whole (temp + rename).
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
M.KEYS = { "kind", "x", "y", "series", "title", "logx", "logy", "name" }

-- The plot kinds: "lines" (the default) and "pareto" (x a cost metric, smaller is better; y a
-- quality metric, larger is better).
M.KINDS = { lines = true, pareto = true }

local SHAPE = "{ x = field, y = metric, series = field }"

local function string_list(v)
  if not is_list(v) then return false end
  for _, x in ipairs(v) do if type(x) ~= "string" then return false end end
  return true
end

-- problem(p, w) -> nil, or what is wrong with plot p (w names it: "plots[1]"), e.g.
-- "field 'plots[1].x' = 1: must name a field (a string)". The union of what a plot may be:
-- kind nil, "lines" or "pareto"; x a field (a metric for pareto); y a metric or a non-empty
-- list of metrics (one metric for pareto); series nil, a field or a list of fields (none for
-- pareto); title a string; logx, logy booleans; name a file name. Whether the fields are
-- swept and the metrics exist is the experiment file's check (it knows the sweep and the
-- mode).
function M.problem(p, w)
  if type(p) ~= "table" or is_list(p) and next(p) ~= nil then
    return ("field '%s' = %s: must be a plot %s"):format(w, show(p), SHAPE)
  end
  if p.kind ~= nil and not M.KINDS[p.kind] then
    return ("field '%s.kind' = %s: must be \"lines\" or \"pareto\""):format(w, show(p.kind))
  end
  if p.kind == "pareto" then
    if type(p.y) ~= "string" then
      return ("field '%s.y' = %s: a pareto plot's y must be one metric (a string)")
        :format(w, show(p.y))
    end
    if p.series ~= nil then
      return ("field '%s.series' = %s: a pareto plot has no series (every point config is a "
        .. "point, labelled with its swept values)"):format(w, show(p.series))
    end
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
    elseif name:match("bytes$") or name:match("^cp_bytes_") then u = "bytes"
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

---------------------------------------------------------------------------- ticks

-- The tick style of a field's axis: "bytes" (KiB, MiB, GiB: powers of 1024), "count" (K, M:
-- positions and tokens, whose sizes are powers of two, so 131072 reads 128K), "time" (the
-- value is in µs: µs, ms, s), or nil (gnuplot's own ticks).
function M.tick_style(name)
  local u = M.label(name):match("%(([^()]*)%)$")
  if u == "bytes" then return "bytes" end
  if u == "positions" or u == "tokens" then return "count" end
  if u == "µs" then return "time" end
  return nil
end

local STEPS = {
  bytes = { { 2 ^ 30, " GiB" }, { 2 ^ 20, " MiB" }, { 2 ^ 10, " KiB" }, { 1, " B" } },
  count = { { 2 ^ 20, "M" }, { 2 ^ 10, "K" }, { 1, "" } },
  time = { { 1e6, " s" }, { 1e3, " ms" }, { 1, " µs" } },
}

-- The unit step of a style that a value is shown in (the largest not above |v|).
local function step_for(style, v)
  local a = math.abs(v)
  for _, st in ipairs(STEPS[style]) do
    if a >= st[1] then return st end
  end
  return STEPS[style][#STEPS[style]]
end

-- A tick label: "64 MiB", "1.5 GiB", "128K", "1M", "250 µs", "1.2 ms"; at most 3
-- significant digits, no trailing zeros.
function M.tick_text(style, v, st)
  if v == 0 then return "0" end
  st = st or step_for(style, v)
  local x = v / st[1]
  local txt = ("%.3g"):format(x)
  if txt:find("e", 1, true) then txt = ("%.0f"):format(x) end
  return txt .. st[2]
end

-- A "nice" step (1, 2 or 5 times a power of ten) near span / 5.
local function nice_step(span)
  local raw = span / 5
  local p = 10 ^ math.floor(math.log10(raw))
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    if raw <= m * p then return m * p end
  end
  return 10 * p
end

-- ticks(style, lo, hi, log, values) -> { { value, label } }, range_lo, range_hi: the ticks of
-- an axis from lo to hi (the data's extent). values (the data's distinct x, at most 12) are
-- the ticks themselves when given: a sweep's points. Otherwise linear axes step by a nice
-- number of the unit the largest value is shown in, and log axes by powers of 2 (bytes,
-- counts) or 10 (times). The range is the ticks' extent, so every tick is drawn.
function M.ticks(style, lo, hi, log, values)
  local out = {}
  if values and #values > 0 then
    for _, v in ipairs(values) do out[#out + 1] = { v, M.tick_text(style, v) } end
    if log then
      return out, lo / 2 ^ 0.25, hi * 2 ^ 0.25
    end
    local pad = hi > lo and (hi - lo) * 0.05 or math.max(math.abs(hi) * 0.05, 1)
    return out, lo - pad, hi + pad
  end
  if log then
    if lo <= 0 then lo = hi > 0 and hi / 10 or 1 end
    if hi <= lo then hi = lo * 2 end
    -- candidates: powers of 2 (bytes, counts) or 1, 2, 5 times powers of 10 (times; powers
    -- of 10 alone past 3 decades), thinned to at most about 10 ticks
    local cands = {}
    if style == "time" then
      local e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
      local mults = (e1 - e0) <= 3 and { 1, 2, 5 } or { 1 }
      for e = e0, e1 do
        for _, m in ipairs(mults) do cands[#cands + 1] = m * 10 ^ e end
      end
    else
      local e0 = math.floor(math.log(lo) / math.log(2) + 1e-9)
      local e1 = math.ceil(math.log(hi) / math.log(2) - 1e-9)
      local every = math.max(1, math.ceil((e1 - e0) / 10))
      for e = e0, e1 + every, every do cands[#cands + 1] = 2 ^ e end
    end
    local first, last = 1, #cands
    for i, c in ipairs(cands) do
      if c <= lo * (1 + 1e-9) then first = i end
    end
    for i = #cands, 1, -1 do
      if cands[i] >= hi * (1 - 1e-9) then last = i end
    end
    for i = first, last do
      local v = tonumber(("%.12g"):format(cands[i]))
      out[#out + 1] = { v, M.tick_text(style, v) }
    end
    return out, out[1][1], out[#out][1]
  end
  local st = step_for(style, math.max(math.abs(lo), math.abs(hi)))
  local a, b = lo / st[1], hi / st[1]
  if b <= a then a, b = a - 1, b + 1 end
  local step = nice_step(b - a)
  local t0, t1 = math.floor(a / step + 1e-9) * step, math.ceil(b / step - 1e-9) * step
  local n = math.floor((t1 - t0) / step + 0.5)
  for i = 0, n do
    local v = tonumber(("%.12g"):format((t0 + i * step) * st[1])) -- no 0.30000000000000004
    out[#out + 1] = { v, M.tick_text(style, v, v ~= 0 and st or nil) }
  end
  return out, t0 * st[1], t1 * st[1]
end

-- The gnuplot lines that set an axis's ticks and range ("x" or "y"), or none when the field
-- has no tick style.
local function tick_lines(axis, name, lo, hi, log, values)
  local style = M.tick_style(name)
  if not style or lo > hi then return {} end
  if values and #values > 12 then values = nil end
  local ts, rlo, rhi = M.ticks(style, lo, hi, log, values)
  local parts = {}
  for _, t in ipairs(ts) do
    parts[#parts + 1] = ("%s %s"):format(M.gnuplot_quote(t[2]), json.number_text(t[1]))
  end
  return { ("set %stics (%s)"):format(axis, table.concat(parts, ", ")),
    ("set %srange [%s:%s]"):format(axis, json.number_text(rlo), json.number_text(rhi)) }
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

-- The distinct values of a list of numbers, sorted.
local function distinct(values)
  local seen, out = {}, {}
  for _, v in ipairs(values) do
    if not seen[v] then seen[v] = true; out[#out + 1] = v end
  end
  table.sort(out)
  return out
end

-- The extent of a list of numbers (lo > hi when empty).
local function extent(values)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(values) do lo = math.min(lo, v); hi = math.max(hi, v) end
  return lo, hi
end

-- A log axis unless the plot says otherwise: numbers all > 0 spanning `ratio` times or more
-- (16 for a sweep's x; a pareto plot's times, 4).
local function auto_log(flag, values, ratio)
  if flag ~= nil then return flag end
  local lo, hi = extent(values)
  return lo > 0 and hi / lo >= (ratio or 16)
end

-- "CPU reference times" (rows timed on the CPU), "GPU times (NVIDIA H200)", or both.
function M.times_from(rows)
  local seen, parts = {}, {}
  for _, r in ipairs(rows) do
    local b = tostring(r.backend)
    if not seen[b] then
      seen[b] = true
      if b == "cpu" then parts[#parts + 1] = "CPU reference times"
      elseif b == "cuda" then
        parts[#parts + 1] = ("GPU times%s"):format(r.device and (" (" .. tostring(r.device)
          .. ")") or "")
      else parts[#parts + 1] = b .. " times" end
    end
  end
  return table.concat(parts, " and ")
end

-- pareto_data(rows, p, swept) -> { points = { {x, y, label, front} }, front = { ... } }: one
-- point per point config (the mean of x and of y over its repeats; a config without both is
-- left out), labelled with its swept values in the order of swept ("8, 64" for
-- candidate_block_size = 8 and candidate_topk_blocks = 64); front: the non-dominated points
-- (no other point is as fast and at least as good, with one of the two strictly), by x.
function M.pareto_data(rows, p, swept)
  local by, order = {}, {}
  for _, r in ipairs(rows) do
    local kparts, lparts = {}, {}
    for _, f in ipairs(swept or {}) do
      local v = field_of(r, f)
      kparts[#kparts + 1] = value_key(v)
      lparts[#lparts + 1] = fmt_field(f, v)
    end
    local key = table.concat(kparts, "\0")
    local g = by[key]
    if not g then
      g = { label = table.concat(lparts, ", "), xs = {}, ys = {} }
      by[key] = g
      order[#order + 1] = g
    end
    g.xs[#g.xs + 1] = r[p.x]
    g.ys[#g.ys + 1] = r[p.y]
  end
  local points = {}
  for _, g in ipairs(order) do
    local sx, sy = stats.stats(g.xs), stats.stats(g.ys)
    if sx and sy then
      points[#points + 1] = { x = sx.mean, y = sy.mean, label = g.label, front = false }
    end
  end
  -- by x (then the better y first); a point is on the front when it beats every faster one
  local sorted = {}
  for i, pt in ipairs(points) do sorted[i] = pt end
  table.sort(sorted, function(a, b)
    if a.x ~= b.x then return a.x < b.x end
    return a.y > b.y
  end)
  local front, best = {}, -math.huge
  for _, pt in ipairs(sorted) do
    if pt.y > best then
      pt.front = true
      front[#front + 1] = pt
      best = pt.y
    end
  end
  return { points = points, front = front }
end

-- The PNG and SVG of a script body and its plot command, through gnuplot in dir: -> files
-- written and a message when something is missing.
local function run_gnuplot(dir, stem, body, plotcmd, gp, files)
  -- gnuplot runs in dir (cd below), so its script names files relative to dir; Lua names
  -- them dir/NAME.
  local pngname, svgname = ("." .. stem .. ".png.tmp"), ("." .. stem .. ".svg.tmp")
  local pngtmp, svgtmp = dir .. "/" .. pngname, dir .. "/" .. svgname
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

local function append(t, list)
  for _, x in ipairs(list) do t[#t + 1] = x end
end

-- A pareto plot: every point config as a point, the front joined and labelled.
local function render_pareto(dir, rows, p, exp, gp, stem)
  local data = M.pareto_data(rows, p, exp and exp.swept)
  local files = {}
  local about = ("%s: %s against %s"):format(exp and exp.name or "", p.y, p.x)
  local num = json.number_text
  local dat = { ("# %s\n"):format(one_line(about)), "# columns: x y label\n",
    "# index 0: every point config\n" }
  local xs, ys = {}, {}
  for _, pt in ipairs(data.points) do
    dat[#dat + 1] = ("%s %s %s\n"):format(num(pt.x), num(pt.y), data_quote(pt.label))
    xs[#xs + 1], ys[#ys + 1] = pt.x, pt.y
  end
  dat[#dat + 1] = "\n\n# index 1: the non-dominated points, by x\n"
  for _, pt in ipairs(data.front) do
    dat[#dat + 1] = ("%s %s %s\n"):format(num(pt.x), num(pt.y), data_quote(pt.label))
  end
  local datpath = dir .. "/" .. stem .. ".dat"
  fs.write_atomic(datpath, table.concat(dat))
  files[#files + 1] = datpath
  if #data.points == 0 then return files, "no data for " .. stem end
  local logx, logy = auto_log(p.logx, xs, 4), p.logy == true
  local title = ("%s (%s)"):format(p.title or about, M.times_from(rows))
  local gpl = {
    "# gnuplot script written by idxlab report; run from the results directory",
    "set termoption noenhanced",
    "set title " .. gnuplot_quote(title),
    "set xlabel " .. gnuplot_quote(M.label(p.x) .. ", smaller is better"),
    "set ylabel " .. gnuplot_quote(M.label(p.y) .. ", larger is better"),
    "set key outside right top",
    "set grid",
  }
  if logx then gpl[#gpl + 1] = "set logscale x" end
  if logy then gpl[#gpl + 1] = "set logscale y" end
  if exp and exp.swept and #exp.swept > 0 then
    gpl[#gpl + 1] = "set label 1 " .. gnuplot_quote("labels: " .. table.concat(exp.swept, ", "))
      .. " at graph 0.98, graph 0.04 right"
  end
  local xlo, xhi = extent(xs)
  append(gpl, tick_lines("x", p.x, xlo, xhi, logx))
  local ylo, yhi = extent(ys)
  append(gpl, tick_lines("y", p.y, ylo, yhi, logy))
  local q = gnuplot_quote(stem .. ".dat")
  local plotcmd = ("plot %s index 0 using 1:2 with points pt 6 title 'every point config', \\\n"
    .. "     %s index 1 using 1:2 with linespoints lw 2 pt 7 title 'non-dominated', \\\n"
    .. "     %s index 1 using 1:2:3 with labels left offset 1,0.6 font ',8' notitle")
    :format(q, q, q)
  return run_gnuplot(dir, stem, table.concat(gpl, "\n") .. "\n", plotcmd, gp, files)
end

-- render(dir, rows, p, exp, gp) -> files written, and a message when a plot could not be
-- drawn (no data, gnuplot failed): a note for the user, not an error. gp: the gnuplot command
-- or nil (data and script only).
function M.render(dir, rows, p, exp, gp)
  local stem = M.name(p)
  if p.kind == "pareto" then return render_pareto(dir, rows, p, exp, gp, stem) end
  local data = M.data(rows, p, exp and exp.swept)
  local files = {}
  local ynames = table.concat(as_list(p.y), ", ")
  local about = ("%s: %s against %s"):format(exp and exp.name or "", ynames, p.x)
  -- the data file: one gnuplot index block per line
  local dat = { ("# %s\n"):format(one_line(about)), "# columns: x mean min max n label\n" }
  local spread = false
  local num = json.number_text
  local xs, yvals = {}, {}
  for i, ln in ipairs(data.lines) do
    if i > 1 then dat[#dat + 1] = "\n\n" end
    dat[#dat + 1] = ("# line %d: %s\n"):format(i - 1, one_line(ln.title))
    for _, pt in ipairs(ln.points) do
      if pt.n > 1 and pt.hi > pt.lo then spread = true end
      dat[#dat + 1] = ("%s %s %s %s %d %s\n"):format(num(pt.x), num(pt.mean), num(pt.lo),
        num(pt.hi), pt.n, data_quote(pt.label))
      xs[#xs + 1] = pt.x
      yvals[#yvals + 1], yvals[#yvals + 2] = pt.lo, pt.hi
    end
  end
  local datpath = dir .. "/" .. stem .. ".dat"
  fs.write_atomic(datpath, table.concat(dat))
  files[#files + 1] = datpath
  -- the script
  local logx = data.numeric and auto_log(p.logx, xs) or p.logx
  local title = p.title or about
  local ys = as_list(p.y)
  local ylabel = #ys == 1 and M.label(ys[1]) or M.common_label(ys)
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
  else
    local xlo, xhi = extent(xs)
    append(gpl, tick_lines("x", p.x, xlo, xhi, logx, distinct(xs)))
  end
  -- the y ticks follow the metrics' shared unit (several metrics of one unit: "time (µs)")
  local ystyle = M.tick_style(ys[1])
  for _, y in ipairs(ys) do if M.tick_style(y) ~= ystyle then ystyle = nil end end
  if ystyle then
    local ylo, yhi = extent(yvals)
    append(gpl, tick_lines("y", ys[1], ylo, yhi, p.logy == true))
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
  return run_gnuplot(dir, stem, table.concat(gpl, "\n") .. "\n", plotcmd, gp, files)
end

return errors.wrap(M)
