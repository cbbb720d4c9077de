#include "model/model.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "tests/model/model_test_util.hpp"

namespace ember::gpu {
namespace model_test {

using nlohmann::json;
using testing::TempDir;

// Splits a safetensors file into its JSON header and data, lets `edit` change them, writes it back.
void rewrite_weights(const std::string& path, const std::function<void(json&, std::string&)>& edit) {
  std::string f = testing::read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(f[static_cast<size_t>(i)]);
  json header = json::parse(f.substr(8, n));
  std::string data = f.substr(8 + n);
  edit(header, data);
  std::string h = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  testing::write_file(path, out + h + data);
}

void rewrite_manifest(const std::string& path, const std::function<void(json&)>& edit) {
  json j = json::parse(testing::read_file(path));
  edit(j);
  testing::write_file(path, j.dump());
}

TEST(Model, LayersOwnConsecutiveByteRanges) {
  TempDir dir;
  for (auto arch : architecture_names()) {
    auto m = testing::tiny_model(std::string(arch), dir / std::string(arch));
    ASSERT_TRUE(m);
    uint64_t cursor = 0;
    for (uint32_t i = 0; i < m->num_layers(); ++i) {
      EXPECT_EQ(m->layer_bytes(i).offset, cursor) << arch << " layer " << i;
      cursor = m->layer_bytes(i).end();
      uint64_t sum = 0;
      for (const TensorInfo* t : m->layer_weights(i))
        if (t) sum += t->data.length;
      EXPECT_EQ(m->layer_bytes(i).length, sum);
    }
    EXPECT_EQ(cursor, m->data_bytes());
    EXPECT_EQ(m->range_bytes({0, m->num_layers()}), (ByteRange{0, m->data_bytes()}));
    EXPECT_EQ(m->data_offset() + m->data_bytes(), m->file_bytes());
    const uint32_t mid = m->num_layers() / 2;
    EXPECT_EQ(m->range_bytes({0, mid}).end(), m->range_bytes({mid, m->num_layers()}).offset);
  }
}

TEST(Model, MissingDirectoryIsNotFound) {
  auto m = Model::load("/nonexistent/model/1");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), ErrorCode::not_found);
  EXPECT_NE(m.error().message().find("/nonexistent/model/1/model.json"), std::string::npos);
}

struct Corruption {
  const char* name;
  std::function<void(const std::string& dir)> apply;
  const char* expect;
};

class ModelErrors : public ::testing::TestWithParam<Corruption> {};

TEST_P(ModelErrors, AreReportedWithFileAndField) {
  TempDir dir;
  ASSERT_TRUE(testing::tiny_model("mlp", dir.path()));
  GetParam().apply(dir.path());
  auto m = Model::load(dir.path());
  ASSERT_FALSE(m.ok()) << GetParam().name;
  EXPECT_NE(m.error().message().find(GetParam().expect), std::string::npos) << m.error().message();
  // The header-only check a registry runs finds the same problem without reading the weights.
  auto checked = Model::check_dir(dir.path());
  ASSERT_FALSE(checked.ok()) << GetParam().name;
  EXPECT_NE(checked.error().message().find(GetParam().expect), std::string::npos) << checked.error().message();
}

TEST(Model, CheckDirAcceptsWhatLoadAccepts) {
  TempDir dir;
  auto m = testing::tiny_model("bert-base", dir.path());
  ASSERT_TRUE(m);
  auto checked = Model::check_dir(dir.path());
  ASSERT_TRUE(checked.ok()) << checked.error().message();
  EXPECT_EQ(*checked, m->file_bytes());
}

