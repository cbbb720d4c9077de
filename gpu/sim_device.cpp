#include "gpu/sim_device.hpp"

#include <omp.h>
#include <sys/mman.h>

#include <cblas.h>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>

#include "config/units.hpp"
#include "gpu/kernels_cpu.hpp"

namespace ember::gpu {

namespace {

// Device addresses live in their own range per device, far from any host mapping, so host code
// that dereferences a DevicePtr crashes at once instead of silently working on the simulator.
constexpr uint64_t kAddressBase = 1ull << 44;
uint64_t device_base(uint32_t ordinal) { return kAddressBase * (ordinal + 1); }

class SimEvent final : public Event {
 public:
  explicit SimEvent(SimDevice& device) : device_(device) {}

  bool query() override {
    std::lock_guard lock(mu_);
    return completed_ >= recorded_;
  }

  Status synchronize() override {
    std::unique_lock lock(mu_);
    const uint64_t target = recorded_;
    cv_.wait(lock, [&] { return completed_ >= target; });
    lock.unlock();
    return device_.status();
  }

  // Called by a stream at record() time: the generation the stream will complete.
  uint64_t arm() {
    std::lock_guard lock(mu_);
    return ++recorded_;
  }
  void complete(uint64_t generation) {
    {
      std::lock_guard lock(mu_);
      completed_ = std::max(completed_, generation);
    }
    cv_.notify_all();
  }
  uint64_t recorded() {
    std::lock_guard lock(mu_);
    return recorded_;
  }
  void wait_for(uint64_t generation) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return completed_ >= generation; });
  }

 private:
  SimDevice& device_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t recorded_ = 0;   // guarded by mu_
  uint64_t completed_ = 0;  // guarded by mu_
};

// One worker thread running tasks in order. Tasks check the device's fault flag themselves so
// that events and callbacks still complete after a fault (no waiter hangs).
class SimStream final : public Stream {
 public:
  explicit SimStream(SimDevice& device) : device_(device) {
    worker_ = std::thread([this] { loop(); });
  }

  ~SimStream() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  void copy_to_device(DevicePtr dst, const void* src, uint64_t bytes) override {
    enqueue([this, dst, src, bytes] { copy_in(dst, src, bytes); });
  }

  void copy_to_host(void* dst, DevicePtr src, uint64_t bytes) override {
    enqueue([this, dst, src, bytes] { copy_out(dst, src, bytes); });
  }

  void copy_on_device(DevicePtr dst, DevicePtr src, uint64_t bytes) override {
    enqueue([this, dst, src, bytes] {
      if (device_.faulted()) return;
      uint8_t* d = device_.resolve(dst, bytes, "copy_on_device destination");
      uint8_t* s = device_.resolve(src, bytes, "copy_on_device source");
      if (d && s) std::memmove(d, s, bytes);
    });
  }

  void launch(const KernelArgs& args) override {
    enqueue([this, args] { run_kernel(args); });
  }

  void record(Event& event) override {
    auto& e = static_cast<SimEvent&>(event);
    const uint64_t generation = e.arm();
    enqueue([&e, generation] { e.complete(generation); });
  }

  void wait(Event& event) override {
    auto& e = static_cast<SimEvent&>(event);
    const uint64_t generation = e.recorded();
    enqueue([&e, generation] { e.wait_for(generation); });
  }

  void then(std::function<void(const Status&)> fn) override {
    enqueue([this, fn = std::move(fn)] { fn(device_.status()); });
  }

  Status synchronize() override {
    SimEvent done(device_);
    record(done);
    return done.synchronize();
  }

