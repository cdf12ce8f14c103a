// CPU instruction-set features that decide which kernels can run (checked with cpuid and
// the OS's xsave state, so a feature the OS does not enable reads as absent).
#pragma once

#include <string>

namespace commfuse::cpu {

struct Features {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool avx_vnni = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;
};

const Features& features();
// "avx2 fma f16c" style list of what is present.
std::string describe(const Features& f);
int online_cores();

}  // namespace commfuse::cpu
