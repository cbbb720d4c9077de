// Spawning a node's model_cache (its messages are in actors/model_cache_interface.hpp).
#pragma once

#include <caf/fwd.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/model_cache_interface.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/transfer/transfer_peer.hpp"
#include "base/work_queue.hpp"
#include "transport/data_plane.hpp"

namespace ember {

class BlobStore;

struct ModelCacheConfig {
  /// Host-memory cap, bytes.
  uint64_t capacity_bytes = 16ull << 30;
  /// Local model repository directory ("" = none): blob "m/v" is read from <dir>/m/v/weights.safetensors.
  std::string repository;
  /// Settings of the multicast hops this cache spawns (node name, timeouts).
  TransferPeerConfig transfer;
  /// The data plane peers and the repository serve on.
  transport::TransportKind transport = transport::TransportKind::tcp;
  /// The data plane's TLS (security.data_plane: tls); null: plain TCP.
  std::shared_ptr<const transport::DataTls> tls;
};

/// Spawns the cache over `store` (shared with the node's blob server, which serves from it).
/// Fetches from the repository directory and from sources run on `fetches` (its threads are the
/// concurrent fetches), multicast hops (transfer_peer actors) on `hops`. Both queues belong to the
/// node process and must outlive the cache and every hop it spawns.
model_cache_actor spawn_model_cache(caf::actor_system& sys, ModelCacheConfig config, std::shared_ptr<BlobStore> store,
                                    NodeInstruments* instruments, WorkQueue& fetches, WorkQueue& hops);

}  // namespace ember
