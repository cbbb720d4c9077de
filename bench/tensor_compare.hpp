// The benchmarks' check of an answer against a reference: the largest difference of any f32 value,
// relative to the largest magnitude of the reference tensor it is in (a batch's size alone moves a
// GEMM's result by about 1e-6). Tensors of other types are not compared; a different count or size
// is no match at all.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/host_tensor.hpp"

namespace ember::bench {

inline double max_relative_error(const std::vector<gpu::HostTensor>& got, const std::vector<gpu::HostTensor>& want) {
  if (got.size() != want.size()) return HUGE_VAL;
  double worst = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k].desc.shape.numel() != want[k].desc.shape.numel()) return HUGE_VAL;
    if (want[k].desc.dtype != gpu::DType::f32 || got[k].desc.dtype != gpu::DType::f32) continue;
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < want[k].desc.shape.numel(); ++i) {
      diff = std::max(diff, static_cast<double>(std::abs(got[k].as<float>()[i] - want[k].as<float>()[i])));
      scale = std::max(scale, static_cast<double>(std::abs(want[k].as<float>()[i])));
    }
    worst = std::max(worst, scale > 0 ? diff / scale : diff);
  }
  return worst;
}

}  // namespace ember::bench
