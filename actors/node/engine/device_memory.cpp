#include "actors/node/engine/device_memory.hpp"

#include <algorithm>

#include "base/units.hpp"
#include "gpu/copy_elbow.hpp"

namespace ember::engine {

namespace {
constexpr uint64_t kMiB = 1ull << 20;
uint64_t pow2_floor(uint64_t v) {
  uint64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
}  // namespace

Result<std::unique_ptr<DeviceMemory>> DeviceMemory::reserve(gpu::Device& device, uint64_t workspace_bytes,
                                                            uint64_t group_bytes, uint64_t staging_bytes) {
  std::unique_ptr<DeviceMemory> m(new DeviceMemory(device));
  EMBER_RETURN_IF_ERROR(m->reserve(workspace_bytes, group_bytes, staging_bytes));
  return m;
}

Status DeviceMemory::reserve(uint64_t workspace_bytes, uint64_t group_bytes, uint64_t staging_bytes) {
  const uint64_t capacity = device_.memory().capacity_bytes;
  workspace_ = workspace_bytes ? workspace_bytes : std::min(capacity / 2, std::max(capacity / 8, uint64_t{256} * kMiB));
  if (workspace_ >= capacity) {
    return invalid_argument("binding.workspace (" + format_bytes(workspace_) + ") leaves no room for models on " +
                            device_.info().name + " (" + format_bytes(capacity) + ")");
  }
  gpu::DeviceMemoryPoolConfig pc;
  pc.partition_bytes = std::clamp(pow2_floor((capacity - workspace_) / 8), uint64_t{1} * kMiB, pc.partition_bytes);
  if (pc.partition_bytes < 4 * kMiB) pc.class_bytes.clear();
  const uint64_t pool_bytes = (capacity - workspace_) / pc.partition_bytes * pc.partition_bytes;
  auto region = gpu::DeviceBuffer::allocate(device_, pool_bytes);
  if (!region.ok()) return region.error().with_context("reserving the model pool of " + device_.info().name);
  region_ = std::move(*region);
  auto pool = gpu::DeviceMemoryPool::create(pool_bytes, pc);
  if (!pool.ok()) return pool.error().with_context(device_.info().name);
  pool_.emplace(std::move(*pool));
  committed_free_ = pool_->stats().free_bytes;
  workspace_ = capacity - pool_bytes;
  activations_ = std::make_unique<gpu::ActivationPool>(
      device_, [this](uint64_t bytes) { return lend(bytes); },
      [this](const gpu::ActivationSegment& s) { free("#activations/" + std::to_string(s.id)); });
  group_bytes_ = group_bytes;
  if (group_bytes_ == 0) {
    auto elbow = gpu::measure_copy_elbow(device_, region_->ptr(), pool_bytes, 64 * kMiB, 16 * kMiB);
    if (!elbow.ok()) return elbow.error().with_context("measuring the copy elbow of " + device_.info().name);
    group_bytes_ = elbow->elbow_bytes;
    elbow_curve_ = std::move(elbow->curve);
  }
  if (staging_bytes > 0) {
    auto staging = gpu::PinnedStaging::create(device_, staging_bytes);
    if (!staging.ok()) return staging.error().with_context(device_.info().name);
    staging_ = std::move(*staging);
  }
  return Status::OK();
}

DeviceMemory::~DeviceMemory() {
  activations_.reset();  // every run and kept value is gone: its segments go back
  staging_.reset();      // every stream that staged a copy has done it
  for (const auto& [ptr, model] : pinned_) device_.unregister_host(ptr);
  region_.reset();
}

gpu::WeightPlacer DeviceMemory::placer(std::string name) {
  return [this, name = std::move(name)](const std::vector<uint64_t>& sizes) -> Result<std::vector<gpu::DevicePtr>> {
    for (uint64_t n = fail_allocations_.load(); n > 0;) {
      if (fail_allocations_.compare_exchange_weak(n, n - 1)) {
        return out_of_memory("injected fault: the allocation of " + name + "'s weights on " + device_.info().name +
                             " failed");
      }
    }
    std::lock_guard lock(mu_);
    EMBER_ASSIGN_OR_RETURN(auto handles, pool_->allocate_model(name, sizes));
    std::vector<gpu::DevicePtr> ptrs;
    for (const auto& h : handles) ptrs.push_back(region_->ptr() + *pool_->offset_of(h));
    return ptrs;
  };
}

void DeviceMemory::free(const std::string& name) {
  std::lock_guard lock(mu_);
  pool_->free_model(name);
  committed_free_ = pool_->stats().free_bytes;
}

uint64_t DeviceMemory::bytes_of(const std::string& name) const {
  std::lock_guard lock(mu_);
  return pool_->model_bytes(name);
}

void DeviceMemory::commit() {
  std::lock_guard lock(mu_);
  committed_free_ = pool_->stats().free_bytes;
}

Status DeviceMemory::pin_host(const std::shared_ptr<const gpu::Model>& model) {
  const void* data = model->data();
  if (data == nullptr || pinned_.count(data) || model->data_bytes() == 0) return Status::OK();
  EMBER_RETURN_IF_ERROR(device_.register_host(data, model->data_bytes()));
  pinned_[data] = model;
  return Status::OK();
}

Result<gpu::ActivationSegment> DeviceMemory::lend(uint64_t bytes) {
  std::lock_guard lock(mu_);
  gpu::ActivationSegment seg;
  seg.id = ++segments_;
  const uint64_t chunk = pool_->config().partition_bytes;
  seg.bytes = (bytes + chunk - 1) / chunk * chunk;
  EMBER_ASSIGN_OR_RETURN(auto handles, pool_->allocate_model("#activations/" + std::to_string(seg.id), {seg.bytes}));
  seg.base = region_->ptr() + *pool_->offset_of(handles[0]);
  committed_free_ = pool_->stats().free_bytes;
  return seg;
}

EngineMemory DeviceMemory::totals() const {
  std::lock_guard lock(mu_);
  return {pool_->capacity(), committed_free_, workspace_, {}};
}

EngineMemory DeviceMemory::use(uint64_t kept_bytes, const std::vector<std::string>& shadows) const {
  const uint64_t lent = activations_->stats().reserved_bytes;  // not under mu_: see the lock order
  const gpu::MemoryInfo device = device_.memory();
  EngineMemory m = totals();
  const uint64_t region = region_->bytes();
  const uint64_t workspace_used = device.used_bytes > region ? device.used_bytes - region : 0;
  m.use.capacity = device.capacity_bytes;
  m.use.used = device.used_bytes;
  m.use.lent = lent;
  m.use.weights = m.pool_capacity - std::min(m.pool_capacity, m.pool_free + lent);
  {
    std::lock_guard lock(mu_);
    for (const auto& name : shadows) m.use.shadows += pool_->model_bytes(name);
  }
  m.use.weights -= std::min(m.use.weights, m.use.shadows);
  m.use.kept = kept_bytes;
  m.use.activations = workspace_used + lent - std::min(workspace_used + lent, kept_bytes);
  return m;
}

}  // namespace ember::engine
