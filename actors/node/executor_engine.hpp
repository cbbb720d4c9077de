// ExecutorEngine: the blocking half of a gpu_executor. It owns one device, the device memory it
// reserved at start (a DeviceMemoryPool for model weights, the rest left for activations, which
// borrow whole partitions of the model pool beyond that under a burst and give them back as soon as
// they are free again: gpu/activation_pool.hpp), the
// models resident on it (one gpu::LayerExecutor each) and one serial WorkQueue (base/work_queue.hpp,
// one worker thread) that runs jobs in order: bind, unbind, infer, swap_run.
//
// Late binding (Torpor §4.3-4.4): swap_run makes a model resident if it is not (evicting what the
// router said, from the pool), copies its weights in groups sized at the copy elbow measured at
// start, from the host copy (registered, i.e. pinned, once per model) or from another device's copy
// (peer), and runs the request pipelined with the copy: the first layer starts after the first
// group. Eviction only frees device memory: the host copy is authoritative and never written.
// Models are addressed through pool handles: a model swapped out and in again may land elsewhere.
//
// The gpu_executor actor posts jobs and never waits: each job's completion callback runs on the
// worker thread and must not block (the actor's callback, made by continue_on in
// actors/offload.hpp, just sends the actor a message). The queue is bounded (`max_queue` inference
// jobs, WorkQueue::try_post); a full queue rejects new work at once (overflow policy: reject newest,
// counted by the caller). Bind and unbind jobs (WorkQueue::post) are never rejected: the router
// posts at most one per model it places. A device fault, or a job that throws, fails the running
// job and every later one (the engine is broken and says so in `fault`); the engine keeps
// answering, so callers always get a reply. The actor replaces a broken engine with a fresh one
// over a reopened device (restart).
//
// Concurrent runs (EngineOptions::streams > 1; StreamBox's functions as streams of one runtime):
// the worker hands each run of a resident model (an infer job, or a swap_run that needs no copy,
// eviction or profile) to one of `streams` lane threads and goes on with the next job, so runs of
// different models execute at once, each on its model's own stream (its LayerExecutor's), with its
// hand-off copies on a stream from the engine's pool (created once, reused). One model's runs keep
// their order: they form a strand, one run at a time, each next run queued behind the lanes' other
// work (round robin between models). Every job that changes what is resident, or where (bind,
// unbind, a swap-in, an eviction, a profile), first waits until no run is in a lane: a model's
// weights never go while a run reads them. Activations come from the device allocator per run
// (the executor's liveness plan, one block per run) and go back when the run ends; a run that does
// not fit moves kept values away (largest first, each to the node's other device with the most room
// in its workspace, else to host memory: StreamBox's rules 3 and 2, never lost) and tries once
// more, else fails out of memory for the router to handle (it admits concurrent runs by their
// measured activation bytes). A value moved away comes back when a run here reads it or another
// device borrows it (lend).
//
// Inline runs: a front-end thread may run a warm request itself, in the queue's order, when the
// device is idle (run_here; WorkQueue::run_here): no thread is woken for it. It reaches the engine
// through an EngineGate, which it holds without owning the engine; the destructor closes the gate
// first, waiting for a run inside. Such a run only reads models_ and runs a resident model, as an
// infer job would; every change of residency stays a job of the worker's.
//
// Destruction runs the jobs still queued (each answers), then joins the worker; it blocks for as
// long as they take, so it never runs on an actor's thread nor on the engine's own worker (which
// cannot join itself): the executor hands its engine to the node's maintenance queue to destroy.
//
// Thread safety: every public member may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/node/engine/device_workflow.hpp"
#include "base/status.hpp"
#include "base/work_queue.hpp"
#include "gpu/activation_pool.hpp"
#include "gpu/device.hpp"
#include "gpu/device_memory_pool.hpp"
#include "gpu/executor.hpp"
#include "gpu/io_scheduler.hpp"
#include "gpu/pinned_staging.hpp"
#include "gpu/shadow_split.hpp"

