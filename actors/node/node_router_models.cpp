// node_router, late binding's models (see node_router_interface.hpp): a fetched model registers with
// the SwapController and is profiled once on a device (a cold and a warm run: heaviness and SLO), or
// warmed up at once when it is a pipeline stage or member; it leaves with its queued requests; its
// inline runs enter the policies; and burst scaling (actors/node/shadow_pairs.hpp) starts, pairs and
// drops its Shadows and copies.
#include <spdlog/spdlog.h>

#include <caf/event_based_actor.hpp>
#include <chrono>

#include "actors/errors.hpp"
#include "actors/node/inline_runs.hpp"
#include "actors/node/node_router_state.hpp"
#include "actors/node/request_batch.hpp"
#include "actors/tensor_codec.hpp"
#include "base/units.hpp"
#include "model/sample_inputs.hpp"
#include "placement/shadow_profile.hpp"

namespace ember {

namespace {

/// The profile's sequence length: 128, or less when a positional table is shorter.
int64_t profile_seq_len(const gpu::Model& model) {
  int64_t len = 128;
  for (uint32_t l = 0; l < model.num_layers(); ++l) {
    const auto& spec = model.layer(l);
    if (spec.op == gpu::OpKind::embedding && spec.attrs.positional) len = std::min(len, spec.attrs.num_embeddings);
  }
  return std::max<int64_t>(len, 1);
}

/// The table's Shadows of `model` into the node's gauges.
void show_shadows(router_pointer self, const model_key& model) {
  auto& st = self->state;
  if (!st.instruments || !st.shadows || !st.swap->has_model(model)) return;
  uint32_t starting = 0, ready = 0;
  for (const auto& [id, row] : st.shadows->table()) {
    if (row.model != model) continue;
    (row.ready ? ready : starting)++;
  }
  auto m = st.swap->model(model);
  st.instruments->set_shadows(model, starting, ready, (starting + ready) * (m ? m->bytes : 0));
}

/// A Shadow leaves its device (its row already out of the table): the executor drops it once no
/// split runs on it.
void drop_shadow(router_pointer self, const ShadowPairs::Row& row, const std::string& why) {
  auto& st = self->state;
  st.shadow_gates.erase(row.id);
  spdlog::info("node {}: the Shadow of {} on {} (layers [{}, {}), paired with {}) goes: {}", st.config.name, row.model,
               st.devices[row.device].name, row.choice.first_layer, row.choice.last_layer, st.devices[row.body].name,
               why);
  show_shadows(self, row.model);
  self->request(st.devices[row.device].actor, std::chrono::minutes(1), shadow_atom_v, row.model)
      .then([](bool) {}, [](caf::error&) {});
}

/// Starts the Shadows of `rows` (in the table as starting, their devices lent): each executor copies
/// its layers from the model's host copy and answers its gate.
void start_shadows(router_pointer self, const std::vector<ShadowPairs::Row>& rows) {
  auto& st = self->state;
  for (const auto& row : rows) {
    auto replica = st.replicas.find(row.model);
    if (replica == st.replicas.end() || !replica->second.model) {
      st.shadows->gone(row.id, *st.swap);
      show_shadows(self, row.model);
      continue;
    }
    show_shadows(self, row.model);
    spdlog::info(
        "node {}: burst of {} ({:.0f} requests/s): a Shadow of layers [{}, {}) ({}) starts on {}, paired "
        "with {} (+{:.0f} rows/s)",
        st.config.name, row.model, st.shadows->rate(row.model, row.asked_us), row.choice.first_layer,
        row.choice.last_layer, format_bytes(row.choice.weight_bytes), st.devices[row.device].name,
        st.devices[row.body].name, row.choice.gain_rows_per_s);
    load_shadow msg{row.model, replica->second.model, row.choice.first_layer, row.choice.last_layer};
    self->request(st.devices[row.device].actor, std::chrono::seconds(60), std::move(msg))
        .then(
            [self, row](shadow_ready& ready) {
              auto& st = self->state;
              if (!st.shadows || !st.shadows->table().count(row.id)) {
                // Released (its model unloaded) while it started: the executor lets it go all the same.
                drop_shadow(self, row, "no longer wanted");
                return;
              }
              st.shadow_gates[row.id] = std::move(ready.gate);
              st.shadows->started(row.id, ready.bytes, ready.start_us, *st.swap);
              show_shadows(self, row.model);
              spdlog::info("node {}: the Shadow of {} on {} is ready ({}, {} us)", st.config.name, row.model,
                           st.devices[row.device].name, format_bytes(ready.bytes), ready.start_us);
              late_pump(self);
            },
            [self, row](caf::error& err) {
              auto& st = self->state;
              spdlog::warn("node {}: the Shadow of {} on {} did not start: {}", st.config.name, row.model,
                           st.devices[row.device].name, from_caf(err).message());
              if (st.shadows) st.shadows->gone(row.id, *st.swap);
              show_shadows(self, row.model);
              late_pump(self);
            });
  }
}

/// A request of `key`, not a client's, queued before the replica is ready (late_submit refuses
/// those): a warm-up or the profile.
Status submit_own(router_pointer self, const model_key& key, Held held) {
  auto& st = self->state;
  const uint64_t id = st.held.next_id();
  EMBER_RETURN_IF_ERROR(st.swap->submit(id, key, now_us(self)));
  st.held.hold(id, std::move(held));
  return Status::OK();
}

/// A pipeline stage (`stage`), or a member's full model: ready at once, swapped in by one tiny run.
void register_member(router_pointer self, const model_key& key, SwapModel m, bool stage) {
  auto& st = self->state;
  auto& r = st.replicas.at(key);
  // A pipeline stage serves a cold start, and a member completing into a full replica serves the
  // pipeline's requests meanwhile: ready at once, no profile runs first (two runs of the model,
  // which would stall the pipeline on this device). Heavy (swapped in early) and the SLO declared
  // for the model, else the node's, else 1 s (it only orders the queue between models).
  const auto& late = *st.config.late;
  const auto& serving = r.model->manifest().serving;
  m.heaviness = placement::Heaviness::heavy;
  r.own.deadline_us = serving.slo_deadline_us ? serving.slo_deadline_us
                      : late.slo_deadline_us  ? late.slo_deadline_us
                                              : 1'000'000;
  r.own.percentile = serving.slo_deadline_us ? serving.slo_percentile : late.slo_percentile;
  const slo_setting& use = r.slo.deadline_us ? r.slo : r.own;
  m.deadline_us = use.deadline_us;
  m.percentile = use.percentile;
  if (Status s = st.swap->add_model(m); !s.ok()) return finish_load(self, key, to_caf(s.error()));
  r.info.device = "late";
  // One tiny run swaps it in now: a stage on every member at once (it is ready already, so the
  // pipeline's first request queues behind it, rather than swapping stage after stage); a
  // member's full model before it is ready, so that the switch-over finds every replica warm
  // while the pipeline still serves.
  if (stage) finish_load(self, key, caf::error{});
  auto warm = gpu::sample_model_inputs(*r.model, 1, 1, 1);
  if (!warm.ok()) return stage ? void() : finish_load(self, key, caf::error{});
  auto request = std::make_shared<infer_request>();
  request->model = key;
  request->id = "warmup";
  request->inputs = encode_tensors(*warm);
  Held held;
  held.request = std::move(request);
  held.kind = stage ? HeldKind::stage_warmup : HeldKind::member_warmup;
  if (!submit_own(self, key, std::move(held)).ok()) return stage ? void() : finish_load(self, key, caf::error{});
  late_pump(self);
}

}  // namespace

void late_register(router_pointer self, const model_key& key, std::shared_ptr<const gpu::Model> model) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return;
  it->second.model = model;
  SwapModel m{key, model->layers_bytes(), placement::Heaviness::light, 0, st.config.late->slo_percentile};
  if (Status s = st.swap->add_model(m); !s.ok()) return finish_load(self, key, to_caf(s.error()));
  // A stage, or a member's full model: a model with a stage fetched on this node.
  const bool stage = it->second.stage.has_value();
  const bool member = stage || std::any_of(st.replicas.begin(), st.replicas.end(), [&](const auto& r) {
                        return r.second.stage && r.second.stage->model == key && (r.second.ready || r.second.whole);
                      });
  if (member) return register_member(self, key, std::move(m), stage);
  // The profile: one cold request (swapped in from host), then a warm one, on sample inputs.
  auto inputs = gpu::sample_model_inputs(*model, 1, profile_seq_len(*model), 1);
  if (!inputs.ok()) return finish_load(self, key, to_caf(inputs.error()));
  auto profile = std::make_shared<infer_request>();
  profile->model = key;
  profile->id = "profile";
  profile->inputs = encode_tensors(*inputs);
  Held held;
  held.request = std::move(profile);
  held.kind = HeldKind::profile;
  if (Status s = submit_own(self, key, std::move(held)); !s.ok()) return finish_load(self, key, to_caf(s.error()));
  late_pump(self);
}

