#include "actors/cluster/replica_driver.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace ember {

void ReplicaDriver::ensure(const model_key& key, ModelWaiter waiter, int64_t now_ms, const ReplicaActions& act) {
  if (auto wanted = registry_.want(key, 0, false, std::move(waiter))) place(*wanted, now_ms, act);
}

void ReplicaDriver::load(const model_key& key, uint32_t replicas, ModelWaiter waiter, int64_t now_ms,
                         const ReplicaActions& act) {
  auto wanted = registry_.want(key, replicas, true, std::move(waiter));
  // An explicit count is a floor the autoscaler keeps until the next load or unload.
  if (const ModelVersion* v = registry_.find(key)) scaler_.set_floor(v->key(), replicas);
  if (wanted) place(*wanted, now_ms, act);
}

void ReplicaDriver::restore(const DesiredState& kept, int64_t now_ms, const ReplicaActions& act) {
  for (const auto& [key, m] : kept.models()) {
    if (m.slo) {
      if (auto r = registry_.set_slo(key, *m.slo); !r.ok()) {
        spdlog::warn("manager: the SLO kept for {} does not apply: {}", key.to_string(), r.error().message());
      }
    }
    if (m.min || m.max) {
      if (auto r = scaler_.set_bounds(key, m.min.value_or(0), m.max.value_or(0)); !r.ok()) {
        spdlog::warn("manager: the bounds kept for {} do not apply: {}", key.to_string(), r.error().message());
      }
    }
    if (m.load) load(key, *m.load, [](const Result<model_state>&) {}, now_ms, act);
  }
  spdlog::info("manager: {} model(s) with decisions kept from before", kept.models().size());
}

void ReplicaDriver::place(const model_key& key, int64_t now_ms, const ReplicaActions& act) {
  if (const ModelVersion* f = registry_.find(key); f && partitions_.find(f->key())) return;  // a pipeline build
  if (scaler_.revive(key)) act.publish({key});
  ModelVersion* v = registry_.to_place(key);
  if (!v) return;
  if (auto pipeline = partitions_.start(*v, scaler_.autoscaler()); !pipeline.empty()) {
    return run(pipeline, now_ms, act);
  }
  auto plans = planner_.place(*v, now_ms);
  if (!plans.ok()) {
    registry_.placement_failed(*v, plans.error());
    if (v->replicas.size() < v->wanted && !v->round_asked) {  // one round asked at a time
      const int64_t delay = place_again_delay_ms(v->rounds_unplaced++);
      v->round_asked = true;
      spdlog::info("manager: {} holds {} of {} replicas and no node took it this round ({}); placing again in {} ms",
                   key.to_string(), v->replicas.size(), v->wanted, plans.error().message(), delay);
      act.place_later(key, delay);
    }
    return;
  }
  for (const auto& plan : plans->loads) {
    const uint64_t attempt = registry_.load_started(*v, plan.node);
    members_.reserve(plan.node, attempt, v->entry.weights_bytes);
    act.send_load(key, plan.node, attempt, load_request(*v, plan));
  }
  act.chain_timer();
  act.publish({key});
}

void ReplicaDriver::place_again(const model_key& key, int64_t now_ms, const ReplicaActions& act) {
  if (ModelVersion* v = registry_.find(key)) v->round_asked = false;
  place(key, now_ms, act);
}

int64_t ReplicaDriver::place_again_delay_ms(uint32_t rounds) {
  constexpr int64_t kFirst = 1000, kMost = 30'000;
  return std::min(kMost, kFirst << std::min(rounds, 5u));
}

void ReplicaDriver::trim(const std::set<model_key>& keys, int64_t now_ms, const ReplicaActions& act) {
  std::set<model_key> retired;
  for (const auto& key : keys) {
    if (scaler_.retire_excess(key, now_ms * 1000) > 0) retired.insert(key);
  }
  if (retired.empty()) return;
  act.publish(retired);
  act.check_drains();
}

