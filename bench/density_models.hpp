// The density benchmark's functions: N models in a repository directory, each with its own
// weights (seeded), its SLO deadline (slo_factor x its warm latency as the node serves it, which the
// benchmark measures), and reference outputs for a few fixed inputs, against which every answer is checked.
//
// Three families cycle over the N models so that sizes, compute and heaviness differ:
//   wide    MLP 512-2048-2048-2048-10   (~36 MB)  more copy than compute per byte
//   deep    MLP 1024 x 6 hidden layers  (~26 MB)
//   conv    ResNet-50 tiny at batch 4   (~2 MB)   compute-bound, light
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "config/device_config.hpp"
#include "model/host_tensor.hpp"

namespace ember::bench {

struct DensityFunction {
  std::string name;      // also the repository directory <root>/<name>/1
  std::string family;
  uint64_t seed = 0;
  uint64_t weights_bytes = 0;
  /// Median latency of a request on a resident model, measured through a node (set_deadline).
  uint64_t warm_us = 0;
  uint64_t deadline_us = 0;
  /// inputs[i] -> reference[i]: the model's outputs for that input, computed warm.
  std::vector<std::vector<gpu::HostTensor>> inputs;
  std::vector<std::vector<gpu::HostTensor>> reference;
};

/// Writes (or reuses, when present) `count` models under `root`, their float weights held at
/// `width` (float32, float16 or bfloat16, as `ember model convert` writes them), and returns them
/// with their reference outputs, computed on a SimDevice configured like `device`.
Result<std::vector<DensityFunction>> make_density_functions(const std::string& root, uint32_t count,
                                                            const SimDeviceConfig& device,
                                                            uint32_t inputs_per_function,
                                                            gpu::DType width = gpu::DType::f32);

/// Sets the function's warm latency and deadline (slo_factor x warm_us) and writes the deadline
/// into its model.json.
Status set_deadline(const std::string& root, DensityFunction& f, uint64_t warm_us, double slo_factor);

/// Whether `outputs` equal `reference` (same names and shapes, values within 1e-4 relative to the
/// largest magnitude): an answer is right or wrong, never "close enough" beyond kernel rounding.
bool same_outputs(const std::vector<gpu::HostTensor>& outputs, const std::vector<gpu::HostTensor>& reference);

}  // namespace ember::bench
