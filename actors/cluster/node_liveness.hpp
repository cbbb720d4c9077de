// NodeLiveness: the manager's actor-level heartbeats (manager.heartbeat, manager.node_timeout) and
// what follows from them, as data. The connection's own heartbeats catch a dead process; these
// catch a router that hangs while its process and connection live. For every member it keeps when
// its router last answered ping_atom (or joined), whether a ping is out, and the fingerprint
// (report_fingerprint) of the replicas and the requests actor its last report listed; for every node dropped for silence
// whose connection lives, whether a ping is out. It decides:
//
// - tick(): which members to ping (one ping out per node), which are lost (no answer for
//   node_timeout) and which silent nodes to ping again;
// - pinged(): a ping answered with a fingerprint other than the one known: ask the node's report
//   (one report out per node); reported(): the report to reconcile;
// - reconcile(): a fresh report against the registry: a replica the manager did not count is
//   adopted (a load that ended after the node rejoined a restarted manager), one it counted that
//   the node no longer has (lost to a fault there) counts as lost; a requests actor other than the
//   one known (a router its supervisor restarted) moves every replica there;
// - silent_pinged() / take_back(): a silent node that answers a ping and then a report joins again.
//
// A node here:  member ──tick: no answer for node_timeout──▶ silent (the actor drops it from the
//   cluster: lose_node; its connection lives, its router is parked in the Membership)
//   silent ──answers a ping, then a report──▶ taken back (the actor joins it again, a new id)
//   member | silent ──its router went down, or it left──▶ forgotten (left(), forget_silent())
// A silent node keeps the id it had as a member (ids are never reused), so nothing else names it.
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only (not thread-safe). Time is
// a parameter (microseconds of the actor clock); nothing is sent from here: the actor sends the
// pings and reports the returned ids name and brings their answers back.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "actors/cluster/membership.hpp"
#include "actors/cluster/model_registry.hpp"

namespace ember {

class NodeLiveness {
 public:
  NodeLiveness(ModelRegistry& registry, Membership& members) : registry_(registry), members_(members) {}
  /// manager.node_timeout: a member that answered no ping for longer is lost.
  void set_timeout(int64_t node_timeout_us) { timeout_us_ = node_timeout_us; }
  int64_t timeout_us() const { return timeout_us_; }

  /// Member `id` joined at now_us (its join counts as an answer) with replicas of `fingerprint`.
  void joined(uint64_t id, int64_t now_us, uint64_t fingerprint);
  /// Member `id` left the cluster (for whatever reason): its state goes. A silent node stays silent.
  void left(uint64_t id) { members_live_.erase(id); }

  struct Tick {
    std::vector<uint64_t> ping;         // members to ask ping_atom (none was out)
    std::vector<uint64_t> lost;         // members silent for node_timeout: silent now, to drop
    std::vector<uint64_t> ping_silent;  // silent nodes to ask ping_atom (the lost ones included)
  };
  /// The heartbeat timer at now_us, in the order the actor acts: pings, losses, silent pings.
  Tick tick(int64_t now_us);

  /// Member `id` answered a ping with `fingerprint` at now_us: true when its report is to be asked
  /// (the fingerprint differs from the last report's and no report is out).
  bool pinged(uint64_t id, uint64_t fingerprint, int64_t now_us);
  /// Its ping failed (timed out): another goes at the next tick.
  void ping_failed(uint64_t id);
  /// Its report answered, with the fingerprint of the replicas it lists (nullopt: it failed): true
  /// when the actor reconciles the report (still a member, and it answered).
  bool reported(uint64_t id, std::optional<uint64_t> fingerprint);

  /// What reconcile() changed: versions adopted or counted as lost on the node, and those whose
  /// replica there is reached through a new requests actor (node_report::requests).
  struct Reconciled {
    std::set<model_key> adopted, gone, moved;
    std::set<model_key> changed() const;
  };
  /// Member `id`'s fresh report: its devices' and cache's use kept; a replica the registry lacks is
  /// adopted (not a version unloaded meanwhile, nor one loading or draining there: `draining` lists
  /// the versions whose replicas on the node are retired and not yet unbound); one the registry
  /// counts that the report lacks is lost (its memory unbound); when the report names another
  /// requests actor than the last, every version with a replica there moved. The actor publishes the
  /// changed versions and re-places the lost ones (replace_on_failure).
  Reconciled reconcile(uint64_t id, node_report report, const std::set<model_key>& draining);

  /// Silent node `id` (the id it had) answered a ping: true when its report is to be asked (it is
  /// still silent).
  bool silent_pinged(uint64_t id) const { return silent_.count(id) > 0; }
  /// Its ping or report failed: asked again at the next tick.
  void silent_failed(uint64_t id);
  /// It answered its report: true when it is taken back (it was still silent); it is silent no
  /// more, and the actor joins it again.
  bool take_back(uint64_t id) { return silent_.erase(id) > 0; }
  /// Its router went down, or it joined again on its own: forgotten.
  void forget_silent(uint64_t id) { silent_.erase(id); }

  size_t members() const { return members_live_.size(); }
  size_t silent() const { return silent_.size(); }

 private:
  struct Member {
    int64_t answered_us = 0;   // its last answer to ping_atom (or its join)
    bool asking = false;       // a ping is out
    uint64_t fingerprint = 0;  // of the replicas in its last report
    bool reporting = false;    // a report is asked for
  };
  ModelRegistry& registry_;
  Membership& members_;
  int64_t timeout_us_ = 0;
  std::map<uint64_t, Member> members_live_;
  std::map<uint64_t, bool> silent_;  // id it had -> a ping (or report) is out
};

}  // namespace ember
