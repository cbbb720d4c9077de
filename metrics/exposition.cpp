// The Prometheus text exposition format, version 0.0.4: names, escaping, and render() (see
// metrics.hpp).
#include <charconv>
#include <cmath>

#include "metrics/metrics.hpp"

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

bool valid_bucket_bounds(const std::vector<double>& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) return false;
    if (i && !(bounds[i - 1] < bounds[i])) return false;
  }
  return true;
}

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

}  // namespace ember::metrics
