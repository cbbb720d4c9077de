#include "placement/eviction.hpp"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

namespace ember::placement {
namespace {

bool pinned(const DeviceReplicaView& r) { return r.executing || r.copy_source || r.swapping_in; }

/// "executing, copy source", for the out_of_memory message.
std::string pin_reasons(const DeviceReplicaView& r) {
  std::string out;
  auto add = [&out](std::string_view why) {
    if (!out.empty()) out += ", ";
    out += why;
  };
  if (r.executing) add("executing");
  if (r.copy_source) add("copy source");
  if (r.swapping_in) add("swapping in");
  return out;
}

/// Models with a complete copy (not swapping in) on a device other than `device`.
std::set<std::string_view> copied_elsewhere(const std::vector<DeviceReplicaView>& replicas, uint32_t device) {
  std::set<std::string_view> out;
  for (const DeviceReplicaView& r : replicas) {
    if (r.device != device && !r.swapping_in) out.insert(r.model);
  }
  return out;
}

}  // namespace

std::string_view to_string(VictimKind kind) {
  switch (kind) {
    case VictimKind::duplicate: return "duplicate";
    case VictimKind::light: return "light";
    case VictimKind::heavy: return "heavy";
  }
  return "unknown";
}

std::vector<EvictionVictim> eviction_order(const std::vector<DeviceReplicaView>& replicas, uint32_t device,
                                           EvictionRule rule) {
  const std::set<std::string_view> elsewhere = copied_elsewhere(replicas, device);
  struct Candidate {
    const DeviceReplicaView* replica;
    VictimKind kind;
  };
  std::vector<Candidate> candidates;
  for (const DeviceReplicaView& r : replicas) {
    if (r.device != device || pinned(r)) continue;
    const VictimKind kind = elsewhere.count(r.model) ? VictimKind::duplicate
                            : r.heavy                ? VictimKind::heavy
                                                     : VictimKind::light;
    candidates.push_back({&r, kind});
  }
  // Smaller key goes first. VictimKind's declaration order is Torpor's class order; the LRU
  // baseline ignores the class. Then least recently used, then model name.
  auto key = [rule](const Candidate& c) {
    const int klass = rule == EvictionRule::torpor ? static_cast<int>(c.kind) : 0;
    return std::make_tuple(klass, c.replica->last_use_tick, std::string_view(c.replica->model));
  };
  std::sort(candidates.begin(), candidates.end(),
            [&key](const Candidate& a, const Candidate& b) { return key(a) < key(b); });
  std::vector<EvictionVictim> out;
  out.reserve(candidates.size());
  for (const Candidate& c : candidates) out.push_back({c.replica->model, c.replica->bytes, c.kind});
  return out;
}

Result<EvictionPlan> choose_evictions(const std::vector<DeviceReplicaView>& replicas,
                                      const EvictionRequest& request, EvictionRule rule) {
  const std::string where = "device " + std::to_string(request.device);
  std::set<std::pair<uint32_t, std::string_view>> seen;
  for (const DeviceReplicaView& r : replicas) {
    if (!seen.insert({r.device, r.model}).second) {
      return invalid_argument("eviction snapshot lists model '" + r.model + "' twice on device " +
                              std::to_string(r.device));
    }
  }
  if (request.need_bytes > request.capacity_bytes) {
    return out_of_memory(where + ": need " + std::to_string(request.need_bytes) + " bytes, more than its capacity of " +
                         std::to_string(request.capacity_bytes) + " bytes; evicting cannot help");
  }

  EvictionPlan plan;
  uint64_t available = request.free_bytes;
  if (available >= request.need_bytes) return plan;
  for (EvictionVictim& v : eviction_order(replicas, request.device, rule)) {
    available += v.bytes;
    plan.freed_bytes += v.bytes;
    plan.victims.push_back(std::move(v));
    if (available >= request.need_bytes) return plan;
  }

  // Even every evictable replica is not enough: say what is in the way.
  std::string pinned_list;
  uint64_t pinned_bytes = 0;
  for (const DeviceReplicaView& r : replicas) {
    if (r.device != request.device || !pinned(r)) continue;
    if (!pinned_list.empty()) pinned_list += "; ";
    pinned_list += r.model + " (" + std::to_string(r.bytes) + " bytes, " + pin_reasons(r) + ")";
    pinned_bytes += r.bytes;
  }
  std::string msg = where + ": need " + std::to_string(request.need_bytes) + " bytes, " +
                    std::to_string(request.free_bytes) + " free, evicting all " +
                    std::to_string(plan.victims.size()) + " evictable replicas frees " +
                    std::to_string(plan.freed_bytes) + " more, " +
                    std::to_string(request.need_bytes - available) + " short; ";
  if (pinned_list.empty()) {
    msg += "no pinned replica";
  } else {
    msg += "cannot evict " + std::to_string(pinned_bytes) + " bytes pinned by: " + pinned_list;
  }
  return out_of_memory(std::move(msg));
}

}  // namespace ember::placement
