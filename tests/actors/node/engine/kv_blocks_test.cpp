// KvBlocks (actors/node/engine/kv_blocks.hpp) on a SimDevice: the block's layout and bytes; blocks
// that follow a sequence's tokens, carved from the pool in chunks and given back; the bound, a full
// pool and a refused chunk (an Error, nothing half done); swaps to host memory and back into other
// blocks with the bytes intact, through the pinned staging region or not; the host bound; the
// lifecycle's illegal moves; a host copy exported by one cache and imported by another of the
// same layout on another device (a parked generation resumed there).
#include "actors/node/engine/kv_blocks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "tests/gpu/test_util.hpp"

namespace ember::engine {
namespace kv_blocks_test {

constexpr uint64_t KiB = 1ull << 10;
constexpr uint64_t MiB = 1ull << 20;

// 2 layers, 4 heads of 64, 16 tokens a block, float32: rows of 1 KiB, blocks of 64 KiB (the pool's
// unit, so a chunk's footprint is exactly its bytes).
KvLayout layout() {
  KvLayout l;
  l.num_kv_layers = 2;
  l.num_kv_heads = 4;
  l.head_dim = 64;
  l.block_size = 16;
  return l;
}

// A 16 MiB SimDevice whose engine memory has 8 MiB of pool in 1 MiB partitions.
struct Rig {
  explicit Rig(uint64_t staging_bytes = 0) {
    device = gpu::testing::sim_device(16 * MiB);
    auto m = DeviceMemory::reserve(*device, 8 * MiB, 256 * KiB, staging_bytes);
    EXPECT_TRUE(m.ok()) << m.error().message();
    memory = std::move(*m);
    stream = device->create_stream();
  }
  std::unique_ptr<KvBlocks> kv(KvBlocksConfig config = {}, KvLayout l = layout()) {
    auto k = KvBlocks::create(*device, *memory, l, std::move(config));
    EXPECT_TRUE(k.ok()) << k.error().message();
    return k.ok() ? std::move(*k) : nullptr;
  }
  uint64_t pool_free() const { return memory->totals().pool_free; }
  // Fills each block of `table` with bytes derived from `seed` and the block's index.
  void fill(const std::vector<gpu::DevicePtr>& table, uint64_t bytes, uint8_t seed) {
    std::vector<std::vector<uint8_t>> data;
    for (size_t b = 0; b < table.size(); ++b) {
      data.push_back(pattern(bytes, seed, b));
      stream->copy_to_device(table[b], data.back().data(), bytes);
    }
    ASSERT_TRUE(stream->synchronize().ok());
  }
  bool holds(const std::vector<gpu::DevicePtr>& table, uint64_t bytes, uint8_t seed) {
    for (size_t b = 0; b < table.size(); ++b) {
      std::vector<uint8_t> got(bytes);
      stream->copy_to_host(got.data(), table[b], bytes);
      EXPECT_TRUE(stream->synchronize().ok());
      if (got != pattern(bytes, seed, b)) return false;
    }
    return true;
  }
  static std::vector<uint8_t> pattern(uint64_t bytes, uint8_t seed, size_t block) {
    std::vector<uint8_t> v(bytes);
    for (uint64_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(seed * 31 + block * 7 + i * 13 + (i >> 8));
    return v;
  }

  std::unique_ptr<gpu::SimDevice> device;
  std::unique_ptr<DeviceMemory> memory;
  std::unique_ptr<gpu::Stream> stream;
};

TEST(KvBlocks, ABlocksBytesAndOffsetsAreTheContracts) {
  KvLayout l = layout();
  ASSERT_TRUE(l.validate().ok());
  EXPECT_EQ(l.row_bytes(), 4u * 64 * 4);
  EXPECT_EQ(l.block_bytes(), 2u * 2 * 16 * 4 * 64 * 4);  // num_kv_layers * 2 * block_size * Hkv * D * elem
  EXPECT_EQ(l.k_offset(0), 0u);
  EXPECT_EQ(l.v_offset(0), 16u * KiB);
  EXPECT_EQ(l.k_offset(1), 32u * KiB);
  EXPECT_EQ(l.v_offset(1), 48u * KiB);
  l.dtype = gpu::DType::bf16;
  EXPECT_EQ(l.block_bytes(), 32u * KiB);
  l.dtype = gpu::DType::f16;
  EXPECT_EQ(l.v_offset(1), 24u * KiB);

  auto refused = [](KvLayout bad, const std::string& what) {
    Status st = bad.validate();
    ASSERT_FALSE(st.ok()) << what;
    EXPECT_EQ(st.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(st.error().message().find(what), std::string::npos) << st.error().message();
  };
  KvLayout zero = layout();
  zero.head_dim = 0;
  refused(zero, "above 0");
  KvLayout ints = layout();
  ints.dtype = gpu::DType::i64;
  refused(ints, "float32, float16 or bfloat16");
  KvLayout huge = layout();
  huge.block_size = 1u << 20;
  refused(huge, "over 1 GiB");

  Rig rig;
  KvBlocksConfig nameless;
  nameless.name = "";
  EXPECT_EQ(KvBlocks::create(*rig.device, *rig.memory, layout(), nameless).error().code(), ErrorCode::invalid_argument);
  KvBlocksConfig fraction;
  fraction.pool_fraction = 1.5;
  EXPECT_EQ(KvBlocks::create(*rig.device, *rig.memory, layout(), fraction).error().code(), ErrorCode::invalid_argument);
  KvBlocksConfig tiny;
  tiny.budget_bytes = 32 * KiB;  // half a block
  auto none = KvBlocks::create(*rig.device, *rig.memory, layout(), tiny);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("holds no block"), std::string::npos) << none.error().message();
}

// A sequence's blocks cover its tokens and no more; they come in chunks of the pool (4 blocks each
// here) and go back when the sequence ends, but for one spare chunk that trim() returns too.
TEST(KvBlocks, BlocksFollowTheTokensInChunksCarvedFromThePool) {
  Rig rig;
  const uint64_t before = rig.pool_free();
  KvBlocksConfig config;
  config.chunk_blocks = 4;
  auto kv = rig.kv(config);
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->capacity_blocks(), 4 * MiB / (64 * KiB)) << "half the pool by default";
  EXPECT_EQ(kv->stats().chunks, 0u) << "nothing carved before a sequence asks";
  EXPECT_EQ(rig.pool_free(), before);

