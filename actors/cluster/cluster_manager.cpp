// cluster_manager: the handlers of cluster_manager_interface.hpp and the orchestration between the
// plain classes that hold the manager's state and make its decisions: ModelRegistry (versions,
// readiness, waiters), Membership (nodes), LoadPlanner (placement and sourcing), ChainController
// and ChainRelay (multicast transfers), DistributionTracker (distribute/evict calls) and
// RoutingPublisher (gateways), AutoscalerLoop (replicas that follow the load). A handler asks them
// and sends what they return; a new concern (partition plans) is one more class beside them and a
// few lines here. Time comes from the actor clock; repository rescans run on the manager process's
// scan queue (actors/offload.hpp).
//
// Autoscaling: gateways send a load_report every autoscale.interval, and each scale tick asks every
// node for the requests queued there; each tick the loop decides for every model. Up: the version wants more replicas, replicas still draining come back
// first, then place() starts the rest (chained when several nodes lack the bytes). Down: the least
// busy replicas leave the routing table at once (ModelRegistry::retire), drain while the gateways
// report requests in flight on them (at least two report intervals, at most drain_timeout), and are
// then unbound on their node, which keeps the bytes in its host cache; a model idle for its
// host_keep_alive has its bytes evicted from the caches too.
#include "actors/cluster/cluster_manager.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <optional>

#include "actors/actor_system.hpp"
#include "actors/cluster/autoscaler_loop.hpp"
#include "actors/cluster/chain_relay.hpp"  // and the chain controller, load planner, registry, membership
#include "actors/cluster/manager_instruments.hpp"
#include "actors/cluster/partition_controller.hpp"
#include "actors/cluster/repository_index.hpp"
#include "actors/cluster/routing_publisher.hpp"
#include "actors/errors.hpp"
#include "base/token_file.hpp"

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
  /// The repository's workflows as the last whole scan found them (gateways get them in updates).
  std::vector<workflow_entry> workflows;
  bool chain_timer = false;
  // -- autoscaling --
  std::unique_ptr<AutoscalerLoop> autoscaler;  // null when autoscale.enabled is false
  ManagerInstruments instruments;
  /// A retired replica between leaving the routing table and being unbound on its node.
  struct Drain {
    model_key key;
    uint64_t node = 0;
    std::string device;
    uint64_t bytes = 0;
    caf::actor_clock::time_point started;
    bool unbinding = false;  // the unload was sent: it can no longer come back
  };
  std::map<uint64_t, Drain> drains;
  uint64_t next_drain = 1;
  // -- partitioned cold starts --
  PartitionController partitions;
  // -- recovery --
  caf::actor_clock::time_point started;  // the actor clock's, at spawn
  bool planning = false;                 // a plan table is being built (prepare_plans)
  /// Nodes the console drains: the models moved so far and who waits for the end.
  struct NodeDrain {
    std::vector<model_key> moved;
    /// What a model wanted before its replacement was asked for (its count once the drain moved it).
    std::map<model_key, uint32_t> wanted_before;
    std::vector<caf::typed_response_promise<std::vector<model_key>>> waiters;
  };
  std::map<uint64_t, NodeDrain> node_drains;
  /// Gateways that hold a table from the manager's previous life, answered at the window's end.
  std::vector<std::pair<gateway_actor, caf::typed_response_promise<routing_update>>> resubscribing;
  // -- actor-level heartbeats --
  struct Liveness {
    caf::actor_clock::time_point answered;  // its router's last answer to ping_atom (or its join)
    bool asking = false;                    // a ping is out
    uint64_t fingerprint = 0;               // of the replicas in its last report (replicas_fingerprint)
    bool reporting = false;                 // a report is asked for
  };
  std::map<uint64_t, Liveness> liveness;
  /// Nodes dropped for silence whose connection lives: asked on, taken back when they answer.
  struct Silent {
    node_router_actor router;
    std::string name;
    bool asking = false;
    HostPort control;  // where its router is published: its router's report does not say
  };
  std::map<caf::actor_addr, Silent> silent;
};

using manager_pointer = cluster_manager_actor::stateful_pointer<manager_state>;
using Line = std::optional<replica_info>;

int64_t now_ms(manager_pointer self) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now().time_since_epoch()).count();
}

int64_t now_us(manager_pointer self) {
  return std::chrono::duration_cast<std::chrono::microseconds>(self->clock().now().time_since_epoch()).count();
}

double seconds_since(manager_pointer self, caf::actor_clock::time_point t) {
  return std::chrono::duration<double>(self->clock().now() - t).count();
}

template <class T>
std::function<void(const Result<T>&)> answer_to(caf::typed_response_promise<T> rp) {
  return [rp](const Result<T>& r) mutable { r.ok() ? void(rp.deliver(*r)) : void(rp.deliver(to_caf(r.error()))); };
}

void publish(manager_pointer self, const std::set<model_key>& changed, const std::vector<model_key>& removed = {},
             bool workflows = false) {
  auto update = self->state.routing.delta(self->state.registry, self->state.members, changed, removed);
  update.report_interval_us = self->state.autoscaler ? self->state.config.autoscaler.interval_us : 0;
  if (workflows) {
    update.workflows_set = true;
    update.workflows = self->state.workflows;
  }
  for (const auto& g : self->state.routing.subscribers()) self->send(g, update);
}

/// Builds the plan tables that versions with a profile lack, one version at a time on the plan
/// queue (thesis §4.2.2: precomputed, so a scale-up only looks its plan up). Until a table is
/// there, a partitioned start plans for its queue alone.
void prepare_plans(manager_pointer self) {
  auto& st = self->state;
  if (!st.config.plan_queue || st.planning) return;
  for (const auto& [k, v] : st.registry.versions()) {
    if (!v.valid()) continue;
    auto parts = st.partitions.tables_missing(v);
    if (parts.empty()) continue;
    auto in = st.partitions.inputs(v);
    const model_key key = v.key();
    using Built = std::vector<std::pair<uint32_t, Result<placement::PlanTable>>>;
    st.planning = offload(
        self, *st.config.plan_queue,
        [in = *in, parts] {
          Built out;
          for (uint32_t p : parts) out.emplace_back(p, PartitionController::build_table(in, p));
          return out;
        },
        [self, key, in = *in](Built& built) {
          auto& st = self->state;
          st.planning = false;
          size_t ranges = 0;
          for (auto& [p, table] : built) {
            if (!table.ok()) {
              spdlog::warn("manager: no plan table of {} for {} stages: {}", key.to_string(), p,
                           table.error().message());
              continue;
            }
            ranges += table->ranges().size();
            st.partitions.put_table(key, p, in, std::move(*table));
          }
          spdlog::info("manager: partition plan tables of {} ready ({} ranges of queue lengths)", key.to_string(),
                       ranges);
          prepare_plans(self);  // the next version lacking one
        });
    return;
  }
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
  if (st.autoscaler) {
    for (const auto& key : changes.removed) st.autoscaler->forget(key);
    for (const auto& e : now) {
      if (!e.error.empty()) continue;
      if (!st.autoscaler->config(e.key) || changes.changed.count(e.key)) {
        auto configured = st.autoscaler->configure(e.key, e.autoscale);
        if (!configured.ok())
          spdlog::warn("manager: {}; it scales with the cluster's defaults", configured.error().message());
        st.autoscaler->set_capacity(e.key, e.capacity_rps);
      }
    }
  }
  publish(self, changes.changed, changes.removed, workflows);
}

