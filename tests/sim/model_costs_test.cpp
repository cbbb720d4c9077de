// ModelCosts (sim/model_costs.hpp): a batch's time from a profile's layers, interpolated between
// measured batch sizes and extended past them as the header says, a stage's share, the speedup, a
// real profile written by `ember model profile`'s code, and the refusals.
#include "sim/model_costs.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ember::sim {
namespace model_costs_test {

gpu::ModelProfile profile(std::vector<uint32_t> batches, std::vector<std::vector<double>> layer_us) {
  gpu::ModelProfile p;
  p.model = "m";
  p.weights_bytes = 3000;
  p.batches = std::move(batches);
  for (size_t i = 0; i < layer_us.size(); ++i) {
    gpu::LayerCost l;
    l.name = "l" + std::to_string(i);
    l.bytes = 1000;
    l.exec_us = layer_us[i];
    l.out_bytes.assign(l.exec_us.size(), 64);
    p.layers.push_back(l);
  }
  return p;
}

TEST(ModelCosts, SumsLayersAndInterpolatesBetweenMeasuredBatches) {
  // Two layers measured at batches 1, 4, 8: 100/160/240 and 50/50/90 us.
  auto c = ModelCosts::from_profile(profile({1, 4, 8}, {{100, 160, 240}, {50, 50, 90}}));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->layers(), 2u);
  EXPECT_EQ(c->weights_bytes(), 3000u);
  EXPECT_EQ(c->exec_us(1), 150u);
  EXPECT_EQ(c->exec_us(2), 120u + 50);  // layer 0: 100 + 20 per sample
  EXPECT_EQ(c->exec_us(4), 210u);
  EXPECT_EQ(c->exec_us(6), 200u + 70);  // 160 + 2 x 20; 50 + 2 x 10
  EXPECT_EQ(c->exec_us(8), 330u);
  // Past the largest: the last segment's slope (20 and 10 us per sample).
  EXPECT_EQ(c->exec_us(10), 280u + 110);
  // A stage's share: layer 1 alone.
  EXPECT_EQ(c->exec_us(4, 1, 2), 50u);
  EXPECT_EQ(c->exec_us(4, 0, 99), 210u);  // past the last layer: to the end
  EXPECT_EQ(c->exec_us(4, 2, 2), 0u);
}

TEST(ModelCosts, BelowTheSmallestBatchAndWithOneBatchMeasured) {
  auto c = ModelCosts::from_profile(profile({2}, {{30}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->exec_us(1), 30u);  // never faster than the smallest measured size
  EXPECT_EQ(c->exec_us(2), 30u);
  EXPECT_EQ(c->exec_us(6), 90u);  // in proportion past the only size
}

TEST(ModelCosts, NegativeSlopesCountAsFlat) {
  auto c = ModelCosts::from_profile(profile({1, 2, 4}, {{100, 90, 80}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->exec_us(3), 90u);
  EXPECT_EQ(c->exec_us(16), 80u);
}

TEST(ModelCosts, ASpeedupDividesEveryTime) {
  auto c = ModelCosts::from_profile(profile({1, 4, 8}, {{100, 160, 240}, {50, 50, 90}}), 10);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->exec_us(1), 15u);
  EXPECT_EQ(c->exec_us(8), 33u);
  auto tiny = ModelCosts::from_profile(profile({1}, {{0.2}}), 1);
  EXPECT_EQ(tiny->exec_us(1), 1u);  // any time at all is at least a microsecond
  auto none = ModelCosts::from_profile(profile({1}, {{0}}), 1);
  EXPECT_EQ(none->exec_us(1), 0u);
}

TEST(ModelCosts, ReadsAProfileAsProfileJsonHoldsIt) {
  gpu::ModelProfile p = profile({1, 2}, {{10.5, 12.5}, {4, 6}});
  p.header_sha256 = std::string(64, 'a');
  p.device = "sim";
  for (auto& l : p.layers) {
    l.sha256 = std::string(64, '0');
    l.out_bytes = {16, 32};
  }
  auto parsed = gpu::parse_profile(gpu::profile_to_json(p), "profile.json");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  auto c = ModelCosts::from_profile(*parsed);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->exec_us(2), 19u);  // 12.5 + 6 = 18.5, to the nearest
  EXPECT_EQ(c->layer_bytes(1), 1000u);
}

TEST(ModelCosts, RefusesProfilesItCannotUse) {
  struct Case {
    gpu::ModelProfile p;
    double speedup;
    const char* message;
  };
  gpu::ModelProfile mismatched = profile({1, 2}, {{1, 2}});
  mismatched.layers[0].exec_us = {1};
  gpu::ModelProfile no_outputs = profile({1, 2}, {{1, 2}});
  no_outputs.layers[0].out_bytes.clear();
  for (const Case& c : std::vector<Case>{
           {profile({}, {{}}), 1, "measured no batch size"},
           {profile({2, 1}, {{1, 2}}), 1, "ascending"},
           {profile({0, 1}, {{1, 2}}), 1, "above 0 and ascending"},
           {profile({1}, {}), 1, "has no layer"},
           {mismatched, 1, "layer 'l0' has 1 times and 2 output sizes for 2 batch sizes"},
           {no_outputs, 1, "layer 'l0' has 2 times and 0 output sizes for 2 batch sizes"},
           {profile({1}, {{-1}}), 1, "negative or not finite"},
           {profile({1}, {{1.0 / 0.0}}), 1, "negative or not finite"},
           {profile({1}, {{1}}), 0, "speedup"},
           {profile({1}, {{1}}), -2, "speedup"},
       }) {
    auto r = ModelCosts::from_profile(c.p, c.speedup);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message().find(c.message), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find("model 'm'"), std::string::npos) << r.error().message();
  }
}

TEST(ModelCosts, AProfileScaledToAnotherSizeScalesBytesAndTimesInProportion) {
  gpu::ModelProfile p = profile({1, 4, 8}, {{100, 160, 240}, {50, 50, 90}});
  const uint64_t before = p.weights_bytes;
  auto scaled = scaled_profile(p, "t5", before * 10);
  ASSERT_TRUE(scaled.ok()) << scaled.error().message();
  EXPECT_EQ(scaled->model, "t5");
  EXPECT_EQ(scaled->weights_bytes, before * 10);
  for (size_t i = 0; i < p.layers.size(); ++i) EXPECT_EQ(scaled->layers[i].bytes, p.layers[i].bytes * 10);
  auto c = ModelCosts::from_profile(*scaled);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->model(), "t5");
  EXPECT_EQ(c->exec_us(1), 1'500u);  // (100 + 50) x 10
  EXPECT_EQ(c->exec_us(8), 3'300u);  // (240 + 90) x 10
  EXPECT_EQ(c->weights_bytes(), before * 10);
  EXPECT_FALSE(scaled_profile(p, "x", 0).ok());
  gpu::ModelProfile empty = p;
  empty.weights_bytes = 0;
  EXPECT_FALSE(scaled_profile(empty, "x", 100).ok());
}

}  // namespace model_costs_test
}  // namespace ember::sim
