#include "gpu/pinned_staging.hpp"

#include <algorithm>
#include <cstring>

namespace ember::gpu {

Result<std::unique_ptr<PinnedStaging>> PinnedStaging::create(Device& device, uint64_t bytes) {
  if (bytes == 0) return invalid_argument("a pinned staging region of 0 bytes");
  std::unique_ptr<PinnedStaging> s(new PinnedStaging(device, bytes));
  if (Status st = device.register_host(s->region_.get(), bytes); !st.ok()) {
    return st.error().with_context("pinning " + std::to_string(bytes) + " bytes of host memory for staging");
  }
  return s;
}

PinnedStaging::PinnedStaging(Device& device, uint64_t bytes)
    : device_(device), region_(new uint8_t[bytes]), arena_(bytes) {}

PinnedStaging::~PinnedStaging() {
  std::unique_lock lock(mu_);
  returned_.wait(lock, [&] { return outstanding_ == 0; });
  lock.unlock();
  device_.unregister_host(region_.get());
}

std::optional<uint64_t> PinnedStaging::take(uint64_t bytes) {
  std::lock_guard lock(mu_);
  auto offset = arena_.allocate(bytes);
  if (!offset) {
    ++stats_.direct;
    return std::nullopt;
  }
  ++outstanding_;
  ++stats_.staged;
  stats_.staged_bytes += bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, arena_.used());
  return offset;
}

void PinnedStaging::give(uint64_t offset) {
  bool last = false;
  {
    std::lock_guard lock(mu_);
    arena_.free(offset);
    last = --outstanding_ == 0;
  }
  if (last) returned_.notify_all();
}

void PinnedStaging::copy_to_device(Stream& stream, DevicePtr dst, const void* src, uint64_t bytes) {
  if (bytes == 0 || device_.host_registered(src, bytes)) return stream.copy_to_device(dst, src, bytes);
  // Chunk by chunk: the stream copies one while this thread fills the next.
  const auto* from = static_cast<const uint8_t*>(src);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kChunkBytes, bytes - done);
    auto at = take(n);
    if (!at) return stream.copy_to_device(dst + done, from + done, bytes - done);  // the rest directly
    uint8_t* slot = region_.get() + *at;
    std::memcpy(slot, from + done, n);
    stream.copy_to_device(dst + done, slot, n);
    stream.then([this, offset = *at](const Status&) { give(offset); });
    done += n;
  }
}

PinnedStaging::Stats PinnedStaging::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

PinnedStaging::Downloads::~Downloads() {
  if (staged_.empty()) return;
  (void)stream_->synchronize();  // a copy into the region may still be on its way
  for (const auto& s : staged_) staging_->give(s.offset);
}

void PinnedStaging::Downloads::copy_to_host(Stream& stream, void* dst, DevicePtr src, uint64_t bytes) {
  std::optional<uint64_t> at;
  if (staging_ && bytes > 0 && !staging_->device_.host_registered(dst, bytes)) at = staging_->take(bytes);
  if (!at) return stream.copy_to_host(dst, src, bytes);
  stream.copy_to_host(staging_->region_.get() + *at, src, bytes);
  stream_ = &stream;
  staged_.push_back({dst, *at, bytes});
}

void PinnedStaging::Downloads::finish() {
  for (const auto& s : staged_) {
    std::memcpy(s.dst, staging_->region_.get() + s.offset, s.bytes);
    staging_->give(s.offset);
  }
  staged_.clear();
}

void copy_in(Stream& stream, PinnedStaging* staging, DevicePtr dst, const void* src, uint64_t bytes) {
  if (staging) return staging->copy_to_device(stream, dst, src, bytes);
  stream.copy_to_device(dst, src, bytes);
}

}  // namespace ember::gpu
