// importer/hf_*.cpp: Hugging Face folders (tests/importer/hf_fixture.hpp) imported into generative
// Ember models: the graph each family maps to and the values each weight gets (transposed Conv1D,
// concatenated q/k/v, a tied head's copy, the rotary table), the generation section, widths and
// shards, and every refusal and malformed folder with its message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <ostream>

#include "importer/hf_checkpoint.hpp"
#include "importer/hf_config.hpp"
#include "importer/hf_import.hpp"
#include "model/half.hpp"
#include "model/model.hpp"
#include "tests/importer/hf_fixture.hpp"

namespace ember::importer {
namespace hf_import_test {

using gpu::DType;
using gpu::OpKind;
using gpu::testing::TempDir;
using hf_fixture::json;
using hf_fixture::value_of;
using ember::testing::must;

float weight_at(const gpu::Model& m, const std::string& tensor, int64_t i) {
  const gpu::TensorInfo* t = m.weights_index().find(tensor);
  EXPECT_NE(t, nullptr) << tensor;
  if (!t) return NAN;
  const uint8_t* p = m.data() + t->data.offset;
  uint16_t h;
  switch (t->desc.dtype) {
    case DType::f16: std::memcpy(&h, p + 2 * i, 2); return gpu::f16_to_f32(h);
    case DType::bf16: std::memcpy(&h, p + 2 * i, 2); return gpu::bf16_to_f32(h);
    default: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
  }
}

DType dtype_of(const gpu::Model& m, const std::string& tensor) {
  const gpu::TensorInfo* t = m.weights_index().find(tensor);
  EXPECT_NE(t, nullptr) << tensor;
  return t ? t->desc.dtype : DType::count;
}

const gpu::LayerSpec& layer_named(const gpu::Model& m, const std::string& name) {
  for (uint32_t i = 0; i < m.num_layers(); ++i)
    if (m.layer(i).name == name) return m.layer(i);
  ADD_FAILURE() << "no layer " << name;
  return m.layer(0);
}

std::shared_ptr<const gpu::Model> import(const std::string& dir, const std::string& out, HfImportOptions o = {}) {
  must(import_hf_folder(dir, out, o), "importing " + dir);
  return must(gpu::Model::load(out), "loading " + out);
}

Error import_error(const std::string& dir, const std::string& out) {
  auto r = import_hf_folder(dir, out, {});
  EXPECT_FALSE(r.ok()) << dir;
  return r.ok() ? internal_error("imported") : r.error();
}

TEST(HfImport, Gpt2MapsOntoTheGenerationGraph) {
  TempDir dir;
  hf_fixture::Gpt2 f;
  hf_fixture::write_folder(dir / "hf", f.config(), f.tensors());
  gpu::testing::write_file(dir / "hf/generation_config.json", R"({"eos_token_id": [19, 3], "top_k": 5})");
  auto r = must(import_hf_folder(dir / "hf", dir / "out", {}));
  auto m = must(gpu::Model::load(dir / "out"));
  EXPECT_EQ(m->manifest().name, "hf");
  ASSERT_EQ(m->manifest().inputs.size(), 4u);
  EXPECT_EQ(m->manifest().outputs[0].shape, (gpu::Shape{-1, 20}));
  // 3 embedding layers, 10 per block, 3 for the tail.
  EXPECT_EQ(m->num_layers(), 3u + 10u * 2 + 3u);
  const auto& attn = layer_named(*m, "transformer.h.1.attn.kv");
  EXPECT_EQ(attn.op, OpKind::kv_attention);
  EXPECT_EQ(attn.inputs, (std::vector<std::string>{"transformer.h.1.attn.c_attn", "positions", "kv_meta"}));
  EXPECT_EQ(attn.attrs.num_heads, 2);
  EXPECT_EQ(attn.attrs.num_kv_heads, 2);
  EXPECT_EQ(attn.attrs.head_dim, 4);
  EXPECT_EQ(attn.attrs.kv_layer, 1);
  EXPECT_EQ(attn.attrs.rope_dim, 0);
  EXPECT_FLOAT_EQ(attn.attrs.scale, 0.5f);
  EXPECT_TRUE(attn.weights.empty());
  EXPECT_TRUE(layer_named(*m, "transformer.h.0.mlp.act").attrs.tanh_approximation);
  const auto& rows = layer_named(*m, "last_rows");
  EXPECT_EQ(rows.op, OpKind::gather);
  EXPECT_EQ(rows.inputs[1], "last_index");
  EXPECT_EQ(m->layer(m->num_layers() - 1).name, "logits");
  EXPECT_FALSE(m->layer(m->num_layers() - 1).attrs.bias);
  // Conv1D [in, out] transposed into linear's [out, in]: W[o][i] = c_attn[i][o].
  for (int64_t o : {0, 5, 23})
    for (int64_t i : {0, 7}) {
      EXPECT_EQ(weight_at(*m, "transformer.h.0.attn.c_attn.weight", o * 8 + i),
                value_of("transformer.h.0.attn.c_attn.weight", i * 24 + o));
    }
  // The tied head: wte's rows again, in a tensor of its own.
  for (int64_t i : {0, 17, 159}) EXPECT_EQ(weight_at(*m, "logits.weight", i), value_of("transformer.wte.weight", i));
  EXPECT_EQ(r.duplicated_bytes, 20u * 8 * 4);
  // The generation section.
  const gpu::GenerationSpec& g = *m->generation();
  EXPECT_EQ(g.family, "gpt2");
  EXPECT_EQ(g.context_length, 16u);
  EXPECT_EQ(g.vocab_size, 20u);
  EXPECT_EQ(g.num_kv_layers, 2u);
  EXPECT_EQ(g.kv_dtype, DType::f32);
  EXPECT_EQ(g.kv_bytes_per_token(), 2u * 2 * 2 * 4 * 4);
  EXPECT_EQ(g.bos_token_id, 19);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{19, 3}));  // config.json's, then generation_config.json's
  EXPECT_EQ(g.top_k, 5);
  EXPECT_FALSE(g.temperature.has_value());
  EXPECT_EQ(m->tokenizer_json(), hf_fixture::tokenizer_json());
  EXPECT_EQ(gpu::testing::read_file(dir / "out/tokenizer.json"), hf_fixture::tokenizer_json());
  EXPECT_TRUE(std::filesystem::exists(dir / "out/tokenizer_config.json"));
  EXPECT_LT(m->layers_bytes(), m->data_bytes());
}

