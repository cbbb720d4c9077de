#include "gpu/arena_allocator.hpp"

#include <algorithm>

#include "base/units.hpp"

namespace ember::gpu {

ArenaAllocator::ArenaAllocator(uint64_t capacity, uint64_t alignment)
    : capacity_(capacity / alignment * alignment), alignment_(alignment) {
  if (capacity_ > 0) free_[0] = capacity_;
}

std::optional<uint64_t> ArenaAllocator::allocate(uint64_t bytes) {
  if (bytes > capacity_) return std::nullopt;
  const uint64_t size = std::max<uint64_t>(1, (bytes + alignment_ - 1) / alignment_) * alignment_;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const uint64_t offset = it->first;
    const uint64_t rest = it->second - size;
    free_.erase(it);
    if (rest) free_[offset + size] = rest;
    used_[offset] = size;
    used_bytes_ += size;
    return offset;
  }
  return std::nullopt;
}

bool ArenaAllocator::free(uint64_t offset) {
  auto it = used_.find(offset);
  if (it == used_.end()) return false;
  uint64_t start = offset, size = it->second;
  used_.erase(it);
  used_bytes_ -= size;
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
  return true;
}

uint64_t ArenaAllocator::largest_free_block() const {
  uint64_t best = 0;
  for (const auto& [offset, size] : free_) best = std::max(best, size);
  return best;
}

uint64_t ArenaAllocator::block_size(uint64_t offset) const {
  auto it = used_.find(offset);
  return it == used_.end() ? 0 : it->second;
}

}  // namespace ember::gpu

namespace ember::gpu {

std::string ArenaAllocator::shortage(uint64_t requested) const {
  return "requested " + format_bytes(requested) + ", " + format_bytes(capacity_ - used_bytes_) + " free of " +
         format_bytes(capacity_) + " (largest free block " + format_bytes(largest_free_block()) + ")";
}

}  // namespace ember::gpu
