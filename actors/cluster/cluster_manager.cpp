// cluster_manager: the handlers of cluster_manager_interface.hpp and the orchestration between the
// plain classes that hold the manager's state and make its decisions: ModelRegistry (versions,
// readiness, waiters), Membership (nodes), LoadPlanner (placement and sourcing), ChainController
// and ChainRelay (multicast transfers), DistributionTracker (distribute/evict calls) and
// RoutingPublisher (gateways). A handler asks them and sends what they return; a new concern (an
// autoscaler, partition plans) is one more class beside them and a few lines here. Time comes from
// the actor clock; repository rescans run on the manager process's scan queue (actors/offload.hpp).
#include "actors/cluster/cluster_manager.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/cluster/chain_relay.hpp"  // and the chain controller, load planner, registry, membership
#include "actors/cluster/repository_index.hpp"
#include "actors/cluster/routing_publisher.hpp"
#include "actors/errors.hpp"

namespace ember {
namespace {

constexpr auto kLoadTimeout = std::chrono::minutes(10);  // a node's budget to fetch and bind a replica
constexpr auto kEvictTimeout = std::chrono::seconds(10);
constexpr const char* kScanQueueFull = "the manager's repository scan queue is full; try again";

struct manager_state {
  static inline const char* name = "ember.cluster_manager";
  ClusterManagerConfig config;
  std::shared_ptr<RepositoryIndex> index;
  WorkQueue* scan_queue = nullptr;  // the process's; outlives the actor
  ModelRegistry registry;
  Membership members;
  ChainController chains;
  LoadPlanner planner{registry, members, chains};
  ChainRelay relay{chains, planner};
  DistributionTracker distributions;
  RoutingPublisher routing;
  bool chain_timer = false;
};

using manager_pointer = cluster_manager_actor::stateful_pointer<manager_state>;
using Line = std::optional<replica_info>;

int64_t now_ms(manager_pointer self) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now().time_since_epoch()).count();
}

template <class T>
std::function<void(const Result<T>&)> answer_to(caf::typed_response_promise<T> rp) {
  return [rp](const Result<T>& r) mutable { r.ok() ? void(rp.deliver(*r)) : void(rp.deliver(to_caf(r.error()))); };
}

void publish(manager_pointer self, const std::set<model_key>& changed, const std::vector<model_key>& removed = {}) {
  auto update = self->state.routing.delta(self->state.registry, self->state.members, changed, removed);
  for (const auto& g : self->state.routing.subscribers()) self->send(g, update);
}

void apply_scan(manager_pointer self, const std::string& model, std::vector<RepositoryEntry> entries) {
  auto& st = self->state;
  auto changes = st.registry.apply_scan(model, std::move(entries));
  st.index->replace(st.registry.entries(model), model);
  publish(self, changes.changed, changes.removed);
}

/// Rescans `model` ("" = the whole repository) off the actor, applies it, then answers the
/// request through `then(rp)`; unavailable at once when the scan queue is full.
template <class T, class Then>
caf::typed_response_promise<T> after_rescan(manager_pointer self, const std::string& model, Then then) {
  auto rp = self->make_response_promise<T>();
  auto scan = [root = self->state.config.repository, model] {
    return model.empty() ? scan_repository(root) : scan_repository_model(root, model);
  };
  auto done = [self, model, then, rp](std::vector<RepositoryEntry>& entries) mutable {
    apply_scan(self, model, std::move(entries));
    then(rp);
  };
  if (!offload(self, *self->state.scan_queue, scan, done)) rp.deliver(to_caf(unavailable(kScanQueueFull)));
  return rp;
}

void send_all(manager_pointer self, const std::vector<SpliceOrder>& orders) {
  for (const auto& o : orders) self->send(caf::actor_cast<transfer_peer_actor>(o.peer), o.splice);
}

void arm_chain_timer(manager_pointer self) {
  if (self->state.chain_timer || !self->state.relay.active()) return;
  self->state.chain_timer = true;
  self->delayed_send(self, self->state.config.chain_check_interval, tick_atom_v);
}

// -- replicas --------------------------------------------------------------------------------

