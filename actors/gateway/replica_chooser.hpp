// ReplicaChooser: the one count of requests in flight per node that a gateway process sent (by the
// gateway actor, by its front ends' threads straight to a node, single requests and whole workflow
// requests alike), and the one rule that picks a replica from it: the candidate whose node has the
// fewest requests in flight, ties to the earliest in the candidates' order (the routing table's).
// The gateway actor (gateway_requests.cpp) and GatewayClient (the warm path, whole workflows on a
// node) both choose here, so each sees what the other sent.
//
// Who calls it: the gateway actor and any number of front-end threads at once (RoutingView owns
// the one instance of a process). Thread-safe; never blocks beyond a short mutex; no CAF, no clock.
//
// Invariants: in_flight(n) is the number of started(n) (counting the starts of choose_and_start)
// not yet matched by finished(n); a finished without its start is ignored (never below zero).
// Node id 0 is not a node: the gateway counts its pipelines (partitioned cold starts) under it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace ember {

class ReplicaChooser {
 public:
  /// The candidate (anything with a `node_id`, as replica_ref) that `accept` takes and whose node
  /// has the fewest requests in flight, ties to the earliest; nullptr when none is accepted. The
  /// request is counted at its node in the same step (under one lock, so that threads choosing at
  /// once spread out); the caller calls finished(node_id) when its answer or error arrives.
  template <class T, class Accept>
  const T* choose_and_start(const std::vector<T>& candidates, Accept accept) {
    std::lock_guard lock(mu_);
    const T* best = nullptr;
    uint32_t best_load = 0;
    for (const auto& c : candidates) {
      if (!accept(c)) continue;
      const uint32_t load = count(c.node_id);
      if (!best || load < best_load) {
        best = &c;
        best_load = load;
      }
    }
    if (best) ++in_flight_[best->node_id];
    return best;
  }
  template <class T>
  const T* choose_and_start(const std::vector<T>& candidates) {
    return choose_and_start(candidates, [](const T&) { return true; });
  }

  /// A request went to `node_id` without a choice here (a pipeline's first stage).
  void started(uint64_t node_id);
  /// A request counted at `node_id` came back (answered, failed or given up on).
  void finished(uint64_t node_id);
  /// Requests in flight at `node_id`.
  uint32_t in_flight(uint64_t node_id) const;

 private:
  uint32_t count(uint64_t node_id) const;  // mu_ held

  mutable std::mutex mu_;
  std::map<uint64_t, uint32_t> in_flight_;  // guarded by mu_; node id -> requests (none: absent)
};

}  // namespace ember
