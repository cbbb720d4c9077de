#include "actors/model_messages.hpp"

namespace ember {

std::string_view to_string(ModelReadiness readiness) {
  switch (readiness) {
    case ModelReadiness::unloaded:
      return "unloaded";
    case ModelReadiness::loading:
      return "loading";
    case ModelReadiness::ready:
      return "ready";
    case ModelReadiness::failed:
      return "failed";
  }
  return "unknown";
}

std::string_view to_string(DistributeMode mode) {
  switch (mode) {
    case DistributeMode::chain:
      return "chain";
    case DistributeMode::unicast:
      return "unicast";
    case DistributeMode::automatic:
      return "auto";
  }
  return "unknown";
}

Result<DistributeMode> parse_distribute_mode(std::string_view word) {
  for (auto mode : {DistributeMode::chain, DistributeMode::unicast, DistributeMode::automatic}) {
    if (word == to_string(mode)) return mode;
  }
  return invalid_argument("mode must be chain, unicast or auto, not '" + std::string(word) + "'");
}

}  // namespace ember
