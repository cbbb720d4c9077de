// node_router: pipeline stages (see node_router_interface.hpp, stage_request). A stage is a model
// bound under its stage key like any other (late binding applies); what is here is the flow between
// stages: one request at a time per stage, a credit from downstream before the next, the carried
// tensors trimmed to what later stages read, and every request answered exactly once.
#include <spdlog/spdlog.h>

#include <caf/typed_event_based_actor.hpp>
#include <chrono>
#include <memory>

#include "actors/errors.hpp"
#include "actors/node/node_router_state.hpp"

namespace ember {

namespace {

/// A stage's own run and the hop to the next stage: beyond these the requester's timeout rules.
constexpr auto kStageRunTimeout = std::chrono::minutes(2);
constexpr auto kHopTimeout = std::chrono::minutes(5);

using Pending = router_state::Stage::Pending;

void stage_pump(router_pointer self, const model_key& key);

/// The carried tensors a later stage (or the answer) still needs after `stage`: values read after
/// its last layer, and the model's outputs.
std::vector<tensor_msg> still_needed(const router_state::Stage& stage, std::vector<tensor_msg> carried,
                                     std::vector<tensor_msg> produced) {
  const gpu::Graph& g = stage.whole->graph();
  std::vector<tensor_msg> out;
  for (auto* set : {&carried, &produced}) {
    for (tensor_msg& t : *set) {
      auto v = g.find(t.name);
      if (v && g.last_use[*v] >= static_cast<int64_t>(stage.range.last)) out.push_back(std::move(t));
    }
  }
  return out;
}

/// The answer of the last stage: the model's outputs (those the client named, when it named any).
Result<std::vector<tensor_msg>> answer_of(const router_state::Stage& stage, std::vector<tensor_msg> carried,
                                          const std::vector<std::string>& wanted) {
  const gpu::Graph& g = stage.whole->graph();
  std::vector<tensor_msg> out;
  for (uint32_t v : g.outputs) {
    const std::string& name = g.value_names[v];
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
    auto it = std::find_if(carried.begin(), carried.end(), [&](const tensor_msg& t) { return t.name == name; });
    if (it == carried.end()) return internal_error("the pipeline lost output '" + name + "'");
    out.push_back(std::move(*it));
  }
  for (const std::string& name : wanted) {
    if (std::none_of(out.begin(), out.end(), [&](const tensor_msg& t) { return t.name == name; })) {
      return invalid_argument("model '" + stage.whole->manifest().name + "' has no output '" + name + "'");
    }
  }
  return out;
}

/// The request went downstream, or failed: either way the stage is free for the next.
void stage_finish(router_pointer self, const model_key& key) {
  auto it = self->state.stages.find(key);
  if (it == self->state.stages.end()) return;
  it->second.busy = false;
  stage_pump(self, key);
}

/// The end of a hop: the downstream's answer, its error, or its death. Once per hop.
void hop_answered(router_pointer self, uint64_t hop, Result<infer_reply> answer) {
  auto& st = self->state;
  auto it = st.hop_waits.find(hop);
  if (it == st.hop_waits.end()) return;  // already answered (the downstream died first)
  router_state::HopWait w = std::move(it->second);
  st.hop_waits.erase(it);
  // Answered before (or instead of) taking it: the credit comes back here.
  auto s = st.stages.find(w.stage);
  const bool credit = s != st.stages.end() && s->second.outstanding.erase(w.seq) > 0;
  if (credit) ++s->second.credits;
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
  if (credit) stage_pump(self, w.stage);
}

void stage_forward(router_pointer self, const model_key& key, std::shared_ptr<Pending> p, infer_reply own) {
  auto& stage = self->state.stages.at(key);
  const stage_request& in = p->request;
  const bool last = in.at + 1 == in.hops.size();
  std::vector<tensor_msg> carried = still_needed(stage, in.request.inputs, std::move(own.outputs));
  if (last) {
    auto outputs = answer_of(stage, std::move(carried), in.request.outputs);
    if (!outputs.ok()) {
      p->promise.deliver(to_caf(outputs.error()));
    } else {
      own.model = in.request.model;
      own.id = in.request.id;
      own.outputs = std::move(*outputs);
      p->promise.deliver(std::move(own));
    }
    return stage_finish(self, key);
  }
  stage_request next;
  next.request.model = in.request.model;
  next.request.id = in.request.id;
  next.request.outputs = in.request.outputs;
  next.request.inputs = std::move(carried);
  next.hops = in.hops;
  next.at = in.at + 1;
  next.upstream = caf::actor_cast<caf::actor>(self);
  next.seq = stage.next_seq++;
  --stage.credits;
  stage.outstanding.insert(next.seq);
  auto& st = self->state;
  const uint64_t hop = st.next_hop++;
  auto downstream = caf::actor_cast<node_router_actor>(in.hops[next.at].router);
  if (st.monitored.insert(downstream.address()).second) self->monitor(downstream);
  st.hop_waits[hop] = {downstream.address(), key, next.seq, in.hops[next.at].node, p, own.compute_us};
  self->request(downstream, kHopTimeout, std::move(next))
      .then([self, hop](infer_reply& reply) { hop_answered(self, hop, std::move(reply)); },
            [self, hop](caf::error& err) { hop_answered(self, hop, from_caf(err)); });
  stage_finish(self, key);
}

void stage_run(router_pointer self, const model_key& key, std::shared_ptr<Pending> p) {
  auto& stage = self->state.stages.at(key);
  infer_request local;
  local.model = key;
  local.id = p->request.request.id;
  for (const std::string& name : stage.inputs) {
    auto it = std::find_if(p->request.request.inputs.begin(), p->request.request.inputs.end(),
                           [&](const tensor_msg& t) { return t.name == name; });
    if (it == p->request.request.inputs.end()) {
      p->promise.deliver(to_caf(
          invalid_argument("stage " + key.to_string() + " needs '" + name + "', which the request does not carry")));
      return stage_finish(self, key);
    }
    local.inputs.push_back(*it);
  }
  self->request(caf::actor_cast<node_router_actor>(self), kStageRunTimeout, std::move(local))
      .then([self, key, p](infer_reply& own) { stage_forward(self, key, p, std::move(own)); },
            [self, key, p](caf::error& err) {
              p->promise.deliver(err);
              stage_finish(self, key);
            });
}

void stage_pump(router_pointer self, const model_key& key) {
  auto it = self->state.stages.find(key);
  if (it == self->state.stages.end()) return;
  auto& stage = it->second;
  while (!stage.busy && !stage.pending.empty()) {
    const stage_request& front = stage.pending.front().request;
    const bool last = front.at + 1 == front.hops.size();
    if (!last && stage.credits == 0) return;  // the downstream has not taken the previous one yet
    auto p = std::make_shared<Pending>(std::move(stage.pending.front()));
    stage.pending.pop_front();
    stage.busy = true;
    if (p->request.upstream) {
      self->send(caf::actor_cast<node_router_actor>(p->request.upstream), credit_atom_v,
                 p->request.hops[p->request.at - 1].stage, p->request.seq);
    }
    stage_run(self, key, std::move(p));
  }
}

}  // namespace

caf::result<infer_reply> stage_take(router_pointer self, stage_request& req) {
  auto& st = self->state;
  if (req.at >= req.hops.size() || (req.at > 0 && !req.upstream)) {
    return to_caf(invalid_argument("a pipeline request for stage " + std::to_string(req.at) + " of " +
                                   std::to_string(req.hops.size())));
  }
  const model_key key = req.hops[req.at].stage;
  auto replica = st.replicas.find(key);
  auto stage = st.stages.find(key);
  if (replica == st.replicas.end() || !replica->second.ready || stage == st.stages.end()) {
    return to_caf(unavailable("node " + st.config.name + " has no ready pipeline stage " + key.to_string()));
  }
  auto rp = self->make_response_promise<infer_reply>();
  stage->second.pending.push_back({std::move(req), rp});
  stage_pump(self, key);
  return rp;
}

void stage_credit(router_pointer self, const model_key& stage, uint64_t seq) {
  auto it = self->state.stages.find(stage);
  if (it == self->state.stages.end() || it->second.outstanding.erase(seq) == 0) return;
  ++it->second.credits;
  stage_pump(self, stage);
}

void stage_downstream_down(router_pointer self, const caf::actor_addr& downstream) {
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

void stage_drop(router_pointer self, const model_key& stage) {
  auto it = self->state.stages.find(stage);
  if (it == self->state.stages.end()) return;
  auto pending = std::move(it->second.pending);
  self->state.stages.erase(it);
  for (auto& p : pending) {
    p.promise.deliver(
        to_caf(unavailable("pipeline stage " + stage.to_string() + " left node " + self->state.config.name)));
  }
}

}  // namespace ember
