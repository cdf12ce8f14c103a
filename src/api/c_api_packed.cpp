// C entry points of commfuse::PackedWeight (commfuse.h): create, query, attach to an x2
// descriptor, destroy.
#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <memory>

#include "api/c_api_executor.hpp"
#include "api/c_api_guard.hpp"
#include "core/error.hpp"

struct commfusePackedWeight {
  commfuse::PackedWeight packed;
};

using commfuse::api::guarded;

commfusePackedWeight_t* commfuseCreatePackedWeight(const commfuseTensor_t* x2, int64_t rows) {
  commfusePackedWeight_t* out = nullptr;
  guarded("commfuseCreatePackedWeight", [&] {
    CF_CHECK_NOTNULL(x2, "commfuseCreatePackedWeight: x2 is null");
    out = new commfusePackedWeight{commfuse::PackedWeight(x2->view, rows)};
  });
  return out;
}

int commfusePackedWeightIsPacked(const commfusePackedWeight_t* packed) {
  return packed == nullptr ? -1 : packed->packed.packed() ? 1 : 0;
}

commfuseStatus_t commfuseDestroyPackedWeight(const commfusePackedWeight_t* packed) {
  return guarded("commfuseDestroyPackedWeight", [&] { delete packed; });
}

commfuseStatus_t commfuseSetTensorPackedWeight(commfuseTensor_t* x2,
                                               const commfusePackedWeight_t* packed) {
  return guarded("commfuseSetTensorPackedWeight", [&] {
    CF_CHECK_NOTNULL(x2, "commfuseSetTensorPackedWeight: x2 is null");
    x2->packed = packed != nullptr ? &packed->packed : nullptr;
  });
}
