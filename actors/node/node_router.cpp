// node_router: a node's face to the cluster (see node_router_interface.hpp).
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

namespace {

/// How long a fetch may take before the router gives up on it (a 1 GiB model over a slow link).
constexpr auto kFetchTimeout = std::chrono::minutes(10);
/// How long binding (uploading weights to a device) may take.
constexpr auto kBindTimeout = std::chrono::minutes(5);

/// Keeps a ready replica in the ledger, for a successor of this router.
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
  if (st.swap) e.late = st.swap->model(key.to_string());
  e.slo = r.slo;
  e.own = r.own;
  e.stage = st.stages.count(key) > 0;
  st.config.ledger->put(std::move(e));
}

void forget(router_pointer self, const model_key& key) {
  if (self->state.config.ledger) self->state.config.ledger->erase(key);
}

/// The console's slo, through the manager: the replica's SLO from now on (late binding's queue).
bool set_slo(router_pointer self, const model_key& key, const slo_setting& slo) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end() || st.stages.count(key)) return false;
  auto& r = it->second;
  r.slo = slo;
  const slo_setting& use = slo.deadline_us ? slo : r.own;
  if (auto m = st.swap ? st.swap->model(key.to_string()) : std::nullopt; m && use.deadline_us) {
    // Registered and profiled; until then, the profile applies it.
    m->deadline_us = use.deadline_us;
    m->percentile = use.percentile;
    if (Status s = st.swap->add_model(*m); !s.ok()) {
      spdlog::warn("node {}: cannot apply the SLO of {}: {}", st.config.name, key.to_string(), s.error().message());
    }
    late_scale_model(self, key);
  }
  if (r.ready) remember(self, key, r);
  spdlog::info("node {}: SLO of {} {} {} us at p{}", st.config.name, key.to_string(),
               slo.deadline_us ? "set to" : "cleared; back to", use.deadline_us, use.percentile * 100);
  return true;
}

}  // namespace

router_state::~router_state() {
  const caf::error gone = to_caf(unavailable("the router of node " + config.name + " died; retry"));
  auto fail = [&](auto& promise) {
    if (promise.pending()) promise.deliver(gone);
  };
  for (auto& [id, h] : held) fail(h.promise);
  for (auto& [id, w] : workflows) fail(w->promise);
  for (auto& [key, s] : stages)
    for (auto& p : s.pending) fail(p.promise);
  for (auto& [id, w] : hop_waits)
    if (w.pending) fail(w.pending->promise);
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
    spdlog::warn("node {}: replica {} failed to load: {}", st.config.name, key.to_string(), e.message());
    if (st.instruments) st.instruments->count_load(std::string(to_string(e.code())), seconds);
    if (r.pinned) self->send(st.cache, unpin_atom_v, r.blob_key);
    if (st.swap) late_unload(self, key);
    stage_drop(self, key);
    st.replicas.erase(it);
    forget(self, key);
    for (auto& w : waiters) w.deliver(err);
    return;
  }
  r.ready = true;
  r.info.load_us = static_cast<uint64_t>(seconds * 1e6);
  remember(self, key, r);
  if (st.instruments) {
    st.instruments->count_load("ok", seconds);
    st.instruments->set_replicas(st.ready_count());
  }
  spdlog::info("node {}: replica {} ready on {} ({} from {} in {:.1f} ms)", st.config.name, key.to_string(),
               r.info.device, format_bytes(r.weights_bytes), describe_source(r.info.source, r.info.source_peer), seconds * 1e3);
  for (auto& w : waiters) w.deliver(r.info);
}

