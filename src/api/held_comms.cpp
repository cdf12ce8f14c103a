#include "api/held_comms.hpp"

#include <map>
#include <mutex>

namespace commfuse::api {
namespace {

struct Entry {
  std::weak_ptr<Comm> comm;
  bool destroyed = false;
};

std::mutex& held_mutex() {
  static auto* const mu = new std::mutex;
  return *mu;
}

std::map<std::string, Entry, std::less<>>& held() {
  static auto* const map = new std::map<std::string, Entry, std::less<>>;
  return *map;
}

}  // namespace

void register_held_comm(const std::shared_ptr<Comm>& comm) {
  const std::lock_guard<std::mutex> lock(held_mutex());
  held()[comm->name()] = Entry{comm, false};
}

void forget_held_comm(const std::string& name) {
  const std::lock_guard<std::mutex> lock(held_mutex());
  const auto it = held().find(name);
  if (it != held().end()) it->second.destroyed = true;
}

HeldLookup find_held_comm(std::string_view group) {
  const std::lock_guard<std::mutex> lock(held_mutex());
  const auto it = held().find(group);
  if (it == held().end()) return {};
  std::shared_ptr<Comm> comm = it->second.comm.lock();
  const bool destroyed = it->second.destroyed || comm == nullptr;
  return {destroyed ? nullptr : std::move(comm), destroyed};
}

}  // namespace commfuse::api
