// The gateway's generations over the cluster: the service and its relay actors (see
// cluster_generations.hpp).
#include "actors/gateway/cluster_generations.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <optional>
#include <set>

#include "actors/errors.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/routing_view.hpp"
#include "actors/node_router_interface.hpp"
#include "model/generation_spec.hpp"

namespace ember {

struct ClusterGenerations::Shared {
  std::shared_ptr<RoutingView> view;
  gateway_actor gateway;
  GatewayInstruments* instruments = nullptr;
  ClusterGenerationsOptions options;

  mutable std::mutex mu;
  std::map<std::string, caf::actor> relays;  // guarded by mu; request id -> its relay
  bool stopped = false;                      // guarded by mu
};

namespace generation_relay {

using Shared = ClusterGenerations::Shared;
using TimePoint = caf::actor_clock::time_point;

/// What a request can be refused for at once, against the model's view (null spec: not generative).
Status check_against_model(const generate_request& r, const model_key& key, const gpu::GenerationSpec* spec) {
  if (!spec) return invalid_argument("model '" + key.to_string() + "' does not generate text");
  if (r.kind != PromptKind::tokens && spec->tokenizer.empty()) {
    return invalid_argument("model '" + key.to_string() + "' has no tokenizer: give the prompt as token ids");
  }
  if (r.kind == PromptKind::tokens && spec->context_length > 0 &&
      r.prompt_tokens.size() + r.resume_tokens.size() >= spec->context_length) {
    return invalid_argument("the prompt (" + std::to_string(r.prompt_tokens.size()) +
                            " tokens) leaves no room in the context window of model '" + key.to_string() + "' (" +
                            std::to_string(spec->context_length) + " tokens)");
  }
  return Status::OK();
}

struct relay_state {
  static inline const char* name = "ember.generation_relay";

  std::shared_ptr<Shared> shared;
  generate_request request;  // as the client asked (its version resolved once known)
  std::vector<int32_t> original_resume;
  GenerationService::Sink sink;
  TimePoint arrived;
  TimePoint cold_deadline;
  TimePoint last_ensure;
  bool ensured = false;
  bool resolved = false;  // request.model.version is a real version

  /// The node stream now, if any.
  node_router_actor node;
  uint64_t node_id = 0;
  uint64_t attempt = 0;  // bumps with each send: replies of older sends are ignored
  int sends = 0;
  std::set<uint64_t> failed_nodes;  // nodes that lost or refused this stream
  std::optional<Error> refused;     // the last replica's refusal before any chunk (its queue full)
  bool waiting = false;             // a poll timer runs

