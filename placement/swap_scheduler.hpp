// Swap scheduling: which of one node's devices serves the next request of a model, and how the
// model gets there under late binding (Torpor §5.3, Algorithm 1, "interference-aware scheduling").
// Models live in host memory and are bound to a device per request, swapped in when needed.
//
// Pure: anyone, any thread. The node_router calls schedule() for every request with a snapshot of
// its executors and the node's topology, and gets a SwapDecision back. The side effects are the
// router's: lock the source replica for the duration of a device-to-device copy, evict on the
// target first when evict_first says so (the order is placement/eviction.hpp's), record the new
// load and dispatch. Nothing here mutates state, evicts, locks, blocks or reads a clock; the random
// baseline takes its random value as a parameter. The same inputs always give the same decision.
//
// Algorithm 1 as Ember runs it. A = available devices (available() below), H = devices holding a
// complete replica of the model:
//   1. A empty                  -> queue; the router re-schedules when an executor reports idle.
//   2. H ∩ A not empty          -> run there, no swap.
//   3. some a ∈ A, h ∈ H linked -> copy h -> a over the fastest direct link (link_gbps > 0).
//   4. otherwise                -> swap from host onto an a ∈ A, ranked by the worst load among its
//                                  PCIe-switch neighbours: nothing < a copy from a peer < a light
//                                  model from host < a heavy model from host.
// Where Ember fills in what the paper leaves open (digest §5 point 6):
//  - A device that is loading is not available even when no request runs on it (Torpor [proto]):
//    one swap per device at a time. In Ember a swap-in is pipelined with the request it serves, so
//    a loading device is executing anyway.
//  - A model still being swapped onto some device is not resident there until the copy ends: it is
//    neither a holder nor a copy source, and the request does not wait for that device. With one
//    request per device the wait is a whole execution, and a second replica is how a burst of one
//    model spreads over the node (Torpor Fig. 9). Step 4's ranking already steers a second host
//    swap away from the first one's switch.
//  - Step 3 only over a direct link. A pair with link_gbps 0 would copy through the host bridge and
//    contend for the same uplinks as a host swap while the host copy is authoritative anyway, so
//    such a holder is skipped and, with no linked holder, step 4 runs. PCIe peer-to-peer counts as
//    a link when the operator lists it in link_gbps.
//  - Step 3 is used for light models too: the paper prefers a peer copy whenever the model is
//    resident anywhere, since it also keeps the PCIe uplinks free for others.
//  - Step 4 counts a neighbour's copy from a peer as a load, but a milder one than any host load
//    ([proto]'s order): it does not cross the switch uplink over NVLink, and may over PCIe P2P.
//  - Memory: a device without room for the model stays a candidate (the router evicts; evict_first
//    says so). Among otherwise equal candidates one where the model fits without eviction wins.
//  - The requested model's own heaviness plays no part, as in the paper; the router records it in
//    the target's DeviceLoad so that later requests see it.
// Tie-breaks, each applied only among candidates equal on everything before it:
//  - step 2: lowest device id (every holder costs the same: no transfer);
//  - step 3: fastest link; target fits without eviction; source with the fewest locked replicas
//    (each lock is a copy already reading from it); target with the most free bytes; lowest target
//    id; lowest source id;
//  - step 4: mildest neighbour load; fits without eviction; fastest host link (pcie_gbps, the
//    swap this request waits for); most free bytes (fewer evictions later, replicas spread over the
//    pool); lowest id.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace ember::placement {

/// A device of the node: 0 .. NodeTopology::device_count() - 1.
using DeviceIndex = uint32_t;

/// One node's devices and their interconnect. Bandwidths in GB/s (1e9 bytes per second, as in
/// base/units.hpp); only their order matters to the scheduler. Immutable once created.
class NodeTopology {
 public:
  /// Validates and builds a topology of pcie_switch.size() devices (at least one).
  ///  - pcie_switch[d]: an opaque id of the PCIe switch device d sits behind. Devices with the same
  ///    id are neighbours: they share that switch's uplink to the host.
  ///  - link_gbps[a][b]: direct device-to-device bandwidth (NVLink, or PCIe P2P if wanted), 0 = no
  ///    direct link. Square, with a zero diagonal, finite, not negative, and symmetric: NVLink and
  ///    PCIe P2P carry the same bandwidth each way, so an asymmetric matrix is a typo, not a fact.
  ///  - pcie_gbps[d]: host -> device bandwidth, finite and positive (every device loads from host).
  /// invalid_argument naming the field and indices on any violation.
  static Result<NodeTopology> create(std::vector<uint32_t> pcie_switch, std::vector<std::vector<double>> link_gbps,
                                     std::vector<double> pcie_gbps);

  uint32_t device_count() const { return static_cast<uint32_t>(pcie_switch_.size()); }
  /// Accessors assume valid device indices (programmer error otherwise).
  uint32_t pcie_switch(DeviceIndex d) const { return pcie_switch_[d]; }
  double link_gbps(DeviceIndex a, DeviceIndex b) const { return link_gbps_[a][b]; }
  double pcie_gbps(DeviceIndex d) const { return pcie_gbps_[d]; }
  /// a != b and both behind the same PCIe switch.
  bool neighbours(DeviceIndex a, DeviceIndex b) const;

