// gpu_executor: a thin actor over an ExecutorEngine (see gpu_executor_interface.hpp).
#include <algorithm>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <functional>
#include <map>
#include <thread>

#include "actors/node/gpu_executor.hpp"
#include "actors/errors.hpp"
#include "actors/node/executor_engine.hpp"
#include "actors/gpu_executor_interface.hpp"
#include "actors/tensor_codec.hpp"
#include "actors/worker_pool.hpp"

namespace ember {

namespace {

struct executor_state {
  static inline const char* name = "ember.gpu_executor";

  /// Shared only to cross spawn() and a restart's thread; this actor is its sole owner. Null while a
  /// restart runs (the old engine is gone, the new one not built yet) or after a restart failed.
  std::shared_ptr<ExecutorEngine> engine;
  std::string device;  // the device's name, kept for answers while there is no engine
  bool restarting = false;
  std::string node;
  NodeInstruments* instruments = nullptr;
  engine_factory reopen;
  /// Jobs posted to the engine whose answer has not come back, by job id.
  std::map<uint64_t, std::function<void(std::shared_ptr<void>)>> pending;
  uint64_t next_job = 1;

  ~executor_state() { release_off_own_thread(engine); }
};

using executor_pointer = gpu_executor_actor::stateful_pointer<executor_state>;

// Registers `then` for a new job and returns the callback the engine calls with the job's result
// (of type T) on another thread (the engine's worker, or a restart's): it only sends a message to
// this actor.
template <class T>
std::function<void(T)> on_engine_done(executor_pointer self, std::function<void(T&)> then) {
  const uint64_t id = self->state.next_job++;
  self->state.pending[id] = [then = std::move(then)](std::shared_ptr<void> result) {
    then(*static_cast<T*>(result.get()));
  };
  auto handle = caf::actor_cast<gpu_executor_actor>(self);
  return [handle, id](T result) {
    caf::anon_send(handle, executor_job_done{id, std::make_shared<T>(std::move(result))});
  };
}

device_report report_device(const ExecutorEngine& engine) {
  const auto mem = engine.memory();
  return {engine.device_info().name, mem.capacity_bytes, mem.used_bytes};
}

/// The client's answer from an engine result: the outputs asked for (all when none named).
Result<infer_reply> build_reply(infer_reply skeleton, const std::vector<std::string>& wanted,
                                ExecutorEngine::InferResult& r) {
  if (!r.outputs.ok()) return r.outputs.error();
  for (const auto& name : wanted) {
    const bool known = std::any_of(r.outputs->begin(), r.outputs->end(),
                                   [&](const gpu::HostTensor& t) { return t.name == name; });
    if (!known) return invalid_argument("the model has no output '" + name + "'");
  }
  infer_reply reply = std::move(skeleton);
  reply.queue_us = r.queue_us;
  reply.compute_us = r.compute_us;
  for (const auto& t : *r.outputs) {
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), t.name) != wanted.end()) {
      reply.outputs.push_back(encode_tensor(t));
    }
  }
  return reply;
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

void report_memory(executor_pointer self) {
  if (!self->state.instruments || !self->state.engine) return;
  const auto mem = self->state.engine->memory();
  self->state.instruments->set_device_memory(self->state.engine->device_info().name, mem.used_bytes,
                                             mem.capacity_bytes);
}

caf::result<infer_reply> infer(executor_pointer self, infer_request& req) {
  if (!self->state.engine) return to_caf(no_engine(self));
  auto inputs = decode_tensors(req.inputs);
  if (!inputs.ok()) return to_caf(inputs.error());
  auto rp = self->make_response_promise<infer_reply>();
  auto done = on_engine_done<ExecutorEngine::InferResult>(
      self, [self, rp, skeleton = skeleton_of(self, req),
             wanted = std::move(req.outputs)](ExecutorEngine::InferResult& r) mutable {
        if (self->state.instruments) self->state.instruments->observe_run(skeleton.model, r.queue_us, r.compute_us);
        auto reply = build_reply(std::move(skeleton), wanted, r);
        if (reply.ok()) rp.deliver(std::move(*reply));
        else rp.deliver(to_caf(reply.error()));
      });
  if (!self->state.engine->infer(req.model, std::move(*inputs), std::move(done))) {
    // A promise exists already, so the answer goes through it (a returned error would be dropped).
    self->state.pending.erase(self->state.next_job - 1);
    if (self->state.instruments) self->state.instruments->count_rejected(req.model);
    rp.deliver(to_caf(unavailable("the queue of " + self->state.engine->device_info().name + " on node " +
                                  self->state.node + " is full")));
  }
  return rp;
}

