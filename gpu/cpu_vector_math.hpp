// Vectorised libm for the CPU kernels: declares glibc's libmvec variants (SSE, AVX2, AVX-512) of
// expf, erff and tanhf so that `#pragma omp simd` loops call them, without -ffast-math (whose
// finite-math assumption would be wrong for our data). EMBER_SIMD_CLONES compiles a function once
// per ISA and picks the best at load time, so one binary runs on any x86-64 and uses AVX-512 where
// present. Include only from kernel files built with -fno-math-errno -fopenmp-simd (see gpu/CMakeLists.txt).
#pragma once

#include <cmath>

#if defined(__x86_64__) && defined(__GLIBC__)
extern "C" {
__attribute__((simd("notinbranch"))) float expf(float) noexcept;
__attribute__((simd("notinbranch"))) float erff(float) noexcept;
__attribute__((simd("notinbranch"))) float tanhf(float) noexcept;
}
#define EMBER_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define EMBER_SIMD_CLONES
#endif
