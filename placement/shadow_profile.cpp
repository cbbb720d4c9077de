#include "placement/shadow_profile.hpp"

#include <algorithm>

#include "model/layer_blocks.hpp"

namespace ember::placement {

ShadowProfile shadow_profile(const gpu::Model& model, const gpu::ModelProfile& profile) {
  ShadowProfile p;
  p.batches = profile.batches;
  const size_t nb = profile.batches.size();
  // Bytes per sample crossing the cut after layer i: the profile's, divided by its batch.
  auto per_sample_after = [&](uint32_t layer) {
    const auto& out = profile.layers[layer].out_bytes;
    return out.empty() ? uint64_t{0} : out.back() / profile.batches.back();
  };
  uint64_t inputs_per_sample = 0;  // the model's inputs at one row (free dims at the profile's seq_len)
  for (const auto& in : model.manifest().inputs) {
    gpu::Shape s = in.shape;
    for (int i = 0; i < s.rank; ++i)
      if (s[i] < 0) s[i] = i == 0 ? 1 : profile.seq_len;
    inputs_per_sample += gpu::TensorDesc{in.dtype, s}.bytes();
  }
  for (const gpu::LayerRange& r : gpu::layer_blocks(model.graph())) {
    ShadowBlock b;
    b.first_layer = r.first;
    b.last_layer = r.last;
    b.exec_us.assign(nb, 0);
    for (uint32_t l = r.first; l < r.last && l < profile.layers.size(); ++l) {
      const gpu::LayerCost& c = profile.layers[l];
      b.weight_bytes += c.bytes;
      b.macs += c.macs;
      for (size_t k = 0; k < nb && k < c.exec_us.size(); ++k) b.exec_us[k] += c.exec_us[k];
    }
    b.in_bytes = r.first == 0 ? inputs_per_sample : per_sample_after(r.first - 1);
    b.out_bytes = per_sample_after(r.last - 1);
    p.blocks.push_back(std::move(b));
  }
  return p;
}

double replica_capacity(const gpu::ModelProfile& profile, double slo_us, uint32_t max_batch) {
  ShadowProfile p;
  p.batches = profile.batches;
  ShadowBlock all;
  all.exec_us.assign(profile.batches.size(), 0);
  for (const gpu::LayerCost& c : profile.layers) {
    for (size_t k = 0; k < all.exec_us.size() && k < c.exec_us.size(); ++k) all.exec_us[k] += c.exec_us[k];
  }
  all.last_layer = static_cast<uint32_t>(profile.layers.size());
  p.blocks.push_back(std::move(all));
  if (p.batches.empty()) return 0;
  return body_capacity(p, slo_us, std::max<uint32_t>(max_batch, 1)).rows_per_s;
}

}  // namespace ember::placement