INSTANTIATE_TEST_SUITE_P(
    All, ModelErrors,
    ::testing::Values(
        Corruption{"truncated",
                   [](const std::string& d) {
                     std::string f = testing::read_file(d + "/weights.safetensors");
                     testing::write_file(d + "/weights.safetensors", f.substr(0, f.size() - 100));
                   },
                   "weights.safetensors: tensor 'fc3.bias': field 'data_offsets' ends at"},
        Corruption{"empty file", [](const std::string& d) { testing::write_file(d + "/weights.safetensors", ""); },
                   "weights.safetensors: truncated"},
        Corruption{"no weights file", [](const std::string& d) { std::filesystem::remove(d + "/weights.safetensors"); },
                   "weights.safetensors: no such file"},
        Corruption{"lying offsets",
                   [](const std::string& d) {
                     rewrite_weights(d + "/weights.safetensors", [](json& h, std::string&) {
                       h["fc1.weight"]["data_offsets"][1] = h["fc1.weight"]["data_offsets"][1].get<uint64_t>() + 4;
                     });
                   },
                   "tensor 'fc1.weight': field 'data_offsets' spans"},
        Corruption{"wrong shape",
                   [](const std::string& d) {
                     rewrite_weights(d + "/weights.safetensors", [](json& h, std::string&) { h["fc2.weight"]["shape"] = {16, 64}; });
                   },
                   "layers[2] 'fc2' (linear): weights.weight: tensor 'fc2.weight' has shape [16, 64] but the op's attributes need [32, 32]"},
        Corruption{"float16",
                   [](const std::string& d) {
                     rewrite_weights(d + "/weights.safetensors", [](json& h, std::string&) {
                       h["fc3.bias"]["dtype"] = "F16";
                       h["fc3.bias"]["shape"] = {8};
                     });
                   },
                   "weights.bias: tensor 'fc3.bias' is float16"},
        Corruption{"missing tensor",
                   [](const std::string& d) {
                     rewrite_manifest(d + "/model.json", [](json& j) { j["layers"][0]["weights"]["bias"] = "fc1.b"; });
                   },
                   "weights.bias: tensor 'fc1.b' is not in"},
        Corruption{"unused tensor",
                   [](const std::string& d) {
                     rewrite_weights(d + "/weights.safetensors", [](json& h, std::string& data) {
                       h["extra"] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {data.size(), data.size() + 4}}};
                       data += std::string(4, '\0');
                     });
                   },
                   "tensor 'extra' is not used by any layer"},
        Corruption{"shared tensor",
                   [](const std::string& d) {
                     rewrite_manifest(d + "/model.json", [](json& j) {
                       j["layers"][2]["weights"]["weight"] = "fc1.weight";
                       j["layers"][2]["attrs"]["in_features"] = 16;
                       j["layers"][2]["inputs"] = {"input"};
                     });
                   },
                   "already used by layer 'fc1'"},
        Corruption{"layer order",
                   [](const std::string& d) {
                     // Swap where fc1.bias and fc2.weight live: sizes differ, so move fc1.bias to the end.
                     rewrite_weights(d + "/weights.safetensors", [](json& h, std::string& data) {
                       auto b = h["fc1.bias"]["data_offsets"];
                       const uint64_t begin = b[0], end = b[1];
                       std::string bias = data.substr(begin, end - begin);
                       data.erase(begin, end - begin);
                       for (auto& [k, v] : h.items()) {
                         if (k == "__metadata__") continue;
                         uint64_t o0 = v["data_offsets"][0], o1 = v["data_offsets"][1];
                         if (o0 >= end) v["data_offsets"] = {o0 - (end - begin), o1 - (end - begin)};
                       }
                       h["fc1.bias"]["data_offsets"] = {data.size(), data.size() + bias.size()};
                       data += bias;
                     });
                   },
                   "each layer's tensors must be contiguous and in layer order"},
        Corruption{"bad manifest",
                   [](const std::string& d) { testing::write_file(d + "/model.json", "{\"format\": \"ember-model\""); },
                   "model.json: not valid JSON"}),
    [](const ::testing::TestParamInfo<Corruption>& info) {
      std::string n = info.param.name;
      for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

TEST(Model, CheckInputsNamesTheInput) {
  TempDir dir;
  auto m = testing::tiny_model("bert-base", dir.path());
  ASSERT_TRUE(m);
  auto ok = m->check_inputs({{DType::i64, Shape{2, 8}}, {DType::i64, Shape{2, 8}}});
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  auto wrong_dtype = m->check_inputs({{DType::f32, Shape{2, 8}}, {DType::i64, Shape{2, 8}}});
  ASSERT_FALSE(wrong_dtype.ok());
  EXPECT_NE(wrong_dtype.error().message().find("input 'input_ids' must be int64"), std::string::npos);
  auto wrong_rank = m->check_inputs({{DType::i64, Shape{2, 8, 1}}, {DType::i64, Shape{2, 8}}});
  ASSERT_FALSE(wrong_rank.ok());
  auto too_long = m->check_inputs({{DType::i64, Shape{2, 64}}, {DType::i64, Shape{2, 64}}});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message().find("exceeds the 32 positions"), std::string::npos) << too_long.error().message();
  auto mismatch = m->check_inputs({{DType::i64, Shape{2, 8}}, {DType::i64, Shape{2, 9}}});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().message().find("different shapes"), std::string::npos) << mismatch.error().message();
  EXPECT_FALSE(m->check_inputs({{DType::i64, Shape{2, 8}}}).ok());
}

}  // namespace model_test
}  // namespace ember::gpu
