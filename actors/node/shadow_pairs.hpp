// ShadowPairs: the node router's burst scaling (AsyFunc, issue 19) over the pure policies of
// placement/shadow_policy.hpp, beside the SwapController whose device state it reads. It holds the
// function registration table (the paper's FRT: each Shadow's id, model, the Body device it is
// paired with, its own device, its layers and status) and decides three things:
//
// - Model-level scaling (Algorithm 1; binding.bodies model_level): once a period, the rate of the
//   period just ended is the prediction for the next (a persistence forecast: the paper leaves the
//   predictor open, and any other would lag a burst the same way), against the capacity of the
//   Bodies at the SLO (Eq. 1, from the model's profile): above α of it one Body more (as many as
//   bring it under α), below β one fewer (its copy freed), at least one, at most the devices. The
//   SwapController holds the model to that many copies (SwapModel::max_devices).
// - Layer-level scaling (Algorithm 2; binding.shadows): at every arrival, when the rate over the
//   last burst window exceeds γ times the capacity of the Bodies and their Shadows, a Body without
//   a Shadow is paired with one on an idle device (up, not executing, holding no copy of the model,
//   with room for the Shadow's bytes; the most free bytes first), holding the fewest bytes that add
//   a quarter of a Body's rate (choose_shadow), else the greatest benefit, and never more than half
//   the model's bytes: what a burst lacks beyond that is model-level scaling's. The device is lent to
//   the Shadow (the SwapController dispatches nothing to it) until it is released. Once a period,
//   Shadows that served a period at least and whose gain the period's rate does not need (the
//   capacity without them still above the rate over γ) go, smallest benefit first; so does one
//   whose Body lost its copy.
// - Adaptive batching (Algorithm 3; binding.adaptive_batching): the expected latency of each batch
//   size, the Body alone or, when every Body has a Shadow, the pair's (Eq. 6), plus the node's own
//   overhead for a run (ModelInfo::overhead_us), for the SwapController's gathering
//   (SwapModel::batch_us).
//
// The transfer between Body and Shadow is priced by the node's links: the direct link between the
// two devices when there is one, else through host memory (the slower device's PCIe, twice).
//
// Plain C++, owned and called by the node router only (not thread-safe); time is the router's
// now_us, passed in. Models without a profile are left to late binding as before.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/node/swap_controller.hpp"
#include "placement/shadow_policy.hpp"
#include "placement/swap_scheduler.hpp"

namespace ember {

struct ShadowScalingOptions {
  bool model_level = false;
  bool shadows = false;
  bool adaptive_batching = false;
  double alpha = 0.8, beta = 0.6, gamma = 1.0;
  /// The instantaneous rate is measured over this window (a burst's trigger).
  uint64_t burst_window_us = 100'000;
  /// Model-level scaling's period, and how often Shadows are considered for release.
  uint64_t period_us = 1'000'000;
};

class ShadowPairs {
 public:
  struct ModelInfo {
    placement::ShadowProfile profile;
    double slo_us = 0;
    uint32_t max_batch = 1;
    /// What a run costs on this node beyond the profile's compute (the registration's warm run less
    /// the profile's time at batch 1: messages, inputs and answers over the link), added to every
    /// batch's expected latency for adaptive batching.
    double overhead_us = 0;
  };
  /// A row of the function registration table.
  struct Row {
    uint64_t id = 0;
    model_key model;
    uint32_t body = 0;    // the Body's device
    uint32_t device = 0;  // the Shadow's
    placement::ShadowChoice choice;
    /// The model's profile with the transfer between the two devices priced (shared with the
    /// choice's cache): what the pair's splits are computed from.
    std::shared_ptr<const placement::ShadowProfile> priced;
    bool ready = false;  // starting until its executor answered
    int64_t asked_us = 0;
    uint64_t bytes = 0, start_us = 0;  // as its executor reported them
  };
  struct PeriodResult {
    std::vector<Row> release;  // Shadows to drop (their devices are no longer lent)
    /// Model-level scaling in: copies to free, (model, device).
    std::vector<std::pair<model_key, uint32_t>> drop;
  };

