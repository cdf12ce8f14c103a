// alltoall_quant_matmul (SPEC §3): commfuse::alltoall_quant_matmul on TensorRefs. Every
// argument rule is the C++ op's; only the outputs' writability and density are checked here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "bindings.hpp"
#include "comm_hold.hpp"
#include "interrupt.hpp"
#include "keep_alive.hpp"
#include "tensor_ref.hpp"

namespace nb = nanobind;

namespace commfuse::python {

void bind_alltoall_quant_matmul(nb::module_& m) {
  m.def(
      "alltoall_quant_matmul",
      [](const TensorRef& x1, const TensorRef& x2, const TensorRef& x2_scale,
         const std::string& group, const TensorRef& output, const TensorRef* all_to_all_out,
         const TensorRef* bias, const TensorRef* x1_scale, int64_t x1_quant_mode,
         int64_t x2_quant_mode, bool transpose_x2, uintptr_t stream,
         const PyPackedWeight* packed_x2) {
        const HeldComm held = hold_group("alltoall_quant_matmul", group);
        constexpr const char* kOp = "alltoall_quant_matmul";
        check_output(kOp, group, "output", output);
        if (all_to_all_out != nullptr)
          check_output(kOp, group, "alltoAllOutOptional", *all_to_all_out);
        AlltoAllQuantMatmulOptions options;
        if (bias != nullptr) options.bias = bias->view;
        if (x1_scale != nullptr) options.x1_scale = x1_scale->view;
        options.x1_quant_mode = x1_quant_mode;
        options.x2_quant_mode = x2_quant_mode;
        options.transpose_x2 = transpose_x2;
        options.stream = reinterpret_cast<void*>(stream);  // CUDA arrays: a cudaStream_t
        options.packed_x2 = packed_or_null(packed_x2);
        const KeepIfFailedOverMpi keep(
            held ? &*held : nullptr, {&x1, &x2, &x2_scale, &output, all_to_all_out, bias, x1_scale,
                                      packed_x2 != nullptr ? &packed_x2->x2 : nullptr});
        Released release;
        alltoall_quant_matmul(x1.view, x2.view, x2_scale.view, group, output.view,
                              view_or_absent(all_to_all_out), options);
      },
      nb::arg("x1"), nb::arg("x2"), nb::arg("x2_scale"), nb::arg("group"), nb::arg("output"),
      nb::arg("all_to_all_out").none(), nb::arg("bias").none(), nb::arg("x1_scale").none(),
      nb::arg("x1_quant_mode"), nb::arg("x2_quant_mode"), nb::arg("transpose_x2"),
      nb::arg("stream") = 0, nb::arg("packed_x2").none() = nb::none(),
      "output (BS/R, N) = quantized permuted @ x2, dequantized with x2_scale (and the "
      "per-token scales) plus bias; all_to_all_out (BS/R, R*H) = permuted.");
}

}  // namespace commfuse::python
