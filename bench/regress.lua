-- bench/regress.lua: the GPU benchmarks' regression guard (issue 15). It compares each figure
-- of a benchmark run with the last one recorded in BENCHMARKS.md and lists those more than a
-- threshold slower. It informs, it is not a test: the exit status is 0 whether or not
-- anything got slower; only a malformed baseline or results file (or a missing one) raises.
--
--   bin/idxlab script bench/regress.lua current=FILE [baseline=BENCHMARKS.md]
--     [threshold=0.10] [variant=NAME]
--
-- The baseline is BENCHMARKS.md's one fenced block opened by ```bench-baseline: one figure a
-- line, `name value_us date` (date YYYY-MM-DD), `#` comments and blank lines allowed. A name
-- is family/case/variant, e.g. topk/64x16384_bf16_k512/v2, logits/k2_decode_1x128k_fp8_h64/v2,
-- step/quick_gpu/time_step_us. Recording a new figure means editing its line there.
--
-- FILE is one of (told apart by its content):
--   the CSV bench/bench_logits.c writes (header `name,kernel,...,us_median,...`): each row is
--     logits/<name>/<variant> = us_median; variant is the logits variant the run pinned
--     (IXL_LOGITS_VARIANT), passed as variant=, "default" when none was pinned;
--   a log of bench/topk_gpu.sh (lines `# topkbench NAME MODE single S us batch B us ...` and
--     `# torchtopk NAME torch single ...`, every other line ignored): topk/<NAME>/<MODE> =
--     the batch median B;
--   plain text: `name value_us` a line, `#` comments and blank lines allowed (bench/step.lua
--     writes its figures so, as step/<case>/<field>, and runs this guard on them).
--
-- Output: one line per figure found in both (baseline, now, change), then the baseline's
-- figures of the same families (topk, logits, ...) that the run did not measure ("missing"),
-- then the list of those more than threshold slower (or "none").
local errors = require("idxlab.errors")

local fail = errors.fail

local M = {}

