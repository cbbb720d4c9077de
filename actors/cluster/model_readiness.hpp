// Model readiness: the lifecycle of one model version in the cluster (ModelReadiness, in
// actors/model_messages.hpp, is what gateways and the repository API see). The cluster manager's
// ModelRegistry is its only driver: it turns what happens (a load starts, a node answers, a node
// is lost, a scan reads the files, a user unloads) into events and asks next_readiness() where each
// leads. next_readiness() is the one transition function: every move not drawn below is rejected
// with ErrorCode::internal naming the state and the event ("illegal readiness move: ready
// --load_failed-->"). Such a move is a programmer error in the registry, which fires only the
// events its facts allow (see the registry's invariants); it logs the error, counts it and keeps
// the state. Same idea as Triton's ModelReadyState, with the moves written down in one place.
//
//               load_started            replica_ready
//   unloaded ──────────────────▶ loading ──────────────▶ ready ⟲ load_started, replica_ready
//     ▲   ▲        load_failed      │                      │     (more replicas)
//     │   └─────────────────────────┘                      │
//     └──────────── last_replica_lost, scaled_to_zero ─────┘
//
//   every state ──found_invalid──▶ failed      every state ──unload_requested──▶ unloaded
//   failed ──load_started──▶ loading           (bytes a node found bad: try again)
//   failed ──repaired──▶ unloaded              (a rescan found the files valid again)
//   unloaded, failed ──replica_ready──▶ ready  (a joining node brings a replica)
//   loading ⟲ load_started
//   Anything else is illegal.
//
// Events, as the registry fires them:
//   load_started       a node began loading a replica (also for more replicas of a ready model)
//   replica_ready      a node's replica is bound: a load answered, or a joining node adopted it
//   load_failed        the last load in flight failed (or died with its node) and no replica serves
//   found_invalid      a scan found the files invalid, or the last load in flight failed because
//                      the model's bytes are bad (corrupt, invalid, unsupported) and none serves
//   last_replica_lost  the node of the last replica left (a load still in flight elsewhere then
//                      fires load_started: ready -> unloaded -> loading)
//   scaled_to_zero     the autoscaler retired the last replica (an idle model; not an unload: the
//                      next request places one again)
//   unload_requested   unloaded on request (every replica and load dropped)
//   repaired           a rescan found valid files for a version whose files were invalid
//
// Pure: anyone, any thread; no I/O, no clock.
#pragma once

#include <cstdint>
#include <string_view>

#include "actors/model_messages.hpp"
#include "base/status.hpp"

namespace ember {

enum class ReadinessEvent : uint8_t {
  load_started,
  replica_ready,
  load_failed,
  found_invalid,
  last_replica_lost,
  scaled_to_zero,
  unload_requested,
  repaired,
};

/// "load_started", "replica_ready", ... (logs and errors).
std::string_view to_string(ReadinessEvent event);

/// Where `event` leads from `from`, as drawn in the header; ErrorCode::internal for any other move.
Result<ModelReadiness> next_readiness(ModelReadiness from, ReadinessEvent event);

}  // namespace ember
