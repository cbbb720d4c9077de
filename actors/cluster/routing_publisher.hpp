// RoutingPublisher: what the cluster manager tells gateways (and the nodes API its clients). It numbers routing updates
// (epochs, one per update, growing), builds them from the registry and the membership (a full table for a new
// subscriber, a delta of the changed and removed versions otherwise) and keeps the list of subscribed gateways. The
// actor sends each update it returns to every subscriber; a gateway applies updates in epoch order.
//
// Plain C++: owned and called by the cluster_manager actor only (not thread-safe). The gateway and
// router handles are data here: nothing is sent from this class.
//
// Invariants: an entry lists only replicas on nodes still in the membership (a lost node's replicas
// leave the table with the update that follows its loss); every update carries the whole member
// list; epochs start at 1.
#pragma once

#include <caf/actor_addr.hpp>
#include <cstdint>
#include <set>
#include <vector>

#include "actors/cluster/membership.hpp"
#include "actors/cluster/model_registry.hpp"
#include "actors/gateway_interface.hpp"
#include "actors/routing.hpp"

namespace ember {

class RoutingPublisher {
 public:
  void subscribe(gateway_actor gateway) { gateways_.push_back(std::move(gateway)); }
  /// Forgets the gateway at `addr`; false when none is subscribed there.
  bool unsubscribe(const caf::actor_addr& addr);
  const std::vector<gateway_actor>& subscribers() const { return gateways_; }

  /// The whole table (a new subscriber's first update).
  routing_update full(const ModelRegistry& registry, const Membership& members);
  /// The entries of `changed` (keys the registry no longer has are skipped) and `removed`.
  routing_update delta(const ModelRegistry& registry, const Membership& members, const std::set<model_key>& changed,
                       const std::vector<model_key>& removed = {});
  /// The epoch of the latest update built (0 before the first).
  uint64_t epoch() const { return epoch_; }

  /// One version's entry: state, manifest and the replicas on current members.
  static routing_entry entry_of(const ModelVersion& v, const Membership& members);
  /// Every node's report (the nodes API): as it joined, `cached` kept up to date, and `replicas` the
  /// versions the registry knows ready on it now.
  static std::vector<node_report> node_reports(const ModelRegistry& registry, const Membership& members);

 private:
  std::vector<gateway_actor> gateways_;
  uint64_t epoch_ = 0;
};

}  // namespace ember
