// Seeded sample inputs for a model: what `ember run --random`, the benchmarks and load generators
// feed a model when the user brings no data.
//
// Pure; anyone, any thread. Floats are uniform in [-1, 1); integer ids are uniform below the row
// count of the embedding table that reads them (2 when no table reads them), so every sample is a
// valid request. The same (model, shapes, seed) always gives the same bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.hpp"
#include "model/host_tensor.hpp"
#include "model/model.hpp"

namespace ember::gpu {

/// The model's declared inputs with every free dim set: the first to `batch`, the others to `seq_len`.
std::vector<TensorDesc> concrete_inputs(const Model& model, int64_t batch, int64_t seq_len);

/// Tensors for the values `ids` (any values of the graph, e.g. a layer range's inputs), shaped as
/// `shapes[id]` says (see Model::check_inputs), named after the values.
Result<std::vector<HostTensor>> sample_inputs(const Model& model, const std::vector<uint32_t>& ids,
                                              const std::vector<std::optional<TensorDesc>>& shapes, uint64_t seed);

/// Shorthand: sample inputs for the whole model at (batch, seq_len).
Result<std::vector<HostTensor>> sample_model_inputs(const Model& model, int64_t batch, int64_t seq_len, uint64_t seed);

}  // namespace ember::gpu
