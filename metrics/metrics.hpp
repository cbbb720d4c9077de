// Ember's metrics: counters, gauges and histograms kept in a registry and rendered in the
// Prometheus text exposition format, version 0.0.4 (what `GET /metrics` on the gateway serves).
//
// Who calls it: any actor or thread. A Registry is thread-safe. Creating a family or a series takes a
// mutex and may allocate; updating a series (Counter::inc, Gauge::set, Histogram::observe) is a few
// relaxed atomic operations on memory of its own, never locks and never allocates, so callers look a
// series up once (`family.with({...})`) and keep the reference: series and families live as long as
// their Registry and never move. Nothing here blocks on I/O, and there is no CAF in this file: the
// actors ship MetricsSnapshot values in messages (a template `inspect` for each is at the bottom).
//
// Model of the data (Prometheus'):
//   family  = name + help + type + label names (+ bucket bounds for a histogram);
//   series  = one value per label-value tuple of its family: `family.with({"mlp", "success"})`.
// A family without label names has exactly one series, created with the family (it renders 0 at once).
//
// Invariants and decisions:
//   - Names follow Prometheus: metric [a-zA-Z_:][a-zA-Z0-9_:]*, label [a-zA-Z_][a-zA-Z0-9_]* not
//     starting with "__"; "le" is reserved for histogram buckets. A bad name, or registering an
//     existing name with another type, other label names or other bounds, is a programmer error:
//     it asserts, and in release builds returns a working family that is never rendered.
//   - Registering an existing name with the same type, labels (and bounds) returns the existing
//     family: two actors may register the same metric independently. The first help text wins.
//   - Series are bounded per family (Registry's `max_series_per_family`, default 10000): label
//     values can come from requests (model names). Overflow policy: `with` returns a sink that is
//     never rendered and counts the refusal in ember_metrics_dropped_series_total{family="..."}.
//   - Counters only go up: a negative or NaN increment is ignored. A NaN observation is ignored by a
//     histogram. Histogram buckets are "less than or equal" (Prometheus `le`), with +Inf implied.
//   - A histogram's count is the sum of its buckets in the same snapshot, so `_count` always equals
//     the +Inf bucket; `_sum` may trail by observations in flight during the snapshot.
//   - Rendering escapes label values (\\, \", \n) and help text (\\, \n), replaces invalid UTF-8 by
//     U+FFFD, and orders families by name and series by label values, so output is deterministic.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::metrics {

enum class MetricType : uint8_t { counter = 0, gauge = 1, histogram = 2 };

/// "counter", "gauge", "histogram": the word of a `# TYPE` line.
std::string_view to_string(MetricType type);

/// The Content-Type of render()'s output, for the gateway's HTTP reply.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

/// Bucket bounds for latencies in seconds: 50us, 100us, 250us, 500us, 1ms, 2.5ms, ... 10s, 30s, 60s
/// (a 1-2.5-5 progression, 19 bounds). Covers a warm inference (tens of us) to a cold start (tens of s).
const std::vector<double>& default_latency_buckets_s();

/// `count` bounds start, start*factor, start*factor^2, ... (start > 0, factor > 1).
std::vector<double> exponential_buckets(double start, double factor, size_t count);

// ---- series: the hot path -------------------------------------------------------------------------

