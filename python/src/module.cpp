// commfuse._commfuse: the thin nanobind layer under the `commfuse` Python package.
//
// Shaped arrays cross this boundary as TensorRef objects (tensor_ref.cpp), made by
// commfuse/_tensor.py from numpy arrays (ml_dtypes formats as same-width unsigned views)
// or DLPack tensors, so numpy's dtype zoo stays on the Python side and every rule about
// shapes, dtypes and values stays in libcommfuse. Every call that waits on peers or
// computes releases the GIL, and a signal handler that raises meanwhile (Ctrl-C) ends its
// waits (interrupt.hpp).
#include <commfuse/commfuse.hpp>

#include "bindings.hpp"
#include "interrupt.hpp"
#include "keep_alive.hpp"

namespace nb = nanobind;

NB_MODULE(_commfuse, m) {
  m.doc() = "Low-level bindings of libcommfuse; use the `commfuse` package instead.";
  using namespace commfuse::python;
  bind_errors(m);
  bind_formats(m);
  bind_tensor_ref(m);
  bind_comm(m);
  bind_packed_weight(m);
  bind_all_gather_matmul(m);
  bind_matmul_reduce_scatter(m);
  bind_matmul_all_reduce(m);
  bind_alltoall_quant_matmul(m);
  bind_alltoall_matmul(m);
  bind_quant_all_reduce(m);
  bind_quant_reduce_scatter(m);
  bind_quantize(m);
  install_interrupt_check();  // Ctrl-C ends a call's wait (interrupt.hpp)
  m.def("_arrays_kept_after_failures", &arrays_kept_after_failures,
        "How many arrays the bindings keep alive after calls that failed over MPI "
        "(keep_alive.hpp); for the tests.");
}
