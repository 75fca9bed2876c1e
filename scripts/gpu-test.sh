#!/usr/bin/env bash
# gpu-test.sh - the whole test suite on the GPU machine, in one command, from the repo root:
#
#   bash scripts/gpu-test.sh              unpack, build, every C test and busted spec (#gpu
#                                         included), compute-sanitizer, then a summary table
#   bash scripts/gpu-test.sh -- CMD ...   unpack and build, then run CMD in the same
#                                         environment instead of the suite (one spec, a bench)
#
# The GPU machine has no network and no Lua. `make gpu-bundle` (scripts/gpu_bundle.sh) on a
# development machine puts the Debian packages into .gpu/debs; the device tool carries that
# folder (carry [".gpu"]). This script unpacks them with `dpkg -x` into .gpu/prefix (never
# into /) and points PATH, LD_LIBRARY_PATH, LIBRARY_PATH, CPATH, LUA_PATH and LUA_CPATH there.
# Logs go to $OUT when it is set (the device tool brings that folder back), else to
# $BUILD/gpu-logs. Environment: BUILD (default build-gpu), JOBS (default 16), SAN_TIMEOUT
# (seconds per compute-sanitizer run, default 240), SAN_PROGRAMS (a glob of the test programs
# to run under compute-sanitizer, default test_cuda_*), SAN_MAX_CASES (racecheck: the top-k
# cases a test of test_cuda_ops runs, default 3).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-16}
SAN_TIMEOUT=${SAN_TIMEOUT:-240}
logdir=${OUT:-$root/$BUILD/gpu-logs}
mkdir -p "$logdir"
t_start=$(date +%s)

die() { echo "gpu-test: $*" >&2; exit 2; }

# ------------------------------------------------------------ unpack the bundle
debs=$root/.gpu/debs
prefix=$root/.gpu/prefix
fortran=$root/.gpu/prefix-fortran   # bundled libgfortran, used only where the system lacks one
compgen -G "$debs/*.deb" >/dev/null ||
  die "no packages in .gpu/debs: run 'make gpu-bundle' on the development machine and carry .gpu"
