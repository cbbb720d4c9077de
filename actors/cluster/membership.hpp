// Membership: the nodes of the cluster as the manager knows them: each node's id, its report
// (devices, cache, data-plane address, rack), the handle of its router, the weights the manager
// has bound on each of its devices and the models its cache holds; and the placement views
// (placement::NodeView) the placement policies take.
//
// Plain C++: owned and called by the cluster_manager actor only (not thread-safe). The router
// handles are data here: nothing is sent from this class, and no handle is ever dereferenced.
//
// Node lifecycle:  joined ──leave() (its router went down)──▶ gone (a node that comes back joins
// again under a new id). Ids start at 1, grow and are never reused; names are the nodes' own and
// are assumed unique (a second node of one name hides the first from lookups by name).
#pragma once

#include <caf/actor_addr.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/node_report_messages.hpp"
#include "actors/node_router_interface.hpp"
#include "actors/routing.hpp"
#include "base/status.hpp"
#include "placement/replica_placement.hpp"

namespace ember {

struct ClusterNode {
  uint64_t id = 0;
  /// As the node sent it when it joined; `cached` is kept up to date by note_cached().
  node_report report;
  node_router_actor router;
  std::map<std::string, uint64_t> device_weights;  // device -> bytes of weights bound there by the manager
  std::map<uint64_t, uint64_t> reservations;        // load attempt -> bytes held for it (not yet bound)
  bool draining = false;  // the console drained it: no room for new replicas (still a source of bytes)
};

class Membership {
 public:
  /// Adds a node; returns its id.
  uint64_t join(node_report report, node_router_actor router);
  /// Removes a node; returns what was known of it (nullopt for an unknown id).
  std::optional<ClusterNode> leave(uint64_t id);

  const ClusterNode* find(uint64_t id) const;
  /// What the node reports now (its devices' use, its cache, its replicas). Where its router is
  /// published (`control`) stays as it joined: that is its process's, which a report from the
  /// router itself does not carry (port 0), and gateways dial it.
  void update_report(uint64_t id, node_report report);
  /// A drained node gets no new replica (views() shows it without room); it stays a source.
  void set_draining(uint64_t id);
  /// The node whose router has address `router`.
  std::optional<uint64_t> id_of(const caf::actor_addr& router) const;
  /// The node named `name`.
  std::optional<uint64_t> id_of(const std::string& name) const;
  /// The nodes named (every node when `names` is empty), without duplicates; not_found naming the
  /// first unknown name.
  Result<std::vector<uint64_t>> resolve(const std::vector<std::string>& names) const;
  const std::map<uint64_t, ClusterNode>& nodes() const { return nodes_; }
  bool empty() const { return nodes_.empty(); }
  size_t size() const { return nodes_.size(); }

  /// Weights of `bytes` were bound on / released from a device of `node` (unknown nodes ignored).
  void bind(uint64_t node, const std::string& device, uint64_t bytes);
  void unbind(uint64_t node, const std::string& device, uint64_t bytes);
  /// Device memory held on `node` for load `attempt` (a replica chosen for it, not yet bound): the
  /// placement views count it as used on the node's emptiest device, so placements in flight at
  /// once never count the same free bytes. unreserve() when the load answers, whatever the answer
  /// (a success binds the weights instead); a node's reservations leave with it. Unknown nodes and
  /// attempts are ignored.
  void reserve(uint64_t node, uint64_t attempt, uint64_t bytes);
  void unreserve(uint64_t node, uint64_t attempt);
  /// Bytes held on `node` by loads in flight.
  uint64_t reserved(uint64_t node) const;
  /// Unbinds `bytes` for each replica (node -> device) of an unloaded version; returns the routers
  /// of the nodes still present, to be told.
  std::vector<node_router_actor> release(const std::map<uint64_t, std::string>& replicas, uint64_t bytes);
  /// The node's cache now holds (or dropped) `key`'s bytes.
  void note_cached(uint64_t node, const model_key& key, bool cached);
  bool caches(uint64_t node, const model_key& key) const;
  /// The same for a node in hand (no lookup: a pass over nodes() asks it of each).
  static bool caches(const ClusterNode& node, const model_key& key);

  /// Nodes dropped for silence whose connection lives (NodeLiveness keeps their state): the router
  /// of each and where its process published it (`control`, which the router's own report does not
  /// carry and gateways dial), under the id it had as a member, until it joins again or its router
  /// goes down. Not members: no lookup above finds them.
  struct Parked {
    node_router_actor router;
    HostPort control;
  };
  void park(uint64_t id, node_router_actor router, HostPort control) {
    parked_[id] = {std::move(router), std::move(control)};
  }
  const Parked* parked(uint64_t id) const;
  /// Forgets the parked router at `router`; the id it had, or nullopt when none is parked there.
  std::optional<uint64_t> unpark(const caf::actor_addr& router);

  /// "n1 joined as #1 (2 device(s), 1.0 GiB of device memory, cache 256 MiB, data plane h:p, 1
  /// replica(s) adopted)", for the log.
  std::string describe_join(uint64_t id, size_t adopted) const;

  /// Every node, for the routing table's member list.
  std::vector<replica_ref> members() const;
  /// Each node as the placement policies see it for `key`: free device memory after the weights
  /// bound there and the reservations, `replicas_per_node` (over every model), and whether it serves or loads `key`
  /// (`holders`) or caches its bytes.
  std::vector<placement::NodeView> views(const model_key& key, const std::map<uint64_t, uint32_t>& replicas_per_node,
                                         const std::set<uint64_t>& holders) const;

 private:
  ClusterNode* find_mutable(uint64_t id);

  std::map<uint64_t, ClusterNode> nodes_;
  std::map<uint64_t, Parked> parked_;
  uint64_t next_id_ = 1;
};

}  // namespace ember
