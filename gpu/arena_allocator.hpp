// ArenaAllocator: hands out aligned byte ranges of one fixed-size arena (a device's memory).
//
// First fit over an address-ordered free list, with neighbours coalesced on free, so the arena
// never leaks space to fragmentation that a later free cannot undo. Pure bookkeeping: it never
// touches the memory it manages and knows nothing of devices. Not thread-safe; the owning device
// serialises calls. Invariants: free and used blocks tile [0, capacity) exactly; no two free
// blocks are adjacent; every offset handed out is a multiple of `alignment`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ember::gpu {

class ArenaAllocator {
 public:
  static constexpr uint64_t kDefaultAlignment = 256;

  explicit ArenaAllocator(uint64_t capacity, uint64_t alignment = kDefaultAlignment);

  /// Offset of a block of at least `bytes` (rounded up to the alignment; 0 counts as 1), or
  /// nullopt when no free block is large enough.
  std::optional<uint64_t> allocate(uint64_t bytes);
  /// Returns a block; false when `offset` was not handed out by allocate (nothing changes).
  bool free(uint64_t offset);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_bytes_; }
  uint64_t largest_free_block() const;
  size_t free_blocks() const { return free_.size(); }
  /// Size of the block at `offset`, 0 when none is allocated there.
  uint64_t block_size(uint64_t offset) const;
  /// "requested 2.00 MiB, 1.00 MiB free of 4.00 MiB (largest free block 1.00 MiB)", for the
  /// out-of-memory errors of the devices built on this allocator.
  std::string shortage(uint64_t requested) const;

 private:
  uint64_t capacity_;
  uint64_t alignment_;
  uint64_t used_bytes_ = 0;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, address order
  std::map<uint64_t, uint64_t> used_;  // offset -> size
};

}  // namespace ember::gpu
