-- replay_fixture_spec: the committed replay fixtures (written by scripts/dump_indexer.py, i.e.
-- by another program) replayed through `idxlab.replay`: a multi-step ragged file and a decode
-- file on the CPU, and (#gpu) the same files on the GPU, whose outputs must equal the CPU's
-- under the parity rules (integers exactly, mxfp4 sparse logits bitwise, dense fp32 logits
-- within 1e-5 relative: the head sum's order is free in fp32).
local replay = require("idxlab.replay")
local safetensors = require("idxlab.safetensors")
local ffi = require("ffi")

local ROOT = os.getenv("IDXLAB_ROOT") or "."
local SETS = { heads = 4, index_topk = 8, candidate_block_size = 8, candidate_topk_blocks = 64 }

local function run(file, backend)
  local out = os.tmpname() .. ".safetensors"
  local summaries, ctx = replay.run(ROOT .. "/tests/fixtures/" .. file, out, SETS,
    { backend = backend })
  ctx:free() -- now, not by a finalizer later (under another run's graph capture)
  local f = safetensors.read(out)
  os.remove(out)
  return summaries, f
end

local function bytes(e) return ffi.string(e.data, e.nbytes) end

describe("replay of the committed fixtures", function()
  for _, file in ipairs({ "replay_steps.safetensors", "replay_decode.safetensors" }) do
    it("replays " .. file .. " on the CPU with every SPEC 7 output", function()
      local summaries, f = run(file, "cpu")
      local steps = file == "replay_steps.safetensors" and 2 or 1
      assert.equals(steps, #summaries)
      for i = 0, steps - 1 do
        local prefix = steps > 1 and ("step%d/"):format(i) or ""
        for _, name in ipairs(replay.OUTPUT_ORDER) do
          assert.is_not_nil(f.tensors[prefix .. name], prefix .. name)
        end
        assert.equals(0, summaries[i + 1].logit_mismatches)
      end
    end)

    it("#gpu replays " .. file .. " on the GPU with the CPU's outputs", function()
      assert.is_true(require("idxlab").cuda_available(), "no usable CUDA device")
      local _, a = run(file, "cpu")
      local _, b = run(file, "cuda")
      for _, name in ipairs(a.names) do
        local x, y = a.tensors[name], b.tensors[name]
        assert.is_not_nil(y, name)
        assert.are.same(x.shape, y.shape, name)
        if name:match("dense_logits$") then
          local px, py = ffi.cast("const float *", x.data), ffi.cast("const float *", y.data)
          for i = 0, x.nbytes / 4 - 1 do
            local u, v = px[i], py[i]
            if u ~= v then
              assert.is_true(math.abs(u - v) <= 1e-5 * math.max(math.abs(u), math.abs(v)),
                ("%s[%d]: cpu %.9g, gpu %.9g"):format(name, i, u, v))
            end
          end
        else
          assert.is_true(bytes(x) == bytes(y), name .. " differs between CPU and GPU")
        end
      end
    end)
  end
end)
