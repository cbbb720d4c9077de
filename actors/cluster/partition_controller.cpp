#include "actors/cluster/partition_controller.hpp"

#include <spdlog/spdlog.h>

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

// -- a build's life -------------------------------------------------------------------------------

namespace {

PipelineOrder unload_order(uint64_t node, const model_key& stage) {
  PipelineOrder o;
  o.kind = PipelineOrder::Kind::unload_stage;
  o.node = node;
  o.stage_key = stage;
  return o;
}

PipelineOrder key_order(PipelineOrder::Kind kind, const model_key& key) {
  PipelineOrder o;
  o.kind = kind;
  o.key = key;
  return o;
}

PipelineOrder answer_order(const model_key& key, uint64_t node, uint64_t attempt, const Result<replica_info>& r,
                           bool announce, bool completion, bool partitioned) {
  PipelineOrder o = key_order(PipelineOrder::Kind::answer, key);
  o.node = node;
  o.attempt = attempt;
  o.result = r;
  o.announce = announce;
  o.completion = completion;
  o.partitioned = partitioned;
  return o;
}

}  // namespace

PipelineOrders PartitionController::start(ModelVersion& v, const AutoscalerLoop* autoscaler) {
  const uint32_t want = std::max<uint32_t>(1, v.wanted);
  if (max_stages_ < 2 || want < 2 || !v.replicas.empty() || !v.loading_on.empty() || !v.entry.profile ||
      forbidden(v.key())) {
    return {};
  }
  for (const auto& [id, node] : members_->nodes())
    if (Membership::caches(node, v.key())) return {};  // a node holds the bytes: a plain start is as quick
  const auto nodes = planner_->candidates(v, std::min(want, max_stages_));
  // Planned for the queue expected when the stages serve (E(x) with the measured repository cold
  // start, else the profile's at the configured bandwidth); without an autoscaler, the request
  // that asked.
  double x = 1;
  if (autoscaler) {
    uint64_t c1 = autoscaler->cold_start_us(SourceTier::repository);
    if (c1 == 0) c1 = whole_cold_start_us(v);
    x = std::max(1.0, autoscaler->expected_queue(v.key(), c1));
  }
  auto build = plan(v, nodes, want, x, 0);
  if (!build.ok()) {
    spdlog::debug("manager: {}", build.error().message());
    return {};
  }
  const model_key key = v.key();
  for (StageSpot& s : build->stages) {
    s.attempt = registry_->load_started(v, s.node);
    // The whole model's memory: the member completes into a full replica.
    members_->reserve(s.node, s.attempt, v.entry.weights_bytes);
  }
  spdlog::info(
      "manager: cold start of {} as {} pipeline stages for an expected queue of {:.1f} (planned cold start {:.0f} ms, "
      "bottleneck {:.1f} ms)",
      key.to_string(), build->stages.size(), x, static_cast<double>(build->plan.cold_start_us) / 1e3,
      static_cast<double>(build->plan.bottleneck_us) / 1e3);
  PipelineOrders out;
  for (const StageSpot& s : build->stages) {
    LoadPlan plan;
    plan.node = s.node;
    plan.sources = {*planner_->source_named(kRepositoryName)};
    PipelineOrder o = key_order(PipelineOrder::Kind::load_stage, key);
    o.node = s.node;
    o.attempt = s.attempt;
    o.stage.load = load_request(v, plan);
    o.stage.part = s.part;
    out.push_back(std::move(o));
  }
  add(std::move(*build));
  out.push_back(key_order(PipelineOrder::Kind::publish, key));
  return out;
}

std::optional<PipelineOrder> PartitionController::complete(const model_key& key, StageSpot& s) {
  const ModelVersion* v = registry_->find(key);
  if (!v || s.completing) return std::nullopt;
  s.completing = true;
  if (!members_->find(s.node)) return std::nullopt;
  LoadPlan plan;
  plan.node = s.node;
  plan.sources = {*planner_->source_named(kRepositoryName)};
  PipelineOrder o = key_order(PipelineOrder::Kind::complete, key);
  o.node = s.node;
  o.attempt = s.attempt;
  o.load = load_request(*v, plan);
  o.load.max_bytes_per_s = static_cast<uint64_t>(completion_rate_);
  // Only the layers outside its stage cross the network; all are checked against the profile.
  o.load.reuse = s.part;
  o.load.layers = all_layers(*v);
  return o;
}

