-- safetensors_spec: the Lua reader and writer (idxlab.safetensors) over the C ones: round trips
-- of every dtype with fresh random data, the file written by Python (tests/fixtures/), loading
-- a named tensor with checks that name the tensor and the dimension, one spec per
-- malformed-file error, and the writer's argument errors.
local idxlab = require("idxlab")
local ffi = require("ffi")
local st = idxlab.safetensors

local root = os.getenv("IDXLAB_ROOT") or "."
local seed = tonumber(os.getenv("IDXLAB_SEED")) or os.time() % 1000000
math.randomseed(seed)

local tmp = os.tmpname()
os.remove(tmp)
local function tmpfile(name) return tmp .. "-" .. name end
local made = {}
local function path_of(name)
  local p = tmpfile(name)
  made[#made + 1] = p
  return p
end

local function u64le(n)
  local b = {}
  for i = 1, 8 do b[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(b)
end
-- A whole file: 8-byte length, header text, data bytes.
local function file_bytes(header, data) return u64le(#header) .. header .. (data or "") end
local function zeros(n) return string.rep("\0", n) end

-- parse(bytes) must fail with a message matching `pattern` (a Lua pattern).
local function bad(bytes, pattern)
  -- no tail call: keep this frame
  local ok, err = pcall(function() local f = st.parse(bytes); return f end)
  assert.is_false(ok, "parsed a malformed file")
  assert.matches(pattern, err)
  assert.matches("safetensors_spec.lua:%d+: idxlab: safetensors bytes: ", err)
end

local function entry(name, dtype, shape, b, e)
  return ('"%s": {"dtype": "%s", "shape": [%s], "data_offsets": [%d, %d]}'):format(name, dtype,
    table.concat(shape, ", "), b, e)
end

describe("safetensors", function()
  local ctx = idxlab.context{ backend = "cpu", seed = seed }

  teardown(function() for _, p in ipairs(made) do os.remove(p) end end)

  it("round-trips tensors of every dtype, metadata and names, and frees what it took", function()
    local before = ctx:alloc_stats().host_bytes_live
    local specs = {
      { "q", "f32", { 3, 2, 4 } }, { "w.bf16", "bf16", { 5, 3 } }, { "h", "f16", { 7 } },
      { "ks", "i32", { 4 } }, { "codes", "u8", { 2, 9 } }, { "e", "e4m3", { 3, 3 } },
      { "caf\195\169/\226\156\147", "f32", { 1 } }, { "empty", "i32", { 0, 5 } },
    }
    local list, want = {}, {}
    for i, s in ipairs(specs) do
      local t = ctx:tensor(s[2], s[3])
      local vals = {}
      for j = 1, t:numel() do
        if s[2] == "i32" then vals[j] = math.random(-2 ^ 31, 2 ^ 31 - 1)
        elseif s[2] == "u8" or s[2] == "e4m3" then vals[j] = math.random(0, 255)
        else vals[j] = (math.random(-1000, 1000)) / 8 end -- exact in every float dtype
      end
      t:from_table(vals)
      list[i] = { name = s[1], tensor = t }
      want[s[1]] = { dtype = st.st_name(s[2]), shape = s[3], vals = t:to_table() }
    end
    list[#list + 1] = { name = "raw", dtype = "I32", shape = { 2 },
      data = ffi.string(ffi.new("int32_t[2]", { -5, 77 }), 8) }
    local path = path_of("roundtrip.safetensors")
    st.write(path, list, { config = '{"heads": 32}', note = "line\nbreak" }, ctx)
    for _, e in ipairs(list) do if e.tensor then e.tensor:free() end end

    local f = st.read(path, ctx)
    assert.equals(#specs + 1, #f.names)
    assert.are.same({ config = '{"heads": 32}', note = "line\nbreak" }, f.metadata)
    for name, w in pairs(want) do
      local e = f.tensors[name]
      assert.is_table(e, name)
      assert.equals(w.dtype, e.dtype, name)
      assert.are.same(w.shape, e.shape, name)
      local t = f:load(ctx, name, { dtypes = { w.dtype } })
      assert.are.same(w.vals, t:to_table(), ("seed %d: tensor %s"):format(seed, name))
      t:free()
    end
    assert.equals(-5, f.tensors.raw.data[0])
    assert.equals(77, f.tensors.raw.data[1])
    f:close()
    assert.equals(before, ctx:alloc_stats().host_bytes_live)
    assert.has_error(function() f:load(ctx, "q") end)
  end)

  it("reads the file written by Python's standard library", function()
    local f = st.read(root .. "/tests/fixtures/python_written.safetensors")
    assert.are.same({ "bytes.u8", "weights", "h\195\169ad/\240\159\152\128", "ks", "f16", "codes",
      "empty", "scalar" }, f.names)
    assert.are.same({ format = "pt", note = 'caf\195\169 \226\156\147 "quoted"\n' }, f.metadata)
    local w = f.tensors.weights
    assert.equals("F32", w.dtype)
    assert.are.same({ 2, 3 }, w.shape)
    assert.equals(24, w.nbytes)
    local got = {}
    for i = 0, 5 do got[i + 1] = w.data[i] end
    assert.are.same({ 1.5, -2.25, 3.0, 0.0, tonumber(ffi.new("float", 1e-3)), -65504.0 }, got)
    assert.are.same({ -7, 0, 2147483647 }, f:load(ctx, "ks"):to_table())
    assert.are.same({ 1.0, -2.5, 0.5, 384.0 },
      f:load(ctx, "h\195\169ad/\240\159\152\128"):to_table())
    assert.are.same({ 0.5, -1.0, 65504.0, 2 ^ -14 }, f:load(ctx, "f16"):to_table())
    assert.are.same({ 0x38, 0xB8, 0x7E }, f:load(ctx, "codes"):to_table()) -- e4m3 bytes
    assert.are.same({ 0, 1, 127, 200, 255 }, f:load(ctx, "bytes.u8"):to_table())
    assert.are.same({ 0, 4 }, f.tensors.empty.shape)
    assert.are.same({}, f.tensors.scalar.shape)
    assert.equals(42, f.tensors.scalar.data[0])
  end)

  it("loads a named tensor with checks that name the tensor and the dimension", function()
    local path = path_of("load.safetensors")
    local q = ctx:tensor("f32", { 2, 4, 8 }):from_table((function()
      local v = {} for i = 1, 64 do v[i] = i / 4 end return v end)())
    st.write(path,
      { { name = "q", tensor = q },
      { name = "big", dtype = "U8", shape = { 1, 1, 1, 1, 2 }, data = "ab" } })
    local f = st.read(path, ctx)
    local t = f:load(ctx, "q",
      { dtypes = { "F32", "bf16" }, shape = { nil, 4, 8 }, dims = { "rows", "heads", "head_dim" } })
    assert.are.same(q:to_table(), t:to_table())
    local ok, err = pcall(function() f:load(ctx, "k") end)
    assert.is_false(ok)
    assert.matches("safetensors_spec.lua:%d+: idxlab: .*load.safetensors: tensor k is missing", err)
    ok, err = pcall(function() f:load(ctx, "q", { dtypes = { "I32", "U8" } }) end)
    assert.is_false(ok)
    assert.matches("safetensors_spec.lua:%d+: idxlab: .*tensor q has dtype F32, expected I32 or "
      .. "U8", err)
    ok, err = pcall(function() f:load(ctx, "q", { rank = 2, dims = { "rows", "heads" } }) end)
    assert.is_false(ok)
    assert.matches("tensor q has shape %[2, 4, 8%]: expected 2 dims %(rows, heads%)", err)
    ok, err = pcall(function() f:load(ctx, "q",
      { shape = { nil, 4, 128 }, dims = { "rows", "heads", "head_dim" } }) end)
    assert.is_false(ok)
    assert.matches("safetensors_spec.lua:%d+: idxlab: .*tensor q has shape %[2, 4, 8%]: "
      .. "dimension 3 %(head_dim%) is 8, expected 128", err)
    ok, err = pcall(function() f:load(ctx, "big") end)
    assert.is_false(ok)
    assert.matches("tensor big has 5 dims: idxlab tensors hold at most 4", err)
    ok, err = pcall(function() f:expect("q", { dtypes = { "F64" } }) end)
    assert.is_false(ok)
    assert.matches("dtype F64: not one of", err)
    assert.equals(f.tensors.q, f:expect("q", { rank = 3 }))
    t:free(); q:free(); f:close()
  end)

  describe("refuses a malformed file, saying what is wrong", function()
    local one = "{" .. entry("a", "F32", { 2, 2 }, 0, 16) .. "}"

    it("a file shorter than the header length", function()
      bad("\5\0\0", "the file is 3 bytes: too short for the 8%-byte header length")
    end)
    it("a header length larger than the file", function()
      bad(u64le(1000) .. "{}", "header length 1000 is larger than the rest of the file %(2 bytes%)")
    end)
    it("an absurd header length", function()
      bad(u64le(2 ^ 50) .. "{}", "header length 1125899906842624 is absurd")
    end)
    it("bad JSON, with the byte offset", function()
      bad(file_bytes('{"a" {}}'),
        "bad JSON at header byte 5 %(file byte 13%): expected ':' after a key")
      bad(file_bytes('{"a": [1, 2}'),
        "bad JSON at header byte 11 %(file byte 19%): expected ',' or ']'")
      bad(file_bytes('{"a\\x": 1}'), "header byte 3 %(file byte 11%): bad escape in a string")
    end)
    it("duplicate names", function()
      bad(file_bytes("{" .. entry("a", "F32", { 1 }, 0, 4) .. ", " .. entry("a", "F32", { 1 }, 4,
        8) .. "}", zeros(8)),
        "duplicate tensor name 'a' %(header bytes 1 and %d+%)")
    end)
    it("overlapping data_offsets", function()
      bad(file_bytes("{" .. entry("a", "F32", { 6 }, 0, 24) .. ", " .. entry("b", "F32", { 6 }, 16,
        40) .. "}", zeros(40)),
        "tensors 'a' %(data_offsets %[0, 24%]%) and 'b' %(%[16, 40%]%) overlap")
    end)
    it("a gap between data_offsets", function()
      bad(file_bytes("{" .. entry("a", "F32", { 2 }, 0, 8) .. ", " .. entry("b", "F32", { 2 }, 16,
        24) .. "}", zeros(24)),
        "no tensor covers data bytes %[8, 16%) before 'b'")
    end)
    it("out-of-range data_offsets", function()
      bad(file_bytes("{" .. entry("a", "U8", { 4096 }, 0, 4096) .. "}", zeros(16)),
        "tensor 'a': data_offsets %[0, 4096%] run past the end of the data buffer %(16 bytes "
          .. "follow the header%)")
    end)
    it("a truncated file", function()
      local path = path_of("cut.safetensors")
      st.write(path, { { name = "v", dtype = "F32", shape = { 8 }, data = zeros(32) } })
      local fh = io.open(path, "rb"); local all = fh:read("*a"); fh:close()
      fh = io.open(path, "wb"); fh:write(all:sub(1, #all - 5)); fh:close()
      local ok, err = pcall(st.read, path)
      assert.is_false(ok)
      assert.matches("cut.safetensors: tensor 'v': data_offsets %[0, 32%] run past the end of "
        .. "the data buffer %(27 bytes follow the header%): the file is truncated", err)
    end)
    it("trailing bytes after the last tensor", function()
      bad(file_bytes(one, zeros(20)),
        "4 bytes of trailing data after the last tensor %('a' ends at data byte 16 of 20%)")
    end)
    it("a shape that does not match the data size", function()
      bad(file_bytes("{" .. entry("x", "F32", { 2, 3 }, 0, 20) .. "}", zeros(20)),
        "tensor 'x': shape %[2, 3%] of F32 needs 24 bytes, but data_offsets %[0, 20%] hold 20")
    end)
    it("a shape that overflows", function()
      bad(file_bytes("{" .. entry("x", "F32", { "4611686018427387904", 4 }, 0, 16) .. "}",
        zeros(16)),
        "tensor 'x': shape %[4611686018427387904, 4%] is too large")
    end)
    it("an unknown dtype", function()
      bad(file_bytes("{" .. entry("x", "Q7", { 1 }, 0, 4) .. "}", zeros(4)),
        "tensor 'x': unknown dtype 'Q7'")
    end)
    it("an unsupported dtype", function()
      bad(file_bytes("{" .. entry("x", "F64", { 1 }, 0, 8) .. "}", zeros(8)),
        "tensor 'x': dtype F64 is not supported %(idxlab reads F32, F16, BF16, I32, U8, F8_E4M3%)")
    end)
    it("a malformed entry or metadata", function()
      bad(file_bytes('{"x": {"dtype": "F32", "shape": [1]}}', zeros(4)),
        "tensor 'x' %(header byte 6%): missing field data_offsets")
      bad(file_bytes('{"__metadata__": {"k": 1}}'),
        "__metadata__ value of 'k' is an integer: values must be strings")
    end)
    it("a missing file", function()
      local ok, err = pcall(st.read, tmpfile("absent.safetensors"))
      assert.is_false(ok)
      assert.matches("absent.safetensors: cannot open: No such file or directory", err)
    end)
  end)

  it("refuses bad writer arguments at the caller's line", function()
    local path = path_of("w.safetensors")
    local function err_of(fn) local ok, e = pcall(fn); assert.is_false(ok); return e end
    assert.matches("safetensors_spec.lua:%d+: idxlab: safetensors.write: entry 1 %(x%): dtype = "
      .. "F64: must be one of",
      err_of(function() st.write(path,
        { { name = "x", dtype = "F64", shape = { 1 }, data = zeros(8) } }) end))
    assert.matches("safetensors_spec.lua:%d+: idxlab: st_writer_add: tensor 'x': nbytes = 3, "
      .. "but shape %[1%] of f32 needs 4",
      err_of(function() st.write(path,
        { { name = "x", dtype = "F32", shape = { 1 }, data = "abc" } }) end))
    local packed = ctx:tensor("e2m1x2", { 4 })
    assert.matches("entry 1 %(p%): dtype e2m1x2 has no safetensors dtype",
      err_of(function() st.write(path, { { name = "p", tensor = packed } }) end))
    assert.matches("entry 1 %(p%): dtype = F32, but the tensor is U8",
      err_of(function() st.write(path,
        { { name = "p", dtype = "F32", tensor = ctx:tensor("u8", { 4 }) } }) end))
    packed:free()
    assert.matches("entry 1 %(p%): the tensor was freed",
      err_of(function() st.write(path, { { name = "p", tensor = packed } }) end))
    local m = ctx:tensor("f32", { 4, 4 })
    assert.matches("entry 1 %(v%): the tensor must be contiguous",
      err_of(function() st.write(path,
        { { name = "v", tensor = m:view({ 4, 2 }, 0, { 4, 1 }) } }) end))
    assert.matches("tensor 'd' added twice",
      err_of(function() st.write(path,
        { { name = "d", tensor = m }, { name = "d", tensor = m } }) end))
    assert.matches("metadata n = 1: keys and values must be strings",
      err_of(function() st.write(path, { { name = "d", tensor = m } }, { n = 1 }) end))
    assert.matches("entry 1: name must be a string",
      err_of(function() st.write(path, { { tensor = m } }) end))
    assert.matches("safetensors_spec.lua:%d+: idxlab: .*/no/such/dir/x.safetensors: cannot create",
      err_of(function() st.write("/no/such/dir/x.safetensors", { { name = "d", tensor = m } }) end))
    assert.matches("safetensors.read: path = 5: must be a string",
      err_of(function() st.read(5) end))
    m:free()
    -- nothing half-written was left behind
    assert.is_nil(io.open(path, "rb"))
  end)
end)

describe("safetensors on the GPU #gpu", function()
  it("writes device tensors and loads them back to the device", function()
    local gpu = idxlab.context{ backend = "cuda", seed = seed }
    local h = gpu:tensor("f32", { 3, 5 }, "host")
    local v = {}
    for i = 1, 15 do v[i] = math.random(-100, 100) / 4 end
    h:from_table(v)
    local d = h:to("device")
    local path = path_of("gpu.safetensors")
    st.write(path, { { name = "d", tensor = d } }, nil, gpu)
    local f = st.read(path, gpu)
    local back = f:load(gpu, "d", { dtypes = { "F32" }, shape = { 3, 5 }, device = "device" })
    assert.equals("device", back:device())
    assert.are.same(v, back:to_table())
    back:free(); d:free(); h:free(); f:close()
  end)
end)
