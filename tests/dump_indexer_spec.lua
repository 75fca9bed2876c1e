-- dump_indexer_spec: scripts/dump_indexer.py for real. It runs in the project's virtual
-- environment (.venv, git-ignored), which scripts/setup.sh makes with numpy and safetensors
-- (`make test` runs the set-up first); the specs only use it and fetch nothing, and fail,
-- naming the command to run, when it is missing. The helper dumps multi-step and decode
-- files, which idxlab reads back (names, shapes, dtypes, exact values, metadata) and replays
-- with `bin/idxlab replay`. Every file it writes lies in a private temporary directory.
local safetensors = require("idxlab.safetensors")
local json = require("idxlab.json")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local support = dofile(ROOT .. "/tests/support.lua")
teardown(support.cleanup)
local PY = ROOT .. "/.venv/bin/python"
local PYB = PY .. " -B" -- writes no __pycache__ into scripts/
-- Python runs without the sanitizer runtime that `make test SANITIZE=1` preloads; idxlab's own
-- command keeps it (a sanitized library needs it).
local ENV = "unset LD_PRELOAD; "

local function sh(cmd, keep_preload) return support.sh((keep_preload and "" or ENV) .. cmd) end

-- `idxlab replay IN OUT` on the CPU at the demo's sizes (4 heads), run from ROOT.
local REPLAY = "cd %q && bin/idxlab replay %q %q --set backend=cpu --set heads=4 "
  .. "--set index_topk=8 --set candidate_block_size=8 --set candidate_topk_blocks=64"

local exists = require("idxlab.fs").exists

-- The venv scripts/setup.sh made; a spec that needs it fails (never skips) without it.
local venv_ready
local function need_venv()
  if venv_ready == nil then
    venv_ready = sh(("%q -c 'import numpy, safetensors'"):format(PY)) == 0
  end
  assert(venv_ready, PY .. " cannot import numpy and safetensors: run scripts/setup.sh "
    .. "(it makes .venv; `make test` runs it first)")
end

local dir
local function tmpname(tag)
  dir = dir or support.tmpdir("dump-indexer")
  return dir .. "/" .. tag .. ".safetensors"
end

-- The demo's values, restated from dump_indexer.demo_step.
local function demo_value(i, salt, s)
  return ((i * 7919 + salt * 104729 + s * 15485863) % 1000 - 500) / 128
end