  ASSERT_TRUE(kv->grow(1, 1).ok());
  EXPECT_EQ(kv->blocks_of(1), 1u);
  EXPECT_EQ(rig.pool_free(), before - 4 * 64 * KiB) << "one chunk of 4 blocks, its free bytes committed";
  ASSERT_TRUE(kv->grow(1, 16).ok());
  EXPECT_EQ(kv->blocks_of(1), 1u) << "16 tokens fit one block";
  ASSERT_TRUE(kv->grow(1, 17).ok());
  EXPECT_EQ(kv->blocks_of(1), 2u);
  ASSERT_TRUE(kv->grow(1, 5).ok());
  EXPECT_EQ(kv->blocks_of(1), 2u) << "blocks are never taken away by a grow";
  ASSERT_TRUE(kv->grow(1, 16 * 5).ok());
  ASSERT_TRUE(kv->grow(2, 16 * 2).ok());
  EXPECT_EQ(kv->blocks_of(1), 5u);
  EXPECT_EQ(kv->state(1), KvBlocks::State::resident);

  // Every block its own 64 KiB of device memory; a table in position order.
  std::vector<gpu::DevicePtr> all = kv->table(1);
  ASSERT_EQ(all.size(), 5u);
  for (auto p : kv->table(2)) all.push_back(p);
  std::vector<uint64_t> addrs;
  for (auto p : all) addrs.push_back(p.addr);
  std::sort(addrs.begin(), addrs.end());
  for (size_t i = 1; i < addrs.size(); ++i) EXPECT_GE(addrs[i] - addrs[i - 1], kv->block_bytes()) << "blocks overlap";
  EXPECT_EQ(kv->table(1)[1].addr, kv->table(1)[0].addr + 64 * KiB) << "a chunk's blocks are back to back";

