#include "base/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <system_error>

namespace ember {
namespace {

struct Suffix {
  std::string_view name;
  double factor;
};

// Splits "1.5GiB" into 1.5 and "GiB"; whitespace between them is allowed.
bool split_number(std::string_view text, double& number, std::string_view& suffix) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.empty()) return false;
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, number);
  if (ec != std::errc() || ptr != text.data() + i || !std::isfinite(number) || number < 0) return false;
  suffix = text.substr(i);
  while (!suffix.empty() && std::isspace(static_cast<unsigned char>(suffix.front()))) suffix.remove_prefix(1);
  return true;
}

template <size_t N>
bool lookup(std::string_view suffix, const Suffix (&table)[N], double& factor) {
  for (const auto& s : table) {
    if (s.name == suffix) {
      factor = s.factor;
      return true;
    }
  }
  return false;
}

}  // namespace

Result<uint64_t> parse_bytes(std::string_view text) {
  static constexpr Suffix kSuffixes[] = {
      {"", 1},         {"B", 1},          {"KB", 1e3},           {"MB", 1e6},
      {"GB", 1e9},     {"TB", 1e12},      {"KiB", 1024.0},       {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"K", 1024.0}, {"M", 1048576.0},
      {"G", 1073741824.0},   {"T", 1099511627776.0}};
  double number = 0, factor = 0;
  std::string_view suffix;
  if (!split_number(text, number, suffix) || !lookup(suffix, kSuffixes, factor)) {
    return invalid_argument("cannot read '" + std::string(text) +
                            "' as a byte size (examples: 8GiB, 512MiB, 4096)");
  }
  double bytes = std::round(number * factor);
  if (bytes > static_cast<double>(std::numeric_limits<uint64_t>::max() / 2)) {
    return invalid_argument("byte size '" + std::string(text) + "' is too large");
  }
  return static_cast<uint64_t>(bytes);
}

Result<double> parse_bandwidth(std::string_view text) {
  static constexpr Suffix kSuffixes[] = {
      {"", 1},           {"B/s", 1},         {"KB/s", 1e3},       {"MB/s", 1e6},
      {"GB/s", 1e9},     {"KiB/s", 1024.0},  {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0},
      {"bit/s", 1.0 / 8}, {"Kbit/s", 1e3 / 8}, {"Mbit/s", 1e6 / 8}, {"Gbit/s", 1e9 / 8},
      {"kbit", 1e3 / 8}, {"mbit", 1e6 / 8},   {"gbit", 1e9 / 8}};
  double number = 0, factor = 0;
  std::string_view suffix;
  if (!split_number(text, number, suffix) || !lookup(suffix, kSuffixes, factor)) {
    return invalid_argument("cannot read '" + std::string(text) +
                            "' as a bandwidth (examples: 16GB/s, 10Gbit/s, 0 for unlimited)");
  }
  return number * factor;
}

Result<double> parse_number(std::string_view text) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || !std::isfinite(v)) {
    return invalid_argument("'" + std::string(text) + "' is not a number");
  }
  return v;
}

Result<uint64_t> parse_duration_us(std::string_view text) {
  static constexpr Suffix kSuffixes[] = {{"", 1},      {"us", 1},      {"ms", 1e3},
                                         {"s", 1e6},   {"min", 60e6},  {"h", 3600e6}};
  double number = 0, factor = 0;
  std::string_view suffix;
  if (!split_number(text, number, suffix) || !lookup(suffix, kSuffixes, factor)) {
    return invalid_argument("cannot read '" + std::string(text) +
                            "' as a duration (examples: 250ms, 2s, 100us)");
  }
  const double us = std::round(number * factor);
  if (us > static_cast<double>(std::numeric_limits<uint64_t>::max() / 2)) {
    return invalid_argument("duration '" + std::string(text) + "' is too large");
  }
  return static_cast<uint64_t>(us);
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f %s", v < 10 ? 2 : (v < 100 ? 1 : 0), v, kUnits[unit]);
  return buf;
}

std::string format_duration(uint64_t us) {
  if (us != 0 && us % 3'600'000'000 == 0) return std::to_string(us / 3'600'000'000) + "h";
  if (us != 0 && us % 60'000'000 == 0) return std::to_string(us / 60'000'000) + "min";
  if (us != 0 && us % 1'000'000 == 0) return std::to_string(us / 1'000'000) + "s";
  if (us != 0 && us % 1'000 == 0) return std::to_string(us / 1'000) + "ms";
  return std::to_string(us) + "us";
}

}  // namespace ember