void late_profiled(router_pointer self, const model_key& key, const ProfileRun& run) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return;
  if (run.error) return finish_load(self, key, to_caf(run.error->with_context("profiling " + key.to_string())));
  const auto& late = *st.config.late;
  auto m = st.swap->model(key);
  if (!m) return;
  const uint64_t warm = std::max<uint64_t>(run.warm_us, 1);
  auto heaviness =
      placement::classify(static_cast<int64_t>(run.cold_us), static_cast<int64_t>(warm), late.heavy_factor);
  m->heaviness = heaviness.ok() ? *heaviness : placement::Heaviness::heavy;
  // The SLO: model.json's (its owner's declaration), else the node's binding.slo_deadline, else
  // binding.slo_factor times the warm latency just measured.
  const auto& serving = it->second.model->manifest().serving;
  slo_setting& own = it->second.own;
  own.deadline_us = serving.slo_deadline_us ? serving.slo_deadline_us
                    : late.slo_deadline_us  ? late.slo_deadline_us
                                            : static_cast<uint64_t>(late.slo_factor * static_cast<double>(warm));
  own.percentile = serving.slo_deadline_us ? serving.slo_percentile : late.slo_percentile;
  // Set at run time (the console's slo), it overrides them all.
  const slo_setting& use = it->second.slo.deadline_us ? it->second.slo : own;
  m->deadline_us = use.deadline_us;
  m->percentile = use.percentile;
  m->warm_us = warm;
  m->activation_bytes = run.plan_bytes;
  if (run.footprint) m->bytes = run.footprint;
  // Dynamic batching from here on (the profile itself ran alone, without waiting for company).
  if (serving.dynamic_batching && serving.max_batch > 1) {
    if (Status eligible = batching_eligible(it->second.model->manifest()); eligible.ok()) {
      m->max_batch = serving.max_batch;
      m->preferred_batch = serving.preferred_batch;
      m->max_queue_delay_us = serving.max_queue_delay_us;
      it->second.padding = BatchPadding::of(it->second.model->manifest());
    } else {
      spdlog::warn("node {}: {} asks for dynamic batching, which stays off: {}", st.config.name, key,
                   eligible.error().message());
    }
  }
  if (Status s = st.swap->add_model(*m); !s.ok()) return finish_load(self, key, to_caf(s.error()));
  late_scale_model(self, key);
  it->second.info.device = "late";
  spdlog::info("node {}: {} profiled: cold {} us, warm {} us -> {}, SLO {} us at p{}", st.config.name, key, run.cold_us,
               warm, placement::to_string(m->heaviness), m->deadline_us, m->percentile * 100);
  finish_load(self, key, caf::error{});
}

