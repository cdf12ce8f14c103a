// The C API's handles (communicators, tensor descriptors, int arrays, packed weights,
// executors): numbers, never addresses. Each kind lives in a table; a handle is handed out
// once, from one counter shared by every kind, so a handle destroyed (or run, for an
// executor), one of another kind, or a pointer the library never returned is not found:
// PARAM_INVALID naming the argument, where a freed address would be a use of freed memory,
// a double free, or a later object that happens to reuse the address.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/error.hpp"

namespace commfuse::api {

// The next handle number of any kind (never 0, never repeated).
uint64_t next_handle_id();

template <typename T>
class HandleTable {
 public:
  // Its handle, of the C type Handle (an opaque struct's pointer).
  template <typename Handle>
  Handle* add(std::shared_ptr<T> object) {
    const uint64_t id = next_handle_id();
    std::lock_guard<std::mutex> lock(mutex_);
    live_.emplace(id, std::move(object));
    return reinterpret_cast<Handle*>(static_cast<uintptr_t>(id));
  }
  // The object behind handle (shared: a destroy from another thread meanwhile cannot free
  // it under the caller); null if handle is not live.
  std::shared_ptr<T> find(const void* handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
    return it != live_.end() ? it->second : nullptr;
  }
  // The same, out of the table: the handle is dead from now on.
  std::shared_ptr<T> take(const void* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == live_.end()) return nullptr;
    std::shared_ptr<T> object = std::move(it->second);
    live_.erase(it);
    return object;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<T>> live_;
};

// Looks handle up in table: PARAM_NULLPTR "<where>: <arg> is null" for null, PARAM_INVALID
// "<where>: <arg> is not a live <kind> (destroyed, or not one that <made_by> returned)" for a
// handle that is not live.
template <typename T>
std::shared_ptr<T> live_handle(const HandleTable<T>& table, const void* handle, const char* where,
                               const char* arg, const char* kind, const char* made_by) {
  CF_CHECK_NOTNULL(handle, where, ": ", arg, " is null");
  std::shared_ptr<T> object = table.find(handle);
  CF_CHECK_ARG(object != nullptr, where, ": ", arg, " is not a live ", kind,
               " (destroyed, or not one that ", made_by, " returned)");
  return object;
}

// Destroys the object behind handle (null: nothing to do): returns it, freed when the
// caller drops it (unless a call in flight still holds it); PARAM_INVALID "<where>: <arg> is
// not a live <kind> (...)" for a handle that is not live (destroyed already, say).
template <typename T>
std::shared_ptr<T> destroy_handle(HandleTable<T>& table, const void* handle, const char* where,
                                  const char* arg, const char* kind, const char* made_by) {
  if (handle == nullptr) return nullptr;
  std::shared_ptr<T> object = table.take(handle);
  CF_CHECK_ARG(object != nullptr, where, ": ", arg, " is not a live ", kind,
               " (destroyed, or not one that ", made_by, " returned)");
  return object;
}

}  // namespace commfuse::api