  std::vector<int32_t> forwarded;  // every token the client got
  bool any_chunk = false;
  std::optional<TimePoint> last_token_at;
  bool done = false;
};

using relay_actor = caf::stateful_actor<relay_state>;

/// The stream leaves its node in the process's counts: the ReplicaChooser's in-flight, and the
/// DirectTraffic the gateway's load reports take (the autoscaler sees streams in flight, so a model
/// with open streams is not idle). `answered`: it ended with a stop or length final there; busy time
/// is not claimed (a stream shares its replica's steps with others: its duration is not compute time).
/// `handed_on`: it goes on elsewhere, where it is counted as arriving again (its arrival is taken back).
void leave_node(relay_actor* self, bool answered, bool handed_on) {
  auto& st = self->state;
  if (!st.node) return;
  self->demonitor(st.node.address());
  st.shared->view->chooser().finished(st.node_id);
  st.shared->view->direct().finished(st.request.model, st.node_id, answered, 0, handed_on);
  st.node = nullptr;
}

void end(relay_actor* self, bool answered = false) {
  auto& st = self->state;
  st.done = true;
  leave_node(self, answered, false);
  {
    std::lock_guard lock(st.shared->mu);
    auto it = st.shared->relays.find(st.request.id);
    if (it != st.shared->relays.end() && it->second.address() == self->address()) st.shared->relays.erase(it);
  }
  st.sink = nullptr;  // the front end's state goes with it
  self->quit();
}

void count(relay_actor* self, std::string_view outcome) {
  auto& st = self->state;
  if (st.shared->instruments) st.shared->instruments->count_generation(st.request.model, outcome);
}

/// Ends the stream with `e`: the sink's Error before any chunk, a final error chunk after.
void fail(relay_actor* self, const Error& e) {
  auto& st = self->state;
  if (st.done) return;
  count(self, std::string(to_string(e.code())));
  if (!st.any_chunk) {
    st.sink(e);
  } else {
    generate_chunk last;
    last.id = st.request.id;
    last.finish = FinishReason::error;
    last.error.code = e.code();
    last.error.message = e.message();
    last.usage.completion_tokens = static_cast<uint32_t>(st.forwarded.size() + st.original_resume.size());
    st.sink(std::move(last));
  }
  end(self);
}

/// Lets go of the node the stream ran at (it failed it: lost, gave up, refused).
void drop_node(relay_actor* self) {
  auto& st = self->state;
  if (!st.node) return;
  st.failed_nodes.insert(st.node_id);
  leave_node(self, false, true);
}

void dispatch(relay_actor* self);
void resume(relay_actor* self, const std::string& why);

/// Looks at the view again while no replica is ready (a timer: never blocks).
void schedule_poll(relay_actor* self) {
  auto& st = self->state;
  if (st.waiting) return;
  st.waiting = true;
  self->delayed_send(self, st.shared->options.poll_interval, tick_atom_v);
}

/// No ready replica (yet): ask the gateway to ensure one and wait, until the cold-start deadline.
void wait_for_replica(relay_actor* self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  if (now >= st.cold_deadline) {
    return fail(self, unavailable("no replica of model '" + st.request.model.to_string() + "' became ready within " +
                                  std::to_string(st.shared->options.cold_start_timeout.count() / 1000) + " ms"));
  }
  if (st.resolved && st.shared->gateway &&
      (!st.ensured || now - st.last_ensure >= st.shared->options.ensure_interval)) {
    self->send(st.shared->gateway, ensure_atom_v, st.request.model);
    st.ensured = true;
    st.last_ensure = now;
  }
  schedule_poll(self);
}

/// Sends the stream to a ready replica not yet failed, or waits for one (before any chunk), or
/// fails (after a chunk: a continuation needs a replica now).
void dispatch(relay_actor* self) {
  auto& st = self->state;
  if (st.done) return;
  auto snap = st.shared->view->snapshot();
  const ModelView* mv = snap->subscribed ? snap->find(st.request.model.name, st.request.model.version) : nullptr;
  if (snap->subscribed && !mv) {
    return fail(self, not_found("unknown model '" + st.request.model.name + "'"));
  }
  if (mv && !st.resolved) {
    st.request.model = mv->state.model;
    st.resolved = true;
    if (auto s = check_against_model(st.request, st.request.model, mv->generation.get()); !s.ok()) {
      return fail(self, s.error());
    }
  }
  if (mv && (mv->state.state == ModelReadiness::failed || mv->state.explicitly_unloaded)) {
    return fail(self, mv->state.explicitly_unloaded
                          ? invalid_argument("model " + st.request.model.to_string() + " was unloaded")
                          : invalid_argument("model " + st.request.model.to_string() +
                                             " cannot load: " + mv->state.reason));
  }
  const replica_ref* r = nullptr;
  if (mv && mv->ready) {
    r = st.shared->view->chooser().choose_and_start(
        mv->replicas, [&](const replica_ref& c) { return !st.failed_nodes.count(c.node_id) && c.for_requests(); });
  }
  if (!r) {
    if (st.any_chunk || st.sends > 0) {
      // A continuation (or a retry after a refusal) needs another replica now: the one(s) tried failed.
      // Refused everywhere before a token: the client gets the refusal itself (a full queue, say).
      if (!st.any_chunk && st.refused) return fail(self, *st.refused);
      return fail(self, unavailable("the node serving the generation was lost and no other replica of model '" +
                                    st.request.model.to_string() + "' is ready to continue it"));
    }
    spdlog::debug("gateway: generation {} of {} waits for a ready replica (ready {}, replicas {})", st.request.id,
                  st.request.model.to_string(), mv && mv->ready, mv ? mv->replicas.size() : 0);
    return wait_for_replica(self);
  }
  if (st.sends >= st.shared->options.max_attempts) {
    st.shared->view->chooser().finished(r->node_id);
    return fail(self, unavailable("generation of model '" + st.request.model.to_string() + "' failed on " +
                                  std::to_string(st.sends) + " replicas"));
  }
  st.node = r->for_requests();
  st.node_id = r->node_id;
  st.shared->view->direct().started(st.request.model, st.node_id);
  ++st.sends;
  const uint64_t attempt = ++st.attempt;
  generate_request req = st.request;
  req.resume_tokens = st.original_resume;
  req.resume_tokens.insert(req.resume_tokens.end(), st.forwarded.begin(), st.forwarded.end());
  spdlog::debug("gateway: generation {} of {} sent to node #{} (send {})", st.request.id,
                st.request.model.to_string(), st.node_id, st.sends);
  self->monitor(st.node);
  self->request(st.node, caf::infinite, std::move(req), caf::actor_cast<caf::actor>(self))
      .then([](bool) { /* joined a loop: chunks come (or came) on their own */ },
            [self, attempt](caf::error& err) {
              auto& st = self->state;
              if (st.done || attempt != st.attempt || !st.node) return;
              const Error e = from_caf(err);
              // The client has tokens already: whatever broke this send (its node lost before the down
              // message came, a refusal of the continuation), the stream goes on elsewhere if it can.
              if (st.any_chunk) return resume(self, e.message());
              // A refusal by this replica (its queue full, no replica there after all) or its loss:
              // another one may take the stream; anything else is the request's own fault.
              if (e.code() != ErrorCode::unavailable) return fail(self, e);
              st.refused = e;
              drop_node(self);
              if (st.sends >= st.shared->options.max_attempts) return fail(self, e);
              dispatch(self);
            });
}

/// The node gave the stream up (a resume final) or was lost: continue it elsewhere.
void resume(relay_actor* self, const std::string& why) {
  auto& st = self->state;
  drop_node(self);
  ++st.attempt;  // the old send's reply, if it still comes, is ignored
  if (st.sends >= st.shared->options.max_attempts) {
    return fail(self, unavailable("generation of model '" + st.request.model.to_string() + "' lost " +
                                  std::to_string(st.sends) + " times (" + why + ")"));
  }
  if (st.shared->instruments) st.shared->instruments->count_stream_resumed(st.request.model);
  dispatch(self);
}

void on_chunk(relay_actor* self, generate_chunk& chunk) {
  auto& st = self->state;
  if (st.done || !st.node || chunk.id != st.request.id) return;
  if (chunk.finish == FinishReason::error && chunk.error.resume) return resume(self, chunk.error.message);
  if (!chunk.tokens.empty()) {
    const auto now = self->clock().now();
    if (auto* in = st.shared->instruments) {
      const auto& key = st.request.model;
      if (!st.last_token_at) {
        in->observe_time_to_first_token(key, std::chrono::duration<double>(now - st.arrived).count());
      } else {
        in->observe_inter_token(key, std::chrono::duration<double>(now - *st.last_token_at).count(),
                                chunk.tokens.size());
      }
      in->count_generated_tokens(key, chunk.tokens.size());
    }
    st.last_token_at = now;
    st.forwarded.insert(st.forwarded.end(), chunk.tokens.begin(), chunk.tokens.end());
  }
  const bool final = chunk.is_final();
  if (final) count(self, chunk.finish == FinishReason::error ? std::string(to_string(chunk.error.code)) : "success");
  st.any_chunk = true;
  const bool answered = final && chunk.finish != FinishReason::error;
  st.sink(std::move(chunk));
  if (final) end(self, answered);
}

void on_cancel(relay_actor* self) {
  auto& st = self->state;
  if (st.done) return;
  if (st.node) self->send(st.node, cancel_atom_v, st.request.id);
  count(self, "cancelled");
  // The contract's one final call; the front end ignores it.
  if (!st.any_chunk) {
    st.sink(unavailable("generation " + st.request.id + " was cancelled"));
  } else {
    generate_chunk last;
    last.id = st.request.id;
    last.finish = FinishReason::error;
    last.error.code = ErrorCode::unavailable;
    last.error.message = "cancelled";
    last.usage.completion_tokens = static_cast<uint32_t>(st.forwarded.size() + st.original_resume.size());
    st.sink(std::move(last));
  }
  end(self);
}

caf::behavior relay(relay_actor* self, std::shared_ptr<Shared> shared, generate_request request,
                    GenerationService::Sink sink, bool resolved) {
  auto& st = self->state;
  st.shared = std::move(shared);
  st.original_resume = request.resume_tokens;
  st.request = std::move(request);
  st.sink = std::move(sink);
  st.resolved = resolved;
  st.arrived = self->clock().now();
  st.cold_deadline = st.arrived + st.shared->options.cold_start_timeout;
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (st.done || !st.node || msg.source != st.node.address()) return;
    resume(self, "its node went down");
  });
  self->set_exit_handler([self](caf::exit_msg& msg) {
    // The service shuts down: the sink is dropped without a final call (the front end is gone).
    auto& st = self->state;
    if (!st.done && st.node) self->send(st.node, cancel_atom_v, st.request.id);
    if (!st.done) end(self);
    self->quit(msg.reason);
  });
  self->send(self, ensure_atom_v);  // start once the behaviour is in place
  return {
      [self](ensure_atom) { dispatch(self); },
      [self](generate_chunk& chunk) { on_chunk(self, chunk); },
      [self](cancel_atom, const std::string&) { on_cancel(self); },
      [self](tick_atom) {
        self->state.waiting = false;
        if (!self->state.node) dispatch(self);
      },
  };
}

}  // namespace generation_relay