void late_unload(router_pointer self, const model_key& key) {
  auto& st = self->state;
  if (st.shadows) {
    for (const auto& row : st.shadows->remove_model(key, *st.swap)) drop_shadow(self, row, "unloaded");
  }
  auto [queued, holders] = st.swap->remove_model(key);
  for (uint64_t id : queued) {
    auto held = st.held.take(id);
    if (!held) continue;
    fail_held(self, *held,
              unavailable("model " + key.to_string() + " was unloaded from node " + st.config.name +
                          " while the request waited"));
  }
  for (uint32_t d : holders) {
    self->request(st.devices[d].actor, std::chrono::minutes(1), unload_atom_v, key)
        .then([](bool) {}, [](caf::error&) {});
  }
}

void late_scale_model(router_pointer self, const model_key& key) {
  auto& st = self->state;
  if (!st.shadows) return;
  auto it = st.replicas.find(key);
  auto m = st.swap->model(key);
  if (it == st.replicas.end() || !m || !it->second.profile || !it->second.model || m->deadline_us == 0) return;
  ShadowPairs::ModelInfo info;
  info.profile = placement::shadow_profile(*it->second.model, *it->second.profile);
  info.slo_us = static_cast<double>(m->deadline_us);
  info.max_batch = std::max<uint32_t>(m->max_batch, 1);
  info.overhead_us = std::max(0.0, static_cast<double>(m->warm_us) - placement::body_us(info.profile, 1));
  const auto one = placement::body_capacity(info.profile, info.slo_us, info.max_batch);
  spdlog::info("node {}: {} scales in bursts by its profile: one copy carries {:.1f} rows/s within {} us (batch {})",
               st.config.name, key, one.rows_per_s, m->deadline_us, one.batch);
  st.shadows->add_model(key, std::move(info), *st.swap);
}

