#include "importer/hf_config.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/json_text.hpp"

namespace ember::importer {

namespace {

using nlohmann::json;

// Bounds far beyond any real model that keep every product of sizes in int64 and every attribute
// within model.json's int32 range.
constexpr int64_t kMaxSize = int64_t{1} << 24;     // hidden, intermediate, vocabulary, positions
constexpr int64_t kMaxCount = 4096;                // layers, heads

// Reads typed keys of config.json; the first problem is kept and reported.
class Keys {
 public:
  Keys(const json& root, const std::string& source) : root_(root), source_(source) {}

  const Status& status() const { return status_; }
  bool has(const char* key) const {
    auto it = root_.find(key);
    return it != root_.end() && !it->is_null();
  }
  /// A positive integer at most `max`; `fallback` when absent or null (required: an error).
  int64_t size(const char* key, bool required, int64_t fallback, int64_t max) {
    auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) {
      if (required) fail(std::string("field '") + key + "' is missing");
      return fallback;
    }
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(max)) ||
        it->get<int64_t>() > max) {
      fail(std::string("field '") + key + "': " + it->dump() + " is not an integer in 1.." + std::to_string(max));
      return fallback;
    }
    return it->get<int64_t>();
  }
  double number(const char* key, double fallback, double min, double max) {
    auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) return fallback;
    if (!it->is_number() || !(it->get<double>() >= min && it->get<double>() <= max)) {
      fail(std::string("field '") + key + "': " + it->dump() + " is not a number in [" + std::to_string(min) + ", " +
           std::to_string(max) + "]");
      return fallback;
    }
    return it->get<double>();
  }
  bool boolean(const char* key, bool fallback) {
    auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) {
      fail(std::string("field '") + key + "': expected true or false, got " + it->dump());
      return fallback;
    }
    return it->get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) {
    auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) return fallback;
    if (!it->is_string()) {
      fail(std::string("field '") + key + "': expected a string, got " + it->dump());
      return fallback;
    }
    return it->get<std::string>();
  }
  /// An id or a list of ids (eos_token_id); empty when absent or null.
  std::vector<int64_t> ids(const char* key) {
    auto it = root_.find(key);
    std::vector<int64_t> out;
    if (it == root_.end() || it->is_null()) return out;
    auto one = [&](const json& v) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        fail(std::string("field '") + key + "': " + it->dump() + " is not a token id or a list of them");
        return;
      }
      out.push_back(v.get<int64_t>());
    };
    if (it->is_array()) {
      for (const auto& v : *it) one(v);
    } else {
      one(*it);
    }
    return out;
  }
  void fail(const std::string& what) {
    if (status_.ok()) status_ = invalid_argument(source_ + ": " + what);
  }
  void refuse(const std::string& what) {
    if (status_.ok()) status_ = unsupported(source_ + ": " + what);
  }

 private:
  const json& root_;
  const std::string& source_;
  Status status_;
};

// Keys other architectures use that change the math; set (not null, false, 0 or 1.0 where that is
// their no-op), they mean a model this importer would compute wrongly.
constexpr const char* kForeignKeys[] = {
    "attn_logit_softcapping", "final_logit_softcapping", "logit_scale", "logits_scaling", "clip_qkv",
    "use_qk_norm", "qk_layernorm", "embedding_multiplier", "residual_multiplier", "attention_multiplier",
    "query_pre_attn_scalar", "num_experts", "num_local_experts", "moe_intermediate_size", "layer_types",
    "rope_interleaved", "parallel_attn", "use_parallel_residual", "alibi"};

bool is_no_op(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() == 0);
}

Status refuse_foreign(const json& root, const std::string& source) {
  if (auto q = root.find("quantization_config"); q != root.end() && !q->is_null()) {
    std::string method = q->is_object() && q->contains("quant_method") && (*q)["quant_method"].is_string()
                             ? " (" + (*q)["quant_method"].get<std::string>() + ")"
                             : "";
    return unsupported(source + ": quantization_config" + method +
                       ": a quantized checkpoint; Ember imports float32, float16 and bfloat16 weights");
  }
  for (const char* key : kForeignKeys) {
    auto it = root.find(key);
    if (it != root.end() && !is_no_op(*it)) {
      return unsupported(source + ": '" + key + "' is " + it->dump() +
                         ": it changes the model's math and Ember's gpt2/llama mapping does not implement it");
    }
  }
  return Status::OK();
}

