#!/usr/bin/env bash
# Installs what commfuse needs to build, test and run. Idempotent: a fast no-op when
# everything is present. Debian packages via apt-get, Python packages via pip for the
# machine's default python3 (or $PYTHON).
set -euo pipefail

PYTHON=${PYTHON:-python3}
APT_PACKAGES=(
  cmake g++ make pkg-config
  libdnnl-dev                      # oneDNN: CPU GEMMs
  libopenblas0-pthread             # OpenBLAS: the fp32 GEMM where it is faster (loaded at run time)
  libopenmpi-dev openmpi-bin       # MPI transport for multi-machine runs
  libgtest-dev libgmock-dev        # unit tests
  libbenchmark-dev                 # micro-benchmarks in bench/
  python3-venv                     # make test's wheel check installs into a fresh venv
)
# FUZZ=1 (make fuzz, make fuzz-smoke): clang with libFuzzer and clang's OpenMP runtime.
if [[ ${FUZZ:-0} == 1 ]]; then
  APT_PACKAGES+=(clang libclang-rt-14-dev libomp-dev)
fi
PIP_PACKAGES=(nanobind scikit-build-core numpy ml_dtypes pytest)
PIP_MODULES=(nanobind scikit_build_core numpy ml_dtypes pytest)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: apt-get install ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

check_py="import importlib.util, sys; m=[n for n in sys.argv[1:] if importlib.util.find_spec(n) is None]; print(' '.join(m))"
py_missing=$("$PYTHON" -c "$check_py" "${PIP_MODULES[@]}")
if [[ -n "$py_missing" ]]; then
  echo "install-deps: pip install ${PIP_PACKAGES[*]} (missing: $py_missing)"
  "$PYTHON" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
fi
echo "install-deps: all dependencies present"
