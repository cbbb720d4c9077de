// NodeInstruments: the metrics a node keeps (its executors, cache and router write them; the
// router ships a snapshot to gateways, which merge every node into one /metrics page).
//
// Thread-safe (metrics::Registry is); any actor of the node may call it. Never blocks on I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "actors/loading_messages.hpp"
#include "actors/transfer/transfer_instruments.hpp"
#include "metrics/metrics.hpp"

namespace ember {

class NodeInstruments {
 public:
  NodeInstruments();

  metrics::Registry& registry() { return registry_; }
  /// The registry's snapshot, after every refresher (on_snapshot) brought its gauges up to date.
  metrics::MetricsSnapshot snapshot();
  /// Runs `refresh` right before each snapshot(), under `key` (replacing the one before it); it is
  /// dropped once it returns false. For figures that change where no actor sees it (device memory:
  /// runs on front-end threads and lanes allocate and free activations).
  void on_snapshot(const std::string& key, std::function<bool()> refresh);
  /// The node's multicast hops (transfer_peer actors write it).
  TransferInstruments& transfers() { return transfers_; }

  /// One request ran on an executor: time in its queue, time computing.
  void observe_run(const model_key& model, uint64_t queue_us, uint64_t compute_us);
  /// A request was turned away because a queue was full: the executor's (node.max_queue) or, with
  /// late binding, the router's (node.max_queued_per_model, node.max_queued_total).
  void count_rejected(const model_key& model);
  /// One execution of `model` served `requests` requests with `rows` rows in all (dynamic batching
  /// runs several; otherwise 1 and the request's rows): Triton's execution and inference counts.
  void count_execution(const model_key& model, size_t requests, int64_t rows);
  /// How long a request waited for its batch to start (arrival to dispatch), batching models only.
  void observe_batch_delay(const model_key& model, uint64_t delay_us);
  /// Model bytes obtained by the cache, by source tier (cache: already resident; local_disk: the
  /// node's own repository; peer; repository).
  void add_fetched(SourceTier source, uint64_t bytes);
  void set_cache(uint64_t used_bytes, uint64_t models, uint64_t capacity_bytes);
  /// What a device's memory holds now (ExecutorEngine's EngineMemory::Use).
  struct DeviceMemory {
    uint64_t capacity = 0, used = 0;                  // the device's; allocated (the model pool's region whole)
    uint64_t weights = 0, activations = 0, kept = 0;  // in use, by use
    uint64_t shadows = 0;                             // Shadows' weights (not in `weights`)
    uint64_t lent = 0;                                // model-pool bytes the activation pool holds
  };
  void set_device_memory(const std::string& device, const DeviceMemory& m);
  void set_replicas(uint64_t replicas);
  /// A replica load finished: "ok" or the error code's name.
  void count_load(const std::string& outcome, double seconds);
  // Late binding.
  /// A request bound to a device: kind "run" (resident), "beside" (resident, beside another run on a
  /// busy device), "host" or "peer" (swapped in from there).
  void count_dispatch(const std::string& kind);
  void count_evictions(uint64_t n);
  /// An answered request: within its model's SLO deadline or not.
  void count_slo(bool on_time);
  void set_slo_state(double alpha, uint64_t queued);
  void count_restart();
  /// Fault injection: a fault of `kind` was injected (node_supervisor).
  void count_fault(const std::string& kind);
  /// A supervisor restarted a dead actor: "router" or "executor".
  void count_actor_restart(const std::string& actor);
  /// Something a restarted actor could not get back ("replica": served no more after a fault).
  void count_unrestored(const std::string& what);
  /// A pipeline stage here fetched the tensors its upstream handed over, over `transport`.
  void add_handoff(std::string_view transport, uint64_t bytes);
  /// A workflow step here read `bytes` of an earlier step's output by `path`: same_device (the
  /// producer's buffer, no copy) or host (copied back from another device of this node first).
  void count_handoff(const std::string& workflow, std::string_view path, uint64_t bytes);
  /// A workflow step here answered `seconds` after it was submitted (queue and run).
  void observe_workflow_step(const std::string& workflow, const std::string& step, double seconds);
  /// A workflow request run here finished (outcome "success" or the error code's name).
  void count_workflow(const std::string& workflow, const std::string& outcome);
  // Shadows (AsyFunc).
  /// A Shadow of `model` started on `device` in `seconds` (its weights copied in).
  void count_shadow_started(const model_key& model, double seconds);
  void count_shadow_released(const model_key& model);
  /// The router's Shadows of `model` now (its function registration table): starting and ready,
  /// and the weights of the full copies they stand in for (one model's bytes each), to set beside
  /// what they hold (ember_device_memory_in_use_bytes{use="shadows"}).
  void set_shadows(const model_key& model, uint32_t starting, uint32_t ready, uint64_t stand_in_bytes);
  /// A run of a Body paired with a Shadow: `rows` of it computed there, or (0) taken back by the
  /// Body (the Shadow gone, or the batch too small).
  void count_shadow_split(const model_key& model, int64_t rows);
  /// Text generation on a device, per model: its engine's per-model figures
  /// (ExecutorEngine::generation_stats, read at each scrape). Streams and KV figures are gauges;
  /// tokens, preemptions and parked streams are the engine's running totals, counted here by their
  /// growth (an engine that restarted from zero counts from its new totals). A model the device no
  /// longer reports is set to zero streams and blocks. Any thread.
  struct GenerationFigures {
    uint64_t streams = 0, tokens_generated = 0, kv_blocks_in_use = 0, kv_swapped_bytes = 0;
    uint64_t preempted_swap = 0, preempted_recompute = 0, parked = 0, resumed = 0;
  };
  void set_generation(const std::string& device, const std::map<model_key, GenerationFigures>& models);

