// The Shadow policy (placement/shadow_policy.hpp) on synthetic profiles: Eq. 6's split balances the
// two sides (checked against every split), LLS picks the compute-hungry light blocks of a CNN-like
// profile, gives nothing when no Shadow helps, the band of model-level scaling, and the release
// order.
#include "placement/shadow_policy.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace ember::placement {
namespace shadow_policy_test {

// A CNN-like profile: early blocks light in weights and heavy in compute (time grows with the
// batch), late blocks heavy in weights and nearly flat in time. Batches 1, 2, 4, 8.
ShadowProfile cnn_like() {
  ShadowProfile p;
  p.batches = {1, 2, 4, 8};
  auto block = [&](uint32_t first, uint64_t bytes, uint64_t macs, double per_row, double fixed, uint64_t act) {
    ShadowBlock b;
    b.first_layer = first;
    b.last_layer = first + 3;
    b.weight_bytes = bytes;
    b.macs = macs;
    b.in_bytes = b.out_bytes = act;
    for (uint32_t x : p.batches) b.exec_us.push_back(fixed + per_row * x);
    p.blocks.push_back(b);
  };
  block(0, 40'000, 400'000'000, 900, 50, 200'000);    // stem: 400 MACs a byte
  block(3, 200'000, 300'000'000, 700, 50, 100'000);   // 1500
  block(6, 2'000'000, 200'000'000, 150, 60, 50'000);  // 100
  block(9, 8'000'000, 100'000'000, 40, 80, 20'000);   // 12.5
  block(12, 30'000'000, 30'000'000, 10, 100, 4'000);  // the head: 1 MAC a byte, flat
  p.transfer_fixed_us = 10;
  p.transfer_us_per_byte = 1.0 / 10e3;  // 10 GB/s
  return p;
}

TEST(ShadowPolicy, TheSplitBalancesBothSidesAsEquation6Says) {
  const ShadowProfile p = cnn_like();
  for (uint32_t batch : {2u, 3u, 5u, 8u}) {
    for (size_t first = 0; first < p.blocks.size(); ++first) {
      for (size_t last = first + 1; last <= p.blocks.size(); ++last) {
        const Split s = split_batch(p, first, last, batch);
        ASSERT_EQ(s.body_rows + s.shadow_rows, batch);
        ASSERT_GE(s.shadow_rows, 1u);
        // No other split brings the two sides closer.
        const double gap = std::abs(s.body_part_us - s.shadow_part_us);
        for (uint32_t mine = 1; mine < batch; ++mine) {
          const uint32_t theirs = batch - mine;
          const double here = blocks_us(p, first, last, mine);
          const double there = blocks_us(p, first, last, theirs) + 2 * p.transfer_fixed_us +
                               static_cast<double>((p.blocks[first].in_bytes + p.blocks[last - 1].out_bytes) * theirs) *
                                   p.transfer_us_per_byte;
          EXPECT_LE(gap, std::abs(here - there) + 1e-9) << "batch " << batch << " blocks " << first << "-" << last;
        }
        const double outside = body_us(p, batch) - blocks_us(p, first, last, batch);
        EXPECT_NEAR(s.latency_us, outside + std::max(s.body_part_us, s.shadow_part_us), 1e-9);
      }
    }
  }
  // One row cannot be split: the Body alone.
  const Split one = split_batch(p, 0, 2, 1);
  EXPECT_EQ(one.shadow_rows, 0u);
  EXPECT_DOUBLE_EQ(one.latency_us, body_us(p, 1));
}

TEST(ShadowPolicy, LayerLevelScalingPicksTheLightComputeHungryBlocks) {
  const ShadowProfile p = cnn_like();
  const double slo = body_us(p, 4) * 1.05;  // the Body alone fits 4 rows
  const Capacity alone = body_capacity(p, slo, 8);
  EXPECT_EQ(alone.batch, 4u);
  for (BlockOrder order : {BlockOrder::exhaustive, BlockOrder::macs_per_byte, BlockOrder::sensitivity}) {
    auto c = choose_shadow(p, slo, 8, order);
    ASSERT_TRUE(c.ok()) << c.error().message();
    ASSERT_TRUE(c->has_value()) << "a Shadow helps this profile";
    const ShadowChoice& s = **c;
    EXPECT_EQ(s.first_block, 0u) << "the light, compute-hungry blocks come first";
    EXPECT_LE(s.last_block, 3u) << "the weight-heavy head stays on the Body";
    EXPECT_LT(s.weight_bytes, 3'000'000u) << "a few percent of the model's bytes";
    EXPECT_GT(s.batch, alone.batch) << "the pair serves a larger batch within the SLO";
    EXPECT_LE(s.split.latency_us, slo);
    EXPECT_GT(s.gain_rows_per_s, 0);
    EXPECT_NEAR(s.rows_per_s, s.batch * 1e6 / s.split.latency_us, 1e-6);
    EXPECT_NEAR(s.load_us, static_cast<double>(s.weight_bytes) * p.load_us_per_byte, 1e-9);
  }
}

// Asked for a given gain, the policy takes the fewest bytes that carry it; asked for more than any
// Shadow gives, the greatest benefit.
TEST(ShadowPolicy, ANeededGainTakesTheSmallestShadowThatCarriesIt) {
  const ShadowProfile p = cnn_like();
  const double slo = body_us(p, 4) * 1.05;
  const auto best = choose_shadow(p, slo, 8);
  ASSERT_TRUE(best.ok() && best->has_value());
  const double most = (*best)->gain_rows_per_s;
  const auto small = choose_shadow(p, slo, 8, BlockOrder::exhaustive, most * 0.3);
  ASSERT_TRUE(small.ok() && small->has_value());
  EXPECT_GE((*small)->gain_rows_per_s, most * 0.3);
  EXPECT_LE((*small)->weight_bytes, (*best)->weight_bytes);
  // Brute force: no span carrying the need holds fewer bytes.
  for (size_t first = 0; first < p.blocks.size(); ++first) {
    for (size_t last = first + 1; last <= p.blocks.size(); ++last) {
      uint64_t bytes = 0;
      for (size_t i = first; i < last; ++i) bytes += p.blocks[i].weight_bytes;
      if (bytes >= (*small)->weight_bytes) continue;
      for (uint32_t b = 2; b <= 8; ++b) {
        const Split s = split_batch(p, first, last, b);
        if (s.latency_us > slo) continue;
        EXPECT_LT(b * 1e6 / s.latency_us - body_capacity(p, slo, 8).rows_per_s, most * 0.3)
            << "blocks " << first << "-" << last << " batch " << b << " carry the need with fewer bytes";
      }
    }
  }
  const auto too_much = choose_shadow(p, slo, 8, BlockOrder::exhaustive, most * 10);
  ASSERT_TRUE(too_much.ok() && too_much->has_value());
  EXPECT_DOUBLE_EQ((*too_much)->benefit, (*best)->benefit);
}

TEST(ShadowPolicy, NoShadowWhenTheLinkCostsMoreThanItSavesOrNothingFits) {
  ShadowProfile p = cnn_like();
  p.transfer_fixed_us = 1e6;  // a second per transfer
  const double slo = body_us(p, 4) * 1.05;
  auto c = choose_shadow(p, slo, 8);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
  // Not even one row within the SLO, with or without a Shadow.
  auto none = choose_shadow(cnn_like(), 1, 8);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(ShadowPolicy, MalformedProfilesAreRefused) {
  ShadowProfile p = cnn_like();
  p.blocks[2].exec_us.pop_back();
  auto short_times = choose_shadow(p, 1e4, 8);
  ASSERT_FALSE(short_times.ok());
  EXPECT_NE(short_times.error().message().find("block 2"), std::string::npos);
  p = cnn_like();
  p.batches = {2, 1, 4, 8};
  EXPECT_FALSE(choose_shadow(p, 1e4, 8).ok());
  p = cnn_like();
  p.blocks[0].exec_us[1] = NAN;
  EXPECT_FALSE(choose_shadow(p, 1e4, 8).ok());
  EXPECT_FALSE(choose_shadow(cnn_like(), 0, 8).ok());
  EXPECT_FALSE(choose_shadow(ShadowProfile{}, 1e4, 8).ok());
}

TEST(ShadowPolicy, ModelLevelBandBurstTriggerAndReleaseOrder) {
  EXPECT_EQ(model_level(90, 100), BodyScaling::out);
  EXPECT_EQ(model_level(80, 100), BodyScaling::hold);
  EXPECT_EQ(model_level(60, 100), BodyScaling::hold);
  EXPECT_EQ(model_level(59, 100), BodyScaling::in);
  EXPECT_TRUE(needs_shadows(101, 100));
  EXPECT_FALSE(needs_shadows(100, 100));
  EXPECT_TRUE(needs_shadows(81, 100, 0.8));
  EXPECT_EQ(release_order({3.0, 1.0, 2.0, 1.0}), (std::vector<size_t>{1, 3, 2, 0}));
}

TEST(ShadowPolicy, TimesBetweenAndBeyondTheMeasuredBatchesAreInterpolated) {
  ShadowProfile p;
  p.batches = {2, 4};
  ShadowBlock b;
  b.exec_us = {100, 140};
  p.blocks.push_back(b);
  EXPECT_DOUBLE_EQ(blocks_us(p, 0, 1, 3), 120);
  EXPECT_DOUBLE_EQ(blocks_us(p, 0, 1, 8), 220);  // on the line through the last two
  EXPECT_DOUBLE_EQ(blocks_us(p, 0, 1, 1), 100);  // below the first: the first
}

}  // namespace shadow_policy_test
}  // namespace ember::placement