namespace ember {

class EngineGate;
class NodeEngines;

struct EngineOptions {
  /// Inference jobs waiting at most (node.max_queue); beyond it infer and swap_run refuse.
  size_t max_queue = 1024;
  /// Device memory left out of the model pool for activations and scratch. 0 = an eighth of the
  /// device, at least 256 MiB, at most half the device.
  uint64_t workspace_bytes = 0;
  /// Swap-in copy group size; 0 = the copy elbow, measured at start.
  uint64_t group_bytes = 0;
  /// Runs of resident models executing at once (binding.streams; see the header). 1: every job
  /// in turn on the worker.
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
};

/// One request on a model that may not be resident (late binding).
struct SwapRun {
  model_key key;
  std::shared_ptr<const gpu::Model> model;  // the host copy
  std::vector<gpu::HostTensor> inputs;
  /// Copy from this device copy (the router locked it) instead of host memory.
  std::optional<gpu::PeerWeights> peer;
  /// Evicted first (the router's plan), then `fallback` in order while the pool still has no room
  /// for the model (fragmentation), so the policy's order holds either way.
  std::vector<model_key> evict;
  std::vector<model_key> fallback;
  /// Registration profile: time the run (cold when not resident), then run again warm.
  bool profile = false;
  /// Device hand-off (a workflow's steps): inputs kept on this device by an earlier run, by handle,
  /// named as the model's inputs; the consumer reads the producer's buffer.
  std::vector<std::pair<std::string, uint64_t>> device_inputs;
  /// Outputs to keep on the device (SwapRunResult::kept) instead of copying them back; the others
  /// `wanted` names (all when empty and nothing is kept) come back as usual.
  std::vector<std::string> keep;
  std::vector<std::string> wanted;
  /// Inputs kept on another device (ExecutorEngine::lend there), copied over the link first.
  std::vector<gpu::PeerValue> peer_inputs;
  /// AsyFunc: a Shadow of this model on another device of the node (load_shadow there, reached
  /// through its engine's gate): a plain run puts `shadow_share` of its rows on it (at least one,
  /// leaving one; gpu/shadow_split.hpp) and runs on the worker, not beside others. A Shadow gone
  /// leaves its rows to this device (SwapRunResult::split says so).
  std::shared_ptr<EngineGate> shadow;
  double shadow_share = 0.5;
};

struct EngineMemory {
  uint64_t pool_capacity = 0;
  uint64_t pool_free = 0;
  /// Device memory outside the pool (activations, scratch).
  uint64_t workspace = 0;
  /// What the device holds now, by use (ExecutorEngine::memory_use; zero from engine_memory()).
  struct Use {
    uint64_t capacity = 0;     // the device's memory
    uint64_t used = 0;         // allocated on the device: the pool's region whole, buffers of the workspace
    uint64_t weights = 0;      // pool bytes models hold
    uint64_t activations = 0;  // runs' buffers: the workspace's in use and the pool's lent segments
    uint64_t kept = 0;         // values kept on the device for a workflow's next steps
    uint64_t shadows = 0;      // pool bytes Shadows hold (AsyFunc; not counted in `weights`)
    uint64_t lent = 0;         // pool bytes lent to the activation pool (a share of weights' room)
  } use;
};

class ExecutorEngine {
 public:
  struct InferResult {
    Result<std::vector<gpu::HostTensor>> outputs = internal_error("not run");
    uint64_t queue_us = 0;
    uint64_t compute_us = 0;
  };
  struct SwapRunResult {
    InferResult run;
    /// The weights were copied in for this request.
    bool swapped = false;
    /// Models dropped from the device for it (the plan's and fallbacks actually used).
    std::vector<model_key> evicted;
    /// Pool bytes the model takes on the device after the job; 0 when not resident.
    uint64_t footprint = 0;
    uint64_t pool_free = 0;
    /// profile only: the second, warm run.
    uint64_t warm_us = 0;
    /// The device faulted or the job threw: the engine is broken until restarted.
    bool fault = false;
    /// The outputs kept on the device (SwapRun::keep), each under a new handle.
    std::vector<gpu::KeptValue> kept;
    /// Device bytes the run's activations took (its liveness plan): what a concurrent run of the
    /// model needs free.
    uint64_t plan_bytes = 0;
    /// A run with SwapRun::shadow: the rows the Shadow computed, or why the Body took them back.
    gpu::SplitStats split;
  };

  /// Takes the device, reserves its model pool and measures the copy elbow (blocking, ~0.1 s).
  static Result<std::unique_ptr<ExecutorEngine>> create(std::unique_ptr<gpu::Device> device, EngineOptions options);
  /// Runs the jobs already queued (each still answers), then joins the worker. Blocks: never call it
  /// on an actor's thread or on this engine's worker (see the header).
  ~ExecutorEngine();
  ExecutorEngine(const ExecutorEngine&) = delete;
  ExecutorEngine& operator=(const ExecutorEngine&) = delete;

