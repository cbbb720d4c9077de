// ExecutorEngine: the blocking half of a gpu_executor, the façade of the engine room
// (actors/node/engine/). It owns one device and composes the room's parts over it:
//   - JobWorker (job_worker.hpp): the serial worker that runs jobs in order (bind, unbind, infer,
//     swap_run, release, lend, Shadows), its bound and overflow policy, and the sticky fault;
//   - DeviceMemory (device_memory.hpp): the reservation, the model pool, activation lending, pinned
//     host copies and staging, the accounting, under one lock;
//   - ResidentModels (resident_models.hpp): the models resident on the device (one
//     gpu::LayerExecutor each) and what other threads may know of them;
//   - Lanes (lanes.hpp): concurrent runs of resident models (binding.streams), one strand a model;
//   - KeptValues and HostedValues (kept_values.hpp): values kept for a workflow's next step, their
//     spills to a peer device or host memory and their return;
//   - ShadowHost (shadow_host.hpp): Shadows held here for Bodies elsewhere (AsyFunc), and the
//     Body's side of a split;
//   - EngineGate (engine_gate.hpp): the way front-end threads and the node's other engines reach it;
//   - Generations (generations.hpp): the generative models served token by token here, one
//     GenerationLoop each (their KV blocks, continuous batching, sampling and stops).
// The gpu_executor actor uses this façade, not the parts: the order between them (drain the lanes
// before residency changes, spill and try once more when a run does not fit, enter a peer's gate
// around a read there) is the engine's own and stays inside it.
//
// Late binding (Torpor §4.3-4.4): swap_run makes a model resident if it is not (evicting what the
// router said, from the pool), copies its weights in groups sized at the copy elbow measured at
// start, from the host copy (registered, i.e. pinned, once per model) or from another device's copy
// (peer), and runs the request pipelined with the copy: the first layer starts after the first
// group. Eviction only frees device memory: the host copy is authoritative and never written.
//
// Runs. A run of a resident model that needs no copy, eviction or profile goes to a lane when there
// are several (Lanes); every job that changes what is resident first waits for the lanes to drain.
// Activations come from the device allocator per run (the executor's liveness plan, one block per
// run) and go back when the run ends; a run that does not fit moves kept values away (KeptValues::
// spill) and tries once more, else fails out of memory for the router to handle (it admits
// concurrent runs by their measured activation bytes). A run paired with a Shadow runs on the
// worker, never in a lane.
//
// Inputs. infer and swap_run (SwapRun::make_inputs) may take their inputs as RunInputs
// (actors/engine_run.hpp), made on the thread that runs the job (the worker, or the lane the run
// goes to) right before the run; `done` is called on that thread too. The gpu_executor decodes the
// client's tensors in the one and encodes its answer in the other, so neither happens on its actor;
// this room knows neither their wire format nor CAF. Inputs that fail answer the job with their
// error before anything changed on the device (nothing evicted, copied, drained or run).
//
// Inline runs: a front-end thread may run a warm request itself, in the queue's order, when the
// device is idle (run_here, run_workflow_here, reached through the gate): no thread is woken for
// it. Such a run only reads the resident models and runs one, as an infer job would; every change
// of residency stays a job of the worker's.
//
// Generation (docs/design/generation.md): a swap_run with SwapRun::generate makes the model resident
// as any run does, then joins the request to the model's loop instead of running inputs; the loop's
// steps are jobs of the worker, one posted after another while any loop has work, so other models'
// runs, binds and swaps interleave with them step by step. A step that faults breaks the engine as
// any run does, and every stream ends with the fault, resumable. A model evicted with streams (a
// swap job's plan or fallback) has them parked (preempted, their blocks to host memory or dropped to
// be recomputed, then taken out of its loop: parked_generations.hpp) and handed out in that job's
// SwapRunResult::parked; a swap_run with SwapRun::resume makes the model resident as any run does
// and its loop here (made if this engine has none) takes them back and goes on. unbind of a model
// with streams, and the engine's destruction, end them resumable (the gateway continues them
// elsewhere).
//
// The profile of a generative model (SwapRun::profile on a model with a generation section) runs
// through its loop with real KV blocks instead of `inputs` (generation_profile.hpp: what it runs and
// measures): one synthetic request (a prompt of kProfilePromptTokens valid ids, then
// kProfileDecodeTokens greedy tokens, EOS ignored, nothing emitted anywhere), cold and then warm.
// compute_us is the cold request's time (with the weights' copy, as for any profile's cold run),
// warm_us the warm one's: each is one request's prefill plus its decode steps, alone on the device.
// plan_bytes is the largest step's activation plan (the prefill's). From the warm request the
// loop's preemption costs are set (GenerationBatcher::set_costs): prefill µs per token from its
// prefill step; host bytes/s from the copy elbow measured at start when there is one, else from a
// timed KV swap of a few blocks. A failed weight copy evicts the model, as for any run.
//
// Destruction closes the gate first (waiting for a call inside), runs the jobs still queued (each
// answers), joins the worker, drains and joins the lanes, then lets go of the models, the Shadows,
// the I/O scheduler, the kept values (those moved to other devices go back there) and the values
// hosted for others, and last the device memory and the device. It blocks for as long as the jobs
// take, so it never runs on an actor's thread nor on the engine's own worker (which cannot join
// itself): the executor hands its engine to the node's maintenance queue to destroy.
//
// Thread safety: every public member may be called from any thread. Durations (queue_us,
// compute_us, a Shadow's start) are measured here on the steady clock; the parts take no clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/engine_run.hpp"
#include "actors/model_key.hpp"
#include "actors/node/engine/device_memory.hpp"
#include "actors/node/engine/device_workflow.hpp"
#include "actors/node/engine/engine_gate.hpp"
#include "actors/node/engine/generation_profile.hpp"
#include "actors/node/engine/generations.hpp"
#include "actors/node/engine/job_worker.hpp"
#include "actors/node/engine/kept_values.hpp"
#include "actors/node/engine/lanes.hpp"
#include "actors/node/engine/resident_models.hpp"
#include "actors/node/engine/shadow_host.hpp"
#include "base/status.hpp"
#include "config/workflow_config.hpp"
#include "gpu/device.hpp"
#include "gpu/executor.hpp"
#include "gpu/io_scheduler.hpp"
#include "placement/workflow_plan.hpp"

