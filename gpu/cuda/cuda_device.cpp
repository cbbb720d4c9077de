#include "gpu/cuda/cuda_device.hpp"

#include <cassert>
#include <cstdio>
#include <map>
#include <mutex>

#include "base/units.hpp"
#include "gpu/cuda/cuda_kernels.hpp"
#include "gpu/cuda/cuda_stream.hpp"

#ifndef EMBER_CUDA_ARCHITECTURES
#define EMBER_CUDA_ARCHITECTURES "?"
#endif

namespace ember::gpu::cuda {

namespace {

constexpr uint64_t kReserveGranularity = 2ull << 20;  // the reservation is a whole number of 2 MiB pages

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Host ranges pinned with cudaHostRegister in this process, and how many devices registered each
// (by start address). Function-local so that it exists before any device and outlives them all.
struct ProcessPins {
  std::mutex mu;
  HostRanges ranges;
  std::map<const void*, int> users;  // guarded by mu
};

ProcessPins& process_pins() {
  static ProcessPins pins;
  return pins;
}

// Drops one device's registration of the range at `ptr`; the last one unpins it. Failures (a
// context already lost) are ignored: there is nothing left to undo. Caller holds pins.mu.
void release_pin(ProcessPins& pins, const void* ptr) {
  auto it = pins.users.find(ptr);
  if (it == pins.users.end() || --it->second > 0) return;
  pins.users.erase(it);
  pins.ranges.remove(ptr);
  if (cudaHostUnregister(const_cast<void*>(ptr)) != cudaSuccess) (void)cudaGetLastError();
}

// Gives every other GPU that allows it direct access from `dev` (the current device), so that
// cudaMemcpyPeerAsync into `dev` reads the peer over NVLink or PCIe P2P. Best effort: without it
// CUDA stages peer copies through host memory, slower but correct.
void enable_peer_access(int dev, int count) {
  for (int peer = 0; peer < count; ++peer) {
    int can = 0;
    if (peer == dev || cudaDeviceCanAccessPeer(&can, dev, peer) != cudaSuccess || !can) continue;
    (void)cudaDeviceEnablePeerAccess(peer, 0);  // cudaErrorPeerAccessAlreadyEnabled after a reopen
  }
  (void)cudaGetLastError();
}

}  // namespace

std::string cuda_error_text(const char* what, cudaError_t e) {
  return std::string(what) + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + " = " +
         std::to_string(static_cast<int>(e)) + ")";
}

void FaultRecord::record(std::string message) {
  std::lock_guard lock(mu_);
  if (faulted_.load(std::memory_order_relaxed)) return;
  message_ = std::move(message);
  faulted_.store(true, std::memory_order_release);
}

Status FaultRecord::status() const {
  if (!faulted()) return Status::OK();
  std::lock_guard lock(mu_);
  return device_fault(device_name_ + ": " + message_);
}

Result<std::unique_ptr<CudaDevice>> CudaDevice::create(const CudaDeviceConfig& config, uint32_t ordinal) {
  const std::string id = "cuda:" + std::to_string(ordinal);
  if (!(config.memory_fraction > 0 && config.memory_fraction <= 1)) {
    return invalid_argument(id + ": memory fraction " + std::to_string(config.memory_fraction) +
                            " is outside (0, 1]");
  }
  // Errors below are reported as values; clear CUDA's per-thread "last error" so that a later
  // launch check on this thread does not pick up a failure that was already handled here.
  auto fail = [](Error error) {
    (void)cudaGetLastError();
    return error;
  };
  int count = 0;  // not written when the call fails (../shared/dependencies.md §6)
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    return fail(device_fault(id + ": " + cuda_error_text("cudaGetDeviceCount", e)));
  }
  if (ordinal >= static_cast<uint32_t>(count)) {
    return not_found(id + ": no such CUDA device (" + std::to_string(count) + " present)");
  }
  const int dev = static_cast<int>(ordinal);
  if (cudaError_t e = cudaSetDevice(dev); e != cudaSuccess) {
    return fail(device_fault(id + ": " + cuda_error_text("cudaSetDevice", e)));
  }
  enable_peer_access(dev, count);
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, dev); e != cudaSuccess) {
    return fail(device_fault(id + ": " + cuda_error_text("cudaGetDeviceProperties", e)));
  }
  const std::string name = id + " (" + prop.name + ")";
  if (cudaError_t e = probe_kernel_image(); e != cudaSuccess) {
    return fail(unsupported(name + ": compute capability " + std::to_string(prop.major) + "." +
                            std::to_string(prop.minor) + " cannot run this plugin's kernels, built for "
                            "CUDA architectures " EMBER_CUDA_ARCHITECTURES ": " +
                            cuda_error_text("cudaFuncGetAttributes", e)));
  }

  size_t free_bytes = 0, total_bytes = 0;
  if (cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes); e != cudaSuccess) {
    return fail(device_fault(name + ": " + cuda_error_text("cudaMemGetInfo", e)));
  }
  const uint64_t reserve =
      config.memory_bytes
          ? config.memory_bytes
          : static_cast<uint64_t>(static_cast<double>(free_bytes) * config.memory_fraction) / kReserveGranularity *
                kReserveGranularity;
  const std::string want = "cannot reserve " + format_bytes(reserve) + " of device memory (" +
                           format_bytes(free_bytes) + " free of " + format_bytes(total_bytes) + ")";
  if (reserve == 0 || reserve > free_bytes) return out_of_memory(name + ": " + want);
  void* base = nullptr;
  if (cudaError_t e = cudaMalloc(&base, reserve); e != cudaSuccess) {
    return fail(out_of_memory(name + ": " + want + ": " + cuda_error_text("cudaMalloc", e)));
  }
  uint64_t blas_workspace =
      config.blas_workspace_bytes ? config.blas_workspace_bytes : (prop.major >= 9 ? 32ull << 20 : 4ull << 20);
  if (blas_workspace > reserve / 4) blas_workspace = 0;  // a small test reservation: cuBLAS runs without one
  return std::unique_ptr<CudaDevice>(
      new CudaDevice(ordinal, name, static_cast<uint8_t*>(base), reserve, blas_workspace, config.spin_waits));
}

