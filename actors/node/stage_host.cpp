// stage_host: a node's pipeline stages (see actors/stage_host_interface.hpp). A stage runs one
// request at a time, and sends it on only while it holds a credit of its downstream
// (StageCredits); the carried tensors are trimmed and handed over as stage_handoff.hpp says; every
// request is answered exactly once, by the last stage's reply or as retryable when a stage on its
// way fails, leaves or dies.
#include "actors/node/stage_host.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>

#include "actors/errors.hpp"
#include "actors/node/blob_store.hpp"
#include "actors/node/key_format.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/node/stage_credits.hpp"
#include "actors/node/stage_handoff.hpp"
#include "actors/node_router_interface.hpp"

namespace ember {

namespace {

/// A stage's own run and the hop to the next stage: beyond these the requester's timeout rules.
constexpr auto kStageRunTimeout = std::chrono::minutes(2);
constexpr auto kHopTimeout = std::chrono::minutes(5);

struct Pending {
  stage_request request;
  caf::typed_response_promise<infer_reply> promise;
};

/// A stage served here, by its wire key in stage_host_state::stages.
struct Stage {
  stage_key key;
  std::shared_ptr<const gpu::Model> whole;
  std::vector<std::string> inputs;
  bool busy = false;  // a request of it runs, or is being fetched
  std::deque<Pending> pending;
  StageCredits credits;
};

/// A request a stage here handed to the next stage and whose answer it awaits: answered by that
/// answer, or as retryable when the downstream host goes down first (its promises die with it,
/// unanswered). Keyed by a host-wide id.
struct HopWait {
  caf::actor_addr downstream;
  model_key stage;  // the stage here that sent it
  uint64_t seq = 0;
  std::string node;
  std::shared_ptr<Pending> pending;
  uint64_t own_us = 0;
  std::string handoff;  // the blob store key of the tensors handed over (empty: inline)
};

struct stage_host_state {
  static inline const char* name = "ember.stage_host";

  stage_host_state() = default;
  stage_host_state(const stage_host_state&) = delete;
  stage_host_state& operator=(const stage_host_state&) = delete;
  /// A host that dies answers every request it still holds as unavailable: its callers retry.
  ~stage_host_state() {
    const caf::error gone = to_caf(unavailable("the stage host of node " + config.name + " died; retry"));
    for (auto& [key, s] : stages)
      for (auto& p : s.pending)
        if (p.promise.pending()) p.promise.deliver(gone);
    for (auto& [id, w] : hop_waits)
      if (w.pending && w.pending->promise.pending()) w.pending->promise.deliver(gone);
  }