  auto s = kv->stats();
  EXPECT_EQ(s.in_use, 7u);
  EXPECT_EQ(s.chunks, 2u);
  EXPECT_EQ(s.free, 1u);
  EXPECT_EQ(s.high_water, 7u);
  EXPECT_EQ(s.sequences, 2u);
  EXPECT_EQ(s.device_bytes, 8 * 64 * KiB);
  EXPECT_EQ(kv->blocks_in_use(), 7u);

  kv->release(1);
  EXPECT_EQ(kv->state(1), KvBlocks::State::unknown);
  EXPECT_TRUE(kv->table(1).empty());
  s = kv->stats();
  EXPECT_EQ(s.in_use, 2u);
  EXPECT_EQ(s.high_water, 7u);
  kv->release(2);
  s = kv->stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.chunks, 1u) << "one wholly free chunk kept as a spare";
  EXPECT_EQ(rig.pool_free(), before - 4 * 64 * KiB);
  EXPECT_EQ(kv->trim(), 1u);
  EXPECT_EQ(kv->stats().chunks, 0u);
  EXPECT_EQ(rig.pool_free(), before);
  kv->release(99);  // unknown: nothing
}

// Blocks come from the fullest chunk first, so that ended sequences free whole chunks.
TEST(KvBlocks, BlocksPackIntoTheFullestChunk) {
  Rig rig;
  KvBlocksConfig config;
  config.chunk_blocks = 4;
  config.spare_chunks = 0;
  auto kv = rig.kv(config);
  ASSERT_TRUE(kv->grow(1, 16 * 3).ok());  // chunk A: 3 of 4
  ASSERT_TRUE(kv->grow(2, 16 * 3).ok());  // A's last, then chunk B: 2 of 4
  ASSERT_EQ(kv->stats().chunks, 2u);
  kv->release(1);                          // A: 1 used; B: 2 used
  ASSERT_TRUE(kv->grow(3, 16).ok());       // from B, the fuller one
  kv->release(2);                          // A empties (back to the pool: no spares); B holds 3's block
  EXPECT_EQ(kv->stats().chunks, 1u);
  EXPECT_EQ(kv->stats().in_use, 1u);
}

// The bound: a grow past it fails whole, out of memory, and changes nothing.
TEST(KvBlocks, AGrowPastTheBoundIsRefusedWholeAndChangesNothing) {
  Rig rig;
  KvBlocksConfig config;
  config.chunk_blocks = 4;
  config.budget_bytes = 6 * 64 * KiB + 100;  // 6 blocks
  auto kv = rig.kv(config);
  ASSERT_EQ(kv->capacity_blocks(), 6u);
  ASSERT_TRUE(kv->grow(1, 16 * 4).ok());
  Status st = kv->grow(2, 16 * 3);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::out_of_memory);
  EXPECT_NE(st.error().message().find("at its bound"), std::string::npos) << st.error().message();
  EXPECT_EQ(kv->state(2), KvBlocks::State::unknown) << "a refused first grow makes no sequence";
  EXPECT_EQ(kv->stats().in_use, 4u);
  st = kv->grow(1, 16 * 7);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(kv->blocks_of(1), 4u) << "all or nothing";
  ASSERT_TRUE(kv->grow(2, 16 * 2).ok());
  EXPECT_EQ(kv->stats().chunks, 2u) << "the second chunk was carved at 2 blocks, the bound's rest";
  EXPECT_EQ(kv->stats().free, 0u);
  EXPECT_EQ(kv->stats().refused, 2u);
}

