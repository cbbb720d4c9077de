#include "actors/node/engine/executor_engine.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "base/units.hpp"

namespace ember {

namespace {
using Clock = std::chrono::steady_clock;
uint64_t us_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
}
/// Microseconds on the steady clock, for the generation loops' queue times.
uint64_t now_us() { return us_between(Clock::time_point{}, Clock::now()); }
}  // namespace

ExecutorEngine::ExecutorEngine(std::unique_ptr<gpu::Device> device, EngineOptions options)
    : device_(std::move(device)), options_(std::move(options)) {}

Result<std::unique_ptr<ExecutorEngine>> ExecutorEngine::create(std::unique_ptr<gpu::Device> device,
                                                               EngineOptions options) {
  std::unique_ptr<ExecutorEngine> e(new ExecutorEngine(std::move(device), options));
  gpu::Device& d = *e->device_;
  EMBER_ASSIGN_OR_RETURN(e->memory_, engine::DeviceMemory::reserve(d, options.workspace_bytes, options.group_bytes,
                                                                   options.staging_bytes));
  const engine::DeviceMemory& m = *e->memory_;
  if (options.io_batch > 0)
    e->io_ = std::make_unique<gpu::IoScheduler>(d, gpu::IoSchedulerOptions{m.group_bytes(), options.io_batch});
  const uint64_t pool_bytes = m.totals().pool_capacity;
  spdlog::info("{}: model pool {} in {} partitions, workspace {}, swap groups of {}{}{}{}", d.info().name,
               format_bytes(pool_bytes), pool_bytes / m.partition_bytes(), format_bytes(m.workspace()),
               format_bytes(m.group_bytes()), options.group_bytes ? " (configured)" : " (measured elbow)",
               e->io_ ? ", interleaved in batches of " + std::to_string(options.io_batch) : std::string(),
               m.staging() ? ", pinned staging " + format_bytes(m.staging()->capacity()) : std::string());
  e->hosted_ = std::make_unique<engine::HostedValues>(d);
  e->gate_ = std::make_shared<EngineGate>(e.get(), d.info().name);
  e->kept_ = std::make_unique<engine::KeptValues>(d, *e->memory_, options.node, e->gate_.get());
  e->jobs_ = std::make_unique<engine::JobWorker>(d, options.max_queue);
  e->shadows_ = std::make_unique<engine::ShadowHost>(d, *e->memory_, *e->jobs_);
  e->generations_ = std::make_unique<engine::Generations>(d, *e->memory_, options.generation);
  if (options.streams > 1) e->lanes_ = std::make_unique<engine::Lanes>(d, options.streams);
  if (options.node) options.node->attach(d.info().ordinal, e->gate_);
  return e;
}

ExecutorEngine::~ExecutorEngine() {
  stopping_generation_ = true;  // the generation steps still queued do nothing
  if (gate_) gate_->close();  // no front-end thread inside from here on
  if (jobs_) jobs_->stop();   // the jobs still queued run (each answers, guarded), then the worker is joined
  drain();                    // the runs the last jobs handed on run (each answers; a strand posts its next)
  lanes_.reset();
  if (generations_) {  // streams still running end with an answer; their blocks go before the pool
    generations_->fail_all(unavailable(device_->info().name + ": the device's engine stopped"), /*resumable=*/true);
    generations_.reset();
  }
  models_.clear();                  // before the pool region and the device go
  if (shadows_) shadows_->clear();  // a split elsewhere holding one has finished: this engine's gate is closed
  io_.reset();
  if (kept_) kept_->clear();  // values on other devices go back there
  // Values other devices moved here go with this device: their holders find the gate closed.
  if (hosted_) hosted_->clear();
  handoff_stream_.reset();
  jobs_.reset();
  memory_.reset();  // the activation pool (every run and kept value is gone), staging, pinned copies, region
}

EngineMemory ExecutorEngine::memory_use() const {
  // Kept values on the device (not moved to host memory), and other devices' values moved here.
  const uint64_t kept_here = kept_->bytes_here() + hosted_->bytes();
  return memory_->use(kept_here, shadows_->pool_names());
}

