-- idxlab.ffi: the one FFI binding, and the only module that calls ffi.cdef, ffi.load or
-- ffi.metatype. It declares the cdef text the build generated from include/idxlab.h plus one
-- block of libc (below), loads the shared library once per process (busted's insulation
-- re-requires modules, so the loaded state is kept on the ffi module itself), and derives the
-- Lua names of the header's enums from that same text: nothing here mirrors the header by
-- hand. Everything else in lua/idxlab/ reaches C through this module.
--
--   M.C, M.ffi, M.version   the library namespace, LuaJIT's ffi, the library's version
--   M.check(ctx, st)   raises the context's message as an idxlab error (code: the status name)
--   M.enums, M.enum(kind, name), M.enum_name(kind, value), M.enum_names(kind)
--   M.struct_fields(name)  the fields of a typedef'd struct of the cdef, in declaration order
--   M.now_us()                    the library's monotonic clock (ixl_now_us), in microseconds
--   M.getpid(), M.sleep_us(us)    the libc pieces the Lua layer needs; M.isatty(fd),
--   M.tty_columns(fd), M.tty_intr(fd), M.set_tty_intr(fd, c), M.try_lock(path),
--   M.lock_note(fd, text), M.unlock(fd)
local ffi = require("ffi")
local bit = require("bit")
local errors = require("idxlab.errors")

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
    if d and d ~= "" and file_exists(d .. "/libidxlab.so")
        and file_exists(d .. "/idxlab_cdef.h") then
      return d
    end
  end
  errors.raise("IO", "cannot find libidxlab.so and idxlab_cdef.h (run `make`, or set "
    .. "IDXLAB_LIBDIR); looked in " .. table.concat({ tostring(candidates[1]), candidates[2],
      candidates[3] }, ", "))
end

-- The libc the Lua layer uses, declared here once: getpid (results: unique file names), usleep
-- (test doubles and pacing), isatty and ioctl(TIOCGWINSZ) (a terminal's width: report splits
-- wide tables), open/flock/ftruncate/write/close (a results folder's advisory lock, fs.lock),
-- tcgetattr/tcsetattr (the REPL's interrupt key under rlwrap; glibc's struct termios on Linux
-- x86-64, 60 bytes). The clock is the library's own (ixl_now_us, core/ctx.c).
local LIBC = [[
  int getpid(void);
  int usleep(unsigned int usec);
  int isatty(int fd);
  struct ixl_lua_winsize { unsigned short ws_row, ws_col, ws_xpixel, ws_ypixel; };
  int ioctl(int fd, unsigned long request, ...);
  int open(const char *path, int flags, ...);
  int close(int fd);
  int flock(int fd, int operation);
  int ftruncate(int fd, int64_t length);
  intptr_t write(int fd, const void *buf, size_t n);
  char *strerror(int errnum);
  struct ixl_lua_termios { unsigned int c_iflag, c_oflag, c_cflag, c_lflag;
    unsigned char c_line, c_cc[32]; unsigned int c_ispeed, c_ospeed; };
  int tcgetattr(int fd, struct ixl_lua_termios *t);
  int tcsetattr(int fd, int when, const struct ixl_lua_termios *t);
]]

local state = rawget(ffi, "__idxlab_state")
if not state then
  local libdir = find_libdir()
  local f = assert(io.open(libdir .. "/idxlab_cdef.h", "rb"))
  local text = f:read("*a")
  f:close()
  ffi.cdef(text)
  ffi.cdef(LIBC)
  state = { C = ffi.load(libdir .. "/libidxlab.so"), libdir = libdir, ctypes = {},
    cdef = text }
  rawset(ffi, "__idxlab_state", state)
end

M.C = state.C
M.libdir = state.libdir
M.ffi = ffi
-- Per-process registry for things that must be made only once (metatypes, the default
-- context): module tables are remade under busted's insulation, this table is not.
M.once = state.ctypes

local C = M.C

-- The library's version string (ixl_version), for the modules that record it.
M.version = ffi.string(C.ixl_version())

-- ------------------------------------------------------------------ errors from C

-- A status's code for the error object: ixl_status_name without its "IXL_ERR_" prefix
-- ("CONFIG", "SHAPE", ...), as lua/idxlab/errors.lua documents.
local function status_code(st)
  return (ffi.string(C.ixl_status_name(st)):gsub("^IXL_ERR_", ""))
end
M.status_code = status_code

-- Raises the context's last error (or the status's generic message when the context has none,
-- or ctx is NULL) as an idxlab error whose code is the status name. Where it points is set by
-- the public boundary (errors.public), not here.
function M.check(ctx, st)
  if st ~= 0 then
    local msg = ctx ~= nil and ffi.string(C.ixl_last_error(ctx)) or ""
    if msg == "" then msg = ffi.string(C.ixl_status_message(st)) end
    errors.raise(status_code(st), msg)
  end
end

-- ------------------------------------------------------------------ enums, from the cdef

-- Lua's name of each header enum: the typedef name without "ixl_", except device_kind.
local KIND_OF = { ixl_device_kind = "device" }
-- The one Lua spelling that is not the lower-cased enumerator (C needs "_" where SPEC 4
-- writes "+").
local SPELLING = { split_width = { bf16_fp32 = "bf16+fp32" } }

-- The longest common prefix of the names, cut back to its last "_" ("IXL_SCORE_" for
-- IXL_SCORE_MAX, IXL_SCORE_MEAN, IXL_SCORE_SUM).
local function common_prefix(names)
  local p = names[1]
  for i = 2, #names do
    local s, j = names[i], 0
    while j < #p and j < #s and p:byte(j + 1) == s:byte(j + 1) do j = j + 1 end
    p = p:sub(1, j)
  end
  return p:match("^(.*_)") or ""
