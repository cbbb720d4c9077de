// The gateway actor's state and the free functions its handlers call, shared by its two files:
// gateway.cpp (the routing table, /metrics, the behaviour) and gateway_requests.cpp (a request's
// way: routed to a warm replica, held for a cold start, re-sent when its node is lost). Internal
// to the gateway room: callers spawn a gateway through gateway.hpp and talk to it through
// actors/gateway_interface.hpp.
//
// Every function here runs on the gateway actor (it takes `self`), never blocks and reads time
// only from self->clock(). Request lifecycle, by where a Pending is kept:
//
//   unrouted (no table yet) ──first table──▶ route ──▶ routed (in flight at a replica) ──answer──▶ done
//                                              │  no warm replica  ▲  ▲ node lost / refused (< kMaxAttempts)
//                                              └──▶ held ──replica─┘  └───────────── re-sent
//   held and unrouted expire at cold_start_timeout (503); routed ones at request_timeout (504).
#pragma once

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/cluster_manager_interface.hpp"
#include "actors/gateway/model_catalog.hpp"
#include "actors/gateway/routing_view.hpp"
#include "actors/gateway_interface.hpp"
#include "actors/peer_dials.hpp"
#include "base/status.hpp"
#include "config/cluster_config.hpp"

namespace ember {

class GatewayInstruments;
class WorkQueue;

namespace gateway_impl {

/// A request is re-sent at most this many times (its node lost, its queue full).
inline constexpr int kMaxAttempts = 3;
/// After the manager could not place a model, ask again this often while requests wait.
inline constexpr auto kEnsureRetry = std::chrono::milliseconds(500);
/// Metrics scrapes wait this long for each node.
inline constexpr auto kScrapeTimeout = std::chrono::seconds(2);

struct Pending {
  uint64_t id = 0;
  model_key key;  // resolved: a real version
  infer_request request;
  caf::typed_response_promise<infer_reply> promise;
  caf::actor_clock::time_point arrived;  // the actor clock's time (deterministic tests move it)
  int attempts = 0;
  bool cold = false;  // counted once as a cold start
  /// Nodes that refused it (unavailable: its replica there cannot run now, or its queue is full):
  /// its retries go elsewhere while another replica is ready. A node that refuses at once has the
  /// fewest requests in flight, and the least loaded choice would pick it again every time.
  std::vector<uint64_t> refused;
};

struct gateway_state {
  static inline const char* name = "ember.gateway";

  GatewayConfig config;
  cluster_manager_actor manager;
  std::shared_ptr<RoutingView> view;
  GatewayInstruments* instruments = nullptr;
  /// Runs the merging and rendering of /metrics (owned by the process).
  WorkQueue* metrics_queue = nullptr;
  /// A standalone gateway's direct connections to the nodes (gateway.hpp); its queue is null (no
  /// dials) in the manager's process.
  PeerDialing dialing;

  std::map<model_key, routing_entry> table;
  /// The metadata bodies of the versions in `table`, built once per version.
  ModelCatalog catalog;
  /// The repository's workflows, each parsed once (per change of its workflow.json).
  std::map<std::string, std::shared_ptr<const WorkflowView>> workflows;
  std::vector<replica_ref> members;
  uint64_t epoch = 0;
  /// Requests routed to a replica, by request id, with the router they went to.
  struct Routed {
    std::shared_ptr<Pending> pending;
    caf::actor_addr router;
    uint64_t node_id = 0;
    /// Through a pipeline: the later stages' routers (the request is lost when any of them dies,
    /// and their upstream may not hear of it).
    std::vector<caf::actor_addr> via;
  };
  std::map<uint64_t, Routed> routed;
  /// Whole workflow requests sent to a node, by request id, with the router they went to.
  struct RoutedWorkflow {
    caf::typed_response_promise<infer_reply> promise;
    caf::actor_addr router;
    uint64_t node_id = 0;
  };
  std::map<uint64_t, RoutedWorkflow> routed_workflows;
  /// Requests waiting for a replica, per model version, in arrival order.
  std::map<model_key, std::deque<std::shared_ptr<Pending>>> held;
  std::set<model_key> ensuring;
  std::set<caf::actor_addr> monitored;
  /// Requests that arrived before the first routing table (just after start), in arrival order.
  std::vector<std::shared_ptr<Pending>> unrouted;
  bool subscribed = false;
  uint64_t next_id = 1;

  // -- load reports (the manager's autoscaler) --
  /// What happened to a model since the last report.
  struct LoadCounters {
    uint64_t arrivals = 0, completions = 0, busy_us = 0;
  };
  std::map<model_key, LoadCounters> load;
  std::set<model_key> reported_busy;  // models reported with requests in flight or held last time
  uint64_t report_interval_us = 0;    // the manager's; 0 = it wants no reports
  bool report_timer = false;
  std::string reporter;  // this gateway's name in reports

  size_t held_count() const {
    size_t n = 0;
    for (const auto& [k, q] : held) n += q.size();
    return n;
  }
};

using gateway_pointer = gateway_actor::stateful_pointer<gateway_state>;

// -- gateway.cpp --------------------------------------------------------------------------------

/// Publishes the routing table (with each version's metadata from the catalog) to the HTTP threads.
void publish_view(gateway_pointer self);
/// Monitors a node's router once (its loss re-sends or fails what went there: node_down).
void watch(gateway_pointer self, const node_router_actor& router);

// -- gateway_requests.cpp -----------------------------------------------------------------------

/// A new inference request: routed now, or kept until the first routing table arrives.
caf::result<infer_reply> infer(gateway_pointer self, infer_request& req);
/// Resolves the request's model and version against the table and sends it on its way.
void route(gateway_pointer self, std::shared_ptr<Pending> p);
/// Fails `p` with `e`, counting its outcome and duration.
void fail(gateway_pointer self, Pending& p, const Error& e);
/// Dispatches every request held for `key` once it has a ready replica.
void release_held(gateway_pointer self, const model_key& key);
/// Asks the manager for a replica of `key` (one request at a time per model).
void ensure(gateway_pointer self, const model_key& key);
/// A held or unrouted request's cold-start time is up.
void expire(gateway_pointer self, uint64_t id);
/// A whole workflow request: sent to the least loaded node holding every step's model.
caf::result<infer_reply> route_workflow(gateway_pointer self, workflow_request& req);
/// A node (router) died: its replicas leave the table, its requests are re-sent.
void node_down(gateway_pointer self, const caf::actor_addr& addr);
/// A member left the manager's routing table (the table, already applied, holds none of its
/// replicas): the requests in flight there are re-sent, as when it goes down. This is how a
/// gateway learns of a node it cannot see die: one the manager dropped for silence (a stopped
/// process, whose connection lives), or one reached through another process's connection.
void member_left(gateway_pointer self, const replica_ref& node);
/// The load_report of this interval: counters since the last one, and what is in flight now.
load_report make_load_report(gateway_state& st);

}  // namespace gateway_impl
}  // namespace ember
