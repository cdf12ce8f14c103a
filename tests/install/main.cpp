// Install test, C++ API: links the installed libcommfuse through find_package and checks
// a few conversions and that an exception thrown inside the library is catchable here.
#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer_cpp: FAIL: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  using commfuse::DType;
  expect(std::strcmp(commfuse::version(), "0.1.0") == 0, "version() is 0.1.0");

  const float one = 1.0f;
  uint16_t bf16 = 0;
  commfuse::convert(&one, DType::kFloat32, &bf16, DType::kBFloat16, 1);
  expect(bf16 == 0x3F80, "1.0f -> bfloat16 0x3F80");

  uint8_t hif8 = 0;
  commfuse::convert(&one, DType::kFloat32, &hif8, DType::kHiFloat8, 1);
  expect(hif8 == 0x08, "1.0f -> hifloat8 0x08");

  float back = 0.0f;
  commfuse::convert(&hif8, DType::kHiFloat8, &back, DType::kFloat32, 1);
  expect(back == 1.0f, "hifloat8 0x08 -> 1.0f");

  // The exception type must survive the shared-library boundary.
  bool caught = false;
  try {
    commfuse::convert(nullptr, DType::kFloat32, &bf16, DType::kBFloat16, 1);
  } catch (const commfuse::NullPointerError& e) {
    caught = e.code() == commfuse::Status::kParamNullptr;
  }
  expect(caught, "null src throws NullPointerError with PARAM_NULLPTR");

  if (failures == 0) std::printf("consumer_cpp: OK (commfuse %s)\n", commfuse::version());
  return failures == 0 ? 0 : 1;
}
