#include "gpu/activation_pool.hpp"

#include <algorithm>

namespace ember::gpu {

ActivationPool::~ActivationPool() {
  std::lock_guard lock(mu_);
  for (auto& [id, s] : segments_) shrink_(s.lent);
  segments_.clear();
}

Result<std::shared_ptr<DeviceBuffer>> ActivationPool::allocate(uint64_t bytes) {
  // The workspace first: the device's own free memory.
  auto own = DeviceBuffer::allocate(device_, bytes);
  if (own.ok() || own.error().code() != ErrorCode::out_of_memory) return own;
  std::lock_guard lock(mu_);
  auto carve = [&](Segment& s) -> std::shared_ptr<DeviceBuffer> {
    auto offset = s.arena.allocate(bytes);
    if (!offset) return nullptr;
    ++s.buffers;
    const uint64_t id = s.lent.id;
    return DeviceBuffer::adopt(device_, s.lent.base + *offset, bytes, [this, id](DevicePtr p) { release(id, p); });
  };
  for (auto& [id, s] : segments_) {
    if (auto b = carve(s)) return b;
  }
  // Grow: one segment more, at least as large as the request.
  auto lent = grow_(bytes);
  if (!lent.ok()) {
    return out_of_memory(own.error().message() + "; and the model pool lends no " + std::to_string(bytes) +
                         " bytes for activations: " + lent.error().message());
  }
  auto [it, added] = segments_.emplace(lent->id, Segment{*lent, ArenaAllocator(lent->bytes), 0});
  ++stats_.grows;
  reserved_ += lent->bytes;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, reserved_);
  if (auto b = carve(it->second)) return b;
  return internal_error("a fresh activation segment of " + std::to_string(lent->bytes) + " bytes has no room for " +
                        std::to_string(bytes));
}

void ActivationPool::release(uint64_t segment, DevicePtr ptr) {
  std::lock_guard lock(mu_);
  auto it = segments_.find(segment);
  if (it == segments_.end()) return;
  Segment& s = it->second;
  s.arena.free(ptr.addr - s.lent.base.addr);
  if (--s.buffers > 0) return;
  // Empty: back to the model pool at once.
  shrink_(s.lent);
  ++stats_.shrinks;
  reserved_ -= s.lent.bytes;
  segments_.erase(it);
}

ActivationPool::Stats ActivationPool::stats() const {
  std::lock_guard lock(mu_);
  Stats out = stats_;
  out.segments = segments_.size();
  out.reserved_bytes = reserved_;
  for (const auto& [id, s] : segments_) out.buffers_in_segments += s.buffers;
  return out;
}

}  // namespace ember::gpu
