// ActivationPool: the activation memory that a device's concurrent runs share (StreamBox §3.2,
// Algorithm 1), on top of the device memory an executor leaves outside its model pool.
//
// A run's activations (its liveness plan's block, and the values it returns) come first from the
// device's own free memory (the workspace: the fixed floor). When that has no room, the pool grows
// lazily: it reserves one more segment, in whole chunks of the executor's model pool (the `grow`
// callback; a segment at least as large as the request), and carves buffers out of its segments
// first fit. A buffer goes back where it came from when its last holder lets go (release after last
// use, by the liveness plan's lifetimes); a segment left empty goes back to the model pool at once
// (eager shrink), so weights get the room again as soon as the burst that took it is over.
//
// Thread-safe. Lock order: this pool's lock, then whatever grow and shrink take. It must outlive
// every buffer it handed out (the executor keeps it until its models and kept values are gone); the
// destructor returns every segment.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "base/status.hpp"
#include "gpu/arena_allocator.hpp"
#include "gpu/device.hpp"

namespace ember::gpu {

/// Device memory lent to the pool: [base, base + bytes), named by `id` for its return.
struct ActivationSegment {
  uint64_t id = 0;
  DevicePtr base{};
  uint64_t bytes = 0;
};

class ActivationPool {
 public:
  /// Reserves a segment of at least `bytes`, or an error (out_of_memory when the model pool has no
  /// room either).
  using Grow = std::function<Result<ActivationSegment>(uint64_t bytes)>;
  /// Gives a segment back (it is empty).
  using Shrink = std::function<void(const ActivationSegment&)>;

  ActivationPool(Device& device, Grow grow, Shrink shrink)
      : device_(device), grow_(std::move(grow)), shrink_(std::move(shrink)) {}
  ~ActivationPool();
  ActivationPool(const ActivationPool&) = delete;
  ActivationPool& operator=(const ActivationPool&) = delete;

  /// A buffer of `bytes` (see the header); out_of_memory when neither the device nor the model
  /// pool has room.
  Result<std::shared_ptr<DeviceBuffer>> allocate(uint64_t bytes);

  struct Stats {
    uint64_t segments = 0;        // reserved now
    uint64_t reserved_bytes = 0;  // now
    uint64_t peak_reserved_bytes = 0;
    uint64_t grows = 0, shrinks = 0;
    uint64_t buffers_in_segments = 0;  // handed out now, beyond the workspace
  };
  Stats stats() const;

 private:
  struct Segment {
    ActivationSegment lent;
    ArenaAllocator arena;
    uint64_t buffers = 0;
  };
  void release(uint64_t segment, DevicePtr ptr);

  Device& device_;
  Grow grow_;
  Shrink shrink_;
  mutable std::mutex mu_;
  std::map<uint64_t, Segment> segments_;  // guarded by mu_, by id
  uint64_t reserved_ = 0;                 // guarded by mu_: the segments' bytes
  Stats stats_;                           // guarded by mu_: the counters (the rest is derived)
};

}  // namespace ember::gpu
