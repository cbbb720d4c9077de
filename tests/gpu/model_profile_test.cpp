// ModelProfile: measured per layer on a simulated device, written and read back as profile.json,
// checked against the model it describes; bad files are clear errors.
#include "model/model_profile.hpp"

#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/profiler.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace model_profile_test {

using testing::TempDir;

/// A stand-in for SHA-256 (gpu/ links no crypto): 64 hex digits of FNV-1a, so equal bytes match.
std::string fake_hash(const uint8_t* data, uint64_t bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < bytes; ++i) h = (h ^ data[i]) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return std::string(hex) + hex + hex + hex;
}

TEST(ModelProfile, MeasuresEveryLayerAndRoundTrips) {
  TempDir dir;
  auto model = testing::tiny_model("gpt2", dir.path());
  auto device = testing::sim_device();
  auto p = measure_profile(model, *device, {1, 4}, 16, fake_hash);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  ASSERT_EQ(p->layers.size(), model->num_layers());
  EXPECT_EQ(p->header_bytes, model->data_offset());
  EXPECT_EQ(p->weights_bytes, model->file_bytes());
  uint64_t sum = 0;
  for (uint32_t i = 0; i < model->num_layers(); ++i) {
    const LayerCost& l = p->layers[i];
    sum += l.bytes;
    EXPECT_EQ(l.sha256, fake_hash(model->data() + model->layer_bytes(i).offset, l.bytes));
    ASSERT_EQ(l.exec_us.size(), 2u);
    EXPECT_GE(l.exec_us[0], 0.0);
    // A cut after any layer hands on at least that layer's activation (the last: the answer), and
    // four rows hand on four times what one does.
    EXPECT_GT(l.out_bytes[0], 0u) << l.name;
    EXPECT_EQ(l.out_bytes[1], 4 * l.out_bytes[0]) << l.name;
  }
  EXPECT_EQ(sum, model->data_bytes());
  EXPECT_TRUE(p->check_matches(*model).ok());
  EXPECT_EQ(p->batch_index(3), 0u);
  EXPECT_EQ(p->batch_index(8), 1u);

  ASSERT_TRUE(write_profile(dir.path(), *p).ok());
  auto back = read_profile(dir.path());
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->layers.size(), p->layers.size());
  EXPECT_EQ(back->layers[3].sha256, p->layers[3].sha256);
  EXPECT_EQ(back->layers[3].out_bytes, p->layers[3].out_bytes);
  EXPECT_NEAR(back->layers[3].exec_us[1], p->layers[3].exec_us[1], 0.06);
  EXPECT_TRUE(back->check_matches(*model).ok());
}

TEST(ModelProfile, AStaleProfileIsRefused) {
  TempDir a, b;
  auto gpt = testing::tiny_model("gpt2", a.path());
  auto mlp = testing::tiny_model("mlp", b.path());
  auto device = testing::sim_device();
  auto p = measure_profile(gpt, *device, {1}, 8, fake_hash);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  p->model = mlp->manifest().name;  // the name matches, the layers do not
  auto st = p->check_matches(*mlp);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(st.error().message().find("stale"), std::string::npos) << st.error().message();
}

TEST(ModelProfile, BadFilesAreClearErrors) {
  TempDir dir;
  auto model = testing::tiny_model("mlp", dir.path());
  auto device = testing::sim_device();
  auto p = measure_profile(model, *device, {1}, 8, fake_hash);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  const std::string good = profile_to_json(*p);
  EXPECT_TRUE(parse_profile(good, "profile.json").ok());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
  };
  const std::string digest = p->layers[0].sha256;
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"{", "not valid JSON"},
           {"[]", "not an object"},
           {with("\"ember-profile\"", "\"x\""), "format"},
           {with("\"format_version\": 1", "\"format_version\": 2"), "format_version"},
           {with(digest, "zz"), "layers[0].sha256"},
           {with("\"batches\": [\n  1\n ]", "\"batches\": [0]"), "batches"},
           {with("\"model\"", "\"modle\""), "model"},
       }) {
    auto r = parse_profile(text, "profile.json");
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument) << r.error().to_string();
    EXPECT_NE(r.error().message().find(field), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find("profile.json"), std::string::npos) << r.error().message();
  }
  TempDir empty;
  EXPECT_EQ(read_profile(empty.path()).error().code(), ErrorCode::not_found);
}

}  // namespace model_profile_test
}  // namespace ember::gpu