 private:
  void enqueue(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

  void loop() {
    omp_set_num_threads(static_cast<int>(device_.compute_threads()));
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  void copy_in(DevicePtr dst, const void* src, uint64_t bytes) {
    if (device_.faulted()) return;
    uint8_t* d = device_.resolve(dst, bytes, "copy_to_device");
    if (d) paced(0, bytes, [&] { std::memcpy(d, src, bytes); });
  }

  void copy_out(void* dst, DevicePtr src, uint64_t bytes) {
    if (device_.faulted()) return;
    const uint8_t* s = device_.resolve(src, bytes, "copy_to_host");
    if (s) paced(1, bytes, [&] { std::memcpy(dst, s, bytes); });
  }

  // Holds the direction's copy engine for the whole transfer and stretches it to bytes / bandwidth.
  template <class Fn>
  void paced(int direction, uint64_t bytes, Fn&& fn) {
    std::lock_guard engine(device_.copy_engine(direction));
    const auto start = std::chrono::steady_clock::now();
    fn();
    const double bw = device_.pcie_bytes_per_s();
    if (bw > 0) {
      std::this_thread::sleep_until(start + std::chrono::duration<double>(static_cast<double>(bytes) / bw));
    }
  }

  void run_kernel(const KernelArgs& args) {
    if (!device_.admit_kernel()) return;
    CpuKernelArgs cpu;
    cpu.args = &args;
    const char* op = op_name(args.op).data();
    auto map = [&](const DeviceTensor& t, const char* what) -> uint8_t* {
      return device_.resolve(t.ptr, t.desc.bytes(), what);
    };
    for (int i = 0; i < args.num_inputs; ++i) {
      if (!(cpu.inputs[i] = map(args.inputs[i], op))) return;
    }
    for (int i = 0; i < args.num_weights; ++i) {
      if (args.weights[i].ptr && !(cpu.weights[i] = map(args.weights[i], op))) return;
    }
    if (!(cpu.output = map(args.output, op))) return;
    if (args.workspace_bytes && !(cpu.workspace = device_.resolve(args.workspace, args.workspace_bytes, op))) return;
    try {
      run_cpu_kernel(cpu);
    } catch (const std::exception& e) {
      device_.fault(std::string("kernel ") + op + " failed: " + e.what());
    }
  }

  SimDevice& device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  std::thread worker_;
};

}  // namespace

Result<std::unique_ptr<SimDevice>> SimDevice::create(const SimDeviceConfig& config, uint32_t ordinal) {
  if (config.memory_bytes == 0 || config.memory_bytes >= kAddressBase) {
    return invalid_argument("sim device memory must be between 1 byte and 16 TiB");
  }
  const uint64_t mapped = (config.memory_bytes + 4095) / 4096 * 4096;
  void* arena = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (arena == MAP_FAILED) {
    return out_of_memory("cannot reserve " + format_bytes(config.memory_bytes) + " for sim device " +
                         std::to_string(ordinal) + ": " + std::strerror(errno));
  }
  return std::unique_ptr<SimDevice>(new SimDevice(config, ordinal, static_cast<uint8_t*>(arena), mapped));
}

SimDevice::SimDevice(const SimDeviceConfig& config, uint32_t ordinal, uint8_t* arena, uint64_t mapped)
    : config_(config), arena_(arena), mapped_bytes_(mapped), allocator_(config.memory_bytes) {
  info_.name = "sim:" + std::to_string(ordinal);
  info_.kind = DeviceKind::sim;
  info_.ordinal = ordinal;
  info_.memory_bytes = allocator_.capacity();
  compute_threads_ = config.compute_threads ? config.compute_threads
                                            : std::max(1u, std::thread::hardware_concurrency());
  openblas_set_num_threads(static_cast<int>(compute_threads_));
}

SimDevice::~SimDevice() { ::munmap(arena_, mapped_bytes_); }

Result<DevicePtr> SimDevice::allocate(uint64_t bytes) {
  std::lock_guard lock(alloc_mu_);
  auto offset = allocator_.allocate(bytes);
  if (!offset) {
    return out_of_memory(info_.name + ": out of device memory: " + allocator_.shortage(bytes));
  }
  return DevicePtr{device_base(info_.ordinal) + *offset};
}

void SimDevice::free(DevicePtr ptr) {
  if (!ptr) return;
  std::lock_guard lock(alloc_mu_);
  [[maybe_unused]] bool ok = ptr.addr >= device_base(info_.ordinal) &&
                             allocator_.free(ptr.addr - device_base(info_.ordinal));
  assert(ok && "SimDevice::free of a pointer this device did not allocate");
}

MemoryInfo SimDevice::memory() const {
  std::lock_guard lock(alloc_mu_);
  return {allocator_.capacity(), allocator_.used(), allocator_.largest_free_block()};
}

std::unique_ptr<Stream> SimDevice::create_stream() { return std::make_unique<SimStream>(*this); }
std::unique_ptr<Event> SimDevice::create_event() { return std::make_unique<SimEvent>(*this); }

Status SimDevice::status() const {
  if (!faulted()) return Status::OK();
  std::lock_guard lock(fault_mu_);
  return device_fault(info_.name + ": " + fault_message_);
}

void SimDevice::TEST_fail_after_kernels(uint64_t n) { kernels_until_fault_.store(static_cast<int64_t>(n)); }

uint8_t* SimDevice::resolve(DevicePtr ptr, uint64_t bytes, const char* what) {
  const uint64_t base = device_base(info_.ordinal);
  if (ptr.addr < base || ptr.addr - base > allocator_.capacity() || bytes > allocator_.capacity() - (ptr.addr - base)) {
    fault(std::string("illegal address in ") + what + ": [0x" + std::to_string(ptr.addr) + ", +" +
          std::to_string(bytes) + ") is outside device memory");
    return nullptr;
  }
  return arena_ + (ptr.addr - base);
}

void SimDevice::fault(std::string message) {
  std::lock_guard lock(fault_mu_);
  if (faulted_.load()) return;
  fault_message_ = std::move(message);
  faulted_.store(true, std::memory_order_release);
}

bool SimDevice::admit_kernel() {
  if (faulted()) return false;
  int64_t left = kernels_until_fault_.load();
  if (left < 0) return true;
  if (left == 0) {
    fault("injected fault (TEST_fail_after_kernels)");
    return false;
  }
  kernels_until_fault_.store(left - 1);
  return true;
}

}  // namespace ember::gpu
