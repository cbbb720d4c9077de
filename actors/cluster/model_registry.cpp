#include "actors/cluster/model_registry.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace ember {

bool model_is_bad(const Error& e) {
  return e.code() == ErrorCode::corrupt || e.code() == ErrorCode::invalid_argument ||
         e.code() == ErrorCode::unsupported;
}

void ModelRegistry::move(ModelVersion& v, ReadinessEvent event, std::string reason) {
  auto next = next_readiness(v.state.state, event);
  if (!next.ok()) {
    ++illegal_moves_;
    spdlog::error("registry: {}: {} (a bug: the state stays {})", v.key().to_string(), next.error().message(),
                  to_string(v.state.state));
    return;
  }
  v.state.state = *next;
  switch (event) {
    case ReadinessEvent::replica_ready:
    case ReadinessEvent::repaired:
      v.state.reason.clear();
      break;
    case ReadinessEvent::found_invalid:
      v.state.reason = std::move(reason);
      break;
    case ReadinessEvent::unload_requested:
      v.state.reason = "unloaded by request";
      break;
    default:
      break;
  }
}

ModelRegistry::ScanChanges ModelRegistry::apply_scan(const std::string& model, std::vector<RepositoryEntry> entries) {
  ScanChanges out;
  std::set<model_key> seen;
  for (auto& e : entries) {
    const model_key key = e.key;
    seen.insert(key);
    auto [it, fresh] = versions_.try_emplace(key);
    ModelVersion& v = it->second;
    const bool was_valid = fresh || v.valid();
    v.state.model = key;
    v.entry = std::move(e);
    if (!v.state.slo_set) v.state.slo = v.entry.declared_slo;
    if (!v.valid()) {
      if (was_valid) move(v, ReadinessEvent::found_invalid, v.entry.error);
      v.state.reason = v.entry.error;  // the latest scan's words
    } else if (!was_valid) {
      move(v, ReadinessEvent::repaired);
      // What it kept while invalid counts again.
      if (!v.replicas.empty()) move(v, ReadinessEvent::replica_ready);
      if (v.replicas.empty() && !v.loading_on.empty()) move(v, ReadinessEvent::load_started);
    }
    out.changed.insert(key);
  }
  for (auto it = versions_.begin(); it != versions_.end();) {
    const bool in_scope = model.empty() || it->first.name == model;
    if (in_scope && !seen.count(it->first) && it->second.idle()) {
      out.removed.push_back(it->first);
      fail_waiters(it->second, not_found("model " + it->first.to_string() + " was removed"));
      it = versions_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<RepositoryEntry> ModelRegistry::entries(const std::string& model) const {
  std::vector<RepositoryEntry> out;
  for (const auto& [key, v] : versions_)
    if (model.empty() || key.name == model) out.push_back(v.entry);
  return out;
}

ModelVersion* ModelRegistry::find(const model_key& key) {
  return const_cast<ModelVersion*>(std::as_const(*this).find(key));
}

const ModelVersion* ModelRegistry::find(const model_key& key) const {
  if (key.version != 0) {
    auto it = versions_.find(key);
    return it == versions_.end() ? nullptr : &it->second;
  }
  const ModelVersion* best = nullptr;
  for (auto it = versions_.lower_bound({key.name, 0}); it != versions_.end() && it->first.name == key.name; ++it) {
    best = &it->second;
  }
  return best;
}

std::optional<model_key> ModelRegistry::want(const model_key& key, uint32_t replicas, bool explicit_load,
                                             ModelWaiter waiter) {
  ModelVersion* v = find(key);
  if (!v) {
    const std::string version = key.version ? " version " + std::to_string(key.version) : "";
    waiter(not_found((explicit_load ? "the repository has no model '" : "unknown model '") + key.name + "'" + version));
    return std::nullopt;
  }
  if (!v->valid()) {
    waiter(invalid_argument("model " + v->key().to_string() + " cannot load: " + v->entry.error));
    return std::nullopt;
  }
  if (explicit_load) {
    v->state.explicitly_unloaded = false;
    v->wanted = std::max<uint32_t>(v->wanted, std::max<uint32_t>(1, replicas));
  } else if (v->state.explicitly_unloaded) {
    waiter(invalid_argument("model " + v->key().to_string() +
                            " was unloaded; load it with POST /v2/repository/models/" + key.name + "/load"));
    return std::nullopt;
  }
  if (explicit_load ? v->satisfied() : !v->replicas.empty()) {
    waiter(v->state);
    return std::nullopt;
  }
  v->waiters.push_back(std::move(waiter));
  if (!explicit_load) spdlog::info("manager: cold start of {} ({} waiting)", v->key().to_string(), v->waiters.size());
  return v->key();
}

std::vector<model_state> ModelRegistry::states() const {
  std::vector<model_state> out;
  for (const auto& [key, v] : versions_) out.push_back(v.state);
  return out;
}

Result<std::vector<model_key>> ModelRegistry::set_slo(const model_key& key, const slo_setting& slo) {
  if (slo.deadline_us && !(slo.percentile > 0 && slo.percentile < 1)) {
    return invalid_argument("the SLO's percentile is in (0, 1) exclusive (p=99 is 0.99), not " +
                            std::to_string(slo.percentile));
  }
  if (slo.deadline_us > 3'600'000'000ull) return invalid_argument("an SLO deadline is at most an hour");
  std::vector<model_key> out;
  for (auto it = versions_.lower_bound({key.name, 0}); it != versions_.end() && it->first.name == key.name; ++it) {
    if (key.version != 0 && it->first.version != key.version) continue;
    ModelVersion& v = it->second;
    v.state.slo_set = slo.deadline_us > 0;
    v.state.slo = v.state.slo_set ? slo : v.entry.declared_slo;
    out.push_back(it->first);
  }
  if (out.empty()) return not_found("unknown model '" + (key.version ? key.to_string() : key.name) + "'");
  return out;
}

ModelVersion* ModelRegistry::to_place(const model_key& key) {
  auto it = versions_.find(key);
  if (it == versions_.end() || !it->second.valid() || !it->second.loading_on.empty()) return nullptr;
  if (!it->second.satisfied()) return &it->second;
  answer_waiters(it->second);
  return nullptr;
}

void ModelRegistry::placement_failed(ModelVersion& v, const Error& why) {
  v.failed_on.clear();
  if (!v.waiters.empty()) spdlog::warn("manager: {}", why.message());
  fail_waiters(v, why);
}

bool ModelRegistry::load_cancelled(const model_key& key, uint64_t node, uint64_t attempt) {
  auto it = versions_.find(key);
  if (it == versions_.end()) return false;
  auto l = it->second.loading_on.find(node);
  if (l == it->second.loading_on.end() || l->second != attempt) return false;
  it->second.loading_on.erase(l);
  if (it->second.valid() && it->second.idle()) {
    move(it->second, ReadinessEvent::load_failed, "the partitioned cold start was called off");
  }
  return true;
}

uint64_t ModelRegistry::load_started(ModelVersion& v, uint64_t node) {
  const uint64_t attempt = next_attempt_++;
  v.loading_on[node] = attempt;
  if (v.valid()) {
    move(v, ReadinessEvent::load_started);
  } else {
    ++illegal_moves_;  // placement must skip invalid versions
    spdlog::error("registry: {}: a load started for invalid files (a bug)", v.key().to_string());
  }
  return attempt;
}

ModelVersion* ModelRegistry::replica_ready(const model_key& key, uint64_t node, uint64_t attempt,
                                           const replica_info& info) {
  auto it = versions_.find(key);
  if (it == versions_.end()) return nullptr;
  ModelVersion& v = it->second;
  auto l = v.loading_on.find(node);
  if (l == v.loading_on.end() || l->second != attempt) return nullptr;
  v.loading_on.erase(l);
  v.replicas[node] = info.device;
  v.state.replicas = static_cast<uint32_t>(v.replicas.size());
  v.failed_on.clear();
  v.rounds_unplaced = 0;
  if (v.valid()) move(v, ReadinessEvent::replica_ready);
  spdlog::info("manager: replica {} ready on node {} ({}; bytes from {}, {:.1f} ms)", key.to_string(), info.node,
               info.device, describe_source(info.source, info.source_peer), static_cast<double>(info.load_us) / 1e3);
  return &v;
}

ModelRegistry::LoadFailure ModelRegistry::load_failed(const model_key& key, uint64_t node, uint64_t attempt,
                                                      const Error& e, const std::string& node_name) {
  auto it = versions_.find(key);
  if (it == versions_.end()) return LoadFailure::stale;
  ModelVersion& v = it->second;
  auto l = v.loading_on.find(node);
  if (l == v.loading_on.end() || l->second != attempt) return LoadFailure::stale;
  v.loading_on.erase(l);
  spdlog::warn("manager: loading {} on node {} failed: {}", key.to_string(), node_name.empty() ? "(lost)" : node_name,
               e.message());
  const bool bad = model_is_bad(e);
  if (bad) {
    fail_waiters(v, e);
  } else {
    v.failed_on.insert(node);
  }
  if (v.valid() && v.idle()) move(v, bad ? ReadinessEvent::found_invalid : ReadinessEvent::load_failed, e.message());
  return bad ? LoadFailure::model_is_bad : LoadFailure::retry_elsewhere;
}

bool ModelRegistry::adopt(const model_key& key, uint64_t node) {
  auto it = versions_.find(key);
  if (it == versions_.end()) return false;
  ModelVersion& v = it->second;
  v.replicas[node] = "";  // the device is not reported; placement treats it as free
  v.state.replicas = static_cast<uint32_t>(v.replicas.size());
  if (v.valid()) move(v, ReadinessEvent::replica_ready);
  return true;
}

std::set<model_key> ModelRegistry::adopt(const std::vector<model_key>& keys, uint64_t node) {
  std::set<model_key> out;
  for (const auto& key : keys)
    if (adopt(key, node)) out.insert(key);
  return out;
}

void ModelRegistry::lost(ModelVersion& v, bool had_replica) {
  v.state.replicas = static_cast<uint32_t>(v.replicas.size());
  if (!v.valid() || !v.replicas.empty()) return;
  if (had_replica && v.state.state == ModelReadiness::ready) {
    move(v, ReadinessEvent::last_replica_lost);
    if (!v.loading_on.empty()) move(v, ReadinessEvent::load_started);  // a load elsewhere goes on
  } else if (v.loading_on.empty()) {
    move(v, ReadinessEvent::load_failed);  // the last load died with its node
  }
}

std::set<model_key> ModelRegistry::node_lost(uint64_t node) {
  std::set<model_key> changed;
  for (auto& [key, v] : versions_) {
    const bool had_replica = v.replicas.erase(node) > 0;
    v.partitioned.erase(node);
    const bool had_load = v.loading_on.erase(node) > 0;
    if (!had_replica && !had_load) continue;
    changed.insert(key);
    lost(v, had_replica);
  }
  return changed;
}

bool ModelRegistry::replica_lost(const model_key& key, uint64_t node) {
  auto it = versions_.find(key);
  if (it == versions_.end() || !it->second.replicas.erase(node)) return false;
  it->second.partitioned.erase(node);
  lost(it->second, true);
  return true;
}

std::optional<std::string> ModelRegistry::retire(const model_key& key, uint64_t node) {
  auto it = versions_.find(key);
  if (it == versions_.end()) return std::nullopt;
  ModelVersion& v = it->second;
  auto r = v.replicas.find(node);
  if (r == v.replicas.end()) return std::nullopt;
  std::string device = r->second;
  v.replicas.erase(r);
  v.partitioned.erase(node);
  v.state.replicas = static_cast<uint32_t>(v.replicas.size());
  v.wanted = std::min<uint32_t>(v.wanted, static_cast<uint32_t>(v.replicas.size() + v.loading_on.size()));
  if (v.valid() && v.replicas.empty() && v.state.state == ModelReadiness::ready) {
    move(v, ReadinessEvent::scaled_to_zero);
    if (!v.loading_on.empty()) move(v, ReadinessEvent::load_started);  // a load elsewhere goes on
  }
  return device;
}

bool ModelRegistry::reinstate(const model_key& key, uint64_t node, const std::string& device) {
  if (!adopt(key, node)) return false;
  versions_[key].replicas[node] = device;
  return true;
}

void ModelRegistry::mark_partitioned(const model_key& key, uint64_t node) {
  ModelVersion* v = find(key);
  if (v && v->key() == key && v->replicas.count(node)) v->partitioned.insert(node);
}

void ModelRegistry::set_wanted(const model_key& key, uint32_t replicas) {
  if (auto* v = find(key)) v->wanted = replicas;
}

std::vector<model_key> ModelRegistry::want_replacements(const std::set<model_key>& changed) {
  std::vector<model_key> out;
  for (const auto& key : changed) {
    auto it = versions_.find(key);
    if (it == versions_.end() || it->second.state.explicitly_unloaded || !it->second.valid()) continue;
    ModelVersion& v = it->second;
    v.wanted = std::max<uint32_t>(v.wanted, static_cast<uint32_t>(v.replicas.size()) + 1);
    out.push_back(key);
  }
  return out;
}

std::vector<model_key> ModelRegistry::wanting_placement() {
  std::vector<model_key> out;
  for (auto& [key, v] : versions_) {
    if (!v.loading_on.empty() || !v.valid()) continue;
    v.failed_on.clear();
    v.rounds_unplaced = 0;
    if (!v.waiters.empty() || v.replicas.size() < v.wanted) out.push_back(key);
  }
  return out;
}

std::vector<UnloadedVersion> ModelRegistry::unload(const model_key& which) {
  std::vector<UnloadedVersion> out;
  for (auto& [key, v] : versions_) {
    if (key.name != which.name || (which.version != 0 && key.version != which.version)) continue;
    UnloadedVersion u{{}, std::move(v.replicas), v.entry.weights_bytes};
    v.replicas.clear();
    v.partitioned.clear();
    v.loading_on.clear();
    v.wanted = 0;
    v.state.replicas = 0;
    v.state.explicitly_unloaded = true;
    if (v.valid()) move(v, ReadinessEvent::unload_requested);
    fail_waiters(v, invalid_argument("model " + key.to_string() + " was unloaded"));
    u.state = v.state;
    out.push_back(std::move(u));
  }
  return out;
}

void ModelRegistry::answer_waiters(ModelVersion& v) {
  auto waiters = std::move(v.waiters);
  v.waiters.clear();
  for (auto& w : waiters) w(v.state);
}

void ModelRegistry::fail_waiters(ModelVersion& v, const Error& e) {
  auto waiters = std::move(v.waiters);
  v.waiters.clear();
  for (auto& w : waiters) w(e);
}

std::map<uint64_t, uint32_t> ModelRegistry::replicas_per_node() const {
  std::map<uint64_t, uint32_t> out;
  for (const auto& [key, v] : versions_)
    for (const auto& [node, device] : v.replicas) ++out[node];
  return out;
}

std::vector<model_key> ModelRegistry::replicas_on(uint64_t node) const {
  std::vector<model_key> out;
  for (const auto& [key, v] : versions_)
    if (v.replicas.count(node)) out.push_back(key);
  return out;
}

Status ModelRegistry::check() const {
  for (const auto& [key, v] : versions_) {
    auto broken = [&](const std::string& what) {
      return internal_error(key.to_string() + " is " + std::string(to_string(v.state.state)) + " but " + what);
    };
    if (v.state.replicas != v.replicas.size()) return broken("its replica count is stale");
    if (!v.valid()) {
      if (v.state.state != ModelReadiness::failed) return broken("its files are invalid");
      continue;
    }
    const ModelReadiness want = !v.replicas.empty()     ? ModelReadiness::ready
                                : !v.loading_on.empty() ? ModelReadiness::loading
                                                        : v.state.state;
    if (v.state.state != want) return broken("it should be " + std::string(to_string(want)));
    if (v.idle() && v.state.state != ModelReadiness::unloaded && v.state.state != ModelReadiness::failed)
      return broken("it has neither a replica nor a load");
  }
  return Status::OK();
}

}  // namespace ember
