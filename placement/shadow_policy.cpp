#include "placement/shadow_policy.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ember::placement {

namespace {

/// One block's time at `batch` rows, interpolated in the measured batches.
double block_us(const ShadowProfile& p, const ShadowBlock& b, double batch) {
  const auto& xs = p.batches;
  const auto& ys = b.exec_us;
  if (xs.size() == 1) return ys[0] * batch / xs[0];
  if (batch <= xs.front()) return ys.front();
  size_t hi = 1;
  while (hi + 1 < xs.size() && xs[hi] < batch) ++hi;
  const double x0 = xs[hi - 1], x1 = xs[hi];
  return std::max(0.0, ys[hi - 1] + (ys[hi] - ys[hi - 1]) * (batch - x0) / (x1 - x0));
}

double transfer_us(const ShadowProfile& p, uint64_t bytes) {
  return p.transfer_fixed_us + static_cast<double>(bytes) * p.transfer_us_per_byte;
}

Status check(const ShadowProfile& p) {
  if (p.batches.empty() || !std::is_sorted(p.batches.begin(), p.batches.end()) || p.batches.front() == 0 ||
      std::adjacent_find(p.batches.begin(), p.batches.end()) != p.batches.end()) {
    return invalid_argument("shadow profile: batches must be ascending, distinct and positive");
  }
  if (p.blocks.empty()) return invalid_argument("shadow profile: no blocks");
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    const auto& b = p.blocks[i];
    if (b.exec_us.size() != p.batches.size()) {
      return invalid_argument("shadow profile: block " + std::to_string(i) + " has " +
                              std::to_string(b.exec_us.size()) + " times for " + std::to_string(p.batches.size()) +
                              " batches");
    }
    if (std::any_of(b.exec_us.begin(), b.exec_us.end(), [](double t) { return !(t >= 0) || !std::isfinite(t); })) {
      return invalid_argument("shadow profile: block " + std::to_string(i) + " has a negative or unknown time");
    }
  }
  return Status::OK();
}

}  // namespace

double blocks_us(const ShadowProfile& p, size_t first_block, size_t last_block, double batch) {
  double t = 0;
  for (size_t i = first_block; i < last_block && i < p.blocks.size(); ++i) t += block_us(p, p.blocks[i], batch);
  return t;
}

double body_us(const ShadowProfile& p, uint32_t batch) { return blocks_us(p, 0, p.blocks.size(), batch); }

Capacity body_capacity(const ShadowProfile& p, double slo_us, uint32_t max_batch) {
  Capacity best;
  for (uint32_t b = 1; b <= max_batch; ++b) {
    const double t = body_us(p, b);
    if (t > slo_us || t <= 0) continue;
    const double rate = b * 1e6 / t;
    if (rate > best.rows_per_s) best = {rate, b};
  }
  return best;
}

Split split_batch(const ShadowProfile& p, size_t first_block, size_t last_block, uint32_t batch) {
  Split s;
  const double outside = body_us(p, batch) - blocks_us(p, first_block, last_block, batch);
  if (batch < 2 || first_block >= last_block || last_block > p.blocks.size()) {
    s.body_rows = batch;
    s.latency_us = body_us(p, batch);
    return s;
  }
  const uint64_t in_row = p.blocks[first_block].in_bytes, out_row = p.blocks[last_block - 1].out_bytes;
  double best_gap = -1;
  for (uint32_t mine = batch - 1; mine >= 1; --mine) {  // more rows on the Body first: it wins ties
    const uint32_t theirs = batch - mine;
    const double here = blocks_us(p, first_block, last_block, mine);
    const double there = blocks_us(p, first_block, last_block, theirs) + transfer_us(p, in_row * theirs) +
                         transfer_us(p, out_row * theirs);
    const double gap = std::abs(here - there);
    if (best_gap < 0 || gap < best_gap) {
      best_gap = gap;
      s.body_rows = mine;
      s.shadow_rows = theirs;
      s.body_part_us = here;
      s.shadow_part_us = there;
    }
  }
  s.latency_us = outside + std::max(s.body_part_us, s.shadow_part_us);
  return s;
}

