#include "gpu/arena_allocator.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ember::gpu {
namespace arena_allocator_test {

TEST(ArenaAllocator, AlignsAndFillsInOrder) {
  ArenaAllocator a(4096, 256);
  EXPECT_EQ(*a.allocate(1), 0u);
  EXPECT_EQ(*a.allocate(257), 256u);
  EXPECT_EQ(a.block_size(256), 512u);
  EXPECT_EQ(*a.allocate(0), 768u);
  EXPECT_EQ(a.used(), 1024u);
}

TEST(ArenaAllocator, FullDeviceRefusesAndRecovers) {
  ArenaAllocator a(1024, 256);
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(*a.allocate(256));
  EXPECT_FALSE(a.allocate(1).has_value());
  EXPECT_FALSE(a.allocate(1ull << 40).has_value());
  EXPECT_EQ(a.largest_free_block(), 0u);
  EXPECT_TRUE(a.free(blocks[2]));
  EXPECT_EQ(*a.allocate(200), blocks[2]);
}

TEST(ArenaAllocator, CoalescesNeighboursSoFragmentationIsUndone) {
  ArenaAllocator a(8 * 256, 256);
  std::vector<uint64_t> b;
  for (int i = 0; i < 8; ++i) b.push_back(*a.allocate(256));
  // Free every other block: 4 holes of 256, no room for 512.
  for (int i = 0; i < 8; i += 2) EXPECT_TRUE(a.free(b[static_cast<size_t>(i)]));
  EXPECT_EQ(a.free_blocks(), 4u);
  EXPECT_FALSE(a.allocate(512).has_value());
  // Free the rest in a scrambled order: one free block again.
  for (int i : {5, 1, 7, 3}) EXPECT_TRUE(a.free(b[static_cast<size_t>(i)]));
  EXPECT_EQ(a.free_blocks(), 1u);
  EXPECT_EQ(a.largest_free_block(), 8u * 256);
  EXPECT_EQ(a.used(), 0u);
}

TEST(ArenaAllocator, RejectsUnknownAndDoubleFrees) {
  ArenaAllocator a(4096);
  const uint64_t x = *a.allocate(100);
  EXPECT_FALSE(a.free(x + 256));
  EXPECT_TRUE(a.free(x));
  EXPECT_FALSE(a.free(x));
  EXPECT_EQ(a.used(), 0u);
}

TEST(ArenaAllocator, RandomWorkloadKeepsTheTiling) {
  const uint64_t capacity = 1 << 20;
  ArenaAllocator a(capacity, 256);
  std::mt19937_64 rng(301);
  std::vector<std::pair<uint64_t, uint64_t>> live;  // offset, size
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3) {
      const uint64_t want = 1 + rng() % 20000;
      auto off = a.allocate(want);
      if (!off) {
        EXPECT_LT(a.largest_free_block(), want);
        continue;
      }
      EXPECT_EQ(*off % 256, 0u);
      for (const auto& [o, s] : live) EXPECT_TRUE(*off + want <= o || o + s <= *off) << "overlap";
      live.push_back({*off, a.block_size(*off)});
    } else {
      const size_t i = rng() % live.size();
      EXPECT_TRUE(a.free(live[i].first));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    uint64_t used = 0;
    for (const auto& [o, s] : live) used += s;
    ASSERT_EQ(a.used(), used);
  }
  for (const auto& [o, s] : live) a.free(o);
  EXPECT_EQ(a.free_blocks(), 1u);
  EXPECT_EQ(a.largest_free_block(), capacity);
}

}  // namespace arena_allocator_test
}  // namespace ember::gpu