/// A whole scan's workflows; true when they changed (then the scan's update carries them).
bool take_workflows(manager_pointer self, std::vector<workflow_entry> workflows) {
  auto& st = self->state;
  if (workflows == st.workflows) return false;
  for (const auto& w : workflows) {
    if (!w.error.empty()) spdlog::warn("manager: workflow {} cannot run: {}", w.name, w.error);
  }
  st.workflows = std::move(workflows);
  return true;
}

/// What a rescan found: the models, and for a whole scan the workflows too.
struct RepositoryScan {
  std::vector<RepositoryEntry> models;
  std::optional<std::vector<workflow_entry>> workflows;
};

/// Rescans `model` ("" = the whole repository, workflows included) off the actor, applies it, then
/// answers the request through `then(rp)`; unavailable at once when the scan queue is full.
template <class T, class Then>
caf::typed_response_promise<T> after_rescan(manager_pointer self, const std::string& model, Then then) {
  auto rp = self->make_response_promise<T>();
  auto scan = [root = self->state.config.repository, model] {
    RepositoryScan out;
    if (!model.empty()) {
      out.models = scan_repository_model(root, model);
      return out;
    }
    out.models = scan_repository(root);
    out.workflows = scan_workflows(root);
    return out;
  };
  auto done = [self, model, then, rp](RepositoryScan& found) mutable {
    const bool workflows = found.workflows && take_workflows(self, std::move(*found.workflows));
    apply_scan(self, model, std::move(found.models), workflows);
    then(rp);
  };
  if (!offload(self, *self->state.scan_queue, scan, done)) rp.deliver(to_caf(unavailable(kScanQueueFull)));
  return rp;
}

/// With tickets on the data plane: each of `sources` gets `receiver`'s ticket for `blob_key`.
void issue_tickets(manager_pointer self, std::vector<blob_source>& sources, const std::string& blob_key,
                   const std::string& receiver) {
  if (!self->state.config.tickets) return;
  for (auto& s : sources) s.ticket = self->state.config.tickets->issue(blob_key, receiver);
}

void issue_ticket(manager_pointer self, blob_source& source, uint64_t transfer, const std::string& receiver) {
  if (!self->state.config.tickets) return;
  source.ticket = self->state.config.tickets->issue(self->state.chains.model_of(transfer), receiver);
}

void send_all(manager_pointer self, std::vector<SpliceOrder> orders) {
  for (auto& o : orders) {
    issue_ticket(self, o.splice.upstream, o.splice.transfer_id, o.hop);
    self->send(caf::actor_cast<transfer_peer_actor>(o.peer), o.splice);
  }
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
  issue_tickets(self, msg.sources, msg.blob_key, node.report.name);
  auto finish = [self, done, transfer = plan.transfer_id, hop = node.report.name](Result<replica_info> r) mutable {
    send_all(self, self->state.relay.hop_ended(transfer, hop, r.ok(), now_ms(self)));
    done(r);
  };
  self->request(node.router, kLoadTimeout, std::move(msg))
      .then([finish](replica_info& info) mutable { finish(std::move(info)); },
            [finish](caf::error& err) mutable { finish(from_caf(err)); });
}

void place(manager_pointer self, const model_key& key);

/// Drains of `key` not yet unbinding come back into the table while the version wants more
/// replicas than it has: a replica still bound is the cheapest there is.
void revive_drains(manager_pointer self, const model_key& key) {
  auto& st = self->state;
  const ModelVersion* v = st.registry.find(key);
  bool revived = false;
  for (auto it = st.drains.begin(); it != st.drains.end() && v;) {
    const uint32_t want = std::max<uint32_t>(1, v->wanted);
    if (v->replicas.size() + v->loading_on.size() >= want) break;
    auto& d = it->second;
    const auto* on = st.members.find(d.node);
    if (d.key != v->key() || d.unbinding || (on && on->draining) || !st.registry.reinstate(d.key, d.node, d.device)) {
      ++it;
      continue;
    }
    const auto* node = st.members.find(d.node);
    spdlog::info("manager: {} on node {} serves again (it was draining)", key.to_string(),
                 node ? node->report.name : std::to_string(d.node));
    it = st.drains.erase(it);  // its memory stays bound
    revived = true;
  }
  if (revived) publish(self, {key});
}

/// `announce` false: the caller publishes and places afterwards (a pipeline's members completing
/// into replicas together, in one routing update).
void drain_step(manager_pointer self);

/// `completion`: a pipeline member's load of the rest of the model (paced on purpose): not a cold
/// start, so neither counted nor fed to the autoscaler's cold-start estimate.
void on_load_answer(manager_pointer self, const model_key& key, uint64_t node, uint64_t attempt,
                    const Result<replica_info>& r, bool announce = true, bool completion = false) {
  auto& st = self->state;
  st.members.unreserve(node, attempt);  // bound below on success; free again otherwise
  if (r.ok()) {
    ModelVersion* v = st.registry.replica_ready(key, node, attempt, *r);
    if (!v) return;  // stale
    st.members.bind(node, r->device, v->entry.weights_bytes);
    st.members.note_cached(node, key, true);
    st.partitions.allow(key);
    if (!completion) {
      st.instruments.count_cold_start(r->source, static_cast<double>(r->load_us) / 1e6);
      if (st.autoscaler) st.autoscaler->cold_start_measured(r->source, r->load_us);
    }
    if (!announce) return;  // the caller publishes, then answers the waiters
    // The routing update first, then the answers: a gateway relays a load's answer, and both travel
    // the same way to it, in order, so it routes to the replica before its client hears "ready".
    publish(self, {key});
    st.registry.answer_waiters(*v);
    if (v->loading_on.empty() && v->replicas.size() < v->wanted) place(self, key);  // wanted more meanwhile
    if (!st.node_drains.empty()) drain_step(self);
    return;
  }
  const auto* n = st.members.find(node);
  const auto outcome = st.registry.load_failed(key, node, attempt, r.error(), n ? n->report.name : "");
  if (outcome == ModelRegistry::LoadFailure::stale || !announce) return;
  publish(self, {key});
  if (outcome == ModelRegistry::LoadFailure::retry_elsewhere) place(self, key);  // another node, if any is left
}

// -- partitioned cold starts ------------------------------------------------------------------

/// Stages leave their nodes this long after the pipeline left the routing table: what was sent
/// through it is answered first (a request still queued then fails as retryable and is re-sent).
constexpr auto kPipelineGrace = std::chrono::seconds(5);

void unload_stage(manager_pointer self, uint64_t node, const model_key& stage) {
  if (const auto* n = self->state.members.find(node)) caf::anon_send(n->router, unload_atom_v, stage);
}

/// A build that cannot serve (a stage failed, or a member was lost before every stage was bound):
/// the stages bound so far leave their nodes, the members' loads are called off (the failed one
/// counts against its node) and the version is placed as usual.
void give_up_pipeline(manager_pointer self, const model_key& key, uint64_t failed_node, uint64_t failed_attempt,
                      const Error& why) {
  auto& st = self->state;
  PipelineBuild* b = st.partitions.find(key);
  if (!b) return;
  spdlog::warn("manager: partitioned cold start of {} given up: {}; placing it whole", key.to_string(), why.message());
  for (const StageSpot& s : b->stages) {
    st.members.unreserve(s.node, s.attempt);
    if (s.node == failed_node && s.attempt == failed_attempt) {
      const auto* n = st.members.find(s.node);
      st.registry.load_failed(key, s.node, s.attempt, why, n ? n->report.name : "");
      continue;
    }
    if (s.stage_ready) unload_stage(self, s.node, s.stage);
    st.registry.load_cancelled(key, s.node, s.attempt);
  }
  st.partitions.erase(key);
  st.partitions.forbid(key);
  if (ModelVersion* v = st.registry.find(key); v && v->key() == key) v->pipeline.clear();
  publish(self, {key});
  place(self, key);
}