// The pool full of weights, or refusing a chunk: an Error that says so, never a crash; a chunk the
// pool refuses whole is asked for in halves.
TEST(KvBlocks, AFullPoolIsAnErrorAndARefusedChunkIsAskedForInHalves) {
  Rig rig;
  KvBlocksConfig config;
  config.chunk_blocks = 4;
  config.pool_fraction = 1;
  auto kv = rig.kv(config);
  rig.memory->fail_allocations(1);  // the 4-block chunk is refused; its half is not
  ASSERT_TRUE(kv->grow(1, 16).ok());
  EXPECT_EQ(kv->stats().chunks, 1u);
  EXPECT_EQ(kv->stats().free, 1u) << "a chunk of 2 blocks";

  // Weights take the rest of the pool, in 256 KiB pieces, until it is full.
  auto placer = rig.memory->placer("weights");
  int pieces = 0;
  while (placer({256 * KiB}).ok()) ++pieces;
  while (placer({64 * KiB}).ok()) ++pieces;
  ASSERT_GT(pieces, 0);
  ASSERT_TRUE(kv->grow(1, 32).ok()) << "the chunk's free block still serves";
  Status st = kv->grow(1, 48);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::out_of_memory);
  EXPECT_NE(st.error().message().find("no room for one more KV block"), std::string::npos) << st.error().message();
  EXPECT_EQ(kv->blocks_of(1), 2u);
  EXPECT_EQ(kv->stats().chunks, 1u) << "no chunk left behind by the failed grow";
  rig.memory->free("weights");
  EXPECT_TRUE(kv->grow(1, 48).ok()) << "room again once the weights go";
}

// A swap out and back in: one copy per block through the pinned staging region (in rounds of what it
// holds), the blocks freed meanwhile and taken by another sequence, the sequence back in other
// blocks with its bytes intact and its table rewritten; no pageable copy reaches the device.
TEST(KvBlocks, ASwappedSequenceComesBackIntoOtherBlocksWithItsBytesThroughStaging) {
  Rig rig(256 * KiB);  // staging holds 4 blocks: two rounds for 6
  KvBlocksConfig config;
  config.chunk_blocks = 8;
  auto kv = rig.kv(config);
  const uint64_t bb = kv->block_bytes();
  ASSERT_TRUE(kv->grow(1, 16 * 6).ok());
  const auto before = kv->table(1);
  rig.fill(before, bb, 1);  // the test's own copies are pageable: counted around the swaps only
  auto copies = rig.device->copy_counts();

  ASSERT_TRUE(kv->swap_out(1).ok());
  EXPECT_EQ(rig.device->copy_counts().pageable_bytes, copies.pageable_bytes);
  EXPECT_EQ(kv->state(1), KvBlocks::State::swapped);
  EXPECT_TRUE(kv->table(1).empty());
  EXPECT_EQ(kv->blocks_of(1), 0u);
  auto s = kv->stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.swapped, 1u);
  EXPECT_EQ(s.swapped_bytes, 6 * bb);
  EXPECT_EQ(s.swap_outs, 1u);
  EXPECT_EQ(rig.device->copy_counts().to_host, copies.to_host + 6) << "one copy per block";

  ASSERT_TRUE(kv->grow(2, 16 * 3).ok());  // takes the first freed blocks
  rig.fill(kv->table(2), bb, 2);
  copies = rig.device->copy_counts();
  ASSERT_TRUE(kv->swap_in(1).ok());
  EXPECT_EQ(rig.device->copy_counts().pageable_bytes, copies.pageable_bytes);
  EXPECT_EQ(rig.device->copy_counts().to_device, copies.to_device + 6) << "one copy per block";
  const auto after = kv->table(1);
  ASSERT_EQ(after.size(), 6u);
  EXPECT_NE(after[0].addr, before[0].addr) << "its first block went to sequence 2";
  EXPECT_TRUE(rig.holds(after, bb, 1)) << "the bytes came back";
  EXPECT_TRUE(rig.holds(kv->table(2), bb, 2)) << "and landed nowhere else";
  s = kv->stats();
  EXPECT_EQ(s.swapped, 0u);
  EXPECT_EQ(s.swapped_bytes, 0u);
  EXPECT_EQ(s.swap_ins, 1u);
  EXPECT_EQ(s.swap_in_bytes, 6 * bb);
  EXPECT_EQ(s.in_use, 9u);
  const auto staged = rig.memory->staging()->stats();
  EXPECT_GE(staged.staged, 12u) << "every block went through the region, both ways";
  EXPECT_EQ(staged.direct, 0u);
}

