// The reference architectures `ember model new` builds: an MLP, ResNet-50, BERT-base and GPT-2
// small, each at the real model's shapes, plus a tiny variant of each for tests.
//
// Pure construction; anyone, any thread. Layer and tensor names follow the PyTorch modules that
// tools/ember_torch.py builds for the same architecture (torchvision's ResNet, torch.nn's
// TransformerEncoder), so a PyTorch state dict maps onto an Ember model by name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "model/model_builder.hpp"

namespace ember::gpu {

struct ArchitectureOptions {
  bool tiny = false;
  uint64_t seed = 0;
  /// Overrides the model's name (default: the architecture's, with "-tiny" when tiny).
  std::string name;
};

/// "mlp", "resnet50", "bert-base", "gpt2", "gpt2-medium".
const std::vector<std::string_view>& architecture_names();

/// A builder holding the whole architecture, ready to write().
Result<ModelBuilder> build_architecture(std::string_view arch, const ArchitectureOptions& options);

}  // namespace ember::gpu
