#include "actors/node/executor_engine.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>

#include "actors/tensor_codec.hpp"
#include "base/units.hpp"
#include "gpu/copy_elbow.hpp"

namespace ember {

namespace {
using Clock = std::chrono::steady_clock;
uint64_t us_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
}
constexpr uint64_t kMiB = 1ull << 20;
uint64_t pow2_floor(uint64_t v) {
  uint64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
}  // namespace

/// The lanes of concurrent runs (see the header).
struct ExecutorEngine::Lanes {
  explicit Lanes(uint32_t streams) : threads(std::make_unique<WorkQueue>(WorkQueueOptions{.threads = streams})) {}
  std::unique_ptr<WorkQueue> threads;
  mutable std::mutex mu;
  std::condition_variable idle;  // notified when `strands` empties
  /// Models with a run in a lane, each with the runs waiting behind it (its strand).
  std::map<model_key, std::deque<std::function<void()>>> strands;  // guarded by mu
  size_t waiting = 0;                                              // guarded by mu: runs in the deques
  uint32_t active = 0, peak = 0;                                   // guarded by mu
  std::vector<std::unique_ptr<gpu::Stream>> streams;               // guarded by mu: free hand-off streams
};

ExecutorEngine::ExecutorEngine(std::unique_ptr<gpu::Device> device, EngineOptions options)
    : device_(std::move(device)), options_(options) {}

Result<std::unique_ptr<ExecutorEngine>> ExecutorEngine::create(std::unique_ptr<gpu::Device> device,
                                                               EngineOptions options) {
  std::unique_ptr<ExecutorEngine> e(new ExecutorEngine(std::move(device), options));
  EMBER_RETURN_IF_ERROR(e->reserve());
  e->jobs_ = std::make_unique<WorkQueue>(WorkQueueOptions{.threads = 1, .capacity = options.max_queue});
  if (options.streams > 1) e->lanes_ = std::make_unique<Lanes>(options.streams);
  e->gate_ = std::make_shared<EngineGate>(e.get(), e->device_->info().name);
  if (options.node) options.node->attach(e->device_->info().ordinal, e->gate_);
  return e;
}

// The pool takes the device memory minus the workspace, in whole partitions: 128 MiB (Torpor) on
// real devices, smaller on small (test) devices so that a pool holds at least 8 of them.
Status ExecutorEngine::reserve() {
  const uint64_t capacity = device_->memory().capacity_bytes;
  workspace_ = options_.workspace_bytes ? options_.workspace_bytes
                                        : std::min(capacity / 2, std::max(capacity / 8, uint64_t{256} * kMiB));
  if (workspace_ >= capacity) {
    return invalid_argument("binding.workspace (" + format_bytes(workspace_) + ") leaves no room for models on " +
                            device_->info().name + " (" + format_bytes(capacity) + ")");
  }
  gpu::DeviceMemoryPoolConfig pc;
  pc.partition_bytes = std::clamp(pow2_floor((capacity - workspace_) / 8), uint64_t{1} * kMiB, pc.partition_bytes);
  if (pc.partition_bytes < 4 * kMiB) pc.class_bytes.clear();
  const uint64_t pool_bytes = (capacity - workspace_) / pc.partition_bytes * pc.partition_bytes;
  auto region = gpu::DeviceBuffer::allocate(*device_, pool_bytes);
  if (!region.ok()) return region.error().with_context("reserving the model pool of " + device_->info().name);
  region_ = std::move(*region);
  auto pool = gpu::DeviceMemoryPool::create(pool_bytes, pc);
  if (!pool.ok()) return pool.error().with_context(device_->info().name);
  pool_.emplace(std::move(*pool));
  pool_free_ = pool_->stats().free_bytes;
  workspace_ = capacity - pool_bytes;
  activations_ = std::make_unique<gpu::ActivationPool>(
      *device_, [this](uint64_t bytes) { return lend_activations(bytes); },
      [this](const gpu::ActivationSegment& s) { free_in_pool("#activations/" + std::to_string(s.id)); });
  group_bytes_ = options_.group_bytes;
  if (group_bytes_ == 0) {
    auto elbow = gpu::measure_copy_elbow(*device_, region_->ptr(), pool_bytes, 64 * kMiB, 16 * kMiB);
    if (!elbow.ok()) return elbow.error().with_context("measuring the copy elbow of " + device_->info().name);
    group_bytes_ = elbow->elbow_bytes;
    elbow_curve_ = std::move(elbow->curve);
  }
  if (options_.staging_bytes > 0) {
    auto staging = gpu::PinnedStaging::create(*device_, options_.staging_bytes);
    if (!staging.ok()) return staging.error().with_context(device_->info().name);
    staging_ = std::move(*staging);
  }
  if (options_.io_batch > 0)
    io_ = std::make_unique<gpu::IoScheduler>(*device_, gpu::IoSchedulerOptions{group_bytes_, options_.io_batch});
  spdlog::info("{}: model pool {} in {} partitions, workspace {}, swap groups of {}{}{}{}", device_->info().name,
               format_bytes(pool_bytes), pool_bytes / pc.partition_bytes, format_bytes(workspace_),
               format_bytes(group_bytes_), options_.group_bytes ? " (configured)" : " (measured elbow)",
               io_ ? ", interleaved in batches of " + std::to_string(options_.io_batch) : std::string(),
               staging_ ? ", pinned staging " + format_bytes(staging_->capacity()) : std::string());
  return Status::OK();
}

ExecutorEngine::~ExecutorEngine() {
  if (gate_) gate_->close();  // no front-end thread inside from here on
  jobs_.reset();    // the jobs still queued run (each answers), then the worker is joined
  drain();          // the runs the last jobs handed on run (each answers; a strand posts its next)
  lanes_.reset();
  models_.clear();  // before the pool region and the device go
  {
    std::lock_guard lock(shadows_mu_);
    shadows_.clear();  // a split elsewhere holding one has finished: this engine's gate is closed
  }
  io_.reset();
  kept_.clear();  // values on other devices go back there
  {
    // Values other devices moved here go with this device: their holders find the gate closed.
    std::lock_guard lock(hosted_->mu);
    hosted_->buffers.clear();
    hosted_->bytes = 0;
  }
  activations_.reset();  // every run and kept value is gone: its segments go back
  handoff_stream_.reset();
  staging_.reset();  // every stream that staged a copy has done it
  for (const auto& [ptr, model] : pinned_) device_->unregister_host(ptr);
  region_.reset();
}

EngineMemory ExecutorEngine::engine_memory() const {
  std::lock_guard lock(mu_);
  return {pool_ ? pool_->capacity() : 0, pool_free_, workspace_, {}};
}

EngineMemory ExecutorEngine::memory_use() const {
  uint64_t kept_here = 0;  // kept values on the device (not moved to host memory)
  {
    std::lock_guard kept_lock(kept_mu_);
    for (const auto& [handle, k] : kept_) {
      if (k.value.value.buffer && !k.at) kept_here += k.value.value.desc.bytes();
    }
  }
  const uint64_t lent = activations_ ? activations_->stats().reserved_bytes : 0;
  const gpu::MemoryInfo device = device_->memory();
  EngineMemory m = engine_memory();
  const uint64_t region = region_ ? region_->bytes() : 0;
  const uint64_t workspace_used = device.used_bytes > region ? device.used_bytes - region : 0;
  m.use.capacity = device.capacity_bytes;
  m.use.used = device.used_bytes;
  m.use.lent = lent;
  m.use.weights = m.pool_capacity - std::min(m.pool_capacity, m.pool_free + lent);
  {
    std::scoped_lock lock(shadows_mu_, pool_mu_);
    for (const auto& [key, shadow] : shadows_) m.use.shadows += pool_->model_bytes(shadow->pool_name);
  }
  m.use.weights -= std::min(m.use.weights, m.use.shadows);
  {
    std::lock_guard lock(hosted_->mu);
    kept_here += hosted_->bytes;  // other devices' values moved here
  }
  m.use.kept = kept_here;
  m.use.activations = workspace_used + lent - std::min(workspace_used + lent, kept_here);
  return m;
}

gpu::WeightPlacer ExecutorEngine::placer(std::string name) {
  return [this, name = std::move(name)](const std::vector<uint64_t>& sizes) -> Result<std::vector<gpu::DevicePtr>> {
    for (uint64_t n = fail_allocations_.load(); n > 0;) {
      if (fail_allocations_.compare_exchange_weak(n, n - 1)) {
        return out_of_memory("injected fault: the allocation of " + name + "'s weights on " + device_->info().name +
                             " failed");
      }
    }
    std::lock_guard lock(pool_mu_);
    EMBER_ASSIGN_OR_RETURN(auto handles, pool_->allocate_model(name, sizes));
    std::vector<gpu::DevicePtr> ptrs;
    for (const auto& h : handles) ptrs.push_back(region_->ptr() + *pool_->offset_of(h));
    return ptrs;
  };
}

// Page-locks the model's host copy once (cudaHostRegister on CUDA): swaps then copy at full speed.
Status ExecutorEngine::pin_host(const std::shared_ptr<const gpu::Model>& model) {
  const void* data = model->data();
  if (data == nullptr || pinned_.count(data) || model->data_bytes() == 0) return Status::OK();
  EMBER_RETURN_IF_ERROR(device_->register_host(data, model->data_bytes()));
  pinned_[data] = model;
  return Status::OK();
}

void ExecutorEngine::free_in_pool(const std::string& name) {
  uint64_t free = 0;
  {
    std::lock_guard lock(pool_mu_);
    pool_->free_model(name);
    free = pool_->stats().free_bytes;
  }
  std::lock_guard lock(mu_);
  pool_free_ = free;
}

uint64_t ExecutorEngine::pool_bytes_of(const model_key& key) {
  std::lock_guard lock(pool_mu_);
  return pool_->model_bytes(key.to_string());
}

void ExecutorEngine::evict(const model_key& key) {
  models_.erase(key);  // the LayerExecutor drains its streams before its blocks go back
  free_in_pool(key.to_string());
  std::lock_guard lock(mu_);
  published_.erase(key);
  batching_.erase(key);
}

void ExecutorEngine::publish(const model_key& key, const gpu::LayerExecutor* ex) {
  uint64_t free = 0;
  {
    std::lock_guard lock(pool_mu_);
    free = pool_->stats().free_bytes;
  }
  std::lock_guard lock(mu_);
  if (ex) {
    published_[key] = ex->weight_segments();
    if (ex->model().manifest().serving.dynamic_batching) {
      batching_.insert(key);
    } else {
      batching_.erase(key);
    }
  }
  pool_free_ = free;
}

Result<gpu::ActivationSegment> ExecutorEngine::lend_activations(uint64_t bytes) {
  gpu::ActivationSegment seg;
  uint64_t free = 0;
  {
    std::lock_guard lock(pool_mu_);
    seg.id = ++activation_segments_;
    const uint64_t chunk = pool_->config().partition_bytes;
    seg.bytes = (bytes + chunk - 1) / chunk * chunk;
    EMBER_ASSIGN_OR_RETURN(auto handles, pool_->allocate_model("#activations/" + std::to_string(seg.id), {seg.bytes}));
    seg.base = region_->ptr() + *pool_->offset_of(handles[0]);
    free = pool_->stats().free_bytes;
  }
  std::lock_guard lock(mu_);
  pool_free_ = free;
  return seg;
}

void ExecutorEngine::bind(const model_key& key, std::shared_ptr<const gpu::Model> model,
                          std::function<void(Status)> done) {
  jobs_->post([this, key, model = std::move(model), done = std::move(done)] {
    if (models_.count(key)) return done(Status::OK());
    drain();
    auto ex = gpu::LayerExecutor::create(*device_, model, {0, model->num_layers()}, placer(key.to_string()));
    if (!ex.ok()) {
      free_in_pool(key.to_string());
      return done(ex.error());
    }
    (*ex)->set_activation_pool(activations_.get());
    (*ex)->set_staging(staging_.get());
    publish(key, ex->get());
    models_[key] = Resident{model, std::move(*ex)};
    done(Status::OK());
  });
}

void ExecutorEngine::unbind(const model_key& key, std::function<void()> done) {
  jobs_->post([this, key, done = std::move(done)] {
    drain();
    evict(key);
    done();
  });
}

void ExecutorEngine::unbind_all(std::function<void()> done) {
  jobs_->post([this, done = std::move(done)] {
    drain();
    while (!models_.empty()) evict(models_.begin()->first);
    done();
  });
}

template <class Fn>
auto ExecutorEngine::guarded(Fn&& fn) -> decltype(fn()) {
  {
    std::lock_guard lock(mu_);
    if (!broken_.empty()) return device_fault(broken_);
    if (fault_next_kernel_.exchange(false)) {
      broken_ = device_->info().name + ": injected fault: a kernel faulted";
      return device_fault(broken_);
    }
  }
  try {
    auto out = fn();
    if (!device_->status().ok()) {
      std::lock_guard lock(mu_);
      broken_ = device_->status().error().message();
    }
    return out;
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    broken_ = device_->info().name + ": executor threw: " + e.what();
    return device_fault(broken_);
  }
}

Result<std::vector<gpu::HostTensor>> ExecutorEngine::run_checked(gpu::LayerExecutor& ex,
                                                                 const std::vector<gpu::HostTensor>& in) {
  return guarded([&] { return ex.run_host(in); });
}

gpu::Stream& ExecutorEngine::handoff_stream() {
  if (!handoff_stream_) handoff_stream_ = device_->create_stream();
  return *handoff_stream_;
}

Result<std::vector<gpu::HostTensor>> ExecutorEngine::run_handoff(gpu::LayerExecutor& ex, const SwapRun& run,
                                                                 SwapRunResult& r, gpu::Stream& stream) {
  return guarded([&]() -> Result<std::vector<gpu::HostTensor>> {
    std::vector<gpu::NamedValue> in;
    {
      std::lock_guard lock(kept_mu_);
      for (const auto& [name, handle] : run.device_inputs) {
        auto it = kept_.find(handle);
        if (it == kept_.end()) {
          return unavailable("input '" + name + "': the value handed on " + device_->info().name +
                             " is gone (the device restarted)");
        }
        EMBER_ASSIGN_OR_RETURN(auto value, on_device(it->second, false, stream));
        in.push_back({name, std::move(value)});
      }
    }
    for (const auto& t : run.inputs) {
      EMBER_ASSIGN_OR_RETURN(auto b, activations_->allocate(std::max<uint64_t>(t.desc.bytes(), 1)));
      gpu::copy_in(stream, staging_.get(), b->ptr(), t.data(), t.desc.bytes());
      in.push_back({t.name, gpu::DeviceValue{t.desc, std::move(b)}});
    }
    for (const auto& p : run.peer_inputs) {
      EMBER_ASSIGN_OR_RETURN(auto b, activations_->allocate(std::max<uint64_t>(p.desc.bytes(), 1)));
      stream.copy_from_peer(b->ptr(), *p.device, p.ptr, p.desc.bytes());
      in.push_back({p.name, gpu::DeviceValue{p.desc, std::move(b)}});
    }
    EMBER_RETURN_IF_ERROR(stream.synchronize());
    EMBER_ASSIGN_OR_RETURN(auto out, ex.run_device(in));
    for (const auto& name : run.keep) {
      if (std::none_of(out.begin(), out.end(), [&](const gpu::NamedValue& v) { return v.name == name; })) {
        return invalid_argument("the model has no output '" + name + "'");
      }
    }
    std::vector<gpu::HostTensor> back;
    gpu::PinnedStaging::Downloads staged(staging_.get());
    for (auto& v : out) {
      const bool keep = std::count(run.keep.begin(), run.keep.end(), v.name) > 0;
      const bool wanted =
          std::count(run.wanted.begin(), run.wanted.end(), v.name) > 0 || (run.wanted.empty() && run.keep.empty());
      if (wanted) {
        EMBER_ASSIGN_OR_RETURN(auto t, gpu::HostTensor::allocate(v.name, v.value.desc));
        staged.copy_to_host(stream, t.data(), v.value.buffer->ptr(), v.value.desc.bytes());
        back.push_back(std::move(t));
      }
      if (keep) {
        std::lock_guard kept_lock(kept_mu_);
        const uint64_t handle = next_handle_++;
        r.kept.push_back({v.name, handle, v.value.desc});
        {
          std::lock_guard lock(mu_);
          ++kept_count_;
          kept_bytes_ += v.value.desc.bytes();
        }
        kept_.emplace(handle, Kept{std::move(v), std::nullopt});
      }
    }
    EMBER_RETURN_IF_ERROR(stream.synchronize());
    staged.finish();
    return back;
  });
}

void ExecutorEngine::release(std::vector<uint64_t> handles) {
  jobs_->post([this, handles = std::move(handles)] {
    std::lock_guard kept_lock(kept_mu_);
    for (uint64_t h : handles) {
      auto it = kept_.find(h);
      if (it == kept_.end()) continue;
      {
        std::lock_guard lock(mu_);
        --kept_count_;
        kept_bytes_ -= it->second.value.value.desc.bytes();
      }
      kept_.erase(it);
    }
  });
}

void ExecutorEngine::lend(std::vector<uint64_t> handles,
                          std::function<void(Result<std::vector<gpu::PeerValue>>)> done) {
  jobs_->post([this, handles = std::move(handles), done = std::move(done)] {
    std::vector<gpu::PeerValue> out;
    {
      std::lock_guard kept_lock(kept_mu_);
      for (uint64_t h : handles) {
        auto it = kept_.find(h);
        if (it == kept_.end())
          return done(not_found("no value " + std::to_string(h) + " is kept on " + device_->info().name));
        // A value moved to the host comes back to be copied.
        auto value = on_device(it->second, true, handoff_stream());
        if (!value.ok()) return done(value.error());
        out.push_back({it->second.value.name, device_.get(), value->buffer->ptr(), value->desc});
      }
    }
    done(std::move(out));
  });
}

Result<gpu::DeviceValue> ExecutorEngine::on_device(Kept& k, bool restore, gpu::Stream& stream) {
  if (k.value.value.buffer && !k.at) return k.value.value;
  const gpu::TensorDesc& desc = k.value.value.desc;
  EMBER_ASSIGN_OR_RETURN(auto b, activations_->allocate(std::max<uint64_t>(desc.bytes(), 1)));
  if (k.at) {
    // On another device of the node: copied back over the link while that device stays.
    ExecutorEngine* there = k.at->enter();
    if (!there) {
      return unavailable("the value '" + k.value.name + "' kept for " + device_->info().name + " had moved to " +
                         k.at->device() + ", which restarted since");
    }
    stream.copy_from_peer(b->ptr(), *there->device_, k.value.value.buffer->ptr(), desc.bytes());
    Status copied = stream.synchronize();
    k.at->leave();
    EMBER_RETURN_IF_ERROR(copied);
  } else {
    gpu::copy_in(stream, staging_.get(), b->ptr(), k.host->data(), desc.bytes());
    EMBER_RETURN_IF_ERROR(stream.synchronize());
  }
  gpu::DeviceValue value{desc, std::move(b)};
  if (restore) {
    k.value.value = value;
    k.host.reset();
    k.at.reset();
  }
  return value;
}

Result<std::shared_ptr<gpu::DeviceBuffer>> ExecutorEngine::host_for_peer(gpu::Device& from, gpu::DevicePtr src,
                                                                         uint64_t bytes) {
  // From the workspace only: a neighbour's value never takes the room this device's weights need.
  EMBER_ASSIGN_OR_RETURN(auto b, gpu::DeviceBuffer::allocate(*device_, std::max<uint64_t>(bytes, 1)));
  auto stream = device_->create_stream();
  stream->copy_from_peer(b->ptr(), from, src, bytes);
  EMBER_RETURN_IF_ERROR(stream->synchronize());
  std::lock_guard lock(hosted_->mu);
  const uint64_t id = ++hosted_->next;
  const gpu::DevicePtr ptr = b->ptr();
  hosted_->buffers.emplace(id, std::move(b));
  hosted_->bytes += bytes;
  return gpu::DeviceBuffer::adopt(*device_, ptr, bytes, [hosted = hosted_, id, bytes](gpu::DevicePtr) {
    std::lock_guard lock(hosted->mu);
    if (hosted->buffers.erase(id)) hosted->bytes -= bytes;
  });
}

bool ExecutorEngine::spill_to_peer(Kept& k) {
  if (!options_.node) return false;
  // The others, least pressed first (the most room in their workspace, where values they host go).
  std::vector<std::pair<uint64_t, std::shared_ptr<EngineGate>>> room;
  for (auto& gate : options_.node->others(gate_.get())) {
    ExecutorEngine* there = gate->enter();
    if (!there) continue;
    const uint64_t free = there->device_->memory().largest_free_block;
    gate->leave();
    room.emplace_back(free, std::move(gate));
  }
  std::stable_sort(room.begin(), room.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const uint64_t bytes = k.value.value.desc.bytes();
  for (auto& [free, gate] : room) {
    if (free < bytes) break;
    ExecutorEngine* there = gate->enter();
    if (!there) continue;
    auto moved = there->host_for_peer(*device_, k.value.value.buffer->ptr(), bytes);
    gate->leave();
    if (!moved.ok()) continue;  // no room after all: the next, else host memory
    k.value.value.buffer = std::move(*moved);
    k.at = std::move(gate);
    return true;
  }
  return false;
}

Result<size_t> ExecutorEngine::spill(const std::vector<uint64_t>& keep, gpu::Stream& stream) {
  std::lock_guard kept_lock(kept_mu_);
  std::vector<Kept*> here;
  for (auto& [handle, k] : kept_) {
    if (k.value.value.buffer && !k.at && !std::count(keep.begin(), keep.end(), handle)) here.push_back(&k);
  }
  std::stable_sort(here.begin(), here.end(), [](const Kept* a, const Kept* b) {
    return a->value.value.desc.bytes() > b->value.value.desc.bytes();
  });
  Spills moved;
  for (Kept* k : here) {
    const uint64_t bytes = k->value.value.desc.bytes();
    if (spill_to_peer(*k)) {
      ++moved.to_peer;
      moved.to_peer_bytes += bytes;
      continue;
    }
    EMBER_ASSIGN_OR_RETURN(auto t, gpu::HostTensor::allocate(k->value.name, k->value.value.desc));
    stream.copy_to_host(t.data(), k->value.value.buffer->ptr(), bytes);
    EMBER_RETURN_IF_ERROR(stream.synchronize());
    k->host = std::move(t);
    k->value.value.buffer.reset();
    ++moved.to_host;
    moved.to_host_bytes += bytes;
  }
  std::lock_guard lock(mu_);
  spills_.to_host += moved.to_host;
  spills_.to_host_bytes += moved.to_host_bytes;
  spills_.to_peer += moved.to_peer;
  spills_.to_peer_bytes += moved.to_peer_bytes;
  return here.size();
}

ExecutorEngine::Spills ExecutorEngine::spilled() const {
  std::lock_guard lock(mu_);
  return spills_;
}

std::pair<size_t, uint64_t> ExecutorEngine::kept() const {
  std::lock_guard lock(mu_);  // not kept_mu_, which a spill holds across its copies
  return {kept_count_, kept_bytes_};
}

bool ExecutorEngine::infer(const model_key& key, std::vector<gpu::HostTensor> inputs,
                           std::function<void(InferResult)> done) {
  const auto enqueued = Clock::now();
  if (lanes_ && queued() >= options_.max_queue) return false;
  return jobs_->try_post([this, key, enqueued, inputs = std::move(inputs), done = std::move(done)]() mutable {
    if (auto it = models_.find(key); lanes_ && it != models_.end()) {
      gpu::LayerExecutor* ex = it->second.ex.get();
      return beside(key, [this, ex, enqueued, inputs = std::move(inputs), done = std::move(done)] {
        InferResult r;
        const auto start = Clock::now();
        r.queue_us = us_between(enqueued, start);
        r.outputs = run_checked(*ex, inputs);
        r.compute_us = us_between(start, Clock::now());
        done(std::move(r));
      });
    }
    InferResult r;
    const auto start = Clock::now();
    r.queue_us = us_between(enqueued, start);
    auto it = models_.find(key);
    if (it == models_.end()) {
      r.outputs = unavailable("model " + key.to_string() + " is not bound to " + device_->info().name);
    } else {
      r.outputs = run_checked(*it->second.ex, inputs);
    }
    r.compute_us = us_between(start, Clock::now());
    done(std::move(r));
  });
}

ExecutorEngine::Shadow::~Shadow() {
  ex.reset();  // its stream drained before its weights go back
  if (!pool_name.empty()) engine->free_in_pool(pool_name);
}

std::shared_ptr<ExecutorEngine::Shadow> ExecutorEngine::shadow_of(const model_key& key) {
  std::lock_guard lock(shadows_mu_);
  auto it = shadows_.find(key);
  return it == shadows_.end() ? nullptr : it->second;
}

void ExecutorEngine::load_shadow(const model_key& key, std::shared_ptr<const gpu::Model> model, gpu::LayerRange range,
                                 std::function<void(Result<ShadowInfo>)> done) {
  jobs_->post([this, key, model = std::move(model), range, done = std::move(done)] {
    const auto start = Clock::now();
    {
      std::lock_guard lock(shadows_mu_);
      shadows_.erase(key);  // one Shadow a key: its memory goes back once no split holds it
    }
    if (Status pinned = pin_host(model); !pinned.ok()) return done(pinned.error());
    auto shadow = std::make_shared<Shadow>();
    shadow->engine = this;
    // A name of its own: a Shadow it replaces may still be held by a split, and frees its own.
    shadow->pool_name = "#shadow/" + key.to_string() + "/" + std::to_string(++shadow_serial_);
    auto ex = guarded([&] { return gpu::LayerExecutor::create(*device_, model, range, placer(shadow->pool_name)); });
    if (!ex.ok()) {
      free_in_pool(shadow->pool_name);
      shadow->pool_name.clear();
      return done(ex.error().with_context("a Shadow of " + key.to_string() + " on " + device_->info().name));
    }
    (*ex)->set_activation_pool(activations_.get());
    (*ex)->set_staging(staging_.get());
    ShadowInfo info{(*ex)->weight_bytes(), 0};
    shadow->ex = std::move(*ex);
    publish(key, nullptr);  // the pool's free bytes, as others read them
    {
      std::lock_guard lock(shadows_mu_);
      shadows_[key] = std::move(shadow);
    }
    info.start_us = us_between(start, Clock::now());
    done(info);
  });
}

void ExecutorEngine::drop_shadow(const model_key& key, std::function<void(bool)> done) {
  jobs_->post([this, key, done = std::move(done)] {
    std::shared_ptr<Shadow> gone;
    {
      std::lock_guard lock(shadows_mu_);
      auto it = shadows_.find(key);
      if (it == shadows_.end()) return done(false);
      gone = std::move(it->second);
      shadows_.erase(it);
    }
    gone.reset();  // unless a split still runs on it
    done(true);
  });
}

Result<gpu::LayerExecutor*> ExecutorEngine::view_of(Resident& r, gpu::LayerRange range) {
  auto& v = r.views[{range.first, range.last}];
  if (!v) {
    EMBER_ASSIGN_OR_RETURN(v, gpu::LayerExecutor::view(*r.ex, range));
  }
  return v.get();
}

Result<std::vector<gpu::HostTensor>> ExecutorEngine::run_with_shadow(Resident& body, const model_key& key,
                                                                     const std::vector<gpu::HostTensor>& inputs,
                                                                     EngineGate* shadow, double share,
                                                                     gpu::SplitStats& st) {
  // The Shadow, held for the run: its engine cannot go meanwhile (its gate), nor its weights.
  ExecutorEngine* there = shadow ? shadow->enter() : nullptr;
  std::shared_ptr<Shadow> held = there ? there->shadow_of(key) : nullptr;
  auto out = guarded([&]() -> Result<std::vector<gpu::HostTensor>> {
    auto& stream = handoff_stream();
    EMBER_ASSIGN_OR_RETURN(gpu::Activations in, body.ex->upload_inputs(inputs, stream));
    int64_t rows = 0;
    for (const auto& [id, v] : in) rows = std::max<int64_t>(rows, v.desc.shape.rank ? v.desc.shape[0] : 0);
    const int64_t theirs =
        share > 0 && rows >= 2 ? std::clamp<int64_t>(std::llround(share * static_cast<double>(rows)), 1, rows - 1) : 0;
    // A Body whose weights are still arriving (just swapped in) runs alone: views need them there.
    const bool warm = body.ex->weights_resident();
    if (!held || !warm || theirs <= 0 || theirs >= rows) {
      st.shadow_failed = true;
      st.shadow_lost = !held;
      st.shadow_error = !held ? "no Shadow of " + key.to_string() + " is held there (dropped, or its device restarted)"
                        : !warm ? "the Body's weights are still arriving"
                                : "a batch of " + std::to_string(rows) + " rows is too small to split";
      EMBER_ASSIGN_OR_RETURN(auto whole, body.ex->run(in));
      return gpu::download(stream, whole, body.model->graph().value_names, staging_.get());
    }
    const gpu::LayerRange range = held->ex->range();
    const uint32_t n = body.model->num_layers();
    gpu::ShadowSplit split;
    if (range.first > 0) {
      EMBER_ASSIGN_OR_RETURN(split.before, view_of(body, {0, range.first}));
    }
    EMBER_ASSIGN_OR_RETURN(split.body, view_of(body, range));
    split.shadow = held->ex.get();
    if (range.last < n) {
      EMBER_ASSIGN_OR_RETURN(split.after, view_of(body, {range.last, n}));
    }
    EMBER_ASSIGN_OR_RETURN(auto values, gpu::run_split(split, in, theirs, &st));
    return gpu::download(stream, values, body.model->graph().value_names, staging_.get());
  });
  held.reset();
  if (there) shadow->leave();
  return out;
}

bool ExecutorEngine::swap_run(SwapRun run, std::function<void(SwapRunResult)> done) {
  const auto enqueued = Clock::now();
  if (lanes_ && queued() >= options_.max_queue) return false;
  return jobs_->try_post([this, enqueued, run = std::move(run), done = std::move(done)]() mutable {
    if (lanes_ && runs_beside(run)) {
      gpu::LayerExecutor* ex = models_.at(run.key).ex.get();
      const uint64_t footprint = pool_bytes_of(run.key);
      const model_key key = run.key;
      return beside(key, [this, ex, footprint, enqueued, run = std::move(run), done = std::move(done)] {
        SwapRunResult r;
        const auto start = Clock::now();
        r.run.queue_us = us_between(enqueued, start);
        auto stream = take_stream();
        run_resident(*ex, run, r, *stream);
        give_stream(std::move(stream));
        r.run.compute_us = us_between(start, Clock::now());
        r.footprint = footprint;
        {
          std::lock_guard lock(mu_);
          r.fault = !broken_.empty();
          r.pool_free = pool_free_;
        }
        done(std::move(r));
      });
    }
    drain();
    SwapRunResult r;
    const auto start = Clock::now();
    r.run.queue_us = us_between(enqueued, start);
    swap_job(run, r);
    r.run.compute_us = us_between(start, Clock::now()) - r.warm_us;  // the profile's warm run is apart
    {
      std::lock_guard lock(mu_);
      r.fault = !broken_.empty();
      r.pool_free = pool_free_;
    }
    done(std::move(r));
  });
}

void ExecutorEngine::swap_job(SwapRun& run, SwapRunResult& r) {
  for (const auto& k : run.evict) {
    if (k != run.key && models_.count(k)) {
      evict(k);
      r.evicted.push_back(k);
    }
  }
  auto it = models_.find(run.key);
  if (it == models_.end()) {
    if (Status pinned = pin_host(run.model); !pinned.ok()) {
      r.run.outputs = pinned.error();
      return;
    }
    gpu::SwapInOptions opts{group_bytes_, placer(run.key.to_string()), run.peer ? &*run.peer : nullptr, io_.get()};
    auto ex = gpu::LayerExecutor::swap_in(*device_, run.model, {0, run.model->num_layers()}, opts);
    for (size_t f = 0; !ex.ok() && ex.error().code() == ErrorCode::out_of_memory && f < run.fallback.size(); ++f) {
      const model_key& k = run.fallback[f];
      if (k == run.key || !models_.count(k)) continue;
      evict(k);
      r.evicted.push_back(k);
      ex = gpu::LayerExecutor::swap_in(*device_, run.model, {0, run.model->num_layers()}, opts);
    }
    if (!ex.ok()) {
      free_in_pool(run.key.to_string());
      r.run.outputs = ex.error();
      return;
    }
    (*ex)->set_activation_pool(activations_.get());
    (*ex)->set_staging(staging_.get());
    it = models_.emplace(run.key, Resident{run.model, std::move(*ex)}).first;
    r.swapped = true;
  }
  gpu::LayerExecutor& ex = *it->second.ex;
  run_resident(ex, run, r, handoff_stream());
  // The copy may outlast a run that failed early: the source stays locked until this job answers.
  Status copied = ex.wait_weights();
  if (!copied.ok() && r.run.outputs.ok()) r.run.outputs = copied.error();
  if (copied.ok()) {
    if (run.profile) {
      const auto t0 = Clock::now();
      auto again = run_checked(ex, run.inputs);
      r.warm_us = us_between(t0, Clock::now());
      if (!again.ok()) r.run.outputs = again.error();
    }
    publish(run.key, &ex);
    r.footprint = pool_bytes_of(run.key);
  } else {
    evict(run.key);  // half-copied weights are no replica
  }
}

void ExecutorEngine::run_resident(gpu::LayerExecutor& ex, const SwapRun& run, SwapRunResult& r, gpu::Stream& stream) {
  const bool handoff = !run.device_inputs.empty() || !run.keep.empty() || !run.peer_inputs.empty();
  if (run.shadow && !handoff && !run.profile) {
    // A Body paired with a Shadow (AsyFunc): its share of the rows runs there (worker thread only).
    r.run.outputs =
        run_with_shadow(models_.at(run.key), run.key, run.inputs, run.shadow.get(), run.shadow_share, r.split);
    r.plan_bytes = ex.last_plan_bytes();
    return;
  }
  r.run.outputs = handoff ? run_handoff(ex, run, r, stream) : run_checked(ex, run.inputs);
  if (!r.run.outputs.ok() && r.run.outputs.error().code() == ErrorCode::out_of_memory) {
    // Values kept for later workflow steps take the room: they move to another device or to host
    // memory (never lost), and the run tries once more.
    std::vector<uint64_t> reads;
    for (const auto& in : run.device_inputs) reads.push_back(in.second);
    auto moved = spill(reads, stream);
    if (moved.ok() && *moved > 0) {
      spdlog::info("{}: moved {} kept value(s) to other devices or host memory to make room for a run of {}",
                   device_->info().name, *moved, run.key.to_string());
      r.run.outputs = handoff ? run_handoff(ex, run, r, stream) : run_checked(ex, run.inputs);
    }
  }
  r.plan_bytes = ex.last_plan_bytes();
}

bool ExecutorEngine::runs_beside(const SwapRun& run) const {
  if (run.profile || run.shadow || !models_.count(run.key)) return false;
  return std::none_of(run.evict.begin(), run.evict.end(),
                      [&](const model_key& k) { return k != run.key && models_.count(k); });
}

void ExecutorEngine::beside(const model_key& key, std::function<void()> run) {
  Lanes& l = *lanes_;
  {
    std::lock_guard lock(l.mu);
    auto it = l.strands.find(key);
    if (it != l.strands.end()) {  // the model runs: this run waits its turn behind it
      it->second.push_back(std::move(run));
      ++l.waiting;
      return;
    }
    l.strands.emplace(key, std::deque<std::function<void()>>{});
  }
  // One run per lane task; the strand's next run goes to the back of the lanes' queue, so models
  // with many runs waiting take turns with the others.
  struct Step {
    ExecutorEngine* engine;
    model_key key;
    void operator()(const std::function<void()>& run) const {
      Lanes& l = *engine->lanes_;
      {
        std::lock_guard lock(l.mu);
        l.peak = std::max(l.peak, ++l.active);
      }
      run();
      std::lock_guard lock(l.mu);
      --l.active;
      auto it = l.strands.find(key);
      if (it->second.empty()) {
        l.strands.erase(it);
        if (l.strands.empty()) l.idle.notify_all();
        return;
      }
      l.threads->post([step = *this, next = std::move(it->second.front())] { step(next); });
      it->second.pop_front();
      --l.waiting;
    }
  };
  l.threads->post([step = Step{this, key}, run = std::move(run)] { step(run); });
}

void ExecutorEngine::drain() {
  if (!lanes_) return;
  std::unique_lock lock(lanes_->mu);
  lanes_->idle.wait(lock, [&] { return lanes_->strands.empty(); });
}

bool ExecutorEngine::in_lane(const model_key& key) const {
  if (!lanes_) return false;
  std::lock_guard lock(lanes_->mu);
  return lanes_->strands.count(key) > 0;
}

std::unique_ptr<gpu::Stream> ExecutorEngine::take_stream() {
  {
    std::lock_guard lock(lanes_->mu);
    if (!lanes_->streams.empty()) {
      auto s = std::move(lanes_->streams.back());
      lanes_->streams.pop_back();
      return s;
    }
  }
  return device_->create_stream();
}

void ExecutorEngine::give_stream(std::unique_ptr<gpu::Stream> stream) {
  std::lock_guard lock(lanes_->mu);
  lanes_->streams.push_back(std::move(stream));
}

uint32_t ExecutorEngine::running() const {
  if (!lanes_) return 0;
  std::lock_guard lock(lanes_->mu);
  return lanes_->active;
}

uint32_t ExecutorEngine::peak_running() const {
  if (!lanes_) return 0;
  std::lock_guard lock(lanes_->mu);
  return lanes_->peak;
}

std::optional<ExecutorEngine::InferResult> ExecutorEngine::run_here(const model_key& key,
                                                                    const std::vector<gpu::HostTensor>& inputs) {
  std::optional<InferResult> out;
  bool batches = false;
  {
    std::lock_guard lock(mu_);
    batches = batching_.count(key) > 0;
  }
  // A batching model's request that would wait for another inline run goes to the router instead,
  // where it can join a batch; other models' requests take their turn.
  jobs_->run_here(
      [&] {
        auto it = models_.find(key);
        if (it == models_.end() || in_lane(key)) return;
        // A batching model runs here only when it would run alone anyway: nothing is configured to wait
        // for company (max_queue_delay_us 0) and the device is idle (this turn), so the router would
        // send it on at once as a batch of one.
        const gpu::ServingConfig& serving = it->second.model->manifest().serving;
        if (serving.dynamic_batching && serving.max_queue_delay_us > 0) return;
        InferResult r;
        const auto start = Clock::now();
        r.outputs = run_checked(*it->second.ex, inputs);
        r.compute_us = us_between(start, Clock::now());
        out = std::move(r);
      },
      /*wait_for_turn=*/!batches);
  return out;
}

std::optional<Result<std::vector<gpu::HostTensor>>> ExecutorEngine::run_workflow_here(
    const WorkflowConfig& config, const WorkflowPlan& plan, const std::vector<model_key>& models,
    const std::vector<gpu::HostTensor>& inputs, gpu::DeviceWorkflowStats* stats) {
  std::optional<Result<std::vector<gpu::HostTensor>>> out;
  jobs_->run_here(
      [&] {
        std::vector<gpu::LayerExecutor*> steps;
        for (const auto& key : models) {
          auto it = models_.find(key);
          if (it == models_.end() || in_lane(key)) return;
          const gpu::ServingConfig& serving = it->second.model->manifest().serving;
          if (serving.dynamic_batching && serving.max_queue_delay_us > 0) return;
          steps.push_back(it->second.ex.get());
        }
        // This turn is the queue's: no job runs meanwhile, so the hand-off stream is this run's.
        // The caller waits for every copy on it anyway (as a resident run's stream does).
        gpu::Stream& stream = handoff_stream();
        stream.set_caller_waits(true);
        out = guarded([&] { return gpu::run_workflow_on_device(config, plan, steps, inputs, stats, &stream); });
        stream.set_caller_waits(false);
      },
      /*wait_for_turn=*/true);
  return out;
}

bool ExecutorEngine::holds(const model_key& key) const {
  std::lock_guard lock(mu_);
  return published_.count(key) > 0;
}

Result<infer_reply> build_reply(infer_reply skeleton, const std::vector<std::string>& wanted,
                                ExecutorEngine::InferResult& r) {
  if (!r.outputs.ok()) return r.outputs.error();
  for (const auto& name : wanted) {
    const bool known =
        std::any_of(r.outputs->begin(), r.outputs->end(), [&](const gpu::HostTensor& t) { return t.name == name; });
    if (!known) return invalid_argument("the model has no output '" + name + "'");
  }
  infer_reply reply = std::move(skeleton);
  reply.queue_us = r.queue_us;
  reply.compute_us = r.compute_us;
  for (const auto& t : *r.outputs) {
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), t.name) != wanted.end()) {
      reply.outputs.push_back(encode_tensor(t));
    }
  }
  return reply;
}

