#include "gpu/sim_stream.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "base/work_queue.hpp"
#include "gpu/compute_clock.hpp"
#include "gpu/kernels_cpu.hpp"
#include "gpu/link_pacer.hpp"

namespace ember::gpu {

namespace {

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

// A stream's queue: one thread, which computes with the device's OpenMP thread count.
WorkQueueOptions queue_options(const SimDevice& device) {
  WorkQueueOptions o;
  o.threads = 1;
  o.on_thread_start = [threads = static_cast<int>(device.compute_threads())] { omp_set_num_threads(threads); };
  return o;
}

std::string range_text(DevicePtr ptr, uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "[0x%llx, +%llu)", static_cast<unsigned long long>(ptr.addr),
                static_cast<unsigned long long>(bytes));
  return buf;
}

// One serial WorkQueue running tasks in order (post(): a stream is bounded by its producer, which
// CUDA runs in launch order; its thread sets OpenMP's thread count first). Tasks check the device's
// fault flag themselves so that events and callbacks still complete after a fault (no waiter
// hangs). With a compute dilation, everything but a kernel or an event wait first waits out the
// modelled end of the kernels before it (settle), so that nothing observes a kernel's results
// before its device time. Destruction runs what is queued, then joins.
class SimStream final : public Stream {
 public:
  explicit SimStream(SimDevice& device) : device_(device), tasks_(queue_options(device)) {}

  // The host-to-device engine serves copies in issue order, as a GPU's copy engine serves the
  // commands pushed to it: a copy takes its place in line when issued, unless something ahead of it
  // on this stream may wait for another stream (an event wait, or a copy still to take its place),
  // which could wait for a copy behind this one: then it takes its place when it runs.
  void copy_to_device(DevicePtr dst, const void* src, uint64_t bytes) override {
    std::optional<uint64_t> ticket;
    if (untimely_.load() == 0) {
      ticket = device_.copy_engine(SimDevice::kToDevice).take();
    } else {
      ++untimely_;
    }
    enqueue([this, dst, src, bytes, ticket] {
      settle();
      copy_in(dst, src, bytes, ticket);
      if (!ticket) --untimely_;
    });
  }

  void copy_to_host(void* dst, DevicePtr src, uint64_t bytes) override {
    enqueue([this, dst, src, bytes] {
      settle();
      copy_out(dst, src, bytes);
    });
  }

  void copy_on_device(DevicePtr dst, DevicePtr src, uint64_t bytes) override {
    enqueue([this, dst, src, bytes] {
      settle();
      if (device_.faulted()) return;
      uint8_t* d = device_.resolve(dst, bytes, "copy_on_device destination");
      uint8_t* s = device_.resolve(src, bytes, "copy_on_device source");
      device_.count_copy_on_device();
      if (d && s) std::memmove(d, s, bytes);
    });
  }

  void copy_from_peer(DevicePtr dst, Device& src_device, DevicePtr src, uint64_t bytes) override {
    enqueue([this, dst, &src_device, src, bytes] {
      settle();
      copy_peer(dst, src_device, src, bytes);
    });
  }

  void launch(const KernelArgs& args) override {
    enqueue([this, args] { run_kernel(args); });
  }

  void record(Event& event) override {
    auto& e = static_cast<SimEvent&>(event);
    const uint64_t generation = e.arm();
    enqueue([this, &e, generation] {
      settle();
      e.complete(generation);
    });
  }

  void wait(Event& event) override {
    auto& e = static_cast<SimEvent&>(event);
    const uint64_t generation = e.recorded();
    ++untimely_;
    enqueue([this, &e, generation] {
      e.wait_for(generation);
      --untimely_;
    });
  }

  void then(std::function<void(const Status&)> fn) override {
    enqueue([this, fn = std::move(fn)] {
      settle();
      fn(device_.status());
    });
  }

  Status synchronize() override {
    SimEvent done(device_);
    record(done);
    Status status = done.synchronize();
    if (const double s = device_.config().synchronize_s; s > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(s));
    }
    return status;
  }

  void set_caller_waits(bool on) override { caller_waits_ = on; }

 private:
  // With the caller waiting anyway, an idle stream's operation runs on the caller's thread (with the
  // stream's OpenMP thread count), in the stream's order (WorkQueue::run_here); else it is queued.
  void enqueue(std::function<void()> task) {
    if (caller_waits_ && tasks_.run_here([&] {
          const int before = omp_get_max_threads();
          omp_set_num_threads(static_cast<int>(device_.compute_threads()));
          task();
          omp_set_num_threads(before);
        })) {
      return;
    }
    tasks_.post(std::move(task));
  }

  // Host copies hold their direction's copy engine for the whole transfer and are paced at the
  // device's own rate for this host memory (pinned or pageable) and through the switch uplink.
  void copy_in(DevicePtr dst, const void* src, uint64_t bytes, std::optional<uint64_t> ticket) {
    FifoMutex& engine = device_.copy_engine(SimDevice::kToDevice);
    engine.lock(ticket ? *ticket : engine.take());  // a ticket is always redeemed, fault or not
    std::lock_guard held(engine, std::adopt_lock);
    if (device_.faulted()) return;
    uint8_t* d = device_.resolve(dst, bytes, "copy_to_device");
    if (!d) return;
    device_.count_copy(SimDevice::kToDevice, bytes, !device_.host_registered(src, bytes));
    LinkPacer& lane = device_.host_lane(SimDevice::kToDevice, src, bytes);
    setup(lane);
    paced_memcpy(d, src, bytes, {&lane, &device_.uplink()->to_device});
  }

