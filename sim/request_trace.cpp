#include "sim/request_trace.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include "base/read_file.hpp"

namespace ember::sim {

namespace {

constexpr double kMaxSeconds = 30.0 * 24 * 3600;
constexpr size_t kMaxName = 128;

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxName) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

}  // namespace

Result<RequestTrace> parse_request_trace(std::string_view csv, std::string_view source, size_t max_requests) {
  RequestTrace trace;
  std::unordered_map<std::string, uint32_t> index;
  bool header = false;
  size_t line_no = 0;
  auto at = [&](const std::string& what) {
    return invalid_argument(std::string(source) + ":" + std::to_string(line_no) + ": " + what);
  };
  while (!csv.empty()) {
    const size_t end = csv.find('\n');
    std::string_view line = csv.substr(0, end);
    csv = end == std::string_view::npos ? std::string_view() : csv.substr(end + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    if (!header) {
      if (line != "time_s,model") return at("the first line must be the header 'time_s,model'");
      header = true;
      continue;
    }
    const size_t comma = line.find(',');
    if (comma == std::string_view::npos || line.find(',', comma + 1) != std::string_view::npos) {
      return at("a request is 'time_s,model': two fields");
    }
    const std::string_view time = line.substr(0, comma), name = line.substr(comma + 1);
    double seconds = 0;
    const auto r = std::from_chars(time.data(), time.data() + time.size(), seconds);
    if (time.empty() || r.ec != std::errc() || r.ptr != time.data() + time.size() || !std::isfinite(seconds) ||
        seconds < 0 || seconds > kMaxSeconds) {
      return at("'" + std::string(time) + "' is not a time in seconds between 0 and 30 days");
    }
    if (!valid_name(name)) {
      return at("'" + std::string(name.substr(0, kMaxName)) +
                "' is not a model name (1 to 128 letters, digits, '_', '-' or '.')");
    }
    if (trace.requests.size() >= max_requests) {
      return at("more than " + std::to_string(max_requests) + " requests");
    }
    auto [it, fresh] = index.try_emplace(std::string(name), static_cast<uint32_t>(trace.models.size()));
    if (fresh) trace.models.emplace_back(name);
    trace.requests.push_back(TraceRequest{static_cast<uint64_t>(std::llround(seconds * 1e6)), it->second});
  }
  if (!header) return invalid_argument(std::string(source) + ": empty: no 'time_s,model' header");
  std::stable_sort(trace.requests.begin(), trace.requests.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.at_us < b.at_us; });
  return trace;
}

Result<RequestTrace> load_request_trace(const std::string& path, size_t max_requests) {
  // A request's line is at most 10 + 1 + 128 + 2 bytes: what max_requests of them can take.
  EMBER_ASSIGN_OR_RETURN(std::string text, read_file(path, (max_requests + 1) * 160 + (1u << 20), "a request trace"));
  return parse_request_trace(text, path, max_requests);
}

}  // namespace ember::sim
