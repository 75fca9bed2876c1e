-- foundation_spec: tensors from Lua (every dtype round trip, views, copies), error messages
-- at the caller's line, the context's counters, and the REPL surviving an error.
local idxlab = require("idxlab")

local function root()
  return os.getenv("IDXLAB_ROOT") or "."
end
local support = dofile(root() .. "/tests/support.lua")

describe("tensors from Lua", function()
  local ctx = idxlab.context{ backend = "cpu", seed = 1 }

  it("round-trips every dtype", function()
    local cases = {
      f32 = { 1.5, -2.25, 2^40, 0 }, f16 = { 1.5, -2.25, 65504, 0 }, bf16 = { 1.5, -2.25, 3.0, 0 },
      e4m3 = { 1, 2, 255, 0 }, e2m1x2 = { 17, 34, 255, 0 },
      i32 = { -7, 2147483647, -2147483648, 0 }, u8 = { 0, 1, 200, 255 },
    }
    for dt, vals in pairs(cases) do
      local t = ctx:tensor(dt, { 2, 2 })
      t:from_table(vals)
      assert.are.same(vals, t:to_table(), dt)
      local u = ctx:tensor(dt, { 2, 2 }):copy_from(t)
      assert.are.same(vals, u:to_table(), dt)
      assert.equals(dt, u:dtype())
    end
  end)

  it("makes views that see the base's data and allocate nothing", function()
    local t = ctx:tensor("i32", { 4, 4 }):from_table((function()
      local v = {} for i = 1, 16 do v[i] = i end return v end)())
    local before = ctx:alloc_stats().host_allocs
    local v = t:view({ 2, 4 }, 8)
    assert.are.same({ 9, 10, 11, 12, 13, 14, 15, 16 }, v:to_table())
    assert.equals(before, ctx:alloc_stats().host_allocs)
  end)

  it("counts host bytes and frees them", function()
    -- a context of its own: no tensor another spec dropped can be collected mid-check
    local own = idxlab.context{ backend = "cpu" }
    local before = own:alloc_stats().host_bytes_live
    local t = own:tensor("f32", { 1000 })
    assert.equals(before + 4000, own:alloc_stats().host_bytes_live)
    t:free()
    assert.equals(before, own:alloc_stats().host_bytes_live)
    -- an idxlab error is an object: its text, less the caller's line, is compared
    local ok, err = pcall(function() t:shape() end)
    assert.is_false(ok)
    assert.equals("idxlab: tensor was freed", (tostring(err):gsub("^.-: idxlab: ", "idxlab: ")))
  end)

  it("raises errors that name the bad value, at the caller's line", function()
    -- no tail call in the wrapper: a tail call drops the frame the error level points at
    local ok, err = pcall(function() local t = ctx:tensor("f64", { 2 }); return t end)
    assert.is_false(ok)
    assert.matches("dtype = f64: must be one of f32, f16, bf16", err)
    assert.matches("foundation_spec.lua", err)
    ok, err = pcall(function() return ctx:tensor("f32", { 2, -3 }) end)
    assert.is_false(ok)
    assert.matches("shape%[2%] = %-3", err)
    ok, err = pcall(function() return ctx:tensor("u8", { 2 }):from_table({ 1, 300 }) end)
    assert.is_false(ok)
    assert.matches("value 300 at index 1", err)
    ok, err = pcall(function() return ctx:tensor("u8", { 2 }):from_table({ 1 }) end)
    assert.is_false(ok)
    assert.matches("1 values given for a tensor of 2 elements", err)
    ok, err = pcall(function()
      return ctx:tensor("f32", { 2 }):copy_from(ctx:tensor("i32", { 2 }))
    end)
    assert.is_false(ok)
    assert.matches("dst dtype f32 != src dtype i32", err)
    ok, err = pcall(idxlab.context, { backend = "tpu" })
    assert.is_false(ok)
    assert.matches("backend = tpu", err)
    ok, err = pcall(idxlab.context, { colour = 1 })
    assert.is_false(ok)
    assert.matches("context option colour: unknown", err)
  end)

  it("checks the arguments of tensor methods", function()
    local t = ctx:tensor("f32", { 4 })
    local ok, err = pcall(function() t:view({ 2 }, -1) end)
    assert.is_false(ok)
    assert.matches("view: offset = %-1: must be a non%-negative integer", err)
    ok, err = pcall(function() t:view({ 2 }, 0, { 1, 1 }) end)
    assert.is_false(ok)
    assert.matches("stride must be a list of 1 integers", err)
    ok, err = pcall(function() t:fill_bytes(256) end)
    assert.is_false(ok)
    assert.matches("byte = 256: must be an integer in %[0, 255%]", err)
    ok, err = pcall(function() t:to("gpu") end)
    assert.is_false(ok)
    assert.matches('device = gpu: must be "host" or "device"', err)
    ok, err = pcall(function() t:view({ 3 }, 2) end)
    assert.is_false(ok)
    assert.matches("lies outside its base", err)
  end)

  it("reports a number it cannot pass to C as given, and refuses it, never wrapping or "
    .. "truncating it", function()
    -- the FFI used to turn inf into -2^63 (an int64) or -2^31 (an int) and 1.5 threads into 1
    local function err(f)
      local ok, e = pcall(f)
      assert.is_false(ok, "expected an error")
      assert.matches("foundation_spec%.lua:%d+: idxlab: ", e)
      return e
    end
    assert.matches("shape%[1%] = inf: must be a non%-negative integer below 2%^53",
      err(function() local t = ctx:tensor("f32", { math.huge }); return t end))
    assert.matches("shape%[2%] = 1e%+300: must be a non%-negative integer below 2%^53",
      err(function() local t = ctx:tensor("f32", { 1, 1e300 }); return t end))
    assert.matches("shape%[1%] = nan:",
      err(function() local t = ctx:tensor("f32", { 0 / 0 }); return t end))
    local t = ctx:tensor("f32", { 4 })
    assert.matches("view: offset = inf: must be a non%-negative integer below 2%^53",
      err(function() local v = t:view({ 2 }, math.huge); return v end))
    assert.matches("view: stride%[1%] = %-inf: must be an integer of magnitude below 2%^53",
      err(function() local v = t:view({ 2 }, 0, { -math.huge }); return v end))
    assert.matches("device = inf: must be a non%-negative integer, at most 2147483647",
      err(function() local c = idxlab.context{ device = math.huge }; return c end))
    assert.matches("device = 2147483648: must be a non%-negative integer, at most 2147483647",
      err(function() local c = idxlab.context{ device = 2 ^ 31 }; return c end))
    for _, bad in ipairs({ { 1.5, "1%.5" }, { 1e12, "1000000000000" }, { 0 / 0, "nan" },
      { math.huge, "inf" }, { 0, "0" }, { -3, "%-3" }, { 1025, "1025" }, { "2", "2" } }) do
      assert.matches("threads = " .. bad[2] .. ": must be an integer in %[1, 1024%]",
        err(function() local c = idxlab.context{ backend = "cpu", threads = bad[1] }; return c end))
    end
    assert.equals(3, idxlab.context{ backend = "cpu", threads = 3 }:threads())
    assert.equals(1024, idxlab.context{ backend = "cpu", threads = 1024 }:threads())
  end)

  it("refuses device tensors without a usable GPU", function()
    if idxlab.cuda_available() then return end
    local ok, err = pcall(function() return ctx:tensor("f32", { 2 }, "device") end)
    assert.is_false(ok)
    assert.matches("device", err)
    local ok2, err2 = pcall(idxlab.context, { backend = "cuda" })
    assert.is_false(ok2)
    assert.matches("backend = cuda: no usable CUDA device", err2)
  end)
end)

