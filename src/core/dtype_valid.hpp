// Whether a value (e.g. a C caller's int) names a commfuse dtype, for the entry points that
// reject unknown values with their own message (commfuse.h: a failure names the function).
#pragma once

#include <commfuse/commfuse.hpp>

namespace commfuse::detail {

bool dtype_is_valid(DType dtype);

}  // namespace commfuse::detail
