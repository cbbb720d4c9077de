#include "placement/partition_planner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace ember::placement {

namespace {

/// Σ_{y=1..x} (ceil(y / q) − 1) / x: the mean wait, in bottleneck times, of a queue of x spread
/// over q pipelines.
double wait_factor(uint64_t x, uint64_t q) {
  const uint64_t groups = x / q, rest = x % q;
  const double sum = static_cast<double>(q) * static_cast<double>(groups) * (static_cast<double>(groups) - 1) / 2 +
                     static_cast<double>(rest) * static_cast<double>(groups);
  return sum / static_cast<double>(x);
}

uint64_t pipelines(uint32_t devices, uint32_t parts) { return std::max<uint64_t>(1, devices / parts); }

/// A prefix plan: its maxima and sum so far, and where it cut.
struct Partial {
  uint64_t c = 0, b = 0, in = 0;
  std::vector<uint32_t> cuts;
  bool dominated_by(const Partial& o) const { return o.c <= c && o.b <= b && o.in <= in; }
};

/// Adds `p` to `set` unless a member dominates it; drops the members it dominates.
void keep_pareto(std::vector<Partial>& set, Partial p) {
  for (const auto& q : set)
    if (p.dominated_by(q)) return;
  std::erase_if(set, [&](const Partial& q) { return q.dominated_by(p); });
  set.push_back(std::move(p));
}

Status check(const std::vector<LayerProfile>& layers, uint32_t parts, uint64_t x, uint32_t devices) {
  if (layers.empty()) return invalid_argument("partition planning: the model has no layers");
  if (parts < 1 || parts > layers.size())
    return invalid_argument("partition planning: " + std::to_string(parts) + " parts for " +
                            std::to_string(layers.size()) + " layers");
  if (x == 0 || devices == 0) return invalid_argument("partition planning: the queue and the devices must be >= 1");
  return Status::OK();
}

}  // namespace

uint64_t cut_us(const std::vector<LayerProfile>& layers, const PartitionCosts& costs, uint32_t layer) {
  return costs.transfer_fixed_us + static_cast<uint64_t>(std::llround(static_cast<double>(layers.at(layer).out_bytes) *
                                                                      costs.transfer_us_per_byte));
}

PartitionPlan evaluate(const std::vector<LayerProfile>& layers, const PartitionCosts& costs,
                       const std::vector<uint32_t>& cuts, uint64_t x, uint32_t devices) {
  PartitionPlan plan;
  plan.parts = static_cast<uint32_t>(cuts.size() + 1);
  plan.cuts = cuts;
  uint64_t exec_total = 0, part_load = 0, part_exec = 0;
  size_t next_cut = 0;
  for (uint32_t i = 0; i < layers.size(); ++i) {
    part_load += layers[i].load_us;
    part_exec += layers[i].exec_us;
    exec_total += layers[i].exec_us;
    const bool cut_here = next_cut < cuts.size() && cuts[next_cut] == i;
    if (cut_here || i + 1 == layers.size()) {
      plan.cold_start_us = std::max(plan.cold_start_us, part_load);
      plan.bottleneck_us = std::max(plan.bottleneck_us, part_exec);
      part_load = part_exec = 0;
    }
    if (cut_here) {
      const uint64_t d = cut_us(layers, costs, i);
      plan.bottleneck_us = std::max(plan.bottleneck_us, d);
      plan.network_us += d;
      ++next_cut;
    }
  }
  plan.inference_us = exec_total + plan.network_us;
  plan.mean_total_us = static_cast<double>(plan.cold_start_us) + static_cast<double>(plan.inference_us) +
                       static_cast<double>(plan.bottleneck_us) * wait_factor(x, pipelines(devices, plan.parts));
  return plan;
}

