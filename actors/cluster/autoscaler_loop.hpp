// AutoscalerLoop: the manager's autoscaling concern as a plain class it calls (DESIGN.md: a new
// concern is a class beside the registry, not code inside the actor). Per model it holds the
// effective knobs (the cluster's `autoscale:` defaults with the model's serving.autoscale), a
// LoadWindow fed by the load reports, and the policy's ScalerState; across models, the measured
// cold-start time per source tier. tick() sums the reports of the tick, asks placement::decide for
// every model, and returns the changes to make with their log lines.
//
// Plain C++: owned and called by the cluster_manager actor only (not thread-safe); time is the
// actor clock's, passed in. Never blocks; memory is one window per configured model.
//
// Not yet wired: the manager does not create one, and nodes and gateways do not send load reports
// yet (issue 13). What the manager will do with a decision (place k replicas, drain and unbind k)
// is the manager's.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "actors/messages.hpp"
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

  /// One reporter's counters for `key` since its previous report; summed with the others' until
  /// the next tick. Reports for models not configured are dropped.
  void report(const model_key& key, const placement::LoadReport& counters);
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
  struct Change {
    model_key key;
    placement::ScaleDecision decision;
    std::string line;  // for the log: "m/1: up by 2 to 3 (load): ongoing_requests need 2.50 with ..."
  };
  /// One tick at now_us: every configured model's decision; the changes (up or down) returned.
  std::vector<Change> tick(int64_t now_us, const std::function<Supply(const model_key&)>& supply);

 private:
  struct Model {
    AutoscaleConfig config;
    placement::LoadWindow window;
    placement::ScalerState state;
    placement::LoadReport pending;  // this tick's reports, summed
  };

  AutoscaleConfig defaults_;
  uint64_t tick_us_, look_back_us_;
  std::map<model_key, Model> models_;
  std::array<uint64_t, 4> cold_start_us_{};  // by SourceTier
};

}  // namespace ember