// Without staging the copies go directly; the host bound refuses a swap out (it stays resident), a
// full cache refuses a swap in (it stays swapped, its host copy intact) until blocks free up.
TEST(KvBlocks, TheHostBoundAndAFullCacheRefuseSwapsAndLeaveTheSequenceAsItWas) {
  Rig rig;
  KvBlocksConfig config;
  config.chunk_blocks = 4;
  config.budget_bytes = 4 * 64 * KiB;
  config.host_bytes = 3 * 64 * KiB;
  auto kv = rig.kv(config);
  const uint64_t bb = kv->block_bytes();
  ASSERT_TRUE(kv->grow(1, 16 * 4).ok());
  EXPECT_FALSE(kv->host_room(4 * bb));
  Status st = kv->swap_out(1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::out_of_memory);
  EXPECT_NE(st.error().message().find("host swap space"), std::string::npos) << st.error().message();
  EXPECT_EQ(kv->state(1), KvBlocks::State::resident);
  EXPECT_EQ(kv->blocks_of(1), 4u);
  kv->release(1);

  ASSERT_TRUE(kv->grow(1, 16 * 2).ok());
  rig.fill(kv->table(1), bb, 5);
  ASSERT_TRUE(kv->swap_out(1).ok());
  EXPECT_TRUE(kv->host_room(bb));
  EXPECT_FALSE(kv->host_room(2 * bb));
  ASSERT_TRUE(kv->grow(2, 16 * 4).ok());  // the whole bound
  st = kv->swap_in(1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::out_of_memory);
  EXPECT_EQ(kv->state(1), KvBlocks::State::swapped);
  EXPECT_EQ(kv->stats().refused, 1u);
  kv->release(2);
  ASSERT_TRUE(kv->swap_in(1).ok());
  EXPECT_TRUE(rig.holds(kv->table(1), bb, 5));
  EXPECT_EQ(kv->stats().swapped_bytes, 0u);

  KvBlocksConfig no_swap;
  no_swap.name = "other";
  no_swap.host_bytes = 0;
  auto none = rig.kv(no_swap);
  ASSERT_TRUE(none->grow(7, 1).ok());
  EXPECT_EQ(none->swap_out(7).error().code(), ErrorCode::out_of_memory) << "host_bytes 0: no swapping";
}

TEST(KvBlocks, IllegalMovesAreRejectedCountedAndChangeNothing) {
  Rig rig;
  auto kv = rig.kv();
  EXPECT_EQ(kv->swap_out(1).error().code(), ErrorCode::not_found);
  EXPECT_EQ(kv->swap_in(1).error().code(), ErrorCode::not_found);
  ASSERT_TRUE(kv->grow(1, 20).ok());
  Status st = kv->swap_in(1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::internal);
  EXPECT_NE(st.error().message().find("illegal KV move: swap_in of sequence 1, resident"), std::string::npos)
      << st.error().message();
  ASSERT_TRUE(kv->swap_out(1).ok());
  EXPECT_EQ(kv->grow(1, 40).error().code(), ErrorCode::internal);
  EXPECT_EQ(kv->swap_out(1).error().code(), ErrorCode::internal);
  EXPECT_EQ(kv->state(1), KvBlocks::State::swapped);
  EXPECT_EQ(kv->stats().illegal, 3u);
  kv->release(1);  // a swapped sequence's host copy goes
  EXPECT_EQ(kv->stats().swapped_bytes, 0u);
  EXPECT_EQ(kv->stats().swapped, 0u);
  EXPECT_EQ(kv->state(1), KvBlocks::State::unknown);
}

TEST(KvBlocks, DestructionGivesEveryChunkBack) {
  Rig rig;
  const uint64_t before = rig.pool_free();
  {
    auto kv = rig.kv();
    ASSERT_TRUE(kv->grow(1, 1000).ok());
    ASSERT_TRUE(kv->grow(2, 10).ok());
    EXPECT_LT(rig.pool_free(), before);
  }
  EXPECT_EQ(rig.pool_free(), before);
}

