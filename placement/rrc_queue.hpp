// RrcQueue: one node's request queue across all its devices, ordered by Torpor's SLO-aware
// priority (Torpor §5.2 and Appendix A.3: the required request count RRC and the α threshold).
//
// Owner: the node_router, one RrcQueue per node, called from that one actor. A plain value type:
// not thread-safe, never blocks; no I/O, no clock (every time is a `now_us` parameter from the
// caller's monotonic clock, microseconds; a now_us below one already seen is taken as the latest
// seen), no randomness. It owns only request ids and per-model statistics; the router owns the
// request payloads, runs what pop returns on a device, and reports each outcome with record.
//
// The mechanism (paper):
//  - RRC = (p·n − m)/(1 − p): the on-time requests a model still needs to reach its percentile p,
//    n = requests counted, m = those within the deadline. RRC <= 0: the model complies.
//  - Models sorted ascending by RRC (ties by name); the high group is the largest prefix k with
//    Σ_{j<=k} max(RRC_j, 0) <= α·Σ_i max(RRC_i, 0). So RRC <= 0 is always high, α = 1 all high.
//  - Strict priority: every high request before any low one. High queue in descending RRC (close
//    to compliance first, already compliant last), low queue in ascending RRC, FIFO within a model.
//  - Algorithm 2 each alpha period: the fraction of compliant models rose by more than the
//    threshold -> α = min(α·scalar, 1); fell by more -> α = α/scalar; otherwise unchanged.
//
// What the paper leaves open (digest §5.8), decided here:
//  - Window: n and m count the outcomes of the last window_us (10 s) in window_buckets (10) time
//    buckets, so the window slides in 1 s steps and holds between 9 and 10 s. Not cumulative: a
//    model recovers in bounded time after a burst, whatever its rate. Not the last W requests:
//    a rarely called model would drag an old burst along for minutes. Buckets keep memory at
//    O(buckets) per model with no per-request storage.
//  - Periods: groups and queue order are recomputed every repartition_period_us (1 s), not on
//    every outcome, so a pop costs O(log models) and the order is stable between repartitions;
//    α moves every alpha_period_us (10 s), which equals the window, so "compliant this period"
//    is compliance over the window. (Torpor's prototype: 2 s and 20 × 2 s.) Missed periods are
//    skipped, not replayed: one late tick runs each step once.
//  - α starts at 1 (everything high, as the prototype) and never goes below min_alpha (1/64), so
//    a burst that halves it repeatedly is undone in at most 6 good periods.
//  - The ratio change is absolute (paper), not relative (prototype): a relative change is noisy
//    near 0 and undefined at 0. No ×1.01 creep inside the band (paper: unchanged).
//  - Only models with outcomes in the window count in the compliance fraction; a period where no
//    model has any gives no signal: α and the last fraction are kept.
//  - A new model (n = 0) has RRC 0 and joins the high group at once (register_model).
//  - RRC is not weighted by mean latency (the prototype is): RRC stays a count of requests, as in
//    the paper, comparable across models and readable in metrics.
//  - A request whose deadline has already passed is still served, in its place: the deadline is a
//    per-model tail-latency target, not a client timeout, so a late answer is worth more than a
//    503; it is a miss anyway once recorded. Counted in late_pops.
//  - A model registered with deadline_us = 0 (no SLO in its model.json) is best effort: served
//    after both groups, FIFO by push order, outside the RRC sums and the compliance fraction.
//  - Ties (equal RRC, or two best-effort models) go to the model whose oldest request was pushed
//    first, so the order never depends on names or addresses.
//  - Bounded: at most max_queued_per_model per model and max_queued_total in all. Overflow policy:
//    reject the newest (push returns unavailable, the router answers 503), counted in rejected.
//    A rejection is not an outcome: it does not enter n or m.
//
// Invariants: every queued request is in exactly its model's FIFO; a model is in the ready order
// iff its FIFO is non-empty; queued() <= max_queued_total; α in [min_alpha, 1]; a model's RRC and
// group change only at a repartition or at register_model.
//
// Cost (M models, B buckets): push, pop, record O(log M); pop_if O((s + 1)·log M) with s models
// skipped; tick O(M·(B + log M)) when a period is due, O(1) otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace ember::placement {

/// In serving order: all high requests, then low, then best effort.
enum class RrcGroup : uint8_t { high, low, best_effort };

/// "high", "low", "best_effort".
std::string_view to_string(RrcGroup group);

/// Torpor's RRC, (p·n − m)/(1 − p), for percentile p in (0, 1); 0 when n = 0. A value within
/// 1e-9·n of 0 is 0, so p·n = m counts as compliant despite rounding.
double required_request_count(uint64_t n, uint64_t m, double percentile);

