#!/usr/bin/env bash
# Regenerates the README's fused-operator table (issue 4's three targets): each row is the
# median over runs of `commfuse bench <op>`, which times in the same processes the fused
# op, our collective + the same oneDNN GEMM (unfused), OpenMPI's collective + GEMM, and the
# GEMM alone on the same work.
# usage: bench/fused_ops.sh [build-dir] [runs]   (default build, 3 runs)
set -euo pipefail
# A run that exits nonzero (1: a wrong result, whose row still says #wrong, or a failed rank)
# is reported and the others go on; the script then exits 1 after the table.
build=${1:-build}
runs=${2:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
run() {  # name, then bench arguments
  local name=$1
  shift
  for r in $(seq 1 "$runs"); do
    "$build/bin/commfuse" bench "$@" --json "$out/$name-$r.json" >/dev/null ||
      { echo "commfuse bench $name (run $r) exited $?" >&2; failed=1; }
  done
}
# 1. shm, W=2, bf16, global m=2048, k=n=4096: communication ~2% of the GEMM (the list runs
# all_gather then the GEMM here: fused would stage every row for one GEMM).
run 1-shm-prefill all-gather-matmul -n 2 --m 2048 --k 4096 --n 4096 --dtype bfloat16 --rounds 3
# 2. MPI over TCP, W=2: a shape where the all_gather and the GEMM take similar time alone.
run 2-mpi-balanced all-gather-matmul -n 2 --m 4096 --k 4096 --n 64 --dtype bfloat16 \
  --transport mpi --rounds 5
# 3. Decode: 8 rows per rank, k=n=4096, W=2, shm.
run 3-shm-decode all-gather-matmul -n 2 --m 16 --k 4096 --n 4096 --dtype bfloat16 --rounds 5
# Tiny: 1 row per rank, k=n=256, W=2, shm: per-call costs, not bandwidth.
run 6-shm-tiny all-gather-matmul -n 2 --m 2 --k 256 --n 256 --dtype bfloat16 --rounds 5
# The siblings at the prefill shape (not targets; for reference).
run 4-shm-mm-rs matmul-reduce-scatter -n 2 --m 2048 --k 4096 --n 4096 --dtype bfloat16 --rounds 3
run 5-shm-mm-ar matmul-all-reduce -n 2 --m 2048 --k 4096 --n 4096 --dtype bfloat16 --rounds 3
# The siblings over TCP at row 2's shape: a GEMM 3x longer than the 1 MiB fp32 partial's
# transfer, whose socket copies run on the computing cores (the fused slower until 2026-12-05).
run 7-mpi-mm-rs matmul-reduce-scatter -n 2 --m 4096 --k 4096 --n 64 --dtype bfloat16 \
  --transport mpi --rounds 5
run 8-mpi-mm-ar matmul-all-reduce -n 2 --m 4096 --k 4096 --n 64 --dtype bfloat16 \
  --transport mpi --rounds 5
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys, collections
rows = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    name = os.path.basename(f).rsplit("-", 1)[0]
    rows[name] += [json.loads(l) for l in open(f)]
print("| case | op | transport | W | m, k, n | fused ms | unfused ms | unfused (OpenMPI) ms | GEMM alone ms | fused / GEMM | fused / unfused | exposed comm | #wrong |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
def fmt_exposed(js):
    v = [j["exposed_comm"] for j in js if j["exposed_comm"] is not None]
    return f"{statistics.median(v):.2f}" if v else "n/a"
for name, js in sorted(rows.items()):
    med = lambda key: statistics.median(j[key] for j in js)
    f, u, um, g = (med(k) / 1e3 for k in ("fused_us", "unfused_us", "unfused_mpi_us", "gemm_alone_us"))
    ratio_g = statistics.median(j["fused_us"] / j["gemm_alone_us"] for j in js)
    ratio_u = statistics.median(j["fused_us"] / j["unfused_us"] for j in js)
    j = js[0]
    ms = lambda v: f"{v:.2f}" if v >= 0.1 else f"{v:.4f}"  # the tiny shape takes microseconds
    print(f"| {name} | {j['op']} | {j['transport']} | {j['world_size']} | {j['m']}, {j['k']}, {j['n']} "
          f"| {ms(f)} | {ms(u)} | {ms(um)} | {ms(g)} | {ratio_g:.3f} | {ratio_u:.3f} | {fmt_exposed(js)} "
          f"| {sum(j['wrong'] for j in js)} |")
PY
exit "$failed"
