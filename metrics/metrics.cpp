#include "metrics/metrics.hpp"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <set>

namespace ember::metrics {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 (overlong forms, surrogates, code points
// above U+10FFFF and truncated sequences are invalid).
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void append_escaped(std::string& out, std::string_view s, bool escape_quote) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD: the exposition must be UTF-8
      ++i;
      continue;
    }
    const char c = s[i];
    if (n == 1 && c == '\\') {
      out += "\\\\";
    } else if (n == 1 && c == '\n') {
      out += "\\n";
    } else if (n == 1 && c == '"' && escape_quote) {
      out += "\\\"";
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
}

// Shortest text that reads back to the same double; NaN, +Inf and -Inf as the format spells them.
void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out.append(buf, r.ptr);
  }
}

void append_value(std::string& out, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// `{a="x",b="y"}`, with an optional trailing le; nothing when there are no labels at all.
void append_labels(std::string& out, const std::vector<std::string>& names, const std::vector<std::string>& values,
                   const std::string* le) {
  if (names.empty() && !le) return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ',';
    out += names[i];
    out += "=\"";
    append_escaped(out, values[i], true);
    out += '"';
  }
  if (le) {
    if (!names.empty()) out += ',';
    out += "le=\"";
    out += *le;
    out += '"';
  }
  out += '}';
}

void append_sample(std::string& out, std::string_view name, std::string_view suffix, const FamilySnapshot& f,
                   const SeriesSnapshot& s, const std::string* le) {
  out += name;
  out += suffix;
  append_labels(out, f.label_names, s.label_values, le);
  out += ' ';
}

bool strictly_increasing_finite(const std::vector<double>& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) return false;
    if (i && !(bounds[i - 1] < bounds[i])) return false;
  }
  return true;
}

void fill(SeriesSnapshot& s, const Counter& c) { s.value = c.value(); }
void fill(SeriesSnapshot& s, const Gauge& g) { s.value = g.value(); }
void fill(SeriesSnapshot& s, const Histogram& h) {
  s.bucket_counts = h.cumulative_counts();
  s.count = s.bucket_counts.back();
  s.sum = h.sum();
}

}  // namespace

std::string_view to_string(MetricType type) {
  switch (type) {
    case MetricType::counter:
      return "counter";
    case MetricType::gauge:
      return "gauge";
    case MetricType::histogram:
      return "histogram";
  }
  return "untyped";
}

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

bool is_valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool is_valid_label_name(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  append_escaped(out, value, true);
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  append_escaped(out, help, false);
  return out;
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

// ---- rendering --------------------------------------------------------------------------------------

std::string render(const MetricsSnapshot& snapshot) {
  std::string out;
  for (const FamilySnapshot& f : snapshot.families) {
    if (f.series.empty()) continue;
    const bool histogram = f.type == MetricType::histogram;
    out += "# HELP ";
    out += f.name;
    out += ' ';
    append_escaped(out, f.help, false);
    out += "\n# TYPE ";
    out += f.name;
    out += ' ';
    out += to_string(f.type);
    out += '\n';

    std::vector<std::string> le;  // the bounds as text, once per family
    if (histogram) {
      for (double b : f.bucket_bounds) {
        std::string t;
        append_value(t, b);
        le.push_back(std::move(t));
      }
      le.emplace_back("+Inf");
    }
    for (const SeriesSnapshot& s : f.series) {
      if (s.label_values.size() != f.label_names.size()) continue;
      if (!histogram) {
        append_sample(out, f.name, "", f, s, nullptr);
        append_value(out, s.value);
        out += '\n';
        continue;
      }
      if (s.bucket_counts.size() != le.size()) continue;
      for (size_t i = 0; i < le.size(); ++i) {
        append_sample(out, f.name, "_bucket", f, s, &le[i]);
        append_value(out, s.bucket_counts[i]);
        out += '\n';
      }
      append_sample(out, f.name, "_sum", f, s, nullptr);
      append_value(out, s.sum);
      out += '\n';
      append_sample(out, f.name, "_count", f, s, nullptr);
      append_value(out, s.count);
      out += '\n';
    }
  }
  return out;
}

// ---- merging ----------------------------------------------------------------------------------------

namespace {

// Why a family from another process cannot be used, or empty. `renamed` gets its label names with
// `label` renamed to exported_<label>.
std::string check_family(const FamilySnapshot& f, std::string_view label, std::vector<std::string>& renamed) {
  if (!is_valid_metric_name(f.name)) return "not a valid metric name";
  if (f.type != MetricType::counter && f.type != MetricType::gauge && f.type != MetricType::histogram) {
    return "unknown metric type " + std::to_string(static_cast<int>(f.type));
  }
  renamed.clear();
  for (const std::string& n : f.label_names) {
    if (!is_valid_label_name(n)) return "label name '" + n + "' is not valid";
    if (f.type == MetricType::histogram && n == "le") return "histogram with a label named le";
    renamed.push_back(n == label ? "exported_" + n : n);
  }
  for (size_t i = 0; i < renamed.size(); ++i) {
    if (renamed[i] == label) return "label names repeat";
    for (size_t j = 0; j < i; ++j) {
      if (renamed[i] == renamed[j]) return "label names repeat";
    }
  }
  if (f.type == MetricType::histogram && !strictly_increasing_finite(f.bucket_bounds)) {
    return "bucket bounds are not finite and strictly increasing";
  }
  return {};
}

std::string check_series(const FamilySnapshot& f, const SeriesSnapshot& s) {
  if (s.label_values.size() != f.label_names.size()) return "wrong number of label values";
  if (f.type != MetricType::histogram) return {};
  if (s.bucket_counts.size() != f.bucket_bounds.size() + 1) return "wrong number of buckets";
  for (size_t i = 1; i < s.bucket_counts.size(); ++i) {
    if (s.bucket_counts[i] < s.bucket_counts[i - 1]) return "bucket counts are not cumulative";
  }
  if (s.bucket_counts.back() != s.count) return "count differs from the +Inf bucket";
  return {};
}

std::string describe(const std::vector<std::string>& values) {
  std::string s = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += ',';
    s += '"';
    append_escaped(s, values[i], true);
    s += '"';
  }
  return s + "}";
}

}  // namespace