namespace {

// Binds to the device with the most room left, trying the others when one is out of memory.
void bind_somewhere(router_pointer self, model_key key, std::shared_ptr<const gpu::Model> model,
                    std::vector<size_t> tried) {
  auto& st = self->state;
  const uint64_t need = model->data_bytes();
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

/// A replica of the whole model, or (with `part`) pipeline stage [first, last) of it under its
/// stage key: only the header and the stage's layers are fetched, the stage cut from them.
caf::result<replica_info> load(router_pointer self, load_replica& req, std::optional<blob_part> part = {}) {
  auto& st = self->state;
  if (req.cache_only && !part) return prefetch(self, req);
  if (part && (part->last_layer <= part->first_layer || req.cache_only)) {
    return to_caf(invalid_argument("stage [" + std::to_string(part->first_layer) + ", " +
                                   std::to_string(part->last_layer) + ") of " + req.model.to_string()));
  }
  const model_key key = part ? stage_key_of(req.model, part->first_layer, part->last_layer) : req.model;
  auto [it, fresh] = st.replicas.try_emplace(key);
  auto& r = it->second;
  if (!fresh) {
    if (r.ready) return r.info;
    auto rp = self->make_response_promise<replica_info>();
    r.waiters.push_back(rp);
    return rp;
  }
  auto rp = self->make_response_promise<replica_info>();
  r.waiters.push_back(rp);
  r.started = self->clock().now();
  r.blob_key = part ? part_key_of(req.blob_key, *part) : req.blob_key;
  r.weights_bytes = part ? part->length() : req.blob_bytes;
  r.slo = req.slo;
  r.info.model = key;
  r.info.node = st.config.name;
  spdlog::info("node {}: loading {} {} ({})", st.config.name, part ? "pipeline stage" : "replica", key.to_string(),
               format_bytes(r.weights_bytes));
  fetch_blob fetch{req.model, req.blob_key, req.blob_bytes, req.sources, part ? 0 : req.transfer_id, req.controller};
  fetch.part = part;
  fetch.max_bytes_per_s = req.max_bytes_per_s;
  if (!part && req.reuse.last_layer > 0 && !req.layers.layer_bytes.empty()) {
    fetch.reuse = req.reuse;
    fetch.layers = req.layers;
  }
  self->request(st.cache, kFetchTimeout, std::move(fetch))
      .then(
          [self, key, part, manifest = std::move(req.manifest_json),
           profile_json = std::move(req.profile_json)](blob_ref& blob) {
            auto it = self->state.replicas.find(key);
            if (it == self->state.replicas.end()) return;
            it->second.info.source = blob.source;
            it->second.info.source_peer = blob.source_peer;
            it->second.info.bytes_fetched = blob.bytes_fetched;
            self->send(self->state.cache, pin_atom_v, it->second.blob_key);
            it->second.pinned = true;
            // Validates everything again: bytes from the network are input like any other.
            auto model = gpu::Model::from_memory(manifest, blob.bytes, "model " + key.to_string());
            if (!model.ok()) return finish_load(self, key, to_caf(model.error()));
            if (!part && !profile_json.empty()) {
              // Optional: a profile that does not describe these bytes scales nothing, and says so.
              auto profile = gpu::parse_profile(profile_json, "profile.json of " + key.to_string());
              Status fits = profile.ok() ? profile->check_matches(**model) : Status(profile.error());
              if (fits.ok()) {
                it->second.profile = std::make_shared<const gpu::ModelProfile>(std::move(*profile));
              } else {
                spdlog::warn("node {}: {}; it is not scaled in bursts", self->state.config.name,
                             fits.error().message());
              }
            }
            if (part) {
              const gpu::LayerRange range{part->first_layer, part->last_layer};
              auto stage = gpu::Model::stage(*model, range);
              if (!stage.ok()) return finish_load(self, key, to_caf(stage.error()));
              router_state::Stage s;
              s.whole = std::move(*model);
              s.range = range;
              for (const auto& in : (*stage)->manifest().inputs) s.inputs.push_back(in.name);
              self->state.stages[key] = std::move(s);
              model = std::move(stage);
            }
            if (self->state.swap) return late_register(self, key, std::move(*model));
            bind_somewhere(self, key, std::move(*model), {});
          },
          [self, key](caf::error& err) { finish_load(self, key, err); });
  return rp;
}

caf::result<bool> unload(router_pointer self, const model_key& key) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return true;
  stage_drop(self, key);
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
    spdlog::info("node {}: replica {} unloaded", st.config.name, key.to_string());
    return true;
  }
  const auto r = it->second;
  st.replicas.erase(it);
  forget(self, key);
  st.devices[r.device].bound_bytes -= std::min(st.devices[r.device].bound_bytes, r.weights_bytes);
  self->send(st.cache, unpin_atom_v, r.blob_key);
  if (st.instruments) st.instruments->set_replicas(st.ready_count());
  spdlog::info("node {}: replica {} unloaded", st.config.name, key.to_string());
  auto rp = self->make_response_promise<bool>();
  self->request(st.devices[r.device].actor, kBindTimeout, unload_atom_v, key)
      .then([rp](bool) mutable { rp.deliver(true); }, [rp](caf::error& err) mutable { rp.deliver(err); });
  return rp;
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
            // Pipeline stages are the manager's to track (it placed them), not replicas of a model.
            for (const auto& [key, replica] : st.replicas)
              if (replica.ready && !st.stages.count(key)) r.replicas.push_back(key);
            rp.deliver(std::move(r));
          },
          [rp](caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

void restart_and_rebind(router_pointer self, uint32_t device, std::vector<model_key> rebinding);

/// A replica the router cannot serve again after a fault: it leaves the node (and its ledger),
/// reported. The manager learns it from the node's next report; the gateways from its refusals.
void lose_replica(router_pointer self, const model_key& key, const std::string& why) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return;
  spdlog::error("node {}: replica {} is lost: {}", st.config.name, key.to_string(), why);
  if (it->second.pinned) self->send(st.cache, unpin_atom_v, it->second.blob_key);
  auto waiters = std::move(it->second.waiters);  // loads asked while it was being bound again
  st.replicas.erase(it);
  forget(self, key);
  if (st.instruments) {
    st.instruments->count_unrestored("replica");
    st.instruments->set_replicas(st.ready_count());
  }
  const auto err =
      to_caf(unavailable("replica " + key.to_string() + " on node " + st.config.name + " is lost: " + why));
  for (auto& w : waiters) w.deliver(err);
}

