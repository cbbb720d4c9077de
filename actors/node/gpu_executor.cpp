// gpu_executor: a thin actor over an ExecutorEngine (see gpu_executor_interface.hpp). Every engine
// job's callback comes from continue_on (actors/offload.hpp): it runs on the engine's worker (or a
// lane) and sends the continuation back here. A run's job decodes its inputs and its callback builds
// the client's answer there (run_reply.hpp), from what the job owns: this actor only delivers.
#include "actors/node/gpu_executor.hpp"

#include <algorithm>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>

#include "actors/errors.hpp"
#include "actors/fault_messages.hpp"
#include "actors/gpu_executor_interface.hpp"
#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/generation_runs.hpp"
#include "actors/node/inline_runs.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/node/request_batch.hpp"
#include "actors/node/run_reply.hpp"
#include "actors/offload.hpp"
#include "actors/pending_answers.hpp"

namespace ember {

namespace {

/// How an executor holds an engine: whoever drops the last reference (the actor's state, possibly
/// destroyed on the engine's own worker: see actors/offload.hpp; a continuation dropped with the
/// actor's mailbox), the engine is destroyed on the node's maintenance queue, inline when that is
/// where it is dropped. Destroying an engine joins its worker, which blocks and cannot happen on
/// that worker itself.
using EngineHandle = std::shared_ptr<ExecutorEngine>;

EngineHandle adopt(WorkQueue& maintenance, std::unique_ptr<ExecutorEngine> engine) {
  auto on_maintenance = [queue = &maintenance](ExecutorEngine* e) {
    if (queue->on_worker_thread()) return delete e;
    // Owned by the job, so that a job the queue no longer admits (it is being destroyed, which
    // the node process does only after its actors are gone) still frees it.
    auto doomed = std::make_shared<std::unique_ptr<ExecutorEngine>>(e);
    queue->post([doomed] { doomed->reset(); });
  };
  return EngineHandle(engine.release(), std::move(on_maintenance));
}

struct executor_state {
  static inline const char* name = "ember.gpu_executor";

