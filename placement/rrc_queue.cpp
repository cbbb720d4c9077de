#include "placement/rrc_queue.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <tuple>
#include <utility>

namespace ember::placement {

std::string_view to_string(RrcGroup group) {
  switch (group) {
    case RrcGroup::high: return "high";
    case RrcGroup::low: return "low";
    case RrcGroup::best_effort: return "best_effort";
  }
  return "unknown";
}

double required_request_count(uint64_t n, uint64_t m, double percentile) {
  const double need = percentile * static_cast<double>(n) - static_cast<double>(m);
  if (std::abs(need) <= 1e-9 * static_cast<double>(n)) return 0;  // also n = 0
  return need / (1.0 - percentile);
}

size_t high_group_size(const std::vector<double>& ascending_rrc, double alpha) {
  // Summed in the prefix's order, so at alpha = 1 the last prefix equals the total bit for bit.
  double total = 0;
  for (double r : ascending_rrc) total += std::max(r, 0.0);
  const double limit = alpha * total;
  double prefix = 0;
  size_t k = 0;
  for (double r : ascending_rrc) {
    prefix += std::max(r, 0.0);
    if (prefix > limit) break;  // prefixes only grow: the first one over the limit ends the group
    ++k;
  }
  return k;
}

Status RrcOptions::validate() const {
  if (window_buckets < 1 || window_buckets > 1024) return invalid_argument("window_buckets must be in [1, 1024]");
  if (window_us < static_cast<int64_t>(window_buckets)) return invalid_argument("window_us must be >= window_buckets");
  if (repartition_period_us <= 0) return invalid_argument("repartition_period_us must be positive");
  if (alpha_period_us <= 0) return invalid_argument("alpha_period_us must be positive");
  if (!(min_alpha > 0 && min_alpha <= 1)) return invalid_argument("min_alpha must be in (0, 1]");
  if (!(initial_alpha >= min_alpha && initial_alpha <= 1)) return invalid_argument("initial_alpha < min_alpha or > 1");
  if (!(alpha_scalar > 1) || !std::isfinite(alpha_scalar)) return invalid_argument("alpha_scalar must be > 1");
  if (!(alpha_threshold >= 0 && alpha_threshold < 1)) return invalid_argument("alpha_threshold must be in [0, 1)");
  if (max_queued_per_model < 1 || max_queued_total < 1) return invalid_argument("queue bounds must be >= 1");
  return Status::OK();
}

namespace {
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// The first due time after `now` (>= due), in phase with `due`: missed periods are skipped, not replayed.
int64_t next_after(int64_t due, int64_t period, int64_t now) { return due + ((now - due) / period + 1) * period; }
}  // namespace

RrcQueue::RrcQueue(RrcOptions options)
    : options_(options),
      bucket_us_(std::max<int64_t>(options.window_us / std::max<int64_t>(options.window_buckets, 1), 1)),
      alpha_(options.initial_alpha) {
  assert(options_.validate().ok());
}

Status RrcQueue::register_model(const std::string& name, uint64_t deadline_us, double percentile) {
  if (name.empty()) return invalid_argument("model name is empty");
  if (!(percentile > 0 && percentile < 1)) return invalid_argument("model " + name + ": percentile not in (0, 1)");
  auto [it, fresh] = models_.try_emplace(name);
  Model& m = it->second;
  const bool was_best_effort = !fresh && m.deadline_us == 0;
  unready(m);  // the tier may change below
  m.name = name;
  m.deadline_us = deadline_us;
  m.percentile = percentile;
  if (deadline_us == 0 || fresh || was_best_effort) {  // no window yet: n = 0, RRC 0, high whatever α is
    m.group = deadline_us == 0 ? RrcGroup::best_effort : RrcGroup::high;
    m.rrc = 0;
    m.window_n = m.window_m = 0;
    m.buckets.assign(deadline_us == 0 ? 0 : options_.window_buckets, Bucket{});
  }
  make_ready(m);
  return Status::OK();
}

std::vector<QueuedRequest> RrcQueue::remove_model(std::string_view name) {
  std::vector<QueuedRequest> out;
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  Model& m = it->second;
  unready(m);
  for (const Pending& p : m.fifo) out.push_back({p.id, m.name, p.arrival_us});
  queued_ -= m.fifo.size();
  models_.erase(it);
  return out;
}

Status RrcQueue::push(uint64_t id, std::string_view model, int64_t arrival_us) {
  auto it = models_.find(model);
  if (it == models_.end()) return invalid_argument("unknown model " + std::string(model));
  Model& m = it->second;
  const bool model_full = m.fifo.size() >= options_.max_queued_per_model;
  if (model_full || queued_ >= options_.max_queued_total) {
    count(m, &RrcCounters::rejected);
    return unavailable("queue full for model " + m.name + (model_full ? " (its own bound)" : " (the node's bound)"));
  }
  m.fifo.push_back({id, arrival_us, next_seq_++});
  ++queued_;
  count(m, &RrcCounters::pushed);
  if (m.fifo.size() == 1) make_ready(m);  // otherwise the head, hence the key, is unchanged
  return Status::OK();
}

std::optional<QueuedRequest> RrcQueue::pop_if(int64_t now_us, const ModelFilter& runnable) {
  const int64_t now = advance_clock(now_us);
  Model* m = first_runnable(runnable);
  return m ? std::optional<QueuedRequest>(take_head(*m, now)) : std::nullopt;
}

std::vector<QueuedRequest> RrcQueue::pop_batch(int64_t now_us, size_t max_requests, const ModelFilter& runnable) {
  std::vector<QueuedRequest> out;
  const int64_t now = advance_clock(now_us);
  Model* m = max_requests == 0 ? nullptr : first_runnable(runnable);
  while (m && out.size() < max_requests && !m->fifo.empty()) out.push_back(take_head(*m, now));
  return out;
}

std::vector<QueuedRequest> RrcQueue::pop_more(int64_t now_us, std::string_view model, size_t max_requests,
                                              const RequestFilter& joins) {
  std::vector<QueuedRequest> out;
  const int64_t now = advance_clock(now_us);
  auto it = models_.find(model);
  if (it == models_.end() || max_requests == 0 || it->second.fifo.empty()) return out;
  Model& m = it->second;
  unready(m);
  std::deque<Pending> kept;
  for (const Pending& p : m.fifo) {
    if (out.size() >= max_requests || (joins && !joins(p.id))) {
      kept.push_back(p);
      continue;
    }
    --queued_;
    count(m, &RrcCounters::popped);
    if (m.deadline_us != 0 && now - p.arrival_us > static_cast<int64_t>(m.deadline_us)) {
      count(m, &RrcCounters::late_pops);
    }
    out.push_back({p.id, m.name, p.arrival_us});
  }
  m.fifo = std::move(kept);
  make_ready(m);
  return out;
}

std::optional<int64_t> RrcQueue::oldest_arrival(std::string_view model) const {
  const Model* m = find(model);
  if (!m || m->fifo.empty()) return std::nullopt;
  return m->fifo.front().arrival_us;
}

void RrcQueue::record(std::string_view model, uint64_t latency_us, int64_t now_us) {
  const int64_t now = advance_clock(now_us);
  auto it = models_.find(model);
  if (it == models_.end()) return;
  Model& m = it->second;
  const bool on_time = m.deadline_us == 0 || latency_us <= m.deadline_us;
  count(m, on_time ? &RrcCounters::on_time : &RrcCounters::misses);
  if (m.buckets.empty()) return;  // best effort: no window
  const int64_t index = floor_div(now, bucket_us_);
  const int64_t slots = static_cast<int64_t>(m.buckets.size());
  Bucket& b = m.buckets[static_cast<size_t>(((index % slots) + slots) % slots)];
  if (b.index != index) b = Bucket{index, 0, 0};  // the slot held outcomes that left the window
  ++b.n;
  b.m += on_time;
}

int64_t RrcQueue::tick(int64_t now_us) {
  const int64_t now = advance_clock(now_us);
  if (!started_) next_alpha_us_ = next_repartition_us_ = now;  // the first tick runs both
  started_ = true;
  // α first, so a new α already shapes the groups of the repartition due at the same time.
  if (now >= next_alpha_us_) {
    adjust_alpha(now);
    next_alpha_us_ = next_after(next_alpha_us_, options_.alpha_period_us, now);
  }
  if (now >= next_repartition_us_) {
    repartition(now);
    next_repartition_us_ = next_after(next_repartition_us_, options_.repartition_period_us, now);
  }
  return std::min(next_alpha_us_, next_repartition_us_);
}

double RrcQueue::rrc(std::string_view model) const {
  const Model* m = find(model);
  return m ? m->rrc : 0;
}

std::optional<RrcGroup> RrcQueue::group(std::string_view model) const {
  const Model* m = find(model);
  return m ? std::optional<RrcGroup>(m->group) : std::nullopt;
}

std::optional<RrcModelView> RrcQueue::view(std::string_view model) const {
  const Model* m = find(model);
  return m ? std::optional<RrcModelView>(view_of(*m)) : std::nullopt;
}

std::vector<RrcModelView> RrcQueue::views() const {
  std::vector<RrcModelView> out;
  for (const auto& [name, m] : models_) out.push_back(view_of(m));
  return out;
}

size_t RrcQueue::queued(std::string_view model) const {
  const Model* m = find(model);
  return m ? m->fifo.size() : 0;
}

const RrcQueue::Model* RrcQueue::find(std::string_view model) const {
  auto it = models_.find(model);
  return it == models_.end() ? nullptr : &it->second;
}

void RrcQueue::count(Model& m, uint64_t RrcCounters::*field) {
  ++(m.counters.*field);
  ++(totals_.*field);
}

int64_t RrcQueue::advance_clock(int64_t now_us) {
  clock_us_ = std::max(clock_us_, now_us);
  return clock_us_;
}

std::pair<uint64_t, uint64_t> RrcQueue::window_counts(const Model& m, int64_t now_us) const {
  uint64_t n = 0;
  uint64_t on_time = 0;
  const int64_t newest = floor_div(now_us, bucket_us_);
  const int64_t oldest = newest - static_cast<int64_t>(m.buckets.size()) + 1;
  for (const Bucket& b : m.buckets) {
    if (b.index >= oldest && b.index <= newest) {
      n += b.n;
      on_time += b.m;
    }
  }
  return {n, on_time};
}

RrcQueue::ReadyKey RrcQueue::key_of(Model& m) const {
  assert(!m.fifo.empty());
  const double order = m.group == RrcGroup::high ? -m.rrc : m.group == RrcGroup::low ? m.rrc : 0.0;
  return {static_cast<uint8_t>(m.group), order, m.fifo.front().seq, &m};  // tier: high, low, best effort
}

void RrcQueue::unready(Model& m) {
  if (!m.fifo.empty()) ready_.erase(key_of(m));
}

void RrcQueue::make_ready(Model& m) {
  if (!m.fifo.empty()) ready_.insert(key_of(m));
}

RrcQueue::Model* RrcQueue::first_runnable(const ModelFilter& runnable) const {
  for (const ReadyKey& k : ready_) {
    if (!runnable || runnable(k.model->name)) return k.model;
  }
  return nullptr;
}

QueuedRequest RrcQueue::take_head(Model& m, int64_t now_us) {
  unready(m);
  const Pending p = m.fifo.front();
  m.fifo.pop_front();
  --queued_;
  make_ready(m);
  count(m, &RrcCounters::popped);
  if (m.deadline_us != 0 && now_us - p.arrival_us > static_cast<int64_t>(m.deadline_us)) {
    count(m, &RrcCounters::late_pops);
  }
  return {p.id, m.name, p.arrival_us};
}

// Torpor Algorithm 2, with the absolute ratio change of the paper and a floor on α.
void RrcQueue::adjust_alpha(int64_t now_us) {
  size_t active = 0;
  size_t compliant = 0;
  for (const auto& [name, m] : models_) {
    if (m.buckets.empty()) continue;
    const auto [n, on_time] = window_counts(m, now_us);
    if (n == 0) continue;
    ++active;
    compliant += required_request_count(n, on_time, m.percentile) <= 0;
  }
  if (active == 0) return;  // no signal this period
  const double ratio = static_cast<double>(compliant) / static_cast<double>(active);
  if (last_ratio_) {
    const double change = ratio - *last_ratio_;
    if (change > options_.alpha_threshold) {
      alpha_ = std::min(alpha_ * options_.alpha_scalar, 1.0);
    } else if (change < -options_.alpha_threshold) {
      alpha_ = std::max(alpha_ / options_.alpha_scalar, options_.min_alpha);
    }
  }
  last_ratio_ = ratio;
}

void RrcQueue::repartition(int64_t now_us) {
  std::vector<Model*> slo;
  for (auto& [name, m] : models_) {
    if (m.buckets.empty()) continue;
    std::tie(m.window_n, m.window_m) = window_counts(m, now_us);
    m.rrc = required_request_count(m.window_n, m.window_m, m.percentile);
    slo.push_back(&m);
  }
  // Ascending RRC; equal RRCs by name, so which of two equal models makes the group is stable.
  std::sort(slo.begin(), slo.end(), [](const Model* a, const Model* b) {
    return a->rrc != b->rrc ? a->rrc < b->rrc : a->name < b->name;
  });
  std::vector<double> ascending;
  ascending.reserve(slo.size());
  for (const Model* m : slo) ascending.push_back(m->rrc);
  const size_t k = high_group_size(ascending, alpha_);
  for (size_t i = 0; i < slo.size(); ++i) slo[i]->group = i < k ? RrcGroup::high : RrcGroup::low;
  ready_.clear();
  for (auto& [name, m] : models_) make_ready(m);
}

RrcModelView RrcQueue::view_of(const Model& m) const {
  return {m.name, m.deadline_us, m.percentile, m.group, m.rrc, m.window_n, m.window_m, m.fifo.size(), m.counters};
}

}  // namespace ember::placement
