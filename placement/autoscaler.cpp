#include "placement/autoscaler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ember::placement {
namespace {

// A need within this of an integer counts as that integer (4.0000000001 replicas is 4).
constexpr double kSlack = 1e-9;

uint32_t replicas_for(double need, uint32_t cap) {
  const double n = std::ceil(std::max(0.0, need) - kSlack);
  return n >= cap ? cap : static_cast<uint32_t>(n);
}

/// Starts `since` when `holds`, clears it otherwise; true when it has held for `delay_us`.
bool held_for(std::optional<int64_t>& since, bool holds, int64_t now_us, uint64_t delay_us) {
  if (!holds) {
    since.reset();
    return false;
  }
  if (!since) since = now_us;
  return now_us - *since >= static_cast<int64_t>(delay_us);
}

ScaleDecision change(ScaleAction action, uint32_t count, uint32_t desired, double need, ScaleReason reason) {
  return ScaleDecision{action, count, desired, need, reason};
}

}  // namespace

double replica_need(const AutoscaleConfig& c, const ModelLoad& load) {
  const double s = static_cast<double>(load.service_time_us) / 1e6;  // seconds per request
  const double rate = std::max(0.0, load.arrival_rate);
  ScalingPolicy policy = c.policy;
  if (s <= 0 && (policy == ScalingPolicy::arrival_rate || policy == ScalingPolicy::queue_latency))
    policy = ScalingPolicy::ongoing_requests;
  if (policy == ScalingPolicy::model_level && !(load.capacity_rps > 0)) policy = ScalingPolicy::ongoing_requests;
  const double busy = rate * s;  // replicas kept busy by the arrivals alone: a floor for every policy but MLS
  switch (policy) {
    case ScalingPolicy::ongoing_requests:
      return std::max(busy, load.ongoing / c.target_ongoing_requests);
    case ScalingPolicy::arrival_rate:
      return busy * c.headroom;
    case ScalingPolicy::queue_latency:
      return busy + s * expected_backlog(load) / (static_cast<double>(c.target_queue_latency_us) / 1e6);
    case ScalingPolicy::requests_per_minute:
      return std::max(busy, rate * 60 / c.target_requests_per_minute);
    case ScalingPolicy::model_level:
      return rate * c.headroom / load.capacity_rps;
  }
  return 0;
}

double expected_backlog(const ModelLoad& load) {
  const uint32_t supply = load.ready + load.pending;
  const double s = static_cast<double>(load.service_time_us) / 1e6;
  if (supply > 0 && s <= 0) return load.queued;
  const double served = supply == 0 ? 0.0 : supply / s;  // by the time a new replica serves
  const double cold_start = static_cast<double>(load.cold_start_us) / 1e6;
  return load.queued + std::max(0.0, std::max(0.0, load.arrival_rate) - served) * cold_start;
}

ScaleDecision decide(const AutoscaleConfig& c, const ModelLoad& load, ScalerState& state, int64_t now_us) {
  const double need = replica_need(c, load);
  const uint32_t supply = load.ready + load.pending;
  const bool busy = load.arrival_rate > 0 || load.ongoing > 0;
  const bool idle = held_for(state.idle_since_us, !busy, now_us, c.idle_timeout_us);

  uint32_t lower = c.min_replicas;
  if (supply > 0 && !idle) lower = std::max<uint32_t>(lower, 1);
  if (supply == 0 && busy) lower = std::max<uint32_t>(lower, 1);
  const auto clamp = [&](uint32_t n) { return std::clamp(n, lower, c.max_replicas); };
  const uint32_t up_to = clamp(replicas_for(need, c.max_replicas));
  const uint32_t down_to = clamp(replicas_for(need * (1 + c.downscale_tolerance), c.max_replicas));

  // Changes that do not wait: from zero, to the clamps, and an idle model's drop.
  if (up_to > supply && supply < lower) {
    state.up_since_us.reset();
    const bool from_zero = supply == 0 && busy && c.min_replicas == 0;
    const ScaleReason why = from_zero ? ScaleReason::from_zero : ScaleReason::min_replicas;
    return change(ScaleAction::up, up_to - supply, up_to, need, why);
  }
  if (supply > c.max_replicas || (idle && supply > lower)) {
    state.down_since_us.reset();
    const uint32_t target = idle ? lower : c.max_replicas;
    const uint32_t count = std::min(supply - target, load.ready);
    if (count == 0) return change(ScaleAction::keep, 0, target, need, ScaleReason::delayed);
    return change(ScaleAction::down, count, target, need, idle ? ScaleReason::idle : ScaleReason::max_replicas);
  }

  // Eq. 4.12 corrected, then the delays.
  const bool want_up = up_to > supply;
  const bool want_down = !want_up && down_to < supply && load.pending == 0;
  const bool up_now = held_for(state.up_since_us, want_up, now_us, c.upscale_delay_us);
  const bool down_now = held_for(state.down_since_us, want_down, now_us, c.downscale_delay_us);
  if (up_now) {
    state.up_since_us.reset();
    return change(ScaleAction::up, up_to - supply, up_to, need, ScaleReason::load);
  }
  if (down_now) {
    state.down_since_us.reset();
    const uint32_t count = (supply - down_to + 1) / 2;  // half the surplus, rounded up
    return change(ScaleAction::down, count, supply - count, need, ScaleReason::load);
  }
  if (want_up) return change(ScaleAction::keep, 0, up_to, need, ScaleReason::delayed);
  if (want_down) return change(ScaleAction::keep, 0, down_to, need, ScaleReason::delayed);
  return change(ScaleAction::keep, 0, supply, need, ScaleReason::steady);
}

std::string_view to_string(ScaleAction action) {
  switch (action) {
    case ScaleAction::keep:
      return "keep";
    case ScaleAction::up:
      return "up";
    case ScaleAction::down:
      return "down";
  }
  return "?";
}

std::string_view to_string(ScaleReason reason) {
  switch (reason) {
    case ScaleReason::steady:
      return "steady";
    case ScaleReason::load:
      return "load";
    case ScaleReason::delayed:
      return "delayed";
    case ScaleReason::from_zero:
      return "from_zero";
    case ScaleReason::min_replicas:
      return "min_replicas";
    case ScaleReason::max_replicas:
      return "max_replicas";
    case ScaleReason::idle:
      return "idle";
  }
  return "?";
}

std::string describe(const ScaleDecision& d, const AutoscaleConfig& c, const ModelLoad& load) {
  char head[64], tail[160];
  if (d.action == ScaleAction::keep)
    std::snprintf(head, sizeof head, "keep %u, want %u", load.ready + load.pending, d.desired);
  else
    std::snprintf(head, sizeof head, "%s by %u to %u", d.action == ScaleAction::up ? "up" : "down", d.count, d.desired);
  std::snprintf(tail, sizeof tail, " (%s): %s need %.2f with %u ready, %u pending", to_string(d.reason).data(),
                to_string(c.policy).data(), d.need, load.ready, load.pending);
  std::string line = head;
  return line += tail;
}

}  // namespace ember::placement
