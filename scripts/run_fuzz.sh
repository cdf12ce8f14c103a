#!/usr/bin/env bash
# Runs the libFuzzer targets of a fuzz build one after another (make fuzz, make fuzz-smoke)
# and fails if any reports a finding: a crash, a sanitizer report, a leak, a timeout, or a
# broken property (the targets trap). Prints each target's executions and time at the end.
#
#   scripts/run_fuzz.sh BUILD_DIR --seconds N [TARGET...]   each target N seconds, from the
#       corpus in BUILD_DIR/fuzz-corpus/TARGET (the tree's seeds plus what earlier runs
#       found; the seeds in fuzz/corpus stay small)
#   scripts/run_fuzz.sh BUILD_DIR --runs N [TARGET...]      each target N inputs from the
#       tree's seeds, into a throw-away corpus (the smoke test)
#
# Findings are saved as BUILD_DIR/fuzz-artifacts/TARGET/crash-* (or leak-, timeout-, oom-);
# rerun one with BUILD_DIR/fuzz/fuzz_TARGET FILE.
set -uo pipefail

build=${1:?build directory}
mode=${2:?--seconds or --runs}
amount=${3:?amount}
shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(all_gather_matmul matmul_reduce_scatter matmul_all_reduce alltoall_quant_matmul
           alltoall_matmul quant_all_reduce quant_reduce_scatter convert)
fi
case $mode in
  --seconds) limit=(-max_total_time="$amount") ;;
  --runs) limit=(-runs="$amount") ;;
  *) echo "run_fuzz.sh: unknown mode $mode" >&2; exit 2 ;;
esac

# Stop at the first sanitizer report with a stack; leaks are findings too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

summary=()
failed=0
for t in "${targets[@]}"; do
  bin=$build/fuzz/fuzz_$t
  seeds=$root/fuzz/corpus/$t
  artifacts=$build/fuzz-artifacts/$t
  log=$build/fuzz-logs/$t.log
  if [[ ! -x $bin || ! -d $seeds ]]; then
    echo "run_fuzz.sh: no target $t ($bin, $seeds)" >&2
    exit 2
  fi
  mkdir -p "$artifacts" "$(dirname "$log")"
  if [[ $mode == --seconds ]]; then
    corpus=$build/fuzz-corpus/$t
    mkdir -p "$corpus"
    cp "$seeds"/* "$corpus"/  # refreshes seeds of the same name after a format change
    dirs=("$corpus")
  else
    corpus=$(mktemp -d "$build/fuzz-smoke-XXXXXX")
    dirs=("$corpus" "$seeds")  # new inputs go to the first directory only
  fi
  echo "== fuzz_$t ${mode#--}=$amount"
  start=$(date +%s)
  "$bin" "${limit[@]}" -max_len=4096 -timeout=25 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  seconds=$(($(date +%s) - start))
  [[ $mode == --runs ]] && rm -rf "$corpus"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if ((rc != 0)); then
    failed=1
    tail -n 60 "$log"
    echo "fuzz_$t: FAILED (exit $rc); log $log, input in $artifacts/"
    summary+=("$(printf '%-24s %-6s %12s executions %6ss' "$t" FAIL "${execs:-?}" "$seconds")")
  else
    summary+=("$(printf '%-24s %-6s %12s executions %6ss' "$t" ok "${execs:-?}" "$seconds")")
  fi
done
echo "== fuzz summary (${mode#--}=$amount)"
printf '%s\n' "${summary[@]}"
exit $failed
