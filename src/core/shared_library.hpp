// A shared library loaded at run time (dlopen), for the optional dependencies commfuse uses
// where they are installed (cuBLASLt, NCCL): libcommfuse then loads without them, and only
// a call that needs one says why it cannot be used. The library stays loaded for the
// process's life (its entry points are cached by the callers).
#pragma once

#include <initializer_list>
#include <string>

#include "core/error.hpp"

namespace commfuse {

class SharedLibrary {
 public:
  // The first of `names` that loads (RTLD_NOW | RTLD_LOCAL); none: unavailable() says why.
  explicit SharedLibrary(std::initializer_list<std::string> names);

  const std::string& name() const { return name_; }
  // Empty while the library and every entry point resolved so far are there.
  const std::string& unavailable() const { return unavailable_; }
  // Resolves `symbol` into fn; a missing one makes the library unavailable ("<name> lacks
  // <symbol>"). Returns whether it resolved.
  template <typename F>
  bool resolve(F& fn, const char* symbol) {
    fn = reinterpret_cast<F>(address(symbol));
    if (fn == nullptr && unavailable_.empty()) unavailable_ = detail::cat(name_, " lacks ", symbol);
    return fn != nullptr;
  }
  // Marks it unavailable for another reason (a failed initialization call).
  void fail(std::string why) {
    if (unavailable_.empty()) unavailable_ = std::move(why);
  }

 private:
  void* handle_ = nullptr;
  std::string name_, unavailable_;
  void* address(const char* symbol) const;
};

}  // namespace commfuse
