#!/usr/bin/env bash
# setup.sh - installs the Debian packages idxlab needs, only when one is missing. Quiet when
# everything is present; says what it installs; uses sudo when not root.
set -euo pipefail
pkgs=(luajit lua-busted lua-penlight lua-cjson lua-term rlwrap gnuplot-nox libopenblas-dev
      clang libclang-rt-14-dev libomp-14-dev python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
