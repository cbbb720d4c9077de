// node_router, late binding (see node_router_interface.hpp): requests queue in the SwapController,
// which binds each to a device per request; this file turns its dispatches into swap_requests to
// the executors and their answers back into its state.
#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <chrono>

#include "actors/errors.hpp"
#include "actors/node/inline_runs.hpp"
#include "actors/node/node_router_state.hpp"
#include "actors/node/request_batch.hpp"
#include "actors/offload.hpp"
#include "actors/tensor_codec.hpp"
#include "base/units.hpp"
#include "gpu/shadow_split.hpp"
#include "model/sample_inputs.hpp"
#include "placement/shadow_profile.hpp"

namespace ember {

namespace {

constexpr auto kRestartTimeout = std::chrono::minutes(1);
/// A failed restart is tried again after 1 s, then 2, 4, ... at most a minute apart.
constexpr auto kRestartRetryFirst = std::chrono::seconds(1);
constexpr auto kRestartRetryMax = std::chrono::seconds(60);

void pump(router_pointer self);

/// The profile's sequence length: 128, or less when a positional table is shorter.
int64_t profile_seq_len(const gpu::Model& model) {
  int64_t len = 128;
  for (uint32_t l = 0; l < model.num_layers(); ++l) {
    const auto& spec = model.layer(l);
    if (spec.op == gpu::OpKind::embedding && spec.attrs.positional) len = std::min(len, spec.attrs.num_embeddings);
  }
  return std::max<int64_t>(len, 1);
}

/// A restart failed (or the restarted executor did not report): the device stays out of service and
/// is tried again after 1 s, 2 s, 4 s, ... at most kRestartRetryMax.
void retry_restart_later(router_pointer self, uint32_t device, const caf::error& err) {
  auto& d = self->state.devices[device];
  d.restarting = false;
  const auto wait =
      std::min<std::chrono::seconds>(kRestartRetryFirst * (1 << std::min(d.failed_restarts, 6u)), kRestartRetryMax);
  ++d.failed_restarts;
  spdlog::error("node {}: executor {} could not be restarted: {}; it stays out of service, next try in {} s",
                self->state.config.name, d.name, from_caf(err).message(), wait.count());
  self->delayed_send(self, wait, restart_atom_v, device);
}

}  // namespace

void restart_device(router_pointer self, uint32_t device, const char* why) {
  auto& st = self->state;
  // One restart at a time (a fault and the supervisor's replacement may both ask for one); a device
  // that is up again needs none (a retry scheduled before it came back).
  if (st.devices[device].restarting || st.swap->device_is_up(device)) return;
  st.devices[device].restarting = true;
  spdlog::warn("node {}: executor {} {}; restarting it (its models come back from host memory)", st.config.name,
               st.devices[device].name, st.devices[device].failed_restarts ? "is still out of service" : why);
  self->request(st.devices[device].actor, kRestartTimeout, restart_atom_v)
      .then(
          [self, device](device_report&) {
            self->request(self->state.devices[device].actor, std::chrono::seconds(10), status_atom_v)
                .then(
                    [self, device](executor_status& status) {
                      self->state.devices[device].failed_restarts = 0;
                      self->state.devices[device].restarting = false;
                      self->state.swap->device_up(device, status.pool_capacity);
                      spdlog::info("node {}: executor {} restarted", self->state.config.name, status.device.name);
                      pump(self);
                    },
                    [self, device](caf::error& err) { retry_restart_later(self, device, err); });
          },
          [self, device](caf::error& err) { retry_restart_later(self, device, err); });
}

namespace {

/// The table's Shadows of `model` into the node's gauges.
void show_shadows(router_pointer self, const std::string& model) {
  auto& st = self->state;
  auto key = st.keys.find(model);
  if (!st.instruments || !st.shadows || key == st.keys.end()) return;
  uint32_t starting = 0, ready = 0;
  for (const auto& [id, row] : st.shadows->table()) {
    if (row.model != model) continue;
    (row.ready ? ready : starting)++;
  }
  auto m = st.swap->model(model);
  st.instruments->set_shadows(key->second, starting, ready, (starting + ready) * (m ? m->bytes : 0));
}

/// A Shadow leaves its device (its row already out of the table): the executor drops it once no
/// split runs on it. `known`: the model's key when the router may have forgotten the model already.
void drop_shadow(router_pointer self, const ShadowPairs::Row& row, const std::string& why,
                 std::optional<model_key> known = std::nullopt) {
  auto& st = self->state;
  st.shadow_gates.erase(row.id);
  if (auto k = st.keys.find(row.model); !known && k != st.keys.end()) known = k->second;
  spdlog::info("node {}: the Shadow of {} on {} (layers [{}, {}), paired with {}) goes: {}", st.config.name, row.model,
               st.devices[row.device].name, row.choice.first_layer, row.choice.last_layer, st.devices[row.body].name,
               why);
  if (!known) return;
  show_shadows(self, row.model);
  self->request(st.devices[row.device].actor, std::chrono::minutes(1), shadow_atom_v, *known)
      .then([](bool) {}, [](caf::error&) {});
}

/// Starts the Shadows of `rows` (in the table as starting, their devices lent): each executor copies
/// its layers from the model's host copy and answers its gate.
void start_shadows(router_pointer self, const std::vector<ShadowPairs::Row>& rows) {
  auto& st = self->state;
  for (const auto& row : rows) {
    auto key = st.keys.find(row.model);
    auto replica = key == st.keys.end() ? st.replicas.end() : st.replicas.find(key->second);
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
    load_shadow msg{key->second, replica->second.model, row.choice.first_layer, row.choice.last_layer};
    self->request(st.devices[row.device].actor, std::chrono::seconds(60), std::move(msg))
        .then(
            [self, row, key = key->second](shadow_ready& ready) {
              auto& st = self->state;
              if (!st.shadows || !st.shadows->table().count(row.id)) {
                // Released (its model unloaded) while it started: the executor lets it go all the
                // same, by the key the router may have forgotten.
                drop_shadow(self, row, "no longer wanted", key);
                return;
              }
              st.shadow_gates[row.id] = std::move(ready.gate);
              st.shadows->started(row.id, ready.bytes, ready.start_us, *st.swap);
              show_shadows(self, row.model);
              spdlog::info("node {}: the Shadow of {} on {} is ready ({}, {} us)", st.config.name, row.model,
                           st.devices[row.device].name, format_bytes(ready.bytes), ready.start_us);
              pump(self);
            },
            [self, row](caf::error& err) {
              auto& st = self->state;
              spdlog::warn("node {}: the Shadow of {} on {} did not start: {}", st.config.name, row.model,
                           st.devices[row.device].name, from_caf(err).message());
              if (st.shadows) st.shadows->gone(row.id, *st.swap);
              show_shadows(self, row.model);
              pump(self);
            });
  }
}

// The model's registration profile ended: heaviness and SLO from the cold and warm runs.
void profiled(router_pointer self, const model_key& key, const swap_reply& r) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return;
  if (r.error) return finish_load(self, key, to_caf(r.error->with_context("profiling " + key.to_string())));
  const auto& late = *st.config.late;
  auto m = st.swap->model(key.to_string());
  if (!m) return;
  const uint64_t warm = std::max<uint64_t>(r.result.warm_us, 1);
  auto heaviness =
      placement::classify(static_cast<int64_t>(r.result.run.compute_us), static_cast<int64_t>(warm), late.heavy_factor);
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
  m->activation_bytes = r.result.plan_bytes;
  if (r.result.footprint) m->bytes = r.result.footprint;
  // Dynamic batching from here on (the profile itself ran alone, without waiting for company).
  if (serving.dynamic_batching && serving.max_batch > 1) {
    if (Status eligible = batching_eligible(it->second.model->manifest()); eligible.ok()) {
      m->max_batch = serving.max_batch;
      m->preferred_batch = serving.preferred_batch;
      m->max_queue_delay_us = serving.max_queue_delay_us;
    } else {
      spdlog::warn("node {}: {} asks for dynamic batching, which stays off: {}", st.config.name, key.to_string(),
                   eligible.error().message());
    }
  }
  if (Status s = st.swap->add_model(*m); !s.ok()) return finish_load(self, key, to_caf(s.error()));
  late_scale_model(self, key);
  it->second.info.device = "late";
  spdlog::info("node {}: {} profiled: cold {} us, warm {} us -> {}, SLO {} us at p{}", st.config.name, key.to_string(),
               r.result.run.compute_us, warm, placement::to_string(m->heaviness), m->deadline_us, m->percentile * 100);
  finish_load(self, key, caf::error{});
}

/// Every request a dispatch ran: its lead, then the members of its batch.
std::vector<uint64_t> dispatch_ids(const SwapDispatch& d) {
  std::vector<uint64_t> ids{d.request};
  for (const auto& q : d.batch) ids.push_back(q.id);
  return ids;
}

/// A dispatch's requests go back to the queue (a fault, or a batch retried member by member),
/// keeping their arrival; one the queue no longer takes is failed.
void requeue_all(router_pointer self, const SwapDispatch& d, bool solo) {
  auto& st = self->state;
  std::vector<std::pair<uint64_t, int64_t>> all{{d.request, d.arrival_us}};
  for (const auto& q : d.batch) all.emplace_back(q.id, q.arrival_us);
  for (const auto& [id, arrival] : all) {
    auto h = st.held.find(id);
    if (h == st.held.end()) continue;
    h->second.solo = h->second.solo || solo;
    // A workflow step reading values kept on a device cannot run again: they went with the fault.
    Status s = h->second.device_inputs.empty()
                   ? st.swap->requeue(id, d.model, arrival)
                   : Status(unavailable("the device holding its inputs (" + st.devices[d.device].name + ") faulted"));
    if (!s.ok()) {
      router_state::Held held = std::move(h->second);
      st.held.erase(h);
      fail_held(self, held, s.error());
    }
  }
}

void answered(router_pointer self, const SwapDispatch& d, swap_reply r) {
  auto& st = self->state;
  if (st.running.erase(d.request) == 0) return;  // taken as faulted already (run_watchdog)
  auto h = st.held.find(d.request);
  if (h == st.held.end()) return;  // cannot happen: only answers remove held requests
  const int64_t now = now_us(self);
  if (d.shadow && !r.result.fault && r.result.split.shadow_lost && st.shadows) {
    // The Body took its Shadow's rows back: the Shadow is gone or failing; the pair ends.
    if (auto row = st.shadows->gone(d.shadow, *st.swap)) drop_shadow(self, *row, r.result.split.shadow_error);
  }
  SwapOutcome o;
  o.fault = r.result.fault;
  // A batch that failed short of a fault is retried member by member: no outcome yet.
  const bool retry_members = !d.batch.empty() && !r.result.fault && !r.reply;
  // A run beside others that found no memory for its activations runs again, alone: no outcome yet.
  const bool retry_alone =
      d.beside && !r.result.fault && r.error && r.error->code() == ErrorCode::out_of_memory && !h->second.alone;
  o.answered = !r.result.fault && !retry_members && !retry_alone;
  o.resident = r.result.footprint > 0;
  o.footprint = r.result.footprint;
  o.pool_free = r.result.pool_free;
  for (const auto& k : r.result.evicted) o.evicted.push_back(k.to_string());
  const uint64_t latency = static_cast<uint64_t>(std::max<int64_t>(0, now - d.arrival_us));
  if (st.instruments) {
    st.instruments->count_evictions(r.result.evicted.size());
    auto m = st.swap->model(d.model);
    if (o.answered && !h->second.profile && !h->second.warmup && m) {
      st.instruments->count_slo(m->deadline_us == 0 || latency <= m->deadline_us);
      for (const auto& q : d.batch) {
        st.instruments->count_slo(m->deadline_us == 0 ||
                                  static_cast<uint64_t>(std::max<int64_t>(0, now - q.arrival_us)) <= m->deadline_us);
      }
    }
  }
  st.swap->finish(d, o, latency, now);
  if (r.result.plan_bytes) st.swap->note_activations(d.model, r.result.plan_bytes);
  if (r.result.fault) {
    requeue_all(self, d, false);
    if (st.instruments) st.instruments->count_restart();
    restart_device(self, d.device);
    return pump(self);
  }
  if (retry_alone) {
    spdlog::warn("node {}: request {} of {} ran out of device memory beside other runs on {}; it runs again alone",
                 st.config.name, d.request, d.model, st.devices[d.device].name);
    h->second.alone = true;
    if (Status s = st.swap->requeue(d.request, d.model, d.arrival_us, /*alone=*/true); !s.ok()) {
      router_state::Held held = std::move(h->second);
      st.held.erase(h);
      fail_held(self, held, s.error());
    }
    return pump(self);
  }
  if (retry_members) {
    spdlog::warn("node {}: a batch of {} requests of {} failed ({}); each runs again alone", st.config.name,
                 d.batch.size() + 1, d.model, r.error ? r.error->message() : "no answer");
    requeue_all(self, d, true);
    return pump(self);
  }
  if (!d.batch.empty()) {
    std::vector<std::shared_ptr<const infer_request>> members;
    std::vector<router_state::Held> holds;
    for (uint64_t id : dispatch_ids(d)) {
      auto m = st.held.find(id);
      if (m == st.held.end()) continue;
      members.push_back(m->second.request);
      holds.push_back(std::move(m->second));
      st.held.erase(m);
    }
    auto replies = split_reply(*r.reply, members);
    for (size_t k = 0; k < holds.size(); ++k) {
      if (replies.ok()) {
        holds[k].promise.deliver(std::move((*replies)[k]));
      } else {
        holds[k].promise.deliver(to_caf(replies.error()));
      }
    }
    return pump(self);
  }
  router_state::Held held = std::move(h->second);
  st.held.erase(h);
  if (held.workflow) {
    workflow_step_done(self, held, r, d.device);
    return pump(self);
  }
  if (!st.keys.count(d.model) && r.result.footprint > 0) {
    // Unloaded while it ran: its fresh device copy goes too.
    self->request(st.devices[d.device].actor, std::chrono::minutes(1), unload_atom_v, held.request->model)
        .then([](bool) {}, [](caf::error&) {});
  }
  if (held.warmup) {
    // Its device copy is what it was for; a failure shows again on the first real request.
    if (held.ready_after) finish_load(self, held.request->model, caf::error{});
  } else if (held.profile) {
    profiled(self, held.request->model, r);
  } else if (r.reply) {
    held.promise.deliver(std::move(*r.reply));
  } else {
    held.promise.deliver(to_caf(r.error ? *r.error : internal_error("the executor gave no answer")));
  }
  pump(self);
}

void send_swap(router_pointer self, SwapDispatch d, swap_request req);

std::string workflow_name(router_pointer self, const router_state::Held& held) {
  auto it = self->state.workflows.find(held.workflow);
  return it == self->state.workflows.end() ? std::string() : it->second->config.name;
}

/// A workflow step whose inputs `handles` are kept on device `source`, not on the dispatch's: that
/// executor says where they are, and the step's device copies them over the link first (counted as
/// peer hand-off); they stay kept there until the step answered (the run releases a value only
/// after its last reader). A failed lease answers the dispatch with its error. Inputs kept on a
/// third device (fan-in across devices) are leased in turn.
void lease_then_launch(router_pointer self, SwapDispatch d, swap_request req, uint32_t source,
                       std::vector<uint64_t> handles) {
  auto& st = self->state;
  self->request(st.devices[source].actor, std::chrono::minutes(1), lend_atom_v, handles)
      .then(
          [self, d, req, source](value_lease& lease) mutable {
            auto& st = self->state;
            auto h = st.held.find(d.request);
            if (h == st.held.end() || !st.running.count(d.request)) return;
            std::vector<uint64_t> more;
            std::optional<uint32_t> third;
            for (const auto& in : h->second.device_inputs) {
              // Read in place, or copied over an earlier lease's link: taken care of. (The held
              // request is left as it is: a retry elsewhere leases from where the values live.)
              const bool leased = std::any_of(req.run.peer_inputs.begin(), req.run.peer_inputs.end(),
                                              [&](const gpu::PeerValue& p) { return p.name == in.name; });
              if (in.device == d.device || leased) continue;
              if (in.device == source) {
                auto v = std::find_if(lease.values.begin(), lease.values.end(),
                                      [&](const gpu::PeerValue& p) { return p.name == in.value.name; });
                if (v == lease.values.end()) continue;
                if (st.instruments)
                  st.instruments->count_handoff(workflow_name(self, h->second), "peer", v->desc.bytes());
                req.run.peer_inputs.push_back(*v);
                req.run.peer_inputs.back().name = in.name;
              } else if (!third || *third == in.device) {
                third = in.device;
                more.push_back(in.value.handle);
              }
            }
            if (third) return lease_then_launch(self, std::move(d), std::move(req), *third, std::move(more));
            send_swap(self, std::move(d), std::move(req));
          },
          [self, d](caf::error& err) {
            swap_reply r;
            r.error = from_caf(err).with_context("reading its inputs on another device");
            answered(self, d, std::move(r));
          });
}

void launch(router_pointer self, SwapDispatch d, std::optional<gpu::PeerWeights> peer) {
  auto& st = self->state;
  auto h = st.held.find(d.request);
  auto key = st.keys.find(d.model);
  auto replica = key == st.keys.end() ? st.replicas.end() : st.replicas.find(key->second);
  if (h == st.held.end() || replica == st.replicas.end()) return;
  swap_request req;
  req.request = h->second.request;  // shared: a fault retries it on another device
  if (!d.batch.empty()) {
    std::vector<std::shared_ptr<const infer_request>> members;
    for (uint64_t id : dispatch_ids(d)) {
      if (auto m = st.held.find(id); m != st.held.end()) members.push_back(m->second.request);
    }
    int64_t rows = 0;
    for (const auto& m : members) rows += batch_rows(*m);
    if (st.instruments) st.instruments->count_execution(replica->first, members.size(), rows);
    req.request = std::make_shared<const infer_request>(concat_requests(members));
  } else if (st.instruments && !h->second.profile && !h->second.warmup) {
    st.instruments->count_execution(replica->first, 1, batch_rows(*h->second.request));
  }
  req.run.model = replica->second.model;
  req.run.peer = std::move(peer);
  auto to_keys = [&](const std::vector<std::string>& names, std::vector<model_key>& out) {
    for (const auto& m : names) {
      if (auto k = st.keys.find(m); k != st.keys.end()) out.push_back(k->second);
    }
  };
  to_keys(d.evict, req.run.evict);
  to_keys(d.fallback, req.run.fallback);
  req.run.profile = h->second.profile;
  // A plain run of a warm Body shares its rows with its Shadow (AsyFunc).
  if (st.shadows && d.action == placement::SwapAction::run && !d.beside && !h->second.profile && !h->second.warmup &&
      h->second.device_inputs.empty() && h->second.keep.empty()) {
    const int64_t rows = batch_rows(*req.request);
    if (auto p = st.shadows->pair(d.model, d.device, static_cast<uint32_t>(std::max<int64_t>(rows, 0)))) {
      if (auto g = st.shadow_gates.find(p->first); g != st.shadow_gates.end()) {
        req.run.shadow = g->second;
        req.run.shadow_share = p->second;
        d.shadow = p->first;
      }
    }
  }
  st.running[d.request] = {d, now_us(self)};
  // A workflow step: inputs kept on this device are read where they are; those kept on another
  // device are copied over from there first.
  const router_state::Held& held = h->second;
  std::vector<uint64_t> elsewhere;
  std::optional<uint32_t> source;
  for (const auto& in : held.device_inputs) {
    if (in.device == d.device) {
      req.run.device_inputs.emplace_back(in.name, in.value.handle);
      if (st.instruments)
        st.instruments->count_handoff(workflow_name(self, held), "same_device", in.value.desc.bytes());
    } else if (!source || *source == in.device) {
      source = in.device;
      elsewhere.push_back(in.value.handle);
    }
  }
  req.run.keep = held.keep;
  if (source) {
    lease_then_launch(self, std::move(d), std::move(req), *source, std::move(elsewhere));
    return;
  }
  send_swap(self, std::move(d), std::move(req));
}

void send_swap(router_pointer self, SwapDispatch d, swap_request req) {
  auto& st = self->state;
  self->request(st.devices[d.device].actor, caf::infinite, std::move(req))
      .then([self, d](swap_reply& r) { answered(self, d, std::move(r)); },
            [self, d](caf::error& err) {
              swap_reply r;
              r.result.fault = true;  // the executor is gone or hung: restart it
              r.error = from_caf(err);
              answered(self, d, std::move(r));
            });
}

/// Which queued requests may join a batch led by `lead`: same model, inputs of the same names,
/// datatypes and trailing dimensions, the same outputs asked, not retried alone, and rows adding up
/// to at most the model's max_batch.
SwapController::BatchJoin batch_join(router_pointer self) {
  return [self](const placement::QueuedRequest& lead) -> placement::RrcQueue::RequestFilter {
    auto& st = self->state;
    auto h = st.held.find(lead.id);
    auto m = st.swap->model(lead.model);
    if (h == st.held.end() || !m || m->max_batch <= 1) return {};
    const router_state::Held& first = h->second;
    if (first.solo || first.profile || first.warmup || first.workflow) return {};
    const int64_t lead_rows = batch_rows(*first.request);
    if (lead_rows == 0 || lead_rows >= static_cast<int64_t>(m->max_batch)) return {};
    auto rows = std::make_shared<int64_t>(lead_rows);
    return [self, request = first.request, rows, max = static_cast<int64_t>(m->max_batch)](uint64_t id) {
      auto& held = self->state.held;
      auto c = held.find(id);
      if (c == held.end() || c->second.solo || c->second.profile || c->second.warmup || c->second.workflow) {
        return false;
      }
      if (!batch_compatible(*request, *c->second.request)) return false;
      const int64_t r = batch_rows(*c->second.request);
      if (*rows + r > max) return false;
      *rows += r;
      return true;
    };
  };
}

/// What ran inline since the last call (actors/node/inline_runs.hpp) enters the policies: each run's
/// last use (eviction order) and SLO outcome, as a dispatch's answer would have.
void absorb_inline(router_pointer self, int64_t now) {
  auto& st = self->state;
  if (!st.config.inline_runs) return;
  for (const auto& r : st.config.inline_runs->drain()) {
    const std::string name = r.model.to_string();
    auto m = st.swap->model(name);
    if (!m) continue;
    st.swap->ran_inline(name, r.device, r.latency_us, now);
    if (st.shadows) start_shadows(self, st.shadows->arrival(name, now, *st.swap));
    if (st.instruments) st.instruments->count_slo(m->deadline_us == 0 || r.latency_us <= m->deadline_us);
  }
}

void pump(router_pointer self) {
  auto& st = self->state;
  const int64_t now = now_us(self);
  absorb_inline(self, now);
  for (auto& d : st.swap->dispatch(now, batch_join(self))) {
    spdlog::debug("node {}: request {} of {} (+{} batched) -> {}: {}", st.config.name, d.request, d.model,
                  d.batch.size(), d.device, d.reason);
    if (st.instruments) {
      st.instruments->count_dispatch(d.beside                                            ? "beside"
                                     : d.action == placement::SwapAction::run            ? "run"
                                     : d.action == placement::SwapAction::swap_from_peer ? "peer"
                                                                                         : "host");
      if (auto m = st.swap->model(d.model); m && m->max_batch > 1) {
        const model_key& key = st.keys.at(d.model);
        st.instruments->observe_batch_delay(key, static_cast<uint64_t>(std::max<int64_t>(0, now - d.arrival_us)));
        for (const auto& q : d.batch) {
          st.instruments->observe_batch_delay(key, static_cast<uint64_t>(std::max<int64_t>(0, now - q.arrival_us)));
        }
      }
    }
    if (!d.source) {
      launch(self, std::move(d), std::nullopt);
      continue;
    }
    // A device-to-device swap: where the source keeps the model (it stays locked until the answer).
    const auto key = st.keys.at(d.model);
    self->request(st.devices[*d.source].actor, std::chrono::seconds(10), weights_atom_v, key)
        .then([self, d](weights_lease& lease) mutable { launch(self, std::move(d), std::move(lease.weights)); },
              [self, d](caf::error&) mutable { launch(self, std::move(d), std::nullopt); });
  }
  // A model passed over while gathering a batch: dispatch again when its wait ends (one wake-up
  // pending at a time, the earliest).
  if (auto until = st.swap->gathering_until(); until && (st.gather_wake_us == 0 || *until < st.gather_wake_us)) {
    st.gather_wake_us = *until;
    self->delayed_send(self, std::chrono::microseconds(std::max<int64_t>(*until - now, 1)), offload_done{[self] {
                         self->state.gather_wake_us = 0;
                         pump(self);
                       }});
  }
}

}  // namespace

