// Whether a value (e.g. a C caller's int) names a commfuse dtype, for the entry points that
// reject unknown values with their own message (commfuse.h: a failure names the function).
#pragma once

#include <commfuse/commfuse.hpp>

#include <string>
#include <string_view>

namespace commfuse::detail {

bool dtype_is_valid(DType dtype);

// The refusal of a count no buffer can hold, or "" where `blocks` blocks of `count` elements
// take at most PTRDIFF_MAX bytes, the most any buffer can hold (a larger count cannot describe
// real memory; the byte sizes computed from it would wrap): "<what>[(rank R)]: count N is too
// large: [B blocks of that many ]<dtype> elements exceed the largest buffer (PTRDIFF_MAX
// bytes)", with "(rank R)" where rank >= 0. One wording for every entry point that takes a
// count; each raises it its own way (a collective tells its peers, convert throws). Nothing
// is formatted for a count that fits: collectives call it on every call.
std::string count_too_large(std::string_view what, size_t count, DType dtype, size_t blocks = 1,
                            int rank = -1);

}  // namespace commfuse::detail
