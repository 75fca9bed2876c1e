#!/usr/bin/env bash
# topk_gpu.sh - K6 top-k on the GPU machine, one command: v2's per-phase profile, then
# idxlab's select v1 and v2 (v2 also at each pinned cluster size, without the CTA-0 gather,
# and K6 + K7 as two ops and fused) and torch.topk on the
# four shapes (64x16384 and 4096x16384 bf16 k=512,
# 1x131072 and 64x131072 fp32 k=2048, and the source layer's top-k of quick.lua's step: 64 x
# 131072 and 4096 causal rows x 131072 fp32 k=512), inputs rotated so none is L2-resident,
# with the copy and read ceilings of the same run; the table last (v2:s0 = v2 without its
# streaming kernel for many long rows, IXL_TOPK_V2_STREAM=0).
# Run from the repo root after a build (scripts/gpu-test.sh -- bash bench/topk_gpu.sh).
# Environment: BUILD (default build-gpu); logs to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build-gpu}
log=${OUT:-/tmp}/topk_bench.log
: >"$log"
# v2's phases first (clock64 per phase of three CTAs per launch, select/topk_v2.cu's profile)
IXL_BENCH=topkprof timeout 60 "$BUILD/tests/test_cuda_ops" 2>&1 | tee -a "$log"
IXL_BENCH=topk timeout 240 "$BUILD/tests/test_cuda_ops" 2>&1 | tee -a "$log"
PYTHONUNBUFFERED=1 timeout 120 python3 bench/torch/topk.py 2>&1 | tee -a "$log"
awk '
  / single / && ($1 == "#") && ($2 == "topkbench" || $2 == "torchtopk") {
    name = $3; v = $4; s[name, v] = $6; b[name, v] = $9
    if (!(name in seen)) { seen[name] = 1; order[++n] = name }
  }
  $2 == "ceiling" { ceil = ceil sprintf("%s %s GB/s  ", $3, $4) }
  END {
    printf "\n| shape | v1 us | v2 us (default) | best v2 pin | v2 g0 | torch us |"
    printf " torch/v2 | v1/v2 | k6+k7 | fused | v2:s0 |\n"
    printf "|---|---|---|---|---|---|---|---|---|---|---|\n"
    for (i = 1; i <= n; i++) {
      nm = order[i]; best = ""; bv = 1e30
      for (c = 1; c <= 16; c *= 2) {
        key = "v2:cs" c
        if ((nm, key) in b && b[nm, key] + 0 < bv) { bv = b[nm, key] + 0; best = key }
      }
      printf "| %s | %s / %s | %s / %s | %s %.2f | %s | %s / %s | %.1fx | %.1fx | %s | %s | %s |\n",
        nm, b[nm, "v1"], s[nm, "v1"], b[nm, "v2"], s[nm, "v2"], best, bv,
        b[nm, "v2:g0"], b[nm, "torch"], s[nm, "torch"], b[nm, "torch"] / b[nm, "v2"],
        b[nm, "v1"] / b[nm, "v2"], b[nm, "v2:k6k7"], b[nm, "v2:fused"], b[nm, "v2:s0"]
    }
    printf "(batch / single medians, us; ratios from batch) ceilings: %s\n", ceil
  }' "$log"
# The regression guard last (bench/regress.lua: each figure against BENCHMARKS.md's baseline);
# it only informs, and its failure never fails the benchmark.
bin/idxlab script bench/regress.lua current="$log" ||
  echo "topk_gpu.sh: the regression guard failed (ignored)" >&2