ExecutorEngine* EngineGate::enter() {
  std::lock_guard lock(mu_);
  if (engine_) ++inside_;
  return engine_;
}

void EngineGate::leave() {
  bool last = false;
  {
    std::lock_guard lock(mu_);
    last = --inside_ == 0 && !engine_;
  }
  if (last) left_.notify_all();
}

void EngineGate::close() {
  std::unique_lock lock(mu_);
  engine_ = nullptr;
  left_.wait(lock, [&] { return inside_ == 0; });
}

bool EngineGate::open() const {
  std::lock_guard lock(mu_);
  return engine_ != nullptr;
}

std::optional<ExecutorEngine::InferResult> EngineGate::run_here(const model_key& key,
                                                                const std::vector<gpu::HostTensor>& inputs) {
  ExecutorEngine* engine = enter();
  if (!engine) return std::nullopt;
  auto out = engine->run_here(key, inputs);
  leave();
  return out;
}

std::optional<Result<std::vector<gpu::HostTensor>>> EngineGate::run_workflow_here(
    const WorkflowConfig& config, const WorkflowPlan& plan, const std::vector<model_key>& models,
    const std::vector<gpu::HostTensor>& inputs, gpu::DeviceWorkflowStats* stats) {
  ExecutorEngine* engine = enter();
  if (!engine) return std::nullopt;
  auto out = engine->run_workflow_here(config, plan, models, inputs, stats);
  leave();
  return out;
}

