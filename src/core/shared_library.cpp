#include "core/shared_library.hpp"

#include <dlfcn.h>

namespace commfuse {

SharedLibrary::SharedLibrary(std::initializer_list<std::string> names) {
  std::string errors;
  for (const std::string& n : names) {
    handle_ = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      name_ = n;
      return;
    }
    const char* e = dlerror();
    errors += detail::cat(errors.empty() ? "" : "; ", e != nullptr ? e : n.c_str());
  }
  unavailable_ = detail::cat(names.size() > 0 ? *names.begin() : std::string("library"),
                             " not found (", errors, ")");
}

void* SharedLibrary::address(const char* symbol) const {
  return handle_ != nullptr ? dlsym(handle_, symbol) : nullptr;
}

}  // namespace commfuse
