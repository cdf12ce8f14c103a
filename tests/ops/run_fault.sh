#!/usr/bin/env bash
# usage: run_fault.sh shm|mpi <launcher> <ops_rank_tests> <W> <rank> <op> <piece> <kill|stall|exit>
#   <launcher>: the commfuse CLI (shm: `commfuse launch`) or mpiexec (mpi).
# COMMFUSE_FAULT makes <rank> die, hang or exit at <piece> of <op> while every rank calls
# <op> in a loop (the `fault` case). Passes when:
# - the job fails (non-zero exit) within COMMFUSE_TIMEOUT_S plus twice the launcher's grace,
# - the launcher names the faulty rank and what happened to it,
# - every surviving rank reported RUNTIME_ERROR naming the faulty rank and <op> (the case
#   checks the message; except on MPI after a kill or exit, where mpirun itself ends the
#   job as soon as a rank dies or exits without MPI_Finalize),
# - no /dev/shm/commfuse-* segment created during the run is left behind.
set -u
source "$(dirname "$0")/../shm_segments.sh"
mode=$1 launcher=$2 bin=$3 w=$4 r=$5 op=$6 piece=$7 action=$8
timeout_s=${COMMFUSE_TIMEOUT_S:-2}
before=$(shm_segments)
out=$(mktemp)
start=$(date +%s)
export COMMFUSE_FAULT="$r:$op:$piece:$action" COMMFUSE_TEST_OP="$op" COMMFUSE_TIMEOUT_S=$timeout_s
if [[ $mode == shm ]]; then
  # Grace 10 s: under ASan a survivor may still be planning its first call when the faulty
  # rank dies (seen: stopped at 2 s before it reported). After a stall the grace starts later,
  # when the first survivor fails at its timeout, and the stalled rank only ever ends by the
  # launcher's SIGTERM: 5 s leaves the other survivor as long to catch up, and saves the 5 s
  # every stall case would otherwise wait (11 cases, run in the release and ASan suites).
  grace=10
  [[ $action == stall ]] && grace=5
  timeout 60 "$launcher" launch -n "$w" --grace "$grace" -- "$bin" fault >"$out" 2>&1
else
  session=$(mktemp -d)
  timeout 60 "$launcher" --oversubscribe --mca btl tcp,self --mca orte_tmpdir_base "$session" \
    -x COMMFUSE_TRANSPORT=mpi -x COMMFUSE_FAULT -x COMMFUSE_TEST_OP -x COMMFUSE_TIMEOUT_S \
    -n "$w" "$bin" fault >"$out" 2>&1
fi
rc=$?
elapsed=$(( $(date +%s) - start ))
[[ $mode == mpi ]] && rm -rf "$session"
cat "$out"
fail() { echo "FAIL: $*"; rm -f "$out"; exit 1; }
[[ $rc -ne 124 ]] || fail "the job was still running after 60 s"
[[ $rc -ne 0 ]] || fail "the job exited 0 although rank $r was made to $action"
grep -q "COMMFUSE_FAULT: rank $r" "$out" || fail "the fault did not fire"
case $mode:$action in
  # Either the launcher's first report or its summary (a survivor that notices first, as a
  # CMA read of the dead rank does at once, is the summary's "first failure").
  shm:kill) pattern="rank $r:? .*SIGKILL" ;;
  shm:exit) pattern="rank $r( \(pid [0-9]+\))?:? exited with code 3" ;;
  shm:stall) pattern="rank $r: killed by signal 15" ;;  # stopped after the survivors failed
  mpi:kill) pattern="process rank $r .*exited on signal 9" ;;
  # mpirun names the first process that exited non-zero: the faulty one after an exit; after
  # a stall, a survivor whose failure ends the job.
  mpi:exit | mpi:stall) pattern="Process name: \[\[[0-9]+,1\],[0-9]+\]" ;;
esac
grep -Eq "$pattern" "$out" || fail "the launcher did not report rank $r ($pattern)"
survivors=$(grep -c 'got expected error' "$out")
if [[ $mode == shm || $action == stall ]]; then
  [[ $survivors -eq $((w - 1)) ]] || fail "$survivors of $((w - 1)) survivors reported the failure"
fi
grep -q 'FAILED' "$out" && fail "a surviving rank failed a check"
# The deadline, the launcher's grace before SIGTERM and again before SIGKILL (a stalled rank
# under TSan may outlive SIGTERM: seen 21.9 s), and a margin.
(( elapsed < timeout_s + 25 )) || fail "took ${elapsed}s (COMMFUSE_TIMEOUT_S=$timeout_s)"
leaked=$(shm_leaked_since "$before")
[[ -z $leaked ]] || fail "left in /dev/shm: $leaked"
rm -f "$out"
echo "PASS: $mode $op $action at piece $piece of rank $r: rc=$rc, $survivors survivors reported it, ${elapsed}s, /dev/shm clean"
