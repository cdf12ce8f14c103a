#!/usr/bin/env bash
# Regenerates the README's collective benchmark table: commfuse vs OpenMPI in the same run.
# usage: bench/collectives.sh [build-dir] [runs]   (default build, 3 runs: median per size)
# Prints the CPU line of `commfuse info` first: name it next to the numbers.
set -euo pipefail
build=${1:-build}
runs=${2:-3}
out=$(mktemp -d)
"$build/bin/commfuse" info | grep -E "^  (CPU|CPU ISA|shm single copy)  "
for op in all-reduce all-gather reduce-scatter all-to-all; do
  for n in 2 3 4; do
    for r in $(seq 1 "$runs"); do
      "$build/bin/commfuse" bench "$op" -n "$n" -b 64 -e 64M -f 4 --transport shm \
        --json "$out/$op-$n-$r.json" >/dev/null
    done
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys, collections
rows = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    for line in open(f):
        j = json.loads(line)
        rows[(j["op"], j["world_size"], j["bytes"])].append(j)
print("| op | ranks | size | commfuse µs | OpenMPI µs | OpenMPI / commfuse | #wrong |")
print("|---|---|---|---|---|---|---|")
for (op, w, b), js in sorted(rows.items()):
    cf = statistics.median(j["commfuse_us"] for j in js)
    mpi = statistics.median(float(j["mpi_us"]) for j in js)
    ratio = statistics.median(float(j["mpi_us"]) / j["commfuse_us"] for j in js)
    size = f"{b/2**20:g} MiB" if b >= 2**20 else f"{b/2**10:g} KiB" if b >= 1024 else f"{b} B"
    print(f"| {op} | {w} | {size} | {cf:.1f} | {mpi:.1f} | {ratio:.2f} | {sum(j['wrong'] for j in js)} |")
PY
rm -rf "$out"
