#include "gpu/host_ranges.hpp"

#include <cstdio>
#include <limits>
#include <string>

namespace ember::gpu {

namespace {

std::string describe(uintptr_t start, uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "[0x%llx, +%llu)", static_cast<unsigned long long>(start),
                static_cast<unsigned long long>(bytes));
  return buf;
}

}  // namespace

Status HostRanges::add(const void* ptr, uint64_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  if (ptr == nullptr || bytes == 0) {
    return invalid_argument("cannot register host range " + describe(start, bytes) + ": null or empty");
  }
  if (bytes - 1 > std::numeric_limits<uintptr_t>::max() - start) {
    return invalid_argument("cannot register host range " + describe(start, bytes) + ": wraps around");
  }
  std::lock_guard lock(mu_);
  if (overlaps_locked(start, bytes)) {
    auto it = ranges_.upper_bound(start + (bytes - 1));
    --it;  // the last range starting inside [start, end]: one that overlaps
    return invalid_argument("cannot register host range " + describe(start, bytes) +
                            ": it overlaps the registered range " + describe(it->first, it->second));
  }
  ranges_.emplace(start, bytes);
  return Status::OK();
}

std::optional<uint64_t> HostRanges::remove(const void* ptr) {
  std::lock_guard lock(mu_);
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == ranges_.end()) return std::nullopt;
  const uint64_t bytes = it->second;
  ranges_.erase(it);
  return bytes;
}

bool HostRanges::contains(const void* ptr, uint64_t bytes) const {
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard lock(mu_);
  auto it = ranges_.upper_bound(start);
  if (it == ranges_.begin()) return false;
  --it;  // the range starting at or before `start`
  const uint64_t offset = start - it->first;
  return offset < it->second && bytes <= it->second - offset;
}

bool HostRanges::overlaps(const void* ptr, uint64_t bytes) const {
  if (bytes == 0) return false;
  std::lock_guard lock(mu_);
  return overlaps_locked(reinterpret_cast<uintptr_t>(ptr), bytes);
}

size_t HostRanges::size() const {
  std::lock_guard lock(mu_);
  return ranges_.size();
}

std::vector<const void*> HostRanges::clear() {
  std::lock_guard lock(mu_);
  std::vector<const void*> starts;
  for (const auto& [start, bytes] : ranges_) starts.push_back(reinterpret_cast<const void*>(start));
  ranges_.clear();
  return starts;
}

bool HostRanges::overlaps_locked(uintptr_t start, uint64_t bytes) const {
  // Ranges are disjoint, so only the last one starting at or before the new range's last byte
  // can overlap it: it does when it ends after `start`.
  const uintptr_t last = start + (bytes - 1);
  auto it = ranges_.upper_bound(last);
  if (it == ranges_.begin()) return false;
  --it;
  return it->first + (it->second - 1) >= start;
}

}  // namespace ember::gpu
