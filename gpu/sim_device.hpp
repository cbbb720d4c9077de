// SimDevice: a device emulated on the CPU that behaves like a CUDA device (see device.hpp).
//
// Memory is a separate arena of the configured capacity, reserved with mmap(MAP_NORESERVE) so
// only touched pages cost host RAM (in huge pages where the kernel grants them: MADV_HUGEPAGE);
// allocations are managed by an ArenaAllocator and fail with out_of_memory past the capacity. Each Stream is one worker thread running its queue in order
// (sim_stream.hpp); kernels are the CPU kernels (kernels_cpu.hpp) using the configured number of
// threads. Every address a copy or kernel touches is checked against the arena: a stray one faults
// the device, and faults are sticky.
//
// Copies emulate a node's links (config: SimDeviceConfig, DevicesConfig's topology):
//   - one copy engine per host direction (to device, to host) and one for incoming peer copies,
//     each running one copy at a time, so a peer copy overlaps a host copy as on a GPU;
//   - host copies are paced at pcie_bytes_per_s from registered (register_host) memory and at
//     pageable_bytes_per_s otherwise, and also through the SwitchUplink shared with the devices
//     behind the same PCIe switch, so neighbours copying at once share its bandwidth;
//   - peer copies are paced at peer_bytes_per_s[source ordinal] over the direct link (never the
//     uplink); without one they go "through the host": at the slower PCIe rate of the two ends
//     and through the source's uplink (to host) and this device's (to device).
// Pacing sleeps (LinkPacer); it never spins a core the kernels need.
// Compute takes the wall time the kernels take on the host (streams in turn, kernel by kernel, on
// the device's compute threads), or, with compute_dilation k > 0, the
// device's ComputeClock: each kernel occupies the device for k times its host CPU time, so that
// devices emulated on fewer cores than devices stay independent of each other (compute_clock.hpp).
//
// Threading: as device.hpp. Streams and events must not outlive their device; the source device of
// a peer copy must outlive the copy.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "config/device_config.hpp"
#include "gpu/arena_allocator.hpp"
#include "gpu/compute_clock.hpp"
#include "gpu/device.hpp"
#include "gpu/host_ranges.hpp"
#include "gpu/link_pacer.hpp"

namespace ember::gpu {

class SimDevice final : public Device {
 public:
  /// A device with its own PCIe switch: its uplink runs at config.pcie_bytes_per_s.
  static Result<std::unique_ptr<SimDevice>> create(const SimDeviceConfig& config, uint32_t ordinal);
  /// A device behind a switch whose `uplink` it shares with its neighbours (open_devices makes one
  /// per pcie_switch id). Null: its own, as above.
  static Result<std::unique_ptr<SimDevice>> create(const SimDeviceConfig& config, uint32_t ordinal,
                                                   std::shared_ptr<SwitchUplink> uplink);
  ~SimDevice() override;

  const DeviceInfo& info() const override { return info_; }
  Result<DevicePtr> allocate(uint64_t bytes) override;
  void free(DevicePtr ptr) override;
  MemoryInfo memory() const override;
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  Status status() const override;
  Status register_host(const void* ptr, uint64_t bytes) override;
  void unregister_host(const void* ptr) override;
  bool host_registered(const void* ptr, uint64_t bytes) const override;

  const SimDeviceConfig& config() const { return config_; }
  /// The most device memory allocated at once since the device opened or the last reset_peak()
  /// (benchmarks: what a set of runs needed).
  uint64_t peak_used_bytes() const;
  void reset_peak();
  const std::shared_ptr<SwitchUplink>& uplink() const { return uplink_; }

  /// Test seam: the (n+1)-th kernel launched from now on faults the device instead of running.
  void TEST_fail_after_kernels(uint64_t n);
  /// Test seam: how many SimDevices of this ordinal exist in the process now (a restart must close
  /// the old device before it opens the new one, as a real device's memory is shared by both).
  static uint32_t TEST_open_on_ordinal(uint32_t ordinal);

  // -- used by SimDevice's streams (and by peers' streams: translate) -------------------------

