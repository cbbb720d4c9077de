// caller_actor (actors/gateway/caller_actor.hpp): CAF 0.17 keeps every answered request's timeout
// in a scoped actor's mailbox once it fires (checked here on a plain scoped actor, so that a CAF that
// stops doing so shows); the caller actor of a thread is made again every kCallerCalls calls, so at
// most that many ever wait there, however many calls the thread makes.
#include "actors/gateway/caller_actor.hpp"

#include <gtest/gtest.h>

#include <caf/event_based_actor.hpp>
#include <chrono>
#include <thread>

#include "tests/actors/actor_test_util.hpp"

namespace ember {
namespace caller_actor_test {

using namespace std::chrono_literals;

caf::behavior echo(caf::event_based_actor*) {
  return {[](int x) { return x; }};
}

TEST(CallerActor, StaleTimeoutsOfAnsweredCallsStayBoundedInItsMailbox) {
  auto sys = testing::make_system();
  auto e = sys->spawn(echo);
  constexpr int kCalls = 1000;
  {
    caf::scoped_actor plain{*sys};
    for (int i = 0; i < kCalls; ++i) plain->request(e, 20ms, i).receive([](int) {}, [](caf::error&) {});
    std::this_thread::sleep_for(200ms);  // every timeout fired
    EXPECT_EQ(plain->mailbox().size(), static_cast<size_t>(kCalls)) << "CAF keeps a fired timeout per answered call";
  }
  // On a thread of its own, as a front end's: its caller actor goes when the thread ends, before
  // the actor system (which waits for every actor) does.
  int answered = 0;
  size_t waiting = 0;
  std::thread front_end([&] {
    for (int i = 0; i < kCalls; ++i) {
      caller_actor(*sys)->request(e, 20ms, i).receive([&](int x) { answered += x == i; }, [](caf::error&) {});
    }
    std::this_thread::sleep_for(200ms);
    waiting = caller_actor(*sys)->mailbox().size();
  });
  front_end.join();
  EXPECT_EQ(answered, kCalls);
  EXPECT_LE(waiting, static_cast<size_t>(kCallerCalls));
  caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
}

}  // namespace caller_actor_test
}  // namespace ember
