-- soak.lua -- Question: does a long session stay healthy? Thousands of steps with random
-- batches and random configs, interleaved with errors (bad configs, bad shapes, bad files),
-- checking after every step that the context's live allocation returns to its starting value
-- (host and device) and that the session keeps working after each error.
--
--   bin/idxlab script bench/soak.lua [steps=N] [backend=cuda] [seed=N]
--   luajit bench/soak.lua [steps] [backend]        (with LUA_PATH set)
--
-- CI runs it bounded (tests/soak_spec.lua); the GPU script runs it on the GPU.
local M = {
  name = "soak",
  question = "Do thousands of random steps and errors leave the session's memory and state intact?",
}

local function soak(opts)
  opts = opts or {}
  local idxlab = require("idxlab")
  local errors = require("idxlab.errors")
  local pipeline = require("idxlab.pipeline")
  local Tensor = require("idxlab.tensor")
  local workload = require("idxlab.workload")
  local steps = opts.steps or 2000
  local seed = opts.seed or 1
  local ctx = opts.ctx or idxlab.context{ backend = opts.backend or "auto", seed = seed }
  math.randomseed(seed)
  local rnd = math.random
  local log = opts.log or print
  local function live()
    local s = ctx:alloc_stats()
    return s.host_bytes_live, s.device_bytes_live
  end
  local h0, d0 = live()
  local nerrors, ok_steps = 0, 0
  local formats = { "mxfp4", "mxfp8", "fp8" }
  local quants = { "rne", "ties_down" }
  local t0 = os.clock()
  for step = 1, steps do
    local kind = rnd(10)
    if kind == 1 then
      -- an error: a config the builder refuses
      local okc, err = pcall(pipeline.new, ctx,
        { candidate_block_size = 12, candidate_topk_blocks = rnd(100) })
      if okc then
        local okb = pcall(function() err:step({}) end)
        assert(not okb, "an empty step must fail")
      end
      nerrors = nerrors + 1
    elseif kind == 2 then
      -- an error: a tensor of a bad shape
      local okt = pcall(function() return ctx:tensor("f32", { 2, -1 }) end)
      assert(not okt)
      nerrors = nerrors + 1
    else
      local heads = 4 * rnd(1, 4)
      local cbs = ({ 8, 16 })[rnd(2)]
      local T = 512 / cbs * rnd(1, 2)
      local cfg = {
        heads = heads, index_topk = 8 * rnd(1, 8), candidate_block_size = cbs,
        candidate_topk_blocks = T, kv_format = formats[rnd(3)], quantizer = quants[rnd(2)],
        max_rows = 16, max_model_len = 4096, page_size = 64,
      }
      local R = rnd(1, 6)
      local lens = {}
      for i = 1, R do lens[i] = rnd(0, 1200) end
      local decode = rnd(2) == 1
      if decode then
        for i = 1, R do lens[i] = math.max(lens[i], 1) end -- a decode row sees its own token
      end
      local inputs = workload.random(ctx, { heads = heads, lens = lens, decode = decode,
        layers = rnd(1, 2), seed = seed * 100003 + step })
      if rnd(8) == 1 then
        -- an error mid-step: inputs that contradict the config
        inputs.n_prefill = (inputs.n_prefill or 0) + 1
      end
      local p = pipeline.new(ctx, cfg)
      local acc = pipeline.new_acc()
      local oks, err = pcall(function() p:step(inputs, { acc = acc }) end)
      p:free()
      for _, t in pairs(inputs) do if Tensor.is_tensor(t) then t:free() end end
      if oks then
        ok_steps = ok_steps + 1
        local row = pipeline.summarize(acc, nil)
        if cfg.kv_format == "mxfp4" and row.logit_mismatches ~= 0 then
          error(("soak step %d: %d logit mismatches for mxfp4"):format(step, row.logit_mismatches))
        end
      else
        nerrors = nerrors + 1
        if not errors.is(err) then
          error(("soak step %d: unexpected error: %s"):format(step, tostring(err)))
        end
      end
    end
    collectgarbage()
    local h, d = live()
    if h ~= h0 or d ~= d0 then
      error(("soak step %d: live memory moved: host %d -> %d bytes, device %d -> %d bytes")
        :format(step, h0, h, d0, d))
    end
    if opts.progress and step % 100 == 0 then
      log(("soak: %d/%d steps, %d errors handled"):format(step, steps, nerrors))
    end
  end
  local h1, d1 = live()
  local out = { steps = steps, ok_steps = ok_steps, errors = nerrors, host_bytes_start = h0,
    host_bytes_end = h1, device_bytes_start = d0, device_bytes_end = d1, backend = ctx:backend(),
    cpu_seconds = os.clock() - t0 }
  log(("soak: %d steps (%d ran, %d errors handled) on %s; live host bytes %d -> %d, device bytes"
    .. " %d -> %d"):format(steps, ok_steps, nerrors, ctx:backend(), h0, h1, d0, d1))
  return out
end

M.soak = soak

-- `bin/idxlab script bench/soak.lua key=value ...` calls main(opts) with those values.
function M.main(opts) return soak(opts) end

if arg and arg[0] and arg[0]:match("soak%.lua$") and not rawget(_G, "IDXLAB_SCRIPT") then
  soak({ steps = tonumber(arg[1]) or 2000, backend = arg[2] or "auto", progress = true })
end

return M
