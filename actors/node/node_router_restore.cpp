// node_router: executors restarted (late binding's, after a fault, backing off as DeviceHealth
// says), what the node's supervisor replaced (an executor, the cache, the stage host), pinned
// replicas bound again from host memory after their executor died, and a router spawned over its
// predecessor's ledger serving its replicas again (see node_supervisor.hpp, replica_ledger.hpp).
#include <spdlog/spdlog.h>

#include <caf/event_based_actor.hpp>
#include <chrono>

#include "actors/errors.hpp"
#include "actors/node/node_router_state.hpp"
#include "actors/node/replica_ledger.hpp"

namespace ember {

namespace {

/// A late-binding executor's restart may take this long (reopening a device).
constexpr auto kRestartTimeout = std::chrono::minutes(1);

/// A restart failed (or the restarted executor did not report): the device stays out of service and
/// is tried again after DeviceHealth's backoff.
void retry_restart_later(router_pointer self, uint32_t device, const caf::error& err) {
  auto& d = self->state.devices[device];
  const auto wait = d.health.failed();
  spdlog::error("node {}: executor {} could not be restarted: {}; it stays out of service, next try in {} s",
                self->state.config.name, d.name, from_caf(err).message(), wait.count());
  self->delayed_send(self, wait, restart_atom_v, device);
}

void restart_and_rebind(router_pointer self, uint32_t device, std::vector<model_key> rebinding);

/// A replica the router cannot serve again after a fault: it leaves the node (and its ledger),
/// reported. The manager learns it from the node's next report; the gateways from its refusals.
void lose_replica(router_pointer self, const model_key& key, const std::string& why) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end()) return;
  spdlog::error("node {}: replica {} is lost: {}", st.config.name, key, why);
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
            spdlog::info("node {}: replica {} bound again on {} from host memory", st.config.name, key,
                         st.devices[device].name);
            // A load of it asked meanwhile (the manager placing it again, having counted it lost)
            // waits on it like on a first load: it is answered now.
            for (auto& w : std::exchange(it->second.waiters, {})) w.deliver(it->second.info);
          },
          [self, key](caf::error& err) {
            lose_replica(self, key, "binding it again failed: " + from_caf(err).message());
          });
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
              if (r.device != device || r.stage || !r.ready) continue;
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

}  // namespace

void restart_device(router_pointer self, uint32_t device, const char* why) {
  auto& st = self->state;
  auto& d = st.devices[device];
  // One restart at a time; a device that is up again needs none (a retry scheduled before it came back).
  if (st.swap->device_is_up(device) || !d.health.begin_restart()) return;
  spdlog::warn("node {}: executor {} {}; restarting it (its models come back from host memory)", st.config.name, d.name,
               d.health.failures() ? "is still out of service" : why);
  self->request(d.actor, kRestartTimeout, restart_atom_v)
      .then(
          [self, device](device_report&) {
            self->request(self->state.devices[device].actor, std::chrono::seconds(10), status_atom_v)
                .then(
                    [self, device](executor_status& status) {
                      self->state.devices[device].health.restarted();
                      self->state.swap->device_up(device, status.pool_capacity);
                      spdlog::info("node {}: executor {} restarted", self->state.config.name, status.device.name);
                      late_pump(self);
                    },
                    [self, device](caf::error& err) { retry_restart_later(self, device, err); });
          },
          [self, device](caf::error& err) { retry_restart_later(self, device, err); });
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
    d.health.replaced();  // a restart sent to the dead executor is moot
    st.swap->device_down(x.device);
    return restart_device(self, x.device, "died (its supervisor replaced it)");
  }
  d.bound_bytes = 0;
  std::vector<model_key> rebinding;
  for (auto& [key, r] : st.replicas) {
    if (r.ready && r.device == x.device && !r.stage) {
      r.ready = false;
      rebinding.push_back(key);
    }
  }
  spdlog::warn("node {}: executor {} died; restarting it and binding its {} replica(s) again from host memory",
               st.config.name, d.name, rebinding.size());
  restart_and_rebind(self, x.device, std::move(rebinding));
}

void replace_cache(router_pointer self, cache_replaced& x) {
  auto& st = self->state;
  st.cache = std::move(x.cache);
  size_t pinned = 0;
  for (const auto& [key, r] : st.replicas) {
    if (!r.pinned) continue;
    self->send(st.cache, pin_atom_v, r.blob_key);
    ++pinned;
  }
  spdlog::warn("node {}: its model cache was replaced; {} replica(s) pinned their bytes again", st.config.name, pinned);
}

/// The stage host died and a fresh one replaces it: the stages handed to the dead one lost their
/// flow (queues, credits, hand-offs); they leave the node as a restarted router's do, and pipelines
/// through them fail as retryable until the manager completes or rebuilds them.
void replace_stages(router_pointer self, stages_replaced& x) {
  auto& st = self->state;
  st.config.stages = std::move(x.host);
  self->send(st.config.stages, stage_router{caf::actor_cast<caf::actor>(self)});
  std::vector<model_key> stages;
  for (const auto& [key, r] : st.replicas)
    if (r.stage) stages.push_back(key);
  for (const auto& key : stages) {
    auto it = st.replicas.find(key);
    if (!it->second.ready) continue;  // still loading: handed to the new host once ready
    if (st.swap) late_unload(self, key);
    if (it->second.pinned) self->send(st.cache, unpin_atom_v, it->second.blob_key);
    if (!st.swap) {
      auto& d = st.devices[it->second.device];
      d.bound_bytes -= std::min(d.bound_bytes, it->second.weights_bytes);
      self->request(d.actor, kBindTimeout, unload_atom_v, key).then([](bool) {}, [](caf::error&) {});
    }
    st.replicas.erase(it);
    forget(self, key);
  }
  spdlog::warn("node {}: its stage host died and was replaced; {} pipeline stage(s) dropped", st.config.name,
               stages.size());
}

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

}  // namespace ember
