#include "actors/cluster/routing_publisher.hpp"

#include <algorithm>

namespace ember {

bool RoutingPublisher::unsubscribe(const caf::actor_addr& addr) {
  auto it =
      std::remove_if(gateways_.begin(), gateways_.end(), [&](const gateway_actor& g) { return g.address() == addr; });
  const bool found = it != gateways_.end();
  gateways_.erase(it, gateways_.end());
  return found;
}

routing_entry RoutingPublisher::entry_of(const ModelVersion& v, const Membership& members) {
  routing_entry e;
  e.state = v.state;
  e.manifest_json = v.entry.manifest_json;
  for (const auto& [id, device] : v.replicas) {
    if (const auto* n = members.find(id)) e.replicas.push_back({id, n->report.name, n->router});
  }
  e.pipeline = v.pipeline;
  return e;
}

std::vector<node_report> RoutingPublisher::node_reports(const ModelRegistry& registry, const Membership& members) {
  std::vector<node_report> out;
  for (const auto& [id, n] : members.nodes()) {
    out.push_back(n.report);
    out.back().replicas = registry.replicas_on(id);
    out.back().draining = n.draining;
  }
  return out;
}

routing_update RoutingPublisher::full(const ModelRegistry& registry, const Membership& members) {
  routing_update u;
  u.epoch = ++epoch_;
  u.full = true;
  for (const auto& [key, v] : registry.versions()) u.entries.push_back(entry_of(v, members));
  u.members = members.members();
  return u;
}

routing_update RoutingPublisher::delta(const ModelRegistry& registry, const Membership& members,
                                       const std::set<model_key>& changed, const std::vector<model_key>& removed) {
  routing_update u;
  u.epoch = ++epoch_;
  u.members = members.members();
  for (const auto& key : changed) {
    auto it = registry.versions().find(key);
    if (it != registry.versions().end()) u.entries.push_back(entry_of(it->second, members));
  }
  u.removed = removed;
  return u;
}

}  // namespace ember
