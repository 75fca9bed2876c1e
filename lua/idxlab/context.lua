-- idxlab.context: Lua face of ixl_ctx (backend, device, seed, threads, counters, timers).
local core = require("idxlab.ffi")
local Tensor = require("idxlab.tensor")
local ffi, C, check = core.ffi, core.C, core.check

local Context = {}
Context.__index = Context

local ctx_out = ffi.typeof("ixl_ctx *[1]")

-- The most CPU threads a context may ask for: OpenMP starts that many, and each has scratch.
Context.MAX_THREADS = 1024

-- A live context made by Context.new (a tensor or a builder, which also carry `cd`, is not).
function Context.is_context(x)
  return getmetatable(x) == Context and x.cd ~= nil
end

-- Context.new{backend = "auto"|"cpu"|"cuda", device = 0, seed = 0, threads = n}
function Context.new(opts, level)
  level = (level or 1) + 1
  opts = opts or {}
  if type(opts) ~= "table" then error("idxlab: context options must be a table", level) end
  for k in pairs(opts) do
    if k ~= "backend" and k ~= "device" and k ~= "seed" and k ~= "threads" then
      error(("idxlab: context option %s: unknown (backend, device, seed, threads)"):format(tostring(k)), level)
    end
  end
  local backend = core.enum("backend", opts.backend or "auto", level)
  local device = opts.device or 0
  -- a C int: the FFI would wrap a larger value (inf became -2147483648) silently
  if type(device) ~= "number" or device ~= math.floor(device) or device < 0 or device > 2147483647 then
    error(("idxlab: device = %s: must be a non-negative integer, at most 2147483647 (a GPU index)"):format(tostring(device)), level)
  end
  local seed = opts.seed or 0
  if type(seed) ~= "number" or seed < 0 or seed ~= math.floor(seed) or seed >= 2 ^ 53 then
    error(("idxlab: seed = %s: must be an integer in [0, 2^53)"):format(tostring(seed)), level)
  end
  local threads = opts.threads
  -- a C int: 1.5 would truncate to 1, and 1e12, nan or inf wrap (C reads <= 0 as "all
  -- cores"), so only integers in range pass; checked before the context is made
  if threads ~= nil and (type(threads) ~= "number" or threads ~= math.floor(threads) or threads < 1
      or threads > Context.MAX_THREADS) then
    error(("idxlab: threads = %s: must be an integer in [1, %d] (CPU threads; leave it out for all cores)")
      :format(tostring(threads), Context.MAX_THREADS), level)
  end
  local out = ctx_out()
  local st = C.ixl_ctx_new(backend, device, seed, out)
  if st ~= 0 then
    local msg = out[0] ~= nil and ffi.string(C.ixl_last_error(out[0])) or "out of memory"
    C.ixl_ctx_free(out[0])
    error("idxlab: " .. msg, level)
  end
  local self = setmetatable({ cd = ffi.gc(out[0], C.ixl_ctx_free) }, Context)
  if threads then C.ixl_ctx_set_threads(self.cd, threads) end
  return self
end

function Context:backend() return core.enum_name("backend", C.ixl_ctx_backend(self.cd)) end
function Context:device_kind() return C.ixl_ctx_device_kind(self.cd) == 1 and "device" or "host" end
function Context:device_name() return ffi.string(C.ixl_ctx_device_name(self.cd)) end
function Context:seed() return tonumber(C.ixl_ctx_seed(self.cd)) end
function Context:threads() return C.ixl_ctx_threads(self.cd) end
function Context:poisoned() return C.ixl_ctx_poisoned(self.cd) ~= 0 end
function Context:sync() check(self.cd, C.ixl_ctx_sync(self.cd), 2) end
-- Raises the context's last error when st (a status from a C call) is not 0.
function Context:check(st, level)
  if type(st) ~= "number" and type(st) ~= "cdata" then
    error(("idxlab: check: status = %s: must be a status from a C call"):format(tostring(st)), 2)
  end
  check(self.cd, st, (type(level) == "number" and level or 1) + 1)
end
function Context:last_error() return ffi.string(C.ixl_last_error(self.cd)) end

function Context:alloc_stats()
  local s = ffi.new("ixl_alloc_stats")
  C.ixl_ctx_alloc_stats(self.cd, s)
  return {
    host_bytes_live = tonumber(s.host_bytes_live), host_allocs = tonumber(s.host_allocs),
    host_frees = tonumber(s.host_frees), device_bytes_live = tonumber(s.device_bytes_live),
    device_allocs = tonumber(s.device_allocs), device_frees = tonumber(s.device_frees),
    host_scratch_bytes = tonumber(s.host_scratch_bytes), device_scratch_bytes = tonumber(s.device_scratch_bytes),
  }
end

function Context:mem_info()
  local f, t = ffi.new("int64_t[1]"), ffi.new("int64_t[1]")
  check(self.cd, C.ixl_ctx_mem_info(self.cd, f, t), 2)
  return tonumber(f[0]), tonumber(t[0])
end

-- ctx:tensor("f32", {2, 3}) on this context's default memory; device = "host"|"device".
function Context:tensor(dtype, shape, device)
  local t = Tensor.new(self, dtype, shape, device, 3) -- not a tail call: level 3 is our caller
  return t
end

local function want_slot(v, name)
  if type(v) ~= "number" or v ~= math.floor(v) or v < 0 or v > 255 then
    error(("idxlab: %s = %s: must be a timer slot, an integer in [0, 255]"):format(name, tostring(v)), 3)
  end
end

function Context:timer_record(slot)
  want_slot(slot, "slot")
  check(self.cd, C.ixl_timer_record(self.cd, slot), 2)
end
function Context:timer_elapsed_us(a, b)
  want_slot(a, "start slot")
  want_slot(b, "end slot")
  local us = ffi.new("double[1]")
  check(self.cd, C.ixl_timer_elapsed_us(self.cd, a, b, us), 2)
  return us[0]
end

function Context:free()
  if self.cd ~= nil then
    local cd = self.cd
    ffi.gc(cd, nil)
    C.ixl_ctx_free(cd) -- tensors that still hold the context keep it alive until they go
    self.cd = nil
  end
end

function Context:__tostring()
  return ("Context(%s: %s)"):format(self:backend(), self:device_name())
end

return Context
