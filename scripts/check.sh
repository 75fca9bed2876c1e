#!/usr/bin/env bash
# check.sh - the tree's static rules (issue 12), one line each: `ok RULE`, or `FAIL RULE`
# followed by the offending lines (the first 40, then the count), and at the end exactly one
# line "N passed, N failed". Exit status 1 when any rule fails.
#   luacheck          luacheck over lua/ experiments/ bench/ tests/ with .luacheckrc: 0 warnings
#   core-includes     no #include in core/ that is not core's own header (core/..., e.g.
#                     numerics/...), the public idxlab.h or a system header
#   core-symbols      no undefined symbol of an object under $BUILD/obj/core/ is defined by an
#                     object under $BUILD/obj/kernels/ (nm)
#   line-length       C, CUDA, shell and Python lines under core/ kernels/ lua/ experiments/
#                     bench/ tests/ at most 100 columns (awk; tests/fixtures and binary
#                     files left out)
#   line-length-lua   the same for the Lua files (luacheck checks it too, as W631)
#   clean-tree        the tree's state (scripts/tree_state.sh) equals the one recorded in the
#                     file $CLEAN_BEFORE; without CLEAN_BEFORE the rule says `skip` and counts
#                     neither way (scripts/run_tests.sh records and checks it around the suite)
#   scripts/check.sh [RULE ...]   the rules named (default: all of them, in this order)
# Environment: BUILD (default build), CLEAN_BEFORE, MAX_COLUMNS (default 100).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
export LC_ALL=C # byte order for sort and join; awk counts bytes (see line-length)
BUILD=${BUILD:-build}
MAX=${MAX_COLUMNS:-100}
SHOW=40
passed=0 failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/idxlab-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# report RULE FILE: FILE holds one offending line each; empty means the rule holds.
report() {
  local rule=$1 file=$2 n
  n=$(grep -c '' "$file")
  if [ "$n" -eq 0 ]; then
    echo "ok $rule"
    passed=$((passed + 1))
  else
    echo "FAIL $rule"
    head -n "$SHOW" "$file" | sed 's/^/  /'
    [ "$n" -gt "$SHOW" ] && echo "  ... and $((n - SHOW)) more"
    echo "  $n in all"
    failed=$((failed + 1))
  fi
}