ClusterGenerations::ClusterGenerations(caf::actor_system& sys, std::shared_ptr<RoutingView> view,
                                       gateway_actor gateway, GatewayInstruments* instruments,
                                       ClusterGenerationsOptions options)
    : sys_(sys), shared_(std::make_shared<Shared>()) {
  shared_->view = std::move(view);
  shared_->gateway = std::move(gateway);
  shared_->instruments = instruments;
  shared_->options = options;
}

ClusterGenerations::~ClusterGenerations() { shutdown(); }

Result<std::vector<GenerativeModel>> ClusterGenerations::models() {
  auto snap = shared_->view->snapshot();
  if (!snap->subscribed) return unavailable("the gateway has no routing table yet");
  std::vector<GenerativeModel> out;
  for (const auto& [name, versions] : snap->models) {
    if (versions.empty()) continue;
    const auto& [version, view] = *versions.rbegin();  // what a request for the name gets
    if (!view.generation) continue;
    GenerativeModel m;
    m.name = name;
    m.version = version;
    m.context_tokens = view.generation->context_length;
    out.push_back(std::move(m));
  }
  return out;
}

void ClusterGenerations::generate(generate_request request, Sink sink) {
  auto snap = shared_->view->snapshot();
  bool resolved = false;
  if (snap->subscribed) {
    const ModelView* mv = snap->find(request.model.name, request.model.version);
    if (!mv) {
      const bool named = snap->models.count(request.model.name) > 0;
      if (shared_->instruments) shared_->instruments->count_generation(request.model, "not_found");
      return sink(not_found(named ? "unknown version " + std::to_string(request.model.version) + " of model '" +
                                        request.model.name + "'"
                                  : "unknown model '" + request.model.name + "'"));
    }
    request.model = mv->state.model;
    resolved = true;
    if (auto s = generation_relay::check_against_model(request, request.model, mv->generation.get()); !s.ok()) {
      if (shared_->instruments) {
        shared_->instruments->count_generation(request.model, std::string(to_string(s.error().code())));
      }
      return sink(s.error());
    }
  }
  std::lock_guard lock(shared_->mu);
  if (shared_->stopped) return sink(unavailable("the gateway is stopping"));
  const std::string id = request.id;
  auto a = sys_.spawn(generation_relay::relay, shared_, std::move(request), std::move(sink), resolved);
  shared_->relays[id] = caf::actor_cast<caf::actor>(a);
}

void ClusterGenerations::cancel(const std::string& request_id) {
  caf::actor a;
  {
    std::lock_guard lock(shared_->mu);
    auto it = shared_->relays.find(request_id);
    if (it == shared_->relays.end()) return;
    a = it->second;
  }
  caf::anon_send(a, cancel_atom_v, request_id);
}

void ClusterGenerations::shutdown() {
  std::vector<caf::actor> running;
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->stopped) return;
    shared_->stopped = true;
    for (auto& [id, a] : shared_->relays) running.push_back(a);
  }
  if (running.empty()) return;
  caf::scoped_actor self{sys_};
  for (auto& a : running) self->send_exit(a, caf::exit_reason::user_shutdown);
  for (auto& a : running) self->wait_for(a);
}

size_t ClusterGenerations::streams() const {
  std::lock_guard lock(shared_->mu);
  return shared_->relays.size();
}

}  // namespace ember