CudaDevice::CudaDevice(uint32_t ordinal, std::string name, uint8_t* base, uint64_t reserved_bytes,
                       uint64_t blas_workspace, bool spin_waits)
    : ordinal_(static_cast<int>(ordinal)),
      // Host waits sleep in the driver unless asked to spin: a serving node has many waiting threads.
      wait_event_flags_(cudaEventDisableTiming | (spin_waits ? 0u : cudaEventBlockingSync)),
      base_(base),
      blas_workspace_bytes_(blas_workspace),
      // The workspace ends the reservation, 256-byte aligned; allocate() hands out what precedes it.
      blas_workspace_(blas_workspace ? base + (reserved_bytes - blas_workspace) / 256 * 256 : nullptr),
      faults_(std::make_shared<FaultRecord>(name)),
      allocator_(blas_workspace ? (reserved_bytes - blas_workspace) / 256 * 256 : reserved_bytes),
      capacity_(allocator_.capacity()) {
  if (cudaEventCreateWithFlags(&blas_free_, cudaEventDisableTiming) != cudaSuccess) {
    blas_free_ = nullptr;
    fault("cudaEventCreateWithFlags (cuBLAS workspace) failed");
  }
  info_.name = std::move(name);
  info_.kind = DeviceKind::cuda;
  info_.ordinal = ordinal;
  info_.memory_bytes = capacity_;
}

CudaDevice::~CudaDevice() {
  // Streams and events are gone (the contract), so none of our work is pending; cudaFree waits
  // for the device anyway. Failures (a dead context, process teardown) are ignored: nothing to do.
  if (cudaSetDevice(ordinal_) == cudaSuccess) {
    if (blas_free_) (void)cudaEventDestroy(blas_free_);
    (void)cudaFree(base_);
  }
  {
    auto& pins = process_pins();
    std::lock_guard lock(pins.mu);
    for (const void* ptr : registered_.clear()) release_pin(pins, ptr);
  }
  (void)cudaGetLastError();
}

