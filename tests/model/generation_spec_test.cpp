// model/generation_spec.cpp: the generation section of model.json, parsed, written and checked
// against the graph; and what Model does with it: the tokenizer tensors after the layers (accepted
// there, refused elsewhere), handed out as bytes, left out of layers_bytes(), of stages and of a
// width conversion.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/convert.hpp"
#include "model/generation_spec.hpp"
#include "model/model.hpp"
#include "model/model_builder.hpp"
#include "model/safetensors.hpp"
#include "tests/model/model_test_util.hpp"

namespace ember::gpu {
namespace generation_spec_test {

using nlohmann::json;
using testing::must;

constexpr const char* kTokenizer = R"({"model": {"type": "BPE", "vocab": {"a": 0}}})";
constexpr const char* kTokenizerConfig = R"({"eos_token": "a"})";

GenerationSpec spec() {
  GenerationSpec g;
  g.family = "llama";
  g.context_length = 64;
  g.vocab_size = 16;
  g.num_kv_layers = 2;
  g.num_kv_heads = 1;
  g.head_dim = 4;
  g.kv_dtype = DType::f16;
  g.bos_token_id = 1;
  g.eos_token_ids = {2, 3};
  g.temperature = 0.6;
  g.top_p = 0.9;
  g.chat_template = "llama3";
  g.tokenizer = "tokenizer.json";
  g.tokenizer_config = "tokenizer_config.json";
  return g;
}

// A two-block decoder of the contract's shape: embedding, per block qkv -> kv_attention -> o_proj
// + residual, then gather, head. Vocabulary 16, hidden 8, 2 heads of 4 over 1 kv head.
ModelBuilder decoder(std::optional<GenerationSpec> g = spec()) {
  ModelBuilder b("tiny-llm", 7);
  for (const char* in : {"input_ids", "positions", "kv_meta", "last_index"}) b.input(in, DType::i64, Shape{-1});
  LayerAttrs e;
  e.num_embeddings = 16;
  e.embedding_dim = 8;
  std::string h = b.add("embed", OpKind::embedding, e, {"input_ids"});
  for (int i = 0; i < 2; ++i) {
    const std::string at = "layers." + std::to_string(i) + ".";
    LayerAttrs qkv;
    qkv.in_features = 8;
    qkv.out_features = 16;
    LayerAttrs kv;
    kv.num_heads = 2;
    kv.num_kv_heads = 1;
    kv.head_dim = 4;
    kv.kv_layer = i;
    kv.rope_dim = 4;
    LayerAttrs o;
    o.in_features = 8;
    o.out_features = 8;
    std::string x = b.add(at + "qkv", OpKind::linear, qkv, {h});
    x = b.add(at + "attn", OpKind::kv_attention, kv, {x, "positions", "kv_meta"});
    x = b.add(at + "o", OpKind::linear, o, {x});
    h = b.add(at + "residual", OpKind::add, {}, {h, x});
  }
  LayerAttrs g0;
  g0.dim = 0;
  h = b.add("last_rows", OpKind::gather, g0, {h, "last_index"});
  LayerAttrs head;
  head.in_features = 8;
  head.out_features = 16;
  head.bias = false;
  b.add("logits", OpKind::linear, head, {h});
  b.output("logits", DType::f32, Shape{-1, 16});
  b.generation() = std::move(g);
  return b;
}

// Rewrites DIR's weights file with `extra` U8 tensors appended after the layers' (or, with
// `first`, before them).
void add_files(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& extra, bool first = false) {
  const std::string path = dir + "/" + kWeightsFile;
  const std::string file = testing::read_file(path);
  auto index = must(parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(), file.size(), path));
  std::vector<TensorToWrite> tensors;
  std::vector<TensorToWrite> files;
  for (const auto& [name, bytes] : extra) {
    files.push_back({name, {DType::u8, Shape{static_cast<int64_t>(bytes.size())}}, bytes.data()});
  }
  if (first) tensors = files;
  for (const auto& t : index.tensors) tensors.push_back({t.name, t.desc, file.data() + index.data_offset + t.data.offset});
  if (!first) tensors.insert(tensors.end(), files.begin(), files.end());
  must(write_safetensors(path, tensors, index.metadata));
}

std::string write_model(const testing::TempDir& dir, ModelBuilder b = decoder()) {
  const std::string d = dir / "m";
  must(b.write(d));
  add_files(d, {{"tokenizer.json", kTokenizer}, {"tokenizer_config.json", kTokenizerConfig}});
  return d;
}

json manifest_json(const Manifest& m) { return json::parse(manifest_to_json(m)); }

Status parse_changed(const std::function<void(json&)>& change) {
  json j = manifest_json(decoder().manifest());
  change(j);
  auto parsed = parse_manifest(j.dump(), "model.json");
  return parsed.ok() ? Status::OK() : Status(parsed.error());
}

TEST(GenerationSpec, RoundTripsThroughModelJson) {
  const Manifest m = decoder().manifest();
  const std::string text = manifest_to_json(m);
  const Manifest back = must(parse_manifest(text, "model.json"));
  ASSERT_TRUE(back.generation.has_value());
  EXPECT_EQ(*back.generation, *m.generation);
  const json g = json::parse(text)["generation"];
  EXPECT_EQ(g["kv_dtype"], "float16");
  EXPECT_EQ(g["kv_bytes_per_token"], 2 * 2 * 1 * 4 * 2);  // layers * (K, V) * kv heads * D * 2 bytes
  EXPECT_EQ(g["sampling"]["top_p"], 0.9);
  EXPECT_FALSE(g["sampling"].contains("top_k"));
  EXPECT_EQ(m.generation->kv_bytes_per_token(), 32u);
  // A model without the section has none.
  EXPECT_FALSE(must(parse_manifest(manifest_to_json(decoder(std::nullopt).manifest()), "m")).generation);
}

TEST(GenerationSpec, RefusesMalformedSectionsWithTheField) {
  struct Case {
    std::function<void(json&)> change;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["generation"]["family"] = "t5"; }, "generation.family"},
      {[](json& j) { j["generation"].erase("context_length"); }, "'context_length' is missing"},
      {[](json& j) { j["generation"]["vocab_size"] = 0; }, "generation.vocab_size"},
      {[](json& j) { j["generation"]["kv_dtype"] = "int64"; }, "generation.kv_dtype"},
      {[](json& j) { j["generation"]["kv_bytes_per_token"] = 31; }, "shapes and kv_dtype make 32"},
      {[](json& j) { j["generation"]["eos_token_ids"] = {1, -2}; }, "not a token id"},
      {[](json& j) { j["generation"]["sampling"]["top_p"] = 0; }, "top_p"},
      {[](json& j) { j["generation"]["sampling"]["temperature"] = -1; }, "temperature"},
      {[](json& j) { j["generation"]["sampling"]["min_p"] = 0.1; }, "unknown field 'min_p'"},
      {[](json& j) { j["generation"]["chat_template"] = "jinja"; }, "chat_template"},
      {[](json& j) { j["generation"]["tokenizer_config"] = "tokenizer.json"; }, "name one tensor"},
      {[](json& j) { j["generation"]["speculative"] = true; }, "unknown field 'speculative'"},
  };
  for (const auto& c : cases) {
    Status st = parse_changed(c.change);
    ASSERT_FALSE(st.ok()) << c.expect;
    EXPECT_NE(st.error().message().find(c.expect), std::string::npos) << st.error().message();
  }
}