namespace ember {

struct EngineOptions {
  /// Inference jobs waiting at most (node.max_queue); beyond it infer and swap_run refuse.
  size_t max_queue = 1024;
  /// Device memory left out of the model pool for activations and scratch. 0 = an eighth of the
  /// device, at least 256 MiB, at most half the device.
  uint64_t workspace_bytes = 0;
  /// Swap-in copy group size; 0 = the copy elbow, measured at start.
  uint64_t group_bytes = 0;
  /// Runs of resident models executing at once (binding.streams; lanes.hpp). 1: every job in turn
  /// on the worker.
  uint32_t streams = 1;
  /// Swap-ins from host memory go through the device's I/O scheduler (gpu/io_scheduler.hpp) in
  /// blocks of group_bytes, this many per batch (binding.io_batch); 0: each swap issues its copy
  /// groups at once on a stream of its own.
  uint32_t io_batch = 6;
  /// The node's engines (null: none): a value kept for a workflow's next step that must make room
  /// moves to the least pressed of them before host memory (StreamBox's rules 2 and 3). The engine
  /// enters itself there at creation.
  std::shared_ptr<NodeEngines> node;
  /// Page-locked host memory that copies from and to pageable memory (request inputs, answers,
  /// values restored from host memory) go through (binding.staging; gpu/pinned_staging.hpp); 0:
  /// they copy pageable memory directly.
  uint64_t staging_bytes = 0;
  /// The generative models' loops: batching bounds, KV cache bounds (its name is each model's key),
  /// and the preemption costs weighed until a profile measures a model's (generation_loop.hpp).
  engine::GenerationLoopConfig generation;
};

class ExecutorEngine {
 public:
  using InferResult = ember::InferResult;
  using SwapRunResult = ember::SwapRunResult;
  using Spills = engine::KeptValues::Spills;
  struct ShadowInfo {
    uint64_t bytes = 0;     // its weights, in this device's model pool
    uint64_t start_us = 0;  // from the job's start to ready (the copy from host memory)
  };

  /// Takes the device, reserves its model pool and measures the copy elbow (blocking, ~0.1 s).
  static Result<std::unique_ptr<ExecutorEngine>> create(std::unique_ptr<gpu::Device> device, EngineOptions options);
  /// Blocks (see the header): never call it on an actor's thread or on this engine's worker.
  ~ExecutorEngine();
  ExecutorEngine(const ExecutorEngine&) = delete;
  ExecutorEngine& operator=(const ExecutorEngine&) = delete;