 private:
  NodeTopology() = default;

  std::vector<uint32_t> pcie_switch_;
  std::vector<std::vector<double>> link_gbps_;
  std::vector<double> pcie_gbps_;
};

/// How much a model's swap-in from host slows its own inference: the property that decides
/// whether concurrent host swaps next to it hurt (Torpor Tables 3, 4).
enum class Heaviness : uint8_t { light, heavy };
/// "light", "heavy".
std::string_view to_string(Heaviness heaviness);

/// Default slowdown factor for classify. Torpor Table 4 (swap-PCIe over resident latency): the CV
/// models [proto] calls light are 1.07-1.21, the ResNets 1.44-1.57, Bert-qa 3.35; Table 3 shows
/// ResNet-152 slowing a concurrent Bert-qa swap by 61% while DenseNet-169 costs 11%. 1.3 puts the
/// ResNets with Bert-qa. Lower marks more models heavy: step 4 avoids more neighbours and eviction
/// protects more models; higher the reverse.
inline constexpr double kDefaultHeavyFactor = 1.3;

/// heavy when swap_in_us > slowdown_factor * warm_us. swap_in_us: latency of one request that
/// swaps the model in from host with the pipelined swap and no other load on the switch (Table 4's
/// "Swap-PCIe"); warm_us: latency of a request with the model resident. Both measured by the
/// profiler, so no model is classified by name. invalid_argument unless warm_us > 0, swap_in_us
/// >= 0 and slowdown_factor is finite and >= 1 (below 1 a swap costing nothing would be heavy).
Result<Heaviness> classify(int64_t swap_in_us, int64_t warm_us, double slowdown_factor = kDefaultHeavyFactor);

/// Where a device's current swap-in reads from.
enum class LoadSource : uint8_t { none, host, peer };

/// What a device is swapping in right now.
struct DeviceLoad {
  LoadSource source = LoadSource::none;
  /// Of the model being loaded; ignored when source is none.
  Heaviness heaviness = Heaviness::light;
};

/// One device as the router sees it when a request arrives.
struct DeviceState {
  /// A request runs on the device.
  bool executing = false;
  DeviceLoad loading;
  /// Models with a complete replica on the device; a model being loaded is not here yet.
  std::set<std::string> resident;
  /// Resident models locked as copy sources while a device-to-device copy reads them (a subset of
  /// resident; the lock keeps eviction off them).
  std::set<std::string> locked;
  uint64_t free_bytes = 0;
};

/// Neither executing nor loading: the only devices a request may be bound to.
bool available(const DeviceState& device);

/// The order in which Algorithm 1 takes a device for a request of a model resident on several:
/// step 2 runs it on an available holder, the lowest id first (every holder costs the same); the
/// devices not available follow, by id (a request there would wait behind what runs). Every device
/// appears once. The node's inline runs try holders in this order (actors/node/inline_runs.hpp).
std::vector<DeviceIndex> run_order(const std::vector<DeviceState>& devices);

enum class SwapAction : uint8_t {
  run,             // the model is resident on `device`: no swap
  swap_from_peer,  // copy from `source` over its direct link to `device`, then run there
  swap_from_host,  // swap in over `device`'s PCIe link, then run there
  queue,           // no device is available; keep the request queued
};
/// "run", "swap_from_peer", "swap_from_host", "queue".
std::string_view to_string(SwapAction action);

struct SwapDecision {
  SwapAction action = SwapAction::queue;
  /// The device that runs the request; nullopt when queued.
  std::optional<DeviceIndex> device;
  /// The holder copied from; set only for swap_from_peer. The router locks its replica until the
  /// copy ends.
  std::optional<DeviceIndex> source;
  /// The model does not fit in device's free bytes: the router evicts there before swapping.
  bool evict_first = false;
  /// Why, for logs, e.g. "host swap to 3: no neighbour loading".
  std::string reason;
};

/// Torpor Algorithm 1 with the decisions above, for one request of `model`, which needs
/// `model_bytes` on a device (weights plus headroom, as eviction's need_bytes). `devices[d]` is
/// device d's state; invalid_argument unless there is one per device.
Result<SwapDecision> schedule(const NodeTopology& topology, const std::vector<DeviceState>& devices,
                              const std::string& model, uint64_t model_bytes);

/// Baseline "Torpor-Random" (§7.3 ablation, Ember's density benchmark): run on an available holder
/// (lowest id) if any; else swap from host onto the available device at position
/// random_value % |A| in id order; never device-to-device, blind to neighbours and heaviness;
/// queue when none is available. The caller draws random_value (e.g. from a seeded mt19937_64).
/// invalid_argument unless there is one state per device.
Result<SwapDecision> schedule_random(const NodeTopology& topology, const std::vector<DeviceState>& devices,
                                     const std::string& model, uint64_t model_bytes, uint64_t random_value);

}  // namespace ember::placement
