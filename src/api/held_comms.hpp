// The communicators a binding made and shares (the C API's handles, the Python package's
// Comm objects), by name. An operator call names its group (a string), not a handle, and
// the operators find the communicator by that name with no hold on it: a destroy from
// another thread (a watchdog's, after its abort) then freed it under the call (a use of
// freed memory, in C and, before, in Python). So each binding's operator call holds its
// group's communicator from here for the whole call, and a destroyed one is refused by name.
#pragma once

#include <commfuse/commfuse.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace commfuse::api {

// Records comm (just made by a binding) under its name.
void register_held_comm(const std::shared_ptr<Comm>& comm);
// Marks the communicator named name destroyed by its binding: finding it says so from now
// on (the entry stays, a name each, so that a call naming it is told, not "unknown group").
void forget_held_comm(const std::string& name);

struct HeldLookup {
  std::shared_ptr<Comm> comm;  // alive while this is: hold it for the call
  bool destroyed = false;      // a binding destroyed it (each binding says so its own way)
};
// The communicator group names, where a binding made it; neither set where none did (made
// in C++: the library's own lookup applies).
HeldLookup find_held_comm(std::string_view group);

}  // namespace commfuse::api
