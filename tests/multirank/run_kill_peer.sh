#!/usr/bin/env bash
# usage: run_kill_peer.sh <commfuse> <commfuse_rank_tests> <world_size>
# Rank 1 SIGKILLs itself during a sequence of all-reduces. Passes when:
# - every surviving rank printed the expected RUNTIME_ERROR naming rank 1,
# - `commfuse launch` exited non-zero and named rank 1 and SIGKILL,
# - no /dev/shm/commfuse-* segment created during the run is left behind.
set -u
source "$(dirname "$0")/../shm_segments.sh"
cli=$1 rank_bin=$2 w=$3
before=$(shm_segments)
out=$(mktemp)
start=$(date +%s)
"$cli" launch -n "$w" --grace 10 -- "$rank_bin" kill_peer >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "FAIL: $*"; rm -f "$out"; exit 1; }
[[ $rc -ne 0 ]] || fail "commfuse launch exited 0 although rank 1 was killed"
grep -q 'rank 1.*SIGKILL\|rank 1.*signal 9' "$out" || fail "launch did not say rank 1 was killed by SIGKILL"
survivors=$(grep -c 'got expected error.*rank 1' "$out")
# Ranks other than 1 that reached the error report it; the launcher may stop a slow rank
# before it prints, but at least one survivor must have seen the failure named.
[[ $survivors -ge 1 ]] || fail "no surviving rank reported RUNTIME_ERROR naming rank 1"
grep -q 'FAILED' "$out" && fail "a surviving rank failed a check"
(( elapsed < 25 )) || fail "took ${elapsed}s: the failure was not noticed before the 30 s deadline"
leaked=$(shm_leaked_since "$before")
[[ -z $leaked ]] || fail "left in /dev/shm: $leaked"
rm -f "$out"
echo "PASS: launch rc=$rc, $survivors survivors reported rank 1, ${elapsed}s, /dev/shm clean"
