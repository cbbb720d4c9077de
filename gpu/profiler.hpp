// Measuring a ModelProfile (model/model_profile.hpp): the model run on a device at each profiled
// batch, layer by layer. Blocking (seconds for a large model on a simulated device): callers run it
// on a thread of their own (`ember model profile`, a node's registration off its actors).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.hpp"
#include "gpu/device.hpp"
#include "model/model.hpp"
#include "model/model_profile.hpp"

namespace ember::gpu {

/// Runs `model` on `device` at each batch (warm run after a cold one, free non-batch dims =
/// seq_len) with per-layer timing, and hashes the header and every layer. out_of_memory when a
/// batch does not fit; errors of the run otherwise.
Result<ModelProfile> measure_profile(const std::shared_ptr<const Model>& model, Device& device,
                                     const std::vector<uint32_t>& batches, int64_t seq_len, const HashHex& hash);

}  // namespace ember::gpu
