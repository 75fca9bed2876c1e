-- cuda_spec: the CUDA ops outside the logits kernels, driven from Lua on the GPU (#gpu):
-- K3 candidates, K4 expand, K6 top-k, K7 remap and the candidate mask through idxlab.select,
-- the number formats (quantize, dequantize, weights, paged K) through the C API, each compared
-- with the CPU reference on fresh random inputs (the seed is in every failure message), with
-- device outputs poisoned first; plus the errors a REPL user meets (host and device tensors
-- mixed) and the device memory that :free() gives back. tests/c/test_cuda_ops.c covers the
-- same ops at more shapes and the large ones.
local idxlab = require("idxlab")
local core = require("idxlab.ffi")
local sel = require("idxlab.select")
local C = core.C

local seed = tonumber(os.getenv("IXL_TEST_SEED") or "") or os.time()
math.randomseed(seed)

-- A random logit: mostly normal, with ties, zeros of both signs, +-inf and NaN.
local function tricky()
  local p = math.random(100)
  if p == 1 then return 0 / 0 end
  if p == 2 then return math.huge end
  if p == 3 then return -math.huge end
  if p == 4 then return -0.0 end
  if p <= 20 then return math.random(-4, 4) * 0.5 end
  local u1, u2 = math.random(), math.random()
  return math.sqrt(-2 * math.log(u1 + 1e-300)) * math.cos(2 * math.pi * u2) * 3
end

local function list(n, f)
  local t = {}
  for i = 1, n do t[i] = f(i) end
  return t
end

-- Equal lists, with NaN == NaN (to_table gives NaNs for NaN elements).
local function same_values(a, b, what)
  assert.equals(#a, #b, what)
  for i = 1, #a do
    local x, y = a[i], b[i]
    if not (x == y or (x ~= x and y ~= y)) then
      error(("%s: element %d: gpu %s, cpu %s (seed %d)"):format(what, i, tostring(x), tostring(y),
        seed), 2)
    end
  end
end

describe("the CUDA ops from Lua #gpu", function()
  local cpu, gpu
  setup(function()
    cpu = idxlab.context{ backend = "cpu", seed = seed }
    gpu = idxlab.context{ backend = "cuda", seed = seed }
  end)
  teardown(function()
    gpu:free()
    cpu:free()
  end)

  -- The same values on the host (CPU context) and on the device.
  local function pair(dtype, shape, values)
    local h = cpu:tensor(dtype, shape, "host"):from_table(values)
    local d = gpu:tensor(dtype, shape, "device"):from_table(values)
    return h, d
  end
  -- A poisoned device output.
  local function poisoned(dtype, shape)
    return gpu:tensor(dtype, shape, "device"):fill_bytes(0xA5)
  end

  it("top-k of f32 and bf16 rows, sorted and not, matches the CPU #gpu", function()
    local R, Cn = 5, 3000
    local vals = list(R * Cn, tricky)
    local starts = list(R, function() return math.random(0, 500) end)
    local ends = list(R, function(i) return i == 1 and starts[1] or math.random(starts[i], Cn) end)
    local sh, sd = pair("i32", { R }, starts)
    local eh, ed = pair("i32", { R }, ends)
    for _, dtype in ipairs({ "f32", "bf16" }) do
      local xh, xd = pair(dtype, { R, Cn }, vals)
      for _, k in ipairs({ 1, 8, 100, 1024 }) do
        for _, sorted in ipairs({ false, true }) do
          local what = ("topk %s k=%d sorted=%s seed %d"):format(dtype, k, tostring(sorted), seed)
          local oh = sel.topk(cpu, xh, sh, eh, k, sorted)
          local od = sel.topk(gpu, xd, sd, ed, k, sorted, poisoned("i32", { R, k }))
          same_values(od:to_table(), oh:to_table(), what)
          od:free()
        end
      end
      xd:free()
    end
    sd:free(); ed:free()
  end)

  it("candidate selection (every block_score), expand, remap and the mask match the CPU #gpu",
    function()
    local R, Cn, cbs, sbk, T, k = 4, 4000, 16, 8, 40, 64
    local vals = list(R * Cn, tricky)
    local lens = { Cn, 0, 17, math.random(1, Cn) }
    local xh, xd = pair("f32", { R, Cn }, vals)
    local nh, nd = pair("i32", { R }, lens)
    for _, score in ipairs({ "max", "mean", "sum", "logsumexp" }) do
      local ch = sel.candidates(cpu, xh, nh, cbs, T, score)
      local cd = sel.candidates(gpu, xd, nd, cbs, T, score, poisoned("i32", { R, T }))
      -- logsumexp may differ at near-ties (libm): test_cuda_ops.c checks it
      if score ~= "logsumexp" then
        same_values(cd:to_table(), ch:to_table(), "candidates " .. score .. " seed " .. seed)
      end
      cd:free()
    end
    local ch = sel.candidates(cpu, xh, nh, cbs, T)
    local cd = sel.candidates(gpu, xd, nd, cbs, T)
    local ih, eh = sel.expand(cpu, ch, nil, nh, cbs, sbk)
    local id, ed = sel.expand(gpu, cd, nil, nd, cbs, sbk, "unaligned",
      poisoned("i32", { R, T * cbs / sbk }), poisoned("i32", { R }))
    same_values(id:to_table(), ih:to_table(), "expand ids seed " .. seed)
    same_values(ed:to_table(), eh:to_table(), "expand end seed " .. seed)
    -- sparse columns below each row's end, and -1 pads
    local ends = eh:to_table()
    local cols = list(R * k, function(i)
      local e = ends[math.floor((i - 1) / k) + 1]
      return (e > 0 and math.random(4) > 1) and math.random(0, e - 1) or -1
    end)
    local colh, cold = pair("i32", { R, k }, cols)
    local ph = sel.remap(cpu, colh, ih, nil, sbk)
    local pd = sel.remap(gpu, cold, id, nil, sbk, poisoned("i32", { R, k }))
    same_values(pd:to_table(), ph:to_table(), "remap seed " .. seed)
    sel.remap(gpu, cold, id, nil, sbk, cold) -- in place
    same_values(cold:to_table(), ph:to_table(), "remap in place seed " .. seed)
    for _, dtype in ipairs({ "f32", "bf16" }) do
      local mh, md = pair(dtype, { R, Cn }, vals)
      sel.mask_candidates(cpu, mh, nh, ch, cbs)
      sel.mask_candidates(gpu, md, nd, cd, cbs)
      same_values(md:to_table(), mh:to_table(), "mask " .. dtype .. " seed " .. seed)
      md:free()
    end
    for _, t in ipairs({ xd, nd, cd, id, ed, pd, cold }) do t:free() end
  end)

  it("quantize, dequantize, weights and paged K match the CPU bit for bit #gpu", function()
    local M, P = 40, 64
    local x = list(M * 128, function(i)
      local g = math.floor((i - 1) / 32)
      return tricky() * 2 ^ ((g * 7) % 41 - 20)
    end)
    for fmt = 0, 2 do
      local vb = fmt == 0 and 64 or 128
      local sdt = fmt == 2 and "f32" or "i32"
      for q = 0, 1 do
        for role = 0, 1 do
          local what = ("format %d quantizer %d role %d seed %d"):format(fmt, q, role, seed)
          local xh, xd = pair("f32", { M, 128 }, x)
          local ch, sh = cpu:tensor("u8", { M, vb }, "host"), cpu:tensor(sdt, { M }, "host")
          local cdv, sdv = poisoned("u8", { M, vb }), poisoned(sdt, { M })
          cpu:check(C.ixl_quantize(cpu.cd, fmt, q, role, xh.cd, ch.cd, sh.cd))
          gpu:check(C.ixl_quantize(gpu.cd, fmt, q, role, xd.cd, cdv.cd, sdv.cd))
          same_values(cdv:to_table(), ch:to_table(), what .. " codes")
          same_values(sdv:to_table(), sh:to_table(), what .. " scales")
          local noscale = fmt == 2 and role == 0
          local yh, yd = cpu:tensor("f32", { M, 128 }, "host"), poisoned("f32", { M, 128 })
          local hs, ds = sh.cd, sdv.cd
          if noscale then hs, ds = nil, nil end -- fp8 Q: the scale lives in the weights
          cpu:check(C.ixl_dequantize(cpu.cd, fmt, role, ch.cd, hs, yh.cd))
          gpu:check(C.ixl_dequantize(gpu.cd, fmt, role, cdv.cd, ds, yd.cd))
          same_values(yd:to_table(), yh:to_table(), what .. " dequantized")
          if q == 0 and role == 1 then
            -- the paged layout: a shuffled page table, stride rounded up to 512 B
            local npages = math.ceil(M / P)
            local stride = math.ceil(P * (vb + 4) / 512) * 512
            local ids = list(npages, function(i) return npages - i end)
            local init = list((npages + 1) * stride, function(i) return i % 251 end)
            local pgh, pgd = pair("u8", { npages + 1, stride }, init)
            local idh, idd = pair("i32", { npages }, ids)
            cpu:check(C.ixl_kv_pages_write(cpu.cd, fmt, ch.cd, sh.cd, 0, M, pgh.cd, P, idh.cd))
            gpu:check(C.ixl_kv_pages_write(gpu.cd, fmt, cdv.cd, sdv.cd, 0, M, pgd.cd, P, idd.cd))
            same_values(pgd:to_table(), pgh:to_table(), what .. " pages")
            pgd:free(); idd:free()
          end
          for _, t in ipairs({ xd, cdv, sdv, yd }) do t:free() end
        end
      end
    end
    -- weights: fp8 folds the Q scales in; bf16 of the fp32 product
    local R, H = 3, 32
    local w = list(R * H, function() return tricky() end)
    local qs = list(R * H, function() return 2 ^ math.random(-12, 6) end)
    local wh, wd = pair("f32", { R, H }, w)
    local qh, qd = pair("f32", { R, H }, qs)
    for fmt = 0, 2 do
      local dh, bh = cpu:tensor("f32", { R, H }, "host"), cpu:tensor("bf16", { R, H }, "host")
      local dd, bd = poisoned("f32", { R, H }), poisoned("bf16", { R, H })
      cpu:check(C.ixl_prepare_weights(cpu.cd, fmt, wh.cd, fmt == 2 and qh.cd or nil, dh.cd, bh.cd))
      gpu:check(C.ixl_prepare_weights(gpu.cd, fmt, wd.cd, fmt == 2 and qd.cd or nil, dd.cd, bd.cd))
      same_values(dd:to_table(), dh:to_table(), "weights dense " .. fmt)
      same_values(bd:to_table(), bh:to_table(), "weights sparse " .. fmt)
      dd:free(); bd:free()
    end
    wd:free(); qd:free()
  end)

  it("refuses host and device tensors mixed, at the caller's line #gpu", function()
    local xd = gpu:tensor("f32", { 2, 16 }, "device"):from_table(list(32, tricky))
    local eh = gpu:tensor("i32", { 2 }, "host"):from_table({ 16, 8 })
    local ok, err = pcall(function()
      local out = sel.topk(gpu, xd, nil, eh, 4) -- not a tail call: the error names this line
      return out
    end)
    assert.is_false(ok)
    assert.matches("row_end is in host memory but logits is in device memory", err)
    assert.matches("cuda_spec.lua", err)
    xd:free()
  end)

  it("gives the device memory of its outputs back on :free() #gpu", function()
    collectgarbage(); collectgarbage()
    collectgarbage("stop") -- no tensor another spec dropped is collected mid-check
    local before = gpu:alloc_stats().device_bytes_live
    local R, Cn, k = 3, 512, 16
    local xd = gpu:tensor("f32", { R, Cn }, "device"):from_table(list(R * Cn, tricky))
    local ed = gpu:tensor("i32", { R }, "device"):from_table({ Cn, 100, 0 })
    local od = sel.topk(gpu, xd, nil, ed, k, true)
    assert.equals("device", od:device())
    assert.is_true(gpu:alloc_stats().device_bytes_live >= before + R * Cn * 4 + R * k * 4)
    local out = od:to_table()
    for j = 1, k do assert.equals(-1, out[2 * k + j], "the empty row pads with -1") end
    od:free(); xd:free(); ed:free()
    local live = gpu:alloc_stats().device_bytes_live
    collectgarbage("restart")
    assert.equals(before, live)
  end)
end)
