#include "actors/node/engine/resident_models.hpp"

namespace ember::engine {

Result<gpu::LayerExecutor*> Resident::view(gpu::LayerRange range) {
  auto& v = views[{range.first, range.last}];
  if (!v) {
    EMBER_ASSIGN_OR_RETURN(v, gpu::LayerExecutor::view(*ex, range));
  }
  return v.get();
}

Resident* ResidentModels::find(const model_key& key) {
  auto it = models_.find(key);
  return it == models_.end() ? nullptr : &it->second;
}

Resident& ResidentModels::add(const model_key& key, Resident resident) {
  return models_.insert_or_assign(key, std::move(resident)).first->second;
}

std::optional<model_key> ResidentModels::any() const {
  if (models_.empty()) return std::nullopt;
  return models_.begin()->first;
}

void ResidentModels::publish(const model_key& key, const gpu::LayerExecutor& ex) {
  std::lock_guard lock(mu_);
  published_[key] = ex.weight_segments();
  if (ex.model().manifest().serving.dynamic_batching) {
    batching_.insert(key);
  } else {
    batching_.erase(key);
  }
}

void ResidentModels::unpublish(const model_key& key) {
  std::lock_guard lock(mu_);
  published_.erase(key);
  batching_.erase(key);
}

bool ResidentModels::holds(const model_key& key) const {
  std::lock_guard lock(mu_);
  return published_.count(key) > 0;
}

bool ResidentModels::batches(const model_key& key) const {
  std::lock_guard lock(mu_);
  return batching_.count(key) > 0;
}

std::optional<std::vector<gpu::WeightSegment>> ResidentModels::segments(const model_key& key) const {
  std::lock_guard lock(mu_);
  auto it = published_.find(key);
  if (it == published_.end()) return std::nullopt;
  return it->second;
}

std::vector<model_key> ResidentModels::bound() const {
  std::lock_guard lock(mu_);
  std::vector<model_key> keys;
  for (const auto& [k, segments] : published_) keys.push_back(k);
  return keys;
}

}  // namespace ember::engine
