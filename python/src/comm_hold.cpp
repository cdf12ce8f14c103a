#include "comm_hold.hpp"

#include <nanobind/nanobind.h>

#include <map>
#include <mutex>

#include "core/error.hpp"

namespace commfuse::python {
namespace {

struct Entry {
  std::weak_ptr<Comm> comm;
  bool destroyed = false;
};

std::mutex g_mutex;
// Destroyed entries stay (a name each): a call naming one is told so, not "unknown group".
std::map<std::string, Entry, std::less<>> g_comms;

}  // namespace

void register_comm(const std::shared_ptr<Comm>& comm) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_comms[comm->name()] = Entry{comm, false};
}

void forget_comm(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = g_comms.find(name);
  if (it != g_comms.end()) it->second.destroyed = true;
}

HeldComm::~HeldComm() {
  if (comm_ == nullptr || comm_.use_count() > 1 || !PyGILState_Check()) return;
  nanobind::gil_scoped_release release;
  comm_.reset();
}

HeldComm hold_group(const char* op, std::string_view group) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = g_comms.find(group);
  if (it == g_comms.end()) return HeldComm();
  std::shared_ptr<Comm> comm = it->second.comm.lock();
  CF_CHECK_ARG(!it->second.destroyed && comm != nullptr, op, ": group '", group,
               "': the communicator was destroyed");
  return HeldComm(std::move(comm));
}

}  // namespace commfuse::python