Result<PartitionPlan> best_plan(const std::vector<LayerProfile>& layers, const PartitionCosts& costs, uint32_t parts,
                                uint64_t x, uint32_t devices) {
  EMBER_RETURN_IF_ERROR(check(layers, parts, x, devices));
  const auto n = static_cast<uint32_t>(layers.size());
  const double w = wait_factor(x, pipelines(devices, parts));
  // frontier[j][k]: Pareto set of plans covering layers [0, j) with k parts.
  std::vector<std::vector<std::vector<Partial>>> frontier(n + 1, std::vector<std::vector<Partial>>(parts + 1));
  frontier[0][0].push_back({});
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t k = 0; k < parts; ++k) {
      if (frontier[i][k].empty()) continue;
      // The part [i, j) closes the prefix; the last part must end at n.
      uint64_t load = 0, exec = 0, bytes = 0;
      for (uint32_t j = i + 1; j <= n; ++j) {
        load += layers[j - 1].load_us;
        exec += layers[j - 1].exec_us;
        bytes += layers[j - 1].bytes;
        if (costs.stage_memory_bytes && bytes > costs.stage_memory_bytes) break;
        if (k + 1 == parts && j != n) continue;
        if (n - j < parts - (k + 1)) break;  // too few layers left for the parts still to come
        const uint64_t d = i > 0 ? cut_us(layers, costs, i - 1) : 0;
        for (const Partial& p : frontier[i][k]) {
          Partial next{std::max(p.c, load), std::max({p.b, exec, d}), p.in + d, p.cuts};
          if (i > 0) next.cuts.push_back(i - 1);
          keep_pareto(frontier[j][k + 1], std::move(next));
        }
      }
    }
  }
  const auto& done = frontier[n][parts];
  if (done.empty()) {
    return unavailable("partition planning: no " + std::to_string(parts) + "-part plan fits " +
                       std::to_string(costs.stage_memory_bytes) + " bytes per stage");
  }
  auto score = [w](const Partial& p) {
    return static_cast<double>(p.c) + static_cast<double>(p.in) + w * static_cast<double>(p.b);
  };
  const Partial& best = *std::min_element(done.begin(), done.end(), [&](const auto& a, const auto& b) {
    return score(a) != score(b) ? score(a) < score(b) : a.cuts < b.cuts;  // ties: the earliest cuts
  });
  return evaluate(layers, costs, best.cuts, x, devices);
}

Result<PartitionPlan> choose_plan(const std::vector<LayerProfile>& layers, const PartitionCosts& costs,
                                  uint32_t max_parts, uint64_t x) {
  EMBER_RETURN_IF_ERROR(check(layers, 1, x, std::max<uint32_t>(max_parts, 1)));
  if (max_parts == 0) return invalid_argument("partition planning: at most 0 parts");
  std::optional<PartitionPlan> best;
  Error last = unavailable("partition planning: no plan fits");
  for (uint32_t p = 1; p <= std::min<uint32_t>(max_parts, static_cast<uint32_t>(layers.size())); ++p) {
    auto plan = best_plan(layers, costs, p, x, max_parts);
    if (!plan.ok()) {
      last = plan.error();
      continue;
    }
    if (!best || plan->mean_total_us < best->mean_total_us) best = std::move(*plan);
  }
  if (!best) return last;
  return *best;
}

Result<PlanTable> PlanTable::build(const std::vector<LayerProfile>& layers, const PartitionCosts& costs,
                                   uint32_t max_parts, uint64_t max_x) {
  if (max_x == 0) return invalid_argument("partition planning: the table needs max_x >= 1");
  PlanTable table;
  uint64_t from = 1;
  EMBER_ASSIGN_OR_RETURN(auto current, choose_plan(layers, costs, max_parts, from));
  while (true) {
    // Exponential search for an x whose plan differs, then bisection for the first such x.
    uint64_t same = from, step = 1, probe = from;
    std::optional<PartitionPlan> changed;
    while (probe < max_x) {
      probe = std::min(max_x, from + step);
      EMBER_ASSIGN_OR_RETURN(auto plan, choose_plan(layers, costs, max_parts, probe));
      if (plan.cuts != current.cuts) {
        changed = std::move(plan);
        break;
      }
      same = probe;
      step *= 2;
    }
    table.ranges_.push_back({from, current});
    if (!changed) break;
    uint64_t lo = same, hi = probe;  // plan(lo) == current, plan(hi) != current
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      EMBER_ASSIGN_OR_RETURN(auto plan, choose_plan(layers, costs, max_parts, mid));
      if (plan.cuts == current.cuts) {
        lo = mid;
      } else {
        hi = mid;
        changed = std::move(plan);
      }
    }
    from = hi;
    current = std::move(*changed);
  }
  return table;
}

const PartitionPlan& PlanTable::lookup(double x) const {
  const uint64_t at = x < 1 ? 1 : static_cast<uint64_t>(x);
  auto it =
      std::upper_bound(ranges_.begin(), ranges_.end(), at, [](uint64_t v, const Range& r) { return v < r.from_x; });
  return std::prev(it)->plan;
}

}  // namespace ember::placement
