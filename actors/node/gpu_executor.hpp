// Spawning a gpu_executor (its messages are in actors/gpu_executor_interface.hpp).
#pragma once

#include <caf/fwd.hpp>
#include <functional>
#include <memory>
#include <string>

#include "actors/gpu_executor_interface.hpp"
#include "actors/node/node_instruments.hpp"
#include "base/status.hpp"
#include "base/work_queue.hpp"

namespace ember {

/// Builds a fresh engine over a reopened device, for restart_atom.
using engine_factory = std::function<Result<std::unique_ptr<ExecutorEngine>>()>;

class InlineRuns;

/// Where an executor offers its engines to front-end threads (actors/node/inline_runs.hpp): it
/// attaches each engine it adopts as device `device`. Empty: no inline runs.
struct InlineSlot {
  std::shared_ptr<InlineRuns> runs;
  uint32_t device = 0;
};

/// Spawns an executor over `engine`, which it owns from then on. `node` names the node in replies;
/// `instruments` (outliving the actor) receives queue and compute durations per model.
/// `maintenance` (the node's; it must outlive the actor, i.e. be destroyed only after the actor's
/// state is) runs restarts and destroys every engine the executor lets go, its last one included,
/// so an engine is never joined on an actor's thread or on its own worker. `reopen` (may be empty:
/// restart then fails) builds the replacement engine after a fault, on `maintenance`.
gpu_executor_actor spawn_gpu_executor(caf::actor_system& sys, std::unique_ptr<ExecutorEngine> engine, std::string node,
                                      NodeInstruments* instruments, WorkQueue& maintenance, engine_factory reopen = {},
                                      InlineSlot inline_slot = {});

/// The replacement of an executor that died (its supervisor spawns it): no engine yet, so it answers
/// every job as unavailable until its owner sends restart_atom, which builds one with `reopen` on
/// `maintenance` (by then the dead executor's engine, destroyed on that serial queue, freed the
/// device). `device` names the device meanwhile.
gpu_executor_actor spawn_replacement_executor(caf::actor_system& sys, std::string device, std::string node,
                                              NodeInstruments* instruments, WorkQueue& maintenance,
                                              engine_factory reopen, InlineSlot inline_slot = {});

}  // namespace ember
