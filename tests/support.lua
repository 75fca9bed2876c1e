-- support.lua: what several spec files share (loaded with dofile, not a spec itself): private
-- temporary directories, removed with `teardown(support.cleanup)`, writing a file, running a
-- shell command, whether a tool is there, the error a call raises, normal draws, a step's
-- output sink, the experiment runner's fake measure, and comparing two runs' results rows.
local luassert = require("luassert")
local fs = require("idxlab.fs")
local results = require("idxlab.results")

local M = {}

local made = {}

-- A fresh directory named after a unique os.tmpname() file (mkstemp), so two test runs at
-- once (another build dir, the same second, the same random seed) never share one.
function M.tmpdir(tag)
  local reserve = os.tmpname()
  local d = reserve .. "-idxlab-" .. (tag or "spec")
  fs.mkdir_p(d)
  made[#made + 1] = { d, reserve }
  return d
end

function M.cleanup()
  for _, t in ipairs(made) do
    os.execute("rm -rf " .. fs.shell_quote(t[1]))
    os.remove(t[2])
  end
  made = {}
end

-- The experiment runner's stand-in for the kernels (tests/support/fake_measure.lua): the
-- function, for experiment.run's `fake` option, and its path, for IDXLAB_FAKE_MEASURE.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests"
M.FAKE_MEASURE = here .. "/support/fake_measure.lua"
M.fake_measure = dofile(M.FAKE_MEASURE)

function M.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- support.sh(cmd) -> exit status, output (stdout and stderr together).
function M.sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  return tonumber(out:match("rc=(%d+)%s*$")), (out:gsub("rc=%d+%s*$", ""))
end

-- support.have(tool, why) -> whether the command `tool` is on the PATH. Under CI=true a missing
-- one fails the spec; elsewhere the spec is marked pending with `why` (default: "<tool> is not
-- installed") and the caller returns.
function M.have(tool, why)
  why = why or tool .. " is not installed"
  local ok = os.execute("command -v " .. tool .. " >/dev/null 2>&1")
  if ok == 0 or ok == true then return true end
  luassert.is_nil(os.getenv("CI") == "true" and tool or nil,
    tool .. " is missing under CI: " .. why)
  getfenv(2).pending(why) -- busted's pending lives in the spec's environment, not in _G
  return false
end

-- support.err_of(f, ...) -> tostring of the error f(...) raised; fails the spec when it
-- raised none. A library error's `where` names the line that called f: pass a closure written
-- in the spec when that line is checked.
function M.err_of(f, ...)
  local ok, err = pcall(f, ...)
  luassert.is_false(ok, "expected an error")
  return tostring(err)
end

-- One standard normal draw from the spec's math.random (Box-Muller, two draws, u never 0).
function M.normal()
  local u, v = 1 - math.random(), math.random()
  return math.sqrt(-2 * math.log(u)) * math.cos(2 * math.pi * v)
end

-- A step's `keep` sink that stores every output it is given as a table: outs[name][r0] for a
-- step output, outs[name .. layer][r0] for a per-layer one. -> outs, keep.
function M.keep_outputs()
  local outs = {}
  return outs, {
    put = function(name, t, r0)
      outs[name] = outs[name] or {}
      outs[name][r0] = t:to_table()
    end,
    put_layer = function(name, l, t, r0)
      outs[name .. l] = outs[name .. l] or {}
      outs[name .. l][r0] = t:to_table()
    end,
  }
end

-- The two results.jsonl files hold the same points, each with the same config hash and the
-- same timeless row (results.compare_rows, which `idxlab compare` prints; drop(k), when
-- given, is true for more keys to leave out).
function M.assert_same_rows(ref_path, got_path, drop)
  local ref, got = results.read_jsonl(ref_path), results.read_jsonl(got_path)
  luassert.equals(#ref, #got)
  local rep = results.compare_rows(ref, got, drop)
  luassert.is_true(rep.same, table.concat(rep.lines, "\n") .. (#rep.only_ref + #rep.only_got > 0
    and ("\npoints on one side only: " .. table.concat(rep.only_ref, ",") .. " | "
      .. table.concat(rep.only_got, ",")) or ""))
  luassert.is_true(rep.points > 0)
end

return M