PipelineOrders PartitionController::give_up(const model_key& key, uint64_t failed_node, uint64_t failed_attempt,
                                            const Error& why) {
  PipelineBuild* b = find(key);
  if (!b) return {};
  spdlog::warn("manager: partitioned cold start of {} given up: {}; placing it whole", key.to_string(), why.message());
  PipelineOrders out;
  for (const StageSpot& s : b->stages) {
    members_->unreserve(s.node, s.attempt);
    if (s.node == failed_node && s.attempt == failed_attempt) {
      const auto* n = members_->find(s.node);
      registry_->load_failed(key, s.node, s.attempt, why, n ? n->report.name : "");
      continue;
    }
    if (s.stage_ready) out.push_back(unload_order(s.node, s.stage));
    registry_->load_cancelled(key, s.node, s.attempt);
  }
  erase(key);
  forbid(key);
  if (ModelVersion* v = registry_->find(key); v && v->key() == key) v->pipeline.clear();
  out.push_back(key_order(PipelineOrder::Kind::publish, key));
  out.push_back(key_order(PipelineOrder::Kind::place, key));
  return out;
}

PipelineOrders PartitionController::stage_loaded(const model_key& key, uint64_t node, uint64_t attempt,
                                                 const Result<replica_info>& r) {
  PipelineBuild* b = find(key);
  StageSpot* s = b ? spot(*b, node, attempt) : nullptr;
  if (!s) {
    if (r.ok()) return {unload_order(node, r->model)};  // a build given up meanwhile
    return {};
  }
  if (!r.ok()) return give_up(key, node, attempt, r.error());
  s->stage_ready = true;
  if (b->dissolved) {
    auto o = complete(key, *s);
    return o ? PipelineOrders{std::move(*o)} : PipelineOrders{};
  }
  if (!std::all_of(b->stages.begin(), b->stages.end(), [](const StageSpot& x) { return x.stage_ready; })) return {};
  ModelVersion* v = registry_->find(key);
  if (!v || v->key() != key) return give_up(key, 0, 0, unavailable("the version went away"));
  v->pipeline.clear();
  std::string route;
  for (const StageSpot& x : b->stages) {
    const auto* n = members_->find(x.node);
    v->pipeline.push_back({x.node, x.stage});
    route += (route.empty() ? "" : " -> ") + (n ? n->report.name : std::to_string(x.node)) + " [" +
             std::to_string(x.part.first_layer) + ", " + std::to_string(x.part.last_layer) + ")";
  }
  b->published = true;
  spdlog::info("manager: {} serves through a pipeline: {}", key.to_string(), route);
  PipelineOrders out{key_order(PipelineOrder::Kind::publish, key), key_order(PipelineOrder::Kind::answer_waiters, key)};
  for (StageSpot& x : b->stages)
    if (auto o = complete(key, x)) out.push_back(std::move(*o));
  return out;
}

