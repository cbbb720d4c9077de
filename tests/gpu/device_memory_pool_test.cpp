#include "gpu/device_memory_pool.hpp"
#include "tests/gpu/device_memory_pool_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ember::gpu {
namespace device_memory_pool_test {


using namespace pool_testing;

TEST(DeviceMemoryPool, RejectsBadConfigs) {
  DeviceMemoryPoolConfig c;
  c.min_block_bytes = 96 * KiB;
  EXPECT_FALSE(DeviceMemoryPool::create(GiB, c).ok());
  c = {};
  c.partition_bytes = 96 * MiB;
  EXPECT_FALSE(DeviceMemoryPool::create(GiB, c).ok());
  c = {};
  c.class_bytes = {100 * MiB};  // more than half a partition
  EXPECT_FALSE(DeviceMemoryPool::create(GiB, c).ok());
  c.class_bytes = {2 * MiB, 2 * MiB};
  EXPECT_FALSE(DeviceMemoryPool::create(GiB, c).ok());
  const auto small = DeviceMemoryPool::create(100 * MiB);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().code(), ErrorCode::invalid_argument);
}

TEST(DeviceMemoryPool, ManagesWholePartitionsOnly) {
  DeviceMemoryPool pool = make_pool(GiB + 100 * MiB);
  EXPECT_EQ(pool.capacity(), GiB);
  const DeviceMemoryPoolStats s = pool.stats();
  EXPECT_EQ(s.partitions, 8u);
  EXPECT_EQ(s.free_partitions, 8u);
  EXPECT_EQ(s.free_bytes, GiB);
  EXPECT_EQ(s.largest_free_block, GiB);
  EXPECT_EQ(s.fragmentation, 0.0);
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, ClassSizesUseRegularSlots) {
  DeviceMemoryPool pool = make_pool(GiB);
  // 65 swap groups of 1.8-2 MiB: 64 slots fill one regular partition, the 65th opens another.
  std::vector<uint64_t> groups(65, 2 * MiB);
  groups[3] = 1900 * KiB;
  auto handles = pool.allocate_model("cnn", groups);
  ASSERT_TRUE(handles.ok()) << handles.error().message();
  for (BlockHandle h : *handles) {
    const auto info = pool.block(h).value();
    EXPECT_EQ(info.tier, PartitionKind::regular);
    EXPECT_EQ(info.footprint_bytes, 2 * MiB);
    EXPECT_EQ(info.offset % (2 * MiB), 0u);
  }
  const auto parts = pool.partitions();
  EXPECT_EQ(pool.stats().regular_partitions, 2u);
  EXPECT_EQ(std::count_if(parts.begin(), parts.end(), [](const PartitionInfo& p) { return p.blocks == 64; }), 1);
  // Below 7/8 of the class the slot would waste too much: buddy units instead (1700 KiB -> 27 units, 1728 KiB).
  auto odd = pool.allocate_model("cnn", {1700 * KiB, 200 * KiB});
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(pool.block((*odd)[0])->tier, PartitionKind::irregular);
  EXPECT_EQ(pool.block((*odd)[0])->footprint_bytes, 1728 * KiB);
  EXPECT_EQ(pool.block((*odd)[1])->footprint_bytes, 256 * KiB);
  EXPECT_EQ(pool.footprint(2 * MiB - 1), 2 * MiB);
  EXPECT_EQ(pool.footprint(kAttention), 145 * 64 * KiB);
  EXPECT_CONSISTENT(pool);
  pool.free_model("cnn");
  EXPECT_EQ(pool.stats().free_partitions, 8u);
}