void late_start(router_pointer self) {
  auto& st = self->state;
  if (!st.config.late) return;
  const auto& late = *st.config.late;
  st.swap = std::make_unique<SwapController>(late.topology, late.pool_bytes, late.options);
  for (uint32_t d = 0; d < late.workspace_bytes.size(); ++d) st.swap->set_workspace(d, late.workspace_bytes[d]);
  if (st.config.inline_runs) st.config.inline_runs->keep_records(true);
  const auto& scaling = late.scaling;
  if (scaling.model_level || scaling.shadows || scaling.adaptive_batching) {
    st.shadows = std::make_unique<ShadowPairs>(scaling, late.topology);
  }
  late_tick(self);
}

namespace {

/// An executor that has not answered a dispatch for LateBinding::run_timeout_us is taken as faulted: the dispatch
/// is answered as a fault (its requests go back to the queue, the device restarts), and its real
/// answer, should it still come, is ignored.
void run_watchdog(router_pointer self, int64_t now) {
  auto& st = self->state;
  const auto limit = static_cast<int64_t>(st.config.late->run_timeout_us);
  std::vector<SwapDispatch> hung;
  for (const auto& [id, run] : st.running) {
    if (now - run.second >= limit) hung.push_back(run.first);
  }
  for (auto& d : hung) {
    spdlog::error("node {}: executor {} has not answered request {} of {} for {} ms; taking it as faulted",
                  st.config.name, st.devices[d.device].name, d.request, d.model, limit / 1000);
    swap_reply r;
    r.result.fault = true;
    r.error = unavailable("executor " + st.devices[d.device].name + " did not answer in time");
    answered(self, d, std::move(r));
  }
}

}  // namespace

