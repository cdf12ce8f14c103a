#!/usr/bin/env bash
# expect.sh RC REGEX COMMAND...: runs COMMAND, prints its output, and passes only if it
# exited with RC and its output (stdout and stderr) matches the extended regex REGEX. ctest's
# PASS_REGULAR_EXPRESSION alone would ignore the exit code, which is half of what these
# tests check (`commfuse bench` exits 1 on a wrong result). With EXPECT_LINES=N in the
# environment, exactly N lines must match.
want_rc=$1 regex=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" != "$want_rc" ]; then
  echo "expect.sh: exit code $rc, expected $want_rc" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "expect.sh: output does not match: $regex" >&2
  exit 1
fi
if [ -n "${EXPECT_LINES:-}" ]; then
  n=$(printf '%s\n' "$out" | grep -Ec -- "$regex")
  if [ "$n" != "$EXPECT_LINES" ]; then
    echo "expect.sh: $n lines match, expected $EXPECT_LINES: $regex" >&2
    exit 1
  fi
fi
