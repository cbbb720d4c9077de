// cluster_manager, what it does with nodes (see manager_state.hpp): replicas placed and their
// loads answered, partitioned cold starts' orders (PartitionController), the autoscaler's ticks,
// drains and node drains (ScaleDriver), membership and heartbeats (Membership, NodeLiveness). The
// behaviour and the requests of the manager's clients are in cluster_manager.cpp.
#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <algorithm>
#include <optional>

#include "actors/cluster/manager_state.hpp"
#include "transport/ticket.hpp"

namespace ember::manager_impl {

namespace {

load_replica& load_of(load_replica& msg) { return msg; }
load_replica& load_of(load_stage& msg) { return msg.load; }

/// Sends a load (a replica, the bytes only, a pipeline stage) to node `id`, its sources ticketed
/// for it; `then` gets the answer.
template <class Msg, class Then>
void send_load(manager_pointer self, uint64_t id, Msg msg, Then then) {
  auto& st = self->state;
  const ClusterNode& node = *st.members.find(id);
  load_replica& load = load_of(msg);
  st.tickets.stamp(load.sources, load.blob_key, node.report.name, transport::unix_now());
  ask<replica_info>(self, node.router, kLoadTimeout, std::move(then), std::move(msg));
}

void unload_on(manager_pointer self, uint64_t node, const model_key& key) {  // no answer wanted
  if (const auto* n = self->state.members.find(node)) caf::anon_send(n->router, unload_atom_v, key);
}

void evict_on(manager_pointer self, const ScaleDriver::Evict& e) {  // no answer wanted
  if (const auto* n = self->state.members.find(e.node)) caf::anon_send(n->router, evict_atom_v, e.key);
}

void on_load_answer(manager_pointer self, const model_key& key, uint64_t node, uint64_t attempt,
                    const Result<replica_info>& r, bool announce, bool completion);

void unbind(manager_pointer self, const ScaleDriver::Unbind& u);

/// `announce` false: the caller publishes and places afterwards (a pipeline's members completing
/// into replicas together, in one routing update). `completion`: a pipeline member's load of the
/// rest of the model (paced on purpose): not a cold start, so neither counted nor fed to the
/// autoscaler's cold-start estimate.
void on_load_answer(manager_pointer self, const model_key& key, uint64_t node, uint64_t attempt,
                    const Result<replica_info>& r, bool announce, bool completion) {
  self->state.replicas.answered(key, node, attempt, r, announce, completion, now_ms(self), replica_actions(self));
}

/// A drain is over: the node unbinds the replica (its executor answers what was queued first; the
/// bytes stay in its host cache) and the memory is free again.
void unbind(manager_pointer self, const ScaleDriver::Unbind& u) {
  auto done = [self, drain = u.drain](bool ok) {
    auto unbound = self->state.scaler.unbound(drain, ok, now_us(self));
    if (!unbound.known) return;
    if (unbound.evict) evict_on(self, *unbound.evict);
    if (self->state.scaler.nodes_draining()) drain_step(self);
  };
  const ClusterNode* node = self->state.members.find(u.node);
  if (!node) return done(false);  // its node left: nothing bound there any more
  ask<bool>(
      self, node->router, kEvictTimeout, [done](const Result<bool>& r) { done(r.ok()); }, unload_atom_v, u.key);
}

/// Tells every member where the members are published (peers_atom): each node dials the others, so
/// that what nodes send each other does not pass through this process (actors/peer_dials.hpp).
void tell_peers(manager_pointer self) {
  const auto members = self->state.members.members();
  std::vector<peer_endpoint> peers;
  for (const auto& m : members) peers.push_back({m.node, m.control});
  for (const auto& m : members) self->send(m.router, peers_atom_v, peers);
}

/// Node `id` leaves the cluster (its process died, it stopped, or it went silent): its replicas and
/// stages go, what waited on it fails, and its models are re-placed (replace_on_failure).
void lose_node(manager_pointer self, uint64_t id, const std::string& why, bool orderly) {
  auto& st = self->state;
  st.liveness.left(id);
  const std::string name = st.members.leave(id)->report.name;
  // A drain lasts while its node is a member (a node that comes back after maintenance is placed on).
  if (st.config.decisions && st.config.decisions->state().drained(name)) {
    (void)remember(self, DesiredState::left_record(name));  // a failure is logged; the drain then outlives it
  }
  // A node that shut down in order (its process is stopping) is news, not trouble.
  const auto level = orderly ? spdlog::level::info : spdlog::level::warn;
  spdlog::log(level, "manager: node {} (#{}) lost ({})", name, id, why);
  tell_peers(self);
  send_splices(self, st.relay.node_lost(name));
  // Its answers to distributions will never come (CAF does not fail requests to a lost node).
  for (uint64_t call : st.distributions.waiting_on(id))
    settle(self, call, id, unavailable("node " + name + " was lost during the transfer"));
  const auto changed =
      st.replicas.node_lost(id, name, st.config.replace_on_failure, now_ms(self), replica_actions(self));
  spdlog::log(level, "manager: {} model(s) affected by the loss of node {}", changed.size(), name);
}

/// A member's fresh report (its heartbeat said its replicas changed otherwise than the manager saw).
void reconcile(manager_pointer self, uint64_t id, node_report report) {
  auto& st = self->state;
  const auto found = st.liveness.reconcile(id, std::move(report), st.scaler.draining_on(id));
  if (found.adopted.empty() && found.gone.empty() && found.moved.empty()) return;
  publish(self, found.changed());
  st.replicas.trim(found.changed(), now_ms(self), replica_actions(self));  // a replica placed twice
  if (!st.config.replace_on_failure) return;
  for (const auto& key : st.registry.want_replacements(found.gone)) place(self, key);
}

/// Asks member `id` whether its router lives (and, when its replicas changed, for its report).
void ping(manager_pointer self, uint64_t id) {
  const auto timeout = self->state.config.node_timeout;
  const node_router_actor router = self->state.members.find(id)->router;
  auto reported = [self, id](const Result<node_report>& r) {
    auto seen = r.ok() ? std::optional<uint64_t>(report_fingerprint(*r)) : std::nullopt;
    if (self->state.liveness.reported(id, seen)) reconcile(self, id, *r);
  };
  auto pong = [self, id, router, timeout, reported](const Result<uint64_t>& fingerprint) {
    if (!fingerprint.ok()) return self->state.liveness.ping_failed(id);
    if (self->state.liveness.pinged(id, *fingerprint, now_us(self)))
      ask<node_report>(self, router, timeout, reported, report_atom_v);
  };
  ask<uint64_t>(self, router, timeout, pong, ping_atom_v);
}

/// Asks a node dropped for silence (parked under the id it had) whether it answers again; one that
/// answers a ping and then a report joins again with what it reports.
void ping_silent(manager_pointer self, uint64_t id) {
  const auto timeout = self->state.config.node_timeout;
  const Membership::Parked parked = *self->state.members.parked(id);
  const node_router_actor router = parked.router;
  auto reported = [self, id, parked](Result<node_report> r) {
    if (!r.ok()) return self->state.liveness.silent_failed(id);
    if (!self->state.liveness.take_back(id)) return;
    spdlog::warn("manager: node {} answers again; taken back with {} replica(s)", r->name, r->replicas.size());
    if (r->control.port == 0) r->control = parked.control;  // gateways dial it there
    join(self, *r, parked.router);
  };
  auto pong = [self, id, router, timeout, reported](const Result<uint64_t>& r) {
    if (!r.ok()) return self->state.liveness.silent_failed(id);
    if (self->state.liveness.silent_pinged(id)) ask<node_report>(self, router, timeout, reported, report_atom_v);
  };
  ask<uint64_t>(self, router, timeout, pong, ping_atom_v);
}

}  // namespace

void check_drains_later(manager_pointer self);

ReplicaActions replica_actions(manager_pointer self) {
  ReplicaActions a;
  a.send_load = [self](const model_key& key, uint64_t node, uint64_t attempt, load_replica load) {
    request_load(self, node, std::move(load), [self, key, node, attempt](const Result<replica_info>& r) {
      on_load_answer(self, key, node, attempt, r, true, false);
    });
  };
  a.send_stage = [self](const model_key& key, uint64_t node, uint64_t attempt, load_stage stage) {
    send_load(self, node, std::move(stage), [self, key, node, attempt](const Result<replica_info>& r) {
      self->state.replicas.stage_answered(key, node, attempt, r, now_ms(self), replica_actions(self));
    });
  };
  a.send_completion = [self](const model_key& key, uint64_t node, uint64_t attempt, load_replica load) {
    send_load(self, node, std::move(load), [self, key, node, attempt](const Result<replica_info>& r) {
      self->state.replicas.completion_answered(key, node, attempt, r, now_ms(self), replica_actions(self));
    });
  };
  a.unload_stage = [self](uint64_t node, const model_key& stage, int64_t delay_us) {
    if (delay_us <= 0) return unload_on(self, node, stage);
    self->delayed_send(self, std::chrono::microseconds(delay_us),
                       offload_done{[self, node, stage] { unload_on(self, node, stage); }});
  };
  a.publish = [self](const std::set<model_key>& keys) { publish(self, keys); };
  a.chain_timer = [self] { arm_chain_timer(self); };
  a.drain_step = [self] { drain_step(self); };
  a.check_drains = [self] { check_drains_later(self); };
  a.unbind = [self](const ScaleDriver::Unbind& u) { unbind(self, u); };
  a.evict = [self](const ScaleDriver::Evict& e) { evict_on(self, e); };
  a.place_later = [self](const model_key& key, int64_t delay_ms) {
    self->delayed_send(self, std::chrono::milliseconds(delay_ms), offload_done{[self, key] {
                         self->state.replicas.place_again(key, now_ms(self), replica_actions(self));
                       }});
  };
  return a;
}

void request_load(manager_pointer self, const ModelVersion& v, const LoadPlan& plan, LoadAnswer done) {
  request_load(self, plan.node, load_request(v, plan), std::move(done));
}

void request_load(manager_pointer self, uint64_t node, load_replica msg, LoadAnswer done) {
  const uint64_t transfer = msg.transfer_id;
  if (transfer != 0) msg.controller = caf::actor_cast<caf::actor>(self);
  auto hop = self->state.members.find(node)->report.name;
  send_load(self, node, std::move(msg), [self, done, transfer, hop](const Result<replica_info>& r) mutable {
    send_splices(self, self->state.relay.hop_ended(transfer, hop, r.ok(), now_ms(self)));
    done(r);
  });
}

/// A partitioned cold start's orders, one after the other (ReplicaDriver::run).
void run(manager_pointer self, const PipelineOrders& orders) {
  self->state.replicas.run(orders, now_ms(self), replica_actions(self));
}

/// Starts the replicas `key` lacks (at least one) unless loads are in flight (ReplicaDriver::place).
void place(manager_pointer self, const model_key& key) {
  self->state.replicas.place(key, now_ms(self), replica_actions(self));
}

void scale_tick(manager_pointer self) {
  auto& st = self->state;
  if (!st.scaler.autoscaler()) return;
  const auto interval = std::chrono::microseconds(st.config.autoscaler.interval_us);
  self->delayed_send(self, interval, scale_atom_v);
  // The nodes' queues, for the next tick (a node's answer stands until its next one).
  auto queued = [self](const Result<load_report>& r) {  // a busy node: next tick
    if (r.ok()) self->state.scaler.report(*r, now_us(self));
  };
  for (const auto& [id, node] : st.members.nodes()) ask<load_report>(self, node.router, interval, queued, scale_atom_v);
  st.replicas.scale(now_us(self), replica_actions(self));
}

/// No autoscaler tick ends drains: look again once gateways moved on (ScaleDriver::settle_us).
void check_drains_later(manager_pointer self) {
  self->delayed_send(self, std::chrono::microseconds(self->state.scaler.settle_us()), offload_done{[self] {
                       for (const auto& u : self->state.scaler.drains_over(now_us(self))) unbind(self, u);
                     }});
}

/// Moves the replicas off drained nodes, one pass per call (the console's drain; called again as
/// loads answer and drains end): ScaleDriver::move_off decides for each replica, finish for each node.
void drain_step(manager_pointer self) {
  auto& st = self->state;
  for (uint64_t node : st.scaler.drained_nodes()) {
    std::optional<Error> stuck;
    for (const model_key& key : st.registry.replicas_on(node)) {
      const auto move = st.scaler.move_off(node, key, now_us(self));
      if (move.check_later) check_drains_later(self);
      if (move.kind == ScaleDriver::Move::Kind::moved) {
        publish(self, {key});
        place(self, key);  // back to what it wanted, elsewhere
      } else if (move.kind == ScaleDriver::Move::Kind::replace) {
        place(self, key);
        if (auto why = st.scaler.stuck(key)) stuck = why;
      }
    }
    st.scaler.finish(node, stuck);
  }
}

/// Drains again the members the kept state says are drained but no drain runs on (a restart, or a
/// drain that could not finish for want of room). True when one was.
bool redrain_kept(manager_pointer self) {
  auto& st = self->state;
  if (!st.config.decisions) return false;
  const auto running = st.scaler.drained_nodes();
  bool any = false;
  for (const auto& [id, n] : st.members.nodes()) {
    if (!st.config.decisions->state().drained(n.report.name)) continue;
    if (std::find(running.begin(), running.end(), id) != running.end()) continue;
    st.scaler.drain_node(id, [](const Result<std::vector<model_key>>&) {});
    any = true;
  }
  return any;
}

uint64_t join(manager_pointer self, node_report report, node_router_actor router) {
  auto& st = self->state;
  self->monitor(router);
  if (auto silent = st.members.unpark(router.address())) st.liveness.forget_silent(*silent);
  const auto brought = report.replicas;
  const uint64_t fingerprint = report_fingerprint(report);
  const std::string name = report.name;
  const uint64_t id = st.members.join(std::move(report), std::move(router));
  st.liveness.joined(id, now_us(self), fingerprint);
  // A node drained before this manager started (manager.state_dir, etcd) is drained again: nothing
  // placed there. So is one whose drain could not finish earlier (no other node had room, as when it
  // rejoined first): a node joining may be the room it lacked.
  const bool drained = redrain_kept(self);
  const auto adopted = st.registry.adopt(brought, id);
  spdlog::info("manager: node {}", st.members.describe_join(id, adopted.size()));
  tell_peers(self);
  publish(self, adopted);
  // Models that wait for capacity, or that should have more replicas, get a node now.
  for (const auto& key : st.registry.wanting_placement()) place(self, key);
  if (drained) drain_step(self);  // what it brought moves elsewhere
  st.replicas.trim(adopted, now_ms(self), replica_actions(self));  // what it brought was placed again meanwhile
  return id;
}

void on_down(manager_pointer self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (auto silent = st.members.unpark(msg.source)) st.liveness.forget_silent(*silent);
  auto id = st.members.id_of(msg.source);
  if (!id) return void(st.routing.unsubscribe(msg.source));
  const bool orderly = msg.reason == caf::exit_reason::user_shutdown || msg.reason == caf::exit_reason::normal;
  lose_node(self, *id, caf::to_string(msg.reason), orderly);
}

/// The heartbeat timer: pings every member (one out per node), drops those silent for
/// node_timeout (their connection lives: parked, asked on) and asks the silent ones again.
void heartbeat(manager_pointer self) {
  auto& st = self->state;
  auto tick = st.liveness.tick(now_us(self));
  for (uint64_t id : tick.ping) ping(self, id);
  for (uint64_t id : tick.lost) {
    const node_router_actor router = st.members.find(id)->router;
    const HostPort control = st.members.find(id)->report.control;
    lose_node(self, id,
              "its router answered no heartbeat for " + std::to_string(st.liveness.timeout_us() / 1000) +
                  " ms; its connection lives: it is taken back when it answers",
              false);
    st.members.park(id, router, control);
  }
  for (uint64_t id : tick.ping_silent) ping_silent(self, id);
  self->delayed_send(self, st.config.heartbeat, ping_atom_v);
}

}  // namespace ember::manager_impl