TEST(DeviceMemoryPool, TorporsTwentyMegabyteClassStrandsTheRemainder) {
  DeviceMemoryPoolConfig c;
  c.class_bytes = {2 * MiB, 20 * MiB};
  DeviceMemoryPool pool = make_pool(GiB, c);
  auto h = pool.allocate_model("m", {20 * MiB, 19 * MiB, 2 * MiB});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(pool.block((*h)[1])->footprint_bytes, 20 * MiB);
  EXPECT_EQ(pool.block((*h)[1])->partition, pool.block((*h)[0])->partition);
  const DeviceMemoryPoolStats s = pool.stats();
  EXPECT_EQ(s.stranded_bytes, 8 * MiB);  // 128 MiB holds six 20 MiB slots
  EXPECT_EQ(s.used_bytes + s.free_bytes + s.stranded_bytes, s.capacity_bytes);
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, BuddyBlocksSplitAndCoalesce) {
  BuddyPartition b(2048);
  EXPECT_EQ(*b.allocate(145), 0u);  // 9.01 MiB: keeps [0, 145), frees 1+2+4+8+32+64+256+512+1024 units
  EXPECT_EQ(b.check(), "");
  EXPECT_EQ(b.free_units(), 2048u - 145);
  std::vector<uint32_t> sizes;
  b.for_each_free([&](uint32_t, uint32_t units) { sizes.push_back(units); });
  EXPECT_EQ(sizes, (std::vector<uint32_t>{1, 2, 4, 8, 32, 64, 256, 512, 1024}));
  EXPECT_EQ(*b.allocate(145), 145u);  // carved across adjacent blocks, back to back
  EXPECT_EQ(b.check(), "");
  b.free(0, 145);
  b.free(145, 145);
  EXPECT_EQ(b.check(), "");
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.largest_free(), 2048u);

  // Through the pool, in one partition: three models share it; their blocks coalesce as they go.
  DeviceMemoryPool pool = make_pool(kPart);
  ASSERT_TRUE(pool.allocate_model("a", {64 * KiB}).ok());
  ASSERT_TRUE(pool.allocate_model("b", {64 * KiB}).ok());
  auto c = pool.allocate_model("c", {128 * KiB});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(pool.offset_of((*c)[0]), 128 * KiB);
  EXPECT_EQ(pool.partitions()[0].models, 3u);
  pool.free_model("a");
  EXPECT_EQ(pool.stats().largest_free_block, kPart - 256 * KiB);
  pool.free_model("c");
  EXPECT_CONSISTENT(pool);
  EXPECT_EQ(pool.stats().largest_free_block, kPart - 128 * KiB);
  EXPECT_EQ(pool.stats().free_partitions, 0u);
  pool.free_model("b");
  EXPECT_CONSISTENT(pool);
  EXPECT_EQ(pool.stats().free_partitions, 1u);
  // The trimmed tail of an odd block is reusable: 9.01 MiB plus its exact complement fill it.
  ASSERT_TRUE(pool.allocate_model("d", {kAttention}).ok());
  ASSERT_TRUE(pool.allocate_model("e", {kPart - 145 * 64 * KiB}).ok());
  EXPECT_EQ(pool.stats().free_bytes, 0u);
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, OddSizesPackBackToBack) {
  DeviceMemoryPool pool = make_pool(GiB);
  auto h = pool.allocate_model("bert", std::vector<uint64_t>(15, kAttention));
  ASSERT_TRUE(h.ok());
  for (size_t i = 0; i < 14; ++i) EXPECT_EQ(pool.block((*h)[i])->partition, pool.block((*h)[0])->partition);
  EXPECT_NE(pool.block((*h)[14])->partition, pool.block((*h)[0])->partition);  // 15 x 9.06 MiB > 128 MiB
  EXPECT_EQ(pool.stats().irregular_partitions, 2u);
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, BlocksLargerThanAPartitionTakeARun) {
  DeviceMemoryPool pool = make_pool(GiB);
  auto h = pool.allocate_model("gpt2", {300 * MiB, kAttention, kAttention});
  ASSERT_TRUE(h.ok()) << h.error().message();
  const BlockInfo big = *pool.block((*h)[0]);
  EXPECT_EQ(big.tier, PartitionKind::large);
  EXPECT_EQ(big.partitions, 3u);
  EXPECT_EQ(big.offset, 0u);
  EXPECT_EQ(big.footprint_bytes, 300 * MiB);
  // The run's last partition holds the block's 44 MiB tail, and the model's other blocks after it.
  EXPECT_EQ(pool.offset_of((*h)[1]), 2 * kPart + 44 * MiB);
  EXPECT_EQ(pool.offset_of((*h)[2]), 2 * kPart + 44 * MiB + pool.footprint(kAttention));
  const auto parts = pool.partitions();
  EXPECT_EQ(parts[0].kind, PartitionKind::large);
  EXPECT_EQ(parts[1].kind, PartitionKind::large);
  EXPECT_EQ(parts[2].kind, PartitionKind::irregular);
  EXPECT_EQ(parts[2].blocks, 3u);
  // The free end of partition 2 and the five free partitions after it form one run.
  EXPECT_EQ(pool.stats().largest_free_block, 8 * kPart - 300 * MiB - 2 * pool.footprint(kAttention));
  EXPECT_CONSISTENT(pool);
  EXPECT_EQ(pool.free_model("gpt2"), 300 * MiB + 2 * pool.footprint(kAttention));
  EXPECT_EQ(pool.stats().free_partitions, 8u);
  EXPECT_CONSISTENT(pool);

  // More than the region, or than any run of free partitions, does not fit however much is free.
  EXPECT_EQ(pool.allocate_model("huge", {GiB + 1}).error().code(), ErrorCode::out_of_memory);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(pool.allocate_model(name(i), {100 * MiB}).ok());
  for (int i = 0; i < 8; i += 2) pool.free_model(name(i));  // every other partition
  EXPECT_EQ(pool.stats().free_bytes, 4 * kPart + 4 * 28 * MiB);
  EXPECT_EQ(pool.stats().largest_free_block, kPart + 28 * MiB);  // a free partition and the free end before it
  EXPECT_FALSE(pool.can_fit({200 * MiB}));
  EXPECT_TRUE(pool.can_fit({kPart, kPart, kPart, kPart}));
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, FullDeviceFailsClearlyAndChangesNothing) {
  DeviceMemoryPool pool = make_pool(GiB);
  std::vector<std::vector<BlockHandle>> handles;
  for (int i = 0; i < 8; ++i) {
    auto h = pool.allocate_model(name(i), {100 * MiB, 20 * MiB, 5 * MiB});
    ASSERT_TRUE(h.ok());
    handles.push_back(*h);
  }
  const auto parts = pool.partitions();
  const DeviceMemoryPoolStats before = pool.stats();
  EXPECT_EQ(before.free_bytes, 8 * 3 * MiB);
  const auto failed = pool.allocate_model("late", {10 * MiB, 10 * MiB, 10 * MiB});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code(), ErrorCode::out_of_memory);
  const std::string& msg = failed.error().message();
  EXPECT_NE(msg.find("model 'late' asked for 3 blocks, 30"), std::string::npos) << msg;
  EXPECT_NE(msg.find("24.0 MiB free of 1.00 GiB, largest free block 3.00 MiB"), std::string::npos) << msg;
  EXPECT_EQ(pool.partitions(), parts);
  EXPECT_EQ(pool.stats().used_bytes, before.used_bytes);
  EXPECT_EQ(pool.stats().blocks, before.blocks);
  EXPECT_EQ(pool.stats().models, 8u);
  EXPECT_EQ(pool.model_bytes("late"), 0u);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(offsets(pool, handles[i]), (std::vector<uint64_t>{(7 - i) * kPart, (7 - i) * kPart + 100 * MiB,
                                                                (7 - i) * kPart + 120 * MiB}));
  EXPECT_TRUE(pool.allocate_model("late", {3 * MiB, 3 * MiB}).ok());  // what is left still serves
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, AllOrNothingAndCanFitLeaveNoTrace) {
  DeviceMemoryPool pool = make_pool(2 * kPart);
  ASSERT_TRUE(pool.allocate_model("a", {100 * MiB}).ok());
  const auto parts = pool.partitions();
  // 120 MiB would fit in the free partition, 100 MiB then nowhere: neither is kept.
  EXPECT_FALSE(pool.can_fit({120 * MiB, 100 * MiB}));
  EXPECT_FALSE(pool.allocate_model("b", {120 * MiB, 100 * MiB}).ok());
  EXPECT_EQ(pool.partitions(), parts);
  EXPECT_EQ(pool.model_bytes("b"), 0u);
  EXPECT_TRUE(pool.can_fit({120 * MiB, 2 * MiB, 20 * MiB}));
  EXPECT_EQ(pool.partitions(), parts);
  EXPECT_EQ(pool.stats().blocks, 1u);
  EXPECT_CONSISTENT(pool);
  pool.free_model("a");
  EXPECT_TRUE(pool.can_fit({120 * MiB, 100 * MiB}));
  EXPECT_TRUE(pool.allocate_model("b", {120 * MiB, 100 * MiB}).ok());
  EXPECT_TRUE(pool.allocate_model("empty", {}).ok());
  EXPECT_EQ(pool.stats().models, 1u);
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, FreeingAPackedModelFreesWholePartitions) {
  DeviceMemoryPool pool = make_pool(2 * GiB);
  uint64_t footprints = 0;
  for (uint64_t bytes : bert_base()) footprints += pool.footprint(bytes);
  // Alone, BERT-base's 417 MiB pack into 4 partitions, and freeing it frees all of them.
  ASSERT_TRUE(pool.allocate_model("a", bert_base()).ok());
  EXPECT_EQ(pool.stats().free_partitions, 16u - 4);
  EXPECT_EQ(pool.model_bytes("a"), footprints);
  EXPECT_EQ(pool.free_model("a"), footprints);
  EXPECT_EQ(pool.stats().free_partitions, 16u);
  // Three of them: each opens partitions of its own while a partition's worth remains, then puts
  // its last blocks in room the others left.
  std::vector<std::vector<BlockHandle>> h;
  for (const char* m : {"a", "b", "c"}) h.push_back(pool.allocate_model(m, bert_base()).value());
  EXPECT_CONSISTENT(pool);
  EXPECT_EQ(pool.stats().free_partitions, 16u - 10);  // 3 x 417 MiB in 10 partitions of 128 MiB
  std::vector<uint32_t> touched, own;
  for (BlockHandle x : h[1]) touched.push_back(pool.block(x)->partition);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (uint32_t p : touched)
    if (pool.partitions()[p].models == 1) own.push_back(p);
  EXPECT_GE(own.size(), 3u);
  const auto others = offsets(pool, h[0]);
  EXPECT_EQ(pool.free_model("b"), footprints);
  EXPECT_EQ(pool.stats().free_partitions, 6 + own.size());
  for (uint32_t p : touched)
    EXPECT_EQ(pool.partitions()[p].kind == PartitionKind::free, std::count(own.begin(), own.end(), p) == 1);
  EXPECT_EQ(offsets(pool, h[0]), others);
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, PartitionSharedByTwoModelsStaysUntilBothAreFreed) {
  DeviceMemoryPool pool = make_pool(2 * kPart);
  ASSERT_TRUE(pool.allocate_model("a", {100 * MiB}).ok());  // partition 1
  ASSERT_TRUE(pool.allocate_model("b", {100 * MiB}).ok());  // partition 0
  auto c = pool.allocate_model("c", {20 * MiB});           // no free partition left: shares with b
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(pool.offset_of((*c)[0]), 100 * MiB);
  EXPECT_EQ(pool.partitions()[0].models, 2u);
  pool.free_model("b");
  EXPECT_EQ(pool.partitions()[0].kind, PartitionKind::irregular);
  EXPECT_EQ(pool.stats().free_partitions, 0u);
  EXPECT_EQ(pool.offset_of((*c)[0]), 100 * MiB);
  EXPECT_CONSISTENT(pool);
  pool.free_model("c");
  EXPECT_EQ(pool.partitions()[0].kind, PartitionKind::free);
  EXPECT_EQ(pool.stats().free_partitions, 1u);
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, BigModelsOpenPartitionsSmallOnesShare) {
  DeviceMemoryPool pool = make_pool(4 * kPart);
  // A partition's worth or more: the first block opens an empty partition; 100 MiB remain, so the
  // second looks for room first and, finding none, opens another.
  const auto a = pool.allocate_model("a", {100 * MiB, 100 * MiB}).value();
  const uint32_t pa0 = pool.block(a[0])->partition, pa1 = pool.block(a[1])->partition;
  EXPECT_NE(pa0, pa1);
  EXPECT_EQ(pool.stats().free_partitions, 2u);
  // Small models take room in used partitions before opening an empty one.
  const auto b = pool.allocate_model("b", {20 * MiB}).value();
  EXPECT_EQ(pool.stats().free_partitions, 2u);
  const uint32_t pb = pool.block(b[0])->partition;
  EXPECT_TRUE(pb == pa0 || pb == pa1);
  // A model's own partitions come first: a's new block goes to the one of its partitions it fits
  // best (8 MiB left next to b), not to the other with 28 MiB.
  const auto a2 = pool.allocate_model("a", {8 * MiB}).value();
  EXPECT_EQ(pool.block(a2[0])->partition, pb);
  EXPECT_EQ(pool.offset_of(a2[0]), pb * kPart + 120 * MiB);
  EXPECT_EQ(pool.model_bytes("a"), 208 * MiB);
  // Regular partitions alike: a's first 2 MiB group opens one (nothing else has slots), the next
  // swap group of another small model shares it.
  const auto a3 = pool.allocate_model("a", {2 * MiB}).value();
  const auto c = pool.allocate_model("c", {2 * MiB}).value();
  EXPECT_EQ(pool.block(c[0])->partition, pool.block(a3[0])->partition);
  EXPECT_EQ(pool.block(c[0])->tier, PartitionKind::regular);
  EXPECT_EQ(pool.stats().free_partitions, 1u);
  EXPECT_CONSISTENT(pool);
}

