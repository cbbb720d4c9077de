// gateway: routes requests to warm replicas, holds requests for cold models, retries once when a
// node is lost (see gateway_interface.hpp). This file: the routing table, /metrics and the
// behaviour; a request's way is in gateway_requests.cpp; the state in gateway_state.hpp.
#include "actors/gateway/gateway.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>

#include "actors/actor_system.hpp"
#include "actors/errors.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/gateway_state.hpp"
#include "actors/offload.hpp"

namespace ember {

namespace gateway_impl {

// -- routing table ----------------------------------------------------------------------------

void watch(gateway_pointer self, const node_router_actor& router) {
  if (router && self->state.monitored.insert(router.address()).second) self->monitor(router);
}

void publish_view(gateway_pointer self) {
  auto& st = self->state;
  auto snap = std::make_shared<RoutingSnapshot>();
  snap->subscribed = true;
  for (const auto& [key, e] : st.table) {
    ModelView v;
    v.state = e.state;
    v.ready = !e.replicas.empty();
    v.replicas = e.replicas;
    v.metadata_json = st.catalog.metadata(key);  // built again only when this version's metadata changed
    v.signature = st.catalog.signature(key);
    v.generation = st.catalog.generation(key);
    snap->models[key.name][key.version] = std::move(v);
  }
  snap->workflows = st.workflows;
  st.view->publish(std::move(snap));
}

}  // namespace gateway_impl

namespace {

using namespace gateway_impl;

/// What repository commands get while no manager is reachable.
Error no_manager() { return unavailable("the cluster manager is unreachable; retry when it is back"); }

/// Asks the manager and answers with its reply once that reply reaches this gateway. A delegate
/// would let the reply pass the routing update the manager sent just before it: a client told
/// "unloaded" could then still be routed to the replica by this gateway's older view.
template <class Reply, class Atom, class Request>
caf::result<Reply> relay(gateway_pointer self, Atom atom, Request req) {
  if (!self->state.manager) return to_caf(no_manager());
  auto rp = self->make_response_promise<Reply>();
  self->request(self->state.manager, caf::infinite, atom, std::move(req))
      .then([rp](Reply& reply) mutable { rp.deliver(std::move(reply)); },
            [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

/// Connects to the member nodes' routers directly (standalone gateways only; see gateway.hpp).
void dial_members(gateway_pointer self) {
  auto& st = self->state;
  std::vector<peer_endpoint> nodes;
  for (const auto& m : st.members) nodes.push_back({m.node, m.control});
  st.dialing.dials.want(nodes);
  dial_peers(self, [](gateway_pointer s) -> PeerDialing& { return s->state.dialing; });
}

void apply_update(gateway_pointer self, routing_update& u) {
  auto& st = self->state;
  if (u.full) {
    std::set<model_key> kept;
    for (const auto& e : u.entries) kept.insert(e.state.model);
    for (const auto& [key, e] : st.table) {
      if (!kept.count(key)) st.catalog.remove(key);
    }
    st.table.clear();
  }
  std::vector<model_key> touched;
  for (auto& e : u.entries) {
    for (const auto& r : e.replicas) {
      watch(self, r.router);
      watch(self, r.for_requests());
    }
    // A pipeline's stages are served by their nodes' stage hosts: one that goes down is a lost stage.
    for (const auto& h : e.pipeline) watch(self, caf::actor_cast<node_router_actor>(h.router));
    touched.push_back(e.state.model);
    st.catalog.put(e.state.model, e.manifest_json);
    st.table[e.state.model] = std::move(e);
  }
  for (const auto& key : u.removed) {
    st.table.erase(key);
    st.catalog.remove(key);
  }
  if (u.workflows_set) {
    std::map<std::string, std::shared_ptr<const WorkflowView>> next;
    for (auto& w : u.workflows) {
      const std::string name = w.name;
      auto held = st.workflows.find(name);
      next[name] =
          held != st.workflows.end() && held->second->entry == w ? held->second : WorkflowView::of(std::move(w));
    }
    st.workflows = std::move(next);
  }
  // Members that left: the manager lost them (a process that died or stopped answering, whose
  // connection to this gateway may live on), or a restarted manager's table lacks them.
  std::vector<replica_ref> left;
  for (const auto& m : st.members) {
    const bool stays = std::any_of(u.members.begin(), u.members.end(),
                                   [&](const replica_ref& n) { return n.router.address() == m.router.address(); });
    if (!stays) left.push_back(m);
  }
  st.members = std::move(u.members);
  for (const auto& m : left) st.dialing.dials.forget(m.node);  // dialed again when it is back: a new connection
  for (const auto& m : st.members) watch(self, m.router);
  dial_members(self);
  st.report_interval_us = u.report_interval_us;
  if (st.report_interval_us > 0 && !st.report_timer) {
    st.report_timer = true;
    self->delayed_send(self, std::chrono::microseconds(st.report_interval_us), scale_atom_v);
  }
  st.epoch = u.epoch;
  publish_view(self);
  for (const auto& m : left) member_left(self, m);
  if (!st.subscribed) {
    st.subscribed = true;
    auto early = std::move(st.unrouted);
    for (auto& p : early) route(self, p);
  }
  for (const auto& key : touched) {
    const auto& e = st.table[key];
    if (e.state.state == ModelReadiness::failed || e.state.explicitly_unloaded) {
      // Nothing will come up: fail the requests that wait for it.
      auto it = st.held.find(key);
      if (it == st.held.end()) continue;
      auto queue = std::move(it->second);
      st.held.erase(it);
      const Error err = e.state.explicitly_unloaded
                            ? invalid_argument("model " + key.to_string() + " was unloaded")
                            : invalid_argument("model " + key.to_string() + " cannot load: " + e.state.reason);
      for (auto& p : queue) fail(self, *p, err);
      continue;
    }
    release_held(self, key);
  }
  for (const auto& key : u.removed) {
    auto it = st.held.find(key);
    if (it == st.held.end()) continue;
    for (auto& p : it->second) fail(self, *p, not_found("model " + key.to_string() + " was removed"));
    st.held.erase(it);
  }
}

// -- metrics ----------------------------------------------------------------------------------

/// Collects every node's snapshot and the manager's on the actor (one request each; the answers are moved, never
/// read), then merges and renders them with the gateway's own on the metrics queue: the actor's
/// work per scrape is proportional to the number of nodes, not to the size of their metrics.
caf::result<std::string> scrape(gateway_pointer self) {
  auto& st = self->state;
  struct Collector {
    std::vector<metrics::NodeMetrics> nodes;
    size_t waiting = 0;
    caf::typed_response_promise<std::string> promise;
  };
  auto c = std::make_shared<Collector>();
  c->promise = self->make_response_promise<std::string>();
  c->waiting = st.members.size() + 2;  // the nodes, the manager and this gateway
  auto arrived = [self, c] {
    if (--c->waiting > 0) return;
    auto* instruments = self->state.instruments;
    const bool taken = offload(
        self, *self->state.metrics_queue,
        [nodes = std::move(c->nodes), instruments]() mutable {
          std::vector<metrics::NodeMetrics> all;
          all.reserve(nodes.size() + 1);
          all.push_back({"gateway", instruments ? instruments->registry().snapshot() : metrics::MetricsSnapshot{}});
          for (auto& n : nodes) all.push_back(std::move(n));
          return metrics::render(metrics::merge_snapshots(all).metrics);
        },
        [promise = c->promise](std::string& text) mutable { promise.deliver(std::move(text)); });
    if (!taken) c->promise.deliver(to_caf(unavailable("too many metrics scrapes are in progress; retry")));
  };
  for (const auto& m : st.members) {
    self->request(m.router, kScrapeTimeout, metrics_atom_v)
        .then(
            [c, arrived, name = m.node](metrics_snapshot& snap) {
              c->nodes.push_back({name, std::move(snap)});
              arrived();
            },
            [arrived](caf::error&) { arrived(); });  // a node that does not answer is left out of this scrape
  }
  if (st.manager) {
    self->request(st.manager, kScrapeTimeout, metrics_atom_v)
        .then(
            [c, arrived](metrics_snapshot& snap) {
              c->nodes.push_back({"manager", std::move(snap)});
              arrived();
            },
            [arrived](caf::error&) { arrived(); });
  } else {
    --c->waiting;  // away: left out of this scrape
  }
  auto rp = c->promise;
  arrived();
  return rp;
}

/// Every report interval: the counters to the manager (nothing when nothing happened).
void report_load(gateway_pointer self) {
  auto& st = self->state;
  st.report_timer = false;
  if (st.report_interval_us == 0) {
    st.load.clear();  // the manager stopped wanting reports: drop what was counted for them
    st.view->direct().drain();
    return;
  }
  auto report = make_load_report(st);
  if (!report.models.empty() && st.manager) self->send(st.manager, std::move(report));
  st.report_timer = true;
  self->delayed_send(self, std::chrono::microseconds(st.report_interval_us), scale_atom_v);
}

/// Subscribes to the routing table through st.manager: the answer is the full table. A gateway
/// that holds one (its manager went away and came back) says so, and the manager answers once the
/// nodes had time to rejoin it; until then this gateway serves from what it has.
void subscribe(gateway_pointer self) {
  auto& st = self->state;
  const cluster_manager_actor manager = st.manager;
  auto answered = [self, manager](routing_update& u) {
    if (self->state.manager != manager) return;  // lost meanwhile: the next one brings its own
    apply_update(self, u);
  };
  auto failed = [](caf::error& err) {
    spdlog::error("gateway: cannot subscribe to the manager: {}", caf::to_string(err));
  };
  const auto timeout = std::chrono::seconds(30) + std::chrono::microseconds(st.config.reconnect_interval_us);
  if (st.subscribed) {
    self->request(manager, timeout, subscribe_atom_v, caf::actor_cast<gateway_actor>(self), st.epoch + 1)
        .then(answered, failed);
  } else {
    self->request(manager, timeout, subscribe_atom_v, caf::actor_cast<gateway_actor>(self)).then(answered, failed);
  }
}

/// The manager's process went away: warm requests go on from the last table; cold ones wait for a
/// manager (their ensure is retried) until their cold-start timeout.
void manager_lost(gateway_pointer self) {
  auto& st = self->state;
  spdlog::warn("gateway: lost the cluster manager; serving warm requests from the last routing table ({} models)",
               st.table.size());
  st.manager = nullptr;
  if (st.instruments) st.instruments->set_manager_connected(false);
  if (!st.dialing.queue) return;  // in the manager's process: the nodes' connections are this process's own
  // A standalone gateway reaches a node it has not dialed (it publishes no router, or the dial
  // failed or is under way) through the manager's process, and that way went with the manager: no
  // answer comes back from there and no down message says so. Until the manager is back, such a
  // node is down for this gateway: its replicas leave the table and its requests are re-sent.
  std::vector<replica_ref> unreachable;
  for (const auto& m : st.members)
    if (!st.dialing.dials.reached(m.node)) unreachable.push_back(m);
  for (const auto& m : unreachable) {
    spdlog::warn("gateway: node {} was reached through the manager's process only; unreachable until the manager is "
                 "back",
                 m.node);
    node_down(self, m.router.address());
  }
}

gateway_actor::behavior_type gateway_behavior(gateway_pointer self, GatewayConfig config, caf::actor manager,
                                              std::shared_ptr<RoutingView> view, GatewayInstruments* instruments,
                                              WorkQueue* metrics_queue, WorkQueue* dial_queue) {
  auto& st = self->state;
  st.dialing.queue = dial_queue;
  st.dialing.retry = std::chrono::microseconds(config.reconnect_interval_us);
  st.dialing.who = "gateway";
  st.dialing.peer_word = "node";
  st.dialing.meanwhile = "its requests go through the manager meanwhile";
  st.config = config;
  st.manager = caf::actor_cast<cluster_manager_actor>(manager);
  st.view = std::move(view);
  st.instruments = instruments;
  st.metrics_queue = metrics_queue;
  st.reporter = "gateway@" + caf::to_string(self->node()) + "#" + std::to_string(self->id());
  self->set_down_handler([self](caf::down_msg& msg) {
    if (self->state.manager && msg.source == self->state.manager.address()) return manager_lost(self);
    node_down(self, msg.source);
  });
  if (st.manager) subscribe(self);  // a standalone gateway's link sends its manager when it reached it
  return {
      [self](infer_request& req) -> caf::result<infer_reply> { return infer(self, req); },
      [self](workflow_request& req) -> caf::result<infer_reply> { return route_workflow(self, req); },
      [self](routing_update& u) {
        if (u.epoch <= self->state.epoch) return;  // stale or duplicate
        apply_update(self, u);
      },
      [self](metrics_atom) -> caf::result<std::string> { return scrape(self); },
      [self](load_atom, model_command& cmd) -> caf::result<model_state> {
        return relay<model_state>(self, load_atom_v, std::move(cmd));
      },
      [self](distribute_atom, distribute_request& req) -> caf::result<distribute_result> {
        return relay<distribute_result>(self, distribute_atom_v, std::move(req));
      },
      [self](evict_atom, distribute_request& req) -> caf::result<distribute_result> {
        return relay<distribute_result>(self, evict_atom_v, std::move(req));
      },
      [self](unload_atom, model_command& cmd) -> caf::result<model_state> {
        return relay<model_state>(self, unload_atom_v, std::move(cmd));
      },
      [self](index_atom) -> caf::result<std::vector<model_state>> {
        if (!self->state.manager) return to_caf(no_manager());
        return self->delegate(self->state.manager, index_atom_v);
      },
      [self](manager_atom, caf::actor& manager) {
        auto& st = self->state;
        if (!manager) return;
        st.manager = caf::actor_cast<cluster_manager_actor>(manager);
        self->monitor(st.manager);
        if (st.instruments) st.instruments->set_manager_connected(true);
        spdlog::info("gateway: reached the cluster manager; subscribing{}",
                     st.subscribed ? " (serving from the last routing table until its table comes)" : "");
        subscribe(self);
      },
      [self](expire_atom, uint64_t id) { expire(self, id); },
      [self](scale_atom) { report_load(self); },
      [self](ensure_atom, const model_key& key) {
        // Its own retry timer: only while requests still wait. Another actor asking (a generation
        // relay waiting for a replica, cluster_generations.hpp, which asks again itself): always.
        if (self->state.held.count(key) || self->current_sender().get() != self->ctrl()) ensure(self, key);
      },
      resume_offloaded(),
  };
}

}  // namespace

gateway_actor spawn_gateway(caf::actor_system& sys, GatewayConfig config, caf::actor manager,
                            std::shared_ptr<RoutingView> view, GatewayInstruments* instruments,
                            WorkQueue& metrics_queue, WorkQueue* dial_queue) {
  return sys.spawn(gateway_behavior, config, std::move(manager), std::move(view), instruments, &metrics_queue,
                   dial_queue);
}

}  // namespace ember
