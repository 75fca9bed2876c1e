-- bench_cpu.lua -- Question: how close do the CPU logits kernels come to this machine's FMA
-- peak? K1 (dense, mxfp4 keys, fp32 and bf16 reductions) and K5 (sparse, ragged and paged) at
-- the V4.1-Flash shape (H = 32, D = 128), on the context's threads (2 by default).
--
--   luajit bench/cpu.lua [reps [threads]]   (LUA_PATH or the checkout's lua/)
--   bin/idxlab script bench/cpu.lua [reps=N] [rows=N] [positions=N] [threads=N]
--
-- Method: inputs are random normal q and k quantized with the production rule (mxfp4, rne);
-- every row sees all N keys (K1) or 1024 sparse blocks of 16 (K5: 16384 positions, T * cbs of
-- V4.1-Flash). One warm-up call, then `reps` timed calls on the context's monotonic clock;
-- median and best. FLOPs count the multiply-adds of the dot products only: 2 * H * 128 per
-- valid (row, position). The peak is an AVX2 FMA loop (10 independent 8-wide chains) on the
-- same threads, timed like the kernel: `reps` runs as long as the kernel's median call,
-- interleaved with the kernel's runs, median and best. So each ratio compares numbers taken
-- the same way at the same moments of the same run; on a shared machine both sides suffer
-- alike, and the best/best ratio is the closer estimate of the uncontended one.
local M = {
  name = "bench_cpu",
  question = "Achieved GFLOP/s of the CPU logits kernels K1 and K5 against the measured AVX2 "
    .. "FMA peak",
}

-- Run directly (`luajit bench/cpu.lua`): the checkout's lua/ goes on the module path first.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local direct = arg and type(arg[0]) == "string" and arg[0]:match("[^/]*$") == "cpu.lua"
  and not rawget(_G, "IDXLAB_EXPERIMENT") and not rawget(_G, "IDXLAB_SCRIPT")
if direct then
  package.path = here .. "/../lua/?.lua;" .. here .. "/../lua/?/init.lua;" .. package.path
end

-- The shared bench helpers (median, timing, the FMA peak), from the file beside this one.
local lib = dofile(here .. "/lib.lua")
local median = lib.median

-- main(opts): opts.ctx (a CPU context; default 2 threads), reps, threads, rows, positions.
function M.main(opts)
  opts = opts or {}
  local ctx = opts.ctx
  local idxlab = require("idxlab")
  local formats = require("idxlab.formats")
  local logits = require("idxlab.logits")
  local rng = require("idxlab.rng")
  ctx = ctx or idxlab.context{ backend = "cpu", seed = 1, threads = opts.threads or 2 }
  if ctx:backend() ~= "cpu" then
    error("idxlab: bench_cpu needs a CPU context, got " .. ctx:backend(), 2)
  end
  local threads, reps = ctx:threads(), opts.reps or 7
  local R, H, N, sbk, nsb, P = opts.rows or 64, 32, opts.positions or 32768, 16, 1024, 128
  local fmt = "mxfp4"

  local function normal(shape, seed)
    return rng.normal(ctx:tensor("f32", shape), { seed = seed })
  end
  local qc, qs = formats.quantize(ctx, fmt, "rne", "q", normal({ R, H, 128 }, 11))
  local kc, kscale = formats.quantize(ctx, fmt, "rne", "k", normal({ N, 128 }, 12))
  local wd, wb = formats.prepare_weights(ctx, fmt, normal({ R, H }, 13), nil)
  local qk = { q_codes = qc, q_scales = qs, k_codes = kc, k_scales = kscale, kv_format = fmt }
  local ks = ctx:tensor("i32", { R }):fill_bytes(0)
  local ke = ctx:tensor("i32", { R })
  local kep = ke:ptr()
  for r = 0, R - 1 do kep[r] = N end
  -- K5: every other block of 16 of each row, 1024 of them (16384 positions)
  local ids = ctx:tensor("i32", { R, nsb })
  local ip = ids:ptr()
  local stride = math.max(1, math.floor(N / sbk / nsb))
  for r = 0, R - 1 do
    for j = 0, nsb - 1 do ip[r * nsb + j] = math.min(j * stride, math.floor((N - 1) / sbk)) end
  end
  -- paged K for K5 paged: each row its own shuffled pages of the same keys
  local pr = math.min(R, 8)
  local mp = math.ceil(N / P)
  local pages = ctx:tensor("u8", { pr * mp, formats.page_stride(fmt, P) })
  local bt = ctx:tensor("i32", { pr, mp })
  local bp = bt:ptr()
  math.randomseed(5)
  for r = 0, pr - 1 do
    for j = 0, mp - 1 do bp[r * mp + j] = r * mp + j end
    for j = mp - 1, 1, -1 do
      local x = math.random(0, j)
      bp[r * mp + j], bp[r * mp + x] = bp[r * mp + x], bp[r * mp + j]
    end
    formats.write_pages(ctx, fmt, kc, kscale, 0, N, pages, P, bt:view({ mp }, r * mp))
  end
  local pqk = { q_codes = qc:view({ pr, H, 64 }), q_scales = qs:view({ pr, H }), k_pages = pages,
    page_size = P, kv_format = fmt }
  local lens = ctx:tensor("i32", { pr })
  for r = 0, pr - 1 do lens:ptr()[r] = N end
  local pids = ids:view({ pr, nsb })
  local wbp = wb:view({ pr, H })

  local out32 = ctx:tensor("f32", { R, N })
  local out16 = ctx:tensor("bf16", { R, N })
  local sout = ctx:tensor("bf16", { R, nsb * sbk })
  local pout = ctx:tensor("bf16", { pr, nsb * sbk })
  local cases = {
    { name = "K1 dense, fp32 reduction", rows = R, positions = N,
      call = function() logits.dense(ctx, qk, wd, ks, ke, { out = out32 }) end },
    { name = "K1 dense, bf16 reduction", rows = R, positions = N,
      call = function()
        logits.dense(ctx, qk, wb, ks, ke, { reduction = "bf16", out = out16 })
      end },
    { name = "K5 sparse, ragged", rows = R, positions = nsb * sbk,
      call = function()
        logits.sparse(ctx, qk, wb, ks, ke, nil, ids, sbk, "unaligned", sout)
      end },
    { name = "K5 sparse, paged", rows = pr, positions = nsb * sbk,
      call = function()
        logits.sparse(ctx, pqk, wbp, nil, lens, bt, pids, sbk, "unaligned", pout)
      end },
  }
  local log = opts.log or print
  log(("bench_cpu: %s, %d threads, mxfp4 keys, H = %d, D = 128, %d reps"):format(
    ctx:device_name(), threads, H, reps))
  log(("%-26s %6s %9s %12s %10s %10s %8s"):format("kernel", "rows", "positions", "median GF/s",
    "best GF/s", "peak GF/s", "best/peak"))
  log("(peak: the FMA loop timed like the kernel, best of the same runs)")
  local rows = {}
  for _, c in ipairs(cases) do
    local flops = 2.0 * H * 128 * c.rows * c.positions
    -- warm-up, and the duration of the peak's runs
    local secs = math.max(0.02, lib.time_us(ctx, c.call) * 1e-6)
    local rates, peaks = {}, {}
    for i = 1, reps do
      peaks[i] = lib.fma_peak_gflops(threads, secs)
      rates[i] = flops / (lib.time_us(ctx, c.call) * 1e3)
    end
    local best = math.max(unpack(rates))
    local peak = peaks[1] and math.max(unpack(peaks)) or nil
    local row = { kernel = c.name, rows = c.rows, positions = c.positions, threads = threads,
      median_gflops = median(rates), best_gflops = best, peak_gflops = peak,
      peak_median_gflops = peak and median(peaks) or nil,
      best_over_peak = peak and best / peak or nil }
    rows[#rows + 1] = row
    log(("%-26s %6d %9d %12.1f %10.1f %10s %8s"):format(c.name, c.rows, c.positions,
      row.median_gflops, best, peak and ("%.1f"):format(peak) or "n/a",
      peak and ("%.0f%%"):format(100 * best / peak) or "n/a"))
  end
  for _, t in ipairs({ out32, out16, sout, pout, pages, bt, ids, lens, ks, ke, qc, qs, kc, kscale,
    wd, wb }) do
    t:free()
  end
  return rows
end

-- Run directly: `luajit bench/cpu.lua [reps [threads]]`.
if direct then M.main({ reps = tonumber(arg[1]), threads = tonumber(arg[2]) }) end

return M
