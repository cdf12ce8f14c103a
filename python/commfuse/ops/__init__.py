"""The fused operators, one module per operator (torch_npu names and argument order).

Each module prepares its arguments through ``commfuse._tensor.Args`` (arrays to
TensorRefs without copies, results allocated or taken from ``out=``) and calls one
``_commfuse`` binding (python/src/op_<name>.cpp), where libcommfuse validates everything.
"""

from .all_gather_base_mm import all_gather_base_mm
from .alltoall_matmul import alltoall_matmul
from .alltoall_quant_matmul import alltoall_quant_matmul
from .mm_all_reduce_base import mm_all_reduce_base
from .mm_reduce_scatter_base import mm_reduce_scatter_base
from .quant_all_reduce import quant_all_reduce
from .quant_reduce_scatter import quant_reduce_scatter
from .quantize import dequantize, quantize

__all__ = ["all_gather_base_mm", "mm_reduce_scatter_base", "mm_all_reduce_base",
           "alltoall_quant_matmul", "alltoall_matmul", "quant_all_reduce",
           "quant_reduce_scatter", "quantize", "dequantize"]
