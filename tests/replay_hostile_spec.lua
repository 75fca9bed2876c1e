-- replay_hostile_spec: replay files that are wrong or unusual in ways a real dump can be, and
-- `idxlab diff` on BF16 outputs. Every input here is built by the spec itself (small steps:
-- 4 rows x 4 heads x 128, 256 keys, 2 consumer layers). Bad input must end in one
-- "idxlab: ..." error naming the tensor (never a crash, a raw Lua error or a silently wrong
-- output); unusual but valid input must replay with the right outputs.
local idxlab = require("idxlab")
local replay = require("idxlab.replay")
local safetensors = require("idxlab.safetensors")
local formats = require("idxlab.formats")
local diff = require("idxlab.cmd.diff")
local ffi = require("ffi")
local bit = require("bit")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local support = dofile(ROOT .. "/tests/support.lua")

local SETS = { heads = 4, index_topk = 8, candidate_block_size = 8, candidate_topk_blocks = 64 }
local R, H, D, N, L = 4, 4, 128, 256, 2

-- A typed array's bytes, as a Lua string.
local function bytes_of(ctype, values)
  local a = ffi.new(ctype .. "[?]", math.max(#values, 1))
  for i, v in ipairs(values) do a[i - 1] = v end
  return ffi.string(a, #values * ffi.sizeof(ctype))
end

local function vals(n, salt)
  local t = {}
  for i = 0, n - 1 do t[i + 1] = ((i * 7919 + salt * 104729) % 1000 - 500) / 128 end
  return t
end

local function f32(shape, salt, abs)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local v = vals(n, salt)
  if abs then for i = 1, n do v[i] = math.abs(v[i]) / 64 + 0.01 end end
  return { dtype = "F32", shape = shape, data = bytes_of("float", v) }
end

local function i32(values)
  return { dtype = "I32", shape = { #values }, data = bytes_of("int32_t", values) }
end

-- One valid ragged step: name -> {dtype, shape, data}.
local function base_step()
  local ks, ke = {}, {}
  for r = 0, R - 1 do ks[r + 1], ke[r + 1] = 64 * r, 64 * r + 64 - 7 * r end
  return {
    q = f32({ R, H, D }, 1), weights = f32({ R, H }, 2, true), k = f32({ N, D }, 3),
    q_consumer = f32({ L, R, H, D }, 4), weights_consumer = f32({ L, R, H }, 5, true),
    ks = i32(ks), ke = i32(ke),
  }
end

local ORDER = { "q", "q_codes", "q_scales", "weights", "k", "k_codes", "k_scales", "q_consumer",
  "q_consumer_codes", "q_consumer_scales", "weights_consumer", "ks", "ke", "context_lens",
  "row_start" }

-- Writes steps (a step table, or a list of {prefix, step}) to path.
local function write(path, steps)
  if steps[1] == nil then steps = { { "", steps } } end
  local list = {}
  for _, ps in ipairs(steps) do
    for _, name in ipairs(ORDER) do
      local e = ps[2][name]
      if e then
        list[#list + 1] = { name = ps[1] .. name, dtype = e.dtype, shape = e.shape, data = e.data,
          tensor = e.tensor }
      end
    end
  end
  safetensors.write(path, list, {})
  return path
end

local dir
local function tmp(name) return dir .. "/" .. name end

local function run(path, sets)
  local out = tmp("out-" .. math.random(1e9) .. ".safetensors")
  local summaries = replay.run(path, out, sets or SETS, { backend = "cpu" })
  local f = safetensors.read(out)
  os.remove(out)
  return f, summaries
end

-- The replay of path fails with one idxlab error holding every needle (plain text).
local function refuses(path, ...)
  local ok, err = pcall(replay.run, path, tmp("never.safetensors"), SETS, { backend = "cpu" })
  assert.is_false(ok, path .. " replayed")
  err = tostring(err)
  local msg = err:match("idxlab: .*")
  assert(msg, "not an idxlab error: " .. err)
  for _, needle in ipairs({ ... }) do
    assert(msg:find(needle, 1, true), ("%q not in %q"):format(needle, msg))
  end
  return msg
end

local function same_outputs(a, b)
  assert.are.same(a.names, b.names)
  for _, name in ipairs(a.names) do
    local x, y = a.tensors[name], b.tensors[name]
    assert.are.same(x.shape, y.shape, name)
    assert(ffi.string(x.data, x.nbytes) == ffi.string(y.data, y.nbytes), name .. " differs")
  end
end

describe("replay of hostile and unusual files", function()
  local ctx
  setup(function()
    dir = support.tmpdir("replay-hostile")
    ctx = idxlab.context{ backend = "cpu", seed = 1 }
  end)
  teardown(support.cleanup)

  it("checks the row ranges' dtype, rank and length before reading them", function()
    local function zeros(n)
      local t = {}
      for i = 1, n do t[i] = 0 end
      return t
    end
    local cases = {
      { "ks_long", function(s) s.ks = i32(zeros(1000000)) s.ke = i32({ 64 }) end,
        "tensor ks has shape [1000000]: dimension 1 (rows of q) is 1000000, expected 4" },
      { "ke_short", function(s) s.ke = i32({ 64 }) end,
        "tensor ke has shape [1]: dimension 1 (rows of q) is 1, expected 4" },
      { "ks_scalar",
        function(s) s.ks = { dtype = "I32", shape = {}, data = bytes_of("int32_t", { 0 }) } end,
        "tensor ks has shape []: expected 1 dims (rows of q)" },
      { "ks_f32", function(s) s.ks = f32({ R }, 9) end, "tensor ks has dtype F32, expected I32" },
      { "ks_u8", function(s) s.ks = { dtype = "U8", shape = { R }, data = "\0\0\0\0" } end,
        "tensor ks has dtype U8, expected I32" },
      { "ks_2d", function(s)
          s.ks = { dtype = "I32", shape = { 2, 2 }, data = bytes_of("int32_t", { 0, 0, 0, 0 }) }
        end,
        "tensor ks has shape [2, 2]: expected 1 dims" },
      { "cl_f32", function(s)
          s.ks, s.ke = nil, nil
          s.context_lens = f32({ R }, 9)
          s.row_start = i32({ 0, 0, 0, 0 })
        end,
        "tensor context_lens has dtype F32, expected I32" },
      { "ke_far", function(s) s.ke = i32({ 64, 121, 178, 2000000000 }) end,
        "row 3: ks = 192, ke = 2000000000", "outside k's 256 rows" },
      { "ks_neg", function(s) s.ks = i32({ 0, -5, 128, 192 }) end, "row 1: ks = -5" },
    }
    for _, c in ipairs(cases) do
      local s = base_step()
      c[2](s)
      refuses(write(tmp(c[1] .. ".safetensors"), s), tmp(c[1] .. ".safetensors"), c[3], c[4])
    end
  end)

  it("refuses a file with no tensors, alone and inside a folder", function()
    local empty = tmp("meta_only.safetensors")
    safetensors.write(empty, {}, { config = "{}" })
    refuses(empty, empty .. ": no tensors")
    local fold = tmp("fold_with_empty")
    require("idxlab.fs").mkdir_p(fold)
    write(fold .. "/a.safetensors", base_step())
    safetensors.write(fold .. "/b.safetensors", {}, {})
    refuses(fold, fold .. "/b.safetensors: no tensors")
  end)

  it("takes q, k and q_consumer each plain or pre-quantized, and nothing half given", function()
    local plain = base_step()
    local ref = run(write(tmp("plain.safetensors"), plain))
    -- the codes the pipeline itself makes (mxfp4, rne), so the replays must agree bitwise
    local function codes_of(e, role)
      local t = ctx:tensor("f32", e.shape)
      ffi.copy(t.cd.data, e.data, #e.data)
      local c, sc = formats.quantize(ctx, "mxfp4", "rne", role, t)
      t:free()
      return { tensor = c }, { tensor = sc }
    end
    local qc, qs = codes_of(plain.q, "q")
    local kc, kscl = codes_of(plain.k, "k")
    local qcc, qcs = codes_of(plain.q_consumer, "q")
    local function variant(name, edit)
      local s = base_step()
      edit(s)
      return write(tmp(name .. ".safetensors"), s)
    end
    -- q plain with q_consumer pre-quantized, and the other way round: both replay as the plain
    -- file
    local a = variant("q_plain_qc_codes", function(s)
      s.q_consumer = nil
      s.q_consumer_codes, s.q_consumer_scales = qcc, qcs
    end)
    same_outputs(ref, run(a))
    local b = variant("q_codes_qc_plain", function(s) s.q = nil s.q_codes, s.q_scales = qc, qs end)
    same_outputs(ref, run(b))
    local c = variant("all_codes", function(s)
      s.q, s.k, s.q_consumer = nil, nil, nil
      s.q_codes, s.q_scales, s.k_codes, s.k_scales = qc, qs, kc, kscl
      s.q_consumer_codes, s.q_consumer_scales = qcc, qcs
    end)
    same_outputs(ref, run(c))
    -- both forms, or half a pair
    refuses(variant("both_qc", function(s) s.q_consumer_codes, s.q_consumer_scales = qcc, qcs end),
      "give one: q_consumer or q_consumer_codes/q_consumer_scales, not both")
    refuses(variant("qc_and_codes_only", function(s) s.q_consumer_codes = qcc end),
      "give one: q_consumer or q_consumer_codes/q_consumer_scales", "q_consumer_codes")
    refuses(variant("q_and_scales", function(s) s.q_scales = qs end),
      "give one: q or q_codes/q_scales", "q_scales")
    refuses(variant("k_and_scales", function(s) s.k_scales = kscl end),
      "give one: k or k_codes/k_scales", "k_scales")
    refuses(variant("q_codes_alone", function(s) s.q = nil s.q_codes = qc end),
      "tensor q_codes without q_scales")
    refuses(variant("q_scales_alone", function(s) s.q = nil s.q_scales = qs end),
      "tensor q_scales without q_codes")
    refuses(variant("k_codes_alone", function(s) s.k = nil s.k_codes = kc end),
      "tensor k_codes without k_scales")
    refuses(variant("k_scales_alone", function(s) s.k = nil s.k_scales = kscl end),
      "tensor k_scales without k_codes")
    refuses(variant("qc_codes_alone",
      function(s) s.q_consumer = nil s.q_consumer_codes = qcc end),
      "tensor q_consumer_codes without q_consumer_scales")
    refuses(variant("qc_scales_alone",
      function(s) s.q_consumer = nil s.q_consumer_scales = qcs end),
      "tensor q_consumer_scales without q_consumer_codes")
    refuses(variant("no_qc", function(s) s.q_consumer = nil end), "tensor q_consumer is missing")
    for _, t in ipairs({ qc, qs, kc, kscl, qcc, qcs }) do t.tensor:free() end
  end)

  it("refuses non-canonical and duplicate step prefixes, naming the prefix", function()
    local function two(name, p0, p1)
      return write(tmp(name .. ".safetensors"), { { p0, base_step() }, { p1, base_step() } })
    end
    refuses(two("step0_step00", "step0/", "step00/"), "step00/q",
      "step prefix step00/ is not canonical")
    refuses(two("step0_step01", "step0/", "step01/"), "step01/q",
      "step prefix step01/ is not canonical")
    refuses(two("plain_step0", "", "step0/"), "mixes step<i>/ names with unprefixed names")
    refuses(two("step0_step2", "step0/", "step2/"), "step2/ present but step1/ missing")
    local f, summaries = run(two("step0_step1", "step0/", "step1/"))
    assert.equals(2, #summaries)
    assert.is_not_nil(f.tensors["step1/dense_logits"])
  end)

  it("reads a folder whose path holds shell characters literally", function()
    for _, name in ipairs({ "d$HOME", "sp ace", "it's", "a`true`b", "$(touch pwned)" }) do
      local fold = tmp(name)
      require("idxlab.fs").mkdir_p(fold)
      write(fold .. "/x.safetensors", base_step())
      local f, summaries = run(fold)
      assert.equals(1, #summaries, name)
      assert.are.same({ R, 64 }, f.tensors.dense_logits.shape, name)
    end
    assert.is_nil(io.open(dir .. "/pwned", "rb"))
    assert.is_nil(io.open("pwned", "rb"))
    refuses(tmp("d$HOME") .. "/none.safetensors", "none.safetensors")
    local e = tmp("empty $HOME")
    require("idxlab.fs").mkdir_p(e)
    refuses(e, e .. ": a folder with no .safetensors files")
  end)

  -- Issue 19: a decode row of 0 positions (context_lens = 0) is an empty row at any
  -- compress_ratio: no candidate, end 0, sparse ids 0, -1 top-k and -inf logits; the other
  -- rows replay as they do without it.
  it("replays decode rows of context_lens = 0 as empty rows, at any compress_ratio", function()
    -- A decode step of 4 rows; `keep` (0-based rows) takes only those rows of the same data.
    local function decode_step(lens, starts, keep)
      local s = base_step()
      s.ks, s.ke = nil, nil
      s.context_lens, s.row_start = i32(lens), i32(starts)
      if keep then
        local cl, rs = {}, {}
        for i, r in ipairs(keep) do cl[i], rs[i] = lens[r + 1], starts[r + 1] end
        s.context_lens, s.row_start = i32(cl), i32(rs)
      end
      -- rows of an F32 entry of shape [outer, R, inner...] (outer 1 for [R, ...])
      local function rows(e, outer)
        if not keep then return e end
        local bytes = #e.data / outer / R
        local parts = {}
        for o = 0, outer - 1 do
          for _, r in ipairs(keep) do
            local at = (o * R + r) * bytes
            parts[#parts + 1] = e.data:sub(at + 1, at + bytes)
          end
        end
        local shape = {}
        for i, d in ipairs(e.shape) do shape[i] = d end
        shape[outer > 1 and 2 or 1] = #keep
        return { dtype = "F32", shape = shape, data = table.concat(parts) }
      end
      s.q, s.weights = rows(s.q, 1), rows(s.weights, 1)
      s.q_consumer, s.weights_consumer = rows(s.q_consumer, L), rows(s.weights_consumer, L)
      return s
    end
    local function rows_of(f, name, r)
      local t = f.tensors[name]
      local w = #t.shape == 1 and 1 or t.shape[#t.shape]
      local lead = #t.shape == 3 and t.shape[2] or t.shape[1]
      local out = {}
      for l = 0, (#t.shape == 3 and t.shape[1] or 1) - 1 do
        local base = (l * lead + r) * w
        for j = 0, w - 1 do
          if t.dtype == "I32" then
            out[#out + 1] = ffi.cast("const int32_t *", t.data)[base + j]
          elseif t.dtype == "F32" then
            out[#out + 1] = ffi.cast("const float *", t.data)[base + j]
          else
            out[#out + 1] = ffi.cast("const uint16_t *", t.data)[base + j]
          end
        end
      end
      return out
    end
    local function all(list, v)
      for _, x in ipairs(list) do if x ~= v then return false end end
      return true
    end
    for _, ratio in ipairs({ 1, 4 }) do
      local sets = {}
      for k, v in pairs(SETS) do sets[k] = v end
      sets.compress_ratio = ratio
      local f = run(write(tmp("decode_empty_" .. ratio .. ".safetensors"),
        decode_step({ 57, 0, 64, 0 }, { 0, 64, 64, 200 })), sets)
      local g = run(write(tmp("decode_full_" .. ratio .. ".safetensors"),
        decode_step({ 57, 0, 64, 0 }, { 0, 64, 64, 200 }, { 0, 2 })), sets)
      assert.are.same({ 4, 64 }, f.tensors.dense_logits.shape)
      for _, r in ipairs({ 1, 3 }) do
        assert.is_true(all(rows_of(f, "cand_blocks", r), -1), "cand_blocks row " .. r)
        assert.is_true(all(rows_of(f, "sparse_ids", r), 0), "sparse_ids row " .. r)
        assert.are.same({ 0 }, rows_of(f, "end", r))
        assert.is_true(all(rows_of(f, "dense_logits", r), -math.huge), "dense_logits row " .. r)
        for _, name in ipairs({ "source_topk_pos", "topk_pos", "masked_topk_pos",
          "dense_topk_pos" }) do
          assert.is_true(all(rows_of(f, name, r), -1), name .. " row " .. r)
        end
      end
      -- rows 0 and 2 are rows 0 and 1 of the file without the empty rows (sparse_logits: the
      -- columns before end; the rest is unspecified)
      for _, name in ipairs(f.names) do
        for gr, fr in pairs({ [0] = 0, [1] = 2 }) do
          local x, y = rows_of(f, name, fr), rows_of(g, name, gr)
          if name == "sparse_logits" then
            local e = rows_of(g, "end", gr)[1]
            local w = #y / L
            for l = 0, L - 1 do
              for j = 1, e do assert.equals(y[l * w + j], x[l * w + j], name) end
            end
          else
            assert.are.same(y, x, ("%s row %d, compress_ratio %d"):format(name, fr, ratio))
          end
        end
      end
      -- every row empty: dense_logits [R, 0], every top-k -1
      f = run(write(tmp("decode_none_" .. ratio .. ".safetensors"),
        decode_step({ 0, 0, 0, 0 }, { 0, 0, 100, 256 })), sets)
      assert.are.same({ 4, 0 }, f.tensors.dense_logits.shape)
      for r = 0, 3 do
        assert.is_true(all(rows_of(f, "topk_pos", r), -1))
        assert.are.same({ 0 }, rows_of(f, "end", r))
      end
    end
  end)

  it("writes dense_logits as [R, 0] when every row is empty (N_max = the longest row)", function()
    local s = base_step()
    s.ks, s.ke = i32({ 0, 64, 128, 0 }), i32({ 0, 64, 128, 0 })
    local f = run(write(tmp("all_empty.safetensors"), s))
    assert.are.same({ R, 0 }, f.tensors.dense_logits.shape)
    assert.are.same({ R, 8 }, f.tensors.source_topk_pos.shape)
    s.ke = i32({ 0, 64, 133, 0 })
    f = run(write(tmp("one_row.safetensors"), s))
    assert.are.same({ R, 5 }, f.tensors.dense_logits.shape)
  end)
end)

describe("idxlab diff on BF16 tensors", function()
  setup(function() dir = support.tmpdir("diff-bf16") end)
  teardown(support.cleanup)

  -- The bf16 bits of an exactly representable value (here: multiples of 1/4 in [-2, 2]).
  local function bf16_bits(v)
    if v == 0 then return 0 end
    local m, e = math.frexp(math.abs(v)) -- |v| = m 2^e, m in [0.5, 1)
    local mant = (2 * m - 1) * 128
    assert(mant == math.floor(mant), "not a bf16 value")
    return bit.bor(v < 0 and 0x8000 or 0, bit.lshift(e - 1 + 127, 7), mant)
  end

  local function bf16_file(path, bits)
    safetensors.write(path, { { name = "sparse_logits", dtype = "BF16", shape = { #bits },
      data = bytes_of("uint16_t", bits) } }, {})
    return path
  end

  it("knows bf16 values from their bits", function()
    assert.equals(1, diff.bf16_value(0x3f80))
    assert.equals(-2, diff.bf16_value(0xc000))
    assert.equals(1.5078125, diff.bf16_value(0x3fc1))
    assert.equals(2 ^ -133, diff.bf16_value(0x0001))
    assert.equals(-math.huge, diff.bf16_value(0xff80))
    local nan = diff.bf16_value(0x7fc1)
    assert.is_true(nan ~= nan)
    assert.equals(0x3fc0, bf16_bits(1.5))
  end)

  it("counts one flipped bit in a 1000-element tensor exactly once, with the JIT compiling the"
    .. " loop", function()
    assert.is_true((jit.status()), "the JIT is off")
    local n, at = 1000, 517
    local xs, a, b = {}, {}, {}
    for i = 0, n - 1 do
      local v = ((i * 37) % 17 - 8) / 4
      if i == at then v = 1.5 end
      xs[i + 1] = v
      a[i + 1] = bf16_bits(v)
      b[i + 1] = a[i + 1]
    end
    b[at + 1] = bit.bxor(a[at + 1], 1) -- 1.5 -> 1.5078125
    local ys = {}
    for i = 1, n do ys[i] = xs[i] end
    ys[at + 1] = 1.5078125
    -- SPEC 3's 1 - 2*sum(xy)/sum(x^2+y^2), written as sum((x-y)^2)/sum(x^2+y^2) (the same
    -- value without the cancellation, and exactly 0 for equal tensors)
    local sdd, sq = 0, 0
    for i = 1, n do sdd, sq = sdd + (xs[i] - ys[i]) ^ 2, sq + xs[i] ^ 2 + ys[i] ^ 2 end
    local want = sdd / sq
    local pa, pb = bf16_file(tmp("a.safetensors"), a), bf16_file(tmp("b.safetensors"), b)
    for round = 1, 60 do -- well past the JIT's hot-loop threshold
      local out = diff.compare(pa, pb)
      local e = out.entries[1]
      assert.equals(1, out.differ, "round " .. round)
      assert.equals(1, e.mismatches, "round " .. round)
      assert.equals(at, e.first, "round " .. round)
      assert.equals(0, e.mask_mismatches)
      assert.is_true(e.diff > 0 and math.abs(e.diff - want) <= 1e-12 * want,
        ("round %d: diff %.17g, want %.17g"):format(round, e.diff, want))
      local same = diff.compare(pa, pa)
      assert.equals(0, same.differ, "round " .. round)
      assert.equals(0, same.entries[1].diff)
    end
  end)

  it("treats +0 and -0 as equal, any NaN as equal to any NaN, and counts -inf mask mismatches",
  function()
    local a = { 0x0000, 0x7fc0, 0xff81, 0xff80, 0x3f80, 0x3f80 }
    local b = { 0x8000, 0xffc1, 0x7fff, 0xff80, 0xff80, 0xbf80 }
    for _ = 1, 200 do a[#a + 1] = 0x4000 b[#b + 1] = 0x4000 end
    local e = diff.compare(bf16_file(tmp("z1.safetensors"), a),
      bf16_file(tmp("z2.safetensors"), b)).entries[1]
    assert.equals(2, e.mismatches)
    assert.equals(4, e.first)
    assert.equals(1, e.mask_mismatches)
  end)
end)
