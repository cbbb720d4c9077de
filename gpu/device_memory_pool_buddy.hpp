// BuddyPartition: the free space of one irregular partition of the DeviceMemoryPool
// (device_memory_pool.hpp), kept as buddy blocks (Knowlton 1965, as Torpor's irregular partitions),
// in units of the pool's minimum block.
//
// Owned by the DeviceMemoryPool; pure bookkeeping, never touches memory, not thread-safe.
// Header-only so that the pool needs no extra build entry.
//
// A partition of 2^K units is tiled by blocks of 2^k units aligned to their size; a freed block
// merges with its buddy while the buddy is a free block of the same order, so the free lists depend
// only on which units are in use (canonical): a rolled-back allocation leaves the partition exactly
// as it was. Where Ember departs from Torpor, which rounds each request up to one power-of-two
// block: a request of n units takes n contiguous free units, carved from the start of the smallest
// run of adjacent free blocks that holds them (best fit, lowest address on ties), splitting the
// blocks at the run's ends. Our layers are "power of two plus a bias" (a 9.01 MiB attention block,
// a 16.02 MiB GPT-2-medium MLP): rounding would waste almost half of each, and aligned placement
// of trimmed blocks would still leave gaps no sibling fits in (8 of 9.01 MiB per 128 MiB
// partition instead of 14). A request wastes less than one unit, and a model's blocks, placed
// largest first, lie back to back.
// Invariants (check()): free blocks are aligned to their size, disjoint and inside the partition;
// no free block's buddy is a free block of the same order; free_units() is their sum.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ember::gpu {

class BuddyPartition {
 public:
  /// A wholly free partition of `units` units; `units` is a power of two.
  explicit BuddyPartition(uint32_t units) : max_order_(order_for(units)), free_order_(units, -1), free_(max_order_ + 1) {
    insert(0, max_order_);
  }

  /// Smallest k with 2^k >= units (units >= 1).
  static uint32_t order_for(uint32_t units) {
    uint32_t k = 0;
    while ((1u << k) < units) ++k;
    return k;
  }

  uint32_t units() const { return 1u << max_order_; }
  uint32_t free_units() const { return free_units_; }
  bool empty() const { return free_units_ == units(); }