void read_tokens(Keys& k, HfConfig& c) {
  auto bos = k.ids("bos_token_id");
  if (bos.size() > 1) k.fail("field 'bos_token_id': one id expected");
  if (!bos.empty()) c.bos_token_id = bos.front();
  c.eos_token_ids = k.ids("eos_token_id");
}

Status read_gpt2(Keys& k, HfConfig& c, const std::string& source) {
  c.hidden = k.size("n_embd", true, 0, kMaxSize);
  c.layers = k.size("n_layer", true, 0, kMaxCount);
  c.heads = k.size("n_head", true, 0, kMaxCount);
  c.vocab_size = k.size("vocab_size", true, 0, kMaxSize);
  c.context_length = k.size("n_positions", false, k.size("n_ctx", false, 1024, kMaxSize), kMaxSize);
  c.intermediate = k.size("n_inner", false, 0, kMaxSize);
  c.norm_eps = static_cast<float>(k.number("layer_norm_epsilon", 1e-5, 0, 1));
  c.scale_attn_weights = k.boolean("scale_attn_weights", true);
  c.scale_attn_by_layer = k.boolean("scale_attn_by_inverse_layer_idx", false);
  c.tie_word_embeddings = k.boolean("tie_word_embeddings", true);
  if (k.boolean("add_cross_attention", false)) k.refuse("add_cross_attention: an encoder-decoder GPT-2; Ember imports decoder-only models");
  const std::string act = k.text("activation_function", "gelu_new");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") {
    c.activation = HfActivation::gelu_tanh;
  } else if (act == "gelu") {
    c.activation = HfActivation::gelu;
  } else if (act == "relu") {
    c.activation = HfActivation::relu;
  } else {
    k.refuse("activation_function '" + act + "': Ember's GPT-2 mapping has gelu_new, gelu_pytorch_tanh, gelu_fast, gelu and relu");
  }
  read_tokens(k, c);
  EMBER_RETURN_IF_ERROR(k.status());
  if (c.hidden % c.heads) {
    return invalid_argument(source + ": n_embd " + std::to_string(c.hidden) + " is not a multiple of n_head " + std::to_string(c.heads));
  }
  if (c.intermediate == 0) c.intermediate = 4 * c.hidden;
  c.kv_heads = c.heads;
  c.head_dim = c.hidden / c.heads;
  return Status::OK();
}

Status read_rope(Keys& k, const json& root, HfConfig& c, const std::string& source) {
  c.rope_theta = k.number("rope_theta", 10000.0, 1.0, 1e12);
  if (k.has("partial_rotary_factor") && k.number("partial_rotary_factor", 1.0, 0, 1) != 1.0) {
    k.refuse("partial_rotary_factor " + root["partial_rotary_factor"].dump() +
             ": LlamaAttention rotates the whole head; a partial rotary belongs to another architecture");
  }
  auto rs = root.find("rope_scaling");
  if (rs == root.end() || rs->is_null()) return k.status();
  if (!rs->is_object()) return invalid_argument(source + ": field 'rope_scaling' must be an object or null");
  Keys r(*rs, source);
  std::string type = r.text("rope_type", r.text("type", "default"));
  auto factor = [&]() { return r.number("factor", 0, 1e-6, 1e6); };
  if (type == "default") {
    c.rope = RopeScaling::none;
  } else if (type == "linear") {
    c.rope = RopeScaling::linear;
    if (!r.has("factor")) r.fail("field 'rope_scaling.factor' is missing");
    c.rope_factor = factor();
  } else if (type == "llama3") {
    c.rope = RopeScaling::llama3;
    for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      if (!r.has(key)) r.fail(std::string("field 'rope_scaling.") + key + "' is missing (llama3 scaling needs it)");
    }
    c.rope_factor = factor();
    c.low_freq_factor = r.number("low_freq_factor", 1, 1e-6, 1e6);
    c.high_freq_factor = r.number("high_freq_factor", 4, 1e-6, 1e6);
    c.original_context = r.size("original_max_position_embeddings", false, 1, kMaxSize);
    if (r.status().ok() && c.high_freq_factor <= c.low_freq_factor) {
      r.fail("rope_scaling: high_freq_factor must be greater than low_freq_factor");
    }
  } else if (type == "dynamic") {
    return unsupported(source + ": rope_scaling type 'dynamic' (dynamic NTK): its frequencies change with the "
                                "sequence length, which one inv_freq table cannot hold; refused");
  } else {
    return unsupported(source + ": rope_scaling type '" + type +
                       "': Ember imports rope scaling none, linear and llama3");
  }
  EMBER_RETURN_IF_ERROR(r.status());
  return k.status();
}

