// ModelBuilder: assembles a model version (manifest plus weights) layer by layer and writes it
// as a model directory, with deterministic pseudo-random weights.
//
// Used by `ember model new` (architectures.hpp) and by tests. Not thread-safe; one builder per
// thread. Weight values depend only on (seed, tensor name), never on build order, so the same
// seed gives byte-identical files and a single tensor can be regenerated anywhere. Tensors are
// written in layer order, each layer's roles in kernel order, which satisfies the byte-range rule
// of model.hpp by construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "model/manifest.hpp"

namespace ember::gpu {

/// How a weight tensor is filled: uniform in [low, high).
struct WeightInit {
  float low = 0.f;
  float high = 0.f;
};

class ModelBuilder {
 public:
  ModelBuilder(std::string name, uint64_t seed);

  void set_description(std::string text) { manifest_.description = std::move(text); }
  ServingConfig& serving() { return manifest_.serving; }
  /// A generative model's section (model/generation_spec.hpp); unset by default.
  std::optional<GenerationSpec>& generation() { return manifest_.generation; }

  /// Declares a model input; returns its name for use as a layer input.
  std::string input(const std::string& name, DType dtype, Shape shape);
  /// Declares a model output: the value `name` (an input or a layer) with the given declared shape.
  void output(const std::string& name, DType dtype, Shape shape);

  /// Appends a layer reading `inputs`; returns its name (its output value). Each weight role the
  /// op takes becomes the tensor "<weight_prefix>.<role>" (PyTorch's state-dict naming; attention's
  /// out_proj_* roles become "out_proj.weight"/"out_proj.bias"), filled by the default init for
  /// that op and role unless `init` overrides it for every role.
  std::string add(const std::string& name, OpKind op, const LayerAttrs& attrs, std::vector<std::string> inputs,
                  std::string weight_prefix = {});

  const Manifest& manifest() const { return manifest_; }
  /// Number of weight parameters so far.
  uint64_t parameters() const { return parameters_; }

  /// Validates the manifest and writes DIR/model.json and, unless `manifest_only`,
  /// DIR/weights.safetensors (creating DIR). A manifest alone is what an importer fills with
  /// trained weights (tools/ember_torch.py).
  Status write(const std::string& dir, bool manifest_only = false) const;

  /// The bytes the seeded generator yields for one tensor (exposed for tests).
  static void fill(uint64_t seed, const std::string& tensor, WeightInit init, float* out, uint64_t count);

 private:
  struct PendingWeight {
    std::string tensor;
    TensorDesc desc;
    WeightInit init;
  };
  Manifest manifest_;
  uint64_t seed_;
  uint64_t parameters_ = 0;
  std::vector<PendingWeight> weights_;  // in file order
};

/// The tensor name suffix of a weight role ("out_proj_weight" -> "out_proj.weight").
std::string tensor_suffix(std::string_view role);

}  // namespace ember::gpu