Status CudaDevice::register_host(const void* ptr, uint64_t bytes) {
  auto& pins = process_pins();
  std::lock_guard lock(pins.mu);
  if (Status st = registered_.add(ptr, bytes); !st.ok()) return st.error().with_context(info_.name);
  auto refuse = [&](Error error) {
    registered_.remove(ptr);
    return error;
  };
  auto users = pins.users.find(ptr);
  if (users != pins.users.end() && pins.ranges.contains(ptr, bytes)) {
    ++users->second;  // already pinned for every device (portable) by another one
    return Status::OK();
  }
  if (pins.ranges.overlaps(ptr, bytes)) {
    return refuse(invalid_argument(info_.name + ": cannot register host range [" +
                                   hex(reinterpret_cast<uintptr_t>(ptr)) + ", +" + std::to_string(bytes) +
                                   "): it overlaps a range another CUDA device registered"));
  }
  if (!make_current()) return refuse(status().error());
  const cudaError_t e = cudaHostRegister(const_cast<void*>(ptr), bytes, cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    const std::string why = info_.name + ": " + cuda_error_text("cudaHostRegister", e);
    switch (e) {
      case cudaErrorInvalidValue:
      case cudaErrorHostMemoryAlreadyRegistered:
        return refuse(invalid_argument(why));
      case cudaErrorMemoryAllocation:
        return refuse(out_of_memory(why));
      case cudaErrorNotSupported:
        return refuse(unsupported(why));
      default:  // anything else: the context is suspect
        fault(why);
        return refuse(status().error());
    }
  }
  (void)pins.ranges.add(ptr, bytes);  // cannot overlap: checked above under the same lock
  pins.users[ptr] = 1;
  return Status::OK();
}

void CudaDevice::unregister_host(const void* ptr) {
  auto& pins = process_pins();
  std::lock_guard lock(pins.mu);
  if (registered_.remove(ptr)) release_pin(pins, ptr);
}

Result<DevicePtr> CudaDevice::allocate(uint64_t bytes) {
  std::lock_guard lock(alloc_mu_);
  auto offset = allocator_.allocate(bytes);
  if (!offset) {
    return out_of_memory(info_.name + ": out of device memory: " + allocator_.shortage(bytes));
  }
  return DevicePtr{reinterpret_cast<uintptr_t>(base_) + *offset};
}

void CudaDevice::free(DevicePtr ptr) {
  if (!ptr) return;
  std::lock_guard lock(alloc_mu_);
  const uint64_t base = reinterpret_cast<uintptr_t>(base_);
  [[maybe_unused]] const bool ok = ptr.addr >= base && allocator_.free(ptr.addr - base);
  assert(ok && "CudaDevice::free of a pointer this device did not allocate");
}

MemoryInfo CudaDevice::memory() const {
  std::lock_guard lock(alloc_mu_);
  return {allocator_.capacity(), allocator_.used(), allocator_.largest_free_block()};
}

CudaDevice::BlasWorkspaceLease::BlasWorkspaceLease(CudaDevice& device, cudaStream_t stream)
    : device_(device), stream_(stream), lock_(device.blas_mu_) {
  // A destroyed stream was synchronized first (CudaStream's destructor), so a new stream that
  // reuses its handle has nothing of it to wait for.
  if (device_.blas_free_ && device_.blas_last_user_ && device_.blas_last_user_ != stream_) {
    device_.check(cudaStreamWaitEvent(stream_, device_.blas_free_, 0), "cudaStreamWaitEvent (cuBLAS workspace)");
  }
}

CudaDevice::BlasWorkspaceLease::~BlasWorkspaceLease() {
  if (device_.blas_free_ &&
      device_.check(cudaEventRecord(device_.blas_free_, stream_), "cudaEventRecord (cuBLAS workspace)")) {
    device_.blas_last_user_ = stream_;
  }
}

std::unique_ptr<Stream> CudaDevice::create_stream() { return make_cuda_stream(*this); }
std::unique_ptr<Event> CudaDevice::create_event() { return make_cuda_event(*this); }

bool CudaDevice::make_current() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == ordinal_) return true;
  return check(cudaSetDevice(ordinal_), "cudaSetDevice");
}

bool CudaDevice::check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fault(cuda_error_text(what, e));
  return false;
}

bool CudaDevice::check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  fault(std::string(what) + " failed: " + cublasGetStatusString(s) + " (" + cublasGetStatusName(s) + ")");
  return false;
}

void* CudaDevice::translate(DevicePtr ptr, uint64_t bytes) const {
  const uint64_t base = reinterpret_cast<uintptr_t>(base_);
  if (ptr.addr < base || ptr.addr - base > capacity_ || bytes > capacity_ - (ptr.addr - base)) return nullptr;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr.addr));
}

void* CudaDevice::resolve(DevicePtr ptr, uint64_t bytes, const char* what) {
  const uint64_t base = reinterpret_cast<uintptr_t>(base_);
  if (!translate(ptr, bytes)) {
    fault(std::string("illegal address in ") + what + ": [" + hex(ptr.addr) + ", +" + std::to_string(bytes) +
          ") is outside device memory [" + hex(base) + ", +" + std::to_string(capacity_) + ")");
    return nullptr;
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr.addr));
}

}  // namespace ember::gpu::cuda
