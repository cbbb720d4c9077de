// RequestTrace: the requests a simulation replays, read from a CSV file (issue 36;
// docs/design/simulator.md). Mapping a public trace to models and rates is the scripts' work
// (bench/autoscale_replay.py writes the same schedule it replays on the live cluster, so the
// simulator and the cluster see the same requests); the simulator takes the result:
//
//   time_s,model
//   0.0132,f07_1a2b3c4d
//   0.4410,f02_99aa00bb
//
// One request per line: seconds from the start (a decimal, 0 or more) and the model's name (as in
// the repository: letters, digits, '_', '-', '.'; at most 128 characters). A header line `time_s,model`
// is required first; blank lines and lines starting with '#' are skipped; CRLF is accepted. Lines may
// come in any order: the trace is sorted by time, ties kept in file order (a stable sort), so a
// replay is a function of the file.
//
// Errors (invalid_argument, naming the line): a missing or different header, a line without
// exactly two fields, a time that is not a finite decimal of 0 or more, or past 30 days, an empty
// or malformed name, more than `max_requests` requests. io_error/not_found for a file that cannot
// be read. Plain, no clock; memory is one entry per request plus one name per model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace ember::sim {

struct TraceRequest {
  uint64_t at_us;  // from the trace's start
  uint32_t model;  // index into RequestTrace::models
};

struct RequestTrace {
  std::vector<std::string> models;     // in order of first appearance in the file
  std::vector<TraceRequest> requests;  // by time, ties in file order

  /// The span from 0 to the last request, microseconds (0 when empty).
  uint64_t duration_us() const { return requests.empty() ? 0 : requests.back().at_us; }
};

/// The most requests a trace may hold by default (an hour at about 28,000 requests per second).
inline constexpr size_t kMaxTraceRequests = 100'000'000;

Result<RequestTrace> parse_request_trace(std::string_view csv, std::string_view source,
                                         size_t max_requests = kMaxTraceRequests);
Result<RequestTrace> load_request_trace(const std::string& path, size_t max_requests = kMaxTraceRequests);

}  // namespace ember::sim
