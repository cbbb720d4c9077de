#include "actors/cluster/manager_instruments.hpp"

#include <vector>

namespace ember {

namespace {

/// Cold starts and drains run from milliseconds (a warm host cache) to minutes (a big model from
/// the repository over a slow link).
std::vector<double> slow_buckets_s() { return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}; }

}  // namespace

ManagerInstruments::ManagerInstruments()
    : desired_(registry_.gauge("ember_autoscale_desired_replicas", "Replicas the autoscaler wants per model version",
                               {"model", "version"})),
      current_(registry_.gauge("ember_autoscale_replicas", "Ready replicas per model version", {"model", "version"})),
      actions_(registry_.counter("ember_autoscale_actions_total",
                                 "Scaling actions made, by direction (up, down) and reason",
                                 {"model", "version", "direction", "reason"})),
      cold_starts_(registry_.counter("ember_replica_cold_starts_total",
                                     "Replicas loaded, by the tier their bytes came from (cache, local_disk, peer, "
                                     "repository)",
                                     {"tier"})),
      cold_start_seconds_(registry_.histogram("ember_replica_cold_start_seconds",
                                              "Time from asking a node for a replica to the replica serving, by tier",
                                              {"tier"}, slow_buckets_s())),
      drain_seconds_(registry_
                         .histogram("ember_autoscale_drain_seconds",
                                    "Time a scaled-down replica took from leaving the routing table to being unbound",
                                    {}, slow_buckets_s())
                         .with(std::vector<std::string>{})) {}

void ManagerInstruments::set_replicas(const model_key& model, uint32_t desired, uint32_t current) {
  auto [it, fresh] = shown_.try_emplace(model, desired, current);
  if (!fresh && it->second == std::make_pair(desired, current)) return;
  it->second = {desired, current};
  const std::string version = std::to_string(model.version);
  desired_.with({model.name, version}).set(desired);
  current_.with({model.name, version}).set(current);
}

void ManagerInstruments::count_action(const model_key& model, std::string_view direction, std::string_view reason) {
  actions_.with({model.name, std::to_string(model.version), direction, reason}).inc();
}

void ManagerInstruments::count_cold_start(SourceTier tier, double seconds) {
  const std::string_view word = to_string(tier);
  cold_starts_.with({word}).inc();
  cold_start_seconds_.with({word}).observe(seconds);
}

void ManagerInstruments::observe_drain(double seconds) { drain_seconds_.observe(seconds); }

}  // namespace ember