local function read_lines(path)
  local f, err = io.open(path, "r")
  if not f then fail("regress: cannot open %s: %s", path, tostring(err)) end
  local lines = {}
  for line in f:lines() do lines[#lines + 1] = (line:gsub("\r$", "")) end
  f:close()
  return lines
end

local NAME = "^[%w_.:%-]+/[%w_.:%-]+/[%w_.:%-]+$"

-- a positive finite number of microseconds, or nil
local function micros(s)
  local v = tonumber(s)
  if v and v > 0 and v < math.huge then return v end
  return nil
end

-- The baseline block of BENCHMARKS.md's lines: { list = {name...}, [name] = {us, date} }.
function M.parse_baseline(lines, path)
  path = path or "baseline"
  local first, last
  for i, line in ipairs(lines) do
    if not first then
      if line:match("^```bench%-baseline%s*$") then first = i end
    elseif line:match("^```%s*$") then
      last = i
      break
    end
  end
  if not first then fail("regress: %s: no ```bench-baseline block", path) end
  if not last then fail("regress: %s:%d: the bench-baseline block is not closed", path, first) end
  local base = { list = {} }
  for i = first + 1, last - 1 do
    local line = lines[i]
    if not (line:match("^%s*$") or line:match("^%s*#")) then
      local name, us, date = line:match("^%s*(%S+)%s+(%S+)%s+(%S+)%s*$")
      if not name or not name:match(NAME) or not micros(us)
          or not date:match("^%d%d%d%d%-%d%d%-%d%d$") then
        fail("regress: %s:%d: expected `family/case/variant value_us YYYY-MM-DD`, got %q",
          path, i, line)
      end
      if base[name] then fail("regress: %s:%d: %s recorded twice", path, i, name) end
      base[name] = { us = micros(us), date = date }
      base.list[#base.list + 1] = name
    end
  end
  return base
end

-- The current figures of a results file's lines: { list = {name...}, [name] = us }.
function M.parse_current(lines, path, variant)
  path = path or "current"
  local cur = { list = {} }
  local function add(i, name, us)
    if not name:match(NAME) then fail("regress: %s:%d: bad figure name %q", path, i, name) end
    if cur[name] then fail("regress: %s:%d: %s given twice", path, i, name) end
    cur[name] = us
    cur.list[#cur.list + 1] = name
  end
  local head
  for _, line in ipairs(lines) do
    if line:match("%S") then head = line break end
  end
  if head and head:match("^name,kernel,") then
    -- bench_logits.c's CSV: the columns by the header's names
    local col, ncol = {}, 0
    for field in (head .. ","):gmatch("([^,]*),") do
      ncol = ncol + 1
      col[field] = ncol
    end
    if not col.us_median then fail("regress: %s: the CSV header has no us_median", path) end
    local seen_head = false
    for i, line in ipairs(lines) do
      if line:match("%S") then
        if not seen_head then
          seen_head = true
        else
          local f = {}
          for field in (line .. ","):gmatch("([^,]*),") do f[#f + 1] = field end
          local us = micros(f[col.us_median])
          if #f ~= ncol or not us then
            fail("regress: %s:%d: expected %d CSV fields with a positive us_median, got %q",
              path, i, ncol, line)
          end
          add(i, ("logits/%s/%s"):format(f[col.name], variant or "default"), us)
        end
      end
    end
    return cur
  end
  local log = false
  for _, line in ipairs(lines) do
    if line:match("^# topkbench ") or line:match("^# torchtopk ") then log = true break end
  end
  for i, line in ipairs(lines) do
    if log then
      if line:match("^# topkbench ") or line:match("^# torchtopk ") then
        local shape, mode, us = line:match(
          "^# %a+%s+(%S+)%s+(%S+)%s+single%s+%S+%s+us%s+batch%s+(%S+)%s+us")
        if not shape or not micros(us) then
          fail("regress: %s:%d: expected `# topkbench NAME MODE single S us batch B us`, got %q",
            path, i, line)
        end
        add(i, ("topk/%s/%s"):format(shape, mode), micros(us))
      end
    elseif not (line:match("^%s*$") or line:match("^%s*#")) then
      local name, us = line:match("^%s*(%S+)%s+(%S+)%s*$")
      if not name or not micros(us) then
        fail("regress: %s:%d: expected `family/case/variant value_us`, got %q", path, i, line)
      end
      add(i, name, micros(us))
    end
  end
  if #cur.list == 0 then fail("regress: %s: no figures", path) end
  return cur
end

-- Compares: { rows = {{name, base, now, change, date}...}, missing = {name...},
-- slower = {row...} } where change = now / base - 1 and slower holds change > threshold.
function M.compare(base, cur, threshold)
  local families = {}
  for _, name in ipairs(cur.list) do families[name:match("^[^/]+")] = true end
  local out = { rows = {}, missing = {}, slower = {} }
  for _, name in ipairs(base.list) do
    local b, now = base[name], cur[name]
    if now then
      local row = { name = name, base = b.us, now = now, change = now / b.us - 1, date = b.date }
      out.rows[#out.rows + 1] = row
      if row.change > threshold then out.slower[#out.slower + 1] = row end
    elseif families[name:match("^[^/]+")] then
      out.missing[#out.missing + 1] = name
    end
  end
  return out
end

-- The report's lines (no trailing newline on each).
function M.report(out, threshold)
  local lines = {}
  local function put(fmt, ...) lines[#lines + 1] = fmt:format(...) end
  put("# regression guard: %d compared with BENCHMARKS.md's baseline (threshold %.0f%%)",
    #out.rows, threshold * 100)
  for _, r in ipairs(out.rows) do
    put("%-44s %10.2f us -> %10.2f us  %+6.1f%%  (baseline %s)", r.name, r.base, r.now,
      r.change * 100, r.date)
  end
  for _, name in ipairs(out.missing) do
    put("%-44s missing (in the baseline, not measured)", name)
  end
  if #out.slower == 0 then
    put("# slower than the baseline by more than %.0f%%: none", threshold * 100)
  else
    put("# slower than the baseline by more than %.0f%%: %d", threshold * 100, #out.slower)
    for _, r in ipairs(out.slower) do
      put("SLOWER %s %.2f us -> %.2f us (%+.1f%%)", r.name, r.base, r.now, r.change * 100)
    end
  end
  return lines
end

-- Runs the guard on files; returns the comparison (main prints its report).
function M.run(opts)
  if type(opts.current) ~= "string" then
    fail("regress: usage: bench/regress.lua current=FILE [baseline=BENCHMARKS.md]"
      .. " [threshold=0.10] [variant=NAME]")
  end
  local threshold = opts.threshold or 0.10
  if type(threshold) ~= "number" or threshold < 0 then
    fail("regress: threshold=%s: expected a number >= 0", tostring(threshold))
  end
  local bpath = opts.baseline or "BENCHMARKS.md"
  local base = M.parse_baseline(read_lines(bpath), bpath)
  local variant = opts.variant ~= nil and tostring(opts.variant) or nil
  local cur = M.parse_current(read_lines(opts.current), opts.current, variant)
  local out = M.compare(base, cur, threshold)
  out.lines = M.report(out, threshold)
  return out
end

function M.main(opts)
  local out = M.run(opts)
  io.write(table.concat(out.lines, "\n"), "\n")
end

return M
