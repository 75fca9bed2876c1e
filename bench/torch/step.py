"""The plain-PyTorch baseline of one V4.1-Flash sparse-indexer step, at quick.lua's GPU shape.

What a researcher would write without idxlab: bf16 q and k (dequantization already done, so the
baseline is spared the MXFP4 work), per-head scores with einsum, relu, weights and the head
sum; candidate blocks by max-pooling the source logits and torch.topk; the consumers gather the
candidate positions' keys, score them the same way, take torch.topk and map back to positions.
Timed with CUDA events, median of `--iters` runs after a warm-up, in the same command as
`bin/idxlab run experiments/quick.lua`, so BENCHMARKS.md can set the two side by side.

  python3 bench/torch/step.py [--iters 5]
"""
import argparse

import torch


def logits(q, k, w, chunk=256):
    """q [R,H,D], k [R,N,D] or [N,D], w [R,H] -> relu(q.k) weighted and summed over heads."""
    out = []
    for r0 in range(0, q.shape[0], chunk):
        qs, ws = q[r0:r0 + chunk], w[r0:r0 + chunk]
        if k.dim() == 3:
            s = torch.einsum("rhd,rnd->rhn", qs, k[r0:r0 + chunk]).float()
        else:
            s = torch.einsum("rhd,nd->rhn", qs, k).float()
        out.append((s.relu() * ws.float()[:, :, None]).sum(1))
    return torch.cat(out)


def step(q, k, w, qc, wc, lens, cbs=8, T=2048, topk=512, chunk=256):
    """One step: source dense logits -> candidates -> per consumer sparse logits -> top-k."""
    R, N = q.shape[0], (k.shape[1] if k.dim() == 3 else k.shape[0])
    pos = torch.arange(N, device=q.device)
    src = logits(q, k, w, chunk)
    src = src.masked_fill(pos[None, :] >= lens[:, None], float("-inf"))
    blocks = src.view(R, N // cbs, cbs).amax(-1)
    newest = (lens - 1) // cbs
    blocks.scatter_(1, newest[:, None], float("inf"))
    cand = blocks.topk(T, dim=1).indices.sort(dim=1).values  # [R, T]
    # [R, T*cbs]
    cpos = (cand[:, :, None] * cbs + torch.arange(cbs, device=q.device)).reshape(R, -1)
    valid = cpos < lens[:, None]
    out = []
    for l in range(qc.shape[0]):
        sel = []
        for r0 in range(0, R, chunk):
            p = cpos[r0:r0 + chunk]
            if k.dim() == 3:
                kk = k[r0:r0 + chunk].gather(1, p[:, :, None].expand(-1, -1, k.shape[-1]))
            else:
                kk = k[p]
            s = torch.einsum("rhd,rnd->rhn", qc[l, r0:r0 + chunk], kk).float()
            s = (s.relu() * wc[l, r0:r0 + chunk].float()[:, :, None]).sum(1).to(torch.bfloat16)
            s = s.masked_fill(~valid[r0:r0 + chunk], float("-inf"))
            idx = s.float().topk(topk, dim=1).indices
            sel.append(p.gather(1, idx))
        out.append(torch.cat(sel))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--decode-rows", type=int, default=64)
    ap.add_argument("--context", type=int, default=131072)
    ap.add_argument("--prefill-rows", type=int, default=4096)
    args = ap.parse_args()
    dev = "cuda"
    torch.manual_seed(0)
    H, D, L, N = 32, 128, 4, args.context
    bf = dict(device=dev, dtype=torch.bfloat16)
    # decode: each row its own context of N positions
    Rd = args.decode_rows
    dq, dk = torch.randn(Rd, H, D, **bf), torch.randn(Rd, N, D, **bf)
    dw = torch.rand(Rd, H, device=dev)
    dqc, dwc = torch.randn(L, Rd, H, D, **bf), torch.rand(L, Rd, H, device=dev)
    dlen = torch.full((Rd,), N, device=dev)
    # prefill: one request, the last Rp rows of an N-position context (causal)
    Rp = args.prefill_rows
    pq, pk, pw = torch.randn(Rp, H, D, **bf), torch.randn(N, D, **bf), torch.rand(Rp, H, device=dev)
    pqc, pwc = torch.randn(L, Rp, H, D, **bf), torch.rand(L, Rp, H, device=dev)
    plen = torch.arange(N - Rp + 1, N + 1, device=dev)

    def run():
        step(dq, dk, dw, dqc, dwc, dlen)
        step(pq, pk, pw, pqc, pwc, plen)

    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    times.sort()
    print(f"pytorch step ({Rd} decode rows x {N} + {Rp} prefill rows, H={H}, {L} consumers): "
          f"median {times[len(times) // 2]:.1f} us over {args.iters} runs")


if __name__ == "__main__":
    main()
