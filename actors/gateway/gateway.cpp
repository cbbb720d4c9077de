// gateway: routes requests to warm replicas, holds requests for cold models, retries once when a
// node is lost (see gateway_interface.hpp).
#include "actors/gateway/gateway.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <set>

#include "actors/cluster_manager_interface.hpp"
#include "actors/errors.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/model_catalog.hpp"
#include "actors/gateway/routing_view.hpp"
#include "actors/offload.hpp"

namespace ember {

namespace {

/// A request is re-sent at most this many times (its node lost, its queue full).
constexpr int kMaxAttempts = 3;
/// After the manager could not place a model, ask again this often while requests wait.
constexpr auto kEnsureRetry = std::chrono::milliseconds(500);
/// Metrics scrapes wait this long for each node.
constexpr auto kScrapeTimeout = std::chrono::seconds(2);

struct Pending {
  uint64_t id = 0;
  model_key key;  // resolved: a real version
  infer_request request;
  caf::typed_response_promise<infer_reply> promise;
  caf::actor_clock::time_point arrived;  // the actor clock's time (deterministic tests move it)
  int attempts = 0;
  bool cold = false;  // counted once as a cold start
};

struct gateway_state {
  static inline const char* name = "ember.gateway";

  GatewayConfig config;
  cluster_manager_actor manager;
  std::shared_ptr<RoutingView> view;
  GatewayInstruments* instruments = nullptr;
  /// Runs the merging and rendering of /metrics (owned by the process).
  WorkQueue* metrics_queue = nullptr;

  std::map<model_key, routing_entry> table;
  /// The metadata bodies of the versions in `table`, built once per version.
  ModelCatalog catalog;
  std::vector<replica_ref> members;
  uint64_t epoch = 0;
  /// Requests routed to a replica, by request id, with the router they went to.
  struct Routed {
    std::shared_ptr<Pending> pending;
    caf::actor_addr router;
    uint64_t node_id = 0;
  };
  std::map<uint64_t, Routed> routed;
  std::map<uint64_t, uint32_t> outstanding;  // node id -> requests in flight there
  /// Requests waiting for a replica, per model version, in arrival order.
  std::map<model_key, std::deque<std::shared_ptr<Pending>>> held;
  std::set<model_key> ensuring;
  std::set<caf::actor_addr> monitored;
  /// Requests that arrived before the first routing table (just after start), in arrival order.
  std::vector<std::shared_ptr<Pending>> unrouted;
  bool subscribed = false;
  uint64_t next_id = 1;

