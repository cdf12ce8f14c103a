/* Install test, C API: built once through find_package and once with the flags from
 * `pkg-config --cflags --libs commfuse`. */
#include <commfuse/commfuse.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "consumer_c: FAIL: %s\n", what);
    ++failures;
  }
}

int main(void) {
  const float one = 1.0f;
  uint16_t bf16 = 0;
  uint8_t hif8 = 0;
  float back = 0.0f;
  commfuseStatus_t st;

  expect(strcmp(commfuseGetVersion(), "0.1.0") == 0, "commfuseGetVersion() is 0.1.0");

  st = commfuseConvert(&one, COMMFUSE_FLOAT32, &bf16, COMMFUSE_BFLOAT16, 1, 0);
  expect(st == COMMFUSE_SUCCESS && bf16 == 0x3F80, "1.0f -> bfloat16 0x3F80");

  st = commfuseConvert(&one, COMMFUSE_FLOAT32, &hif8, COMMFUSE_HIFLOAT8, 1, 0);
  expect(st == COMMFUSE_SUCCESS && hif8 == 0x08, "1.0f -> hifloat8 0x08");

  st = commfuseConvert(&hif8, COMMFUSE_HIFLOAT8, &back, COMMFUSE_FLOAT32, 1, 0);
  expect(st == COMMFUSE_SUCCESS && back == 1.0f, "hifloat8 0x08 -> 1.0f");

  /* Errors come back as a status and a thread-local message, never as an exception. */
  st = commfuseConvert(NULL, COMMFUSE_FLOAT32, &bf16, COMMFUSE_BFLOAT16, 1, 0);
  expect(st == COMMFUSE_PARAM_NULLPTR, "null src returns COMMFUSE_PARAM_NULLPTR");
  expect(commfuseGetLastErrorMessage()[0] != '\0', "null src sets the last error message");

  if (failures == 0) printf("consumer_c: OK (commfuse %s)\n", commfuseGetVersion());
  return failures == 0 ? 0 : 1;
}
