// Deterministic actor tests: an actor system on CAF's test coordinator (scheduler.policy =
// testing), configured as Ember's processes configure theirs otherwise. Every actor runs on the
// test's thread, one message at a time, only when the test says run(); the actor clock
// (`self->clock().now()`, delayed messages, request timeouts) stands still until the test
// advances it. So a test of a 60 s backoff runs in microseconds and cannot be flaky.
//
// Rules for tests on it: no thread but the test's may send to an actor (the coordinator is not
// thread-safe): actors under test get WorkQueues with threads = 0 (their offloaded work runs
// inline) and fake collaborators that are actors too. Each request the test makes goes through a
// small client actor whose answer lands in an Answer the test reads after run().
#pragma once

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <chrono>
#include <memory>
#include <optional>

#include "actors/actor_system.hpp"
#include "actors/errors.hpp"
#include "base/status.hpp"

namespace ember::testing {

/// What a request made by the test got: nothing yet, a value or an error.
template <class T>
struct Answer {
  std::optional<Result<T>> result;
  bool done() const { return result.has_value(); }
  bool ok() const { return done() && result->ok(); }
  T& value() { return result->value(); }
  const Error& error() const { return result->error(); }
};

class Deterministic {
 public:
  Deterministic() {
    ActorSystemOptions o;
    o.network = false;
    configure_actor_system(cfg_, o);
    cfg_.set("scheduler.policy", caf::atom("testing"));
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
  }
  ~Deterministic() {
    // Actors left over get their exit messages delivered before the system goes.
    sched_->run();
  }

  caf::actor_system& sys() { return *sys_; }
  caf::scheduler::test_coordinator& sched() { return *sched_; }

  /// Delivers messages until none is left; returns how many.
  size_t run() { return sched_->run(); }
  /// Moves the actor clock forward by `d` (firing the delayed messages and timeouts now due), then
  /// runs. Returns the timeouts fired.
  template <class Rep, class Period>
  size_t advance(std::chrono::duration<Rep, Period> d) {
    const size_t fired = sched_->advance_time(std::chrono::duration_cast<caf::timespan>(d));
    run();
    return fired;
  }
  /// The actor clock's time.
  caf::actor_clock::time_point now() { return sys_->clock().now(); }

  /// Sends `msg...` to `dest` as a request (no timeout) from a client actor; run() delivers it and
  /// the answer.
  template <class T, class Handle, class... Ts>
  std::shared_ptr<Answer<T>> request(const Handle& dest, Ts... msg) {
    auto answer = std::make_shared<Answer<T>>();
    sys_->spawn([answer, dest, msg...](caf::event_based_actor* self) {
      self->request(dest, caf::infinite, msg...)
          .then([answer](T& x) { answer->result = std::move(x); },
                [answer](caf::error& e) { answer->result = from_caf(e); });
    });
    return answer;
  }

 private:
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
};

}  // namespace ember::testing
