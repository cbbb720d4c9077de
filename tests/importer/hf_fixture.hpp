// Hugging Face folders written by the importer's tests: config.json, the safetensors file (or
// shards and their index), tokenizer files, each tensor's elements a function of its name and index
// so a test can say what any imported weight must hold. No torch, no download: the layouts are
// transformers' (tools/make_hf_model.py writes the same for the PyTorch equality test).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "model/half.hpp"
#include "model/safetensors.hpp"
#include "tests/model/model_test_util.hpp"

namespace ember::importer::hf_fixture {

using nlohmann::json;
using Tensors = std::vector<std::pair<std::string, gpu::Shape>>;

/// Element i of checkpoint tensor `name`, as float32 (before any narrowing), in [-0.5, 0.5).
inline float value_of(const std::string& name, int64_t i) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  uint64_t z = h + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / static_cast<float>(1u << 24) - 0.5f;
}

/// The element as the checkpoint holds it at `dtype`, widened back.
inline float stored(const std::string& name, int64_t i, gpu::DType dtype) {
  const float v = value_of(name, i);
  if (dtype == gpu::DType::f16) return gpu::f16_to_f32(gpu::f32_to_f16(v));
  if (dtype == gpu::DType::bf16) return gpu::bf16_to_f32(gpu::f32_to_bf16(v));
  return v;
}

