-- idxlab.progress: what a running experiment shows. On a terminal, one progress bar line
-- redrawn in place (the point, its parameters, the ETA and the last metric), via lua-term;
-- otherwise (a pipe, a log file, CI) one plain line per finished point. Notes (skipped or
-- failed points) print on their own line without breaking the bar.
-- IDXLAB_PROGRESS=bar|plain|off forces a style. Times come from the library's one host
-- monotonic clock (idxlab.ffi.now_us).
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local fail = errors.fail

local M = {}

local term_ok, term = pcall(require, "term")

local Progress = {}
Progress.__index = Progress

local function fmt_duration(s)
  if s == nil or s ~= s or s == math.huge then return "?" end
  if s < 10 then return ("%.1fs"):format(s) end
  s = math.floor(s + 0.5)
  if s < 60 then return ("%ds"):format(s) end
  if s < 3600 then return ("%dm%02ds"):format(math.floor(s / 60), s % 60) end
  return ("%dh%02dm"):format(math.floor(s / 3600), math.floor(s / 60) % 60)
end
M.fmt_duration = fmt_duration

local function fmt_value(v)
  if type(v) ~= "number" then return tostring(v) end
  if v ~= v then return "nan" end
  if v == math.floor(v) and math.abs(v) < 1e15 then return ("%d"):format(v) end
  if math.abs(v) >= 1000 then return ("%.1f"):format(v) end
  return ("%.4g"):format(v)
end
M.fmt_value = fmt_value

-- Seconds on the monotonic clock (os.time has 1 s resolution; os.clock is this process's CPU
-- time, wrong when kernels use several threads or the GPU).
function M.now() return core.now_us() * 1e-6 end

-- The styles progress.new takes.
M.STYLES = { bar = true, plain = true, off = true }

-- progress.new{ total = n, out = io.stderr, style = "bar"|"plain"|"off"|nil (auto),
--               width = columns, title = "name" }
function M.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then fail("progress.new: options must be a table") end
  local total = opts.total or 0
  if type(total) ~= "number" or total < 0 then
    fail("progress.new: total = %s: must be a non-negative number", tostring(total))
  end
  local out = opts.out or io.stderr
  local style = opts.style or os.getenv("IDXLAB_PROGRESS")
  if style == nil or style == "" then
    style = (term_ok and term.isatty(out)) and "bar" or "plain"
  end
  if not M.STYLES[style] then
    fail("progress style = %s: must be bar, plain or off", tostring(style))
  end
  local width = opts.width or tonumber(os.getenv("COLUMNS") or "")
  if not width and style == "bar" then
    local p = io.popen("stty size < /dev/tty 2>/dev/null")
    local text = p and p:read("*a") or ""
    if p then p:close() end
    width = tonumber(text:match("^%d+%s+(%d+)"))
  end
  width = width or 100
  local self = setmetatable({
    total = total, out = out, style = style, width = math.max(width, 40), done = 0,
    started = M.now(), title = opts.title or "", bar_shown = false, last_metric = nil,
    point_started = nil, current = nil,
  }, Progress)
  return self
end

function Progress:eta()
  if self.done == 0 then return nil end
  local elapsed = M.now() - self.started
  return elapsed / self.done * (self.total - self.done)
end

local function cleareol(out)
  if term_ok and io.type(out) == "file" then term.cleareol(out) else out:write("\27[K") end
end

function Progress:clear_bar()
  if self.bar_shown then
    self.out:write("\r")
    cleareol(self.out)
    self.bar_shown = false
  end
end

-- One line: the bar and count, the current point (shortened to fit), the ETA, the metric.
function Progress:draw()
  if self.style ~= "bar" then return end
  local frac = self.total > 0 and self.done / self.total or 1
  local barw = 20
  local filled = math.floor(frac * barw + 0.5)
  local head = ("[%s%s] %d/%d"):format(("="):rep(filled), (" "):rep(barw - filled), self.done,
    self.total)
  local tail = " | ETA " .. fmt_duration(self:eta())
    .. (self.last_metric and (" | " .. self.last_metric) or "")
  local room = self.width - 1 - #head - #tail - 3
  local desc = self.current or ""
  if room < 8 then desc = "" elseif #desc > room then desc = desc:sub(1, room - 3) .. "..." end
  local line = head .. (desc ~= "" and (" | " .. desc) or "") .. tail
  self.out:write("\r", line)
  cleareol(self.out)
  self.out:flush()
  self.bar_shown = true
end

-- A point starts: desc names it (e.g. "point 3: candidate_block_size=16").
function Progress:start_point(desc)
  self.current = desc
  self.point_started = M.now()
  self:draw()
end

-- A point finished; metric_name/value: the metric to show (may be nil).
function Progress:finish_point(metric_name, value)
  self.done = self.done + 1
  if metric_name ~= nil then
    self.last_metric = ("%s %s"):format(metric_name, value == nil and "null" or fmt_value(value))
  end
  if self.style == "plain" then
    local took = self.point_started and (M.now() - self.point_started) or 0
    self.out:write(("[%d/%d] %s%s (%s, ETA %s)\n"):format(self.done, self.total,
      self.current or "", self.last_metric and (": " .. self.last_metric) or "",
      fmt_duration(took), fmt_duration(self:eta())))
    self.out:flush()
  else
    self:draw()
  end
end

-- A point that did not finish (an error): counted, reported on its own line.
function Progress:fail_point(msg)
  self.done = self.done + 1
  self:note(msg)
end

-- A line of its own that does not break the bar.
function Progress:note(msg)
  if self.style == "off" then return end
  self:clear_bar()
  self.out:write(msg, "\n")
  self.out:flush()
  self:draw()
end

function Progress:finish()
  if self.style == "bar" and self.bar_shown then
    self.out:write("\n")
    self.out:flush()
    self.bar_shown = false
  end
end

-- The public boundary: new (the formatters and the clock raise nothing).
return errors.wrap(M, { "fmt_duration", "fmt_value", "now" })
