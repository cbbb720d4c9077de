// actors/offload.hpp on both schedulers: the deterministic coordinator (work inline, continuation
// as a message) and the real one (work on a queue thread, continuation back on the actor, dropped
// once the actor is gone). Also checks the deterministic fixture's clock.
#include "actors/offload.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <future>
#include <thread>

#include "actors/atoms.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/deterministic.hpp"

namespace ember {
namespace offload_test {

// Doubles a number off the actor and answers with the actor's thread id when the result arrives.
caf::behavior doubler(caf::event_based_actor* self, WorkQueue* queue, std::thread::id* worker_thread,
                      std::thread::id* resumed_thread) {
  return {
      [=](int x) -> caf::result<int> {
        auto rp = self->make_response_promise<int>();
        const bool taken = offload(
            self, *queue,
            [x, worker_thread] {
              *worker_thread = std::this_thread::get_id();
              return 2 * x;
            },
            [rp, resumed_thread](int& doubled) mutable {
              *resumed_thread = std::this_thread::get_id();
              rp.deliver(doubled);
            });
        if (!taken) rp.deliver(to_caf(unavailable("queue full")));
        return rp;
      },
      resume_offloaded(),
  };
}

TEST(Offload, OnTheDeterministicCoordinatorTheWorkRunsInlineAndTheResultComesBackAsAMessage) {
  testing::Deterministic d;
  WorkQueue inline_queue({.threads = 0});
  std::thread::id worker, resumed;
  auto a = d.sys().spawn(doubler, &inline_queue, &worker, &resumed);
  auto answer = d.request<int>(a, 21);
  d.run();
  ASSERT_TRUE(answer->ok());
  EXPECT_EQ(answer->value(), 42);
  EXPECT_EQ(worker, std::this_thread::get_id());
  EXPECT_EQ(resumed, std::this_thread::get_id());
}

TEST(Offload, OnRealThreadsTheWorkLeavesTheActorAndTheContinuationReturnsToIt) {
  auto sys = testing::make_system();
  WorkQueue queue;
  std::thread::id worker, resumed;
  auto a = sys->spawn(doubler, &queue, &worker, &resumed);
  auto answer = testing::ask<int>(*sys, a, std::chrono::seconds(10), 5);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ(*answer, 10);
  EXPECT_TRUE(worker != std::thread::id{});
  EXPECT_NE(worker, resumed);  // the continuation ran on a scheduler thread, not the queue's
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST(Offload, AContinuationForAnActorThatQuitIsDroppedWithItsResult) {
  auto sys = testing::make_system();
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> resumed{false};
  std::promise<void> work_done;
  {
    WorkQueue queue;
    auto a = sys->spawn([&](caf::event_based_actor* self) -> caf::behavior {
      offload(
          self, queue,
          [gate, &work_done] {
            gate.wait();
            work_done.set_value();
            return 1;
          },
          [&resumed](int&) { resumed = true; });
      return {resume_offloaded()};
    });
    caf::scoped_actor self{*sys};
    self->send_exit(a, caf::exit_reason::user_shutdown);
    self->wait_for(a);
    release.set_value();
    work_done.get_future().wait();
  }  // the queue joins: the job has finished and its continuation found no actor
  EXPECT_FALSE(resumed.load());
}

TEST(Offload, TheDeterministicClockMovesOnlyWhenTheTestAdvancesIt) {
  testing::Deterministic d;
  std::vector<caf::actor_clock::duration_type> fired_at;
  const auto start = d.now();
  d.sys().spawn([&](caf::event_based_actor* self) -> caf::behavior {
    self->delayed_send(self, std::chrono::seconds(2), tick_atom_v);
    return {[&, self](tick_atom) { fired_at.push_back(self->clock().now() - start); }};
  });
  d.run();
  EXPECT_TRUE(fired_at.empty());
  d.advance(std::chrono::milliseconds(1999));
  EXPECT_TRUE(fired_at.empty());
  d.advance(std::chrono::milliseconds(1));
  ASSERT_EQ(fired_at.size(), 1u);
  EXPECT_EQ(fired_at[0], std::chrono::seconds(2));
}

}  // namespace offload_test
}  // namespace ember