/// Writes one safetensors file of `tensors` at `dtype`.
inline void write_shard(const std::string& path, const Tensors& tensors, gpu::DType dtype = gpu::DType::f32) {
  std::vector<std::vector<uint8_t>> data;
  std::vector<gpu::TensorToWrite> out;
  for (const auto& [name, shape] : tensors) {
    const int64_t n = shape.numel();
    auto& bytes = data.emplace_back(static_cast<size_t>(n) * gpu::dtype_size(dtype));
    for (int64_t i = 0; i < n; ++i) {
      const float v = value_of(name, i);
      if (dtype == gpu::DType::f32) {
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = dtype == gpu::DType::f16 ? gpu::f32_to_f16(v) : gpu::f32_to_bf16(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
    out.push_back({name, {dtype, shape}, bytes.data()});
  }
  ::ember::testing::must(gpu::write_safetensors(path, out, {{"format", "pt"}}));
}

/// Writes model.safetensors, or (shards > 1) model-0000k-of-0000n.safetensors and the index.
inline void write_weights(const std::string& dir, const Tensors& tensors, int shards = 1,
                          gpu::DType dtype = gpu::DType::f32) {
  if (shards <= 1) return write_shard(dir + "/model.safetensors", tensors, dtype);
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  const size_t per = (tensors.size() + shards - 1) / static_cast<size_t>(shards);
  for (int k = 0; k < shards; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, shards);
    Tensors part(tensors.begin() + std::min(tensors.size(), k * per),
                 tensors.begin() + std::min(tensors.size(), (k + 1) * per));
    write_shard(dir + "/" + name, part, dtype);
    for (const auto& [t, s] : part) index["weight_map"][t] = name;
  }
  gpu::testing::write_file(dir + "/model.safetensors.index.json", index.dump(2));
}

struct Gpt2 {
  int64_t e = 8, layers = 2, heads = 2, vocab = 20, positions = 16, inner = 32;
  std::string prefix = "transformer.";

  json config() const {
    return {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"n_embd", e}, {"n_layer", layers},
            {"n_head", heads}, {"vocab_size", vocab}, {"n_positions", positions}, {"n_ctx", positions},
            {"n_inner", inner}, {"activation_function", "gelu_new"}, {"layer_norm_epsilon", 1e-5},
            {"bos_token_id", vocab - 1}, {"eos_token_id", vocab - 1}, {"resid_pdrop", 0.1}};
  }
  Tensors tensors() const {
    const std::string p = prefix;
    Tensors t = {{p + "wte.weight", {vocab, e}}, {p + "wpe.weight", {positions, e}}};
    for (int64_t i = 0; i < layers; ++i) {
      const std::string h = p + "h." + std::to_string(i) + ".";
      t.insert(t.end(), {{h + "ln_1.weight", {e}}, {h + "ln_1.bias", {e}}, {h + "attn.c_attn.weight", {e, 3 * e}},
                         {h + "attn.c_attn.bias", {3 * e}}, {h + "attn.c_proj.weight", {e, e}},
                         {h + "attn.c_proj.bias", {e}}, {h + "ln_2.weight", {e}}, {h + "ln_2.bias", {e}},
                         {h + "mlp.c_fc.weight", {e, inner}}, {h + "mlp.c_fc.bias", {inner}},
                         {h + "mlp.c_proj.weight", {inner, e}}, {h + "mlp.c_proj.bias", {e}}});
    }
    t.insert(t.end(), {{p + "ln_f.weight", {e}}, {p + "ln_f.bias", {e}}});
    return t;
  }
};

struct Llama {
  std::string model_type = "llama";
  int64_t e = 16, layers = 2, heads = 4, kv_heads = 2, head_dim = 4, vocab = 24, inner = 24, positions = 64;
  bool tie = false, attention_bias = false, mlp_bias = false;
  json rope_scaling = nullptr;

  json config() const {
    const std::string arch = model_type == "llama" ? "LlamaForCausalLM"
                             : model_type == "mistral" ? "MistralForCausalLM"
                                                       : "Qwen2ForCausalLM";
    json c = {{"architectures", {arch}}, {"model_type", model_type}, {"hidden_size", e},
              {"intermediate_size", inner}, {"num_hidden_layers", layers}, {"num_attention_heads", heads},
              {"num_key_value_heads", kv_heads}, {"vocab_size", vocab}, {"max_position_embeddings", positions},
              {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"rope_scaling", rope_scaling},
              {"tie_word_embeddings", tie}, {"hidden_act", "silu"}, {"bos_token_id", 1}, {"eos_token_id", 2},
              {"pretraining_tp", 1}, {"torch_dtype", "float32"}};
    if (model_type == "llama") {
      c["attention_bias"] = attention_bias;
      c["mlp_bias"] = mlp_bias;
    }
    if (head_dim * heads != e) c["head_dim"] = head_dim;
    return c;
  }
  bool qkv_bias() const { return attention_bias || model_type == "qwen2"; }
  bool o_bias() const { return attention_bias && model_type != "qwen2"; }
  Tensors tensors() const {
    Tensors t = {{"model.embed_tokens.weight", {vocab, e}}};
    for (int64_t i = 0; i < layers; ++i) {
      const std::string h = "model.layers." + std::to_string(i) + ".";
      t.push_back({h + "input_layernorm.weight", {e}});
      const std::pair<const char*, int64_t> qkv[] = {{"q", heads * head_dim}, {"k", kv_heads * head_dim}, {"v", kv_heads * head_dim}};
      for (const auto& [n, rows] : qkv) {
        t.push_back({h + "self_attn." + n + "_proj.weight", {rows, e}});
        if (qkv_bias()) t.push_back({h + "self_attn." + n + "_proj.bias", {rows}});
      }
      t.push_back({h + "self_attn.o_proj.weight", {e, heads * head_dim}});
      if (o_bias()) t.push_back({h + "self_attn.o_proj.bias", {e}});
      t.push_back({h + "post_attention_layernorm.weight", {e}});
      for (const char* n : {"gate", "up"}) {
        t.push_back({h + "mlp." + n + "_proj.weight", {inner, e}});
        if (mlp_bias) t.push_back({h + "mlp." + n + "_proj.bias", {inner}});
      }
      t.push_back({h + "mlp.down_proj.weight", {e, inner}});
      if (mlp_bias) t.push_back({h + "mlp.down_proj.bias", {e}});
    }
    t.push_back({"model.norm.weight", {e}});
    if (!tie) t.push_back({"lm_head.weight", {vocab, e}});
    return t;
  }
};

/// A small tokenizer.json: a BPE vocabulary with the specials <s>, </s>, <|eot|>.
inline std::string tokenizer_json() {
  return R"({"version": "1.0", "added_tokens": [{"id": 1, "content": "<s>", "special": true},
    {"id": 2, "content": "</s>", "special": true}, {"id": 3, "content": "<|eot|>", "special": true}],
    "model": {"type": "BPE", "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<|eot|>": 3, "a": 4, "b": 5}, "merges": []}})";
}

/// Writes config.json, the weights and (optionally) the tokenizer files.
inline void write_folder(const std::string& dir, const json& config, const Tensors& tensors, int shards = 1,
                         gpu::DType dtype = gpu::DType::f32, bool tokenizer = true) {
  std::filesystem::create_directories(dir);
  gpu::testing::write_file(dir + "/config.json", config.dump(2));
  write_weights(dir, tensors, shards, dtype);
  if (tokenizer) {
    gpu::testing::write_file(dir + "/tokenizer.json", tokenizer_json());
    gpu::testing::write_file(dir + "/tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}})");
  }
}

}  // namespace ember::importer::hf_fixture
