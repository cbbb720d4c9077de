// PinnedStaging: one region of page-locked host memory per device through which copies from and to
// pageable host memory pass (StreamBox §7: "pageable sources staged through one shared pinned
// ring"). A request's inputs, a kept value restored from host memory, and a run's outputs live in
// ordinary (pageable) memory; a copy engine moves pageable memory at a fraction of its pinned rate
// (the driver stages it itself, synchronously), while the model weights, registered once each, run
// at full rate. Here an upload is a host memcpy into the region and an asynchronous copy from
// there, chunk by chunk so that the memcpy of one overlaps the copy of the one before; a chunk's
// room comes back when the stream has done its copy (Stream::then). A download lands in the region
// and is copied out once the caller's synchronize returned.
//
// The region is shared by every stream of the device, so it is carved first fit (ArenaAllocator),
// not used strictly as a ring: copies of concurrent streams complete out of order. A copy that
// finds no room, or a source already pinned, goes directly as before: staging never waits.
//
// Thread-safe. It must outlive the copies staged through it: the destructor waits until each
// staged upload's room came back (the device's streams run them), then unregisters the region.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/status.hpp"
#include "gpu/arena_allocator.hpp"
#include "gpu/device.hpp"

namespace ember::gpu {

class PinnedStaging {
 public:
  /// Uploads are staged in chunks of at most this: the stream copies one while the caller fills
  /// the next (the host memcpy and the link overlap, as a driver's own staging does).
  static constexpr uint64_t kChunkBytes = 1ull << 20;

  /// `bytes` of host memory registered with `device` (0 is invalid_argument).
  static Result<std::unique_ptr<PinnedStaging>> create(Device& device, uint64_t bytes);
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  /// stream.copy_to_device(dst, src, bytes), through the region when `src` is not pinned and the
  /// region has room. `src` must stay valid until the stream has done the copy, as for
  /// Stream::copy_to_device (a staged copy reads it before this returns).
  void copy_to_device(Stream& stream, DevicePtr dst, const void* src, uint64_t bytes);

  /// Downloads of one synchronisation, on one stream: copy_to_host() queues each, finish() (after
  /// the stream's synchronize returned OK) copies the staged ones out and gives their room back.
  /// When finish() was not called (an error on the way), the destructor waits for the stream and
  /// gives the room back without copying.
  class Downloads {
   public:
    explicit Downloads(PinnedStaging* staging) : staging_(staging) {}
    ~Downloads();
    Downloads(const Downloads&) = delete;
    Downloads& operator=(const Downloads&) = delete;
    /// stream.copy_to_host(dst, src, bytes), through the region when there is room (a null staging: directly).
    void copy_to_host(Stream& stream, void* dst, DevicePtr src, uint64_t bytes);
    void finish();

   private:
    struct Staged {
      void* dst;
      uint64_t offset, bytes;
    };
    PinnedStaging* staging_;
    Stream* stream_ = nullptr;  // the stream of the staged copies
    std::vector<Staged> staged_;
  };

  struct Stats {
    uint64_t staged = 0, staged_bytes = 0;  // copies (upload chunks) through the region, both ways
    uint64_t direct = 0;                    // pageable copies that found no room and went directly
    uint64_t peak_bytes = 0;                // of the region in use at once
  };
  Stats stats() const;
  uint64_t capacity() const { return arena_.capacity(); }

 private:
  PinnedStaging(Device& device, uint64_t bytes);
  /// Room for `bytes`, or nullopt (counted as a direct copy).
  std::optional<uint64_t> take(uint64_t bytes);
  void give(uint64_t offset);

  Device& device_;
  std::unique_ptr<uint8_t[]> region_;
  mutable std::mutex mu_;
  std::condition_variable returned_;
  ArenaAllocator arena_;      // guarded by mu_
  uint64_t outstanding_ = 0;  // guarded by mu_: blocks handed out, not yet given back
  Stats stats_;               // guarded by mu_
};

/// stream.copy_to_device(dst, src, bytes), through `staging` when there is one (may be null).
void copy_in(Stream& stream, PinnedStaging* staging, DevicePtr dst, const void* src, uint64_t bytes);

}  // namespace ember::gpu
