#include "sim/sim_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace ember::sim {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// A JSON string literal (names are the repository's; quotes and controls escaped all the same).
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// XML text (a title, a model's name).
std::string xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

constexpr const char* kTiers[] = {"cache", "peer", "repository"};
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

}  // namespace

SimSummary summarize(const SimResult& result, const std::vector<uint64_t>& slo_us) {
  SimSummary s;
  std::vector<uint64_t> lat;
  uint64_t good = 0;
  double sum = 0;
  for (const auto& r : result.requests) {
    ++s.requests;
    s.cold_requests += r.cold ? 1 : 0;
    s.retried += r.retries > 0 ? 1 : 0;
    if (r.lost) {
      ++s.lost;
      continue;
    }
    const uint64_t e2e = r.end_us - r.arrival_us;
    lat.push_back(e2e);
    sum += static_cast<double>(e2e);
    if (r.model < slo_us.size() && e2e <= slo_us[r.model]) ++good;
  }
  if (!lat.empty()) {
    std::sort(lat.begin(), lat.end());
    auto rank = [&](double p) {
      const size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(lat.size())));
      return static_cast<double>(lat[std::max<size_t>(k, 1) - 1]) / 1000;
    };
    s.mean_ms = sum / static_cast<double>(lat.size()) / 1000;
    s.p50_ms = rank(0.50);
    s.p99_ms = rank(0.99);
  }
  s.slo_pct = s.requests ? 100.0 * static_cast<double>(good) / static_cast<double>(s.requests) : 0;
  for (const char* t : kTiers) s.tiers[t] = {};
  double all_ms = 0;
  for (const auto& c : result.cold_starts) {
    const double ms = static_cast<double>(c.ready_us - c.started_us) / 1000;
    TierStats& t = s.tiers[c.tier];
    t.mean_ms += ms;  // a sum until the end
    ++t.count;
    all_ms += ms;
    ++s.cold_starts;
  }
  for (auto& [tier, t] : s.tiers) t.mean_ms = t.count ? t.mean_ms / static_cast<double>(t.count) : 0;
  s.cold_start_mean_ms = s.cold_starts ? all_ms / static_cast<double>(s.cold_starts) : 0;
  s.replica_seconds = result.replica_seconds;
  s.max_replicas = result.max_replicas;
  s.chains = result.chains;
  s.pipeline_requests = result.pipeline_requests;
  s.events = result.events;
  s.simulated_s = static_cast<double>(result.end_us) / 1e6;
  return s;
}

std::string summary_header() {
  return "| arm | requests | lost | mean ms | p99 ms | SLO % | cold starts (cache/peer/repo) "
         "| mean cold start ms (cache/peer/repo) | replica-s |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
}

std::string summary_row(const std::string& label, const SimSummary& s) {
  std::string counts, means;
  for (const char* t : kTiers) {
    const TierStats& ts = s.tiers.count(t) ? s.tiers.at(t) : TierStats{};
    counts += (counts.empty() ? "" : "/") + std::to_string(ts.count);
    means += (means.empty() ? "" : "/") + fixed(ts.mean_ms, 0);
  }
  std::ostringstream o;
  o << "| " << label << " | " << s.requests << " | " << s.lost << " | " << fixed(s.mean_ms, 0) << " | "
    << fixed(s.p99_ms, 0) << " | " << fixed(s.slo_pct, 1) << " | " << counts << " | " << means << " | "
    << fixed(s.replica_seconds, 0) << " |\n";
  return o.str();
}

