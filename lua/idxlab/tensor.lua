-- idxlab.tensor: Lua face of ixl_tensor. A Tensor is a small table {cd = ixl_tensor*, ctx =
-- Context, base = owner-of-memory-for-views}. Host data is reachable as a typed pointer;
-- device data moves only when asked (:to("host"), :copy_from()). Device memory is freed with
-- :free(); ffi.gc is only the safety net, since the Lua GC does not see device bytes.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")
local util = require("idxlab.util")
local ffi, C, check = core.ffi, core.C, core.check
local fail = errors.fail

local Tensor = {}
Tensor.__index = Tensor

-- The element pointer type of each dtype (packed e2m1x2 and e4m3 are bytes), keyed by the
-- enum's value.
local DT = core.enums.dtype
local ptr_types = {
  [DT.f32] = ffi.typeof("float *"), [DT.f16] = ffi.typeof("uint16_t *"),
  [DT.bf16] = ffi.typeof("uint16_t *"), [DT.e4m3] = ffi.typeof("uint8_t *"),
  [DT.e2m1x2] = ffi.typeof("uint8_t *"), [DT.i32] = ffi.typeof("int32_t *"),
  [DT.u8] = ffi.typeof("uint8_t *"),
}
local out_ptr = ffi.typeof("ixl_tensor *[1]")
local i64arr = ffi.typeof("int64_t[?]")
local f64arr = ffi.typeof("double[?]")

local function is_tensor(x) return getmetatable(x) == Tensor end
Tensor.is_tensor = is_tensor

local function check_shape(shape)
  if type(shape) ~= "table" then
    fail("shape = %s: must be a list of 0 to 4 non-negative integers", tostring(shape))
  end
  if #shape > 4 then fail("shape has %d dims: at most 4", #shape) end
  for i, n in ipairs(shape) do
    -- below 2^53: inf or 1e300 would reach C's int64 wrapped (inf read as -2^63)
    if not util.is_int(n, 0) then
      fail("shape[%d] = %s: must be a non-negative integer below 2^53", i, tostring(n))
    end
  end
end