PipelineOrders PartitionController::member_completed(const model_key& key, uint64_t node, uint64_t attempt,
                                                     const Result<replica_info>& r) {
  PipelineBuild* b = find(key);
  StageSpot* s = b ? spot(*b, node, attempt) : nullptr;
  if (!s || b->dissolved) {
    // On its own: a dissolved pipeline's member (or a build already gone) is a replica like any.
    const bool member = s != nullptr;
    PipelineOrders out;
    if (member) {
      out.push_back(unload_order(node, s->stage));
      std::erase_if(b->stages, [&](const StageSpot& x) { return x.node == node && x.attempt == attempt; });
      if (b->stages.empty()) erase(key);
    }
    out.push_back(answer_order(key, node, attempt, r, true, member, member));
    return out;
  }
  s->completed = r;
  if (!std::all_of(b->stages.begin(), b->stages.end(), [](const StageSpot& x) { return x.completed.has_value(); })) {
    return {};
  }
  // Every member answered: the pipeline leaves and the replicas arrive in one routing update.
  const PipelineBuild done = std::move(*b);
  erase(key);
  PipelineOrders out;
  uint32_t ready = 0;
  PipelineOrder later = key_order(PipelineOrder::Kind::unload_later, key);
  later.delay_us = kPipelineGraceUs;
  for (const StageSpot& x : done.stages) {
    ready += x.completed->ok();
    out.push_back(answer_order(key, x.node, x.attempt, *x.completed, /*announce=*/false, /*completion=*/true, true));
    later.stages.emplace_back(x.node, x.stage);
  }
  if (ModelVersion* v = registry_->find(key); v && v->key() == key) v->pipeline.clear();
  spdlog::info("manager: {} completed into {} full replica(s); its pipeline of {} stages leaves", key.to_string(),
               ready, done.stages.size());
  out.push_back(key_order(PipelineOrder::Kind::publish, key));
  if (ready > 0) out.push_back(key_order(PipelineOrder::Kind::answer_waiters, key));  // after the update
  out.push_back(std::move(later));
  out.push_back(key_order(PipelineOrder::Kind::place_if_short, key));
  return out;
}

PipelineOrders PartitionController::member_lost(const model_key& key, uint64_t node) {
  PipelineBuild* b = find(key);
  if (!b) return {};
  auto lost = std::find_if(b->stages.begin(), b->stages.end(), [&](const StageSpot& s) { return s.node == node; });
  if (lost == b->stages.end()) return {};
  if (!b->published) return give_up(key, lost->node, lost->attempt, unavailable("a member node was lost"));
  spdlog::warn("manager: a member of {}'s pipeline was lost; the others complete on their own", key.to_string());
  members_->unreserve(lost->node, lost->attempt);
  b->stages.erase(lost);
  b->dissolved = true;
  if (ModelVersion* v = registry_->find(key); v && v->key() == key) v->pipeline.clear();
  PipelineOrders out{key_order(PipelineOrder::Kind::publish, key)};
  // Members that completed already become replicas now; the others as they answer.
  std::vector<StageSpot> finished;
  for (const StageSpot& s : b->stages)
    if (s.completed) finished.push_back(s);
  std::erase_if(b->stages, [](const StageSpot& s) { return s.completed.has_value(); });
  if (b->stages.empty()) erase(key);
  for (const StageSpot& s : finished) {
    out.push_back(unload_order(s.node, s.stage));
    out.push_back(answer_order(key, s.node, s.attempt, *s.completed, true, false, false));
  }
  return out;
}

PipelineOrders PartitionController::unloaded(const model_key& key) {
  PipelineOrders out;
  if (PipelineBuild* b = find(key)) {
    for (const StageSpot& s : b->stages) {
      members_->unreserve(s.node, s.attempt);
      if (s.stage_ready) out.push_back(unload_order(s.node, s.stage));
    }
    erase(key);
  }
  allow(key);
  return out;
}

// -- plan tables ----------------------------------------------------------------------------------

std::optional<PartitionController::TableJob> PartitionController::next_tables() {
  if (planning_ || !registry_) return std::nullopt;
  for (const auto& [k, v] : registry_->versions()) {
    if (!v.valid()) continue;
    auto parts = tables_missing(v);
    if (parts.empty()) continue;
    auto in = inputs(v);
    planning_ = true;
    return TableJob{v.key(), std::move(*in), std::move(parts)};
  }
  return std::nullopt;
}

PartitionController::BuiltTables PartitionController::build_tables(const TableJob& job) {
  BuiltTables out;
  for (uint32_t p : job.parts) out.emplace_back(p, build_table(job.inputs, p));
  return out;
}

void PartitionController::tables_built(const TableJob& job, BuiltTables built) {
  planning_ = false;
  size_t ranges = 0;
  for (auto& [p, table] : built) {
    if (!table.ok()) {
      spdlog::warn("manager: no plan table of {} for {} stages: {}", job.key.to_string(), p, table.error().message());
      continue;
    }
    ranges += table->ranges().size();
    put_table(job.key, p, job.inputs, std::move(*table));
  }
  spdlog::info("manager: partition plan tables of {} ready ({} ranges of queue lengths)", job.key.to_string(), ranges);
}

}  // namespace ember