void late_arrival(router_pointer self, const model_key& key, int64_t now) {
  auto& st = self->state;
  if (st.shadows) start_shadows(self, st.shadows->arrival(key, now, *st.swap));
}

/// What ran inline since the last call (actors/node/inline_runs.hpp) enters the policies: each run's
/// last use (eviction order) and SLO outcome, as a dispatch's answer would have.
void late_absorb_inline(router_pointer self, int64_t now) {
  auto& st = self->state;
  if (!st.config.inline_runs) return;
  for (const auto& r : st.config.inline_runs->drain()) {
    auto m = st.swap->model(r.model);
    if (!m) continue;
    st.swap->ran_inline(r.model, r.device, r.latency_us, now);
    late_arrival(self, r.model, now);
    if (st.instruments) st.instruments->count_slo(m->deadline_us == 0 || r.latency_us <= m->deadline_us);
  }
}

void late_scale_period(router_pointer self, int64_t now) {
  auto& st = self->state;
  if (!st.shadows) return;
  auto period = st.shadows->period(now, *st.swap);
  for (const auto& row : period.release) drop_shadow(self, row, "the burst is over");
  for (const auto& [model, device] : period.drop) {
    if (!st.swap->has_model(model)) continue;
    spdlog::info("node {}: model-level scaling: {} keeps {} copies; the one on {} goes", st.config.name, model,
                 st.shadows->bodies(model), st.devices[device].name);
    self->request(st.devices[device].actor, std::chrono::minutes(1), unload_atom_v, model)
        .then([](bool) {}, [](caf::error&) {});
  }
}

void shadow_lost(router_pointer self, uint64_t shadow, const std::string& why) {
  auto& st = self->state;
  if (auto row = st.shadows->gone(shadow, *st.swap)) drop_shadow(self, *row, why);
}

std::optional<ShadowShare> shadow_share(router_pointer self, const model_key& model, uint32_t device, int64_t rows) {
  auto& st = self->state;
  auto p = st.shadows->pair(model, device, static_cast<uint32_t>(std::max<int64_t>(rows, 0)));
  if (!p) return std::nullopt;
  auto g = st.shadow_gates.find(p->first);
  if (g == st.shadow_gates.end()) return std::nullopt;
  return ShadowShare{g->second, p->second, p->first};
}

}  // namespace ember