describe("the binding", function()
  local core = require("idxlab.ffi")
  local errors = require("idxlab.errors")

  it("derives the enum tables from the header, with the Lua-facing names", function()
    assert.are.same({ f32 = 0, f16 = 1, bf16 = 2, e4m3 = 3, e2m1x2 = 4, i32 = 5, u8 = 6 },
      core.enums.dtype)
    assert.are.same({ mxfp4 = 0, mxfp8 = 1, fp8 = 2 }, core.enums.kv_format)
    assert.are.same({ bf16 = 0, ["bf16+fp32"] = 1 }, core.enums.split_width)
    assert.are.same({ max = 0, mean = 1, sum = 2, logsumexp = 3 }, core.enums.block_score)
    assert.are.same({ host = 0, device = 1 }, core.enums.device)
    assert.are.same({ "rne", "ties_down" }, core.enum_names("quantizer"))
    assert.is_nil(core.enums.status)
  end)

  it("raises error objects: C's status name or ARG as the code, the caller's line as where",
    function()
    local ctx = idxlab.context{ backend = "cpu" }
    local ok, e = pcall(function()
      return ctx:tensor("f32", { 2 }):copy_from(ctx:tensor("i32", { 2 }))
    end)
    assert.is_false(ok)
    assert.is_true(errors.is(e))
    assert.equals("DTYPE", e.code)
    assert.matches("foundation_spec%.lua:%d+$", e.where)
    ok, e = pcall(function() return ctx:tensor("f64", { 2 }) end)
    assert.is_false(ok)
    assert.equals("ARG", e.code)
    assert.equals("dtype = f64: must be one of f32, f16, bf16, e4m3, e2m1x2, i32, u8", e.message)
  end)

  it("sets where to the line that called the public function, directly or through pcall",
    function()
    local ctx = idxlab.context{ backend = "cpu" }
    local line
    local ok, e = pcall(function()
      line = debug.getinfo(1, "l").currentline + 1
      local t = ctx:tensor("f64", { 2 }) -- not a tail call: this frame stays on the stack
      return t
    end)
    assert.is_false(ok)
    assert.equals("foundation_spec.lua:" .. line, e.where:match("[^/]*$"))
    line = debug.getinfo(1, "l").currentline + 1
    ok, e = pcall(ctx.tensor, ctx, "f64", { 2 })
    assert.is_false(ok)
    assert.equals("foundation_spec.lua:" .. line, e.where:match("[^/]*$"))
    assert.equals("foundation_spec.lua:" .. line .. ": idxlab: " .. e.message,
      tostring(e):match("[^/]*$"))
    -- every result passes, trailing nils included; a foreign error passes unchanged
    local f = errors.public(function(a) return a, nil, 3, nil end)
    assert.equals(4, select("#", f(1)))
    assert.are.same({ 1, nil, 3 }, { f(1) })
    local g = errors.public(function() error({ "not ours" }) end)
    ok, e = pcall(g)
    assert.is_false(ok)
    assert.are.same({ "not ours" }, e)
  end)

  it("makes one default CPU context, on first use", function()
    local d = idxlab.Context.default()
    assert.equals(d, idxlab.Context.default())
    assert.equals("cpu", d:backend())
  end)
end)

