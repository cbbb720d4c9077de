#include "actors/node/swap_controller.hpp"

#include <algorithm>

#include "base/units.hpp"

namespace ember {

using placement::DeviceState;
using placement::LoadSource;
using placement::SwapAction;

SwapController::SwapController(placement::NodeTopology topology, std::vector<uint64_t> pool_bytes,
                               SwapControllerOptions options)
    : topology_(std::move(topology)), options_(options), queue_(options.queue), rng_(options.seed) {
  devices_.resize(topology_.device_count());
  for (size_t d = 0; d < devices_.size() && d < pool_bytes.size(); ++d) {
    devices_[d].capacity = devices_[d].free = pool_bytes[d];
  }
}

Status SwapController::add_model(const SwapModel& model) {
  uint64_t largest = 0;
  for (const auto& d : devices_) largest = std::max(largest, d.capacity);
  if (model.bytes > largest) {
    return invalid_argument("model " + model.name + " needs " + format_bytes(model.bytes) +
                            " of device memory; the largest model pool of this node holds " + format_bytes(largest));
  }
  EMBER_RETURN_IF_ERROR(queue_.register_model(model.name, model.deadline_us, model.percentile));
  models_[model.name] = model;
  return Status::OK();
}

std::pair<std::vector<uint64_t>, std::vector<uint32_t>> SwapController::remove_model(const std::string& name) {
  std::vector<uint64_t> ids;
  for (const auto& q : queue_.remove_model(name)) ids.push_back(q.id);
  std::vector<uint32_t> holders;
  for (uint32_t d = 0; d < devices_.size(); ++d) {
    auto& dev = devices_[d];
    auto it = dev.replicas.find(name);
    if (it == dev.replicas.end() || it->second.swapping_in || dev.locks.count(name)) continue;
    dev.free += it->second.bytes;
    dev.replicas.erase(it);
    holders.push_back(d);
  }
  models_.erase(name);
  return {ids, holders};
}

std::optional<SwapModel> SwapController::model(const std::string& name) const {
  auto it = models_.find(name);
  if (it == models_.end()) return std::nullopt;
  return it->second;
}

Status SwapController::submit(uint64_t request, const std::string& model, int64_t now_us) {
  return queue_.push(request, model, now_us);
}

Status SwapController::requeue(uint64_t request, const std::string& model, int64_t arrival_us) {
  ++counters_.requeued;
  return queue_.push(request, model, arrival_us);
}

std::vector<DeviceState> SwapController::states() const {
  std::vector<DeviceState> out(devices_.size());
  for (size_t d = 0; d < devices_.size(); ++d) {
    const Device& dev = devices_[d];
    out[d].executing = dev.executing || !dev.up;  // a device that is down takes nothing
    out[d].loading = dev.loading;
    out[d].free_bytes = dev.free;
    for (const auto& [name, r] : dev.replicas) {
      if (!r.swapping_in && !dev.may_evict.count(name)) out[d].resident.insert(name);
    }
    for (const auto& [name, n] : dev.locks) out[d].locked.insert(name);
  }
  return out;
}

std::vector<placement::DeviceReplicaView> SwapController::views() const {
  std::vector<placement::DeviceReplicaView> out;
  for (uint32_t d = 0; d < devices_.size(); ++d) {
    for (const auto& [name, r] : devices_[d].replicas) {
      if (devices_[d].may_evict.count(name)) continue;  // not a copy anyone may count on
      placement::DeviceReplicaView v;
      v.model = name;
      v.device = d;
      v.bytes = r.bytes;
      auto m = models_.find(name);
      v.heavy = m != models_.end() && m->second.heaviness == placement::Heaviness::heavy;
      v.last_use_tick = r.last_use;
      v.executing = false;  // the executing device is never a target; its replicas are not candidates
      v.copy_source = devices_[d].locks.count(name) > 0;
      v.swapping_in = r.swapping_in;
      out.push_back(std::move(v));
    }
  }
  return out;
}

// Algorithm 1 (or random) picks the device; when the model does not fit there, the eviction rule
// picks the victims. A device whose evictable replicas cannot make room (all locked) is taken out
// and the choice made again, so a request waits only when no device can take it.
std::optional<SwapController::Plan> SwapController::plan_for(const std::string& model,
                                                             std::vector<placement::DeviceState> st) {
  auto m = models_.find(model);
  if (m == models_.end()) return std::nullopt;
  for (size_t attempt = 0; attempt < devices_.size(); ++attempt) {
    auto decision = options_.scheduler == SwapScheduler::random
                        ? placement::schedule_random(topology_, st, model, m->second.bytes, rng_())
                        : placement::schedule(topology_, st, model, m->second.bytes);
    if (!decision.ok() || decision->action == SwapAction::queue) return std::nullopt;
    Plan plan{*decision, {}, {}};
    const uint32_t d = *decision->device;
    if (decision->action != SwapAction::run) {
      const auto replicas = views();
      placement::EvictionRequest req{d, m->second.bytes, devices_[d].free, devices_[d].capacity};
      auto evict = placement::choose_evictions(replicas, req, options_.eviction);
      if (!evict.ok()) {
        st[d].executing = true;  // cannot make room there now
        continue;
      }
      plan.evict = std::move(evict->victims);
      for (const auto& v : placement::eviction_order(replicas, d, options_.eviction)) {
        const bool planned = std::any_of(plan.evict.begin(), plan.evict.end(),
                                         [&](const placement::EvictionVictim& e) { return e.model == v.model; });
        if (!planned) plan.fallback.push_back(v.model);
      }
    }
    return plan;
  }
  return std::nullopt;
}

SwapDispatch SwapController::start(const placement::QueuedRequest& q, const Plan& plan) {
  SwapDispatch out;
  out.request = q.id;
  out.model = q.model;
  out.arrival_us = q.arrival_us;
  out.device = *plan.decision.device;
  out.action = plan.decision.action;
  out.source = plan.decision.source;
  out.reason = plan.decision.reason;
  out.fallback = plan.fallback;
  Device& dev = devices_[out.device];
  dev.executing = true;
  dev.may_evict.insert(plan.fallback.begin(), plan.fallback.end());
  for (const auto& v : plan.evict) {
    out.evict.push_back(v.model);
    auto it = dev.replicas.find(v.model);
    if (it == dev.replicas.end()) continue;
    dev.free += it->second.bytes;
    dev.replicas.erase(it);
    ++counters_.evictions;
  }
  const SwapModel& m = models_.at(q.model);
  Replica& r = dev.replicas[q.model];
  r.last_use = ++tick_;
  if (out.action == SwapAction::run) {
    ++counters_.runs;
    return out;
  }
  r.swapping_in = true;
  r.bytes = m.bytes;
  dev.free -= std::min(dev.free, m.bytes);
  dev.loading = {out.action == SwapAction::swap_from_peer ? LoadSource::peer : LoadSource::host, m.heaviness};
  if (out.source) {
    ++devices_[*out.source].locks[q.model];
    devices_[*out.source].replicas[q.model].last_use = tick_;
    ++counters_.peer_swaps;
  } else {
    ++counters_.host_swaps;
  }
  return out;
}

std::vector<SwapDispatch> SwapController::dispatch(int64_t now_us) {
  std::vector<SwapDispatch> out;
  std::map<std::string, std::optional<Plan>> plans;  // this round's, by model
  for (;;) {
    const bool any_free = std::any_of(devices_.begin(), devices_.end(),
                                      [](const Device& d) { return d.up && !d.executing; });
    if (!any_free) break;
    plans.clear();
    const auto st = states();  // one snapshot per dispatched request, shared by the models it tries
    auto q = queue_.pop_if(now_us, [&](const std::string& model) {
      auto it = plans.find(model);
      if (it == plans.end()) it = plans.emplace(model, plan_for(model, st)).first;
      return it->second.has_value();
    });
    if (!q) break;
    out.push_back(start(*q, *plans.at(q->model)));
  }
  return out;
}

void SwapController::finish(const SwapDispatch& d, const SwapOutcome& o, uint64_t latency_us, int64_t now_us) {
  Device& dev = devices_[d.device];
  dev.executing = false;
  dev.loading = {};
  dev.may_evict.clear();
  if (d.source) {
    Device& src = devices_[*d.source];
    if (auto it = src.locks.find(d.model); it != src.locks.end() && --it->second == 0) src.locks.erase(it);
  }
  if (o.fault) {
    ++counters_.faults;
    device_down(d.device);
    return;
  }
  for (const auto& name : o.evicted) {
    auto it = dev.replicas.find(name);
    if (it == dev.replicas.end()) continue;
    dev.replicas.erase(it);
    ++counters_.evictions;
  }
  auto it = dev.replicas.find(d.model);
  if (o.resident && models_.count(d.model)) {
    Replica& r = dev.replicas[d.model];
    r.swapping_in = false;
    r.bytes = o.footprint;
    r.last_use = ++tick_;
  } else if (it != dev.replicas.end()) {
    dev.replicas.erase(it);
  }
  dev.free = o.pool_free;
  if (o.answered) queue_.record(d.model, latency_us, now_us);
}

void SwapController::device_down(uint32_t device) {
  Device& dev = devices_[device];
  dev.up = false;
  dev.executing = false;
  dev.loading = {};
  dev.replicas.clear();
  dev.locks.clear();
  dev.may_evict.clear();
  dev.free = dev.capacity;
}

void SwapController::device_up(uint32_t device, uint64_t pool_bytes) {
  Device& dev = devices_[device];
  dev.up = true;
  dev.capacity = dev.free = pool_bytes;
}

std::vector<std::string> SwapController::resident(uint32_t device) const {
  std::vector<std::string> out;
  for (const auto& [name, r] : devices_.at(device).replicas) {
    if (!r.swapping_in) out.push_back(name);
  }
  return out;
}

}  // namespace ember
