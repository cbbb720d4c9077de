// SimDevice: a device emulated on the CPU that behaves like a CUDA device (see device.hpp).
//
// Memory is a separate arena of the configured capacity, reserved with mmap(MAP_NORESERVE) so
// only touched pages cost host RAM; allocations are managed by an ArenaAllocator and fail with
// out_of_memory past the capacity. Each Stream is one worker thread running its queue in order;
// kernels are the CPU kernels (kernels_cpu.hpp) using the configured number of threads. Copies
// between host and device go through one copy engine per direction, as on a GPU, paced at the
// configured PCIe bandwidth when one is set. Every address a copy or kernel touches is checked
// against the arena: a stray one faults the device, and faults are sticky.
//
// Threading: as device.hpp. Streams and events must not outlive their device.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "config/device_config.hpp"
#include "gpu/arena_allocator.hpp"
#include "gpu/device.hpp"

namespace ember::gpu {

class SimDevice final : public Device {
 public:
  static Result<std::unique_ptr<SimDevice>> create(const SimDeviceConfig& config, uint32_t ordinal);
  ~SimDevice() override;

  const DeviceInfo& info() const override { return info_; }
  Result<DevicePtr> allocate(uint64_t bytes) override;
  void free(DevicePtr ptr) override;
  MemoryInfo memory() const override;
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  Status status() const override;

  const SimDeviceConfig& config() const { return config_; }

  /// Test seam: the (n+1)-th kernel launched from now on faults the device instead of running.
  void TEST_fail_after_kernels(uint64_t n);

  // -- used by SimDevice's streams ---------------------------------------------------------

  /// Host address of [ptr, ptr + bytes), or nullptr after recording an illegal-address fault.
  uint8_t* resolve(DevicePtr ptr, uint64_t bytes, const char* what);
  /// Records the first fault; later ones are dropped.
  void fault(std::string message);
  bool faulted() const { return faulted_.load(std::memory_order_acquire); }
  /// Called before each kernel; false when the kernel must not run (fault injected or present).
  bool admit_kernel();
  /// Copy engine lock and pacing for one direction (0: to device, 1: to host).
  std::mutex& copy_engine(int direction) { return copy_engine_[direction]; }
  double pcie_bytes_per_s() const { return config_.pcie_bytes_per_s; }
  uint32_t compute_threads() const { return compute_threads_; }

 private:
  SimDevice(const SimDeviceConfig& config, uint32_t ordinal, uint8_t* arena, uint64_t mapped);

  const SimDeviceConfig config_;
  DeviceInfo info_;
  uint8_t* const arena_;
  const uint64_t mapped_bytes_;
  uint32_t compute_threads_;

  mutable std::mutex alloc_mu_;
  ArenaAllocator allocator_;  // guarded by alloc_mu_

  std::atomic<bool> faulted_{false};
  mutable std::mutex fault_mu_;
  std::string fault_message_;  // guarded by fault_mu_
  std::atomic<int64_t> kernels_until_fault_{-1};

  std::mutex copy_engine_[2];
};

}  // namespace ember::gpu