std::shared_ptr<ParkedGenerations> ExecutorEngine::evict(const model_key& key) {
  // Its streams parked and its loop detached before the weights go.
  std::shared_ptr<ParkedGenerations> parked = generations_->evicting(key);
  models_.erase(key);  // the LayerExecutor drains its streams before its blocks go back
  memory_->free(key.to_string());
  models_.unpublish(key);
  if (parked) publish_generation_stats();
  return parked;  // dropped by the caller (unbind): its streams end resumable
}

void ExecutorEngine::evict_for(const model_key& key, SwapRunResult& r) {
  if (auto parked = evict(key)) r.parked.emplace_back(key, std::move(parked));
  r.evicted.push_back(key);
}

void ExecutorEngine::publish(const model_key& key, const gpu::LayerExecutor* ex) {
  memory_->commit();
  if (ex) models_.publish(key, *ex);
}

std::optional<gpu::PeerWeights> ExecutorEngine::weights_of(const model_key& key) const {
  auto segments = models_.segments(key);
  if (!segments) return std::nullopt;
  return gpu::PeerWeights{device_.get(), std::move(*segments)};
}

void ExecutorEngine::bind(const model_key& key, std::shared_ptr<const gpu::Model> model,
                          std::function<void(Status)> done) {
  jobs_->post([this, key, model = std::move(model), done = std::move(done)] {
    if (models_.contains(key)) return done(Status::OK());
    drain();
    auto ex = gpu::LayerExecutor::create(*device_, model, {0, model->num_layers()}, memory_->placer(key.to_string()));
    if (!ex.ok()) {
      memory_->free(key.to_string());
      return done(ex.error());
    }
    (*ex)->set_activation_pool(&memory_->activations());
    (*ex)->set_staging(memory_->staging());
    publish(key, ex->get());
    models_.add(key, engine::Resident{model, std::move(*ex), {}});
    done(Status::OK());
  });
}

Error ExecutorEngine::unloaded(const model_key& key) const {
  return unavailable("model " + key.to_string() + " was unloaded from " + device_->info().name);
}

void ExecutorEngine::unbind(const model_key& key, std::function<void()> done) {
  jobs_->post([this, key, done = std::move(done)] {
    drain();
    // Its streams end resumable: the gateway continues them on another replica.
    if (auto parked = evict(key)) parked->fail(unloaded(key));
    done();
  });
}

void ExecutorEngine::unbind_all(std::function<void()> done) {
  jobs_->post([this, done = std::move(done)] {
    drain();
    while (auto key = models_.any()) {
      if (auto parked = evict(*key)) parked->fail(unloaded(*key));
    }
    done();
  });
}

Result<std::vector<gpu::HostTensor>> ExecutorEngine::run_checked(gpu::LayerExecutor& ex,
                                                                 const std::vector<gpu::HostTensor>& in) {
  return jobs_->guarded([&] { return ex.run_host(in); });
}

gpu::Stream& ExecutorEngine::handoff_stream() {
  if (!handoff_stream_) handoff_stream_ = device_->create_stream();
  return *handoff_stream_;
}

void ExecutorEngine::release(std::vector<uint64_t> handles) {
  jobs_->post([this, handles = std::move(handles)] { kept_->release(handles); });
}

void ExecutorEngine::lend(std::vector<uint64_t> handles,
                          std::function<void(Result<std::vector<gpu::PeerValue>>)> done) {
  jobs_->post(
      [this, handles = std::move(handles), done = std::move(done)] { done(kept_->lend(handles, handoff_stream())); });
}