std::string summary_json(const std::string& label, const SimSummary& s) {
  std::ostringstream o;
  o << "{\"label\":" << quoted(label) << ",\"requests\":" << s.requests << ",\"lost\":" << s.lost
    << ",\"mean_ms\":" << fixed(s.mean_ms, 3) << ",\"p50_ms\":" << fixed(s.p50_ms, 3) << ",\"p99_ms\":"
    << fixed(s.p99_ms, 3) << ",\"slo_pct\":" << fixed(s.slo_pct, 3) << ",\"cold_starts\":{";
  bool first = true;
  for (const auto& [tier, t] : s.tiers) {
    o << (first ? "" : ",") << quoted(tier) << ":{\"count\":" << t.count << ",\"mean_ms\":" << fixed(t.mean_ms, 3) << "}";
    first = false;
  }
  o << "},\"cold_start_mean_ms\":" << fixed(s.cold_start_mean_ms, 3) << ",\"replica_seconds\":"
    << fixed(s.replica_seconds, 3) << ",\"max_replicas\":" << s.max_replicas << ",\"chains\":" << s.chains << ",\"pipeline_requests\":" << s.pipeline_requests << ",\"retried\":" << s.retried
    << ",\"events\":" << s.events << ",\"simulated_s\":" << fixed(s.simulated_s, 6) << "}\n";
  return o.str();
}

void write_requests_csv(std::ostream& out, const SimResult& result, const RequestTrace& trace) {
  out << "time_s,model,host,cold,lost,start_s,end_s,latency_ms,retries\n";
  for (const auto& r : result.requests) {
    out << fixed(static_cast<double>(r.arrival_us) / 1e6, 6) << ',' << trace.models.at(r.model) << ',';
    if (r.lost) {
      out << ',' << (r.cold ? 1 : 0) << ",1,,,," << r.retries << '\n';
      continue;
    }
    out << "host" << r.host << ',' << (r.cold ? 1 : 0) << ",0," << fixed(static_cast<double>(r.start_us) / 1e6, 6)
        << ',' << fixed(static_cast<double>(r.end_us) / 1e6, 6) << ','
        << fixed(static_cast<double>(r.end_us - r.arrival_us) / 1000, 3) << ',' << r.retries << '\n';
  }
}

void write_chrome_trace(std::ostream& out, const SimResult& result, const RequestTrace& trace,
                        const std::vector<std::string>& cluster_models, uint64_t from_us, uint64_t to_us) {
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto event = [&](const std::string& body) {
    out << (first ? "" : ",\n") << '{' << body << '}';
    first = false;
  };
  auto overlaps = [&](uint64_t a, uint64_t b) { return a < to_us && b >= from_us; };
  // Threads: 0 = loads; 1 + m = trace model m's requests.
  std::map<std::string, uint32_t> host_pid;
  auto pid_of = [&](const std::string& host) {
    auto [it, added] = host_pid.emplace(host, static_cast<uint32_t>(host_pid.size() + 1));
    if (added) {
      event("\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(it->second) + ",\"args\":{\"name\":" +
            quoted(host) + "}");
      event("\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(it->second) +
            ",\"tid\":0,\"args\":{\"name\":\"loads\"}");
      for (size_t m = 0; m < trace.models.size(); ++m) {
        event("\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(it->second) +
              ",\"tid\":" + std::to_string(m + 1) + ",\"args\":{\"name\":" + quoted(trace.models[m]) + "}");
      }
    }
    return it->second;
  };
  for (const auto& c : result.cold_starts) {
    if (!overlaps(c.started_us, c.ready_us)) continue;
    event("\"ph\":\"X\",\"name\":" + quoted(c.model + " from " + c.tier) + ",\"cat\":\"load\",\"pid\":" +
          std::to_string(pid_of(c.node)) + ",\"tid\":0,\"ts\":" + std::to_string(c.started_us) +
          ",\"dur\":" + std::to_string(c.ready_us - c.started_us) + ",\"args\":{\"bytes\":" + std::to_string(c.bytes) +
          ",\"transfer\":" + std::to_string(c.transfer_id) + "}");
  }
  for (size_t i = 0; i < result.requests.size(); ++i) {
    const auto& r = result.requests[i];
    if (r.lost || !overlaps(r.arrival_us, r.end_us)) continue;
    const uint32_t pid = pid_of("host" + std::to_string(r.host));
    event("\"ph\":\"X\",\"name\":" + quoted(trace.models.at(r.model)) + ",\"cat\":\"request\",\"pid\":" +
          std::to_string(pid) + ",\"tid\":" + std::to_string(r.model + 1) + ",\"ts\":" + std::to_string(r.start_us) +
          ",\"dur\":" + std::to_string(r.end_us - r.start_us) + ",\"args\":{\"request\":" + std::to_string(i) +
          ",\"waited_ms\":" + fixed(static_cast<double>(r.start_us - r.arrival_us) / 1000, 3) +
          ",\"cold\":" + (r.cold ? "true" : "false") + "}");
  }
  for (const auto& s : result.samples) {
    if (s.at_us < from_us || s.at_us >= to_us) continue;
    std::string args;
    for (size_t m = 0; m < s.replicas.size() && m < cluster_models.size(); ++m) {
      if (!args.empty()) args += ',';
      args += quoted(cluster_models[m]);
      args += ':';
      args += std::to_string(s.replicas[m]);
    }
    event("\"ph\":\"C\",\"name\":\"replicas\",\"pid\":0,\"ts\":" + std::to_string(s.at_us) + ",\"args\":{" + args + "}");
  }
  out << "\n]}\n";
}

