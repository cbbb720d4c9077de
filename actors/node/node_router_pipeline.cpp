// node_router: pipeline stages (see node_router_interface.hpp, stage_request). A stage is a model
// bound under its stage key like any other (late binding applies); what is here is the flow between
// stages: one request at a time per stage, a credit from downstream before the next, the carried
// tensors trimmed to what later stages read, and every request answered exactly once.
//
// Between stages the carried tensors travel over the data plane (TCP, or UCX when configured): the
// upstream packs them into one buffer, hashes it and lets its blob server hold it under a handoff
// key; the stage_request names the key, the sizes and the digest; the downstream fetches it (on the
// node's handoff queue, off the actor), checks the digest, and only then sends its credit, at which
// the upstream drops the buffer. The answer returns hop by hop as the actors' replies.
#include <spdlog/spdlog.h>

#include <caf/typed_event_based_actor.hpp>
#include <chrono>
#include <memory>

#include "actors/errors.hpp"
#include "actors/node/blob_store.hpp"
#include "actors/node/node_router_state.hpp"
#include "actors/offload.hpp"
#include "model/host_buffer.hpp"
#include "transport/data_plane.hpp"

namespace ember {

namespace {

/// A stage's own run and the hop to the next stage: beyond these the requester's timeout rules.
constexpr auto kStageRunTimeout = std::chrono::minutes(2);
constexpr auto kHopTimeout = std::chrono::minutes(5);

using Pending = router_state::Stage::Pending;

/// Handed-off tensors beyond this are refused: a forged size must not allocate the node away.
constexpr uint64_t kMaxHandoffBytes = uint64_t{4} << 30;
/// A handoff is fetched at once by the next stage: its ticket needs only a short window.
constexpr std::chrono::seconds kHandoffTicket{120};

void stage_pump(router_pointer self, const model_key& key);
void take_credit(router_pointer self, const Pending& p);
void stage_receive(router_pointer self, const model_key& key, std::shared_ptr<Pending> p);

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

/// The downstream took request `seq` of `stage` (or answered it first): true once per request; its
/// handed-off tensors leave the blob store.
bool take_outstanding(router_pointer self, router_state::Stage& stage, uint64_t seq) {
  auto it = stage.outstanding.find(seq);
  if (it == stage.outstanding.end()) return false;
  if (!it->second.empty() && self->state.config.handoff) self->state.config.handoff->store->erase_handoff(it->second);
  stage.outstanding.erase(it);
  ++stage.credits;
  return true;
}

/// Packs `tensors`' bytes into one buffer the node's blob server holds under a key of hop `hop`,
/// leaving their names, dtypes and shapes: the handoff the downstream fetches.
Result<tensor_handoff> hand_off(router_pointer self, uint64_t hop, std::vector<tensor_msg>& tensors) {
  const auto& st = self->state;
  uint64_t total = 0;
  for (const tensor_msg& t : tensors) total += t.data.size();
  EMBER_ASSIGN_OR_RETURN(auto buffer, gpu::HostBuffer::allocate(std::max<uint64_t>(total, 1)));
  tensor_handoff h;
  uint64_t at = 0;
  for (tensor_msg& t : tensors) {
    if (!t.data.empty()) std::memcpy(buffer->data() + at, t.data.data(), t.data.size());
    at += t.data.size();
    h.sizes.push_back(t.data.size());
    std::vector<uint8_t>().swap(t.data);
  }
  const transport::Digest digest = transport::Sha256::of(buffer->data(), total);
  h.from = st.config.data;
  h.key = "handoff:" + st.config.name + ":" + std::to_string(self->id()) + ":" + std::to_string(hop);
  h.sha256 = transport::to_hex(digest);
  if (st.config.handoff->tickets) h.ticket = st.config.handoff->tickets->issue(h.key, "next stage", kHandoffTicket);
  const uint8_t* data = buffer->data();
  st.config.handoff->store->put_handoff(
      h.key, std::make_shared<transport::MemoryBlob>(std::move(buffer), data, total, digest));
  return h;
}

/// Receives a handoff into one buffer of the size announced.
class HandoffSink final : public transport::BlobSink {
 public:
  explicit HandoffSink(uint64_t bytes) : bytes_(bytes) {}
  uint8_t* allocate(uint64_t blob_bytes) override {
    if (blob_bytes != bytes_) return nullptr;
    auto b = gpu::HostBuffer::allocate(std::max<uint64_t>(blob_bytes, 1));
    if (!b.ok()) return nullptr;
    buffer = std::move(*b);
    return buffer->data();
  }
  void on_chunk(uint64_t, uint64_t) override {}
  std::shared_ptr<gpu::HostBuffer> buffer;