  /// A maximal range of free units: adjacent free blocks, in address order.
  struct Run {
    uint32_t start = 0, units = 0;
  };
  /// Every run, lowest address first.
  std::vector<Run> runs() const {
    std::vector<Run> blocks;
    for_each_free([&](uint32_t start, uint32_t units) { blocks.push_back({start, units}); });
    std::sort(blocks.begin(), blocks.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
    std::vector<Run> out;
    for (const Run& b : blocks) {
      if (!out.empty() && out.back().start + out.back().units == b.start)
        out.back().units += b.units;
      else
        out.push_back(b);
    }
    return out;
  }
  /// The smallest run of at least `units` (lowest address on ties), or nullopt. The pool's best
  /// fit between partitions compares these.
  std::optional<Run> best_run(uint32_t units) const {
    std::optional<Run> best;
    for (const Run& r : runs())
      if (r.units >= units && (!best || r.units < best->units)) best = r;
    return best;
  }
  /// Units in the largest run (0 when full): the largest request that fits.
  uint32_t largest_free() const {
    uint32_t largest = 0;
    for (const Run& r : runs()) largest = std::max(largest, r.units);
    return largest;
  }

  /// First unit of `units` (>= 1) contiguous units carved from the start of best_run(units), or
  /// nullopt when no run holds them.
  std::optional<uint32_t> allocate(uint32_t units) {
    const auto run = best_run(units);
    if (run) take(run->start, units);
    return run ? std::optional<uint32_t>(run->start) : std::nullopt;
  }

  /// Marks [start, start + units) used; every unit of it must be free (the pool's blocks that span
  /// partitions carve their ends this way).
  void take(uint32_t start, uint32_t units) {
    const uint32_t end = start + units;
    for (uint32_t pos = start; pos < end;) {
      // The free block holding `pos`: its start is `pos` rounded down to its order's alignment.
      uint32_t order = 0;
      while (order <= max_order_ && free_order_[pos & ~((1u << order) - 1)] != static_cast<int8_t>(order)) ++order;
      assert(order <= max_order_ && "take() of a unit that is not free");
      const uint32_t block = pos & ~((1u << order) - 1), block_end = block + (1u << order);
      erase(block, order);
      insert_range(block, pos);                           // only for the range's first block
      if (end < block_end) insert_range(end, block_end);  // only for its last
      pos = block_end;
    }
    free_units_ -= units;
  }

  /// Returns `units` units at `start`, exactly as allocate(units) handed them out: each aligned
  /// piece of the range is released and coalesced with its buddy while the buddy is free.
  void free(uint32_t start, uint32_t units) {
    free_units_ += units;
    for_each_piece(start, start + units, [&](uint32_t pos, uint32_t order) { release(pos, order); });
  }

  /// Calls fn(start, units) for every free block, lowest order first.
  template <class Fn>
  void for_each_free(Fn&& fn) const {
    for (uint32_t k = 0; k <= max_order_; ++k)
      for (uint32_t start : free_[k]) fn(start, 1u << k);
  }

  /// "" when the invariants above hold, else what broke.
  std::string check() const {
    uint64_t sum = 0;
    std::vector<bool> seen(units(), false);
    for (uint32_t k = 0; k <= max_order_; ++k) {
      for (uint32_t start : free_[k]) {
        const uint32_t size = 1u << k;
        if (start % size != 0 || start + size > units()) return "free block misaligned or outside";
        if (free_order_[start] != static_cast<int8_t>(k)) return "free block index out of date";
        if (k < max_order_ && free_order_[start ^ size] == static_cast<int8_t>(k)) return "free buddies not coalesced";
        for (uint32_t u = start; u < start + size; ++u) {
          if (seen[u]) return "free blocks overlap";
          seen[u] = true;
        }
        sum += size;
      }
    }
    if (sum != free_units_) return "free unit count does not add up";
    for (uint32_t u = 0; u < units(); ++u)
      if (free_order_[u] >= 0 && !free_[static_cast<uint32_t>(free_order_[u])].count(u)) return "stale free index";
    return {};
  }

 private:
  void insert(uint32_t start, uint32_t order) {
    free_order_[start] = static_cast<int8_t>(order);
    free_[order].insert(start);
  }
  /// Calls fn(pos, order) for the maximal aligned blocks tiling [lo, hi), in address order.
  template <class Fn>
  void for_each_piece(uint32_t lo, uint32_t hi, Fn&& fn) const {
    while (lo < hi) {
      uint32_t order = 0;
      while (order < max_order_ && lo % (2u << order) == 0 && lo + (2u << order) <= hi) ++order;
      fn(lo, order);
      lo += 1u << order;
    }
  }
  /// Frees [lo, hi) without coalescing: the caller guarantees no piece's buddy is wholly free (true
  /// for what is left of a split block on either side of a carved range).
  void insert_range(uint32_t lo, uint32_t hi) {
    for_each_piece(lo, hi, [&](uint32_t pos, uint32_t order) { insert(pos, order); });
  }
  void erase(uint32_t start, uint32_t order) {
    free_order_[start] = -1;
    free_[order].erase(start);
  }
  /// Frees one block, merging with its buddy while the buddy is a free block of the same order.
  void release(uint32_t pos, uint32_t order) {
    while (order < max_order_) {
      const uint32_t buddy = pos ^ (1u << order);
      if (free_order_[buddy] != static_cast<int8_t>(order)) break;
      erase(buddy, order);
      pos = std::min(pos, buddy);
      ++order;
    }
    insert(pos, order);
  }

  uint32_t max_order_;
  std::vector<int8_t> free_order_;          // per unit: order of the free block starting there, -1 if none
  std::vector<std::set<uint32_t>> free_;    // per order: first units of free blocks, address order
  uint32_t free_units_ = 1u << max_order_;  // initialised after max_order_ (declaration order)
};

}  // namespace ember::gpu
