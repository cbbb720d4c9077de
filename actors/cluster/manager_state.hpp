// The cluster manager actor's state and the helpers its two files share: cluster_manager.cpp (the
// behaviour and the requests of its clients: gateways, the repository API, distributions, the
// console's plain commands) and manager_nodes.cpp (what it does with nodes: replicas placed and
// answered, pipelines, scaling and drains, membership and heartbeats). Internal to the cluster
// room: callers spawn a manager through cluster_manager.hpp and talk to it through
// actors/cluster_manager_interface.hpp.
//
// The state is the plain classes that hold the manager's state and make its decisions (each with
// its own header and tests); the functions here ask them and send what they return. Every function
// runs on the manager actor (it takes `self`), never blocks and reads time only from
// self->clock() (now_us).
#pragma once

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "actors/cluster/chain_relay.hpp"  // and the chain controller, load planner, registry, membership
#include "actors/cluster/cluster_manager.hpp"
#include "actors/cluster/node_liveness.hpp"
#include "actors/cluster/partition_controller.hpp"
#include "actors/cluster/replica_driver.hpp"
#include "actors/cluster/routing_publisher.hpp"
#include "actors/cluster/scale_driver.hpp"
#include "actors/cluster/ticket_issuer.hpp"
#include "actors/errors.hpp"

namespace ember {

class RepositoryIndex;
class WorkQueue;

namespace manager_impl {

constexpr auto kLoadTimeout = std::chrono::minutes(10);  // a node's budget to fetch and bind a replica
constexpr auto kEvictTimeout = std::chrono::seconds(10);

struct manager_state {
  static inline const char* name = "ember.cluster_manager";
  ClusterManagerConfig config;
  std::shared_ptr<RepositoryIndex> index;  // kept in step with the registry (the blob server serves it)
  WorkQueue* scan_queue = nullptr;         // the process's; outlives the actor
  ModelRegistry registry;
  Membership members;
  ChainController chains;
  LoadPlanner planner{registry, members, chains};
  ChainRelay relay{chains, planner};
  DistributionTracker distributions;
  RoutingPublisher routing;
  PartitionController partitions{registry, members, planner};
  ScaleDriver scaler{registry, members, planner};
  ReplicaDriver replicas{registry, members, planner, partitions, scaler};
  NodeLiveness liveness{registry, members};
  TicketIssuer tickets;
  admin_actor admin;  // the console's (config.admin), or none
};

using manager_pointer = cluster_manager_actor::stateful_pointer<manager_state>;

/// The actor clock's time, in microseconds and milliseconds (what the plain classes take).
inline int64_t now_us(manager_pointer self) {
  return std::chrono::duration_cast<std::chrono::microseconds>(self->clock().now().time_since_epoch()).count();
}
inline int64_t now_ms(manager_pointer self) { return now_us(self) / 1000; }

/// A waiter (the registry's, a node drain's) that answers `rp`.
template <class T>
std::function<void(const Result<T>&)> answer_to(caf::typed_response_promise<T> rp) {
  return [rp](const Result<T>& r) mutable { r.ok() ? void(rp.deliver(*r)) : void(rp.deliver(to_caf(r.error()))); };
}

/// Requests `msg...` of `dest` within `timeout`; `then` gets the answer, or the error, as a Result.
template <class T, class Dest, class Then, class... Ts>
void ask(manager_pointer self, const Dest& dest, caf::timespan timeout, Then then, Ts&&... msg) {
  self->request(dest, timeout, std::forward<Ts>(msg)...)
      .then([then](T& x) mutable { then(Result<T>(std::move(x))); },
            [then](caf::error& e) mutable { then(Result<T>(from_caf(e))); });
}

// -- cluster_manager.cpp ------------------------------------------------------------------------
/// A routing update of `changed` and `removed` (and the workflows) to every subscribed gateway.
void publish(manager_pointer self, const std::set<model_key>& changed, const std::vector<model_key>& removed = {},
             bool workflows = false);
/// The chain relay's splices to their hops, each new upstream ticketed for its hop.
void send_splices(manager_pointer self, std::vector<SpliceOrder> orders);
/// Arms the chain stall check's timer while transfers run.
void arm_chain_timer(manager_pointer self);

// -- manager_nodes.cpp --------------------------------------------------------------------------
using LoadAnswer = std::function<void(const Result<replica_info>&)>;
/// Asks `plan.node` for a replica of `v` (or only for the bytes); the chain relay sees the answer,
/// then `done` gets it.
void request_load(manager_pointer self, const ModelVersion& v, const LoadPlan& plan, LoadAnswer done);
/// The same for a load message already made (ReplicaDriver's).
void request_load(manager_pointer self, uint64_t node, load_replica msg, LoadAnswer done);
/// What the ReplicaDriver's decisions send, publish and run, in the order it makes them.
ReplicaActions replica_actions(manager_pointer self);
/// Starts the replicas `key` lacks (at least one) unless loads are in flight.
void place(manager_pointer self, const model_key& key);
/// A partitioned cold start's orders, one after the other.
void run(manager_pointer self, const PipelineOrders& orders);
/// One pass of the console's node drains.
void drain_step(manager_pointer self);
/// A person's decision (DesiredState's record) on disk when manager.state_dir is set: only then is
/// it acknowledged. OK without a state folder.
Status remember(manager_pointer self, const std::string& record);
/// The autoscaler's tick; the heartbeat timer.
void scale_tick(manager_pointer self);
void heartbeat(manager_pointer self);
/// A node joins (or is taken back); its id.
uint64_t join(manager_pointer self, node_report report, node_router_actor router);
/// A monitored node router or gateway went down.
void on_down(manager_pointer self, const caf::down_msg& msg);

}  // namespace manager_impl
}  // namespace ember
