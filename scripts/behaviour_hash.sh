#!/usr/bin/env bash
# behaviour_hash.sh - two sha256 hashes of what idxlab computes on the CPU, to show that a
# change meant to move code only (issue 12) leaves the results bitwise as they were:
#   results  quick.lua's CPU result rows, restricted to the config values and the non-timing
#            SPEC 6 metrics (also inside per_layer and by_length);
#   replay   every output tensor (name, dtype, shape, bytes; not __metadata__) of each
#            tests/fixtures/replay_*.safetensors replayed on the CPU.
# Run it from a repository root whose library is built (env BUILD, default build), before and
# after the change, and compare the two hash lines. It relies only on bin/idxlab,
# experiments/quick.lua and tests/fixtures/, so it works on a reorganised tree; the script
# itself may live elsewhere (e.g. /path/to/other/checkout/scripts/behaviour_hash.sh).
#   scripts/behaviour_hash.sh [--dump DIR]
# --dump DIR keeps the canonical rows and the tensor list there, for diffing two runs.
# Writes only under a mktemp directory (removed at exit) and DIR.
set -euo pipefail

dump=
case "${1:-}" in
  --dump) dump=${2:?--dump needs a directory}; mkdir -p "$dump"; dump=$(cd "$dump" && pwd) ;;
  "") ;;
  *) echo "usage: scripts/behaviour_hash.sh [--dump DIR]" >&2; exit 2 ;;
esac

root=$PWD
for p in bin/idxlab experiments/quick.lua tests/fixtures; do
  [ -e "$root/$p" ] ||
    { echo "behaviour_hash: no $p here: run from a repository root" >&2; exit 2; }
done
BUILD=${BUILD:-build}
case "$BUILD" in /*) libdir=$BUILD ;; *) libdir=$root/$BUILD ;; esac
[ -d "$libdir" ] || { echo "behaviour_hash: no build dir $libdir (make CUDA=0 first)" >&2; exit 2; }
export IDXLAB_LIBDIR=$libdir IDXLAB_PROGRESS=plain

tmp=$(mktemp -d "${TMPDIR:-/tmp}/behaviour_hash.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# run CMD...: runs an idxlab command with its output in a log, shown only when it fails.
run() {
  if ! "$@" >"$tmp/log" 2>&1; then
    echo "behaviour_hash: failed: $*" >&2
    tail -n 40 "$tmp/log" >&2
    exit 1
  fi
}

# (a) quick.lua on the CPU backend, results under the temp dir.
run "$root/bin/idxlab" run "$root/experiments/quick.lua" --set backend=cpu --out "$tmp/results"

# (b) each replay fixture on the CPU, with the sizes the fixtures were written for (as
# tests/replay_fixture_spec.lua replays them: 4 heads, so the production defaults do not fit).
sets=(--set backend=cpu --set heads=4 --set index_topk=8 --set candidate_block_size=8
      --set candidate_topk_blocks=64)
shopt -s nullglob
fixtures=("$root"/tests/fixtures/replay_*.safetensors)
[ ${#fixtures[@]} -gt 0 ] || { echo "behaviour_hash: no tests/fixtures/replay_*" >&2; exit 1; }
mkdir -p "$tmp/replay"
for f in "${fixtures[@]}"; do
  run "$root/bin/idxlab" replay "$f" "$tmp/replay/$(basename "$f")" "${sets[@]}"
done

python3 - "$tmp/results" "$tmp/replay" "$dump" <<'PY'
import hashlib, json, math, os, re, struct, sys

results_dir, replay_dir, dump = sys.argv[1:4]

# Fields that are not config values or non-timing metrics: run bookkeeping, provenance
# (commit, version, dates, host, device, process), timings and what is computed from them,
# and the per-family variant names the restructuring adds. Applied at every depth.
BOOKKEEPING = {"schema", "experiment", "point", "repeat", "config_hash", "device",
               "idxlab_version", "wall_time_s", "finished_at", "started_at"}
DROP = re.compile(r"^(time_|variant|git_|commit|speedup|wall_|date|timestamp)"
                  r"|_at$|(^|_)(host|hostname|pid|uid|user|uuid|cwd|threads)(_|$)")

def dropped(key):
    return key in BOOKKEEPING or DROP.search(key) is not None

def canon(v, path, fields, gone):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            p = path + "." + k if path else k
            if dropped(k):
                gone.add(p)
            else:
                fields.add(p)
                out[k] = canon(x, p, fields, gone)
        return out
    if isinstance(v, list):
        return [canon(x, path + "[]", fields, gone) for x in v]
    # 1 and 1.0 are the same value: a writer change between the two must not count.
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v

rows, fields, gone = [], set(), set()
for d, _, files in sorted(os.walk(results_dir)):
    if "results.jsonl" in files:
        with open(os.path.join(d, "results.jsonl")) as fh:
            for line in fh:
                if line.strip():
                    row = canon(json.loads(line), "", fields, gone)
                    rows.append(json.dumps(row, sort_keys=True, separators=(",", ":")))
if not rows:
    sys.exit("behaviour_hash: quick.lua wrote no result rows under " + results_dir)
rows.sort()
text = "".join(r + "\n" for r in rows)
h_results = hashlib.sha256(text.encode()).hexdigest()

def tensors(path):
    with open(path, "rb") as fh:
        blob = fh.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        yield name, e["dtype"], list(e["shape"]), blob[base + a:base + b]

h, listing = hashlib.sha256(), []
for f in sorted(os.listdir(replay_dir)):
    for name, dtype, shape, data in sorted(tensors(os.path.join(replay_dir, f))):
        key = "%s:%s %s %s %d" % (f, name, dtype, json.dumps(shape), len(data))
        h.update(key.encode() + b"\n")
        h.update(data)
        listing.append("%s %s" % (key, hashlib.sha256(data).hexdigest()))
h_replay = h.hexdigest()

if dump:
    with open(os.path.join(dump, "results.canon.jsonl"), "w") as fh:
        fh.write(text)
    with open(os.path.join(dump, "replay.tensors.txt"), "w") as fh:
        fh.write("".join(l + "\n" for l in listing))

print("results sha256 %s  (quick.lua on the CPU: %d rows, %d fields)" % (h_results, len(rows),
                                                                           len(fields)))
print("replay  sha256 %s  (%d fixtures, %d tensors)" % (h_replay, len(os.listdir(replay_dir)),
                                                        len(listing)))
print("fields hashed:", " ".join(sorted(fields)))
print("fields left out:", " ".join(sorted(gone)))
PY
