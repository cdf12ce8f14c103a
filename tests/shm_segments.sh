# Sourced by the tests that kill or stall ranks (tests/multirank/run_kill_peer.sh,
# tests/ops/run_fault.sh): which /dev/shm/commfuse-* segments a job left behind.
shm_segments() { ls /dev/shm | grep '^commfuse-' | sort; }

# Prints the segments present now that were not in $1 (shm_segments before the job) and are
# still there 3 s later. Tests running next to this one (ctest -j) create segments too, for
# the milliseconds until all their ranks mapped them (then they are unlinked); a segment this
# job leaked stays, its ranks being gone.
shm_leaked_since() {
  local leaked
  leaked=$(comm -13 <(echo "$1") <(shm_segments))
  if [[ -n $leaked ]]; then
    sleep 3
    leaked=$(comm -12 <(echo "$leaked") <(shm_segments))
  fi
  echo "$leaked"
}
