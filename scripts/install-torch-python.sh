#!/usr/bin/env bash
# Prints the path of a Python interpreter that has torch, numpy, ml_dtypes and pytest and
# can load the commfuse extension built for $PYTHON, installing one if needed. Used by
# `make test-python` for the torch tests. Messages go to stderr; stdout is the path only.
#
# In order:
#   1. $TORCH_PYTHON, when set: used as is (it must have torch).
#   2. $PYTHON (default python3), when it already has torch.
#   3. A venv in $TORCH_VENV (default build/torch-venv) over Debian's /usr/bin/python3
#      with --system-site-packages: Debian's CPU-only torch (apt python3-torch, 1.13, with
#      Debian's numpy 1.24) plus ml_dtypes and pytest from pip, pinned to versions that
#      work with that numpy (PyPI's torch wheels pull gigabytes of GPU libraries).
#      Created once; later runs only check that it imports torch (a few seconds).
# Fails (exit 1) when none can be had, e.g. not Debian, or /usr/bin/python3 is not the
# same CPython minor version as $PYTHON (the extension is built for $PYTHON's ABI).
set -euo pipefail

PYTHON=${PYTHON:-python3}
TORCH_VENV=${TORCH_VENV:-build/torch-venv}
SYSTEM_PYTHON=/usr/bin/python3
# libopenblas0-pthread: Debian's torch multiplies fp32 through the system BLAS; without it
# that is the netlib reference BLAS, far slower than what a PyTorch user has, and
# bench/torch_baseline.py would compare against a straw man.
APT_PACKAGES=(python3-torch python3-venv libopenblas0-pthread)
# ml_dtypes 0.5.4: the newest that works with numpy 1.x (0.6 requires numpy>=2), and has
# float8_e8m0fnu (0.5+).
PIP_PACKAGES=(ml_dtypes==0.5.4 pytest==8.4.2)
MODULES="torch numpy ml_dtypes pytest"

log() { echo "install-torch-python: $*" >&2; }
die() { log "$*"; exit 1; }

# has_modules PY: PY imports every module in $MODULES.
has_modules() {
  "$1" -c "import importlib, sys
for m in sys.argv[1:]: importlib.import_module(m)" $MODULES >/dev/null 2>&1
}

abi_of() { "$1" -c 'import sys; print(sys.implementation.cache_tag)'; }

if [[ -n "${TORCH_PYTHON:-}" ]]; then
  has_modules "$TORCH_PYTHON" || die "TORCH_PYTHON=$TORCH_PYTHON cannot import $MODULES"
  [[ $(abi_of "$TORCH_PYTHON") == "$(abi_of "$PYTHON")" ]] || die "TORCH_PYTHON=$TORCH_PYTHON \
is not $(abi_of "$PYTHON") like $PYTHON, so it cannot load the extension built for $PYTHON"
  command -v "$TORCH_PYTHON"
  exit 0
fi

if has_modules "$PYTHON"; then
  command -v "$PYTHON"
  exit 0
fi

venv_python=$TORCH_VENV/bin/python
if [[ -x $venv_python ]] && has_modules "$venv_python"; then
  echo "$(cd "$(dirname "$venv_python")" && pwd)/python"
  exit 0
fi

want_abi=$(abi_of "$PYTHON")
[[ -x $SYSTEM_PYTHON ]] || die "$PYTHON has no torch and there is no $SYSTEM_PYTHON; \
install torch for $PYTHON or set TORCH_PYTHON"
command -v apt-get >/dev/null || die "$PYTHON has no torch and there is no apt-get; \
install torch for $PYTHON or set TORCH_PYTHON"
system_abi=$(abi_of "$SYSTEM_PYTHON")
[[ $system_abi == "$want_abi" ]] || die "$PYTHON ($want_abi) has no torch and \
$SYSTEM_PYTHON is $system_abi, which cannot load an extension built for $want_abi; \
install torch for $PYTHON or set TORCH_PYTHON"

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]} (CPU-only torch for $SYSTEM_PYTHON, about 600 MB)"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  # Lock timeout: wait for another apt-get (e.g. a parallel make in another tree).
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
fi

log "venv $TORCH_VENV over $SYSTEM_PYTHON (Debian's torch and numpy) + pip ${PIP_PACKAGES[*]}"
rm -rf "$TORCH_VENV"
"$SYSTEM_PYTHON" -m venv --system-site-packages "$TORCH_VENV"
# Keep Debian's numpy: torch 1.13 is built against numpy 1.x, so pip must not upgrade it.
numpy_version=$("$venv_python" -c 'import numpy; print(numpy.__version__)')
constraints=$TORCH_VENV/constraints.txt
echo "numpy==$numpy_version" >"$constraints"
"$venv_python" -m pip install -q --disable-pip-version-check -c "$constraints" \
  "${PIP_PACKAGES[@]}" >&2
has_modules "$venv_python" || die "$venv_python still cannot import $MODULES"
echo "$(cd "$(dirname "$venv_python")" && pwd)/python"
