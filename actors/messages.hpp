// The message types the actors exchange, across processes as well as within one: small structs
// with CAF 0.17 `inspect` overloads. Every type here is serializable and registered once in
// actors/type_ids.hpp. Model bytes never ride these messages (they move over the data plane,
// transport/); request tensors do, since a request and its answer are what the warm path carries.
//
// Pure data; anyone may build and read them on any thread.
#pragma once

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/model_key.hpp"
#include "base/host_port.hpp"
#include "base/status.hpp"
#include "transport/ticket.hpp"

namespace ember::transport {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Ticket& x) {
  return f(caf::meta::type_name("ticket"), x.receiver, x.not_after, x.mac);
}

}  // namespace ember::transport

namespace ember {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, HostPort& x) {
  return f(caf::meta::type_name("host_port"), x.host, x.port);
}

/// Where a node got a model's bytes: the cold-start source tiers, cheapest first (Flashpoint §2.5:
/// own memory, then local disk, then a peer's memory, then the repository). Words, for logs,
/// metrics labels and the HTTP API: "cache", "local_disk", "peer", "repository".
enum class SourceTier : uint8_t { cache, local_disk, peer, repository };
std::string_view to_string(SourceTier tier);
/// "peer:<name>" for a peer, the tier's word otherwise (logs and the distribute API).
std::string describe_source(SourceTier tier, const std::string& peer);

/// A model version's readiness in the cluster, as the repository index and the gateways see it
/// (the manager's ModelRegistry owns the transitions). Words: "unloaded", "loading", "ready",
/// "failed".
enum class ModelReadiness : uint8_t { unloaded, loading, ready, failed };
std::string_view to_string(ModelReadiness readiness);

/// How a distribution reaches its receivers: chained multicast (one chain per holder), unicast
/// (each pulls from a holder directly) or automatic (chain for two or more receivers). Words:
/// "chain", "unicast", "auto".
enum class DistributeMode : uint8_t { chain, unicast, automatic };
std::string_view to_string(DistributeMode mode);
/// invalid_argument "mode must be chain, unicast or auto, not '<word>'" for anything else.
Result<DistributeMode> parse_distribute_mode(std::string_view word);

/// model_key (actors/model_key.hpp) in messages.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_key& x) {
  return f(caf::meta::type_name("model_key"), x.name, x.version);
}

/// The data-plane key of a version's weights: "<name>/<version>".
std::string blob_key_of(const model_key& key);

/// A tensor in a request or an answer: dtype is gpu::DType's value, data is dense row-major bytes.
struct tensor_msg {
  std::string name;
  uint8_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_msg& x) {
  return f(caf::meta::type_name("tensor_msg"), x.name, x.dtype, x.shape, x.data);
}

/// An inference request on the warm path: gateway -> node_router -> gpu_executor.
struct infer_request {
  model_key model;
  /// The client's request id (echoed in the answer), may be empty.
  std::string id;
  std::vector<tensor_msg> inputs;
  /// Outputs the client asked for by name; empty means all.
  std::vector<std::string> outputs;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, infer_request& x) {
  return f(caf::meta::type_name("infer_request"), x.model, x.id, x.inputs, x.outputs);
}

struct infer_reply {
  model_key model;
  std::string id;
  std::vector<tensor_msg> outputs;
  /// Which node and device answered.
  std::string node;
  std::string device;
  /// Time the request waited in the executor's queue and the time it ran, microseconds.
  uint64_t queue_us = 0;
  uint64_t compute_us = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, infer_reply& x) {
  return f(caf::meta::type_name("infer_reply"), x.model, x.id, x.outputs, x.node, x.device, x.queue_us, x.compute_us);
}

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

/// A pipeline stage (Flashpoint's partitioned cold start): layers [first_layer, last_layer) of
/// `model`. The node carries this typed key (its router's stage replicas, its stage host's flow);
/// wire() is the model_key the stage is served under across processes, "<name>#<first>-<last>" at
/// the model's version (gpu::stage_name, as gpu::Model::stage names the stage; model names never
/// hold '#'): the manager places, reports and unloads stages by it, gateways and upstream stages
/// address them by it (pipeline_hop::stage, credit_atom), so it stays a model_key on the wire.
struct stage_key {
  model_key model;
  uint32_t first_layer = 0;
  uint32_t last_layer = 0;

