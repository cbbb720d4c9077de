// cluster_manager: the handlers of cluster_manager_interface.hpp over the plain classes that hold
// the manager's state and make its decisions (manager_state.hpp): ModelRegistry (versions,
// readiness, waiters), Membership (nodes), LoadPlanner (placement and sourcing) and TicketIssuer,
// ChainController and ChainRelay (multicast transfers), DistributionTracker (distribute/evict
// calls), RoutingPublisher (gateways, the recovery window), PartitionController (partitioned cold
// starts), ScaleDriver (autoscaling, drains, node drains, embers), NodeLiveness (heartbeats,
// reconcile). A handler asks them and does what they return: it sends the orders (loads, splices,
// unloads, evictions, routing updates) and brings the answers back to the class that asked.
//
// This file: the behaviour, and the requests of the manager's clients (gateways, the repository
// API, distributions, the console's plain commands). What the manager does with nodes (replicas
// placed and answered, pipelines, scaling and drains, membership and heartbeats) is in
// manager_nodes.cpp. Runs on the actor, never blocks: time comes from the actor clock, repository
// rescans and plan tables run on the manager process's queues (actors/offload.hpp), node work is
// requested with timeouts. The console's admin interface is the admin actor beside it
// (actors/console/admin.hpp), which the manager spawns through config.admin.
#include "actors/cluster/cluster_manager.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <optional>

#include "actors/actor_system.hpp"
#include "actors/cluster/manager_state.hpp"
#include "actors/cluster/repository_index.hpp"
#include "transport/ticket.hpp"

