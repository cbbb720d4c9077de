// parallel_for: a kernel's loop run by the OpenMP threads of the calling thread (a device's compute
// threads) when it is large enough to gain from them, else on the calling thread alone without
// entering a parallel region. libgomp makes a futex system call for every region it enters, even
// one that an `if (false)` clause or a single thread makes serial (measured: 1,000 such regions,
// 1,000 futex calls); for a small model's kernels that call cost more than their work.
#pragma once

#include <omp.h>

#include <cstdint>

namespace ember::gpu {

/// body(i) for i in [0, n), split among the OpenMP threads when `parallel` and there are several.
template <class Body>
void parallel_for(int64_t n, bool parallel, Body&& body) {
  if (!parallel || n < 2 || omp_get_max_threads() < 2) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace ember::gpu
