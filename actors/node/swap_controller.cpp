#include "actors/node/swap_controller.hpp"

#include <algorithm>
#include <cmath>

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

void SwapController::set_workspace(uint32_t device, uint64_t bytes) {
  if (device < devices_.size()) devices_[device].workspace = bytes;
}

void SwapController::set_lent(uint32_t device, bool lent) {
  if (device < devices_.size()) devices_[device].lent = lent;
}

bool SwapController::idle(uint32_t device) const {
  const Device& dev = devices_.at(device);
  return dev.up && !dev.lent && !dev.executing && dev.loading.source == LoadSource::none;
}

std::vector<uint32_t> SwapController::run_order() const {
  std::vector<DeviceState> st(devices_.size());  // availability is all the order reads
  for (uint32_t d = 0; d < devices_.size(); ++d) {
    st[d].executing = !idle(d);
  }
  return placement::run_order(st);
}

const std::string& SwapController::name_of(const model_key& key) const {
  auto it = names_.find(key);
  if (it == names_.end()) {
    it = names_.emplace(key, key.to_string()).first;
    keys_.emplace(it->second, key);
  }
  return it->second;
}

const model_key& SwapController::key_of(const std::string& name) const {
  // Every name placement/ holds came from name_of.
  return keys_.at(name);
}

std::vector<uint32_t> SwapController::holders(const model_key& key) const {
  const std::string& model = name_of(key);
  std::vector<uint32_t> out;
  for (uint32_t d = 0; d < devices_.size(); ++d) {
    const Device& dev = devices_[d];
    auto r = dev.replicas.find(model);
    if (dev.up && !dev.lent && r != dev.replicas.end() && !r->second.swapping_in) out.push_back(d);
  }
  return out;
}

void SwapController::set_scaling(const model_key& model, uint32_t max_devices, std::vector<double> batch_us) {
  auto it = models_.find(name_of(model));
  if (it == models_.end()) return;
  it->second.max_devices = max_devices;
  it->second.batch_us = std::move(batch_us);
}

bool SwapController::drop(const model_key& key, uint32_t device) {
  if (device >= devices_.size()) return false;
  const std::string& model = name_of(key);
  Device& dev = devices_[device];
  auto r = dev.replicas.find(model);
  if (r == dev.replicas.end() || r->second.swapping_in || dev.locks.count(model) || dev.running.count(model) ||
      dev.may_evict.count(model) || (dev.executing && dev.primary == model)) {
    return false;
  }
  dev.free += r->second.bytes;
  dev.replicas.erase(r);
  return true;
}

bool SwapController::admits_beside(const Device& dev, const SwapModel& m) const {
  if (!dev.up || dev.lent || !dev.executing || dev.alone || dev.loading.source != LoadSource::none) return false;
  const std::string& name = name_of(m.key);
  if (dev.beside + 1 >= options_.streams || dev.running.count(name) || dev.may_evict.count(name)) return false;
  auto r = dev.replicas.find(name);
  if (r == dev.replicas.end() || r->second.swapping_in) return false;
  return dev.workspace > 0 && dev.activations + m.activation_bytes <= dev.workspace;
}

void SwapController::count_run(Device& dev, SwapDispatch& d) {
  const std::string& name = name_of(d.model);
  auto m = models_.find(name);
  d.activation_bytes = m == models_.end() ? 0 : m->second.activation_bytes;
  d.counted = true;
  dev.activations += d.activation_bytes;
  dev.running.insert(name);
}

void SwapController::uncount_run(Device& dev, const SwapDispatch& d) {
  if (!d.counted) return;
  dev.activations -= std::min(dev.activations, d.activation_bytes);
  if (auto it = dev.running.find(name_of(d.model)); it != dev.running.end()) dev.running.erase(it);
}

Status SwapController::add_model(const SwapModel& model) {
  uint64_t largest = 0;
  for (const auto& d : devices_) largest = std::max(largest, d.capacity);
  const std::string& name = name_of(model.key);
  if (model.bytes > largest) {
    return invalid_argument("model " + name + " needs " + format_bytes(model.bytes) +
                            " of device memory; the largest model pool of this node holds " + format_bytes(largest));
  }
  EMBER_RETURN_IF_ERROR(queue_.register_model(name, model.deadline_us, model.percentile));
  models_[name] = model;
  return Status::OK();
}