TEST(HfImport, Gpt2WithoutPrefixAndUntiedHead) {
  TempDir dir;
  hf_fixture::Gpt2 f;
  f.prefix = "";  // the original openai checkpoints' names
  json config = f.config();
  config["tie_word_embeddings"] = false;
  auto tensors = f.tensors();
  tensors.push_back({"lm_head.weight", {20, 8}});
  tensors.push_back({"h.0.attn.bias", {1, 1, 16, 16}});  // the causal-mask buffer: ignored
  hf_fixture::write_folder(dir / "hf", config, tensors, 1, DType::f32, false);
  auto r = must(import_hf_folder(dir / "hf", dir / "out", {}));
  auto m = must(gpu::Model::load(dir / "out"));
  EXPECT_EQ(weight_at(*m, "logits.weight", 5), value_of("lm_head.weight", 5));
  EXPECT_EQ(r.duplicated_bytes, 0u);
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"h.0.attn.bias"}));
  // No tokenizer: token ids only.
  EXPECT_TRUE(m->generation()->tokenizer.empty());
  EXPECT_FALSE(std::filesystem::exists(dir / "out/tokenizer.json"));
}

TEST(HfImport, LlamaConcatenatesProjectionsAndComputesTheRotaryTable) {
  TempDir dir;
  hf_fixture::Llama f;
  f.attention_bias = true;
  f.rope_scaling = {{"rope_type", "linear"}, {"factor", 4.0}};
  hf_fixture::write_folder(dir / "hf", f.config(), f.tensors());
  gpu::testing::write_file(dir / "hf/tokenizer_config.json",
                           R"({"bos_token": "<s>", "chat_template": "{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}"})");
  gpu::testing::write_file(dir / "hf/generation_config.json", R"({"temperature": 0.6, "top_p": 0.9, "do_sample": true})");
  auto m = import(dir / "hf", dir / "out");
  const std::string at = "model.layers.1.self_attn.";
  const auto& qkv = layer_named(*m, at + "qkv_proj");
  EXPECT_EQ(qkv.attrs.out_features, (4 + 2 * 2) * 4);
  EXPECT_TRUE(qkv.attrs.bias);
  // Rows: q's 16, then k's 8, then v's 8.
  EXPECT_EQ(weight_at(*m, at + "qkv_proj.weight", 3 * 16 + 5), value_of(at + "q_proj.weight", 3 * 16 + 5));
  EXPECT_EQ(weight_at(*m, at + "qkv_proj.weight", (16 + 2) * 16 + 1), value_of(at + "k_proj.weight", 2 * 16 + 1));
  EXPECT_EQ(weight_at(*m, at + "qkv_proj.weight", (24 + 7) * 16 + 15), value_of(at + "v_proj.weight", 7 * 16 + 15));
  EXPECT_EQ(weight_at(*m, at + "qkv_proj.bias", 17), value_of(at + "k_proj.bias", 1));
  EXPECT_TRUE(layer_named(*m, at + "o_proj").attrs.bias);
  const auto& attn = layer_named(*m, at + "kv_attention");
  EXPECT_EQ(attn.attrs.num_heads, 4);
  EXPECT_EQ(attn.attrs.num_kv_heads, 2);
  EXPECT_EQ(attn.attrs.rope_dim, 4);
  EXPECT_EQ(attn.attrs.kv_layer, 1);
  // Linear scaling: 1 / 10000^(2i/4) / 4, float32.
  EXPECT_EQ(weight_at(*m, at + "kv_attention.inv_freq", 0), 0.25f);
  EXPECT_EQ(weight_at(*m, at + "kv_attention.inv_freq", 1), 0.01f / 4);
  EXPECT_EQ(layer_named(*m, "model.layers.0.mlp.act").op, OpKind::unary);
  EXPECT_EQ(layer_named(*m, "model.layers.0.mlp.gate_up").op, OpKind::binary);
  EXPECT_EQ(weight_at(*m, "logits.weight", 9), value_of("lm_head.weight", 9));
  const gpu::GenerationSpec& g = *m->generation();
  EXPECT_EQ(g.family, "llama");
  EXPECT_EQ(g.chat_template, "llama3");
  EXPECT_EQ(g.temperature, 0.6);
  EXPECT_EQ(g.top_p, 0.9);
  EXPECT_EQ(g.bos_token_id, 1);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{2}));
  EXPECT_EQ(g.num_kv_heads, 2u);
  EXPECT_EQ(g.head_dim, 4u);
}