  const gpu::DeviceInfo& device_info() const { return device_->info(); }
  gpu::MemoryInfo memory() const { return device_->memory(); }
  EngineMemory engine_memory() const;
  /// engine_memory() with `use` filled: what is in use now, by use (metrics read it at each scrape).
  EngineMemory memory_use() const;
  Status device_status() const { return device_->status(); }
  uint64_t group_bytes() const { return group_bytes_; }
  /// The elbow probe, (size, GB/s) per size; empty when group_bytes was configured.
  const std::vector<std::pair<uint64_t, double>>& elbow_curve() const { return elbow_curve_; }

  /// Drops values kept on the device (a job: after the jobs queued before it). Unknown handles are
  /// ignored (the value went with a restart).
  void release(std::vector<uint64_t> handles);
  /// Where kept values live (a job, after the ones queued before), for another device's copy;
  /// not_found for a handle the engine does not hold (released, or gone with a restart). They stay
  /// where they are until released.
  void lend(std::vector<uint64_t> handles, std::function<void(Result<std::vector<gpu::PeerValue>>)> done);
  /// Values kept now, and their bytes (tests, metrics).
  std::pair<size_t, uint64_t> kept() const;
  /// Kept values moved so far to make room (see run_resident): to host memory, to another device.
  struct Spills {
    uint64_t to_host = 0, to_host_bytes = 0;
    uint64_t to_peer = 0, to_peer_bytes = 0;
  };
  Spills spilled() const;
  // -- shadow functions (AsyFunc; gpu/shadow_split.hpp) -----------------------------------------
  struct ShadowInfo {
    uint64_t bytes = 0;     // its weights, in this device's model pool
    uint64_t start_us = 0;  // from the job's start to ready (the copy from host memory)
  };
  /// Holds layers `range` of `key` on this device as a Shadow (a job): their weights copied from
  /// the host copy `model` into the model pool (beside whole models, counted as weights), ready to
  /// share batches with a Body of the same model on another device (SwapRun::shadow there). A Shadow of
  /// the key already held is replaced.
  void load_shadow(const model_key& key, std::shared_ptr<const gpu::Model> model, gpu::LayerRange range,
                   std::function<void(Result<ShadowInfo>)> done);
  /// Drops the Shadow of `key` (a job); false when none was held. A split running on it finishes
  /// first: its memory goes back when the last run using it lets go.
  void drop_shadow(const model_key& key, std::function<void(bool)> done);

  /// Room for a value another device of the node moves here (its spill, StreamBox's rule 2): a
  /// buffer of this device's workspace, filled from `src` on `from`, held by this engine and
  /// handed out as a view whose last holder gives it back. When this engine goes first, it frees
  /// them; their holder finds its gate closed and the value lost with this device.
  Result<std::shared_ptr<gpu::DeviceBuffer>> host_for_peer(gpu::Device& from, gpu::DevicePtr src, uint64_t bytes);
  /// The activation pool's reservation beyond the workspace (grown and shrunk with the load).
  gpu::ActivationPool::Stats activation_stats() const { return activations_->stats(); }

  /// Uploads the model's weights (all layers) into the pool. Binding a bound key again is OK.
  void bind(const model_key& key, std::shared_ptr<const gpu::Model> model, std::function<void(Status)> done);
  /// Frees the model's device memory after the jobs queued before it ran.
  void unbind(const model_key& key, std::function<void()> done);
  /// Frees every model's device memory after the jobs queued before it ran.
  void unbind_all(std::function<void()> done);
  /// Runs a resident model on host tensors; `done` gets the outputs (named as the model names
  /// them). Returns false, without calling `done`, when the queue is full.
  bool infer(const model_key& key, std::vector<gpu::HostTensor> inputs, std::function<void(InferResult)> done);
  /// Late binding: see the header comment. Returns false, without calling `done`, when the queue is full.
  bool swap_run(SwapRun run, std::function<void(SwapRunResult)> done);
  /// An inline run (see the header): runs resident `key` on the calling thread when the worker is
  /// idle and nothing is queued; nullopt, without running, otherwise, or when the model is not
  /// resident or batches with a queue delay (its requests wait for company on the router's way;
  /// without one, a request that finds the device idle is a batch of one).
  std::optional<InferResult> run_here(const model_key& key, const std::vector<gpu::HostTensor>& inputs);
  /// A whole workflow request run on the calling thread as run_here runs one request: when every
  /// step's model (`models`, per step) is resident here, none waits to gather a batch, and the
  /// device is idle, the steps run one after the other with the hand-off on the device
  /// (actors/node/engine/device_workflow.hpp); nullopt, having run nothing, otherwise.
  std::optional<Result<std::vector<gpu::HostTensor>>> run_workflow_here(const WorkflowConfig& config,
                                                                        const WorkflowPlan& plan,
                                                                        const std::vector<model_key>& models,
                                                                        const std::vector<gpu::HostTensor>& inputs,
                                                                        gpu::DeviceWorkflowStats* stats);
  /// The gate front-end threads reach this engine through (never null).
  const std::shared_ptr<EngineGate>& gate() const { return gate_; }
  /// Resident now (a hint for callers choosing a device; the answer may change at once).
  bool holds(const model_key& key) const;
  /// Where a resident model's weights live, for a device-to-device swap onto another device;
  /// nullopt when not resident. Valid while the model stays resident (the router's lock).
  std::optional<gpu::PeerWeights> weights_of(const model_key& key) const;