/// Pinned binding: binds a replica again on its (restarted) device from the host copy it kept.
void rebind(router_pointer self, const model_key& key, size_t device) {
  auto it = self->state.replicas.find(key);
  if (it == self->state.replicas.end() || !it->second.model) return lose_replica(self, key, "no host copy");
  self->request(self->state.devices[device].actor, kBindTimeout, bind_model{key, it->second.model})
      .then(
          [self, key, device](const std::string&) {
            auto& st = self->state;
            auto it = st.replicas.find(key);
            if (it == st.replicas.end()) return;  // unloaded meanwhile (the unload freed the device)
            it->second.ready = true;
            st.devices[device].bound_bytes += it->second.weights_bytes;
            if (st.instruments) st.instruments->set_replicas(st.ready_count());
            spdlog::info("node {}: replica {} bound again on {} from host memory", st.config.name, key.to_string(),
                         st.devices[device].name);
            // A load of it asked meanwhile (the manager placing it again, having counted it lost)
            // waits on it like on a first load: it is answered now.
            for (auto& w : std::exchange(it->second.waiters, {})) w.deliver(it->second.info);
          },
          [self, key](caf::error& err) {
            lose_replica(self, key, "binding it again failed: " + from_caf(err).message());
          });
}

/// The node's supervisor replaced executor `x.device`, which died: the replacement has no engine
/// yet. Late binding restarts it like a faulted one; pinned binding restarts it and binds the
/// replicas it held again from host memory (they refuse requests meanwhile: the gateways retry).
void replace_executor(router_pointer self, executor_replaced& x) {
  auto& st = self->state;
  if (x.device >= st.devices.size()) return;
  auto& d = st.devices[x.device];
  d.actor = std::move(x.actor);
  if (st.swap) {
    d.restarting = false;  // a restart sent to the dead executor is moot
    st.swap->device_down(x.device);
    return restart_device(self, x.device, "died (its supervisor replaced it)");
  }
  d.bound_bytes = 0;
  std::vector<model_key> rebinding;
  for (auto& [key, r] : st.replicas) {
    if (r.ready && r.device == x.device && !st.stages.count(key)) {
      r.ready = false;
      rebinding.push_back(key);
    }
  }
  spdlog::warn("node {}: executor {} died; restarting it and binding its {} replica(s) again from host memory",
               st.config.name, d.name, rebinding.size());
  restart_and_rebind(self, x.device, std::move(rebinding));
}

