-- soak_spec: a bounded run of bench/soak.lua on the CPU (the GPU script runs a longer
-- one on the GPU): random steps, random configs and interleaved errors leave the context's
-- live memory where it started, and every error is a clean idxlab error.
describe("soak", function()
  it("runs random steps and errors without moving live memory", function()
    local root = os.getenv("IDXLAB_ROOT") or "."
    local soak = dofile(root .. "/bench/soak.lua")
    local steps = tonumber(os.getenv("IDXLAB_SOAK_STEPS") or "") or 120
    local out = soak.soak({ steps = steps, backend = "cpu", seed = 7, log = function() end })
    assert.equals(steps, out.steps)
    assert.is_true(out.ok_steps > steps / 2)
    assert.is_true(out.errors > 0)
    assert.equals(out.host_bytes_start, out.host_bytes_end)
  end)
end)
