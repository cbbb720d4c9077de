// Offload: how an actor runs blocking work (disk, network, a device) without blocking, in one
// typed shape. The work runs on a WorkQueue (base/work_queue.hpp) that the process owns and joins;
// its result comes back to the actor as an `offload_done` message carrying the continuation
// itself, so the continuation runs on the actor (it may touch the actor's state and deliver its
// response promises) and no table of pending jobs, job ids or void pointers is needed.
//
//   offload(self, queue, [dir] { return scan_repository(dir); },
//           [self](std::vector<RepositoryEntry>& entries) { apply_scan(self, entries); });
//
// continue_on(self, then) makes the callback for blocking code that completes on a thread of its
// own (an executor engine's worker): calling it with the result, from any thread, runs `then` on
// the actor.
//
// Every actor that offloads lists `caf::reacts_to<offload_done>` in its interface and handles it
// with `resume_offloaded()`. The continuation holds a weak reference to the actor: a job that
// finishes after the actor quit is dropped with its result, and a worker thread holds a strong
// reference only while it sends. Should that be the last one, the actor's state is destroyed on
// the worker thread: state must therefore never own the queue its own work runs on (the process
// owns the queues; an executor hands its engine to the node's maintenance queue to destroy).
//
// Local only: an offload_done never leaves its process. Handlers never block; the work never
// touches actor state; the continuation runs exactly once if the actor is alive, else never.
#pragma once

#include <caf/actor_cast.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/send.hpp>
#include <caf/weak_intrusive_ptr.hpp>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include "base/work_queue.hpp"

namespace ember {

/// The continuation of offloaded work, run by the actor that offloaded it.
struct offload_done {
  std::function<void()> resume;
};

/// The handler every offloading actor lists in its behaviour.
inline auto resume_offloaded() {
  return [](offload_done& done) {
    if (done.resume) done.resume();
  };
}

/// A callback that, called with a T on any thread, runs `then(T&)` on `self` (see the header).
template <class T, class Self, class Then>
std::function<void(T)> continue_on(Self* self, Then then) {
  caf::weak_actor_ptr weak{self->ctrl()};
  return [weak = std::move(weak), then = std::move(then)](T result) {
    auto strong = weak.lock();
    if (!strong) return;  // the actor is gone: nobody wants the result
    auto shared = std::make_shared<T>(std::move(result));
    caf::anon_send(caf::actor_cast<caf::actor>(strong), offload_done{[then, shared]() mutable { then(*shared); }});
  };
}

/// Runs `work()` on `queue`, then `then(result&)` on `self`. False, without running either, when
/// the queue refuses the job (it is full or stopping): the caller answers "busy".
template <class Self, class Work, class Then>
bool offload(Self* self, WorkQueue& queue, Work work, Then then) {
  using T = std::decay_t<std::invoke_result_t<Work&>>;
  auto done = continue_on<T>(self, std::move(then));
  return queue.try_post([work = std::move(work), done = std::move(done)]() mutable { done(work()); });
}

}  // namespace ember

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::offload_done)