void late_tick(router_pointer self) {
  auto& st = self->state;
  if (!st.swap) return;
  const int64_t now = now_us(self);
  run_watchdog(self, now);
  if (st.shadows) {
    auto period = st.shadows->period(now, *st.swap);
    for (const auto& row : period.release) drop_shadow(self, row, "the burst is over");
    for (const auto& [model, device] : period.drop) {
      auto key = st.keys.find(model);
      if (key == st.keys.end()) continue;
      spdlog::info("node {}: model-level scaling: {} keeps {} copies; the one on {} goes", st.config.name, model,
                   st.shadows->bodies(model), st.devices[device].name);
      self->request(st.devices[device].actor, std::chrono::minutes(1), unload_atom_v, key->second)
          .then([](bool) {}, [](caf::error&) {});
    }
  }
  int64_t next = st.swap->tick(now);
  // Burst scaling's period comes at least as often as the queue's.
  if (st.shadows) next = std::min<int64_t>(next, now + static_cast<int64_t>(st.shadows->options().period_us));
  if (st.instruments) st.instruments->set_slo_state(st.swap->queue().alpha(), st.swap->queue().queued());
  pump(self);  // a repartition may have changed the order
  self->delayed_send(self, std::chrono::microseconds(std::max<int64_t>(next - now, 1000)), tick_atom_v);
}

