#include "model/layer_blocks.hpp"

namespace ember::gpu {

std::vector<uint32_t> cut_points(const Graph& graph) {
  const uint32_t n = graph.num_layers();
  std::vector<uint32_t> cuts;
  for (uint32_t k = 1; k < n; ++k) {
    uint32_t crossing = 0;
    for (uint32_t l = 0; l < k && crossing < 2; ++l) {
      const uint32_t v = graph.layer_value(l);
      if (graph.last_use[v] >= static_cast<int64_t>(k)) ++crossing;
    }
    if (crossing == 1) cuts.push_back(k);
  }
  return cuts;
}

std::vector<LayerRange> layer_blocks(const Graph& graph) {
  std::vector<LayerRange> blocks;
  uint32_t from = 0;
  for (uint32_t k : cut_points(graph)) {
    blocks.push_back({from, k});
    from = k;
  }
  if (from < graph.num_layers()) blocks.push_back({from, graph.num_layers()});
  return blocks;
}

}  // namespace ember::gpu
