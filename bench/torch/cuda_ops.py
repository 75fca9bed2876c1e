#!/usr/bin/env python3
"""bench/torch/cuda_ops.py - plain PyTorch versions of the selection and format ops, timed the
same way as `IXL_BENCH=only build-gpu/tests/test_cuda_ops` times idxlab's (CUDA events, 3
warm-up runs, median of 21, same shapes), so scripts/gpu-test.sh can print the two side by
side. Run on the GPU machine: python3 bench/torch/cuda_ops.py. Prints lines
"# torch NAME  US us". Not a test: the idxlab ops are checked against the CPU reference by
tests/c/test_cuda_ops.c; these are only the baseline a practitioner would otherwise write."""

def median_us(fn, reps=21):
    import torch

    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    times.sort()
    return times[reps // 2]


def row(name, us):
    print(f"# torch {name:<52s} {us:10.1f} us", flush=True)


def main():
    import torch

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    topk_cases = [
        (64, 16384, 512, torch.bfloat16, "topk V4.1 decode: 64 x 16384 bf16, k=512"),
        (4096, 16384, 512, torch.bfloat16, "topk V4.1 prefill: 4096 x 16384 bf16, k=512"),
        (1, 131072, 2048, torch.float32, "topk V3.2: 1 x 131072 f32, k=2048"),
        (64, 131072, 2048, torch.float32, "topk V3.2: 64 x 131072 f32, k=2048"),
        (256, 131072, 2048, torch.float32, "topk: 256 x 131072 f32, k=2048"),
        (64, 1048576, 2048, torch.float32, "topk: 64 x 1048576 f32, k=2048"),
    ]
    for R, C, k, dt, name in topk_cases:
        x = (torch.randn(R, C, device=dev, generator=g) * 3).to(dt)
        row(name, median_us(lambda: torch.topk(x, k, dim=1, sorted=False)))
        del x
    x = torch.randn(64, 131072, device=dev, generator=g) * 3
    row("topk sorted: 64 x 131072 f32, k=2048",
        median_us(lambda: torch.topk(x, 2048, dim=1, sorted=True)))

    # K3: block max, newest block forced to +inf, top-T by score (ties by id need a stable sort
    # in torch; topk gives the same set up to ties)
    R, C, cbs, T = 64, 131072, 8, 2048

    def k3():
        s = x.view(R, C // cbs, cbs).amax(dim=2)
        s[:, -1] = float("inf")
        return torch.topk(s, T, dim=1, sorted=True).indices

    row("candidate_select V4.1: 64 x 131072, cbs=8, T=2048", median_us(k3))
    cand = k3()

    def mask():
        keep = torch.zeros(R, C // cbs, dtype=torch.bool, device=dev)
        keep.scatter_(1, cand.long(), True)
        return x.masked_fill_(~keep.repeat_interleave(cbs, dim=1), float("-inf"))

    y = x.clone()
    row("mask_candidates: 64 x 131072 f32, T=2048", median_us(mask))
    x = y

    def expand():  # cbs = sbk: sorted unique candidate ids, padded with the last
        ids = torch.sort(cand, dim=1).values
        return ids, torch.full((R,), T * cbs, device=dev)

    row("expand V4.1: 64 rows, T=2048, cbs=sbk=8", median_us(expand))
    ids = expand()[0]
    cols = torch.randint(0, T * 8, (R, 512), device=dev, generator=g)
    row("remap V4.1: 64 x 512", median_us(lambda: torch.gather(ids, 1, cols // 8) * 8 + cols % 8))

    # MXFP4 K quantization (rne scale exponent from amax, round to the e2m1 grid by bucketize)
    M = 1 << 20
    xk = torch.randn(M, 128, device=dev, generator=g)
    grid = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device=dev)

    def q_mxfp4():
        v = xk.view(M, 4, 32)
        amax = v.abs().amax(dim=2, keepdim=True).clamp_min(6 * 2.0**-126)
        e = torch.ceil(torch.log2(amax / 6))
        y = v * torch.exp2(-e)
        code = (torch.bucketize(y.abs(), grid, right=False).to(torch.uint8)
                | ((y < 0).to(torch.uint8) << 3))
        packed = code.view(M, 64, 2)
        return packed[..., 0] | (packed[..., 1] << 4), (e + 127).to(torch.uint8)

    row("quantize mxfp4 K: 1048576 x 128 f32", median_us(q_mxfp4))

    def q_fp8():
        amax = xk.abs().amax(dim=1, keepdim=True).clamp_min(1e-4)
        s = torch.exp2(torch.ceil(torch.log2(amax / 448)))
        return (xk / s).to(torch.float8_e4m3fn), s

    row("quantize fp8 K: 1048576 x 128 f32", median_us(q_fp8))


def merge(paths):
    """Prints one table from logs of `IXL_BENCH=only test_cuda_ops` runs (first: idxlab as
    built, then variants) and of this script (the torch column): name, us per log, ratio."""
    import re
    cols, names = [], []
    for p in paths:
        d = {}
        for line in open(p, errors="replace"):
            m = re.match(r"# (?:bench|torch) (.+?)\s+([0-9.]+) us", line)
            if m:
                d[m.group(1).strip()] = float(m.group(2))
                if m.group(1).strip() not in names:
                    names.append(m.group(1).strip())
        cols.append(d)
    heads = [p.rsplit("/", 1)[-1].replace(".log", "") for p in paths]
    print(f"{'op and shape':<52s}" + "".join(f"{h:>16s}" for h in heads) + f"{'torch/first':>12s}")
    for n in names:
        vals = [c.get(n) for c in cols]
        cells = "".join(f"{v:14.1f}us" if v is not None else f"{'-':>16s}" for v in vals)
        ratio = vals[-1] / vals[0] if vals[0] and vals[-1] else None
        print(f"{n:<52s}{cells}" + (f"{ratio:11.2f}x" if ratio else f"{'-':>12s}"))


if __name__ == "__main__":
    import sys
    if len(sys.argv) > 2 and sys.argv[1] == "--merge":
        merge(sys.argv[2:])
    else:
        main()