end

-- kind -> { lua name -> value } for every enum of the cdef but the status list; counters
-- (IXL_DTYPE_COUNT) are not values.
local function derive_enums(text)
  local out = {}
  for tag, body in text:gmatch("typedef%s+enum%s+([%w_]+)%s*(%b{})") do
    if tag ~= "ixl_status" then
      local names = {}
      for name in body:gmatch("([%a_][%w_]*)%s*=?[^,}]*") do
        if not name:match("_COUNT_?$") then names[#names + 1] = name end
      end
      local kind = KIND_OF[tag] or tag:gsub("^ixl_", "")
      local prefix = common_prefix(names)
      local t = {}
      for _, name in ipairs(names) do
        local lua = name:sub(#prefix + 1):lower()
        lua = (SPELLING[kind] and SPELLING[kind][lua]) or lua
        t[lua] = tonumber(ffi.cast(tag, name))
      end
      out[kind] = t
    end
  end
  return out
end

state.enums = state.enums or derive_enums(state.cdef)
local enums = state.enums
M.enums = enums

-- The names of an enum in value order ("mxfp4", "mxfp8", "fp8").
function M.enum_names(kind)
  local t = enums[kind]
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out, function(a, b) return t[a] < t[b] end)
  return out
end

-- enum("kv_format", "mxfp4") -> 0; errors name the field, the value and the choices.
function M.enum(kind, value)
  local v = enums[kind][value]
  if v == nil then
    errors.fail("%s = %s: must be one of %s", kind, tostring(value),
      table.concat(M.enum_names(kind), ", "))
  end
  return v
end

function M.enum_name(kind, num)
  for k, v in pairs(enums[kind]) do
    if v == num then return k end
  end
  return tostring(num)
end

-- The fields of `typedef struct NAME {...} NAME;` in the cdef, in declaration order, each
-- { name = "heads", ctype = "int64_t" } (plain scalar fields only: what ixl_config holds).
function M.struct_fields(name)
  local body = state.cdef:match("typedef%s+struct%s+" .. name .. "%s*(%b{})%s*" .. name .. "%s*;")
  if not body then errors.raise("INTERNAL", "struct %s is not in the cdef", name) end
  local out = {}
  for ctype, field in body:gmatch("([%w_]+)%s+([%w_]+)%s*;") do
    out[#out + 1] = { name = field, ctype = ctype }
  end
  return out
end

-- ------------------------------------------------------------------ libc

-- Microseconds on the host's monotonic clock: the library's one clock, which C's timers use.
function M.now_us() return C.ixl_now_us() end

function M.getpid() return tonumber(ffi.C.getpid()) end

-- Sleeps us microseconds (0 or less: returns at once).
function M.sleep_us(us)
  if us > 0 then ffi.C.usleep(math.floor(us)) end
end

-- True when fd is a terminal.
function M.isatty(fd) return ffi.C.isatty(fd) == 1 end

local TIOCGWINSZ = 0x5413 -- Linux

-- The columns of the terminal on fd, or nil (not a terminal, or a size of 0: a pty nobody
-- sized).
function M.tty_columns(fd)
  local ws = ffi.new("struct ixl_lua_winsize")
  if ffi.C.ioctl(fd, TIOCGWINSZ, ws) ~= 0 or ws.ws_col == 0 then return nil end
  return tonumber(ws.ws_col)
end

local VINTR, TCSANOW = 0, 0 -- Linux

-- The interrupt character of the terminal on fd (3 for Ctrl-C; 0: none), or nil when fd is
-- not a terminal.
function M.tty_intr(fd)
  local t = ffi.new("struct ixl_lua_termios")
  if ffi.C.tcgetattr(fd, t) ~= 0 then return nil end
  return tonumber(t.c_cc[VINTR])
end

-- Sets the interrupt character of the terminal on fd (0: none, so that key is read as a
-- character); the other settings stay as they are. -> true, or false when fd is no terminal.
function M.set_tty_intr(fd, c)
  local t = ffi.new("struct ixl_lua_termios")
  if ffi.C.tcgetattr(fd, t) ~= 0 then return false end
  t.c_cc[VINTR] = c
  return ffi.C.tcsetattr(fd, TCSANOW, t) == 0
end

-- Linux's values of the open and flock flags fs.lock uses.
local O_RDWR, O_CREAT, O_CLOEXEC = 2, 64, 524288
local LOCK_EX, LOCK_NB, LOCK_UN = 2, 4, 8
local EWOULDBLOCK = 11

-- try_lock(path) -> fd (the lock is held while fd stays open: the kernel drops it when the
-- process ends, however it ends), or nil, "held" when another open file holds it, or nil and
-- errno's text. The descriptor is close-on-exec, so no child (gnuplot) keeps it.
function M.try_lock(path)
  local fd = ffi.C.open(path, bit.bor(O_RDWR, O_CREAT, O_CLOEXEC), ffi.new("int", 420))
  if fd < 0 then return nil, ffi.string(ffi.C.strerror(ffi.errno())) end
  if ffi.C.flock(fd, bit.bor(LOCK_EX, LOCK_NB)) ~= 0 then
    local e = ffi.errno()
    ffi.C.close(fd)
    if e == EWOULDBLOCK then return nil, "held" end
    return nil, ffi.string(ffi.C.strerror(e))
  end
  return fd
end

-- Writes text (who holds it) as the whole content of fd, just locked (its offset still 0).
function M.lock_note(fd, text)
  ffi.C.ftruncate(fd, 0)
  ffi.C.write(fd, text, #text)
end

-- Releases the lock and closes fd.
function M.unlock(fd)
  ffi.C.flock(fd, LOCK_UN)
  ffi.C.close(fd)
end

return M
