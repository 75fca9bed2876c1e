#!/usr/bin/env bash
# sass_check.sh - SASS rules for sm_90a wgmma kernels, on a machine with or without a GPU.
#
#   bash scripts/sass_check.sh [FILE.cu ...]     (default: kernels/cuda/sm90_selftest.cu)
#
# Builds each file's sm_90a cubin with the Makefile's NVCCFLAGS (read from the Makefile; one
# gencode, compute_90a -> sm_90a, since a cubin holds one architecture) and -Xptxas -v,
# disassembles it with cuobjdump (or nvdisasm), and checks, per kernel:
#   - QGMMA or IGMMA present (a v2 kernel runs on wgmma), no HMMA (mma.sync's f16 path);
#   - no local memory: no LDL/STL in the SASS, 0 bytes stack frame and spills (ptxas -v);
#   - no ptxas performance warning (C75xx: serialized wgmma, setmaxnreg ignored, ...);
#   - registers and shared memory within the limits the .cu declares beside its kernels,
#       // sass-limits: KERNEL-SUBSTRING registers N shared BYTES
#     (the first line whose substring is in the kernel's mangled name applies; a kernel no
#     line matches fails);
#   - the opcodes the .cu expects: // sass-expect: KERNEL-SUBSTRING OPCODE ...
# then prints each kernel's registers, shared memory and instruction mix, one line per rule
# (ok / FAIL) and "N passed, N failed"; exits 1 when a rule fails.
#
# The disassemblers: cuobjdump/nvdisasm on PATH or in the CUDA toolkit (the GPU machine has
# them); else the PyPI wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm, installed once
# into the venv $SASS_VENV (default /tmp/idxlab-sass-venv) and reused. Environment: NVCC,
# SASS_VENV, SASS_PKGS (the pip requirements, default both wheels ==13.5.37, which read
# nvcc 13.0's sm_90a objects correctly), KEEP=DIR (keep the cubins, SASS and ptxas logs there).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(kernels/cuda/sm90_selftest.cu)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
SASS_VENV=${SASS_VENV:-/tmp/idxlab-sass-venv}
SASS_PKGS=${SASS_PKGS:-nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37}
work=${KEEP:-$(mktemp -d /tmp/sass_check.XXXXXX)}
mkdir -p "$work"
[ -z "${KEEP:-}" ] && trap 'rm -rf "$work"' EXIT

fail_early() { # a rule that stops the check: print it and the tally
  echo "FAIL $*"
  echo "0 passed, 1 failed"
  exit 1
}

[ -x "$NVCC" ] || fail_early "nvcc: not found (set NVCC)"
cuda_bin=$(dirname "$NVCC")

# ------------------------------------------------------------ disassembler
find_tool() { # name -> path or nothing
  local t
  t=$(command -v "$1" 2>/dev/null) && { echo "$t"; return; }
  [ -x "$cuda_bin/$1" ] && { echo "$cuda_bin/$1"; return; }
  for t in "$SASS_VENV"/lib/python3*/site-packages/nvidia/cu*/bin/"$1"; do
    [ -x "$t" ] && { echo "$t"; return; }
  done
}
dis=$(find_tool cuobjdump)
[ -z "$dis" ] && dis=$(find_tool nvdisasm)
if [ -z "$dis" ]; then
  echo "== installing $SASS_PKGS into $SASS_VENV"
  # shellcheck disable=SC2086 # SASS_PKGS is a list of requirements
  if ! { python3 -m venv "$SASS_VENV" && "$SASS_VENV/bin/pip" install -q $SASS_PKGS; } \
      >"$work/pip.log" 2>&1; then
    tail -5 "$work/pip.log"
    fail_early "disassembler: could not install $SASS_PKGS from PyPI (see above)"
  fi
  dis=$(find_tool cuobjdump)
  [ -z "$dis" ] && dis=$(find_tool nvdisasm)
  [ -z "$dis" ] && fail_early "disassembler: $SASS_PKGS installed but no cuobjdump/nvdisasm in it"
fi
echo "== disassembler: $dis"

# ------------------------------------------------------------ the Makefile's flags
# shellcheck disable=SC2016 # $(NVCCFLAGS) is make's, expanded by make
flags=$(make -s --no-print-directory SETUP=0 CUDA=1 NVCC="$NVCC" \
  --eval='sass-check-flags: ; @echo $(NVCCFLAGS)' sass-check-flags 2>/dev/null)
[ -n "$flags" ] || fail_early "Makefile: could not read NVCCFLAGS"
cflags=()
for f in $flags; do
  case $f in -gencode=*) ;; *) cflags+=("$f") ;; esac
done
# shellcheck disable=SC2054 # the commas belong to nvcc's -gencode syntax
cflags+=(-gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v)
echo "== nvcc flags: ${cflags[*]}"

