#include "placement/load_window.hpp"

#include <algorithm>

namespace ember::placement {

LoadWindow::LoadWindow(uint64_t tick_us, uint64_t look_back_us)
    : tick_us_(std::max<uint64_t>(1, tick_us)), look_back_us_(std::max(look_back_us, tick_us_)) {}

void LoadWindow::add(int64_t now_us, const LoadReport& report) {
  if (!entries_.empty()) now_us = std::max(now_us, entries_.back().at_us);
  if (!first_us_) first_us_ = now_us;
  entries_.push_back({now_us, report});
  while (entries_.front().at_us <= now_us - static_cast<int64_t>(look_back_us_)) entries_.pop_front();
  uint64_t busy = 0, done = 0;
  for (const Entry& e : entries_) {
    busy += e.report.busy_us;
    done += e.report.completions;
  }
  if (done > 0) service_time_us_ = busy / done;
}

double LoadWindow::arrival_rate(int64_t now_us) const {
  if (!first_us_) return 0;
  const int64_t from = now_us - static_cast<int64_t>(look_back_us_);
  uint64_t arrivals = 0;
  for (const Entry& e : entries_)
    if (e.at_us > from && e.at_us <= now_us) arrivals += e.report.arrivals;
  const int64_t age = now_us - *first_us_ + static_cast<int64_t>(tick_us_);
  const int64_t span = std::clamp<int64_t>(age, 1, static_cast<int64_t>(look_back_us_));
  return static_cast<double>(arrivals) * 1e6 / static_cast<double>(span);
}

void LoadWindow::fill(int64_t now_us, ModelLoad& load) const {
  load.arrival_rate = arrival_rate(now_us);
  load.service_time_us = service_time_us_;
  load.ongoing = entries_.empty() ? 0 : entries_.back().report.ongoing;
  load.queued = entries_.empty() ? 0 : entries_.back().report.queued;
}

}  // namespace ember::placement
