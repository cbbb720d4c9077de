// A Hugging Face config.json read into the few numbers and choices Ember's two decoder families
// need, with everything that would change the math and is not implemented refused by name.
//
// Families (config.json's "model_type", checked against "architectures" when it is given):
//   gpt2   GPT2LMHeadModel: learned positions, LayerNorm, GELU (gelu_new / gelu_pytorch_tanh /
//          gelu_fast: the tanh form; gelu: the erf form; relu), Conv1D weights, the head tied to wte
//          unless tie_word_embeddings is false. Attention scores scaled by 1/sqrt(D)
//          (scale_attn_weights, default true) and by 1/(layer + 1) with
//          scale_attn_by_inverse_layer_idx. reorder_and_upcast_attn only changes precision (Ember
//          computes attention in float32): accepted. add_cross_attention is refused.
//   llama  LlamaForCausalLM, and MistralForCausalLM / Qwen2ForCausalLM, which differ from it only in
//          config: RMSNorm, rotary positions over the whole head (rope_theta; rope_scaling none,
//          linear or llama3; dynamic, yarn, longrope and the rest refused), SwiGLU MLP (hidden_act
//          silu only), grouped-query attention (num_key_value_heads), head_dim from config when
//          given; biases: llama's attention_bias (q, k, v and o) and mlp_bias, Qwen2's q/k/v
//          biases (always, o_proj none), Mistral none. pretraining_tp only slices the same matmuls:
//          ignored.
// Refused with the reason (unsupported): another model_type or architecture; quantization_config;
// a sliding window in effect (Mistral's sliding_window, Qwen2's with use_sliding_window, below the
// context length); partial_rotary_factor other than 1; and keys of other architectures that change
// the math (attn_logit_softcapping, final_logit_softcapping, logit_scale, clip_qkv, use_qk_norm ...)
// when they are set. Missing or mistyped required keys, and sizes that do not fit together
// (hidden_size not a multiple of the heads, heads not a multiple of the kv heads), are
// invalid_argument. Keys nothing reads (dropout rates, initializer_range, use_cache,
// torch_dtype ...) are ignored.
//
// Pure; anyone, any thread; never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace ember::importer {

enum class HfFamily : uint8_t { gpt2, llama };
enum class HfActivation : uint8_t { gelu_tanh, gelu, relu, silu };
enum class RopeScaling : uint8_t { none, linear, llama3 };

std::string_view family_name(HfFamily f);

struct HfConfig {
  HfFamily family = HfFamily::gpt2;
  std::string model_type;  // gpt2, llama, mistral, qwen2
  int64_t vocab_size = 0;
  int64_t hidden = 0;        // n_embd, hidden_size
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;      // = heads for gpt2
  int64_t head_dim = 0;
  int64_t intermediate = 0;  // the MLP's inner width
  int64_t context_length = 0;  // n_positions, max_position_embeddings
  float norm_eps = 1e-5f;
  HfActivation activation = HfActivation::gelu_tanh;
  bool tie_word_embeddings = true;
  // gpt2
  bool scale_attn_weights = true;
  bool scale_attn_by_layer = false;
  // llama
  double rope_theta = 10000.0;
  RopeScaling rope = RopeScaling::none;
  double rope_factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_context = 0;
  bool qkv_bias = false, o_bias = false, mlp_bias = false;
  // special tokens as config.json gives them (generation_config.json may add eos ids)
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
};

/// Parses config.json text; `source` names the file in messages.
Result<HfConfig> parse_hf_config(std::string_view text, const std::string& source);

/// The rotary table kv_attention's `inv_freq` weight holds ([head_dim / 2] float32), computed in
/// float32 operation by operation as transformers' modeling_rope_utils does for the config's
/// rope_scaling: 1 / theta^(2i / D); linear divides by factor; llama3 (Llama 3.1) divides the
/// low-frequency band by factor and interpolates the middle band.
std::vector<float> rope_inv_freq(const HfConfig& config);

/// The softmax scale of layer `layer`'s attention: 1/sqrt(D), GPT-2's options applied.
float attention_scale(const HfConfig& config, int64_t layer);

}  // namespace ember::importer
