// model.json's "generation" section: what the serving side needs to run a language model token by
// token (docs/design/generation.md). A model that has it is *generative*.
//
// Layout (a JSON object; unknown keys are errors):
//   1. "family": "gpt2" | "llama"              the decoder family it was imported as
//   2. "context_length": int >= 1              positions a sequence may use (0 ..= context_length - 1)
//   3. "vocab_size": int >= 1                  the logits' last dim
//   4. "num_kv_layers", "num_kv_heads", "head_dim": int >= 1
//                                              the kv_attention layers' count and shape: a KV block
//                                              holds, per token, num_kv_layers * 2 * num_kv_heads *
//                                              head_dim elements of the cache type
//   5. "kv_dtype": "float32" | "float16" | "bfloat16"
//                                              the cache's element type the model is served with
//                                              (by default its weights' width at import)
//   6. "kv_bytes_per_token": int               num_kv_layers * 2 * num_kv_heads * head_dim *
//                                              size(kv_dtype), written out for readers; must agree
//   7. "bos_token_id": int (optional), "eos_token_ids": [int] (may be empty)
//   8. "sampling": {"temperature", "top_p", "top_k"} (each optional): the defaults of
//      generation_config.json, for requests that set none
//   9. "chat_template": "llama3" | "llama2" | "chatml" (optional): the built-in template the
//      tokenizer_config.json's Jinja template was recognised as
//  10. "tokenizer", "tokenizer_config": tensor names (optional): tokenizer.json and
//      tokenizer_config.json as U8 [bytes] tensors of weights.safetensors, after every layer's
//      weights (outside every layer's byte range: swap-in, transfer of layer ranges and
//      partitioning never copy them to a device; the whole blob carries them to every node)
//
// Checked against the graph when model.json is parsed (check_generation): the inputs are exactly
// input_ids, positions, kv_meta, last_index (int64 [-1] each, in that order); one output, float32
// [-1, vocab_size]; the kv_attention layers are num_kv_layers, the i-th with kv_layer i, each of
// num_kv_heads and head_dim; an embedding of `positions` (learned positions) has at least
// context_length rows; token ids are below vocab_size. Where the tokenizer tensors are (and that
// they exist) is checked by Model, which has the weights index.
//
// Pure; anyone, any thread; never throws.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "model/tensor.hpp"

namespace ember::gpu {

struct Manifest;
struct Graph;

struct GenerationSpec {
  std::string family;
  uint32_t context_length = 0;
  uint32_t vocab_size = 0;
  uint32_t num_kv_layers = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  DType kv_dtype = DType::f32;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::string chat_template;     // "" when none was recognised
  std::string tokenizer;         // tensor name, "" when the model carries no tokenizer
  std::string tokenizer_config;  // tensor name, "" when absent

  /// Cache bytes one token takes across every kv_attention layer (K and V) at kv_dtype.
  uint64_t kv_bytes_per_token() const;
  bool operator==(const GenerationSpec&) const = default;
};

/// The decoder families a generation section may name.
bool known_generation_family(std::string_view family);
/// The built-in chat templates a generation section may name.
bool known_chat_template(std::string_view name);

/// Parses the section (`j` is its object); `where` prefixes messages ("model.json: generation").
Result<GenerationSpec> parse_generation(const nlohmann::json& j, const std::string& where);
/// Writes the section as parse_generation reads it.
void generation_to_json(const GenerationSpec& spec, nlohmann::ordered_json& out);
/// Checks the section against the manifest's inputs, outputs and layers (see the header).
Status check_generation(const Manifest& manifest, const Graph& graph, const std::string& where);

}  // namespace ember::gpu
