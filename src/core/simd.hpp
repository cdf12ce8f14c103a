// Array loops marked CF_SIMD_CLONES are compiled twice, for AVX2 and for baseline x86-64,
// and the loader picks one (GCC function multi-versioning): one binary runs everywhere
// and vectorizes where it can.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CF_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CF_SIMD_CLONES
#endif
