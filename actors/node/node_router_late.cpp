// node_router, late binding (see node_router_interface.hpp): requests queue in the SwapController,
// which binds each to a device per request; this file turns its dispatches into swap_requests to
// the executors (launch: the one function that builds a swap_request; a workflow step's inputs kept
// on another device are added by lease_then_launch) and their answers back into its state
// (answered: the one function that reads a swap_reply, over classify_answer's outcome).
#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <chrono>

#include "actors/errors.hpp"
#include "actors/node/node_router_state.hpp"
#include "actors/node/request_batch.hpp"
#include "actors/offload.hpp"

namespace ember {

void fail_held(router_pointer self, Held& held, const Error& e) {
  if (held.kind == HeldKind::workflow_step) return workflow_step_failed(self, held, e);
  if (held.kind == HeldKind::generation || held.kind == HeldKind::resume) return fail_generation(self, held, e);
  if (held.promise.pending()) held.promise.deliver(to_caf(e));
}

namespace {

void pump(router_pointer self);

/// Every request a dispatch ran: its lead, then the members of its batch.
std::vector<uint64_t> dispatch_ids(const SwapDispatch& d) {
  std::vector<uint64_t> ids{d.request};
  for (const auto& q : d.batch) ids.push_back(q.id);
  return ids;
}

/// Request `id` cannot be queued again: it leaves, failed with `e`.
void fail_taken(router_pointer self, uint64_t id, const Error& e) {
  if (auto held = self->state.held.take(id)) fail_held(self, *held, e);
}

/// A dispatch's requests go back to the queue (a fault, or a batch retried member by member),
/// keeping their arrival; one the queue no longer takes is failed.
void requeue_all(router_pointer self, const SwapDispatch& d, bool solo) {
  auto& st = self->state;
  std::vector<std::pair<uint64_t, int64_t>> all{{d.request, d.arrival_us}};
  for (const auto& q : d.batch) all.emplace_back(q.id, q.arrival_us);
  for (const auto& [id, arrival] : all) {
    Held* h = st.held.find(id);
    if (!h) continue;
    if (solo) h->retry = with_solo(h->retry);
    // A workflow step reading values kept on a device cannot run again: they went with the fault.
    Status s = h->device_inputs.empty()
                   ? st.swap->requeue(id, d.model, arrival)
                   : Status(unavailable("the device holding its inputs (" + st.devices[d.device].name + ") faulted"));
    if (!s.ok()) fail_taken(self, id, s.error());
  }
}

/// A batch answered: its reply split among its members, each answered.
void answer_batch(router_pointer self, const SwapDispatch& d, const infer_reply& reply) {
  auto& st = self->state;
  std::vector<std::shared_ptr<const infer_request>> members;
  std::vector<Held> holds;
  for (uint64_t id : dispatch_ids(d)) {
    auto m = st.held.take(id);
    if (!m) continue;
    members.push_back(m->request);
    holds.push_back(std::move(*m));
  }
  auto replica = st.replicas.find(d.model);
  auto replies = split_reply(reply, members, replica != st.replicas.end() ? replica->second.padding : BatchPadding{});
  for (size_t k = 0; k < holds.size(); ++k) {
    if (replies.ok()) {
      holds[k].promise.deliver(std::move((*replies)[k]));
    } else {
      holds[k].promise.deliver(to_caf(replies.error()));
    }
  }
}

/// The lead of a dispatch that ran by itself leaves the held requests; when its model was unloaded
/// while it ran, the device copy the run made goes too.
Held take_lead(router_pointer self, const SwapDispatch& d, uint64_t footprint) {
  auto& st = self->state;
  Held held = std::move(*st.held.take(d.request));
  if (!st.swap->has_model(d.model) && footprint > 0) {
    self->request(st.devices[d.device].actor, std::chrono::minutes(1), unload_atom_v, held.request->model)
        .then([](bool) {}, [](caf::error&) {});
  }
  return held;
}

/// The executor's answer to dispatch `d`, or the fault taken for it (send_swap, run_watchdog).
void answered(router_pointer self, const SwapDispatch& d, swap_reply r) {
  auto& st = self->state;
  const std::optional<int64_t> started = st.held.finished(d.request);
  spdlog::debug("node {}: request {} of {} answered{}", st.config.name, d.request, d.model,
                started ? "" : " (stale: taken as faulted already)");
  if (!started) return;  // taken as faulted already (run_watchdog)
  Held* lead = st.held.find(d.request);
  if (!lead) return;  // cannot happen: only answers remove held requests
  const int64_t now = now_us(self);
  // The Body took its Shadow's rows back: the Shadow is gone or failing; the pair ends.
  if (d.shadow && !r.result.fault && r.result.split.shadow_lost && st.shadows) shadow_lost(self, d.shadow, r.result.split.shadow_error);
  const AnswerOutcome outcome = classify_answer(r, d, *lead);
  SwapOutcome o;
  o.fault = r.result.fault;
  o.answered = answers(outcome);
  o.resident = r.result.footprint > 0;
  o.footprint = r.result.footprint;
  o.pool_free = r.result.pool_free;
  o.evicted = r.result.evicted;
  const uint64_t latency = static_cast<uint64_t>(std::max<int64_t>(0, now - d.arrival_us));
  if (st.instruments) {
    st.instruments->count_evictions(r.result.evicted.size());
    auto m = st.swap->model(d.model);
    if (o.answered && is_traffic(lead->kind) && m) {
      st.instruments->count_slo(m->deadline_us == 0 || latency <= m->deadline_us);
      for (const auto& q : d.batch) {
        st.instruments->count_slo(m->deadline_us == 0 ||
                                  static_cast<uint64_t>(std::max<int64_t>(0, now - q.arrival_us)) <= m->deadline_us);
      }
    }
  }
  st.swap->finish(d, o, latency, now);
  if (r.result.plan_bytes) st.swap->note_activations(d.model, r.result.plan_bytes);
  if (!r.result.parked.empty()) late_parked(self, d.device, std::move(r.result.parked), std::max<int64_t>(0, now - *started));
  switch (outcome) {
    case AnswerOutcome::fault:
      requeue_all(self, d, false);
      if (st.instruments) st.instruments->count_restart();
      restart_device(self, d.device);
      break;
    case AnswerOutcome::retry_alone:
      spdlog::warn("node {}: request {} of {} ran out of device memory beside other runs on {}; it runs again alone",
                   st.config.name, d.request, d.model, st.devices[d.device].name);
      lead->retry = with_alone(lead->retry);
      if (Status s = st.swap->requeue(d.request, d.model, d.arrival_us, /*alone=*/true); !s.ok()) {
        fail_taken(self, d.request, s.error());
      }
      break;
    case AnswerOutcome::retry_members:
      spdlog::warn("node {}: a batch of {} requests of {} failed ({}); each runs again alone", st.config.name,
                   d.batch.size() + 1, d.model, r.error ? r.error->message() : "no answer");
      requeue_all(self, d, true);
      break;
    case AnswerOutcome::batch:
      answer_batch(self, d, *r.reply);
      break;
    case AnswerOutcome::workflow_step: {
      Held held = std::move(*st.held.take(d.request));
      workflow_step_done(self, held, {std::move(r.reply), std::move(r.error), std::move(r.result.kept)}, d.device);
      break;
    }
    case AnswerOutcome::warmed: {
      // Its device copy is what it was for; a failure shows again on the first real request.
      Held held = take_lead(self, d, r.result.footprint);
      if (held.kind == HeldKind::member_warmup) finish_load(self, held.request->model, caf::error{});
      break;
    }
    case AnswerOutcome::profiled: {
      Held held = take_lead(self, d, r.result.footprint);
      late_profiled(self, held.request->model, {r.error, r.result.run.compute_us, r.result.warm_us, r.result.plan_bytes, r.result.footprint});
      break;
    }
    case AnswerOutcome::answered:
    case AnswerOutcome::failed:
      late_answer(self, take_lead(self, d, r.result.footprint), r, d.device);
      break;
  }
  pump(self);
}

void send_swap(router_pointer self, SwapDispatch d, swap_request req) {
  auto& st = self->state;
  self->request(st.devices[d.device].actor, caf::infinite, std::move(req))
      .then([self, d](swap_reply& r) { answered(self, d, std::move(r)); },
            [self, d](caf::error& err) {
              swap_reply r;
              r.result.fault = true;  // the executor is gone or hung: restart it
              r.error = from_caf(err);
              answered(self, d, std::move(r));
            });
}

/// A workflow step whose inputs `handles` are kept on device `source`, not on the dispatch's: that
/// executor says where they are, and the step's device copies them over the link first (counted as
/// peer hand-off); they stay kept there until the step answered (the run releases a value only
/// after its last reader). A failed lease answers the dispatch with its error. Inputs kept on a
/// third device (fan-in across devices) are leased in turn.
void lease_then_launch(router_pointer self, SwapDispatch d, swap_request req, uint32_t source,
                       std::vector<uint64_t> handles) {
  auto& st = self->state;
  self->request(st.devices[source].actor, std::chrono::minutes(1), lend_atom_v, handles)
      .then(
          [self, d, req, source](value_lease& lease) mutable {
            auto& st = self->state;
            Held* h = st.held.find(d.request);
            if (!h || !st.held.running(d.request)) return;
            std::vector<uint64_t> more;
            std::optional<uint32_t> third;
            for (const auto& in : h->device_inputs) {
              // Read in place, or copied over an earlier lease's link: taken care of. (The held
              // request is left as it is: a retry elsewhere leases from where the values live.)
              const bool leased = std::any_of(req.run.peer_inputs.begin(), req.run.peer_inputs.end(),
                                              [&](const gpu::PeerValue& p) { return p.name == in.name; });
              if (in.device == d.device || leased) continue;
              if (in.device == source) {
                auto v = std::find_if(lease.values.begin(), lease.values.end(),
                                      [&](const gpu::PeerValue& p) { return p.name == in.value.name; });
                if (v == lease.values.end()) continue;
                if (st.instruments)
                  st.instruments->count_handoff(st.workflows->workflow_of(h->workflow), "peer", v->desc.bytes());
                req.run.peer_inputs.push_back(*v);
                req.run.peer_inputs.back().name = in.name;
              } else if (!third || *third == in.device) {
                third = in.device;
                more.push_back(in.value.handle);
              }
            }
            if (third) return lease_then_launch(self, std::move(d), std::move(req), *third, std::move(more));
            send_swap(self, std::move(d), std::move(req));
          },
          [self, d](caf::error& err) {
            swap_reply r;
            r.error = from_caf(err).with_context("reading its inputs on another device");
            answered(self, d, std::move(r));
          });
}

/// Dispatch `d` becomes a swap_request to its device's executor (`peer`: where the source device
/// keeps the model, for a device-to-device swap).
void launch(router_pointer self, SwapDispatch d, std::optional<gpu::PeerWeights> peer) {
  auto& st = self->state;
  Held* h = st.held.find(d.request);
  auto replica = st.replicas.find(d.model);
  if (!h || replica == st.replicas.end()) return;
  const Held& held = *h;
  swap_request req;
  req.request = held.request;  // shared: a fault retries it on another device
  if (!d.batch.empty()) {
    std::vector<std::shared_ptr<const infer_request>> members;
    for (uint64_t id : dispatch_ids(d)) {
      if (Held* m = st.held.find(id)) members.push_back(m->request);
    }
    int64_t rows = 0;
    for (const auto& m : members) rows += batch_rows(*m);
    if (st.instruments) st.instruments->count_execution(replica->first, members.size(), rows);
    req.request = std::make_shared<const infer_request>(concat_requests(members, replica->second.padding));
  } else if (st.instruments && is_traffic(held.kind)) {
    st.instruments->count_execution(replica->first, 1, batch_rows(*held.request));
  }
  req.run.model = replica->second.model;
  req.run.peer = std::move(peer);
  req.run.evict = d.evict;
  req.run.fallback = d.fallback;
  req.run.profile = held.kind == HeldKind::profile;
  // A plain run of a warm Body shares its rows with its Shadow (AsyFunc).
  if (st.shadows && d.action == placement::SwapAction::run && !d.beside && is_traffic(held.kind) &&
      held.device_inputs.empty() && held.keep.empty()) {
    if (auto s = shadow_share(self, d.model, d.device, batch_rows(*req.request))) {
      req.run.shadow = std::move(s->gate);
      req.run.shadow_share = s->share;
      d.shadow = s->row;
    }
  }
  st.held.started(d, now_us(self));
  // A workflow step: inputs kept on this device are read where they are; those kept on another
  // device are copied over from there first.
  std::vector<uint64_t> elsewhere;
  std::optional<uint32_t> source;
  for (const auto& in : held.device_inputs) {
    if (in.device == d.device) {
      req.run.device_inputs.emplace_back(in.name, in.value.handle);
      if (st.instruments) {
        st.instruments->count_handoff(st.workflows->workflow_of(held.workflow), "same_device", in.value.desc.bytes());
      }
    } else if (!source || *source == in.device) {
      source = in.device;
      elsewhere.push_back(in.value.handle);
    }
  }
  req.run.keep = held.keep;
  if (late_launch_generation(self, d, *h, req)) return;
  if (source) return lease_then_launch(self, std::move(d), std::move(req), *source, std::move(elsewhere));
  send_swap(self, std::move(d), std::move(req));
}

/// Which queued requests may join a batch led by `lead`: same model, inputs of the same names,
/// datatypes and trailing dimensions (dim 1 of padded inputs may differ: BatchPadding), the same
/// outputs asked, batchable (a client's, not running
/// solo), and rows adding up to at most the model's max_batch.
SwapController::BatchJoin batch_join(router_pointer self) {
  return [self](const placement::QueuedRequest& lead) -> placement::RrcQueue::RequestFilter {
    auto& st = self->state;
    Held* first = st.held.find(lead.id);
    if (!first || !batchable(*first)) return {};
    auto m = st.swap->model(first->request->model);
    if (!m || m->max_batch <= 1) return {};
    const int64_t lead_rows = batch_rows(*first->request);
    if (lead_rows == 0 || lead_rows >= static_cast<int64_t>(m->max_batch)) return {};
    auto rows = std::make_shared<int64_t>(lead_rows);
    auto replica = st.replicas.find(first->request->model);
    auto padding = std::make_shared<const BatchPadding>(replica != st.replicas.end() ? replica->second.padding
                                                                                     : BatchPadding{});
    return [self, request = first->request, rows, padding, max = static_cast<int64_t>(m->max_batch)](uint64_t id) {
      Held* c = self->state.held.find(id);
      if (!c || !batchable(*c) || !batch_compatible(*request, *c->request, *padding)) return false;
      const int64_t r = batch_rows(*c->request);
      if (*rows + r > max) return false;
      *rows += r;
      return true;
    };
  };
}

const char* dispatch_kind(const SwapDispatch& d) {
  if (d.beside) return "beside";
  switch (d.action) {
    case placement::SwapAction::run:
      return "run";
    case placement::SwapAction::swap_from_peer:
      return "peer";
    default:
      return "host";
  }
}

void pump(router_pointer self) {
  auto& st = self->state;
  const int64_t now = now_us(self);
  late_absorb_inline(self, now);
  for (auto& d : st.swap->dispatch(now, batch_join(self))) {
    spdlog::debug("node {}: request {} of {} (+{} batched) -> {}: {}", st.config.name, d.request, d.model,
                  d.batch.size(), d.device, d.reason);
    if (st.instruments) {
      st.instruments->count_dispatch(dispatch_kind(d));
      if (auto m = st.swap->model(d.model); m && m->max_batch > 1) {
        st.instruments->observe_batch_delay(d.model, static_cast<uint64_t>(std::max<int64_t>(0, now - d.arrival_us)));
        for (const auto& q : d.batch) {
          st.instruments->observe_batch_delay(d.model, static_cast<uint64_t>(std::max<int64_t>(0, now - q.arrival_us)));
        }
      }
    }
    if (!d.source) {
      launch(self, std::move(d), std::nullopt);
      continue;
    }
    // A device-to-device swap: where the source keeps the model (it stays locked until the answer).
    self->request(st.devices[*d.source].actor, std::chrono::seconds(10), weights_atom_v, d.model)
        .then([self, d](weights_lease& lease) mutable { launch(self, std::move(d), std::move(lease.weights)); },
              [self, d](caf::error&) mutable { launch(self, std::move(d), std::nullopt); });
  }
  // The front ends' inline runs take devices in the order this round leaves (Algorithm 1's).
  if (st.config.inline_runs) st.config.inline_runs->prefer(st.swap->run_order());
  // A model passed over while gathering a batch: dispatch again when its wait ends (one wake-up
  // pending at a time, the earliest).
  if (auto until = st.swap->gathering_until(); until && (st.gather_wake_us == 0 || *until < st.gather_wake_us)) {
    st.gather_wake_us = *until;
    self->delayed_send(self, std::chrono::microseconds(std::max<int64_t>(*until - now, 1)), offload_done{[self] {
                         self->state.gather_wake_us = 0;
                         pump(self);
                       }});
  }
}

/// An executor that has not answered a dispatch for LateBinding::run_timeout_us is taken as
/// faulted: the dispatch is answered as a fault (its requests go back to the queue, the device
/// restarts), and its real answer, should it still come, is ignored.
void run_watchdog(router_pointer self, int64_t now) {
  auto& st = self->state;
  const auto limit = static_cast<int64_t>(st.config.late->run_timeout_us);
  for (auto& d : st.held.overdue(now, limit)) {
    spdlog::error("node {}: executor {} has not answered request {} of {} for {} ms; taking it as faulted",
                  st.config.name, st.devices[d.device].name, d.request, d.model, limit / 1000);
    swap_reply r;
    r.result.fault = true;
    r.error = unavailable("executor " + st.devices[d.device].name + " did not answer in time");
    answered(self, d, std::move(r));
  }
}

}  // namespace

void late_start(router_pointer self) {
  auto& st = self->state;
  if (!st.config.late) return;
  const auto& late = *st.config.late;
  st.swap = std::make_unique<SwapController>(late.topology, late.pool_bytes, late.options);
  for (uint32_t d = 0; d < late.workspace_bytes.size(); ++d) st.swap->set_workspace(d, late.workspace_bytes[d]);
  if (st.config.inline_runs) st.config.inline_runs->keep_records(true);
  const auto& scaling = late.scaling;
  if (scaling.model_level || scaling.shadows || scaling.adaptive_batching) {
    st.shadows = std::make_unique<ShadowPairs>(scaling, late.topology);
  }
  st.workflows.emplace(st.config.name, st.instruments);
  late_tick(self);
}

void late_tick(router_pointer self) {
  auto& st = self->state;
  if (!st.swap) return;
  const int64_t now = now_us(self);
  run_watchdog(self, now);
  late_scale_period(self, now);
  int64_t next = st.swap->tick(now);
  // Burst scaling's period comes at least as often as the queue's.
  if (st.shadows) next = std::min<int64_t>(next, now + static_cast<int64_t>(st.shadows->options().period_us));
  if (st.instruments) st.instruments->set_slo_state(st.swap->queue().alpha(), st.swap->queue().queued());
  pump(self);  // a repartition may have changed the order
  self->delayed_send(self, std::chrono::microseconds(std::max<int64_t>(next - now, 1000)), tick_atom_v);
}

Status late_submit(router_pointer self, const model_key& key, Held held, std::optional<uint32_t> prefer) {
  auto& st = self->state;
  auto it = st.replicas.find(key);
  if (it == st.replicas.end() || !it->second.ready) {
    return unavailable("node " + st.config.name + " has no ready replica of " + key.to_string());
  }
  const uint64_t id = st.held.next_id();
  const int64_t now = now_us(self);
  if (Status s = st.swap->submit(id, key, now, prefer); !s.ok()) {
    if (st.instruments) st.instruments->count_rejected(key);
    return s.error().with_context("node " + st.config.name);
  }
  const bool traffic = is_traffic(held.kind);
  st.held.hold(id, std::move(held));
  if (traffic) late_arrival(self, key, now);
  return Status::OK();
}

void late_pump(router_pointer self) { pump(self); }

void late_answer_now(router_pointer self, const SwapDispatch& d, swap_reply r) {
  // Answered from the next message, not from inside the pump that dispatched it.
  self->send(self, offload_done{[self, d, r = std::move(r)]() mutable { answered(self, d, std::move(r)); }});
}

caf::result<infer_reply> late_infer(router_pointer self, infer_request& req) {
  auto rp = self->make_response_promise<infer_reply>();
  const model_key key = req.model;
  Held held;
  held.request = std::make_shared<const infer_request>(std::move(req));
  held.promise = rp;
  if (Status s = late_submit(self, key, std::move(held)); !s.ok()) {
    rp.deliver(to_caf(s.error()));  // the promise took the request's answer
    return rp;
  }
  pump(self);
  return rp;
}

}  // namespace ember