  model_key wire() const;
  friend bool operator==(const stage_key& a, const stage_key& b) {
    return a.model == b.model && a.first_layer == b.first_layer && a.last_layer == b.last_layer;
  }
  friend bool operator<(const stage_key& a, const stage_key& b) {
    if (!(a.model == b.model)) return a.model < b.model;
    return a.first_layer != b.first_layer ? a.first_layer < b.first_layer : a.last_layer < b.last_layer;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_key& x) {
  return f(caf::meta::type_name("stage_key"), x.model, x.first_layer, x.last_layer);
}

/// stage_key{model, first, last}.wire(): the model_key a node serves that stage under.
model_key stage_key_of(const model_key& model, uint32_t first, uint32_t last);

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

/// One stage of a pipeline: the actor serving it (the stage host of its node, a stage_host_actor:
/// node_report::stages) and the stage's key (stage_key::wire()).
struct pipeline_hop {
  caf::actor router;
  model_key stage;
  std::string node;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pipeline_hop& x) {
  return f(caf::meta::type_name("pipeline_hop"), x.router, x.stage, x.node);
}

/// Carried tensors handed to the next stage over the data plane: the upstream node's blob server
/// holds their bytes, concatenated in order, as blob `key` (`sizes` bytes each, SHA-256 `sha256` in
/// hex) until the downstream took them; the request's inputs then carry names, dtypes and shapes
/// only. An empty key: the tensors ride in the message itself.
struct tensor_handoff {
  HostPort from;
  std::string key;
  std::vector<uint64_t> sizes;
  std::string sha256;
  transport::Ticket ticket;  // issued by the upstream for the downstream, when the data plane needs tickets
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_handoff& x) {
  return f(caf::meta::type_name("tensor_handoff"), x.from, x.key, x.sizes, x.sha256, x.ticket);
}

/// A request travelling a pipeline: gateway -> first stage's router -> ... -> last stage's router,
/// each answering its upstream with the last stage's infer_reply. `request.model` is the whole
/// model; `request.inputs` are the tensors carried: the client's inputs, then every value a later
/// stage reads, under their value names. `seq` numbers the requests one upstream sends, so the
/// downstream's credit_atom names which request it took.
struct stage_request {
  infer_request request;
  std::vector<pipeline_hop> hops;
  uint32_t at = 0;
  caf::actor upstream;  // the router that sent it (null from the gateway): it gets the credit
  uint64_t seq = 0;
  tensor_handoff handoff;  // between stages: where the carried tensors' bytes wait
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_request& x) {
  return f(caf::meta::type_name("stage_request"), x.request, x.hops, x.at, x.upstream, x.seq, x.handoff);
}

/// A whole workflow request for one node (issue 18): it runs the steps itself, each on the device
/// its scheduler picks, the intermediates left on that device for the steps that read them. The
/// gateway sends the workflow as the manager read it and the model version of each step.
struct workflow_request {
  std::string name;
  std::string json;
  std::vector<model_key> models;  // per step of the parsed workflow, in its order
  infer_request request;          // model {name, 1}; inputs named as the workflow's; outputs asked
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, workflow_request& x) {
  return f(caf::meta::type_name("workflow_request"), x.name, x.json, x.models, x.request);
}

/// One device of a node, as the manager sees it.
struct device_report {
  std::string name;
  uint64_t memory_bytes = 0;
  uint64_t used_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_report& x) {
  return f(caf::meta::type_name("device_report"), x.name, x.memory_bytes, x.used_bytes);
}

/// What a node tells the manager when it joins (and rejoins).
/// A fingerprint of a node's ready replicas (order-independent), which its router answers the
/// manager's heartbeat with: when it differs from what the manager last saw, the manager asks for a
/// fresh node_report (a load that ended while the manager was away, a replica lost to a fault).
uint64_t replicas_fingerprint(const std::vector<model_key>& replicas);

struct node_report {
  std::string name;
  /// Where this node's blob server listens (peers fetch cached models from it).
  HostPort data;
  std::vector<device_report> devices;
  uint64_t cache_capacity = 0;
  uint64_t cache_used = 0;
  /// Models whose bytes are in the cache, and models bound to a device (replicas).
  std::vector<model_key> cached;
  std::vector<model_key> replicas;
  /// The node's rack ("" = unknown): multicast chains visit a rack's nodes together.
  std::string rack;
  /// Where the node's router is published (node.listen) for direct connections: gateways dial it
  /// so that their requests do not ride through the manager's process. Port 0: not published.
  HostPort control;
  /// Set by the manager in its answers (nodes_atom): the console drained the node, nothing is
  /// placed there any more.
  bool draining = false;
  /// The node's stage host (a stage_host_actor, actors/stage_host_interface.hpp): what pipelines
  /// address the stages bound on this node through (pipeline_hop::router). Null: none.
  caf::actor stages;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_report& x) {
  return f(caf::meta::type_name("node_report"), x.name, x.data, x.devices, x.cache_capacity, x.cache_used, x.cached,
           x.replicas, x.rack, x.control, x.draining, x.stages);
}

/// State of a model version in the cluster, as the repository index and the gateways see it.
/// "unloaded" models stay registered: a request for one triggers a load (scale from zero) unless
/// it was unloaded explicitly, which the `explicitly_unloaded` flag remembers.
/// The console's `slo`: sets (deadline_us > 0) or clears (0) the SLO of a model's versions (version
/// 0: every version) at run time, overriding model.json's declaration and the nodes' binding.slo_*
/// on every replica, now and for replicas placed later.
struct slo_command {
  model_key model;
  slo_setting slo;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, slo_command& x) {
  return f(caf::meta::type_name("slo_command"), x.model, x.slo);
}

struct model_state {
  model_key model;
  ModelReadiness state = ModelReadiness::unloaded;
  /// Why it failed, or why it is unloaded.
  std::string reason;
  bool explicitly_unloaded = false;
  uint32_t replicas = 0;
  /// The SLO set at run time (slo_command), else the one model.json declares; deadline 0: neither
  /// (each node derives one from the model's warm latency, binding.slo_factor).
  slo_setting slo;
  /// True when `slo` was set at run time.
  bool slo_set = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_state& x) {
  return f(caf::meta::type_name("model_state"), x.model, x.state, x.reason, x.explicitly_unloaded, x.replicas, x.slo,
           x.slo_set);
}

/// Request from a client of the manager (gateway, console) to load or unload a model; version 0 is
/// every version for unload and the latest for load.
struct model_command {
  model_key model;
  /// load: replicas to keep (0 = at least one). More than one node needing the bytes at once
  /// receive them by chained multicast.
  uint32_t replicas = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_command& x) {
  return f(caf::meta::type_name("model_command"), x.model, x.replicas);
}

/// One hop of a multicast chain in flight, as the console's `transfers` shows it.
struct hop_progress {
  uint64_t transfer_id = 0;
  std::string model;
  std::string hop;       // the receiving node
  std::string upstream;  // the node or source it pulls from
  uint64_t offset = 0;   // bytes it verified so far
  uint64_t blob_bytes = 0;
  std::string state;  // receiving, done, failed, spliced_out
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hop_progress& x) {
  return f(caf::meta::type_name("hop_progress"), x.transfer_id, x.model, x.hop, x.upstream, x.offset, x.blob_bytes,
           x.state);
}

/// A fault injected on purpose into a node started with --allow-faults (the console's `fault`, the
/// fault-injection tests and the chaos benchmark). The node's supervisor checks and applies it and
/// answers what it did. Kinds and targets (actors/node/node_supervisor.hpp):
///   kill        router | cache | executor:N   the actor dies at once; its supervisor restarts it
///   drop, delay, duplicate   router      an interposer in front of the router, for duration_ms
///                                        (0: until heal), each message with `probability`, seeded
///   fail-alloc  executor:N               the next `count` device allocations fail (out of memory)
///   fault-kernel executor:N              the device's next kernel faults (a device fault)
///   heal        router                   the interposer stops
///   corrupt-chunk data                   the next `count` data frames the node's blob server sends
///                                        are corrupted after their checksum (receivers fetch again)
///   throttle    hops                     the node's multicast hops receive at `rate` bytes/s, for
///                                        duration_ms (required)
///   stall       hops                     they receive nothing for duration_ms (required)
///   stop-heartbeats router               the manager's heartbeats go unanswered for duration_ms
///                                        (required): a hang without a crash
struct fault_command {
  std::string kind;
  std::string target;
  double probability = 1.0;
  uint64_t duration_ms = 0;
  uint64_t delay_ms = 0;
  uint64_t count = 1;
  uint64_t seed = 0;
  uint64_t rate = 0;  // throttle: bytes per second
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fault_command& x) {
  return f(caf::meta::type_name("fault_command"), x.kind, x.target, x.probability, x.duration_ms, x.delay_ms, x.count,
           x.seed, x.rate);
}

/// Put a model's bytes into the host caches of `nodes` (empty: every node that lacks them) without
/// binding a device ("distribute"), or drop them from those caches ("evict"; pinned bytes stay).
struct distribute_request {
  model_key model;
  std::vector<std::string> nodes;
  /// distribute: chain (the default), unicast or automatic.
  DistributeMode mode = DistributeMode::chain;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, distribute_request& x) {
  return f(caf::meta::type_name("distribute_request"), x.model, x.nodes, x.mode);
}

/// What a distribute or evict did, node by node.
struct distribute_result {
  model_key model;
  /// What a distribution did (chain or unicast: automatic is resolved); ignored for an eviction.
  DistributeMode mode = DistributeMode::chain;
  /// This is the answer of an evict.
  bool evicted = false;
  uint64_t blob_bytes = 0;
  /// From the request to the last receiver's verified digest.
  double seconds = 0;
  /// The chains as "source -> a -> b" (chain mode).
  std::vector<std::string> chains;
  /// One per node: device is empty; source says where its bytes came from.
  std::vector<replica_info> nodes;
  /// "node: error" for the nodes that failed.
  std::vector<std::string> errors;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, distribute_result& x) {
  return f(caf::meta::type_name("distribute_result"), x.model, x.mode, x.evicted, x.blob_bytes, x.seconds, x.chains,
           x.nodes, x.errors);
}

/// Requests in flight on one node (a load_report's model_load::in_flight).
struct node_count {
  uint64_t node_id = 0;
  uint32_t count = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_count& x) {
  return f(caf::meta::type_name("node_count"), x.node_id, x.count);
}

/// One model's counters in a load_report: what one gateway saw since its previous report (arrivals,
/// completions and their execution time) and what it holds now (in flight, held).
struct model_load {
  model_key model;
  uint64_t arrivals = 0;     // requests received
  uint64_t completions = 0;  // requests answered by a replica
  uint64_t busy_us = 0;      // their execution time on the device (infer_reply::compute_us), summed
  uint32_t ongoing = 0;      // sent to a replica and not answered yet, plus held
  uint32_t queued = 0;       // held at the gateway: no replica yet (a cold start runs)
  /// Of the requests in flight, how many on each node (only nonzero counts): the manager drains a
  /// replica it scales down until none is left there.
  std::vector<node_count> in_flight;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_load& x) {
  return f(caf::meta::type_name("model_load"), x.model, x.arrivals, x.completions, x.busy_us, x.ongoing, x.queued,
           x.in_flight);
}

/// A gateway's report to the manager every report_interval: the models it saw since the last one,
/// and those with requests still in flight (a model that went quiet is reported once with zeros).
/// The manager's autoscaler never sees individual requests.
struct load_report {
  std::string reporter;  // unique per gateway ("<host>:<pid>" or the test's name)
  std::vector<model_load> models;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, load_report& x) {
  return f(caf::meta::type_name("load_report"), x.reporter, x.models);
}

}  // namespace ember
