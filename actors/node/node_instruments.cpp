#include "actors/node/node_instruments.hpp"

#include "actors/workflow_metrics.hpp"

namespace ember {

NodeInstruments::NodeInstruments()
    : queue_(registry_.histogram("ember_queue_duration_seconds",
                                 "Time requests waited in an executor's queue before running", {"model", "version"})),
      compute_(registry_.histogram("ember_compute_duration_seconds",
                                   "Time requests ran on a device (runs that answered)", {"model", "version"})),
      rejected_(registry_.counter("ember_rejected_requests_total",
                                  "Requests refused because a queue was full (an executor's: node.max_queue; the "
                                  "late-binding router's: node.max_queued_per_model, node.max_queued_total)",
                                  {"model", "version"})),
      executions_(registry_.counter("ember_execution_count_total",
                                    "Model executions (a dynamic batch is one execution)", {"model", "version"})),
      inferences_(registry_.counter("ember_inference_count_total",
                                    "Rows inferred: inference_count / execution_count is the mean batch, as Triton "
                                    "reports it",
                                    {"model", "version"})),
      batch_requests_(registry_.histogram("ember_batch_requests", "Requests per execution of a batching model",
                                          {"model", "version"}, {1, 2, 4, 8, 16, 32, 64, 128, 256})),
      batch_delay_(registry_.histogram("ember_batch_queue_delay_seconds",
                                       "Arrival to dispatch of requests of batching models (queueing and gathering)",
                                       {"model", "version"})),
      fetched_(registry_.counter("ember_model_bytes_fetched_total",
                                 "Model bytes obtained by the model cache, by source (cache = already resident)",
                                 {"source"})),
      cache_bytes_(registry_.gauge("ember_cache_resident_bytes", "Model bytes resident in the host-memory cache")
                       .with(std::vector<std::string>{})),
      cache_models_(registry_.gauge("ember_cache_resident_models", "Model versions resident in the host-memory cache")
                        .with(std::vector<std::string>{})),
      cache_capacity_(registry_.gauge("ember_cache_capacity_bytes", "Byte cap of the host-memory cache")
                          .with(std::vector<std::string>{})),
      device_used_(registry_.gauge("ember_device_memory_used_bytes",
                                   "Device memory allocated (the model pool's reservation whole, and the workspace's "
                                   "buffers)",
                                   {"device"})),
      device_capacity_(registry_.gauge("ember_device_memory_capacity_bytes", "Device memory capacity", {"device"})),
      device_lent_(registry_.gauge("ember_device_activation_lent_bytes",
                                   "Model-pool memory lent to activations beyond the workspace now (a burst's)",
                                   {"device"})),
      device_in_use_(registry_.gauge("ember_device_memory_in_use_bytes",
                                     "Device memory in use now, by use: weights (models resident), activations (runs' "
                                     "buffers), kept (workflow values waiting for their next step), shadows (layer "
                                     "ranges held as Shadows)",
                                     {"device", "use"})),
      replicas_(registry_.gauge("ember_replicas", "Model replicas bound to this node's devices")
                    .with(std::vector<std::string>{})),
      loads_(registry_.counter("ember_replica_loads_total", "Replica loads by outcome", {"outcome"})),
      load_seconds_(registry_.histogram("ember_replica_load_duration_seconds",
                                        "Time from load request to a ready replica (fetch and bind)")),
      dispatches_(registry_.counter("ember_swap_dispatches_total",
                                    "Requests bound to a device, by how the model got there: run (resident), beside "
                                    "(resident, run beside another on a busy device), host or peer (swapped in) "
                                    "under late binding; inline (resident, run on the front "
                                    "end's thread) under either binding",
                                    {"kind"})),
      evictions_(registry_.counter("ember_swap_evictions_total", "Device copies of models evicted to make room")
                     .with(std::vector<std::string>{})),
      slo_(registry_.counter("ember_slo_requests_total",
                             "Answered requests (late binding) within or beyond their model's SLO deadline",
                             {"outcome"})),
      alpha_(registry_.gauge("ember_slo_alpha", "The RRC queue's alpha (share of the high-priority group)")
                 .with(std::vector<std::string>{})),
      queued_(registry_.gauge("ember_slo_queued_requests", "Requests waiting for a device (late binding)")
                  .with(std::vector<std::string>{})),
      restarts_(registry_.counter("ember_executor_restarts_total", "Executors restarted after a fault")
                    .with(std::vector<std::string>{})),
      handoff_bytes_(registry_.counter("ember_pipeline_handoff_bytes_total",
                                       "Bytes of carried tensors this node's pipeline stages fetched from the stage "
                                       "before them, over the data plane",
                                       {"transport"})),
      workflow_handoff_(
          registry_.counter(workflow_metrics::kHandoff, workflow_metrics::kHandoffHelp, {"workflow", "path"})),
      workflows_(registry_.counter("ember_node_workflow_runs_total",
                                   "Workflow requests this node ran itself (steps on its devices, intermediates "
                                   "left there), by outcome",
                                   {"workflow", "outcome"})),
      workflow_steps_(registry_.histogram(workflow_metrics::kStep, workflow_metrics::kStepHelp, {"workflow", "step"})),
      shadows_started_(registry_.counter("ember_shadows_started_total",
                                         "Shadows (a model's layer range on a device, sharing a Body's batches) "
                                         "started on this node's devices",
                                         {"model", "version"})),
      shadows_released_(registry_.counter("ember_shadows_released_total", "Shadows released on this node's devices",
                                          {"model", "version"})),
      shadow_start_(registry_.histogram("ember_shadow_start_seconds",
                                        "Time from a Shadow's start to ready (its weights copied in)", {})),
      shadow_splits_(registry_.counter("ember_shadow_splits_total",
                                       "Runs of a Body paired with a Shadow: shared (rows ran on the Shadow) or "
                                       "taken_back (the Body ran them: the Shadow gone, or the batch too small)",
                                       {"model", "version", "outcome"})),
      shadow_rows_(registry_.counter("ember_shadow_rows_total", "Rows of Bodies' batches that ran on Shadows",
                                     {"model", "version"})),
      shadows_(registry_.gauge("ember_shadows", "Shadows this node's router paired with Bodies, by state",
                               {"model", "version", "state"})),
      shadow_stand_in_(registry_.gauge("ember_shadow_stand_in_bytes",
                                       "Weights of the full copies this node's Shadows stand in for (one model each)",
                                       {"model", "version"})),
      faults_(registry_.counter("ember_faults_injected_total",
                                "Faults injected on purpose into this node (--allow-faults), by kind", {"kind"})),
      actor_restarts_(registry_.counter("ember_actor_restarts_total",
                                        "Actors of this node that died and were restarted by its supervisor",
                                        {"actor"})),
      unrestored_(registry_.counter("ember_fault_unrestored_total",
                                    "What a restarted actor could not get back (replica: no longer served here)",
                                    {"what"})),
      transfers_(registry_),
      generation_streams_(registry_.gauge("ember_generation_streams",
                                          "Text generation streams in a device's loop of the model (running or waiting)",
                                          {"model", "version", "device"})),
      generation_tokens_(registry_.counter("ember_generation_sampled_tokens_total",
                                           "Tokens the model's generation loop sampled on a device (the gateway's "
                                           "ember_generation_tokens_total counts those sent to clients)",
                                           {"model", "version", "device"})),
      kv_blocks_(registry_.gauge("ember_kv_blocks_in_use", "KV cache blocks the model's streams hold on a device",
                                 {"model", "version", "device"})),
      kv_swapped_(registry_.gauge("ember_kv_swapped_bytes",
                                  "Bytes of the model's KV cache swapped out to host memory from a device's loop",
                                  {"model", "version", "device"})),
      preemptions_(registry_.counter("ember_generation_preemptions_total",
                                     "Generation streams preempted for KV space: swap (KV copied to host) or "
                                     "recompute (KV dropped, recomputed when the stream runs again)",
                                     {"model", "version", "device", "kind"})),
      parked_(registry_.counter("ember_generation_parked_total",
                                "Generation streams set aside when their model was evicted from a device (evicted), "
                                "and taken back where the model was bound next (resumed)",
                                {"model", "version", "device", "event"})) {}

void NodeInstruments::count_dispatch(const std::string& kind) { dispatches_.with({kind}).inc(); }
void NodeInstruments::count_evictions(uint64_t n) { evictions_.inc(static_cast<double>(n)); }
void NodeInstruments::count_slo(bool on_time) { slo_.with({on_time ? "on_time" : "late"}).inc(); }
void NodeInstruments::set_slo_state(double alpha, uint64_t queued) {
  alpha_.set(alpha);
  queued_.set(static_cast<double>(queued));
}
void NodeInstruments::count_restart() { restarts_.inc(); }
void NodeInstruments::count_fault(const std::string& kind) { faults_.with({kind}).inc(); }
void NodeInstruments::count_actor_restart(const std::string& actor) { actor_restarts_.with({actor}).inc(); }
void NodeInstruments::count_unrestored(const std::string& what) { unrestored_.with({what}).inc(); }
void NodeInstruments::add_handoff(std::string_view transport, uint64_t bytes) {
  handoff_bytes_.with({std::string(transport)}).inc(static_cast<double>(bytes));
}

void NodeInstruments::count_handoff(const std::string& workflow, std::string_view path, uint64_t bytes) {
  workflow_handoff_.with({workflow, path}).inc(static_cast<double>(bytes));
}

void NodeInstruments::observe_workflow_step(const std::string& workflow, const std::string& step, double seconds) {
  workflow_steps_.with({workflow, step}).observe(seconds);
}

void NodeInstruments::count_workflow(const std::string& workflow, const std::string& outcome) {
  workflows_.with({workflow, outcome}).inc();
}

void NodeInstruments::count_shadow_started(const model_key& model, double seconds) {
  shadows_started_.with({model.name, std::to_string(model.version)}).inc();
  shadow_start_.with(std::vector<std::string>{}).observe(seconds);
}

void NodeInstruments::count_shadow_released(const model_key& model) {
  shadows_released_.with({model.name, std::to_string(model.version)}).inc();
}

void NodeInstruments::set_shadows(const model_key& model, uint32_t starting, uint32_t ready, uint64_t stand_in_bytes) {
  const std::string version = std::to_string(model.version);
  shadows_.with({model.name, version, "starting"}).set(starting);
  shadows_.with({model.name, version, "ready"}).set(ready);
  shadow_stand_in_.with({model.name, version}).set(static_cast<double>(stand_in_bytes));
}

void NodeInstruments::count_shadow_split(const model_key& model, int64_t rows) {
  const std::string version = std::to_string(model.version);
  shadow_splits_.with({model.name, version, rows > 0 ? "shared" : "taken_back"}).inc();
  if (rows > 0) shadow_rows_.with({model.name, version}).inc(static_cast<double>(rows));
}

void NodeInstruments::observe_run(const model_key& model, uint64_t queue_us, uint64_t compute_us) {
  const std::string version = std::to_string(model.version);
  queue_.with({model.name, version}).observe(static_cast<double>(queue_us) * 1e-6);
  compute_.with({model.name, version}).observe(static_cast<double>(compute_us) * 1e-6);
}

void NodeInstruments::count_execution(const model_key& model, size_t requests, int64_t rows) {
  const std::vector<std::string> labels{model.name, std::to_string(model.version)};
  executions_.with(labels).inc();
  inferences_.with(labels).inc(static_cast<double>(rows));
  batch_requests_.with(labels).observe(static_cast<double>(requests));
}

void NodeInstruments::observe_batch_delay(const model_key& model, uint64_t delay_us) {
  batch_delay_.with({model.name, std::to_string(model.version)}).observe(static_cast<double>(delay_us) * 1e-6);
}

void NodeInstruments::count_rejected(const model_key& model) {
  rejected_.with({model.name, std::to_string(model.version)}).inc();
}

void NodeInstruments::add_fetched(SourceTier source, uint64_t bytes) {
  fetched_.with({std::string(to_string(source))}).inc(static_cast<double>(bytes));
}

void NodeInstruments::set_cache(uint64_t used_bytes, uint64_t models, uint64_t capacity_bytes) {
  cache_bytes_.set(static_cast<double>(used_bytes));
  cache_models_.set(static_cast<double>(models));
  cache_capacity_.set(static_cast<double>(capacity_bytes));
}

void NodeInstruments::set_device_memory(const std::string& device, const DeviceMemory& m) {
  device_used_.with({device}).set(static_cast<double>(m.used));
  device_capacity_.with({device}).set(static_cast<double>(m.capacity));
  device_lent_.with({device}).set(static_cast<double>(m.lent));
  device_in_use_.with({device, "weights"}).set(static_cast<double>(m.weights));
  device_in_use_.with({device, "activations"}).set(static_cast<double>(m.activations));
  device_in_use_.with({device, "kept"}).set(static_cast<double>(m.kept));
  device_in_use_.with({device, "shadows"}).set(static_cast<double>(m.shadows));
}

metrics::MetricsSnapshot NodeInstruments::snapshot() {
  {
    std::lock_guard lock(refresh_mu_);
    for (auto it = refreshers_.begin(); it != refreshers_.end();) {
      it = it->second() ? std::next(it) : refreshers_.erase(it);
    }
  }
  return registry_.snapshot();
}

void NodeInstruments::on_snapshot(const std::string& key, std::function<bool()> refresh) {
  std::lock_guard lock(refresh_mu_);
  refreshers_[key] = std::move(refresh);
}

void NodeInstruments::set_replicas(uint64_t replicas) { replicas_.set(static_cast<double>(replicas)); }

void NodeInstruments::count_load(const std::string& outcome, double seconds) {
  loads_.with({outcome}).inc();
  load_seconds_.with(std::vector<std::string>{}).observe(seconds);
}

void NodeInstruments::set_generation(const std::string& device, const std::map<model_key, GenerationFigures>& models) {
  std::lock_guard<std::mutex> lock(generation_mu_);
  auto grown = [](uint64_t now, uint64_t before) { return static_cast<double>(now >= before ? now - before : now); };
  // Models this device reported before and no longer does: their gauges go to zero.
  for (auto& [at, last] : generation_last_) {
    if (at.first != device || models.count(at.second)) continue;
    const std::string version = std::to_string(at.second.version);
    generation_streams_.with({at.second.name, version, device}).set(0);
    kv_blocks_.with({at.second.name, version, device}).set(0);
    kv_swapped_.with({at.second.name, version, device}).set(0);
    last.streams = last.kv_blocks_in_use = last.kv_swapped_bytes = 0;
  }
  for (const auto& [key, f] : models) {
    const std::string version = std::to_string(key.version);
    generation_streams_.with({key.name, version, device}).set(static_cast<double>(f.streams));
    kv_blocks_.with({key.name, version, device}).set(static_cast<double>(f.kv_blocks_in_use));
    kv_swapped_.with({key.name, version, device}).set(static_cast<double>(f.kv_swapped_bytes));
    GenerationFigures& last = generation_last_[{device, key}];
    generation_tokens_.with({key.name, version, device}).inc(grown(f.tokens_generated, last.tokens_generated));
    preemptions_.with({key.name, version, device, "swap"}).inc(grown(f.preempted_swap, last.preempted_swap));
    preemptions_.with({key.name, version, device, "recompute"})
        .inc(grown(f.preempted_recompute, last.preempted_recompute));
    parked_.with({key.name, version, device, "evicted"}).inc(grown(f.parked, last.parked));
    parked_.with({key.name, version, device, "resumed"}).inc(grown(f.resumed, last.resumed));
    last = f;
  }
}

}  // namespace ember
