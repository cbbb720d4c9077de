// Parsing and printing of the quantities config files and command lines carry: byte sizes
// ("8GiB", "512MB", "1048576"), bandwidths ("16GB/s", "25Gbit/s") and durations ("250ms", "2s").
//
// Pure: anyone, any thread. Never throws; a value that does not parse is an invalid_argument
// Error whose message quotes the text. Binary suffixes (KiB, MiB, GiB, TiB) are powers of 1024,
// decimal ones (KB, MB, GB, TB) powers of 1000, as IEC 80000-13 has it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace ember {

/// "8GiB" -> 8589934592. A bare number is bytes. Fractions are allowed ("1.5GiB").
Result<uint64_t> parse_bytes(std::string_view text);

/// "16GB/s" -> 16e9 bytes per second; "10Gbit/s" -> 1.25e9. "0" means unlimited.
Result<double> parse_bandwidth(std::string_view text);

/// "250ms" -> 250000, "2s" -> 2000000, "100us" -> 100. A bare number is microseconds.
Result<uint64_t> parse_duration_us(std::string_view text);

/// 250000 -> "250ms", 90000000 -> "90s", 1500 -> "1500us": the largest unit (h, min, s, ms, us)
/// that shows it exactly, so parse_duration_us reads it back.
std::string format_duration(uint64_t us);

/// A finite decimal number: "1.3", "2", "1e2". Ranges are the caller's to check.
Result<double> parse_number(std::string_view text);

/// 1536 -> "1.5 KiB"; exact below 1 KiB ("512 B").
std::string format_bytes(uint64_t bytes);

}  // namespace ember
