#!/usr/bin/env bash
# multi_gpu.sh - issue 18's one command on a GPU machine, from the repo root (ends within 8
# minutes on 2 H200s; every step under `timeout`, its elapsed time printed):
#
#   bash scripts/multi_gpu.sh          the GPU suite without compute-sanitizer, then each
#                                      sweep below with --local-shards 2 (one shard per GPU)
#                                      and unsharded on the first GPU, compared point for point
#   bash scripts/multi_gpu.sh --sweeps the sweeps and the comparison only (the suite ran)
#
# The sweeps are context_scaling.lua and candidate_block_size.lua with the --set lines of
# their header comments. `idxlab compare` checks that the merged results equal the unsharded
# ones (config hashes and every field that depends neither on timing nor on the device); the
# two shards' rows must name two different PCI bus ids (device_bus_id) when two GPUs are
# visible (with one, both shards share it, and that check is reported as not applicable).
# Prints a table last: each sweep's wall time sharded and unsharded and the checks. Exit
# status 0 when every check passed. Results go under $OUT/multi_gpu (or build-gpu/multi_gpu).
# NCCL's and PyTorch's NVLink multicast stay off in anything this starts. QUICK=1 runs fewer,
# smaller points (a check of the script on one GPU, where both shards share it).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
T0=$(date +%s)
el() { echo "[multi_gpu t+$(($(date +%s) - T0))s] $*"; }
out=${OUT:-$PWD/build-gpu}/multi_gpu
mkdir -p "$out"
fail=0
summary=()

if [ "${1:-}" != "--sweeps" ]; then
  el "GPU suite without compute-sanitizer"
  t=$(date +%s)
  SAN_PROGRAMS=none timeout 330 bash scripts/gpu-test.sh >"$out/suite.txt" 2>&1
  rc=$?
  el "suite rc=$rc in $(($(date +%s) - t)) s: $(grep -E '[0-9]+ passed' "$out/suite.txt" | tail -1)"
  [ $rc = 0 ] || fail=1
  summary+=("| GPU suite (no sanitizer) | rc $rc | $(($(date +%s) - t)) s | - |")
  exec_sweeps=(bash scripts/gpu-test.sh -- bash scripts/multi_gpu.sh --sweeps)
  OUT=$out timeout 420 "${exec_sweeps[@]}" >"$out/sweeps.txt" 2>&1
  rc=$?
  cat "$out/sweeps.txt" | grep -E '^\[multi_gpu|^\|' | grep -v '^| sweep'
  [ $rc = 0 ] || fail=1
  echo
  echo "| step | result | wall | note |"
  echo "|---|---|---|---|"
  for l in "${summary[@]}"; do echo "$l"; done
  grep -E '^\| (context_scaling|candidate_block_size)' "$out/sweeps.txt"
  el "done, exit $fail"
  exit $fail
fi

# ---- the sweeps (inside gpu-test.sh's environment: PATH, LUA_PATH, build-gpu)
out=${OUT:-$PWD/build-gpu}
[ -n "${OUT:-}" ] || out=$PWD/build-gpu/multi_gpu
mkdir -p "$out"
export IDXLAB_LIBDIR=${IDXLAB_LIBDIR:-$PWD/build-gpu}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
first=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | head -1)
el "$ngpu GPU(s) visible"
bus_ids() { # the distinct device_bus_id values of a results.jsonl, comma-separated
  grep -o '"device_bus_id":"[^"]*"' "$1" 2>/dev/null | sort -u | sed 's/.*:"//; s/"$//' |
    paste -sd, -
}
sweep() { # name, then its --set arguments
  local name=$1
  shift
  local t rc1 rc2 ws wu cmp note
  t=$(date +%s)
  timeout 200 bin/idxlab run "experiments/$name.lua" "$@" --local-shards 2 \
    --out "$out/sharded" >"$out/$name.sharded.txt" 2>&1
  rc1=$?
  ws=$(($(date +%s) - t))
  el "$name --local-shards 2: rc=$rc1 in $ws s"
  t=$(date +%s)
  CUDA_VISIBLE_DEVICES=${first:-0} timeout 200 bin/idxlab run "experiments/$name.lua" "$@" \
    --out "$out/single" --progress plain >"$out/$name.single.txt" 2>&1
  rc2=$?
  wu=$(($(date +%s) - t))
  el "$name unsharded on GPU ${first:-0}: rc=$rc2 in $wu s"
  timeout 60 bin/idxlab compare "$out/single/$name" "$out/sharded/$name" >"$out/$name.compare.txt" 2>&1
  cmp=$?
  tail -1 "$out/$name.compare.txt"
  local b0 b1
  b0=$(bus_ids "$out/sharded/$name/shard-0-of-2/results.jsonl")
  b1=$(bus_ids "$out/sharded/$name/shard-1-of-2/results.jsonl")
  if [ "$ngpu" -ge 2 ]; then
    if [ -n "$b0" ] && [ -n "$b1" ] && [ "$b0" != "$b1" ]; then note="bus ids $b0 / $b1 differ"
    else note="bus ids '$b0' / '$b1' do NOT differ"; fail=1; fi
  else
    note="one GPU: both shards on $b0 (the two-GPU check needs 2)"
  fi
  [ $rc1 = 0 ] && [ $rc2 = 0 ] && [ $cmp = 0 ] || fail=1
  local same=$([ $cmp = 0 ] && echo "merged = unsharded" || echo "merged != unsharded (rc $cmp)")
  summary+=("| $name | $same | ${ws} s sharded, ${wu} s unsharded | $note |")
}
if [ "${QUICK:-0}" = 1 ]; then # a check of this script itself: fewer, smaller points
  ctx=4096,65536 blocks=2048,512 sizes=8,32
else
  ctx=4096,16384,65536,262144,1048576 blocks=2048,1024,512,256,128 sizes=8,16,32,64,128
fi
sweep context_scaling --set workload.decode.rows=64 --set sweep.workload.decode.context=$ctx
sweep candidate_block_size --set workload.decode.rows=64 --set workload.decode.context=131072 \
  --set index_topk=512 --set sweep.candidate_topk_blocks=$blocks \
  --set sweep.candidate_block_size=$sizes
echo "| sweep | result | wall | note |"
for l in "${summary[@]}"; do echo "$l"; done
el "sweeps done, exit $fail"
exit $fail
