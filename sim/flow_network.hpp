// FlowNetwork: bytes moving over shared links at max-min fair rates (issue 36; the simulator's
// network: host NICs, leaf and spine links, the cloud link every download shares). Ether, which
// Flashpoint's simulator used, does not document its sharing; max-min fairness per link is the
// standard reconstruction (docs/design/simulator.md).
//
// A link has a capacity in bytes per second. A flow has a path (links it crosses; a link may appear
// more than once: a flow that crosses it twice uses twice its rate there), a size in bytes and
// optionally a cap of its own (a disk, a sender's rate). A chain of cut-through hops is one flow
// over every hop's links: each hop forwards as it receives, so all of them move at the rate of the
// slowest, which is what one flow over their union gets.
//
// Rates are max-min fair (progressive filling): all unfixed flows rise together; a link that fills
// fixes the flows crossing it at its fair share (capacity left over the crossings of unfixed flows),
// a flow that reaches its cap is fixed at it; repeat until every flow is fixed. Ties are broken by
// link and flow order, so rates are a function of the calls made.
//
// Time is the caller's, in simulated microseconds, and only moves forward: every call that changes
// the flows first moves each flow's bytes on to `now_us` at the rates it had, then recomputes the
// rates. A flow is done when at most half a microsecond of its transfer is left, so it ends at the
// whole microsecond nearest its exact end and rounding never leaves a sliver; next_completion_us()
// is that microsecond for the first flow to end at the current rates, and finished(now_us) returns
// the flows done by then.
//
// Errors: invalid_argument for a link of capacity not above 0, a path naming an unknown link, a flow
// with neither links nor a cap (its rate would be unbounded), a negative size or cap, a time before
// the last one. Single-threaded; plain: no clock, no I/O. Each change costs O(links + crossings)
// per fixing round, at most one round per link and capped flow.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace ember::sim {

using LinkId = uint32_t;
using FlowId = uint64_t;

class FlowNetwork {
 public:
  /// A link of `bytes_per_s` (> 0); `name` for messages and reports.
  Result<LinkId> add_link(std::string name, double bytes_per_s);

  /// A flow of `bytes` over `path` starting at now_us; `cap_bytes_per_s` 0: no cap of its own.
  Result<FlowId> start(const std::vector<LinkId>& path, double bytes, uint64_t now_us, double cap_bytes_per_s = 0);
  /// Takes a flow out at now_us (its bytes so far moved); false when it is not running.
  Result<bool> cancel(FlowId id, uint64_t now_us);
  /// The flows that have ended by now_us, in the order they started; they leave the network.
  Result<std::vector<FlowId>> finished(uint64_t now_us);

  /// When the first running flow ends at the current rates; none when no flow runs.
  std::optional<uint64_t> next_completion_us() const;

  /// A running flow's rate (bytes/s) and bytes left as of the last call; 0 when not running.
  double rate(FlowId id) const;
  double remaining(FlowId id) const;
  /// The sum of the rates of the flows crossing `link` (counting repeats) as of the last call.
  double link_rate(LinkId link) const;
  const std::string& link_name(LinkId link) const { return links_.at(link).name; }
  size_t running() const { return flows_.size(); }

 private:
  struct Link {
    std::string name;
    double capacity;
  };
  struct Flow {
    FlowId id;
    std::vector<LinkId> path;
    double remaining, cap, rate = 0;
  };

  /// Moves every flow's bytes on to now_us; invalid_argument for a time before the last.
  Status advance(uint64_t now_us);
  /// Max-min fair rates of the running flows.
  void reallocate();
  /// A flow with less than half a microsecond of transfer left.
  static bool done(const Flow& f) { return f.remaining <= 0 || (f.rate > 0 && f.remaining <= f.rate * 0.5e-6); }
  const Flow* find(FlowId id) const;

  std::vector<Link> links_;
  std::vector<Flow> flows_;  // running, in start order
  FlowId next_id_ = 1;
  uint64_t now_us_ = 0;
};

}  // namespace ember::sim