stamp=$prefix/.unpacked
if [ ! -f "$stamp" ] || [ -n "$(find "$debs" -newer "$stamp" -name '*.deb' 2>/dev/null)" ]; then
  rm -rf "$prefix" "$fortran"
  mkdir -p "$prefix" "$fortran"
  for f in "$debs"/*.deb; do
    case $(basename "$f") in
      libgfortran5_* | libquadmath0_*) dpkg -x "$f" "$fortran" || die "dpkg -x $f failed" ;;
      *) dpkg -x "$f" "$prefix" || die "dpkg -x $f failed" ;;
    esac
  done
  touch "$stamp"
fi

# ------------------------------------------------------------ environment
lib=$prefix/usr/lib/x86_64-linux-gnu
blas=$lib/openblas-pthread
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
export PATH=$prefix/usr/bin:$PATH
ldpath=$blas:$lib
if ! ldconfig -p 2>/dev/null | grep -q 'libgfortran\.so\.5 '; then
  ldpath=$ldpath:$fortran/usr/lib/x86_64-linux-gnu
fi
export LD_LIBRARY_PATH=$ldpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LIBRARY_PATH=$blas${LIBRARY_PATH:+:$LIBRARY_PATH}
export CPATH=$prefix/usr/include/x86_64-linux-gnu/openblas-pthread${CPATH:+:$CPATH}
export LUA_PATH="$prefix/usr/share/lua/5.1/?.lua;$prefix/usr/share/lua/5.1/?/init.lua;;"
export LUA_CPATH="$lib/lua/5.1/?.so;;"
busted=$prefix/usr/bin/busted
command -v luajit >/dev/null || die "luajit not found after unpacking"
luajit -e 'require("busted.runner"); require("pl.path"); require("term"); require("cjson")' ||
  die "busted's Lua modules do not load (LUA_PATH=$LUA_PATH)"

# ------------------------------------------------------------ build
echo "== build ($BUILD, -j$JOBS)"
t0=$(date +%s)
make -j"$JOBS" SETUP=0 BUILD="$BUILD" all >"$logdir/build.log" 2>&1
build_rc=$?
# the C test programs (the Makefile builds them as part of `make test`; build them here so
# a compile error shows in build.log rather than as a crashed test)
if [ $build_rc -eq 0 ]; then
  tests=$(for f in tests/c/test_*.c; do t=${f#tests/c/}; echo "$BUILD/tests/${t%.c}"; done)
  tests="$tests $BUILD/test/libidxlab.so $BUILD/test/idxlab_cdef.h"
  # shellcheck disable=SC2086
  make -j"$JOBS" SETUP=0 BUILD="$BUILD" $tests >>"$logdir/build.log" 2>&1
  build_rc=$?
fi
build_s=$(($(date +%s) - t0))
if [ $build_rc -ne 0 ]; then
  grep -E 'error|Error' "$logdir/build.log" | head -n 30
  echo "gpu-test: build failed (see build.log)"
  printf '\n%-28s %s\n' "build" "FAILED after ${build_s}s"
  exit 1
fi
echo "  built in ${build_s}s"
export IDXLAB_LIBDIR=$root/$BUILD IDXLAB_ROOT=$root

# The dump helper's spec runs .venv/bin/python, which scripts/setup.sh makes from PyPI on a
# development machine. The GPU machine has no network, but its python3 carries numpy and
# safetensors: stand a one-line .venv/bin/python in front of it (git-ignored, like .venv).
if [ ! -x .venv/bin/python ] && python3 -c 'import numpy, safetensors' 2>/dev/null; then
  mkdir -p .venv/bin
  printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >.venv/bin/python
  chmod +x .venv/bin/python
fi

if [ "${1:-}" = "--" ]; then
  shift
  exec "$@"
fi

# ------------------------------------------------------------ the suite
# scripts/run_tests.sh calls busted as /usr/bin/busted; here busted lives in the prefix, so
# run a copy with that one path replaced (the copy sits one level below the root, as the
# original does, so its `cd "$(dirname "$0")/.."` lands in the root).
runner=$root/.gpu/run_tests.sh
sed "s#/usr/bin/busted#$busted#g" scripts/run_tests.sh >"$runner"
chmod +x "$runner"
echo "== suite (C tests and busted specs)"
t0=$(date +%s)
BUILD=$BUILD "$runner" >"$logdir/tests.log" 2>&1
suite_rc=$?
suite_s=$(($(date +%s) - t0))
grep -E '^  |^== ' "$logdir/tests.log" | grep -vE '^  (ok|#)' | head -n 80
suite_line=$(tail -n 1 "$logdir/tests.log")
echo "  $suite_line (${suite_s}s)"
(cd "$BUILD" && tar czf "$logdir/test-logs.tar.gz" test-logs 2>/dev/null)

# ------------------------------------------------------------ compute-sanitizer
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san_rows=()
san_bad=0
: >"$logdir/sanitizer.log"
gpu_ok=0
luajit -e 'package.path="lua/?.lua;lua/?/init.lua;"..package.path; os.exit(require("idxlab").cuda_available() and 0 or 1)' 2>/dev/null && gpu_ok=1
[ $gpu_ok -eq 0 ] && nvidia-smi -L >/dev/null 2>&1 && gpu_ok=1 # the probe needs Lua; nvidia-smi will do
if [ ! -x "$san" ]; then
  san_rows+=("compute-sanitizer|not found")
elif [ $gpu_ok -ne 1 ]; then
  san_rows+=("compute-sanitizer|skipped: no usable GPU")
else
  for t in "$BUILD"/tests/${SAN_PROGRAMS:-test_cuda_*}; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    for tool in memcheck racecheck; do
      extra=()
      [ $tool = memcheck ] && extra=(--leak-check full)
      # racecheck instruments every shared-memory access: the top-k tests' cluster kernels (up
      # to 16 CTAs sharing histograms by DSMEM) take minutes a case under it (test_cuda_ops
      # small did not finish in 200 s, 2026-12-02), so racecheck runs the first
      # SAN_MAX_CASES top-k cases of each test (IXL_TEST_MAX_CASES; other programs ignore it)
      cases=()
      [ $tool = racecheck ] && cases=(IXL_TEST_MAX_CASES="${SAN_MAX_CASES:-3}")
      t0=$(date +%s)
      echo "==== $tool $name" >>"$logdir/sanitizer.log"
      env IXL_TEST_SMALL=1 "${cases[@]}" timeout "$SAN_TIMEOUT" "$san" --tool $tool --error-exitcode 99 "${extra[@]}" \
        "$t" >>"$logdir/sanitizer.log" 2>&1
      rc=$?
      s=$(($(date +%s) - t0))
      summary=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$logdir/sanitizer.log" | tail -n 1 | sed 's/^========= //')
      case $rc in
        0) res="clean: ${summary:-no summary} (${s}s)" ;;
        124) res="TIMEOUT after ${s}s"; san_bad=$((san_bad + 1)) ;;
        99) res="ERRORS: $summary (${s}s)"; san_bad=$((san_bad + 1)) ;;
        *) res="exit $rc: ${summary:-see sanitizer.log} (${s}s)"; san_bad=$((san_bad + 1)) ;;
      esac
      san_rows+=("$tool $name|$res")
    done
  done
  [ ${#san_rows[@]} -eq 0 ] && san_rows+=("compute-sanitizer|no $BUILD/tests/test_cuda_* programs")
fi
grep -E 'Invalid|Race|Hazard|ERROR SUMMARY|RACECHECK SUMMARY' "$logdir/sanitizer.log" | head -n 40

# ------------------------------------------------------------ soak on the GPU (issue 9)
soak_row="skipped: no usable GPU"
soak_rc=0
if [ $gpu_ok -eq 1 ]; then
  t0=$(date +%s)
  IDXLAB_LIBDIR=$root/$BUILD timeout "${SOAK_TIMEOUT:-240}" bin/idxlab script bench/soak.lua \
    steps="${SOAK_STEPS:-500}" backend=cuda >"$logdir/soak.log" 2>&1
  soak_rc=$?
  soak_row="$(tail -n 1 "$logdir/soak.log") ($(($(date +%s) - t0))s, exit $soak_rc)"
fi

# ------------------------------------------------------------ summary (printed last)
{
  echo
  echo "== gpu-test summary ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1))"
  printf '%-40s %s\n' "build ($BUILD)" "ok in ${build_s}s"
  printf '%-40s %s\n' "suite (C tests + busted, #gpu included)" "$suite_line in ${suite_s}s"
  for r in "${san_rows[@]}"; do printf '%-40s %s\n' "${r%%|*}" "${r#*|}"; done
  printf '%-40s %s\n' "soak (cuda)" "$soak_row"
  printf '%-40s %s\n' "total" "$(($(date +%s) - t_start))s; logs in $logdir"
} | tee "$logdir/summary.txt"
[ $suite_rc -eq 0 ] && [ $san_bad -eq 0 ] && [ $soak_rc -eq 0 ]
