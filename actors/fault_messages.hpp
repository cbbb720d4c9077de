// Fault injection (issue 15): a fault_command travels from where it enters (the console's `fault`,
// through the admin actor and the manager; or a test) to the node's supervisor
// (actors/node/node_supervisor.hpp), which checks and applies it and answers what it did in words;
// fail-alloc and fault-kernel go on to the executor. Only nodes started with --allow-faults take one.
//
// Kinds and targets are enums, parsed once where the command enters (parse_fault_kind,
// parse_fault_target: the console's parse_fault, the tests' helpers), so an unknown word is refused
// there with the valid ones listed and never travels; the supervisor switches on them. What only the
// node knows (how many executors it has, whether a kind takes that target) it checks itself.
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read it on
// any thread.
#pragma once

#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace ember {

/// What a fault does; words (the console's syntax, the logs, ember_faults_injected_total{kind}) in
/// parentheses. Which target each takes:
///   kill (kill)                      router | cache | executor:N | hop   the actor dies at once; its
///                                    supervisor restarts it (hop: every multicast hop the node runs)
///   drop, delay, duplicate           router      an interposer in front of the router, for duration_ms
///                                                (0: until heal), each message with `probability`, seeded
///   heal (heal)                      router      the interposer stops
///   fail_alloc (fail-alloc)          executor:N  the next `count` device allocations fail (out of memory)
///   fault_kernel (fault-kernel)      executor:N  the device's next kernel faults (a device fault)
///   corrupt_chunk (corrupt-chunk)    data        the next `count` data frames the node's blob server
///                                                sends are corrupted after their checksum (receivers
///                                                fetch again)
///   throttle (throttle)              hops        the node's multicast hops receive at `rate` bytes/s,
///                                                for duration_ms (required)
///   stall (stall)                    hops        they receive nothing for duration_ms (required)
///   stop_heartbeats (stop-heartbeats) router     the manager's heartbeats go unanswered for duration_ms
///                                                (required): a hang without a crash
enum class FaultKind : uint8_t {
  kill,
  drop,
  delay,
  duplicate,
  heal,
  fail_alloc,
  fault_kernel,
  corrupt_chunk,
  throttle,
  stall,
  stop_heartbeats,
};
std::string_view to_string(FaultKind kind);
/// The kind a word names; invalid_argument "no fault kind '<word>' (kill, drop, ..., stop-heartbeats)"
/// for anything else (an empty word too).
Result<FaultKind> parse_fault_kind(std::string_view word);

/// What a fault hits: the router, the model cache, an executor (fault_command::executor says which),
/// the node's multicast hops as actors (hop: kill), the data plane's sends (data) or the hops' receive
/// rate (hops). Words: "router", "cache", "executor:N", "hop", "data", "hops".
enum class FaultTarget : uint8_t { router, cache, executor, hop, data, hops };

struct fault_command;

/// The target's word: "executor:<executor>" for an executor, the target's word otherwise.
std::string target_name(const fault_command& f);
/// Sets f.target (and f.executor, for "executor:N") from a word; invalid_argument "a fault targets
/// router, cache, executor:N, hop, data or hops, not '<word>'" for anything else, or for an N that is
/// not a number. Whether the node has executor N is the node's to check.
Status parse_fault_target(fault_command& f, std::string_view word);

/// A fault injected on purpose into a node started with --allow-faults (the console's `fault`, the
/// fault-injection tests and the chaos benchmark). The node's supervisor checks and applies it and
/// answers what it did.
struct fault_command {
  FaultKind kind = FaultKind::kill;
  FaultTarget target = FaultTarget::router;
  uint32_t executor = 0;  // target executor: its index on the node
  double probability = 1.0;
  uint64_t duration_ms = 0;
  uint64_t delay_ms = 0;
  uint64_t count = 1;
  uint64_t seed = 0;
  uint64_t rate = 0;  // throttle: bytes per second
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fault_command& x) {
  return f(caf::meta::type_name("fault_command"), x.kind, x.target, x.executor, x.probability, x.duration_ms,
           x.delay_ms, x.count, x.seed, x.rate);
}

}  // namespace ember
