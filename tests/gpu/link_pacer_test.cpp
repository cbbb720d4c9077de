// LinkPacer (gpu/link_pacer.hpp): bookings, sharing, and paced_memcpy. Lower bounds on time only.
#include "gpu/link_pacer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace ember::gpu {
namespace link_pacer_test {

using Clock = LinkPacer::Clock;
using std::chrono::duration;

TEST(LinkPacer, UnthrottledBooksNothing) {
  LinkPacer free_link(0);
  EXPECT_FALSE(free_link.throttled());
  const auto before = Clock::now();
  const auto booked = free_link.reserve(1ull << 40);
  const auto after = Clock::now();
  EXPECT_GE(booked, before);
  EXPECT_LE(booked, after);
}

TEST(LinkPacer, BookingsQueueBehindEachOther) {
  LinkPacer link(1e9);  // 1 MB takes 1 ms
  const auto before = Clock::now();
  const auto first = link.reserve(1'000'000);
  const auto second = link.reserve(1'000'000);
  EXPECT_GE(duration<double>(first - before).count(), 0.99e-3);
  EXPECT_GE(duration<double>(second - first).count(), 0.999e-3) << "the second starts when the first ends";
}

TEST(LinkPacer, AnIdleLinkStartsNow) {
  LinkPacer link(1e9, std::chrono::milliseconds(1));
  link.reserve(1000);  // ends 1 us from now
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto now = Clock::now();
  EXPECT_GE(duration<double>(link.reserve(1'000'000) - now).count(), 0.99e-3) << "idle time is not banked";
}

TEST(LinkPacer, PacedMemcpyCopiesAndTakesAtLeastTheLinkTime) {
  std::vector<uint8_t> src(5 * kPacedChunkBytes / 2), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 1);
  LinkPacer slow(0.25e9), fast(100e9);
  const auto start = Clock::now();
  paced_memcpy(dst.data(), src.data(), src.size(), {&fast, nullptr, &slow});
  EXPECT_GE(duration<double>(Clock::now() - start).count(), src.size() / 0.25e9 * 0.99);
  EXPECT_TRUE(dst == src);
}

TEST(LinkPacer, TwoSendersShareOneLink) {
  LinkPacer link(1e9);
  std::vector<uint8_t> a(24 << 20, 1), b(24 << 20, 2), da(a.size()), db(b.size());
  const auto start = Clock::now();
  std::thread t([&] { paced_memcpy(da.data(), a.data(), a.size(), {&link}); });
  paced_memcpy(db.data(), b.data(), b.size(), {&link});
  t.join();
  EXPECT_GE(duration<double>(Clock::now() - start).count(), (a.size() + b.size()) / 1e9 * 0.97);
  EXPECT_TRUE(da == a && db == b);
}

}  // namespace link_pacer_test
}  // namespace ember::gpu