/// A monotonically increasing total. alignas(64): series used by different threads never share a line.
class alignas(64) Counter {
 public:
  /// Adds `v` (default 1); negative or NaN increments are ignored.
  void inc(double v = 1.0) {
    if (v >= 0) value_.fetch_add(v, std::memory_order_relaxed);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

/// A value that goes up and down (queue length, bytes resident).
class alignas(64) Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  void inc(double v = 1.0) { add(v); }
  void dec(double v = 1.0) { add(-v); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

/// Counts observations into buckets with fixed upper bounds (inclusive) and sums them.
class alignas(64) Histogram {
 public:
  /// `bounds` strictly increasing and finite (the Registry checks); +Inf is implied after them.
  explicit Histogram(std::vector<double> bounds);

  /// Counts `v` in the first bucket whose bound is >= v (binary search) and adds it to the sum.
  void observe(double v);

  const std::vector<double>& bounds() const { return bounds_; }
  /// Cumulative counts, one per bound plus +Inf, as exposed in `_bucket{le=...}`.
  std::vector<uint64_t> cumulative_counts() const;
  uint64_t count() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
};

// ---- snapshots: plain data that crosses processes -------------------------------------------------

/// One series at one moment. Counters and gauges use `value`; histograms use the other three.
struct SeriesSnapshot {
  /// Aligned with FamilySnapshot::label_names.
  std::vector<std::string> label_values;
  double value = 0;
  /// Cumulative, one per bucket bound plus the +Inf bucket last (so the last equals `count`).
  std::vector<uint64_t> bucket_counts;
  double sum = 0;
  uint64_t count = 0;

  bool operator==(const SeriesSnapshot&) const = default;
};

struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::counter;
  std::vector<std::string> label_names;
  /// Histograms only: the finite bucket bounds, strictly increasing (+Inf implied).
  std::vector<double> bucket_bounds;
  std::vector<SeriesSnapshot> series;

  bool operator==(const FamilySnapshot&) const = default;
};

struct MetricsSnapshot {
  std::vector<FamilySnapshot> families;

  bool operator==(const MetricsSnapshot&) const = default;
};

/// The exposition text of `snapshot`: per family with at least one series, `# HELP`, `# TYPE`, then
/// its samples. Families and series are written in the order given (a Registry's snapshot and
/// merge_snapshots both sort them). Names and uniqueness are not checked here: a Registry's snapshot
/// and merge_snapshots' output are valid, and snapshots from other processes go through
/// merge_snapshots first. A series of the wrong shape (label or bucket count) is left out, never read
/// out of bounds.
std::string render(const MetricsSnapshot& snapshot);

/// The snapshot of one process, tagged with the name of the node it came from.
struct NodeMetrics {
  std::string node;
  MetricsSnapshot metrics;
};

struct MergedMetrics {
  MetricsSnapshot metrics;
  /// What was left out and why, one line each ("gpu-2: ember_x: type gauge conflicts with counter
  /// (first seen from gpu-1)"), for a log line or a counter; never part of the rendered text.
  std::vector<std::string> skipped;
};

/// Merges the snapshots of many nodes into one, for one exposition. Each series gets a first label
/// `label` (default "node") whose value is its node's name; a family that already has such a label
/// keeps it as "exported_<label>", as Prometheus does with target labels. Families are merged by
/// name: the first node's help, type, label names and bounds define the family; a family from a later
/// node whose type, label names or bounds differ is skipped whole. Snapshots come from other
/// processes, so they are validated here as at any edge: a family with a bad name, label names or
/// bounds, a series of the wrong shape (label count, bucket count, non-monotone buckets, count not
/// equal to the +Inf bucket), a duplicate series, an empty or repeated node name are skipped and
/// listed in `skipped`. Output: families sorted by name, series by label values.
MergedMetrics merge_snapshots(const std::vector<NodeMetrics>& nodes, std::string_view label = "node");

bool is_valid_metric_name(std::string_view name);
bool is_valid_label_name(std::string_view name);
/// Histogram bucket bounds: finite and strictly increasing.
bool valid_bucket_bounds(const std::vector<double>& bounds);

/// Label value escaping of the text format: \ -> \\, " -> \", newline -> \n; invalid UTF-8 -> U+FFFD.
std::string escape_label_value(std::string_view value);
/// Help text escaping: \ -> \\, newline -> \n; invalid UTF-8 -> U+FFFD.
std::string escape_help(std::string_view help);

// ---- families and the registry --------------------------------------------------------------------

class Registry;

namespace detail {
/// What the Registry keeps of any family: its identity and a way to snapshot it.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(label_names)) {}
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  virtual FamilySnapshot snapshot() const = 0;

 private:
  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<std::string> label_names_;
};
}  // namespace detail

/// A family of series of one type (Counter, Gauge or Histogram). Obtained from a Registry.
template <class Series>
class Family final : public detail::FamilyBase {
 public:
  /// The series for these label values (one per label name, in order), created at the first call.
  /// Thread-safe; takes the family's mutex: cache the reference on hot paths. A wrong number of values
  /// is a programmer error (asserts; in release, the unrendered sink). Past the series cap: the sink.
  Series& with(std::initializer_list<std::string_view> label_values);
  Series& with(const std::vector<std::string>& label_values);

  /// Histograms only: the bucket bounds of every series.
  const std::vector<double>& bounds() const { return bounds_; }

  FamilySnapshot snapshot() const override;

 private:
  friend class Registry;
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::vector<double> bounds, size_t max_series, Family<Counter>* dropped);
  Series& find_or_create(std::vector<std::string> key);
  std::unique_ptr<Series> make_series() const;

  std::vector<double> bounds_;
  size_t max_series_;
  Family<Counter>* dropped_;  // where refusals are counted; null for that family itself
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Series>> series_;  // guarded by mu_
  std::unique_ptr<Series> sink_;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

/// The metrics of one process. Thread-safe. Not copyable; families and series handed out stay valid
/// (same address) until it is destroyed.
class Registry {
 public:
  explicit Registry(size_t max_series_per_family = 10'000);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> label_names = {});
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> label_names = {});
  /// `bounds` must be strictly increasing and finite (asserts; in release they are sorted, de-duplicated
  /// and stripped of non-finite values).
  HistogramFamily& histogram(std::string name, std::string help, std::vector<std::string> label_names = {},
                             std::vector<double> bounds = default_latency_buckets_s());

  /// Every registered family (also those without series yet), sorted by name; series sorted by labels.
  MetricsSnapshot snapshot() const;
  /// render(snapshot()).
  std::string render() const;

 private:
  template <class Series>
  Family<Series>& get_or_add(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
                             std::vector<double> bounds);

  const size_t max_series_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<detail::FamilyBase>, std::less<>> families_;  // guarded by mu_
  std::vector<std::unique_ptr<detail::FamilyBase>> detached_;                         // guarded by mu_
  CounterFamily* dropped_ = nullptr;  // ember_metrics_dropped_series_total{family}
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// ---- serialization hooks (CAF 0.17's `inspect`, without including CAF) ----------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SeriesSnapshot& x) {
  return f(x.label_values, x.value, x.bucket_counts, x.sum, x.count);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FamilySnapshot& x) {
  return f(x.name, x.help, x.type, x.label_names, x.bucket_bounds, x.series);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, MetricsSnapshot& x) {
  return f(x.families);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, NodeMetrics& x) {
  return f(x.node, x.metrics);
}

}  // namespace ember::metrics
