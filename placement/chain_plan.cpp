#include "placement/chain_plan.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace ember::placement {

std::string_view to_string(HopState state) {
  switch (state) {
    case HopState::receiving: return "receiving";
    case HopState::done: return "done";
    case HopState::failed: return "failed";
    case HopState::spliced_out: return "spliced_out";
  }
  return "unknown";
}

size_t next_upstream_after(const std::vector<std::string>& upstreams, const std::string& failed) {
  for (size_t i = 0; i < upstreams.size(); ++i) {
    if (upstreams[i] == failed) return (i + 1) % upstreams.size();
  }
  return 0;
}

namespace {
bool live(HopState s) { return s == HopState::receiving || s == HopState::done; }
bool pulling(HopState s) { return s == HopState::receiving || s == HopState::spliced_out; }
}  // namespace

ChainPlan::ChainPlan(Chain chain, uint64_t blob_bytes, int64_t now_ms)
    : chain_(std::move(chain)), blob_bytes_(blob_bytes), clock_ms_(now_ms), window_ms_(StallOptions{}.stall_ms) {
  hops_.reserve(chain_.hops.size());
  for (size_t i = 0; i < chain_.hops.size(); ++i) {
    Hop h;
    h.name = chain_.hops[i];
    h.last_advance_ms = now_ms;
    h.judged_from_ms = now_ms;
    h.samples.push_back({now_ms, 0});
    [[maybe_unused]] const bool fresh = index_.emplace(h.name, i).second;
    assert(fresh && !h.name.empty() && h.name != chain_.source);
    hops_.push_back(std::move(h));
  }
}

size_t ChainPlan::upstream_index(size_t i) const {
  for (size_t j = i; j-- > 0;) {
    if (live(hops_[j].state)) return j;
  }
  return kSource;
}

const std::string& ChainPlan::upstream_name(size_t i) const {
  const size_t up = upstream_index(i);
  return up == kSource ? chain_.source : hops_[up].name;
}

// The source, and a done hop, hold everything.
uint64_t ChainPlan::held_by(size_t upstream) const {
  return upstream == kSource ? blob_bytes_ : hops_[upstream].offset;
}

// The offset the hop was known to hold at t_ms: the latest sample at or before it. Before the
// oldest kept sample, the oldest one (pruning keeps one at or before the window start).
uint64_t ChainPlan::offset_at(const Hop& h, int64_t t_ms) const {
  for (auto it = h.samples.rbegin(); it != h.samples.rend(); ++it) {
    if (it->t_ms <= t_ms) return it->offset;
  }
  return h.samples.empty() ? 0 : h.samples.front().offset;
}

void ChainPlan::record(Hop& h, int64_t now_ms) {
  h.samples.push_back({now_ms, h.offset});
  // Keep exactly one sample at or before the window start, and everything after it.
  while (h.samples.size() >= 2 && h.samples[1].t_ms <= clock_ms_ - window_ms_) h.samples.pop_front();
  if (h.samples.size() > kMaxSamplesPerHop) {
    h.samples.erase(h.samples.begin() + 1);
    ++samples_dropped_;
  }
}

void ChainPlan::advance_clock(int64_t now_ms) { clock_ms_ = std::max(clock_ms_, now_ms); }

std::vector<std::string> ChainPlan::upstream_snapshot() const {
  std::vector<std::string> out;
  out.reserve(hops_.size());
  for (size_t i = 0; i < hops_.size(); ++i) out.push_back(upstream_name(i));
  return out;
}

std::vector<Splice> ChainPlan::splices_since(const std::vector<std::string>& before) {
  std::vector<Splice> out;
  for (size_t i = 0; i < hops_.size(); ++i) {
    if (!pulling(hops_[i].state)) continue;
    const std::string& now_up = upstream_name(i);
    if (now_up == before[i]) continue;
    out.push_back({hops_[i].name, now_up});
    hops_[i].judged_from_ms = clock_ms_;  // a reconnect is not a stall
  }
  return out;
}

Result<std::string> ChainPlan::upstream_of(const std::string& hop) const {
  auto it = index_.find(hop);
  if (it == index_.end()) return not_found("chain from '" + chain_.source + "' has no hop '" + hop + "'");
  return upstream_name(it->second);
}

void ChainPlan::on_progress(const std::string& hop, uint64_t offset, int64_t now_ms) {
  advance_clock(now_ms);
  auto it = index_.find(hop);
  if (it == index_.end()) return;
  Hop& h = hops_[it->second];
  if (!pulling(h.state) || offset <= h.offset || offset > blob_bytes_) return;
  h.offset = offset;
  h.last_advance_ms = now_ms;
  record(h, now_ms);
}

