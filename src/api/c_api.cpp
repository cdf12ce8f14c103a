// The C ABI: every entry point catches everything, stores the message in a thread-local
// slot and returns the SPEC §0 status. Nothing throws across this boundary.
#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <string>

#include "core/dtype_valid.hpp"
#include "core/error.hpp"

#include "api/c_api_guard.hpp"

namespace {

using commfuse::api::guarded;

commfuse::DType to_dtype(commfuseDataType t) {
  return static_cast<commfuse::DType>(t);
}

}  // namespace

namespace commfuse::api {
std::string& last_error() {
  thread_local std::string message;
  return message;
}
}  // namespace commfuse::api

extern "C" {

const char* commfuseGetLastErrorMessage(void) {
  return commfuse::api::last_error().c_str();
}

const char* commfuseGetStatusName(commfuseStatus_t status) {
  return commfuse::status_name(static_cast<commfuse::Status>(status));
}

const char* commfuseGetVersion(void) {
  return commfuse::version();
}

const char* commfuseDataTypeName(commfuseDataType dtype) {
  const char* name = "unknown";
  guarded("commfuseDataTypeName", [&] { name = commfuse::dtype_name(to_dtype(dtype)).data(); });
  return name;
}

commfuseStatus_t commfuseDataTypeFromName(const char* name, commfuseDataType* dtype) {
  return guarded("commfuseDataTypeFromName", [&] {
    CF_CHECK_NOTNULL(name, "commfuseDataTypeFromName: name is null");
    CF_CHECK_NOTNULL(dtype, "commfuseDataTypeFromName: dtype is null");
    try {
      *dtype = static_cast<commfuseDataType>(commfuse::dtype_from_name(name));
    } catch (const commfuse::Error& e) {  // the C message names the function (commfuse.h)
      commfuse::detail::throw_status(e.code(),
                                     commfuse::detail::cat("commfuseDataTypeFromName: ", e.what()));
    }
  });
}

commfuseStatus_t commfuseDataTypeBits(commfuseDataType dtype, int* bits) {
  return guarded("commfuseDataTypeBits", [&] {
    CF_CHECK_NOTNULL(bits, "commfuseDataTypeBits: bits is null");
    CF_CHECK_ARG(commfuse::detail::dtype_is_valid(to_dtype(dtype)),
                 "commfuseDataTypeBits: dtype value ", static_cast<int>(dtype),
                 " is not a commfuse dtype");
    *bits = commfuse::dtype_bits(to_dtype(dtype));
  });
}

commfuseStatus_t commfuseConvert(const void* src, commfuseDataType srcType, void* dst,
                                 commfuseDataType dstType, uint64_t count, int saturate) {
  return guarded("commfuseConvert", [&] {
    commfuse::convert(src, to_dtype(srcType), dst, to_dtype(dstType), count, saturate != 0);
  });
}

commfuseStatus_t commfusePackInt4(const int8_t* src, uint8_t* dst, uint64_t count) {
  return guarded("commfusePackInt4", [&] { commfuse::pack_int4(src, dst, count); });
}

commfuseStatus_t commfuseUnpackInt4(const uint8_t* src, int8_t* dst, uint64_t count) {
  return guarded("commfuseUnpackInt4", [&] { commfuse::unpack_int4(src, dst, count); });
}

}  // extern "C"