/// The size k of the high group: the largest k with Σ_{j<=k} max(rrc_j, 0) <= alpha·Σ max(rrc_i, 0),
/// for `ascending_rrc` sorted ascending. alpha = 1 gives all.
size_t high_group_size(const std::vector<double>& ascending_rrc, double alpha);

struct RrcOptions {
  /// Span of the sliding window over which n and m are counted, microseconds. Default 10 s. Longer
  /// steadies RRC but slows recovery after a burst.
  int64_t window_us = 10'000'000;
  /// The window slides in steps of window_us / window_buckets. Default 10 (1 s steps). More: finer
  /// steps, 24 bytes per bucket per model, and a longer repartition.
  uint32_t window_buckets = 10;
  /// How often RRCs, groups and the queue order are recomputed, microseconds. Default 1 s. Shorter
  /// reacts sooner at O(M log M) per period.
  int64_t repartition_period_us = 1'000'000;
  /// How often Algorithm 2 adjusts α, microseconds. Default 10 s (the window).
  int64_t alpha_period_us = 10'000'000;
  /// α before the first adjustment, in [min_alpha, 1]. Default 1: all models high.
  double initial_alpha = 1.0;
  /// Floor of α, in (0, 1]. Default 1/64.
  double min_alpha = 1.0 / 64;
  /// Algorithm 2's scalar (> 1): α is multiplied or divided by it. Default 2.
  double alpha_scalar = 2.0;
  /// Algorithm 2's threshold on the absolute change of the compliant fraction, in [0, 1).
  /// Default 0.04.
  double alpha_threshold = 0.04;
  /// At most this many requests queued per model / on the node; push rejects beyond. Defaults 256 /
  /// 4096. Larger: fewer 503s under a burst but longer queueing before one (24 bytes per request).
  size_t max_queued_per_model = 256;
  size_t max_queued_total = 4096;

  /// invalid_argument naming the first field out of range.
  Status validate() const;
};

/// A request handed back by pop, to run now.
struct QueuedRequest {
  uint64_t id = 0;
  std::string model;
  int64_t arrival_us = 0;

  friend bool operator==(const QueuedRequest&, const QueuedRequest&) = default;
};

/// Monotonic counts for metrics, per model and per node.
struct RrcCounters {
  uint64_t pushed = 0;
  uint64_t popped = 0;
  /// push refused because a bound was reached (the newest request is the one refused).
  uint64_t rejected = 0;
  /// Outcomes recorded within / beyond the deadline (best effort: always within).
  uint64_t on_time = 0;
  uint64_t misses = 0;
  /// Requests popped after arrival_us + deadline_us.
  uint64_t late_pops = 0;
};

/// One model for metrics and logs; RRC and window counts as of the last repartition.
struct RrcModelView {
  std::string name;
  uint64_t deadline_us = 0;
  double percentile = 0.98;
  RrcGroup group = RrcGroup::high;
  double rrc = 0;
  uint64_t window_requests = 0;  // n
  uint64_t window_on_time = 0;   // m
  size_t queued = 0;
  RrcCounters counters;
};

class RrcQueue {
 public:
  /// `options` must pass validate(): anything else is a programmer error.
  explicit RrcQueue(RrcOptions options = {});

  /// Adds a model (RRC 0, high group; best effort when deadline_us = 0) or updates the SLO of a
  /// known one, keeping its queue and the verdicts of outcomes already recorded. invalid_argument
  /// for an empty name or a percentile outside (0, 1).
  Status register_model(const std::string& name, uint64_t deadline_us, double percentile = 0.98);
  /// Forgets a model; returns its queued requests, oldest first, for the caller to fail. Nothing
  /// for an unknown model.
  std::vector<QueuedRequest> remove_model(std::string_view name);

  /// Queues request `id` (opaque here; uniqueness is the caller's) at the back of its model's FIFO.
  /// invalid_argument for an unknown model; unavailable when a bound is reached (counted).
  Status push(uint64_t id, std::string_view model, int64_t arrival_us);