Status read_llama(Keys& k, const json& root, HfConfig& c, const std::string& source) {
  c.hidden = k.size("hidden_size", true, 0, kMaxSize);
  c.intermediate = k.size("intermediate_size", true, 0, kMaxSize);
  c.layers = k.size("num_hidden_layers", true, 0, kMaxCount);
  c.heads = k.size("num_attention_heads", true, 0, kMaxCount);
  c.kv_heads = k.size("num_key_value_heads", false, c.heads, kMaxCount);
  c.vocab_size = k.size("vocab_size", true, 0, kMaxSize);
  const int64_t default_context = c.model_type == "llama" ? 2048 : c.model_type == "mistral" ? 131072 : 32768;
  c.context_length = k.size("max_position_embeddings", false, default_context, kMaxSize);
  c.head_dim = k.size("head_dim", false, 0, kMaxSize);
  c.norm_eps = static_cast<float>(k.number("rms_norm_eps", 1e-6, 0, 1));
  c.tie_word_embeddings = k.boolean("tie_word_embeddings", false);
  const std::string act = k.text("hidden_act", "silu");
  if (act != "silu") k.refuse("hidden_act '" + act + "': the SwiGLU MLP of the llama family is silu");
  c.activation = HfActivation::silu;
  if (c.model_type == "qwen2") {
    c.qkv_bias = true;  // Qwen2Attention: q, k, v with bias, o_proj without
  } else {
    c.qkv_bias = c.o_bias = k.boolean("attention_bias", false);
  }
  c.mlp_bias = k.boolean("mlp_bias", false);
  // A sliding window in effect: attention limited to the last W positions, which kv_attention
  // (attending to every position so far) does not do. Not in effect when it covers the context.
  if (c.model_type == "mistral" || c.model_type == "qwen2") {
    const bool on = c.model_type == "mistral" || k.boolean("use_sliding_window", false);
    const int64_t window = k.size("sliding_window", false, 0, int64_t{1} << 40);
    if (on && window > 0 && window < c.context_length) {
      k.refuse("sliding_window " + std::to_string(window) + " is in effect below the context length " +
               std::to_string(c.context_length) + "; Ember's kv_attention attends to every earlier position");
    }
  }
  read_tokens(k, c);
  EMBER_RETURN_IF_ERROR(k.status());
  EMBER_RETURN_IF_ERROR(read_rope(k, root, c, source));
  if (c.head_dim == 0) {
    if (c.hidden % c.heads) {
      return invalid_argument(source + ": hidden_size " + std::to_string(c.hidden) + " is not a multiple of " +
                              "num_attention_heads " + std::to_string(c.heads) + " (and no head_dim is given)");
    }
    c.head_dim = c.hidden / c.heads;
  }
  if (c.heads % c.kv_heads) {
    return invalid_argument(source + ": num_attention_heads " + std::to_string(c.heads) + " is not a multiple of " +
                            "num_key_value_heads " + std::to_string(c.kv_heads));
  }
  if (c.head_dim % 2) return invalid_argument(source + ": head_dim " + std::to_string(c.head_dim) + " is odd; rotary pairs need it even");
  if ((c.heads + 2 * c.kv_heads) * c.head_dim > kMaxSize) return invalid_argument(source + ": the heads are too wide");
  return Status::OK();
}

}  // namespace

std::string_view family_name(HfFamily f) { return f == HfFamily::gpt2 ? "gpt2" : "llama"; }

