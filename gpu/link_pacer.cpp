#include "gpu/link_pacer.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace ember::gpu {

LinkPacer::LinkPacer(double bytes_per_s, Clock::duration catch_up) : bytes_per_s_(bytes_per_s), catch_up_(catch_up) {}

LinkPacer::Clock::time_point LinkPacer::reserve(uint64_t bytes) {
  const auto now = Clock::now();
  if (!throttled()) return now;
  const auto busy = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) / bytes_per_s_));
  std::lock_guard lock(mu_);
  // Booked ahead, or the busy period ended only moments ago (a late sender): continue after it.
  // Otherwise the link has been idle and the chunk starts now.
  const bool continues = next_free_ != Clock::time_point{} && now - next_free_ <= catch_up_;
  const auto start = continues ? next_free_ : now;
  next_free_ = start + busy;
  return next_free_;
}

void LinkPacer::pace(uint64_t bytes) { std::this_thread::sleep_until(reserve(bytes)); }

void paced_memcpy(void* dst, const void* src, uint64_t bytes, std::initializer_list<LinkPacer*> links) {
  bool throttled = false;
  for (LinkPacer* link : links) throttled = throttled || (link && link->throttled());
  if (!throttled) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kPacedChunkBytes, bytes - done);
    // Book before copying, so the memcpy runs inside the chunk's time on the link, not after it.
    auto until = LinkPacer::Clock::time_point{};
    for (LinkPacer* link : links) {
      if (link && link->throttled()) until = std::max(until, link->reserve(n));
    }
    std::memcpy(d + done, s + done, n);
    std::this_thread::sleep_until(until);
    done += n;
  }
}

}  // namespace ember::gpu
