// DeviceMemoryPool: the gpu_executor's allocator for late binding (Torpor §4.4 and Appendix A.2;
// the digest's §2.4). The executor reserves one region of device memory when it starts, asks this
// pool for a model's blocks each time it swaps the model in, and frees them when it evicts it.
//
// Pure bookkeeping over byte offsets in [0, capacity): it never touches memory or a device, never
// blocks, and is not thread-safe (the executor's single thread serialises every call). The executor
// maps an offset to a device address, so a model swapped out and back in may land at another offset
// or on another device; hence blocks are named by BlockHandle, never by pointer.
//
// Layout (Torpor's two tiers): the region is cut into partitions of `partition_bytes`; a tail
// shorter than one partition is not managed (reserve a multiple). A partition's lifecycle:
//
//        +--> regular   (slots of one class size) -----------+
//   free +--> irregular (buddy-tiled, contiguous ranges) -----+--> free   (when its last block goes)
//        +--> large     (wholly inside one spanning block) ---+
//
// Where a request of `bytes` goes (the block's tier):
//  - regular, when a class size c has c - c/8 < bytes <= c (waste under 12.5%): one slot of a
//    regular partition of class c. Default class: 2 MiB only, the swap pipeline's group size
//    (Torpor's "elbow", digest §2.1), which the executor's groups of small layers fill (ResNet-50's
//    come to 1.8-2.0 MiB). Torpor's 20 MiB class mirrored PyTorch's segment sizes, which Ember does
//    not have; our larger layers (2.25, 3, 4, 7.8, 8, 9.01, 16.02, 89 MiB) match no fixed class, and
//    the irregular tier wastes under one minimum block on any of them. No free slot: irregular.
//  - irregular, up to a partition: ceil(bytes / min_block_bytes) contiguous units (64 KiB) of one
//    partition, best fit over its free runs (device_memory_pool_buddy.hpp). Departure from Torpor,
//    which rounds to a power of two: our layers are "power of two plus a bias" (9.01 MiB), so
//    rounding would waste almost half.
//  - large (spanning), above a partition or as the last resort for a smaller block: a range of
//    free units crossing partition boundaries, best fit; the partitions it covers whole become
//    `large`, the ones it covers in part stay irregular and keep serving other blocks. (Torpor fell
//    back to cudaMalloc; an executor that reserved the device has nothing to fall back to, and
//    GPT-2's two 147 MiB tensors must still fit.)
// Per-model packing (Torpor's second property): a model's blocks are placed largest first, each in
// (1) a partition already holding that model's blocks (best fit); then, while a whole partition's
// worth of the model remains to be placed, (2) an empty partition (from the shortest run of free
// partitions, so long runs stay for spanning blocks) before (3) room in partitions shared with other
// models (best fit); for the rest of the model, and for models under a partition, (3) before (2).
// Ember departs from "empty partitions before shared ones" for small remainders: on the tests'
// reference-model churn (6 seeds), always opening empty partitions first left the pool 76% full
// when it had to evict, against 91% with the rule above.
// Freeing a model therefore frees its own partitions whole. No periodic consolidation (Torpor
// leaves it unspecified, and moving a model means remapping it while idle): the tests measure that
// fragmentation does not build up without it.
//
// Invariants, verified by check(): blocks are 256-byte aligned, lie inside the managed region and
// never overlap; slots (regular), blocks plus free buddy blocks (irregular) and spanning blocks
// (large) tile their partitions exactly; used + free + stranded bytes = capacity; per-block,
// per-partition and per-model accounting agree; a partition holding no block is free.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "gpu/device_memory_pool_buddy.hpp"

