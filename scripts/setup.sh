#!/usr/bin/env bash
# setup.sh - installs what idxlab's build and tests need, only when something is missing:
#   - the Debian packages below (sudo when not root);
#   - .venv at the repository root (git-ignored): a Python virtual environment with numpy and
#     safetensors from PyPI, for tests/dump_indexer_spec.lua and scripts/make_fixtures.sh.
#     The tests only use it and never fetch anything themselves.
# Quiet when everything is present; says what it installs. Idempotent. `make test` runs it
# first (SETUP=0 skips it, e.g. on the GPU machine, which has no network).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# lua-penlight: also the REPL's pretty printer (pl.pretty); bsdutils: `script`, the pty that
# tests/repl_spec.lua drives the REPL through (essential on Debian, listed for the record)
pkgs=(luajit lua-busted lua-penlight lua-cjson lua-term lua-check rlwrap gnuplot-nox
      libopenblas-dev clang libclang-rt-14-dev libomp-14-dev python3-venv bsdutils)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi

venv=$root/.venv
py=$venv/bin/python
if ! "$py" -c 'import numpy, safetensors' 2>/dev/null; then
  echo "setup: making .venv with numpy and safetensors (PyPI)"
  [ -x "$py" ] || python3 -m venv "$venv"
  "$py" -m pip install -q --disable-pip-version-check --timeout 60 numpy safetensors
  echo "setup: .venv done"
fi
