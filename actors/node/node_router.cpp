// node_router: a node's face to the cluster (see node_router_interface.hpp): its behaviour, the
// replicas' loads and unloads (a pipeline stage's included), pinned binding, and its reports.
#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <utility>

#include "actors/actor_system.hpp"
#include "actors/errors.hpp"
#include "actors/node/node_router_state.hpp"
#include "actors/node/replica_ledger.hpp"
#include "actors/node_router_interface.hpp"
#include "base/units.hpp"

namespace ember {

void remember(router_pointer self, const model_key& key, const router_state::Replica& r) {
  auto& st = self->state;
  if (!st.config.ledger) return;
  LedgerEntry e;
  e.key = key;
  e.blob_key = r.blob_key;
  e.weights_bytes = r.weights_bytes;
  e.device = r.device;
  e.info = r.info;
  e.model = r.model;
  if (st.swap) e.late = st.swap->model(key);
  e.slo = r.slo;
  e.own = r.own;
  e.stage = r.stage.has_value();
  st.config.ledger->put(std::move(e));
}

void forget(router_pointer self, const model_key& key) {
  if (self->state.config.ledger) self->state.config.ledger->erase(key);
}

namespace {

/// The console's slo, through the manager: the replica's SLO from now on (late binding's queue).
bool set_slo(router_pointer self, const model_key& key, const slo_setting& slo) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end() || it->second.stage) return false;
  auto& r = it->second;
  r.slo = slo;
  const slo_setting& use = slo.deadline_us ? slo : r.own;
  if (auto m = st.swap ? st.swap->model(key) : std::nullopt; m && use.deadline_us) {
    // Registered and profiled; until then, the profile applies it.
    m->deadline_us = use.deadline_us;
    m->percentile = use.percentile;
    if (Status s = st.swap->add_model(*m); !s.ok()) {
      spdlog::warn("node {}: cannot apply the SLO of {}: {}", st.config.name, key, s.error().message());
    }
    late_scale_model(self, key);
  }
  if (r.ready) remember(self, key, r);
  spdlog::info("node {}: SLO of {} {} {} us at p{}", st.config.name, key,
               slo.deadline_us ? "set to" : "cleared; back to", use.deadline_us, use.percentile * 100);
  return true;
}

/// The stage leaves the stage host (unloaded, failed, lost): its queued requests fail as retryable.
void drop_stage(router_pointer self, const model_key& key, const router_state::Replica& r) {
  if (r.stage && self->state.config.stages) self->send(self->state.config.stages, unload_atom_v, key);
}

}  // namespace

router_state::~router_state() {
  const caf::error gone = to_caf(unavailable("the router of node " + config.name + " died; retry"));
  auto fail = [&](auto& promise) {
    if (promise.pending()) promise.deliver(gone);
  };
  for (auto& [id, h] : held.all()) {
    fail(h.promise);
    fail(h.joined);
  }
  if (workflows) workflows->fail_all(from_caf(gone));
  for (auto& [key, r] : replicas)
    for (auto& w : r.waiters) fail(w);
}

void finish_load(router_pointer self, const model_key& key, const caf::error& err) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return;
  auto& r = it->second;
  const double seconds = std::chrono::duration<double>(self->clock().now() - r.started).count();
  auto waiters = std::move(r.waiters);
  if (err) {
    const Error e = from_caf(err);
    spdlog::warn("node {}: replica {} failed to load: {}", st.config.name, key, e.message());
    if (st.instruments) st.instruments->count_load(std::string(to_string(e.code())), seconds);
    if (r.pinned) self->send(st.cache, unpin_atom_v, r.blob_key);
    if (st.swap) late_unload(self, key);
    drop_stage(self, key, r);
    st.replicas.erase(it);
    forget(self, key);
    for (auto& w : waiters) w.deliver(err);
    return;
  }
  r.ready = true;
  r.info.load_us = static_cast<uint64_t>(seconds * 1e6);
  remember(self, key, r);
  if (r.stage) {
    // Handed over before the load answers: the stage host has it before any pipeline can name it.
    std::vector<std::string> inputs;
    for (const auto& in : r.model->manifest().inputs) inputs.push_back(in.name);
    self->send(st.config.stages, stage_ready{*r.stage, std::move(r.whole), std::move(inputs)});
  }
  if (st.instruments) {
    st.instruments->count_load("ok", seconds);
    st.instruments->set_replicas(st.ready_count());
  }
  spdlog::info("node {}: replica {} ready on {} ({} from {} in {:.1f} ms)", st.config.name, key, r.info.device,
               format_bytes(r.weights_bytes), describe_source(r.info.source, r.info.source_peer), seconds * 1e3);
  for (auto& w : waiters) w.deliver(r.info);
}

