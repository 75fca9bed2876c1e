#!/usr/bin/env python3
"""bench/torch/logits.py - the plain PyTorch baseline of the logits kernels, the machine's
ceilings, and the combined table. Run by bench/bench_logits.sh after bench_logits (the C
program), in the same command on the GPU machine:

    python3 bench/torch/logits.py CASES.json bench_c.csv [reps]
    python3 bench/torch/logits.py --list CASES.json     (the cases as read; needs no torch)

CASES.json is bench/cases.lua's export (`bin/idxlab script bench/cases.lua out=CASES.json`),
the one case list bench_logits.c read too; bench_c.csv is its output, which names the cases
that ran (a case-substring run has fewer) and gives our times.

1. Ceilings measured here and now: the fp8 peak (torch._scaled_mm 8192^3, e4m3 in, bf16 out,
   the better of fast accumulation on and off) and the copy bandwidth (a 4 GiB device-to-
   device copy, counting bytes read plus written).
2. For every case of the CSV, the same computation written as a researcher would in PyTorch:
   dequantize the keys (and queries) to bf16 with their scales, per-head scores by einsum,
   relu, the head weights and the head sum in fp32, -inf outside each row's range; paged
   keys gathered through the block table, sparse keys through the ids. Timed like the C
   side: CUDA events, warm-up, an L2 flush (256 MiB memset) before each run, the median.
   Row chunks keep the per-head score tensor under about 2 GB.
3. One table: our time, TFLOP/s, share of the fp8 peak (prefill and sparse) or of the copy
   bandwidth (decode), the PyTorch time and the ratio PyTorch / ours."""
import csv
import json
import statistics
import sys

# torch is imported by setup(), so that --list (and read_cases) work where it is not installed.
torch = None
dev = "cuda"
flush_buf = None
E2M1 = None

# The fields of every case in bench/cases.lua's export, in its order.
FIELDS = ("name", "kernel", "kv_format", "heads", "rows", "positions", "page_size", "bf16",
          "sparse_blocks", "sparse_block_kv")


def read_cases(path):
    """The cases of bench/cases.lua's JSON export at path, as a dict by name (in file order).
    A case without exactly FIELDS, or a name twice, is an error naming the file and case."""
    with open(path) as f:
        cases = json.load(f)
    if not isinstance(cases, list) or not cases:
        sys.exit(f"logits.py: {path}: expected a non-empty JSON array of cases")
    by_name = {}
    for i, c in enumerate(cases):
        if not isinstance(c, dict) or tuple(c) != FIELDS:
            sys.exit(f"logits.py: {path}: case {i + 1}: expected exactly the fields "
                     f"{', '.join(FIELDS)} in that order")
        if c["name"] in by_name:
            sys.exit(f"logits.py: {path}: case {i + 1}: name {c['name']} twice")
        by_name[c["name"]] = c
    return by_name


def setup():
    global torch, flush_buf, E2M1
    import torch as t
    torch = t
    torch.backends.cuda.matmul.allow_tf32 = False
    flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    E2M1 = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6],
                        device=dev, dtype=torch.bfloat16)


def timed(fn, reps, warm=2):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        flush_buf.fill_(i & 255)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)  # us
    return statistics.median(ts)


def fp8_peak():
    n = 8192
    a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()  # column-major
    one = torch.tensor(1.0, device=dev)
    best = 0.0
    for fast in (False, True):
        us = timed(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                            out_dtype=torch.bfloat16, use_fast_accum=fast), 10)
        best = max(best, 2.0 * n ** 3 / us * 1e-6)
    return best


