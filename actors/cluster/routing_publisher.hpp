// RoutingPublisher: what the cluster manager tells gateways (and the nodes API its clients). It numbers routing updates
// (epochs, one per update, growing), builds them from the registry and the membership (a full table for a new
// subscriber, a delta of the changed and removed versions otherwise), carries in each what every table holds besides
// its entries (the report interval; the repository's workflows in full tables, and in deltas when they changed), and
// keeps the list of subscribed gateways. The actor sends each update it returns to every subscriber; a gateway applies
// updates in epoch order.
//
// The recovery window (manager.recovery_window): a gateway that subscribes holding a table from the manager's previous
// life (a manager restarted under it) is held until the window has passed since this manager started, so that the
// nodes' rejoins rebuild the table first; every gateway held is answered, in the order they came, when it ends:
//   subscribe(held epoch) ──window open──▶ held ──window's end (window_over)──▶ subscribed, its full table answered
//   subscribe(held epoch) ──window over, or no table held──▶ subscribed at once
//
// Plain C++: owned and called by the cluster_manager actor only (not thread-safe). The gateway and
// router handles are data here: nothing is sent from this class; held gateways are answered
// through callbacks the actor makes from its response promises. Time is a parameter (microseconds
// of the actor clock).
//
// Invariants: an entry lists only replicas and pipeline stages on nodes still in the membership (a lost node's
// replicas leave the table with the update that follows its loss); every update carries the whole member list;
// epochs start at 1.
#pragma once

#include <caf/actor_addr.hpp>
#include <cstdint>
#include <functional>
#include <set>
#include <utility>
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

  /// The whole table (a new subscriber's first update), with the workflows.
  routing_update full(const ModelRegistry& registry, const Membership& members);
  /// The entries of `changed` (keys the registry no longer has are skipped) and `removed`; the
  /// workflows too when `with_workflows`.
  routing_update delta(const ModelRegistry& registry, const Membership& members, const std::set<model_key>& changed,
                       const std::vector<model_key>& removed = {}, bool with_workflows = false);
  /// The epoch of the latest update built (0 before the first).
  uint64_t epoch() const { return epoch_; }

  /// How often gateways send load reports (autoscale.interval while the autoscaler runs; 0: none),
  /// told in every update.
  void set_report_interval(uint64_t us) { report_interval_us_ = us; }
  /// The repository's workflows as a whole scan found them; true when they differ from those held
  /// (the next delta should carry them). `announce`: log the ones that cannot run.
  bool set_workflows(std::vector<workflow_entry> workflows, bool announce = true);
  const std::vector<workflow_entry>& workflows() const { return workflows_; }

  // -- the recovery window (see the header) ---------------------------------------------------
  /// The window: `window_us` from the manager's start at `started_us`.
  void set_recovery_window(int64_t started_us, int64_t window_us) {
    window_ends_us_ = started_us + window_us;
    window_us_ = window_us;
  }
  /// Whether a gateway subscribing at now_us with a table of `held_epoch` (0: none) is held.
  bool must_hold(uint64_t held_epoch, int64_t now_us) const { return held_epoch != 0 && now_us < window_ends_us_; }
  using HeldReply = std::function<void(routing_update)>;
  /// Holds `gateway` (must_hold said so) until the window's end, when `reply` gets its table. The
  /// microseconds until then when the actor must arm the window's timer (the first one held), else 0.
  int64_t hold(gateway_actor gateway, HeldReply reply, int64_t now_us);
  /// The window's end: the gateways held, in the order they came, to subscribe and answer now.
  std::vector<std::pair<gateway_actor, HeldReply>> window_over() { return std::exchange(held_, {}); }
  size_t held() const { return held_.size(); }

  /// One version's entry: state, manifest, and the replicas and pipeline stages on current members.
  static routing_entry entry_of(const ModelVersion& v, const Membership& members);
  /// Every node's report (the nodes API): as it joined, `cached` kept up to date, and `replicas` the
  /// versions the registry knows ready on it now.
  static std::vector<node_report> node_reports(const ModelRegistry& registry, const Membership& members);

 private:
  std::vector<gateway_actor> gateways_;
  uint64_t epoch_ = 0;
  uint64_t report_interval_us_ = 0;
  std::vector<workflow_entry> workflows_;
  int64_t window_ends_us_ = 0, window_us_ = 0;
  std::vector<std::pair<gateway_actor, HeldReply>> held_;
};

}  // namespace ember
