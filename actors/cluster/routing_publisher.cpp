#include "actors/cluster/routing_publisher.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <caf/actor_cast.hpp>

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
    if (const auto* n = members.find(id)) {
      e.replicas.push_back({id, n->report.name, n->router, {}, caf::actor_cast<node_router_actor>(n->report.requests)});
    }
  }
  for (const PipelineStage& s : v.pipeline) {
    if (const auto* n = members.find(s.node)) e.pipeline.push_back({n->report.stages, s.stage, n->report.name});  // its node's stage host
  }
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
  u.report_interval_us = report_interval_us_;
  u.workflows_set = true;
  u.workflows = workflows_;
  return u;
}

routing_update RoutingPublisher::delta(const ModelRegistry& registry, const Membership& members,
                                       const std::set<model_key>& changed, const std::vector<model_key>& removed,
                                       bool with_workflows) {
  routing_update u;
  u.epoch = ++epoch_;
  u.members = members.members();
  u.report_interval_us = report_interval_us_;
  if (with_workflows) {
    u.workflows_set = true;
    u.workflows = workflows_;
  }
  for (const auto& key : changed) {
    auto it = registry.versions().find(key);
    if (it != registry.versions().end()) u.entries.push_back(entry_of(it->second, members));
  }
  u.removed = removed;
  return u;
}

bool RoutingPublisher::set_workflows(std::vector<workflow_entry> workflows, bool announce) {
  if (workflows == workflows_) return false;
  if (announce) {
    for (const auto& w : workflows) {
      if (!w.error.empty()) spdlog::warn("manager: workflow {} cannot run: {}", w.name, w.error);
    }
  }
  workflows_ = std::move(workflows);
  return true;
}

int64_t RoutingPublisher::hold(gateway_actor gateway, HeldReply reply, int64_t now_us) {
  const bool first = held_.empty();
  held_.emplace_back(std::move(gateway), std::move(reply));
  if (!first) return 0;
  spdlog::info("manager: a gateway with a routing table subscribed; answering once the nodes had {} ms to rejoin",
               window_us_ / 1000);
  return window_ends_us_ - now_us;
}

}  // namespace ember