/// A restored router checks each executor: one without an engine (its restart, asked by the dead
/// router, still runs or failed) is restarted; with pinned binding, the replicas the ledger puts on
/// it that it does not hold (it was restarted meanwhile) are bound again.
void verify_bound(router_pointer self, uint32_t device) {
  self->request(self->state.devices[device].actor, std::chrono::seconds(10), status_atom_v)
      .then(
          [self, device](executor_status& status) {
            auto& st = self->state;
            if (st.swap) {  // late binding: an executor without an engine is restarted (or its restart joined)
              if (status.pool_capacity == 0) {
                st.swap->device_down(device);
                restart_device(self, device, "has no engine (its restart was asked by a router that died)");
              }
              return;
            }
            std::vector<model_key> missing;
            for (auto& [key, r] : st.replicas) {
              if (r.device != device || st.stages.count(key) || !r.ready) continue;
              if (std::find(status.bound.begin(), status.bound.end(), key) != status.bound.end()) continue;
              r.ready = false;
              st.devices[device].bound_bytes -= std::min(st.devices[device].bound_bytes, r.weights_bytes);
              missing.push_back(key);
            }
            if (missing.empty()) return;
            spdlog::warn("node {}: executor {} lacks {} replica(s) the ledger has; binding them again", st.config.name,
                         st.devices[device].name, missing.size());
            if (status.pool_capacity == 0) return restart_and_rebind(self, device, std::move(missing));  // no engine
            for (const auto& key : missing) rebind(self, key, device);
          },
          [](caf::error&) {});
}

/// Pinned binding: restarts executor `device` (or joins its restart in progress) and binds
/// `rebinding` again from host memory.
void restart_and_rebind(router_pointer self, uint32_t device, std::vector<model_key> rebinding) {
  auto& st = self->state;
  if (st.instruments) st.instruments->set_replicas(st.ready_count());
  self->request(st.devices[device].actor, kBindTimeout, restart_atom_v)
      .then(
          [self, device, rebinding](device_report&) {
            for (const auto& key : rebinding) rebind(self, key, device);
          },
          [self, rebinding](caf::error& err) {
            for (const auto& key : rebinding)
              lose_replica(self, key, "its executor could not be restarted: " + from_caf(err).message());
          });
}

/// A router spawned over a ledger with entries (its predecessor died): serves those replicas again.
void restore(router_pointer self) {
  auto& st = self->state;
  if (!st.config.ledger) return;
  auto entries = st.config.ledger->entries();
  if (entries.empty()) return;
  if (st.swap) {
    // The executors may hold device copies this router knows nothing of: they drop them before any
    // request of this router reaches them (one sender's messages arrive in order).
    for (auto& d : st.devices)
      self->request(d.actor, kBindTimeout, forget_atom_v).then([](bool) {}, [](caf::error&) {});
  }
  size_t restored = 0;
  std::vector<std::string> lost;
  for (auto& e : entries) {
    auto drop = [&](const std::string& why) {
      self->send(st.cache, unpin_atom_v, e.blob_key);
      st.config.ledger->erase(e.key);
      lost.push_back(e.key.to_string() + " (" + why + ")");
    };
    if (e.stage) {
      drop("a pipeline stage: its upstream's hand-offs died with the router");
      continue;
    }
    if (!e.model || e.device >= st.devices.size()) {
      drop("no host copy");
      continue;
    }
    if (st.swap) {
      if (!e.late) {
        drop("no profile");
        continue;
      }
      if (Status added = st.swap->add_model(*e.late); !added.ok()) {
        drop(added.error().message());
        continue;
      }
      st.keys[e.key.to_string()] = e.key;
    } else {
      st.devices[e.device].bound_bytes += e.weights_bytes;
    }
    auto& r = st.replicas[e.key];
    r.ready = true;
    r.pinned = true;  // the cache still holds the predecessor's pin, now this router's
    r.device = e.device;
    r.weights_bytes = e.weights_bytes;
    r.blob_key = e.blob_key;
    r.info = e.info;
    r.model = e.model;
    r.slo = e.slo;
    r.own = e.own;
    r.started = self->clock().now();
    ++restored;
  }
  if (st.instruments) {
    st.instruments->set_replicas(st.ready_count());
    for (size_t i = 0; i < lost.size(); ++i) st.instruments->count_unrestored("replica");
  }
  for (uint32_t d = 0; d < st.devices.size(); ++d) verify_bound(self, d);
  std::string lost_text;
  for (const auto& l : lost) lost_text += (lost_text.empty() ? "" : ", ") + l;
  spdlog::warn("node {}: router restarted: {} replica(s) restored from its ledger{}", st.config.name, restored,
               lost.empty() ? "" : "; not restored: " + lost_text);
}

