#include "placement/swap_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <utility>

namespace ember::placement {

namespace {

// Built by appending: GCC 12 misreports "literal" + std::string&& under -Wrestrict.
std::string idx(size_t i) {
  std::string s = "[";
  s += std::to_string(i);
  s += ']';
  return s;
}

std::string gbps(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g GB/s", v);
  return buf;
}

bool fits(const DeviceState& d, uint64_t bytes) { return d.free_bytes >= bytes; }

bool holds(const DeviceState& d, const std::string& model) { return d.resident.count(model) > 0; }

// How much a device's current swap-in disturbs the switch it sits behind (step 4's order).
int load_rank(const DeviceLoad& load) {
  switch (load.source) {
    case LoadSource::none:
      return 0;
    case LoadSource::peer:
      return 1;
    case LoadSource::host:
      return load.heaviness == Heaviness::light ? 2 : 3;
  }
  return 3;
}

constexpr std::string_view kRankWords[] = {"no neighbour loading", "a neighbour copying from a peer",
                                           "a neighbour loading a light model from host",
                                           "a neighbour loading a heavy model from host"};

// The worst load among g's neighbours; 0 when it has none.
int neighbour_rank(const NodeTopology& topo, const std::vector<DeviceState>& devices, DeviceIndex g) {
  int worst = 0;
  for (DeviceIndex d = 0; d < topo.device_count(); ++d) {
    if (topo.neighbours(g, d)) worst = std::max(worst, load_rank(devices[d].loading));
  }
  return worst;
}

Status check_snapshot(const NodeTopology& topo, const std::vector<DeviceState>& devices) {
  if (devices.size() != topo.device_count()) {
    return invalid_argument("swap scheduler: " + std::to_string(devices.size()) + " device states for a node of " +
                            std::to_string(topo.device_count()) + " devices");
  }
  return Status::OK();
}

SwapDecision decide(SwapAction action, DeviceIndex device, std::optional<DeviceIndex> source, bool evict_first,
                    std::string reason) {
  return SwapDecision{action, device, source, evict_first, std::move(reason)};
}

SwapDecision queued() {
  return SwapDecision{SwapAction::queue, std::nullopt, std::nullopt, false, "queued: no available device"};
}

// Step 2 (and the random baseline's first rule): the lowest available holder, if any.
std::optional<DeviceIndex> available_holder(const std::vector<DeviceState>& devices, const std::string& model) {
  for (DeviceIndex d = 0; d < devices.size(); ++d) {
    if (available(devices[d]) && holds(devices[d], model)) return d;
  }
  return std::nullopt;
}

}  // namespace

Result<NodeTopology> NodeTopology::create(std::vector<uint32_t> pcie_switch, std::vector<std::vector<double>> link_gbps,
                                          std::vector<double> pcie_gbps) {
  const size_t n = pcie_switch.size();
  if (n == 0) return invalid_argument("topology: no devices (pcie_switch is empty)");
  if (link_gbps.size() != n) {
    return invalid_argument("topology: link_gbps has " + std::to_string(link_gbps.size()) + " rows for " +
                            std::to_string(n) + " devices");
  }
  if (pcie_gbps.size() != n) {
    return invalid_argument("topology: pcie_gbps has " + std::to_string(pcie_gbps.size()) + " entries for " +
                            std::to_string(n) + " devices");
  }
  for (size_t a = 0; a < n; ++a) {
    if (link_gbps[a].size() != n) {
      return invalid_argument("topology: link_gbps" + idx(a) + " has " + std::to_string(link_gbps[a].size()) +
                              " entries, not " + std::to_string(n) + " (the matrix must be square)");
    }
    for (size_t b = 0; b < n; ++b) {
      const double v = link_gbps[a][b];
      const std::string at = "topology: link_gbps" + idx(a) + idx(b);
      if (!std::isfinite(v) || v < 0) return invalid_argument(at + " must be finite and not negative");
      if (a == b && v != 0) return invalid_argument(at + " must be 0 (a device has no link to itself)");
    }
    if (!std::isfinite(pcie_gbps[a]) || pcie_gbps[a] <= 0) {
      return invalid_argument("topology: pcie_gbps" + idx(a) + " must be finite and positive");
    }
  }
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      if (link_gbps[a][b] != link_gbps[b][a]) {
        return invalid_argument("topology: link_gbps" + idx(a) + idx(b) + " = " + gbps(link_gbps[a][b]) +
                                " but link_gbps" + idx(b) + idx(a) + " = " + gbps(link_gbps[b][a]) +
                                " (links must be symmetric)");
      }
    }
  }
  NodeTopology t;
  t.pcie_switch_ = std::move(pcie_switch);
  t.link_gbps_ = std::move(link_gbps);
  t.pcie_gbps_ = std::move(pcie_gbps);
  return t;
}

bool NodeTopology::neighbours(DeviceIndex a, DeviceIndex b) const {
  return a != b && pcie_switch_[a] == pcie_switch_[b];
}

std::string_view to_string(Heaviness heaviness) { return heaviness == Heaviness::heavy ? "heavy" : "light"; }

