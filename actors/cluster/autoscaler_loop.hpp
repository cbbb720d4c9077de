// AutoscalerLoop: the manager's autoscaling concern as a plain class it calls (DESIGN.md: a new
// concern is a class beside the registry, not code inside the actor). Per model it holds the
// effective knobs (the cluster's `autoscale:` defaults with the model's serving.autoscale), a
// LoadWindow fed by the load reports, and the policy's ScalerState; across models, the measured
// cold-start time per source tier. tick() sums the reports of the tick, asks placement::decide for
// every model, and returns the changes to make with their log lines.
//
// Reports carry two kinds of numbers. Counters (arrivals, completions, busy time) count what
// happened since the reporter's previous report: they are summed over reporters and go into the
// window at the next tick. Gauges (ongoing, queued, requests in flight per node) are the
// reporter's latest values: each reporter's stand until it reports again, or for three ticks when
// it stops (a gateway that died), and the model's are the sum over its reporters. So a report that
// lands just after a tick does not make a busy model look idle for one tick.
//
// Plain C++: owned and called by the cluster_manager actor only (not thread-safe); time is the
// actor clock's, passed in. Never blocks; memory is one window per configured model.
//
// What the manager does with a decision (place k replicas, drain and unbind k) is the manager's.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/loading_messages.hpp"
#include "base/status.hpp"
#include "config/autoscale_config.hpp"
#include "placement/autoscaler.hpp"
#include "placement/load_window.hpp"

namespace ember {

class AutoscalerLoop {
 public:
  /// `tick_us`: how often tick() runs and reports come; `look_back_us`: the window of the rates.
  AutoscalerLoop(AutoscaleConfig defaults, uint64_t tick_us, uint64_t look_back_us);

  /// Starts (or restarts, keeping its window) scaling `key` with the defaults and the model's own
  /// keys. invalid_argument naming model.json's key when the two break a rule together (the model's
  /// min_replicas above the cluster's max_replicas); the model then scales with the defaults.
  Status configure(const model_key& key, const AutoscaleOverrides& overrides);
  /// The model was unloaded: its state goes.
  void forget(const model_key& key);
  const AutoscaleConfig* config(const model_key& key) const;

  /// One replica's capacity within the model's SLO, rows a second (autoscale.policy model_level;
  /// RepositoryEntry::capacity_rps); 0: not known. Nothing for a model not configured.
  void set_capacity(const model_key& key, double rows_per_s);
  /// One request's execution by the model's profile.json (batch 1, microseconds; 0: no profile):
  /// the service time the policies use until the window has measured one. Without it, a first cold
  /// start under load has no service time and the policy counts the requests in flight: thousands
  /// held for one download ask for max_replicas.
  void set_profiled_service(const model_key& key, uint64_t us);
  /// A floor under min_replicas (an explicit `load` of N replicas keeps N while it stands); 0 lifts it.
  void set_floor(const model_key& key, uint32_t replicas);
  /// The console's `scale MODEL MIN [MAX]`: min_replicas and (when given) max_replicas of `key`
  /// over its model.json's and the defaults, until the next `scale`. invalid_argument for MIN above
  /// MAX or beyond the limits; not_found for a model not configured.
  Status set_bounds(const model_key& key, uint32_t min, std::optional<uint32_t> max);

  /// One reporter's numbers for `key` at now_us: counters since its previous report, its gauges
  /// now, and its requests in flight per node id. Reports for models not configured are dropped.
  void report(const std::string& reporter, const model_key& key, const placement::LoadReport& report,
              const std::map<uint64_t, uint32_t>& in_flight, int64_t now_us);
  /// Requests in flight on `node` for `key`, over the reporters' latest reports.
  uint32_t in_flight(const model_key& key, uint64_t node) const;
  /// A cold start from `tier` took `us` (load request to ready replica): a moving average per tier.
  void cold_start_measured(SourceTier tier, uint64_t us);
  /// The moving average of `tier`'s cold starts; 0 before any.
  uint64_t cold_start_us(SourceTier tier) const { return cold_start_us_[static_cast<size_t>(tier)]; }

  /// What the manager knows of a model's replicas, and the best tier a new one would load from.
  struct Supply {
    uint32_t ready = 0;
    uint32_t pending = 0;
    SourceTier best_tier = SourceTier::repository;
  };
  /// How many more replicas of a model the nodes have room for: a scale-up adds at most this many.
  /// With none, the model keeps wanting more (the desired count shows it) and the loop says so once.
  /// Asked only for the models that scale up (it looks at every node); empty: no limit.
  using Room = std::function<uint32_t(const model_key&)>;
  struct Change {
    model_key key;
    placement::ScaleDecision decision;  // up or down; keep when the line only says an up is blocked
    std::string line;  // for the log: "m/1: up by 2 to 3 (load): ongoing_requests need 2.50 with ..."
  };
  /// One tick at now_us: every configured model's decision; the changes (up or down) returned, an
  /// up cut to the room there is, and (as a keep) the first tick of an up blocked for want of room.
  std::vector<Change> tick(int64_t now_us, const std::function<Supply(const model_key&)>& supply,
                           const Room& room = {});
  /// The models idle for their host_keep_alive at now_us (no request, none in flight) for which
  /// `ready(key)` holds (say, no replica left), each once per idle spell: their bytes may leave the
  /// nodes' host caches.
  std::vector<model_key> embers_expired(int64_t now_us, const std::function<bool(const model_key&)>& ready);
  /// The models configured.
  size_t size() const { return models_.size(); }
  /// The replica count the last tick's decision wanted for `key` (0 before any tick).
  uint32_t desired(const model_key& key) const;
  /// E(x) at the last tick (placement::expected_backlog): the requests of `key` waiting when a new
  /// replica is ready, for a cold start of `cold_start_us` (0: the measured one of the best tier the
  /// tick saw). 0 before any tick.
  double expected_queue(const model_key& key, uint64_t cold_start_us = 0) const;
  /// Calls f(key) for every configured model.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [key, m] : models_) f(key);
  }

 private:
  /// One reporter's latest gauges for a model.
  struct Gauges {
    uint32_t ongoing = 0, queued = 0;
    std::map<uint64_t, uint32_t> in_flight;
    int64_t at_us = 0;
  };
  struct Model {
    AutoscaleConfig config;  // with the floor applied
    AutoscaleOverrides own;
    uint32_t floor = 0;
    placement::LoadWindow window;
    placement::ScalerState state;
    placement::LoadReport counters;  // this tick's counters, summed
    std::map<std::string, Gauges> gauges;
    bool ember_expired = false;  // embers_expired() named it in this idle spell
    uint32_t desired = 0;        // the last decision's
    bool blocked = false;        // an up is wanted and no node has room (said once)
    placement::ModelLoad load;   // the last tick's view
    double capacity_rps = 0;     // set_capacity
    uint64_t profiled_service_us = 0;  // set_profiled_service
    /// The console's `scale`: bounds over model.json's and the defaults (a rescan keeps them).
    std::optional<uint32_t> console_min, console_max;
  };
  Status apply(const model_key& key, Model& m);

  AutoscaleConfig defaults_;
  uint64_t tick_us_, look_back_us_;
  std::map<model_key, Model> models_;
  std::array<uint64_t, 4> cold_start_us_{};  // by SourceTier
};

}  // namespace ember
