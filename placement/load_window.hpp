// LoadWindow: one model's recent load, from the counters its gateways and nodes report every tick
// (the caller sums them over the reporters): the arrival rate over a look-back window (Ray Serve's
// look_back_period), the mean execution time of one request, and the latest in-flight and queued
// counts. It fills those fields of the ModelLoad that placement::decide takes; the replica counts
// and the expected cold start are the manager's own.
//
// Pure and plain: the manager's autoscaler loop owns one per model and calls it on its own actor;
// time is the caller's (now_us, its monotonic clock, microseconds). Never blocks, never throws;
// memory is bounded by the ticks in one window.
//
// Each report counts what happened since the previous one, so a window of length W ending at now
// holds the reports made in (now − W, now]. While the model is younger than W, the rate divides by
// its age (from one tick before its first report) instead, so a new model's rate is not understated.
// The execution time is the window's busy time over its completions; a window in which nothing
// completed keeps the last value measured (an idle model still knows how fast it runs).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "placement/autoscaler.hpp"

namespace ember::placement {

/// One tick's counters of one model, summed over the gateways and nodes that report them.
struct LoadReport {
  uint64_t arrivals = 0;     // requests received since the previous report
  uint64_t completions = 0;  // requests executed since the previous report
  uint64_t busy_us = 0;      // their execution time, summed
  uint32_t ongoing = 0;      // in flight or queued at the time of the report
  uint32_t queued = 0;       // of those, not executing yet
};

class LoadWindow {
 public:
  /// `tick_us`: the reporting interval (the span a first report covers); `look_back_us` >= tick_us.
  LoadWindow(uint64_t tick_us, uint64_t look_back_us);

  /// A report made at now_us. Reports come in time order; one earlier than the last is taken as made
  /// at the last one's time.
  void add(int64_t now_us, const LoadReport& report);

  /// Requests per second over the window ending at now_us; 0 before any report.
  double arrival_rate(int64_t now_us) const;
  /// Mean execution time of one request; 0 until one completed.
  uint64_t service_time_us() const { return service_time_us_; }
  /// arrival_rate, ongoing, queued and service_time_us of a ModelLoad; the rest left as they are.
  void fill(int64_t now_us, ModelLoad& load) const;

 private:
  struct Entry {
    int64_t at_us;
    LoadReport report;
  };

  uint64_t tick_us_, look_back_us_;
  std::deque<Entry> entries_;        // the reports of the last window, oldest first
  std::optional<int64_t> first_us_;  // when the first report was made
  uint64_t service_time_us_ = 0;
};

}  // namespace ember::placement