void write_plot_svg(std::ostream& out, const SimResult& result, const std::vector<std::string>& cluster_models,
                    const std::string& title) {
  constexpr double W = 960, H = 620, L = 70, R = 190, T = 40, gap = 60;
  const double ph = (H - T - gap - 40) / 2;  // each panel's height
  const double pw = W - L - R;
  const double end_s = std::max(1.0, static_cast<double>(result.end_us) / 1e6);
  auto x_of = [&](double s) { return L + pw * s / end_s; };
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << xml(title) << "</text>\n";
  auto axes = [&](double top, const std::string& ylabel) {
    out << "<rect x=\"" << L << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
        << "\" fill=\"none\" stroke=\"black\"/>\n";
    out << "<text transform=\"translate(18," << top + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">" << xml(ylabel)
        << "</text>\n";
    const double step = std::pow(10, std::floor(std::log10(end_s / 2)));
    const double tick = end_s / step > 10 ? step * 2 : step;
    for (double s = 0; s <= end_s + 1e-9; s += tick) {
      out << "<line x1=\"" << x_of(s) << "\" x2=\"" << x_of(s) << "\" y1=\"" << top + ph << "\" y2=\"" << top + ph + 4
          << "\" stroke=\"black\"/><text x=\"" << x_of(s) << "\" y=\"" << top + ph + 16
          << "\" text-anchor=\"middle\">" << fixed(s, s < 10 && tick < 1 ? 1 : 0) << "</text>\n";
    }
  };
  // Panel 1: replicas per model (steps between samples).
  const double top1 = T;
  uint32_t most = 1;
  for (const auto& s : result.samples)
    for (uint32_t r : s.replicas) most = std::max(most, r);
  axes(top1, "replicas");
  auto y1 = [&](double v) { return top1 + ph - ph * v / most; };
  for (uint32_t v = 0; v <= most; v += std::max<uint32_t>(1, most / 5)) {
    out << "<text x=\"" << L - 6 << "\" y=\"" << y1(v) + 4 << "\" text-anchor=\"end\">" << v << "</text>\n";
  }
  size_t shown = 0;  // models with a replica at some sample; the others are left out
  for (size_t m = 0; m < cluster_models.size(); ++m) {
    bool any = false;
    for (const auto& s : result.samples) any = any || (m < s.replicas.size() && s.replicas[m] > 0);
    if (!any) continue;
    // A step line: a point only where the count changes.
    std::string path = "M" + fixed(x_of(0), 1) + "," + fixed(y1(0), 1);
    uint32_t prev = 0;
    for (const auto& s : result.samples) {
      const uint32_t v = m < s.replicas.size() ? s.replicas[m] : 0;
      if (v == prev) continue;
      const double x = x_of(static_cast<double>(s.at_us) / 1e6);
      path += " H" + fixed(x, 1) + " V" + fixed(y1(v), 1);
      prev = v;
    }
    path += " H" + fixed(x_of(end_s), 1);
    const char* color = kColors[shown % std::size(kColors)];
    out << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\"/>\n";
    out << "<text x=\"" << L + pw + 10 << "\" y=\"" << top1 + 14 + 16 * shown << "\" fill=\"" << color << "\">"
        << xml(cluster_models[m]) << "</text>\n";
    ++shown;
  }
  // Panel 2: each second's mean and max end-to-end latency, log scale.
  const double top2 = T + ph + gap;
  axes(top2, "end-to-end ms (log)");
  out << "<text x=\"" << L + pw / 2 << "\" y=\"" << H - 8 << "\" text-anchor=\"middle\">simulated seconds</text>\n";
  const size_t buckets = static_cast<size_t>(std::ceil(end_s)) + 1;
  std::vector<double> sum(buckets, 0), max(buckets, 0);
  std::vector<uint32_t> n(buckets, 0), lost(buckets, 0);
  double lo = 1e300, hi = 0;
  for (const auto& r : result.requests) {
    const size_t b = std::min(buckets - 1, static_cast<size_t>(static_cast<double>(r.arrival_us) / 1e6));
    if (r.lost) {
      ++lost[b];
      continue;
    }
    const double ms = std::max(0.001, static_cast<double>(r.end_us - r.arrival_us) / 1000);
    sum[b] += ms;
    max[b] = std::max(max[b], ms);
    ++n[b];
    lo = std::min(lo, ms);
    hi = std::max(hi, ms);
  }
  if (hi == 0) lo = hi = 1;
  const double d0 = std::floor(std::log10(lo)), d1 = std::max(d0 + 1, std::ceil(std::log10(hi)));
  auto y2 = [&](double ms) { return top2 + ph - ph * (std::log10(ms) - d0) / (d1 - d0); };
  for (double d = d0; d <= d1; ++d) {
    out << "<text x=\"" << L - 6 << "\" y=\"" << y2(std::pow(10, d)) + 4 << "\" text-anchor=\"end\">"
        << fixed(std::pow(10, d), d < 0 ? static_cast<int>(-d) : 0) << "</text>\n";
  }
  std::string mean_path, max_path, lost_marks;
  for (size_t b = 0; b < buckets; ++b) {
    const double x = x_of(static_cast<double>(b) + 0.5);
    if (n[b]) {
      mean_path += (mean_path.empty() ? "M" : " L") + fixed(x, 1) + "," + fixed(y2(sum[b] / n[b]), 1);
      max_path += (max_path.empty() ? "M" : " L") + fixed(x, 1) + "," + fixed(y2(max[b]), 1);
    }
    if (lost[b]) {
      lost_marks += "<text x=\"" + fixed(x, 1) + "\" y=\"" + fixed(top2 + 10, 1) +
                    "\" text-anchor=\"middle\" fill=\"black\" font-size=\"10\">x</text>";
    }
  }
  out << "<path d=\"" << max_path << "\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"0.8\"/>\n"
      << "<path d=\"" << mean_path << "\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.2\"/>\n"
      << lost_marks << "\n";
  out << "<text x=\"" << L + pw + 10 << "\" y=\"" << top2 + 14 << "\" fill=\"#1f77b4\">mean per second</text>\n"
      << "<text x=\"" << L + pw + 10 << "\" y=\"" << top2 + 30 << "\" fill=\"#d62728\">max per second</text>\n"
      << "<text x=\"" << L + pw + 10 << "\" y=\"" << top2 + 46 << "\">x: lost</text>\n</svg>\n";
}

}  // namespace ember::sim
