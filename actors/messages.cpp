#include "actors/messages.hpp"

#include "model/model.hpp"

namespace ember {

uint64_t replicas_fingerprint(const std::vector<model_key>& replicas) {
  // Summed per-key hashes (FNV-1a): the order does not matter; the count is mixed in.
  uint64_t sum = replicas.size() * 0x9e3779b97f4a7c15ull;
  for (const auto& k : replicas) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : k.name) h = (h ^ c) * 1099511628211ull;
    h = (h ^ k.version) * 1099511628211ull;
    sum += h;
  }
  return sum;
}

std::string blob_key_of(const model_key& key) { return key.name + "/" + std::to_string(key.version); }

model_key stage_key::wire() const { return {gpu::stage_name(model.name, {first_layer, last_layer}), model.version}; }

model_key stage_key_of(const model_key& model, uint32_t first, uint32_t last) {
  return stage_key{model, first, last}.wire();
}

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
