// Partition planning: where to cut a model into p consecutive layer ranges so that a cold start
// loads the ranges in parallel on p nodes and serves through the resulting pipeline (Flashpoint
// ch. 4, digest §2.4). Pure: anyone, any thread; no I/O, no clocks.
//
// The cost model is the thesis's (Eqs. 4.1-4.8, with the sum's index fixed): for a plan with p parts
// and P devices to spend (P / p pipelines of depth p, at least one),
//   C  = the longest part's cold start (its layers' load times)
//   B  = the pipeline's bottleneck: the longest part's execution or the longest cut's transfer
//   IN = the cuts' transfers, summed;  I = I(1) + IN, I(1) = every layer's execution
//   T(y) = C + B · (ceil(y / floor(P / p)) − 1) + I          (the y-th request of a queue)
//   T̄(x) = (T(1) + ... + T(x)) / x                           (the mean over a queue of x)
// so that for fixed (p, x, P), T̄ = C + IN + w · B + I(1) with w = mean over y of the wait factor.
//
// The thesis's DP over (i, j, cuts) keeps only each sub-range's best T̄, which is not optimal: the
// objective mixes two maxima and a sum, so a sub-plan worse in T̄ can combine into a better whole
// (digest §2.4; its cut index must also stop at j − 1). Ember's planner is exact: a DP over
// (layers covered, parts used) that keeps, for each state, the Pareto set of (C, B, IN) of its
// prefix plans; a part whose bytes exceed the per-stage memory limit is never formed. The unit
// tests check it against brute force.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"

namespace ember::placement {

/// One layer of a model's profile (measured at registration).
struct LayerProfile {
  uint64_t bytes = 0;      // its weights
  uint64_t load_us = 0;    // its share of a cold start: fetch, host copy, upload
  uint64_t exec_us = 0;    // its execution time at the batch size served
  uint64_t out_bytes = 0;  // its output activation: what a cut after it sends per request
  bool operator==(const LayerProfile&) const = default;
};

struct PartitionCosts {
  /// An activation of b bytes crosses a cut in fixed_us + b · us_per_byte (the data plane between
  /// remote nodes: plans assume no locality, the worst case, as the thesis does).
  uint64_t transfer_fixed_us = 0;
  double transfer_us_per_byte = 0;
  /// The most weight bytes one stage may hold (its device's free memory); 0 = no limit.
  uint64_t stage_memory_bytes = 0;
  bool operator==(const PartitionCosts&) const = default;
};

struct PartitionPlan {
  uint32_t parts = 1;
  std::vector<uint32_t> cuts;  // a cut after layer k (0-based), ascending; parts − 1 of them
  uint64_t cold_start_us = 0;  // C
  uint64_t bottleneck_us = 0;  // B
  uint64_t network_us = 0;     // IN
  uint64_t inference_us = 0;   // I = I(1) + IN
  double mean_total_us = 0;    // T̄ for the x it was planned for
};

/// The transfer time of a cut after `layer`.
uint64_t cut_us(const std::vector<LayerProfile>& layers, const PartitionCosts& costs, uint32_t layer);

/// T̄ (x ≥ 1 requests in the queue, P ≥ 1 devices) of the plan cutting after `cuts`; the plan's
/// other fields filled in. Cuts must be ascending, inside the model.
PartitionPlan evaluate(const std::vector<LayerProfile>& layers, const PartitionCosts& costs,
                       const std::vector<uint32_t>& cuts, uint64_t x, uint32_t devices);

/// The plan with exactly `parts` parts that minimises T̄(x) with `devices` devices. invalid_argument
/// for no layers, parts outside 1..layers, x or devices 0; unavailable when no cut fits the
/// per-stage memory limit.
Result<PartitionPlan> best_plan(const std::vector<LayerProfile>& layers, const PartitionCosts& costs, uint32_t parts,
                                uint64_t x, uint32_t devices);

/// The best plan over 1..max_parts parts (max_parts also being the devices to spend, the
/// autoscaler's scale-up count). Errors as best_plan; unavailable when no p fits.
Result<PartitionPlan> choose_plan(const std::vector<LayerProfile>& layers, const PartitionCosts& costs,
                                  uint32_t max_parts, uint64_t x);

/// The plans for every x up to max_x, precomputed (thesis §4.2.2): ranges of x with one plan each,
/// found by exponential search for the x where the best plan changes, then bisection. The optimal p
/// changes slowly with x (Fig. 8.1), so the table is short.
class PlanTable {
 public:
  /// invalid_argument or unavailable as choose_plan.
  static Result<PlanTable> build(const std::vector<LayerProfile>& layers, const PartitionCosts& costs,
                                 uint32_t max_parts, uint64_t max_x);
  /// The plan for an expected queue of x (1 below 1, max_x's above max_x).
  const PartitionPlan& lookup(double x) const;
  struct Range {
    uint64_t from_x = 1;  // inclusive; the range ends where the next begins
    PartitionPlan plan;
  };
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  std::vector<Range> ranges_;
};

}  // namespace ember::placement
