// Loading a model onto a node: the manager's load_replica (a whole replica) and load_stage (a
// pipeline stage's share) to a node's router, answered with replica_info; the sources the node
// fetches the bytes from over the data plane (blob_source, tried in order, by SourceTier) and the
// byte ranges with their digests (blob_part); the SLO a replica is bound with (slo_setting). The
// router hands the sources to its model cache, and a multicast chain's hops pull along them
// (actors/transfer_peer_interface.hpp). replica_info also reports a distribution's receivers
// (actors/model_messages.hpp's distribute_result).
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read them on
// any thread. The bytes themselves never ride these messages.
#pragma once

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/wire_inspect.hpp"

namespace ember {

/// Where a node got a model's bytes: the cold-start source tiers, cheapest first (Flashpoint §2.5:
/// own memory, then local disk, then a peer's memory, then the repository). Words, for logs,
/// metrics labels and the HTTP API: "cache", "local_disk", "peer", "repository".
enum class SourceTier : uint8_t { cache, local_disk, peer, repository };
std::string_view to_string(SourceTier tier);
/// "peer:<name>" for a peer, the tier's word otherwise (logs and the distribute API).
std::string describe_source(SourceTier tier, const std::string& peer);

/// The data-plane key of a version's weights: "<name>/<version>".
std::string blob_key_of(const model_key& key);

/// Where a node can fetch a model's weights from over the data plane.
struct blob_source {
  /// peer (another node's cache) or repository (the manager's blob server).
  SourceTier kind = SourceTier::repository;
  /// The node's name for a peer, "manager" for the repository.
  std::string name;
  /// Its blob server.
  HostPort endpoint;
  /// The receiver's ticket for the blob there (transport/ticket.hpp), issued by the manager when
  /// the cluster's data plane needs tickets (security.ticket_key_file); empty otherwise.
  transport::Ticket ticket;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, blob_source& x) {
  return f(caf::meta::type_name("blob_source"), x.kind, x.name, x.endpoint, x.ticket);
}

/// One pipeline stage's share of a weights file (Flashpoint's partitioned cold start): the
/// safetensors header and the bytes of layers [first_layer, last_layer), one contiguous range of
/// the file, with the digests from the model's profile (model/model_profile.hpp) each piece is
/// checked against, so a stage verifies exactly what it holds.
struct blob_part {
  uint32_t first_layer = 0;
  uint32_t last_layer = 0;
  uint64_t header_bytes = 0;              // [0, header_bytes) of the file
  std::string header_sha256;              // hex
  uint64_t offset = 0;                    // file offset of the first layer's bytes
  std::vector<uint64_t> layer_bytes;      // per layer of the range, in order
  std::vector<std::string> layer_sha256;  // hex, per layer of the range

  uint64_t length() const {
    uint64_t n = 0;
    for (uint64_t b : layer_bytes) n += b;
    return n;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, blob_part& x) {
  return f(caf::meta::type_name("blob_part"), x.first_layer, x.last_layer, x.header_bytes, x.header_sha256, x.offset,
           x.layer_bytes, x.layer_sha256);
}

/// A model's latency objective: a request meets it when answered within deadline_us, and the model
/// meets it when `percentile` of its requests do (late binding orders its queue by it). deadline_us
/// 0: none set here.
struct slo_setting {
  uint64_t deadline_us = 0;
  double percentile = 0.98;

  bool operator==(const slo_setting&) const = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, slo_setting& x) {
  return f(caf::meta::type_name("slo_setting"), x.deadline_us, x.percentile);
}

/// Manager -> node_router: make a replica of `model` on this node (fetch its bytes unless the
/// cache holds them, then bind them to a device).
struct load_replica {
  model_key model;
  /// model.json, as read from the repository.
  std::string manifest_json;
  /// Data-plane key and size of weights.safetensors.
  std::string blob_key;
  uint64_t blob_bytes = 0;
  /// Tried in order: peers that hold the bytes in memory first, then the repository.
  std::vector<blob_source> sources;
  /// Non-zero: the node is a hop of multicast chain `transfer_id` run by `controller` (the
  /// manager), and sources[0] is its upstream (see actors/transfer_peer_interface.hpp).
  uint64_t transfer_id = 0;
  caf::actor controller;
  /// Fetch the bytes into the node's cache only; bind no device (prefetch, distribution).
  bool cache_only = false;
  /// Fetch no faster than this many bytes per second (0: as fast as the link): a pipeline member
  /// completing into a full replica in the background (autoscale.completion_rate), below cold starts.
  uint64_t max_bytes_per_s = 0;
  /// A pipeline member completing: `reuse` is its stage's share (last_layer 0: none), already in
  /// its cache, and `layers` every layer of the file with its digest (the profile's), so that only
  /// the bytes outside the share are fetched and the whole file is checked layer by layer.
  blob_part reuse;
  blob_part layers;
  /// The SLO set at run time (the console's slo), which overrides model.json's and the node's;
  /// deadline 0: none.
  slo_setting slo;
  /// profile.json of the version (`ember model profile`), as the repository holds it; empty: none.
  /// A late-binding node scales the model in bursts by it (AsyFunc, actors/node/shadow_pairs.hpp).
  std::string profile_json;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, load_replica& x) {
  return f(caf::meta::type_name("load_replica"), x.model, x.manifest_json, x.blob_key, x.blob_bytes, x.sources,
           x.transfer_id, x.controller, x.cache_only, x.max_bytes_per_s, x.reuse, x.layers, x.slo, x.profile_json);
}

/// A node_router's answer to load_replica.
struct replica_info {
  model_key model;
  std::string node;
  std::string device;
  /// Where the bytes came from (cache: already in host memory), and the peer's name for a peer.
  SourceTier source = SourceTier::cache;
  std::string source_peer;
  uint64_t bytes_fetched = 0;
  uint64_t load_us = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_info& x) {
  return f(caf::meta::type_name("replica_info"), x.model, x.node, x.device, x.source, x.source_peer, x.bytes_fetched,
           x.load_us);
}

/// Manager -> node_router: make pipeline stage `part` of `load.model` on this node. Only the
/// header and the stage's layers are fetched (load.sources, in order: each stage gets its own first
/// source where the cluster has several). Answered with a replica_info whose model is the stage key.
struct load_stage {
  load_replica load;
  blob_part part;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, load_stage& x) {
  return f(caf::meta::type_name("load_stage"), x.load, x.part);
}

}  // namespace ember
