"""The fused operators, one module per operator (torch_npu names and argument order).

Each module prepares its arguments through ``commfuse._tensor.Args`` (arrays to
TensorRefs without copies, results allocated or taken from ``out=``) and calls one
``_commfuse`` binding (python/src/op_<name>.cpp), where libcommfuse validates everything.
"""

from .all_gather_base_mm import all_gather_base_mm
from .mm_all_reduce_base import mm_all_reduce_base
from .mm_reduce_scatter_base import mm_reduce_scatter_base

__all__ = ["all_gather_base_mm", "mm_reduce_scatter_base", "mm_all_reduce_base"]
