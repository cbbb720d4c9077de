#include "actors/cluster/autoscaler_loop.hpp"

#include <utility>

namespace ember {

AutoscalerLoop::AutoscalerLoop(AutoscaleConfig defaults, uint64_t tick_us, uint64_t look_back_us)
    : defaults_(std::move(defaults)), tick_us_(tick_us), look_back_us_(look_back_us) {}

Status AutoscalerLoop::configure(const model_key& key, const AutoscaleOverrides& overrides) {
  auto it = models_.find(key);
  if (it == models_.end())
    it = models_.emplace(key, Model{defaults_, placement::LoadWindow(tick_us_, look_back_us_), {}, {}}).first;
  auto merged = with_overrides(defaults_, overrides, key.to_string() + "/model.json", "serving.autoscale");
  it->second.config = merged.ok() ? *merged : defaults_;
  return merged.ok() ? Status::OK() : merged.error();
}

void AutoscalerLoop::forget(const model_key& key) { models_.erase(key); }

const AutoscaleConfig* AutoscalerLoop::config(const model_key& key) const {
  auto it = models_.find(key);
  return it == models_.end() ? nullptr : &it->second.config;
}

void AutoscalerLoop::report(const model_key& key, const placement::LoadReport& r) {
  auto it = models_.find(key);
  if (it == models_.end()) return;
  placement::LoadReport& sum = it->second.pending;
  sum.arrivals += r.arrivals;
  sum.completions += r.completions;
  sum.busy_us += r.busy_us;
  sum.ongoing += r.ongoing;
  sum.queued += r.queued;
}

void AutoscalerLoop::cold_start_measured(SourceTier tier, uint64_t us) {
  uint64_t& average = cold_start_us_[static_cast<size_t>(tier)];
  average = average == 0 ? us : (4 * average + us) / 5;  // weight 0.2 for the newest
}

std::vector<AutoscalerLoop::Change> AutoscalerLoop::tick(int64_t now_us,
                                                         const std::function<Supply(const model_key&)>& supply) {
  std::vector<Change> changes;
  for (auto& [key, m] : models_) {
    m.window.add(now_us, m.pending);
    m.pending = {};
    const Supply s = supply(key);
    placement::ModelLoad load;
    m.window.fill(now_us, load);
    load.ready = s.ready;
    load.pending = s.pending;
    load.cold_start_us = cold_start_us(s.best_tier);
    const placement::ScaleDecision d = placement::decide(m.config, load, m.state, now_us);
    if (d.action == placement::ScaleAction::keep) continue;
    changes.push_back({key, d, key.to_string() + ": " + placement::describe(d, m.config, load)});
  }
  return changes;
}

}  // namespace ember
