#include "model/model_builder.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "model/host_buffer.hpp"
#include "model/safetensors.hpp"

namespace ember::gpu {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Default initialisation: PyTorch's fan-in bounds for linear and conv weights (He-uniform for
// convs so deep CNNs keep their scale), Xavier for the packed QKV projection, near-identity
// affine parameters for norms, and small non-zero biases so they are exercised.
WeightInit default_init(OpKind op, const LayerAttrs& a, std::string_view role) {
  auto sym = [](double b) { return WeightInit{static_cast<float>(-b), static_cast<float>(b)}; };
  switch (op) {
    case OpKind::linear: return sym(1.0 / std::sqrt(static_cast<double>(a.in_features)));
    case OpKind::conv2d: {
      const double fan_in = static_cast<double>(a.in_channels / a.groups * a.kernel[0] * a.kernel[1]);
      return role == "weight" ? sym(std::sqrt(6.0 / fan_in)) : sym(1.0 / std::sqrt(fan_in));
    }
    case OpKind::batch_norm:
      if (role == "weight") return {0.5f, 1.0f};
      if (role == "running_var") return {0.5f, 1.5f};
      return sym(0.1);
    case OpKind::layer_norm: return role == "weight" ? WeightInit{0.8f, 1.2f} : sym(0.1);
    case OpKind::attention:
      if (role == "in_proj_weight") return sym(std::sqrt(6.0 / static_cast<double>(4 * a.embed_dim)));
      if (role == "out_proj_weight") return sym(1.0 / std::sqrt(static_cast<double>(a.embed_dim)));
      return sym(0.02);
    case OpKind::embedding: return sym(0.1);
    case OpKind::kv_attention: return {0.f, 1.f};  // inv_freq: rotary frequencies, in (0, 1] when trained
    default: return sym(0.1);
  }
}

Status write_text_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return io_error(path + ": cannot create: " + std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return io_error(path + ": write failed");
  return Status::OK();
}

}  // namespace

std::string tensor_suffix(std::string_view role) {
  if (role == "out_proj_weight") return "out_proj.weight";
  if (role == "out_proj_bias") return "out_proj.bias";
  return std::string(role);
}

ModelBuilder::ModelBuilder(std::string name, uint64_t seed) : seed_(seed) { manifest_.name = std::move(name); }

std::string ModelBuilder::input(const std::string& name, DType dtype, Shape shape) {
  manifest_.inputs.push_back({name, dtype, shape});
  return name;
}

void ModelBuilder::output(const std::string& name, DType dtype, Shape shape) {
  manifest_.outputs.push_back({name, dtype, shape});
}

std::string ModelBuilder::add(const std::string& name, OpKind op, const LayerAttrs& attrs,
                              std::vector<std::string> inputs, std::string weight_prefix) {
  if (weight_prefix.empty()) weight_prefix = name;
  LayerSpec l;
  l.name = name;
  l.op = op;
  l.attrs = attrs;
  l.inputs = std::move(inputs);
  for (const WeightSpec& spec : weight_specs(op, attrs)) {
    if (!spec.required) continue;
    const std::string tensor = weight_prefix + "." + tensor_suffix(spec.role);
    l.weights.push_back({std::string(spec.role), tensor});
    weights_.push_back({tensor, TensorDesc{DType::f32, spec.shape}, default_init(op, attrs, spec.role)});
    parameters_ += static_cast<uint64_t>(spec.shape.numel());
  }
  manifest_.layers.push_back(std::move(l));
  return name;
}

void ModelBuilder::fill(uint64_t seed, const std::string& tensor, WeightInit init, float* out, uint64_t count) {
  uint64_t state = seed ^ fnv1a(tensor);
  const float scale = (init.high - init.low) / static_cast<float>(1u << 24);
  for (uint64_t i = 0; i < count; ++i) {
    out[i] = init.low + static_cast<float>(splitmix64(state) >> 40) * scale;
  }
}

Status ModelBuilder::write(const std::string& dir, bool manifest_only) const {
  // Validate through the real parser so a builder bug can never write a model Ember refuses.
  const std::string text = manifest_to_json(manifest_);
  EMBER_RETURN_IF_ERROR(parse_manifest(text, dir + "/model.json"));

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error(dir + ": cannot create directory: " + ec.message());

  if (manifest_only) return write_text_file(dir + "/model.json", text);
  uint64_t total = 0;
  for (const auto& w : weights_) total += w.desc.bytes();
  EMBER_ASSIGN_OR_RETURN(auto data, HostBuffer::allocate(total));
  std::vector<TensorToWrite> tensors;
  uint64_t offset = 0;
  for (const auto& w : weights_) {
    auto* p = reinterpret_cast<float*>(data->data() + offset);
    fill(seed_, w.tensor, w.init, p, static_cast<uint64_t>(w.desc.shape.numel()));
    tensors.push_back({w.tensor, w.desc, p});
    offset += w.desc.bytes();
  }
  EMBER_RETURN_IF_ERROR(write_safetensors(dir + "/weights.safetensors", tensors,
                                          {{"format", "pt"}, {"ember.seed", std::to_string(seed_)}}));
  return write_text_file(dir + "/model.json", text);
}

}  // namespace ember::gpu