TEST(DeviceMemoryPool, HandlesStayValidUntilTheirModelIsFreed) {
  DeviceMemoryPool pool = make_pool(GiB);
  const std::vector<uint64_t> sizes = {kAttention, 6144, 2 * MiB, 200 * MiB};
  const auto a = pool.allocate_model("a", sizes).value();
  const auto where = offsets(pool, a);
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(pool.allocate_model("b", {50 * MiB, static_cast<uint64_t>(round) * MiB + 1}).ok());
    if (round % 3 == 0) {
      ASSERT_TRUE(pool.allocate_model("c", {kAttention}).ok());
    }
    EXPECT_EQ(offsets(pool, a), where);
    pool.free_model("b");
    if (round % 3 == 2) pool.free_model("c");
  }
  EXPECT_EQ(pool.block(a[1])->model, "a");
  EXPECT_EQ(pool.block(a[1])->bytes, 6144u);
  pool.free_model("a");
  for (BlockHandle h : a) EXPECT_FALSE(pool.offset_of(h).has_value());
  EXPECT_FALSE(pool.offset_of(BlockHandle{}).has_value());
  const auto again = pool.allocate_model("a", sizes).value();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NE(again[i], a[i]);  // ids are never reused
  EXPECT_FALSE(pool.offset_of(a[0]).has_value());
  EXPECT_EQ(pool.free_model("nobody"), 0u);
  EXPECT_CONSISTENT(pool);
}

}  // namespace device_memory_pool_test
}  // namespace ember::gpu
