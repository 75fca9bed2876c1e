#!/usr/bin/env bash
# bench_logits.sh - the logits kernels' benchmark on the GPU machine, in one command from the
# repo root, after the library is built (e.g. by scripts/gpu-test.sh or
# `make -j16 SETUP=0 BUILD=build-gpu`):
#
#   bash bench/bench_logits.sh [BUILD] [reps] [case-substring]
#
# Exports bench/cases.lua (the one case list) as JSON, builds bench/bench_logits.c against
# $BUILD/libidxlab.so, times our kernels on those cases (CSV), then runs bench/torch/logits.py
# for the ceilings and the PyTorch baseline of the same cases (the same JSON), and prints the
# combined table last. Logs (and the JSON) go to $OUT when set, else $BUILD.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
REPS=${2:-20}
ONLY=${3:-}
logdir=${OUT:-$BUILD}
mkdir -p "$logdir"
cases=$logdir/bench_cases.json
IDXLAB_LIBDIR=$PWD/$BUILD bin/idxlab script bench/cases.lua out="$cases"
gcc -std=c11 -O2 -Wall -Wextra -Iinclude bench/bench_logits.c -o "$BUILD/bench_logits" \
  -L"$BUILD" -Wl,-rpath,"$PWD/$BUILD" -lidxlab -lm
"$BUILD/bench_logits" "$cases" "$REPS" ${ONLY:+"$ONLY"} >"$logdir/bench_logits_c.csv"
PYTHONUNBUFFERED=1 python3 bench/torch/logits.py "$cases" "$logdir/bench_logits_c.csv" 10 |
  tee "$logdir/bench_logits_table.txt"
# The regression guard last (bench/regress.lua: each figure against BENCHMARKS.md's baseline,
# keyed by the pinned logits variant); it only informs, and its failure never fails the run.
bin/idxlab script bench/regress.lua current="$logdir/bench_logits_c.csv" \
  variant="${IXL_LOGITS_VARIANT:-default}" ||
  echo "bench_logits.sh: the regression guard failed (ignored)" >&2
