#include "gpu/sim_device.hpp"

#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "base/units.hpp"
#include "gpu/sim_stream.hpp"

namespace ember::gpu {

namespace {

// Device addresses live in their own range per device, far from any host mapping, so host code
// that dereferences a DevicePtr crashes at once instead of silently working on the simulator.
constexpr uint64_t kAddressBase = 1ull << 44;
uint64_t device_base(uint32_t ordinal) { return kAddressBase * (ordinal + 1); }

}  // namespace

Result<std::unique_ptr<SimDevice>> SimDevice::create(const SimDeviceConfig& config, uint32_t ordinal) {
  return create(config, ordinal, nullptr);
}

Result<std::unique_ptr<SimDevice>> SimDevice::create(const SimDeviceConfig& config, uint32_t ordinal,
                                                     std::shared_ptr<SwitchUplink> uplink) {
  if (config.memory_bytes == 0 || config.memory_bytes >= kAddressBase) {
    return invalid_argument("sim device memory must be between 1 byte and 16 TiB");
  }
  const uint64_t mapped = (config.memory_bytes + 4095) / 4096 * 4096;
  const int populate = config.populate ? MAP_POPULATE : MAP_NORESERVE;
  void* arena = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | populate, -1, 0);
  if (arena == MAP_FAILED) {
    return out_of_memory("cannot reserve " + format_bytes(config.memory_bytes) + " for sim device " +
                         std::to_string(ordinal) + ": " + std::strerror(errno));
  }
  // A GPU has no page faults. Where the kernel grants transparent huge pages on request (Debian's
  // default, "madvise"), the first touch of each 2 MiB costs one fault instead of 512: on a VM whose
  // faults are expensive that was most of a large model's first copy to the device (a 1.3 GiB
  // model's first run: 4.8 s instead of 0.3 s). Advice only: without THP nothing changes.
  if (!config.populate && mapped >= (8ull << 20)) ::madvise(arena, mapped, MADV_HUGEPAGE);
  if (!uplink) uplink = std::make_shared<SwitchUplink>(config.pcie_bytes_per_s);
  return std::unique_ptr<SimDevice>(
      new SimDevice(config, ordinal, static_cast<uint8_t*>(arena), mapped, std::move(uplink)));
}

namespace {

// Live SimDevices per ordinal, for TEST_open_on_ordinal.
std::mutex open_mu;
std::map<uint32_t, uint32_t>& open_devices() {
  static std::map<uint32_t, uint32_t> open;
  return open;
}

}  // namespace

uint32_t SimDevice::TEST_open_on_ordinal(uint32_t ordinal) {
  std::lock_guard lock(open_mu);
  auto it = open_devices().find(ordinal);
  return it == open_devices().end() ? 0 : it->second;
}

SimDevice::SimDevice(const SimDeviceConfig& config, uint32_t ordinal, uint8_t* arena, uint64_t mapped,
                     std::shared_ptr<SwitchUplink> uplink)
    : config_(config),
      arena_(arena),
      mapped_bytes_(mapped),
      uplink_(std::move(uplink)),
      allocator_(config.memory_bytes),
      compute_clock_(config.compute_dilation) {
  info_.name = "sim:" + std::to_string(ordinal);
  info_.kind = DeviceKind::sim;
  info_.ordinal = ordinal;
  info_.memory_bytes = allocator_.capacity();
  compute_threads_ = config.compute_threads ? config.compute_threads
                                            : std::max(1u, std::thread::hardware_concurrency());
  openblas_set_num_threads(static_cast<int>(compute_threads_));
  std::lock_guard lock(open_mu);
  ++open_devices()[ordinal];
}

SimDevice::~SimDevice() {
  ::munmap(arena_, mapped_bytes_);
  std::lock_guard lock(open_mu);
  if (--open_devices()[info_.ordinal] == 0) open_devices().erase(info_.ordinal);
}

Result<DevicePtr> SimDevice::allocate(uint64_t bytes) {
  std::lock_guard lock(alloc_mu_);
  auto offset = allocator_.allocate(bytes);
  if (!offset) {
    return out_of_memory(info_.name + ": out of device memory: " + allocator_.shortage(bytes));
  }
  peak_used_ = std::max(peak_used_, allocator_.used());
  return DevicePtr{device_base(info_.ordinal) + *offset};
}

