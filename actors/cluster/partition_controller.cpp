#include "actors/cluster/partition_controller.hpp"

#include <algorithm>

namespace ember {

namespace {

/// A cut's fixed cost (a message between nodes); the bandwidth adds the rest.
constexpr uint64_t kCutFixedUs = 500;
/// Queues beyond this are planned as this one: the best plan no longer changes by then (the
/// table's last range covers the rest).
constexpr uint64_t kMaxPlannedQueue = 4096;

}  // namespace

uint64_t PartitionController::whole_cold_start_us(const ModelVersion& v) const {
  if (!v.entry.profile) return 0;
  return static_cast<uint64_t>(static_cast<double>(v.entry.profile->weights_bytes) / bandwidth_ * 1e6);
}

Result<PartitionController::PlanInputs> PartitionController::inputs(const ModelVersion& v) const {
  const std::string what = "no partitioned cold start for " + v.key().to_string() + ": ";
  const auto& profile = v.entry.profile;
  if (!profile) return unsupported(what + "it has no profile.json");
  if (profile->weights_bytes != v.entry.weights_bytes) return unsupported(what + "its profile is stale");
  PlanInputs in;
  const size_t b = profile->batch_index(1);
  for (const auto& l : profile->layers) {
    placement::LayerProfile lp;
    lp.bytes = l.bytes;
    lp.load_us = static_cast<uint64_t>(static_cast<double>(l.bytes) / bandwidth_ * 1e6);
    lp.exec_us = static_cast<uint64_t>(l.exec_us[b]);
    lp.out_bytes = l.out_bytes[b];
    in.layers.push_back(lp);
  }
  in.costs.transfer_fixed_us = kCutFixedUs;
  in.costs.transfer_us_per_byte = 1e6 / bandwidth_;
  return in;
}

const placement::PlanTable* PartitionController::table(const ModelVersion& v, uint32_t max_parts,
                                                       const PlanInputs& in) const {
  auto it = tables_.find({v.key(), max_parts});
  return it != tables_.end() && it->second.inputs == in ? &it->second.table : nullptr;
}

std::vector<uint32_t> PartitionController::tables_missing(const ModelVersion& v) const {
  std::vector<uint32_t> out;
  auto in = inputs(v);
  if (!in.ok()) return out;
  const uint32_t most = std::min<uint32_t>(max_stages_, static_cast<uint32_t>(in->layers.size()));
  for (uint32_t parts = 2; parts <= most; ++parts)
    if (!table(v, parts, *in)) out.push_back(parts);
  return out;
}

Result<placement::PlanTable> PartitionController::build_table(const PlanInputs& in, uint32_t max_parts) {
  return placement::PlanTable::build(in.layers, in.costs, max_parts, kMaxPlannedQueue);
}

Result<PipelineBuild> PartitionController::plan(const ModelVersion& v, const std::vector<uint64_t>& nodes,
                                                uint32_t max_parts, double x, uint64_t stage_memory) const {
  const std::string what = "no partitioned cold start for " + v.key().to_string() + ": ";
  EMBER_ASSIGN_OR_RETURN(PlanInputs in, inputs(v));
  const auto& profile = v.entry.profile;
  max_parts = std::min<uint32_t>(
      {max_parts, max_stages_, static_cast<uint32_t>(nodes.size()), static_cast<uint32_t>(in.layers.size())});
  if (max_parts < 2) return unsupported(what + "fewer than two stages are possible");
  const placement::PlanTable* built = stage_memory == 0 ? table(v, max_parts, in) : nullptr;
  in.costs.stage_memory_bytes = stage_memory;
  placement::PartitionPlan chosen;
  if (built) {
    chosen = built->lookup(x);
  } else {
    const uint64_t queue = x < 1 ? 1 : static_cast<uint64_t>(std::min<double>(x, kMaxPlannedQueue));
    EMBER_ASSIGN_OR_RETURN(chosen, placement::choose_plan(in.layers, in.costs, max_parts, queue));
  }
  if (chosen.parts < 2) return unsupported(what + "one part is the best plan");
  const auto& layers = in.layers;

  PipelineBuild build;
  build.key = v.key();
  build.plan = chosen;
  uint32_t first = 0;
  std::vector<uint32_t> ends;
  for (uint32_t cut : chosen.cuts) ends.push_back(cut + 1);
  ends.push_back(static_cast<uint32_t>(layers.size()));
  uint64_t offset = profile->header_bytes;
  for (size_t i = 0; i < ends.size(); ++i) {
    StageSpot s;
    s.node = nodes[i];
    s.part.first_layer = first;
    s.part.last_layer = ends[i];
    s.part.header_bytes = profile->header_bytes;
    s.part.header_sha256 = profile->header_sha256;
    s.part.offset = offset;
    for (uint32_t l = first; l < ends[i]; ++l) {
      s.part.layer_bytes.push_back(profile->layers[l].bytes);
      s.part.layer_sha256.push_back(profile->layers[l].sha256);
      offset += profile->layers[l].bytes;
    }
    s.stage = stage_key_of(v.key(), first, ends[i]);
    build.stages.push_back(std::move(s));
    first = ends[i];
  }
  return build;
}

blob_part PartitionController::all_layers(const ModelVersion& v) {
  blob_part all;
  const auto& profile = v.entry.profile;
  if (!profile) return all;
  all.first_layer = 0;
  all.last_layer = static_cast<uint32_t>(profile->layers.size());
  all.header_bytes = profile->header_bytes;
  all.header_sha256 = profile->header_sha256;
  all.offset = profile->header_bytes;
  for (const auto& l : profile->layers) {
    all.layer_bytes.push_back(l.bytes);
    all.layer_sha256.push_back(l.sha256);
  }
  return all;
}

PipelineBuild* PartitionController::find(const model_key& key) {
  auto it = builds_.find(key);
  return it == builds_.end() ? nullptr : &it->second;
}

StageSpot* PartitionController::spot(PipelineBuild& build, uint64_t node, uint64_t attempt) {
  for (auto& s : build.stages)
    if (s.node == node && s.attempt == attempt) return &s;
  return nullptr;
}

std::vector<model_key> PartitionController::on_node(uint64_t node) const {
  std::vector<model_key> out;
  for (const auto& [key, b] : builds_) {
    if (std::any_of(b.stages.begin(), b.stages.end(), [&](const StageSpot& s) { return s.node == node; })) {
      out.push_back(key);
    }
  }
  return out;
}

}  // namespace ember
