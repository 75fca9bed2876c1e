#!/usr/bin/env python3
"""dump_indexer.py - write what a DSA lightning indexer sees in a step as an idxlab replay file.

Needs numpy and the `safetensors` package; torch only if you pass torch tensors. Every
argument may be a numpy array or a torch tensor (any device; BF16 stays BF16 when torch is
installed, F16 stays F16). The file uses the tensor names of SPEC 7, so `bin/idxlab replay
FILE OUT` replays it on the CPU or the GPU.

Where the tensors live in a vLLM-style indexer forward pass (DeepSeek V3.2 / V4.1), for the
candidate source layer and for each consumer layer:

    def forward(hidden_states, qr, positions, rotary_emb):        # the Indexer module
        q = wq_b(qr).view(-1, n_heads, head_dim)                    # rope applied to its pe part
        k = k_norm(wk(hidden_states))                               # rope applied likewise
        weights = weights_proj(hidden_states) * n_heads ** -0.5 * softmax_scale
        #   -> dump HERE: q [R,H,D] and weights [R,H] (after RoPE, before the fp8/fp4
        #      quantization of q and before the q scale is folded into the weights),
        #      and k [tokens, D] (after k_norm and RoPE, before it is quantized into the cache)
        q_quant, q_scale = quantize(q); weights = weights * q_scale
        write k into the paged indexer K cache
        logits = mqa_logits(q_quant, k_cache, weights, ...)        # prefill: ragged rows
        logits = paged_mqa_logits(q_quant, k_cache, weights, ...)  # decode: paged rows
        topk_indices = top_k(logits, index_topk)

- Source layer: q, weights, and k of every request in the step, concatenated into one [N, D]
  array (the keys the prefill path gathers into its workspace; for decode, the cached keys of
  each request, gathered from the cache pages).
- Consumer layers: their q and weights only, stacked as q_consumer [L,R,H,D] and
  weights_consumer [L,R,H]; they score against the source layer's keys.
- Row ranges, one form per step: prefill rows as ks/ke (the metadata's cu_seqlen_ks and
  cu_seqlen_ke, made relative to your k array), or decode rows as context_lens (the sequence
  lengths, in positions) with row_start (where each row's keys begin in k).
- Pre-quantized inputs, to replay an engine's cache bytes bit for bit: q_codes/q_scales in
  place of q, k_codes/k_scales in place of k, q_consumer_codes/q_consumer_scales in place of
  q_consumer (U8 codes; I32 packed UE8M0 scales for mxfp4/mxfp8, F32 scales for fp8).

    import dump_indexer
    dump_indexer.dump("step.safetensors", dict(q=q, weights=w, k=k, q_consumer=qc,
                      weights_consumer=wc, ks=ks, ke=ke))
    dump_indexer.dump("steps.safetensors", [step0, step1])      # step<i>/ prefixes

Command line: `python3 scripts/dump_indexer.py --demo OUT [--steps N] [--decode]` writes a
small deterministic file (values from a formula, so a test can check them exactly);
`--show FILE` lists a file's tensors (name, safetensors dtype, shape), from the header
alone: BF16 tensors need no torch.
"""
import json
import sys

import numpy as np

FLOATS = ("q", "k", "q_consumer")
RANGES = {"ragged": ("ks", "ke"), "decode": ("context_lens", "row_start")}
QUANTIZED = {"q": ("q_codes", "q_scales"), "k": ("k_codes", "k_scales"),
             "q_consumer": ("q_consumer_codes", "q_consumer_scales")}
NAMES = set(FLOATS) | {"weights", "weights_consumer"} | {n for p in RANGES.values() for n in p} \
    | {n for p in QUANTIZED.values() for n in p}


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _prepare(name, x):
    """-> numpy array, or a CPU torch tensor for BF16 (numpy has no bfloat16)."""
    if _is_torch(x):
        import torch
        x = x.detach().cpu().contiguous()
        if x.dtype == torch.bfloat16:
            if name not in FLOATS:
                raise ValueError(f"{name}: bfloat16 is allowed only for q, k and q_consumer")
            return x
        x = x.numpy()
    x = np.ascontiguousarray(np.asarray(x))
    if name in FLOATS:
        if x.dtype not in (np.float32, np.float16):
            x = x.astype(np.float32)
    elif name in ("weights", "weights_consumer"):
        x = x.astype(np.float32)
    elif name.endswith("_codes"):
        if x.dtype != np.uint8:
            raise ValueError(f"{name}: codes must be uint8, got {x.dtype}")
    elif name.endswith("_scales"):
        if x.dtype not in (np.int32, np.float32):
            raise ValueError(f"{name}: scales must be int32 (mxfp4/mxfp8) or float32 (fp8), "
                             f"got {x.dtype}")
    else:  # row ranges
        if x.size and (x.min() < -2**31 or x.max() >= 2**31):
            raise ValueError(f"{name}: values must fit int32")
        x = x.astype(np.int32)
    return x


def _shape(x):
    return tuple(x.shape)


