#!/usr/bin/env bash
# Regenerates the README's QuantAllReduce table: runs `commfuse bench quant-all-reduce`
# (int8, per-token-group scales, float32 output) ROUNDS times per configuration and prints
# the per-size median of each time and the ratios of the medians.
#   bench/quant_all_reduce.sh [build-dir] [rounds]
set -euo pipefail
# A run that exits nonzero (1: a wrong result, whose row still says #wrong, or a failed rank)
# is reported and the others go on; the script then exits 1 after the table.
BUILD=${1:-build}
ROUNDS=${2:-3}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
failed=0
run() {  # name, args...
  local name=$1
  shift
  for i in $(seq 1 "$ROUNDS"); do
    "$BUILD/bin/commfuse" bench quant-all-reduce "$@" --dtype int8 --scales kg \
      --out-dtype float32 --rounds 3 --json "$OUT/$name.$i.json" >/dev/null ||
      { echo "commfuse bench quant-all-reduce $name (run $i) exited $?" >&2; failed=1; }
  done
}
run shm_w2 -n 2 -b 1M -e 16M -f 4 --transport shm
run shm_w4 -n 4 -b 1M -e 16M -f 4 --transport shm
run mpi_w2 -n 2 -b 1M -e 16M -f 4 --transport mpi
python3 - "$OUT" <<'PY'
import glob, json, statistics, sys, collections
rows = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    name = f.split("/")[-1].split(".")[0]
    for line in open(f):
        r = json.loads(line)
        rows[(name, r["elements"])].append(r)
print("| transport | ranks | elements | fused µs | MPI_Allreduce fp32 µs | all_reduce bf16 µs | all_reduce fp32 µs | MPI/fused | bf16/fused | fp32/fused | #wrong |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (name, n), rs in sorted(rows.items()):
    med = {k: statistics.median(r[k] for r in rs) for k in ("fused_us", "mpi_fp32_us", "allreduce_bf16_us", "allreduce_fp32_us")}
    f = med["fused_us"]
    print(f"| {rs[0]['transport']} | {rs[0]['world_size']} | {n} | {f:.0f} | {med['mpi_fp32_us']:.0f} | {med['allreduce_bf16_us']:.0f} | {med['allreduce_fp32_us']:.0f} | {med['mpi_fp32_us']/f:.2f} | {med['allreduce_bf16_us']/f:.2f} | {med['allreduce_fp32_us']/f:.2f} | {sum(r['wrong'] for r in rs)} |")
PY
exit "$failed"
