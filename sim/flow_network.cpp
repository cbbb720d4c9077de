#include "sim/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::sim {

Result<LinkId> FlowNetwork::add_link(std::string name, double bytes_per_s) {
  if (!(bytes_per_s > 0) || std::isinf(bytes_per_s)) {
    return invalid_argument("link '" + name + "': its capacity must be a finite rate above 0 bytes/s");
  }
  links_.push_back(Link{std::move(name), bytes_per_s});
  return static_cast<LinkId>(links_.size() - 1);
}

Status FlowNetwork::advance(uint64_t now_us) {
  if (now_us < now_us_) {
    return invalid_argument("flow network: time " + std::to_string(now_us) + " us is before the last call's " +
                            std::to_string(now_us_) + " us");
  }
  const double dt = static_cast<double>(now_us - now_us_) * 1e-6;
  if (dt > 0) {
    for (Flow& f : flows_) f.remaining = std::max(0.0, f.remaining - f.rate * dt);
  }
  now_us_ = now_us;
  return Status::OK();
}

Result<FlowId> FlowNetwork::start(const std::vector<LinkId>& path, double bytes, uint64_t now_us,
                                  double cap_bytes_per_s) {
  for (LinkId l : path) {
    if (l >= links_.size()) return invalid_argument("flow: link " + std::to_string(l) + " does not exist");
  }
  if (!(bytes >= 0) || std::isinf(bytes)) return invalid_argument("flow: its size must be finite, 0 or more bytes");
  if (!(cap_bytes_per_s >= 0) || std::isinf(cap_bytes_per_s)) {
    return invalid_argument("flow: its cap must be a finite rate, 0 (none) or more");
  }
  if (path.empty() && cap_bytes_per_s == 0) {
    return invalid_argument("flow: neither a link nor a cap bounds its rate");
  }
  EMBER_RETURN_IF_ERROR(advance(now_us));
  const FlowId id = next_id_++;
  flows_.push_back(Flow{id, path, bytes, cap_bytes_per_s});
  reallocate();
  return id;
}

Result<bool> FlowNetwork::cancel(FlowId id, uint64_t now_us) {
  EMBER_RETURN_IF_ERROR(advance(now_us));
  auto it = std::find_if(flows_.begin(), flows_.end(), [&](const Flow& f) { return f.id == id; });
  if (it == flows_.end()) return false;
  flows_.erase(it);
  reallocate();
  return true;
}

Result<std::vector<FlowId>> FlowNetwork::finished(uint64_t now_us) {
  EMBER_RETURN_IF_ERROR(advance(now_us));
  std::vector<FlowId> out;
  for (const Flow& f : flows_) {
    if (done(f)) out.push_back(f.id);
  }
  if (!out.empty()) {
    std::erase_if(flows_, [](const Flow& f) { return done(f); });
    reallocate();
  }
  return out;
}

void FlowNetwork::reallocate() {
  const size_t n = flows_.size();
  std::vector<bool> fixed(n, false);
  std::vector<double> left(links_.size());
  for (size_t l = 0; l < links_.size(); ++l) left[l] = links_[l].capacity;
  std::vector<uint32_t> crossings(links_.size(), 0);  // by unfixed flows, repeats counted
  for (const Flow& f : flows_) {
    for (LinkId l : f.path) ++crossings[l];
  }
  size_t unfixed = n;
  // The level all unfixed flows have reached; each round raises it to the next bottleneck.
  double level = 0;
  while (unfixed > 0) {
    // The lowest level at which a link fills or an unfixed flow reaches its cap.
    double next = std::numeric_limits<double>::infinity();
    size_t first_full = links_.size();  // the link that fills first: full even if rounding says not
    for (size_t l = 0; l < links_.size(); ++l) {
      if (crossings[l] > 0 && level + left[l] / crossings[l] < next) {
        next = level + left[l] / crossings[l];
        first_full = l;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (!fixed[i] && flows_[i].cap > 0 && flows_[i].cap < next) {
        next = flows_[i].cap;
        first_full = links_.size();  // a cap comes first: no link is full at this level
      }
    }
    // Every unfixed flow rises to `next`; links pay for the rise.
    const double rise = next - level;
    for (size_t l = 0; l < links_.size(); ++l) left[l] -= rise * crossings[l];
    level = next;
    // Fix the flows on a full link (relative slack: rounding) and the capped ones reached.
    std::vector<bool> full(links_.size(), false);
    for (size_t l = 0; l < links_.size(); ++l) {
      full[l] = crossings[l] > 0 && (l == first_full || left[l] <= links_[l].capacity * 1e-12);
    }
    for (size_t i = 0; i < n; ++i) {
      if (fixed[i]) continue;
      Flow& f = flows_[i];
      const bool capped = f.cap > 0 && f.cap <= level;
      const bool bottleneck = std::any_of(f.path.begin(), f.path.end(), [&](LinkId l) { return full[l]; });
      if (!capped && !bottleneck) continue;
      fixed[i] = true;
      f.rate = level;
      --unfixed;
      for (LinkId l : f.path) --crossings[l];
    }
  }
}

std::optional<uint64_t> FlowNetwork::next_completion_us() const {
  std::optional<uint64_t> best;
  for (const Flow& f : flows_) {
    uint64_t at = now_us_;
    if (!done(f)) {
      if (f.rate <= 0) continue;  // cannot happen with positive capacities; never ends
      // The first whole microsecond with at most half a microsecond of transfer left (done()).
      // (At least one: a flow not done now never reports now, whatever the rounding.)
      at += static_cast<uint64_t>(std::max(1.0, std::ceil(f.remaining / f.rate * 1e6 - 0.5)));
    }
    if (!best || at < *best) best = at;
  }
  return best;
}

const FlowNetwork::Flow* FlowNetwork::find(FlowId id) const {
  for (const Flow& f : flows_) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

double FlowNetwork::rate(FlowId id) const {
  const Flow* f = find(id);
  return f ? f->rate : 0;
}

double FlowNetwork::remaining(FlowId id) const {
  const Flow* f = find(id);
  return f ? f->remaining : 0;
}

double FlowNetwork::link_rate(LinkId link) const {
  double sum = 0;
  for (const Flow& f : flows_) {
    for (LinkId l : f.path) sum += l == link ? f.rate : 0;
  }
  return sum;
}

}  // namespace ember::sim
