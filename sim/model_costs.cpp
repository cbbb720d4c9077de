#include "sim/model_costs.hpp"

#include <algorithm>
#include <cmath>

namespace ember::sim {

Result<gpu::ModelProfile> scaled_profile(gpu::ModelProfile profile, const std::string& name, uint64_t weights_bytes) {
  if (profile.weights_bytes == 0) return invalid_argument("profile of '" + profile.model + "' has no weights to scale");
  if (weights_bytes == 0) return invalid_argument("model '" + name + "': cannot scale a profile to 0 bytes");
  const double f = static_cast<double>(weights_bytes) / static_cast<double>(profile.weights_bytes);
  profile.model = name;
  uint64_t total = 0;
  for (auto& l : profile.layers) {
    l.bytes = static_cast<uint64_t>(std::llround(static_cast<double>(l.bytes) * f));
    total += l.bytes;
    for (double& us : l.exec_us) us *= f;
  }
  // The weights are the layers' bytes plus what lies outside them (the header, untied buffers).
  profile.weights_bytes = std::max(weights_bytes, total);
  return profile;
}

Result<ModelCosts> ModelCosts::from_profile(const gpu::ModelProfile& profile, double speedup) {
  const std::string who = "model '" + profile.model + "': ";
  if (!(speedup > 0) || std::isinf(speedup)) return invalid_argument(who + "the speedup must be a finite number above 0");
  if (profile.batches.empty()) return invalid_argument(who + "its profile measured no batch size");
  for (size_t i = 0; i < profile.batches.size(); ++i) {
    if (profile.batches[i] == 0 || (i > 0 && profile.batches[i] <= profile.batches[i - 1])) {
      return invalid_argument(who + "its profile's batch sizes must be above 0 and ascending");
    }
  }
  if (profile.layers.empty()) return invalid_argument(who + "its profile has no layer");
  ModelCosts c;
  auto modelled = std::make_shared<gpu::ModelProfile>(profile);
  c.model_ = profile.model;
  c.weights_bytes_ = profile.weights_bytes;
  c.batches_ = profile.batches;
  for (const gpu::LayerCost& l : profile.layers) {
    if (l.exec_us.size() != profile.batches.size() || l.out_bytes.size() != profile.batches.size()) {
      return invalid_argument(who + "layer '" + l.name + "' has " + std::to_string(l.exec_us.size()) + " times and " +
                              std::to_string(l.out_bytes.size()) + " output sizes for " +
                              std::to_string(profile.batches.size()) + " batch sizes");
    }
    std::vector<double> us;
    for (double t : l.exec_us) {
      if (!(t >= 0) || std::isinf(t)) {
        return invalid_argument(who + "layer '" + l.name + "' has a time that is negative or not finite");
      }
      us.push_back(t / speedup);
    }
    c.layer_us_.push_back(std::move(us));
    c.layer_bytes_.push_back(l.bytes);
    c.out_bytes_.push_back(l.out_bytes[profile.batch_index(1)]);
  }
  for (auto& l : modelled->layers)
    for (double& t : l.exec_us) t /= speedup;
  c.profile_ = std::move(modelled);
  return c;
}

double ModelCosts::layer_us(size_t layer, uint32_t batch) const {
  const std::vector<double>& t = layer_us_[layer];
  const size_t n = batches_.size();
  if (batch <= batches_.front()) return t.front();
  if (batch >= batches_.back()) {
    if (n == 1) return t.front() * batch / batches_.front();
    const double slope = std::max(0.0, (t[n - 1] - t[n - 2]) / (batches_[n - 1] - batches_[n - 2]));
    return t[n - 1] + slope * (batch - batches_[n - 1]);
  }
  const size_t hi = static_cast<size_t>(std::upper_bound(batches_.begin(), batches_.end(), batch) - batches_.begin());
  const size_t lo = hi - 1;
  const double slope = std::max(0.0, (t[hi] - t[lo]) / (batches_[hi] - batches_[lo]));
  return t[lo] + slope * (batch - batches_[lo]);
}

uint64_t ModelCosts::exec_us(uint32_t batch, size_t first, size_t last) const {
  last = std::min(last, layers());
  double sum = 0;
  for (size_t i = first; i < last; ++i) sum += layer_us(i, std::max<uint32_t>(1, batch));
  if (sum <= 0) return 0;
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(sum)));
}

uint64_t ModelCosts::exec_us(uint32_t batch) const { return exec_us(batch, 0, layers()); }

}  // namespace ember::sim
