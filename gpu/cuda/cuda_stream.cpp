#include "gpu/cuda/cuda_stream.hpp"

#include <optional>
#include <string>
#include <utility>

#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(CudaDevice& device) : device_(device) {
    if (device_.make_current() &&
        !device_.check(cudaEventCreateWithFlags(&event_, device_.wait_event_flags()), "cudaEventCreateWithFlags")) {
      event_ = nullptr;
    }
  }
  ~CudaEvent() override {
    if (event_) (void)cudaEventDestroy(event_);  // CUDA releases it once captured work completes
  }

  bool query() override {
    if (!event_) return true;
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    device_.check(e, "cudaEventQuery");  // an asynchronous fault: report it, and stop anyone waiting
    return true;
  }

  Status synchronize() override {
    if (event_) device_.check(cudaEventSynchronize(event_), "cudaEventSynchronize");
    return device_.status();
  }

  cudaEvent_t handle() const { return event_; }

 private:
  CudaDevice& device_;
  cudaEvent_t event_ = nullptr;
};

// What a host callback needs. It holds the fault record, not the device: CUDA may run a callback
// after an error at a time we do not control, and the record outlives the device if need be.
struct HostCallback {
  std::shared_ptr<FaultRecord> faults;
  std::function<void(const Status&)> fn;
};

// Called by CUDA on its callback thread. No CUDA calls here (CUDA forbids them in callbacks)
// except cudaGetErrorString/Name, which only look up text.
void CUDART_CB run_host_callback(cudaStream_t, cudaError_t status, void* data) {
  std::unique_ptr<HostCallback> cb(static_cast<HostCallback*>(data));
  if (status != cudaSuccess) cb->faults->record(cuda_error_text("work before a host callback", status));
  cb->fn(cb->faults->status());
}

class CudaStream final : public Stream {
 public:
  explicit CudaStream(CudaDevice& device) : device_(device) { ready_ = init(); }

