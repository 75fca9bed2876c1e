-- idxlab.repl: the interactive session `bin/idxlab` starts with no arguments (under rlwrap
-- when present, which then does the line editing, the history and Tab completion from the
-- word list M.write_completions writes).
--
--   > b:info()          an expression prints its value, pretty-printed (M.show)
--   > = b:info()        the Lua 5.1 spelling of the same
--   > x = 1             a statement prints nothing, as in the plain Lua REPL
--   > trace()           the traceback of the last error (an error prints its message only)
--
-- Ctrl-C never ends the session: the REPL installs idxlab.interrupt's handler (SIGINT only
-- sets a flag). At the prompt it drops the line being typed; during idxlab.run the runner
-- stops after the point in flight (the step after the kernel in flight) and keeps what is
-- done. Errors print "where: idxlab: message" (where: the line typed, "stdin:N").
--
-- Under rlwrap, a SIGINT would leave rlwrap's own edit buffer in place, so the half-typed line
-- came back after the new prompt. There (bin/idxlab sets IDXLAB_RLWRAP_INTR=1) the REPL turns
-- its terminal's interrupt key off while it waits for a line and back on while code runs;
-- rlwrap -W mirrors that onto the user's terminal, so at the prompt Ctrl-C reaches readline
-- as a key, which bin/idxlab's inputrc binds to insert a literal ^C and accept the line. A line
-- holding ^C is dropped with the chunk being typed, as a SIGINT at the prompt is.
-- Only what runs without a built library is loaded here; the modules that need it (tensor,
-- ffi, interrupt, and idxlab itself) are loaded when first used, so that without a build the
-- REPL is plain Lua and says why.
local errors = require("idxlab.errors")

local M = {}

-- The character a line holds when Ctrl-C was read as a key (see above).
local CTRL_C = "\3"

-- How much of a value is shown: table entries per table, table levels, output lines, and for
-- a tensor the elements shown at each end of a summarised dimension, and the element count
-- up to which a tensor is shown whole.
M.LIMITS = { entries = 50, depth = 3, lines = 200, edge = 3, whole = 64 }

local Tensor -- idxlab.tensor, loaded on the first value shown (false without a build)

local function is_tensor(v)
  if Tensor == nil then
    local ok, mod = pcall(require, "idxlab.tensor")
    Tensor = ok and mod or false
  end
  return Tensor and Tensor.is_tensor(v)
end

-- tostring that never raises (a broken __tostring shows as such).
local function safe_tostring(v)
  local ok, s = pcall(tostring, v)
  if ok and type(s) == "string" then return s end
  return ("<%s: __tostring failed>"):format(type(v))
end

---------------------------------------------------------------------------- tensors

local INT_DTYPES = { i32 = true, u8 = true, e4m3 = true, e2m1x2 = true }