namespace ember {
namespace manager_impl {

constexpr const char* kScanQueueFull = "the manager's repository scan queue is full; try again";

void publish(manager_pointer self, const std::set<model_key>& changed, const std::vector<model_key>& removed,
             bool workflows) {
  auto& st = self->state;
  auto update = st.routing.delta(st.registry, st.members, changed, removed, workflows);
  for (const auto& g : st.routing.subscribers()) self->send(g, update);
}

void send_splices(manager_pointer self, std::vector<SpliceOrder> orders) {
  auto& st = self->state;
  for (auto& o : orders) {
    st.tickets.stamp(o.splice.upstream, st.chains.model_of(o.splice.transfer_id), o.hop, transport::unix_now());
    self->send(caf::actor_cast<transfer_peer_actor>(o.peer), o.splice);
  }
}

Status remember(manager_pointer self, const std::string& record) {
  const auto& decisions = self->state.config.decisions;
  return decisions ? decisions->record(record) : Status::OK();
}

void arm_chain_timer(manager_pointer self) {
  if (self->state.relay.arm_timer()) self->delayed_send(self, self->state.config.chain_check_interval, tick_atom_v);
}

namespace {

/// A Result as the handler's answer.
template <class T>
caf::result<T> reply(Result<T> r) {
  if (!r.ok()) return to_caf(r.error());
  return caf::result<T>(std::move(*r));
}

// -- the repository --------------------------------------------------------------------------

/// Builds the plan tables that versions with a profile lack, one version at a time on the plan
/// queue (PartitionController::next_tables).
void prepare_plans(manager_pointer self) {
  auto& st = self->state;
  if (!st.config.plan_queue) return;
  auto job = st.partitions.next_tables();
  if (!job) return;
  auto work = [job = *job] { return PartitionController::build_tables(job); };
  auto done = [self, job = *job](PartitionController::BuiltTables& built) {
    self->state.partitions.tables_built(job, std::move(built));
    prepare_plans(self);  // the next version lacking one
  };
  if (!offload(self, *st.config.plan_queue, work, done)) st.partitions.tables_refused();
}

/// A rescan's models (`workflows`: its workflows changed too; the update carries them).
void apply_scan(manager_pointer self, const std::string& model, std::vector<RepositoryEntry> entries,
                bool workflows = false) {
  auto& st = self->state;
  auto changes = st.registry.apply_scan(model, std::move(entries));
  const auto now = st.registry.entries(model);
  st.index->replace(now, model);
  for (const auto& key : changes.removed) st.partitions.forget(key);
  prepare_plans(self);
  st.scaler.scanned(changes, now);
  publish(self, changes.changed, changes.removed, workflows);
}

/// Rescans `model` ("" = the whole repository, workflows included) off the actor, applies it, then
/// answers the request through `then(rp)`; unavailable at once when the scan queue is full.
template <class T, class Then>
caf::typed_response_promise<T> after_rescan(manager_pointer self, const std::string& model, Then then) {
  auto rp = self->make_response_promise<T>();
  auto scan = [root = self->state.config.repository, model] { return rescan_repository(root, model); };
  auto done = [self, model, then, rp](RepositoryScan& found) mutable {
    const bool workflows = found.workflows && self->state.routing.set_workflows(std::move(*found.workflows));
    apply_scan(self, model, std::move(found.models), workflows);
    then(rp);
  };
  if (!offload(self, *self->state.scan_queue, scan, done)) rp.deliver(to_caf(unavailable(kScanQueueFull)));
  return rp;
}

/// The chain stall check's timer: hops stalled or slow are spliced out.
void chain_tick(manager_pointer self) {
  self->state.relay.timer_fired();
  send_splices(self, self->state.relay.check_stalls(now_ms(self)));
  arm_chain_timer(self);
}

// -- the repository API ----------------------------------------------------------------------

caf::result<model_state> ensure(manager_pointer self, const model_key& key) {
  auto rp = self->make_response_promise<model_state>();
  self->state.replicas.ensure(key, answer_to(rp), now_ms(self), replica_actions(self));
  return rp;
}

caf::result<model_state> load(manager_pointer self, const model_command& cmd) {
  return after_rescan<model_state>(self, cmd.model.name, [self, cmd](auto rp) {
    if (self->state.registry.find(cmd.model)) {  // an unknown model is refused below, and not kept
      if (Status kept = remember(self, DesiredState::load_record(cmd.model, cmd.replicas)); !kept.ok()) {
        return answer_to(rp)(Result<model_state>(kept.error()));
      }
    }
    self->state.replicas.load(cmd.model, cmd.replicas, answer_to(rp), now_ms(self), replica_actions(self));
  });
}

/// The decisions kept in manager.state_dir, acted on again as the manager starts
/// (ReplicaDriver::restore), then written as one snapshot.
void restore(manager_pointer self) {
  auto& st = self->state;
  if (!st.config.decisions) return;
  st.replicas.restore(st.config.decisions->state(), now_ms(self), replica_actions(self));
  if (Status s = st.config.decisions->compact(); !s.ok()) spdlog::warn("manager: {}", s.error().message());
}

caf::result<std::vector<model_state>> list_models(manager_pointer self) {
  return after_rescan<std::vector<model_state>>(self, "",
                                                [self](auto rp) { rp.deliver(self->state.registry.states()); });
}

caf::result<model_state> unload(manager_pointer self, const model_command& cmd) {
  auto& st = self->state;
  if (!st.registry.find(cmd.model)) return to_caf(not_found("unknown model '" + cmd.model.name + "'"));
  if (Status kept = remember(self, DesiredState::unload_record(cmd.model)); !kept.ok()) return to_caf(kept.error());
  std::set<model_key> changed;
  model_state last;
  for (const auto& u : st.registry.unload(cmd.model)) {
    run(self, st.partitions.unloaded(u.state.model));
    for (const auto& router : st.members.release(u.replicas, u.weights_bytes))
      caf::anon_send(router, unload_atom_v, u.state.model);  // fire and forget: no answer wanted
    changed.insert(u.state.model);
    st.scaler.set_floor(u.state.model, 0);
    last = u.state;
    spdlog::info("manager: {} unloaded", u.state.model.to_string());
  }
  publish(self, changed);
  return last;
}

/// Sets a model's SLO and tells the nodes that hold or load it (the others get it with their load).
caf::result<std::vector<model_state>> set_slo(manager_pointer self, const slo_command& cmd) {
  auto& st = self->state;
  auto changed = st.registry.set_slo(cmd.model, cmd.slo);
  if (!changed.ok()) return to_caf(changed.error());
  // Set, then kept before it is acknowledged (a crash between them: the caller heard nothing).
  if (Status kept = remember(self, DesiredState::slo_record(cmd.model, cmd.slo)); !kept.ok()) return to_caf(kept.error());
  std::vector<model_state> out;
  for (const model_key& key : *changed) {
    const ModelVersion* v = st.registry.find(key);
    for (uint64_t node : v->nodes()) {
      const auto* n = st.members.find(node);
      if (!n) continue;
      auto told = [name = n->report.name, key](const Result<bool>& r) {
        // A node that does not answer has it with its next load_replica, or is lost.
        if (!r.ok())
          spdlog::warn("manager: node {} did not take the SLO of {}: {}", name, key.to_string(),
                       to_string(r.error().code()));
      };
      ask<bool>(self, n->router, std::chrono::seconds(10), told, slo_atom_v, key, cmd.slo);
    }
    out.push_back(v->state);
  }
  return out;
}

// -- distribution ----------------------------------------------------------------------------

/// Tracks a distribute or evict call until every node it waits for settled.
std::pair<uint64_t, caf::typed_response_promise<distribute_result>> track(manager_pointer self, Distribution& d) {
  auto rp = self->make_response_promise<distribute_result>();
  auto reply = [rp](distribute_result r) mutable { rp.deliver(std::move(r)); };
  return {self->state.distributions.start(std::move(d.result), d.pending, self->clock().now(), reply), rp};
}

/// Node `node` of call `call` settled: a distribution's receiver now caches the bytes; an
/// eviction's node that dropped them no longer does. Stale answers change nothing.
void settle(manager_pointer self, uint64_t call, uint64_t node, const DistributionTracker::Outcome& outcome) {
  auto& st = self->state;
  auto settled = st.distributions.settle(call, node, outcome, self->clock().now());
  if (settled && outcome.ok() && *outcome) st.members.note_cached(node, settled->model, !settled->evicted);
}

caf::result<distribute_result> distribute(manager_pointer self, const distribute_request& req) {
  auto plan = self->state.planner.distribute(req, now_ms(self));
  if (!plan.ok()) return to_caf(plan.error());
  if (plan->pending.empty()) return plan->result;
  arm_chain_timer(self);
  const ModelVersion& v = *self->state.registry.find(plan->result.model);
  auto [call, rp] = track(self, *plan);
  for (const auto& p : plan->loads) {
    request_load(self, v, p, [self, call = call, node = p.node](const Result<replica_info>& r) {
      settle(self, call, node, r.ok() ? DistributionTracker::Outcome(r.value()) : r.error());
    });
  }
  return rp;
}

/// A model added to the repository since the last scan is found, as a load finds it.
caf::result<distribute_result> distribute_found(manager_pointer self, const distribute_request& req) {
  if (self->state.registry.find(req.model)) return distribute(self, req);
  return after_rescan<distribute_result>(self, req.model.name, [self, req](auto rp) mutable {
    if (!self->state.registry.find(req.model)) {
      rp.deliver(to_caf(not_found("unknown model '" + req.model.name + "'")));
    } else {
      rp.delegate(caf::actor_cast<cluster_manager_actor>(self), distribute_atom_v, req);
    }
  });
}

caf::result<distribute_result> evict(manager_pointer self, const distribute_request& req) {
  using Line = std::optional<replica_info>;
  auto plan = self->state.planner.evict(req);
  if (!plan.ok()) return to_caf(plan.error());
  if (plan->pending.empty()) return plan->result;
  const model_key key = plan->result.model;
  auto [call, rp] = track(self, *plan);
  for (const auto& [id, hop] : plan->pending) {
    const Line line = replica_info{key, hop.node, "", SourceTier::cache, "", 0, 0};
    auto dropped = [self, call = call, id = id, line](const Result<bool>& r) {
      settle(self, call, id, r.ok() ? DistributionTracker::Outcome(*r ? line : Line{}) : r.error());
    };
    ask<bool>(self, self->state.members.find(id)->router, kEvictTimeout, dropped, evict_atom_v, key);
  }
  return rp;
}

caf::result<blob_source> new_upstream(manager_pointer self, const chain_upstream_request& r) {
  auto& st = self->state;
  std::vector<SpliceOrder> orders;
  auto upstream = st.relay.upstream_after_failure(r, orders);
  send_splices(self, std::move(orders));
  if (!upstream.ok()) return to_caf(upstream.error());
  st.tickets.stamp(*upstream, st.chains.model_of(r.transfer_id), r.node, transport::unix_now());
  return caf::result<blob_source>(std::move(*upstream));
}

caf::result<std::vector<model_key>> drain_node(manager_pointer self, const std::string& name) {
  auto id = self->state.members.id_of(name);
  if (!id) return to_caf(not_found("no node named '" + name + "' is in the cluster"));
  if (Status kept = remember(self, DesiredState::drain_record(name)); !kept.ok()) return to_caf(kept.error());
  auto rp = self->make_response_promise<std::vector<model_key>>();
  self->state.scaler.drain_node(*id, answer_to(rp));
  drain_step(self);
  return rp;
}

// -- gateways, the console's plain commands ----------------------------------------------------

/// A gateway joins the routing table's subscribers: the full table now, updates from then on.
routing_update subscribe(manager_pointer self, const gateway_actor& gateway) {
  self->monitor(gateway);
  self->state.routing.subscribe(gateway);
  return self->state.routing.full(self->state.registry, self->state.members);
}

/// A gateway with a table from the manager's previous life: held until the recovery window's end.
caf::result<routing_update> resubscribe(manager_pointer self, const gateway_actor& gateway, uint64_t held_epoch) {
  auto& st = self->state;
  if (!st.routing.must_hold(held_epoch, now_us(self))) return subscribe(self, gateway);
  auto rp = self->make_response_promise<routing_update>();
  auto answer = [rp](routing_update u) mutable { rp.deliver(std::move(u)); };
  if (const int64_t arm_us = st.routing.hold(gateway, answer, now_us(self)); arm_us > 0) {
    self->delayed_send(self, std::chrono::microseconds(arm_us), offload_done{[self] {
                         for (auto& [g, held] : self->state.routing.window_over()) held(subscribe(self, g));
                       }});
  }
  return rp;
}

/// The console's own commands (drain, scale, slo, transfers, fault, log-level) run only when the
/// admin actor asks them, having checked the console's token (actors/console/admin.hpp);
/// permission_denied from anyone else.
template <class F>
auto from_admin(manager_pointer self, F run) -> decltype(run()) {
  const auto& admin = self->state.admin;
  if (!admin || self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(admin)) {
    return to_caf(permission_denied("the console's commands go through the manager's admin interface (ember console, "
                                    "with the admin token)"));
  }
  return run();
}

caf::result<model_state> set_bounds(manager_pointer self, const model_key& key, uint32_t min, uint32_t max) {
  auto set = self->state.scaler.set_bounds(key, min, max);
  if (!set.ok()) return to_caf(set.error());
  // Set, then kept before it is acknowledged (a crash between them: the caller heard nothing).
  if (Status kept = remember(self, DesiredState::scale_record(key, min, max)); !kept.ok()) return to_caf(kept.error());
  return *set;
}

caf::result<admin_actor> admin(manager_pointer self) {
  if (!self->state.admin) return to_caf(unavailable("this manager has no admin interface"));
  return self->state.admin;
}

/// Asked (not delegated) so that the node sees its manager as the sender: a node takes a fault only
/// from the manager it joined (actors/node/joined_manager.hpp).
caf::result<std::string> fault(manager_pointer self, const std::string& name, fault_command& f) {
  auto id = self->state.members.id_of(name);
  if (!id) return to_caf(not_found("no node named '" + name + "' is in the cluster"));
  auto rp = self->make_response_promise<std::string>();
  self->request(self->state.members.find(*id)->router, std::chrono::seconds(30), fault_atom_v, std::move(f))
      .then([rp](std::string& done) mutable { rp.deliver(std::move(done)); },
            [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
  return rp;
}

caf::result<std::vector<hop_progress>> transfers(manager_pointer self) { return self->state.relay.transfers(); }

caf::result<uint32_t> log_level(manager_pointer self, const std::string& level) {
  if (auto set = set_log_level(level); !set.ok()) return to_caf(set.error());
  uint32_t told = 1;
  for (const auto& [id, node] : self->state.members.nodes()) {
    caf::anon_send(node.router, log_level_atom_v, level);
    ++told;
  }
  return told;
}

cluster_manager_actor::behavior_type manager_behavior(manager_pointer self, ClusterManagerConfig config,
                                                      std::vector<RepositoryEntry> initial,
                                                      std::vector<workflow_entry> workflows,
                                                      std::shared_ptr<RepositoryIndex> index, WorkQueue* scan_queue) {
  auto& st = self->state;
  st.config = std::move(config);
  st.index = std::move(index);
  st.scan_queue = scan_queue;
  st.routing.set_workflows(std::move(workflows), /*announce=*/false);
  st.routing.set_recovery_window(now_us(self), st.config.recovery_window.count());
  st.chains = ChainController(st.config.stall);
  st.planner.set_repository(st.config.data);
  st.planner.set_options(PlacementOptions::from(st.config.autoscaler));
  st.partitions.configure(st.config.autoscaler.partition_stages, st.config.autoscaler.partition_bandwidth,
                          st.config.autoscaler.completion_rate);
  st.scaler.configure(st.config.autoscale, st.config.autoscaler);
  st.routing.set_report_interval(st.scaler.autoscaler() ? st.config.autoscaler.interval_us : 0);
  st.liveness.set_timeout(st.config.node_timeout.count());
  st.tickets = TicketIssuer(st.config.tickets);
  if (st.config.admin) st.admin = st.config.admin(caf::actor_cast<cluster_manager_actor>(self));
  if (st.scaler.autoscaler()) {
    self->delayed_send(self, std::chrono::microseconds(st.config.autoscaler.interval_us), scale_atom_v);
  }
  apply_scan(self, "", std::move(initial));
  spdlog::info("manager: repository {} holds {} model version(s)", st.config.repository, st.registry.versions().size());
  restore(self);
  self->set_down_handler([self](caf::down_msg& msg) { on_down(self, msg); });
  if (st.config.heartbeat.count() > 0 && st.config.node_timeout.count() > 0) {
    self->delayed_send(self, st.config.heartbeat, ping_atom_v);
  }
  return {
      [self](join_atom, node_report& r, node_router_actor& n) { return join(self, std::move(r), std::move(n)); },
      [self](subscribe_atom, gateway_actor& gateway) { return subscribe(self, gateway); },
      [self](subscribe_atom, gateway_actor& g, uint64_t held) { return resubscribe(self, g, held); },
      [self](ensure_atom, const model_key& key) { return ensure(self, key); },
      [self](load_atom, const model_command& cmd) { return load(self, cmd); },
      [self](unload_atom, const model_command& cmd) { return unload(self, cmd); },
      [self](index_atom) { return list_models(self); },
      [self](nodes_atom) { return RoutingPublisher::node_reports(self->state.registry, self->state.members); },
      [self](distribute_atom, const distribute_request& req) { return distribute_found(self, req); },
      [self](evict_atom, const distribute_request& req) { return evict(self, req); },
      [self](const chain_progress& p) { send_splices(self, self->state.relay.on_progress(p, now_ms(self))); },
      [self](const chain_upstream_request& r) { return new_upstream(self, r); },
      [self](const load_report& r) { self->state.scaler.report(r, now_us(self)); },
      [self](metrics_atom) { return self->state.scaler.instruments().registry().snapshot(); },
      [self](admin_atom) { return admin(self); },
      [self](drain_atom, const std::string& n) { return from_admin(self, [&] { return drain_node(self, n); }); },
      [self](scale_atom, const model_key& k, uint32_t lo, uint32_t hi) {
        return from_admin(self, [&] { return set_bounds(self, k, lo, hi); });
      },
      [self](slo_atom, const slo_command& cmd) { return from_admin(self, [&] { return set_slo(self, cmd); }); },
      [self](log_level_atom, const std::string& l) { return from_admin(self, [&] { return log_level(self, l); }); },
      [self](transfers_atom) { return from_admin(self, [&] { return transfers(self); }); },
      [self](fault_atom, const std::string& n, fault_command& f) { return from_admin(self, [&] { return fault(self, n, f); }); },
      [self](tick_atom) { chain_tick(self); },
      [self](scale_atom) { scale_tick(self); },
      [self](ping_atom) { heartbeat(self); },
      resume_offloaded(),
  };
}

}  // namespace
}  // namespace manager_impl
cluster_manager_actor spawn_cluster_manager(caf::actor_system& sys, ClusterManagerConfig config,
                                            std::vector<RepositoryEntry> initial,
                                            std::shared_ptr<RepositoryIndex> index, WorkQueue& scan_queue,
                                            std::vector<workflow_entry> workflows) {
  return sys.spawn(manager_impl::manager_behavior, std::move(config), std::move(initial), std::move(workflows),
                   std::move(index), &scan_queue);
}

}  // namespace ember
