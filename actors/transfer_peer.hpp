// Spawning a transfer_peer (the hop of a multicast chain; see transfer_peer_interface.hpp). Only the
// node's model_cache spawns one, for a fetch_blob with a transfer id; the hop ends by sending the
// cache a cache_fetch_done with the verified bytes or the error, and then quits.
#pragma once

#include <memory>

#include "actors/model_cache_interface.hpp"
#include "actors/transfer_peer_interface.hpp"

namespace ember {

class BlobStore;

/// `req.sources[0]` is the first upstream; `req.controller` the chain controller.
transfer_peer_actor spawn_transfer_peer(caf::actor_system& sys, TransferPeerConfig config, fetch_blob req,
                                        std::shared_ptr<BlobStore> store, model_cache_actor cache);

}  // namespace ember
