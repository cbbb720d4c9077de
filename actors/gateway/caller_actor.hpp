// The scoped actor a front-end thread asks actors through (GatewayClient): one per thread and actor
// system, made again every kCallerCalls calls.
//
// Why made again: in CAF 0.17 a blocking actor's request timeout is never cancelled. When the answer
// comes first, the timeout still fires later, as an error response nobody awaits; a blocking actor
// skips such a message and keeps it in its mailbox, and every later receive walks past all of them.
// A thread serving requests for hours would keep one per request and slow down with each (a
// gateway under the network nemesis, bench/nemesis.py, served 1,229 requests a second in its first
// minute and 288 in its fourth). A fresh actor leaves the old one's timeouts to a dead mailbox: at
// most kCallerCalls of them are ever walked past.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <cstdint>
#include <memory>

namespace ember {

/// Calls between two scoped actors of one thread: a receive walks past at most this many stale
/// timeouts, and making a scoped actor (microseconds) is paid once per this many calls.
inline constexpr uint32_t kCallerCalls = 128;

/// This thread's scoped actor for one call (a request and its receive) in `sys`.
inline caf::scoped_actor& caller_actor(caf::actor_system& sys) {
  thread_local caf::actor_system* owner = nullptr;
  thread_local std::unique_ptr<caf::scoped_actor> self;
  thread_local uint32_t calls = 0;
  if (!self || owner != &sys || ++calls >= kCallerCalls) {
    self.reset();  // its mailbox (and the timeouts still to come to it) goes with it
    self = std::make_unique<caf::scoped_actor>(sys);
    owner = &sys;
    calls = 0;
  }
  return *self;
}

}  // namespace ember
