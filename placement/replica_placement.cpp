#include "placement/replica_placement.hpp"

#include <algorithm>
#include <tuple>

namespace ember::placement {

std::optional<uint64_t> choose_node(const std::vector<NodeView>& nodes, uint64_t weights_bytes,
                                    const std::set<uint64_t>& excluded) {
  const double need = static_cast<double>(weights_bytes) * (1.0 + kActivationHeadroom);
  const NodeView* best = nullptr;
  // Larger key wins: cached bytes, then free memory, then fewer replicas, then lower id.
  auto key = [](const NodeView& n) {
    return std::make_tuple(n.caches_model, n.max_free_device_bytes, -static_cast<int64_t>(n.replicas),
                           -static_cast<int64_t>(n.id));
  };
  for (const NodeView& n : nodes) {
    if (n.has_replica || excluded.count(n.id)) continue;
    if (static_cast<double>(n.max_free_device_bytes) < need) continue;
    if (!best || key(n) > key(*best)) best = &n;
  }
  if (!best) return std::nullopt;
  return best->id;
}

uint32_t count_fitting(const std::vector<NodeView>& nodes, uint64_t weights_bytes) {
  const double need = static_cast<double>(weights_bytes) * (1.0 + kActivationHeadroom);
  uint32_t n = 0;
  for (const NodeView& v : nodes) n += !v.has_replica && static_cast<double>(v.max_free_device_bytes) >= need;
  return n;
}

std::optional<uint64_t> choose_any_node(const std::vector<NodeView>& nodes, uint64_t weights_bytes,
                                        const std::set<uint64_t>& excluded, uint64_t draw) {
  const double need = static_cast<double>(weights_bytes) * (1.0 + kActivationHeadroom);
  std::vector<uint64_t> fit;
  for (const NodeView& n : nodes)
    if (!n.has_replica && !excluded.count(n.id) && static_cast<double>(n.max_free_device_bytes) >= need)
      fit.push_back(n.id);
  if (fit.empty()) return std::nullopt;
  return fit[draw % fit.size()];
}

std::vector<Source> choose_sources(const std::vector<NodeView>& nodes, uint64_t target, const Source& repository) {
  std::vector<const NodeView*> peers;
  for (const NodeView& n : nodes) {
    if (n.id != target && n.caches_model && n.data.port != 0) peers.push_back(&n);
  }
  std::sort(peers.begin(), peers.end(), [](const NodeView* a, const NodeView* b) {
    return a->replicas != b->replicas ? a->replicas < b->replicas : a->id < b->id;
  });
  std::vector<Source> out;
  for (const NodeView* p : peers) out.push_back({SourceKind::peer, p->name, p->data});
  out.push_back(repository);
  return out;
}

}  // namespace ember::placement