// A stream parked on one device and resumed on another: the host copy leaves the first cache (its
// host bytes no longer counted there) and enters the second as a swapped sequence, whose swap-in
// puts the bytes into that device's blocks.
TEST(KvBlocks, AHostCopyExportedByOneCacheIsImportedByAnotherOfTheSameLayout) {
  Rig here, there;
  auto from = here.kv();
  auto to = there.kv();
  const uint64_t bb = from->block_bytes();
  ASSERT_TRUE(from->grow(1, 16 * 3).ok());
  here.fill(from->table(1), bb, 3);
  EXPECT_EQ(from->export_host(1).error().code(), ErrorCode::internal) << "resident: nothing to export";
  ASSERT_TRUE(from->swap_out(1).ok());
  auto copy = from->export_host(1);
  ASSERT_TRUE(copy.ok()) << copy.error().message();
  EXPECT_EQ(copy->blocks, 3u);
  EXPECT_EQ(copy->size_bytes(), 3 * bb);
  EXPECT_EQ(from->state(1), KvBlocks::State::unknown);
  EXPECT_EQ(from->stats().swapped_bytes, 0u);
  EXPECT_EQ(from->stats().swapped, 0u);
  EXPECT_EQ(from->export_host(1).error().code(), ErrorCode::internal) << "taken already";

  ASSERT_TRUE(to->grow(7, 16).ok());
  EXPECT_EQ(to->import_host(7, std::move(*copy)).error().code(), ErrorCode::internal) << "7 is known there";
  ASSERT_TRUE(from->grow(2, 16 * 3).ok());
  here.fill(from->table(2), bb, 4);
  ASSERT_TRUE(from->swap_out(2).ok());
  copy = from->export_host(2);
  ASSERT_TRUE(copy.ok());
  ASSERT_TRUE(to->import_host(9, std::move(*copy)).ok());
  EXPECT_EQ(to->state(9), KvBlocks::State::swapped);
  EXPECT_EQ(to->stats().swapped_bytes, 3 * bb);
  ASSERT_TRUE(to->swap_in(9).ok());
  ASSERT_EQ(to->table(9).size(), 3u);
  EXPECT_TRUE(there.holds(to->table(9), bb, 4)) << "the bytes came over, into the other device's blocks";
  EXPECT_EQ(to->stats().swapped_bytes, 0u);
  EXPECT_EQ(to->stats().in_use, 4u);
}

TEST(KvBlocks, AnImportOfAnotherLayoutOrBeyondTheHostBoundIsRefused) {
  Rig here, there;
  auto from = here.kv();
  ASSERT_TRUE(from->grow(1, 16 * 2).ok());
  here.fill(from->table(1), from->block_bytes(), 5);
  ASSERT_TRUE(from->swap_out(1).ok());
  auto copy = from->export_host(1);
  ASSERT_TRUE(copy.ok());
  KvLayout other = layout();
  other.head_dim = 32;
  auto narrow = there.kv({}, other);
  EXPECT_EQ(narrow->import_host(1, std::move(*copy)).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(narrow->state(1), KvBlocks::State::unknown);

  ASSERT_TRUE(from->grow(2, 16 * 2).ok());
  ASSERT_TRUE(from->swap_out(2).ok());
  copy = from->export_host(2);
  ASSERT_TRUE(copy.ok());
  KvBlocksConfig small;
  small.host_bytes = from->block_bytes();  // one block of host room: the copy has two
  auto tight = there.kv(small);
  EXPECT_EQ(tight->import_host(2, std::move(*copy)).error().code(), ErrorCode::out_of_memory);
  EXPECT_EQ(tight->state(2), KvBlocks::State::unknown);
  EXPECT_EQ(tight->stats().swapped_bytes, 0u);
}

}  // namespace kv_blocks_test
}  // namespace ember::engine