TEST(GenerationSpec, IsCheckedAgainstTheGraph) {
  struct Case {
    std::function<void(json&)> change;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](json& j) {
         j["generation"]["num_kv_layers"] = 3;
         j["generation"].erase("kv_bytes_per_token");  // optional; checked when given
       },
       "num_kv_layers 3 but the model has 2"},
      {[](json& j) {
         j["generation"]["num_kv_heads"] = 2;
         j["generation"].erase("kv_bytes_per_token");
       },
       "the generation section says 2 and 4"},
      {[](json& j) { j["layers"][6]["attrs"]["kv_layer"] = 0; }, "kv_layer 0, expected 1"},
      {[](json& j) { j["generation"]["vocab_size"] = 17; }, "one output, float32 [-1, vocab_size 17]"},
      {[](json& j) { j["generation"]["eos_token_ids"] = {16}; }, "eos_token_ids: 16 is not below vocab_size 16"},
      {[](json& j) { j["generation"]["bos_token_id"] = 99; }, "bos_token_id: 99"},
      {[](json& j) { j["generation"]["sampling"]["top_k"] = 17; }, "top_k: 17 is more than vocab_size"},
      {[](json& j) { std::swap(j["inputs"][0], j["inputs"][1]); }, "inputs[0] is 'positions'"},
      {[](json& j) { j["inputs"][3]["dtype"] = "int32"; }, "inputs[3] is 'last_index' int32[-1]"},
  };
  for (const auto& c : cases) {
    Status st = parse_changed(c.change);
    ASSERT_FALSE(st.ok()) << c.expect;
    EXPECT_NE(st.error().message().find(c.expect), std::string::npos) << st.error().message();
  }
}

