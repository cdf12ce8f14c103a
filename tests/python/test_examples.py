"""The examples in examples/ run as a user runs them (python3 examples/X.py, default
"spawn" start method) and verify their own results."""

import os
import pathlib
import subprocess
import sys

import pytest

import commfuse

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example(name):
    env = dict(os.environ)
    # The commfuse this test imported (a build tree or an installed package).
    package_root = str(pathlib.Path(commfuse.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH")] if p)
    for var in ["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]:
        env.pop(var, None)
    proc = subprocess.run([sys.executable, str(EXAMPLES / name)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(PASS)" in proc.stdout.splitlines()[-1], proc.stdout
