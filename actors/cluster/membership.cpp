#include "actors/cluster/membership.hpp"

#include <algorithm>
#include <caf/actor_cast.hpp>

#include "base/units.hpp"

namespace ember {

uint64_t Membership::join(node_report report, node_router_actor router) {
  const uint64_t id = next_id_++;
  nodes_[id] = ClusterNode{id, std::move(report), std::move(router), {}};
  return id;
}

void Membership::update_report(uint64_t id, node_report report) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  const bool draining = it->second.report.draining;
  if (report.control.port == 0) report.control = it->second.report.control;
  it->second.report = std::move(report);
  it->second.report.draining = draining || it->second.report.draining;
}

std::optional<ClusterNode> Membership::leave(uint64_t id) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return std::nullopt;
  ClusterNode node = std::move(it->second);
  nodes_.erase(it);
  return node;
}

const ClusterNode* Membership::find(uint64_t id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

ClusterNode* Membership::find_mutable(uint64_t id) {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::optional<uint64_t> Membership::id_of(const caf::actor_addr& router) const {
  for (const auto& [id, n] : nodes_)
    if (n.router && n.router.address() == router) return id;
  return std::nullopt;
}

const Membership::Parked* Membership::parked(uint64_t id) const {
  auto it = parked_.find(id);
  return it == parked_.end() ? nullptr : &it->second;
}

std::optional<uint64_t> Membership::unpark(const caf::actor_addr& router) {
  for (auto it = parked_.begin(); it != parked_.end(); ++it) {
    if (it->second.router && it->second.router.address() == router) {
      const uint64_t id = it->first;
      parked_.erase(it);
      return id;
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> Membership::id_of(const std::string& name) const {
  for (const auto& [id, n] : nodes_)
    if (n.report.name == name) return id;
  return std::nullopt;
}

Result<std::vector<uint64_t>> Membership::resolve(const std::vector<std::string>& names) const {
  std::vector<uint64_t> out;
  if (names.empty()) {
    for (const auto& [id, n] : nodes_) out.push_back(id);
    return out;
  }
  for (const auto& name : names) {
    auto id = id_of(name);
    if (!id) return not_found("no node named '" + name + "' in the cluster");
    if (std::find(out.begin(), out.end(), *id) == out.end()) out.push_back(*id);
  }
  return out;
}

void Membership::bind(uint64_t node, const std::string& device, uint64_t bytes) {
  if (auto* n = find_mutable(node)) n->device_weights[device] += bytes;
}

void Membership::unbind(uint64_t node, const std::string& device, uint64_t bytes) {
  auto* n = find_mutable(node);
  if (!n) return;
  auto bound = n->device_weights.find(device);
  if (bound != n->device_weights.end()) bound->second -= std::min(bound->second, bytes);
}

std::vector<node_router_actor> Membership::release(const std::map<uint64_t, std::string>& replicas, uint64_t bytes) {
  std::vector<node_router_actor> out;
  for (const auto& [node, device] : replicas) {
    if (const auto* n = find(node)) out.push_back(n->router);
    unbind(node, device, bytes);
  }
  return out;
}

void Membership::note_cached(uint64_t node, const model_key& key, bool cached) {
  auto* n = find_mutable(node);
  if (!n) return;
  auto& list = n->report.cached;
  auto at = std::find(list.begin(), list.end(), key);
  if (cached && at == list.end()) list.push_back(key);
  if (!cached && at != list.end()) list.erase(at);
}

bool Membership::caches(uint64_t node, const model_key& key) const {
  const auto* n = find(node);
  return n && caches(*n, key);
}

bool Membership::caches(const ClusterNode& node, const model_key& key) {
  return std::find(node.report.cached.begin(), node.report.cached.end(), key) != node.report.cached.end();
}

std::string Membership::describe_join(uint64_t id, size_t adopted) const {
  const auto* n = find(id);
  if (!n) return "#" + std::to_string(id) + " (gone)";
  const node_report& r = n->report;
  uint64_t memory = 0;
  for (const auto& d : r.devices) memory += d.memory_bytes;
  std::string out = r.name;
  out += " joined as #" + std::to_string(id);
  out += " (" + std::to_string(r.devices.size()) + " device(s), ";
  out += format_bytes(memory) + " of device memory, cache " + format_bytes(r.cache_capacity);
  out += ", data plane " + r.data.to_string();
  if (adopted) out += ", " + std::to_string(adopted) + " replica(s) adopted";
  return out + ")";
}

std::vector<replica_ref> Membership::members() const {
  std::vector<replica_ref> out;
  for (const auto& [id, n] : nodes_) {
    out.push_back({id, n.report.name, n.router, n.report.control, caf::actor_cast<node_router_actor>(n.report.requests)});
  }
  return out;
}

void Membership::reserve(uint64_t node, uint64_t attempt, uint64_t bytes) {
  if (ClusterNode* n = find_mutable(node)) n->reservations[attempt] = bytes;
}

void Membership::set_draining(uint64_t id) {
  if (ClusterNode* n = find_mutable(id)) n->draining = true;
}

void Membership::unreserve(uint64_t node, uint64_t attempt) {
  if (ClusterNode* n = find_mutable(node)) n->reservations.erase(attempt);
}

uint64_t Membership::reserved(uint64_t node) const {
  const ClusterNode* n = find(node);
  uint64_t bytes = 0;
  if (n)
    for (const auto& [attempt, b] : n->reservations) bytes += b;
  return bytes;
}

std::vector<placement::NodeView> Membership::views(const model_key& key,
                                                   const std::map<uint64_t, uint32_t>& replicas_per_node,
                                                   const std::set<uint64_t>& holders) const {
  std::vector<placement::NodeView> out;
  for (const auto& [id, n] : nodes_) {
    placement::NodeView view;
    view.id = id;
    view.name = n.report.name;
    view.data = n.report.data;
    for (const auto& d : n.report.devices) {
      auto used = n.device_weights.find(d.name);
      const uint64_t bound = used == n.device_weights.end() ? 0 : used->second;
      view.max_free_device_bytes =
          std::max(view.max_free_device_bytes, d.memory_bytes - std::min(d.memory_bytes, bound));
    }
    view.max_free_device_bytes -= std::min(view.max_free_device_bytes, reserved(id));
    if (n.draining) view.max_free_device_bytes = 0;  // no new replica on a drained node
    auto r = replicas_per_node.find(id);
    view.replicas = r == replicas_per_node.end() ? 0 : r->second;
    view.has_replica = holders.count(id) > 0;
    view.caches_model = view.has_replica || caches(id, key);
    out.push_back(view);
  }
  return out;
}

}  // namespace ember