namespace {

// Binds to the device with the most room left, trying the others when one is out of memory.
void bind_somewhere(router_pointer self, model_key key, std::shared_ptr<const gpu::Model> model,
                    std::vector<size_t> tried) {
  auto& st = self->state;
  const uint64_t need = model->layers_bytes();  // a generative model's tokenizer stays on the host
  size_t best = st.devices.size();
  for (size_t i = 0; i < st.devices.size(); ++i) {
    if (std::find(tried.begin(), tried.end(), i) != tried.end()) continue;
    const auto& d = st.devices[i];
    if (best == st.devices.size() ||
        d.capacity - std::min(d.capacity, d.bound_bytes) >
            st.devices[best].capacity - std::min(st.devices[best].capacity, st.devices[best].bound_bytes)) {
      best = i;
    }
  }
  if (best == st.devices.size()) {
    return finish_load(self, key,
                       to_caf(out_of_memory("no device of node " + st.config.name + " can hold " + key.to_string() +
                                            " (" + format_bytes(need) + " of weights)")));
  }
  tried.push_back(best);
  self->request(st.devices[best].actor, kBindTimeout, bind_model{key, model})
      .then(
          [self, key, best, need, model](const std::string& device) {
            auto it = self->state.replicas.find(key);
            if (it == self->state.replicas.end()) return;
            it->second.device = best;
            it->second.info.device = device;
            it->second.model = model;  // kept to bind it again if the executor dies
            self->state.devices[best].bound_bytes += need;
            finish_load(self, key, caf::error{});
          },
          [self, key, model, tried](caf::error& err) {
            if (from_caf(err).code() == ErrorCode::out_of_memory && tried.size() < self->state.devices.size()) {
              return bind_somewhere(self, key, model, tried);
            }
            finish_load(self, key, err);
          });
}

/// Fetches the bytes into the cache only (distribution ahead of demand, benchmarks): no device.
caf::result<replica_info> prefetch(router_pointer self, load_replica& req) {
  auto rp = self->make_response_promise<replica_info>();
  const auto started = self->clock().now();
  self->request(self->state.cache, kFetchTimeout,
                fetch_blob{req.model, req.blob_key, req.blob_bytes, req.sources, req.transfer_id, req.controller})
      .then(
          [self, rp, model = req.model, started](blob_ref& blob) mutable {
            const auto us =
                std::chrono::duration_cast<std::chrono::microseconds>(self->clock().now() - started).count();
            rp.deliver(replica_info{model, self->state.config.name, "", blob.source, blob.source_peer, blob.bytes_fetched,
                                    static_cast<uint64_t>(us)});
          },
          [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

/// The fetched bytes of `key` become a model (its profile checked when it has one), a stage cut
/// from them when it is one, and go to late binding or a device.
void fetched(router_pointer self, const model_key& key, blob_ref& blob, const std::string& manifest,
             const std::string& profile_json) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return;
  auto& r = it->second;
  r.info.source = blob.source;
  r.info.source_peer = blob.source_peer;
  r.info.bytes_fetched = blob.bytes_fetched;
  self->send(st.cache, pin_atom_v, r.blob_key);
  r.pinned = true;
  // Validates everything again: bytes from the network are input like any other.
  auto model = gpu::Model::from_memory(manifest, blob.bytes, "model " + key.to_string());
  if (!model.ok()) return finish_load(self, key, to_caf(model.error()));
  if (!r.stage && !profile_json.empty()) {
    // Optional: a profile that does not describe these bytes scales nothing, and says so.
    auto profile = gpu::parse_profile(profile_json, "profile.json of " + key.to_string());
    Status fits = profile.ok() ? profile->check_matches(**model) : Status(profile.error());
    if (fits.ok()) {
      r.profile = std::make_shared<const gpu::ModelProfile>(std::move(*profile));
    } else {
      spdlog::warn("node {}: {}; it is not scaled in bursts", st.config.name, fits.error().message());
    }
  }
  if (r.stage) {
    auto stage = gpu::Model::stage(*model, {r.stage->first_layer, r.stage->last_layer});
    if (!stage.ok()) return finish_load(self, key, to_caf(stage.error()));
    r.whole = std::move(*model);
    model = std::move(stage);
  }
  if (st.swap) return late_register(self, key, std::move(*model));
  bind_somewhere(self, key, std::move(*model), {});
}

/// A replica of the whole model, or (with `part`) pipeline stage [first, last) of it under its
/// stage key: only the header and the stage's layers are fetched, the stage cut from them.
caf::result<replica_info> load(router_pointer self, load_replica& req, std::optional<blob_part> part = {}) {
  auto& st = self->state;
  if (req.cache_only && !part) return prefetch(self, req);
  if (part && (part->last_layer <= part->first_layer || req.cache_only)) {
    return to_caf(invalid_argument("stage [" + std::to_string(part->first_layer) + ", " +
                                   std::to_string(part->last_layer) + ") of " + req.model.to_string()));
  }
  if (part && !st.config.stages) {
    return to_caf(unavailable("node " + st.config.name + " serves no pipeline stages (it has no stage host)"));
  }
  std::optional<stage_key> stage;
  if (part) stage = stage_key{req.model, part->first_layer, part->last_layer};
  const model_key key = stage ? stage->wire() : req.model;
  auto [it, fresh] = st.replicas.try_emplace(key);
  auto& r = it->second;
  if (!fresh) {
    if (r.ready) return r.info;
    auto rp = self->make_response_promise<replica_info>();
    r.waiters.push_back(rp);
    // Joined to the load in flight: a hop of a dead manager's chain may be fetching the bytes.
    if (!part) {
      self->send(st.cache, handover_atom_v,
                 fetch_blob{req.model, req.blob_key, req.blob_bytes, req.sources, req.transfer_id, req.controller});
    }
    return rp;
  }
  auto rp = self->make_response_promise<replica_info>();
  r.waiters.push_back(rp);
  r.started = self->clock().now();
  r.blob_key = part ? part_key_of(req.blob_key, *part) : req.blob_key;
  r.weights_bytes = part ? part->length() : req.blob_bytes;
  r.slo = req.slo;
  r.stage = stage;
  r.info.model = key;
  r.info.node = st.config.name;
  spdlog::info("node {}: loading {} {} ({})", st.config.name, part ? "pipeline stage" : "replica", key,
               format_bytes(r.weights_bytes));
  fetch_blob fetch{req.model, req.blob_key, req.blob_bytes, req.sources, part ? 0 : req.transfer_id, req.controller};
  fetch.part = part;
  fetch.max_bytes_per_s = req.max_bytes_per_s;
  if (!part && req.reuse.last_layer > 0 && !req.layers.layer_bytes.empty()) {
    fetch.reuse = req.reuse;
    fetch.layers = req.layers;
  }
  self->request(st.cache, kFetchTimeout, std::move(fetch))
      .then([self, key, manifest = std::move(req.manifest_json), profile_json = std::move(req.profile_json)](
                blob_ref& blob) { fetched(self, key, blob, manifest, profile_json); },
            [self, key](caf::error& err) { finish_load(self, key, err); });
  return rp;
}

caf::result<bool> unload(router_pointer self, const model_key& key) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return true;
  drop_stage(self, key, it->second);
  if (!it->second.ready) {
    // A load in flight: its waiters learn it was cancelled; the bytes stay cached.
    finish_load(self, key, to_caf(unavailable("replica " + key.to_string() + " was unloaded while loading")));
    return true;
  }
  if (st.swap) {
    late_unload(self, key);
    self->send(st.cache, unpin_atom_v, it->second.blob_key);
    st.replicas.erase(it);
    forget(self, key);
    if (st.instruments) st.instruments->set_replicas(st.ready_count());
    spdlog::info("node {}: replica {} unloaded", st.config.name, key);
    return true;
  }
  const auto r = it->second;
  st.replicas.erase(it);
  forget(self, key);
  st.devices[r.device].bound_bytes -= std::min(st.devices[r.device].bound_bytes, r.weights_bytes);
  self->send(st.cache, unpin_atom_v, r.blob_key);
  if (st.instruments) st.instruments->set_replicas(st.ready_count());
  spdlog::info("node {}: replica {} unloaded", st.config.name, key);
  auto rp = self->make_response_promise<bool>();
  self->request(st.devices[r.device].actor, kBindTimeout, unload_atom_v, key)
      .then([rp](bool) mutable { rp.deliver(true); }, [rp](caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

/// Ready replicas of models, as reported (pipeline stages are the manager's to track: it placed them).
std::vector<model_key> ready_replicas(const router_state& st) {
  std::vector<model_key> out;
  for (const auto& [key, r] : st.replicas)
    if (r.ready && !r.stage) out.push_back(key);
  return out;
}

caf::result<node_report> report(router_pointer self) {
  auto rp = self->make_response_promise<node_report>();
  self->request(self->state.cache, std::chrono::seconds(10), status_atom_v)
      .then(
          [self, rp](cache_status& cache) mutable {
            const auto& st = self->state;
            node_report r;
            r.name = st.config.name;
            r.data = st.config.data;
            r.rack = st.config.rack;
            for (const auto& d : st.devices) r.devices.push_back({d.name, d.capacity, d.bound_bytes});
            r.cache_capacity = cache.capacity;
            r.cache_used = cache.used;
            r.cached = std::move(cache.models);
            r.replicas = ready_replicas(st);
            r.stages = caf::actor_cast<caf::actor>(st.config.stages);
            if (st.config.direct_requests) r.requests = caf::actor_cast<caf::actor>(self);
            rp.deliver(std::move(r));
          },
          [rp](caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

/// The autoscaler's tick: per ready replica, the requests queued here and not executing yet.
load_report queued_report(router_pointer self) {
  const auto& st = self->state;
  load_report r;
  r.reporter = "node:" + st.config.name;
  for (const auto& key : ready_replicas(st)) {
    model_load m;
    m.model = key;
    m.queued = st.swap ? static_cast<uint32_t>(st.swap->queued(key)) : 0;
    r.models.push_back(std::move(m));
  }
  return r;
}

/// The warm path: late binding's queue, or the executor holding the replica (pinned binding).
caf::result<infer_reply> infer(router_pointer self, infer_request& req) {
  auto& st = self->state;
  if (st.swap) return late_infer(self, req);
  auto it = st.replicas.find(req.model);
  if (it == st.replicas.end() || !it->second.ready) {
    return to_caf(unavailable("node " + st.config.name + " has no ready replica of " + req.model.to_string()));
  }
  return self->delegate(st.devices[it->second.device].actor, std::move(req));
}

node_router_actor::behavior_type router_behavior(router_pointer self, NodeRouterConfig config,
                                                 std::vector<gpu_executor_actor> executors,
                                                 std::vector<device_report> devices, model_cache_actor cache,
                                                 NodeInstruments* instruments) {
  auto& st = self->state;
  st.epoch = self->clock().now();
  st.config = std::move(config);
  for (size_t i = 0; i < executors.size(); ++i) {
    st.devices.push_back({executors[i], devices[i].name, devices[i].memory_bytes, 0, {}});
  }
  st.cache = std::move(cache);
  st.instruments = instruments;
  if (st.instruments) st.instruments->set_replicas(0);
  // The stage host runs its stages here from now on; what a predecessor handed it is dropped.
  if (st.config.stages) self->send(st.config.stages, stage_router{caf::actor_cast<caf::actor>(self)});
  self->set_down_handler([self](caf::down_msg& down) { generation_sink_down(self, down); });
  late_start(self);
  restore(self);
  return {
      // -- warm path -----------------------------------------------------------------------------
      [self](workflow_request& req) -> caf::result<infer_reply> { return workflow_take(self, req); },
      [self](infer_request& req) -> caf::result<infer_reply> { return infer(self, req); },
      [self](generate_request& req, caf::actor& sink) -> caf::result<bool> { return generate(self, req, sink); },
      [self](cancel_atom, const std::string& id) { cancel_generation(self, id); },
      // -- replicas ------------------------------------------------------------------------------
      [self](load_replica& req) -> caf::result<replica_info> { return load(self, req); },
      [self](load_stage& req) -> caf::result<replica_info> { return load(self, req.load, std::move(req.part)); },
      [self](evict_atom, const model_key& key) -> caf::result<bool> {
        if (self->state.replicas.count(key)) return false;
        return self->delegate(self->state.cache, evict_atom_v, blob_key_of(key));
      },
      [self](unload_atom, const model_key& key) -> caf::result<bool> { return unload(self, key); },
      [self](slo_atom, const model_key& key, const slo_setting& slo) { return set_slo(self, key, slo); },
      // -- reporting -----------------------------------------------------------------------------
      [self](report_atom) -> caf::result<node_report> { return report(self); },
      [self](metrics_atom) -> metrics_snapshot {
        return self->state.instruments ? self->state.instruments->snapshot() : metrics_snapshot{};
      },
      [self](scale_atom) { return queued_report(self); },
      [self](ping_atom) {
        return replicas_fingerprint(ready_replicas(self->state), self->state.config.direct_requests ? self->id() : 0);
      },
      // -- late binding's timers -----------------------------------------------------------------
      [self](tick_atom) { late_tick(self); },
      [self](restart_atom, uint32_t device) {
        if (self->state.swap && device < self->state.devices.size()) restart_device(self, device);
      },
      // -- supervision ---------------------------------------------------------------------------
      [self](replace_atom, executor_replaced& x) { replace_executor(self, x); },
      [self](replace_atom, cache_replaced& x) { replace_cache(self, x); },
      [self](replace_atom, stages_replaced& x) { replace_stages(self, x); },
      [](fault_atom, const fault_command&) -> caf::result<std::string> {
        return to_caf(unsupported("fault commands go to the node's supervisor, which stands in front of its router"));
      },
      [](peers_atom, const std::vector<peer_endpoint>&) { /* the supervisor dials; a router alone has no peers */ },
      [](log_level_atom, const std::string& level) -> caf::result<bool> {
        auto set = set_log_level(level);
        if (!set.ok()) return to_caf(set.error());
        return true;
      },
      resume_offloaded(),
  };
}

}  // namespace

node_router_actor spawn_node_router(caf::actor_system& sys, NodeRouterConfig config,
                                    std::vector<gpu_executor_actor> executors, std::vector<device_report> devices,
                                    model_cache_actor cache, NodeInstruments* instruments) {
  return sys.spawn(router_behavior, std::move(config), std::move(executors), std::move(devices), std::move(cache),
                   instruments);
}

}  // namespace ember
