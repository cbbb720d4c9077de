// The swap pipeline's group size: the elbow of a device's host-to-device copy throughput against
// copy size (Torpor §4.3: throughput rises with size, then flattens; ~2 MB on PCIe 3). Measured
// once per device when its executor starts, so no model structure or per-model profile is needed.
//
// Blocking (it copies and waits); call it from the executor's start-up, never from an actor handler.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "gpu/device.hpp"

namespace ember::gpu {

struct CopyElbow {
  /// The smallest size whose throughput reaches `fraction` of the best measured.
  uint64_t elbow_bytes = 0;
  /// (size, GB/s) for each size measured, ascending: back-to-back copies of that size, with the
  /// cost of the synchronize that ends each round taken out.
  std::vector<std::pair<uint64_t, double>> curve;
  /// What a synchronize of an idle stream took (best of several), seconds: subtracted from each
  /// round.
  double synchronize_s = 0;
};

/// Copies sizes 64 KiB, 128 KiB, ... up to min(largest, scratch_bytes) from pinned (registered)
/// host memory into `scratch` on `device`, about `bytes_per_size` per size and round (best of 3
/// rounds), and finds the elbow.
///
/// A round's time is its copies plus one synchronize, whose cost is fixed (a host thread's wake-up):
/// left in, it weighs on rounds of fewer bytes, and sizes above bytes_per_size (one copy, more
/// bytes per round) look faster than they are, which put the elbow at 32 MiB on an H200 where a
/// long probe finds 2 MiB. So the synchronize of an idle stream is measured first and subtracted:
/// the curve is that of copies queued back to back, as the swap pipeline queues them.
/// `scratch` is device memory the caller owns, of `scratch_bytes`; its contents are overwritten.
Result<CopyElbow> measure_copy_elbow(Device& device, DevicePtr scratch, uint64_t scratch_bytes,
                                     uint64_t largest = 64ull << 20, uint64_t bytes_per_size = 64ull << 20,
                                     double fraction = 0.9);

}  // namespace ember::gpu
