#!/usr/bin/env python3
"""topk.py - torch.topk on the K6 shapes of issue 14, timed as `IXL_BENCH=topk
build-gpu/tests/test_cuda_ops` times idxlab's v1 and v2 (the same shapes, inputs rotated over
copies filling at least 256 MB so none is L2-resident, `single` = median of 21 launches timed
alone, `batch` = median of 7 groups of 10 back-to-back launches, per launch), plus the
ceilings of the same run: a 4 GiB device-to-device copy (bytes read + written) and a
read-only pass (torch.sum over 4 GiB of fp32). Prints lines "# torchtopk NAME ..." and
"# ceiling NAME GB/s". Run on the GPU machine: python3 bench/torch/topk.py (bench/topk_gpu.sh
does). torch.topk(sorted=False) is the baseline: its order is not idxlab's, only its cost.
TOPK_SHAPES=WORD,... times only the shapes whose names contain one of the words, and
TOPK_CEILINGS=0 skips the ceilings."""
import os

import torch

SHAPES = [
    (64, 16384, 512, torch.bfloat16, "64x16384_bf16_k512"),
    (4096, 16384, 512, torch.bfloat16, "4096x16384_bf16_k512"),
    (1, 131072, 2048, torch.float32, "1x131072_f32_k2048"),
    (64, 131072, 2048, torch.float32, "64x131072_f32_k2048"),
    # the source layer's top-k of quick.lua's step (idxlab's 4096-row case has causal lengths;
    # torch.topk takes the full rows: a researcher masks the tail to -inf first, not timed)
    (64, 131072, 512, torch.float32, "src_64x131072_f32_k512"),
    (4096, 131072, 512, torch.float32, "src_4096x131072c_f32_k512"),
]


def events_us(fn, n):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    fn(n)
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1000.0 / n


def main():
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    only = [w for w in os.environ.get("TOPK_SHAPES", "").split(",") if w]
    for R, C, k, dt, name in SHAPES:
        if only and not any(w in name for w in only):
            continue
        nbytes = R * C * torch.tensor([], dtype=dt).element_size()
        nbuf = min(max((256 << 20) // nbytes + 1, 2), 128)
        base = (torch.randn(R, C, device=dev, generator=g) * 4.0).to(dt)
        bufs = [base.clone() for _ in range(nbuf)]
        rot = [0]

        def run(n):
            for _ in range(n):
                torch.topk(bufs[rot[0] % nbuf], k, dim=1, sorted=False)
                rot[0] += 1

        run(3)
        single = sorted(events_us(run, 1) for _ in range(21))[10]
        batch = sorted(events_us(run, 10) for _ in range(7))[3]
        print(f"# torchtopk {name:<22s} torch    single {single:8.2f} us batch {batch:8.2f} us "
              f"{nbytes / (batch * 1e-6) / 1e9:7.0f} GB/s ({nbuf} copies)", flush=True)
        del bufs, base
        torch.cuda.empty_cache()
    if os.environ.get("TOPK_CEILINGS", "1") == "0":
        return
    x = torch.empty(1 << 30, dtype=torch.float32, device=dev)
    y = torch.empty_like(x)
    x.normal_(generator=g)
    y.copy_(x)
    copy = sorted(events_us(lambda n: [y.copy_(x) for _ in range(n)], 1) for _ in range(5))[2]
    read = sorted(events_us(lambda n: [x.sum() for _ in range(n)], 1) for _ in range(5))[2]
    print(f"# ceiling copy {2 * x.numel() * 4 / (copy * 1e-6) / 1e9:7.0f} GB/s", flush=True)
    print(f"# ceiling read {x.numel() * 4 / (read * 1e-6) / 1e9:7.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()
