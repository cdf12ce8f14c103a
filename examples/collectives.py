"""Communicator and collectives on 4 local ranks (commfuse.spawn + commfuse.init).

    python3 examples/collectives.py
"""

import sys

import numpy as np

import commfuse


def worker(rank):
    with commfuse.init() as comm:  # RANK, WORLD_SIZE, MASTER_ADDR/PORT set by spawn
        R = comm.world_size
        x = np.full(4, rank + 1, np.float32)
        checks = {
            "all_reduce": np.array_equal(comm.all_reduce(x), np.full(4, R * (R + 1) / 2)),
            "all_gather": np.array_equal(comm.all_gather(x), np.repeat(np.arange(1, R + 1), 4)),
            "reduce_scatter": np.array_equal(comm.reduce_scatter(np.ones(R * 2, np.int32)),
                                             np.full(2, R)),
            "all_to_all": np.array_equal(comm.all_to_all(np.arange(R, dtype=np.int64) + 10 * rank),
                                         np.arange(R) * 10 + rank),
            "broadcast": np.array_equal(comm.broadcast(np.full(3, rank, np.float16), root=R - 1),
                                        np.full(3, R - 1)),
        }
        comm.barrier()
        return checks


if __name__ == "__main__":
    results = commfuse.spawn(worker, nprocs=4)
    for name in results[0]:
        ok = all(r[name] for r in results)
        print(f"{name:15s} {'PASS' if ok else 'FAIL'}")
    passed = all(all(r.values()) for r in results)
    print(f"collectives: {'verified against numpy (PASS)' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)
