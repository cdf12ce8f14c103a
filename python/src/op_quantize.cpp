// quantize / dequantize (SPEC §5): commfuse::quantize and commfuse::dequantize on
// TensorRefs. Not collective: no group, so an output problem is raised on this process only.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "interrupt.hpp"
#include "tensor_ref.hpp"

namespace nb = nanobind;

namespace commfuse::python {
namespace {

void check_local_output(const char* fn, const char* name, const TensorRef& t) {
  if (t.read_only) throw InvalidArgument(std::string(fn) + ": " + name + " is read-only");
  if (!t.contiguous())
    throw InvalidArgument(std::string(fn) + ": " + name +
                          " must be row-major contiguous (outputs are written densely)");
}

}  // namespace

void bind_quantize(nb::module_& m) {
  m.def(
      "quantize",
      [](const TensorRef& x, const std::string& mode, const TensorRef& q, const TensorRef& scales,
         int64_t group_size) {
        check_local_output("quantize", "q", q);
        check_local_output("quantize", "scales", scales);
        Released release;
        quantize(x.view, mode, q.view, scales.view, group_size);
      },
      nb::arg("x"), nb::arg("mode"), nb::arg("q"), nb::arg("scales"), nb::arg("group_size"),
      "Quantize x into q (its dtype picks the format) and scales (SPEC §5); not collective.");
  m.def(
      "dequantize",
      [](const TensorRef& q, const TensorRef& scales, const std::string& mode,
         const TensorRef& output, int64_t group_size) {
        check_local_output("dequantize", "output", output);
        Released release;
        dequantize(q.view, scales.view, mode, output.view, group_size);
      },
      nb::arg("q"), nb::arg("scales"), nb::arg("mode"), nb::arg("output"), nb::arg("group_size"),
      "output (q's shape) = q · scale, the map the quantized ops apply; not collective.");
}

}  // namespace commfuse::python
