// The communicators made through the C API, by name. An operator's C call names its group
// (a string), not a handle, and the operators find the communicator by that name with no
// hold on it: a commfuseCommDestroy from another thread (a watchdog's, after its abort)
// then freed it under the call (a use of freed memory). Each C operator call holds its
// group's communicator here for the whole call instead, as the collectives hold their
// handle, and a group destroyed through the C API is refused by name from then on.
#pragma once

#include <commfuse/commfuse.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace commfuse::api {

// Records comm (just made by commfuseCommInit*) under its name.
void register_c_group(const std::shared_ptr<Comm>& comm);
// Marks the communicator named name destroyed (commfuseCommDestroy): holding it fails.
void forget_c_group(const std::string& name);
// The C-made communicator `group` names, kept alive while the result is; null for a group
// the C API did not make (made in C++ or Python: the library's own lookup then applies).
// PARAM_INVALID "<op>: group '<name>' was destroyed (commfuseCommDestroy)" once destroyed.
std::shared_ptr<Comm> hold_c_group(const char* op, std::string_view group);

}  // namespace commfuse::api
