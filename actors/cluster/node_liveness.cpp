#include "actors/cluster/node_liveness.hpp"

#include <spdlog/spdlog.h>

namespace ember {

void NodeLiveness::joined(uint64_t id, int64_t now_us, uint64_t fingerprint) {
  members_live_[id] = Member{now_us, false, fingerprint, false};
}

NodeLiveness::Tick NodeLiveness::tick(int64_t now_us) {
  Tick out;
  for (auto& [id, live] : members_live_) {
    if (!members_.find(id)) continue;
    if (now_us - live.answered_us > timeout_us_) {
      out.lost.push_back(id);
      continue;
    }
    if (live.asking) continue;
    live.asking = true;
    out.ping.push_back(id);
  }
  for (uint64_t id : out.lost) {
    members_live_.erase(id);
    silent_[id] = false;
  }
  for (auto& [id, asking] : silent_) {
    if (asking) continue;
    asking = true;
    out.ping_silent.push_back(id);
  }
  return out;
}

bool NodeLiveness::pinged(uint64_t id, uint64_t fingerprint, int64_t now_us) {
  auto it = members_live_.find(id);
  if (it == members_live_.end()) return false;
  it->second.answered_us = now_us;
  it->second.asking = false;
  if (fingerprint == it->second.fingerprint || it->second.reporting) return false;
  it->second.reporting = true;
  return true;
}

void NodeLiveness::ping_failed(uint64_t id) {
  if (auto it = members_live_.find(id); it != members_live_.end()) it->second.asking = false;
}

bool NodeLiveness::reported(uint64_t id, std::optional<uint64_t> fingerprint) {
  auto it = members_live_.find(id);
  if (it == members_live_.end()) return false;
  it->second.reporting = false;
  if (!fingerprint) return false;
  it->second.fingerprint = *fingerprint;
  return true;
}

void NodeLiveness::silent_failed(uint64_t id) {
  if (auto it = silent_.find(id); it != silent_.end()) it->second = false;
}

std::set<model_key> NodeLiveness::Reconciled::changed() const {
  std::set<model_key> out = adopted;
  out.insert(gone.begin(), gone.end());
  out.insert(moved.begin(), moved.end());
  return out;
}

NodeLiveness::Reconciled NodeLiveness::reconcile(uint64_t id, node_report report, const std::set<model_key>& draining) {
  Reconciled out;
  const ClusterNode* node = members_.find(id);
  if (!node) return out;
  const std::string name = node->report.name;
  const std::set<model_key> reported(report.replicas.begin(), report.replicas.end());
  // Replicas draining there (retired by a drain or a scale-down, still bound until they unbind)
  // are the manager's own, not news.
  for (const model_key& key : reported) {
    const ModelVersion* v = registry_.find(key);
    // Not a version unloaded meanwhile (the report may predate the node's unload).
    if (!v || v->key() != key || v->state.explicitly_unloaded || v->replicas.count(id) || v->loading_on.count(id) ||
        draining.count(key)) {
      continue;
    }
    if (registry_.adopt(key, id)) out.adopted.insert(key);
  }
  for (const model_state& s : registry_.states()) {
    const ModelVersion* v = registry_.find(s.model);
    if (!v || reported.count(s.model)) continue;
    auto r = v->replicas.find(id);
    if (r == v->replicas.end()) continue;
    const std::string device = r->second;
    const uint64_t bytes = v->entry.weights_bytes;
    if (registry_.replica_lost(s.model, id)) {
      if (!device.empty()) members_.unbind(id, device, bytes);
      out.gone.insert(s.model);
    }
  }
  const bool moved = node->report.requests != report.requests;
  members_.update_report(id, std::move(report));
  if (moved) {
    for (const model_state& s : registry_.states()) {
      const ModelVersion* v = registry_.find(s.model);
      if (v && v->replicas.count(id)) out.moved.insert(s.model);
    }
    spdlog::info("manager: node {} takes requests at a new router now ({} replica(s) there)", name, out.moved.size());
  }
  for (const auto& key : out.adopted) {
    spdlog::info("manager: node {} reports replica {}, which the manager did not count: adopted", name,
                 key.to_string());
  }
  for (const auto& key : out.gone) {
    spdlog::warn("manager: node {} no longer reports replica {}: counted as lost", name, key.to_string());
  }
  return out;
}

}  // namespace ember
