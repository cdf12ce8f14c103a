#!/usr/bin/env bash
# Regenerates the README's collective benchmark table: commfuse vs OpenMPI in the same run.
# usage: bench/collectives.sh [build-dir] [runs]   (default build, 3 runs: median per size)
#   TRANSPORT=shm|mpi (mpi: Open MPI's TCP transport between the ranks; default shm)
#   DTYPE=float32|bfloat16|...  WORLDS="2 3 4"  MAXBYTES=64M  OPS="all-reduce ..."
# Prints the CPU line of `commfuse info` first: name it next to the numbers.
set -euo pipefail
# A run that exits nonzero (1: a wrong result, whose row still says #wrong, or a failed rank)
# is reported and the others go on; the script then exits 1 after the table.
build=${1:-build}
runs=${2:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
"$build/bin/commfuse" info | grep -E "^  (CPU|CPU ISA|shm single copy)  "
echo "transport ${TRANSPORT:-shm}, dtype ${DTYPE:-float32}"
for op in ${OPS:-all-reduce all-gather reduce-scatter all-to-all}; do
  for n in ${WORLDS:-2 3 4}; do
    for r in $(seq 1 "$runs"); do
      "$build/bin/commfuse" bench "$op" -n "$n" -b 64 -e "${MAXBYTES:-64M}" -f 4 \
        --transport "${TRANSPORT:-shm}" --dtype "${DTYPE:-float32}" \
        --json "$out/$op-$n-$r.json" >/dev/null ||
        { echo "commfuse bench $op -n $n (run $r) exited $?" >&2; failed=1; }
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
    size = f"{b/2**20:g} MiB" if b >= 2**20 else f"{b/2**10:g} KiB" if b >= 1024 else f"{b} B"
    if any(j["mpi_us"] is None for j in js):  # OpenMPI cannot sum this dtype
        mpi, ratio = "n/a", "n/a"
    else:
        mpi = f'{statistics.median(float(j["mpi_us"]) for j in js):.1f}'
        ratio = f'{statistics.median(float(j["mpi_us"]) / j["commfuse_us"] for j in js):.2f}'
    print(f"| {op} | {w} | {size} | {cf:.1f} | {mpi} | {ratio} | {sum(j['wrong'] for j in js)} |")
PY
exit "$failed"