  ShadowPairs(ShadowScalingOptions options, placement::NodeTopology topology);
  const ShadowScalingOptions& options() const { return options_; }

  /// A model with its profile (replacing one before); its limits go to `swap` at once.
  void add_model(const model_key& name, ModelInfo info, SwapController& swap);
  /// Forgets a model: its Shadows to drop.
  std::vector<Row> remove_model(const model_key& name, SwapController& swap);
  bool has_model(const model_key& name) const { return models_.count(name) > 0; }

  /// A request of `model` arrived: counted, and (layer-level scaling) the Shadows to start now,
  /// already in the table as starting, their devices lent in `swap`.
  std::vector<Row> arrival(const model_key& model, int64_t now_us, SwapController& swap);
  /// A Shadow's executor holds it now.
  void started(uint64_t id, uint64_t bytes, uint64_t start_us, SwapController& swap);
  /// A Shadow failed to start, or is gone (its device restarted, a split could not reach it): its
  /// row goes and its device is no longer lent. The row as it was, if there was one.
  std::optional<Row> gone(uint64_t id, SwapController& swap);
  /// Once a period (the router's tick; nothing before period_us passed since the last one).
  PeriodResult period(int64_t now_us, SwapController& swap);

  /// For a run of `rows` rows of `model` on device `body`: its ready Shadow and the share of the
  /// rows it takes (Eq. 6's b_S / b), or nullopt.
  std::optional<std::pair<uint64_t, double>> pair(const model_key& model, uint32_t body, uint32_t rows) const;
  const std::map<uint64_t, Row>& table() const { return rows_; }
  /// Model-level scaling's Body count for `model` (0: not scaled by it).
  uint32_t bodies(const model_key& model) const;
  /// The rate over the last burst window, requests per second; when it holds fewer than
  /// kRateArrivals arrivals, the gaps between that many last ones over their span (at least the
  /// window), and 0 before there were that many: a model of a few requests a second has one or none
  /// in a window, and a burst is told from chance by more.
  double rate(const model_key& model, int64_t now_us) const;
  static constexpr size_t kRateArrivals = 8;
  /// A Shadow holds the fewest bytes that add this share of a Body's rate, and at most
  /// kShadowMaxShare of the model's bytes (see arrival()).
  static constexpr double kShadowGain = 0.25;
  static constexpr double kShadowMaxShare = 0.5;

 private:
  struct Model {
    ModelInfo info;
    double body_rps = 0;  // Eq. 1
    uint64_t model_bytes = 0;
    uint32_t bodies = 1;
    std::deque<int64_t> arrivals;  // within the longer of the burst window and the period
    /// The policy's choice for a Shadow on device `second` paired with a Body on `first`, with the
    /// profile it was priced on: computed once per pair of devices (the search is cubic in the
    /// blocks; a burst asks at every arrival), gone with the model (a new profile or SLO).
    struct Pairing {
      std::shared_ptr<const placement::ShadowProfile> priced;
      std::optional<placement::ShadowChoice> choice;
    };
    std::map<std::pair<uint32_t, uint32_t>, Pairing> pairings;
  };
  /// The cached pairing of a Body on `body` with a Shadow on `device` (see Model::pairings).
  const Model::Pairing& pairing(Model& m, uint32_t body, uint32_t device);
  /// The profile with the transfer between devices `a` and `b` priced (see the header).
  placement::ShadowProfile priced(const placement::ShadowProfile& p, uint32_t a, uint32_t b) const;
  /// The capacity of `model`'s Bodies in `swap` and their Shadows (rows per second).
  double capacity(const model_key& name, const Model& m, const SwapController& swap) const;
  size_t count_since(const Model& m, int64_t since) const;
  /// Pushes the model's limits (Body count, batch latencies) to `swap`.
  void publish(const model_key& name, const Model& m, SwapController& swap) const;

  ShadowScalingOptions options_;
  placement::NodeTopology topology_;
  std::map<model_key, Model> models_;
  std::map<uint64_t, Row> rows_;
  uint64_t next_id_ = 1;
  int64_t last_period_us_ = 0;
};

}  // namespace ember
