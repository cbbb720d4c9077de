// The actor system configuration of a benchmark that runs a node in its own process (no network):
// built once, shared by every actor system the benchmark starts in turn.
#pragma once

#include <caf/actor_system_config.hpp>

#include "actors/actor_system.hpp"

namespace ember::bench {

inline caf::actor_system_config& in_process_system_config() {
  static caf::actor_system_config* cfg = [] {
    auto* c = new caf::actor_system_config();
    ActorSystemOptions ao;
    ao.network = false;
    configure_actor_system(*c, ao);
    return c;
  }();
  return *cfg;
}

}  // namespace ember::bench
