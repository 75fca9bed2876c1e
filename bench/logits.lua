-- bench_logits.lua -- Question: how fast are the logits kernels on the GPU -- K1 (dense,
-- ragged prefill), K2 (dense, paged decode) and K5 (sparse) -- at the V4.1-Flash shape
-- (mxfp4, H = 32) and the V3.2 shape (fp8, H = 64), including GPU.md's peer shapes?
--
--   bin/idxlab script bench/logits.lua [reps=20] [only=k2_] [variant=v2]
--                                                  [scale=0.01 backend=cpu]
--
-- variant=NAME pins the logits variant (e.g. v2, whose own kernel is K2 fp8; each row records
-- the variant that ran).
--
-- The cases of bench/cases.lua and the method of bench/bench_logits.c (which
-- bench/bench_logits.sh runs next to the PyTorch baseline and the measured ceilings, in one
-- command on the GPU machine):
-- CUDA events around each call on the context's stream, 3 warm-ups, then `reps` runs each
-- after a 256 MiB device memset that flushes the L2; median, minimum and 90th percentile.
-- Random codes with UE8M0 exponent bytes in 120..134 (the kernels' common path). FLOPs count
-- the valid (row, position) pairs only: 2 * pairs * H * 128. Bytes: keys read once, queries,
-- weights, logits written. `scale` shrinks every case (rows and positions) for a quick CPU
-- run; the ratios to the ceilings need the GPU.
-- The kernels are called through bench/lib.lua's named wrappers, resolved before the timed
-- loop, so the timed region holds the C call only, as in bench_logits.c.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local lib = dofile(here .. "/lib.lua")

local M = {
  name = "bench_logits",
  question = "Time, TFLOP/s and GB/s of K1, K2 and K5 at the V4.1-Flash and V3.2 shapes",
}

-- The cases: bench/cases.lua, the one list (bench_logits.c and bench/torch/logits.py read its
-- JSON export). Its header says what each field means.
M.cases = dofile(here .. "/cases.lua").logits

local function bench(opts)
  opts = opts or {}
  local idxlab = require("idxlab")
  local ffi = require("idxlab.ffi").ffi
  local ctx = opts.ctx or idxlab.context{ backend = opts.backend or "cuda", seed = opts.seed or 1 }
  local reps, scale, only = opts.reps or 20, opts.scale or 1, opts.only
  local log = opts.log or print
  local rows_out = {}
  local variants = require("idxlab.variants")
  if opts.variant then variants.set(ctx, "logits", opts.variant) end

  local state = ffi.new("uint64_t[1]", 0x1234567ULL)
  local function rnd()
    local z = state[0] + 0x9E3779B97F4A7C15ULL
    state[0] = z
    z = bit.bxor(z, bit.rshift(z, 30)) * 0xBF58476D1CE4E5B9ULL
    z = bit.bxor(z, bit.rshift(z, 27)) * 0x94D049BB133111EBULL
    return bit.bxor(z, bit.rshift(z, 31))
  end
  local function host(dtype, shape) return ctx:tensor(dtype, shape, "host") end
  local function fill_codes(t, fmt)
    local n = t:numel()
    local p = ffi.cast("uint8_t *", t.cd.data)
    for i = 0, n - 1, 8 do
      local r = rnd()
      for k = 0, math.min(7, n - 1 - i) do
        local b = tonumber(bit.band(bit.rshift(r, 8 * k), 0xFF))
        if fmt ~= "mxfp4" and bit.band(b, 0x7F) == 0x7F then b = bit.bxor(b, 1) end
        p[i + k] = b
      end
    end
  end
  local function mx_word()
    local r, w = rnd(), 0
    for k = 0, 3 do w = w + (120 + tonumber(bit.rshift(r, 8 * k) % 15)) * 2 ^ (8 * k) end
    return w >= 2 ^ 31 and w - 2 ^ 32 or w
  end
  local function scale_word(fmt)
    if fmt == "fp8" then return 2 ^ -8 * (1 + tonumber(rnd() % 1000) / 1000) end
    return mx_word()
  end
  local function on_device(t)
    if ctx:device_kind() ~= "device" then return t end
    local d = t:to("device")
    t:free()
    return d
  end
  local flush = ctx:tensor("u8", { ctx:device_kind() == "device" and 256 * 2 ^ 20 or 1 })

  for _, c in ipairs(M.cases) do
    if not only or c.name:find(only, 1, true) then
      local fmt, H = c.kv_format, c.heads
      local R = math.max(1, math.floor(c.rows * scale))
      local N = math.max(1024, math.floor(c.positions * scale / 1024) * 1024)
      local vb = fmt == "mxfp4" and 64 or 128
      local mx = fmt ~= "fp8"
      local bf16 = c.bf16
      local qk = { kv_format = fmt }
      local keep = {}
      local function k(t) keep[#keep + 1] = t; return t end
      local qc = host("u8", { R, H, vb }); fill_codes(qc, fmt); qc = k(on_device(qc))
      qk.q_codes = qc
      if mx then
        local qs = host("i32", { R, H })
        local p = qs:ptr()
        for i = 0, R * H - 1 do p[i] = mx_word() end
        qk.q_scales = k(on_device(qs))
      end
      local w = host(bf16 and "bf16" or "f32", { R, H })
      do
        local p = ffi.cast(bf16 and "uint16_t *" or "float *", w.cd.data)
        for i = 0, R * H - 1 do
          local v = tonumber(rnd() % 2000) / 1000 - 1
          p[i] = bf16 and lib.f32_to_bf16(v) or v
        end
      end
      w = k(on_device(w))
      local ks, ke, bt, ids = host("i32", { R }), host("i32", { R }), nil, nil
      local paged = c.page_size > 0
      local valid = 0
      if paged then
        local P = c.page_size
        local mp = math.ceil(N / P)
        local stride = math.ceil(P * (vb + 4) / 512) * 512
        local pages = host("u8", { R * mp, stride })
        fill_codes(pages, fmt)
        local pb = ffi.cast("uint8_t *", pages.cd.data)
        for pg = 0, R * mp - 1 do
          local s = ffi.cast(mx and "int32_t *" or "float *", pb + pg * stride + P * vb)
          for i = 0, P - 1 do s[i] = scale_word(fmt) end
        end
        bt = host("i32", { R, mp })
        local b = bt:ptr()
        for r = 0, R - 1 do
          for j = 0, mp - 1 do b[r * mp + j] = r * mp + j end
          for j = mp - 1, 1, -1 do
            local x = tonumber(rnd() % (j + 1))
            b[r * mp + j], b[r * mp + x] = b[r * mp + x], b[r * mp + j]
          end
          ks:ptr()[r] = 0
          ke:ptr()[r] = N
        end
        qk.k_pages = k(on_device(pages))
        qk.page_size = P
        bt = k(on_device(bt))
      else
        local kc = host("u8", { N, vb }); fill_codes(kc, fmt)
        local ksc = host(mx and "i32" or "f32", { N })
        local p = ksc:ptr()
        for i = 0, N - 1 do p[i] = scale_word(fmt) end
        qk.k_codes = k(on_device(kc))
        qk.k_scales = k(on_device(ksc))
        for r = 0, R - 1 do
          ks:ptr()[r] = 0
          ke:ptr()[r] = math.max(1, N - R + r + 1)
        end
      end
      local cols, nsb, sbk = N, c.sparse_blocks, c.sparse_block_kv
      if c.kernel == "K5" then
        ids = host("i32", { R, nsb })
        local p = ids:ptr()
        for r = 0, R - 1 do
          local len = ke:ptr()[r] - ks:ptr()[r]
          local nblk = math.ceil(len / sbk)
          local want, n = math.min(nblk, nsb), 0
          for blk = 0, nblk - 1 do
            if n >= want then break end
            if (want - n) > (tonumber(rnd() % 1000000) / 1000000) * (nblk - blk) then
              p[r * nsb + n] = blk
              n = n + 1
            end
          end
          for j = n, nsb - 1 do p[r * nsb + j] = n > 0 and p[r * nsb + n - 1] or 0 end
          valid = valid + (want < nsb and len or nsb * sbk)
        end
        ids = k(on_device(ids))
        cols = nsb * sbk
      else
        for r = 0, R - 1 do valid = valid + ke:ptr()[r] - ks:ptr()[r] end
      end
      local kbytes = (c.kernel == "K1" and N or valid) * (vb + 4)
      ks, ke = k(on_device(ks)), k(on_device(ke))
      local out = k(ctx:tensor(bf16 and "bf16" or "f32", { R, cols }))
      local red = bf16 and "bf16" or "fp32"
      local call
      if c.kernel == "K1" then
        call = lib.dense_logits(ctx, { qk = qk, weights = w, ks = ks, ke = ke, out = out,
          layout = "full", clean = false, reduction = red })
      elseif c.kernel == "K2" then
        call = lib.dense_logits_paged(ctx, { qk = qk, weights = w, context_lens = ke,
          block_table = bt, out = out, reduction = red })
      else
        call = lib.sparse_logits(ctx, { qk = qk, weights = w, row_ks = not paged and ks or nil,
          row_ke = ke, block_table = paged and bt or nil, sparse_ids = ids, sparse_block_kv = sbk,
          ks_mode = "unaligned", out = out })
      end
      for _ = 1, 3 do ctx:check(call()) end
      ctx:sync()
      local times = {}
      for i = 1, reps do
        flush:fill_bytes(i % 256)
        times[i] = lib.time_us(ctx, function() ctx:check(call()) end)
      end
      local med, mn, p90 = lib.order_stats(times)
      local flops = 2 * valid * H * 128
      local bytes = kbytes + R * H * (vb + 8) + R * cols * (bf16 and 2 or 4)
      local row = { name = c.name, kernel = c.kernel, kv_format = fmt, heads = H, rows = R,
        positions = N, columns = cols, valid_pairs = valid, us_median = med, us_min = mn,
        us_p90 = p90, tflops = flops / med * 1e-6, gbs = bytes / med * 1e-3,
        backend = ctx:backend(), device = ctx:device_name(),
        variant = variants.ran(ctx, "logits") }
      rows_out[#rows_out + 1] = row
      log(("%-38s %10.1f us %8.1f TFLOP/s %8.0f GB/s"):format(c.name, med, row.tflops, row.gbs))
      for i = #keep, 1, -1 do keep[i]:free() end
    end
  end
  flush:free()
  return rows_out
end

M.bench = bench

-- `bin/idxlab script bench/logits.lua key=value ...` calls main(opts) with those values.
function M.main(opts) return bench(opts) end

return M
