// The one counter every kind of C handle is numbered from.
#include "api/c_api_handles.hpp"

#include <atomic>

namespace commfuse::api {

uint64_t next_handle_id() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace commfuse::api
