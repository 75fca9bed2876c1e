#!/usr/bin/env bash
# fuzz.sh - builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c) against the library's C
# sources compiled with clang (ASan + UBSan + fuzzer coverage, CUDA=0) into build-fuzz/, then
# runs each one for SECONDS_EACH seconds (default 20) from a fresh copy of its committed seed
# corpus, tests/fuzz/corpus/<harness>/. One test per harness: it passes when it ran its time
# without a crash, a leak, a timeout or an out-of-memory. Ends with "N passed, N failed".
#
#   make fuzz SECONDS=60                    every harness for 60 s
#   FUZZ_ONLY=fuzz_expand make fuzz         one harness
#   FUZZ_MERGE=1 make fuzz                  also merge what was found into the committed corpus
#
# A crash leaves its input in build-fuzz/crashes/<harness>-crash-*; replay it with
#   build-fuzz/<harness> build-fuzz/crashes/<harness>-crash-...
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${SECONDS_EACH:-20}
OUT=build-fuzz
CC=${FUZZ_CC:-clang}
JOBS=${FUZZ_JOBS:-2}
# The Makefile's flags (hidden visibility; core/ without -Ikernels), plus coverage and sanitizers.
CFLAGS=(-std=c11 -O1 -g -Wall -Wextra -Werror -fPIC -ffp-contract=off -fvisibility=hidden
  -D_GNU_SOURCE -Iinclude -Icore -Itests/fuzz -fopenmp -fno-omit-frame-pointer
  -fsanitize=address,undefined -fno-sanitize-recover=undefined)
LIBS=(-fopenmp -lopenblas -lm)

if ! command -v "$CC" >/dev/null; then
  echo "fuzz: $CC not found (apt-get install clang libclang-rt-14-dev)"
  echo "0 passed, 1 failed"
  exit 1
fi
mkdir -p "$OUT/obj" "$OUT/crashes" "$OUT/logs"

# ---- build: library objects with coverage (no fuzzer main), rebuilt when stale
headers=(include/*.h core/*.h core/*/*.h kernels/*.h kernels/*/*.h tests/fuzz/*.h)
newest_header=$(ls -t "${headers[@]}" 2>/dev/null | head -n1)
objs=() pids=() build_failed=0
compile() { # src obj
  mkdir -p "$(dirname "$2")"
  local inc=()
  case "$1" in kernels/*) inc=(-Ikernels) ;; esac
  "$CC" "${CFLAGS[@]}" "${inc[@]}" -fsanitize=fuzzer-no-link -c "$1" -o "$2" 2>"$2.err" ||
    { cat "$2.err"; rm -f "$2"; return 1; }
  rm -f "$2.err"
}
for src in core/*.c kernels/*.c kernels/*/*.c; do
  obj=$OUT/obj/${src%.c}.o
  objs+=("$obj")
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_header" -nt "$obj" ]; then
    echo "  CC      $src"
    compile "$src" "$obj" &
    pids+=($!)
    if [ "${#pids[@]}" -ge "$JOBS" ]; then
      wait "${pids[0]}" || build_failed=1
      pids=("${pids[@]:1}")
    fi
  fi
done
for p in "${pids[@]}"; do wait "$p" || build_failed=1; done
if [ "$build_failed" -ne 0 ]; then
  echo "fuzz: the library did not build with $CC (see above)"
  echo "0 passed, 1 failed"
  exit 1
fi

passed=0 failed=0
for hsrc in tests/fuzz/fuzz_*.c; do
  h=$(basename "$hsrc" .c)
  if [ -n "${FUZZ_ONLY:-}" ] && [ "$h" != "$FUZZ_ONLY" ]; then continue; fi
  bin=$OUT/$h
  if ! "$CC" "${CFLAGS[@]}" -Ikernels -fsanitize=fuzzer "$hsrc" "${objs[@]}" -o "$bin" \
    "${LIBS[@]}" 2>"$OUT/logs/$h.build"; then
    echo "  $h: did not build:"
    head -n 20 "$OUT/logs/$h.build"
    failed=$((failed + 1))
    continue
  fi
  work=tests/fuzz/corpus-work/$h
  rm -rf "$work"
  mkdir -p "$work"
  seeds=0
  if [ -d "tests/fuzz/corpus/$h" ]; then
    cp tests/fuzz/corpus/"$h"/* "$work"/ 2>/dev/null
    seeds=$(ls "tests/fuzz/corpus/$h" | wc -l)
  fi
  rm -f "$OUT/crashes/$h"-*
  log=$OUT/logs/$h.log
  # detect_leaks: libFuzzer checks every input for leaks; the harness uses one thread.
  ASAN_OPTIONS=${FUZZ_ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$OUT/crashes/$h-" "$work" >"$log" 2>&1
  rc=$?
  runs=$(grep -E '^stat::number_of_executed_units:' "$log" | tail -n1 | awk '{print $2}')
  corpus=$(ls "$work" | wc -l)
  artifacts=$(ls "$OUT/crashes/$h"-* 2>/dev/null)
  if [ "$rc" -eq 0 ] && [ -z "$artifacts" ]; then
    echo "  $h: ${runs:-?} executions in ${SECS} s, corpus $seeds -> $corpus inputs, no crash"
    passed=$((passed + 1))
  else
    echo "  $h: CRASHED after ${runs:-?} executions (exit $rc);" \
      "input: ${artifacts:-none saved}; log: $log"
    grep -E 'ERROR|invariant broken|runtime error|SUMMARY' "$log" | head -n 8 | sed 's/^/    /'
    failed=$((failed + 1))
  fi
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    mkdir -p "tests/fuzz/corpus/$h"
    "$bin" -merge=1 "tests/fuzz/corpus/$h" "$work" >"$OUT/logs/$h.merge" 2>&1 &&
      echo "    merged: the committed corpus now has $(ls "tests/fuzz/corpus/$h" | wc -l) inputs"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
