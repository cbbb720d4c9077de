// Merging the snapshots of many processes into one exposition (see merge_snapshots in metrics.hpp).
#include <algorithm>
#include <cassert>
#include <set>

#include "metrics/metrics.hpp"

namespace ember::metrics {

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
  if (f.type == MetricType::histogram && !valid_bucket_bounds(f.bucket_bounds)) {
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
    s += escape_label_value(values[i]);
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
