// Whether a value (e.g. a C caller's int) names a commfuse dtype, for the entry points that
// reject unknown values with their own message (commfuse.h: a failure names the function).
#pragma once

#include <commfuse/commfuse.hpp>

namespace commfuse::detail {

bool dtype_is_valid(DType dtype);

// Whether `count` elements of dtype take at most PTRDIFF_MAX bytes: the most any buffer can
// hold. A larger count cannot describe real memory; the byte sizes computed from it would wrap.
bool fits_a_buffer(DType dtype, size_t count);

}  // namespace commfuse::detail
