// ModelCosts: what one model costs in a simulation, from its measured profile (issue 36: "modelled
// from measured profiles, never hand-typed constants"; docs/design/simulator.md). The profile is the
// model's profile.json (model/model_profile.hpp: per layer, its bytes and its warm execution time
// at each measured batch size, on the device that measured it); `speedup` says how much faster the
// modelled GPU runs than that device (1: the same; a profile taken on a simulated device and a
// cluster of H100s would give the ratio the executor benchmarks measured between the two).
//
// A batch's time is the sum of its layers' times. Between two measured batch sizes a layer's time
// is interpolated linearly; below the smallest it is the smallest's (a batch never runs faster than
// its smallest measured size); above the largest it grows along the last two measured sizes' slope
// (one measured size: in proportion to the batch). Slopes below 0 (noise: a larger batch measured
// faster) count as 0. Times are microseconds, rounded to the nearest, at least 1 for a model with a
// layer that takes any time.
//
// Errors (invalid_argument naming the model): no batch measured, batch sizes not ascending or 0,
// no layer, a layer whose times or output sizes do not match the batches, times negative or not
// finite, a speedup not above 0. Pure: immutable once made, any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "model/model_profile.hpp"

namespace ember::sim {

/// `profile` as a model of `weights_bytes` would measure if its compute grew with its parameters:
/// every layer's bytes and times scaled by weights_bytes / profile.weights_bytes,
/// renamed `name`. How `ember sim` stands a measured architecture in for a model of another size
/// (Flashpoint's six, 499 MB to 11.4 GB). invalid_argument for a profile without weights or a size
/// of 0.
Result<gpu::ModelProfile> scaled_profile(gpu::ModelProfile profile, const std::string& name, uint64_t weights_bytes);

class ModelCosts {
 public:
  static Result<ModelCosts> from_profile(const gpu::ModelProfile& profile, double speedup = 1.0);

  const std::string& model() const { return model_; }
  uint64_t weights_bytes() const { return weights_bytes_; }
  size_t layers() const { return layer_bytes_.size(); }
  uint64_t layer_bytes(size_t layer) const { return layer_bytes_.at(layer); }

  /// The profile as the modelled GPU would measure it (every time divided by the speedup): what the
  /// version's profile.json says in the simulated repository, which the manager plans partitioned
  /// cold starts from.
  const std::shared_ptr<const gpu::ModelProfile>& profile() const { return profile_; }
  /// Bytes layer `layer`'s output takes at batch 1 (what crosses a pipeline cut after it).
  uint64_t out_bytes(size_t layer) const { return out_bytes_.at(layer); }

  /// Microseconds one batch of `batch` (>= 1) takes on the modelled GPU, every layer.
  uint64_t exec_us(uint32_t batch) const;
  /// Microseconds layers [first, last) take for a batch of `batch` (a pipeline stage's share).
  uint64_t exec_us(uint32_t batch, size_t first, size_t last) const;

 private:
  /// One layer's time at `batch`, microseconds, unrounded.
  double layer_us(size_t layer, uint32_t batch) const;

  std::string model_;
  uint64_t weights_bytes_ = 0;
  std::vector<uint32_t> batches_;
  std::vector<std::vector<double>> layer_us_;  // [layer][batch index], already divided by speedup
  std::vector<uint64_t> layer_bytes_;
  std::vector<uint64_t> out_bytes_;  // at batch 1 (the smallest measured, when 1 was not)
  std::shared_ptr<const gpu::ModelProfile> profile_;
};

}  // namespace ember::sim
