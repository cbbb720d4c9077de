// Model: one model version loaded into host memory and fully validated: manifest, dataflow graph,
// weights index, and the byte range of every layer.
//
// A model version is a directory:
//   DIR/model.json           the manifest (manifest.hpp documents its layout)
//   DIR/weights.safetensors  the weights (safetensors.hpp documents the file layout)
// with one extra rule Ember relies on everywhere: each layer's tensors are contiguous in the data
// section and the layers follow each other in layer order, with nothing else in between. So layer
// i owns bytes layer_bytes(i) and a layer range [i, j) owns one byte range, range_bytes({i, j}):
// transfer, swap-in and partitioning all work on byte ranges. A tensor may belong to one layer
// only (tied weights are stored once per layer that uses them). The one exception to "every tensor
// is a layer's": a generative model's tokenizer files (model/generation_spec.hpp), U8 tensors the
// generation section names, which must lie after the last layer's bytes: outside every layer's
// range, so nothing that copies layers to a device copies them, while the whole file (what caches,
// multicast and every node's load move) carries them. layers_bytes() is what a device holds.
//
// Immutable after load and shared as `shared_ptr<const Model>`; any thread may read it. Loading
// never crashes on bad files: each problem is an Error naming the file and the field.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "model/host_buffer.hpp"
#include "model/manifest.hpp"
#include "model/safetensors.hpp"

namespace ember::gpu {

inline constexpr const char* kManifestFile = "model.json";
inline constexpr const char* kWeightsFile = "weights.safetensors";
/// A model repository (Triton's layout): ROOT/<model>/<version>/{model.json,weights.safetensors},
/// version = 1, 2, ... (digits only), or ROOT/<model>/model.json for a model folder that is itself
/// version 1. The folder of one version under `root`, or "" when the repository has no such
/// version. Reads only directory entries; anyone, any thread.
std::string repository_version_dir(const std::string& root, const std::string& model, uint32_t version);

/// The name of stage `range` of model `model`: "<model>#<first>-<last>" (no model name contains
/// '#'). The one place that spells a stage's name: Model::stage names its stage model so, the node
/// serves the stage under it (ember::stage_key::wire()), and a node's cache keeps a stage's share
/// of a blob under the blob key so named (ember::part_key_of). Pure: anyone.
std::string stage_name(const std::string& model, LayerRange range);

/// model.json larger than this is refused.
inline constexpr uint64_t kMaxManifestBytes = 64ull << 20;

class Model {
 public:
  /// Loads DIR/model.json and DIR/weights.safetensors.
  static Result<std::shared_ptr<const Model>> load(const std::string& dir);

  /// Builds a model from a manifest's text and a whole safetensors file already in memory.
  /// `source` names the model in messages (usually its directory).
  static Result<std::shared_ptr<const Model>> from_memory(std::string_view manifest_json,
                                                          std::shared_ptr<const HostBuffer> weights_file,
                                                          std::string_view source);

  /// Stage `range` of `whole` as a model of its own (Flashpoint's pipeline stages): its layers are
  /// the range's, its inputs the values the range reads from before it (model inputs or earlier
  /// layers' outputs, under their names, free dims -1), its outputs the values it hands on, and its
  /// weights the range's bytes of `whole`'s buffer (shared, not copied: only that range and the
  /// header need to be there, so a node that fetched one layer range can serve it). Named
  /// stage_name(name, range). Stages of consecutive ranges, each fed
  /// the previous ones' outputs, compute exactly what `whole` does. invalid_argument for an empty
  /// range or one past the model.
  static Result<std::shared_ptr<const Model>> stage(const std::shared_ptr<const Model>& whole, LayerRange range);

  /// Validates a model directory as load() would, reading model.json and only the header of
  /// weights.safetensors (a registry can check thousands of models without reading their bytes).
  /// Returns the size of weights.safetensors.
  static Result<uint64_t> check_dir(const std::string& dir);

