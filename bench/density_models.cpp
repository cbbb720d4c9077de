#include "bench/density_models.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "gpu/executor.hpp"
#include "gpu/sim_device.hpp"
#include "model/architectures.hpp"
#include "model/convert.hpp"
#include "model/model.hpp"
#include "model/model_builder.hpp"
#include "model/sample_inputs.hpp"

namespace ember::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

gpu::LayerAttrs linear(int64_t in, int64_t out) {
  gpu::LayerAttrs a;
  a.in_features = in;
  a.out_features = out;
  a.bias = true;
  return a;
}

gpu::ModelBuilder mlp(const std::string& name, uint64_t seed, int64_t in, int64_t hidden, int depth) {
  gpu::ModelBuilder b(name, seed);
  b.set_description("density benchmark MLP " + std::to_string(in) + "-" + std::to_string(hidden) + "x" +
                    std::to_string(depth));
  std::string x = b.input("input", gpu::DType::f32, {-1, in});
  int64_t width = in;
  for (int i = 0; i < depth; ++i) {
    x = b.add("fc" + std::to_string(i), gpu::OpKind::linear, linear(width, hidden), {x});
    x = b.add("relu" + std::to_string(i), gpu::OpKind::relu, {}, {x});
    width = hidden;
  }
  x = b.add("head", gpu::OpKind::linear, linear(width, 10), {x});
  b.output(x, gpu::DType::f32, {-1, 10});
  return b;
}

Result<gpu::ModelBuilder> family_builder(const std::string& family, const std::string& name, uint64_t seed) {
  if (family == "wide") return mlp(name, seed, 512, 2048, 3);
  if (family == "deep") return mlp(name, seed, 1024, 1024, 6);
  gpu::ArchitectureOptions o;
  o.tiny = true;
  o.seed = seed;
  o.name = name;
  return gpu::build_architecture("resnet50", o);
}

}  // namespace

bool same_outputs(const std::vector<gpu::HostTensor>& outputs, const std::vector<gpu::HostTensor>& reference) {
  if (outputs.size() != reference.size()) return false;
  for (const auto& ref : reference) {
    auto it = std::find_if(outputs.begin(), outputs.end(), [&](const gpu::HostTensor& t) { return t.name == ref.name; });
    if (it == outputs.end() || it->desc.dtype != ref.desc.dtype || !(it->desc.shape == ref.desc.shape)) return false;
    const auto n = static_cast<size_t>(ref.desc.shape.numel());
    if (ref.desc.dtype != gpu::DType::f32) {
      if (!std::equal(ref.data(), ref.data() + ref.desc.bytes(), it->data())) return false;
      continue;
    }
    const float* a = it->as<float>();
    const float* b = ref.as<float>();
    float scale = 0;
    for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(b[i]));
    for (size_t i = 0; i < n; ++i) {
      if (!(std::fabs(a[i] - b[i]) <= 1e-4f * std::max(scale, 1e-6f))) return false;
    }
  }
  return true;
}

Result<std::vector<DensityFunction>> make_density_functions(const std::string& root, uint32_t count,
                                                            const SimDeviceConfig& device,
                                                            uint32_t inputs_per_function, gpu::DType width) {
  static const char* kFamilies[] = {"wide", "deep", "conv"};
  SimDeviceConfig dc = device;
  dc.memory_bytes = 1ull << 30;
  dc.pcie_bytes_per_s = 0;
  EMBER_ASSIGN_OR_RETURN(auto dev, gpu::SimDevice::create(dc, 0));
  std::vector<DensityFunction> out;
  for (uint32_t i = 0; i < count; ++i) {
    DensityFunction f;
    f.family = kFamilies[i % 3];
    f.name = "f" + std::to_string(i) + "-" + f.family;
    const std::string dir = (fs::path(root) / f.name / "1").string();
    f.seed = 1000 + i;
    EMBER_ASSIGN_OR_RETURN(auto builder, family_builder(f.family, f.name, f.seed));
    if (!fs::exists(fs::path(dir) / "weights.safetensors")) {
      EMBER_RETURN_IF_ERROR(builder.write(dir));
      if (width != gpu::DType::f32) {
        if (auto converted = gpu::convert_model_dir(dir, dir, width); !converted.ok()) return converted.error();
      }
    }
    EMBER_ASSIGN_OR_RETURN(auto model, gpu::Model::load(dir));
    f.weights_bytes = model->data_bytes();
    EMBER_ASSIGN_OR_RETURN(auto ex, gpu::LayerExecutor::create(*dev, model, {0, model->num_layers()}));
    for (uint32_t k = 0; k < inputs_per_function; ++k) {
      EMBER_ASSIGN_OR_RETURN(auto in, gpu::sample_model_inputs(*model, 4, 16, 7 * i + k));
      EMBER_ASSIGN_OR_RETURN(auto ref, ex->run_host(in));
      f.inputs.push_back(std::move(in));
      f.reference.push_back(std::move(ref));
    }
    out.push_back(std::move(f));
  }
  return out;
}

Status set_deadline(const std::string& root, DensityFunction& f, uint64_t warm_us, double slo_factor) {
  f.warm_us = warm_us;
  f.deadline_us = static_cast<uint64_t>(slo_factor * static_cast<double>(warm_us));
  // The node reads the SLO from model.json (the owner's declaration), like every model's.
  const std::string dir = (fs::path(root) / f.name / "1").string();
  EMBER_ASSIGN_OR_RETURN(auto builder, family_builder(f.family, f.name, f.seed));
  builder.serving().slo_deadline_us = f.deadline_us;
  return builder.write(dir, /*manifest_only=*/true);
}

}  // namespace ember::bench
