// The pieces of the `_commfuse` extension, one bind_* function per file. module.cpp calls
// them in order; adding an operator is one new op_<name>.cpp plus one line here and one
// in module.cpp.
#pragma once

#include <nanobind/nanobind.h>

#include <commfuse/commfuse.hpp>

#include "tensor_ref.hpp"

namespace commfuse::python {

// A PackedWeight and the x2 it was packed from (kept alive: the ops compare addresses).
struct PyPackedWeight {
  TensorRef x2;
  PackedWeight packed;
};
// The ops' packed_x2 argument (None: null).
inline const PackedWeight* packed_or_null(const PyPackedWeight* w) {
  return w != nullptr ? &w->packed : nullptr;
}

void bind_errors(nanobind::module_& m);         // errors.cpp: exception translation
void bind_formats(nanobind::module_& m);        // formats.cpp: dtype names, convert, int4 packing
void bind_tensor_ref(nanobind::module_& m);     // tensor_ref.cpp: arrays -> TensorView
void bind_comm(nanobind::module_& m);           // comm.cpp: communicators and collectives
void bind_packed_weight(nanobind::module_& m);  // packed_weight.cpp
void bind_all_gather_matmul(nanobind::module_& m);      // op_all_gather_matmul.cpp
void bind_matmul_reduce_scatter(nanobind::module_& m);  // op_matmul_reduce_scatter.cpp
void bind_matmul_all_reduce(nanobind::module_& m);      // op_matmul_all_reduce.cpp
void bind_alltoall_quant_matmul(nanobind::module_& m);  // op_alltoall_quant_matmul.cpp
void bind_alltoall_matmul(nanobind::module_& m);        // op_alltoall_matmul.cpp
void bind_quant_all_reduce(nanobind::module_& m);       // op_quant_all_reduce.cpp
void bind_quant_reduce_scatter(nanobind::module_& m);   // op_quant_reduce_scatter.cpp
void bind_quantize(nanobind::module_& m);               // op_quantize.cpp: and dequantize

}  // namespace commfuse::python
