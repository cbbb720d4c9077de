// The density benchmark's functions: N models in a repository directory, each with its own
// weights (seeded), its SLO deadline measured (slo_factor x its warm latency on a SimDevice like
// the node's), and reference outputs for a few fixed inputs, against which every answer is checked.
//
// Three families cycle over the N models so that sizes, compute and heaviness differ:
//   wide    MLP 512-2048-2048-2048-10   (~36 MB)  more copy than compute per byte
//   deep    MLP 1024 x 6 hidden layers  (~26 MB)
//   conv    ResNet-50 tiny at batch 4   (~2 MB)   compute-bound, light
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/device_config.hpp"
#include "config/status.hpp"
#include "gpu/host_tensor.hpp"

namespace ember::bench {

struct DensityFunction {
  std::string name;      // also the repository directory <root>/<name>/1
  std::string family;
  uint64_t weights_bytes = 0;
  uint64_t warm_us = 0;
  uint64_t deadline_us = 0;
  /// inputs[i] -> reference[i]: the model's outputs for that input, computed warm.
  std::vector<std::vector<gpu::HostTensor>> inputs;
  std::vector<std::vector<gpu::HostTensor>> reference;
};

/// Writes (or reuses, when present with the same family and seed) `count` models under `root` and
/// returns them with their deadlines and references. `device` is how the warm latency is measured.
Result<std::vector<DensityFunction>> make_density_functions(const std::string& root, uint32_t count,
                                                            const SimDeviceConfig& device, double slo_factor,
                                                            uint32_t inputs_per_function);

/// Whether `outputs` equal `reference` (same names and shapes, values within 1e-4 relative to the
/// largest magnitude): an answer is right or wrong, never "close enough" beyond kernel rounding.
bool same_outputs(const std::vector<gpu::HostTensor>& outputs, const std::vector<gpu::HostTensor>& reference);

}  // namespace ember::bench