void member_completed(manager_pointer self, const model_key& key, uint64_t node, uint64_t attempt,
                      const Result<replica_info>& r);

/// A member's full replica (when it became one): among the first a scale-down removes.
void mark_partitioned(manager_pointer self, const model_key& key, uint64_t node) {
  ModelVersion* v = self->state.registry.find(key);
  if (v && v->key() == key && v->replicas.count(node)) v->partitioned.insert(node);
}

/// A member fetches the rest of the model and binds it whole, beside its stage.
void complete_member(manager_pointer self, const model_key& key, StageSpot& s) {
  auto& st = self->state;
  const ModelVersion* v = st.registry.find(key);
  if (!v || s.completing) return;
  s.completing = true;
  LoadPlan plan;
  plan.node = s.node;
  plan.sources = {*st.planner.source_named(kRepositoryName)};
  const auto* n = st.members.find(s.node);
  if (!n) return;
  load_replica msg = load_request(*v, plan);
  issue_tickets(self, msg.sources, msg.blob_key, n->report.name);
  msg.max_bytes_per_s = static_cast<uint64_t>(st.config.autoscaler.completion_rate);
  // Only the layers outside its stage cross the network; all are checked against the profile.
  msg.reuse = s.part;
  msg.layers = st.partitions.all_layers(*v);
  self->request(n->router, kLoadTimeout, std::move(msg))
      .then([self, key, node = s.node,
             attempt = s.attempt](replica_info& info) { member_completed(self, key, node, attempt, std::move(info)); },
            [self, key, node = s.node, attempt = s.attempt](caf::error& err) {
              member_completed(self, key, node, attempt, from_caf(err));
            });
}

void member_completed(manager_pointer self, const model_key& key, uint64_t node, uint64_t attempt,
                      const Result<replica_info>& r) {
  auto& st = self->state;
  PipelineBuild* b = st.partitions.find(key);
  StageSpot* s = b ? PartitionController::spot(*b, node, attempt) : nullptr;
  if (!s || b->dissolved) {
    // On its own: a dissolved pipeline's member (or a build already gone) is a replica like any.
    const bool member = s != nullptr;
    if (member) {
      unload_stage(self, node, s->stage);
      std::erase_if(b->stages, [&](const StageSpot& x) { return x.node == node && x.attempt == attempt; });
      if (b->stages.empty()) st.partitions.erase(key);
    }
    on_load_answer(self, key, node, attempt, r, true, member);
    if (member) mark_partitioned(self, key, node);
    return;
  }
  s->completed = r;
  if (!std::all_of(b->stages.begin(), b->stages.end(), [](const StageSpot& x) { return x.completed.has_value(); })) {
    return;
  }
  // Every member answered: the pipeline leaves and the replicas arrive in one routing update.
  const PipelineBuild done = std::move(*b);
  st.partitions.erase(key);
  uint32_t ready = 0;
  for (const StageSpot& x : done.stages) {
    ready += x.completed->ok();
    on_load_answer(self, key, x.node, x.attempt, *x.completed, /*announce=*/false, /*completion=*/true);
    mark_partitioned(self, key, x.node);
  }
  ModelVersion* v = st.registry.find(key);
  if (v && v->key() == key) v->pipeline.clear();
  spdlog::info("manager: {} completed into {} full replica(s); its pipeline of {} stages leaves", key.to_string(),
               ready, done.stages.size());
  publish(self, {key});
  if (v && v->key() == key && ready > 0) st.registry.answer_waiters(*v);  // after the update (on_load_answer)
  std::vector<std::pair<uint64_t, model_key>> stages;
  for (const StageSpot& x : done.stages) stages.emplace_back(x.node, x.stage);
  self->delayed_send(self, kPipelineGrace, offload_done{[self, stages] {
                       for (const auto& [n, stage] : stages) unload_stage(self, n, stage);
                     }});
  if (v && v->loading_on.empty() && v->replicas.size() < std::max<uint32_t>(1, v->wanted)) place(self, key);
}

void stage_loaded(manager_pointer self, const model_key& key, uint64_t node, uint64_t attempt,
                  const Result<replica_info>& r) {
  auto& st = self->state;
  PipelineBuild* b = st.partitions.find(key);
  StageSpot* s = b ? PartitionController::spot(*b, node, attempt) : nullptr;
  if (!s) {
    if (r.ok()) unload_stage(self, node, r->model);  // a build given up meanwhile
    return;
  }
  if (!r.ok()) return give_up_pipeline(self, key, node, attempt, r.error());
  s->stage_ready = true;
  if (b->dissolved) return complete_member(self, key, *s);
  if (!std::all_of(b->stages.begin(), b->stages.end(), [](const StageSpot& x) { return x.stage_ready; })) return;
  ModelVersion* v = st.registry.find(key);
  if (!v || v->key() != key) return give_up_pipeline(self, key, 0, 0, unavailable("the version went away"));
  v->pipeline.clear();
  std::string route;
  for (const StageSpot& x : b->stages) {
    const auto* n = st.members.find(x.node);
    v->pipeline.push_back({caf::actor_cast<caf::actor>(n->router), x.stage, n->report.name});
    route += (route.empty() ? "" : " -> ") + n->report.name + " [" + std::to_string(x.part.first_layer) + ", " +
             std::to_string(x.part.last_layer) + ")";
  }
  b->published = true;
  spdlog::info("manager: {} serves through a pipeline: {}", key.to_string(), route);
  publish(self, {key});
  st.registry.answer_waiters(*v);  // after the update (on_load_answer)
  for (StageSpot& x : b->stages) complete_member(self, key, x);
}

/// A scale-up of a version no node holds, on two or more nodes: a pipeline of stages when its
/// profile says one pays (true: started). Otherwise the caller places whole replicas.
bool start_pipeline(manager_pointer self, ModelVersion& v) {
  auto& st = self->state;
  const uint32_t want = std::max<uint32_t>(1, v.wanted);
  if (st.partitions.max_stages() < 2 || want < 2 || !v.replicas.empty() || !v.loading_on.empty() || !v.entry.profile ||
      st.partitions.forbidden(v.key())) {
    return false;
  }
  for (const auto& [id, node] : st.members.nodes())
    if (st.members.caches(id, v.key())) return false;  // a node holds the bytes: a plain start is as quick
  const auto nodes = st.planner.candidates(v, std::min(want, st.partitions.max_stages()));
  // Planned for the queue expected when the stages serve (E(x) with the measured repository cold
  // start, else the profile's at the configured bandwidth); without an autoscaler, the request
  // that asked.
  double x = 1;
  if (st.autoscaler) {
    uint64_t c1 = st.autoscaler->cold_start_us(SourceTier::repository);
    if (c1 == 0) c1 = st.partitions.whole_cold_start_us(v);
    x = std::max(1.0, st.autoscaler->expected_queue(v.key(), c1));
  }
  auto build = st.partitions.plan(v, nodes, want, x, 0);
  if (!build.ok()) {
    spdlog::debug("manager: {}", build.error().message());
    return false;
  }
  const model_key key = v.key();
  for (StageSpot& s : build->stages) {
    s.attempt = st.registry.load_started(v, s.node);
    // The whole model's memory: the member completes into a full replica.
    st.members.reserve(s.node, s.attempt, v.entry.weights_bytes);
  }
  spdlog::info(
      "manager: cold start of {} as {} pipeline stages for an expected queue of {:.1f} (planned cold start {:.0f} ms, "
      "bottleneck {:.1f} ms)",
      key.to_string(), build->stages.size(), x, static_cast<double>(build->plan.cold_start_us) / 1e3,
      static_cast<double>(build->plan.bottleneck_us) / 1e3);
  for (const StageSpot& s : build->stages) {
    load_stage msg;
    LoadPlan plan;
    plan.node = s.node;
    plan.sources = {*st.planner.source_named(kRepositoryName)};
    msg.load = load_request(v, plan);
    msg.part = s.part;
    const auto* n = st.members.find(s.node);
    if (n) issue_tickets(self, msg.load.sources, msg.load.blob_key, n->report.name);
    self->request(n->router, kLoadTimeout, std::move(msg))
        .then([self, key, node = s.node,
               attempt = s.attempt](replica_info& info) { stage_loaded(self, key, node, attempt, std::move(info)); },
              [self, key, node = s.node, attempt = s.attempt](caf::error& err) {
                stage_loaded(self, key, node, attempt, from_caf(err));
              });
  }
  st.partitions.add(std::move(*build));
  publish(self, {key});
  return true;
}