void ReplicaDriver::answered(const model_key& key, uint64_t node, uint64_t attempt, const Result<replica_info>& r,
                             bool announce, bool completion, int64_t now_ms, const ReplicaActions& act) {
  members_.unreserve(node, attempt);  // bound below on success; free again otherwise
  if (r.ok()) {
    ModelVersion* v = registry_.replica_ready(key, node, attempt, *r);
    if (!v) return;  // stale
    members_.bind(node, r->device, v->entry.weights_bytes);
    members_.note_cached(node, key, true);
    partitions_.allow(key);
    if (!completion) scaler_.cold_start(r->source, r->load_us);
    if (!announce) return;  // the caller publishes, then answers the waiters
    // The routing update first, then the answers: a gateway relays a load's answer, and both travel
    // the same way to it, in order, so it routes to the replica before its client hears "ready".
    act.publish({key});
    registry_.answer_waiters(*v);
    if (v->loading_on.empty() && v->replicas.size() < v->wanted) place(key, now_ms, act);  // wanted more meanwhile
    trim({key}, now_ms, act);  // or fewer, with a replica placed twice
    if (scaler_.nodes_draining()) act.drain_step();
    return;
  }
  const auto* n = members_.find(node);
  const auto outcome = registry_.load_failed(key, node, attempt, r.error(), n ? n->report.name : "");
  if (outcome == ModelRegistry::LoadFailure::stale || !announce) return;
  act.publish({key});
  if (outcome == ModelRegistry::LoadFailure::retry_elsewhere) place(key, now_ms, act);  // another node, if any is left
}

void ReplicaDriver::run(const PipelineOrders& orders, int64_t now_ms, const ReplicaActions& act) {
  using Kind = PipelineOrder::Kind;
  for (const PipelineOrder& o : orders) {
    switch (o.kind) {
      case Kind::load_stage:
        act.send_stage(o.key, o.node, o.attempt, o.stage);
        break;
      case Kind::complete:
        act.send_completion(o.key, o.node, o.attempt, o.load);
        break;
      case Kind::unload_stage:
        act.unload_stage(o.node, o.stage_key, 0);
        break;
      case Kind::unload_later:
        for (const auto& [node, stage] : o.stages) act.unload_stage(node, stage, o.delay_us);
        break;
      case Kind::answer:
        answered(o.key, o.node, o.attempt, *o.result, o.announce, o.completion, now_ms, act);
        if (o.partitioned) registry_.mark_partitioned(o.key, o.node);
        break;
      case Kind::publish:
        act.publish({o.key});
        break;
      case Kind::answer_waiters:
        if (ModelVersion* v = registry_.find(o.key); v && v->key() == o.key) registry_.answer_waiters(*v);
        break;
      case Kind::place:
        place(o.key, now_ms, act);
        break;
      case Kind::place_if_short:
        if (const ModelVersion* v = registry_.find(o.key); v && v->wants_more()) place(o.key, now_ms, act);
        break;
    }
  }
}

void ReplicaDriver::stage_answered(const model_key& key, uint64_t node, uint64_t attempt,
                                   const Result<replica_info>& r, int64_t now_ms, const ReplicaActions& act) {
  run(partitions_.stage_loaded(key, node, attempt, r), now_ms, act);
}

void ReplicaDriver::completion_answered(const model_key& key, uint64_t node, uint64_t attempt,
                                        const Result<replica_info>& r, int64_t now_ms, const ReplicaActions& act) {
  run(partitions_.member_completed(key, node, attempt, r), now_ms, act);
}

std::set<model_key> ReplicaDriver::node_lost(uint64_t node, const std::string& name, bool replace, int64_t now_ms,
                                             const ReplicaActions& act) {
  scaler_.node_lost(node, name);
  for (const model_key& key : partitions_.on_node(node)) run(partitions_.member_lost(key, node), now_ms, act);
  const auto changed = registry_.node_lost(node);
  act.publish(changed);  // also when none changed: the update's members no longer hold the node
  if (replace) {
    for (const auto& key : registry_.want_replacements(changed)) place(key, now_ms, act);  // on a survivor
  }
  return changed;
}

void ReplicaDriver::scale(int64_t now_us, const ReplicaActions& act) {
  for (const auto& change : scaler_.decide(now_us)) {
    const auto step = scaler_.apply(change, now_us);
    if (step == ScaleDriver::Step::place) place(change.key, now_us / 1000, act);
    if (step == ScaleDriver::Step::publish) act.publish({change.key});
  }
  scaler_.show_replicas();
  auto settled = scaler_.settle(now_us);
  for (const auto& u : settled.unbind) act.unbind(u);
  for (const auto& e : settled.evict) act.evict(e);
}

}  // namespace ember
