#include "actors/loading_messages.hpp"

namespace ember {

std::string blob_key_of(const model_key& key) { return key.name + "/" + std::to_string(key.version); }

std::string_view to_string(SourceTier tier) {
  switch (tier) {
    case SourceTier::cache:
      return "cache";
    case SourceTier::local_disk:
      return "local_disk";
    case SourceTier::peer:
      return "peer";
    case SourceTier::repository:
      return "repository";
  }
  return "unknown";
}

std::string describe_source(SourceTier tier, const std::string& peer) {
  if (tier == SourceTier::peer) return "peer:" + peer;
  return std::string(to_string(tier));
}

}  // namespace ember