-- Tensor.new(ctx, dtype, shape, device) where device is "host" (default for CPU contexts) or
-- "device" (default for CUDA contexts).
function Tensor.new(ctx, dtype, shape, device)
  check_shape(shape)
  local dt = core.enum("dtype", dtype)
  local dev
  if device == nil then
    dev = C.ixl_ctx_device_kind(ctx.cd)
  else
    dev = core.enum("device", device)
  end
  local shp = i64arr(math.max(#shape, 1))
  for i, n in ipairs(shape) do shp[i - 1] = n end
  local out = out_ptr()
  check(ctx.cd, C.ixl_tensor_new(ctx.cd, dt, #shape, shp, dev, out))
  local t = setmetatable({ cd = ffi.gc(out[0], C.ixl_tensor_free), ctx = ctx }, Tensor)
  return t
end

-- Wraps an existing ixl_tensor value struct (a view filled by C) that borrows from `base`.
function Tensor.wrap_view(ctx, view_struct, base)
  return setmetatable({ cd = view_struct, ctx = ctx, base = base, is_view = true }, Tensor)
end

function Tensor:free()
  if self.cd ~= nil and not self.is_view then
    local cd = self.cd
    ffi.gc(cd, nil)
    C.ixl_tensor_free(cd)
  end
  self.cd = nil
end

-- Why a tensor cannot be used, or nil: it was freed, or it is a view (a builder's step
-- metadata, a slice) whose base -- a tensor or a builder -- was freed. Using such a view
-- would read freed memory, so every entry point asks first.
function Tensor.dead_reason(t)
  if t.cd == nil then return "tensor was freed" end
  local b = t.base
  if b ~= nil and b.cd == nil then return "the tensor or builder this view looks into was freed" end
  return nil
end

local function live(self)
  local why = Tensor.dead_reason(self)
  if why then fail("%s", why) end
  return self.cd
end

function Tensor:shape()
  local cd = live(self)
  local s = {}
  for i = 0, cd.ndim - 1 do s[#s + 1] = tonumber(cd.shape[i]) end
  return s
end
function Tensor:dtype() return core.enum_name("dtype", live(self).dtype) end
function Tensor:device() return core.enum_name("device", live(self).device) end
function Tensor:numel() return tonumber(C.ixl_tensor_numel(live(self))) end
function Tensor:__tostring()
  if Tensor.dead_reason(self) then return "Tensor(freed)" end
  return ("Tensor(%s, {%s}, %s)"):format(self:dtype(), table.concat(self:shape(), ", "),
    self:device())
end

-- Typed pointer to host data (errors for device tensors).
function Tensor:ptr()
  local cd = live(self)
  if cd.device ~= core.enums.device.host then
    fail("ptr() needs a host tensor; use :to('host') first")
  end
  return ffi.cast(ptr_types[cd.dtype], cd.data)
end

-- Flat values as a Lua list (1-based), for any dtype and device.
function Tensor:to_table()
  local cd = live(self)
  local n = self:numel()
  local buf = f64arr(math.max(n, 1))
  check(self.ctx.cd, C.ixl_tensor_to_f64(self.ctx.cd, cd, buf, n))
  local out = {}
  for i = 0, n - 1 do out[i + 1] = buf[i] end
  return out
end

-- Fills from a flat Lua list of numbers (converted to the dtype).
function Tensor:from_table(values)
  local cd = live(self)
  if type(values) ~= "table" then fail("from_table expects a list of numbers") end
  local n = #values
  local buf = f64arr(math.max(n, 1))
  for i = 1, n do
    local v = values[i]
    if type(v) ~= "number" then
      fail("from_table: value %d is a %s, expected a number", i, type(v))
    end
    buf[i - 1] = v
  end
  check(self.ctx.cd, C.ixl_tensor_from_f64(self.ctx.cd, cd, buf, n))
  return self
end

function Tensor:fill_bytes(byte)
  if not util.is_int(byte, 0, 255) then
    fail("fill_bytes: byte = %s: must be an integer in [0, 255]", tostring(byte))
  end
  check(self.ctx.cd, C.ixl_tensor_fill_bytes(self.ctx.cd, live(self), byte))
  return self
end

function Tensor:copy_from(src)
  if not is_tensor(src) then fail("copy_from expects a tensor") end
  check(self.ctx.cd, C.ixl_tensor_copy(self.ctx.cd, live(self), live(src)))
  return self
end

-- A new tensor with the same contents on "host" or "device".
function Tensor:to(device)
  if device ~= "host" and device ~= "device" then
    fail("to: device = %s: must be \"host\" or \"device\"", tostring(device))
  end
  local t = Tensor.new(self.ctx, self:dtype(), self:shape(), device)
  check(self.ctx.cd, C.ixl_tensor_copy(self.ctx.cd, t.cd, live(self)))
  return t
end

-- A view: `shape` (list), `offset` in elements, `stride` optional list. Nothing allocated in C.
function Tensor:view(shape, offset, stride)
  local cd = live(self)
  check_shape(shape)
  if offset ~= nil and not util.is_int(offset, 0) then
    fail("view: offset = %s: must be a non-negative integer below 2^53 (elements)",
      tostring(offset))
  end
  if stride ~= nil then
    if type(stride) ~= "table" or #stride ~= #shape then
      fail("view: stride must be a list of %d integers, like shape", #shape)
    end
    for i, v in ipairs(stride) do
      if not util.is_int(v) then
        fail("view: stride[%d] = %s: must be an integer of magnitude below 2^53", i, tostring(v))
      end
    end
  end
  local shp = i64arr(math.max(#shape, 1))
  for i, n in ipairs(shape) do shp[i - 1] = n end
  local strd = nil
  if stride then
    strd = i64arr(math.max(#stride, 1))
    for i, n in ipairs(stride) do strd[i - 1] = n end
  end
  local v = ffi.new("ixl_tensor")
  check(self.ctx.cd, C.ixl_tensor_view(self.ctx.cd, cd, #shape, shp, strd, offset or 0, v))
  return Tensor.wrap_view(self.ctx, v, self.base or self)
end

-- The public boundary: every function above but the predicates, the view maker the library
-- calls with structs it filled itself, and the metamethods.
return errors.wrap(Tensor, { "is_tensor", "dead_reason", "wrap_view", "__tostring" })
