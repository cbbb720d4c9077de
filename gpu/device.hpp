// gpu::Device: the seam between Ember and an accelerator. Two implementations: SimDevice (always
// built; CPU kernels over a bounded memory arena) and CudaDevice (the CUDA plugin, when built).
//
// The model is CUDA's, so code written against it behaves the same on both:
//   - Device memory is a separate address space of fixed capacity. allocate() fails with an
//     out_of_memory Error, never a crash. Host code never dereferences a DevicePtr.
//   - Work is enqueued on Streams and runs asynchronously, in order within a stream and
//     concurrently across streams. Enqueue calls never block on the work itself.
//   - Events mark points in a stream: record() captures everything enqueued so far, wait() makes
//     another stream hold until then, synchronize() blocks the host until then.
//   - Errors in asynchronous work are sticky: the device records the first fault and every later
//     synchronize, query and status() reports it until the device is rebuilt. Bad arguments are
//     faults too (an address outside device memory is an illegal-address fault).
// Thread safety: allocate/free/create_* may be called from any thread. A Stream may be fed from
// one thread at a time. Memory passed to a copy (host side) and device memory a kernel touches
// must stay valid until the work completes; free device memory only after the work using it has
// completed (synchronize or an event).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.hpp"
#include "config/device_config.hpp"
#include "gpu/kernel_args.hpp"

namespace ember::gpu {

struct DeviceInfo {
  std::string name;          // "sim:0", "cuda:1 (NVIDIA A100-SXM4-40GB)"
  DeviceKind kind = DeviceKind::sim;
  uint32_t ordinal = 0;
  uint64_t memory_bytes = 0;  // capacity usable by allocate()
};

struct MemoryInfo {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t largest_free_block = 0;
};

class Device;  // a Stream names its peer device (copy_from_peer)

class Event {
 public:
  virtual ~Event() = default;
  /// True when the work captured by the last record() has completed (true if never recorded).
  virtual bool query() = 0;
  /// Blocks until the captured work completed; returns the device's sticky fault if there is one.
  virtual Status synchronize() = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  /// Host -> device. `src` must stay valid until the copy completes.
  virtual void copy_to_device(DevicePtr dst, const void* src, uint64_t bytes) = 0;
  /// Device -> host. `dst` must stay valid until the copy completes.
  virtual void copy_to_host(void* dst, DevicePtr src, uint64_t bytes) = 0;
  /// Device -> device within this device.
  virtual void copy_on_device(DevicePtr dst, DevicePtr src, uint64_t bytes) = 0;
  /// From `src` on another device of the same kind to `dst` on this stream's device, over their
  /// direct link (NVLink or PCIe peer-to-peer), like cudaMemcpyPeerAsync. Ordered on this stream
  /// only: the caller keeps the source memory allocated and unchanged until the copy completed.
  /// A source on a device of another kind, an address outside either device, or a source device
  /// that has faulted (its memory is unknowable) faults this device, never the source device.
  virtual void copy_from_peer(DevicePtr dst, Device& src_device, DevicePtr src, uint64_t bytes) = 0;
  /// Runs one layer's kernel. Arguments must have passed infer_output for this op.
  virtual void launch(const KernelArgs& args) = 0;
  /// Captures all work enqueued so far on this stream into `event`.
  virtual void record(Event& event) = 0;
  /// Work enqueued after this call starts only once `event`'s captured work has completed.
  virtual void wait(Event& event) = 0;
  /// Calls `fn` (on a device thread, which it must not block) once prior work has completed;
  /// the Status is the device's sticky fault, if any. Like cudaLaunchHostFunc.
  virtual void then(std::function<void(const Status&)> fn) = 0;
  /// Blocks until all work enqueued so far completed.
  virtual Status synchronize() = 0;
  /// A hint, until called with false: the caller will wait for all it enqueues before it does
  /// anything else (a resident model's run: no copy to overlap), so a stream whose device is the
  /// host's own CPU may run each operation, then() callbacks included, on the calling thread while
  /// the stream is idle instead of waking its own thread (SimDevice does: two thread wake-ups per
  /// synchronize saved; order and results are the same). CUDA ignores it.
  virtual void set_caller_waits(bool on) { (void)on; }
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  /// `bytes` of device memory, 256-byte aligned. out_of_memory when no free block is large enough.
  virtual Result<DevicePtr> allocate(uint64_t bytes) = 0;
  /// Returns memory from allocate(). Freeing an unknown pointer is a programmer error (asserted).
  virtual void free(DevicePtr ptr) = 0;
  virtual MemoryInfo memory() const = 0;
  virtual std::unique_ptr<Stream> create_stream() = 0;
  virtual std::unique_ptr<Event> create_event() = 0;
  /// OK, or the first fault of this device (sticky).
  virtual Status status() const = 0;
  /// Page-locks [ptr, ptr + bytes) of host memory for copies to and from this device, like
  /// cudaHostRegister: copies from registered (pinned) memory run at the link's full bandwidth and
  /// asynchronously; copies from pageable memory are staged by the driver and run slower. Ranges
  /// may not overlap an already registered one (invalid_argument). Costly (page tables): done once
  /// per host copy of a model, not per swap. The range must stay mapped until unregister_host.
  /// Bad ranges (null, empty, overlapping) are invalid_argument Errors to the caller and never
  /// fault the device.
  virtual Status register_host(const void* ptr, uint64_t bytes) = 0;
  /// Undoes register_host for the range starting at `ptr`; no-op for an unknown pointer. No copy
  /// from or to the range may be in flight.
  virtual void unregister_host(const void* ptr) = 0;
  /// Whether [ptr, ptr + bytes) lies inside one registered range.
  virtual bool host_registered(const void* ptr, uint64_t bytes) const = 0;
};

/// Owns one allocation and frees it on destruction. The owner guarantees no work still uses it.
class DeviceBuffer {
 public:
  static Result<std::shared_ptr<DeviceBuffer>> allocate(Device& device, uint64_t bytes);
  /// A buffer over memory someone else hands out (an ActivationPool's segment): `release` gets the
  /// address back when the last holder lets go, instead of the device.
  static std::shared_ptr<DeviceBuffer> adopt(Device& device, DevicePtr ptr, uint64_t bytes,
                                             std::function<void(DevicePtr)> release) {
    return std::shared_ptr<DeviceBuffer>(new DeviceBuffer(device, ptr, bytes, std::move(release)));
  }
  ~DeviceBuffer() {
    if (release_) {
      release_(ptr_);
    } else {
      device_.free(ptr_);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  Device& device() const { return device_; }
  DevicePtr ptr() const { return ptr_; }
  uint64_t bytes() const { return bytes_; }

 private:
  DeviceBuffer(Device& device, DevicePtr ptr, uint64_t bytes, std::function<void(DevicePtr)> release = {})
      : device_(device), ptr_(ptr), bytes_(bytes), release_(std::move(release)) {}
  Device& device_;
  DevicePtr ptr_;
  uint64_t bytes_;
  std::function<void(DevicePtr)> release_;
};

inline Result<std::shared_ptr<DeviceBuffer>> DeviceBuffer::allocate(Device& device, uint64_t bytes) {
  auto ptr = device.allocate(bytes);
  if (!ptr.ok()) return ptr.error();
  return std::shared_ptr<DeviceBuffer>(new DeviceBuffer(device, *ptr, bytes));
}

}  // namespace ember::gpu