# The folders the rules cover, those that exist (the tree is being reorganised).
dirs() { local d; for d in "$@"; do [ -d "$d" ] && echo "$d"; done; }
# files EXT...: the tracked and untracked (not ignored) files under the covered folders with
# one of these extensions, tests/fixtures left out (outside a git checkout: every file).
files() {
  local re
  re="\\.($(IFS='|'; echo "$*"))\$"
  mapfile -t ds < <(dirs core kernels lua experiments bench tests)
  [ ${#ds[@]} -gt 0 ] || return 0
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- "${ds[@]}"
  else
    find "${ds[@]}" -type f
  fi | grep -E "$re" | grep -v '^tests/fixtures/' | sort -u |
    while IFS= read -r f; do [ -f "$f" ] && echo "$f"; done
}

# Each rule_X writes its offending lines to $out (made empty first); empty: the rule holds.
# ---------------------------------------------------------------- luacheck
rule_luacheck() {
  if ! command -v luacheck >/dev/null 2>&1; then
    echo "luacheck not found: run scripts/setup.sh (Debian package lua-check)" >"$out"
  else
    mapfile -t ds < <(dirs lua experiments bench tests)
    luacheck --config .luacheckrc --formatter plain --codes --no-color -q "${ds[@]}" \
      >"$tmp/lc.raw" 2>&1
    rc=$?
    grep -E ':[0-9]+:[0-9]+: ' "$tmp/lc.raw" >"$out"
    # exit 1 is "warnings" (listed above); 2 and more are syntax errors or a crash
    if [ "$rc" -gt 1 ] && [ ! -s "$out" ]; then cat "$tmp/lc.raw" >"$out"; fi
    if [ "$rc" -ne 0 ] && [ ! -s "$out" ]; then echo "luacheck exited $rc" >"$out"; fi
  fi
}

# ---------------------------------------------------------------- core-includes
# An include passes when it names the public idxlab.h, or a file under core/ (found next to
# the includer or from core/, which is on the include path), or, in angle brackets, no file
# of the tree: a system header. Anything else fails: a kernels/ header (by path, or found
# through -Ikernels), a relative path out of core/, a quoted name core/ does not hold.
# include_verdict FILE HEADER QUOTED -> empty (allowed) or the reason it is not
include_verdict() {
  local f=$1 h=$2 quoted=$3 c r
  [[ $h == *kernels/* ]] && { echo "a kernels/ header"; return; }
  for c in "core/$h" "$(dirname "$f")/$h"; do
    [ -f "$c" ] || continue
    r=$(realpath -m --relative-to=. "$c")
    [[ $r == core/* ]] && return
  done
  [ "$(basename "$h")" = idxlab.h ] && return
  [ -f "kernels/$h" ] && { echo "kernels/$h, through -Ikernels"; return; }
  [ -f "$(dirname "$f")/$h" ] && { echo "a header outside core/"; return; }
  [ "$quoted" = 0 ] && return # a system header
  echo "no such header under core/"
}
rule_core_includes() {
  if [ -d core ]; then
    while IFS= read -r -d '' f; do
      grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$f" |
        while IFS= read -r hit; do
          line=${hit#*:}
          h=$(sed -E 's/^[^<"]*[<"]([^>"]*)[>"].*/\1/' <<<"$line")
          quoted=0
          [[ $line =~ include[[:space:]]*\" ]] && quoted=1
          why=$(include_verdict "$f" "$h" "$quoted")
          [ -n "$why" ] && echo "$f:${hit%%:*}: $line ($why)"
        done
    done < <(find core -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
             -o -name '*.cpp' -o -name '*.inc' \) -print0 | sort -z) >>"$out"
  fi
}

# ---------------------------------------------------------------- core-symbols
rule_core_symbols() {
  if [ ! -d "$BUILD/obj/core" ] || [ -z "$(find "$BUILD/obj/core" -name '*.o' -print -quit)" ]; then
    echo "no objects under $BUILD/obj/core: build first (make CUDA=0 BUILD=$BUILD)" >"$out"
  elif ! command -v nm >/dev/null 2>&1; then
    echo "nm not found (binutils)" >"$out"
  else
    # defined, global (upper-case type, not U/w/v) symbols of every kernels/ object
    find "$BUILD/obj/kernels" -name '*.o' -print0 2>/dev/null |
      xargs -0 -r nm --defined-only -A 2>/dev/null |
      awk 'NF >= 2 && $(NF-1) ~ /^[A-TV-Z]$/ {
             o = $1; sub(/:.*/, "", o); print $NF "\t" o }' | sort -u -k1,1 >"$tmp/kdefs"
    # ... less those a core/ object defines itself (the reference is met inside core/)
    find "$BUILD/obj/core" -name '*.o' -print0 | xargs -0 -r nm --defined-only 2>/dev/null |
      awk 'NF >= 2 && $(NF-1) ~ /^[A-TV-Z]$/ { print $NF }' | sort -u >"$tmp/cdefs"
    join -t $'\t' -v 1 "$tmp/kdefs" "$tmp/cdefs" >"$tmp/kdefs.only"
    find "$BUILD/obj/core" -name '*.o' -print0 | xargs -0 -r nm --undefined-only -A 2>/dev/null |
      awk 'NF >= 2 { o = $1; sub(/:.*/, "", o); print $NF "\t" o }' | sort -k1,1 >"$tmp/cundef"
    join -t $'\t' "$tmp/cundef" "$tmp/kdefs.only" |
      awk -F'\t' '{ print $2 ": " $1 " (defined in " $3 ")" }' | sort >"$out"
  fi
}

# ---------------------------------------------------------------- line-length, line-length-lua
# Columns are characters: UTF-8 continuation bytes do not count (LC_ALL=C: awk sees bytes).
# A tab counts as one, as luacheck counts it (the tree has none).
long_lines() {
  while IFS= read -r f; do
    grep -Iq . "$f" 2>/dev/null || continue # binary (or empty)
    printf '%s\0' "$f"
  done | xargs -0 -r env LC_ALL=C awk -v max="$MAX" '
    { s = $0; sub(/\r$/, "", s); gsub(/[\200-\277]/, "", s)
      if (length(s) > max) printf "%s:%d: %d columns\n", FILENAME, FNR, length(s) }'
}
rule_line_length() { files c h cu cuh sh py | long_lines >"$out"; }
rule_line_length_lua() { files lua | long_lines >"$out"; }

# ---------------------------------------------------------------- clean-tree
rule_clean_tree() {
  if [ ! -r "$CLEAN_BEFORE" ]; then
    echo "CLEAN_BEFORE=$CLEAN_BEFORE: no such file" >"$out"
    return
  fi
  scripts/tree_state.sh >"$tmp/now"
  # lines only before: what the suite removed or changed; only now: what it made or changed
  diff "$CLEAN_BEFORE" "$tmp/now" | sed -n -E 's/^< /before: /p; s/^> /now:    /p' >"$out"
}

all=(luacheck core-includes core-symbols line-length line-length-lua clean-tree)
[ $# -gt 0 ] || set -- "${all[@]}"
for rule in "$@"; do
  fn=rule_${rule//-/_}
  if ! declare -F "$fn" >/dev/null; then
    echo "check.sh: no rule $rule (rules: ${all[*]})" >&2
    exit 2
  fi
  if [ "$rule" = clean-tree ] && [ -z "${CLEAN_BEFORE:-}" ]; then
    echo "skip clean-tree (CLEAN_BEFORE not set: scripts/run_tests.sh records the state)"
    continue
  fi
  out=$tmp/$rule
  : >"$out"
  "$fn"
  report "$rule" "$out"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