void SimDevice::free(DevicePtr ptr) {
  if (!ptr) return;
  std::lock_guard lock(alloc_mu_);
  [[maybe_unused]] bool ok = ptr.addr >= device_base(info_.ordinal) &&
                             allocator_.free(ptr.addr - device_base(info_.ordinal));
  assert(ok && "SimDevice::free of a pointer this device did not allocate");
}

uint64_t SimDevice::peak_used_bytes() const {
  std::lock_guard lock(alloc_mu_);
  return peak_used_;
}

void SimDevice::reset_peak() {
  std::lock_guard lock(alloc_mu_);
  peak_used_ = allocator_.used();
}

MemoryInfo SimDevice::memory() const {
  std::lock_guard lock(alloc_mu_);
  return {allocator_.capacity(), allocator_.used(), allocator_.largest_free_block()};
}

std::unique_ptr<Stream> SimDevice::create_stream() { return make_sim_stream(*this); }
std::unique_ptr<Event> SimDevice::create_event() { return make_sim_event(*this); }

Status SimDevice::status() const {
  if (!faulted()) return Status::OK();
  std::lock_guard lock(fault_mu_);
  return device_fault(info_.name + ": " + fault_message_);
}

// Registration is bookkeeping only here: nothing is locked in RAM, but copies from registered
// ranges run at the pinned rate. A bad range is an Error to the caller, not a device fault.
Status SimDevice::register_host(const void* ptr, uint64_t bytes) {
  Status st = registered_.add(ptr, bytes);
  if (!st.ok()) return st.error().with_context(info_.name);
  return Status::OK();
}

void SimDevice::unregister_host(const void* ptr) { registered_.remove(ptr); }

bool SimDevice::host_registered(const void* ptr, uint64_t bytes) const { return registered_.contains(ptr, bytes); }

double SimDevice::host_bytes_per_s(const void* host, uint64_t bytes) const {
  if (registered_.contains(host, bytes)) return config_.pcie_bytes_per_s;
  if (config_.pageable_bytes_per_s > 0) return config_.pageable_bytes_per_s;
  return config_.pcie_bytes_per_s / 2;  // 0 stays 0: unthrottled
}

LinkPacer& SimDevice::host_lane(CopyEngine engine, const void* host, uint64_t bytes) {
  const bool pinned = registered_.contains(host, bytes);
  auto& lane = lanes_[engine == kToDevice ? 0 : 1][pinned ? 0 : 1];
  // Created on first use; only the thread holding `engine`'s copy engine gets here.
  if (!lane) lane = std::make_unique<LinkPacer>(host_bytes_per_s(host, bytes));
  return *lane;
}

double SimDevice::peer_bytes_per_s(uint32_t ordinal) const {
  return ordinal < config_.peer_bytes_per_s.size() ? config_.peer_bytes_per_s[ordinal] : 0;
}

LinkPacer& SimDevice::peer_lane(uint32_t ordinal) {
  auto& lane = peer_lanes_[ordinal];
  if (!lane) lane = std::make_unique<LinkPacer>(peer_bytes_per_s(ordinal));
  return *lane;
}

void SimDevice::TEST_fail_after_kernels(uint64_t n) { kernels_until_fault_.store(static_cast<int64_t>(n)); }

uint8_t* SimDevice::translate(DevicePtr ptr, uint64_t bytes) const {
  const uint64_t base = device_base(info_.ordinal);
  const uint64_t capacity = allocator_.capacity();  // fixed at construction
  if (ptr.addr < base || ptr.addr - base > capacity || bytes > capacity - (ptr.addr - base)) return nullptr;
  return arena_ + (ptr.addr - base);
}

uint8_t* SimDevice::resolve(DevicePtr ptr, uint64_t bytes, const char* what) {
  uint8_t* p = translate(ptr, bytes);
  if (!p) {
    char range[64];
    std::snprintf(range, sizeof(range), "[0x%llx, +%llu)", static_cast<unsigned long long>(ptr.addr),
                  static_cast<unsigned long long>(bytes));
    fault(std::string("illegal address in ") + what + ": " + range + " is outside device memory");
  }
  return p;
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
