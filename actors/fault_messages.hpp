// Fault injection (issue 15): a fault_command travels from where it enters (the console's `fault`,
// through the admin actor and the manager; or a test) to the node's supervisor
// (actors/node/node_supervisor.hpp), which checks and applies it and answers what it did in words;
// fail-alloc and fault-kernel go on to the executor. Only nodes started with --allow-faults take one.
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read it on
// any thread.
#pragma once

#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>

namespace ember {

/// A fault injected on purpose into a node started with --allow-faults (the console's `fault`, the
/// fault-injection tests and the chaos benchmark). The node's supervisor checks and applies it and
/// answers what it did. Kinds and targets (actors/node/node_supervisor.hpp):
///   kill        router | cache | executor:N   the actor dies at once; its supervisor restarts it
///   drop, delay, duplicate   router      an interposer in front of the router, for duration_ms
///                                        (0: until heal), each message with `probability`, seeded
///   fail-alloc  executor:N               the next `count` device allocations fail (out of memory)
///   fault-kernel executor:N              the device's next kernel faults (a device fault)
///   heal        router                   the interposer stops
///   corrupt-chunk data                   the next `count` data frames the node's blob server sends
///                                        are corrupted after their checksum (receivers fetch again)
///   throttle    hops                     the node's multicast hops receive at `rate` bytes/s, for
///                                        duration_ms (required)
///   stall       hops                     they receive nothing for duration_ms (required)
///   stop-heartbeats router               the manager's heartbeats go unanswered for duration_ms
///                                        (required): a hang without a crash
struct fault_command {
  std::string kind;
  std::string target;
  double probability = 1.0;
  uint64_t duration_ms = 0;
  uint64_t delay_ms = 0;
  uint64_t count = 1;
  uint64_t seed = 0;
  uint64_t rate = 0;  // throttle: bytes per second
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fault_command& x) {
  return f(caf::meta::type_name("fault_command"), x.kind, x.target, x.probability, x.duration_ms, x.delay_ms, x.count,
           x.seed, x.rate);
}

}  // namespace ember
