// A request's way through the gateway: routed to the least-loaded warm replica, held while a cold
// start runs, re-sent when its node is lost or refuses, failed clearly otherwise (see
// gateway_state.hpp for the lifecycle).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/errors.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/gateway_state.hpp"

namespace ember::gateway_impl {

namespace {

void finish(gateway_pointer self, const Pending& p, const std::string& outcome) {
  if (!self->state.instruments) return;
  const auto elapsed = self->clock().now() - p.arrived;
  self->state.instruments->count_request(p.key, outcome, std::chrono::duration<double>(elapsed).count());
}

void dispatch(gateway_pointer self, std::shared_ptr<Pending> p);

}  // namespace

void fail(gateway_pointer self, Pending& p, const Error& e) {
  finish(self, p, std::string(to_string(e.code())));
  p.promise.deliver(to_caf(e));
}

/// Dispatches every request held for `key` once it has a ready replica.
void release_held(gateway_pointer self, const model_key& key) {
  auto& st = self->state;
  auto it = st.held.find(key);
  auto entry = st.table.find(key);
  if (it == st.held.end() || entry == st.table.end() ||
      (entry->second.replicas.empty() && entry->second.pipeline.empty())) {
    return;
  }
  auto queue = std::move(it->second);
  st.held.erase(it);
  if (st.instruments) st.instruments->set_held(st.held_count());
  for (auto& p : queue) dispatch(self, p);
}

// -- cold path --------------------------------------------------------------------------------

void ensure(gateway_pointer self, const model_key& key) {
  auto& st = self->state;
  if (!st.ensuring.insert(key).second) return;
  if (!st.manager) {
    // No manager to ask (a standalone gateway lost it): ask again while requests still wait.
    st.ensuring.erase(key);
    if (st.held.count(key)) self->delayed_send(self, kEnsureRetry, ensure_atom_v, key);
    return;
  }
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

namespace {

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

}  // namespace

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

namespace {

void on_routed_failure(gateway_pointer self, uint64_t id, const caf::error& err);
void on_routed_reply(gateway_pointer self, uint64_t id, infer_reply reply);
void dispatch_pipeline(gateway_pointer self, std::shared_ptr<Pending> p, const std::vector<pipeline_hop>& hops);
/// The node id that stands for pipelines in the in-flight count (real node ids start at 1).
constexpr uint64_t kPipelineNode = 0;

void dispatch(gateway_pointer self, std::shared_ptr<Pending> p) {
  auto& st = self->state;
  auto entry = st.table.find(p->key);
  if (entry == st.table.end()) return fail(self, *p, not_found("unknown model " + p->key.to_string()));
  // The ready replica with the fewest requests in flight from this process (the gateway's and
  // those its front-end threads sent straight to replicas), counted there at once.
  // A retry leaves out the nodes that refused it, unless no other replica is ready.
  const auto not_refused = [&](const replica_ref& r) {
    return std::find(p->refused.begin(), p->refused.end(), r.node_id) == p->refused.end();
  };
  const replica_ref* replica = st.view->chooser().choose_and_start(entry->second.replicas, not_refused);
  if (!replica) replica = st.view->chooser().choose_and_start(entry->second.replicas);
  if (!replica && !entry->second.pipeline.empty()) return dispatch_pipeline(self, std::move(p), entry->second.pipeline);
  if (!replica) return hold(self, std::move(p));
  ++p->attempts;
  const uint64_t id = p->id;
  st.routed[id] = {p, replica->for_requests().address(), replica->node_id};
  self->request(replica->for_requests(), std::chrono::microseconds(st.config.request_timeout_us), p->request)
      .then([self, id](infer_reply& reply) { on_routed_reply(self, id, std::move(reply)); },
            [self, id](caf::error& err) { on_routed_failure(self, id, err); });
}

/// No full replica yet, a pipeline of stages serves (a partitioned cold start): the request goes to
/// the first stage, whose node answers with the last stage's reply. The first stage's node stands
/// for the pipeline in the bookkeeping (a node that goes down re-sends what was sent there; a
/// later stage that dies answers retryable through the first).
void dispatch_pipeline(gateway_pointer self, std::shared_ptr<Pending> p, const std::vector<pipeline_hop>& hops) {
  auto& st = self->state;
  ++p->attempts;
  const uint64_t id = p->id;
  auto first = caf::actor_cast<stage_host_actor>(hops.front().router);
  std::vector<caf::actor_addr> via;
  for (size_t i = 1; i < hops.size(); ++i) via.push_back(hops[i].router.address());
  st.routed[id] = {p, first.address(), kPipelineNode, std::move(via)};
  st.view->chooser().started(kPipelineNode);
  if (st.instruments) st.instruments->count_pipeline(p->key);
  stage_request req;
  req.request = p->request;
  req.request.model = p->key;
  req.hops = hops;
  self->request(first, std::chrono::microseconds(st.config.request_timeout_us), std::move(req))
      .then([self, id](infer_reply& reply) { on_routed_reply(self, id, std::move(reply)); },
            [self, id](caf::error& err) { on_routed_failure(self, id, err); });
}

void on_routed_reply(gateway_pointer self, uint64_t id, infer_reply reply) {
  auto& st = self->state;
  auto it = st.routed.find(id);
  if (it == st.routed.end()) return;  // re-sent elsewhere after its node was lost
  auto routed = std::move(it->second);
  st.routed.erase(it);
  st.view->chooser().finished(routed.node_id);
  if (st.report_interval_us > 0) {  // the manager wants load reports
    auto& counters = st.load[routed.pending->key];
    ++counters.completions;
    counters.busy_us += reply.compute_us;
  }
  finish(self, *routed.pending, "success");
  reply.model = routed.pending->key;
  routed.pending->promise.deliver(std::move(reply));
}

void on_routed_failure(gateway_pointer self, uint64_t id, const caf::error& err) {
  auto& st = self->state;
  auto it = st.routed.find(id);
  if (it == st.routed.end()) return;
  auto routed = std::move(it->second);
  st.routed.erase(it);
  st.view->chooser().finished(routed.node_id);
  const Error e = from_caf(err);
  auto& p = *routed.pending;
  if (routed.node_id == kPipelineNode && e.code() == ErrorCode::unavailable) {
    // A stage died or refused: this gateway stops using the pipeline (the manager dissolves or
    // rebuilds it) and the request waits for a full replica or the next pipeline, as a cold one.
    auto entry = st.table.find(p.key);
    if (entry != st.table.end() && !entry->second.pipeline.empty() &&
        entry->second.pipeline.front().router.address() == routed.router) {
      spdlog::warn("gateway: the pipeline of {} failed ({}); requests wait for its replicas", p.key.to_string(),
                   e.message());
      entry->second.pipeline.clear();
    }
    if (st.instruments) st.instruments->count_retry(p.key);
    return dispatch(self, routed.pending);
  }
  if (e.code() == ErrorCode::unavailable && p.attempts < kMaxAttempts) {
    // The node refused (its queue is full, or its replica is gone): try another replica.
    p.refused.push_back(routed.node_id);
    if (st.instruments) st.instruments->count_retry(p.key);
    return dispatch(self, routed.pending);
  }
  fail(self, p, e);
}

}  // namespace

/// A node (router) died: its replicas leave the local table at once, without waiting for the
/// manager, and the requests in flight there are re-sent (or held until a replica is re-placed).
caf::result<infer_reply> route_workflow(gateway_pointer self, workflow_request& req) {
  auto& st = self->state;
  // The least loaded node holding a ready replica of every step's model, counted there at once.
  const replica_ref* target = nullptr;
  auto first = st.table.find(req.models.empty() ? model_key{} : req.models.front());
  if (first != st.table.end()) {
    target = st.view->chooser().choose_and_start(first->second.replicas, [&](const replica_ref& r) {
      return std::all_of(req.models.begin(), req.models.end(), [&](const model_key& k) {
        auto e = st.table.find(k);
        return e != st.table.end() && std::any_of(e->second.replicas.begin(), e->second.replicas.end(),
                                                  [&](const replica_ref& o) { return o.node_id == r.node_id; });
      });
    });
  }
  if (!target) return to_caf(unavailable("no node holds every model of workflow '" + req.name + "'"));
  const uint64_t id = st.next_id++;
  auto rp = self->make_response_promise<infer_reply>();
  st.routed_workflows[id] = {rp, target->for_requests().address(), target->node_id};
  watch(self, target->for_requests());
  auto done = [self, id](Result<infer_reply> r) {
    auto& st = self->state;
    auto it = st.routed_workflows.find(id);
    if (it == st.routed_workflows.end()) return;  // its node was lost: answered already
    st.view->chooser().finished(it->second.node_id);
    auto promise = it->second.promise;
    st.routed_workflows.erase(it);
    r.ok() ? promise.deliver(std::move(*r)) : promise.deliver(to_caf(r.error()));
  };
  self->request(target->for_requests(), std::chrono::microseconds(st.config.request_timeout_us), std::move(req))
      .then([done](infer_reply& r) { done(std::move(r)); }, [done](caf::error& e) { done(from_caf(e)); });
  return rp;
}

namespace {

/// Fails the whole workflow requests sent to `addr` and takes back the requests routed there (or
/// through it, a pipeline's later stage), in id order.
std::vector<std::shared_ptr<Pending>> take_requests_on(gateway_pointer self, const caf::actor_addr& addr) {
  auto& st = self->state;
  for (auto it = st.routed_workflows.begin(); it != st.routed_workflows.end();) {
    if (it->second.router != addr) {
      ++it;
      continue;
    }
    st.view->chooser().finished(it->second.node_id);
    it->second.promise.deliver(to_caf(unavailable("the node running the workflow request was lost")));
    it = st.routed_workflows.erase(it);
  }
  std::vector<std::shared_ptr<Pending>> taken;
  for (auto it = st.routed.begin(); it != st.routed.end();) {
    const auto& via = it->second.via;
    if (it->second.router == addr || std::find(via.begin(), via.end(), addr) != via.end()) {
      st.view->chooser().finished(it->second.node_id);
      taken.push_back(it->second.pending);
      it = st.routed.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

/// Re-sends requests whose node was lost, or fails them as retryable after kMaxAttempts.
void resend(gateway_pointer self, std::vector<std::shared_ptr<Pending>> requests) {
  auto& st = self->state;
  for (auto& p : requests) {
    if (p->attempts >= kMaxAttempts) {
      fail(self, *p,
           unavailable("the node serving the request was lost (" + std::to_string(p->attempts) + " attempts); retry"));
      continue;
    }
    if (st.instruments) st.instruments->count_retry(p->key);
    dispatch(self, p);
  }
}

}  // namespace

void node_down(gateway_pointer self, const caf::actor_addr& addr) {
  auto& st = self->state;
  st.monitored.erase(addr);
  std::set<model_key> touched;
  for (auto& [key, e] : st.table) {
    auto before = e.replicas.size();
    // The node's handle, or the router its requests went to (a router its supervisor restarts:
    // the manager publishes the new one).
    e.replicas.erase(std::remove_if(e.replicas.begin(), e.replicas.end(),
                                    [&](const replica_ref& r) {
                                      return r.router.address() == addr || r.for_requests().address() == addr;
                                    }),
                     e.replicas.end());
    if (e.replicas.size() != before) touched.insert(key);
    if (std::any_of(e.pipeline.begin(), e.pipeline.end(),
                    [&](const pipeline_hop& h) { return h.router.address() == addr; })) {
      e.pipeline.clear();  // a stage is gone: the manager rebuilds or completes; requests wait for it
      touched.insert(key);
    }
  }
  st.members.erase(std::remove_if(st.members.begin(), st.members.end(),
                                  [&](const replica_ref& r) { return r.router.address() == addr; }),
                   st.members.end());
  auto lost = take_requests_on(self, addr);
  if (!touched.empty() || !lost.empty()) {
    spdlog::warn("gateway: a node went down; {} model(s) lost a replica, {} request(s) re-sent", touched.size(),
                 lost.size());
  }
  publish_view(self);
  resend(self, std::move(lost));
}

void member_left(gateway_pointer self, const replica_ref& node) {
  auto lost = take_requests_on(self, node.router.address());
  if (node.requests) {
    auto more = take_requests_on(self, node.requests.address());
    lost.insert(lost.end(), more.begin(), more.end());
  }
  std::sort(lost.begin(), lost.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
  if (lost.empty()) return;
  spdlog::warn("gateway: node {} left the cluster (the manager lost it, or it stopped answering); {} request(s) "
               "in flight there re-sent",
               node.node, lost.size());
  resend(self, std::move(lost));
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
                                 key.name + "/load (RepositoryModelLoad over gRPC)"));
  }
  if (state.state == ModelReadiness::failed) {
    return fail(self, *p, invalid_argument("model " + key.to_string() + " cannot load: " + state.reason));
  }
  p->request.model = key;
  if (st.report_interval_us > 0) ++st.load[key].arrivals;
  dispatch(self, std::move(p));
}

load_report make_load_report(gateway_state& st) {
  std::map<model_key, model_load> models;
  auto entry = [&models](const model_key& key) -> model_load& {
    auto [it, fresh] = models.try_emplace(key);
    if (fresh) it->second.model = key;
    return it->second;
  };
  for (const auto& [key, c] : st.load) {
    auto& m = entry(key);
    m.arrivals = c.arrivals;
    m.completions = c.completions;
    m.busy_us = c.busy_us;
  }
  st.load.clear();
  // What the front-end threads sent straight to replicas (the warm path, gateway_client.hpp).
  auto [direct, direct_in_flight] = st.view->direct().drain();
  for (const auto& [key, c] : direct) {
    auto& m = entry(key);
    m.arrivals += c.arrivals;
    m.completions += c.completions;
    m.busy_us += c.busy_us;
  }
  std::map<std::pair<model_key, uint64_t>, uint32_t> on_node = std::move(direct_in_flight);
  for (const auto& [id, r] : st.routed) ++on_node[{r.pending->key, r.node_id}];
  for (const auto& [at, n] : on_node) {
    auto& m = entry(at.first);
    m.ongoing += n;
    m.in_flight.push_back({at.second, n});
  }
  for (const auto& [key, queue] : st.held) {
    auto& m = entry(key);
    m.ongoing += static_cast<uint32_t>(queue.size());
    m.queued += static_cast<uint32_t>(queue.size());
  }
  for (const auto& key : st.reported_busy) entry(key);  // went quiet: reported once with zeros
  load_report out;
  out.reporter = st.reporter;
  st.reported_busy.clear();
  for (auto& [key, m] : models) {
    if (m.ongoing > 0) st.reported_busy.insert(key);
    out.models.push_back(std::move(m));
  }
  return out;
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

}  // namespace ember::gateway_impl
