// Spawning a node's model_cache (its messages are in actors/model_cache_interface.hpp).
#pragma once

#include <caf/fwd.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/model_cache_interface.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/transfer/transfer_peer.hpp"
#include "transport/data_plane.hpp"

namespace ember {

class BlobStore;

struct ModelCacheConfig {
  /// Host-memory cap, bytes.
  uint64_t capacity_bytes = 16ull << 30;
  /// Local model repository directory ("" = none): blob "m/v" is read from <dir>/m/v/weights.safetensors.
  std::string repository;
  /// Concurrent fetches.
  uint32_t fetch_threads = 2;
  /// Settings of the multicast hops this cache spawns (node name, timeouts).
  TransferPeerConfig transfer;
  /// The data plane peers and the repository serve on.
  transport::TransportKind transport = transport::TransportKind::tcp;
};

/// Spawns the cache over `store` (shared with the node's blob server, which serves from it).
model_cache_actor spawn_model_cache(caf::actor_system& sys, ModelCacheConfig config, std::shared_ptr<BlobStore> store,
                                    NodeInstruments* instruments);

}  // namespace ember
