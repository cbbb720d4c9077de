#include "model/sample_inputs.hpp"

namespace ember::gpu {

std::vector<TensorDesc> concrete_inputs(const Model& model, int64_t batch, int64_t seq_len) {
  std::vector<TensorDesc> out;
  for (const auto& in : model.manifest().inputs) {
    TensorDesc d{in.dtype, in.shape};
    for (int i = 0; i < d.shape.rank; ++i)
      if (d.shape[i] < 0) d.shape[i] = i == 0 ? batch : seq_len;
    out.push_back(d);
  }
  return out;
}

Result<std::vector<HostTensor>> sample_inputs(const Model& m, const std::vector<uint32_t>& ids,
                                              const std::vector<std::optional<TensorDesc>>& shapes, uint64_t seed) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {  // xorshift64
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const Graph& g = m.graph();
  std::vector<HostTensor> out;
  for (uint32_t id : ids) {
    if (id >= shapes.size() || !shapes[id]) return internal_error("sample_inputs: no shape for '" + g.value_names[id] + "'");
    const TensorDesc desc = *shapes[id];
    EMBER_ASSIGN_OR_RETURN(auto t, HostTensor::allocate(g.value_names[id], desc));
    uint64_t vocab = 2;
    for (uint32_t l = 0; l < m.num_layers(); ++l) {
      const LayerSpec& spec = m.layer(l);
      if (spec.op == OpKind::embedding && !spec.attrs.positional && g.layer_inputs[l][0] == id) {
        vocab = static_cast<uint64_t>(spec.attrs.num_embeddings);
        break;
      }
    }
    const int64_t n = desc.shape.numel();
    for (int64_t i = 0; i < n; ++i) {
      switch (desc.dtype) {
        case DType::f32: t.as<float>()[i] = static_cast<float>(next() >> 40) / static_cast<float>(1 << 23) - 1.f; break;
        case DType::i64: t.as<int64_t>()[i] = static_cast<int64_t>(next() % vocab); break;
        case DType::i32: t.as<int32_t>()[i] = static_cast<int32_t>(next() % vocab); break;
        case DType::u8: t.as<uint8_t>()[i] = static_cast<uint8_t>(next() % 256); break;
        default: return unsupported("cannot sample " + std::string(dtype_name(desc.dtype)) + " inputs");
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<HostTensor>> sample_model_inputs(const Model& model, int64_t batch, int64_t seq_len, uint64_t seed) {
  EMBER_ASSIGN_OR_RETURN(auto shapes, model.check_inputs(concrete_inputs(model, batch, seq_len)));
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < model.graph().num_inputs; ++i) ids.push_back(i);
  return sample_inputs(model, ids, shapes, seed);
}

}  // namespace ember::gpu
