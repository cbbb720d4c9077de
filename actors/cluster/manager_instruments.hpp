// ManagerInstruments: the metrics the cluster manager keeps about autoscaling: desired and current
// replicas per model, scaling actions by direction and reason, cold starts (replica loads) by the
// tier their bytes came from, and how long scaled-down replicas took to drain. The manager answers
// metrics_atom with a snapshot; gateways merge it into /metrics under node="manager".
//
// Thread-safe (metrics::Registry); written by the manager actor only. No CAF.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "actors/loading_messages.hpp"
#include "metrics/metrics.hpp"

namespace ember {

class ManagerInstruments {
 public:
  ManagerInstruments();

  metrics::Registry& registry() { return registry_; }

  /// The gauges of `model`; a value already shown is not written again (the manager calls this for
  /// every model on every tick).
  void set_replicas(const model_key& model, uint32_t desired, uint32_t current);
  /// A scaling action the manager made: direction "up" or "down", reason the ScaleReason's word.
  void count_action(const model_key& model, std::string_view direction, std::string_view reason);
  /// A replica became ready, its bytes from `tier`, `seconds` after its load was asked for.
  void count_cold_start(SourceTier tier, double seconds);
  /// A scaled-down replica was unbound `seconds` after it left the routing table.
  void observe_drain(double seconds);

 private:
  metrics::Registry registry_;
  std::map<model_key, std::pair<uint32_t, uint32_t>> shown_;  // desired, current
  metrics::GaugeFamily& desired_;
  metrics::GaugeFamily& current_;
  metrics::CounterFamily& actions_;
  metrics::CounterFamily& cold_starts_;
  metrics::HistogramFamily& cold_start_seconds_;
  metrics::Histogram& drain_seconds_;
};

}  // namespace ember