  /// Fault injection (nodes started with --allow-faults): the next `n` device allocations for model
  /// weights fail as out of memory.
  void fail_allocations(uint64_t n) { fail_allocations_.store(n); }
  /// Fault injection: the next run faults the device as a failed kernel would (the engine is broken
  /// until restarted). Device-independent: it takes the path of a real fault, not the device's.
  void fault_next_kernel() { fault_next_kernel_.store(true); }

  /// Inference jobs waiting (not the ones running), on the worker or behind their model's runs.
  size_t queued() const;
  /// Runs executing in lanes now, and the most seen at once so far (streams > 1; else 0).
  uint32_t running() const;
  uint32_t peak_running() const;
  /// The bound on them (EngineOptions::max_queue).
  size_t max_queue() const { return options_.max_queue; }
  std::vector<model_key> bound() const;

 private:
  struct Resident {
    std::shared_ptr<const gpu::Model> model;
    std::unique_ptr<gpu::LayerExecutor> ex;
    /// Views of `ex` a split runs around and inside a Shadow's range, by (first, last) layer.
    /// Declared after `ex`: destroyed first, their streams drained before ex's weights go.
    std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<gpu::LayerExecutor>> views;
  };
  /// A Shadow held here: its executor, whose pool memory goes back when the last holder lets go.
  struct Shadow {
    ExecutorEngine* engine;
    std::string pool_name;
    std::unique_ptr<gpu::LayerExecutor> ex;
    ~Shadow();
  };
  std::map<model_key, std::shared_ptr<Shadow>> shadows_;  // guarded by shadows_mu_
  uint64_t shadow_serial_ = 0;                            // worker thread only
  mutable std::mutex shadows_mu_;
  /// The Shadow of `key` held here, or null.
  std::shared_ptr<Shadow> shadow_of(const model_key& key);
  /// A view of resident `r` over `range`, made on first use (worker thread only).
  Result<gpu::LayerExecutor*> view_of(Resident& r, gpu::LayerRange range);
  /// A run of resident `body` with `share` of its rows on the Shadow of `key` behind `shadow`
  /// (closed, or holding none: the Body alone, said in `st`). Worker thread only.
  Result<std::vector<gpu::HostTensor>> run_with_shadow(Resident& body, const model_key& key,
                                                       const std::vector<gpu::HostTensor>& inputs, EngineGate* shadow,
                                                       double share, gpu::SplitStats& st);
  ExecutorEngine(std::unique_ptr<gpu::Device> device, EngineOptions options);
  Status reserve();
  // Worker thread only:
  /// Places weights in the pool under `name` (a model key's, or a Shadow's "#shadow/KEY/N").
  gpu::WeightPlacer placer(std::string name);
  Status pin_host(const std::shared_ptr<const gpu::Model>& model);
  void evict(const model_key& key);
  /// Frees a model's (or an activation segment's) blocks of the pool; any thread.
  void free_in_pool(const std::string& name);
  uint64_t pool_bytes_of(const model_key& key);
  /// The activation pool's growth: a segment of whole partitions of the model pool; any thread.
  Result<gpu::ActivationSegment> lend_activations(uint64_t bytes);
  void publish(const model_key& key, const gpu::LayerExecutor* ex);
  void swap_job(SwapRun& run, SwapRunResult& r);
  /// The run of a resident model (plain or with hand-off), with one more try after moving kept
  /// values to host memory when it did not fit. Any thread running a job or a lane.
  void run_resident(gpu::LayerExecutor& ex, const SwapRun& run, SwapRunResult& r, gpu::Stream& stream);
  /// Worker thread: whether a swap_run can go to a lane (its model resident, nothing to evict or
  /// profile), and handing a run to its model's strand.
  bool runs_beside(const SwapRun& run) const;
  void beside(const model_key& key, std::function<void()> run);
  /// Worker thread: waits until no run is in a lane (before any change of residency).
  void drain();
  /// A model with a run in a lane (or waiting for one): inline runs leave it to its strand.
  bool in_lane(const model_key& key) const;
  std::unique_ptr<gpu::Stream> take_stream();
  void give_stream(std::unique_ptr<gpu::Stream> stream);
  Result<std::vector<gpu::HostTensor>> run_checked(gpu::LayerExecutor& ex, const std::vector<gpu::HostTensor>& in);
  /// A run with device hand-off (SwapRun::device_inputs or keep): outputs asked for come back, kept
  /// ones go into kept_ and r.kept.
  Result<std::vector<gpu::HostTensor>> run_handoff(gpu::LayerExecutor& ex, const SwapRun& run, SwapRunResult& r,
                                                   gpu::Stream& stream);
  /// Runs `fn` unless the engine is broken, marking it broken when the device faults or fn throws.
  template <class Fn>
  auto guarded(Fn&& fn) -> decltype(fn());

