// CudaDevice: a gpu::Device on one CUDA GPU (see device.hpp for the contract; SimDevice is the
// model it follows). Internal to the CUDA plugin (libember_cuda.so); ember_gpu sees it only as a
// gpu::Device made by the plugin's create_device.
//
// Memory: create() reserves one block with cudaMalloc (by default 90% of the memory free at that
// moment) and allocate() sub-allocates it with an ArenaAllocator, so allocation never calls
// cudaMalloc, never synchronises, and fails with an out_of_memory Error naming the device, exactly
// like SimDevice. DevicePtr values are real CUDA device addresses inside the reservation.
// Streams are non-blocking cudaStreams, each with its own cuBLAS handle; events are cudaEvents
// without timing. The device has one cuBLAS workspace, carved from the end of the reservation
// (outside what allocate() hands out), shared by all its streams: a stream launching a cuBLAS op
// first waits on the event its last user recorded after its own cuBLAS op (BlasWorkspaceLease).
// One workspace per stream would cost 32 MiB for each executor's stream on Hopper, and a node
// with a few dozen models would lose its activation memory to idle workspaces (seen on an H200). Host waits (Event and
// Stream synchronize) block the thread instead of spinning (cudaEventBlockingSync). Copies use cudaMemcpyAsync; from
// pageable host memory CUDA makes them synchronous with the host (host-to-device returns once the source is staged,
// device-to-host once the copy is done).
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
  /// The device's cuBLAS workspace, bytes, carved from the end of the reservation. 0 (default) =
  /// cuBLAS's recommendation: 32 MiB on compute capability 9.0 and newer, 4 MiB before. When it
  /// would take more than a quarter of the reservation, cuBLAS runs without one (slower
  /// algorithms, same results).
  uint64_t blas_workspace_bytes = 0;
  /// How a host thread waits for the GPU (Stream::synchronize, Event::synchronize). false
  /// (default): it sleeps in the driver (cudaEventBlockingSync), sparing a core per waiter; true:
  /// it spins, answering sooner (the driver's wake-up costs tens of microseconds) at the cost of
  /// a busy core while it waits.
  bool spin_waits = false;
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
  /// The reservation allocate() hands out: its first device address and its bytes.
  uint64_t memory_base() const { return reinterpret_cast<uintptr_t>(base_); }
  uint64_t memory_capacity() const { return capacity_; }
  /// The shared cuBLAS workspace (nullptr, 0 when the reservation had no room for it).
  void* blas_workspace() const { return blas_workspace_; }
  uint64_t blas_workspace_bytes() const { return blas_workspace_bytes_; }
  /// The flags of the events host threads wait on (CudaDeviceConfig::spin_waits).
  unsigned wait_event_flags() const { return wait_event_flags_; }

  /// Holds the device's cuBLAS workspace for one launch on `stream`: on construction the stream
  /// waits for the last cuBLAS op of another stream (nothing to wait for when the last user was
  /// this stream: stream order suffices); on destruction it records that the workspace is free
  /// once this stream's work so far is done. Launches on different streams of one device are
  /// enqueued one at a time while a lease is held. Failures fault the device (check).
  class BlasWorkspaceLease {
   public:
    BlasWorkspaceLease(CudaDevice& device, cudaStream_t stream);
    ~BlasWorkspaceLease();
    BlasWorkspaceLease(const BlasWorkspaceLease&) = delete;
    BlasWorkspaceLease& operator=(const BlasWorkspaceLease&) = delete;

   private:
    CudaDevice& device_;
    cudaStream_t stream_;
    std::lock_guard<std::mutex> lock_;
  };

 private:
  CudaDevice(uint32_t ordinal, std::string name, uint8_t* base, uint64_t reserved_bytes, uint64_t blas_workspace,
             bool spin_waits);

  const int ordinal_;
  const unsigned wait_event_flags_;
  DeviceInfo info_;
  uint8_t* const base_;  // cudaMalloc'd reservation
  const uint64_t blas_workspace_bytes_;  // 0 when there is no workspace
  void* const blas_workspace_;           // the reservation's last blas_workspace_bytes_, or nullptr
  std::shared_ptr<FaultRecord> faults_;

  std::mutex blas_mu_;                     // held by a BlasWorkspaceLease
  cudaEvent_t blas_free_ = nullptr;        // recorded after the last cuBLAS op; guarded by blas_mu_
  cudaStream_t blas_last_user_ = nullptr;  // the stream that recorded it; guarded by blas_mu_

  mutable std::mutex alloc_mu_;
  ArenaAllocator allocator_;  // guarded by alloc_mu_
  const uint64_t capacity_;   // allocator_.capacity(), readable without the lock
  HostRanges registered_;     // this device's register_host ranges
};

/// "cudaMalloc failed: out of memory (cudaErrorMemoryAllocation = 2)".
std::string cuda_error_text(const char* what, cudaError_t e);

}  // namespace ember::gpu::cuda
