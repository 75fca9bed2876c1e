#!/usr/bin/env bash
# gpu_bundle.sh - what `make gpu-bundle` runs on a development machine: downloads (never
# installs) the Debian packages that the GPU machine lacks into the git-ignored folder
# .gpu/debs, so that the device tool can carry them there (carry [".gpu"]) and
# scripts/gpu-test.sh can unpack them with `dpkg -x` into .gpu/prefix. The GPU machine has no
# network and no Lua: it gets LuaJIT, busted and its Lua dependencies, and the OpenBLAS
# runtime and headers the library links against (with the Fortran runtime OpenBLAS needs).
# Idempotent: a package whose .deb is already there is not downloaded again.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.gpu/debs
mkdir -p "$dest"

pkgs=(
  # LuaJIT and busted (busted.runner and everything it requires)
  luajit libluajit-5.1-2 libluajit-5.1-common
  lua-busted lua-penlight lua-cliargs lua-dkjson lua-say lua-luassert lua-term lua-system
  lua-mediator lua-filesystem lua-cjson
  # OpenBLAS: runtime, the pthread flavour's headers and link library, the meta package
  libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev
  # what libopenblas.so.0 links besides libc/libm/libgcc_s (see `ldd` on it)
  libgfortran5 libquadmath0
)

missing=()
for p in "${pkgs[@]}"; do
  compgen -G "$dest/${p}_*.deb" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "gpu-bundle: .gpu/debs already holds all ${#pkgs[@]} packages"
  exit 0
fi

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "gpu-bundle: downloading ${missing[*]}"
# apt-get download needs the package lists; fetch them once when they are missing.
if ! (cd "$dest" && apt-get download "${missing[@]}" >/dev/null 2>&1); then
  $sudo apt-get update -qq >/dev/null
  (cd "$dest" && apt-get download "${missing[@]}" >/dev/null)
fi
for p in "${pkgs[@]}"; do
  compgen -G "$dest/${p}_*.deb" >/dev/null || { echo "gpu-bundle: $p did not download" >&2; exit 1; }
done
echo "gpu-bundle: $(ls "$dest"/*.deb | wc -l) packages in $dest ($(du -sh "$dest" | cut -f1)); on the GPU machine run: bash scripts/gpu-test.sh"
