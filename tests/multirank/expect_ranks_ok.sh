#!/usr/bin/env bash
# usage: expect_ranks_ok.sh <case> <ranks, comma-separated> <command...>
# For jobs that mpirun ends itself (a rank exits without MPI_Finalize, which commfuse skips
# after a failed call, docs/reliability.md), so the job's exit code says nothing: passes
# when each listed rank printed "rank R: <case> OK" and no rank printed FAILED.
set -u
case_name=$1 ranks=$2
shift 2
out=$(mktemp)
# Each listed rank, after its OK line, waits for the others' (rank_main.cpp,
# wait_for_listed_ranks), so that the first rank to exit does not end the job before the
# others have printed theirs.
CF_OK_DIR=$(mktemp -d) CF_OK_RANKS=$ranks
export CF_OK_DIR CF_OK_RANKS
"$@" >"$out" 2>&1
rc=$?
rm -rf "$CF_OK_DIR"
cat "$out"
fail() { echo "FAIL: $*"; rm -f "$out"; exit 1; }
grep -q 'FAILED' "$out" && fail "a rank failed a check"
for r in ${ranks//,/ }; do
  grep -q "^rank $r: $case_name OK" "$out" || fail "rank $r did not print '$case_name OK'"
done
rm -f "$out"
echo "PASS: ranks $ranks OK (job exit code $rc)"
