// HostRanges: the set of host-memory ranges registered (page-locked) with one device, as
// Device::register_host keeps it. Used by SimDevice, which paces copies from registered memory at
// the pinned rate, and by CudaDevice, which keeps it beside cudaHostRegister's own bookkeeping.
//
// Invariant: ranges are non-empty and pairwise disjoint; a range is named by its start address.
// Pure bookkeeping (never touches the memory it describes). Thread-safe: anyone, any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "base/status.hpp"

namespace ember::gpu {

class HostRanges {
 public:
  /// Adds [ptr, ptr + bytes). invalid_argument for a null pointer, zero bytes, a range wrapping
  /// around the address space, or one overlapping a range already added (the message names both).
  Status add(const void* ptr, uint64_t bytes);
  /// Removes the range starting exactly at `ptr` and returns its size; nullopt (and no change)
  /// when no range starts there.
  std::optional<uint64_t> remove(const void* ptr);
  /// Whether [ptr, ptr + bytes) lies inside one range (bytes 0: whether ptr does).
  bool contains(const void* ptr, uint64_t bytes) const;
  /// Whether [ptr, ptr + bytes) shares at least one byte with some range.
  bool overlaps(const void* ptr, uint64_t bytes) const;
  size_t size() const;
  /// Removes every range and returns their start addresses (for an owner releasing them all).
  std::vector<const void*> clear();

 private:
  // Whether [start, start + bytes) shares a byte with a range; bytes > 0; the caller holds mu_.
  bool overlaps_locked(uintptr_t start, uint64_t bytes) const;

  mutable std::mutex mu_;
  std::map<uintptr_t, uint64_t> ranges_;  // guarded by mu_: start -> bytes
};

}  // namespace ember::gpu