std::pair<std::vector<uint64_t>, std::vector<uint32_t>> SwapController::remove_model(const model_key& key) {
  const std::string& name = name_of(key);
  std::vector<uint64_t> ids;
  for (const auto& q : queue_.remove_model(name)) {
    ids.push_back(q.id);
    prefer_.erase(q.id);
    alone_.erase(q.id);
  }
  alone_models_.erase(name);
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

void SwapController::note_activations(const model_key& key, uint64_t bytes) {
  auto it = models_.find(name_of(key));
  if (it != models_.end()) it->second.activation_bytes = std::max(it->second.activation_bytes, bytes);
}

bool SwapController::has_model(const model_key& key) const { return models_.count(name_of(key)) > 0; }

size_t SwapController::queued(const model_key& key) const { return queue_.queued(name_of(key)); }

std::optional<SwapModel> SwapController::model(const model_key& key) const {
  auto it = models_.find(name_of(key));
  if (it == models_.end()) return std::nullopt;
  return it->second;
}

Status SwapController::submit(uint64_t request, const model_key& model, int64_t now_us,
                              std::optional<uint32_t> prefer) {
  EMBER_RETURN_IF_ERROR(queue_.push(request, name_of(model), now_us));
  if (prefer && *prefer < devices_.size()) prefer_[request] = *prefer;
  return Status::OK();
}

Status SwapController::requeue(uint64_t request, const model_key& key, int64_t arrival_us, bool alone) {
  ++counters_.requeued;
  const std::string& model = name_of(key);
  EMBER_RETURN_IF_ERROR(queue_.push(request, model, arrival_us));
  if (alone && alone_.emplace(request, model).second) ++alone_models_[model];
  return Status::OK();
}

std::vector<DeviceState> SwapController::states() const {
  std::vector<DeviceState> out(devices_.size());
  for (size_t d = 0; d < devices_.size(); ++d) {
    const Device& dev = devices_[d];
    out[d].executing = dev.executing || !dev.up || dev.lent;  // a device down or lent takes nothing
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
    if (decision->action != SwapAction::run && m->second.max_devices > 0) {
      // Model-level scaling holds it to max_devices copies: it waits for one of them.
      size_t copies = 0;
      for (const auto& dev : devices_) copies += dev.up && dev.replicas.count(model);
      if (copies >= m->second.max_devices) return std::nullopt;
    }
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
  bool alone = false;
  if (auto a = alone_.find(q.id); a != alone_.end()) {
    if (--alone_models_[a->second] == 0) alone_models_.erase(a->second);
    alone_.erase(a);
    alone = true;
  }
  SwapDispatch out;
  out.request = q.id;
  out.model = key_of(q.model);
  out.arrival_us = q.arrival_us;
  out.device = *plan.decision.device;
  out.action = plan.decision.action;
  out.source = plan.decision.source;
  out.reason = plan.decision.reason;
  for (const auto& f : plan.fallback) out.fallback.push_back(key_of(f));
  Device& dev = devices_[out.device];
  out.life = dev.life;
  dev.executing = true;
  dev.primary = q.model;
  dev.alone = alone;
  count_run(dev, out);
  dev.may_evict.insert(plan.fallback.begin(), plan.fallback.end());
  for (const auto& v : plan.evict) {
    out.evict.push_back(key_of(v.model));
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

std::vector<SwapDispatch> SwapController::dispatch(int64_t now_us, const BatchJoin& join) {
  std::vector<SwapDispatch> out;
  std::map<std::string, std::optional<Plan>> plans;  // this round's, by model
  gathering_until_.reset();
  // A model gathering a batch waits while fewer than its preferred batch are queued, until its
  // oldest request has waited max_queue_delay_us, or less when its deadline (less a warm run)
  // comes sooner: the delay never makes the earliest deadline late by itself.
  auto gathering = [&](const std::string& name) {
    auto m = models_.find(name);
    if (m == models_.end() || m->second.max_batch <= 1) return false;
    const SwapModel& sm = m->second;
    if (!sm.batch_us.empty()) {
      // Adaptive (Algorithm 3): wait while the oldest, in a batch of one more, still meets its
      // deadline; a batch as large as the device takes goes at once.
      auto oldest = queue_.oldest_arrival(name);
      const size_t queued = queue_.queued(name);
      if (!oldest || sm.deadline_us == 0 || queued >= sm.max_batch) return false;
      const size_t next = std::min(queued + 1, sm.batch_us.size());
      const int64_t until =
          *oldest + static_cast<int64_t>(sm.deadline_us) - static_cast<int64_t>(std::ceil(sm.batch_us[next - 1]));
      if (now_us >= until) return false;
      gathering_until_ = gathering_until_ ? std::min(*gathering_until_, until) : until;
      return true;
    }
    if (sm.max_queue_delay_us == 0) return false;
    const size_t want = sm.preferred_batch ? sm.preferred_batch : sm.max_batch;
    auto oldest = queue_.oldest_arrival(name);
    if (!oldest || queue_.queued(name) >= want) return false;
    int64_t until = *oldest + static_cast<int64_t>(sm.max_queue_delay_us);
    if (sm.deadline_us) {
      until = std::min(until, *oldest + static_cast<int64_t>(sm.deadline_us) - static_cast<int64_t>(sm.warm_us));
    }
    if (now_us >= until) return false;
    gathering_until_ = gathering_until_ ? std::min(*gathering_until_, until) : until;
    return true;
  };
  for (;;) {
    const bool any_free =
        std::any_of(devices_.begin(), devices_.end(), [](const Device& d) { return d.up && !d.lent && !d.executing; });
    if (!any_free) break;
    plans.clear();
    const auto st = states();  // one snapshot per dispatched request, shared by the models it tries
    auto q = queue_.pop_if(now_us, [&](const std::string& model) {
      if (gathering(model)) return false;
      auto it = plans.find(model);
      if (it == plans.end()) it = plans.emplace(model, plan_for(model, st)).first;
      return it->second.has_value();
    });
    if (!q) break;
    Plan plan = *plans.at(q->model);
    if (auto p = prefer_.find(q->id); p != prefer_.end()) {
      const uint32_t want = p->second;
      prefer_.erase(p);
      const Device& dev = devices_[want];
      auto r = dev.replicas.find(q->model);
      if (want != *plan.decision.device && dev.up && !dev.lent && !dev.executing && r != dev.replicas.end() &&
          !r->second.swapping_in && !dev.may_evict.count(q->model)) {
        plan = Plan{};
        plan.decision.action = SwapAction::run;
        plan.decision.device = want;
        plan.decision.reason = "resident where its inputs are (a workflow's hand-off)";
      }
    }
    SwapDispatch d = start(*q, plan);
    const SwapModel& m = models_.at(q->model);
    if (m.max_batch > 1 && join) {
      if (auto filter = join(*q)) d.batch = queue_.pop_more(now_us, q->model, m.max_batch - 1, filter);
    }
    out.push_back(std::move(d));
  }
  // Beside: requests of other models resident on busy devices run there at once (see the header).
  while (options_.streams > 1) {
    std::optional<uint32_t> target;
    auto q = queue_.pop_if(now_us, [&](const std::string& model) {
      // A batching model's waiting requests do better as one batch when a device frees.
      auto m = models_.find(model);
      if (m == models_.end() || m->second.max_batch > 1 || alone_models_.count(model)) return false;
      target.reset();
      for (uint32_t i = 0; i < devices_.size(); ++i) {
        if (!admits_beside(devices_[i], m->second)) continue;
        if (!target || devices_[i].beside < devices_[*target].beside) target = i;
      }
      return target.has_value();
    });
    if (!q) break;
    SwapDispatch d = run_on_busy(*q, *target, "resident on a busy device with room: runs beside its current request");
    Device& dev = devices_[*target];
    ++dev.beside;
    ++counters_.beside;
    d.beside = true;
    count_run(dev, d);
    out.push_back(std::move(d));
  }
  // Run-ahead: requests of models resident on busy devices queue behind what runs there.
  while (options_.run_ahead > 0) {
    std::optional<uint32_t> target;
    auto q = queue_.pop_if(now_us, [&](const std::string& model) {
      // A batching model's waiting requests do better as one batch when the device frees.
      if (auto m = models_.find(model); m == models_.end() || m->second.max_batch > 1) return false;
      if (alone_models_.count(model)) return false;  // it waits to run as a device's own request
      target.reset();
      for (uint32_t i = 0; i < devices_.size(); ++i) {
        const Device& dev = devices_[i];
        if (!dev.up || !dev.executing || dev.behind >= options_.run_ahead || dev.may_evict.count(model)) continue;
        // With runs beside, only the primary's own model queues behind it: another would run at once.
        if (options_.streams > 1 && dev.primary != model) continue;
        auto r = dev.replicas.find(model);
        if (r == dev.replicas.end() || r->second.swapping_in) continue;
        if (!target || dev.behind < devices_[*target].behind) target = i;
      }
      return target.has_value();
    });
    if (!q) break;
    ++devices_[*target].behind;
    // Never a batch: batching models do not run ahead.
    out.push_back(run_on_busy(*q, *target, "resident on a busy device: runs behind its current request"));
  }
  return out;
}

SwapDispatch SwapController::run_on_busy(const placement::QueuedRequest& q, uint32_t device, const char* reason) {
  prefer_.erase(q.id);
  Device& dev = devices_[device];
  dev.replicas[q.model].last_use = ++tick_;
  ++counters_.runs;
  SwapDispatch d;
  d.request = q.id;
  d.model = key_of(q.model);
  d.arrival_us = q.arrival_us;
  d.device = device;
  d.action = SwapAction::run;
  d.life = dev.life;
  d.reason = reason;
  return d;
}

void SwapController::ran_inline(const model_key& key, uint32_t device, uint64_t latency_us, int64_t now_us) {
  const std::string& model = name_of(key);
  if (device >= devices_.size() || !models_.count(model)) return;
  auto it = devices_[device].replicas.find(model);
  if (it == devices_[device].replicas.end()) return;
  it->second.last_use = ++tick_;
  ++counters_.runs;
  queue_.record(model, latency_us, now_us);
}

void SwapController::finish(const SwapDispatch& d, const SwapOutcome& o, uint64_t latency_us, int64_t now_us) {
  Device& dev = devices_[d.device];
  const std::string& model = name_of(d.model);
  if (d.beside) {
    if (d.life == dev.life) {
      --dev.beside;
      uncount_run(dev, d);
      if (o.fault) {
        ++counters_.faults;
        device_down(d.device);
        return;
      }
      if (auto it = dev.replicas.find(model); it != dev.replicas.end()) it->second.last_use = ++tick_;
    }
    if (o.answered && !o.fault) queue_.record(model, latency_us, now_us);
    return;
  }
  if (d.life != dev.life) {
    // Dispatched before the device faulted (a run queued behind the faulting one): its state was
    // reset then; only the source's lock and the outcome remain to account for.
    if (d.source) {
      Device& src = devices_[*d.source];
      if (auto it = src.locks.find(model); it != src.locks.end() && --it->second == 0) src.locks.erase(it);
    }
    if (o.answered && !o.fault) queue_.record(model, latency_us, now_us);
    return;
  }
  uncount_run(dev, d);
  // Answers come in dispatch order: while runs wait behind this one, the device stays busy.
  if (dev.behind > 0 && !o.fault) {
    --dev.behind;
  } else {
    dev.executing = false;
    dev.behind = 0;
    dev.primary.clear();
    dev.alone = false;
  }
  dev.loading = {};
  dev.may_evict.clear();
  if (d.source) {
    Device& src = devices_[*d.source];
    if (auto it = src.locks.find(model); it != src.locks.end() && --it->second == 0) src.locks.erase(it);
  }
  if (o.fault) {
    ++counters_.faults;
    device_down(d.device);
    return;
  }
  for (const auto& key : o.evicted) {
    auto it = dev.replicas.find(name_of(key));
    if (it == dev.replicas.end()) continue;
    dev.replicas.erase(it);
    ++counters_.evictions;
  }
  auto it = dev.replicas.find(model);
  if (o.resident && models_.count(model)) {
    Replica& r = dev.replicas[model];
    r.swapping_in = false;
    r.bytes = o.footprint;
    r.last_use = ++tick_;
  } else if (it != dev.replicas.end()) {
    dev.replicas.erase(it);
  }
  dev.free = o.pool_free;
  if (!o.answered) return;
  queue_.record(model, latency_us, now_us);
  for (const auto& q : d.batch)
    queue_.record(model, static_cast<uint64_t>(std::max<int64_t>(0, now_us - q.arrival_us)), now_us);
}

void SwapController::device_down(uint32_t device) {
  Device& dev = devices_[device];
  dev.up = false;
  dev.executing = false;
  dev.behind = 0;
  dev.primary.clear();
  dev.alone = false;
  dev.beside = 0;
  dev.activations = 0;
  dev.running.clear();
  ++dev.life;
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

std::vector<model_key> SwapController::resident(uint32_t device) const {
  std::vector<model_key> out;
  for (const auto& [name, r] : devices_.at(device).replicas) {
    if (!r.swapping_in) out.push_back(key_of(name));
  }
  return out;
}

}  // namespace ember
