// DistributionTracker: the cluster manager's bookkeeping of the distribute and evict API calls in
// progress: for each call, the nodes whose answer is pending (with the multicast transfer each is
// a hop of), the result gathered so far (one line per node that did it, one error per node that
// did not), and who gets the answer once no node is pending.
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only (not thread-safe). Time is
// a parameter (the actor clock's now). The answer is a callback the actor makes from its response
// promise; it is called exactly once, from the call that settles the last pending node.
//
// Call lifecycle:  started ──every pending node answered, failed or was lost──▶ answered (forgotten)
// A node answers once: a second answer for it (a late reply after it was counted as lost) is
// ignored. A call with no pending node is never started: the actor answers it at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/loading_messages.hpp"
#include "actors/model_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// One pending node of a call: its name, and the multicast transfer it is a hop of (0: none).
struct DistributionHop {
  std::string node;
  uint64_t transfer_id = 0;
};

class DistributionTracker {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using Reply = std::function<void(distribute_result)>;

  /// Starts a call answering `result` (model, mode, chains filled in; evicted for an eviction)
  /// once every node of `pending` (node id -> hop) settled. Returns its id (never 0).
  uint64_t start(distribute_result result, std::map<uint64_t, DistributionHop> pending, time_point now, Reply reply);

  /// What one node did: a line for the result (none: it had nothing to do), or why it failed.
  using Outcome = Result<std::optional<replica_info>>;
  /// A node that settled: the hop it was, and what its call is about.
  struct Settled {
    DistributionHop hop;
    model_key model;
    bool evicted = false;
  };
  /// Node `node` of call `id` settled: its line joins the result's nodes, or "<node>: <message>"
  /// its errors. nullopt when the answer is stale (unknown call, node not pending).
  std::optional<Settled> settle(uint64_t id, uint64_t node, const Outcome& outcome, time_point now);

  /// The calls waiting on `node`.
  std::vector<uint64_t> waiting_on(uint64_t node) const;
  size_t in_progress() const { return calls_.size(); }

 private:
  struct Call {
    distribute_result result;
    std::map<uint64_t, DistributionHop> pending;
    time_point started;
    Reply reply;
  };
  void finish_if_done(uint64_t id, time_point now);

  std::map<uint64_t, Call> calls_;
  uint64_t next_id_ = 1;
};

}  // namespace ember