  size_t held_count() const {
    size_t n = 0;
    for (const auto& [k, q] : held) n += q.size();
    return n;
  }
};

using gateway_pointer = gateway_actor::stateful_pointer<gateway_state>;

// -- routing table ----------------------------------------------------------------------------

void publish_view(gateway_pointer self) {
  auto& st = self->state;
  auto snap = std::make_shared<RoutingSnapshot>();
  snap->subscribed = true;
  for (const auto& [key, e] : st.table) {
    ModelView v;
    v.state = e.state;
    v.ready = !e.replicas.empty();
    v.metadata_json = st.catalog.metadata(key);  // built again only when this version's metadata changed
    snap->models[key.name][key.version] = std::move(v);
  }
  st.view->publish(std::move(snap));
}

void dispatch(gateway_pointer self, std::shared_ptr<Pending> p);
void route(gateway_pointer self, std::shared_ptr<Pending> p);

void finish(gateway_pointer self, const Pending& p, const std::string& outcome) {
  if (!self->state.instruments) return;
  const auto elapsed = self->clock().now() - p.arrived;
  self->state.instruments->count_request(p.key, outcome, std::chrono::duration<double>(elapsed).count());
}

void fail(gateway_pointer self, Pending& p, const Error& e) {
  finish(self, p, std::string(to_string(e.code())));
  p.promise.deliver(to_caf(e));
}

/// Dispatches every request held for `key` once it has a ready replica.
void release_held(gateway_pointer self, const model_key& key) {
  auto& st = self->state;
  auto it = st.held.find(key);
  auto entry = st.table.find(key);
  if (it == st.held.end() || entry == st.table.end() || entry->second.replicas.empty()) return;
  auto queue = std::move(it->second);
  st.held.erase(it);
  if (st.instruments) st.instruments->set_held(st.held_count());
  for (auto& p : queue) dispatch(self, p);
}

void watch(gateway_pointer self, const node_router_actor& router) {
  if (router && self->state.monitored.insert(router.address()).second) self->monitor(router);
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
    for (const auto& r : e.replicas) watch(self, r.router);
    touched.push_back(e.state.model);
    st.catalog.put(e.state.model, e.manifest_json);
    st.table[e.state.model] = std::move(e);
  }
  for (const auto& key : u.removed) {
    st.table.erase(key);
    st.catalog.remove(key);
  }
  st.members = std::move(u.members);
  for (const auto& m : st.members) watch(self, m.router);
  st.epoch = u.epoch;
  publish_view(self);
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

// -- cold path --------------------------------------------------------------------------------

void ensure(gateway_pointer self, const model_key& key) {
  auto& st = self->state;
  if (!st.ensuring.insert(key).second) return;
  self->request(st.manager, std::chrono::microseconds(st.config.cold_start_timeout_us), ensure_atom_v, key)
      .then(
          [self, key](model_state&) {
            // The routing update that carries the replica follows this answer from the manager.
            self->state.ensuring.erase(key);
          },
          [self, key](caf::error& err) {
            auto& st = self->state;
            st.ensuring.erase(key);
            const Error e = from_caf(err);
            if (retryable(e.code())) {
              // Maybe no node has joined yet, or all are full: ask again while requests still wait.
              if (st.held.count(key)) self->delayed_send(self, kEnsureRetry, ensure_atom_v, key);
              return;
            }
            auto it = st.held.find(key);
            if (it == st.held.end()) return;
            auto queue = std::move(it->second);
            st.held.erase(it);
            for (auto& p : queue) fail(self, *p, e);
          });
}

void hold(gateway_pointer self, std::shared_ptr<Pending> p) {
  auto& st = self->state;
  auto& queue = st.held[p->key];
  if (queue.size() >= st.config.max_pending) {
    return fail(self, *p,
                unavailable("too many requests (" + std::to_string(queue.size()) + ") wait for model " +
                            p->key.to_string() + " to load"));
  }
  if (!p->cold) {
    p->cold = true;
    if (st.instruments) st.instruments->count_cold_start(p->key);
  }
  queue.push_back(p);
  if (st.instruments) st.instruments->set_held(st.held_count());
  // The request's own cold-start budget starts when it is first held.
  self->delayed_send(self, std::chrono::microseconds(st.config.cold_start_timeout_us), expire_atom_v, p->id);
  ensure(self, p->key);
}

void expire(gateway_pointer self, uint64_t id) {
  auto& st = self->state;
  if (auto u = std::find_if(st.unrouted.begin(), st.unrouted.end(), [&](const auto& x) { return x->id == id; });
      u != st.unrouted.end()) {
    auto pending = *u;
    st.unrouted.erase(u);
    return fail(self, *pending, unavailable("the gateway got no routing table from the manager in time; retry"));
  }
  for (auto it = st.held.begin(); it != st.held.end(); ++it) {
    auto& q = it->second;
    auto p = std::find_if(q.begin(), q.end(), [&](const auto& x) { return x->id == id; });
    if (p == q.end()) continue;
    auto pending = *p;
    q.erase(p);
    if (q.empty()) st.held.erase(it);
    if (st.instruments) st.instruments->set_held(st.held_count());
    fail(self, *pending,
         unavailable("no replica of model " + pending->key.to_string() + " became ready within " +
                     std::to_string(st.config.cold_start_timeout_us / 1000) + " ms; retry later"));
    return;
  }
}

// -- warm path --------------------------------------------------------------------------------

/// The ready replica with the fewest requests in flight from this gateway.
const replica_ref* choose_replica(const gateway_state& st, const routing_entry& e) {
  const replica_ref* best = nullptr;
  uint32_t best_load = 0;
  for (const auto& r : e.replicas) {
    auto it = st.outstanding.find(r.node_id);
    const uint32_t load = it == st.outstanding.end() ? 0 : it->second;
    if (!best || load < best_load) {
      best = &r;
      best_load = load;
    }
  }
  return best;
}

void on_routed_failure(gateway_pointer self, uint64_t id, const caf::error& err);

void dispatch(gateway_pointer self, std::shared_ptr<Pending> p) {
  auto& st = self->state;
  auto entry = st.table.find(p->key);
  if (entry == st.table.end()) return fail(self, *p, not_found("unknown model " + p->key.to_string()));
  const replica_ref* replica = choose_replica(st, entry->second);
  if (!replica) return hold(self, std::move(p));
  ++p->attempts;
  const uint64_t id = p->id;
  st.routed[id] = {p, replica->router.address(), replica->node_id};
  ++st.outstanding[replica->node_id];
  self->request(replica->router, std::chrono::microseconds(st.config.request_timeout_us), p->request)
      .then(
          [self, id](infer_reply& reply) {
            auto& st = self->state;
            auto it = st.routed.find(id);
            if (it == st.routed.end()) return;  // re-sent elsewhere after its node was lost
            auto routed = std::move(it->second);
            st.routed.erase(it);
            --st.outstanding[routed.node_id];
            finish(self, *routed.pending, "success");
            reply.model = routed.pending->key;
            routed.pending->promise.deliver(std::move(reply));
          },
          [self, id](caf::error& err) { on_routed_failure(self, id, err); });
}

void on_routed_failure(gateway_pointer self, uint64_t id, const caf::error& err) {
  auto& st = self->state;
  auto it = st.routed.find(id);
  if (it == st.routed.end()) return;
  auto routed = std::move(it->second);
  st.routed.erase(it);
  --st.outstanding[routed.node_id];
  const Error e = from_caf(err);
  auto& p = *routed.pending;
  if (e.code() == ErrorCode::unavailable && p.attempts < kMaxAttempts) {
    // The node refused (its queue is full, or its replica is gone): try another replica.
    if (st.instruments) st.instruments->count_retry(p.key);
    return dispatch(self, routed.pending);
  }
  fail(self, p, e);
}

/// A node (router) died: its replicas leave the local table at once, without waiting for the
/// manager, and the requests in flight there are re-sent (or held until a replica is re-placed).
void node_down(gateway_pointer self, const caf::actor_addr& addr) {
  auto& st = self->state;
  st.monitored.erase(addr);
  std::set<model_key> touched;
  for (auto& [key, e] : st.table) {
    auto before = e.replicas.size();
    e.replicas.erase(std::remove_if(e.replicas.begin(), e.replicas.end(),
                                    [&](const replica_ref& r) { return r.router.address() == addr; }),
                     e.replicas.end());
    if (e.replicas.size() != before) touched.insert(key);
  }
  st.members.erase(std::remove_if(st.members.begin(), st.members.end(),
                                  [&](const replica_ref& r) { return r.router.address() == addr; }),
                   st.members.end());
  std::vector<std::shared_ptr<Pending>> resend;
  for (auto it = st.routed.begin(); it != st.routed.end();) {
    if (it->second.router == addr) {
      resend.push_back(it->second.pending);
      it = st.routed.erase(it);
    } else {
      ++it;
    }
  }
  if (!touched.empty() || !resend.empty()) {
    spdlog::warn("gateway: a node went down; {} model(s) lost a replica, {} request(s) re-sent", touched.size(),
                 resend.size());
  }
  publish_view(self);
  for (auto& p : resend) {
    if (p->attempts >= kMaxAttempts) {
      fail(self, *p,
           unavailable("the node serving the request was lost (" + std::to_string(p->attempts) + " attempts); retry"));
      continue;
    }
    if (st.instruments) st.instruments->count_retry(p->key);
    dispatch(self, p);
  }
}

/// Resolves the request's model and version against the table and sends it on its way.
void route(gateway_pointer self, std::shared_ptr<Pending> p) {
  auto& st = self->state;
  model_key key = p->request.model;
  if (key.version == 0) {  // the highest registered version
    auto it = st.table.lower_bound({key.name, UINT32_MAX});
    if (it != st.table.begin()) {
      --it;
      if (it->first.name == key.name) key.version = it->first.version;
    }
  }
  p->key = key;
  auto entry = st.table.find(key);
  if (entry == st.table.end()) {
    const auto& asked = p->request.model;
    return fail(self, *p,
                not_found("unknown model '" + asked.name + "'" +
                          (asked.version ? " version " + std::to_string(asked.version) : std::string())));
  }
  const model_state& state = entry->second.state;
  if (state.explicitly_unloaded) {
    return fail(self, *p,
                invalid_argument("model " + key.to_string() + " is unloaded; load it with POST /v2/repository/models/" +
                                 key.name + "/load"));
  }
  if (state.state == ModelReadiness::failed) {
    return fail(self, *p, invalid_argument("model " + key.to_string() + " cannot load: " + state.reason));
  }
  p->request.model = key;
  dispatch(self, std::move(p));
}

caf::result<infer_reply> infer(gateway_pointer self, infer_request& req) {
  auto& st = self->state;
  auto p = std::make_shared<Pending>();
  p->id = st.next_id++;
  p->key = req.model;
  p->request = std::move(req);
  p->promise = self->make_response_promise<infer_reply>();
  p->arrived = self->clock().now();
  auto rp = p->promise;
  if (!st.subscribed) {
    // Just started: the manager's table is on its way. Hold the request (bounded) until it comes.
    if (st.unrouted.size() >= st.config.max_pending) {
      fail(self, *p, unavailable("the gateway is starting and has no routing table yet"));
      return rp;
    }
    st.unrouted.push_back(p);
    self->delayed_send(self, std::chrono::microseconds(st.config.cold_start_timeout_us), expire_atom_v, p->id);
    return rp;
  }
  route(self, std::move(p));
  return rp;
}

// -- metrics ----------------------------------------------------------------------------------

/// Collects every node's snapshot on the actor (one request each; the answers are moved, never
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
  c->waiting = st.members.size() + 1;
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
  auto rp = c->promise;
  arrived();
  return rp;
}

gateway_actor::behavior_type gateway_behavior(gateway_pointer self, GatewayConfig config, caf::actor manager,
                                              std::shared_ptr<RoutingView> view, GatewayInstruments* instruments,
                                              WorkQueue* metrics_queue) {
  auto& st = self->state;
  st.config = config;
  st.manager = caf::actor_cast<cluster_manager_actor>(manager);
  st.view = std::move(view);
  st.instruments = instruments;
  st.metrics_queue = metrics_queue;
  self->set_down_handler([self](caf::down_msg& msg) { node_down(self, msg.source); });
  self->request(st.manager, std::chrono::seconds(30), subscribe_atom_v, caf::actor_cast<gateway_actor>(self))
      .then(
          [self](routing_update& u) { apply_update(self, u); },
          [](caf::error& err) { spdlog::error("gateway: cannot subscribe to the manager: {}", caf::to_string(err)); });
  return {
      [self](infer_request& req) -> caf::result<infer_reply> { return infer(self, req); },
      [self](routing_update& u) {
        if (u.epoch <= self->state.epoch) return;  // stale or duplicate
        apply_update(self, u);
      },
      [self](metrics_atom) -> caf::result<std::string> { return scrape(self); },
      [self](load_atom, model_command& cmd) -> caf::result<model_state> {
        return self->delegate(self->state.manager, load_atom_v, std::move(cmd));
      },
      [self](distribute_atom, distribute_request& req) -> caf::result<distribute_result> {
        return self->delegate(self->state.manager, distribute_atom_v, std::move(req));
      },
      [self](evict_atom, distribute_request& req) -> caf::result<distribute_result> {
        return self->delegate(self->state.manager, evict_atom_v, std::move(req));
      },
      [self](unload_atom, model_command& cmd) -> caf::result<model_state> {
        return self->delegate(self->state.manager, unload_atom_v, std::move(cmd));
      },
      [self](index_atom) -> caf::result<std::vector<model_state>> {
        return self->delegate(self->state.manager, index_atom_v);
      },
      [self](expire_atom, uint64_t id) { expire(self, id); },
      [self](ensure_atom, const model_key& key) {
        if (self->state.held.count(key)) ensure(self, key);
      },
      resume_offloaded(),
  };
}

}  // namespace

gateway_actor spawn_gateway(caf::actor_system& sys, GatewayConfig config, caf::actor manager,
                            std::shared_ptr<RoutingView> view, GatewayInstruments* instruments,
                            WorkQueue& metrics_queue) {
  return sys.spawn(gateway_behavior, config, std::move(manager), std::move(view), instruments, &metrics_queue);
}

}  // namespace ember
