-- bench/step.lua -- issue 15's benchmark, in ONE command: what does a whole V4.1 step cost,
-- sparse against dense, and against plain PyTorch?
--
--   bin/idxlab script bench/step.lua [out=DIR] [torch=0] [consumers=0] [scaling=0] [iters=N]
--     [baseline=BENCHMARKS.md] [quick=FILE] [scaling_file=FILE] [quick_set="k=v;..."]
--     [scaling_set="k=v;..."] [python=python3] [gnuplot=none] [progress=plain|off]
--
-- 1. quick.lua (its GPU shape where the backend is a GPU, else its CPU shape): the step as one
--    CUDA graph (time_step_us, the replay's median), stage by stage (time_step_eager_us), the
--    stage times, and the masked-dense path on the same variants (time_masked_dense_us, summed
--    over the consumer layers, and speedup_sparse), with the exactness metrics.
-- 2. The PyTorch twin, bench/torch/step.py, at quick.lua's shape (GPU only; torch=0 skips it):
--    its median and the ratio PyTorch / idxlab.
-- 2b. quick.lua's decode group alone (--set workload.prefill=false; consumers=0 skips it): the
--    consumer part, expansion + every consumer layer's sparse logits, top-k and remap.
-- 3. context_scaling.lua (scaling=0 skips it): on a GPU at GPU scale (64 decode rows, 4K to 1M
--    positions: GPU_SCALING below, the --set line in the file's header), else at the file's
--    CPU scale; its plot time_vs_context (the step, the source's dense logits, the consumers'
--    sparse logits and masked-dense path). Then the warm-up check: the sweep's first point
--    run again, last, into its own results folder (said so, never silently), and its
--    time_sparse_logits_us set beside the first point's: within 10% when the runner's
--    warm-up keeps the cold start out of the sweep.
-- 4. One table of all that, then the regression guard (bench/regress.lua) against
--    BENCHMARKS.md's bench-baseline block: the figures are written to DIR/figures.txt as
--    `step/<case>/<field> us` (family step and case quick_gpu when the step ran on CUDA,
--    step-cpu and quick on the CPU; torch_twin, context_scaling_<positions>) and every
--    figure more than 10% slower than its recorded line is printed. Informative: the exit
--    status does not depend on it.
--
-- Results: DIR (default results/bench_step) holds each experiment's results folder (quick,
-- context_scaling, context_scaling_rerun), figures.txt and table.txt (the table as printed).
-- quick_set / scaling_set: extra --set values, `;`-separated; scaling_set replaces
-- GPU_SCALING. From Lua, main(opts) also takes stdout = a stream for the table.
local M = {
  name = "bench_step",
  question = "What does a whole V4.1 step cost on this backend, sparse against masked dense, "
    .. "and against the plain-PyTorch twin?",
}

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local root = here .. "/.."

-- context_scaling at GPU scale (the file's header says the same)
M.GPU_SCALING = { "workload.decode.rows=64",
  "sweep.workload.decode.context=4096,16384,65536,262144,1048576" }

local function split_sets(s)
  local out = {}
  if s == nil or s == "" then return out end
  for part in tostring(s):gmatch("[^;]+") do out[#out + 1] = part end
  return out
end

local function mean_sd(list)
  local n, s = #list, 0
  if n == 0 then return nil end
  for _, v in ipairs(list) do s = s + v end
  local m = s / n
  local q = 0
  for _, v in ipairs(list) do q = q + (v - m) ^ 2 end
  return m, n > 1 and math.sqrt(q / (n - 1)) or 0
end

local function fmt_us(v)
  if v == nil then return "-" end
  return ("%.1f"):format(v)
end
local function fmt_ms(v)
  if v == nil then return "-" end
  return ("%.3f"):format(v / 1000)
end

-- Runs an experiment; -> its result, failing loudly on a failed or missing point.
local function run_exp(experiment, path, sets, dir, opts)
  local res = experiment.run(path, { set = sets, dir = dir, progress = opts.progress or "plain",
    quiet = true, gnuplot = opts.gnuplot })
  if res.status ~= 0 then
    local why = {}
    for _, f in ipairs(res.failed or {}) do why[#why + 1] = f.reason end
    error(("bench/step.lua: %s: status %d: %s"):format(path, res.status,
      table.concat(why, "; ")), 0)
  end
  local planned = #res.plan.points
  if #res.rows ~= planned then
    error(("bench/step.lua: %s: %d rows for %d points"):format(path, #res.rows, planned), 0)
  end
  return res
end

-- The PyTorch twin at the quick row's shape: median us, or nil and why.
local function torch_twin(q, opts)
  local wl = q.workload or {}
  local d = wl.decode or {}
  local pre = type(wl.prefill) == "table" and wl.prefill[1] or nil
  local args = { "--iters", tostring(opts.iters or 5) }
  if d.rows then args[#args + 1] = "--decode-rows " .. d.rows end
  if d.context then args[#args + 1] = "--context " .. d.context end
  if pre then args[#args + 1] = "--prefill-rows " .. pre.query_len end
  local cmd = ("%s %s/bench/torch/step.py %s 2>&1"):format(opts.python or "python3", root,
    table.concat(args, " "))
  local p = io.popen(cmd)
  local text = p:read("*a")
  p:close()
  local us = tonumber(text:match("median ([%d.]+) us"))
  if not us then return nil, (text:gsub("%s+$", ""):match("[^\n]*$")), cmd end
  return us, text:gsub("%s+$", ""), cmd
end

-- main(opts) -> { quick = row, torch_us, scaling = {per context}, warmup = {first, last,
-- change, ok}, figures = {name = us}, regress = bench/regress.lua's comparison }.
function M.main(opts)
  opts = opts or {}
  local experiment = require("idxlab.experiment")
  local regress = dofile(here .. "/regress.lua")
  local fs = require("idxlab.fs")
  local out = opts.out or "results/bench_step"
  fs.mkdir_p(out)
  -- the table, printed as each part finishes (a run cut short keeps what it printed)
  local lines = {}
  local w = opts.stdout or io.stdout
  local function say(fmt, ...)
    local s = select("#", ...) > 0 and fmt:format(...) or fmt
    lines[#lines + 1] = s
    w:write(s, "\n")
    if w.flush then w:flush() end
  end
  local result = { figures = {} }
  local gpu, fam -- whether quick.lua's step ran on CUDA (not whether a GPU exists), its family
  local function figure(case, field, us)
    if us and us > 0 then result.figures[("%s/%s/%s"):format(fam, case, field)] = us end
  end

  -- 1. quick.lua
  local qres = run_exp(experiment, opts.quick or (root .. "/experiments/quick.lua"),
    split_sets(opts.quick_set), out .. "/quick", opts)
  local q = qres.rows[#qres.rows]
  result.quick = q
  gpu = q.backend == "cuda"
  fam = gpu and "step" or "step-cpu"
  local wl = q.workload or {}
  local d = wl.decode or {}
  local pre = type(wl.prefill) == "table" and wl.prefill[1] or nil
  say("# bench/step.lua: %s (%s)", q.device or "?", q.backend or "?")
  say("quick.lua: %s decode rows at %s%s, %s consumer layers, logits %s, select %s; %d chunks",
    tostring(d.rows), tostring(d.context),
    pre and (" + a %d-row prefill chunk"):format(pre.query_len) or "",
    tostring(wl.consumer_layers), tostring(q["variant.logits"] or (q.variant or {}).logits),
    tostring(q["variant.select"] or (q.variant or {}).select), q.num_chunks or 0)
  local sparse = (q.time_sparse_logits_us or 0) + (q.time_topk_us or 0) + (q.time_remap_us or 0)

  -- 2. the PyTorch twin
  local torch_us, torch_note
  if opts.torch == 0 or opts.torch == false then
    torch_note = "skipped (torch=0)"
  elseif not gpu then
    torch_note = "skipped (no GPU step: the twin runs on CUDA)"
  else
    local us, text = torch_twin(q, opts)
    torch_us = us
    torch_note = us and text or ("failed: " .. tostring(text))
  end
  result.torch_us = torch_us

  say("")
  say("| figure | ms |")
  say("|---|---|")
  say("| idxlab step, one CUDA graph (time_step_us, replay median) | %s |",
    fmt_ms(q.time_step_us))
  say("| idxlab step, stage by stage (time_step_eager_us) | %s |",
    fmt_ms(q.time_step_eager_us))
  say("| PyTorch twin (bench/torch/step.py, same shape) | %s |", fmt_ms(torch_us))
  say("| PyTorch / idxlab step | %s |",
    torch_us and ("%.2fx"):format(torch_us / q.time_step_us) or "-")
  say("| masked dense, consumers (time_masked_dense_us) | %s |", fmt_ms(q.time_masked_dense_us))
  say("| sparse, consumers (sparse logits + top-k + remap) | %s |", fmt_ms(sparse))
  say("| speedup_sparse (masked dense / sparse) | %s |",
    q.speedup_sparse and ("%.2fx"):format(q.speedup_sparse) or "-")
  say("")
  say("| stage | µs |")
  say("|---|---|")
  for _, s in ipairs({ "dense_logits", "candidate_select", "source_topk", "expand",
    "sparse_logits", "topk", "remap", "masked_dense" }) do
    say("| time_%s_us | %s |", s, fmt_us(q["time_" .. s .. "_us"]))
  end
  say("")
  say("exactness: logit_mismatches %s, selection_agreement %s, recall_at_k %s",
    tostring(q.logit_mismatches), tostring(q.selection_agreement), tostring(q.recall_at_k))
  say("PyTorch twin: %s", torch_note)
  for _, f in ipairs({ "time_step_us", "time_step_eager_us", "time_dense_logits_us",
    "time_candidate_select_us", "time_source_topk_us", "time_expand_us",
    "time_sparse_logits_us", "time_topk_us", "time_remap_us", "time_masked_dense_us" }) do
    figure(gpu and "quick_gpu" or "quick", f, q[f])
  end
  figure("torch_twin", "median_us", torch_us)

  -- 2b. the consumer part alone (issue 15's target: the expansion + every consumer's sparse
  -- logits, top-k and remap for the decode group alone, <= 150 us at 64 rows x 128K): quick.lua
  -- again with no prefill request (consumers=0 skips it)
  if opts.consumers ~= 0 and opts.consumers ~= false then
    local sets = split_sets(opts.quick_set)
    sets[#sets + 1] = "workload.prefill=false"
    local cres = run_exp(experiment, opts.quick or (root .. "/experiments/quick.lua"), sets,
      out .. "/quick_decode", opts)
    local c = cres.rows[#cres.rows]
    local cw = (c.workload or {}).decode or {}
    local part = (c.time_expand_us or 0) + (c.time_sparse_logits_us or 0)
      + (c.time_topk_us or 0) + (c.time_remap_us or 0)
    result.consumers = { row = c, us = part }
    say("")
    say("consumer part, decode group alone (%s rows at %s, %s consumer layers; "
      .. "quick.lua --set workload.prefill=false): expand %s + sparse logits %s + top-k %s + "
      .. "remap %s = %s us (issue 15's target: <= 150 us); its step %s us", tostring(cw.rows),
      tostring(cw.context), tostring((c.workload or {}).consumer_layers),
      fmt_us(c.time_expand_us), fmt_us(c.time_sparse_logits_us), fmt_us(c.time_topk_us),
      fmt_us(c.time_remap_us), fmt_us(part), fmt_us(c.time_step_us))
    figure(gpu and "quick_gpu_decode" or "quick_decode", "consumer_us", part)
    figure(gpu and "quick_gpu_decode" or "quick_decode", "time_step_us", c.time_step_us)
  end

  -- 3. context_scaling and the warm-up check
  if opts.scaling ~= 0 and opts.scaling ~= false then
    local path = opts.scaling_file or (root .. "/experiments/context_scaling.lua")
    local sets = opts.scaling_set ~= nil and split_sets(opts.scaling_set)
      or (gpu and M.GPU_SCALING or {})
    local sres = run_exp(experiment, path, sets, out .. "/context_scaling", opts)
    local by, order = {}, {}
    local first
    for _, r in ipairs(sres.rows) do
      local c = r["workload.decode.context"]
      if not by[c] then by[c] = {}; order[#order + 1] = c end
      by[c][#by[c] + 1] = r
      if r.point == 0 then first = r end
    end
    table.sort(order)
    say("")
    say("context_scaling (%s%s): %d points, every one recorded once", #sets > 0 and "--set "
      or "the file's defaults", table.concat(sets, " --set "), #sres.rows)
    say("")
    say("| context | time_step_us | eager | dense logits | sparse logits (± sd) "
      .. "| masked dense | speedup_sparse |")
    say("|---|---|---|---|---|---|---|")
    result.scaling = {}
    for _, c in ipairs(order) do
      local function m(f)
        local l = {}
        for _, r in ipairs(by[c]) do if r[f] then l[#l + 1] = r[f] end end
        return mean_sd(l)
      end
      local sp, sp_sd = m("time_sparse_logits_us")
      local e = { context = c, time_step_us = m("time_step_us"),
        time_step_eager_us = m("time_step_eager_us"),
        time_dense_logits_us = m("time_dense_logits_us"), time_sparse_logits_us = sp,
        time_sparse_logits_sd = sp_sd, time_masked_dense_us = m("time_masked_dense_us"),
        speedup_sparse = m("speedup_sparse") }
      result.scaling[#result.scaling + 1] = e
      say("| %d | %s | %s | %s | %s ± %s | %s | %s |", c, fmt_us(e.time_step_us),
        fmt_us(e.time_step_eager_us), fmt_us(e.time_dense_logits_us), fmt_us(sp),
        fmt_us(sp_sd), fmt_us(e.time_masked_dense_us),
        e.speedup_sparse and ("%.2f"):format(e.speedup_sparse) or "-")
      figure("context_scaling_" .. c, "time_step_us", e.time_step_us)
      figure("context_scaling_" .. c, "time_sparse_logits_us", sp)
    end
    -- the first point again, last: the same point (config, workload, seed) in a run of its own
    local fc = first["workload.decode.context"]
    local rsets = {}
    for _, s in ipairs(sets) do
      if not s:match("^sweep%.workload%.decode%.context=") then rsets[#rsets + 1] = s end
    end
    rsets[#rsets + 1] = "workload.decode.context=" .. fc
    rsets[#rsets + 1] = "repeats=1"
    local rres = run_exp(experiment, path, rsets, out .. "/context_scaling_rerun", opts)
    local again = rres.rows[1]
    local a, b = first.time_sparse_logits_us, again.time_sparse_logits_us
    local change = b > 0 and a / b - 1 or math.huge
    result.warmup = { first = a, last = b, change = change, ok = math.abs(change) <= 0.10,
      first_step = first.time_step_us, last_step = again.time_step_us }
    say("")
    say("warm-up check: point 0 (context %d, seed %d) re-run last in its own run "
      .. "(context_scaling_rerun): time_sparse_logits_us first %.1f us, re-run %.1f us, "
      .. "%+.1f%%: %s; time_step_us first %.1f us, re-run %.1f us", fc, first.seed or -1, a, b,
      change * 100, result.warmup.ok and "within 10%" or "NOT within 10%",
      first.time_step_us or 0, again.time_step_us or 0)
  end

  -- 4. the figures and the regression guard
  local names = {}
  for name in pairs(result.figures) do names[#names + 1] = name end
  table.sort(names)
  local fpath = out .. "/figures.txt"
  local f = assert(io.open(fpath, "w"))
  f:write("# bench/step.lua's figures (bench/regress.lua reads them)\n")
  for _, name in ipairs(names) do f:write(("%s %.1f\n"):format(name, result.figures[name])) end
  f:close()
  local cmp = regress.run({ current = fpath,
    baseline = opts.baseline or (root .. "/BENCHMARKS.md") })
  result.regress = cmp
  say("")
  for _, l in ipairs(cmp.lines) do say("%s", l) end
  local text = table.concat(lines, "\n") .. "\n"
  local t = assert(io.open(out .. "/table.txt", "w"))
  t:write(text)
  t:close()
  return result
end

return M
