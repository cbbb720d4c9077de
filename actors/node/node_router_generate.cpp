// node_router, text generation (see node_router_interface.hpp): a generate_request becomes a held
// request (HeldKind::generation) of its model, queued and bound to a device like any request (late
// binding), or a swap_request to the executor holding the model (pinned binding); the executor joins
// it to the model's generation loop, whose chunks go to the sink directly. The router answers the
// gateway when it joined (or why not), and keeps which device runs each stream id (GenerationStreams)
// so that a cancel reaches it. Streams an eviction set aside (SwapRunResult::parked) are queued as
// HeldKind::resume requests of their model, preferring the device they left, once the model that
// took the device has had a turn as long as that took (late_parked).
#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <chrono>

#include "actors/errors.hpp"
#include "actors/node/node_router_state.hpp"
#include "actors/offload.hpp"

namespace ember {

namespace {

/// The request naming only the model: what a generation's swap_request carries as `request`.
std::shared_ptr<const infer_request> model_only(const model_key& key) {
  auto r = std::make_shared<infer_request>();
  r->model = key;
  return r;
}

/// `key`, version 0 resolved to the highest version here; not_found when no version is here.
Result<model_key> resolve(const router_state& st, const model_key& key) {
  if (key.version != 0) {
    if (st.replicas.count(key)) return key;
  } else {
    std::optional<model_key> best;
    for (const auto& [k, r] : st.replicas) {
      if (k.name == key.name && !r.stage) best = k;  // keys sort by version
    }
    if (best) return *best;
  }
  return not_found("node " + st.config.name + " has no model " + key.to_string());
}

Error cancelled(const std::string& id) { return unavailable("generation '" + id + "' was cancelled"); }

void forward_cancel(router_pointer self, uint32_t device, const model_key& key, const std::string& id) {
  auto& st = self->state;
  if (device < st.devices.size()) self->send(st.devices[device].actor, cancel_atom_v, key, id);
}

/// Pinned binding: the executor holding the model joins the stream (no evictions).
caf::result<bool> pinned_generate(router_pointer self, const model_key& key, uint32_t device,
                                  std::shared_ptr<const generation_order> order) {
  auto& st = self->state;
  auto rp = self->make_response_promise<bool>();
  swap_request req;
  req.request = model_only(key);
  req.run.model = st.replicas[key].model;
  req.generation = order;
  const std::string id = order->request.id;
  self->request(st.devices[device].actor, caf::infinite, std::move(req))
      .then(
          [self, rp, id](swap_reply& r) mutable {
            if (r.error) {
              self->state.generations.take(id);
              rp.deliver(to_caf(*r.error));
            } else {
              rp.deliver(true);
            }
          },
          [self, rp, id](caf::error& err) mutable {
            self->state.generations.take(id);
            rp.deliver(err);
          });
  return rp;
}

}  // namespace

caf::result<bool> generate(router_pointer self, generate_request& req, caf::actor& sink) {
  auto& st = self->state;
  const std::string where = "node " + st.config.name;
  if (Status s = check_generate_request(req); !s.ok()) return to_caf(s.error().with_context(where));
  if (!sink) return to_caf(invalid_argument(where + ": a generation needs a sink for its chunks"));
  auto key = resolve(st, req.model);
  if (!key.ok()) return to_caf(key.error());
  const auto& replica = st.replicas[*key];
  if (!replica.ready) return to_caf(unavailable(where + " has no ready replica of " + key->to_string()));
  const uint64_t held_id = st.swap ? st.held.peek_id() : 0;
  const uint64_t sink_id = sink->id();
  const bool watched = st.generations.has_sink(sink_id);
  if (Status s = st.generations.add(req.id, *key, sink_id, held_id); !s.ok()) {
    if (st.instruments && s.error().code() == ErrorCode::unavailable) st.instruments->count_rejected(*key);
    return to_caf(s.error().with_context(where));
  }
  if (!watched) self->monitor(sink);
  const std::string id = req.id;
  req.model = *key;
  auto order = std::make_shared<const generation_order>(generation_order{std::move(req), std::move(sink)});
  if (!st.swap) {
    st.generations.joined(id, static_cast<uint32_t>(replica.device));
    return pinned_generate(self, *key, static_cast<uint32_t>(replica.device), std::move(order));
  }
  auto rp = self->make_response_promise<bool>();
  Held held;
  held.kind = HeldKind::generation;
  held.request = model_only(*key);
  held.generation = std::move(order);
  held.joined = rp;
  const Status submitted = late_submit(self, *key, std::move(held));
  spdlog::debug("node {}: generation {} of {} queued as request {}: {}", st.config.name, id, key->to_string(), held_id,
                submitted.ok() ? "ok" : submitted.error().message());
  if (Status s = submitted; !s.ok()) {
    st.generations.take(id);
    rp.deliver(to_caf(s.error()));
    return rp;
  }
  late_pump(self);
  return rp;
}

void cancel_generation(router_pointer self, const std::string& id) {
  auto& st = self->state;
  auto stream = st.generations.take(id);
  if (!stream) return;
  if (Held* h = st.held.find(stream->held); h && h->kind == HeldKind::generation && h->generation->request.id == id) {
    h->cancelled = true;  // queued: answered without running; joining: cancelled once it joined
    if (!st.held.running(stream->held) && h->joined.pending()) h->joined.deliver(to_caf(cancelled(id)));
  }
  if (stream->device) forward_cancel(self, *stream->device, stream->model, id);
}

void generation_sink_down(router_pointer self, const caf::down_msg& down) {
  for (auto& [id, stream] : self->state.generations.sink_down(down.source.id())) {
    spdlog::debug("node {}: the sink of generation {} is down; cancelling it", self->state.config.name, id);
    if (Held* h = self->state.held.find(stream.held); h && h->kind == HeldKind::generation) h->cancelled = true;
    if (stream.device) forward_cancel(self, *stream.device, stream.model, id);
  }
}

bool late_launch_generation(router_pointer self, const SwapDispatch& d, Held& held, swap_request& req) {
  if (held.kind == HeldKind::resume) {
    req.run.resume = held.parked;
    return false;
  }
  if (held.kind != HeldKind::generation) return false;
  auto& st = self->state;
  if (held.cancelled) {  // cancelled while queued: answered without running
    swap_reply r;
    r.error = cancelled(held.generation->request.id);
    late_answer_now(self, d, std::move(r));
    return true;
  }
  req.generation = held.generation;
  st.generations.joined(held.generation->request.id, d.device);
  return false;
}

void late_answer(router_pointer self, Held held, swap_reply& r, uint32_t device) {
  auto& st = self->state;
  switch (held.kind) {
    case HeldKind::generation: {
      const std::string& id = held.generation->request.id;
      if (r.reply && held.cancelled) {  // cancelled (or its sink went) while it was joining
        forward_cancel(self, device, held.request->model, id);
        if (held.joined.pending()) held.joined.deliver(to_caf(cancelled(id)));
      } else if (r.reply) {
        held.joined.deliver(true);
      } else {
        if (!held.cancelled) st.generations.take(id);
        if (held.joined.pending()) held.joined.deliver(to_caf(r.error ? *r.error : internal_error("no answer")));
      }
      return;
    }
    case HeldKind::resume:
      // Taken back (or failed by the engine itself); a join that failed fails what is still held.
      if (!r.reply && held.parked) held.parked->fail(r.error ? *r.error : internal_error("no answer"));
      return;
    default:
      if (r.reply) {
        held.promise.deliver(std::move(*r.reply));
      } else {
        held.promise.deliver(to_caf(r.error ? *r.error : internal_error("the executor gave no answer")));
      }
  }
}

void fail_generation(router_pointer self, Held& held, const Error& e) {
  if (held.kind == HeldKind::resume) {
    if (held.parked) held.parked->fail(e);
    return;
  }
  if (held.generation && !held.cancelled) self->state.generations.take(held.generation->request.id);
  if (held.joined.pending()) held.joined.deliver(to_caf(e));
}

void late_parked(router_pointer self, uint32_t device,
                 std::vector<std::pair<model_key, std::shared_ptr<ParkedGenerations>>> parked, int64_t turn_us) {
  // Queued now (the caller pumps), or later from a timer (which pumps itself).
  auto queue = [self, device](const model_key& key, const std::shared_ptr<ParkedGenerations>& p, bool pump) {
    auto& st = self->state;
    Held held;
    held.kind = HeldKind::resume;
    held.request = model_only(key);
    held.parked = p;
    if (Status s = late_submit(self, key, std::move(held), device); !s.ok()) {
      p->fail(unavailable("model " + key.to_string() + " cannot bind again on node " + st.config.name + ": " +
                          s.error().message()));
      return;
    }
    if (pump) late_pump(self);
  };
  for (auto& [key, p] : parked) {
    if (!p || p->streams() == 0) continue;
    spdlog::debug("node {}: {} generation streams of {} were set aside ({} host bytes); resumed in {} us or later",
                  self->state.config.name, p->streams(), key.to_string(), p->host_bytes(), turn_us);
    if (turn_us <= 0) {
      queue(key, p, false);
      continue;
    }
    self->delayed_send(self, std::chrono::microseconds(turn_us),
                       offload_done{[queue, key = key, p = p] { queue(key, p, true); }});
  }
}

}  // namespace ember