bool ExecutorEngine::infer(const model_key& key, RunInputs inputs, std::function<void(InferResult)> done) {
  const auto enqueued = Clock::now();
  if (lanes_ && queued() >= options_.max_queue) return false;
  // The inputs are made on the thread that runs the job (a lane's, when it goes to one), after the
  // wait and before the run: their time counts in neither queue_us nor compute_us.
  auto run = [this, key, enqueued](gpu::LayerExecutor* ex, const RunInputs& inputs) {
    InferResult r;
    r.queue_us = us_between(enqueued, Clock::now());
    auto in = inputs();
    const auto start = Clock::now();
    if (!in.ok()) {
      r.outputs = in.error();
    } else if (!ex) {
      r.outputs = unavailable("model " + key.to_string() + " is not bound to " + device_->info().name);
    } else {
      r.outputs = run_checked(*ex, *in);
    }
    r.compute_us = us_between(start, Clock::now());
    return r;
  };
  return jobs_->try_post([this, key, run, inputs = std::move(inputs), done = std::move(done)]() mutable {
    engine::Resident* resident = models_.find(key);
    gpu::LayerExecutor* ex = resident ? resident->ex.get() : nullptr;
    if (lanes_ && ex) {
      return lanes_->beside(key,
                            [run, ex, inputs = std::move(inputs), done = std::move(done)] { done(run(ex, inputs)); });
    }
    done(run(ex, inputs));
  });
}

bool ExecutorEngine::take_inputs(SwapRun& run, SwapRunResult& r) {
  if (!run.make_inputs) return true;
  auto in = run.make_inputs();
  if (!in.ok()) {
    r = SwapRunResult{};
    r.run.outputs = in.error();
    r.inputs_failed = true;
    return false;
  }
  run.inputs = std::move(*in);
  return true;
}

bool ExecutorEngine::swap_run(SwapRun run, std::function<void(SwapRunResult)> done) {
  const auto enqueued = Clock::now();
  if (lanes_ && queued() >= options_.max_queue) return false;
  return jobs_->try_post([this, enqueued, run = std::move(run), done = std::move(done)]() mutable {
    if (lanes_ && runs_beside(run)) {
      gpu::LayerExecutor* ex = models_.find(run.key)->ex.get();
      const uint64_t footprint = memory_->bytes_of(run.key.to_string());
      const model_key key = run.key;
      auto beside = [this, ex, footprint, enqueued, run = std::move(run), done = std::move(done)]() mutable {
        SwapRunResult r;
        const auto picked = Clock::now();
        if (!take_inputs(run, r)) return done(std::move(r));
        const auto start = Clock::now();
        r.run.queue_us = us_between(enqueued, picked);
        auto stream = lanes_->take_stream();
        run_resident(*ex, run, r, *stream);
        lanes_->give_stream(std::move(stream));
        r.run.compute_us = us_between(start, Clock::now());
        r.footprint = footprint;
        r.fault = jobs_->broken();
        r.pool_free = memory_->totals().pool_free;
        done(std::move(r));
      };
      return lanes_->beside(key, std::move(beside));
    }
    SwapRunResult r;
    const auto picked = Clock::now();
    // Before the lanes drain: a run whose inputs fail waits for nothing and changes nothing.
    if (!take_inputs(run, r)) return done(std::move(r));
    const auto made = Clock::now();
    drain();
    const auto start = Clock::now();
    r.run.queue_us = us_between(enqueued, start) - us_between(picked, made);  // the wait, not the inputs
    swap_job(run, r);
    r.run.compute_us = us_between(start, Clock::now()) - r.warm_us;  // the profile's warm run is apart
    r.fault = jobs_->broken();
    r.pool_free = memory_->totals().pool_free;
    done(std::move(r));
  });
}

