// PartitionController: the cluster manager's partitioned cold starts (Flashpoint ch. 4, issue 14),
// as data. When a version no node holds must come up on several nodes, the manager may load it as a
// pipeline of p stages (consecutive layer ranges, placement/partition_planner.hpp chooses p and the
// cuts from the version's profile.json) on p nodes, serve through the pipeline as soon as every
// stage is bound, and meanwhile complete each member into a full replica; when all have completed,
// one routing update replaces the pipeline by p replicas.
//
// A build's life:  planned ──every stage bound──▶ serving (routing entry's pipeline; completion
// loads sent) ──every member completed──▶ done (replicas published in one update, stages unloaded
// kPipelineGraceUs later: what was sent through them is answered first)
//   planned ──a stage failed or its node was lost──▶ given up (bound stages unloaded, the version
//                                                     placed as usual, not partitioned again this round)
//   serving ──a member's node was lost──▶ dissolved (the pipeline leaves routing at once; each
//                                                     surviving member completes on its own)
//   planned | serving ──the version was unloaded──▶ gone (bound stages unloaded)
//
// The lifecycle methods (start, stage_loaded, member_completed, member_lost, unloaded) change the
// registry and the membership (load attempts, reservations, the version's pipeline, its waiters
// answered once the pipeline serves) and return PipelineOrders: what the actor sends or does, in
// the order it must; the answers to the loads it sends come back to stage_loaded and
// member_completed. Plan tables (thesis §4.2.2: precomputed, so a start only looks its plan up) are
// built off the actor one version at a time: next_tables(), build_tables() on a queue,
// tables_built().
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only (not thread-safe). Nothing
// is sent from here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/cluster/autoscaler_loop.hpp"
#include "actors/cluster/load_planner.hpp"
#include "actors/cluster/membership.hpp"
#include "actors/cluster/model_registry.hpp"
#include "actors/loading_messages.hpp"
#include "actors/pipeline_messages.hpp"
#include "base/status.hpp"
#include "placement/partition_planner.hpp"

namespace ember {

struct StageSpot {
  uint64_t node = 0;
  /// The registry's load attempt on the node: the stage's, then its completion's.
  uint64_t attempt = 0;
  blob_part part;
  model_key stage;  // the stage's key on its node
  bool stage_ready = false;
  bool completing = false;  // the full load was sent
  std::optional<Result<replica_info>> completed;
};

struct PipelineBuild {
  model_key key;
  placement::PartitionPlan plan;
  std::vector<StageSpot> stages;
  bool published = false;
  bool dissolved = false;
};

/// One thing the actor does for a build; a method's orders are done one after the other.
struct PipelineOrder {
  enum class Kind {
    load_stage,      // send `stage` to `node`; its answer goes to stage_loaded(key, node, attempt)
    complete,        // send `load` (the whole model) to `node`; its answer to member_completed(key, node, attempt)
    unload_stage,    // tell `node` to drop stage `stage_key` (no answer wanted)
    unload_later,    // the same for each of `stages`, `delay_us` from now
    answer,          // the load `attempt` of `key` on `node` answered `result`: the actor's bookkeeping of a
                     // replica load (`announce`: it publishes and places; `completion`: not a cold start),
                     // then, when `partitioned`, ModelRegistry::mark_partitioned
    publish,         // a routing update of `key`
    answer_waiters,  // the loads waiting for `key` hear it serves: after the update that routes to it
                     // (a gateway relays a load's answer, and both reach it in order)
    place,           // place `key` as usual
    place_if_short,  // place `key` when it wants more replicas and nothing loads (ModelVersion::wants_more)
  };
  Kind kind = Kind::publish;
  model_key key;
  uint64_t node = 0;
  uint64_t attempt = 0;
  load_stage stage;                                               // load_stage
  load_replica load;                                              // complete
  model_key stage_key;                                            // unload_stage
  std::vector<std::pair<uint64_t, model_key>> stages;             // unload_later: (node, stage)
  int64_t delay_us = 0;                                           // unload_later
  std::optional<Result<replica_info>> result;                     // answer
  bool announce = true, completion = false, partitioned = false;  // answer
};
using PipelineOrders = std::vector<PipelineOrder>;

class PartitionController {
 public:
  /// Stages leave their nodes this long after the pipeline left the routing table: what was sent
  /// through it is answered first (a request still queued then fails as retryable and is re-sent).
  static constexpr int64_t kPipelineGraceUs = 5'000'000;

