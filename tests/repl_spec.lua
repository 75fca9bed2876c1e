-- repl_spec: the REPL (lua/idxlab/repl.lua): expressions print their values pretty-printed,
-- errors their message alone (trace() the traceback), Tab's word list, and Ctrl-C through a
-- real pseudo-terminal (tests/support/pty.lua), with and without rlwrap: at the prompt it
-- drops the line (under rlwrap too: rlwrap's edit buffer is cleared), during idxlab.run it
-- stops after the point in flight and keeps the rest.
-- Every wait is bounded; every session is closed and its processes checked gone.
local repl = require("idxlab.repl")
local idxlab = require("idxlab")
local Tensor = require("idxlab.tensor")
local support = dofile("tests/support.lua")
local pty = dofile("tests/support/pty.lua")
local fs = require("idxlab.fs")
local results = require("idxlab.results")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"
local BLOCKING = ROOT .. "/tests/support/blocking_measure.lua"

teardown(support.cleanup)

-- A session over strings: `lines` in, what it writes collected.
local function fake_session(lines)
  local i = 0
  local out, err = {}, {}
  local function sink(t)
    return { write = function(self, ...)
      for _, s in ipairs({ ... }) do t[#t + 1] = s end
      return self
    end, flush = function() end }
  end
  local input = { read = function()
    i = i + 1
    return lines[i]
  end }
  local s = repl.session({ input = input, out = sink(out), err = sink(err) })
  return s, function() return table.concat(out) end, function() return table.concat(err) end
end

describe("repl: reading a line", function()
  it("compiles an expression, `= expr`, a statement, and knows an incomplete chunk", function()
    local fn, is_expr = repl.compile("1 + 2")
    assert.is_function(fn)
    assert.is_true(is_expr)
    assert.is_true(select(2, repl.compile("= 1 + 2")))
    fn, is_expr = repl.compile("x_repl_spec = 1")
    assert.is_function(fn)
    assert.is_false(is_expr)
    assert.same({ nil, "incomplete" }, { repl.compile("x = 1 +") })
    assert.same({ nil, "incomplete" }, { repl.compile("for i = 1, 2 do") })
    local _, err = repl.compile("x y")
    assert.matches("^stdin:1: ", err)
  end)
end)

describe("repl: values", function()
  it("prints nested tables with sorted keys", function()
    assert.equals('{\n  a = 1,\n  b = {\n    c = "x",\n    d = true\n  },\n  z = 2\n}',
      repl.show({ z = 2, a = 1, b = { d = true, c = "x" } }))
    assert.equals("{\n  1,\n  2,\n  k = 3\n}", repl.show({ 1, 2, k = 3 }))
  end)

  it("summarises past 50 entries and 3 levels", function()
    local big = {}
    for i = 1, 60 do big[i] = i end
    local s = repl.show(big)
    assert.matches("\n  50,\n", s)
    assert.is_nil(s:find("\n  51,", 1, true))
    assert.matches("%.%.%. %(10 more entries%)", s)
    local deep = repl.show({ a = { b = { c = { d = 1 } } } })
    assert.matches("c = {%.%.%.}", deep)
    assert.is_nil(deep:find("d = 1", 1, true))
  end)

  it("shows strings as they are, functions and objects through tostring", function()
    assert.equals("plain text", repl.show("plain text"))
    assert.equals("nil", repl.show(nil))
    local e = require("idxlab.errors").new("ARG", "bad", "stdin:1")
    assert.equals("stdin:1: idxlab: bad", repl.show(e))
    assert.matches("f = function: ", repl.show({ f = print }))
  end)

  it("shows a tensor's dtype, shape, device and values, summarised past 64 elements", function()
    local ctx = idxlab.context({ backend = "cpu" })
    local t = ctx:tensor("i32", { 2, 3 }):from_table({ 1, 2, 3, 4, 5, 60 })
    assert.equals("Tensor(i32, {2, 3}, host)\n[[ 1,  2,  3],\n [ 4,  5, 60]]", repl.show(t))
    local vals = {}
    for i = 1, 4 * 128 do vals[i] = i - 1 end
    local big = ctx:tensor("f32", { 4, 128 }):from_table(vals)
    local s = repl.show(big)
    assert.matches("^Tensor%(f32, {4, 128}, host%)\n", s)
    assert.matches("%[%[  0,   1,   2, %.%.%., 125, 126, 127%],", s)
    assert.matches("%[384, 385, 386, %.%.%., 509, 510, 511%]%]$", s)
    assert.equals("{\n  x = Tensor(f32, {4, 128}, host)\n}", repl.show({ x = big }))
    ctx:free()
  end)

  it("copies only the elements it shows (views, so a device tensor moves no more)", function()
    local ctx = idxlab.context({ backend = "cpu" })
    local t = ctx:tensor("f32", { 100, 1000 })
    t:fill_bytes(0)
    local orig, copied = Tensor.to_table, 0
    Tensor.to_table = function(self)
      copied = copied + self:numel()
      return orig(self)
    end
    local ok, s = pcall(repl.show, t)
    Tensor.to_table = orig
    assert.is_true(ok, s)
    assert.equals(6 * 6, copied)
    ctx:free()
  end)
end)

describe("repl: a session", function()
  it("prints values, nothing for a statement, an error's message alone; trace() the rest",
    function()
    local s, out, err = fake_session({
      "repl_spec_x = 40", "repl_spec_x + 2", "= 'a', nil", "repl_spec_x = nil",
      "idxlab.builder{candidate_block_size = 12}", "trace()", "error('boom')",
    })
    s:run()
    local o, e = out(), err()
    assert.matches("^> > 42\n> a\tnil\n> > ", o)
    assert.matches("stdin:1: idxlab: sparse_block_kv = auto: pick_sparse_block_kv", e)
    assert.is_nil(e:find("stack traceback", 1, true))
    assert.is_nil(e:find("errors.lua", 1, true))
    assert.matches("trace%(%) prints the traceback", e)
    assert.matches("stack traceback:\n", o)
    assert.matches("stdin:1: in main chunk", o)
    assert.matches("stdin:1: boom\n", e)
  end)

  it("reads a chunk over several lines", function()
    local s, out = fake_session({ "repl_spec_f = function(a)", "return a * 2", "end",
      "repl_spec_f(21)" })
    s:run()
    assert.matches("> >> >> > 42\n", out())
    repl_spec_f = nil -- luacheck: ignore
  end)
end)

describe("repl: Tab's word list", function()
  it("holds idxlab. names, module functions and config fields", function()
    local words = {}
    for _, w in ipairs(repl.completions()) do words[w] = true end
    for _, w in ipairs({ "idxlab.builder", "idxlab.run", "idxlab.config.defaults",
      "idxlab.experiment.plan", "idxlab.context", "candidate_block_size", "index_topk",
      "trace", "help" }) do
      assert.is_true(words[w], w)
    end
    local d = support.tmpdir("repl")
    repl.write_completions(d .. "/words")
    assert.matches("\nidxlab%.builder\n", fs.read_file(d .. "/words"))
  end)
end)

-- A tiny experiment of 8 points for the interrupt tests.
local TINY = [[
return {
  name = "tiny", question = "does Ctrl-C keep the done points?", seed = 3, backend = "cpu",
  workload = { decode = { rows = 2, context = 8192 }, prefill = false, consumer_layers = 2 },
  config = { index_topk = 64, max_rows = 64, max_model_len = 65536 },
  sweep = { candidate_topk_blocks = { 64, 128, 256, 512 }, candidate_block_size = { 8, 16 } },
  metrics = { "recall_at_k" },
}
]]

local function have(cmd) return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == 0 end

-- One pty session of bin/idxlab; rlwrap = whether rlwrap wraps it. -> the pty, its REPL's pid.
local function start(d, rlwrap)
  local p = pty.start(d, fs.shell_quote(BIN), { IDXLAB_RLWRAP = rlwrap and "1" or "0",
    HOME = d, XDG_CACHE_HOME = d .. "/cache", IDXLAB_FAKE_MEASURE = BLOCKING,
    IDXLAB_BLOCK_TIMEOUT = "8" })
  p:expect("help() lists what is here")
  p:expect("> ")
  p:send("= require('idxlab.ffi').getpid()\n")
  local pid = p:expect("\n(%d+)\n", 5, true):match("\n(%d+)\n$")
  p:expect("> ")
  return p, pid
end

-- Ctrl-C while idxlab.run's second point blocks: the run stops, the first point is kept, the
-- prompt comes back and the session goes on. rlwrap_pid: under rlwrap, whose terminal must
-- have Ctrl-C as its interrupt key again (mirrored from the REPL's) before the key is sent.
local function interrupt_run(p, d, rlwrap_pid)
  local file = d .. "/tiny.lua"
  support.write(file, TINY)
  p:send(("r = idxlab.run(%q, {out = %q, progress = 'plain'})\n"):format(file, d .. "/res"))
  p:expect("[1/8]")
  if rlwrap_pid then pty.expect_tty(rlwrap_pid, "intr = ^C;") end
  p:send("\3")
  p:expect("interrupted: 1 of 8 points of this run done", 10)
  p:expect("> ")
  p:send("= r.status, r.new_rows, #r.rows\n")
  p:expect("130\t1\t1")
  p:expect("> ")
  assert.equals(1, #results.read_jsonl(d .. "/res/tiny/results.jsonl"))
end

describe("repl: Ctrl-C at a terminal (pty)", function()
  local have_script = have("script")

  it("without rlwrap: clears the line at the prompt, stops a run, keeps the session", function()
    if not have_script then pending("util-linux script is not installed") return end
    local d = support.tmpdir("repl-pty")
    local p, pid = start(d, false)
    local ok, err = pcall(function()
      p:send("x = 'kept'\n")
      p:expect("> ")
      p:send("= 12")
      p:expect("= 12")
      p:send("\3")
      p:expect("> ")
      p:send("= x .. '!'\n") -- had "= 12" stayed, this line would not compile
      p:expect("kept!\n")
      p:expect("> ")
      interrupt_run(p, d)
      p:send("b:info()\n")
      p:expect("attempt to index global 'b'")
      p:send("b = idxlab.builder{candidate_block_size = 16}\n")
      p:expect("> ")
      p:send("b:info()\n")
      p:expect("candidate_block_size = 16,")
    end)
    local clean = p:close({ pid })
    assert.is_true(ok, err)
    assert.is_true(clean, "the session did not end on Ctrl-D")
    assert.is_false(pty.alive(pid))
  end)

  it("with rlwrap: completes with Tab, clears the line and stops a run on Ctrl-C, keeps the "
    .. "session", function()
    if not have_script then pending("util-linux script is not installed") return end
    if not have("rlwrap") then pending("rlwrap is not installed") return end
    local d = support.tmpdir("repl-rlwrap")
    local p, pid = start(d, true)
    local rlwrap_pid = pty.ppid(pid)
    local ok, err = pcall(function()
      assert.is_truthy(rlwrap_pid)
      -- at the prompt Ctrl-C is a key to readline (the REPL turned the interrupt key off and
      -- rlwrap mirrored it): the half-typed line, and the chunk being typed, are dropped
      p:send("x = 'kept'\n")
      p:expect("> ")
      pty.expect_tty(rlwrap_pid, "intr = <undef>;")
      p:send("= 12")
      p:expect("= 12")
      p:send("\3")
      p:expect("^C\n")
      p:expect("> ")
      pty.expect_tty(rlwrap_pid, "intr = <undef>;")
      p:send("= x .. '!'\n") -- had rlwrap kept "= 12", this line would not compile
      local seen = p:expect("kept!\n")
      assert.is_nil(seen:find("12", 1, true), seen)
      p:expect("> ")
      p:send("f = function()\n")
      p:expect(">> ")
      pty.expect_tty(rlwrap_pid, "intr = <undef>;")
      p:send("return 1")
      p:expect("return 1")
      p:send("\3")
      p:expect("^C\n")
      p:expect("> ")
      p:send("= x .. '?'\n") -- had the chunk stayed, this would be its second line
      p:expect("kept?\n")
      p:expect("> ")
      p:send("= idxlab.vers\t\n") -- completes to idxlab.version
      p:expect(idxlab.version .. "\n")
      p:expect("> ")
      p:send("b = idxlab.builder{candidate_block_s\t= 16}\n") -- a config field
      p:expect("> ")
      p:send("= b:info().candidate_block_size\n")
      p:expect("16\n")
      p:expect("> ")
      p:send("\3") -- at an empty prompt: a fresh prompt, the session intact
      p:expect("> ")
      interrupt_run(p, d, rlwrap_pid)
    end)
    local clean = p:close({ pid })
    assert.is_true(ok, err)
    assert.is_true(clean, "the session did not end on Ctrl-D")
    assert.is_false(pty.alive(pid))
    assert.matches("\nidxlab%.builder\n", fs.read_file(d .. "/cache/idxlab/completions"))
  end)
end)