/// A node was lost: a build not serving yet is given up; a serving one dissolves (its pipeline
/// leaves routing, the other members complete on their own). Before the registry forgets the node.
void pipelines_lost_node(manager_pointer self, uint64_t node) {
  auto& st = self->state;
  for (const model_key& key : st.partitions.on_node(node)) {
    PipelineBuild* b = st.partitions.find(key);
    auto lost = std::find_if(b->stages.begin(), b->stages.end(), [&](const StageSpot& s) { return s.node == node; });
    if (!b->published) {
      give_up_pipeline(self, key, lost->node, lost->attempt, unavailable("a member node was lost"));
      continue;
    }
    spdlog::warn("manager: a member of {}'s pipeline was lost; the others complete on their own", key.to_string());
    st.members.unreserve(lost->node, lost->attempt);
    b->stages.erase(lost);
    b->dissolved = true;
    if (ModelVersion* v = st.registry.find(key); v && v->key() == key) v->pipeline.clear();
    publish(self, {key});
    // Members that completed already become replicas now; the others as they answer.
    std::vector<StageSpot> finished;
    for (const StageSpot& s : b->stages)
      if (s.completed) finished.push_back(s);
    std::erase_if(b->stages, [](const StageSpot& s) { return s.completed.has_value(); });
    if (b->stages.empty()) st.partitions.erase(key);
    for (const StageSpot& s : finished) {
      unload_stage(self, s.node, s.stage);
      on_load_answer(self, key, s.node, s.attempt, *s.completed);
    }
  }
}