  PartitionController() = default;
  /// The cluster its builds run in (which must outlive it): the registry and membership it changes,
  /// the planner whose candidates and repository source it takes. Plans alone need none of them.
  PartitionController(ModelRegistry& registry, Membership& members, const LoadPlanner& planner)
      : registry_(&registry), members_(&members), planner_(&planner) {}

  /// autoscale.partition_stages (1 = never), partition_bandwidth (bytes per second) and
  /// completion_rate (a completing member's fetch, bytes per second; 0: as fast as the link).
  void configure(uint32_t max_stages, double link_bytes_per_s, double completion_rate = 0) {
    max_stages_ = max_stages;
    bandwidth_ = link_bytes_per_s;
    completion_rate_ = completion_rate;
  }
  uint32_t max_stages() const { return max_stages_; }

  /// The stages of a partitioned cold start of `v` over `nodes` (in placement order; the first
  /// `p` are used), with at most `max_parts` stages, planned for an expected queue of `x` requests
  /// (the autoscaler's E(x)) and at most `stage_memory` weight bytes per stage (0 = no limit). The
  /// plan comes from the version's PlanTable for that many parts when one was built (thesis
  /// §4.2.2: precomputed, a lookup at decision time), else from the planner for this x alone.
  /// unsupported saying why not: no profile, a stale one, or a plan of one part being best.
  Result<PipelineBuild> plan(const ModelVersion& v, const std::vector<uint64_t>& nodes, uint32_t max_parts, double x,
                             uint64_t stage_memory) const;

  /// What the planner needs of a version: its layers (from the profile, at the configured
  /// bandwidth) and the costs of a cut.
  struct PlanInputs {
    std::vector<placement::LayerProfile> layers;
    placement::PartitionCosts costs;
    bool operator==(const PlanInputs&) const = default;
  };
  /// unsupported without a (current) profile.
  Result<PlanInputs> inputs(const ModelVersion& v) const;
  /// The part limits worth a plan table for `v` (2 .. the stage limit, at most its layers), those
  /// not built yet; empty without a profile.
  std::vector<uint32_t> tables_missing(const ModelVersion& v) const;
  /// Builds the table of `max_parts` (pure, slow: tens of planner runs; off the actor).
  static Result<placement::PlanTable> build_table(const PlanInputs& in, uint32_t max_parts);
  /// Keeps a table built from `in` (used while the version's inputs stay `in`).
  void put_table(const model_key& key, uint32_t max_parts, PlanInputs in, placement::PlanTable table) {
    tables_.insert_or_assign({key, max_parts}, Table{std::move(in), std::move(table)});
  }
  /// A whole cold start of `v` from the profile at the configured bandwidth (C(1)); 0 without one.
  uint64_t whole_cold_start_us(const ModelVersion& v) const;
  /// Plan tables built so far (one per version and part limit).
  size_t tables() const { return tables_.size(); }
  /// The version left the repository: its plan tables go.
  void forget(const model_key& key) {
    std::erase_if(tables_, [&](const auto& t) { return std::get<0>(t.first) == key; });
  }

  /// Every layer of `v`'s file with the profile's digests (what a completing member checks); empty
  /// without a profile.
  static blob_part all_layers(const ModelVersion& v);

