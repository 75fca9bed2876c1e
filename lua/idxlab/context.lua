-- idxlab.context: Lua face of ixl_ctx (backend, device, seed, threads, counters, timers).
--
-- Context.default() is the one process-wide context the library makes by itself: a CPU
-- context (seed 0, all cores), made on first use and kept for the life of the process. It
-- serves the calls that take no context but need one to carry C's error message or to own a
-- small host allocation: config checks (config.describe, chunker.plan), workload.check and
-- workload.structure, and safetensors.read/parse/write without a ctx. Nothing else is hidden:
-- every op that computes takes the caller's context.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local util = require("idxlab.util")
local Tensor = require("idxlab.tensor")
local ffi, C, check = core.ffi, core.C, core.check
local fail = errors.fail

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
function Context.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then fail("context options must be a table") end
  for k in pairs(opts) do
    if k ~= "backend" and k ~= "device" and k ~= "seed" and k ~= "threads" then
      fail("context option %s: unknown (backend, device, seed, threads)", tostring(k))
    end
  end
  local backend = core.enum("backend", opts.backend or "auto")
  local device = opts.device or 0
  -- a C int: the FFI would wrap a larger value (inf became -2147483648) silently
  if not util.is_int(device, 0, 2147483647) then
    fail("device = %s: must be a non-negative integer, at most 2147483647 (a GPU index)",
      tostring(device))
  end
  local seed = opts.seed or 0
  if not util.is_int(seed, 0) then
    fail("seed = %s: must be an integer in [0, 2^53)", tostring(seed))
  end
  local threads = opts.threads
  -- a C int: 1.5 would truncate to 1, and 1e12, nan or inf wrap (C reads <= 0 as "all
  -- cores"), so only integers in range pass; checked before the context is made
  if threads ~= nil and not util.is_int(threads, 1, Context.MAX_THREADS) then
    fail("threads = %s: must be an integer in [1, %d] (CPU threads; leave it out for all "
      .. "cores)", tostring(threads), Context.MAX_THREADS)
  end
  local out = ctx_out()
  local st = C.ixl_ctx_new(backend, device, seed, out)
  if st ~= 0 then
    local msg = out[0] ~= nil and ffi.string(C.ixl_last_error(out[0])) or "out of memory"
    C.ixl_ctx_free(out[0])
    errors.raise(core.status_code(st), msg)
  end
  local self = setmetatable({ cd = ffi.gc(out[0], C.ixl_ctx_free) }, Context)
  if threads then C.ixl_ctx_set_threads(self.cd, threads) end
  return self
end

-- The one context the library makes by itself (see the top of this file); never free it.
function Context.default()
  local d = core.once.default_context
  if not d or d.cd == nil then -- made again should someone have freed it
    d = Context.new({ backend = "cpu" })
    core.once.default_context = d
  end
  return d
end

function Context:backend() return core.enum_name("backend", C.ixl_ctx_backend(self.cd)) end
function Context:device_kind()
  return core.enum_name("device", C.ixl_ctx_device_kind(self.cd))
end
function Context:device_name() return ffi.string(C.ixl_ctx_device_name(self.cd)) end
-- The GPU's PCI bus id ("0000:19:00.0"); nil on the CPU backend.
function Context:device_bus_id()
  local s = ffi.string(C.ixl_ctx_device_bus_id(self.cd))
  return s ~= "" and s or nil
end
function Context:seed() return tonumber(C.ixl_ctx_seed(self.cd)) end
function Context:threads() return C.ixl_ctx_threads(self.cd) end
-- The CPU threads this context's ops use from now on: an integer in [1, MAX_THREADS].
function Context:set_threads(n)
  if not util.is_int(n, 1, Context.MAX_THREADS) then
    fail("threads = %s: must be an integer in [1, %d] (CPU threads)", tostring(n),
      Context.MAX_THREADS)
  end
  C.ixl_ctx_set_threads(self.cd, n)
end
function Context:poisoned() return C.ixl_ctx_poisoned(self.cd) ~= 0 end
function Context:sync() check(self.cd, C.ixl_ctx_sync(self.cd)) end
-- Raises the context's last error when st (a status from a C call) is not 0.
function Context:check(st)
  if type(st) ~= "number" and type(st) ~= "cdata" then
    fail("check: status = %s: must be a status from a C call", tostring(st))
  end
  check(self.cd, st)
end
-- CUDA graph capture of what the context's stream runs between graph_begin and graph_end;
-- graph_launch replays it. A CPU context refuses (UNSUPPORTED).
function Context:graph_begin() check(self.cd, C.ixl_graph_begin(self.cd)) end
function Context:graph_end() check(self.cd, C.ixl_graph_end(self.cd)) end
function Context:graph_launch() check(self.cd, C.ixl_graph_launch(self.cd)) end
function Context:last_error() return ffi.string(C.ixl_last_error(self.cd)) end

function Context:alloc_stats()
  local s = ffi.new("ixl_alloc_stats")
  C.ixl_ctx_alloc_stats(self.cd, s)
  return {
    host_bytes_live = tonumber(s.host_bytes_live), host_allocs = tonumber(s.host_allocs),
    host_frees = tonumber(s.host_frees), device_bytes_live = tonumber(s.device_bytes_live),
    device_allocs = tonumber(s.device_allocs), device_frees = tonumber(s.device_frees),
    host_scratch_bytes = tonumber(s.host_scratch_bytes),
    device_scratch_bytes = tonumber(s.device_scratch_bytes),
  }
end

function Context:mem_info()
  local f, t = ffi.new("int64_t[1]"), ffi.new("int64_t[1]")
  check(self.cd, C.ixl_ctx_mem_info(self.cd, f, t))
  return tonumber(f[0]), tonumber(t[0])
end

-- ctx:tensor("f32", {2, 3}) on this context's default memory; device = "host"|"device".
function Context:tensor(dtype, shape, device)
  return Tensor.new(self, dtype, shape, device)
end

local function want_slot(v, name)
  if not util.is_int(v, 0, 255) then
    fail("%s = %s: must be a timer slot, an integer in [0, 255]", name, tostring(v))
  end
end

function Context:timer_record(slot)
  want_slot(slot, "slot")
  check(self.cd, C.ixl_timer_record(self.cd, slot))
end
function Context:timer_elapsed_us(a, b)
  want_slot(a, "start slot")
  want_slot(b, "end slot")
  local us = ffi.new("double[1]")
  check(self.cd, C.ixl_timer_elapsed_us(self.cd, a, b, us))
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

-- The public boundary: every function above but the predicate and the metamethod.
return errors.wrap(Context, { "is_context", "__tostring" })
