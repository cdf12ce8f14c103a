"""torch_npu's npu_all_gather_base_mm example, on CPU with commfuse.

The CANN documentation's example (8 ranks, global x1 [128, 512], x2 [512, 64], float16)
with torch / torch_npu / torch.distributed replaced by commfuse and numpy; each rank
checks its result against a float64 numpy reference.

    python3 examples/all_gather_base_mm.py
"""

import sys

import numpy as np

import commfuse


def run_all_gather_base_mm(rank, world_size, master_ip, master_port, x1_shape, x2_shape, dtype):
    init_method = "tcp://" + master_ip + ":" + master_port
    with commfuse.init(rank, world_size, init_method=init_method) as comm:
        hcomm_info = comm.name  # torch_npu: default_pg._get_backend(...).get_hccl_comm_name(rank)

        single_shape = [x1_shape[0] // world_size, x1_shape[1]]
        # Every rank draws every rank's block from the same seeds, so it can build the
        # global reference itself.
        blocks = [np.random.default_rng(s).standard_normal(single_shape).astype(dtype)
                  for s in range(world_size)]
        input_ = blocks[rank]
        weight = np.random.default_rng(1000).standard_normal(x2_shape).astype(dtype)
        output, gather_out = commfuse.all_gather_base_mm(input_, weight, hcomm_info, world_size)

        want_gather = np.concatenate(blocks)
        want = want_gather.astype(np.float64) @ weight.astype(np.float64)
        # fp32 accumulation, one rounding to float16: within half an fp16 ulp of the exact
        # result plus the fp32 accumulation error (k * 2^-24 relative to sum |a*b|).
        magnitude = np.abs(want_gather.astype(np.float64)) @ np.abs(weight.astype(np.float64))
        bound = np.abs(want) * 2.0**-11 + magnitude * x1_shape[1] * 2.0**-24 + 2.0**-24
        err = np.abs(output.astype(np.float64) - want)
        ok = np.array_equal(gather_out, want_gather) and bool(np.all(err <= bound))
        return ok, float(err.max()), output.shape, gather_out.shape


if __name__ == "__main__":
    worksize = 8
    master_ip = "127.0.0.1"
    master_port = str(commfuse.free_port())  # the seed hard-codes '50001'
    x1_shape = [128, 512]
    x2_shape = [512, 64]
    dtype = np.float16

    results = commfuse.spawn(run_all_gather_base_mm,
                             args=(worksize, master_ip, master_port, x1_shape, x2_shape, dtype),
                             nprocs=worksize)
    for rank, (ok, err, out_shape, gather_shape) in enumerate(results):
        print(f"rank {rank}: output {list(out_shape)} gather_out {list(gather_shape)} "
              f"max |err| vs float64 {err:.4g}: {'PASS' if ok else 'FAIL'}")
    passed = all(r[0] for r in results)
    print(f"all_gather_base_mm: world size {worksize}, x1 {x1_shape}, x2 {x2_shape}, float16: "
          f"{'verified against numpy (PASS)' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)