describe("the command", function()
  local bin = root() .. "/bin/idxlab"

  it("prints its version", function()
    local p = io.popen(bin .. " --version 2>&1")
    local out = p:read("*a")
    p:close()
    assert.matches("^idxlab %d+%.%d+%.%d+", out)
  end)

  it("keeps the REPL alive after an error (driven through a pipe)", function()
    local p = io.popen("printf 'x = 1 + nil\\nprint(\"after\", idxlab.version)\\n"
      .. "idxlab.context{backend=\"nope\"}\\nprint(\"still\", 2 + 2)\\n' | " .. bin .. " 2>&1")
    local out = p:read("*a")
    p:close()
    assert.matches("attempt to perform arithmetic", out)
    assert.matches("after%s+" .. idxlab.version:gsub("%.", "%%."), out)
    assert.matches("backend = nope", out)
    assert.matches("still%s+4", out)
  end)

  it("works from another directory", function()
    local p = io.popen("cd / && " .. bin .. " --version 2>&1")
    local out = p:read("*a")
    p:close()
    assert.matches("^idxlab", out)
  end)

  it("rejects an unknown command with the list", function()
    local rc, out = support.sh(bin .. " frobnicate")
    assert.matches('unknown command "frobnicate"', out)
    assert.equals(2, rc, out)
  end)
end)