MergedMetrics merge_snapshots(const std::vector<NodeMetrics>& nodes, std::string_view label) {
  assert(is_valid_label_name(label));
  struct Merged {
    FamilySnapshot family;
    std::string first_node;
    std::set<std::vector<std::string>> seen;
  };
  std::map<std::string, Merged, std::less<>> merged;
  std::set<std::string, std::less<>> seen_nodes;
  MergedMetrics out;
  std::vector<std::string> renamed;

  for (const NodeMetrics& nm : nodes) {
    if (nm.node.empty()) {
      out.skipped.push_back("a snapshot without a node name");
      continue;
    }
    if (!seen_nodes.insert(nm.node).second) {
      out.skipped.push_back(nm.node + ": a second snapshot from the same node");
      continue;
    }
    for (const FamilySnapshot& f : nm.metrics.families) {
      const std::string at = nm.node + ": " + f.name + ": ";
      if (std::string why = check_family(f, label, renamed); !why.empty()) {
        out.skipped.push_back(at + why);
        continue;
      }
      std::vector<std::string> label_names{std::string(label)};
      label_names.insert(label_names.end(), renamed.begin(), renamed.end());
      const std::vector<double> bounds = f.type == MetricType::histogram ? f.bucket_bounds : std::vector<double>{};

      auto it = merged.find(f.name);
      if (it == merged.end()) {
        Merged m{FamilySnapshot{f.name, f.help, f.type, label_names, bounds, {}}, nm.node, {}};
        it = merged.emplace(f.name, std::move(m)).first;
      }
      Merged& m = it->second;
      if (m.family.type != f.type) {
        out.skipped.push_back(at + "type " + std::string(to_string(f.type)) + " conflicts with " +
                              std::string(to_string(m.family.type)) + " (first seen from " + m.first_node + ")");
        continue;
      }
      if (m.family.label_names != label_names) {
        out.skipped.push_back(at + "label names differ from those first seen from " + m.first_node);
        continue;
      }
      if (m.family.bucket_bounds != bounds) {
        out.skipped.push_back(at + "bucket bounds differ from those first seen from " + m.first_node);
        continue;
      }
      for (const SeriesSnapshot& s : f.series) {
        if (std::string why = check_series(f, s); !why.empty()) {
          out.skipped.push_back(at + "series " + describe(s.label_values) + ": " + why);
          continue;
        }
        SeriesSnapshot copy = s;
        copy.label_values.insert(copy.label_values.begin(), nm.node);
        if (f.type != MetricType::histogram) {
          copy.bucket_counts.clear();
          copy.sum = 0;
          copy.count = 0;
        } else {
          copy.value = 0;
        }
        if (!m.seen.insert(copy.label_values).second) {
          out.skipped.push_back(at + "series " + describe(s.label_values) + ": appears twice");
          continue;
        }
        m.family.series.push_back(std::move(copy));
      }
    }
  }

  out.metrics.families.reserve(merged.size());
  for (auto& [name, m] : merged) {
    std::sort(m.family.series.begin(), m.family.series.end(),
              [](const SeriesSnapshot& a, const SeriesSnapshot& b) { return a.label_values < b.label_values; });
    out.metrics.families.push_back(std::move(m.family));
  }
  return out;
}

}  // namespace ember::metrics
