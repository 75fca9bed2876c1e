#!/usr/bin/env bash
# bench/hopper/run.sh - the Visit 1 microbenchmarks (bench/hopper/README.md), on the GPU machine.
#
#   bash bench/hopper/run.sh            # from the repository root, on an H100/H200
#   bash bench/hopper/run.sh mem instr  # only these parts (exact tensor mem instr cluster torch)
#
# Builds bench/hopper/microbench.cu with the nvcc there, runs each part under `timeout` (a hang
# costs at most that part), measures the torch fp8/bf16 matrix-product peaks in the same run,
# and prints a short table last.  Everything goes to $OUT (default /tmp/hopper_out):
#   run.log      everything printed
#   build.log    nvcc -Xptxas -v output
#   results.csv  part,name,metric,value,unit,detail
#   summary.md   the table printed at the end
#   sass.txt     SASS instruction counts of the binary (QGMMA, IGMMA, UTMALDG, ...)
# Touches nothing outside $OUT and /tmp.
set -u
cd "$(dirname "$0")/../.." || exit 1
PARTS=${*:-exact tensor mem instr cluster torch}
OUT=${OUT:-/tmp/hopper_out}
mkdir -p "$OUT"
BIN=/tmp/hopper_microbench
CSV=$OUT/results.csv
SUM=$OUT/summary.md
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PARTLOG=/tmp/hopper_parts
mkdir -p "$PARTLOG"

clocks() {
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu \
    --format=csv,noheader 2>/dev/null | sed "s/^/  [smi $1] sm, mem, power, temp: /"
}

main() {
  echo "== hopper microbench, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
    --format=csv 2>/dev/null
  clocks start
  echo "== build: $NVCC ($($NVCC --version | tail -1))"
  local t0=$SECONDS
  if ! timeout 300 "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -lineinfo \
      -Xptxas -v -o "$BIN" bench/hopper/microbench.cu >"$OUT/build.log" 2>&1; then
    echo "BUILD FAILED"; tail -40 "$OUT/build.log"; return 1
  fi
  local spills
  spills=$(grep -E 'spill (stores|loads)' "$OUT/build.log" | grep -vc ' 0 bytes spill stores')
  echo "built in $((SECONDS - t0)) s; ptxas: $(grep -c 'Used' "$OUT/build.log") kernels," \
    "$spills with spills"
  if command -v cuobjdump >/dev/null; then
    local re='(QGMMA|IGMMA|HGMMA)\.[0-9x]+\.[A-Z0-9.]+|UTMALDG[.A-Z0-9]*|UBLKCP[.A-Z0-9]*'
    re="$re"'|LDG\.E[.A-Z0-9]*|F2FP[.A-Z0-9_]*|HFMA2[.A-Z0-9_]*|UCGABAR_[A-Z]+|SHFL\.[A-Z]+'
    cuobjdump -sass "$BIN" | grep -oE "$re" | sort | uniq -c | sort -rn >"$OUT/sass.txt"
    echo "SASS:"; sed 's/^/  /' "$OUT/sass.txt" | head -30
  fi
  echo "part,name,metric,value,unit,detail" >"$CSV"
  local -A limit=([exact]=150 [tensor]=90 [mem]=120 [instr]=60 [cluster]=60)
  status=""
  for p in $PARTS; do
    [ "$p" = torch ] && continue
    echo; echo "== part $p (timeout ${limit[$p]} s)"
    t0=$SECONDS
    timeout "${limit[$p]}" "$BIN" "$p" --csv "$CSV" >"$PARTLOG/$p.log" 2>&1
    local rc=$?
    cat "$PARTLOG/$p.log"
    echo "part $p: rc $rc, $((SECONDS - t0)) s"
    clocks "after $p"
    status="$status $p=$rc"
  done

  case " $PARTS " in *" torch "*) torch_peaks ;; esac

  {
    echo "## hopper microbench summary ($(date -u '+%Y-%m-%d'), exit codes:$status)"
    for p in $PARTS; do
      echo
      grep -h '^| ' "$PARTLOG/$p.log" 2>/dev/null || echo "($p: no table)"
    done
  } >"$SUM"
  echo
  cat "$SUM"
}

torch_peaks() {
  echo; echo "== torch reference peaks (timeout 150 s)"
  local t0=$SECONDS
  PYTHONUNBUFFERED=1 timeout 150 python3 - "$CSV" >"$PARTLOG/torch.log" 2>&1 <<'PY'
import statistics, sys
import torch
csv = open(sys.argv[1], "a")
dev = torch.cuda.get_device_properties(0)
print(f"torch {torch.__version__}, {dev.name}, {dev.multi_processor_count} SMs")

def bench(fn, reps=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts), min(ts), max(ts)

N = 8192
flop = 2.0 * N ** 3
rows = []
g = torch.Generator(device="cuda").manual_seed(1201)
a = torch.randn(N, N, device="cuda", generator=g).to(torch.float8_e4m3fn)
b = torch.randn(N, N, device="cuda", generator=g).to(torch.float8_e4m3fn).t()  # column-major
one = torch.tensor(1.0, device="cuda")
for fast in (False, True):
    f = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                 use_fast_accum=fast)
    med, lo, hi = bench(f)
    tf = flop / med / 1e9
    name = f"_scaled_mm e4m3 8192^3 bf16 out, fast_accum={fast}"
    print(f"{name}: median {med:.3f} ms (min {lo:.3f}, max {hi:.3f}), {tf:.0f} TFLOP/s")
    csv.write(f"torch,{name.replace(',', ';')},tflops,{tf:.6g},TFLOP/s,median of 20\n")
    rows.append((name, tf))
x = torch.randn(N, N, device="cuda", dtype=torch.bfloat16, generator=g)
y = torch.randn(N, N, device="cuda", dtype=torch.bfloat16, generator=g)
med, lo, hi = bench(lambda: torch.mm(x, y))
tf = flop / med / 1e9
print(f"torch.mm bf16 8192^3: median {med:.3f} ms (min {lo:.3f}, max {hi:.3f}), {tf:.0f} TFLOP/s")
csv.write(f"torch,mm bf16 8192^3,tflops,{tf:.6g},TFLOP/s,median of 20\n")
rows.append(("torch.mm bf16 8192^3", tf))
print("| torch | kernel | TFLOP/s |")
print("|---|---|---|")
for n, t in rows:
    print(f"| torch | {n} | {t:.0f} |")
PY
  local rc=$?
  cat "$PARTLOG/torch.log"
  echo "torch: rc $rc, $((SECONDS - t0)) s"
  clocks "after torch"
  status="$status torch=$rc"
}

main 2>&1 | tee "$OUT/run.log"