TEST(HfImport, Qwen2AndMistralAreConfigDifferences) {
  TempDir dir;
  hf_fixture::Llama qwen;
  qwen.model_type = "qwen2";
  qwen.tie = true;
  json config = qwen.config();
  config["sliding_window"] = 32;  // not in effect: use_sliding_window is false
  config["use_sliding_window"] = false;
  hf_fixture::write_folder(dir / "qwen", config, qwen.tensors());
  auto m = import(dir / "qwen", dir / "qwen-out");
  EXPECT_TRUE(layer_named(*m, "model.layers.0.self_attn.qkv_proj").attrs.bias);
  EXPECT_FALSE(layer_named(*m, "model.layers.0.self_attn.o_proj").attrs.bias);
  EXPECT_EQ(weight_at(*m, "logits.weight", 3), value_of("model.embed_tokens.weight", 3));

  hf_fixture::Llama mistral;
  mistral.model_type = "mistral";
  mistral.head_dim = 8;  // head_dim given, not hidden / heads
  config = mistral.config();
  config["sliding_window"] = nullptr;
  hf_fixture::write_folder(dir / "mistral", config, mistral.tensors());
  m = import(dir / "mistral", dir / "mistral-out");
  EXPECT_EQ(layer_named(*m, "model.layers.0.self_attn.qkv_proj").attrs.out_features, (4 + 2 * 2) * 8);
  EXPECT_EQ(layer_named(*m, "model.layers.0.self_attn.kv_attention").attrs.rope_dim, 8);
}