  std::unique_ptr<gpu::Device> device_;
  const EngineOptions options_;
  /// The device's host-to-device copies of swap-ins (io_batch > 0): reset after the models, whose
  /// destructors wait for their jobs.
  std::unique_ptr<gpu::IoScheduler> io_;
  uint64_t group_bytes_ = 0;
  std::vector<std::pair<uint64_t, double>> elbow_curve_;
  std::shared_ptr<gpu::DeviceBuffer> region_;  // the pool's reservation
  std::optional<gpu::DeviceMemoryPool> pool_;  // guarded by pool_mu_ (runs in lanes borrow from it)
  mutable std::mutex pool_mu_;
  /// Activation memory beyond the workspace, lent by the pool (gpu/activation_pool.hpp): reset after
  /// the models and kept values, before the region.
  std::unique_ptr<gpu::ActivationPool> activations_;
  uint64_t activation_segments_ = 0;  // guarded by pool_mu_
  uint64_t workspace_ = 0;

  std::atomic<uint64_t> fail_allocations_{0};
  std::atomic<bool> fault_next_kernel_{false};
  mutable std::mutex mu_;
  std::string broken_;             // guarded by mu_: why the engine refuses work ("" = fine)
  uint64_t pool_free_ = 0;         // guarded by mu_: a copy for other threads
  std::map<model_key, std::vector<gpu::WeightSegment>> published_;  // guarded by mu_
  std::set<model_key> batching_;  // guarded by mu_: published models with dynamic batching
  std::map<model_key, Resident> models_;                            // the thread running jobs only
  std::map<const void*, std::shared_ptr<const gpu::Model>> pinned_;  // worker thread only
  /// Values runs left on the device for later runs, by handle (counts under mu_). Under memory
  /// pressure a value moves to another device of the node or to host memory (spill: never lost); a
  /// run reading it then copies it in for itself.
  struct Kept {
    gpu::NamedValue value;  // value.buffer null while on the host
    std::optional<gpu::HostTensor> host;
    /// Set while the value lives on another device of the node (value.buffer is there): its gate,
    /// entered around every read.
    std::shared_ptr<EngineGate> at;
  };
  std::map<uint64_t, Kept> kept_;  // guarded by kept_mu_ (runs in lanes read and add values)
  mutable std::mutex kept_mu_;
  Spills spills_;  // guarded by mu_
  /// Moves the kept values on the device but those in `keep` away, largest first (StreamBox's
  /// rule 3): each to the node's least pressed other device with room (rule 2), else to host
  /// memory; how many moved. A run reading one meanwhile holds its buffer until it ends. Takes
  /// kept_mu_.
  Result<size_t> spill(const std::vector<uint64_t>& keep, gpu::Stream& stream);
  /// Moves `k` to another device of the node; false when none has room (or there is none).
  bool spill_to_peer(Kept& k);
  /// A kept value's device copy: its own, or a fresh one from host memory or from the device it
  /// moved to (`restore`: it stays here from then on). Requires kept_mu_.
  Result<gpu::DeviceValue> on_device(Kept& k, bool restore, gpu::Stream& stream);
  /// Values other devices moved here (host_for_peer), by id; shared with the views handed out.
  struct Hosted {
    std::mutex mu;
    std::map<uint64_t, std::shared_ptr<gpu::DeviceBuffer>> buffers;  // guarded by mu
    uint64_t next = 0, bytes = 0;                                    // guarded by mu
  };
  std::shared_ptr<Hosted> hosted_ = std::make_shared<Hosted>();
  uint64_t next_handle_ = 1;                     // guarded by kept_mu_
  size_t kept_count_ = 0;                        // guarded by mu_ (kept(): no wait for a spill)
  uint64_t kept_bytes_ = 0;                      // guarded by mu_
  /// Uploads and downloads of hand-off runs: used by jobs only (the worker, or an inline run in the
  /// queue's turn); runs in lanes take streams from `lanes_`.
  std::unique_ptr<gpu::Stream> handoff_stream_;
  std::unique_ptr<gpu::PinnedStaging> staging_;  // null without EngineOptions::staging_bytes
  gpu::Stream& handoff_stream();
  struct Lanes;
  /// The lanes (streams > 1; null otherwise): reset after jobs_ and before the models go.
  std::unique_ptr<Lanes> lanes_;
  /// The worker: bind/unbind through post(), inference through try_post() (bounded by max_queue).
  /// Reset first in the destructor, so every job has run before the models and the device go.
  std::unique_ptr<WorkQueue> jobs_;
  /// Closed first in the destructor.
  std::shared_ptr<EngineGate> gate_;
};

/// The client's answer from a run: the outputs asked for (all when `wanted` is empty), in `skeleton`
/// (the request's model, id, node and device); invalid_argument for an output the model lacks.
Result<infer_reply> build_reply(infer_reply skeleton, const std::vector<std::string>& wanted,
                                ExecutorEngine::InferResult& r);

/// A front-end thread's way onto an engine it does not own (actors/node/inline_runs.hpp): shared
/// with the engine, whose destructor closes it, waiting for a run inside. Thread-safe.
class EngineGate {
 public:
  explicit EngineGate(ExecutorEngine* engine, std::string device) : engine_(engine), device_(std::move(device)) {}
  /// ExecutorEngine::run_here; nullopt too once the engine is going.
  std::optional<ExecutorEngine::InferResult> run_here(const model_key& key, const std::vector<gpu::HostTensor>& inputs);
  /// ExecutorEngine::run_workflow_here; nullopt too once the engine is going.
  std::optional<Result<std::vector<gpu::HostTensor>>> run_workflow_here(const WorkflowConfig& config,
                                                                        const WorkflowPlan& plan,
                                                                        const std::vector<model_key>& models,
                                                                        const std::vector<gpu::HostTensor>& inputs,
                                                                        gpu::DeviceWorkflowStats* stats);
  /// ExecutorEngine::holds; false once the engine is going.
  bool holds(const model_key& key);
  /// ExecutorEngine::memory_use; nullopt once the engine is going.
  std::optional<EngineMemory> memory_use();
  bool open() const;
  const std::string& device() const { return device_; }

 private:
  friend class ExecutorEngine;
  /// Refuses every later call and waits for the calls inside to return.
  void close();
  /// The engine, kept alive until leave(); null once closed.
  ExecutorEngine* enter();
  void leave();

  mutable std::mutex mu_;
  std::condition_variable left_;
  ExecutorEngine* engine_;  // guarded by mu_: null once closed
  uint32_t inside_ = 0;     // guarded by mu_
  const std::string device_;
};

/// The engines of one node, by device ordinal (EngineOptions::node). Thread-safe.
class NodeEngines {
 public:
  /// Device `ordinal`'s engine is behind `gate` from now on (a restarted device's replacement takes
  /// the place of the engine before it).
  void attach(uint32_t ordinal, std::shared_ptr<EngineGate> gate);
  /// Every engine's gate but `self`.
  std::vector<std::shared_ptr<EngineGate>> others(const EngineGate* self) const;

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, std::shared_ptr<EngineGate>> gates_;  // guarded by mu_
};

}  // namespace ember