void ExecutorEngine::swap_job(SwapRun& run, SwapRunResult& r) {
  if (run.resume && run.generate) {
    r.run.outputs = invalid_argument("a swap run either resumes parked generations or joins a new one, not both");
    return;
  }
  for (const auto& k : run.evict) {
    if (k != run.key && models_.contains(k)) evict_for(k, r);
  }
  engine::Resident* resident = models_.find(run.key);
  if (!resident) {
    if (Status pinned = memory_->pin_host(run.model); !pinned.ok()) {
      r.run.outputs = pinned.error();
      return;
    }
    gpu::SwapInOptions opts{memory_->group_bytes(), memory_->placer(run.key.to_string()),
                            run.peer ? &*run.peer : nullptr, io_.get()};
    auto ex = gpu::LayerExecutor::swap_in(*device_, run.model, {0, run.model->num_layers()}, opts);
    for (size_t f = 0; !ex.ok() && ex.error().code() == ErrorCode::out_of_memory && f < run.fallback.size(); ++f) {
      const model_key& k = run.fallback[f];
      if (k == run.key || !models_.contains(k)) continue;
      evict_for(k, r);
      ex = gpu::LayerExecutor::swap_in(*device_, run.model, {0, run.model->num_layers()}, opts);
    }
    if (!ex.ok()) {
      memory_->free(run.key.to_string());
      r.run.outputs = ex.error();
      return;
    }
    (*ex)->set_activation_pool(&memory_->activations());
    (*ex)->set_staging(memory_->staging());
    resident = &models_.add(run.key, engine::Resident{run.model, std::move(*ex), {}});
    r.swapped = true;
  }
  gpu::LayerExecutor& ex = *resident->ex;
  if (run.generate) return join_generation(run, ex, r);
  if (run.resume) return resume_generation(run, ex, r);
  if (run.profile && run.model->generation()) return profile_generation(run, ex, r);
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
    r.footprint = memory_->bytes_of(run.key.to_string());
  } else {
    evict(run.key);  // half-copied weights are no replica
  }
}

void ExecutorEngine::run_resident(gpu::LayerExecutor& ex, const SwapRun& run, SwapRunResult& r, gpu::Stream& stream) {
  const bool handoff = !run.device_inputs.empty() || !run.keep.empty() || !run.peer_inputs.empty();
  if (run.shadow && !handoff && !run.profile) {
    // A Body paired with a Shadow (AsyFunc): its share of the rows runs there (worker thread only).
    r.run.outputs =
        run_with_shadow(*models_.find(run.key), run.key, run.inputs, run.shadow.get(), run.shadow_share, r.split);
    r.plan_bytes = ex.last_plan_bytes();
    return;
  }
  auto attempt = [&] {
    return handoff ? jobs_->guarded([&] { return kept_->run_handoff(ex, run, r.kept, stream); })
                   : run_checked(ex, run.inputs);
  };
  r.run.outputs = attempt();
  if (!r.run.outputs.ok() && r.run.outputs.error().code() == ErrorCode::out_of_memory) {
    // Values kept for later workflow steps take the room: they move to another device or to host
    // memory (never lost), and the run tries once more.
    std::vector<uint64_t> reads;
    for (const auto& in : run.device_inputs) reads.push_back(in.second);
    auto moved = kept_->spill(reads, stream);
    if (moved.ok() && *moved > 0) {
      spdlog::info("{}: moved {} kept value(s) to other devices or host memory to make room for a run of {}",
                   device_->info().name, *moved, run.key.to_string());
      r.run.outputs = attempt();
    }
  }
  r.plan_bytes = ex.last_plan_bytes();
}

Result<std::vector<gpu::HostTensor>> ExecutorEngine::run_with_shadow(engine::Resident& body, const model_key& key,
                                                                     const std::vector<gpu::HostTensor>& inputs,
                                                                     EngineGate* shadow, double share,
                                                                     gpu::SplitStats& st) {
  // The Shadow, held for the run: its engine cannot go meanwhile (its gate), nor its weights.
  EngineGate::Entry there(shadow);
  std::shared_ptr<engine::ShadowHost::Held> held = there ? there->shadow_of(key) : nullptr;
  return jobs_->guarded([&] {
    return engine::run_body_split(body, key, inputs, held.get(), share, st, handoff_stream(), memory_->staging());
  });
}

bool ExecutorEngine::runs_beside(const SwapRun& run) const {
  if (run.profile || run.shadow || run.generate || run.resume || !models_.contains(run.key)) return false;
  return std::none_of(run.evict.begin(), run.evict.end(),
                      [&](const model_key& k) { return k != run.key && models_.contains(k); });
}