  ~CudaStream() override {
    device_.make_current();
    // Pending work may include host callbacks and kernels reading the workspace: let it finish.
    if (stream_) (void)cudaStreamSynchronize(stream_);
    if (blas_) (void)cublasDestroy(blas_);
    if (done_) (void)cudaEventDestroy(done_);
    if (stream_) (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }

  void copy_to_device(DevicePtr dst, const void* src, uint64_t bytes) override {
    if (!enter()) return;
    void* d = device_.resolve(dst, bytes, "copy_to_device");
    if (d && bytes) {
      device_.check(cudaMemcpyAsync(d, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (to device)");
    }
  }

  void copy_to_host(void* dst, DevicePtr src, uint64_t bytes) override {
    if (!enter()) return;
    const void* s = device_.resolve(src, bytes, "copy_to_host");
    if (s && bytes) {
      device_.check(cudaMemcpyAsync(dst, s, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (to host)");
    }
  }

  void copy_on_device(DevicePtr dst, DevicePtr src, uint64_t bytes) override {
    if (!enter()) return;
    void* d = device_.resolve(dst, bytes, "copy_on_device destination");
    const void* s = d ? device_.resolve(src, bytes, "copy_on_device source") : nullptr;
    if (d && s && bytes) {
      device_.check(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, stream_),
                    "cudaMemcpyAsync (device to device)");
    }
  }

  // Every failure faults this device (the one whose stream asked), never the source.
  void copy_from_peer(DevicePtr dst, Device& src_device, DevicePtr src, uint64_t bytes) override {
    if (!enter()) return;
    auto* peer = dynamic_cast<CudaDevice*>(&src_device);
    if (!peer) {
      return device_.fault("copy_from_peer: the source device " + src_device.info().name +
                           " is not a CUDA device (peer copies need two devices of one kind)");
    }
    void* d = device_.resolve(dst, bytes, "copy_from_peer destination");
    if (!d) return;
    const void* s = peer->translate(src, bytes);
    if (!s) {
      return device_.fault("illegal address in copy_from_peer source: " + std::to_string(bytes) + " bytes at " +
                           std::to_string(src.addr) + " are outside the memory of " + peer->info().name);
    }
    if (peer->faulted()) {
      return device_.fault("copy_from_peer: the source device " + peer->info().name + " has faulted");
    }
    if (bytes) {
      device_.check(cudaMemcpyPeerAsync(d, device_.cuda_ordinal(), s, peer->cuda_ordinal(), bytes, stream_),
                    "cudaMemcpyPeerAsync");
    }
  }

  void launch(const KernelArgs& args) override {
    if (!enter()) return;
    if (args.op >= OpKind::count) {
      device_.fault("launch of an unknown op " + std::to_string(static_cast<int>(args.op)));
      return;
    }
    const char* op = op_name(args.op).data();
    // Checked here because on a GPU a stray or misaligned address kills the whole context.
    auto map = [&](const DeviceTensor& t) -> void* {
      if (t.ptr.addr % dtype_size(t.desc.dtype)) {
        device_.fault(std::string("misaligned ") + std::string(dtype_name(t.desc.dtype)) + " tensor in " + op +
                      " at device address " + std::to_string(t.ptr.addr));
        return nullptr;
      }
      return device_.resolve(t.ptr, t.desc.bytes(), op);
    };
    CudaKernelArgs k;
    k.args = &args;
    k.stream = stream_;
    k.blas = blas_;
    for (int i = 0; i < args.num_inputs; ++i) {
      if (!(k.inputs[i] = map(args.inputs[i]))) return;
    }
    for (int i = 0; i < args.num_weights; ++i) {
      if (args.weights[i].ptr && !(k.weights[i] = map(args.weights[i]))) return;
    }
    if (!(k.output = map(args.output))) return;
    if (args.workspace_bytes && !(k.workspace = device_.resolve(args.workspace, args.workspace_bytes, op))) return;
    k.memory_base = device_.memory_base();
    k.memory_bytes = device_.memory_capacity();
    // The device's one cuBLAS workspace, handed from stream to stream by an event.
    std::optional<CudaDevice::BlasWorkspaceLease> lease;
    if (device_.blas_workspace() && uses_cublas(args.op)) lease.emplace(device_, stream_);
    // launched() reads cudaGetLastError: start clean of errors other calls already handled.
    (void)cudaGetLastError();
    const CudaKernelStatus s = run_cuda_kernel(k);
    if (s.ok()) return;
    if (s.blas != CUBLAS_STATUS_SUCCESS) {
      device_.fault(std::string("kernel ") + op + ": " + s.call + " failed: " + cublasGetStatusString(s.blas) + " (" +
                    cublasGetStatusName(s.blas) + ")");
    } else {
      device_.fault(std::string("kernel ") + op + ": " + cuda_error_text(s.call, s.cuda));
    }
  }

  void record(Event& event) override {
    auto& e = static_cast<CudaEvent&>(event);
    if (ready_ && e.handle() && device_.make_current()) {
      device_.check(cudaEventRecord(e.handle(), stream_), "cudaEventRecord");
    }
  }

  void wait(Event& event) override {
    auto& e = static_cast<CudaEvent&>(event);
    if (ready_ && e.handle() && device_.make_current()) {
      device_.check(cudaStreamWaitEvent(stream_, e.handle(), 0), "cudaStreamWaitEvent");
    }
  }

  // cudaStreamAddCallback, not cudaLaunchHostFunc: CUDA does not call a host function at all once
  // the context has an error, which would leave a waiter hanging, whereas a stream callback runs
  // once in every case and is told the error, as then() promises.
  void then(std::function<void(const Status&)> fn) override {
    auto cb = std::make_unique<HostCallback>(HostCallback{device_.faults(), std::move(fn)});
    if (ready_ && device_.make_current() &&
        device_.check(cudaStreamAddCallback(stream_, run_host_callback, cb.get(), 0), "cudaStreamAddCallback")) {
      cb.release();  // run_host_callback owns it now
      return;
    }
    // Not enqueued (the device has faulted): report at once, on this thread, so that no one waits forever.
    cb->fn(cb->faults->status());
  }

  Status synchronize() override {
    if (ready_ && device_.make_current() && device_.check(cudaEventRecord(done_, stream_), "cudaEventRecord")) {
      device_.check(cudaEventSynchronize(done_), "cudaEventSynchronize");
    }
    return device_.status();
  }

 private:
  // Creates the stream, its event and its cuBLAS handle; false after recording a fault.
  bool init() {
    if (!device_.make_current()) return false;
    if (!device_.check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) {
      stream_ = nullptr;
      return false;
    }
    if (!device_.check(cudaEventCreateWithFlags(&done_, device_.wait_event_flags()), "cudaEventCreateWithFlags")) {
      done_ = nullptr;
      return false;
    }
    if (!device_.check(cublasCreate(&blas_), "cublasCreate")) {
      blas_ = nullptr;
      return false;
    }
    // Default math: float32 GEMMs stay float32 (no TF32), like PyTorch's default and the CPU.
    if (!device_.check(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode")) return false;
    if (!device_.check(cublasSetStream(blas_, stream_), "cublasSetStream")) return false;
    // After cublasSetStream, which resets the handle to cuBLAS's own workspace pool (cudaMalloc
    // outside our reservation): the device's shared workspace (launch leases it), or none.
    void* ws = device_.blas_workspace();
    return device_.check(cublasSetWorkspace(blas_, ws, ws ? device_.blas_workspace_bytes() : 0), "cublasSetWorkspace");
  }

  // True when work may be enqueued: the stream exists, the device has not faulted and is current.
  bool enter() { return ready_ && !device_.faulted() && device_.make_current(); }

  CudaDevice& device_;
  bool ready_ = false;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;  // recorded and waited on by synchronize()
  cublasHandle_t blas_ = nullptr;
};

}  // namespace

std::unique_ptr<Stream> make_cuda_stream(CudaDevice& device) { return std::make_unique<CudaStream>(device); }
std::unique_ptr<Event> make_cuda_event(CudaDevice& device) { return std::make_unique<CudaEvent>(device); }

}  // namespace ember::gpu::cuda
