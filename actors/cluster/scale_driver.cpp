#include "actors/cluster/scale_driver.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

namespace ember {

void ScaleDriver::configure(const AutoscaleConfig& defaults, const AutoscalerSettings& settings) {
  interval_us_ = settings.interval_us;
  drain_timeout_us_ = settings.drain_timeout_us;
  loop_ = settings.enabled ? std::make_unique<AutoscalerLoop>(defaults, settings.interval_us, settings.look_back_us)
                           : nullptr;
}

// -- what the loop hears ------------------------------------------------------------------------

void ScaleDriver::scanned(const ModelRegistry::ScanChanges& changes, const std::vector<RepositoryEntry>& entries) {
  if (!loop_) return;
  for (const auto& key : changes.removed) loop_->forget(key);
  for (const auto& e : entries) {
    if (!e.error.empty()) continue;
    if (!loop_->config(e.key) || changes.changed.count(e.key)) {
      auto configured = loop_->configure(e.key, e.autoscale);
      if (!configured.ok())
        spdlog::warn("manager: {}; it scales with the cluster's defaults", configured.error().message());
      loop_->set_capacity(e.key, e.capacity_rps);
      loop_->set_profiled_service(e.key, e.profile ? static_cast<uint64_t>(e.profile->batch_us(1) + 0.5) : 0);
    }
  }
}

void ScaleDriver::set_floor(const model_key& key, uint32_t replicas) {
  if (loop_) loop_->set_floor(key, replicas);
}

Result<model_state> ScaleDriver::set_bounds(const model_key& key, uint32_t min, uint32_t max) {
  if (!loop_) {
    return unavailable(
        "the autoscaler is off (autoscale.enabled: false): `load MODEL REPLICAS` sets the replica count");
  }
  const ModelVersion* v = registry_.find(key);
  if (!v) return not_found("unknown model '" + key.to_string() + "'");
  EMBER_RETURN_IF_ERROR(loop_->set_bounds(v->key(), min, max ? std::optional<uint32_t>(max) : std::nullopt));
  return v->state;
}

void ScaleDriver::report(const load_report& report, int64_t now_us) {
  if (!loop_) return;
  for (const auto& m : report.models) {
    std::map<uint64_t, uint32_t> in_flight;
    for (const auto& n : m.in_flight) in_flight[n.node_id] += n.count;
    loop_->report(report.reporter, m.model, {m.arrivals, m.completions, m.busy_us, m.ongoing, m.queued}, in_flight,
                  now_us);
  }
}

void ScaleDriver::cold_start(SourceTier tier, uint64_t load_us) {
  instruments_.count_cold_start(tier, static_cast<double>(load_us) / 1e6);
  if (loop_) loop_->cold_start_measured(tier, load_us);
}

// -- ticks --------------------------------------------------------------------------------------

SourceTier ScaleDriver::best_tier(const ModelVersion& v) const {
  SourceTier best = SourceTier::repository;
  // Once per model per tick over every node: no lookup per node (a 16,000-GPU simulation spent
  // 45% of its time in the lookups).
  for (const auto& [id, node] : members_.nodes()) {
    if (!Membership::caches(node, v.key())) continue;
    if (!v.replicas.count(id)) return SourceTier::cache;
    best = SourceTier::peer;
  }
  return best;
}

std::vector<AutoscalerLoop::Change> ScaleDriver::decide(int64_t now_us) {
  auto supply = [this](const model_key& key) {
    const ModelVersion* v = registry_.find(key);
    if (!v || !v->valid() || v->state.explicitly_unloaded) return AutoscalerLoop::Supply{};
    return AutoscalerLoop::Supply{static_cast<uint32_t>(v->replicas.size()),
                                  static_cast<uint32_t>(v->loading_on.size()), best_tier(*v)};
  };
  auto room = [this](const model_key& key) {  // only for the models that scale up: it views every node
    const ModelVersion* v = registry_.find(key);
    return v ? planner_.room(*v) : 0u;
  };
  return loop_->tick(now_us, supply, room);
}

ScaleDriver::Step ScaleDriver::apply(const AutoscalerLoop::Change& change, int64_t now_us) {
  const ModelVersion* v = registry_.find(change.key);
  if (!v || !v->valid() || v->state.explicitly_unloaded) return Step::none;  // an unload is the user's word
  const auto& d = change.decision;
  spdlog::info("manager: autoscale {}", change.line);
  if (d.action == placement::ScaleAction::keep) return Step::none;  // blocked: said, nothing to do
  instruments_.count_action(change.key, placement::to_string(d.action), placement::to_string(d.reason));
  if (d.action == placement::ScaleAction::up) {
    registry_.set_wanted(change.key, d.desired);
    return Step::place;
  }
  scale_down(change.key, d.count, now_us);
  return Step::publish;
}

void ScaleDriver::scale_down(const model_key& key, uint32_t count, int64_t now_us) {
  const ModelVersion* v = registry_.find(key);
  if (!v) return;
  const auto per_node = registry_.replicas_per_node();
  // On a node being drained, not partitioned, in flight, -replicas on the node, node.
  std::vector<std::tuple<bool, bool, uint32_t, int64_t, uint64_t>> order;
  for (const auto& [node, device] : v->replicas) {
    auto n = per_node.find(node);
    order.emplace_back(!node_drains_.count(node), !v->partitioned.count(node), loop_ ? loop_->in_flight(key, node) : 0,
                       -static_cast<int64_t>(n == per_node.end() ? 0 : n->second), node);
  }
  std::sort(order.begin(), order.end());
  const uint64_t bytes = v->entry.weights_bytes;
  for (size_t i = 0; i < order.size() && i < count; ++i) {
    const uint64_t node = std::get<4>(order[i]);
    auto device = registry_.retire(key, node);
    if (!device) continue;
    drains_[next_drain_++] = Drain{key, node, *device, bytes, now_us, false};
  }
}

uint32_t ScaleDriver::retire_excess(const model_key& key, int64_t now_us) {
  if (loop_) return 0;
  const ModelVersion* v = registry_.find(key);
  if (!v || !(v->key() == key) || v->wanted == 0 || v->replicas.size() <= v->wanted) return 0;
  const auto excess = static_cast<uint32_t>(v->replicas.size() - v->wanted);
  spdlog::info("manager: {} has {} ready replica(s) and wants {}: the excess retires (placed twice)", key.to_string(),
               v->replicas.size(), v->wanted);
  scale_down(key, excess, now_us);
  return excess;
}

void ScaleDriver::show_replicas() {
  if (!loop_) return;
  loop_->for_each([this](const model_key& key) {
    const ModelVersion* v = registry_.find(key);
    instruments_.set_replicas(key, loop_->desired(key), v ? static_cast<uint32_t>(v->replicas.size()) : 0);
  });
}

// -- drains -------------------------------------------------------------------------------------

std::vector<ScaleDriver::Unbind> ScaleDriver::drains_over(int64_t now_us) {
  const auto settle = static_cast<int64_t>(settle_us());
  const auto timeout = static_cast<int64_t>(drain_timeout_us_);
  std::vector<Unbind> out;
  for (auto& [id, d] : drains_) {
    if (d.unbinding) continue;
    const int64_t age = now_us - d.started_us;
    const uint32_t in_flight = loop_ ? loop_->in_flight(d.key, d.node) : 0;
    if ((age >= settle && in_flight == 0) || age >= timeout) {
      d.unbinding = true;
      out.push_back({id, d.node, d.key});
    }
  }
  return out;
}

std::vector<ScaleDriver::Evict> ScaleDriver::embers_expired(int64_t now_us) {
  std::vector<Evict> out;
  if (!loop_) return out;
  auto gone = [this](const model_key& key) {  // no replica, no load, no drain left
    const ModelVersion* v = registry_.find(key);
    return v && v->idle() &&
           std::none_of(drains_.begin(), drains_.end(), [&](const auto& d) { return d.second.key == key; });
  };
  for (const auto& key : loop_->embers_expired(now_us, gone)) {
    for (const auto& [id, node] : members_.nodes()) {
      if (!Membership::caches(node, key)) continue;
      spdlog::info("manager: {} idle for its host_keep_alive: evicted from node {}'s cache", key.to_string(),
                   node.report.name);
      members_.note_cached(id, key, false);
      out.push_back({id, key});
    }
  }
  return out;
}

ScaleDriver::Settle ScaleDriver::settle(int64_t now_us) {
  Settle out;
  out.unbind = drains_over(now_us);
  out.evict = embers_expired(now_us);
  return out;
}

ScaleDriver::Unbound ScaleDriver::unbound(uint64_t drain, bool ok, int64_t now_us) {
  Unbound out;
  auto it = drains_.find(drain);
  if (it == drains_.end()) return out;
  out.known = true;
  const Drain& d = it->second;
  const double seconds = static_cast<double>(now_us - d.started_us) / 1e6;
  members_.unbind(d.node, d.device, d.bytes);
  instruments_.observe_drain(seconds);
  const ClusterNode* node = members_.find(d.node);
  const AutoscaleConfig* config = loop_ ? loop_->config(d.key) : nullptr;
  if (ok && node && config && config->host_keep_alive_us == 0) {  // no host-cache tier: the bytes go too
    members_.note_cached(d.node, d.key, false);
    out.evict = Evict{d.node, d.key};
  }
  spdlog::info("manager: {} on node {} {} after draining {:.0f} ms", d.key.to_string(),
               node ? node->report.name : std::to_string(d.node), ok ? "unbound" : "not unbound (node error)",
               seconds * 1e3);
  drains_.erase(it);
  return out;
}

bool ScaleDriver::revive(const model_key& key) {
  const ModelVersion* v = registry_.find(key);
  bool revived = false;
  for (auto it = drains_.begin(); it != drains_.end() && v;) {
    const uint32_t want = std::max<uint32_t>(1, v->wanted);
    if (v->replicas.size() + v->loading_on.size() >= want) break;
    auto& d = it->second;
    const ClusterNode* on = members_.find(d.node);
    if (d.key != v->key() || d.unbinding || (on && on->draining) || !registry_.reinstate(d.key, d.node, d.device)) {
      ++it;
      continue;
    }
    spdlog::info("manager: {} on node {} serves again (it was draining)", key.to_string(),
                 on ? on->report.name : std::to_string(d.node));
    it = drains_.erase(it);  // its memory stays bound
    revived = true;
  }
  return revived;
}

std::set<model_key> ScaleDriver::draining_on(uint64_t node) const {
  std::set<model_key> out;
  for (const auto& [id, d] : drains_)
    if (d.node == node) out.insert(d.key);
  return out;
}

// -- node drains --------------------------------------------------------------------------------

void ScaleDriver::drain_node(uint64_t node, DrainReply reply) {
  members_.set_draining(node);
  node_drains_[node].waiters.push_back(std::move(reply));
  const ClusterNode* n = members_.find(node);
  spdlog::info("manager: draining node {}: {} replica(s) to move", n ? n->report.name : std::to_string(node),
               registry_.replicas_on(node).size());
}

std::vector<uint64_t> ScaleDriver::drained_nodes() const {
  std::vector<uint64_t> out;
  for (const auto& [node, nd] : node_drains_) out.push_back(node);
  return out;
}

ScaleDriver::Move ScaleDriver::move_off(uint64_t node, const model_key& key, int64_t now_us) {
  Move out;
  auto nd = node_drains_.find(node);
  ModelVersion* v = registry_.find(key);
  if (nd == node_drains_.end() || !v) return out;
  size_t elsewhere = 0;
  for (const auto& [n, device] : v->replicas) {
    const ClusterNode* m = members_.find(n);
    elsewhere += n != node && m && !m->draining;
  }
  if (elsewhere > 0) {
    auto before = nd->second.wanted_before.find(key);
    const uint32_t wanted = before != nd->second.wanted_before.end() ? before->second : v->wanted;
    const uint64_t bytes = v->entry.weights_bytes;
    if (auto device = registry_.retire(key, node)) {
      drains_[next_drain_++] = Drain{key, node, *device, bytes, now_us, false};
      nd->second.moved.push_back(key);
      out.check_later = !loop_;
    }
    registry_.set_wanted(key, wanted);
    out.kind = Move::Kind::moved;  // back to what it wanted, elsewhere
  } else if (v->loading_on.empty()) {
    nd->second.wanted_before.emplace(key, v->wanted);
    registry_.set_wanted(key, std::max<uint32_t>(v->wanted, static_cast<uint32_t>(v->replicas.size()) + 1));
    out.kind = Move::Kind::replace;
  }
  return out;
}

std::optional<Error> ScaleDriver::stuck(const model_key& key) const {
  const ModelVersion* v = registry_.find(key);
  if (v && !v->loading_on.empty()) return std::nullopt;
  return unavailable("no other node has room for " + key.to_string() + ", whose only replica is on the node");
}

bool ScaleDriver::finish(uint64_t node, const std::optional<Error>& stuck) {
  auto it = node_drains_.find(node);
  if (it == node_drains_.end()) return false;
  const bool unbinding =
      std::any_of(drains_.begin(), drains_.end(), [&](const auto& d) { return d.second.node == node; });
  if (!stuck && (!registry_.replicas_on(node).empty() || unbinding)) return false;
  NodeDrain nd = std::move(it->second);
  node_drains_.erase(it);
  for (auto& w : nd.waiters) {
    if (stuck) {
      w(*stuck);
    } else {
      w(nd.moved);
    }
  }
  const ClusterNode* m = members_.find(node);
  spdlog::info("manager: node {} {}", m ? m->report.name : std::to_string(node),
               stuck ? "cannot be drained: " + stuck->message()
                     : "is drained (" + std::to_string(nd.moved.size()) + " replica(s) moved); it may be stopped");
  return true;
}

void ScaleDriver::node_lost(uint64_t node, const std::string& name) {
  std::erase_if(drains_, [&](const auto& d) { return d.second.node == node; });
  auto drained = node_drains_.find(node);
  if (drained == node_drains_.end()) return;
  NodeDrain nd = std::move(drained->second);
  node_drains_.erase(drained);
  for (auto& w : nd.waiters) w(unavailable("node " + name + " left while draining"));
}

uint32_t ScaleDriver::drains_of(const model_key& key) const {
  uint32_t n = 0;
  for (const auto& [id, d] : drains_) n += d.key == key ? 1 : 0;
  return n;
}

}  // namespace ember
