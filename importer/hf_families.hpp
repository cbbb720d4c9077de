// The two decoder families mapped onto Ember's op table: from a checked config (hf_config.hpp) and
// a checkpoint's tensor names and shapes (hf_checkpoint.hpp), the model.json of the graph
// docs/design/generation.md lays down and, for each of its weights in file order, how to make it
// from the checkpoint's tensors. Nothing is read here but the checkpoint's headers.
//
// The graph (inputs input_ids, positions, kv_meta, last_index, int64 [-1] each; output logits
// float32 [-1, vocab]), one row per token of the step until the gather:
//   gpt2   wte(input_ids) + wpe(positions); per block i:
//            ln_1 -> c_attn (linear E -> 3E: q, k, v heads as GPT-2 packs them) -> kv_attention
//            (kv_layer i, no rotary, scale 1/sqrt(D) or GPT-2's by-layer scale) -> c_proj -> + ;
//            ln_2 -> c_fc -> gelu -> c_proj -> + ;
//          gather(last_index) -> ln_f -> logits (linear, no bias: wte's rows again when tied).
//   llama  embed_tokens(input_ids); per block i:
//            input_layernorm (rms) -> qkv_proj (q, k, v projections concatenated: one linear E ->
//            (H + 2 Hkv) D, biases concatenated when the model has them) -> kv_attention
//            (kv_layer i, rope_dim D, inv_freq computed at import) -> o_proj -> + ;
//            post_attention_layernorm -> gate_proj, up_proj -> silu(gate) * up -> down_proj -> + ;
//          gather(last_index) -> norm -> logits (lm_head, or embed_tokens' rows when tied).
// Layers are named after the modules ("model.layers.3.self_attn.qkv_proj", "transformer.h.0.ln_1")
// and their tensors "<layer>.<role>"; the head is the layer "logits" (the output is the layer).
// A tied head is its own tensor, a copy of the embedding (each layer owns its bytes:
// docs/design/onnx-import.md's decision for tied weights), counted in duplicated_bytes.
//
// Checked against the checkpoint: every tensor the mapping reads is there, a float, and of the
// shape the config implies (an Error names the tensor, its shape and the one expected); every
// tensor of the checkpoint is read, except the buffers transformers itself ignores (GPT-2's
// attn.bias / attn.masked_bias causal masks, rotary_emb.inv_freq), and a tied checkpoint's
// lm_head.weight (transformers ties it to the embedding, whose values win): a tensor left over is
// an Error listing it (a checkpoint of another layout).
//
// Pure over its arguments; anyone, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "importer/hf_checkpoint.hpp"
#include "importer/hf_config.hpp"
#include "model/manifest.hpp"

namespace ember::importer {

/// How one Ember tensor is made.
struct WeightRecipe {
  enum class Kind : uint8_t {
    copy,         // from[0] as stored (nn.Linear's [out, in], norms, embeddings, biases)
    transpose,    // from[0], a matrix stored [in, out] (GPT-2's Conv1D), transposed
    concat_rows,  // from[0], from[1], ... stacked along dim 0 (q, k, v projections and biases)
    values,       // `values` (computed at import: rotary frequencies)
  };
  Kind kind = Kind::copy;
  std::vector<std::string> from;
  std::vector<float> values;
};

struct PlannedWeight {
  std::string tensor;    // Ember's name, "<layer>.<role>"
  gpu::Shape shape;      // Ember's shape
  bool exact = false;    // kept float32 whatever the model's width (gpu::exact_weights ops)
  WeightRecipe recipe;
};

struct HfPlan {
  gpu::Manifest manifest;             // inputs, outputs, layers (no generation section: hf_import adds it)
  std::vector<PlannedWeight> weights; // in file order: layer order, each layer's roles in kernel order
  uint64_t parameters = 0;            // elements written, the tied copy included
  uint64_t duplicated_elements = 0;   // of which copies of another tensor (a tied head)
  std::vector<std::string> ignored;   // checkpoint tensors deliberately not read (see above)
};

/// Maps `config` onto the graph above for a model named `name`, checked against `checkpoint`.
/// unsupported / invalid_argument / not_found naming the tensor at fault.
Result<HfPlan> plan_hf_model(const HfConfig& config, const HfCheckpoint& checkpoint, const std::string& name);

}  // namespace ember::importer
