// The KV preemption policy (placement/kv_preemption.hpp): the costs as the header's formula gives
// them, each side chosen where it is cheaper by more than the margin, the band and the break-even
// itself (hysteresis: the last choice stays), and the cases that always recompute.
#include "placement/kv_preemption.hpp"

#include <gtest/gtest.h>

namespace ember::placement {
namespace kv_preemption_test {

// 10 blocks of 100 kB over a 10 GB/s link with 5 us a copy: (10 * 5 + 100) * 2 = 300 us to swap.
KvPreemptionInput ten_blocks(uint64_t tokens, double prefill_us_per_token) {
  KvPreemptionInput in;
  in.bytes = 1'000'000;
  in.blocks = 10;
  in.tokens = tokens;
  in.host_bytes_per_s = 10e9;
  in.copy_fixed_us = 5;
  in.prefill_us_per_token = prefill_us_per_token;
  return in;
}

TEST(KvPreemption, TheCostsAreTheHeadersFormula) {
  const auto c = choose_kv_preemption(ten_blocks(160, 2.5));
  EXPECT_DOUBLE_EQ(c.swap_us, 300);
  EXPECT_DOUBLE_EQ(c.recompute_us, 400);
}

TEST(KvPreemption, ALongContextOnAFastLinkIsSwapped) {
  // 1000 tokens at 2.5 us: 2500 us of prefill against 300 us of copies.
  const auto c = choose_kv_preemption(ten_blocks(1000, 2.5));
  EXPECT_EQ(c.how, KvPreemption::swap);
  EXPECT_EQ(to_string(c.how), "swap");
}

TEST(KvPreemption, AShortContextOrASlowLinkIsRecomputed) {
  // 40 tokens: 100 us of prefill against 300 us of copies.
  EXPECT_EQ(choose_kv_preemption(ten_blocks(40, 2.5)).how, KvPreemption::recompute);
  // The same 1000 tokens over a 0.1 GB/s link: 2 * (50 + 10000) us of copies.
  auto slow = ten_blocks(1000, 2.5);
  slow.host_bytes_per_s = 0.1e9;
  const auto c = choose_kv_preemption(slow);
  EXPECT_EQ(c.how, KvPreemption::recompute);
  EXPECT_DOUBLE_EQ(c.swap_us, 20'100);
  EXPECT_EQ(to_string(c.how), "recompute");
}

// The edge. Swap costs 300 us; with the margin 0.25 a fresh choice swaps only when recompute costs
// more than 300 * 1.25 = 375 us, and a previous swap stays one while recompute costs at least
// 300 / 1.25 = 240 us: inside [240, 375] the last choice stays. At each edge the comparison is the
// header's: strict for a fresh choice, inclusive for a previous swap.
TEST(KvPreemption, InsideTheHysteresisBandTheLastChoiceStays) {
  const double m = 0.25;
  // 150 tokens at 2.5 us = 375 us: exactly swap_us * (1 + m).
  EXPECT_EQ(choose_kv_preemption(ten_blocks(150, 2.5), std::nullopt, m).how, KvPreemption::recompute);
  EXPECT_EQ(choose_kv_preemption(ten_blocks(150, 2.5), KvPreemption::recompute, m).how, KvPreemption::recompute);
  EXPECT_EQ(choose_kv_preemption(ten_blocks(150, 2.5), KvPreemption::swap, m).how, KvPreemption::swap);
  // Just past it, a fresh choice swaps.
  EXPECT_EQ(choose_kv_preemption(ten_blocks(151, 2.5), std::nullopt, m).how, KvPreemption::swap);
  // 96 tokens = 240 us: recompute_us * (1 + m) == swap_us, the lower edge: a swap stays (<=) ...
  EXPECT_EQ(choose_kv_preemption(ten_blocks(96, 2.5), KvPreemption::swap, m).how, KvPreemption::swap);
  // ... and below it even a previous swap turns to recompute.
  EXPECT_EQ(choose_kv_preemption(ten_blocks(95, 2.5), KvPreemption::swap, m).how, KvPreemption::recompute);
  // Without a margin, the break-even itself recomputes (fresh) and stays a swap (after a swap).
  EXPECT_EQ(choose_kv_preemption(ten_blocks(120, 2.5), std::nullopt, 0).how, KvPreemption::recompute);
  EXPECT_EQ(choose_kv_preemption(ten_blocks(120, 2.5), KvPreemption::swap, 0).how, KvPreemption::swap);
  EXPECT_EQ(choose_kv_preemption(ten_blocks(121, 2.5), std::nullopt, -1).how, KvPreemption::swap)
      << "a negative margin counts as 0";
}

TEST(KvPreemption, MissingMeasurementsNoHostRoomOrNothingToMoveRecompute) {
  auto in = ten_blocks(100'000, 2.5);  // a swap by far
  ASSERT_EQ(choose_kv_preemption(in).how, KvPreemption::swap);
  auto no_link = in;
  no_link.host_bytes_per_s = 0;
  EXPECT_EQ(choose_kv_preemption(no_link).how, KvPreemption::recompute);
  EXPECT_EQ(choose_kv_preemption(no_link).swap_us, 0);
  auto no_prefill = in;
  no_prefill.prefill_us_per_token = 0;
  EXPECT_EQ(choose_kv_preemption(no_prefill, KvPreemption::swap).how, KvPreemption::recompute);
  auto no_room = in;
  no_room.host_room = false;
  EXPECT_EQ(choose_kv_preemption(no_room, KvPreemption::swap).how, KvPreemption::recompute);
  auto empty = in;
  empty.bytes = 0;
  empty.blocks = 0;
  EXPECT_EQ(choose_kv_preemption(empty).how, KvPreemption::recompute);
  auto no_tokens = in;
  no_tokens.tokens = 0;
  EXPECT_EQ(choose_kv_preemption(no_tokens).how, KvPreemption::recompute);
}

}  // namespace kv_preemption_test
}  // namespace ember::placement