Status ChainPlan::on_done(const std::string& hop, int64_t now_ms) {
  advance_clock(now_ms);
  auto it = index_.find(hop);
  if (it == index_.end()) return not_found("chain from '" + chain_.source + "' has no hop '" + hop + "'");
  Hop& h = hops_[it->second];
  if (h.state == HopState::done) return Status::OK();
  if (h.state == HopState::failed) return invalid_argument("hop '" + hop + "' is failed and cannot become done");
  h.state = HopState::done;
  if (h.offset != blob_bytes_) {
    h.offset = blob_bytes_;
    h.last_advance_ms = now_ms;
    record(h, now_ms);
  }
  return Status::OK();
}

std::vector<Splice> ChainPlan::on_failed(const std::string& hop) {
  auto it = index_.find(hop);
  if (it == index_.end() || hops_[it->second].state == HopState::failed) return {};
  const std::vector<std::string> before = upstream_snapshot();
  hops_[it->second].state = HopState::failed;
  hops_[it->second].samples.clear();  // never judged or read again
  return splices_since(before);
}

std::vector<Splice> ChainPlan::splice_out(const std::string& hop) {
  auto it = index_.find(hop);
  if (it == index_.end() || hops_[it->second].state != HopState::receiving) return {};
  const std::vector<std::string> before = upstream_snapshot();
  hops_[it->second].state = HopState::spliced_out;
  return splices_since(before);
}

Result<std::vector<Splice>> ChainPlan::replace_source(const std::string& replacement) {
  if (replacement.empty()) return invalid_argument("replace_source: empty replacement");
  if (contains(replacement)) return invalid_argument("replace_source: '" + replacement + "' is a hop of this chain");
  if (replacement == chain_.source) return std::vector<Splice>{};
  const std::vector<std::string> before = upstream_snapshot();
  chain_.source = replacement;
  return splices_since(before);
}

std::vector<Splice> ChainPlan::check_stalls(int64_t now_ms, const StallOptions& options) {
  advance_clock(now_ms);
  window_ms_ = options.stall_ms;
  const int64_t window_start = now_ms - options.stall_ms;
  std::vector<size_t> out_hops;
  for (size_t i = 0; i < hops_.size(); ++i) {
    const Hop& h = hops_[i];
    if (h.state != HopState::receiving || now_ms - h.judged_from_ms < options.stall_ms) continue;
    // Someone waits on it: the next live hop is still receiving.
    size_t next = i + 1;
    while (next < hops_.size() && !live(hops_[next].state)) ++next;
    if (next == hops_.size() || hops_[next].state != HopState::receiving) continue;

    const size_t up = upstream_index(i);
    const uint64_t up_holds = held_by(up);
    const bool stalled = now_ms - h.last_advance_ms >= options.stall_ms && up_holds > h.offset;
    bool slow = false;
    if (up != kSource && up_holds > h.offset && up_holds - h.offset >= options.lag_bytes) {
      const uint64_t gained = h.offset - std::min(h.offset, offset_at(h, window_start));
      const Hop& u = hops_[up];
      const uint64_t up_gained = u.offset - std::min(u.offset, offset_at(u, window_start));
      slow = static_cast<double>(gained) < options.slow_fraction * static_cast<double>(up_gained);
    }
    if (options.min_bytes_per_s > 0 && up_holds > h.offset && up_holds - h.offset >= options.lag_bytes) {
      const uint64_t gained = h.offset - std::min(h.offset, offset_at(h, window_start));
      const double floor = static_cast<double>(options.min_bytes_per_s) * static_cast<double>(options.stall_ms) / 1000.0;
      slow = slow || static_cast<double>(gained) < floor;
    }
    if (stalled || slow) out_hops.push_back(i);
  }
  if (out_hops.empty()) return {};
  const std::vector<std::string> before = upstream_snapshot();
  for (size_t i : out_hops) hops_[i].state = HopState::spliced_out;
  return splices_since(before);
}

HopState ChainPlan::state(const std::string& hop) const {
  auto it = index_.find(hop);
  return it == index_.end() ? HopState::failed : hops_[it->second].state;
}

uint64_t ChainPlan::offset(const std::string& hop) const {
  auto it = index_.find(hop);
  return it == index_.end() ? 0 : hops_[it->second].offset;
}

std::vector<HopView> ChainPlan::hops() const {
  std::vector<HopView> out;
  out.reserve(hops_.size());
  for (size_t i = 0; i < hops_.size(); ++i) {
    out.push_back({hops_[i].name, hops_[i].state, hops_[i].offset, upstream_name(i)});
  }
  return out;
}

bool ChainPlan::finished() const {
  return std::all_of(hops_.begin(), hops_.end(), [](const Hop& h) {
    return h.state == HopState::done || h.state == HopState::failed;
  });
}

}  // namespace ember::placement