Result<std::optional<ShadowChoice>> choose_shadow(const ShadowProfile& p, double slo_us, uint32_t max_batch,
                                                  BlockOrder order, double needed_rows_per_s) {
  EMBER_RETURN_IF_ERROR(check(p));
  if (!(slo_us > 0) || max_batch == 0) return invalid_argument("shadow policy: the SLO and max batch must be positive");
  const size_t n = p.blocks.size();
  uint64_t model_bytes = 0;
  for (const auto& b : p.blocks) model_bytes += b.weight_bytes;
  // Rank: the metric per weight byte (blocks without weights by their metric alone).
  std::vector<double> score(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& b = p.blocks[i];
    const double metric =
        order == BlockOrder::macs_per_byte ? static_cast<double>(b.macs) : block_us(p, b, 4) - block_us(p, b, 2);
    score[i] = metric / static_cast<double>(b.weight_bytes + 1);
  }
  const Capacity alone = body_capacity(p, slo_us, max_batch);
  std::optional<ShadowChoice> best, smallest;  // the greatest benefit; the fewest bytes meeting the need
  auto consider = [&](size_t first, size_t last) {
    if (first == 0 && last == n) return;  // every layer: a second Body, model-level scaling's
    uint64_t bytes = 0;
    for (size_t i = first; i < last; ++i) bytes += p.blocks[i].weight_bytes;
    for (uint32_t b = 2; b <= max_batch; ++b) {
      const Split s = split_batch(p, first, last, b);
      if (s.latency_us > slo_us || s.latency_us <= 0) continue;
      const double rate = b * 1e6 / s.latency_us;
      const double gain = rate - alone.rows_per_s;
      if (gain <= 0) continue;
      const double benefit =
          gain / (1 + (model_bytes ? static_cast<double>(bytes) / static_cast<double>(model_bytes) : 0));
      const bool meets = needed_rows_per_s > 0 && gain >= needed_rows_per_s;
      const bool smaller = meets && (!smallest || bytes < smallest->weight_bytes ||
                                     (bytes == smallest->weight_bytes && gain > smallest->gain_rows_per_s));
      if (!smaller && best && benefit <= best->benefit) continue;
      ShadowChoice c;
      c.first_block = first;
      c.last_block = last;
      c.first_layer = p.blocks[first].first_layer;
      c.last_layer = p.blocks[last - 1].last_layer;
      c.batch = b;
      c.split = s;
      c.weight_bytes = bytes;
      c.load_us = static_cast<double>(bytes) * p.load_us_per_byte;
      c.rows_per_s = rate;
      c.gain_rows_per_s = gain;
      c.benefit = benefit;
      if (smaller) smallest = c;
      if (!best || benefit > best->benefit) best = c;
    }
  };
  if (order == BlockOrder::exhaustive) {
    for (size_t first = 0; first < n; ++first) {
      for (size_t last = first + 1; last <= n; ++last) consider(first, last);
    }
    return smallest ? smallest : best;
  }
  // Grow a span from each block, towards the better-ranked neighbour, one block at a time.
  for (size_t seed = 0; seed < n; ++seed) {
    size_t first = seed, last = seed + 1;
    consider(first, last);
    while (first > 0 || last < n) {
      const bool left = first > 0 && (last == n || score[first - 1] >= score[last]);
      if (left) {
        --first;
      } else {
        ++last;
      }
      consider(first, last);
    }
  }
  return smallest ? smallest : best;
}

BodyScaling model_level(double predicted_rps, double capacity_rps, double alpha, double beta) {
  if (predicted_rps > alpha * capacity_rps) return BodyScaling::out;
  if (predicted_rps < beta * capacity_rps) return BodyScaling::in;
  return BodyScaling::hold;
}

bool needs_shadows(double burst_rps, double capacity_rps, double gamma) { return burst_rps > gamma * capacity_rps; }

std::vector<size_t> release_order(const std::vector<double>& benefits) {
  std::vector<size_t> order(benefits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return benefits[a] < benefits[b]; });
  return order;
}

}  // namespace ember::placement
