// Helpers shared by the gpu/ tests: the model/ tests' helpers (temporary directories, generated
// models, seeded tensors) and SimDevices.
#pragma once

#include <memory>

#include "gpu/sim_device.hpp"
#include "tests/model/model_test_util.hpp"

namespace ember::gpu::testing {

/// A SimDevice with `memory` bytes and 2 compute threads.
inline std::unique_ptr<SimDevice> sim_device(uint64_t memory = 256ull << 20, uint32_t ordinal = 0,
                                            double compute_dilation = 0) {
  SimDeviceConfig c;
  c.memory_bytes = memory;
  c.compute_threads = 2;
  c.compute_dilation = compute_dilation;
  return must(SimDevice::create(c, ordinal), "creating a SimDevice");
}

}  // namespace ember::gpu::testing