  const std::string& source() const { return source_; }
  const Manifest& manifest() const { return manifest_; }
  const Graph& graph() const { return graph_; }
  const SafetensorsIndex& weights_index() const { return index_; }
  uint32_t num_layers() const { return static_cast<uint32_t>(manifest_.layers.size()); }
  const LayerSpec& layer(uint32_t i) const { return manifest_.layers[i]; }

  /// Bytes of layer i, relative to the start of the data section. Length 0 for a layer without weights.
  ByteRange layer_bytes(uint32_t layer) const { return layer_bytes_[layer]; }
  /// Bytes of layers [first, last), relative to the data section; one contiguous range.
  ByteRange range_bytes(LayerRange range) const;
  /// Offset of the data section in weights.safetensors (add it to get file offsets).
  uint64_t data_offset() const { return index_.data_offset; }
  /// Total size of weights.safetensors.
  uint64_t file_bytes() const { return index_.data_offset + index_.data_bytes; }

  /// The data section in host memory.
  const uint8_t* data() const { return file_->data() + index_.data_offset; }
  uint64_t data_bytes() const { return index_.data_bytes; }
  /// The whole weights file in host memory (header included), e.g. for transfer.
  const std::shared_ptr<const HostBuffer>& file() const { return file_; }
  /// Bytes of every layer's weights, range_bytes({0, num_layers()}).length: data_bytes() without a
  /// generative model's trailing tokenizer tensors. What a device holds of the whole model.
  uint64_t layers_bytes() const { return range_bytes({0, num_layers()}).length; }

  /// A generative model's section (manifest().generation), or nullptr.
  const GenerationSpec* generation() const { return manifest_.generation ? &*manifest_.generation : nullptr; }
  /// tokenizer.json's and tokenizer_config.json's bytes as the model carries them (the tensors the
  /// generation section names); empty when it names none, and for a model checked without its
  /// bytes (check_dir). Valid as long as the model.
  std::string_view tokenizer_json() const { return trailing_text(tokenizer_); }
  std::string_view tokenizer_config_json() const { return trailing_text(tokenizer_config_); }

  /// Weights of layer i in the op's kernel order; nullptr where an optional weight is absent.
  const std::vector<const TensorInfo*>& layer_weights(uint32_t layer) const { return layer_weights_[layer]; }

  /// Checks a request's inputs against the declared inputs (dtype, rank, fixed dims) and runs
  /// shape inference on the whole model. Returns every value's desc on success.
  Result<std::vector<std::optional<TensorDesc>>> check_inputs(const std::vector<TensorDesc>& inputs) const;

 private:
  Model() = default;
  /// Validates a parsed manifest against the index; `weights_file` may be null (check_dir).
  static Result<std::shared_ptr<const Model>> assemble(Manifest manifest, SafetensorsIndex index,
                                                       std::shared_ptr<const HostBuffer> weights_file,
                                                       std::string_view source);
  /// Binds the generation section's tokenizer tensors (after `layers_end`, U8 [n]) and claims them in `owner`.
  Status bind_trailing(const std::map<std::string, const TensorInfo*, std::less<>>& by_name,
                       std::map<std::string, std::string, std::less<>>& owner, uint64_t layers_end,
                       const std::string& mfile, const std::string& wfile);

  std::string source_;
  Manifest manifest_;
  Graph graph_;
  SafetensorsIndex index_;
  std::shared_ptr<const HostBuffer> file_;
  std::vector<ByteRange> layer_bytes_;
  std::vector<std::vector<const TensorInfo*>> layer_weights_;
  /// The tokenizer tensors' bytes, relative to the data section (length 0: none).
  ByteRange tokenizer_, tokenizer_config_;
  std::string_view trailing_text(ByteRange r) const {
    if (!file_ || r.length == 0) return {};
    return {reinterpret_cast<const char*>(data() + r.offset), static_cast<size_t>(r.length)};
  }
};

}  // namespace ember::gpu