# ------------------------------------------------------------ build, disassemble, check
status=0
tally=$work/tally
: >"$tally"
for src in "${files[@]}"; do
  base=$(basename "$src" .cu)
  cubin=$work/$base.cubin
  echo "== $src"
  if ! "$NVCC" "${cflags[@]}" -o "$cubin" "$src" >"$work/$base.ptxas" 2>&1; then
    grep -E 'error' "$work/$base.ptxas" | head -20
    echo "FAIL $base: nvcc -cubin" | tee -a "$tally"
    status=1
    continue
  fi
  if [ "$(basename "$dis")" = cuobjdump ]; then
    "$dis" -sass "$cubin" >"$work/$base.sass" 2>"$work/$base.dis.err"
  else
    "$dis" -c "$cubin" >"$work/$base.sass" 2>"$work/$base.dis.err"
  fi || {
    head -5 "$work/$base.dis.err"
    echo "FAIL $base: disassembly" | tee -a "$tally"
    status=1
    continue
  }
  srcpath=$src
  [[ $src = /* ]] || srcpath=$root/$src
  python3 - "$srcpath" "$work/$base.ptxas" "$work/$base.sass" "$base" >>"$tally" <<'PY' ||
import re, subprocess, sys
src, ptxas, sass, base = sys.argv[1:5]

def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                             text=True, check=True).stdout.split("\n")
        return {n: re.sub(r"\(anonymous namespace\)::", "", d) for n, d in zip(names, out)}
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}

limits, expects = [], []
for line in open(src, encoding="utf-8"):
    m = re.search(r"//\s*sass-limits:\s*(\S+)\s+registers\s+(\d+)\s+shared\s+(\d+)", line)
    if m:
        limits.append((m.group(1), int(m.group(2)), int(m.group(3))))
    m = re.search(r"//\s*sass-expect:\s*(\S+)\s+(.+)$", line)
    if m:
        expects.append((m.group(1), m.group(2).split()))

# ptxas -v: per function, stack/spills then registers/smem
info, cur, warnings = {}, None, []
for line in open(ptxas, encoding="utf-8", errors="replace"):
    m = re.search(r"Compiling entry function '([^']+)'", line)
    if m:
        cur = m.group(1)
        info[cur] = {}
        continue
    m = re.search(r"Function properties for (\S+)", line)
    if m:
        cur = m.group(1)
        info.setdefault(cur, {})
        continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                  line)
    if m and cur:
        info[cur]["stack"] = sum(int(x) for x in m.groups())
    m = re.search(r"Used (\d+) registers", line)
    if m and cur:
        info[cur]["regs"] = int(m.group(1))
        s = re.search(r"(\d+) bytes smem", line)
        info[cur]["smem"] = int(s.group(1)) if s else 0
    if re.search(r"\(C75\d\d\)|Potential Performance Loss", line):
        warnings.append(line.strip())

# SASS: per function, opcode counts
code, fn = {}, None
for line in open(sass, encoding="utf-8", errors="replace"):
    m = re.search(r"Function : (\S+)", line) or re.match(r"\s*\.text\.(\S+):", line)
    if m:
        fn = m.group(1)
        code[fn] = {}
        continue
    m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_x]+)*)",
                 line)
    if m and fn:
        code[fn][m.group(1)] = code[fn].get(m.group(1), 0) + 1

kernels = sorted(set(code) | {k for k in info if "regs" in info[k]})
names = demangle(kernels)
short = lambda k: names[k] if len(names[k]) < 70 else names[k][:67] + "..."

def count(k, prefix):
    return sum(n for op, n in code.get(k, {}).items() if op == prefix or
               op.startswith(prefix + "."))

print(f"  {base}: {len(kernels)} kernels")
print(f"  {'kernel':<70} {'regs':>4} {'smem':>6} {'instr':>5} {'wgmma':>5}  mix")
for k in kernels:
    i = info.get(k, {})
    ops = code.get(k, {})
    mix = ", ".join(f"{op.split('.')[0]} {n}" for op, n in sorted(
        ((p, sum(n for o, n in ops.items() if o.split('.')[0] == p))
         for p in {o.split('.')[0] for o in ops}), key=lambda x: -x[1])[:8])
    print(f"  {short(k):<70} {i.get('regs', -1):>4} {i.get('smem', -1):>6} "
          f"{sum(ops.values()):>5} {count(k, 'QGMMA') + count(k, 'IGMMA'):>5}  {mix}")

def rule(ok, text, bad):
    detail = "" if ok else ": " + ", ".join(short(b) for b in bad[:4]) + \
        (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
    print(f"{'ok  ' if ok else 'FAIL'} {base}: {text}{detail}")

bad = [k for k in kernels if count(k, "QGMMA") + count(k, "IGMMA") == 0]
rule(not bad and kernels, f"QGMMA/IGMMA in every kernel ({len(kernels)})", bad)
bad = [k for k in kernels if count(k, "HMMA")]
rule(not bad, "no HMMA", bad)
bad = [k for k in kernels if count(k, "LDL") or count(k, "STL")]
rule(not bad, "no LDL/STL", bad)
bad = [k for k in kernels if info.get(k, {}).get("stack", 1) != 0]
rule(not bad, "0 bytes stack frame and spills (ptxas -v)", bad)
rule(not warnings, "no ptxas performance warnings" + (f": {warnings[0]}" if warnings else ""), [])
over, unmatched = [], []
for k in kernels:
    lim = next((l for l in limits if l[0] in k), None)
    i = info.get(k, {})
    if lim is None:
        unmatched.append(k)
    elif i.get("regs", 1 << 30) > lim[1] or i.get("smem", 1 << 30) > lim[2]:
        over.append(k)
rule(not unmatched, f"every kernel has declared limits ({len(limits)} sass-limits lines)",
     unmatched)
rule(not over, "registers and shared memory within the declared limits", over)
for sub, ops in expects:
    ks = [k for k in kernels if sub in k]
    bad = [k for k in ks if any(count(k, op) == 0 for op in ops)]
    rule(ks and not bad, f"{sub}: {' '.join(ops)} present ({len(ks)} kernels)",
         bad or ["no kernel matches"])
PY
    status=1
done

# ------------------------------------------------------------ tally
grep -vE '^(ok  |FAIL) ' "$tally"
grep -E '^(ok  |FAIL) ' "$tally"
passed=$(grep -c '^ok  ' "$tally")
failed=$(grep -c '^FAIL ' "$tally")
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ $status -eq 0 ]