/// Starts the replicas `key` lacks (at least one) unless loads are in flight.
void place(manager_pointer self, const model_key& key) {
  auto& st = self->state;
  if (const ModelVersion* f = st.registry.find(key); f && st.partitions.find(f->key())) return;  // a pipeline build
  revive_drains(self, key);
  ModelVersion* v = st.registry.to_place(key);
  if (!v) return;
  if (start_pipeline(self, *v)) return;
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

// -- autoscaling -----------------------------------------------------------------------------

void on_load_report(manager_pointer self, const load_report& report) {
  auto& st = self->state;
  if (!st.autoscaler) return;
  const int64_t now = now_us(self);
  for (const auto& m : report.models) {
    std::map<uint64_t, uint32_t> in_flight;
    for (const auto& n : m.in_flight) in_flight[n.node_id] += n.count;
    st.autoscaler->report(report.reporter, m.model, {m.arrivals, m.completions, m.busy_us, m.ongoing, m.queued},
                          in_flight, now);
  }
}

/// The best tier a new replica of `v` would load from: a node's own cache (one that caches the
/// bytes without serving them), else a peer's, else the repository.
SourceTier best_tier(const manager_state& st, const ModelVersion& v) {
  SourceTier best = SourceTier::repository;
  for (const auto& [id, node] : st.members.nodes()) {
    if (!st.members.caches(id, v.key())) continue;
    if (!v.replicas.count(id)) return SourceTier::cache;
    best = SourceTier::peer;
  }
  return best;
}

/// Takes `count` replicas of `key` out of the routing table, those a pipeline completed into first
/// (ModelVersion::partitioned), then the least busy (requests in flight there, then the node with
/// the most replicas), and starts their drains.
void scale_down(manager_pointer self, const model_key& key, uint32_t count) {
  auto& st = self->state;
  const ModelVersion* v = st.registry.find(key);
  if (!v) return;
  const auto per_node = st.registry.replicas_per_node();
  // Not partitioned, in flight, -replicas on the node, node.
  std::vector<std::tuple<bool, uint32_t, int64_t, uint64_t>> order;
  for (const auto& [node, device] : v->replicas) {
    auto n = per_node.find(node);
    order.emplace_back(!v->partitioned.count(node), st.autoscaler->in_flight(key, node),
                       -static_cast<int64_t>(n == per_node.end() ? 0 : n->second), node);
  }
  std::sort(order.begin(), order.end());
  const uint64_t bytes = v->entry.weights_bytes;
  for (size_t i = 0; i < order.size() && i < count; ++i) {
    const uint64_t node = std::get<3>(order[i]);
    auto device = st.registry.retire(key, node);
    if (!device) continue;
    st.drains[st.next_drain++] = {key, node, *device, bytes, self->clock().now(), false};
  }
  publish(self, {key});
}

/// A drain is over: the node unbinds the replica (its executor answers what was queued first; the
/// bytes stay in its host cache) and the memory is free again.
void unbind(manager_pointer self, uint64_t id) {
  auto& st = self->state;
  auto& d = st.drains.at(id);
  d.unbinding = true;
  const auto* node = st.members.find(d.node);
  auto done = [self, id](bool ok) {
    auto& st = self->state;
    auto it = st.drains.find(id);
    if (it == st.drains.end()) return;
    const auto& d = it->second;
    const double seconds = seconds_since(self, d.started);
    st.members.unbind(d.node, d.device, d.bytes);
    st.instruments.observe_drain(seconds);
    const auto* node = st.members.find(d.node);
    const AutoscaleConfig* config = st.autoscaler ? st.autoscaler->config(d.key) : nullptr;
    if (ok && node && config && config->host_keep_alive_us == 0) {  // no host-cache tier: the bytes go too
      st.members.note_cached(d.node, d.key, false);
      caf::anon_send(node->router, evict_atom_v, d.key);
    }
    spdlog::info("manager: {} on node {} {} after draining {:.0f} ms", d.key.to_string(),
                 node ? node->report.name : std::to_string(d.node), ok ? "unbound" : "not unbound (node error)",
                 seconds * 1e3);
    st.drains.erase(it);
    if (!st.node_drains.empty()) drain_step(self);
  };
  if (!node) return done(false);  // its node left: nothing bound there any more
  self->request(node->router, kEvictTimeout, unload_atom_v, d.key)
      .then([done](bool) { done(true); }, [done](caf::error&) { done(false); });
}

/// Drains that are over: no request in flight on them in any gateway's report made after they
/// left the table (two report intervals), or drain_timeout passed.
void check_drains(manager_pointer self) {
  auto& st = self->state;
  const auto settle = std::chrono::microseconds(2 * st.config.autoscaler.interval_us);
  const auto timeout = std::chrono::microseconds(st.config.autoscaler.drain_timeout_us);
  std::vector<uint64_t> over;
  for (const auto& [id, d] : st.drains) {
    if (d.unbinding) continue;
    const auto age = self->clock().now() - d.started;
    const uint32_t in_flight = st.autoscaler ? st.autoscaler->in_flight(d.key, d.node) : 0;
    if ((age >= settle && in_flight == 0) || age >= timeout) over.push_back(id);
  }
  for (uint64_t id : over) unbind(self, id);
}

/// Models idle for their host_keep_alive, with no replica left: their bytes leave the host caches.
void expire_embers(manager_pointer self) {
  auto& st = self->state;
  auto gone = [&st](const model_key& key) {  // no replica, no load, no drain left
    const ModelVersion* v = st.registry.find(key);
    return v && v->idle() &&
           std::none_of(st.drains.begin(), st.drains.end(), [&](const auto& d) { return d.second.key == key; });
  };
  for (const auto& key : st.autoscaler->embers_expired(now_us(self), gone)) {
    for (const auto& [id, node] : st.members.nodes()) {
      if (!st.members.caches(id, key)) continue;
      spdlog::info("manager: {} idle for its host_keep_alive: evicted from node {}'s cache", key.to_string(),
                   node.report.name);
      st.members.note_cached(id, key, false);
      caf::anon_send(node.router, evict_atom_v, key);  // no answer wanted
    }
  }
}

/// Moves the replicas off drained nodes, one step per call (the console's drain; called again as
/// loads answer and drains end): a replica whose model is served elsewhere too is retired (drained,
/// then unbound) and re-placed on another node; a model's only replica first gets a replacement.
/// A drained node without replicas and unbinds answers its waiters with the models moved.
void drain_step(manager_pointer self) {
  auto& st = self->state;
  for (auto it = st.node_drains.begin(); it != st.node_drains.end();) {
    const uint64_t node = it->first;
    auto& nd = it->second;
    std::optional<Error> stuck;
    const auto here = st.registry.replicas_on(node);
    for (const model_key& key : here) {
      ModelVersion* v = st.registry.find(key);
      if (!v) continue;
      size_t elsewhere = 0;
      for (const auto& [n, device] : v->replicas) {
        const auto* m = st.members.find(n);
        elsewhere += n != node && m && !m->draining;
      }
      if (elsewhere > 0) {
        auto before = nd.wanted_before.find(key);
        const uint32_t wanted = before != nd.wanted_before.end() ? before->second : v->wanted;
        const uint64_t bytes = v->entry.weights_bytes;
        if (auto device = st.registry.retire(key, node)) {
          st.drains[st.next_drain++] = {key, node, *device, bytes, self->clock().now(), false};
          nd.moved.push_back(key);
          if (!st.autoscaler) {
            // No autoscaler tick checks drains: look again once gateways had two intervals to move on.
            const auto settle = std::chrono::microseconds(2 * st.config.autoscaler.interval_us);
            self->delayed_send(self, settle, offload_done{[self] { check_drains(self); }});
          }
        }
        st.registry.set_wanted(key, wanted);
        publish(self, {key});
        place(self, key);  // back to what it wanted, elsewhere
      } else if (v->loading_on.empty()) {
        nd.wanted_before.emplace(key, v->wanted);
        st.registry.set_wanted(key, std::max<uint32_t>(v->wanted, static_cast<uint32_t>(v->replicas.size()) + 1));
        place(self, key);
        if (v->loading_on.empty()) {
          stuck = unavailable("no other node has room for " + key.to_string() + ", whose only replica is on the node");
        }
      }
    }
    const bool unbinding =
        std::any_of(st.drains.begin(), st.drains.end(), [&](const auto& d) { return d.second.node == node; });
    if (stuck || (st.registry.replicas_on(node).empty() && !unbinding)) {
      for (auto& w : nd.waiters) {
        if (stuck) {
          w.deliver(to_caf(*stuck));
        } else {
          w.deliver(nd.moved);
        }
      }
      const auto* m = st.members.find(node);
      spdlog::info("manager: node {} {}", m ? m->report.name : std::to_string(node),
                   stuck ? "cannot be drained: " + stuck->message()
                         : "is drained (" + std::to_string(nd.moved.size()) + " replica(s) moved); it may be stopped");
      it = st.node_drains.erase(it);
      continue;
    }
    ++it;
  }
}

void scale_tick(manager_pointer self) {
  auto& st = self->state;
  const auto interval = std::chrono::microseconds(st.config.autoscaler.interval_us);
  self->delayed_send(self, interval, scale_atom_v);
  // The nodes' queues, for the next tick (a node's answer stands until its next one).
  for (const auto& [id, node] : st.members.nodes()) {
    self->request(node.router, interval, scale_atom_v)
        .then([self](load_report& r) { on_load_report(self, r); }, [](caf::error&) {});  // a busy node: next tick
  }
  auto supply = [&st](const model_key& key) {
    const ModelVersion* v = st.registry.find(key);
    if (!v || !v->valid() || v->state.explicitly_unloaded) return AutoscalerLoop::Supply{};
    return AutoscalerLoop::Supply{static_cast<uint32_t>(v->replicas.size()),
                                  static_cast<uint32_t>(v->loading_on.size()), best_tier(st, *v)};
  };
  auto room = [&st](const model_key& key) {  // only for the models that scale up: it views every node
    const ModelVersion* v = st.registry.find(key);
    return v ? st.planner.room(*v) : 0u;
  };
  for (const auto& change : st.autoscaler->tick(now_us(self), supply, room)) {
    const ModelVersion* v = st.registry.find(change.key);
    if (!v || !v->valid() || v->state.explicitly_unloaded) continue;  // an unload is the user's word
    const auto& d = change.decision;
    spdlog::info("manager: autoscale {}", change.line);
    if (d.action == placement::ScaleAction::keep) continue;  // blocked: said, nothing to do
    st.instruments.count_action(change.key, placement::to_string(d.action), placement::to_string(d.reason));
    if (d.action == placement::ScaleAction::up) {
      st.registry.set_wanted(change.key, d.desired);
      place(self, change.key);
    } else {
      scale_down(self, change.key, d.count);
    }
  }
  st.autoscaler->for_each([&st](const model_key& key) {
    const ModelVersion* v = st.registry.find(key);
    st.instruments.set_replicas(key, st.autoscaler->desired(key), v ? static_cast<uint32_t>(v->replicas.size()) : 0);
  });
  check_drains(self);
  expire_embers(self);
}

// -- membership ------------------------------------------------------------------------------

uint64_t join(manager_pointer self, node_report& report, node_router_actor& router) {
  auto& st = self->state;
  self->monitor(router);
  st.silent.erase(router.address());
  const auto brought = report.replicas;
  const uint64_t id = st.members.join(std::move(report), std::move(router));
  st.liveness[id] = {self->clock().now(), false, replicas_fingerprint(brought), false};
  const auto adopted = st.registry.adopt(brought, id);
  spdlog::info("manager: node {}", st.members.describe_join(id, adopted.size()));
  publish(self, adopted);
  // Models that wait for capacity, or that should have more replicas, get a node now.
  for (const auto& key : st.registry.wanting_placement()) place(self, key);
  return id;
}

/// Node `id` leaves the cluster (its process died, it stopped, or it went silent): its replicas and
/// stages go, what waited on it fails, and its models are re-placed (replace_on_failure).
void lose_node(manager_pointer self, uint64_t id, const std::string& why, bool orderly) {
  auto& st = self->state;
  st.liveness.erase(id);
  const std::string name = st.members.leave(id)->report.name;
  std::erase_if(st.drains, [&](const auto& d) { return d.second.node == id; });
  if (auto drained = st.node_drains.find(id); drained != st.node_drains.end()) {
    for (auto& w : drained->second.waiters) w.deliver(to_caf(unavailable("node " + name + " left while draining")));
    st.node_drains.erase(drained);
  }
  pipelines_lost_node(self, id);
  send_all(self, st.relay.node_lost(name));
  // Its answers to distributions will never come (CAF does not fail requests to a lost node).
  for (uint64_t call : st.distributions.waiting_on(id))
    settle(self, call, id, unavailable("node " + name + " was lost during the transfer"));
  const auto changed = st.registry.node_lost(id);
  // A node that shut down in order (its process is stopping) is news, not trouble.
  const auto level = orderly ? spdlog::level::info : spdlog::level::warn;
  spdlog::log(level, "manager: node {} (#{}) lost ({}); {} model(s) affected", name, id, why, changed.size());
  publish(self, changed);
  if (!st.config.replace_on_failure) return;
  for (const auto& key : st.registry.want_replacements(changed)) place(self, key);  // on a survivor
}

void on_down(manager_pointer self, const caf::down_msg& msg) {
  auto& st = self->state;
  st.silent.erase(msg.source);
  auto id = st.members.id_of(msg.source);
  if (!id) return void(st.routing.unsubscribe(msg.source));
  const bool orderly = msg.reason == caf::exit_reason::user_shutdown || msg.reason == caf::exit_reason::normal;
  lose_node(self, *id, caf::to_string(msg.reason), orderly);
}

/// A node's fresh report (its heartbeat said its replicas changed otherwise than the manager saw):
/// its devices' and cache's use for `nodes`; a replica the manager did not know of is adopted (a
/// load that ended after the node rejoined a restarted manager: nothing a node holds is lost to
/// the restart); one the manager counted that the node no longer has (lost to a fault there) goes,
/// and is replaced elsewhere like a lost node's.
void reconcile(manager_pointer self, uint64_t id, node_report report) {
  auto& st = self->state;
  const ClusterNode* node = st.members.find(id);
  if (!node) return;
  const std::string name = node->report.name;
  const std::set<model_key> reported(report.replicas.begin(), report.replicas.end());
  std::set<model_key> adopted, gone;
  // Replicas draining there (retired by a drain or a scale-down, still bound until they unbind)
  // are the manager's own, not news.
  std::set<model_key> draining;
  for (const auto& [n, d] : st.drains)
    if (d.node == id) draining.insert(d.key);
  for (const model_key& key : reported) {
    const ModelVersion* v = st.registry.find(key);
    // Not a version unloaded meanwhile (the report may predate the node's unload).
    if (!v || v->key() != key || v->state.explicitly_unloaded || v->replicas.count(id) || v->loading_on.count(id) ||
        draining.count(key)) {
      continue;
    }
    if (st.registry.adopt(key, id)) adopted.insert(key);
  }
  for (const model_state& s : st.registry.states()) {
    const ModelVersion* v = st.registry.find(s.model);
    if (!v || reported.count(s.model)) continue;
    auto r = v->replicas.find(id);
    if (r == v->replicas.end()) continue;
    const std::string device = r->second;
    const uint64_t bytes = v->entry.weights_bytes;
    if (st.registry.replica_lost(s.model, id)) {
      if (!device.empty()) st.members.unbind(id, device, bytes);
      gone.insert(s.model);
    }
  }
  st.members.update_report(id, std::move(report));
  for (const auto& key : adopted) {
    spdlog::info("manager: node {} reports replica {}, which the manager did not count: adopted", name,
                 key.to_string());
  }
  for (const auto& key : gone) {
    spdlog::warn("manager: node {} no longer reports replica {}: counted as lost", name, key.to_string());
  }
  if (adopted.empty() && gone.empty()) return;
  std::set<model_key> changed = adopted;
  changed.insert(gone.begin(), gone.end());
  publish(self, changed);
  if (st.config.replace_on_failure) {
    for (const auto& key : st.registry.want_replacements(gone)) place(self, key);
  }
}

/// The heartbeat timer: asks every node's router (one ping out per node), drops those silent for
/// node_timeout, and takes back a silent node that answers again (with what it reports now).
void heartbeat(manager_pointer self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  const auto timeout = st.config.node_timeout;
  std::vector<uint64_t> silent;
  for (auto& [id, live] : st.liveness) {
    const ClusterNode* node = st.members.find(id);
    if (!node) continue;
    if (now - live.answered > timeout) {
      silent.push_back(id);
      continue;
    }
    if (live.asking) continue;
    live.asking = true;
    self->request(node->router, timeout, ping_atom_v)
        .then(
            [self, id = id, timeout](uint64_t fingerprint) {
              auto it = self->state.liveness.find(id);
              if (it == self->state.liveness.end()) return;
              it->second.answered = self->clock().now();
              it->second.asking = false;
              if (fingerprint == it->second.fingerprint || it->second.reporting) return;
              it->second.reporting = true;
              const ClusterNode* node = self->state.members.find(id);
              auto done = [self, id](const node_report* report, uint64_t seen) {
                auto it = self->state.liveness.find(id);
                if (it == self->state.liveness.end()) return;
                it->second.reporting = false;
                if (!report) return;
                it->second.fingerprint = seen;
                reconcile(self, id, *report);
              };
              self->request(node->router, timeout, report_atom_v)
                  .then([done](node_report& r) { done(&r, replicas_fingerprint(r.replicas)); },
                        [done](caf::error&) { done(nullptr, 0); });
            },
            [self, id = id](caf::error&) {
              if (auto it = self->state.liveness.find(id); it != self->state.liveness.end()) it->second.asking = false;
            });
  }
  for (uint64_t id : silent) {
    const ClusterNode* node = st.members.find(id);
    node_router_actor router = node->router;
    const std::string name = node->report.name;
    const HostPort control = node->report.control;
    lose_node(self, id,
              "its router answered no heartbeat for " +
                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
                  " ms; its connection lives: it is taken back when it answers",
              false);
    st.silent[router.address()] = {router, name, false, control};
  }
  for (auto& [addr, s] : st.silent) {
    if (s.asking) continue;
    s.asking = true;
    auto not_yet = [self, addr = addr](caf::error&) {
      if (auto it = self->state.silent.find(addr); it != self->state.silent.end()) it->second.asking = false;
    };
    self->request(s.router, timeout, ping_atom_v)
        .then(
            [self, addr = addr, timeout, not_yet](uint64_t) {
              auto it = self->state.silent.find(addr);
              if (it == self->state.silent.end()) return;
              self->request(it->second.router, timeout, report_atom_v)
                  .then(
                      [self, addr](node_report& report) {
                        auto it = self->state.silent.find(addr);
                        if (it == self->state.silent.end()) return;
                        node_router_actor router = it->second.router;
                        if (report.control.port == 0) report.control = it->second.control;  // gateways dial it
                        spdlog::warn("manager: node {} answers again; taken back with {} replica(s)", report.name,
                                     report.replicas.size());
                        join(self, report, router);
                      },
                      not_yet);
            },
            not_yet);
  }
  self->delayed_send(self, st.config.heartbeat, ping_atom_v);
}

// -- the repository API ----------------------------------------------------------------------

model_state unload(manager_pointer self, const model_key& which) {
  auto& st = self->state;
  std::set<model_key> changed;
  model_state last;
  for (const auto& u : st.registry.unload(which)) {
    if (PipelineBuild* b = st.partitions.find(u.state.model)) {
      for (const StageSpot& s : b->stages) {
        st.members.unreserve(s.node, s.attempt);
        if (s.stage_ready) unload_stage(self, s.node, s.stage);
      }
      st.partitions.erase(u.state.model);
    }
    st.partitions.allow(u.state.model);
    for (const auto& router : st.members.release(u.replicas, u.weights_bytes))
      caf::anon_send(router, unload_atom_v, u.state.model);  // fire and forget: no answer wanted
    changed.insert(u.state.model);
    if (st.autoscaler) st.autoscaler->set_floor(u.state.model, 0);
    last = u.state;
    spdlog::info("manager: {} unloaded", u.state.model.to_string());
  }
  publish(self, changed);
  return last;
}

/// "m/2", or "m" for version 0 (the latest, or every version).
std::string describe_key(const model_key& key) { return key.version ? key.to_string() : key.name; }

/// A console command's right to run: `change` names what it changes ("" for a read). Changes need
/// the admin token (and are logged with who asked); reads need it unless open_reads. The token is
/// compared in constant time (every byte, whatever the first difference).
Status check_admin(manager_pointer self, const admin_auth& auth, const std::string& change) {
  const auto& st = self->state;
  const std::string& want = st.config.admin_token;
  const bool read = change.empty();
  if (read && st.config.open_reads) return Status::OK();
  if (want.empty()) {
    return permission_denied("no admin token is configured (manager.admin_token_file): the console may only read");
  }
  if (!constant_time_equal(auth.token, want)) {
    spdlog::warn("manager: console command from {} refused: wrong or missing admin token", auth.who);
    return permission_denied("wrong or missing admin token");
  }
  if (!read) spdlog::info("manager: {} asked: {}", auth.who.empty() ? "(someone)" : auth.who, change);
  return Status::OK();
}

/// A gateway joins the routing table's subscribers: the full table now, updates from then on.
routing_update subscribe(manager_pointer self, const gateway_actor& gateway) {
  self->monitor(gateway);
  auto& st = self->state;
  st.routing.subscribe(gateway);
  auto table = st.routing.full(st.registry, st.members);
  table.report_interval_us = st.autoscaler ? st.config.autoscaler.interval_us : 0;
  table.workflows_set = true;
  table.workflows = st.workflows;
  return table;
}

cluster_manager_actor::behavior_type manager_behavior(manager_pointer self, ClusterManagerConfig config,
                                                      std::vector<RepositoryEntry> initial,
                                                      std::vector<workflow_entry> workflows,
                                                      std::shared_ptr<RepositoryIndex> index, WorkQueue* scan_queue) {
  auto& st = self->state;
  st.workflows = std::move(workflows);
  st.started = self->clock().now();
  st.config = std::move(config);
  st.index = std::move(index);
  st.scan_queue = scan_queue;
  st.chains = ChainController(st.config.stall);
  st.planner.set_repository(st.config.data);
  st.planner.set_options({st.config.autoscaler.chain_scale_up, st.config.autoscaler.peer_sources,
                          st.config.autoscaler.placement == PlacementPolicy::random, 1});
  st.partitions.configure(st.config.autoscaler.partition_stages, st.config.autoscaler.partition_bandwidth);
  if (st.config.autoscaler.enabled) {
    st.autoscaler = std::make_unique<AutoscalerLoop>(st.config.autoscale, st.config.autoscaler.interval_us,
                                                     st.config.autoscaler.look_back_us);
    self->delayed_send(self, std::chrono::microseconds(st.config.autoscaler.interval_us), scale_atom_v);
  }
  apply_scan(self, "", std::move(initial));
  spdlog::info("manager: repository {} holds {} model version(s)", st.config.repository, st.registry.versions().size());
  self->set_down_handler([self](caf::down_msg& msg) { on_down(self, msg); });
  if (st.config.heartbeat.count() > 0 && st.config.node_timeout.count() > 0) {
    self->delayed_send(self, st.config.heartbeat, ping_atom_v);
  }
  return {
      [self](ping_atom) { heartbeat(self); },
      [self](join_atom, node_report& report, node_router_actor& router) { return join(self, report, router); },
      [self](subscribe_atom, gateway_actor& gateway) { return subscribe(self, gateway); },
      [self](subscribe_atom, gateway_actor& gateway, uint64_t held_epoch) -> caf::result<routing_update> {
        auto& st = self->state;
        const auto ends = st.started + st.config.recovery_window;
        if (held_epoch == 0 || self->clock().now() >= ends) return subscribe(self, gateway);
        auto rp = self->make_response_promise<routing_update>();
        if (st.resubscribing.empty()) {
          spdlog::info(
              "manager: a gateway with a routing table subscribed; answering once the nodes had {} ms to "
              "rejoin",
              std::chrono::duration_cast<std::chrono::milliseconds>(st.config.recovery_window).count());
          self->delayed_send(self, ends - self->clock().now(), offload_done{[self] {
                               auto waiting = std::move(self->state.resubscribing);
                               for (auto& [g, promise] : waiting) promise.deliver(subscribe(self, g));
                             }});
        }
        st.resubscribing.emplace_back(gateway, rp);
        return rp;
      },
      [self](ensure_atom, const model_key& key) -> caf::result<model_state> {
        auto rp = self->make_response_promise<model_state>();
        if (auto wanted = self->state.registry.want(key, 0, false, answer_to(rp))) place(self, *wanted);
        return rp;
      },
      [self](load_atom, const model_command& cmd) -> caf::result<model_state> {
        return after_rescan<model_state>(self, cmd.model.name, [self, cmd](auto rp) {
          auto& st = self->state;
          auto wanted = st.registry.want(cmd.model, cmd.replicas, true, answer_to(rp));
          // An explicit count is a floor the autoscaler keeps until the next load or unload.
          if (const ModelVersion* v = st.registry.find(cmd.model); v && st.autoscaler)
            st.autoscaler->set_floor(v->key(), cmd.replicas);
          if (wanted) place(self, *wanted);
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
      [self](distribute_atom, const distribute_request& req) -> caf::result<distribute_result> {
        if (self->state.registry.find(req.model)) return distribute(self, req);
        // A model added to the repository since the last scan is found, as a load finds it.
        return after_rescan<distribute_result>(self, req.model.name, [self, req](auto rp) mutable {
          if (!self->state.registry.find(req.model)) {
            rp.deliver(to_caf(not_found("unknown model '" + req.model.name + "'")));
          } else {
            rp.delegate(caf::actor_cast<cluster_manager_actor>(self), distribute_atom_v, req);
          }
        });
      },
      [self](evict_atom, const distribute_request& req) { return evict(self, req); },
      [self](const chain_progress& p) { send_all(self, self->state.relay.on_progress(p, now_ms(self))); },
      [self](const chain_upstream_request& r) -> caf::result<blob_source> {
        std::vector<SpliceOrder> orders;
        auto upstream = self->state.relay.upstream_after_failure(r, orders);
        send_all(self, std::move(orders));
        if (!upstream.ok()) return to_caf(upstream.error());
        issue_ticket(self, *upstream, r.transfer_id, r.node);
        return caf::result<blob_source>(std::move(*upstream));
      },
      [self](const load_report& r) { on_load_report(self, r); },
      [self](metrics_atom) { return self->state.instruments.registry().snapshot(); },
      // -- the console's admin interface: checked, then handled as above ---------------------------
      [self](const admin_auth& who, nodes_atom) -> caf::result<std::vector<node_report>> {
        if (auto ok = check_admin(self, who, ""); !ok.ok()) return to_caf(ok.error());
        return RoutingPublisher::node_reports(self->state.registry, self->state.members);
      },
      [self](const admin_auth& who, index_atom) -> caf::result<std::vector<model_state>> {
        if (auto ok = check_admin(self, who, ""); !ok.ok()) return to_caf(ok.error());
        return after_rescan<std::vector<model_state>>(self, "",
                                                      [self](auto rp) { rp.deliver(self->state.registry.states()); });
      },
      [self](const admin_auth& who, metrics_atom) -> caf::result<metrics_snapshot> {
        if (auto ok = check_admin(self, who, ""); !ok.ok()) return to_caf(ok.error());
        return self->state.instruments.registry().snapshot();
      },
      [self](const admin_auth& who, load_atom, model_command& cmd) -> caf::result<model_state> {
        const std::string what = "load " + describe_key(cmd.model) +
                                 (cmd.replicas ? " with " + std::to_string(cmd.replicas) + " replicas" : "");
        if (auto ok = check_admin(self, who, what); !ok.ok()) return to_caf(ok.error());
        return self->delegate(caf::actor_cast<cluster_manager_actor>(self), load_atom_v, std::move(cmd));
      },
      [self](const admin_auth& who, unload_atom, model_command& cmd) -> caf::result<model_state> {
        if (auto ok = check_admin(self, who, "unload " + describe_key(cmd.model)); !ok.ok()) return to_caf(ok.error());
        return self->delegate(caf::actor_cast<cluster_manager_actor>(self), unload_atom_v, std::move(cmd));
      },
      [self](const admin_auth& who, distribute_atom, distribute_request& req) -> caf::result<distribute_result> {
        if (auto ok = check_admin(self, who, "distribute " + describe_key(req.model)); !ok.ok())
          return to_caf(ok.error());
        return self->delegate(caf::actor_cast<cluster_manager_actor>(self), distribute_atom_v, std::move(req));
      },
      [self](const admin_auth& who, drain_atom, const std::string& name) -> caf::result<std::vector<model_key>> {
        if (auto ok = check_admin(self, who, "drain " + name); !ok.ok()) return to_caf(ok.error());
        auto& st = self->state;
        auto id = st.members.id_of(name);
        if (!id) return to_caf(not_found("no node named '" + name + "' is in the cluster"));
        st.members.set_draining(*id);
        auto rp = self->make_response_promise<std::vector<model_key>>();
        st.node_drains[*id].waiters.push_back(rp);
        spdlog::info("manager: draining node {}: {} replica(s) to move", name, st.registry.replicas_on(*id).size());
        drain_step(self);
        return rp;
      },
      [self](const admin_auth& who, scale_atom, const model_key& key, uint32_t min,
             uint32_t max) -> caf::result<model_state> {
        const std::string what = "scale " + describe_key(key) + " to " + std::to_string(min) + ".." +
                                 (max ? std::to_string(max) : std::string("max"));
        if (auto ok = check_admin(self, who, what); !ok.ok()) return to_caf(ok.error());
        auto& st = self->state;
        if (!st.autoscaler) {
          return to_caf(
              unavailable("the autoscaler is off (autoscale.enabled: false): `load MODEL REPLICAS` sets "
                          "the replica count"));
        }
        const ModelVersion* v = st.registry.find(key);
        if (!v) return to_caf(not_found("unknown model '" + key.to_string() + "'"));
        auto set = st.autoscaler->set_bounds(v->key(), min, max ? std::optional<uint32_t>(max) : std::nullopt);
        if (!set.ok()) return to_caf(set.error());
        return v->state;
      },
      [self](const admin_auth& who, slo_atom, const slo_command& cmd) -> caf::result<std::vector<model_state>> {
        const slo_setting& slo = cmd.slo;
        const std::string what = "slo " + describe_key(cmd.model) +
                                 (slo.deadline_us ? " " + std::to_string(slo.deadline_us) + " us at p" +
                                                        std::to_string(slo.percentile * 100).substr(0, 5)
                                                  : std::string(" off"));
        if (auto ok = check_admin(self, who, what); !ok.ok()) return to_caf(ok.error());
        if (slo.deadline_us && !(slo.percentile > 0 && slo.percentile < 1)) {
          return to_caf(invalid_argument("the SLO's percentile is in (0, 1) exclusive (p=99 is 0.99), not " +
                                         std::to_string(slo.percentile)));
        }
        if (slo.deadline_us > 3'600'000'000ull) return to_caf(invalid_argument("an SLO deadline is at most an hour"));
        auto& st = self->state;
        const auto changed = st.registry.set_slo(cmd.model, slo);
        if (changed.empty()) return to_caf(not_found("unknown model '" + describe_key(cmd.model) + "'"));
        std::vector<model_state> out;
        for (const model_key& key : changed) {
          const ModelVersion* v = st.registry.find(key);
          std::set<uint64_t> nodes;
          for (const auto& [node, device] : v->replicas) nodes.insert(node);
          for (const auto& [node, attempt] : v->loading_on) nodes.insert(node);
          for (uint64_t node : nodes) {
            const auto* n = st.members.find(node);
            if (!n) continue;
            self->request(n->router, std::chrono::seconds(10), slo_atom_v, key, slo)
                .then([](bool) {},
                      [name = n->report.name, key](caf::error& e) {
                        // A node that does not answer has it with its next load_replica, or is lost.
                        spdlog::warn("manager: node {} did not take the SLO of {}: {}", name, key.to_string(),
                                     to_string(from_caf(e).code()));
                      });
          }
          out.push_back(v->state);
        }
        return out;
      },
      [self](const admin_auth& who, transfers_atom) -> caf::result<std::vector<hop_progress>> {
        if (auto ok = check_admin(self, who, ""); !ok.ok()) return to_caf(ok.error());
        std::vector<hop_progress> out;
        for (const HopProgress& h : self->state.chains.snapshot()) {
          out.push_back({h.transfer_id, h.model, h.hop, h.upstream, h.offset, h.blob_bytes, h.state});
        }
        return out;
      },
      [self](const admin_auth& who, fault_atom, const std::string& name, fault_command& f) -> caf::result<std::string> {
        const std::string what = "fault " + name + " " + f.kind + " " + f.target;
        if (auto ok = check_admin(self, who, what); !ok.ok()) return to_caf(ok.error());
        auto id = self->state.members.id_of(name);
        if (!id) return to_caf(not_found("no node named '" + name + "' is in the cluster"));
        return self->delegate(self->state.members.find(*id)->router, fault_atom_v, std::move(f));
      },
      [self](const admin_auth& who, log_level_atom, const std::string& level) -> caf::result<uint32_t> {
        if (auto ok = check_admin(self, who, "log-level " + level); !ok.ok()) return to_caf(ok.error());
        if (auto set = set_log_level(level); !set.ok()) return to_caf(set.error());
        uint32_t told = 1;
        for (const auto& [id, node] : self->state.members.nodes()) {
          caf::anon_send(node.router, log_level_atom_v, level);
          ++told;
        }
        return told;
      },
      [self](const admin_auth& who, evict_atom, distribute_request& req) -> caf::result<distribute_result> {
        if (auto ok = check_admin(self, who, "evict " + describe_key(req.model)); !ok.ok()) return to_caf(ok.error());
        return self->delegate(caf::actor_cast<cluster_manager_actor>(self), evict_atom_v, std::move(req));
      },
      [self](scale_atom) {
        if (self->state.autoscaler) scale_tick(self);
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
                                            std::shared_ptr<RepositoryIndex> index, WorkQueue& scan_queue,
                                            std::vector<workflow_entry> workflows) {
  return sys.spawn(manager_behavior, std::move(config), std::move(initial), std::move(workflows), std::move(index),
                   &scan_queue);
}

}  // namespace ember
