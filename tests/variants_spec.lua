-- variants_spec: idxlab.variants on the CPU: the listing, a pin selecting a variant and its
-- read-back (the result row's `variant.<family>`), the default, and the refusals by name with
-- their messages. The test-only variants (ref_alt, v1_alt) exist only in the test copy of the
-- library that `make test` builds ($(BUILD)/test); against the installable library the specs
-- that need them are reported pending, never passed silently.
local idxlab = require("idxlab")
local errors = require("idxlab.errors")
local formats = require("idxlab.formats")
local logits = require("idxlab.logits")
local variants = require("idxlab.variants")

local seed = tonumber(os.getenv("IXL_TEST_SEED") or "") or (os.time() % 1000003)
math.randomseed(seed)

local function names(family)
  local out = {}
  for _, v in ipairs(variants.list(family)) do out[#out + 1] = v.name end
  return out
end

local function has(family, name)
  for _, n in ipairs(names(family)) do
    if n == name then return true end
  end
  return false
end

-- One mxfp4 layer with H heads: K1 inputs (fp32 reduction).
local function make_layer(ctx, H)
  local R, N = 2, 40
  local function rnd(shape)
    local n, v = 1, {}
    for _, d in ipairs(shape) do n = n * d end
    for i = 1, n do v[i] = math.random() * 2 - 1 end
    return ctx:tensor("f32", shape):from_table(v)
  end
  local qc, qs = formats.quantize(ctx, "mxfp4", "rne", "q", rnd({ R, H, 128 }))
  local kc, ks = formats.quantize(ctx, "mxfp4", "rne", "k", rnd({ N, 128 }))
  local wd = formats.prepare_weights(ctx, "mxfp4", rnd({ R, H }))
  local qk = { q_codes = qc, q_scales = qs, k_codes = kc, k_scales = ks, kv_format = "mxfp4" }
  local kst = ctx:tensor("i32", { R }):from_table({ 0, 5 })
  local ket = ctx:tensor("i32", { R }):from_table({ 40, 33 })
  return function() return logits.dense(ctx, qk, wd, kst, ket) end
end

local function caught(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok)
  assert.is_true(errors.is(e))
  return e, tostring(e)
end

describe("variants", function()
  local ctx = idxlab.context{ backend = "cpu", seed = 1 }
  local test_build = has("logits", "ref_alt")

  it("lists every family's variants with backend, min_sm and a description", function()
    assert.are.same({ "logits", "select", "index", "formats", "gen" }, variants.families())
    local l = variants.list("logits")
    assert.equals("ref", l[1].name)
    assert.equals("cpu", l[1].backend)
    assert.equals(0, l[1].min_sm)
    assert.equals("fast", l[2].name)
    local v1
    for _, v in ipairs(l) do
      assert.is_true(#v.about > 0)
      if v.name == "v1" then v1 = v end
    end
    assert.equals("cuda", v1.backend)
    assert.equals(80, v1.min_sm)
    assert.are.same({ "ref", "v1", "v2" }, names("select")) -- v2: K6 (select/topk_v2.cu)
    assert.are.same({}, variants.list("index"))
  end)

  it("says which stages a variant fuses into another (SPEC 6's fused)", function()
    assert.are.same({ remap = true }, variants.fuses("select", "v2"))
    -- logits v1's K1/K2 emit K3's block scores (issue 14's fused K3)
    assert.are.same({ candidate_select = true }, variants.fuses("logits", "v1"))
    for _, v in ipairs({ { "select", "v1" }, { "select", "ref" }, { "logits", "v2" },
      { "select", "v9" }, { "select", nil } }) do
      assert.are.same({}, variants.fuses(v[1], v[2]), tostring(v[1]) .. " " .. tostring(v[2]))
    end
    assert.has_error(function() variants.fuses("bogus", "v2") end)
  end)

  it("records the default and a pin per family, and reads them back (seed " .. seed .. ")",
    function()
      local run = make_layer(ctx, 8)
      variants.set(ctx, "logits", nil)
      assert.is_nil(variants.get(ctx, "logits"))
      local want = run():to_table()
      local best = variants.ran(ctx, "logits")
      assert.is_true(best == "fast" or best == "ref")
      variants.set(ctx, "logits", "ref")
      assert.equals("ref", variants.get(ctx, "logits"))
      assert.are.same(want, run():to_table())
      assert.equals("ref", variants.ran(ctx, "logits"))
      variants.set(ctx, "logits", "")
      assert.is_nil(variants.get(ctx, "logits"))
      run()
      assert.equals(best, variants.ran(ctx, "logits"))
    end)

  it("selects the test-only ref_alt by pin, and refuses it by name where it does not apply",
    function()
      if not test_build then
        pending("needs the test library (make test's $(BUILD)/test): ref_alt is not registered")
        return
      end
      local run = make_layer(ctx, 8)
      local want = run():to_table()
      variants.set(ctx, "logits", "ref_alt")
      assert.are.same(want, run():to_table())
      assert.equals("ref_alt", variants.ran(ctx, "logits"))
      local big = make_layer(ctx, 128)
      local e, s = caught(big)
      assert.equals("UNSUPPORTED", e.code)
      assert.truthy(s:find("logits variant ref_alt does not support this problem (kv_format "
        .. "mxfp4, heads 128, head_dim 128); would run: ", 1, true))
      assert.truthy(s:match("^[^:]+:%d+: idxlab: ")) -- where: the line that called
      variants.set(ctx, "logits", nil)
    end)

  it("refuses unknown families and names, and a variant of the other backend", function()
    local _, s = caught(variants.set, ctx, "logits", "v9")
    assert.truthy(s:find("logits variant v9: no such variant (logits has: ref, fast", 1, true))
    _, s = caught(variants.set, ctx, "bogus", "ref")
    assert.truthy(s:find("variants.set: family = bogus: must be one of logits, select", 1, true))
    _, s = caught(variants.ran, ctx, 3)
    assert.truthy(s:find("variants.ran: family = 3", 1, true))
    _, s = caught(variants.set, "ctx", "logits", "ref")
    assert.truthy(s:find("variants.set: ctx must be a Context, got string", 1, true))
    _, s = caught(variants.set, ctx, "logits", 5)
    assert.truthy(s:find("variants.set: name = 5: must be a string", 1, true))
    local e
    e, s = caught(variants.set, ctx, "logits", "v1")
    assert.equals("UNSUPPORTED", e.code)
    assert.truthy(s:find("logits variant v1 runs on cuda, but this context is cpu (its logits "
      .. "variants: ref, fast", 1, true))
  end)
end)