caf::result<swap_reply> swap(executor_pointer self, swap_request& req) {
  swap_reply bad;
  if (!self->state.engine) {
    bad.error = no_engine(self);
    return bad;
  }
  const infer_request& request = *req.request;
  auto inputs = decode_tensors(request.inputs);
  if (!inputs.ok()) {
    bad.error = inputs.error();  // nothing changed on the device
    return bad;
  }
  auto rp = self->make_response_promise<swap_reply>();
  auto done = on_engine_done<ExecutorEngine::SwapRunResult>(
      self, [self, rp, skeleton = skeleton_of(self, request),
             wanted = request.outputs](ExecutorEngine::SwapRunResult& r) mutable {
        if (self->state.instruments) {
          self->state.instruments->observe_run(skeleton.model, r.run.queue_us, r.run.compute_us);
        }
        report_memory(self);
        swap_reply out;
        auto reply = build_reply(std::move(skeleton), wanted, r.run);
        if (reply.ok()) out.reply = std::move(*reply);
        else out.error = reply.error();
        out.swapped = r.swapped;
        out.evicted = std::move(r.evicted);
        out.footprint = r.footprint;
        out.pool_free = r.pool_free;
        out.compute_us = r.run.compute_us;
        out.warm_us = r.warm_us;
        out.fault = r.fault;
        rp.deliver(std::move(out));
      });
  SwapRun run{request.model, std::move(req.model), std::move(*inputs), std::move(req.peer),
              std::move(req.evict), std::move(req.fallback), req.profile};
  if (!self->state.engine->swap_run(std::move(run), std::move(done))) {
    self->state.pending.erase(self->state.next_job - 1);
    if (self->state.instruments) self->state.instruments->count_rejected(request.model);
    bad.error = unavailable("the queue of " + self->state.engine->device_info().name + " on node " +
                            self->state.node + " is full");
    rp.deliver(std::move(bad));
  }
  return rp;
}

// A restart first destroys the broken engine, then opens the device again: the old engine's device
// memory (its whole reservation) must be free before the new one reserves, as one physical device
// backs both. Both steps block (joining the old engine's worker, whose queued jobs answer with the
// fault through `pending`; opening a device and measuring its copy elbow), so they run on a thread
// of their own and the new engine arrives as a job completion. Meanwhile the executor answers every
// job as unavailable; the router sends it none, having marked the device down.
caf::result<device_report> restart(executor_pointer self) {
  auto& st = self->state;
  if (!st.reopen) return to_caf(unsupported("this executor cannot be restarted (no device factory)"));
  if (st.restarting) return to_caf(unavailable("executor " + st.device + " is already restarting"));
  st.restarting = true;
  using Fresh = Result<std::unique_ptr<ExecutorEngine>>;
  auto rp = self->make_response_promise<device_report>();
  auto done = on_engine_done<Fresh>(self, [self, rp](Fresh& fresh) mutable {
    self->state.restarting = false;
    if (!fresh.ok()) {
      rp.deliver(to_caf(fresh.error().with_context("restarting " + self->state.device)));
      return;
    }
    self->state.engine = std::shared_ptr<ExecutorEngine>(std::move(*fresh));
    report_memory(self);
    rp.deliver(report_device(*self->state.engine));
  });
  std::thread([old = std::move(st.engine), reopen = st.reopen, done = std::move(done)]() mutable {
    old.reset();
    done(reopen());
  }).detach();
  return rp;
}

gpu_executor_actor::behavior_type executor_behavior(executor_pointer self, std::shared_ptr<ExecutorEngine> engine,
                                                    std::string node, NodeInstruments* instruments,
                                                    engine_factory reopen) {
  self->state.engine = std::move(engine);
  self->state.device = self->state.engine->device_info().name;
  self->state.reopen = std::move(reopen);
  self->state.node = std::move(node);
  self->state.instruments = instruments;
  return {
      // -- models --------------------------------------------------------------------------------
      [self](bind_model& b) -> caf::result<std::string> {
        if (!self->state.engine) return to_caf(no_engine(self));
        auto rp = self->make_response_promise<std::string>();
        auto done = on_engine_done<Status>(self, [self, rp](Status& st) mutable {
          report_memory(self);
          if (!st.ok()) {
            rp.deliver(to_caf(st.error()));
            return;
          }
          rp.deliver(self->state.device);
        });
        self->state.engine->bind(b.key, std::move(b.model), std::move(done));
        return rp;
      },
      [self](unload_atom, const model_key& key) -> caf::result<bool> {
        if (!self->state.engine) return true;  // no engine, nothing on the device
        auto rp = self->make_response_promise<bool>();
        auto done = on_engine_done<bool>(self, [self, rp](bool&) mutable {
          report_memory(self);
          rp.deliver(true);
        });
        self->state.engine->unbind(key, [done] { done(true); });
        return rp;
      },
      // -- requests ------------------------------------------------------------------------------
      [self](infer_request& req) -> caf::result<infer_reply> { return infer(self, req); },
      [self](swap_request& req) -> caf::result<swap_reply> { return swap(self, req); },
      [self](weights_atom, const model_key& key) -> weights_lease {
        if (!self->state.engine) return {};
        return {self->state.engine->weights_of(key)};
      },
      [self](restart_atom) -> caf::result<device_report> { return restart(self); },
      [self](status_atom) -> executor_status {
        if (!self->state.engine) return {{self->state.device, 0, 0}, {}, 0, 0, 0, 0};
        const auto& e = *self->state.engine;
        const auto mem = e.engine_memory();
        return {report_device(e), e.bound(), e.queued(), mem.pool_capacity, mem.pool_free, e.group_bytes()};
      },
      // -- engine completions --------------------------------------------------------------------
      [self](executor_job_done& done) {
        auto it = self->state.pending.find(done.job);
        if (it == self->state.pending.end()) return;  // cannot happen: ids are never reused
        auto then = std::move(it->second);
        self->state.pending.erase(it);
        then(std::move(done.result));
      },
  };
}

}  // namespace

gpu_executor_actor spawn_gpu_executor(caf::actor_system& sys, std::unique_ptr<ExecutorEngine> engine, std::string node,
                                      NodeInstruments* instruments, engine_factory reopen) {
  return sys.spawn(executor_behavior, std::shared_ptr<ExecutorEngine>(std::move(engine)), std::move(node), instruments,
                   std::move(reopen));
}

}  // namespace ember
