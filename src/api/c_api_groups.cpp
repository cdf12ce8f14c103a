#include "api/c_api_groups.hpp"

#include <mutex>
#include <unordered_map>

#include "core/error.hpp"

namespace commfuse::api {
namespace {

struct Entry {
  std::weak_ptr<Comm> comm;
  bool destroyed = false;
};

std::mutex& groups_mutex() {
  static auto* const mu = new std::mutex;
  return *mu;
}

// Names are unique per process (random), so an entry is never reused; one whose
// communicator is gone is dropped when the next one is added.
std::unordered_map<std::string, Entry>& groups() {
  static auto* const map = new std::unordered_map<std::string, Entry>;
  return *map;
}

}  // namespace

void register_c_group(const std::shared_ptr<Comm>& comm) {
  const std::lock_guard<std::mutex> lock(groups_mutex());
  std::erase_if(groups(), [](const auto& kv) { return kv.second.comm.expired(); });
  groups()[comm->name()] = Entry{comm, false};
}

void forget_c_group(const std::string& name) {
  const std::lock_guard<std::mutex> lock(groups_mutex());
  const auto it = groups().find(name);
  if (it != groups().end()) it->second.destroyed = true;
}

std::shared_ptr<Comm> hold_c_group(const char* op, std::string_view group) {
  const std::lock_guard<std::mutex> lock(groups_mutex());
  const auto it = groups().find(std::string(group));
  if (it == groups().end()) return nullptr;
  std::shared_ptr<Comm> comm = it->second.comm.lock();
  CF_CHECK_ARG(comm != nullptr && !it->second.destroyed, op, ": group '", group,
               "' was destroyed (commfuseCommDestroy)");
  return comm;
}

}  // namespace commfuse::api