/// Asks `plan.node` for a replica (or only for the bytes); the chain relay sees the answer, then
/// `done` gets it.
template <class Done>
void request_load(manager_pointer self, const ModelVersion& v, const LoadPlan& plan, Done done) {
  auto msg = load_request(v, plan);
  if (plan.transfer_id != 0) msg.controller = caf::actor_cast<caf::actor>(self);
  const ClusterNode& node = *self->state.members.find(plan.node);
  auto finish = [self, done, transfer = plan.transfer_id, hop = node.report.name](Result<replica_info> r) mutable {
    send_all(self, self->state.relay.hop_ended(transfer, hop, r.ok(), now_ms(self)));
    done(r);
  };
  self->request(node.router, kLoadTimeout, std::move(msg))
      .then([finish](replica_info& info) mutable { finish(std::move(info)); },
            [finish](caf::error& err) mutable { finish(from_caf(err)); });
}

void place(manager_pointer self, const model_key& key);

void on_load_answer(manager_pointer self, const model_key& key, uint64_t node, uint64_t attempt,
                    const Result<replica_info>& r) {
  auto& st = self->state;
  st.members.unreserve(node, attempt);  // bound below on success; free again otherwise
  if (r.ok()) {
    ModelVersion* v = st.registry.replica_ready(key, node, attempt, *r);
    if (!v) return;  // stale
    st.members.bind(node, r->device, v->entry.weights_bytes);
    st.members.note_cached(node, key, true);
    st.registry.answer_waiters(*v);
    return publish(self, {key});
  }
  const auto* n = st.members.find(node);
  const auto outcome = st.registry.load_failed(key, node, attempt, r.error(), n ? n->report.name : "");
  if (outcome == ModelRegistry::LoadFailure::stale) return;
  publish(self, {key});
  if (outcome == ModelRegistry::LoadFailure::retry_elsewhere) place(self, key);  // another node, if any is left
}