  /// Shared only to cross spawn() and into the maintenance queue (see EngineHandle); this actor is
  /// its sole owner. Null while a restart runs (the old engine is gone, the new one not built yet)
  /// or after a restart failed.
  EngineHandle engine;
  /// The node's queue for restarts and for destroying engines (outlives the actor).
  WorkQueue* maintenance = nullptr;
  std::string device;  // the device's name, kept for answers while there is no engine
  bool restarting = false;
  /// Asked for a restart while one ran: answered with it.
  std::vector<std::pair<caf::typed_response_promise<device_report>, uint64_t>> restart_waiters;
  std::string node;
  NodeInstruments* instruments = nullptr;
  engine_factory reopen;
  /// The promises engine jobs and restarts will keep: answered `unavailable` if this actor dies
  /// first (a killed executor's callers retry at once instead of waiting for their timeouts).
  PendingAnswers answers;
  /// Dynamic batching of bound models that ask for it (pinned binding): while one of a model's
  /// executions runs, its requests wait here and the next execution takes them as one batch.
  struct Waiting {
    std::shared_ptr<const infer_request> request;
    caf::typed_response_promise<infer_reply> promise;
    uint64_t pending = 0;
  };
  struct Lane {
    uint32_t max_batch = 1;
    BatchPadding padding;  // sequences of different lengths (model.json's dynamic_batching.pad)
    bool busy = false;
    std::deque<Waiting> waiting;
  };
  std::map<model_key, Lane> lanes;
  /// Where each engine adopted is offered to front-end threads.
  InlineSlot inline_slot;
};

using executor_pointer = gpu_executor_actor::stateful_pointer<executor_state>;

device_report report_device(const ExecutorEngine& engine) {
  const auto mem = engine.memory();
  return {engine.device_info().name, mem.capacity_bytes, mem.used_bytes};
}

infer_reply skeleton_of(executor_pointer self, const infer_request& req) {
  infer_reply skeleton;
  skeleton.model = req.model;
  skeleton.id = req.id;
  skeleton.node = self->state.node;
  skeleton.device = self->state.engine->device_info().name;
  return skeleton;
}

/// The answer to any job while the executor has no engine.
Error no_engine(executor_pointer self) {
  const auto& st = self->state;
  return unavailable("executor " + st.device + " on node " + st.node +
                     (st.restarting ? " is restarting" : " is out of service (its restart failed)"));
}

/// The answer when the engine's queue (EngineOptions::max_queue) refuses a job, counted.
Error queue_full(executor_pointer self, const model_key& model) {
  if (self->state.instruments) self->state.instruments->count_rejected(model);
  return unavailable("the queue of " + self->state.engine->device_info().name + " on node " + self->state.node +
                     " is full");
}

NodeInstruments::DeviceMemory figures_of(const EngineMemory::Use& u) {
  return {u.capacity, u.used, u.weights, u.activations, u.kept, u.shadows, u.lent};
}

/// The engine's per-model generation figures into the node's metrics.
void set_generation_figures(NodeInstruments& instruments, const std::string& device, const engine::GenerationsStats& g) {
  std::map<model_key, NodeInstruments::GenerationFigures> models;
  for (const auto& [key, m] : g.models) {
    models[key] = {m.streams,        m.tokens_generated,    m.kv_blocks_in_use, m.kv_blocks_swapped_bytes,
                   m.preempted_swap, m.preempted_recompute, m.parked,           m.resumed};
  }
  instruments.set_generation(device, models);
}

/// Offers the engine just adopted to front-end threads (InlineRuns), and to the metrics, which
/// read its memory afresh at each scrape (runs on lanes and front-end threads change it unseen).
void offer_engine(executor_pointer self) {
  const auto& st = self->state;
  if (!st.engine) return;
  if (st.inline_slot.runs) st.inline_slot.runs->attach(st.inline_slot.device, st.engine->gate());
  if (st.instruments) {
    st.instruments->on_snapshot(st.engine->device_info().name, [gate = st.engine->gate(), instruments = st.instruments,
                                                                device = st.engine->device_info().name] {
      auto m = gate->memory_use();
      if (m) instruments->set_device_memory(device, figures_of(m->use));
      if (auto g = gate->generation_stats()) set_generation_figures(*instruments, device, *g);
      return m.has_value();
    });
  }
}

void report_memory(executor_pointer self) {
  if (!self->state.instruments || !self->state.engine) return;
  self->state.instruments->set_device_memory(self->state.engine->device_info().name,
                                             figures_of(self->state.engine->memory_use().use));
}

void lane_next(executor_pointer self, const model_key& key);

/// Runs `members` (one request, or a batch from `key`'s lane: batch_compatible with the first) as one
/// execution of the engine. Their inputs are decoded, and their answers encoded (a batch's split), on
/// the engine's thread (run_reply.hpp); here only the counts and the promises. In the lane (`in_lane`)
/// it keeps the lane busy until it answers, then starts the lane's next. A batch that fails, its
/// inputs included, runs again member by member, outside the lane (they keep their place ahead of
/// it), so one bad member cannot fail the others.
void execute(executor_pointer self, const model_key& key, std::vector<executor_state::Waiting> waiting, bool in_lane) {
  auto& st = self->state;
  auto members = std::make_shared<std::vector<executor_state::Waiting>>(std::move(waiting));
  auto fail_all = [&](const Error& e) {
    for (auto& m : *members) {
      st.answers.settle(m.pending);
      m.promise.deliver(to_caf(e));
    }
  };
  if (!st.engine) {
    fail_all(no_engine(self));
    if (in_lane) lane_next(self, key);
    return;
  }
  std::vector<std::shared_ptr<const infer_request>> requests;
  BatchPadding padding;
  if (auto lane = st.lanes.find(key); lane != st.lanes.end() && members->size() > 1) padding = lane->second.padding;
  int64_t rows = 0;
  for (const auto& m : *members) {
    requests.push_back(m.request);
    rows += batch_rows(*m.request);
  }
  if (in_lane) st.lanes[key].busy = true;
  if (st.instruments) st.instruments->count_execution(key, members->size(), rows);
  using Answers = std::pair<InferResult, std::vector<Result<infer_reply>>>;  // the run (outputs gone), the answers
  auto deliver = continue_on<Answers>(self, [self, key, in_lane, members](Answers& done) mutable {
    auto& [run, answers] = done;
    // Runs that answered: a fault's or a bad input's time is no run of the model.
    if (self->state.instruments && run.outputs.ok())
      self->state.instruments->observe_run(key, run.queue_us, run.compute_us);
    for (size_t k = 0; k < members->size(); ++k) {
      auto& m = (*members)[k];
      if (answers.empty()) {
        execute(self, key, {std::move(m)}, false);
        continue;
      }
      self->state.answers.settle(m.pending);
      if (answers[k].ok()) {
        m.promise.deliver(std::move(*answers[k]));
      } else {
        m.promise.deliver(to_caf(answers[k].error()));
      }
    }
    if (in_lane) lane_next(self, key);
  });
  // Built where the run ends, on the engine's thread, from what this job owns (never actor state).
  auto done = [deliver, requests, padding, skeleton = skeleton_of(self, *requests.front())](InferResult r) mutable {
    auto answers = execution_answers(std::move(skeleton), requests, r, padding);
    if (r.outputs.ok()) r.outputs = std::vector<gpu::HostTensor>{};  // encoded into the answers
    deliver(Answers{std::move(r), std::move(answers)});
  };
  if (!st.engine->infer(key, decoded_inputs(requests, padding), std::move(done))) {
    if (in_lane) st.lanes[key].busy = false;
    fail_all(queue_full(self, key));
  }
}

/// A lane's execution ended: the next one takes what waits (compatible requests, up to max_batch rows).
void lane_next(executor_pointer self, const model_key& key) {
  auto it = self->state.lanes.find(key);
  if (it == self->state.lanes.end()) return;
  auto& lane = it->second;
  lane.busy = false;
  if (lane.waiting.empty()) return;
  std::vector<executor_state::Waiting> members{std::move(lane.waiting.front())};
  lane.waiting.pop_front();
  int64_t rows = batch_rows(*members.front().request);
  for (auto w = lane.waiting.begin(); w != lane.waiting.end() && rows < static_cast<int64_t>(lane.max_batch);) {
    const int64_t r = batch_rows(*w->request);
    if (rows > 0 && r > 0 && rows + r <= static_cast<int64_t>(lane.max_batch) &&
        batch_compatible(*members.front().request, *w->request, lane.padding)) {
      rows += r;
      members.push_back(std::move(*w));
      w = lane.waiting.erase(w);
    } else {
      ++w;
    }
  }
  execute(self, key, std::move(members), true);
}

caf::result<infer_reply> infer(executor_pointer self, infer_request& req) {
  if (!self->state.engine) return to_caf(no_engine(self));
  auto rp = self->make_response_promise<infer_reply>();
  executor_state::Waiting w{std::make_shared<const infer_request>(std::move(req)), rp, self->state.answers.add(rp)};
  auto lane = self->state.lanes.find(w.request->model);
  if (lane == self->state.lanes.end()) {
    const model_key key = w.request->model;
    execute(self, key, {std::move(w)}, false);
  } else if (!lane->second.busy) {
    execute(self, lane->first, {std::move(w)}, true);
  } else if (lane->second.waiting.size() >= self->state.engine->max_queue()) {
    self->state.answers.settle(w.pending);
    rp.deliver(to_caf(queue_full(self, w.request->model)));
  } else {
    lane->second.waiting.push_back(std::move(w));
  }
  return rp;
}

caf::result<shadow_ready> start_shadow(executor_pointer self, load_shadow& req) {
  if (!self->state.engine) return to_caf(no_engine(self));
  auto rp = self->make_response_promise<shadow_ready>();
  const uint64_t pending = self->state.answers.add(rp);
  auto done = continue_on<Result<ExecutorEngine::ShadowInfo>>(
      self, [self, rp, pending, key = req.key,
             gate = self->state.engine->gate()](Result<ExecutorEngine::ShadowInfo>& r) mutable {
        self->state.answers.settle(pending);
        report_memory(self);
        if (!r.ok()) {
          rp.deliver(to_caf(r.error()));
          return;
        }
        if (self->state.instruments) {
          self->state.instruments->count_shadow_started(key, static_cast<double>(r->start_us) * 1e-6);
        }
        rp.deliver(shadow_ready{r->bytes, r->start_us, gate});
      });
  self->state.engine->load_shadow(req.key, std::move(req.model), {req.first_layer, req.last_layer}, std::move(done));
  return rp;
}

caf::result<bool> drop_shadow(executor_pointer self, const model_key& key) {
  if (!self->state.engine) return false;  // no engine, no Shadow
  auto rp = self->make_response_promise<bool>();
  const uint64_t pending = self->state.answers.add(rp);
  self->state.engine->drop_shadow(key, continue_on<bool>(self, [self, rp, pending, key](bool& dropped) mutable {
                                    self->state.answers.settle(pending);
                                    report_memory(self);
                                    if (dropped && self->state.instruments) {
                                      self->state.instruments->count_shadow_released(key);
                                    }
                                    rp.deliver(dropped);
                                  }));
  return rp;
}

/// A seed for a generation that asked for none: unseeded requests differ (text/sampling.hpp).
uint64_t fallback_seed(executor_pointer self, const model_key& key) {
  const auto ticks = static_cast<uint64_t>(self->clock().now().time_since_epoch().count());
  return ticks ^ (std::hash<std::string>{}(key.to_string()) * 0x9e3779b97f4a7c15ULL) ^ self->id();
}

void cancel_generation(executor_pointer self, const model_key& key, const std::string& id) {
  if (self->state.engine) self->state.engine->cancel_generation(key, id);
}

caf::result<swap_reply> swap(executor_pointer self, swap_request& req) {
  if (!self->state.engine) {
    swap_reply bad;
    bad.error = no_engine(self);
    return bad;
  }
  const infer_request& request = *req.request;
  auto rp = self->make_response_promise<swap_reply>();
  const uint64_t pending = self->state.answers.add(rp);
  auto deliver = continue_on<swap_reply>(
      self, [self, rp, pending, paired = req.run.shadow != nullptr, key = request.model](swap_reply& out) mutable {
        self->state.answers.settle(pending);
        const InferResult& run = out.result.run;  // outputs encoded into the reply; an error stays
        if (self->state.instruments && run.outputs.ok())
          self->state.instruments->observe_run(key, run.queue_us, run.compute_us);
        report_memory(self);
        if (self->state.instruments && paired && !out.result.inputs_failed)  // a split tried
          self->state.instruments->count_shadow_split(key, out.result.split.shadow_rows);
        rp.deliver(std::move(out));
      });
  // Decoded when the job starts and answered where it ends, on the engine's thread (run_reply.hpp):
  // inputs that do not decode answer with their error, nothing changed on the device.
  auto done = [deliver, skeleton = skeleton_of(self, request), wanted = request.outputs](SwapRunResult r) mutable {
    deliver(swap_answer(std::move(skeleton), wanted, std::move(r)));
  };
  SwapRun run = std::move(req.run);
  run.key = request.model;
  if (req.generation) {  // joins the model's loop: no inputs to decode, nothing comes back but the join
    run.generate = make_generation(std::move(req.generation), fallback_seed(self, request.model));
  } else if (!run.resume) {
    run.make_inputs = decoded_inputs({req.request});
  }
  run.wanted = request.outputs;
  if (!self->state.engine->swap_run(std::move(run), std::move(done))) {
    swap_reply bad;
    bad.error = queue_full(self, request.model);
    self->state.answers.settle(pending);
    rp.deliver(std::move(bad));
  }
  return rp;
}

// A restart first destroys the broken engine, then opens the device again: the old engine's device
// memory (its whole reservation) must be free before the new one reserves, as one physical device
// backs both. Both steps block (joining the old engine's worker, whose queued jobs answer with the
// fault through their continuations; opening a device and measuring its copy elbow), so they run
// on the node's maintenance queue and the new engine comes back as a continuation. Meanwhile the
// executor answers every job as unavailable; the router sends it none, having marked the device
// down.
caf::result<device_report> restart(executor_pointer self) {
  auto& st = self->state;
  if (!st.reopen) return to_caf(unsupported("this executor cannot be restarted (no device factory)"));
  if (st.restarting) {  // a router that took over from a dead one may ask again: it joins this one
    auto rp = self->make_response_promise<device_report>();
    st.restart_waiters.emplace_back(rp, st.answers.add(rp));
    return rp;
  }
  st.restarting = true;
  using Fresh = Result<EngineHandle>;
  auto rp = self->make_response_promise<device_report>();
  const uint64_t pending = st.answers.add(rp);
  auto done = continue_on<Fresh>(self, [self, rp, pending](Fresh& fresh) mutable {
    auto& st = self->state;
    st.answers.settle(pending);
    st.restarting = false;
    auto waiters = std::move(st.restart_waiters);
    st.restart_waiters.clear();
    waiters.emplace_back(rp, 0);
    if (!fresh.ok()) {
      const caf::error err = to_caf(fresh.error().with_context("restarting " + st.device));
      for (auto& [w, id] : waiters) {
        st.answers.settle(id);
        w.deliver(err);
      }
      return;
    }
    st.engine = std::move(*fresh);
    offer_engine(self);
    report_memory(self);
    for (auto& [w, id] : waiters) {
      st.answers.settle(id);
      w.deliver(report_device(*st.engine));
    }
  });
  // post, not try_post: restarts bound themselves (one per executor at a time).
  st.maintenance->post(
      [old = std::move(st.engine), reopen = st.reopen, queue = st.maintenance, done = std::move(done)]() mutable {
        old.reset();  // on this queue's thread: destroyed here and now, before the device reopens
        auto fresh = reopen();
        if (!fresh.ok()) return done(fresh.error());
        done(adopt(*queue, std::move(*fresh)));
      });
  return rp;
}

/// Frees device memory through `start(done)` (an engine unbind job); answers true once it ran.
template <class Start>
caf::result<bool> unbinding(executor_pointer self, Start start) {
  if (!self->state.engine) return true;  // no engine, nothing on the device
  auto rp = self->make_response_promise<bool>();
  const uint64_t pending = self->state.answers.add(rp);
  auto done = continue_on<bool>(self, [self, rp, pending](bool&) mutable {
    self->state.answers.settle(pending);
    report_memory(self);
    rp.deliver(true);
  });
  start([done] { done(true); });
  return rp;
}

/// Fault injection (the node's supervisor checked that the node allows it): into the engine.
caf::result<std::string> inject(executor_pointer self, const fault_command& f) {
  auto& st = self->state;
  if (!st.engine) return to_caf(no_engine(self));
  switch (f.kind) {
    case FaultKind::fail_alloc:
      st.engine->fail_allocations(f.count);
      return "the next " + std::to_string(f.count) + " allocation(s) on " + st.device + " fail";
    case FaultKind::fault_kernel:
      st.engine->fault_next_kernel();
      return "the next kernel on " + st.device + " faults";
    default:
      return to_caf(invalid_argument("an executor takes fail-alloc or fault-kernel, not '" +
                                     std::string(to_string(f.kind)) + "'"));
  }
}

gpu_executor_actor::behavior_type executor_behavior(executor_pointer self, EngineHandle engine, std::string device,
                                                    std::string node, NodeInstruments* instruments,
                                                    WorkQueue* maintenance, engine_factory reopen,
                                                    InlineSlot inline_slot) {
  self->state.engine = std::move(engine);
  self->state.inline_slot = std::move(inline_slot);
  self->state.maintenance = maintenance;
  if (self->state.engine) self->state.device = self->state.engine->device_info().name;
  if (!device.empty()) self->state.device = std::move(device);
  self->state.reopen = std::move(reopen);
  self->state.node = std::move(node);
  self->state.instruments = instruments;
  offer_engine(self);
  self->state.answers.set_who("executor " + self->state.device + " on node " + self->state.node);
  return {
      // -- models --------------------------------------------------------------------------------
      [self](bind_model& b) -> caf::result<std::string> {
        if (!self->state.engine) return to_caf(no_engine(self));
        auto rp = self->make_response_promise<std::string>();
        const uint64_t pending = self->state.answers.add(rp);
        auto done = continue_on<Status>(self, [self, rp, pending](Status& st) mutable {
          self->state.answers.settle(pending);
          report_memory(self);
          if (!st.ok()) {
            rp.deliver(to_caf(st.error()));
            return;
          }
          rp.deliver(self->state.device);
        });
        // Dynamic batching, when the model asks for it and can (request_batch.hpp).
        const auto& serving = b.model->manifest().serving;
        if (serving.dynamic_batching && serving.max_batch > 1 && batching_eligible(b.model->manifest()).ok()) {
          self->state.lanes[b.key].max_batch = serving.max_batch;
          self->state.lanes[b.key].padding = BatchPadding::of(b.model->manifest());
        }
        self->state.engine->bind(b.key, std::move(b.model), std::move(done));
        return rp;
      },
      [self](unload_atom, const model_key& key) -> caf::result<bool> {
        if (auto lane = self->state.lanes.find(key); lane != self->state.lanes.end()) {
          for (auto& w : lane->second.waiting) {
            self->state.answers.settle(w.pending);
            w.promise.deliver(to_caf(unavailable("model " + key.to_string() + " was unloaded from " +
                                                 self->state.device + " while the request waited")));
          }
          self->state.lanes.erase(lane);
        }
        return unbinding(self, [&](std::function<void()> done) { self->state.engine->unbind(key, std::move(done)); });
      },
      [self](forget_atom) -> caf::result<bool> {
        for (auto& [key, lane] : self->state.lanes) {
          for (auto& w : lane.waiting) {
            self->state.answers.settle(w.pending);
            w.promise.deliver(to_caf(unavailable("model " + key.to_string() + " was unloaded from " +
                                                 self->state.device + " while the request waited")));
          }
        }
        self->state.lanes.clear();
        return unbinding(self, [&](std::function<void()> done) { self->state.engine->unbind_all(std::move(done)); });
      },
      [self](fault_atom, const fault_command& f) -> caf::result<std::string> { return inject(self, f); },
      // -- shadows (AsyFunc) ---------------------------------------------------------------------
      [self](load_shadow& req) -> caf::result<shadow_ready> { return start_shadow(self, req); },
      [self](shadow_atom, const model_key& key) -> caf::result<bool> { return drop_shadow(self, key); },
      // -- requests ------------------------------------------------------------------------------
      [self](infer_request& req) -> caf::result<infer_reply> { return infer(self, req); },
      [self](swap_request& req) -> caf::result<swap_reply> { return swap(self, req); },
      [self](cancel_atom, const model_key& key, const std::string& id) { cancel_generation(self, key, id); },
      [self](release_atom, std::vector<uint64_t>& handles) {
        if (self->state.engine) self->state.engine->release(std::move(handles));
      },
      [self](lend_atom, std::vector<uint64_t>& handles) -> caf::result<value_lease> {
        if (!self->state.engine) return to_caf(no_engine(self));
        auto rp = self->make_response_promise<value_lease>();
        self->state.engine->lend(std::move(handles), continue_on<Result<std::vector<gpu::PeerValue>>>(
                                                         self, [rp](Result<std::vector<gpu::PeerValue>>& r) mutable {
                                                           if (r.ok()) {
                                                             rp.deliver(value_lease{std::move(*r)});
                                                           } else {
                                                             rp.deliver(to_caf(r.error()));
                                                           }
                                                         }));
        return rp;
      },
      [self](weights_atom, const model_key& key) -> weights_lease {
        if (!self->state.engine) return {};
        return {self->state.engine->weights_of(key)};
      },
      [self](restart_atom) -> caf::result<device_report> { return restart(self); },
      [self](status_atom) -> executor_status {
        if (!self->state.engine) return {{self->state.device, 0, 0}, {}, 0, 0, 0, 0};
        const auto& e = *self->state.engine;
        const auto mem = e.engine_memory();
        const auto [kept_values, kept_bytes] = e.kept();
        return {report_device(e), e.bound(),       e.queued(),  mem.pool_capacity,
                mem.pool_free,    e.group_bytes(), kept_values, kept_bytes};
      },
      // -- engine and maintenance completions -----------------------------------------------------
      resume_offloaded(),
  };
}

}  // namespace

gpu_executor_actor spawn_gpu_executor(caf::actor_system& sys, std::unique_ptr<ExecutorEngine> engine, std::string node,
                                      NodeInstruments* instruments, WorkQueue& maintenance, engine_factory reopen,
                                      InlineSlot inline_slot) {
  return sys.spawn(executor_behavior, adopt(maintenance, std::move(engine)), std::string{}, std::move(node),
                   instruments, &maintenance, std::move(reopen), std::move(inline_slot));
}

gpu_executor_actor spawn_replacement_executor(caf::actor_system& sys, std::string device, std::string node,
                                              NodeInstruments* instruments, WorkQueue& maintenance,
                                              engine_factory reopen, InlineSlot inline_slot) {
  return sys.spawn(executor_behavior, EngineHandle{}, std::move(device), std::move(node), instruments, &maintenance,
                   std::move(reopen), std::move(inline_slot));
}

}  // namespace ember
