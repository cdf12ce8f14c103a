"""The operators on torch CUDA tensors (issue 17): each op called once on CPU tensors and once on
CUDA copies of the same values, in the same ranks, and the results compared bit for bit (the
operands are small integers, so every product and sum is exact and any summation order gives
the same bits); results come back as CUDA tensors on the rank's device. Ranks share GPU 0 (the
GPU machines lent here have one), as the C++ device tests do.

Skipped, saying why, where torch is missing, torch sees no GPU, or this build of commfuse has
no CUDA backend; COMMFUSE_REQUIRE_GPU=1 makes each of those a failure (scripts/gpu-check.sh's
rule). The ranks decide, not the pytest process: CUDA may not be initialized before a fork."""

import os

import numpy as np
import pytest

import commfuse
from ranks import run, small_ints

pytestmark = pytest.mark.torch


def _skip_reason(torch):
    """Why CUDA tensors cannot run here, or None. Called in a rank (after the fork)."""
    if not torch.cuda.is_available():
        return "torch sees no usable CUDA device"
    return None


def _unavailable(reason):
    if os.environ.get("COMMFUSE_REQUIRE_GPU") == "1":
        pytest.fail(f"COMMFUSE_REQUIRE_GPU=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _t(torch, a, name, device):
    return torch.from_numpy(np.ascontiguousarray(a)).to(getattr(torch, name)).to(device)


def _same(torch, got, want, what):
    """got (CUDA) and want (CPU) hold the same bytes."""
    assert got.is_cuda, f"{what}: the result is on {got.device}"
    assert got.dtype == want.dtype and got.shape == want.shape, what
    g = got.cpu().contiguous().view(torch.uint8)
    w = want.contiguous().view(torch.uint8)
    assert torch.equal(g, w), f"{what}: the CUDA result differs from the CPU run"


def _body(rank):
    try:
        import torch
    except ImportError as e:
        return f"torch cannot be imported: {e}"
    reason = _skip_reason(torch)
    if reason is not None:
        return reason
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    with commfuse.init() as comm:
        R = comm.world_size

        def both(fn):
            """fn(device) on the CPU and on the GPU; the GPU run synchronized."""
            cpu_result = fn("cpu")
            try:
                gpu_result = fn(dev)
            except commfuse.InvalidArgument as e:
                if "built without CUDA" in e.message:
                    return None
                raise
            torch.cuda.synchronize()
            return cpu_result, gpu_result

        # all_gather_base_mm, bf16, bias, x2 a transposed view.
        m, k, n = 3, 64, 24
        blocks = [small_ints(10 + s, (m, k)) for s in range(R)]
        w = small_ints(20 + rank, (n, k))
        b = small_ints(30, (n,)) * 2

        def agm(d):
            return commfuse.all_gather_base_mm(
                _t(torch, blocks[rank], "bfloat16", d), _t(torch, w, "bfloat16", d).t(),
                comm.name, R, bias=_t(torch, b, "bfloat16", d))

        pair = both(agm)
        if pair is None:
            return "this build of commfuse has no CUDA backend"
        (out_c, gather_c), (out_g, gather_g) = pair
        _same(torch, out_g, out_c, "all_gather_base_mm output")
        _same(torch, gather_g, gather_c, "all_gather_base_mm gather_out")

        # mm_reduce_scatter_base and mm_all_reduce_base, fp16.
        x1 = small_ints(40 + rank, (2 * R, k))
        ws = small_ints(50 + rank, (n, k))

        def mrs(d):
            return commfuse.mm_reduce_scatter_base(
                _t(torch, x1, "float16", d), _t(torch, ws, "float16", d).t(), comm.name, R)

        def mar(d):
            return commfuse.mm_all_reduce_base(
                _t(torch, x1, "float16", d), _t(torch, ws, "float16", d).t(), comm.name,
                bias=_t(torch, b, "float16", d))

        c, g = both(mrs)
        _same(torch, g, c, "mm_reduce_scatter_base")
        c, g = both(mar)
        _same(torch, g, c, "mm_all_reduce_base")

        # A8W8 all_gather_base_mm: int8 x1 with per-token scales, per-channel x2 scales.
        xs = [small_ints(90 + s, (m, k)) * 5 for s in range(R)]
        w8 = small_ints(95 + rank, (n, k)) * 3

        def a8w8(d):
            s1 = torch.full((m, 1), 0.25, dtype=torch.float32, device=d)
            s2 = torch.arange(1, n + 1, dtype=torch.float32, device=d) * 0.5
            return commfuse.all_gather_base_mm(
                _t(torch, xs[rank], "int8", d), _t(torch, w8, "int8", d).t(), comm.name, R,
                x1_scale=s1, x2_scale=s2)

        (c, gc), (g, gg) = both(a8w8)
        _same(torch, g, c, "all_gather_base_mm A8W8 output")
        _same(torch, gg, gc, "all_gather_base_mm A8W8 gather_out")

        # quant_all_reduce, int8 with per-group scales, bf16 out.
        q = small_ints(80 + rank, (4, 256)) * (rank + 1)

        def qar(d):
            scales = torch.full((4, 2), 0.5, dtype=torch.float32, device=d)
            return commfuse.quant_all_reduce(_t(torch, q, "int8", d), scales, comm.name,
                                             output_dtype=torch.bfloat16)

        c, g = both(qar)
        _same(torch, g, c, "quant_all_reduce")

        # alltoall_matmul (bf16) and alltoall_quant_matmul A16W8 (int8 x2 (k, n), fp32 scales).
        bs, h = 2 * R, 64
        xa = small_ints(60 + rank, (bs, h))
        wa = small_ints(70, (h * R, n))
        wq = small_ints(75, (h * R, n)) * 7

        def a2a(d):
            return commfuse.alltoall_matmul(
                _t(torch, xa, "bfloat16", d), _t(torch, wa, "bfloat16", d), comm.name, R,
                return_alltoall_out=True)

        (c, ac), (g, ag) = both(a2a)
        _same(torch, g, c, "alltoall_matmul output")
        _same(torch, ag, ac, "alltoall_matmul alltoall_out")

        def a2aq(d):
            scale = torch.arange(1, n + 1, dtype=torch.float32, device=d) * 0.125
            return commfuse.alltoall_quant_matmul(
                _t(torch, xa, "bfloat16", d), _t(torch, wq, "int8", d), scale, comm.name, R)

        (c, _), (g, _) = both(a2aq)
        _same(torch, g, c, "alltoall_quant_matmul A16W8")
        return True


@pytest.mark.parametrize("world_size", [1, 2])
def test_operators_on_cuda_tensors_match_the_cpu(world_size):
    results = run(_body, world_size)
    if results == [True] * world_size:
        return
    reasons = {r for r in results if isinstance(r, str)}
    assert len(reasons) == 1 and len(results) == world_size, results
    _unavailable(reasons.pop())