/// Starts the replicas `key` lacks (at least one) unless loads are in flight.
void place(manager_pointer self, const model_key& key) {
  auto& st = self->state;
  ModelVersion* v = st.registry.to_place(key);
  if (!v) return;
  auto plans = st.planner.place(*v, now_ms(self));
  if (!plans.ok()) return st.registry.placement_failed(*v, plans.error());
  for (const auto& plan : plans->loads) {
    const uint64_t attempt = st.registry.load_started(*v, plan.node);
    st.members.reserve(plan.node, attempt, v->entry.weights_bytes);
    request_load(self, *v, plan, [self, key, node = plan.node, attempt](const Result<replica_info>& r) {
      on_load_answer(self, key, node, attempt, r);
    });
  }
  arm_chain_timer(self);
  publish(self, {key});
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

caf::result<distribute_result> evict(manager_pointer self, const distribute_request& req) {
  auto plan = self->state.planner.evict(req);
  if (!plan.ok()) return to_caf(plan.error());
  if (plan->pending.empty()) return plan->result;
  const model_key key = plan->result.model;
  auto [call, rp] = track(self, *plan);
  for (const auto& [id, hop] : plan->pending) {
    const Line line = replica_info{key, hop.node, "", SourceTier::cache, "", 0, 0};
    self->request(self->state.members.find(id)->router, kEvictTimeout, evict_atom_v, key)
        .then([self, call = call, id = id, line](bool dropped) { settle(self, call, id, dropped ? line : Line{}); },
              [self, call = call, id = id](caf::error& err) { settle(self, call, id, from_caf(err)); });
  }
  return rp;
}

// -- membership ------------------------------------------------------------------------------

uint64_t join(manager_pointer self, node_report& report, node_router_actor& router) {
  auto& st = self->state;
  self->monitor(router);
  const auto brought = report.replicas;
  const uint64_t id = st.members.join(std::move(report), std::move(router));
  const auto adopted = st.registry.adopt(brought, id);
  spdlog::info("manager: node {}", st.members.describe_join(id, adopted.size()));
  publish(self, adopted);
  // Models that wait for capacity, or that should have more replicas, get a node now.
  for (const auto& key : st.registry.wanting_placement()) place(self, key);
  return id;
}

void on_down(manager_pointer self, const caf::down_msg& msg) {
  auto& st = self->state;
  auto id = st.members.id_of(msg.source);
  if (!id) return void(st.routing.unsubscribe(msg.source));
  const std::string name = st.members.leave(*id)->report.name;
  send_all(self, st.relay.node_lost(name));
  // Its answers to distributions will never come (CAF does not fail requests to a lost node).
  for (uint64_t call : st.distributions.waiting_on(*id))
    settle(self, call, *id, unavailable("node " + name + " was lost during the transfer"));
  const auto changed = st.registry.node_lost(*id);
  // A node that shut down in order (its process is stopping) is news, not trouble.
  const bool orderly = msg.reason == caf::exit_reason::user_shutdown || msg.reason == caf::exit_reason::normal;
  const auto level = orderly ? spdlog::level::info : spdlog::level::warn;
  spdlog::log(level, "manager: node {} (#{}) lost ({}); {} model(s) affected", name, *id, caf::to_string(msg.reason),
              changed.size());
  publish(self, changed);
  if (!st.config.replace_on_failure) return;
  for (const auto& key : st.registry.want_replacements(changed)) place(self, key);  // on a survivor
}

// -- the repository API ----------------------------------------------------------------------

model_state unload(manager_pointer self, const model_key& which) {
  auto& st = self->state;
  std::set<model_key> changed;
  model_state last;
  for (const auto& u : st.registry.unload(which)) {
    for (const auto& router : st.members.release(u.replicas, u.weights_bytes))
      caf::anon_send(router, unload_atom_v, u.state.model);  // fire and forget: no answer wanted
    changed.insert(u.state.model);
    last = u.state;
    spdlog::info("manager: {} unloaded", u.state.model.to_string());
  }
  publish(self, changed);
  return last;
}

cluster_manager_actor::behavior_type manager_behavior(manager_pointer self, ClusterManagerConfig config,
                                                      std::vector<RepositoryEntry> initial,
                                                      std::shared_ptr<RepositoryIndex> index, WorkQueue* scan_queue) {
  auto& st = self->state;
  st.config = std::move(config);
  st.index = std::move(index);
  st.scan_queue = scan_queue;
  st.chains = ChainController(st.config.stall);
  st.planner.set_repository(st.config.data);
  apply_scan(self, "", std::move(initial));
  spdlog::info("manager: repository {} holds {} model version(s)", st.config.repository, st.registry.versions().size());
  self->set_down_handler([self](caf::down_msg& msg) { on_down(self, msg); });
  return {
      [self](join_atom, node_report& report, node_router_actor& router) { return join(self, report, router); },
      [self](subscribe_atom, gateway_actor& gateway) {
        self->monitor(gateway);
        self->state.routing.subscribe(gateway);
        return self->state.routing.full(self->state.registry, self->state.members);
      },
      [self](ensure_atom, const model_key& key) -> caf::result<model_state> {
        auto rp = self->make_response_promise<model_state>();
        if (auto wanted = self->state.registry.want(key, 0, false, answer_to(rp))) place(self, *wanted);
        return rp;
      },
      [self](load_atom, const model_command& cmd) -> caf::result<model_state> {
        return after_rescan<model_state>(self, cmd.model.name, [self, cmd](auto rp) {
          if (auto wanted = self->state.registry.want(cmd.model, cmd.replicas, true, answer_to(rp)))
            place(self, *wanted);
        });
      },
      [self](unload_atom, const model_command& cmd) -> caf::result<model_state> {
        if (!self->state.registry.find(cmd.model)) return to_caf(not_found("unknown model '" + cmd.model.name + "'"));
        return unload(self, cmd.model);
      },
      [self](index_atom) -> caf::result<std::vector<model_state>> {
        return after_rescan<std::vector<model_state>>(self, "",
                                                      [self](auto rp) { rp.deliver(self->state.registry.states()); });
      },
      [self](nodes_atom) { return RoutingPublisher::node_reports(self->state.registry, self->state.members); },
      [self](distribute_atom, const distribute_request& req) { return distribute(self, req); },
      [self](evict_atom, const distribute_request& req) { return evict(self, req); },
      [self](const chain_progress& p) { send_all(self, self->state.relay.on_progress(p, now_ms(self))); },
      [self](const chain_upstream_request& r) -> caf::result<blob_source> {
        std::vector<SpliceOrder> orders;
        auto upstream = self->state.relay.upstream_after_failure(r, orders);
        send_all(self, orders);
        return upstream.ok() ? caf::result<blob_source>(*upstream) : to_caf(upstream.error());
      },
      [self](tick_atom) {
        self->state.chain_timer = false;
        send_all(self, self->state.relay.check_stalls(now_ms(self)));
        arm_chain_timer(self);
      },
      resume_offloaded(),
  };
}

}  // namespace

cluster_manager_actor spawn_cluster_manager(caf::actor_system& sys, ClusterManagerConfig config,
                                            std::vector<RepositoryEntry> initial,
                                            std::shared_ptr<RepositoryIndex> index, WorkQueue& scan_queue) {
  return sys.spawn(manager_behavior, std::move(config), std::move(initial), std::move(index), &scan_queue);
}

}  // namespace ember