TEST(HfImport, ShardsImportAsOneFileDoes) {
  TempDir dir;
  hf_fixture::Llama f;
  hf_fixture::write_folder(dir / "one", f.config(), f.tensors(), 1);
  hf_fixture::write_folder(dir / "three", f.config(), f.tensors(), 3);
  auto r = must(import_hf_folder(dir / "three", dir / "three-out", {.name = "one"}));
  EXPECT_EQ(r.shards, 3u);
  must(import_hf_folder(dir / "one", dir / "one-out", {}));
  EXPECT_EQ(gpu::testing::read_file(dir / "one-out/weights.safetensors"),
            gpu::testing::read_file(dir / "three-out/weights.safetensors"));
}

TEST(HfImport, WidthIsTheCheckpointsUnlessAsked) {
  TempDir dir;
  hf_fixture::Llama f;
  hf_fixture::write_folder(dir / "hf", f.config(), f.tensors(), 1, DType::bf16);
  auto m = import(dir / "hf", dir / "bf16");
  EXPECT_EQ(dtype_of(*m, "model.embed_tokens.weight"), DType::bf16);
  EXPECT_EQ(dtype_of(*m, "model.layers.0.self_attn.kv_attention.inv_freq"), DType::f32);
  EXPECT_EQ(m->generation()->kv_dtype, DType::bf16);
  EXPECT_EQ(weight_at(*m, "model.norm.weight", 3), hf_fixture::stored("model.norm.weight", 3, DType::bf16));
  m = import(dir / "hf", dir / "f32", {.width = DType::f32});
  EXPECT_EQ(weight_at(*m, "model.norm.weight", 3), hf_fixture::stored("model.norm.weight", 3, DType::bf16));
  m = import(dir / "hf", dir / "f16", {.width = DType::f16});
  EXPECT_EQ(dtype_of(*m, "logits.weight"), DType::f16);
}

TEST(HfImport, NarrowingRefusesValuesPastTheRange) {
  TempDir dir;
  hf_fixture::Llama f;
  hf_fixture::write_folder(dir / "hf", f.config(), f.tensors());
  // A norm weight of 1e6 in the float32 checkpoint does not fit float16.
  std::vector<std::vector<float>> values;
  std::vector<gpu::TensorToWrite> tensors;
  for (const auto& [name, shape] : f.tensors()) {
    auto& v = values.emplace_back(static_cast<size_t>(shape.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = value_of(name, static_cast<int64_t>(i));
    if (name == "model.norm.weight") v[0] = 1e6f;
    tensors.push_back({name, {DType::f32, shape}, v.data()});
  }
  must(gpu::write_safetensors(dir / "hf/model.safetensors", tensors));
  auto r = import_hf_folder(dir / "hf", dir / "out", {.width = DType::f16});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("tensor 'model.norm.weight' element 0"), std::string::npos) << r.error().message();
}

struct Refusal {
  const char* name;
  std::function<void(json&)> change;
  const char* expect;
  ErrorCode code = ErrorCode::unsupported;
};

class HfRefusals : public ::testing::TestWithParam<Refusal> {};

TEST_P(HfRefusals, SayWhy) {
  TempDir dir;
  hf_fixture::Llama f;
  json config = f.config();
  GetParam().change(config);
  hf_fixture::write_folder(dir / "hf", config, f.tensors());
  const Error e = import_error(dir / "hf", dir / "out");
  EXPECT_EQ(e.code(), GetParam().code) << e.message();
  EXPECT_NE(e.message().find(GetParam().expect), std::string::npos) << e.message();
  EXPECT_FALSE(std::filesystem::exists(dir / "out/model.json"));
}

INSTANTIATE_TEST_SUITE_P(
    Config, HfRefusals,
    ::testing::Values(
        Refusal{"other_model_type", [](json& c) { c["model_type"] = "t5"; }, "model_type 't5'"},
        Refusal{"other_architecture", [](json& c) { c["architectures"] = {"LlamaForSequenceClassification"}; },
                "architecture 'LlamaForSequenceClassification'"},
        Refusal{"quantized", [](json& c) { c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}}; },
                "quantization_config (gptq)"},
        Refusal{"dynamic_rope", [](json& c) { c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}}; },
                "rope_scaling type 'dynamic'"},
        Refusal{"yarn_rope", [](json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; },
                "rope_scaling type 'yarn'"},
        Refusal{"llama3_rope_incomplete", [](json& c) { c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; },
                "rope_scaling.low_freq_factor' is missing", ErrorCode::invalid_argument},
        Refusal{"partial_rotary", [](json& c) { c["partial_rotary_factor"] = 0.5; }, "partial_rotary_factor 0.5"},
        Refusal{"gelu_mlp", [](json& c) { c["hidden_act"] = "gelu"; }, "hidden_act 'gelu'"},
        Refusal{"softcapping", [](json& c) { c["final_logit_softcapping"] = 30.0; }, "'final_logit_softcapping' is 30.0"},
        Refusal{"sliding_window", [](json& c) {
                  c["model_type"] = "mistral";
                  c["architectures"] = {"MistralForCausalLM"};
                  c["sliding_window"] = 16;
                },
                "sliding_window 16 is in effect below the context length 64"},
        Refusal{"heads_not_multiple", [](json& c) { c["num_key_value_heads"] = 3; },
                "num_attention_heads 4 is not a multiple of num_key_value_heads 3", ErrorCode::invalid_argument},
        Refusal{"missing_key", [](json& c) { c.erase("num_hidden_layers"); }, "'num_hidden_layers' is missing",
                ErrorCode::invalid_argument},
        Refusal{"bad_type", [](json& c) { c["hidden_size"] = "16"; }, "field 'hidden_size'", ErrorCode::invalid_argument},
        Refusal{"eos_out_of_vocab", [](json& c) { c["eos_token_id"] = 24; }, "eos_token_id 24 is not below vocab_size",
                ErrorCode::invalid_argument},
        Refusal{"wrong_shape", [](json& c) { c["intermediate_size"] = 20; },
                "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [24, 16]; config.json implies [20, 16]",
                ErrorCode::invalid_argument},
        Refusal{"missing_tensor", [](json& c) { c["attention_bias"] = true; },
                "no tensor 'model.layers.0.self_attn.q_proj.bias'", ErrorCode::not_found},
        Refusal{"tensor_left_over", [](json& c) { c["num_hidden_layers"] = 1; },
                "does not use: model.layers.1.input_layernorm.weight"}),
    [](const ::testing::TestParamInfo<Refusal>& i) { return std::string(i.param.name); });

