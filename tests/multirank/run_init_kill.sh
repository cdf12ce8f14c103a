#!/usr/bin/env bash
# usage: run_init_kill.sh <commfuse> <commfuse_rank_tests> <world_size>
# Rank 1 SIGKILLs itself right after creating its shared-memory segment, before its peers
# learn the name (COMMFUSE_FAULT=1:comm_init:0:kill). No peer can remove that segment; the
# launcher, which knows the rank's pid, must. Passes when `commfuse launch` exits non-zero,
# says it removed rank 1's segment, and nothing the job created is left in /dev/shm.
set -u
source "$(dirname "$0")/../shm_segments.sh"
cli=$1 rank_bin=$2 w=$3
before=$(shm_segments)
out=$(mktemp)
COMMFUSE_FAULT=1:comm_init:0:kill "$cli" launch -n "$w" -- "$rank_bin" collectives >"$out" 2>&1
rc=$?
cat "$out"
fail() { echo "FAIL: $*"; rm -f "$out"; exit 1; }
[[ $rc -ne 0 ]] || fail "commfuse launch exited 0 although rank 1 was killed"
grep -q 'COMMFUSE_FAULT: rank 1 kills itself at comm_init' "$out" || fail "the fault did not fire"
grep -q 'removed 1 shared-memory segment rank 1 left' "$out" ||
  fail "launch did not remove rank 1's segment"
leaked=$(shm_leaked_since "$before")
[[ -z $leaked ]] || fail "left in /dev/shm: $leaked"
rm -f "$out"
echo "PASS: launch rc=$rc, rank 1's segment removed, /dev/shm clean"