  /// Returns true for models that can run now (a device is free for them).
  using ModelFilter = std::function<bool(const std::string& model)>;
  /// The next request in priority order, removed from the queue; nullopt when empty.
  std::optional<QueuedRequest> pop(int64_t now_us) { return pop_if(now_us, {}); }
  /// As pop, but skips models for which `runnable` is false (an empty filter accepts all): the
  /// first runnable model's oldest request.
  std::optional<QueuedRequest> pop_if(int64_t now_us, const ModelFilter& runnable);
  /// Head-of-queue batching: the request pop_if would return, followed by up to max_requests − 1
  /// more of the same model, oldest first. Empty when nothing runnable is queued or max_requests = 0.
  std::vector<QueuedRequest> pop_batch(int64_t now_us, size_t max_requests, const ModelFilter& runnable = {});
  /// Returns true for a queued request (by id) that may join the batch being formed.
  using RequestFilter = std::function<bool(uint64_t id)>;
  /// Dynamic batching: up to max_requests more requests of `model`, oldest first, skipping (and
  /// keeping queued, in order) those `joins` refuses; `joins` is asked in FIFO order and may keep
  /// state (rows taken so far). Empty for an unknown model. O(queued(model) + log M).
  std::vector<QueuedRequest> pop_more(int64_t now_us, std::string_view model, size_t max_requests,
                                      const RequestFilter& joins = {});
  /// When the oldest queued request of `model` arrived; nullopt when none is queued.
  std::optional<int64_t> oldest_arrival(std::string_view model) const;

  /// An outcome: a request of `model` finished `latency_us` after its arrival_us (queue wait plus
  /// execution: what the client saw at this node). Within the deadline iff latency_us <= deadline_us.
  /// Ignored for an unknown model (removed while the request ran).
  void record(std::string_view model, uint64_t latency_us, int64_t now_us);

  /// Runs Algorithm 2 and then the repartition when each is due; the first tick runs both. Returns
  /// when the next one is due, for the caller's delayed message.
  int64_t tick(int64_t now_us);

  double alpha() const { return alpha_; }
  /// Fraction of models with outcomes in the window that complied, at the last alpha step that
  /// had any; nullopt before.
  std::optional<double> compliance() const { return last_ratio_; }
  /// As of the last repartition; 0 for an unknown or best-effort model.
  double rrc(std::string_view model) const;
  /// nullopt for an unknown model.
  std::optional<RrcGroup> group(std::string_view model) const;
  bool in_high_group(std::string_view model) const { return group(model) == RrcGroup::high; }
  bool contains(std::string_view model) const { return models_.count(model) > 0; }
  std::optional<RrcModelView> view(std::string_view model) const;
  /// Every model, by name.
  std::vector<RrcModelView> views() const;
  size_t queued() const { return queued_; }
  size_t queued(std::string_view model) const;
  /// Node totals since construction (removed models included).
  const RrcCounters& counters() const { return totals_; }

 private:
  struct Pending {
    uint64_t id;
    int64_t arrival_us;
    uint64_t seq;  // push order across the node: FIFO and tie-break
  };
  struct Bucket {
    int64_t index = INT64_MIN;  // floor(time / bucket_us) of the outcomes counted here
    uint64_t n = 0;
    uint64_t m = 0;
  };
  struct Model;
  /// Position in the ready order: tier (high, low, best effort), then `order` ascending
  /// (high: −RRC, low: RRC, best effort: 0), then the head request's seq.
  struct ReadyKey {
    uint8_t tier;
    double order;
    uint64_t seq;
    Model* model;
    bool operator<(const ReadyKey& o) const { return std::tie(tier, order, seq) < std::tie(o.tier, o.order, o.seq); }
  };
  struct Model {
    std::string name;
    uint64_t deadline_us = 0;
    double percentile = 0.98;
    RrcGroup group = RrcGroup::high;
    double rrc = 0;
    uint64_t window_n = 0;
    uint64_t window_m = 0;
    std::deque<Pending> fifo;
    std::vector<Bucket> buckets;  // empty for best effort
    RrcCounters counters;
  };

  const Model* find(std::string_view model) const;
  void count(Model& m, uint64_t RrcCounters::*field);
  int64_t advance_clock(int64_t now_us);
  /// (n, m) over the window ending at now_us.
  std::pair<uint64_t, uint64_t> window_counts(const Model& m, int64_t now_us) const;
  ReadyKey key_of(Model& m) const;
  void unready(Model& m);
  void make_ready(Model& m);
  Model* first_runnable(const ModelFilter& runnable) const;
  QueuedRequest take_head(Model& m, int64_t now_us);
  void adjust_alpha(int64_t now_us);
  void repartition(int64_t now_us);
  RrcModelView view_of(const Model& m) const;

  RrcOptions options_;
  int64_t bucket_us_;
  std::map<std::string, Model, std::less<>> models_;  // std::map: stable addresses for ReadyKey::model
  std::set<ReadyKey> ready_;                          // exactly the models with a non-empty FIFO
  size_t queued_ = 0;
  uint64_t next_seq_ = 0;
  double alpha_;
  std::optional<double> last_ratio_;
  bool started_ = false;
  int64_t clock_us_ = INT64_MIN;
  int64_t next_alpha_us_ = 0;
  int64_t next_repartition_us_ = 0;
  RrcCounters totals_;
};

}  // namespace ember::placement
