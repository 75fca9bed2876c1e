#!/usr/bin/env bash
# run_tests.sh - runs every C test binary and every busted spec, then prints one line
# "N passed, N failed, N skipped" over all of them. Exit status 1 on any failure.
# GPU specs (#gpu) run only when a CUDA device is usable, and are excluded otherwise.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
SANITIZE=${SANITIZE:-0}
# busted loads the test build of the library (the test-only variants registered) when it exists
lib=$PWD/$BUILD
[ -f "$lib/test/libidxlab.so" ] && lib=$lib/test
export IDXLAB_LIBDIR=$lib IDXLAB_ROOT=$PWD
passed=0 failed=0 skipped=0
log=$BUILD/test-logs
mkdir -p "$log"
tree=$(mktemp); scripts/tree_state.sh >"$tree" # as the build and set-up left it

if [ "$SANITIZE" = 1 ]; then
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi

echo "== C tests"
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  "$t" >"$log/$name.out" 2>&1
  rc=$?
  # LeakSanitizer's own tracer can crash at exit ("encountered a fatal error": it then checked
  # nothing; seen once in CI after every test had passed): run the program once more, saying
  # so. A leak it reports, or a second tracer crash, still fails.
  if [ "$rc" -ne 0 ] && grep -q 'LeakSanitizer has encountered a fatal error' "$log/$name.out" &&
    ! grep -q 'LeakSanitizer: detected memory leaks' "$log/$name.out"; then
    echo "  $name: LeakSanitizer's tracer failed (exit $rc); running it once more"
    mv "$log/$name.out" "$log/$name.lsan-tracer.out"
    "$t" >"$log/$name.out" 2>&1
    rc=$?
  fi
  line=$(grep -E '^# [0-9]+ passed, [0-9]+ failed' "$log/$name.out" | tail -n1)
  if [ -z "$line" ]; then
    echo "  $name: crashed (exit $rc)"; tail -n 20 "$log/$name.out"
    failed=$((failed + 1)); continue
  fi
  p=$(sed -E 's/# ([0-9]+) passed.*/\1/' <<<"$line")
  f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1   # a sanitizer report after the tests finished
  passed=$((passed + p)); failed=$((failed + f))
  echo "  $name: $p passed, $f failed"
  [ "$f" -ne 0 ] && grep -v '^ok' "$log/$name.out" | head -n 40
done

echo "== busted specs"
tags=(--exclude-tags=gpu)
probe='package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
os.exit(require("idxlab").cuda_available() and 0 or 1)'
if luajit -e "$probe" 2>/dev/null; then
  tags=()
  echo "  a CUDA device is usable: #gpu specs included"
fi
pre=()
if [ "$SANITIZE" = 1 ]; then
  asan=$(clang -print-file-name=libclang_rt.asan-x86_64.so)
  pre=(env "LD_PRELOAD=$asan" "ASAN_OPTIONS=detect_leaks=0:abort_on_error=0")
fi
"${pre[@]}" luajit "${BUSTED:-/usr/bin/busted}" --lpath='lua/?.lua;lua/?/init.lua' \
  --helper=tests/helper.lua -o tests/summary_handler.lua "${tags[@]}" ${BUSTED_ARGS:-} tests \
  >"$log/busted.out" 2>&1
rc=$?
cat "$log/busted.out" | grep -v '^busted: ' | tail -n 200
line=$(grep -E '^busted: [0-9]+ passed' "$log/busted.out" | tail -n1)
if [ -z "$line" ]; then
  echo "  busted crashed (exit $rc)"; failed=$((failed + 1))
else
  read -r p f s < <(grep -oE '[0-9]+' <<<"$line" | head -n 3 | paste -sd' ')
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
fi

if CLEAN_BEFORE=$tree scripts/check.sh clean-tree | sed '$d'; then passed=$((passed + 1))
else failed=$((failed + 1)); fi; rm -f "$tree" # the suite left the tree as it found it
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
