// PartitionController: the cluster manager's partitioned cold starts (Flashpoint ch. 4, issue 14),
// as data. When a version no node holds must come up on several nodes, the manager may load it as a
// pipeline of p stages (consecutive layer ranges, placement/partition_planner.hpp chooses p and the
// cuts from the version's profile.json) on p nodes, serve through the pipeline as soon as every
// stage is bound, and meanwhile complete each member into a full replica; when all have completed,
// one routing update replaces the pipeline by p replicas.
//
// A build's life:  planned ──every stage bound──▶ serving (routing entry's pipeline; completion
// loads sent) ──every member completed──▶ done (replicas published in one update, stages unloaded)
//   planned ──a stage failed or its node was lost──▶ given up (bound stages unloaded, the version
//                                                     placed as usual, not partitioned again this round)
//   serving ──a member's node was lost──▶ dissolved (the pipeline leaves routing at once; each
//                                                     surviving member completes on its own)
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only (not thread-safe).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/cluster/model_registry.hpp"
#include "actors/messages.hpp"
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

class PartitionController {
 public:
  /// autoscale.partition_stages (1 = never) and partition_bandwidth (bytes per second).
  void configure(uint32_t max_stages, double link_bytes_per_s) {
    max_stages_ = max_stages;
    bandwidth_ = link_bytes_per_s;
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
  uint32_t max_stages_ = 4;
  double bandwidth_ = 125e6;
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