Result<Heaviness> classify(int64_t swap_in_us, int64_t warm_us, double slowdown_factor) {
  if (warm_us <= 0) return invalid_argument("classify: warm_us must be positive, got " + std::to_string(warm_us));
  if (swap_in_us < 0) {
    return invalid_argument("classify: swap_in_us must not be negative, got " + std::to_string(swap_in_us));
  }
  if (!std::isfinite(slowdown_factor) || slowdown_factor < 1.0) {
    return invalid_argument("classify: slowdown_factor must be finite and at least 1");
  }
  const bool heavy = static_cast<double>(swap_in_us) > slowdown_factor * static_cast<double>(warm_us);
  return heavy ? Heaviness::heavy : Heaviness::light;
}

bool available(const DeviceState& device) { return !device.executing && device.loading.source == LoadSource::none; }

std::vector<DeviceIndex> run_order(const std::vector<DeviceState>& devices) {
  std::vector<DeviceIndex> out;
  out.reserve(devices.size());
  for (DeviceIndex d = 0; d < devices.size(); ++d) {
    if (available(devices[d])) out.push_back(d);
  }
  for (DeviceIndex d = 0; d < devices.size(); ++d) {
    if (!available(devices[d])) out.push_back(d);
  }
  return out;
}

std::string_view to_string(SwapAction action) {
  switch (action) {
    case SwapAction::run:
      return "run";
    case SwapAction::swap_from_peer:
      return "swap_from_peer";
    case SwapAction::swap_from_host:
      return "swap_from_host";
    case SwapAction::queue:
      return "queue";
  }
  return "unknown";
}

Result<SwapDecision> schedule(const NodeTopology& topo, const std::vector<DeviceState>& devices,
                              const std::string& model, uint64_t model_bytes) {
  EMBER_RETURN_IF_ERROR(check_snapshot(topo, devices));
  const DeviceIndex n = topo.device_count();

  // Step 1.
  bool any_available = false;
  for (const DeviceState& d : devices) any_available = any_available || available(d);
  if (!any_available) return queued();

  // Step 2.
  if (auto g = available_holder(devices, model)) {
    return decide(SwapAction::run, *g, std::nullopt, false, "resident on available device " + std::to_string(*g));
  }

  // Step 3: every (target a, holder h) pair with a direct link; larger key wins.
  bool any_holder = false;
  std::optional<std::pair<DeviceIndex, DeviceIndex>> best_pair;
  auto pair_key = [&](DeviceIndex a, DeviceIndex h) {
    return std::make_tuple(topo.link_gbps(a, h), fits(devices[a], model_bytes),
                           -static_cast<int64_t>(devices[h].locked.size()), devices[a].free_bytes,
                           -static_cast<int64_t>(a), -static_cast<int64_t>(h));
  };
  for (DeviceIndex h = 0; h < n; ++h) {
    if (!holds(devices[h], model)) continue;
    any_holder = true;
    for (DeviceIndex a = 0; a < n; ++a) {
      if (!available(devices[a]) || topo.link_gbps(a, h) <= 0) continue;
      if (!best_pair || pair_key(a, h) > pair_key(best_pair->first, best_pair->second)) best_pair = {a, h};
    }
  }
  if (best_pair) {
    const auto [a, h] = *best_pair;
    return decide(SwapAction::swap_from_peer, a, h, !fits(devices[a], model_bytes),
                  "peer copy " + std::to_string(h) + " -> " + std::to_string(a) + " over " +
                      gbps(topo.link_gbps(a, h)) + ": holders busy");
  }

  // Step 4: mildest neighbour load, then fits, host link, free bytes, lowest id; larger key wins.
  std::optional<DeviceIndex> best;
  auto host_key = [&](DeviceIndex g) {
    return std::make_tuple(-neighbour_rank(topo, devices, g), fits(devices[g], model_bytes), topo.pcie_gbps(g),
                           devices[g].free_bytes, -static_cast<int64_t>(g));
  };
  for (DeviceIndex g = 0; g < n; ++g) {
    if (!available(devices[g])) continue;
    if (!best || host_key(g) > host_key(*best)) best = g;
  }
  // any_available guarantees a candidate.
  const DeviceIndex g = *best;
  std::string reason =
      "host swap to " + std::to_string(g) + ": " + std::string(kRankWords[neighbour_rank(topo, devices, g)]);
  if (any_holder) reason += "; no direct link from a holder";
  return decide(SwapAction::swap_from_host, g, std::nullopt, !fits(devices[g], model_bytes), std::move(reason));
}

Result<SwapDecision> schedule_random(const NodeTopology& topo, const std::vector<DeviceState>& devices,
                                     const std::string& model, uint64_t model_bytes, uint64_t random_value) {
  EMBER_RETURN_IF_ERROR(check_snapshot(topo, devices));
  if (auto g = available_holder(devices, model)) {
    return decide(SwapAction::run, *g, std::nullopt, false,
                  "random: resident on available device " + std::to_string(*g));
  }
  std::vector<DeviceIndex> candidates;
  for (DeviceIndex d = 0; d < devices.size(); ++d) {
    if (available(devices[d])) candidates.push_back(d);
  }
  if (candidates.empty()) return queued();
  const DeviceIndex g = candidates[random_value % candidates.size()];
  return decide(SwapAction::swap_from_host, g, std::nullopt, !fits(devices[g], model_bytes),
                "random: host swap to " + std::to_string(g));
}

}  // namespace ember::placement
