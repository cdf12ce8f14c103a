// quant_reduce_scatter (SPEC §4): commfuse::quant_reduce_scatter on TensorRefs.
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

void bind_quant_reduce_scatter(nb::module_& m) {
  m.def(
      "quant_reduce_scatter",
      [](const TensorRef& x, const TensorRef& scales, const std::string& group,
         const TensorRef& output, const std::string& reduce_op, uintptr_t stream) {
        const HeldComm held = hold_group("quant_reduce_scatter", group);
        check_output("quant_reduce_scatter", group, "output", output);
        const KeepIfFailedOverMpi keep(held ? &*held : nullptr, {&x, &scales, &output});
        Released release;
        quant_reduce_scatter(x.view, scales.view, group, output.view, reduce_op,
                             reinterpret_cast<void*>(stream));  // CUDA arrays: a cudaStream_t
      },
      nb::arg("x"), nb::arg("scales"), nb::arg("group"), nb::arg("output"), nb::arg("reduce_op"),
      nb::arg("stream") = 0,
      "output (BS/R, H) on rank r = rows [r·BS/R, (r+1)·BS/R) of Σ_s dequant(x_s, scales_s).");
}

}  // namespace commfuse::python