// A tied config whose checkpoint also has lm_head.weight imports (the embedding's values win); an
// untied one without it is refused.
TEST(HfImport, TiedCheckpointWithAHeadUsesTheEmbedding) {
  TempDir dir;
  hf_fixture::Llama f;
  json config = f.config();
  config["tie_word_embeddings"] = true;
  hf_fixture::write_folder(dir / "hf", config, f.tensors());
  auto r = must(import_hf_folder(dir / "hf", dir / "out", {}));
  auto m = must(gpu::Model::load(dir / "out"));
  EXPECT_EQ(weight_at(*m, "logits.weight", 4), value_of("model.embed_tokens.weight", 4));
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"lm_head.weight"}));

  f.tie = true;  // no lm_head.weight written
  config["tie_word_embeddings"] = false;
  hf_fixture::write_folder(dir / "untied", config, f.tensors());
  const Error e = import_error(dir / "untied", dir / "untied-out");
  EXPECT_NE(e.message().find("no tensor 'lm_head.weight'"), std::string::npos) << e.message();
}

struct Malformed {
  const char* name;
  std::function<void(const std::string&)> damage;
  const char* expect;
};
// Named in test output by its name (gtest would print its bytes, pointers included: a CTest name
// that changes with every build).
void PrintTo(const Malformed& m, std::ostream* os) { *os << m.name; }

class HfMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(HfMalformed, IsAClearError) {
  TempDir dir;
  hf_fixture::Llama f;
  const std::string hf = dir / "hf";
  hf_fixture::write_folder(hf, f.config(), f.tensors(), 3);
  GetParam().damage(hf);
  const Error e = import_error(hf, dir / "out");
  EXPECT_NE(e.message().find(GetParam().expect), std::string::npos) << e.message();
}

void edit_index(const std::string& hf, const std::function<void(json&)>& change) {
  json index = json::parse(gpu::testing::read_file(hf + "/model.safetensors.index.json"));
  change(index);
  gpu::testing::write_file(hf + "/model.safetensors.index.json", index.dump());
}

