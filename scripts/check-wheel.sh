#!/usr/bin/env bash
# `pip install .`, as README promises, checked end to end: builds the wheel from this tree
# (scikit-build-core; no build isolation: scripts/install-deps.sh installed its build
# requirements, and a fresh machine may reach no index for them), installs it into a fresh
# venv over $PYTHON's packages (numpy, ml_dtypes), and runs two ranks from it outside the
# tree. The installed package must load its own libcommfuse, not this tree's build/.
set -euo pipefail
PYTHON=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "check-wheel: pip wheel $root"
"$PYTHON" -m pip wheel "$root" -w "$work/wheel" --no-deps --no-build-isolation -q \
  --disable-pip-version-check
"$PYTHON" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-deps --disable-pip-version-check \
  "$work"/wheel/commfuse-*.whl
# A file, not stdin: the ranks (multiprocessing's spawn) import the main module again.
cat > "$work/smoke.py" <<'PY'
import os

import numpy as np

import commfuse

venv = os.path.realpath(os.environ["CHECK_WHEEL_VENV"])
pkg = os.path.realpath(os.path.dirname(commfuse.__file__))
assert pkg.startswith(venv + os.sep), f"imported {pkg}, not the wheel's (under {venv})"


def body(rank):
    with commfuse.init() as comm:
        y = comm.all_reduce(np.full(4, rank + 1, np.float32))
        out, gathered = commfuse.all_gather_base_mm(
            np.full((2, 8), rank + 1, np.float32), np.ones((8, 4), np.float32), comm, 2)
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "libcommfuse" in line}
        return y.tolist(), out[:, 0].tolist(), gathered.shape, sorted(libs)


if __name__ == "__main__":
    for rank, (y, col, gathered, libs) in enumerate(commfuse.spawn(body, nprocs=2)):
        assert y == [3.0] * 4, (rank, y)
        assert col == [8.0, 8.0, 16.0, 16.0], (rank, col)  # rank 0's rows, then rank 1's
        assert gathered == (4, 8), (rank, gathered)
        assert libs and all(os.path.realpath(p).startswith(venv + os.sep) for p in libs), libs
    print(f"check-wheel: OK: the wheel's package and libcommfuse ({pkg}) ran 2 ranks")
PY
cd "$work"  # not the source tree, whose python/ would shadow the installed package
env -u PYTHONPATH CHECK_WHEEL_VENV="$work/venv" "$work/venv/bin/python" smoke.py
