// CudaDevice: a gpu::Device on one CUDA GPU (see device.hpp for the contract; SimDevice is the
// model it follows). Internal to the CUDA plugin (libember_cuda.so); ember_gpu sees it only as a
// gpu::Device made by the plugin's create_device.
//
// Memory: create() reserves one block with cudaMalloc (by default 90% of the memory free at that
// moment) and allocate() sub-allocates it with an ArenaAllocator, so allocation never calls
// cudaMalloc, never synchronises, and fails with an out_of_memory Error naming the device, exactly
// like SimDevice. DevicePtr values are real CUDA device addresses inside the reservation.
// Streams are non-blocking cudaStreams, each with its own cuBLAS handle and a cuBLAS workspace
// taken from the reservation; events are cudaEvents without timing. Host waits (Event and Stream
// synchronize) block the thread instead of spinning (cudaEventBlockingSync). Copies use
// cudaMemcpyAsync; from pageable host memory CUDA makes them synchronous with the host
// (host-to-device returns once the source is staged, device-to-host once the copy is done).
//
// Peers: create() enables direct access to every other GPU for which cudaDeviceCanAccessPeer says
// so (NVLink or PCIe P2P); copy_from_peer is cudaMemcpyPeerAsync, which without peer access is
// still correct, staged by CUDA through host memory.
//
// Host registration: register_host is cudaHostRegister(cudaHostRegisterPortable), which pins the
// pages for every device of the process at once, and CUDA refuses to register pages twice. Since
// each device's executor registers the same model bytes, the plugin counts registrations of a
// range across its devices and calls cudaHostRegister for the first, cudaHostUnregister for the
// last; a range that overlaps one pinned by another device without being inside it is refused
// (invalid_argument). Each device also keeps its own ranges (host_registered answers from them)
// and releases those still registered when it is destroyed.
//
// Faults are sticky, as on SimDevice: the first failing CUDA or cuBLAS call, the first error CUDA
// reports asynchronously (at a synchronize, an event query or a host callback), or an address
// outside the reservation is recorded, and status() and every synchronize report it until the
// device is destroyed. After a fault, copies and kernels are no longer enqueued; record, wait,
// then and synchronize still work as far as CUDA allows, so no waiter hangs.
//
// Threading: as device.hpp. Every call makes this device current on the calling thread
// (cudaSetDevice) before using CUDA, so one thread may drive several devices. Streams and events
// must be destroyed before their device. Stream::then callbacks run on CUDA's callback thread,
// where CUDA forbids CUDA calls: a callback must not use a CUDA device's Stream or Event (it
// should post a message and return), and while it runs, later work on its stream waits.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "gpu/arena_allocator.hpp"
#include "gpu/device.hpp"
#include "gpu/host_ranges.hpp"

namespace ember::gpu::cuda {

struct CudaDeviceConfig {
  /// Device memory reserved at creation for allocate(), as a fraction of the memory free on the
  /// GPU at that moment, in (0, 1]. Default 0.9: the rest stays for the CUDA context, cuBLAS's
  /// handles and other processes. Raising it risks cuBLAS or CUDA itself running out of memory.
  double memory_fraction = 0.9;
  /// When non-zero, reserve exactly this many bytes instead of a fraction; creation fails with
  /// out_of_memory when they are not free. Default 0.
  uint64_t memory_bytes = 0;
  /// cuBLAS workspace per stream, bytes, taken from the reservation. 0 (default) = cuBLAS's
  /// recommendation: 32 MiB on compute capability 9.0 and newer, 4 MiB before. A stream whose
  /// workspace does not fit runs cuBLAS without one (slower algorithms, same results).
  uint64_t blas_workspace_bytes = 0;
};

/// The first fault of a device. Shared (not owned) by the device and the host callbacks in flight
/// on its streams, so a callback that CUDA runs late never touches a destroyed device.
class FaultRecord {
 public:
  explicit FaultRecord(std::string device_name) : device_name_(std::move(device_name)) {}
  /// Records `message` if nothing was recorded yet.
  void record(std::string message);
  bool faulted() const { return faulted_.load(std::memory_order_acquire); }
  /// OK, or device_fault("<device name>: <first message>").
  Status status() const;

 private:
  const std::string device_name_;
  std::atomic<bool> faulted_{false};
  mutable std::mutex mu_;
  std::string message_;  // guarded by mu_
};

class CudaDevice final : public Device {
 public:
  /// Opens GPU `ordinal` and reserves its memory. Errors: not_found (no such ordinal),
  /// unsupported (no kernel image for this GPU's architecture), out_of_memory (reservation),
  /// device_fault (any other CUDA failure). Messages name the device.
  static Result<std::unique_ptr<CudaDevice>> create(const CudaDeviceConfig& config, uint32_t ordinal);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const DeviceInfo& info() const override { return info_; }
  Result<DevicePtr> allocate(uint64_t bytes) override;
  void free(DevicePtr ptr) override;
  MemoryInfo memory() const override;
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  Status status() const override { return faults_->status(); }
  Status register_host(const void* ptr, uint64_t bytes) override;
  void unregister_host(const void* ptr) override;
  bool host_registered(const void* ptr, uint64_t bytes) const override { return registered_.contains(ptr, bytes); }

  // -- used by this device's streams and events -----------------------------------------------

  /// Makes this device current on the calling thread; false after recording a fault.
  bool make_current();
  /// True when `e` is cudaSuccess; otherwise records "<what>: <CUDA's message>" and returns false.
  bool check(cudaError_t e, const char* what);
  bool check(cublasStatus_t s, const char* what);
  void fault(std::string message) { faults_->record(std::move(message)); }
  bool faulted() const { return faults_->faulted(); }
  const std::shared_ptr<FaultRecord>& faults() const { return faults_; }
  /// Device address of [ptr, ptr + bytes), or nullptr after recording an illegal-address fault
  /// when the range is not inside the reservation.
  void* resolve(DevicePtr ptr, uint64_t bytes, const char* what);
  /// Device address of [ptr, ptr + bytes), or nullptr when it is outside the reservation. Records
  /// nothing: a peer copying from this device faults the peer, not this device.
  void* translate(DevicePtr ptr, uint64_t bytes) const;
  /// The CUDA device ordinal (cudaSetDevice's argument).
  int cuda_ordinal() const { return ordinal_; }
  uint64_t blas_workspace_bytes() const { return blas_workspace_bytes_; }

 private:
  CudaDevice(uint32_t ordinal, std::string name, uint8_t* base, uint64_t reserved_bytes, uint64_t blas_workspace);

  const int ordinal_;
  DeviceInfo info_;
  uint8_t* const base_;  // cudaMalloc'd reservation
  const uint64_t blas_workspace_bytes_;
  std::shared_ptr<FaultRecord> faults_;

  mutable std::mutex alloc_mu_;
  ArenaAllocator allocator_;  // guarded by alloc_mu_
  const uint64_t capacity_;   // allocator_.capacity(), readable without the lock
  HostRanges registered_;     // this device's register_host ranges
};

/// "cudaMalloc failed: out of memory (cudaErrorMemoryAllocation = 2)".
std::string cuda_error_text(const char* what, cudaError_t e);

}  // namespace ember::gpu::cuda
