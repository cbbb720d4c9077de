#include "gpu/device_memory_pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ember::gpu {
namespace {

constexpr uint64_t KiB = 1ull << 10, MiB = 1ull << 20, GiB = 1ull << 30;
constexpr uint64_t kPart = 128 * MiB;
constexpr uint64_t kAttention = 9449472;  // one BERT-base / GPT-2 layer's 768x3072 matrix plus bias: 9.01 MiB

#define EXPECT_CONSISTENT(pool)                                   \
  do {                                                            \
    const Status s_ = (pool).check();                             \
    ASSERT_TRUE(s_.ok()) << s_.error().message();                 \
  } while (0)

DeviceMemoryPool make_pool(uint64_t capacity, DeviceMemoryPoolConfig config = {}) {
  auto pool = DeviceMemoryPool::create(capacity, std::move(config));
  EXPECT_TRUE(pool.ok()) << pool.error().message();
  return std::move(pool).value();
}

// "m<i>" (appended rather than "m" + to_string, which trips GCC 12's -Wrestrict false positive).
std::string name(int i) {
  std::string s = "m";
  s += std::to_string(i);
  return s;
}

std::vector<uint64_t> offsets(const DeviceMemoryPool& pool, const std::vector<BlockHandle>& handles) {
  std::vector<uint64_t> out;
  for (BlockHandle h : handles) out.push_back(pool.offset_of(h).value_or(UINT64_MAX));
  return out;
}

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

std::vector<uint64_t> bert_base() {
  std::vector<uint64_t> s = {93763584, 1585152};
  for (int i = 0; i < 12; ++i) s.insert(s.end(), {9449472, 6144, 9449472, 9440256, 6144});
  s.push_back(2362368);
  return s;
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

// -- churn: thousands of swap-ins and evictions --------------------------------------------

struct ChurnFigures {
  int swap_ins = 0, evicting_swap_ins = 0;
  int layout_misses = 0;          // swap-ins that had to evict although free bytes >= their footprint
  double used_when_full = 0;      // mean used/capacity just before a swap-in had to evict
  double mean_fragmentation = 0;  // stats().fragmentation, mean over all steps
  double max_fragmentation = 0;   // its maximum over steps with at least a quarter of the pool free
  double early_fragmentation = 0, late_fragmentation = 0;  // its mean over the 2nd and 4th quarter of steps
  double whole_partitions = 0;    // share of freed bytes that came back as whole free partitions
  double internal_waste = 0;      // mean (footprint - requested) / footprint
};

// An executor's life: swap models in (evicting random residents until can_fit says yes, as the
// eviction policy would) and out, checking every invariant after every step.
template <class MakeModel>
ChurnFigures churn(DeviceMemoryPool& pool, int steps, uint64_t seed, MakeModel make_model) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> live;
  ChurnFigures f;
  double full_sum = 0, waste_sum = 0, freed = 0, freed_whole = 0;
  std::vector<double> frag(static_cast<size_t>(steps), 0.0);
  auto evict = [&](size_t victim) {
    const uint32_t before = pool.stats().free_partitions;
    const uint64_t bytes = pool.free_model(live[victim]);
    freed += double(bytes);
    freed_whole += double(pool.stats().free_partitions - before) * double(pool.config().partition_bytes);
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    return bytes;
  };
  for (int step = 0; step < steps; ++step) {
    if (live.empty() || rng() % 100 < 60) {
      const std::vector<uint64_t> sizes = make_model(rng);
      uint64_t need = 0;
      for (uint64_t b : sizes) need += pool.footprint(b);
      if (need > pool.capacity()) continue;
      const DeviceMemoryPoolStats before = pool.stats();
      uint64_t evicted = 0;
      while (!pool.can_fit(sizes)) {
        EXPECT_FALSE(live.empty());
        if (live.empty()) return f;
        evicted += evict(rng() % live.size());
      }
      ++f.swap_ins;
      if (evicted > 0) {
        ++f.evicting_swap_ins;
        f.layout_misses += before.free_bytes >= need;
        full_sum += double(before.used_bytes) / double(before.capacity_bytes);
      }
      const std::string model = name(step);
      const auto h = pool.allocate_model(model, sizes);
      EXPECT_TRUE(h.ok()) << "can_fit said yes: " << h.error().message();
      if (!h.ok()) return f;
      live.push_back(model);
    } else {
      evict(rng() % live.size());
    }
    const Status ok = pool.check();
    EXPECT_TRUE(ok.ok()) << "step " << step << ": " << ok.error().message();
    if (!ok.ok()) return f;
    const DeviceMemoryPoolStats s = pool.stats();
    frag[static_cast<size_t>(step)] = s.fragmentation;
    if (s.free_bytes * 4 >= s.capacity_bytes) f.max_fragmentation = std::max(f.max_fragmentation, s.fragmentation);
    waste_sum += s.used_bytes ? 1.0 - double(s.requested_bytes) / double(s.used_bytes) : 0.0;
  }
  auto mean = [&](int from, int to) { return std::accumulate(&frag[from], &frag[to], 0.0) / (to - from); };
  f.mean_fragmentation = mean(0, steps);
  f.early_fragmentation = mean(steps / 4, steps / 2);
  f.late_fragmentation = mean(3 * steps / 4, steps);
  f.internal_waste = waste_sum / steps;
  f.whole_partitions = freed > 0 ? freed_whole / freed : 0;
  f.used_when_full = f.evicting_swap_ins ? full_sum / f.evicting_swap_ins : 0;
  std::printf(
      "  swap-ins %d, %d evicting (%d with enough free bytes); used when full %.3f; fragmentation mean %.3f "
      "(2nd quarter %.3f, 4th %.3f), max %.3f with >= 1/4 free; freed as whole partitions %.3f; "
      "internal waste %.4f\n",
      f.swap_ins, f.evicting_swap_ins, f.layout_misses, f.used_when_full, f.mean_fragmentation, f.early_fragmentation,
      f.late_fragmentation, f.max_fragmentation, f.whole_partitions, f.internal_waste);
  return f;
}

TEST(DeviceMemoryPool, RandomSizesChurnStaysConsistentAndUnfragmented) {
  DeviceMemoryPool pool = make_pool(4 * GiB);
  // 1-40 blocks per model, log-uniform: 70% in [256 B, 4 MiB), 25% in [4, 64 MiB), 5% in [64, 300 MiB).
  auto make_model = [](std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<uint64_t> sizes(1 + rng() % 40);
    for (uint64_t& b : sizes) {
      const double r = u(rng);
      const double lo = r < 0.70 ? 256.0 : r < 0.95 ? 4.0 * MiB : 64.0 * MiB;
      const double hi = r < 0.70 ? 4.0 * MiB : r < 0.95 ? 64.0 * MiB : 300.0 * MiB;
      b = static_cast<uint64_t>(lo * std::pow(hi / lo, u(rng)));
    }
    return sizes;
  };
  const ChurnFigures f = churn(pool, 4000, 7, make_model);
  // Measured (seed 7): used when full 0.853, fragmentation mean 0.604 (2nd quarter 0.605, 4th
  // 0.598), whole partitions 0.816, internal waste 0.003. The bounds leave room for tuning, not for
  // a regression: fragmentation must not build up over the run (no consolidation needed), and the
  // pool must run at least 82% full before it has to evict.
  EXPECT_GT(f.evicting_swap_ins, 200);
  EXPECT_GT(f.used_when_full, 0.82);
  EXPECT_LT(f.mean_fragmentation, 0.70);
  EXPECT_LT(f.late_fragmentation, f.early_fragmentation + 0.05);
  EXPECT_GT(f.whole_partitions, 0.75);
  EXPECT_LT(f.internal_waste, 0.01);
}

// The reference architectures' weights, cut by the executor's rule: consecutive layers up to the
// 2 MiB swap group, a layer above 2 MiB alone (bytes from `ember model new`; gpt2 stores its tied
// lm_head again, 147 MiB, like the embedding).
std::vector<uint64_t> reference_model(uint64_t which) {
  switch (which % 6) {
    case 0: return {3215360, 4198400, 41000};  // mlp
    case 1: {                                  // resnet50
      return {1908480, 1923072, 1988608, 528384,  2359296, 1069056, 2097152, 1069056, 2359296, 1069056, 1052672,
              2359296, 1069056, 1052672, 2359296, 1069056, 1052672, 2359296, 1069056, 1052672, 2359296, 1069056,
              2097152, 8192,    9437184, 8192,    4194304, 32768,   8388608, 32768,   4194304, 8192,    9437184,
              8192,    4194304, 32768,   4194304, 8192,    9437184, 8192,    4194304, 32768,   8196000};
    }
    case 2: return bert_base();
    case 3: {  // gpt2
      std::vector<uint64_t> s = {154389504, 3145728, 6144};
      for (int i = 0; i < 12; ++i) s.insert(s.end(), {9449472, 6144, 9449472, 9440256, 6144});
      s.push_back(154389504);
      return s;
    }
    case 4: return {1378560, 2097152, 1134592, 1081344, 8388608, 114728};  // resnet50-tiny
    default: return {319232};                                              // bert-base-tiny
  }
}

TEST(DeviceMemoryPool, ReferenceModelChurnStaysConsistentAndUnfragmented) {
  DeviceMemoryPool pool = make_pool(8 * GiB);
  const ChurnFigures f = churn(pool, 3000, 11, [](std::mt19937_64& rng) { return reference_model(rng()); });
  // Measured (seed 11): used when full 0.913, fragmentation mean 0.711 (2nd quarter 0.764, 4th
  // 0.750), whole partitions 0.669, internal waste 0.0075. GPT-2's two 147 MiB tensors need runs
  // across partitions and cause most of the evictions made while enough bytes were free.
  EXPECT_GT(f.evicting_swap_ins, 100);
  EXPECT_GT(f.used_when_full, 0.88);
  EXPECT_LT(f.mean_fragmentation, 0.80);
  EXPECT_LT(f.late_fragmentation, f.early_fragmentation + 0.05);
  EXPECT_GT(f.whole_partitions, 0.60);
  EXPECT_LT(f.internal_waste, 0.01);
}

}  // namespace
}  // namespace ember::gpu