  const gpu::DeviceInfo& device_info() const { return device_->info(); }
  gpu::Device& device() const { return *device_; }
  gpu::MemoryInfo memory() const { return device_->memory(); }
  EngineMemory engine_memory() const { return memory_->totals(); }
  /// engine_memory() with `use` filled: what is in use now, by use (metrics read it at each scrape).
  EngineMemory memory_use() const;
  Status device_status() const { return device_->status(); }
  uint64_t group_bytes() const { return memory_->group_bytes(); }
  /// The elbow probe, (size, GB/s) per size; empty when group_bytes was configured.
  const std::vector<std::pair<uint64_t, double>>& elbow_curve() const { return memory_->elbow_curve(); }
  /// The activation pool's reservation beyond the workspace (grown and shrunk with the load).
  gpu::ActivationPool::Stats activation_stats() const { return memory_->activation_stats(); }

  // -- models ---------------------------------------------------------------------------------
  /// Uploads the model's weights (all layers) into the pool. Binding a bound key again is OK.
  void bind(const model_key& key, std::shared_ptr<const gpu::Model> model, std::function<void(Status)> done);
  /// Frees the model's device memory after the jobs queued before it ran.
  void unbind(const model_key& key, std::function<void()> done);
  /// Frees every model's device memory after the jobs queued before it ran.
  void unbind_all(std::function<void()> done);
  /// Resident now (a hint for callers choosing a device; the answer may change at once).
  bool holds(const model_key& key) const { return models_.holds(key); }
  /// Where a resident model's weights live, for a device-to-device swap onto another device;
  /// nullopt when not resident. Valid while the model stays resident (the router's lock).
  std::optional<gpu::PeerWeights> weights_of(const model_key& key) const;
  std::vector<model_key> bound() const { return models_.bound(); }

  // -- runs -----------------------------------------------------------------------------------
  /// Runs a resident model on the host tensors `inputs` makes when the job starts, on the thread
  /// that runs it (RunInputs, actors/engine_run.hpp); `done` gets the outputs (named as the model
  /// names them), or the error `inputs` gave (nothing ran), on that thread too. Returns false,
  /// without calling either, when the queue is full.
  bool infer(const model_key& key, RunInputs inputs, std::function<void(InferResult)> done);
  /// infer with inputs already at hand.
  bool infer(const model_key& key, std::vector<gpu::HostTensor> inputs, std::function<void(InferResult)> done) {
    return infer(
        key, [in = std::move(inputs)]() mutable { return Result<std::vector<gpu::HostTensor>>(std::move(in)); },
        std::move(done));
  }
  /// Late binding: see the header. SwapRun::make_inputs, when set, runs first on the job's thread.
  /// Returns false, without calling `done`, when the queue is full.
  bool swap_run(SwapRun run, std::function<void(SwapRunResult)> done);
  /// Ends generation `id` of `key` at its next step (a job: after the ones queued before); unknown
  /// ids are ignored (the stream ended already).
  void cancel_generation(const model_key& key, std::string id);
  /// The profile's synthetic generation request (see the header).
  static constexpr uint32_t kProfilePromptTokens = engine::kProfilePromptTokens,
                            kProfileDecodeTokens = engine::kProfileDecodeTokens;
  /// The generations' totals and per-model counts (the worker's last copy; any thread).
  engine::GenerationsStats generation_stats() const;
  /// An inline run (see the header): runs resident `key` on the calling thread when the worker is
  /// idle and nothing is queued; nullopt, without running, otherwise, or when the model is not
  /// resident or batches with a queue delay (its requests wait for company on the router's way;
  /// without one, a request that finds the device idle is a batch of one), or when `inputs` gives
  /// none (they do not decode). `inputs` is asked once the run is sure to happen, never before.
  std::optional<InferResult> run_here(const model_key& key, const InlineInputs& inputs);
  /// A whole workflow request run on the calling thread as run_here runs one request: when every
  /// step's model (`models`, per step) is resident here, none waits to gather a batch, and the
  /// device is idle, the steps run one after the other with the hand-off on the device
  /// (device_workflow.hpp); nullopt, having run nothing, otherwise (`inputs` as for run_here).
  std::optional<Result<std::vector<gpu::HostTensor>>> run_workflow_here(const WorkflowConfig& config,
                                                                        const WorkflowPlan& plan,
                                                                        const std::vector<model_key>& models,
                                                                        const InlineInputs& inputs,
                                                                        gpu::DeviceWorkflowStats* stats);
  /// The gate front-end threads reach this engine through (never null).
  const std::shared_ptr<EngineGate>& gate() const { return gate_; }