void late_register(router_pointer self, const model_key& key, std::shared_ptr<const gpu::Model> model) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return;
  it->second.model = model;
  const std::string name = key.to_string();
  SwapModel m{name, model->data_bytes(), placement::Heaviness::light, 0, st.config.late->slo_percentile};
  if (Status s = st.swap->add_model(m); !s.ok()) return finish_load(self, key, to_caf(s.error()));
  st.keys[name] = key;
  const bool member = std::any_of(st.stages.begin(), st.stages.end(), [&](const auto& s) {
    return s.first == key || (s.first.version == key.version && s.first.name.rfind(key.name + "#", 0) == 0);
  });
  if (member) {
    // A pipeline stage serves a cold start, and a member completing into a full replica serves
    // the pipeline's requests meanwhile: ready at once, no profile runs first (two runs of the
    // model, which would stall the pipeline on this device). Heavy (swapped in early) and the SLO
    // declared for the model, else the node's, else 1 s (it only orders the queue between models).
    const auto& late = *st.config.late;
    const auto& serving = model->manifest().serving;
    m.heaviness = placement::Heaviness::heavy;
    slo_setting& own = it->second.own;
    own.deadline_us = serving.slo_deadline_us ? serving.slo_deadline_us
                      : late.slo_deadline_us  ? late.slo_deadline_us
                                              : 1'000'000;
    own.percentile = serving.slo_deadline_us ? serving.slo_percentile : late.slo_percentile;
    const slo_setting& use = it->second.slo.deadline_us ? it->second.slo : own;
    m.deadline_us = use.deadline_us;
    m.percentile = use.percentile;
    if (Status s = st.swap->add_model(m); !s.ok()) return finish_load(self, key, to_caf(s.error()));
    it->second.info.device = "late";
    // One tiny run swaps it in now: a stage on every member at once (it is ready already, so the
    // pipeline's first request queues behind it, rather than swapping stage after stage); a
    // member's full model before it is ready, so that the switch-over finds every replica warm
    // while the pipeline still serves.
    const bool stage = st.stages.count(key) > 0;
    if (stage) finish_load(self, key, caf::error{});
    auto warm = gpu::sample_model_inputs(*model, 1, 1, 1);
    if (!warm.ok()) return stage ? void() : finish_load(self, key, caf::error{});
    auto request = std::make_shared<infer_request>();
    request->model = key;
    request->id = "warmup";
    request->inputs = encode_tensors(*warm);
    const uint64_t id = st.next_request++;
    if (!st.swap->submit(id, name, now_us(self)).ok()) return stage ? void() : finish_load(self, key, caf::error{});
    router_state::Held held{std::move(request), {}, false};
    held.warmup = true;
    held.ready_after = !stage;
    st.held.emplace(id, std::move(held));
    return pump(self);
  }
  // The profile: one cold request (swapped in from host), then a warm one, on sample inputs.
  auto inputs = gpu::sample_model_inputs(*model, 1, profile_seq_len(*model), 1);
  if (!inputs.ok()) return finish_load(self, key, to_caf(inputs.error()));
  auto profile = std::make_shared<infer_request>();
  profile->model = key;
  profile->id = "profile";
  profile->inputs = encode_tensors(*inputs);
  router_state::Held held{std::move(profile), {}, true};
  const uint64_t id = st.next_request++;
  if (Status s = st.swap->submit(id, name, now_us(self)); !s.ok()) return finish_load(self, key, to_caf(s.error()));
  st.held.emplace(id, std::move(held));
  pump(self);
}