TEST(GenerationSpec, LearnedPositionsMustCoverTheContext) {
  ModelBuilder b = decoder();
  LayerAttrs pe;
  pe.num_embeddings = 32;  // the context is 64
  pe.embedding_dim = 8;
  b.add("wpe", OpKind::embedding, pe, {"positions"});
  auto parsed = parse_manifest(manifest_to_json(b.manifest()), "model.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message().find("a table of 32 positions for a context_length of 64"), std::string::npos)
      << parsed.error().message();
}

TEST(GenerationModel, HandsOutTheTokenizerAfterTheLayers) {
  testing::TempDir dir;
  const std::string d = write_model(dir);
  auto m = must(Model::load(d));
  ASSERT_NE(m->generation(), nullptr);
  EXPECT_EQ(m->tokenizer_json(), kTokenizer);
  EXPECT_EQ(m->tokenizer_config_json(), kTokenizerConfig);
  // The layers' bytes end where the tokenizer's begin: no layer range, so no device copy, holds them.
  const uint64_t tail = std::string(kTokenizer).size() + std::string(kTokenizerConfig).size();
  EXPECT_EQ(m->layers_bytes() + tail, m->data_bytes());
  EXPECT_EQ(m->range_bytes({0, m->num_layers()}).end(), m->layers_bytes());
  // The header-only check accepts it too, and hands out nothing (it has no bytes).
  ASSERT_TRUE(Model::check_dir(d).ok());
}

TEST(GenerationModel, ATokenizerIsOptional) {
  testing::TempDir dir;
  GenerationSpec g = spec();
  g.tokenizer.clear();
  g.tokenizer_config.clear();
  must(decoder(g).write(dir / "m"));
  auto m = must(Model::load(dir / "m"));
  EXPECT_TRUE(m->tokenizer_json().empty());
  EXPECT_EQ(m->layers_bytes(), m->data_bytes());
}

TEST(GenerationModel, RefusesTokenizerTensorsOutOfPlace) {
  testing::TempDir dir;
  {  // named but absent
    must(decoder().write(dir / "a"));
    auto m = Model::load(dir / "a");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().code(), ErrorCode::not_found);
    EXPECT_NE(m.error().message().find("generation: tensor 'tokenizer.json' is not in"), std::string::npos)
        << m.error().message();
  }
  {  // before the layers
    must(decoder().write(dir / "b"));
    add_files(dir / "b", {{"tokenizer.json", kTokenizer}, {"tokenizer_config.json", kTokenizerConfig}}, true);
    auto m = Model::load(dir / "b");
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message().find("starts at data byte"), std::string::npos) << m.error().message();
  }
  {  // not bytes
    must(decoder().write(dir / "c"));
    const std::string path = dir / "c/weights.safetensors";
    const std::string file = testing::read_file(path);
    auto index = must(parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(), file.size(), path));
    std::vector<TensorToWrite> tensors;
    for (const auto& t : index.tensors) tensors.push_back({t.name, t.desc, file.data() + index.data_offset + t.data.offset});
    const float f[2] = {1, 2};
    tensors.push_back({"tokenizer.json", {DType::f32, Shape{2}}, f});
    tensors.push_back({"tokenizer_config.json", {DType::u8, Shape{2}}, "{}"});
    must(write_safetensors(path, tensors));
    auto m = Model::load(dir / "c");
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message().find("is float32[2]; a file's bytes are uint8"), std::string::npos)
        << m.error().message();
  }
  {  // a trailing tensor nothing names is still refused
    const std::string d = write_model(dir);
    add_files(d, {{"notes.txt", "hello"}});
    auto m = Model::load(d);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message().find("tensor 'notes.txt' is not used by any layer"), std::string::npos)
        << m.error().message();
  }
}

TEST(GenerationModel, StagesAndConversionsLeaveTheTokenizerAlone) {
  testing::TempDir dir;
  const std::string d = write_model(dir);
  auto m = must(Model::load(d));
  // A stage is cut from layer bytes: not generative, no tokenizer tensors in its index.
  auto stage = must(Model::stage(m, {1, 5}));
  EXPECT_EQ(stage->generation(), nullptr);
  EXPECT_TRUE(stage->tokenizer_json().empty());
  for (const auto& t : stage->weights_index().tensors) EXPECT_NE(t.desc.dtype, DType::u8) << t.name;
  // bf16 weights; the tokenizer's bytes and the rotary table kept as they were.
  must(convert_model_dir(d, dir / "bf16", DType::bf16));
  auto narrow = must(Model::load(dir / "bf16"));
  EXPECT_EQ(narrow->tokenizer_json(), kTokenizer);
  EXPECT_EQ(narrow->tokenizer_config_json(), kTokenizerConfig);
  EXPECT_EQ(narrow->layer_weights(0)[0]->desc.dtype, DType::bf16);
  EXPECT_EQ(narrow->weights_index().find("layers.0.attn.inv_freq")->desc.dtype, DType::f32);
}

}  // namespace generation_spec_test
}  // namespace ember::gpu