  // -- kept values (kept_values.hpp) ------------------------------------------------------------
  /// Drops values kept on the device (a job: after the jobs queued before it). Unknown handles are
  /// ignored (the value went with a restart).
  void release(std::vector<uint64_t> handles);
  /// Where kept values live (a job, after the ones queued before), for another device's copy;
  /// not_found for a handle the engine does not hold (released, or gone with a restart). They stay
  /// where they are until released.
  void lend(std::vector<uint64_t> handles, std::function<void(Result<std::vector<gpu::PeerValue>>)> done);
  /// Values kept now, and their bytes (tests, metrics).
  std::pair<size_t, uint64_t> kept() const { return kept_->counts(); }
  /// Kept values moved so far to make room: to host memory, to another device.
  Spills spilled() const { return kept_->spilled(); }
  /// Room for a value another device of the node moves here (HostedValues::host).
  Result<std::shared_ptr<gpu::DeviceBuffer>> host_for_peer(gpu::Device& from, gpu::DevicePtr src, uint64_t bytes) {
    return hosted_->host(from, src, bytes);
  }

  // -- shadow functions (AsyFunc; shadow_host.hpp) ----------------------------------------------
  /// Holds layers `range` of `key` on this device as a Shadow (a job): their weights copied from
  /// the host copy `model` into the model pool (beside whole models, counted as weights), ready to
  /// share batches with a Body of the same model on another device (SwapRun::shadow there). A
  /// Shadow of the key already held is replaced.
  void load_shadow(const model_key& key, std::shared_ptr<const gpu::Model> model, gpu::LayerRange range,
                   std::function<void(Result<ShadowInfo>)> done);
  /// Drops the Shadow of `key` (a job); false when none was held. A split running on it finishes
  /// first: its memory goes back when the last run using it lets go.
  void drop_shadow(const model_key& key, std::function<void(bool)> done);
  /// The Shadow of `key` held here, or null (a Body's engine, through this one's gate).
  std::shared_ptr<engine::ShadowHost::Held> shadow_of(const model_key& key) const { return shadows_->held(key); }

  // -- faults and load --------------------------------------------------------------------------
  /// Fault injection (nodes started with --allow-faults): the next `n` device allocations for model
  /// weights fail as out of memory.
  void fail_allocations(uint64_t n) { memory_->fail_allocations(n); }
  /// Fault injection: the next run faults the device as a failed kernel would (the engine is broken
  /// until restarted). Device-independent: it takes the path of a real fault, not the device's.
  void fault_next_kernel() { jobs_->fault_next_kernel(); }
  /// Inference jobs waiting (not the ones running), on the worker or behind their model's runs.
  size_t queued() const;
  /// Runs executing in lanes now, and the most seen at once so far (streams > 1; else 0).
  uint32_t running() const { return lanes_ ? lanes_->running() : 0; }
  uint32_t peak_running() const { return lanes_ ? lanes_->peak() : 0; }
  /// The bound on them (EngineOptions::max_queue).
  size_t max_queue() const { return options_.max_queue; }