 private:
  metrics::Registry registry_;
  metrics::HistogramFamily& queue_;
  metrics::HistogramFamily& compute_;
  metrics::CounterFamily& rejected_;
  metrics::CounterFamily& executions_;
  metrics::CounterFamily& inferences_;
  metrics::HistogramFamily& batch_requests_;
  metrics::HistogramFamily& batch_delay_;
  metrics::CounterFamily& fetched_;
  metrics::Gauge& cache_bytes_;
  metrics::Gauge& cache_models_;
  metrics::Gauge& cache_capacity_;
  metrics::GaugeFamily& device_used_;
  metrics::GaugeFamily& device_capacity_;
  metrics::GaugeFamily& device_lent_;
  metrics::GaugeFamily& device_in_use_;
  metrics::Gauge& replicas_;
  metrics::CounterFamily& loads_;
  metrics::HistogramFamily& load_seconds_;
  metrics::CounterFamily& dispatches_;
  metrics::Counter& evictions_;
  metrics::CounterFamily& slo_;
  metrics::Gauge& alpha_;
  metrics::Gauge& queued_;
  metrics::Counter& restarts_;
  metrics::CounterFamily& handoff_bytes_;
  metrics::CounterFamily& workflow_handoff_;
  metrics::CounterFamily& workflows_;
  metrics::HistogramFamily& workflow_steps_;
  metrics::CounterFamily& shadows_started_;
  metrics::CounterFamily& shadows_released_;
  metrics::HistogramFamily& shadow_start_;
  metrics::CounterFamily& shadow_splits_;
  metrics::CounterFamily& shadow_rows_;
  metrics::GaugeFamily& shadows_;
  metrics::GaugeFamily& shadow_stand_in_;
  metrics::CounterFamily& faults_;
  metrics::CounterFamily& actor_restarts_;
  metrics::CounterFamily& unrestored_;
  TransferInstruments transfers_;  // after registry_: registers into it
  metrics::GaugeFamily& generation_streams_;
  metrics::CounterFamily& generation_tokens_;
  metrics::GaugeFamily& kv_blocks_;
  metrics::GaugeFamily& kv_swapped_;
  metrics::CounterFamily& preemptions_;
  metrics::CounterFamily& parked_;
  std::mutex generation_mu_;
  std::map<std::pair<std::string, model_key>, GenerationFigures> generation_last_;  // guarded by generation_mu_
  std::mutex refresh_mu_;          // held while refreshing: one snapshot's refresh at a time
  std::map<std::string, std::function<bool()>> refreshers_;  // guarded by refresh_mu_
};

}  // namespace ember
