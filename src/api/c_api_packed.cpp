// C entry points of commfuse::PackedWeight (commfuse.h): create, query, attach to an x2
// descriptor, destroy. A packed weight attached to a descriptor stays alive while the
// descriptor, or an executor planned from it, holds it, whenever its handle is destroyed.
#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <memory>

#include "api/c_api_executor.hpp"
#include "api/c_api_guard.hpp"
#include "api/c_api_handles.hpp"
#include "core/error.hpp"

struct commfusePackedWeight;  // the handle's C type; the table holds the PackedWeight itself

namespace {

using commfuse::api::guarded;

commfuse::api::HandleTable<const commfuse::PackedWeight>& packed_weights() {
  static auto* const table = new commfuse::api::HandleTable<const commfuse::PackedWeight>;
  return *table;
}

std::shared_ptr<const commfuse::PackedWeight> live_packed(const commfusePackedWeight_t* packed,
                                                          const char* fn) {
  return commfuse::api::live_handle(packed_weights(), packed, fn, "packed", "packed weight",
                                    "commfuseCreatePackedWeight");
}

}  // namespace

commfusePackedWeight_t* commfuseCreatePackedWeight(const commfuseTensor_t* x2, int64_t rows) {
  constexpr const char* fn = "commfuseCreatePackedWeight";
  commfusePackedWeight_t* out = nullptr;
  guarded(fn, [&] {
    const auto d = commfuse::api::live_tensor(x2, fn, "x2");
    out = packed_weights().add<commfusePackedWeight_t>(
        std::make_shared<const commfuse::PackedWeight>(d->view, rows));
  });
  return out;
}

int commfusePackedWeightIsPacked(const commfusePackedWeight_t* packed) {
  int answer = -1;  // also where the table's first use cannot allocate: nothing crosses C
  guarded("commfusePackedWeightIsPacked", [&] {
    const auto p = packed_weights().find(packed);
    if (p != nullptr) answer = p->packed() ? 1 : 0;
  });
  return answer;
}

commfuseStatus_t commfuseDestroyPackedWeight(const commfusePackedWeight_t* packed) {
  return guarded("commfuseDestroyPackedWeight", [&] {
    commfuse::api::destroy_handle(packed_weights(), packed, "commfuseDestroyPackedWeight", "packed",
                                  "packed weight", "commfuseCreatePackedWeight");
  });
}

commfuseStatus_t commfuseSetTensorPackedWeight(commfuseTensor_t* x2,
                                               const commfusePackedWeight_t* packed) {
  constexpr const char* fn = "commfuseSetTensorPackedWeight";
  return guarded(fn, [&] {
    const auto d = commfuse::api::live_tensor(x2, fn, "x2");
    d->packed = packed != nullptr ? live_packed(packed, fn) : nullptr;
  });
}
