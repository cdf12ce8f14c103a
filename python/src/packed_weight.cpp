// PackedWeight (commfuse.hpp): x2 packed once ahead of the matmul operators' calls. The
// Python object keeps x2's TensorRef (and so its array) alive: the ops check that they are
// given that very tensor, by its address.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <new>

#include "bindings.hpp"
#include "interrupt.hpp"
#include "tensor_ref.hpp"

namespace nb = nanobind;

namespace commfuse::python {

void bind_packed_weight(nb::module_& m) {
  nb::class_<PyPackedWeight>(m, "PackedWeight",
                             "x2 packed once ahead of the matmul operators' calls (commfuse."
                             "PackedWeight); keeps x2 alive.")
      .def(
          "__init__",
          [](PyPackedWeight* self, const TensorRef& x2, int64_t rows, bool transposed) {
            // Packing a large x2 takes tens of ms: other Python threads run meanwhile.
            Released release;
            new (self) PyPackedWeight{x2, PackedWeight(transposed ? x2.view.t() : x2.view, rows)};
          },
          nb::arg("x2"), nb::arg("rows"), nb::arg("transposed") = false,
          "Pack x2 (k, n) (transposed: x2 is the (n, k) buffer, packed as its (k, n) view) for "
          "GEMMs of about `rows` rows (0: 256); nothing is packed where this machine's GEMM "
          "reads x2 as given.")
      .def_prop_ro("packed", [](const PyPackedWeight& w) { return w.packed.packed(); })
      .def_prop_ro("packed_bytes", [](const PyPackedWeight& w) { return w.packed.packed_bytes(); })
      .def_prop_ro("description", [](const PyPackedWeight& w) { return w.packed.description(); });
}

}  // namespace commfuse::python
