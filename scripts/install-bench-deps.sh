#!/usr/bin/env bash
# Prints the path of a Python interpreter for `make bench`: torch (the PyTorch baseline),
# matplotlib (the report's plots), numpy, and the commfuse extension's ABI — installing
# what is missing. Also makes sure `ip` and `tc` exist for the simulated network (bench
# /netns.sh; without them that section is skipped, saying so). Messages go to stderr;
# stdout is the path only.
#
# The interpreter is scripts/install-torch-python.sh's (a venv over Debian's python3-torch
# with the system site packages, or $TORCH_PYTHON / $PYTHON when they have torch);
# matplotlib comes from Debian (python3-matplotlib, built for Debian's numpy, which torch
# 1.13 needs) and, where that is not visible to the interpreter, from pip.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

log() { echo "install-bench-deps: $*" >&2; }
SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"

apt_install() {
  command -v apt-get >/dev/null || return 1
  log "apt-get install $*"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "$@" >/dev/null
}

py=$("$here/install-torch-python.sh")
if ! "$py" -c "import matplotlib" 2>/dev/null; then
  apt_install python3-matplotlib || true
  if ! "$py" -c "import matplotlib" 2>/dev/null; then
    log "pip install matplotlib into $py"
    "$py" -m pip install -q --disable-pip-version-check matplotlib >&2
  fi
  "$py" -c "import matplotlib" || { log "$py still cannot import matplotlib"; exit 1; }
fi
if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  apt_install iproute2 || log "no iproute2: the simulated-network section will be skipped"
fi
echo "$py"
