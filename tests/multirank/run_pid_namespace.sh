#!/usr/bin/env bash
# usage: run_pid_namespace.sh <commfuse> <commfuse_rank_tests>
# Two ranks on one host, rank 1 in a pid namespace of its own (`unshare --pid`, as containers
# of one pod are): they share /dev/shm but cannot see each other's pids. The slow_peer case
# (rank 0 late at each call) must pass: a peer whose pid this rank cannot see is not dead.
# Reported as skipped (77) where this machine does not allow unshare --pid.
set -u
cli=$1 rank_bin=$2
if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
  echo "SKIP: unshare --pid --fork --mount-proc is not permitted here"
  exit 77
fi
# shellcheck disable=SC2016  # $RANK and $0 are the rank's, expanded by its shell
exec "$cli" launch -n 2 -- sh -c \
  'if [ "$RANK" = 1 ]; then exec unshare --pid --fork --mount-proc "$0" slow_peer; fi
   exec "$0" slow_peer' "$rank_bin"
