-- bench_topk_cpu.lua -- Question: how long does K6 top-k take per row on the CPU at 128K
-- columns, for k = 512 (V4.1-Flash) and k = 2048 (V3.2)? The target is under 1 ms per row.
--
--   bin/idxlab script bench/topk_cpu.lua
--   luajit bench/topk_cpu.lua [rows] [reps]     (with LUA_PATH as bin/idxlab sets it)
--
-- Method: R rows of 131072 random fp32 logits (and their bf16 copy), one warm-up call, then
-- `reps` timed calls on the context's monotonic clock; each call's time is divided by R.
-- "2 threads" runs the rows on 2 threads (throughput on this 2-core machine), "1 thread" on
-- one (the latency of one row). The median is the headline; the minimum is printed beside it
-- because on a shared machine other processes only ever add time. Sorted and unsorted output.
local M = {
  name = "bench_topk_cpu",
  question = "K6 top-k time per row at 128K columns, k = 512 and 2048, on 2 CPU threads",
}

-- Run directly (`luajit bench/topk_cpu.lua`): needs LUA_PATH as bin/idxlab sets it.
local direct = arg and type(arg[0]) == "string" and arg[0]:match("[^/]*$") == "topk_cpu.lua"
  and not rawget(_G, "IDXLAB_SCRIPT")

-- The shared bench helpers (median, minimum, timing, bf16 bits), from the file beside this one.
local lib = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/lib.lua")

local function bench(opts)
  opts = opts or {}
  local idxlab = require("idxlab")
  local sel = require("idxlab.select")
  local R, N, reps = opts.rows or 32, 131072, opts.reps or 9
  local ctx = idxlab.context{ backend = "cpu", seed = opts.seed or 1, threads = 2 }
  local log = opts.log or print

  math.randomseed(opts.seed or 1)
  local f32 = ctx:tensor("f32", { R, N })
  local p = f32:ptr()
  for i = 0, R * N - 1 do p[i] = (math.random() + math.random() + math.random() - 1.5) * 4 end
  local bf16 = ctx:tensor("bf16", { R, N })
  local q = bf16:ptr()
  for i = 0, R * N - 1 do q[i] = lib.f32_to_bf16(p[i]) end
  local ends = ctx:tensor("i32", { R })
  for r = 0, R - 1 do ends:ptr()[r] = N end

  local rows = {}
  log(("%-6s %-5s %-7s %22s %22s"):format("k", "dtype", "sorted", "us/row 2 threads",
    "us/row 1 thread"))
  log(("%-6s %-5s %-7s %11s %10s %11s %10s"):format("", "", "", "median", "min", "median", "min"))
  for _, k in ipairs({ 512, 2048 }) do
    local out = ctx:tensor("i32", { R, k })
    for _, dt in ipairs({ "f32", "bf16" }) do
      local logits = dt == "f32" and f32 or bf16
      for _, sorted in ipairs({ false, true }) do
        local res = {}
        for _, threads in ipairs({ 2, 1 }) do
          ctx:set_threads(threads)
          local function call() sel.topk(ctx, logits, nil, ends, k, sorted, out) end
          call() -- warm-up
          local times = {}
          for i = 1, reps do times[i] = lib.time_us(ctx, call) / R end
          res[threads] = { lib.median(times), lib.minimum(times) }
        end
        local row = { k = k, dtype = dt, sorted = sorted, columns = N, rows = R,
          us_per_row_2_threads = res[2][1], us_per_row_2_threads_min = res[2][2],
          us_per_row_1_thread = res[1][1], us_per_row_1_thread_min = res[1][2] }
        rows[#rows + 1] = row
        log(("%-6d %-5s %-7s %11.1f %10.1f %11.1f %10.1f"):format(k, dt, tostring(sorted),
          res[2][1], res[2][2], res[1][1], res[1][2]))
      end
    end
    out:free()
  end
  ctx:set_threads(2)
  log(("machine: %s; %d rows x %d columns, median of %d calls"):format(ctx:device_name(), R, N,
    reps))
  f32:free(); bf16:free(); ends:free()
  return rows
end

M.bench = bench

-- `bin/idxlab script bench/topk_cpu.lua key=value ...` calls main(opts) with those values.
function M.main(opts) return bench(opts) end

if direct then bench({ rows = tonumber(arg[1]), reps = tonumber(arg[2]) }) end

return M