describe("scripts/dump_indexer.py", function()
  it("writes a multi-step replay file that idxlab reads back exactly", function()
    need_venv()
    local path = tmpname("steps")
    local rc, out = sh(("cd %q && %s scripts/dump_indexer.py --demo %q --steps 2"):format(ROOT,
      PYB, path))
    assert.equals(0, rc, out)
    -- the fixture scripts/make_fixtures.sh writes holds these very tensors (the header's
    -- metadata order may differ: the writer keeps it in a hash map)
    local fresh = safetensors.read(path)
    local fixture = safetensors.read(ROOT .. "/tests/fixtures/replay_steps.safetensors")
    assert.equals(#fresh.names, #fixture.names)
    for _, name in ipairs(fresh.names) do
      local a, b = fresh.tensors[name], fixture.tensors[name]
      assert(b and a.dtype == b.dtype and a.nbytes == b.nbytes
        and require("ffi").string(a.data, a.nbytes) == require("ffi").string(b.data, b.nbytes),
        name .. " differs in tests/fixtures/replay_steps.safetensors: run scripts/make_fixtures.sh")
    end
    fresh:close()
    fixture:close()
    local f = safetensors.read(path)
    local want = {
      q = { "F32", { 4, 4, 128 } }, weights = { "F32", { 4, 4 } }, k = { "F32", { 256, 128 } },
      q_consumer = { "F32", { 2, 4, 4, 128 } }, weights_consumer = { "F32", { 2, 4, 4 } },
      ks = { "I32", { 4 } }, ke = { "I32", { 4 } },
    }
    for s = 0, 1 do
      for name, w in pairs(want) do
        local e = f.tensors[("step%d/%s"):format(s, name)]
        assert(e, ("step%d/%s missing"):format(s, name))
        assert.equals(w[1], e.dtype)
        assert.are.same(w[2], e.shape)
      end
      local q, k = f.tensors[("step%d/q"):format(s)], f.tensors[("step%d/k"):format(s)]
      for _, i in ipairs({ 0, 1, 777, 2047 }) do
        assert.equals(demo_value(i, 1, s), q.data[i])
        assert.equals(demo_value(i, 3, s), k.data[i])
      end
      local ks, ke = f.tensors[("step%d/ks"):format(s)], f.tensors[("step%d/ke"):format(s)]
      for r = 0, 3 do
        assert.equals(64 * r, ks.data[r])
        assert.equals(64 * r + 64 - 7 * r, ke.data[r])
      end
    end
    assert.equals(14, #f.names)
    assert.are.same({ heads = 4 }, json.decode(f.metadata.config))
    f:close()
    os.remove(path)
  end)

  it("refuses inconsistent steps with a message naming the tensor", function()
    need_venv()
    local cases = {
      { "del s['weights']", "weights is required" },
      { "s['k'] = s['k'][:, :64]", "k: shape (256, 64), expected (256, 128)" },
      { "s['context_lens'] = s['ke']",
        "give the row ranges as ks and ke (ragged) or as context_lens and row_start" },
      { "s['q_codes'] = s['q'].astype('uint8')",
        "give q, or q_codes with q_scales (exactly one of them)" },
      { "s['colour'] = s['q']", "unknown tensor(s) ['colour']" },
      { "s['q_consumer'] = s['q_consumer'].astype('float16')",
        "q_consumer: dtype float16 differs from q's float32" },
    }
    for _, c in ipairs(cases) do
      local code = ("import sys; sys.path.insert(0, 'scripts'); import dump_indexer as d; "
        .. "s = d.demo_step(0, False); %s; d.dump('/dev/null', [s])"):format(c[1])
      local rc, out = sh(("cd %q && %s -c %q"):format(ROOT, PYB, code))
      assert.are_not.equal(0, rc)
      assert.is_truthy(out:find("step 0: " .. c[2], 1, true), out)
    end
  end)

  it("--show lists BF16 tensors (dtype and shape from the header) with numpy only", function()
    need_venv()
    local path = tmpname("show")
    safetensors.write(path, {
      { name = "q", dtype = "BF16", shape = { 4, 4, 128 }, data = ("\0\63"):rep(4 * 4 * 128) },
      { name = "weights", dtype = "F32", shape = { 4, 4 }, data = ("\0"):rep(64) },
      { name = "ks", dtype = "I32", shape = { 4 }, data = ("\0"):rep(16) },
    }, { writer = "spec" })
    local rc, out = sh(("cd %q && %s scripts/dump_indexer.py --show %q"):format(ROOT, PYB, path))
    assert.equals(0, rc, out)
    assert.equals("ks I32 [4]\nq BF16 [4, 4, 128]\nweights F32 [4, 4]\n", out)
    os.remove(path)
    rc, out = sh(("cd %q && %s scripts/dump_indexer.py --show %q"):format(ROOT, PYB,
      ROOT .. "/Makefile"))
    assert.equals(1, rc, out)
    assert.matches("^dump_indexer.py: [^\n]*Makefile: header length %d+ exceeds the file", out)
  end)

  it("dumps q and q_consumer in two forms (plain, pre-quantized) that replay takes", function()
    need_venv()
    local have = pcall(require, "idxlab.pipeline")
    if not have then pending("the pipeline is not complete yet") return end
    -- mxfp4: 64 code bytes per 128-vector, one I32 of four UE8M0 scale bytes (0x7f: 2^0)
    local edits = {
      "s['q_consumer_codes'] = np.full((2, 4, 4, 64), 0x21, np.uint8); "
        .. "s['q_consumer_scales'] = np.full((2, 4, 4), 0x7f7f7f7f, np.int32); del s['q_consumer']",
      "s['q_codes'] = np.full((4, 4, 64), 0x12, np.uint8); "
        .. "s['q_scales'] = np.full((4, 4), 0x7f7f7f7f, np.int32); del s['q']",
    }
    for _, edit in ipairs(edits) do
      local path, out_path = tmpname("mixed"), tmpname("mixed-out")
      local code = ("import sys; sys.path.insert(0, 'scripts'); import numpy as np; "
        .. "import dump_indexer as d; "
        .. "s = d.demo_step(0, False); %s; d.dump('%s', s)"):format(edit, path)
      local rc, out = sh(("cd %q && %s -c %q"):format(ROOT, PYB, code))
      assert.equals(0, rc, out)
      rc, out = sh(REPLAY:format(ROOT, path, out_path), true)
      assert.equals(0, rc, edit .. ": " .. out)
      local o = safetensors.read(out_path)
      o:expect("topk_pos", { dtypes = { "i32" }, shape = { 2, 4, 8 } })
      o:close()
      os.remove(path)
      os.remove(out_path)
    end
  end)

  it("dumps a decode step that `idxlab replay` replays", function()
    need_venv()
    -- replay needs the whole pipeline; until every module of it exists, say so
    local have, err = pcall(require, "idxlab.replay")
    if have then have, err = pcall(require, "idxlab.pipeline") end
    if not exists(ROOT .. "/lua/idxlab/cmd/replay.lua") or not have then
      pending("bin/idxlab replay is not complete yet: " .. tostring(err):match("[^\n]*"))
      return
    end
    for _, decode in ipairs({ true, false }) do
      local path, out_path = tmpname("in"), tmpname("out")
      local rc, out = sh(("cd %q && %s scripts/dump_indexer.py --demo %q %s"):format(ROOT, PYB,
        path, decode and "--decode" or ""))
      assert.equals(0, rc, out)
      local f = safetensors.read(path)
      assert.is_not_nil(f.tensors[decode and "context_lens" or "ks"])
      f:close()
      rc, out = sh(REPLAY:format(ROOT, path, out_path), true)
      assert.equals(0, rc, out)
      local o = safetensors.read(out_path)
      local dl = o:expect("dense_logits", { dtypes = { "f32" }, shape = { 4, 64 } })
      local src = o:expect("source_topk_pos", { dtypes = { "i32" }, shape = { 4, 8 } })
      o:expect("topk_pos", { dtypes = { "i32" }, shape = { 2, 4, 8 } })
      for r = 0, 3 do
        local len = 64 - 7 * r
        for j = 0, 63 do
          local v = dl.data[r * 64 + j]
          if j < len then
            assert(v > -math.huge and v == v, ("row %d col %d: %s"):format(r, j, tostring(v)))
          else
            assert.equals(-math.huge, v)
          end
        end
        for i = 0, 7 do
          local p = src.data[r * 8 + i]
          assert(p >= 0 and p < len,
            ("row %d: source top-k position %d outside [0, %d)"):format(r, p, len))
        end
      end
      o:close()
      os.remove(path)
      os.remove(out_path)
    end
  end)
end)
