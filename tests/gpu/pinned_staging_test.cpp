// PinnedStaging (gpu/pinned_staging.hpp): copies from and to pageable memory go through the pinned
// region (the device sees no pageable copy), land byte for byte, fall back to a direct copy when the
// region is full, and give their room back; concurrent streams share it.
#include "gpu/pinned_staging.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "gpu/sim_device.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace pinned_staging_test {

constexpr uint64_t kKiB = 1ull << 10, kMiB = 1ull << 20;

std::vector<uint8_t> pattern(uint64_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  for (uint64_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(i * 13 + seed + (i >> 9));
  return v;
}

TEST(PinnedStaging, PageableCopiesGoThroughThePinnedRegionByteForByteAndTheRoomComesBack) {
  auto device = testing::sim_device(64 * kMiB);
  auto staging = testing::must(PinnedStaging::create(*device, 1 * kMiB), "creating the staging region");
  auto stream = device->create_stream();
  const auto src = pattern(300 * kKiB, 1);
  const DevicePtr dst = testing::must(device->allocate(src.size()), "allocating");
  const auto before = device->copy_counts();
  staging->copy_to_device(*stream, dst, src.data(), src.size());
  std::vector<uint8_t> back(src.size());
  {
    PinnedStaging::Downloads down(staging.get());
    down.copy_to_host(*stream, back.data(), dst, back.size());
    ASSERT_TRUE(stream->synchronize().ok());
    down.finish();
  }
  EXPECT_EQ(back, src);
  EXPECT_EQ(device->copy_counts().pageable_bytes, before.pageable_bytes) << "no pageable copy reached the device";
  auto st = staging->stats();
  EXPECT_EQ(st.staged, 2u);
  EXPECT_EQ(st.staged_bytes, 2 * src.size());
  EXPECT_EQ(st.direct, 0u);
  // Larger than the region: an upload is staged chunk by chunk while there is room, the rest goes
  // directly; a download that does not fit goes directly. Right either way.
  const auto large = pattern(3 * kMiB, 2);
  const DevicePtr big = testing::must(device->allocate(large.size()), "allocating");
  staging->copy_to_device(*stream, big, large.data(), large.size());
  ASSERT_TRUE(stream->synchronize().ok());
  const uint64_t uploaded_pageable = device->copy_counts().pageable_bytes - before.pageable_bytes;
  EXPECT_LE(uploaded_pageable, large.size() - PinnedStaging::kChunkBytes) << "the first chunk went through the region";
  std::vector<uint8_t> large_back(large.size());
  PinnedStaging::Downloads down(staging.get());
  down.copy_to_host(*stream, large_back.data(), big, large_back.size());
  ASSERT_TRUE(stream->synchronize().ok());
  down.finish();
  EXPECT_EQ(large_back, large);
  EXPECT_EQ(device->copy_counts().pageable_bytes, before.pageable_bytes + uploaded_pageable + large.size());
  EXPECT_GE(staging->stats().direct, 1u);
  // A source already pinned is not staged (it needs no staging), nor counted.
  const auto counted = staging->stats();
  auto pinned = pattern(64 * kKiB, 3);
  ASSERT_TRUE(device->register_host(pinned.data(), pinned.size()).ok());
  staging->copy_to_device(*stream, dst, pinned.data(), pinned.size());
  ASSERT_TRUE(stream->synchronize().ok());
  device->unregister_host(pinned.data());
  EXPECT_EQ(staging->stats().staged, counted.staged);
  EXPECT_EQ(staging->stats().direct, counted.direct);
}

TEST(PinnedStaging, ConcurrentStreamsShareTheRegionAndEveryCopyLands) {
  auto device = testing::sim_device(64 * kMiB);
  // Room for about three copies at once: the others find it full and go directly.
  auto staging = testing::must(PinnedStaging::create(*device, 200 * kKiB), "creating the staging region");
  constexpr int kThreads = 4, kCopies = 25;
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stream = device->create_stream();
      for (int i = 0; i < kCopies; ++i) {
        const auto src = pattern(64 * kKiB, static_cast<uint8_t>(t * 31 + i));
        auto dst = device->allocate(src.size());
        if (!dst.ok()) {
          ++wrong[t];
          continue;
        }
        staging->copy_to_device(*stream, *dst, src.data(), src.size());
        std::vector<uint8_t> back(src.size());
        PinnedStaging::Downloads down(staging.get());
        down.copy_to_host(*stream, back.data(), *dst, back.size());
        if (!stream->synchronize().ok()) ++wrong[t];
        down.finish();
        if (back != src) ++wrong[t];
        device->free(*dst);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  auto st = staging->stats();
  EXPECT_EQ(st.staged + st.direct, 2u * kThreads * kCopies);
  EXPECT_GT(st.staged, 0u);
  EXPECT_LE(st.peak_bytes, staging->capacity());
  staging.reset();  // every room came back: the destructor does not wait forever
}

TEST(PinnedStaging, ARegionOfNoBytesIsRefused) {
  auto device = testing::sim_device(64 * kMiB);
  auto none = PinnedStaging::create(*device, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::invalid_argument);
}

}  // namespace pinned_staging_test
}  // namespace ember::gpu