node_router_actor::behavior_type router_behavior(router_pointer self, NodeRouterConfig config,
                                                 std::vector<gpu_executor_actor> executors,
                                                 std::vector<device_report> devices, model_cache_actor cache,
                                                 NodeInstruments* instruments) {
  auto& st = self->state;
  st.epoch = self->clock().now();
  st.config = std::move(config);
  for (size_t i = 0; i < executors.size(); ++i) {
    st.devices.push_back({executors[i], devices[i].name, devices[i].memory_bytes, 0});
  }
  st.cache = std::move(cache);
  st.instruments = instruments;
  if (st.instruments) st.instruments->set_replicas(0);
  late_start(self);
  restore(self);
  self->set_down_handler([self](caf::down_msg& down) { stage_downstream_down(self, down.source); });
  return {
      // -- warm path -----------------------------------------------------------------------------
      [self](workflow_request& req) -> caf::result<infer_reply> { return workflow_take(self, req); },
      [self](infer_request& req) -> caf::result<infer_reply> {
        if (self->state.swap) return late_infer(self, req);
        auto it = self->state.replicas.find(req.model);
        if (it == self->state.replicas.end() || !it->second.ready) {
          return to_caf(
              unavailable("node " + self->state.config.name + " has no ready replica of " + req.model.to_string()));
        }
        return self->delegate(self->state.devices[it->second.device].actor, std::move(req));
      },
      // -- replicas ------------------------------------------------------------------------------
      [self](load_replica& req) -> caf::result<replica_info> { return load(self, req); },
      [self](load_stage& req) -> caf::result<replica_info> { return load(self, req.load, std::move(req.part)); },
      [self](stage_request& req) -> caf::result<infer_reply> { return stage_take(self, req); },
      [self](credit_atom, const model_key& stage, uint64_t seq) { stage_credit(self, stage, seq); },
      [self](evict_atom, const model_key& key) -> caf::result<bool> {
        if (self->state.replicas.count(key)) return false;
        return self->delegate(self->state.cache, evict_atom_v, blob_key_of(key));
      },
      [self](unload_atom, const model_key& key) -> caf::result<bool> { return unload(self, key); },
      // -- reporting -----------------------------------------------------------------------------
      [self](report_atom) -> caf::result<node_report> { return report(self); },
      [self](metrics_atom) -> metrics_snapshot {
        return self->state.instruments ? self->state.instruments->snapshot() : metrics_snapshot{};
      },
      [self](scale_atom) {
        const auto& st = self->state;
        load_report r;
        r.reporter = "node:" + st.config.name;
        for (const auto& [key, replica] : st.replicas) {
          if (!replica.ready || st.stages.count(key)) continue;
          model_load m;
          m.model = key;
          m.queued = st.swap ? static_cast<uint32_t>(st.swap->queue().queued(key.to_string())) : 0;
          r.models.push_back(std::move(m));
        }
        return r;
      },
      [self](tick_atom) { late_tick(self); },
      [self](ping_atom) {
        std::vector<model_key> ready;
        for (const auto& [key, replica] : self->state.replicas)
          if (replica.ready && !self->state.stages.count(key)) ready.push_back(key);
        return replicas_fingerprint(ready);
      },
      [self](slo_atom, const model_key& key, const slo_setting& slo) { return set_slo(self, key, slo); },
      [self](restart_atom, uint32_t device) {
        if (self->state.swap && device < self->state.devices.size()) restart_device(self, device);
      },
      [self](replace_atom, executor_replaced& x) { replace_executor(self, x); },
      [self](replace_atom, cache_replaced& x) {
        auto& st = self->state;
        st.cache = std::move(x.cache);
        size_t pinned = 0;
        for (const auto& [key, r] : st.replicas) {
          if (!r.pinned) continue;
          self->send(st.cache, pin_atom_v, r.blob_key);
          ++pinned;
        }
        spdlog::warn("node {}: its model cache was replaced; {} replica(s) pinned their bytes again", st.config.name,
                     pinned);
      },
      [](fault_atom, const fault_command&) -> caf::result<std::string> {
        return to_caf(unsupported("fault commands go to the node's supervisor, which stands in front of its router"));
      },
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