  // -- a build's life (the three-argument constructor) -----------------------------------------
  /// A scale-up of `v` (no replica, no load, wanting two or more) when its profile says a pipeline
  /// pays and no node holds its bytes: planned over placement's candidates for the queue expected
  /// when the stages serve (E(x) with `autoscaler`'s measured repository cold start, else the
  /// profile's at the configured bandwidth; without an autoscaler, the request that asked). Each
  /// member's load is started in the registry with its whole replica's memory reserved. The stage
  /// loads and a publish; empty: the caller places whole replicas.
  PipelineOrders start(ModelVersion& v, const AutoscalerLoop* autoscaler);
  /// A stage load answered. A failure gives the build up; the last stage bound publishes the
  /// pipeline (its waiters answered first) and sends every member's completion.
  PipelineOrders stage_loaded(const model_key& key, uint64_t node, uint64_t attempt, const Result<replica_info>& r);
  /// A member's completion answered. The last one turns the members into replicas in one update;
  /// one of a dissolved pipeline (or of a build gone) is a replica like any.
  PipelineOrders member_completed(const model_key& key, uint64_t node, uint64_t attempt, const Result<replica_info>& r);
  /// Member node `node` of `key`'s build was lost (before the registry forgets it): a build not
  /// serving yet is given up; a serving one dissolves.
  PipelineOrders member_lost(const model_key& key, uint64_t node);
  /// `key` was unloaded: its build ends (bound stages unloaded) and it may be partitioned again.
  PipelineOrders unloaded(const model_key& key);

  // -- plan tables, built off the actor -----------------------------------------------------------
  struct TableJob {
    model_key key;
    PlanInputs inputs;
    std::vector<uint32_t> parts;
  };
  using BuiltTables = std::vector<std::pair<uint32_t, Result<placement::PlanTable>>>;
  /// The next version lacking plan tables, one job at a time: nullopt while one runs or when none
  /// lacks any. The job runs until tables_built() or tables_refused().
  std::optional<TableJob> next_tables();
  /// The job's work (pure, slow; off the actor).
  static BuiltTables build_tables(const TableJob& job);
  /// Its tables, kept (a failed one logged); the next job may start.
  void tables_built(const TableJob& job, BuiltTables built);
  /// The queue refused the job: none runs.
  void tables_refused() { planning_ = false; }

  PipelineBuild* find(const model_key& key);
  void add(PipelineBuild build) { builds_[build.key] = std::move(build); }
  void erase(const model_key& key) { builds_.erase(key); }
  /// The build's spot on `node` with `attempt`, or nullptr (stale).
  static StageSpot* spot(PipelineBuild& build, uint64_t node, uint64_t attempt);
  /// Builds with a member on `node`.
  std::vector<model_key> on_node(uint64_t node) const;

  /// A version whose partitioned start was given up is placed as usual until it has a replica.
  void forbid(const model_key& key) { forbidden_.insert(key); }
  void allow(const model_key& key) { forbidden_.erase(key); }
  bool forbidden(const model_key& key) const { return forbidden_.count(key) > 0; }

 private:
  PipelineOrders give_up(const model_key& key, uint64_t failed_node, uint64_t failed_attempt, const Error& why);
  /// The completion load of `s` (sent once), or nothing.
  std::optional<PipelineOrder> complete(const model_key& key, StageSpot& s);

  ModelRegistry* registry_ = nullptr;
  Membership* members_ = nullptr;
  const LoadPlanner* planner_ = nullptr;
  uint32_t max_stages_ = 4;
  double bandwidth_ = 125e6;
  double completion_rate_ = 0;
  bool planning_ = false;  // a table job runs
  std::map<model_key, PipelineBuild> builds_;
  struct Table {
    PlanInputs inputs;  // what it was built from: a rescanned profile that differs makes it stale
    placement::PlanTable table;
  };
  /// The table of `v` for `max_parts` built from its current inputs `in`, or nullptr.
  const placement::PlanTable* table(const ModelVersion& v, uint32_t max_parts, const PlanInputs& in) const;
  std::map<std::pair<model_key, uint32_t>, Table> tables_;  // for no memory limit
  std::set<model_key> forbidden_;
};

}  // namespace ember
