#include "gpu/copy_elbow.hpp"

#include <algorithm>
#include <chrono>

#include "model/host_buffer.hpp"

namespace ember::gpu {

Result<CopyElbow> measure_copy_elbow(Device& device, DevicePtr scratch, uint64_t scratch_bytes, uint64_t largest,
                                     uint64_t bytes_per_size, double fraction) {
  constexpr uint64_t kSmallest = 64 << 10;
  largest = std::min(largest, scratch_bytes);
  if (largest < kSmallest) return invalid_argument("the copy-elbow probe needs at least 64 KiB of device memory");
  EMBER_ASSIGN_OR_RETURN(auto host, HostBuffer::allocate(largest));
  EMBER_RETURN_IF_ERROR(device.register_host(host->data(), host->size()));
  auto stream = device.create_stream();
  CopyElbow out;
  Status status = Status::OK();
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  // The fixed cost of a synchronize: best of a few on the idle stream (after one copy, so that a
  // first use's set-up is not counted).
  stream->copy_to_device(scratch, host->data(), kSmallest);
  status = stream->synchronize();
  out.synchronize_s = 1.0;
  for (int i = 0; i < 5 && status.ok(); ++i) {
    const auto t0 = Clock::now();
    status = stream->synchronize();
    out.synchronize_s = std::min(out.synchronize_s, seconds_since(t0));
  }
  // Best of three rounds per size: a shared host's hiccups only ever make a size look slower, and a
  // size that looks slower by accident would push the elbow up (larger groups, less overlap).
  for (uint64_t size = kSmallest; size <= largest && status.ok(); size *= 2) {
    const uint64_t copies = std::max<uint64_t>(1, bytes_per_size / size);
    double best = 0;
    for (int round = 0; round < 3 && status.ok(); ++round) {
      const auto t0 = Clock::now();
      for (uint64_t i = 0; i < copies; ++i) stream->copy_to_device(scratch, host->data(), size);
      status = stream->synchronize();
      const double raw = seconds_since(t0);
      const double s = std::max(raw - out.synchronize_s, raw / 2);  // never more than half: noise
      best = std::max(best, static_cast<double>(size * copies) / std::max(s, 1e-9) / 1e9);
    }
    out.curve.push_back({size, best});
  }
  device.unregister_host(host->data());
  EMBER_RETURN_IF_ERROR(status);
  double peak = 0;
  for (const auto& [size, gbps] : out.curve) peak = std::max(peak, gbps);
  out.elbow_bytes = out.curve.back().first;
  for (const auto& [size, gbps] : out.curve) {
    if (gbps >= fraction * peak) {
      out.elbow_bytes = size;
      break;
    }
  }
  return out;
}

}  // namespace ember::gpu