  // A host copy's fixed cost (SimDeviceConfig::copy_setup_s), booked on its lane ahead of its bytes
  // so that the pacer's time keeps it exact; slept on an unthrottled lane.
  void setup(LinkPacer& lane) {
    const double s = device_.config().copy_setup_s;
    if (s <= 0) return;
    if (lane.throttled()) lane.reserve(static_cast<uint64_t>(s * lane.bytes_per_s()));
    else std::this_thread::sleep_for(std::chrono::duration<double>(s));
  }

  void copy_out(void* dst, DevicePtr src, uint64_t bytes) {
    if (device_.faulted()) return;
    const uint8_t* s = device_.resolve(src, bytes, "copy_to_host");
    if (!s) return;
    std::lock_guard engine(device_.copy_engine(SimDevice::kToHost));
    device_.count_copy(SimDevice::kToHost, bytes, !device_.host_registered(dst, bytes));
    LinkPacer& lane = device_.host_lane(SimDevice::kToHost, dst, bytes);
    setup(lane);
    paced_memcpy(dst, s, bytes, {&lane, &device_.uplink()->to_host});
  }

  // Every failure faults this device (the one whose stream asked), never the source.
  void copy_peer(DevicePtr dst, Device& src_device, DevicePtr src, uint64_t bytes) {
    if (device_.faulted()) return;
    auto* peer = dynamic_cast<SimDevice*>(&src_device);
    if (!peer) {
      return device_.fault("copy_from_peer: the source device " + src_device.info().name +
                           " is not a simulated device (peer copies need two devices of one kind)");
    }
    uint8_t* d = device_.resolve(dst, bytes, "copy_from_peer destination");
    if (!d) return;
    const uint8_t* s = peer->translate(src, bytes);
    if (!s) {
      return device_.fault("illegal address in copy_from_peer source: " + range_text(src, bytes) +
                           " is outside the memory of " + peer->info().name);
    }
    // A faulted device's memory is unknowable (a kernel may have stopped halfway): do not spread it.
    if (peer->faulted()) {
      return device_.fault("copy_from_peer: the source device " + peer->info().name + " has faulted");
    }
    if (peer == &device_) return void(std::memmove(d, s, bytes));
    std::lock_guard engine(device_.copy_engine(SimDevice::kFromPeer));
    device_.count_copy(SimDevice::kFromPeer, bytes);
    if (device_.peer_bytes_per_s(peer->info().ordinal) > 0) {
      // Point to point: nobody else's traffic, and not the PCIe uplink.
      return paced_memcpy(d, s, bytes, {&device_.peer_lane(peer->info().ordinal)});
    }
    // No direct link: staged through host memory, as CUDA does without peer access. Up through the
    // source's switch, down through ours, at the slower of the two ends' (pinned) PCIe rates.
    const double a = peer->config().pcie_bytes_per_s, b = device_.config().pcie_bytes_per_s;
    LinkPacer staged(a > 0 && b > 0 ? std::min(a, b) : std::max(a, b));
    paced_memcpy(d, s, bytes, {&staged, &peer->uplink()->to_host, &device_.uplink()->to_device});
  }

  // Waits until the kernels launched so far have ended in device time (compute_clock.hpp).
  void settle() {
    if (kernels_end_ > ComputeClock::Clock::now()) std::this_thread::sleep_until(kernels_end_);
  }

  void run_kernel(const KernelArgs& args) {
    if (!device_.admit_kernel()) return;
    CpuKernelArgs cpu;
    cpu.args = &args;
    cpu.resolve = {[](void* device, uint64_t addr, uint64_t bytes, const char* what) {
                     return static_cast<SimDevice*>(device)->resolve(DevicePtr{addr}, bytes, what);
                   },
                   &device_};
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
    ComputeClock& clock = device_.compute_clock();
    const auto started = ComputeClock::Clock::now();
    const auto cpu_before = clock.enabled() ? thread_cpu_time() : ComputeClock::Clock::duration{};
    try {
      // Without a dilation the host's cores are the device's: one kernel at a time uses them all.
      // With one, each kernel's CPU time is booked on the device's timeline, which orders them.
      std::unique_lock<FifoMutex> turn(device_.compute(), std::defer_lock);
      if (!clock.enabled()) turn.lock();
      run_cpu_kernel(cpu);
    } catch (const std::exception& e) {
      device_.fault(std::string("kernel ") + op + " failed: " + e.what());
    }
    if (clock.enabled()) kernels_end_ = clock.book(started, thread_cpu_time() - cpu_before);
  }

  SimDevice& device_;
  std::atomic<bool> caller_waits_{false};
  /// Operations queued that may wait for another stream: event waits, and copies to the device that
  /// take their place in the engine's line only when they run (see copy_to_device).
  std::atomic<int> untimely_{0};
  ComputeClock::Clock::time_point kernels_end_{};  // the queue's turn holder only: modelled end of its kernels
  WorkQueue tasks_;  // last: destroyed (drained and joined) before the members its tasks use
};

}  // namespace

std::unique_ptr<Stream> make_sim_stream(SimDevice& device) { return std::make_unique<SimStream>(device); }
std::unique_ptr<Event> make_sim_event(SimDevice& device) { return std::make_unique<SimEvent>(device); }

}  // namespace ember::gpu
