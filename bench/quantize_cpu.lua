-- bench_quantize_cpu.lua -- Question: how long do the quantizers take per 128-vector on the
-- CPU, for every kv_format and quantizer? A step quantizes all of K (outside time_step), so
-- on decode-heavy CPU steps this is wall time a researcher waits for.
--
--   bin/idxlab script bench/quantize_cpu.lua [vectors=N] [reps=N]
--
-- Method: N random normal f32 vectors (131072 by default: one 128K-position K), one warm-up
-- call, then `reps` timed calls on the context's monotonic clock, 2 threads; ns per vector,
-- median and minimum (on a shared machine other processes only ever add time).
local M = {
  name = "bench_quantize_cpu",
  question = "quantization time per 128-vector on 2 CPU threads, every kv_format and quantizer",
}

-- The shared bench helpers (median, minimum, timing), from the file beside this one.
local lib = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/lib.lua")

local function bench(opts)
  opts = opts or {}
  local idxlab = require("idxlab")
  local formats = require("idxlab.formats")
  local V, reps = opts.vectors or 131072, opts.reps or 7
  local ctx = idxlab.context{ backend = "cpu", seed = opts.seed or 1, threads = 2 }
  local log = opts.log or print
  local x = ctx:tensor("f32", { V, 128 })
  require("idxlab.rng").normal(x, { seed = opts.seed or 1 })
  log(("machine: %s; %d vectors of 128, median of %d calls, 2 threads"):format(ctx:device_name(),
    V, reps))
  log(("%-6s %-10s %-4s %12s %12s"):format("format", "quantizer", "role", "ns/vec med",
    "ns/vec min"))
  local rows = {}
  for _, fmt in ipairs({ "mxfp4", "mxfp8", "fp8" }) do
    for _, q in ipairs({ "rne", "ties_down" }) do
      for _, role in ipairs({ "q", "k" }) do
        local codes, scales = formats.quantize(ctx, fmt, q, role, x) -- warm-up, and the outputs
        local times = {}
        for i = 1, reps do
          times[i] = lib.time_us(ctx, function()
            formats.quantize(ctx, fmt, q, role, x, codes, scales)
          end) * 1000 / V
        end
        local med, min = lib.median(times), lib.minimum(times)
        rows[#rows + 1] = { kv_format = fmt, quantizer = q, role = role, vectors = V,
          ns_per_vector = med, ns_per_vector_min = min }
        log(("%-6s %-10s %-4s %12.1f %12.1f"):format(fmt, q, role, med, min))
        codes:free(); scales:free()
      end
    end
  end
  x:free()
  return rows
end

M.bench = bench

-- `bin/idxlab script bench/quantize_cpu.lua key=value ...` calls main(opts).
function M.main(opts) return bench(opts) end

return M
