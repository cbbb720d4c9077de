// model.json: the description of one model version, parsed and validated without its weights.
//
// Layout of model.json (a JSON object; unknown top-level keys are errors so typos surface):
//   1. "format": "ember-model", "format_version": 1
//   2. "name": the model's name (1..128 chars of [A-Za-z0-9_.-]); "description": optional text
//   3. "inputs":  [{"name", "dtype", "shape"}]   shape dims may be -1 (batch, sequence length)
//   4. "outputs": [{"name", "dtype", "shape"}]   each names an input or a layer
//   5. "layers":  [{"name", "op", "inputs": [value names], "attrs": {...}, "weights": {role: tensor}}]
//      in execution order. A layer's output value is named after the layer. Every input must be a
//      model input or an earlier layer. `weights` maps each role the op takes (see ops.hpp) to a
//      tensor of weights.safetensors.
//   6. "serving": {"slo_deadline_ms", "slo_percentile", "max_batch", "dynamic_batching", "autoscale"}
//      all optional; "dynamic_batching": {"preferred_batch", "max_queue_delay_us"} (both optional;
//      its presence turns dynamic batching on, as Triton's dynamic_batching block does);
//      "dynamic_batching" may also hold "pad": {input name: pad value} (ServingConfig::pad_inputs);
//      "autoscale" holds this model's own autoscaling keys (config/autoscale_config.hpp, the YAML
//      section's names): "policy" a word, "min_replicas"/"max_replicas" integers, the targets,
//      headroom and tolerance numbers, the delays, idle_timeout and host_keep_alive duration
//      strings ("30s", "250ms"). Each replaces the cluster's default for this model.
//   7. "generation": optional; present in a generative model (a language model served token by
//      token): its family, context, KV cache shape, special tokens, sampling defaults, chat
//      template and tokenizer tensors (model/generation_spec.hpp has its layout and checks).
//
// Pure parsing; anyone, any thread; never throws. Validation covers everything that can be
// checked without the weights file: names, references, attributes, roles and shapes, by running
// shape inference with every -1 dim set to 2. Errors name `source` and the field
// ("model.json: layers[3] 'fc2' (linear): attrs.in_features: ...").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "config/autoscale_config.hpp"
#include "model/generation_spec.hpp"
#include "model/ops.hpp"
#include "model/tensor.hpp"

namespace ember::gpu {

inline constexpr int kManifestFormatVersion = 1;

struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;  // may contain -1
};

struct WeightBinding {
  std::string role;    // as weight_specs() names it
  std::string tensor;  // name in weights.safetensors
};

struct LayerSpec {
  std::string name;
  OpKind op = OpKind::count;
  LayerAttrs attrs;
  std::vector<std::string> inputs;
  std::vector<WeightBinding> weights;  // in weight_specs() order; absent optional roles are omitted

  /// Tensor bound to `role`, or nullptr.
  const std::string* weight(std::string_view role) const;
};

/// What the serving layers need to know about a model. Defaults apply when model.json is silent.
struct ServingConfig {
  /// Latency objective per request, microseconds. 0 = none declared (default).
  uint64_t slo_deadline_us = 0;
  /// Fraction of requests that must meet the deadline (Torpor's p). Default 0.98.
  double slo_percentile = 0.98;
  /// Largest batch (rows along the first dimension) the serving layer may form. Default 8.
  uint32_t max_batch = 8;
  /// Dynamic batching: requests of this model waiting on a node run together, concatenated along
  /// the batch dimension, up to max_batch rows. Off unless model.json has "dynamic_batching".
  bool dynamic_batching = false;
  /// Batching waits for this many rows (at most max_batch; 0 = max_batch) ...
  uint32_t preferred_batch = 0;
  /// ... but at most this long after the oldest request arrived, microseconds (never past what
  /// its SLO allows). 0 (the default): no waiting; a batch is whatever waits when a device frees.
  uint64_t max_queue_delay_us = 0;
  /// Requests of different sequence lengths in one batch ("dynamic_batching": {"pad": {"input_ids":
  /// 0, "attention_mask": 0}}): these inputs (declared [-1, -1, ...]) may differ along dim 1 and are
  /// padded to the batch's longest with their value, and every output declared [-1, -1, ...] is cut
  /// back to each member's length. Only for a model that masks padded positions (a padding-mask
  /// input among these, set to 0 where padded): the owner's declaration, which Ember cannot check.
  std::vector<std::pair<std::string, double>> pad_inputs;
  /// This model's autoscaling keys over the cluster's defaults (none by default).
  AutoscaleOverrides autoscale;
};

struct Manifest {
  std::string name;
  std::string description;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<LayerSpec> layers;
  ServingConfig serving;
  /// A generative model's section (model/generation_spec.hpp); nullopt for every other model.
  std::optional<GenerationSpec> generation;
};

/// The dataflow of a manifest with names resolved to value ids. Values 0..inputs-1 are the model
/// inputs in order; value inputs + i is the output of layer i.
struct Graph {
  uint32_t num_inputs = 0;
  std::vector<std::string> value_names;
  std::vector<std::vector<uint32_t>> layer_inputs;  // per layer, the values it reads
  std::vector<uint32_t> outputs;                     // the model outputs, in manifest order
  /// Per value, the last layer that reads it; num_layers when it is a model output; -1 if unread.
  std::vector<int64_t> last_use;

  uint32_t layer_value(uint32_t layer) const { return num_inputs + layer; }
  uint32_t num_layers() const { return static_cast<uint32_t>(layer_inputs.size()); }
  /// -1 for a model input, else the layer that produces `value`.
  int64_t producer(uint32_t value) const { return static_cast<int64_t>(value) - num_inputs; }
  std::optional<uint32_t> find(std::string_view name) const;

  /// Values read by layers in `range` but produced before it (or model inputs), ascending.
  std::vector<uint32_t> range_inputs(LayerRange range) const;
  /// Values produced in `range` and read after it or declared model outputs, ascending.
  std::vector<uint32_t> range_outputs(LayerRange range) const;
};

/// Resolves names; fails when a layer reads a value that is not a model input or an earlier layer,
/// when names repeat, or when an output names nothing.
Result<Graph> build_graph(const Manifest& manifest, std::string_view source);

/// Shape inference for the layers of `range`. `values` is indexed by value id and must hold every
/// value of graph.range_inputs(range); on success it also holds every value the range produces.
/// Errors name the model and layer ("model 'm': layers[4] 'fc2' (linear): ...").
Status infer_range(const Manifest& manifest, const Graph& graph, LayerRange range,
                   std::vector<std::optional<TensorDesc>>& values);

/// Parses and validates model.json text.
Result<Manifest> parse_manifest(std::string_view json_text, std::string_view source);

/// Renders a manifest as model.json text (pretty-printed; round-trips through parse_manifest).
std::string manifest_to_json(const Manifest& manifest);

}  // namespace ember::gpu