std::optional<ExecutorEngine::InferResult> ExecutorEngine::run_here(const model_key& key, const InlineInputs& inputs) {
  std::optional<InferResult> out;
  // A batching model's request that would wait for another inline run goes to the router instead,
  // where it can join a batch; other models' requests take their turn.
  const bool batches = models_.batches(key);
  jobs_->run_here(
      [&] {
        engine::Resident* resident = models_.find(key);
        if (!resident || in_lane(key)) return;
        // A batching model runs here only when it would run alone anyway: nothing is configured to wait
        // for company (max_queue_delay_us 0) and the device is idle (this turn), so the router would
        // send it on at once as a batch of one.
        const gpu::ServingConfig& serving = resident->model->manifest().serving;
        if (serving.dynamic_batching && serving.max_queue_delay_us > 0) return;
        const std::vector<gpu::HostTensor>* in = inputs();
        if (!in) return;
        InferResult r;
        const auto start = Clock::now();
        r.outputs = run_checked(*resident->ex, *in);
        r.compute_us = us_between(start, Clock::now());
        out = std::move(r);
      },
      /*wait_for_turn=*/!batches);
  return out;
}

std::optional<Result<std::vector<gpu::HostTensor>>> ExecutorEngine::run_workflow_here(
    const WorkflowConfig& config, const WorkflowPlan& plan, const std::vector<model_key>& models,
    const InlineInputs& inputs, gpu::DeviceWorkflowStats* stats) {
  std::optional<Result<std::vector<gpu::HostTensor>>> out;
  jobs_->run_here(
      [&] {
        std::vector<gpu::LayerExecutor*> steps;
        for (const auto& key : models) {
          engine::Resident* resident = models_.find(key);
          if (!resident || in_lane(key)) return;
          const gpu::ServingConfig& serving = resident->model->manifest().serving;
          if (serving.dynamic_batching && serving.max_queue_delay_us > 0) return;
          steps.push_back(resident->ex.get());
        }
        const std::vector<gpu::HostTensor>* in = inputs();
        if (!in) return;
        // This turn is the queue's: no job runs meanwhile, so the hand-off stream is this run's.
        // The caller waits for every copy on it anyway (as a resident run's stream does).
        gpu::Stream& stream = handoff_stream();
        stream.set_caller_waits(true);
        out = jobs_->guarded([&] { return gpu::run_workflow_on_device(config, plan, steps, *in, stats, &stream); });
        stream.set_caller_waits(false);
      },
      /*wait_for_turn=*/true);
  return out;
}

void ExecutorEngine::load_shadow(const model_key& key, std::shared_ptr<const gpu::Model> model, gpu::LayerRange range,
                                 std::function<void(Result<ShadowInfo>)> done) {
  jobs_->post([this, key, model = std::move(model), range, done = std::move(done)] {
    const auto start = Clock::now();
    auto bytes = shadows_->load(key, model, range);
    if (!bytes.ok()) return done(bytes.error());
    done(ShadowInfo{*bytes, us_between(start, Clock::now())});
  });
}

void ExecutorEngine::drop_shadow(const model_key& key, std::function<void(bool)> done) {
  jobs_->post([this, key, done = std::move(done)] { done(shadows_->drop(key)); });
}

size_t ExecutorEngine::queued() const { return jobs_->queued() + (lanes_ ? lanes_->waiting() : 0); }

bool ExecutorEngine::weights_arrived(const SwapRun& run, gpu::LayerExecutor& ex, SwapRunResult& r) {
  if (Status copied = jobs_->guarded([&] { return ex.wait_weights(); }); !copied.ok()) {
    r.run.outputs = copied.error();
    r.fault = jobs_->broken();
    evict(run.key);  // half-copied weights are no replica
    return false;
  }
  publish(run.key, &ex);
  r.footprint = memory_->bytes_of(run.key.to_string());
  return true;
}