 private:
  ExecutorEngine(std::unique_ptr<gpu::Device> device, EngineOptions options);
  // The thread running jobs only:
  /// Evicts `key`; its generation streams, parked (null when it had none).
  std::shared_ptr<ParkedGenerations> evict(const model_key& key);
  /// The error an unloaded model's streams end with (resumable).
  Error unloaded(const model_key& key) const;
  /// evict() within a swap job: its parked streams go to `r.parked`.
  void evict_for(const model_key& key, SwapRunResult& r);
  /// Commits the pool's free bytes and, with `ex`, publishes `key` as resident there.
  void publish(const model_key& key, const gpu::LayerExecutor* ex);
  void swap_job(SwapRun& run, SwapRunResult& r);
  /// Makes `run.inputs` with SwapRun::make_inputs (when set) on the calling thread; false, with `r`
  /// holding only its error (and inputs_failed), when that fails.
  static bool take_inputs(SwapRun& run, SwapRunResult& r);
  /// The run of a resident model (plain, with hand-off or with a Shadow), with one more try after
  /// moving kept values away when it did not fit. Any thread running a job or a lane.
  void run_resident(gpu::LayerExecutor& ex, const SwapRun& run, SwapRunResult& r, gpu::Stream& stream);
  /// A swap_run that can go to a lane (its model resident, nothing to evict, profile or split).
  bool runs_beside(const SwapRun& run) const;
  /// A model with a run in a lane (or waiting for one): inline runs leave it to its strand.
  bool in_lane(const model_key& key) const { return lanes_ && lanes_->in_lane(key); }
  void drain() {
    if (lanes_) lanes_->drain();
  }
  Result<std::vector<gpu::HostTensor>> run_checked(gpu::LayerExecutor& ex, const std::vector<gpu::HostTensor>& in);
  /// A run of resident `body` with `share` of its rows on the Shadow of `key` behind `shadow`.
  Result<std::vector<gpu::HostTensor>> run_with_shadow(engine::Resident& body, const model_key& key,
                                                       const std::vector<gpu::HostTensor>& inputs, EngineGate* shadow,
                                                       double share, gpu::SplitStats& st);
  /// Waits for `ex`'s weights (guarded) before a generation joins or resumes: published with the
  /// footprint in `r`, or false with the copy's error and the fault in `r` and the model evicted.
  bool weights_arrived(const SwapRun& run, gpu::LayerExecutor& ex, SwapRunResult& r);
  /// Joins a SwapRun::generate to resident `ex`'s loop; the run's answer in `r` (the worker only).
  void join_generation(SwapRun& run, gpu::LayerExecutor& ex, SwapRunResult& r);
  /// Takes SwapRun::resume's streams back into resident `ex`'s loop (the worker only).
  void resume_generation(SwapRun& run, gpu::LayerExecutor& ex, SwapRunResult& r);
  /// The profile of a generative model (see the header; engine::GenerationProfiler runs it, this
  /// is its glue; the worker only).
  void profile_generation(SwapRun& run, gpu::LayerExecutor& ex, SwapRunResult& r);
  /// Posts the next generation step unless one is posted (the worker only); the step itself.
  void kick_generation();
  void generation_step();
  /// Copies the generations' stats for other threads (the worker only).
  void publish_generation_stats();
  /// Uploads and downloads of jobs (the worker, or an inline run in the queue's turn); runs in
  /// lanes take streams from the lanes.
  gpu::Stream& handoff_stream();

  // The destructor lets go of these in the order the header gives, not in the reverse of this one.
  std::unique_ptr<gpu::Device> device_;
  const EngineOptions options_;
  std::unique_ptr<engine::DeviceMemory> memory_;
  std::unique_ptr<engine::HostedValues> hosted_;
  /// The device's host-to-device copies of swap-ins (io_batch > 0): reset after the models, whose
  /// destructors wait for their jobs.
  std::unique_ptr<gpu::IoScheduler> io_;
  engine::ResidentModels models_;
  std::unique_ptr<engine::KeptValues> kept_;
  std::unique_ptr<engine::ShadowHost> shadows_;
  std::unique_ptr<gpu::Stream> handoff_stream_;
  /// The generative models' loops (the worker only); their streams fail when the engine stops.
  std::unique_ptr<engine::Generations> generations_;
  bool stepping_ = false;  // the worker only: a generation step is posted
  /// Set first in the destructor: a step job that still runs does nothing and posts no other, so
  /// the jobs the destructor runs do not go on generating (their streams fail right after).
  std::atomic<bool> stopping_generation_{false};
  mutable std::mutex generation_stats_mu_;
  engine::GenerationsStats generation_stats_;  // guarded by generation_stats_mu_
  /// The lanes (streams > 1; null otherwise): reset after jobs_ and before the models go.
  std::unique_ptr<engine::Lanes> lanes_;
  /// Stopped first in the destructor (after the gate), so every job has run before the rest goes;
  /// its fault state stays until the rest has gone.
  std::unique_ptr<engine::JobWorker> jobs_;
  /// Closed first in the destructor.
  std::shared_ptr<EngineGate> gate_;
};

}  // namespace ember