  /// Host address of [ptr, ptr + bytes), or nullptr after recording an illegal-address fault.
  uint8_t* resolve(DevicePtr ptr, uint64_t bytes, const char* what);
  /// Host address of [ptr, ptr + bytes), or nullptr when it is outside this device's memory.
  /// Records nothing: a peer reading from this device faults itself, not this device.
  uint8_t* translate(DevicePtr ptr, uint64_t bytes) const;
  /// Records the first fault; later ones are dropped.
  void fault(std::string message);
  bool faulted() const { return faulted_.load(std::memory_order_acquire); }
  /// Called before each kernel; false when the kernel must not run (fault injected or present).
  bool admit_kernel();
  /// Copy engine locks: 0 host to device, 1 device to host, 2 incoming peer copies.
  enum CopyEngine { kToDevice = 0, kToHost = 1, kFromPeer = 2 };
  FifoMutex& copy_engine(CopyEngine engine) { return copy_engine_[engine]; }
  /// Rate of a copy between this device and [host, host + bytes): pinned when registered,
  /// pageable otherwise. Bytes/s; 0 = unthrottled.
  double host_bytes_per_s(const void* host, uint64_t bytes) const;
  /// The device's own PCIe lane for a host copy in `engine`'s direction from or to this host memory
  /// (pinned and pageable memory run at different rates). One per direction and kind, kept across
  /// copies, so back-to-back copies continue the lane's busy period instead of each paying a sleep's
  /// overshoot (which would make small copies look slow, and the measured copy elbow large).
  LinkPacer& host_lane(CopyEngine engine, const void* host, uint64_t bytes);
  /// Direct-link rate from peer `ordinal`, bytes/s; 0 = no direct link.
  double peer_bytes_per_s(uint32_t ordinal) const;
  /// The direct link from peer `ordinal` (peer_bytes_per_s(ordinal) > 0), kept across copies like
  /// host_lane, so a swap's many per-layer copies do not each pay a sleep's overshoot. Call while
  /// holding the kFromPeer copy engine.
  LinkPacer& peer_lane(uint32_t ordinal);
  uint32_t compute_threads() const { return compute_threads_; }
  /// The device's compute timeline (enabled when config.compute_dilation > 0).
  ComputeClock& compute_clock() { return compute_clock_; }
  /// The device's compute threads, taken by one kernel at a time in launch order (without a
  /// dilation): concurrent streams share them, kernel by kernel, as a GPU's streams share its SMs.
  FifoMutex& compute() { return compute_; }

  /// Copies this device's streams made so far, by direction (what tests count: a workflow's hand-off
  /// on one device copies nothing to the host but its answer).
  struct CopyCounts {
    uint64_t to_device = 0, to_host = 0, on_device = 0, from_peer = 0;
    uint64_t to_host_bytes = 0;
    uint64_t to_device_bytes = 0;
    /// Bytes of host copies (either way) from or to memory not registered (pageable).
    uint64_t pageable_bytes = 0;
  };
  CopyCounts copy_counts() const {
    return {to_device_.load(),     to_host_.load(),         on_device_.load(),     from_peer_.load(),
            to_host_bytes_.load(), to_device_bytes_.load(), pageable_bytes_.load()};
  }
  void count_copy(CopyEngine engine, uint64_t bytes, bool pageable = false) {
    if (pageable) pageable_bytes_ += bytes;
    if (engine == kToDevice) {
      ++to_device_;
      to_device_bytes_ += bytes;
    }
    if (engine == kFromPeer) ++from_peer_;
    if (engine == kToHost) {
      ++to_host_;
      to_host_bytes_ += bytes;
    }
  }
  void count_copy_on_device() { ++on_device_; }

 private:
  SimDevice(const SimDeviceConfig& config, uint32_t ordinal, uint8_t* arena, uint64_t mapped,
            std::shared_ptr<SwitchUplink> uplink);

  const SimDeviceConfig config_;
  DeviceInfo info_;
  uint8_t* const arena_;
  const uint64_t mapped_bytes_;
  uint32_t compute_threads_;
  const std::shared_ptr<SwitchUplink> uplink_;  // never null
  HostRanges registered_;

  mutable std::mutex alloc_mu_;
  ArenaAllocator allocator_;  // guarded by alloc_mu_
  uint64_t peak_used_ = 0;    // guarded by alloc_mu_

  std::atomic<bool> faulted_{false};
  mutable std::mutex fault_mu_;
  std::string fault_message_;  // guarded by fault_mu_
  std::atomic<int64_t> kernels_until_fault_{-1};

  ComputeClock compute_clock_;
  FifoMutex compute_;
  std::atomic<uint64_t> to_device_{0}, to_host_{0}, on_device_{0}, from_peer_{0}, to_host_bytes_{0}, to_device_bytes_{0},
      pageable_bytes_{0};
  FifoMutex copy_engine_[3];
  std::unique_ptr<LinkPacer> lanes_[2][2];  // [to device, to host][pinned, pageable]
  std::map<uint32_t, std::unique_ptr<LinkPacer>> peer_lanes_;  // by source ordinal; kFromPeer engine's holder
};

}  // namespace ember::gpu
