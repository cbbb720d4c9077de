#include "actors/cluster/autoscaler_loop.hpp"

#include <algorithm>
#include <utility>

namespace ember {

AutoscalerLoop::AutoscalerLoop(AutoscaleConfig defaults, uint64_t tick_us, uint64_t look_back_us)
    : defaults_(std::move(defaults)), tick_us_(tick_us), look_back_us_(look_back_us) {}

Status AutoscalerLoop::configure(const model_key& key, const AutoscaleOverrides& overrides) {
  auto it = models_.find(key);
  if (it == models_.end()) {
    Model m{defaults_, {}, 0, placement::LoadWindow(tick_us_, look_back_us_), {}, {}, {}, false, 0, false};
    it = models_.emplace(key, std::move(m)).first;
  }
  it->second.own = overrides;
  return apply(key, it->second);
}

Status AutoscalerLoop::apply(const model_key& key, Model& m) {
  auto merged = with_overrides(defaults_, m.own, key.to_string() + "/model.json", "serving.autoscale");
  m.config = merged.ok() ? *merged : defaults_;
  if (m.console_min) m.config.min_replicas = *m.console_min;
  if (m.console_max) m.config.max_replicas = *m.console_max;
  m.config.min_replicas = std::min(std::max(m.config.min_replicas, m.floor), AutoscaleConfig::kMaxReplicas);
  m.config.max_replicas = std::max(m.config.max_replicas, m.config.min_replicas);
  return merged.ok() ? Status::OK() : merged.error();
}

void AutoscalerLoop::set_profiled_service(const model_key& key, uint64_t us) {
  auto it = models_.find(key);
  if (it != models_.end()) it->second.profiled_service_us = us;
}

void AutoscalerLoop::set_capacity(const model_key& key, double rows_per_s) {
  auto it = models_.find(key);
  if (it != models_.end()) it->second.capacity_rps = rows_per_s > 0 ? rows_per_s : 0;
}

void AutoscalerLoop::set_floor(const model_key& key, uint32_t replicas) {
  auto it = models_.find(key);
  if (it == models_.end()) return;
  it->second.floor = replicas;
  (void)apply(key, it->second);  // a bad merge was reported when the model was configured
}

Status AutoscalerLoop::set_bounds(const model_key& key, uint32_t min, std::optional<uint32_t> max) {
  auto it = models_.find(key);
  if (it == models_.end()) return not_found("model " + key.to_string() + " is not autoscaled");
  if (min > AutoscaleConfig::kMaxReplicas || (max && (*max > AutoscaleConfig::kMaxReplicas || *max < min))) {
    return invalid_argument("scale " + key.to_string() + ": " + std::to_string(min) + ".." +
                            (max ? std::to_string(*max) : std::string("max")) + " is not a range within 0.." +
                            std::to_string(AutoscaleConfig::kMaxReplicas));
  }
  it->second.console_min = min;
  it->second.console_max = max;
  return apply(key, it->second);
}

void AutoscalerLoop::forget(const model_key& key) { models_.erase(key); }

const AutoscaleConfig* AutoscalerLoop::config(const model_key& key) const {
  auto it = models_.find(key);
  return it == models_.end() ? nullptr : &it->second.config;
}

void AutoscalerLoop::report(const std::string& reporter, const model_key& key, const placement::LoadReport& r,
                            const std::map<uint64_t, uint32_t>& in_flight, int64_t now_us) {
  auto it = models_.find(key);
  if (it == models_.end()) return;
  placement::LoadReport& sum = it->second.counters;
  sum.arrivals += r.arrivals;
  sum.completions += r.completions;
  sum.busy_us += r.busy_us;
  it->second.gauges[reporter] = Gauges{r.ongoing, r.queued, in_flight, now_us};
}

uint32_t AutoscalerLoop::in_flight(const model_key& key, uint64_t node) const {
  auto it = models_.find(key);
  if (it == models_.end()) return 0;
  uint32_t n = 0;
  for (const auto& [reporter, g] : it->second.gauges) {
    auto f = g.in_flight.find(node);
    if (f != g.in_flight.end()) n += f->second;
  }
  return n;
}

void AutoscalerLoop::cold_start_measured(SourceTier tier, uint64_t us) {
  uint64_t& average = cold_start_us_[static_cast<size_t>(tier)];
  average = average == 0 ? us : (4 * average + us) / 5;  // weight 0.2 for the newest
}

std::vector<AutoscalerLoop::Change> AutoscalerLoop::tick(int64_t now_us,
                                                         const std::function<Supply(const model_key&)>& supply,
                                                         const Room& room) {
  std::vector<Change> changes;
  const int64_t stale_before = now_us - 3 * static_cast<int64_t>(tick_us_);
  for (auto& [key, m] : models_) {
    placement::LoadReport sum = m.counters;
    m.counters = {};
    for (auto g = m.gauges.begin(); g != m.gauges.end();) {
      if (g->second.at_us < stale_before) {
        g = m.gauges.erase(g);  // the reporter went away
        continue;
      }
      sum.ongoing += g->second.ongoing;
      sum.queued += g->second.queued;
      ++g;
    }
    m.window.add(now_us, sum);
    const Supply s = supply(key);
    placement::ModelLoad load;
    m.window.fill(now_us, load);
    if (load.service_time_us == 0) load.service_time_us = m.profiled_service_us;  // none measured yet
    load.ready = s.ready;
    load.pending = s.pending;
    load.cold_start_us = cold_start_us(s.best_tier);
    load.capacity_rps = m.capacity_rps;
    m.load = load;
    placement::ScaleDecision d = placement::decide(m.config, load, m.state, now_us);
    m.desired = d.desired;
    const uint32_t fits = d.action == placement::ScaleAction::up && room ? room(key) : UINT32_MAX;
    if (d.count > fits) {
      if (fits == 0) {
        if (!m.blocked) {
          const std::string why = placement::describe(d, m.config, load) + "; no node has room for another replica";
          changes.push_back({key,
                             placement::ScaleDecision{placement::ScaleAction::keep, 0, d.desired, d.need, d.reason},
                             key.to_string() + ": " + why});
        }
        m.blocked = true;
        continue;
      }
      d.count = fits;
    }
    m.blocked = false;
    if (d.action == placement::ScaleAction::keep) continue;
    changes.push_back({key, d, key.to_string() + ": " + placement::describe(d, m.config, load)});
  }
  return changes;
}

uint32_t AutoscalerLoop::desired(const model_key& key) const {
  auto it = models_.find(key);
  return it == models_.end() ? 0 : it->second.desired;
}

double AutoscalerLoop::expected_queue(const model_key& key, uint64_t cold_start_us) const {
  auto it = models_.find(key);
  if (it == models_.end()) return 0;
  placement::ModelLoad load = it->second.load;
  if (cold_start_us > 0) load.cold_start_us = cold_start_us;
  return placement::expected_backlog(load);
}

std::vector<model_key> AutoscalerLoop::embers_expired(int64_t now_us,
                                                      const std::function<bool(const model_key&)>& ready) {
  std::vector<model_key> out;
  for (auto& [key, m] : models_) {
    if (!m.state.idle_since_us) {
      m.ember_expired = false;  // busy again: a new idle spell may expire later
      continue;
    }
    if (m.ember_expired || now_us - *m.state.idle_since_us < static_cast<int64_t>(m.config.host_keep_alive_us) ||
        !ready(key))
      continue;
    m.ember_expired = true;
    out.push_back(key);
  }
  return out;
}

}  // namespace ember