-- The indices of one dimension of size n that are shown: all, or the first and last `edge`
-- with false between them (the "..." place).
local function shown(n, summarize)
  local e = M.LIMITS.edge
  local out = {}
  if not summarize or n <= 2 * e then
    for i = 0, n - 1 do out[#out + 1] = i end
    return out
  end
  for i = 0, e - 1 do out[#out + 1] = i end
  out[#out + 1] = false
  for i = n - e, n - 1 do out[#out + 1] = i end
  return out
end

-- Values of `len` elements of t from element offset `off`, `step` apart: through a view, so
-- a device tensor copies only these elements (one contiguous view when step is 1).
local function fetch(t, off, len, step)
  if step == 1 then return t:view({ len }, off):to_table() end
  local out = {}
  for i = 0, len - 1 do out[i + 1] = t:view({ 1 }, off + i * step):to_table()[1] end
  return out
end

-- The value lines of tensor t: numpy's nested brackets, each summarised dimension showing
-- its first and last elements around "...".
local function tensor_values(t)
  local cd = t.cd
  local ndim = tonumber(cd.ndim)
  local shape, stride = {}, {}
  for d = 1, ndim do
    shape[d], stride[d] = tonumber(cd.shape[d - 1]), tonumber(cd.stride[d - 1])
  end
  local n = t:numel()
  if n == 0 then return "[]" end
  local fmt = INT_DTYPES[t:dtype()] and "%d" or "%.6g"
  if ndim == 0 then return fmt:format(t:to_table()[1]) end
  local summarize = n > M.LIMITS.whole
  -- first pass: the shown values, as nested lists of strings (false: the "..." place)
  local width = 1
  local function collect(d, off)
    local idx = shown(shape[d], summarize)
    local node = {}
    if d == ndim then
      local runs, i = {}, 1 -- contiguous runs of shown indices, one fetch each
      while i <= #idx do
        if idx[i] == false then
          runs[#runs + 1] = false
          i = i + 1
        else
          local j = i
          while idx[j + 1] and idx[j + 1] == idx[j] + 1 do j = j + 1 end
          runs[#runs + 1] = { idx[i], j - i + 1 }
          i = j + 1
        end
      end
      for _, r in ipairs(runs) do
        if r == false then
          node[#node + 1] = false
        else
          for _, v in ipairs(fetch(t, off + r[1] * stride[d], r[2], stride[d])) do
            local s = fmt:format(v)
            width = math.max(width, #s)
            node[#node + 1] = s
          end
        end
      end
    else
      for _, i in ipairs(idx) do
        node[#node + 1] = i ~= false and collect(d + 1, off + i * stride[d]) or false
      end
    end
    return node
  end
  local tree = collect(1, 0)
  -- second pass: the text, numbers right-aligned to one width
  local function render(node, d)
    local parts = {}
    if d == ndim then
      for _, s in ipairs(node) do
        parts[#parts + 1] = s and (" "):rep(width - #s) .. s or "..."
      end
      return "[" .. table.concat(parts, ", ") .. "]"
    end
    for _, child in ipairs(node) do
      parts[#parts + 1] = child and render(child, d + 1) or "..."
    end
    return "[" .. table.concat(parts, ",\n" .. (" "):rep(d)) .. "]"
  end
  return render(tree, 1)
end

-- "Tensor(dtype, {shape}, device)" and its values (summarised past LIMITS.whole elements).
function M.show_tensor(t)
  local head = safe_tostring(t)
  if Tensor.dead_reason(t) then return head end
  local ok, text = pcall(tensor_values, t)
  if not ok then
    return head .. "\n(values not shown: " .. errors.message(text) .. ")"
  end
  return head .. "\n" .. text
end

---------------------------------------------------------------------------- tables

-- A display copy of a table goes to penlight's pretty printer (sorted keys, one entry a line);
-- what it must not expand (a table past the depth limit, a tensor, a function, an object with
-- __tostring) becomes a marker whose text is put back afterwards: "\1<n>\1" stands for a value,
-- "\2<n>\2" for a whole line ("... (N more entries)").
local function marker(texts, text, whole_line)
  texts[#texts + 1] = text
  local tok = (whole_line and "\2%d\2" or "\1%d\1"):format(#texts)
  local u = newproxy(true)
  getmetatable(u).__tostring = function() return tok end
  return u
end

-- The key of the "more entries" line: a userdata key sorts after every string key in pretty.
local function more_key()
  local u = newproxy(true)
  getmetatable(u).__tostring = function() return "more" end
  return u
end

-- The keys of t in pretty's order: the array part, the other keys by type then text, then the
-- remaining numbers in order.
local function ordered_keys(t)
  local keys, n = {}, 0
  while t[n + 1] ~= nil do
    n = n + 1
    keys[n] = n
  end
  local others, nums = {}, {}
  for k in pairs(t) do
    if type(k) == "number" then
      if not (k >= 1 and k <= n and k == math.floor(k)) then nums[#nums + 1] = k end
    else
      others[#others + 1] = k
    end
  end
  table.sort(others, function(a, b)
    if type(a) == type(b) then return safe_tostring(a) < safe_tostring(b) end
    return type(a) < type(b)
  end)
  table.sort(nums)
  for _, k in ipairs(others) do keys[#keys + 1] = k end
  for _, k in ipairs(nums) do keys[#keys + 1] = k end
  return keys
end

local function display(v, depth, texts)
  local tv = type(v)
  if tv == "string" or tv == "boolean" then return v end
  if tv == "number" then
    -- pretty writes integral numbers with %d: keep that for the exact ones only
    if v == math.floor(v) and math.abs(v) >= 2 ^ 53 and math.abs(v) ~= math.huge then
      return marker(texts, ("%.17g"):format(v))
    end
    return v
  end
  if tv ~= "table" then return marker(texts, safe_tostring(v)) end
  if is_tensor(v) then return marker(texts, safe_tostring(v)) end
  local mt = getmetatable(v)
  if type(mt) == "table" and mt.__tostring then return marker(texts, safe_tostring(v)) end
  if depth > M.LIMITS.depth then return marker(texts, next(v) == nil and "{}" or "{...}") end
  local keys = ordered_keys(v)
  local copy = {}
  for i = 1, math.min(#keys, M.LIMITS.entries) do
    local k = keys[i]
    local dk = (type(k) == "string" or type(k) == "number") and k or marker(texts,
      safe_tostring(k))
    copy[dk] = display(v[k], depth + 1, texts)
  end
  if #keys > M.LIMITS.entries then
    copy[more_key()] = marker(texts, ("... (%d more entries)"):format(#keys - M.LIMITS.entries),
      true)
  end
  return copy
end

-- A table's text: pretty.write over the display copy, the markers put back, at most
-- LIMITS.lines lines.
local function show_table(t)
  local texts = {}
  local copy = display(t, 1, texts)
  local out = require("pl.pretty").write(copy, "  ") -- Penlight: loaded when first needed
  out = out:gsub("( *)[^\n]*\2(%d+)\2[^\n]*", function(indent, id)
    return indent .. texts[tonumber(id)]
  end)
  out = out:gsub("\1(%d+)\1", function(id) return texts[tonumber(id)] end)
  local lines, count = {}, 0
  for line in (out .. "\n"):gmatch("([^\n]*)\n") do
    count = count + 1
    if count <= M.LIMITS.lines then lines[count] = line end
  end
  if count > M.LIMITS.lines then
    lines[#lines + 1] = ("... (%d more lines)"):format(count - M.LIMITS.lines)
  end
  return table.concat(lines, "\n")
end

-- The text the REPL prints for a value: a string as it is, a tensor with its values, a table
-- pretty-printed (sorted keys; summarised past LIMITS.entries entries and LIMITS.depth
-- levels), an object with __tostring through it, anything else as tostring.
function M.show(v)
  if type(v) == "string" then return v end
  if is_tensor(v) then return M.show_tensor(v) end
  if type(v) == "table" then
    local mt = getmetatable(v)
    if type(mt) == "table" and mt.__tostring then return safe_tostring(v) end
    return show_table(v)
  end
  return safe_tostring(v)
end

---------------------------------------------------------------------------- completion

-- The words Tab completes: the REPL's globals, every idxlab.<name> (the lazy modules loaded
-- to list their functions) and idxlab.<module>.<name>, and every builder config field.
function M.completions()
  local words, seen = {}, {}
  local function add(w)
    if not seen[w] then
      seen[w] = true
      words[#words + 1] = w
    end
  end
  for _, w in ipairs({ "idxlab", "help", "trace", "print", "require", "pairs", "ipairs" }) do
    add(w)
  end
  local ok, idxlab = pcall(require, "idxlab")
  if ok then
    for _, name in ipairs(idxlab.modules()) do
      local _ = idxlab[name] -- loads it
    end
    for k, v in pairs(idxlab) do
      if type(k) == "string" and not k:match("^_") then
        add("idxlab." .. k)
        if type(v) == "table" then
          for k2 in pairs(v) do
            if type(k2) == "string" and not k2:match("^_") then add("idxlab." .. k .. "." .. k2) end
          end
        end
      end
    end
    local cok, config = pcall(require, "idxlab.config")
    if cok then
      for _, f in ipairs(config.fields) do add(f.name) end
    end
  end
  table.sort(words)
  return words
end

-- Writes the completion word list, one word a line, to path (rlwrap -f path).
function M.write_completions(path)
  local f = assert(io.open(path, "w"))
  f:write(table.concat(M.completions(), "\n"), "\n")
  f:close()
end

---------------------------------------------------------------------------- the loop

local function pack(...) return { n = select("#", ...), ... } end

-- A line (or lines) of input compiled: an expression first (its values are printed), then a
-- statement; "incomplete" when the chunk needs more lines (the message ends in '<eof>').
-- `= expr` is an expression too. The expression is compiled as the argument of a call
-- (`p(expr)`, p given as the chunk's argument), never as `return expr`: a tail call would
-- leave the typed line off the stack, and idxlab errors name that line as their where.
function M.compile(src)
  local body = src:match("^%s*=(.*)$")
  local fn = loadstring("local p_ = ...; return p_(" .. (body or src) .. "\n)", "=stdin")
  if fn then return fn, true end
  local err
  fn, err = loadstring(body and ("return " .. body) or src, "=stdin")
  if fn then return fn, false end
  if err:sub(-7) == "'<eof>'" then return nil, "incomplete" end
  return nil, err
end

-- The text of an error value: an idxlab error's "where: idxlab: message", a string as it is.
local function error_text(e)
  if type(e) == "string" then return e end
  local mt = getmetatable(e)
  if type(mt) == "table" and mt.__tostring then return safe_tostring(e) end
  return ("(error object is a %s value)"):format(type(e))
end

-- The traceback without the REPL's own frames (everything from its xpcall down).
local function trim_traceback(tb)
  local out = {}
  for line in tb:gmatch("[^\n]+") do
    if line:find("in function 'xpcall'", 1, true) then break end
    out[#out + 1] = line
  end
  return table.concat(out, "\n")
end

-- A session: its input, output and error streams (io.stdin, io.stdout, io.stderr by default)
-- and the last traceback.
local Session = {}
Session.__index = Session

-- A new session; it sets the globals idxlab and help (when the library loads) and trace.
function M.session(opts)
  opts = opts or {}
  local s = setmetatable({ input = opts.input or io.stdin, out = opts.out or io.stdout,
    err = opts.err or io.stderr, last_trace = nil, hinted = false,
    interrupt = opts.interrupt, intr_key = opts.intr_key }, Session)
  local ok, idxlab = pcall(require, "idxlab")
  if ok then _G.idxlab, _G.help = idxlab, idxlab.help end
  _G.trace = function() s:trace() end
  return s
end

-- Prints the last error's traceback.
function Session:trace()
  self.out:write(self.last_trace or "no error yet in this session", "\n")
end

-- Evaluates one compiled chunk and prints its values or its error.
function Session:eval(fn, is_expr)
  local intr = self.interrupt
  if intr then intr.clear() end
  local res = pack(xpcall(fn, function(e)
    self.last_trace = trim_traceback(debug.traceback(error_text(e), 2))
    return e
  end, is_expr and pack or nil))
  self.out:flush()
  if not res[1] then
    self.err:write(error_text(res[2]), "\n")
    if not self.hinted then
      self.err:write("(trace() prints the traceback)\n")
      self.hinted = true
    end
    self.err:flush()
    return false
  end
  -- an expression's chunk returns its values packed; a statement's come as they are
  local vals = is_expr and res[2] or { n = res.n - 1, unpack(res, 2, res.n) }
  local parts, multi = {}, false
  for i = 1, vals.n do
    local ok, s = pcall(M.show, vals[i])
    parts[#parts + 1] = ok and s or ("<not shown: " .. error_text(s) .. ">")
    multi = multi or parts[#parts]:find("\n", 1, true) ~= nil
  end
  if #parts > 0 then
    self.out:write(table.concat(parts, multi and "\n" or "\t"), "\n")
    self.out:flush()
  end
  return true
end

-- Reads a line; nil, "interrupt" after Ctrl-C (the read ends with EINTR), nil, "cancel" for
-- a line holding ^C (Ctrl-C read as a key, its line already ended), nil at the end.
function Session:read_line(prompt)
  -- the key goes off before the prompt shows, so rlwrap's next poll after it sees it off
  local key = self.intr_key
  if key then key.off() end
  self.out:write(prompt)
  self.out:flush()
  local intr = self.interrupt
  if intr then intr.clear() end -- a Ctrl-C that stopped the last evaluation is spent
  local line = self.input:read("*l")
  if key then key.on() end
  if line == nil and intr and intr.pending() then
    intr.clear()
    return nil, "interrupt"
  end
  if line and line:find(CTRL_C, 1, true) then return nil, "cancel" end
  -- only SIGINT has a handler, so a read ends early for Ctrl-C alone: nil is the end
  return line
end

-- The loop; returns at the end of input.
function Session:run()
  local buf = nil
  while true do
    local line, why = self:read_line(buf and ">> " or "> ")
    if why == "interrupt" or why == "cancel" then
      buf = nil
      if why == "interrupt" then self.out:write("\n") end
    elseif line == nil then
      self.out:write("\n")
      self.out:flush()
      return
    else
      buf = buf and (buf .. "\n" .. line) or line
      local fn, err = M.compile(buf)
      if fn then
        buf = nil
        self:eval(fn, err)
      elseif err ~= "incomplete" then
        buf = nil
        self.err:write(err, "\n")
        self.err:flush()
      end
    end
  end
end

-- The interrupt key of the terminal on stdin, switched off at the prompt and back on while
-- code runs (see the header); nil when stdin is no terminal or has no interrupt key.
local function intr_key_switch()
  local ffi = require("idxlab.ffi")
  local c = ffi.tty_intr(0)
  if not c or c == 0 then return nil end
  return { off = function() ffi.set_tty_intr(0, 0) end,
    on = function() ffi.set_tty_intr(0, c) end }
end

-- bin/idxlab's entry: the banner, Ctrl-C as a flag, a session (idxlab, help and trace as
-- globals) and its loop. Without a built library the REPL is plain Lua and says why.
function M.main()
  local ok, idxlab = pcall(require, "idxlab")
  local intr, key
  if ok then
    intr = require("idxlab.interrupt")
    if not intr.install() then intr = nil end
    if os.getenv("IDXLAB_RLWRAP_INTR") == "1" then key = intr_key_switch() end
    io.stdout:write("idxlab ", idxlab.version, " -- help() lists what is here; errors never end "
      .. "the session; trace() shows the last traceback\n")
  else
    io.stderr:write("idxlab: the library did not load (", error_text(idxlab), "); plain Lua\n")
  end
  M.session({ interrupt = intr, intr_key = key }):run()
  if key then key.on() end
  if intr then intr.restore() end
end

return M
