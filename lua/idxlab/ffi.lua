-- idxlab.ffi: the one FFI binding. Loads the cdef text the build generated from
-- core/idxlab.h and the shared library, once per process (busted's insulation re-requires
-- modules, so the loaded state is kept on the ffi module itself). Everything else in
-- lua/idxlab/ goes through this module.
local ffi = require("ffi")

local M = {}

local function dir_of_this_file()
  local src = debug.getinfo(1, "S").source
  src = src:sub(1, 1) == "@" and src:sub(2) or src
  return src:match("^(.*)/[^/]*$") or "."
end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

-- Where the library and its cdef live: $IDXLAB_LIBDIR, the checkout's build/, or an
-- installed PREFIX/lib/idxlab.
local function find_libdir()
  local here = dir_of_this_file()
  local candidates = {
    os.getenv("IDXLAB_LIBDIR"),
    here .. "/../../build",
    here .. "/../../../../lib/lua/5.1/idxlab",
  }
  for _, d in ipairs(candidates) do
    if d and d ~= "" and file_exists(d .. "/libidxlab.so") and file_exists(d .. "/idxlab_cdef.h") then
      return d
    end
  end
  error("idxlab: cannot find libidxlab.so and idxlab_cdef.h (run `make`, or set IDXLAB_LIBDIR); looked in "
    .. table.concat({ tostring(candidates[1]), candidates[2], candidates[3] }, ", "), 3)
end

local state = rawget(ffi, "__idxlab_state")
if not state then
  local libdir = find_libdir()
  local f = assert(io.open(libdir .. "/idxlab_cdef.h", "rb"))
  local text = f:read("*a")
  f:close()
  ffi.cdef(text)
  ffi.cdef([[
    void *malloc(size_t);
    void free(void *);
  ]])
  state = { C = ffi.load(libdir .. "/libidxlab.so"), libdir = libdir, ctypes = {} }
  rawset(ffi, "__idxlab_state", state)
end

M.C = state.C
M.libdir = state.libdir
M.ffi = ffi
-- Per-process registry for metatypes and other things that must be made only once.
M.once = state.ctypes

local C = M.C

-- Raises the context's last error as a Lua error at `level` (default: the caller of the
-- function that called check).
function M.check(ctx, st, level)
  if st ~= 0 then
    local msg = ctx ~= nil and ffi.string(C.ixl_last_error(ctx)) or ""
    if msg == "" then msg = ffi.string(C.ixl_status_message(st)) end
    error(("idxlab: %s"):format(msg), (level or 2) + 1)
  end
end

-- Maps between Lua strings and C enums, with errors listing the valid names.
local enums = {
  dtype = { f32 = 0, f16 = 1, bf16 = 2, e4m3 = 3, e2m1x2 = 4, i32 = 5, u8 = 6 },
  backend = { auto = 0, cpu = 1, cuda = 2 },
  kv_format = { mxfp4 = 0, mxfp8 = 1, fp8 = 2 },
  quantizer = { rne = 0, ties_down = 1 },
  role = { q = 0, k = 1 },
  ks_mode = { unaligned = 0, aligned = 1 },
  block_score = { max = 0, mean = 1, sum = 2, logsumexp = 3 },
  split_width = { bf16 = 0, ["bf16+fp32"] = 1 },
  reduction = { fp32 = 0, bf16 = 1 },
  layout = { full = 0, compressed = 1 },
  device = { host = 0, device = 1 },
}
M.enums = enums

local function names_of(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out, function(a, b) return t[a] < t[b] end)
  return table.concat(out, ", ")
end

-- enum("kv_format", "mxfp4") -> 0; errors name the field, the value and the choices.
function M.enum(kind, value, level)
  local t = enums[kind]
  local v = t[value]
  if v == nil then
    error(("idxlab: %s = %s: must be one of %s"):format(kind, tostring(value), names_of(t)),
      (level or 2) + 1)
  end
  return v
end

function M.enum_name(kind, num)
  for k, v in pairs(enums[kind]) do
    if v == num then return k end
  end
  return tostring(num)
end

return M
