// Series, families and the Registry (see metrics.hpp).
#include <algorithm>
#include <cassert>
#include <cmath>

#include "metrics/metrics.hpp"

namespace ember::metrics {
namespace {

void fill(SeriesSnapshot& s, const Counter& c) { s.value = c.value(); }
void fill(SeriesSnapshot& s, const Gauge& g) { s.value = g.value(); }
void fill(SeriesSnapshot& s, const Histogram& h) {
  s.bucket_counts = h.cumulative_counts();
  s.count = s.bucket_counts.back();
  s.sum = h.sum();
}
}  // namespace

const std::vector<double>& default_latency_buckets_s() {
  static const std::vector<double> kBuckets = {50e-6,  100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
                                               100e-3, 250e-3, 500e-3, 1.0,    2.5,  5.0,    10.0, 30.0,  60.0};
  return kBuckets;
}

std::vector<double> exponential_buckets(double start, double factor, size_t count) {
  assert(start > 0 && factor > 1);
  std::vector<double> b;
  b.reserve(count);
  for (double v = start; b.size() < count; v *= factor) b.push_back(v);
  return b;
}

// ---- Histogram --------------------------------------------------------------------------------------

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::cumulative_counts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

uint64_t Histogram::count() const { return cumulative_counts().back(); }

// ---- Family -----------------------------------------------------------------------------------------

template <class Series>
Family<Series>::Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
                       std::vector<double> bounds, size_t max_series, Family<Counter>* dropped)
    : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
      bounds_(std::move(bounds)),
      max_series_(max_series),
      dropped_(dropped),
      sink_(make_series()) {}

template <class Series>
std::unique_ptr<Series> Family<Series>::make_series() const {
  if constexpr (std::is_same_v<Series, Histogram>) {
    return std::make_unique<Histogram>(bounds_);
  } else {
    return std::make_unique<Series>();
  }
}

template <class Series>
Series& Family<Series>::with(std::initializer_list<std::string_view> label_values) {
  std::vector<std::string> key;
  key.reserve(label_values.size());
  for (auto v : label_values) key.emplace_back(v);
  return find_or_create(std::move(key));
}

template <class Series>
Series& Family<Series>::with(const std::vector<std::string>& label_values) {
  return find_or_create(label_values);
}

template <class Series>
Series& Family<Series>::find_or_create(std::vector<std::string> key) {
  assert(key.size() == label_names().size() && "Family::with: one value per label name");
  if (key.size() == label_names().size()) {
    std::lock_guard lock(mu_);
    auto it = series_.find(key);
    if (it != series_.end()) return *it->second;
    if (series_.size() < max_series_) {
      auto& slot = series_[std::move(key)];
      slot = make_series();
      return *slot;
    }
  }
  // Refused (cap reached, or the wrong number of values in a release build). Counted outside our
  // mutex, so no two family mutexes are ever held at once.
  if (dropped_) dropped_->with({std::string_view(name())}).inc();
  return *sink_;
}

template <class Series>
FamilySnapshot Family<Series>::snapshot() const {
  FamilySnapshot f{name(), help(), type(), label_names(), bounds_, {}};
  std::lock_guard lock(mu_);
  f.series.reserve(series_.size());
  for (const auto& [labels, series] : series_) {
    SeriesSnapshot s;
    s.label_values = labels;
    fill(s, *series);
    f.series.push_back(std::move(s));
  }
  return f;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---- Registry ---------------------------------------------------------------------------------------

Registry::Registry(size_t max_series_per_family) : max_series_(std::max<size_t>(1, max_series_per_family)) {
  dropped_ =
      &counter("ember_metrics_dropped_series_total",
               "Series not created because their family reached its series cap; updates to them are lost", {"family"});
}

Registry::~Registry() = default;

template <class Series>
Family<Series>& Registry::get_or_add(std::string name, std::string help, MetricType type,
                                     std::vector<std::string> label_names, std::vector<double> bounds) {
  bool valid = is_valid_metric_name(name);
  for (size_t i = 0; i < label_names.size(); ++i) {
    valid = valid && is_valid_label_name(label_names[i]) && !(type == MetricType::histogram && label_names[i] == "le");
    for (size_t j = 0; j < i; ++j) valid = valid && label_names[i] != label_names[j];
  }
  assert(valid && "metric or label name does not follow Prometheus' rules");

  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (valid && it != families_.end()) {
    // The type decides the series class, so the cast is safe once the types match.
    auto* existing = it->second->type() == type ? static_cast<Family<Series>*>(it->second.get()) : nullptr;
    const bool same = existing && existing->label_names() == label_names && existing->bounds() == bounds;
    assert(same && "metric registered twice with another type, other labels or other bounds");
    if (same) return *existing;
  }
  const bool attach = valid && it == families_.end();
  std::unique_ptr<Family<Series>> family(new Family<Series>(
      std::move(name), std::move(help), type, std::move(label_names), std::move(bounds), max_series_, dropped_));
  Family<Series>& ref = *family;
  if (attach) {
    families_.emplace(ref.name(), std::move(family));
  } else {
    detached_.push_back(std::move(family));  // works, never rendered
  }
  if (ref.label_names().empty()) ref.with({});  // the one series exists (and renders 0) from the start
  return ref;
}

CounterFamily& Registry::counter(std::string name, std::string help, std::vector<std::string> label_names) {
  return get_or_add<Counter>(std::move(name), std::move(help), MetricType::counter, std::move(label_names), {});
}

GaugeFamily& Registry::gauge(std::string name, std::string help, std::vector<std::string> label_names) {
  return get_or_add<Gauge>(std::move(name), std::move(help), MetricType::gauge, std::move(label_names), {});
}

HistogramFamily& Registry::histogram(std::string name, std::string help, std::vector<std::string> label_names,
                                     std::vector<double> bounds) {
  std::vector<double> clean;
  for (double b : bounds) {
    if (std::isfinite(b)) clean.push_back(b);
  }
  std::sort(clean.begin(), clean.end());
  clean.erase(std::unique(clean.begin(), clean.end()), clean.end());
  assert(clean == bounds && "histogram bounds must be finite and strictly increasing");
  return get_or_add<Histogram>(std::move(name), std::move(help), MetricType::histogram, std::move(label_names),
                               std::move(clean));
}

MetricsSnapshot Registry::snapshot() const {
  MetricsSnapshot s;
  std::lock_guard lock(mu_);
  s.families.reserve(families_.size());
  for (const auto& [name, family] : families_) s.families.push_back(family->snapshot());
  return s;
}

std::string Registry::render() const { return metrics::render(snapshot()); }

}  // namespace ember::metrics
