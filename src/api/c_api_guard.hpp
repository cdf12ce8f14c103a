// The wall around every C entry point: exceptions become SPEC §0 status codes and the
// message goes to the calling thread's last-error slot. Nothing crosses the C ABI.
#pragma once

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <new>
#include <string>

namespace commfuse::api {

std::string& last_error();

template <typename F>
commfuseStatus_t guarded(const char* fn, F&& body) {
  try {
    body();
    return COMMFUSE_SUCCESS;
  } catch (const commfuse::Error& e) {
    last_error() = e.what();
    return static_cast<commfuseStatus_t>(e.code());
  } catch (const std::bad_alloc&) {
    last_error() = std::string(fn) + ": out of memory";
    return COMMFUSE_RUNTIME_ERROR;
  } catch (const std::exception& e) {
    last_error() = std::string(fn) + ": internal error: " + e.what();
    return COMMFUSE_INNER;
  } catch (...) {
    last_error() = std::string(fn) + ": internal error: unknown exception";
    return COMMFUSE_INNER;
  }
}

}  // namespace commfuse::api