  StageHostConfig config;
  NodeInstruments* instruments = nullptr;
  node_router_actor router;  // runs the stages (stage_router)
  std::map<model_key, Stage> stages;
  std::map<uint64_t, HopWait> hop_waits;
  uint64_t next_hop = 1;
  std::set<caf::actor_addr> monitored;  // downstream hosts
};

using host_pointer = stage_host_actor::stateful_pointer<stage_host_state>;

void pump(host_pointer self, const model_key& key);

/// The downstream took request `seq` of `stage` (or answered it first): one more credit, once per
/// request; its handed-off tensors leave the blob store. True when the credit came back.
bool credit(host_pointer self, Stage& stage, uint64_t seq) {
  auto taken = stage.credits.taken(seq);
  if (!taken) return false;
  if (!taken->drop_handoff.empty() && self->state.config.handoff) {
    self->state.config.handoff->store->erase_handoff(taken->drop_handoff);
  }
  return true;
}

/// The request went downstream, or failed: either way the stage is free for the next.
void finish(host_pointer self, const model_key& key) {
  auto it = self->state.stages.find(key);
  if (it == self->state.stages.end()) return;
  it->second.busy = false;
  pump(self, key);
}

/// The end of a hop: the downstream's answer, its error, or its death. Once per hop.
void hop_answered(host_pointer self, uint64_t hop, Result<infer_reply> answer) {
  auto& st = self->state;
  auto it = st.hop_waits.find(hop);
  if (it == st.hop_waits.end()) return;  // already answered (the downstream died first)
  HopWait w = std::move(it->second);
  st.hop_waits.erase(it);
  // Answered before (or instead of) taking it: the credit comes back here.
  auto s = st.stages.find(w.stage);
  const bool credited = s != st.stages.end() && credit(self, s->second, w.seq);
  if (!w.handoff.empty() && st.config.handoff) st.config.handoff->store->erase_handoff(w.handoff);
  if (answer.ok()) {
    answer->compute_us += w.own_us;  // the whole pipeline's compute
    w.pending->promise.deliver(std::move(*answer));
  } else {
    Error e = answer.error();
    // A stage that died or timed out: retryable (the gateway re-sends to a full replica or a
    // rebuilt pipeline). Errors about the request itself pass through.
    if (e.code() != ErrorCode::invalid_argument && e.code() != ErrorCode::unavailable) {
      e = unavailable("pipeline stage on node " + w.node + " failed: " + e.message());
    }
    w.pending->promise.deliver(to_caf(e));
  }
  if (credited) pump(self, w.stage);
}

/// The stage left the node (unloaded) while a request of it was under way: retryable.
void gone(host_pointer self, const model_key& key, caf::typed_response_promise<infer_reply>& promise) {
  promise.deliver(to_caf(unavailable("pipeline stage " + key.to_string() + " left node " + self->state.config.name)));
}

/// The stage's own run answered: on to the next stage, or the answer when this is the last.
void forward(host_pointer self, const model_key& key, std::shared_ptr<Pending> p, infer_reply own) {
  auto& st = self->state;
  auto found = st.stages.find(key);
  if (found == st.stages.end()) return gone(self, key, p->promise);
  Stage& stage = found->second;
  const stage_request& in = p->request;
  const gpu::LayerRange range{stage.key.first_layer, stage.key.last_layer};
  std::vector<tensor_msg> carried = still_needed(*stage.whole, range, in.request.inputs, std::move(own.outputs));
  if (in.at + 1 == in.hops.size()) {
    auto outputs = answer_of(*stage.whole, std::move(carried), in.request.outputs);
    if (!outputs.ok()) {
      p->promise.deliver(to_caf(outputs.error()));
    } else {
      own.model = in.request.model;
      own.id = in.request.id;
      own.outputs = std::move(*outputs);
      p->promise.deliver(std::move(own));
    }
    return finish(self, key);
  }
  stage_request next;
  next.request.model = in.request.model;
  next.request.id = in.request.id;
  next.request.outputs = in.request.outputs;
  next.request.inputs = std::move(carried);
  next.hops = in.hops;
  next.at = in.at + 1;
  next.upstream = caf::actor_cast<caf::actor>(self);
  const uint64_t hop = st.next_hop++;
  if (st.config.handoff) {
    const std::string handoff =
        "handoff:" + st.config.name + ":" + std::to_string(self->id()) + ":" + std::to_string(hop);
    auto h = pack_handoff(*st.config.handoff->store, handoff, st.config.data, st.config.handoff->tickets.get(),
                          in.hops[next.at].node, next.request.inputs);
    if (!h.ok()) {
      p->promise.deliver(to_caf(h.error()));
      return finish(self, key);
    }
    next.handoff = std::move(*h);
  }
  next.seq = stage.credits.sent(next.handoff.key);
  auto downstream = caf::actor_cast<stage_host_actor>(in.hops[next.at].router);
  if (st.monitored.insert(downstream.address()).second) self->monitor(downstream);
  st.hop_waits[hop] = {downstream.address(), key, next.seq, in.hops[next.at].node, p, own.compute_us, next.handoff.key};
  self->request(downstream, kHopTimeout, std::move(next))
      .then([self, hop](infer_reply& reply) { hop_answered(self, hop, std::move(reply)); },
            [self, hop](caf::error& err) { hop_answered(self, hop, from_caf(err)); });
  finish(self, key);
}

/// The stage's own part: a request of its wire key to the router, which runs it like any model's.
void run(host_pointer self, const model_key& key, std::shared_ptr<Pending> p) {
  auto& st = self->state;
  auto found = st.stages.find(key);
  if (found == st.stages.end()) return gone(self, key, p->promise);
  infer_request local;
  local.model = key;
  local.id = p->request.request.id;
  for (const std::string& name : found->second.inputs) {
    auto it = std::find_if(p->request.request.inputs.begin(), p->request.request.inputs.end(),
                           [&](const tensor_msg& t) { return t.name == name; });
    if (it == p->request.request.inputs.end()) {
      p->promise.deliver(to_caf(
          invalid_argument("stage " + key.to_string() + " needs '" + name + "', which the request does not carry")));
      return finish(self, key);
    }
    local.inputs.push_back(*it);
  }
  if (!st.router) {
    p->promise.deliver(
        to_caf(unavailable("node " + st.config.name + " has no router to run stage " + key.to_string())));
    return finish(self, key);
  }
  self->request(st.router, kStageRunTimeout, std::move(local))
      .then([self, key, p](infer_reply& own) { forward(self, key, p, std::move(own)); },
            [self, key, p](caf::error& err) {
              p->promise.deliver(err);
              finish(self, key);
            });
}

/// Tells the upstream this stage took the request (and its handed-off tensors): one more credit there.
void take_credit(host_pointer self, const Pending& p) {
  if (!p.request.upstream) return;
  self->send(caf::actor_cast<stage_host_actor>(p.request.upstream), credit_atom_v,
             p.request.hops[p.request.at - 1].stage, p.request.seq);
}

/// Fetches the tensors the upstream handed over, then runs the stage (or fails the request as
/// retryable: the upstream's data plane is the pipeline's, a lost handoff a lost stage).
void receive(host_pointer self, const model_key& key, std::shared_ptr<Pending> p) {
  const auto& st = self->state;
  const tensor_handoff& h = p->request.handoff;
  const std::string upstream = p->request.hops[p->request.at - 1].node;
  uint64_t total = 0;
  bool inline_bytes = false;
  for (uint64_t n : h.sizes) total += n;
  for (const tensor_msg& t : p->request.request.inputs) inline_bytes |= !t.data.empty();
  if (h.sizes.size() != p->request.request.inputs.size() || inline_bytes || total > kMaxHandoffBytes) {
    p->promise.deliver(to_caf(invalid_argument("a pipeline request whose handoff " + h.key + " describes " +
                                               std::to_string(h.sizes.size()) + " tensors (" + std::to_string(total) +
                                               " bytes) for " + std::to_string(p->request.request.inputs.size()))));
    return finish(self, key);
  }
  if (!st.config.handoff) {
    p->promise.deliver(to_caf(unavailable("node " + st.config.name + " takes no tensors over the data plane")));
    return finish(self, key);
  }
  const bool taken = offload(
      self, *st.config.handoff->fetches,
      [transport = st.config.handoff->transport, tls = st.config.handoff->tls, h, total] {
        return fetch_handoff(transport, tls, h, total);
      },
      [self, key, p, upstream](Result<std::shared_ptr<gpu::HostBuffer>>& got) {
        if (!got.ok()) {
          p->promise.deliver(to_caf(
              unavailable("the tensors node " + upstream + " handed over did not arrive: " + got.error().message())));
          return finish(self, key);
        }
        uint64_t at = 0;
        const auto& sizes = p->request.handoff.sizes;
        auto& inputs = p->request.request.inputs;
        for (size_t i = 0; i < inputs.size(); ++i) {
          inputs[i].data.assign((*got)->data() + at, (*got)->data() + at + sizes[i]);
          at += sizes[i];
        }
        auto& st = self->state;
        if (st.instruments) st.instruments->add_handoff(to_string(st.config.handoff->transport), at);
        take_credit(self, *p);
        run(self, key, p);
      });
  if (!taken) {
    p->promise.deliver(to_caf(unavailable("node " + st.config.name + " is stopping")));
    finish(self, key);
  }
}

void pump(host_pointer self, const model_key& key) {
  auto it = self->state.stages.find(key);
  if (it == self->state.stages.end()) return;
  Stage& stage = it->second;
  while (!stage.busy && !stage.pending.empty()) {
    const stage_request& front = stage.pending.front().request;
    const bool last = front.at + 1 == front.hops.size();
    if (!last && !stage.credits.may_send()) return;  // the downstream has not taken the previous one yet
    auto p = std::make_shared<Pending>(std::move(stage.pending.front()));
    stage.pending.pop_front();
    stage.busy = true;
    if (p->request.handoff.key.empty()) {
      take_credit(self, *p);
      run(self, key, std::move(p));
    } else {
      receive(self, key, std::move(p));
    }
  }
}

/// Takes a request for a stage held here: queued, run when the stage is free and holds a credit.
caf::result<infer_reply> take(host_pointer self, stage_request& req) {
  auto& st = self->state;
  if (req.at >= req.hops.size() || (req.at > 0 && !req.upstream)) {
    return to_caf(invalid_argument("a pipeline request for stage " + std::to_string(req.at) + " of " +
                                   std::to_string(req.hops.size())));
  }
  const model_key key = req.hops[req.at].stage;
  auto stage = st.stages.find(key);
  if (stage == st.stages.end()) {
    return to_caf(unavailable("node " + st.config.name + " has no ready pipeline stage " + key.to_string()));
  }
  auto rp = self->make_response_promise<infer_reply>();
  stage->second.pending.push_back({std::move(req), rp});
  pump(self, key);
  return rp;
}

/// A stage leaves the node: its queued requests fail as unavailable (retryable).
void drop(host_pointer self, const model_key& key) {
  auto it = self->state.stages.find(key);
  if (it == self->state.stages.end()) return;
  auto pending = std::move(it->second.pending);
  self->state.stages.erase(it);
  for (auto& p : pending) gone(self, key, p.promise);
}

/// A monitored downstream host went down: what it held fails as retryable.
void downstream_down(host_pointer self, const caf::actor_addr& downstream) {
  auto& st = self->state;
  st.monitored.erase(downstream);
  std::vector<uint64_t> lost;
  for (const auto& [hop, w] : st.hop_waits)
    if (w.downstream == downstream) lost.push_back(hop);
  for (uint64_t hop : lost) {
    const std::string node = st.hop_waits.at(hop).node;
    hop_answered(self, hop, unavailable("pipeline stage on node " + node + " went down"));
  }
}

void ready(host_pointer self, stage_ready& r) {
  const model_key wire = r.key.wire();
  drop(self, wire);  // loaded again: a fresh flow
  Stage s;
  s.key = r.key;
  s.whole = std::move(r.whole);
  s.inputs = std::move(r.inputs);
  self->state.stages.emplace(wire, std::move(s));
}

void attach(host_pointer self, stage_router& r) {
  auto& st = self->state;
  st.router = caf::actor_cast<node_router_actor>(r.router);
  std::vector<model_key> keys;
  for (const auto& [key, s] : st.stages) keys.push_back(key);
  for (const auto& key : keys) drop(self, key);
  if (!keys.empty()) {
    spdlog::warn("node {}: its router restarted; {} pipeline stage(s) dropped", st.config.name, keys.size());
  }
}

stage_host_actor::behavior_type host_behavior(host_pointer self, StageHostConfig config, NodeInstruments* instruments) {
  self->state.config = std::move(config);
  self->state.instruments = instruments;
  self->set_down_handler([self](caf::down_msg& down) { downstream_down(self, down.source); });
  return {
      [self](stage_request& req) -> caf::result<infer_reply> { return take(self, req); },
      [self](credit_atom, const model_key& stage, uint64_t seq) {
        auto it = self->state.stages.find(stage);
        if (it != self->state.stages.end() && credit(self, it->second, seq)) pump(self, stage);
      },
      [self](stage_ready& r) { ready(self, r); },
      [self](stage_router& r) { attach(self, r); },
      [self](unload_atom, const model_key& stage) { drop(self, stage); },
      resume_offloaded(),
  };
}

}  // namespace

stage_host_actor spawn_stage_host(caf::actor_system& sys, StageHostConfig config, NodeInstruments* instruments) {
  return sys.spawn(host_behavior, std::move(config), instruments);
}

}  // namespace ember