namespace ember::gpu {

struct DeviceMemoryPoolConfig {
  /// Bytes per partition: a power of two and a multiple of min_block_bytes. Default 128 MiB, as
  /// Torpor's prototype; 64 and 256 MiB measured within noise of it on the tests' churn. Larger
  /// means fewer spanning blocks but coarser whole-partition frees. Set at executor start only.
  uint64_t partition_bytes = 128ull << 20;
  /// Smallest buddy block (the unit of irregular and spanning blocks), bytes: a power of two, at
  /// least 256. Default 64 KiB: under 64 KiB wasted per block, and a partition's buddy index stays
  /// at 2048 units (2 KiB). Smaller units cost index memory and run-scan time per partition.
  uint64_t min_block_bytes = 64ull << 10;
  /// Fixed block sizes served by regular partitions, bytes: multiples of 256, each at most half a
  /// partition. A class that does not divide a partition strands its remainder. Default {2 MiB}.
  std::vector<uint64_t> class_bytes = {2ull << 20};
};

/// Names one block. Valid from allocate_model until free_model of its model; never reused, so a
/// stale handle is detected (offset_of returns nullopt) rather than aliasing a newer block.
struct BlockHandle {
  uint64_t id = 0;  // 0 never names a block
  bool operator==(const BlockHandle&) const = default;
};

enum class PartitionKind : uint8_t { free, regular, irregular, large };
/// "free", "regular", "irregular", "large".
std::string_view to_string(PartitionKind kind);

struct BlockInfo {
  std::string model;
  uint64_t offset = 0;           // from the start of the region, multiple of 256
  uint64_t bytes = 0;            // as requested
  uint64_t footprint_bytes = 0;  // what it takes from the pool: the slot, or bytes rounded up to units
  uint32_t partition = 0;        // the first partition it occupies
  uint32_t partitions = 1;       // how many it touches (> 1 only for spanning blocks)
  PartitionKind tier = PartitionKind::irregular;  // regular: a class slot; large: a spanning block
};

struct PartitionInfo {
  PartitionKind kind = PartitionKind::free;
  uint64_t class_bytes = 0;   // regular only
  uint64_t used_bytes = 0;    // footprint of the blocks in it
  uint64_t free_bytes = 0;    // allocatable in it
  uint64_t largest_free_bytes = 0;
  uint32_t blocks = 0;        // blocks touching it (a spanning block touches each of its partitions)
  uint32_t models = 0;
  bool operator==(const PartitionInfo&) const = default;
};

struct DeviceMemoryPoolStats {
  uint64_t capacity_bytes = 0;   // managed: partitions * partition_bytes
  uint64_t used_bytes = 0;       // footprint of live blocks
  uint64_t requested_bytes = 0;  // sum of the sizes asked for by live blocks
  uint64_t free_bytes = 0;       // allocatable
  uint64_t stranded_bytes = 0;   // remainders of regular partitions whose class does not divide them
  uint32_t partitions = 0, free_partitions = 0, regular_partitions = 0, irregular_partitions = 0,
           large_partitions = 0;
  uint64_t largest_free_block = 0;  // the largest single request that would succeed now (any tier)
  double fragmentation = 0;         // 1 - largest_free_block / free_bytes; 0 when nothing is free
  uint32_t models = 0;
  uint64_t blocks = 0;
};

class DeviceMemoryPool {
 public:
  /// Every block's offset is a multiple of this (and min_block_bytes must be one).
  static constexpr uint64_t kAlignment = 256;

  /// A pool over [0, capacity_bytes). invalid_argument when the config breaks a rule above or the
  /// capacity holds no whole partition.
  static Result<DeviceMemoryPool> create(uint64_t capacity_bytes, DeviceMemoryPoolConfig config = {});

  /// One block per size (0 counts as 1), handles in the order of `sizes`. All or nothing: when any
  /// block does not fit, nothing changes and the out_of_memory Error says how much was asked, how
  /// much is free and the largest free block. A model may allocate again; its blocks pack together.
  Result<std::vector<BlockHandle>> allocate_model(std::string_view model, const std::vector<uint64_t>& sizes);
  /// Frees every block of `model` (its handles go stale). Returns the footprint freed; 0 if unknown.
  uint64_t free_model(std::string_view model);
  /// Whether allocate_model for a model with no blocks here would succeed now. Not const: it runs
  /// that allocation and rolls it back, so the answer is exact; the pool is left as it was.
  bool can_fit(const std::vector<uint64_t>& sizes);

