-- cli_spec: bin/idxlab's commands from the shell: `script` (benchmarks and the soak run take
-- key=value options), `help`, and errors printed as one "idxlab: ..." line without a Lua
-- file:line prefix, with exit status 1.
local ROOT = os.getenv("IDXLAB_ROOT") or "."
local BIN = ROOT .. "/bin/idxlab"

local support = dofile(ROOT .. "/tests/support.lua")
local sh = support.sh

describe("bin/idxlab", function()
  it("runs a script with key=value options (a short soak on the CPU)", function()
    local rc, out = sh(("cd / && %s script %s/bench/soak.lua steps=6 backend=cpu seed=3")
      :format(BIN, ROOT))
    assert.equals(0, rc, out)
    assert.matches("soak: 6 steps %(%d+ ran, %d+ errors handled%) on cpu; live host bytes 0 %-> 0",
      out)
  end)

  it("runs the quantizer benchmark at a small size", function()
    local rc, out = sh(("%s script %s/bench/quantize_cpu.lua vectors=64 reps=1"):format(BIN, ROOT))
    assert.equals(0, rc, out)
    assert.matches("fp8%s+ties_down%s+k%s+[%d.]+", out)
  end)

  it("refuses a script argument that is not key=value, and an experiment file given to script",
  function()
    local rc, out = sh(("%s script %s/bench/soak.lua 12"):format(BIN, ROOT))
    assert.equals(1, rc)
    assert.matches('^idxlab: script argument "12": expected key=value', out)
    rc, out = sh(("%s script %s/experiments/quick.lua"):format(BIN, ROOT))
    assert.equals(1, rc)
    assert.matches(
      "does not return a table with main%(opts%); experiment files run with `idxlab run`", out)
  end)

  it("prints one clean error line for a bad config", function()
    local rc, out = sh(("%s replay %s/tests/fixtures/replay_steps.safetensors "
      .. "/tmp/never.safetensors --set heads=8"):format(BIN, ROOT))
    assert.equals(1, rc)
    assert.matches("^idxlab: [^\n]*tensor step0/q has shape %[4, 4, 128%]: dimension 2 %(heads%) "
      .. "is 4, expected 8", out)
    assert.is_nil(out:match("%.lua:%d+:"), out)
  end)

  it("prints one clean error line for a hand-edited experiment.json (report, merge) and an "
    .. "inexact --set", function()
    local fs = require("idxlab.fs")
    local d = support.tmpdir("cli-spec")
    local ok, err = pcall(function()
      local q = fs.shell_quote
      local function dir(name, plots, points)
        fs.mkdir_p(d .. "/" .. name)
        support.write(d .. "/" .. name .. "/experiment.json",
          ('{"schema":1,"name":"m","plots":%s,"points":%s}\n'):format(plots, points))
        support.write(d .. "/" .. name .. "/results.jsonl", '{"point":0,"config_hash":"aa"}\n')
        return q(d .. "/" .. name)
      end
      local ok_points = '[{"point":0,"config_hash":"aa"}]'
      local cases = {
        { "report " .. dir("p5", "5", ok_points),
          "p5/experiment%.json: field 'plots' = 5: must be a list of plots" },
        { "report " .. dir("pl5", "[5]", ok_points),
          "pl5/experiment%.json: field 'plots%[1%]' = 5: must be a plot" },
        { "merge " .. q(d .. "/out") .. " " .. dir("pt", "[]", "[1,2]"),
          "pt/experiment%.json: field 'points%[1%]' = 1: must be a planned point" },
        { "config --set max_logits_bytes=9007199254740993",
          "max_logits_bytes = 9007199254740993: not exactly representable" },
      }
      for _, c in ipairs(cases) do
        local rc, out = sh(BIN .. " " .. c[1])
        assert.equals(1, rc, c[1] .. ": " .. out)
        assert.matches("^idxlab: [^\n]*" .. c[2] .. "[^\n]*\n$", out)
        assert.is_nil(out:match("%.lua:%d+:"), out)
      end
    end)
    support.cleanup()
    assert(ok, err)
  end)

  it("lists its commands", function()
    local rc, out = sh(BIN .. " help")
    assert.equals(0, rc)
    for _, cmd in ipairs({ "run", "script", "config", "replay", "report", "merge", "diff" }) do
      assert.matches("\n  " .. cmd .. " ", out)
    end
  end)
end)
