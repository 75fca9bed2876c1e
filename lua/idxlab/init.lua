-- idxlab: the public Lua module. `local idxlab = require("idxlab")`, then
-- idxlab.context{backend = "auto"}, idxlab.builder{...}, idxlab.run("experiments/quick.lua").
-- Submodules load lazily, so a REPL starts fast and a missing optional piece (gnuplot, CUDA)
-- only matters when used.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local ffi, C = core.ffi, core.C

local M = {}

M.version = core.version
M.Tensor = require("idxlab.tensor")
M.Context = require("idxlab.context")

function M.context(opts) return M.Context.new(opts) end

-- Probe: true, or false and the reason.
function M.cuda_available()
  local why = ffi.new("char[512]")
  if C.ixl_cuda_available(why, 512) ~= 0 then return true end
  return false, ffi.string(why)
end
function M.built_with_cuda() return C.ixl_built_with_cuda() ~= 0 end

-- Lazily loaded submodules: idxlab.builder, idxlab.pipeline, ...
local lazy = {
  builder = "idxlab.builder", config = "idxlab.config", pipeline = "idxlab.pipeline",
  formats = "idxlab.formats", experiment = "idxlab.experiment",
  report = "idxlab.report", workload = "idxlab.workload", replay = "idxlab.replay",
  safetensors = "idxlab.safetensors", rng = "idxlab.rng", chunker = "idxlab.chunker",
  select = "idxlab.select", logits = "idxlab.logits", results = "idxlab.results",
  json = "idxlab.json", metrics = "idxlab.metrics", step = "idxlab.step",
  summary = "idxlab.summary", measure = "idxlab.measure", variants = "idxlab.variants",
  fs = "idxlab.fs", plot = "idxlab.plot", merge = "idxlab.merge", stats = "idxlab.stats",
}

local help_text = [[
idxlab ]] .. M.version .. [[ - the two-level sparse indexer of DeepSeek V4.1, on CPU and GPU.

  ctx = idxlab.context{backend = "auto", seed = 1}   -- "cpu", "cuda" or "auto"
  t = ctx:tensor("f32", {4, 128})                     -- host or device tensor
  b = idxlab.builder{candidate_block_size = 16, candidate_topk_blocks = 1024}
  b:info()                                            -- derived sizes
  idxlab.run("experiments/quick.lua")                 -- run an experiment file
  p = idxlab.pipeline.new(ctx, {})                    -- one step: p:step(inputs, {acc = ...})
  inputs = idxlab.workload.generate(ctx, {}, {}, 1)   -- synthetic step inputs (docs/workload.md)
  idxlab.config.defaults()                            -- every config field and default
  idxlab.cuda_available()                             -- true, or false and why

]]

-- The names of the lazily loaded submodules, sorted (the REPL's Tab list reads them here).
function M.modules()
  local names = {}
  for k in pairs(lazy) do names[#names + 1] = k end
  table.sort(names)
  return names
end

-- Prints the help with every lazily loaded module, the list wrapped to fit a terminal.
function M.help()
  local names = M.modules()
  local lines, line = {}, "Errors are Lua errors; catch them with pcall. Modules:"
  for i, k in ipairs(names) do
    local word = k .. (i < #names and "," or "")
    if #line + 1 + #word > 90 then
      lines[#lines + 1] = line
      line = "  " .. word
    else
      line = line .. " " .. word
    end
  end
  lines[#lines + 1] = line
  print(help_text .. table.concat(lines, "\n"))
end

function M.run(file_or_table, opts)
  return M.experiment.run(file_or_table, opts)
end

-- The public boundary; the probes answer false, reason and raise nothing of their own, and
-- neither help nor modules can fail.
errors.wrap(M, { "cuda_available", "built_with_cuda", "help", "modules" })

setmetatable(M, {
  __index = function(t, k)
    local mod = lazy[k]
    if mod then
      local v = require(mod)
      rawset(t, k, v)
      return v
    end
    return nil
  end,
})

return M
