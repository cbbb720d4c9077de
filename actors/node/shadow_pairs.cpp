#include "actors/node/shadow_pairs.hpp"

#include <algorithm>
#include <cmath>

namespace ember {

ShadowPairs::ShadowPairs(ShadowScalingOptions options, placement::NodeTopology topology)
    : options_(options), topology_(std::move(topology)) {}

placement::ShadowProfile ShadowPairs::priced(const placement::ShadowProfile& p, uint32_t a, uint32_t b) const {
  placement::ShadowProfile out = p;
  const uint32_t n = topology_.device_count();
  if (a >= n || b >= n) return out;
  // GB/s: 1e9 bytes a second, 1e3 a microsecond.
  const double link = topology_.link_gbps(a, b);
  const double via_host = std::min(topology_.pcie_gbps(a), topology_.pcie_gbps(b)) / 2;
  const double gbps = link > 0 ? link : via_host;
  if (gbps > 0) out.transfer_us_per_byte = 1.0 / (gbps * 1e3);
  if (topology_.pcie_gbps(b) > 0) out.load_us_per_byte = 1.0 / (topology_.pcie_gbps(b) * 1e3);
  return out;
}

void ShadowPairs::publish(const model_key& name, const Model& m, SwapController& swap) const {
  std::vector<double> batch_us;
  if (options_.adaptive_batching && m.info.max_batch > 1) {
    // The pair's latency when every Body has a ready Shadow, else the Body's alone.
    const auto holders = swap.holders(name);
    std::vector<const Row*> pairs;
    for (uint32_t h : holders) {
      for (const auto& [id, r] : rows_) {
        if (r.model == name && r.body == h && r.ready) pairs.push_back(&r);
      }
    }
    const bool paired = !holders.empty() && pairs.size() == holders.size();
    for (uint32_t b = 1; b <= m.info.max_batch; ++b) {
      double us = placement::body_us(m.info.profile, b);
      if (paired) {
        double worst = 0;
        for (const Row* r : pairs) {
          const auto split = placement::split_batch(*r->priced, r->choice.first_block, r->choice.last_block, b);
          worst = std::max(worst, b < 2 ? us : split.latency_us);
        }
        us = std::min(us, worst);
      }
      batch_us.push_back(us + m.info.overhead_us);
    }
  }
  swap.set_scaling(name, options_.model_level ? m.bodies : 0, std::move(batch_us));
}

void ShadowPairs::add_model(const model_key& name, ModelInfo info, SwapController& swap) {
  Model m;
  m.body_rps = placement::body_capacity(info.profile, info.slo_us, info.max_batch).rows_per_s;
  for (const auto& b : info.profile.blocks) m.model_bytes += b.weight_bytes;
  m.info = std::move(info);
  if (auto old = models_.find(name); old != models_.end()) {
    m.bodies = old->second.bodies;
    m.arrivals = std::move(old->second.arrivals);
  }
  publish(name, models_.insert_or_assign(name, std::move(m)).first->second, swap);
}

std::vector<ShadowPairs::Row> ShadowPairs::remove_model(const model_key& name, SwapController& swap) {
  std::vector<Row> out;
  for (auto it = rows_.begin(); it != rows_.end();) {
    if (it->second.model != name) {
      ++it;
      continue;
    }
    swap.set_lent(it->second.device, false);
    out.push_back(std::move(it->second));
    it = rows_.erase(it);
  }
  models_.erase(name);
  return out;
}

size_t ShadowPairs::count_since(const Model& m, int64_t since) const {
  return static_cast<size_t>(m.arrivals.end() - std::lower_bound(m.arrivals.begin(), m.arrivals.end(), since));
}

double ShadowPairs::rate(const model_key& model, int64_t now_us) const {
  auto it = models_.find(model);
  if (it == models_.end()) return 0;
  const auto& arrivals = it->second.arrivals;
  const auto window = static_cast<int64_t>(options_.burst_window_us);
  const size_t in_window = count_since(it->second, now_us - window);
  if (in_window >= kRateArrivals) return static_cast<double>(in_window) * 1e6 / static_cast<double>(window);
  // Too few in the window to tell a burst from chance: the gaps between the last kRateArrivals over
  // their span (at least the window). Fewer arrivals than that tell no rate yet.
  const size_t k = kRateArrivals;
  if (arrivals.size() < k) return 0;
  const int64_t span = std::max<int64_t>(now_us - arrivals[arrivals.size() - k], window);
  return static_cast<double>(k - 1) * 1e6 / static_cast<double>(span);
}

double ShadowPairs::capacity(const model_key& name, const Model& m, const SwapController& swap) const {
  double cap = m.body_rps * static_cast<double>(swap.holders(name).size());
  for (const auto& [id, r] : rows_) {
    if (r.model == name) cap += r.choice.gain_rows_per_s;
  }
  return cap;
}

uint32_t ShadowPairs::bodies(const model_key& model) const {
  auto it = models_.find(model);
  return it == models_.end() || !options_.model_level ? 0 : it->second.bodies;
}

const ShadowPairs::Model::Pairing& ShadowPairs::pairing(Model& m, uint32_t body, uint32_t device) {
  auto [it, fresh] = m.pairings.try_emplace({body, device});
  if (!fresh) return it->second;
  auto priced_profile = std::make_shared<const placement::ShadowProfile>(priced(m.info.profile, body, device));
  // The fewest bytes that add kShadowGain of a Body's rate (Algorithm 2 takes the first prefix of
  // blocks that helps at all): not what the burst lacks, which is still rising when the rate
  // first crosses the capacity, and often more than any Shadow adds; the rest is model-level
  // scaling's. When that takes more than kShadowMaxShare of the model's bytes, the greatest
  // benefit, if it holds no more; a larger span is no Shadow.
  const auto too_big = [&](const placement::ShadowChoice& c) {
    return static_cast<double>(c.weight_bytes) > kShadowMaxShare * static_cast<double>(m.model_bytes);
  };
  auto choice = placement::choose_shadow(*priced_profile, m.info.slo_us, m.info.max_batch,
                                         placement::BlockOrder::exhaustive, kShadowGain * m.body_rps);
  if (choice.ok() && *choice && too_big(**choice)) {
    choice = placement::choose_shadow(*priced_profile, m.info.slo_us, m.info.max_batch);
  }
  it->second.priced = std::move(priced_profile);
  if (choice.ok() && *choice && !too_big(**choice)) it->second.choice = **choice;
  return it->second;
}

std::vector<ShadowPairs::Row> ShadowPairs::arrival(const model_key& name, int64_t now_us, SwapController& swap) {
  std::vector<Row> out;
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  Model& m = it->second;
  m.arrivals.push_back(now_us);
  const auto keep = static_cast<int64_t>(std::max(options_.burst_window_us, options_.period_us));
  while (m.arrivals.size() > kRateArrivals && m.arrivals.front() < now_us - keep) m.arrivals.pop_front();
  if (!options_.shadows || m.body_rps <= 0) return out;
  const double now_rps = rate(name, now_us);
  double cap = capacity(name, m, swap);
  if (now_rps <= options_.gamma * cap) return out;
  // A Body without a Shadow, and an idle device for one.
  const auto holders = swap.holders(name);
  for (uint32_t body : holders) {
    if (now_rps <= options_.gamma * cap) break;
    const bool paired = std::any_of(rows_.begin(), rows_.end(),
                                    [&](const auto& r) { return r.second.model == name && r.second.body == body; });
    if (paired) continue;
    std::optional<uint32_t> device;
    for (uint32_t d = 0; d < swap.device_count(); ++d) {
      if (!swap.idle(d) || std::find(holders.begin(), holders.end(), d) != holders.end()) continue;
      if (!device || swap.free_bytes(d) > swap.free_bytes(*device)) device = d;
    }
    if (!device) break;
    const Model::Pairing& pairing = this->pairing(m, body, *device);
    if (!pairing.choice || pairing.choice->weight_bytes > swap.free_bytes(*device)) continue;
    Row r;
    r.id = next_id_++;
    r.model = name;
    r.body = body;
    r.device = *device;
    r.choice = *pairing.choice;
    r.priced = pairing.priced;
    r.asked_us = now_us;
    swap.set_lent(*device, true);
    cap += r.choice.gain_rows_per_s;
    out.push_back(r);
    rows_.emplace(r.id, std::move(r));
  }
  return out;
}

void ShadowPairs::started(uint64_t id, uint64_t bytes, uint64_t start_us, SwapController& swap) {
  auto it = rows_.find(id);
  if (it == rows_.end()) return;
  it->second.ready = true;
  it->second.bytes = bytes;
  it->second.start_us = start_us;
  if (auto m = models_.find(it->second.model); m != models_.end()) publish(m->first, m->second, swap);
}

std::optional<ShadowPairs::Row> ShadowPairs::gone(uint64_t id, SwapController& swap) {
  auto it = rows_.find(id);
  if (it == rows_.end()) return std::nullopt;
  Row r = std::move(it->second);
  rows_.erase(it);
  swap.set_lent(r.device, false);
  if (auto m = models_.find(r.model); m != models_.end()) publish(m->first, m->second, swap);
  return r;
}

ShadowPairs::PeriodResult ShadowPairs::period(int64_t now_us, SwapController& swap) {
  PeriodResult out;
  if (now_us - last_period_us_ < static_cast<int64_t>(options_.period_us)) return out;
  const double period_s = static_cast<double>(options_.period_us) / 1e6;
  last_period_us_ = now_us;
  for (auto& [name, m] : models_) {
    const double rps =
        static_cast<double>(count_since(m, now_us - static_cast<int64_t>(options_.period_us))) / period_s;
    if (options_.model_level && m.body_rps > 0) {
      // Algorithm 1 against the Bodies' capacity; the prediction is the period's rate.
      const uint32_t most = std::max<uint32_t>(swap.device_count(), 1);
      const double cap = m.bodies * m.body_rps;
      switch (placement::model_level(rps, cap, options_.alpha, options_.beta)) {
        case placement::BodyScaling::out:
          m.bodies = std::min(most, static_cast<uint32_t>(std::ceil(rps / (options_.alpha * m.body_rps))));
          break;
        case placement::BodyScaling::in:
          m.bodies = std::max<uint32_t>(1, m.bodies - 1);
          break;
        case placement::BodyScaling::hold:
          break;
      }
      // Copies beyond the Bodies go (any but a Body with a Shadow, the last ones first).
      const auto holders = swap.holders(name);
      size_t extra = holders.size() > m.bodies ? holders.size() - m.bodies : 0;
      for (auto h = holders.rbegin(); h != holders.rend() && extra > 0; ++h) {
        const bool paired = std::any_of(rows_.begin(), rows_.end(),
                                        [&](const auto& r) { return r.second.model == name && r.second.body == *h; });
        if (paired || !swap.drop(name, *h)) continue;
        out.drop.emplace_back(name, *h);
        --extra;
      }
    }
    // Release: Shadows whose Body is gone, then those the rate does not need, smallest benefit first.
    const auto holders = swap.holders(name);
    std::vector<uint64_t> ids;
    std::vector<double> benefits;
    for (const auto& [id, r] : rows_) {
      if (r.model != name || !r.ready) continue;
      // A Shadow serves at least one period: a rate that wavers about the capacity starts and
      // releases none in a loop.
      if (now_us - r.asked_us < static_cast<int64_t>(options_.period_us)) continue;
      if (std::find(holders.begin(), holders.end(), r.body) == holders.end()) {
        out.release.push_back(r);
        continue;
      }
      ids.push_back(id);
      benefits.push_back(r.choice.benefit);
    }
    for (const auto& r : out.release) rows_.erase(r.id);
    double cap = capacity(name, m, swap);
    for (size_t k : placement::release_order(benefits)) {
      const Row& r = rows_.at(ids[k]);
      if (placement::needs_shadows(rps, cap - r.choice.gain_rows_per_s, options_.gamma)) break;
      cap -= r.choice.gain_rows_per_s;
      out.release.push_back(r);
      rows_.erase(ids[k]);
    }
  }
  for (const auto& r : out.release) swap.set_lent(r.device, false);
  for (auto& [name, m] : models_) publish(name, m, swap);
  return out;
}

std::optional<std::pair<uint64_t, double>> ShadowPairs::pair(const model_key& model, uint32_t body,
                                                             uint32_t rows) const {
  if (rows < 2) return std::nullopt;
  auto m = models_.find(model);
  if (m == models_.end()) return std::nullopt;
  for (const auto& [id, r] : rows_) {
    if (r.model != model || r.body != body || !r.ready) continue;
    const auto split = placement::split_batch(*r.priced, r.choice.first_block, r.choice.last_block, rows);
    if (split.shadow_rows == 0) return std::nullopt;
    return std::make_pair(id, static_cast<double>(split.shadow_rows) / rows);
  }
  return std::nullopt;
}

}  // namespace ember