INSTANTIATE_TEST_SUITE_P(
    Folders, HfMalformed,
    ::testing::Values(
        Malformed{"missing_shard", [](const std::string& hf) { std::filesystem::remove(hf + "/model-00002-of-00003.safetensors"); },
                  "model-00002-of-00003.safetensors: missing: model.safetensors.index.json places"},
        Malformed{"shard_outside_folder",
                  [](const std::string& hf) {
                    edit_index(hf, [](json& j) { j["weight_map"]["model.norm.weight"] = "../model-00003-of-00003.safetensors"; });
                  },
                  "'../model-00003-of-00003.safetensors' is not a file in the folder"},
        Malformed{"shard_in_subfolder",
                  [](const std::string& hf) { edit_index(hf, [](json& j) { j["weight_map"]["model.norm.weight"] = "sub/x.safetensors"; }); },
                  "'sub/x.safetensors' is not a file in the folder"},
        Malformed{"index_misplaces_tensor",
                  [](const std::string& hf) {
                    edit_index(hf, [](json& j) { j["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors"; });
                  },
                  "places tensor 'model.norm.weight' in model-00001-of-00003.safetensors, which does not hold it"},
        Malformed{"header_lies",
                  [](const std::string& hf) {
                    const std::string p = hf + "/model-00002-of-00003.safetensors";
                    const std::string bytes = gpu::testing::read_file(p);
                    gpu::testing::write_file(p, bytes.substr(0, bytes.size() - 64));
                  },
                  "model-00002-of-00003.safetensors: tensor"},
        Malformed{"tensor_in_two_shards",
                  [](const std::string& hf) {
                    hf_fixture::write_shard(hf + "/model-00003-of-00003.safetensors",
                                            {{"model.norm.weight", {16}}, {"model.embed_tokens.weight", {24, 16}}});
                  },
                  "tensor 'model.embed_tokens.weight' is also in"},
        Malformed{"index_not_json",
                  [](const std::string& hf) { gpu::testing::write_file(hf + "/model.safetensors.index.json", "{\"weight_map\": "); },
                  "model.safetensors.index.json"},
        Malformed{"no_weights",
                  [](const std::string& hf) {
                    for (const auto& e : std::filesystem::directory_iterator(hf))
                      if (e.path().string().find("safetensors") != std::string::npos) std::filesystem::remove(e.path());
                    gpu::testing::write_file(hf + "/pytorch_model.bin", "x");
                  },
                  "PyTorch .bin checkpoints are not read"},
        Malformed{"config_not_json", [](const std::string& hf) { gpu::testing::write_file(hf + "/config.json", "{]"); },
                  "config.json"},
        Malformed{"tokenizer_not_json", [](const std::string& hf) { gpu::testing::write_file(hf + "/tokenizer.json", "{"); },
                  "tokenizer.json"},
        Malformed{"quantized_tensor",
                  [](const std::string& hf) {
                    const std::string p = hf + "/model-00003-of-00003.safetensors";
                    const std::string bytes = gpu::testing::read_file(p);
                    auto index = must(gpu::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                                             bytes.size(), p));
                    std::vector<gpu::TensorToWrite> t;
                    for (const auto& x : index.tensors) {
                      gpu::TensorDesc d = x.desc;
                      if (x.name == "model.norm.weight") d = {DType::u8, gpu::Shape{64}};
                      t.push_back({x.name, d, bytes.data() + index.data_offset + x.data.offset});
                    }
                    must(gpu::write_safetensors(p, t));
                  },
                  "tensor 'model.norm.weight' is uint8"}),
    [](const ::testing::TestParamInfo<Malformed>& i) { return std::string(i.param.name); });

TEST(HfImport, ADirectoryIsAFolderOnlyWithConfigJson) {
  TempDir dir;
  EXPECT_FALSE(is_hf_folder(dir.path()));
  gpu::testing::write_file(dir / "config.json", "{}");
  EXPECT_TRUE(is_hf_folder(dir.path()));
  EXPECT_FALSE(is_hf_folder(dir / "config.json"));
}

}  // namespace hf_import_test
}  // namespace ember::importer