Result<HfConfig> parse_hf_config(std::string_view text, const std::string& source) {
  auto parsed = parse_json_text(text);
  if (!parsed.ok()) return parsed.error().with_context(source);
  const json& root = *parsed;
  if (!root.is_object()) return invalid_argument(source + ": must be a JSON object");
  HfConfig c;
  Keys k(root, source);
  c.model_type = k.text("model_type", "");
  EMBER_RETURN_IF_ERROR(k.status());
  if (c.model_type.empty()) return invalid_argument(source + ": field 'model_type' is missing");
  static const std::pair<const char*, const char*> kKnown[] = {
      {"gpt2", "GPT2LMHeadModel"}, {"llama", "LlamaForCausalLM"}, {"mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"}};
  const char* architecture = nullptr;
  for (const auto& [type, arch] : kKnown)
    if (c.model_type == type) architecture = arch;
  if (!architecture) {
    return unsupported(source + ": model_type '" + c.model_type +
                       "': Ember imports gpt2 (GPT2LMHeadModel) and the llama family (llama, mistral, qwen2)");
  }
  if (auto a = root.find("architectures"); a != root.end() && !a->is_null()) {
    if (!a->is_array() || a->size() != 1 || !(*a)[0].is_string()) {
      return invalid_argument(source + ": field 'architectures' must be a list of one class name");
    }
    const std::string got = (*a)[0].get<std::string>();
    if (got != architecture) {
      return unsupported(source + ": architecture '" + got + "' (model_type " + c.model_type + "): Ember imports " +
                         architecture + ", a causal language model with its head");
    }
  }
  EMBER_RETURN_IF_ERROR(refuse_foreign(root, source));
  if (c.model_type == "gpt2") {
    c.family = HfFamily::gpt2;
    EMBER_RETURN_IF_ERROR(read_gpt2(k, c, source));
  } else {
    c.family = HfFamily::llama;
    EMBER_RETURN_IF_ERROR(read_llama(k, root, c, source));
  }
  for (int64_t id : c.eos_token_ids) {
    if (id >= c.vocab_size) return invalid_argument(source + ": eos_token_id " + std::to_string(id) + " is not below vocab_size");
  }
  if (c.bos_token_id && *c.bos_token_id >= c.vocab_size) {
    return invalid_argument(source + ": bos_token_id " + std::to_string(*c.bos_token_id) + " is not below vocab_size");
  }
  return c;
}

std::vector<float> rope_inv_freq(const HfConfig& c) {
  // float32 throughout, operation by operation as modeling_rope_utils does on a float32 tensor:
  // arange(0, D, 2).float() / D, then base ** that (float32 pow), then 1.0 / that.
  const int64_t d = c.head_dim;
  const auto base = static_cast<float>(c.rope_theta);
  std::vector<float> inv(static_cast<size_t>(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(d);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  if (c.rope == RopeScaling::linear) {
    for (float& x : inv) x = x / static_cast<float>(c.rope_factor);
  } else if (c.rope == RopeScaling::llama3) {
    // _compute_llama3_parameters: scalars meet float32 tensors, so each step rounds to float32.
    const auto factor = static_cast<float>(c.rope_factor);
    const auto low = static_cast<float>(c.low_freq_factor), high = static_cast<float>(c.high_freq_factor);
    const auto old_context = static_cast<float>(c.original_context);
    const auto low_freq_wavelen = static_cast<float>(static_cast<double>(c.original_context) / c.low_freq_factor);
    const auto high_freq_wavelen = static_cast<float>(static_cast<double>(c.original_context) / c.high_freq_factor);
    const auto two_pi = static_cast<float>(2 * M_PI);
    for (float& x : inv) {
      const float wavelen = two_pi / x;
      float scaled = wavelen > low_freq_wavelen ? x / factor : x;
      if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
        const float smooth = (old_context / wavelen - low) / (high - low);
        scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
      x = scaled;
    }
  }
  return inv;
}

float attention_scale(const HfConfig& c, int64_t layer) {
  double scale = c.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(c.head_dim)) : 1.0;
  if (c.family == HfFamily::gpt2 && c.scale_attn_by_layer) scale /= static_cast<double>(layer + 1);
  return static_cast<float>(scale);
}

}  // namespace ember::importer