bool EngineGate::holds(const model_key& key) {
  ExecutorEngine* engine = enter();
  if (!engine) return false;
  const bool held = engine->holds(key);
  leave();
  return held;
}

void NodeEngines::attach(uint32_t ordinal, std::shared_ptr<EngineGate> gate) {
  std::lock_guard lock(mu_);
  gates_[ordinal] = std::move(gate);
}

std::vector<std::shared_ptr<EngineGate>> NodeEngines::others(const EngineGate* self) const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<EngineGate>> out;
  for (const auto& [ordinal, gate] : gates_) {
    if (gate.get() != self) out.push_back(gate);
  }
  return out;
}

std::optional<EngineMemory> EngineGate::memory_use() {
  ExecutorEngine* engine = enter();
  if (!engine) return std::nullopt;
  const EngineMemory m = engine->memory_use();
  leave();
  return m;
}

std::optional<gpu::PeerWeights> ExecutorEngine::weights_of(const model_key& key) const {
  std::lock_guard lock(mu_);
  auto it = published_.find(key);
  if (it == published_.end()) return std::nullopt;
  return gpu::PeerWeights{device_.get(), it->second};
}

size_t ExecutorEngine::queued() const {
  size_t n = jobs_->queued();
  if (lanes_) {
    std::lock_guard lock(lanes_->mu);
    n += lanes_->waiting;
  }
  return n;
}

std::vector<model_key> ExecutorEngine::bound() const {
  std::lock_guard lock(mu_);
  std::vector<model_key> keys;
  for (const auto& [k, segments] : published_) keys.push_back(k);
  return keys;
}

}  // namespace ember
