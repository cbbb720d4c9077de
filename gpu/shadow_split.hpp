// The Body/Shadow batch split (AsyFunc §2.2, Fig. 5; issue 19), over the layer blocks of
// model/layer_blocks.hpp (where a model may be cut).
//
// The split: the Body runs the layers before the range on the whole batch, gives the Shadow the
// last rows of every value the range reads, runs the range on the first rows while the Shadow runs
// it on the rest, merges the range's outputs along the batch dimension and runs the layers after
// it. Every value a range reads or hands on must have the batch as its leading dimension (the
// executor's tensors do). A Shadow that fails leaves its rows to the Body, which computes them
// itself: the answer is late, never lost or wrong.
//
// The answer equals the Body's own run of the whole batch up to the arithmetic's dependence on the
// batch size (a GEMM may block rows differently: EveryArchitecture.BatchRowsMatchSingleRuns bounds
// that at a relative 1e-5).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"
#include "gpu/executor.hpp"
#include "model/layer_blocks.hpp"
#include "model/manifest.hpp"

namespace ember::gpu {

/// Rows [from, to) of `value` (batch-leading, row-major) as a value of its own over the same
/// memory (the view keeps the original alive).
DeviceValue slice_rows(const DeviceValue& value, int64_t from, int64_t to);

/// The executors of one split: `before` and `after` (null when the range starts or ends the model)
/// and `body` over the Body's device, `shadow` over the Shadow's; `body` and `shadow` cover the same
/// range.
struct ShadowSplit {
  LayerExecutor* before = nullptr;
  LayerExecutor* body = nullptr;
  LayerExecutor* shadow = nullptr;
  LayerExecutor* after = nullptr;
};

struct SplitStats {
  int64_t shadow_rows = 0;     // rows the Shadow computed (0 when it failed and the Body took them)
  uint64_t sent_bytes = 0;     // to the Shadow and back
  bool shadow_failed = false;  // the Body computed the Shadow's rows itself
  std::string shadow_error;    // why, when it did
  bool shadow_lost = false;    // ... because the Shadow failed or is gone (not for a reason of the Body's)
};

/// Runs the model on `inputs` (on the Body's device) with the last `shadow_rows` rows of the range
/// computed on the Shadow (0 < shadow_rows < batch), and returns the model outputs (value id ->
/// value on the Body's device). invalid_argument for a split that does not fit the executors or the
/// batch; errors of the Body's own runs as they come.
Result<Activations> run_split(const ShadowSplit& split, const Activations& inputs, int64_t shadow_rows,
                              SplitStats* stats = nullptr);

}  // namespace ember::gpu
