// Replica placement and sourcing: which node gets a new replica of a model, and where that node
// should fetch the model's bytes from.
//
// Pure: anyone, any thread; no I/O, no clocks, no randomness. The cluster_manager passes a
// snapshot of its membership and gets decisions back, so the same policy runs in the live cluster,
// in deterministic tests and in a simulator.
//
// Placement (Ember's first policy; Flashpoint's Pareto-greedy placement replaces it when
// autoscaling lands): among nodes that do not already hold a replica and have a device whose free
// memory fits the model with headroom, prefer a node whose cache already holds the bytes (no
// transfer), then the one with the most free device memory, then the fewest replicas; ties go to
// the lowest node id so decisions are reproducible.
//
// Sourcing (Flashpoint §2.3's locality order): the target's own cache, then peers that hold the
// bytes in memory (fewest replicas first, a proxy for the least busy), then the repository.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/host_port.hpp"

namespace ember::placement {

struct NodeView {
  uint64_t id = 0;
  std::string name;
  /// Free bytes of the node's emptiest device.
  uint64_t max_free_device_bytes = 0;
  uint32_t replicas = 0;
  /// The node's cache holds this model's bytes / the node already serves it.
  bool caches_model = false;
  bool has_replica = false;
  /// Data-plane address of the node's blob server (port 0: unknown, not a source).
  HostPort data;
};

/// Device memory a replica needs beyond its weights (activations, scratch), as a fraction of the
/// weights. 25% covers the reference models at batch 8; a model that needs more fails its bind
/// with out_of_memory and is placed elsewhere.
inline constexpr double kActivationHeadroom = 0.25;

/// The node for a new replica of a model of `weights_bytes`, or nullopt when none fits.
/// `excluded` holds nodes that already failed this placement.
std::optional<uint64_t> choose_node(const std::vector<NodeView>& nodes, uint64_t weights_bytes,
                                    const std::set<uint64_t>& excluded = {});

/// How many nodes could take a new replica of `weights_bytes` (one per node without one): the count
/// of nodes choose_node would pick one after the other, in one pass.
uint32_t count_fitting(const std::vector<NodeView>& nodes, uint64_t weights_bytes);

/// Any node with room for the replica, picked by `draw` (a random number) uniformly among them:
/// Knative's placement, a baseline. nullopt when none fits.
std::optional<uint64_t> choose_any_node(const std::vector<NodeView>& nodes, uint64_t weights_bytes,
                                        const std::set<uint64_t>& excluded, uint64_t draw);

enum class SourceKind : uint8_t { peer, repository };

struct Source {
  SourceKind kind = SourceKind::peer;
  std::string name;
  HostPort endpoint;
};

/// Where `target` should fetch the model from, in the order to try.
std::vector<Source> choose_sources(const std::vector<NodeView>& nodes, uint64_t target, const Source& repository);

}  // namespace ember::placement