Status late_submit(router_pointer self, const model_key& key, router_state::Held held, std::optional<uint32_t> prefer) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end() || !it->second.ready) {
    return unavailable("node " + st.config.name + " has no ready replica of " + key.to_string());
  }
  const uint64_t id = st.next_request++;
  if (Status s = st.swap->submit(id, key.to_string(), now_us(self), prefer); !s.ok()) {
    if (st.instruments) st.instruments->count_rejected(key);
    return s.error().with_context("node " + st.config.name);
  }
  const bool client = !held.profile && !held.warmup;
  st.held.emplace(id, std::move(held));
  if (st.shadows && client) start_shadows(self, st.shadows->arrival(key.to_string(), now_us(self), *st.swap));
  return Status::OK();
}

void late_pump(router_pointer self) { pump(self); }

void late_scale_model(router_pointer self, const model_key& key) {
  auto& st = self->state;
  if (!st.shadows) return;
  auto it = st.replicas.find(key);
  auto m = st.swap->model(key.to_string());
  if (it == st.replicas.end() || !m || !it->second.profile || !it->second.model || m->deadline_us == 0) return;
  ShadowPairs::ModelInfo info;
  info.profile = placement::shadow_profile(*it->second.model, *it->second.profile);
  info.slo_us = static_cast<double>(m->deadline_us);
  info.max_batch = std::max<uint32_t>(m->max_batch, 1);
  info.overhead_us = std::max(0.0, static_cast<double>(m->warm_us) - placement::body_us(info.profile, 1));
  const auto one = placement::body_capacity(info.profile, info.slo_us, info.max_batch);
  spdlog::info("node {}: {} scales in bursts by its profile: one copy carries {:.1f} rows/s within {} us (batch {})",
               st.config.name, key.to_string(), one.rows_per_s, m->deadline_us, one.batch);
  st.shadows->add_model(key.to_string(), std::move(info), *st.swap);
}

