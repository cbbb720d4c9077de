#include "actors/cluster/model_readiness.hpp"

#include <string>

namespace ember {

std::string_view to_string(ReadinessEvent event) {
  switch (event) {
    case ReadinessEvent::load_started:
      return "load_started";
    case ReadinessEvent::replica_ready:
      return "replica_ready";
    case ReadinessEvent::load_failed:
      return "load_failed";
    case ReadinessEvent::found_invalid:
      return "found_invalid";
    case ReadinessEvent::last_replica_lost:
      return "last_replica_lost";
    case ReadinessEvent::scaled_to_zero:
      return "scaled_to_zero";
    case ReadinessEvent::unload_requested:
      return "unload_requested";
    case ReadinessEvent::repaired:
      return "repaired";
  }
  return "?";
}

Result<ModelReadiness> next_readiness(ModelReadiness from, ReadinessEvent event) {
  using R = ModelReadiness;
  using E = ReadinessEvent;
  switch (event) {
    case E::found_invalid:
      return R::failed;
    case E::unload_requested:
      return R::unloaded;
    case E::load_started:
      if (from == R::ready) return R::ready;  // another replica of a serving model
      return R::loading;                      // from unloaded, loading or failed
    case E::replica_ready:
      return R::ready;  // a load answered (loading, ready) or a joining node adopted one (any)
    case E::load_failed:
      if (from == R::loading) return R::unloaded;
      break;
    case E::last_replica_lost:
    case E::scaled_to_zero:
      if (from == R::ready) return R::unloaded;
      break;
    case E::repaired:
      if (from == R::failed) return R::unloaded;
      break;
  }
  return internal_error("illegal readiness move: " + std::string(to_string(from)) + " --" +
                        std::string(to_string(event)) + "-->");
}

}  // namespace ember