void ExecutorEngine::join_generation(SwapRun& run, gpu::LayerExecutor& ex, SwapRunResult& r) {
  // A step reads every layer: the weights arrive first (the copy's fault fails the join).
  if (!weights_arrived(run, ex, r)) return;
  Status joined = generations_->join(run.key, run.model, ex, run.generate, now_us());
  if (!joined.ok()) {
    r.run.outputs = joined.error();
    return;
  }
  r.run.outputs = std::vector<gpu::HostTensor>{};
  kick_generation();
}

void ExecutorEngine::kick_generation() {
  if (stepping_) return;
  stepping_ = true;
  jobs_->post([this] { generation_step(); });
}

void ExecutorEngine::generation_step() {
  stepping_ = false;
  if (stopping_generation_) return;  // the destructor fails the streams once the jobs have run
  bool more = false;
  Status stepped = jobs_->guarded([&] {
    more = generations_->step(now_us());
    return Status::OK();
  });
  if (!stepped.ok()) {
    generations_->fail_all(stepped.error(), /*resumable=*/true);  // the device broke, not the requests
    more = false;
  }
  publish_generation_stats();
  if (more) kick_generation();
}

void ExecutorEngine::publish_generation_stats() {
  engine::GenerationsStats st = generations_->stats();
  std::lock_guard lock(generation_stats_mu_);
  generation_stats_ = std::move(st);
}

void ExecutorEngine::resume_generation(SwapRun& run, gpu::LayerExecutor& ex, SwapRunResult& r) {
  auto* parked = dynamic_cast<engine::ParkedStreams*>(run.resume.get());
  if (!parked) {
    r.run.outputs = invalid_argument("parked generations of another kind than this engine's cannot resume here");
    return;
  }
  if (!weights_arrived(run, ex, r)) return;  // the streams stay parked for elsewhere
  auto joined = generations_->resume(run.key, run.model, ex, *parked, now_us());
  if (!joined.ok()) {
    r.run.outputs = joined.error();
    return;
  }
  r.run.outputs = std::vector<gpu::HostTensor>{};
  publish_generation_stats();
  kick_generation();
}

void ExecutorEngine::profile_generation(SwapRun& run, gpu::LayerExecutor& ex, SwapRunResult& r) {
  auto loop = generations_->loop(run.key, run.model, ex);
  if (!loop.ok()) {
    r.run.outputs = loop.error();
    return;
  }
  engine::GenerationLoop& l = **loop;
  engine::GenerationProfileSeams seams;
  seams.guarded = [this](const std::function<Status()>& fn) { return jobs_->guarded(fn); };
  seams.now_us = now_us;
  seams.plan_bytes = [&ex] { return ex.last_plan_bytes(); };
  seams.wait_weights = [this, &ex] { return jobs_->guarded([&] { return ex.wait_weights(); }); };
  seams.fault = [this](const Error& e) { generations_->fail_all(e, /*resumable=*/true); };
  seams.elbow = memory_->elbow_curve();
  seams.model = run.key.to_string();
  engine::GenerationProfiler profiler(l, std::move(seams));
  auto profile = profiler.run();
  r.plan_bytes = profiler.plan_bytes();
  if (!profile.ok()) {
    r.run.outputs = profile.error();
    if (profiler.weights_failed()) evict(run.key);  // half-copied weights are no replica
    return;
  }
  r.warm_us = profile->warm_us;
  r.run.outputs = std::vector<gpu::HostTensor>{};
  publish(run.key, &ex);
  r.footprint = memory_->bytes_of(run.key.to_string());
  publish_generation_stats();
  if (l.busy()) kick_generation();
}

void ExecutorEngine::cancel_generation(const model_key& key, std::string id) {
  jobs_->post([this, key, id = std::move(id)] {
    if (generations_->cancel(key, id)) publish_generation_stats();
  });
}

engine::GenerationsStats ExecutorEngine::generation_stats() const {
  std::lock_guard lock(generation_stats_mu_);
  return generation_stats_;
}

}  // namespace ember
