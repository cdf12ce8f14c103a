"""Running a test body on W ranks, and the inputs the multi-rank tests share.

Bodies run in forked processes (commfuse.spawn with start_method="fork"): a fork costs
milliseconds where a fresh interpreter costs about a second on the CI machine. That is safe
because the pytest process itself never runs an operator or a collective, so it holds no
OpenMP / oneDNN thread pool for a child to inherit half-initialised. The default
start method ("spawn") is exercised by the examples (test_examples.py).
"""

import ml_dtypes
import numpy as np

import commfuse

WORLD_SIZES = [1, 2, 4]


class DLPackOnly:
    """An array reachable only through DLPack, as a non-numpy tensor library hands it over."""

    def __init__(self, a):
        self._a = a
        self.shape, self.ndim = a.shape, a.ndim

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

FLOAT_DTYPES = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}


def run(fn, nprocs, *args):
    """fn(rank, *args) on nprocs ranks; their return values in rank order."""
    return commfuse.spawn(fn, args=args, nprocs=nprocs, start_method="fork", grace=10.0)


def small_ints(seed, shape):
    """Values in {-1, 0, 1} as float64: products and sums of the test sizes stay small
    integers, exact in float32, float16 and bfloat16, so results compare exactly."""
    return np.random.default_rng(seed).integers(-1, 2, shape).astype(np.float64)