void fail_held(router_pointer self, router_state::Held& held, const Error& e) {
  if (held.workflow) return workflow_step_failed(self, held, e);
  if (held.promise.pending()) held.promise.deliver(to_caf(e));
}

caf::result<infer_reply> late_infer(router_pointer self, infer_request& req) {
  auto rp = self->make_response_promise<infer_reply>();
  const model_key key = req.model;
  if (Status s = late_submit(self, key, router_state::Held{std::make_shared<const infer_request>(std::move(req)), rp});
      !s.ok()) {
    rp.deliver(to_caf(s.error()));  // the promise took the request's answer
    return rp;
  }
  pump(self);
  return rp;
}

void late_unload(router_pointer self, const model_key& key) {
  auto& st = self->state;
  if (st.shadows) {
    for (const auto& row : st.shadows->remove_model(key.to_string(), *st.swap)) drop_shadow(self, row, "unloaded");
  }
  auto [queued, holders] = st.swap->remove_model(key.to_string());
  for (uint64_t id : queued) {
    auto h = st.held.find(id);
    if (h == st.held.end()) continue;
    router_state::Held held = std::move(h->second);
    st.held.erase(h);
    fail_held(self, held,
              unavailable("model " + key.to_string() + " was unloaded from node " + st.config.name +
                          " while the request waited"));
  }
  for (uint32_t d : holders) {
    self->request(st.devices[d].actor, std::chrono::minutes(1), unload_atom_v, key)
        .then([](bool) {}, [](caf::error&) {});
  }
  st.keys.erase(key.to_string());
}

}  // namespace ember
