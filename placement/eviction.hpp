// Eviction: which model replicas to drop from one device of a node so that a model of need_bytes
// can be swapped in, under Torpor's heaviness-aware rule or the plain-LRU baseline.
//
// Pure: anyone, any thread (in practice the node_router, which owns "what to evict"); no I/O, no
// clocks, no randomness, never touches device memory. The router passes a snapshot of every device
// replica on its node and gets back the victims, in order, as a value; the gpu_executor then frees
// them. Evicting only invalidates the device copy: the host copy in the model_cache is
// authoritative and immutable, so nothing is ever copied back (Torpor §4.4, "Model eviction").
//
// Torpor rule (Torpor §5.4; the digest's §2.7 and §5 point 7 list what the paper leaves open):
//  1. Duplicates first: a replica whose model also has a complete copy on another device of the
//     node ("each model can have up to one replica among GPUs when GPU memory is full"). Dropped
//     lazily, as in Torpor's prototype: only when their own device needs room, never eagerly.
//     Heaviness does not matter here: a reload can come over NVLink from the surviving copy.
//  2. Then light models (the paper leaves their order open; Ember takes LRU).
//  3. Then heavy models, LRU. Torpor's 3-level "median" maps to heavy, as in the prototype's
//     protected list.
// Ember departs from the prototype, which keeps light models and duplicates in one LRU list: here
// every duplicate goes before any sole light replica, as the paper's "one replica" reads.
// The LRU baseline ("Torpor-LRU", for the density benchmark) orders every evictable replica of the
// device by last use alone, ignoring heaviness and duplicates.
//
// Invariants and decisions, common to both rules:
//  - Only replicas on the requesting device are candidates; the others only tell duplicates apart.
//  - Never a pinned replica: executing, locked as the source of a device-to-device copy, or still
//    swapping in (its bytes are not a usable copy yet and its swap is in flight).
//  - A copy on another device counts as "the other replica" only when it is not swapping in (a
//    swap may still fail). Victims of one call are all on the requesting device, so a call never
//    drops both copies of a model; across calls the router keeps that true by leaving replicas it
//    has already decided to evict out of later snapshots.
//  - Ties in last use are broken by model name, ascending (unique on one device): the same
//    snapshot always gives the same plan.
//  - The plan is the shortest prefix of the order that makes free_bytes + freed >= need_bytes. No
//    skipping a large victim for a smaller later one: predictable, and the policy order decides.
//  - need_bytes above the device's capacity fails at once with out_of_memory, evicting nothing; so
//    does a need that evicting every candidate cannot meet (the message names the pinned replicas).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "config/choices.hpp"

namespace ember::placement {

/// Which order choose_evictions uses: the node's binding.eviction (config/choices.hpp), torpor
/// (duplicates, then light LRU, then heavy LRU; Torpor §5.4) or lru (the "Torpor-LRU" baseline).
/// Changing it needs no restart of anything but the router: it only changes future decisions.
using ember::EvictionRule;

/// One replica of a model on one device of the node, as the router sees it now. The replica's
/// lifecycle (host-only → swapping-in → resident → evicting) is the gpu_executor's; a replica the
/// router has decided to evict must not appear in later snapshots.
struct DeviceReplicaView {
  std::string model;
  /// The device's index on this node (the executor's index in the router).
  uint32_t device = 0;
  /// Device bytes that evicting this replica frees (weights and the blocks packed with them).
  uint64_t bytes = 0;
  /// Swapping it over PCIe slows concurrent inference (Torpor §5.3, Table 4).
  bool heavy = false;
  /// Any monotonic stamp of the replica's last use (swap-in or last request): a per-node counter or
  /// the router's steady clock. Only the order matters; larger is more recent.
  uint64_t last_use_tick = 0;
  /// Pins: any of the three makes the replica impossible to evict.
  bool executing = false;
  bool copy_source = false;  // locked as the source of a device-to-device (NVLink) copy
  bool swapping_in = false;
};

/// Why a victim was chosen, for metrics; reported the same way under both rules. The declaration
/// order is the Torpor rule's class order (eviction.cpp sorts on it).
enum class VictimKind : uint8_t {
  duplicate,  // its model has a complete copy on another device
  light,      // the model's only complete device copy, light
  heavy,      // the model's only complete device copy, heavy
};

/// "duplicate", "light", "heavy".
std::string_view to_string(VictimKind kind);

struct EvictionVictim {
  std::string model;
  uint64_t bytes = 0;
  VictimKind kind = VictimKind::light;

  friend bool operator==(const EvictionVictim&, const EvictionVictim&) = default;
};

struct EvictionRequest {
  /// The device that must make room.
  uint32_t device = 0;
  /// Bytes the incoming model needs on the device (weights plus headroom).
  uint64_t need_bytes = 0;
  /// Bytes free on the device now, and its total model budget.
  uint64_t free_bytes = 0;
  uint64_t capacity_bytes = 0;
};

struct EvictionPlan {
  /// To evict, in this order; empty when free_bytes already covers need_bytes.
  std::vector<EvictionVictim> victims;
  /// Sum of the victims' bytes.
  uint64_t freed_bytes = 0;
};

/// Every evictable replica of `device` in the order `rule` evicts them (pinned ones left out).
/// Entries of other devices only decide which replicas are duplicates.
std::vector<EvictionVictim> eviction_order(const std::vector<DeviceReplicaView>& replicas, uint32_t device,
                                           EvictionRule rule);

/// The shortest prefix of eviction_order that makes room for request.need_bytes. Errors:
/// out_of_memory when need_bytes exceeds capacity_bytes, or when evicting every evictable replica
/// would still not make room (the message gives the bytes and names each pinned replica and why);
/// invalid_argument when a model appears twice on one device in the snapshot.
Result<EvictionPlan> choose_evictions(const std::vector<DeviceReplicaView>& replicas,
                                      const EvictionRequest& request, EvictionRule rule);

}  // namespace ember::placement
