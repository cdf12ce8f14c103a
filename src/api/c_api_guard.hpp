// The wall around every C entry point: exceptions become SPEC §0 status codes and the
// message goes to the calling thread's last-error slot. Nothing crosses the C ABI.
#pragma once

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <new>
#include <string>

namespace commfuse::api {

std::string& last_error();

// Sets the last-error message; under memory so short that the message cannot be copied,
// a fixed one that needs no allocation (short-string storage), never an exception.
inline void set_last_error(const char* fn, const char* what, const char* detail) noexcept {
  try {
    std::string& e = last_error();
    e.clear();
    if (fn != nullptr)
      e.append(fn).append(": ").append(what);
    else
      e.append(what);
    if (detail != nullptr) e.append(detail);
  } catch (...) {
    last_error().clear();
    last_error().append("out of memory");  // 13 bytes: stored in place, nothing allocated
  }
}

template <typename F>
commfuseStatus_t guarded(const char* fn, F&& body) {
  try {
    body();
    return COMMFUSE_SUCCESS;
  } catch (const commfuse::Error& e) {
    set_last_error(nullptr, e.what(), nullptr);
    return static_cast<commfuseStatus_t>(e.code());
  } catch (const std::bad_alloc&) {
    set_last_error(fn, "out of memory", nullptr);
    return COMMFUSE_RUNTIME_ERROR;
  } catch (const std::exception& e) {
    set_last_error(fn, "internal error: ", e.what());
    return COMMFUSE_INNER;
  } catch (...) {
    set_last_error(fn, "internal error: unknown exception", nullptr);
    return COMMFUSE_INNER;
  }
}

}  // namespace commfuse::api