def check_step(step):
    """Validates one step's names and shapes; returns {name: array} ready to save."""
    unknown = set(step) - NAMES
    if unknown:
        raise ValueError(f"unknown tensor(s) {sorted(unknown)}; names are {sorted(NAMES)}")
    out = {n: _prepare(n, v) for n, v in step.items() if v is not None}
    for plain, (codes, scales) in QUANTIZED.items():
        have_plain, have_q = plain in out, codes in out or scales in out
        if have_plain == have_q:
            raise ValueError(f"give {plain}, or {codes} with {scales} (exactly one of them)")
        if have_q and not (codes in out and scales in out):
            raise ValueError(f"{codes} and {scales} go together")
    for n in ("weights", "weights_consumer"):
        if n not in out:
            raise ValueError(f"{n} is required")
    forms = [f for f, names in RANGES.items() if any(n in out for n in names)]
    if len(forms) != 1 or not all(n in out for n in RANGES[forms[0]]):
        raise ValueError("give the row ranges as ks and ke (ragged) or as context_lens and "
                         "row_start (decode), one form per step")
    q = out.get("q", out.get("q_codes"))
    R, H = _shape(q)[:2]
    L = _shape(out.get("q_consumer", out.get("q_consumer_codes")))[0]
    N = _shape(out.get("k", out.get("k_codes")))[0]
    want = {"weights": (R, H), "weights_consumer": (L, R, H)}
    for n in RANGES[forms[0]]:
        want[n] = (R,)
    if "q" in out:
        D = _shape(out["q"])[2]
        want.update(q=(R, H, D), q_consumer=(L, R, H, D), k=(N, D))
    for n, shp in want.items():
        if n in out and _shape(out[n]) != shp:
            raise ValueError(f"{n}: shape {_shape(out[n])}, expected {shp}")
    if "q" in out and "q_consumer" in out and str(out["q"].dtype) != str(out["q_consumer"].dtype):
        raise ValueError(f"q_consumer: dtype {out['q_consumer'].dtype} differs from q's {out['q'].dtype}")
    return out


def dump(path, steps, config=None):
    """Writes one step (a dict) or several (a list of dicts, saved with step<i>/ prefixes).
    config: optional dict stored as JSON in the file's __metadata__ ("config")."""
    single = isinstance(steps, dict)
    steps = [steps] if single else list(steps)
    if not steps:
        raise ValueError("no steps to dump")
    tensors = {}
    for i, step in enumerate(steps):
        prefix = "" if single else f"step{i}/"
        try:
            for n, v in check_step(step).items():
                tensors[prefix + n] = v
        except ValueError as e:
            raise ValueError(f"step {i}: {e}") from None
    meta = {"writer": "idxlab scripts/dump_indexer.py"}
    if config is not None:
        meta["config"] = json.dumps(config, sort_keys=True)
    if any(_is_torch(v) for v in tensors.values()):
        import torch
        from safetensors.torch import save_file
        tensors = {n: v if _is_torch(v) else torch.from_numpy(v) for n, v in tensors.items()}
    else:
        from safetensors.numpy import save_file
    save_file(tensors, path, metadata=meta)


def read_header(path):
    """A safetensors file's header {name: {dtype, shape, data_offsets}}, read without loading
    any tensor (numpy has no bfloat16, so BF16 tensors cannot be loaded with numpy alone)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("not a safetensors file: shorter than its 8-byte header length")
        n = int.from_bytes(head, "little")
        if n > size - 8:
            raise ValueError(f"header length {n} exceeds the file ({size} bytes)")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(e, dict) or not isinstance(e.get("dtype"), str) \
                or not isinstance(e.get("shape"), list):
            raise ValueError(f"tensor {name}: header entry has no dtype and shape")
    return header


def demo_step(s, decode, R=4, H=4, D=128, L=2, ctx=64):
    """A small deterministic step: every value from a formula the tests restate."""
    def vals(shape, salt):
        i = np.arange(int(np.prod(shape)), dtype=np.int64)
        return (((i * 7919 + salt * 104729 + s * 15485863) % 1000 - 500) / 128.0) \
            .astype(np.float32).reshape(shape)
    N = R * ctx
    step = dict(q=vals((R, H, D), 1), weights=np.abs(vals((R, H), 2)) / 64 + 0.01,
                k=vals((N, D), 3), q_consumer=vals((L, R, H, D), 4),
                weights_consumer=np.abs(vals((L, R, H), 5)) / 64 + 0.01)
    lens = np.array([ctx - 7 * r for r in range(R)], dtype=np.int32)
    starts = np.arange(R, dtype=np.int32) * ctx
    if decode:
        step.update(context_lens=lens, row_start=starts)
    else:
        step.update(ks=starts, ke=starts + lens)
    return step


def main(argv):
    if len(argv) >= 2 and argv[0] == "--demo":
        out, n, decode = argv[1], 1, "--decode" in argv
        if "--steps" in argv:
            n = int(argv[argv.index("--steps") + 1])
        steps = [demo_step(s, decode) for s in range(n)]
        dump(out, steps[0] if n == 1 else steps, config={"heads": 4})
        return 0
    if len(argv) == 2 and argv[0] == "--show":
        try:
            header = read_header(argv[1])
        except (OSError, ValueError) as e:
            print(f"dump_indexer.py: {argv[1]}: {e}", file=sys.stderr)
            return 1
        for n in sorted(k for k in header if k != "__metadata__"):
            print(n, header[n]["dtype"], header[n]["shape"])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
