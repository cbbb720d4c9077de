// The models' state in the cluster and the commands about them, between the manager and its clients
// (the gateways, the console through the admin actor): model_state as the repository index and the
// gateways see it (ModelReadiness), model_command to load or unload, slo_command to set a model's
// SLO at run time, distribute_request / distribute_result to put a model's bytes into nodes' caches
// or evict them (DistributeMode). The manager's own orders to the nodes are in
// actors/loading_messages.hpp.
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read them on
// any thread.
#pragma once

#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/loading_messages.hpp"
#include "actors/wire_inspect.hpp"
#include "base/status.hpp"

namespace ember {

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

/// State of a model version in the cluster, as the repository index and the gateways see it.
/// "unloaded" models stay registered: a request for one triggers a load (scale from zero) unless
/// it was unloaded explicitly, which the `explicitly_unloaded` flag remembers.
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

}  // namespace ember