  /// Offset of a live block; nullopt for a stale or foreign handle.
  std::optional<uint64_t> offset_of(BlockHandle handle) const;
  std::optional<BlockInfo> block(BlockHandle handle) const;
  /// Footprint of `model`'s blocks; 0 if it has none.
  uint64_t model_bytes(std::string_view model) const;
  /// What a request of `bytes` takes when it lands in its preferred tier.
  uint64_t footprint(uint64_t bytes) const;

  DeviceMemoryPoolStats stats() const;
  std::vector<PartitionInfo> partitions() const;
  const DeviceMemoryPoolConfig& config() const { return config_; }
  /// Managed bytes: whole partitions only.
  uint64_t capacity() const { return uint64_t{partitions_.size()} * config_.partition_bytes; }
  /// OK, or an internal Error naming the first invariant (header comment) that does not hold.
  /// O(capacity / min_block_bytes + blocks); for tests and debug builds.
  Status check() const;

 private:
  struct Block {
    uint64_t model = 0;  // serial of the owning model
    PartitionKind tier = PartitionKind::irregular;
    uint32_t partition = 0, span = 1;  // first partition touched, partitions touched
    uint64_t offset = 0, bytes = 0, footprint = 0;
  };
  /// Free units, possibly across partitions: [start, start + units) in units from the region's start.
  struct Run {
    uint64_t start = 0, units = 0;
  };
  struct Partition {
    PartitionKind kind = PartitionKind::free;
    uint32_t class_index = 0;
    uint64_t used = 0;
    std::set<uint32_t> free_slots;       // regular: lowest first, so a rollback is exact
    std::optional<BuddyPartition> buddy;  // irregular
    std::map<uint64_t, uint32_t> models;  // model serial -> its blocks touching this partition
  };
  struct Model {
    std::string name;
    uint64_t footprint = 0, requested = 0;
    std::vector<uint64_t> blocks;         // ids
    std::map<uint32_t, uint32_t> partitions;  // partition -> its blocks touching it
  };

  DeviceMemoryPool(uint32_t partitions, DeviceMemoryPoolConfig config);
  /// Places every size (largest first) and appends the ids to the model; on failure rolls back.
  bool place_all(uint64_t model, const std::vector<uint64_t>& sizes, std::vector<uint64_t>& ids);
  /// The new block's id, or nullopt when it fits nowhere (nothing changed then). `remaining`:
  /// footprint of this block and of the model's blocks still to place in this call.
  std::optional<uint64_t> place(uint64_t model, uint64_t bytes, uint64_t remaining);
  std::optional<uint64_t> place_span(uint64_t model, uint64_t bytes);
  std::optional<uint64_t> place_slot(uint64_t model, uint64_t bytes, uint32_t class_index, bool empty_first);
  std::optional<uint64_t> place_buddy(uint64_t model, uint64_t bytes, bool empty_first);
  uint64_t commit(uint64_t model, const Block& block);
  void release(uint64_t id);
  void reset_if_empty(uint32_t p);
  std::optional<uint32_t> pick_free_partition() const;
  std::optional<int> class_for(uint64_t bytes) const;
  uint64_t units_for(uint64_t bytes) const;
  std::vector<Run> spanning_runs() const;
  /// Calls fn(partition, offset in it, bytes) for each partition the block touches, in order.
  template <class Fn>
  void for_each_piece(const Block& b, Fn&& fn) const {
    const uint64_t part = config_.partition_bytes, end = b.offset + b.footprint;
    for (uint32_t p = b.partition; p < b.partition + b.span; ++p) {
      const uint64_t base = uint64_t{p} * part, lo = std::max(b.offset, base), hi = std::min(end, base + part);
      fn(p, lo - base, hi - lo);
    }
  }
  std::string shortage(std::string_view model, const std::vector<uint64_t>& sizes) const;

  DeviceMemoryPoolConfig config_;
  std::vector<Partition> partitions_;
  std::map<uint64_t, Block> blocks_;  // id -> block
  std::map<uint64_t, Model> models_;  // serial -> model
  std::map<std::string, uint64_t, std::less<>> serials_;
  uint64_t next_block_ = 1, next_model_ = 1;
  uint64_t used_ = 0, requested_ = 0;
};

}  // namespace ember::gpu
