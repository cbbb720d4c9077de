// Spawning a transfer_peer (the hop of a multicast chain; see transfer_peer_interface.hpp). Only the
// node's model_cache spawns one, for a fetch_blob with a transfer id; the hop ends by sending the
// cache a cache_fetch_done with the verified bytes or the error, and then quits.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/model_cache_interface.hpp"
#include "actors/transfer_peer_interface.hpp"
#include "base/work_queue.hpp"
#include "transport/data_plane.hpp"
#include "transport/growing_blob.hpp"

namespace ember {

class TransferInstruments;

/// Where a hop shows the prefix it has verified so far, so the node's blob server can forward it to
/// the next hop while it is still arriving (the node's BlobStore implements it). Thread-safe.
class GrowingBlobShelf {
 public:
  virtual ~GrowingBlobShelf() = default;
  /// Serves `blob` under `key` while no complete copy exists.
  virtual void put_growing(const std::string& key, std::shared_ptr<const transport::GrowingBlob> blob) = 0;
  /// Withdraws it, if `key` still shows `blob`.
  virtual void erase_growing(const std::string& key, const transport::GrowingBlob* blob) = 0;
};

/// Fault injection at run time (a node's `fault NODE throttle|stall`), shared by the node's hops:
/// until `until_ns` (steady clock, nanoseconds since its epoch), each chunk a hop receives is held
/// back, at `rate` bytes per second, or (rate 0: a stall) until `until_ns`.
struct HopFault {
  std::atomic<int64_t> until_ns{0};
  std::atomic<uint64_t> rate{0};
};

struct TransferPeerConfig {
  /// This node's name, as the controller knows it.
  std::string node;
  /// How often the hop reports its offset. Shorter finds stalls sooner; each report is one small
  /// message to the manager.
  std::chrono::milliseconds progress_interval{250};
  /// An upstream that sends nothing for this long is given up (the hop asks for another).
  std::chrono::milliseconds idle_timeout{5000};
  /// Fetch attempts (first plus resumes) before the hop fails.
  uint32_t max_attempts = 16;
  /// When its upstream fails and the chain controller (the manager) does not answer either (it
  /// may be restarting), the hop tries the next of the upstreams it was given (the hops before it,
  /// nearest first, then the chain's source; placement::next_upstream_after) one a second for this
  /// long before it fails: a chain goes on around a lost hop, and one from the manager's repository
  /// server resumes from the verified offset once a restarted manager serves again at the same
  /// address (manager.data_listen).
  std::chrono::milliseconds orphan_window{30'000};
  /// Socket buffer bytes of the hop's connection (0 = kernel autotuning).
  int socket_buffer_bytes = 4 << 20;
  /// The data plane's TLS (security.data_plane: tls); null: plain TCP.
  std::shared_ptr<const transport::DataTls> tls;
  /// Fault seam (tests, drills): receive at most this many bytes per second. 0 = no limit.
  uint64_t throttle_bytes_per_s = 0;
  /// Fault injection at run time (may be null).
  std::shared_ptr<HopFault> fault;
  /// The node's metrics (same process; may be null in tests).
  TransferInstruments* instruments = nullptr;
  /// The data plane the cluster runs (transfer.transport).
  transport::TransportKind transport = transport::TransportKind::tcp;
};

/// What a hop has received: its buffer, the growing blob it shows the next hop, the verified offset.
/// The cache keeps it beside the hop's actor, so that a hop killed mid-transfer is replaced by one
/// that goes on from the verified offset over the same buffer, while the next hop keeps pulling
/// from the same growing blob. Opaque outside transfer_peer.cpp.
struct HopBuffer;

struct SpawnedHop {
  transfer_peer_actor actor;
  std::shared_ptr<HopBuffer> buffer;
};

/// `req.sources[0]` is the first upstream (the rest: those it tries while its controller is away);
/// `req.controller` the chain controller; `shelf` shows the
/// verified prefix to the node's blob server. The hop's fetch attempts (blocking, one at a time
/// per buffer, also across a hop and its replacement) run on `hops`, the node's hop queue, which
/// must outlive the actor. `resume`: a dead hop's buffer of the same request, to go on from.
SpawnedHop spawn_transfer_peer(caf::actor_system& sys, TransferPeerConfig config, fetch_blob req,
                               std::shared_ptr<GrowingBlobShelf> shelf, model_cache_actor cache, WorkQueue& hops,
                               std::shared_ptr<HopBuffer> resume = nullptr);

/// Bytes of the blob the hop has verified so far.
uint64_t verified_bytes(const HopBuffer& hop);

/// Fails the growing blob the hop shows the next hop and withdraws it: a dead hop that will not be
/// replaced (its next hop then asks the controller for another upstream).
void abandon_hop(HopBuffer& hop, const Error& why);

}  // namespace ember
