// model_cache: one per node. Owns the host-memory copies of model bytes (weights files) within a
// byte cap, and the node's local model repository directory. Fetches what it lacks from the
// sources it is given (its own repository directory first, then peers' caches, then the cluster's
// repository, over the data plane), de-duplicating concurrent fetches of one blob, and evicts the
// least recently used unpinned blobs to make room. Only the node_router of the same process sends
// to it. Handlers never block: fetches run on the node's fetch queue and end as offload_done
// continuations (actors/offload.hpp); a multicast hop (transfer_peer) ends with cache_fetch_done.
// The cache outlives the hops it spawns: asked to exit, it stops them and quits once the last is
// down, so a process that waited for the cache may destroy the queue the hops ran on.
//
// Blob lifecycle:  absent ──fetch──▶ fetching ──ok──▶ resident ──evict (unpinned, LRU)──▶ absent
//                                        └──error──▶ absent (every waiter gets the error)
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/loading_messages.hpp"
#include "actors/offload.hpp"
#include "actors/transfer_peer_interface.hpp"
#include "model/host_buffer.hpp"
#include "transport/checksum.hpp"

namespace ember {

class BlobStore;

/// Make the weights of `model` resident.
struct fetch_blob {
  model_key model;
  std::string blob_key;
  uint64_t blob_bytes = 0;
  std::vector<blob_source> sources;
  /// Non-zero: this node is a hop of multicast chain `transfer_id`; sources[0] is its upstream and
  /// a transfer_peer pulls from it under the direction of `controller` (a chain_controller_actor).
  uint64_t transfer_id = 0;
  caf::actor controller;
  /// Only this share of the blob: a pipeline stage's header and layer range, each layer checked
  /// against its digest (a mismatch is corrupt and the next source is tried). The buffer has the
  /// whole blob's size with the part at its file offsets (the pages of the rest are never touched);
  /// the cache holds it under part_key_of(blob_key, part), apart from the whole blob, and counts
  /// the part's bytes against its cap. Never a multicast hop.
  std::optional<blob_part> part;
  /// Receive no faster than this (bytes per second; 0 = no limit), paced per chunk: a pipeline
  /// member's background completion. Not for the node's own repository (local disk).
  uint64_t max_bytes_per_s = 0;
  /// A whole blob of which the share `reuse` (a stage's, under part_key_of) is resident: its bytes
  /// are copied, only the rest is fetched, and every layer of `layers` is checked (see
  /// load_replica). When the share is not resident, the whole blob is fetched as usual.
  std::optional<blob_part> reuse;
  std::optional<blob_part> layers;
};

/// The cache key of a stage's share of blob `blob_key`: "<blob_key>#<first>-<last>".
std::string part_key_of(const std::string& blob_key, const blob_part& part);

/// A resident blob (local only: shares the cache's buffer, which stays valid while held).
struct blob_ref {
  std::shared_ptr<const gpu::HostBuffer> bytes;
  /// Where the bytes came from, and the peer's name for a peer.
  SourceTier source = SourceTier::cache;
  std::string source_peer;
  uint64_t bytes_fetched = 0;
  uint64_t fetch_us = 0;
  /// SHA-256 of the bytes when a fetch verified it (the cache then never hashes them again).
  std::optional<transport::Digest> digest;
};

struct cache_status {
  uint64_t capacity = 0;
  uint64_t used = 0;
  std::vector<model_key> models;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cache_status& x) {
  return f(caf::meta::type_name("cache_status"), x.capacity, x.used, x.models);
}

/// The end of a multicast hop, from its transfer_peer to the cache (local only): the verified
/// bytes, or why the hop failed.
struct cache_fetch_done {
  std::string blob_key;
  Result<blob_ref> result = internal_error("no result");
};

using model_cache_actor = caf::typed_actor<
    /// Errors: out_of_memory (cannot make room under the cap), unavailable (no source answered),
    /// corrupt (a source sent bytes that fail their checksum or digest, after trying the others).
    caf::replies_to<fetch_blob>::with<blob_ref>,
    /// A newer load of a blob the cache is fetching, which the node joined to the load in flight (a
    /// new manager placed the model again): its sources, and its chain if any, are handed to the
    /// multicast hop that fetches the blob (chain_handover: the hop decides whether to follow).
    /// Nothing when no hop fetches it. A fetch_blob that joins a hop's fetch in the cache does the same.
    caf::reacts_to<handover_atom, fetch_blob>,
    /// A pinned blob is never evicted (a replica uses it); pins count.
    caf::reacts_to<pin_atom, std::string>, caf::reacts_to<unpin_atom, std::string>,
    caf::replies_to<status_atom>::with<cache_status>, caf::reacts_to<cache_fetch_done>,
    /// The continuation of a fetch (self-sent, local only).
    caf::reacts_to<offload_done>,
    /// Drops an unpinned resident blob now; false when it is pinned (a replica uses it) or absent.
    caf::replies_to<evict_atom, std::string>::with<bool>,
    /// Fault injection (from the node's supervisor, local only): ("kill-hops") kills every live
    /// multicast hop of this node, as a crash would; the cache replaces each (it goes on from its
    /// verified offset). Answers how many were killed.
    caf::replies_to<fault_atom, std::string>::with<uint32_t>>;

}  // namespace ember

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::blob_ref)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::fetch_blob)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::cache_fetch_done)
