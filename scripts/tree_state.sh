#!/usr/bin/env bash
# tree_state.sh - prints the state of the working tree, so that two calls (before and after
# the test suite) can be compared: the suite must leave the tree as it found it.
#   1. `git status --porcelain --ignored`: a file or folder made, removed or changed, tracked
#      or ignored (build/, results/, .venv/ ... show as one line each);
#   2. the sha256 of every changed or untracked path the status lists (not the ignored ones,
#      which may change inside: build/test-logs): a dirty file written again is seen;
#   3. the modification time of every tracked file: a committed file written again with the
#      same bytes (how bogus, fp32 and mxfp4 went unseen) is seen too.
# Outside a git checkout (a copy of the tree, e.g. on the GPU machine) it lists every file
# with its modification time and size instead, and of the folders .gitignore names only
# whether they are there.
# Usage: scripts/tree_state.sh > before; ...; scripts/tree_state.sh | diff before -
set -euo pipefail
cd "$(dirname "$0")/.."

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git status --porcelain --ignored | sed 's/^/status /'
  # --untracked-files=all lists each untracked file (not only its folder), each hashed; -z
  # gives the paths as they are, unquoted.
  git status --porcelain -z --untracked-files=all | while IFS= read -r -d '' rec; do
    xy=${rec:0:2} p=${rec:3}
    case $xy in R* | C*) IFS= read -r -d '' _ ;; esac # the rename's source follows
    if [ -f "$p" ] && [ ! -L "$p" ]; then
      echo "sha256 $(sha256sum <"$p" | cut -c1-64) $p"
    elif [ -e "$p" ] || [ -L "$p" ]; then
      echo "exists $p"
    fi
  done
  git ls-files -z | xargs -0 -r stat -c 'mtime %.9Y %n' 2>/dev/null || true
  exit 0
fi

echo "no git checkout: every file, and whether each folder .gitignore names is there"
# .gitignore's lines as find tests: /dir/ (rooted) and dir/ are pruned, *.ext files skipped
prune=() skip=()
if [ -f .gitignore ]; then
  while IFS= read -r pat; do
    case $pat in
      '' | '#'* | '!'*) ;;
      /*/) prune+=(-o -path "./${pat:1:${#pat}-2}") ;;
      */) prune+=(-o -name "${pat%/}") ;;
      */*) ;;
      *) skip+=(-o -name "$pat") ;;
    esac
  done <.gitignore
fi
find . \( -path ./.git "${prune[@]}" \) -prune -printf 'ignored %P\n' \
  -o \( -false "${skip[@]}" \) -o \( -type f -o -type l \) -printf 'file %T@ %s %P\n' |
  grep -v '^ignored $' | sort