def copy_bw():
    src = torch.empty(4 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    us = timed(lambda: dst.copy_(src), 10)
    bw = 2.0 * src.numel() / us * 1e-3  # GB/s, read + write
    del src, dst
    torch.cuda.empty_cache()
    return bw


# ---------------------------------------------------------------- quantized inputs
def rand_codes(shape, fmt):
    c = torch.randint(0, 256, shape, dtype=torch.uint8, device=dev)
    if fmt != "mxfp4":
        c = torch.where((c & 0x7F) == 0x7F, c ^ 1, c)  # no e4m3 NaN codes
    return c


def rand_mx_scales(shape):
    return torch.randint(120, 135, shape + (4,), dtype=torch.uint8, device=dev)  # UE8M0 bytes


def dequant(codes, scales, fmt):
    """codes uint8 [..., VB], scales uint8 [..., 4] (MX) or fp32 [...] (fp8) -> bf16 [..., 128]."""
    if fmt == "mxfp4":
        v = torch.stack((E2M1[(codes & 15).long()], E2M1[(codes >> 4).long()]), -1).flatten(-2)
    else:
        v = codes.view(torch.float8_e4m3fn).to(torch.bfloat16)
    if fmt == "fp8":
        return v  # the fp32 key scale is applied to the scores
    f = torch.exp2(scales.float() - 127).to(torch.bfloat16)  # [..., 4]
    return (v.unflatten(-1, (4, 32)) * f[..., None]).flatten(-2)


def head_sum(s, w):
    """s: per-head scores [R, H, C] (bf16); w [R, H] fp32 -> fp32 [R, C]."""
    return (s.float().relu() * w[:, :, None]).sum(1)


# ---------------------------------------------------------------- the cases
def case_fn(case, row):
    """case: one case of the JSON; row: bench_logits's CSV line for it (its columns)."""
    kern, fmt, H, R = case["kernel"], case["kv_format"], case["heads"], case["rows"]
    C = int(row["cols"])
    vb = 64 if fmt == "mxfp4" else 128
    qc = rand_codes((R, H, vb), fmt)
    qs = rand_mx_scales((R, H)) if fmt != "fp8" else None
    w = torch.rand(R, H, device=dev) * 2 - 1
    if kern == "K1":
        N = C
        kc = rand_codes((N, vb), fmt)
        ks = rand_mx_scales((N,)) if fmt != "fp8" else torch.rand(N, device=dev) * 2 ** -8
        ke = torch.arange(R, device=dev) + (N - R + 1)
        chunk = max(1, (1 << 29) // (H * N))

        def fn():
            q = dequant(qc, qs, fmt)
            k = dequant(kc, ks, fmt)
            out = torch.empty(R, N, device=dev)
            for r0 in range(0, R, chunk):
                s = torch.einsum("rhd,nd->rhn", q[r0:r0 + chunk], k)
                if fmt == "fp8":
                    s = s * ks.to(torch.bfloat16)
                out[r0:r0 + chunk] = head_sum(s, w[r0:r0 + chunk])
            cols = torch.arange(N, device=dev)
            out.masked_fill_(cols[None, :] >= ke[:, None], float("-inf"))
            return out
        return fn
    # paged or sparse: keys per row
    paged = case["page_size"] > 0
    if paged:
        P = case["page_size"]
        ctx = case["positions"]
        mp = ctx // P
        pv = rand_codes((R * mp, P, vb), fmt)
        ps = (rand_mx_scales((R * mp, P)) if fmt != "fp8"
              else torch.rand(R * mp, P, device=dev) * 2 ** -8)
        bt = torch.stack([torch.randperm(mp, device=dev) + r * mp for r in range(R)])
    else:
        N = case["positions"]
        kc = rand_codes((N, vb), fmt)
        ks = rand_mx_scales((N,)) if fmt != "fp8" else torch.rand(N, device=dev) * 2 ** -8
    if kern == "K2":
        def fn():
            q = dequant(qc, qs, fmt)
            kcodes = pv[bt].flatten(1, 2)  # [R, ctx, vb]
            kscl = ps[bt].flatten(1, 2)
            k = dequant(kcodes, kscl, fmt)
            s = torch.einsum("rhd,rnd->rhn", q, k)
            if fmt == "fp8":
                s = s * kscl[:, None, :].to(torch.bfloat16)
            return head_sum(s, w)
        return fn
    # K5: sparse_blocks sorted sparse blocks of sparse_block_kv per row
    nsb, sbk = case["sparse_blocks"], case["sparse_block_kv"]
    nblk = case["positions"] // sbk - (0 if paged else R // sbk)
    ids = torch.sort(torch.rand(R, nblk, device=dev).argsort(1)[:, :nsb], 1).values
    pos = (ids[:, :, None] * sbk + torch.arange(sbk, device=dev)).flatten(1)  # [R, 16384]
    chunk = max(1, (1 << 29) // (H * nsb * sbk))

    def fn():
        q = dequant(qc, qs, fmt)
        out = torch.empty(R, nsb * sbk, device=dev, dtype=torch.bfloat16)
        for r0 in range(0, R, chunk):
            p = pos[r0:r0 + chunk]
            if paged:
                page = torch.gather(bt[r0:r0 + chunk], 1, p // P)
                kcodes, kscl = pv[page, p % P], ps[page, p % P]
            else:
                kcodes, kscl = kc[p], ks[p]
            k = dequant(kcodes, kscl, fmt)
            s = torch.einsum("rhd,rnd->rhn", q[r0:r0 + chunk], k)
            out[r0:r0 + chunk] = head_sum(s, w[r0:r0 + chunk]).to(torch.bfloat16)
        return out
    return fn


def main():
    usage = ("usage: logits.py CASES.json bench_c.csv [reps]\n"
             "       logits.py --list CASES.json")
    if len(sys.argv) == 3 and sys.argv[1] == "--list":
        cases = read_cases(sys.argv[2])
        print(",".join(FIELDS))
        for c in cases.values():
            print(",".join(str(int(v) if isinstance(v, bool) else v) for v in c.values()))
        return
    if len(sys.argv) < 3 or sys.argv[1].startswith("-"):
        sys.exit(usage)
    cases = read_cases(sys.argv[1])
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    rows = list(csv.DictReader(open(sys.argv[2])))
    for row in rows:  # the C program and we must mean the same case by a name
        c = cases.get(row["name"])
        if c is None or (row["kernel"], row["fmt"], int(row["H"]), int(row["R"])) != (
                c["kernel"], c["kv_format"], c["heads"], c["rows"]):
            sys.exit(f"logits.py: {sys.argv[2]}: case {row['name']} is not {sys.argv[1]}'s")
    setup()
    peak = fp8_peak()
    bw = copy_bw()
    print(f"# ceilings (this run): fp8 peak {peak:.0f} TFLOP/s (torch._scaled_mm 8192^3), "
          f"copy {bw:.0f} GB/s (4 GiB D2D, read + write)", flush=True)
    res = []
    for row in rows:
        try:
            fn = case_fn(cases[row["name"]], row)
            tus = timed(fn, max(3, reps if float(row["us_median"]) < 5e3 else 3))
            del fn
        except torch.OutOfMemoryError:
            tus = float("nan")
        torch.cuda.empty_cache()
        res.append((row, tus))
        print(f"#   torch {row['name']}: {tus:.1f} us", flush=True)
    print()
    print(f"{'case':38s} {'ours us':>9s} {'TFLOP/s':>8s} {'%fp8pk':>7s} {'GB/s':>7s} {'%copy':>6s} "
          f"{'torch us':>10s} {'torch/ours':>10s}")
    for row, tus in res:
        us = float(row["us_median"])
        tf = float(row["flops"]) / us * 1e-6
        gbs = float(row["bytes"]) / us * 1e-3
        print(f"{row['name']:38s} {us:9.1f} {tf:8.1f} {100 * tf / peak:6.1f}% {gbs:7.0f} "
              f"{100 * gbs / bw:5.1f}% {tus:10.1f} {tus / us:10.1f}")


if __name__ == "__main__":
    main()