 private:
  uint64_t bytes_;
};

/// Runs on the node's handoff queue: the upstream's tensors, checked against their digest.
Result<std::shared_ptr<gpu::HostBuffer>> fetch_handoff(TransportKind transport,
                                                       const std::shared_ptr<const transport::DataTls>& tls,
                                                       const tensor_handoff& h, uint64_t total) {
  transport::FetchOptions options;
  options.expected_bytes = total;
  options.total_timeout = std::chrono::seconds(60);
  options.ticket = h.ticket;
  options.tls = tls;
  HandoffSink sink(total);
  EMBER_ASSIGN_OR_RETURN(auto got, transport::fetch_blob(transport, h.from, h.key, options, sink));
  if (transport::to_hex(got.digest) != h.sha256) {
    return corrupt("the tensors handed over as " + h.key + " do not match their digest");
  }
  if (!sink.buffer) return gpu::HostBuffer::allocate(1);  // nothing was carried
  return sink.buffer;
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
  const bool credit = s != st.stages.end() && take_outstanding(self, s->second, w.seq);
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
  if (credit) stage_pump(self, w.stage);
}

/// The stage left the node (unloaded) while a request of it was under way: retryable.
void stage_gone(router_pointer self, const model_key& key, caf::typed_response_promise<infer_reply>& promise) {
  promise.deliver(to_caf(unavailable("pipeline stage " + key.to_string() + " left node " + self->state.config.name)));
}

void stage_forward(router_pointer self, const model_key& key, std::shared_ptr<Pending> p, infer_reply own) {
  auto found = self->state.stages.find(key);
  if (found == self->state.stages.end()) return stage_gone(self, key, p->promise);
  auto& stage = found->second;
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
  auto& st = self->state;
  const uint64_t hop = st.next_hop++;
  if (st.config.handoff) {
    auto h = hand_off(self, hop, next.request.inputs);
    if (!h.ok()) {
      p->promise.deliver(to_caf(h.error()));
      return stage_finish(self, key);
    }
    next.handoff = std::move(*h);
  }
  --stage.credits;
  stage.outstanding[next.seq] = next.handoff.key;
  auto downstream = caf::actor_cast<node_router_actor>(in.hops[next.at].router);
  if (st.monitored.insert(downstream.address()).second) self->monitor(downstream);
  st.hop_waits[hop] = {downstream.address(), key, next.seq, in.hops[next.at].node, p, own.compute_us, next.handoff.key};
  self->request(downstream, kHopTimeout, std::move(next))
      .then([self, hop](infer_reply& reply) { hop_answered(self, hop, std::move(reply)); },
            [self, hop](caf::error& err) { hop_answered(self, hop, from_caf(err)); });
  stage_finish(self, key);
}

void stage_run(router_pointer self, const model_key& key, std::shared_ptr<Pending> p) {
  auto found = self->state.stages.find(key);
  if (found == self->state.stages.end()) return stage_gone(self, key, p->promise);
  auto& stage = found->second;
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
    if (p->request.handoff.key.empty()) {
      take_credit(self, *p);
      stage_run(self, key, std::move(p));
    } else {
      stage_receive(self, key, std::move(p));
    }
  }
}

/// Tells the upstream this stage took the request (and its handed-off tensors): one more credit there.
void take_credit(router_pointer self, const Pending& p) {
  if (!p.request.upstream) return;
  self->send(caf::actor_cast<node_router_actor>(p.request.upstream), credit_atom_v,
             p.request.hops[p.request.at - 1].stage, p.request.seq);
}

/// Fetches the tensors the upstream handed over, then runs the stage (or fails the request as
/// retryable: the upstream's data plane is the pipeline's, a lost handoff a lost stage).
void stage_receive(router_pointer self, const model_key& key, std::shared_ptr<Pending> p) {
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
    return stage_finish(self, key);
  }
  if (!st.config.handoff) {
    p->promise.deliver(to_caf(unavailable("node " + st.config.name + " takes no tensors over the data plane")));
    return stage_finish(self, key);
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
          return stage_finish(self, key);
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
        stage_run(self, key, p);
      });
  if (!taken) {
    p->promise.deliver(to_caf(unavailable("node " + st.config.name + " is stopping")));
    stage_finish(self, key);
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
  if (it == self->state.stages.end() || !take_outstanding(self, it->second, seq)) return;
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
  for (auto& p : pending) stage_gone(self, stage, p.promise);
}

}  // namespace ember
