#include "actors/cluster/distribution_tracker.hpp"

#include <spdlog/spdlog.h>

namespace ember {

uint64_t DistributionTracker::start(distribute_result result, std::map<uint64_t, DistributionHop> pending,
                                    time_point now, Reply reply) {
  const uint64_t id = next_id_++;
  calls_[id] = Call{std::move(result), std::move(pending), now, std::move(reply)};
  return id;
}

std::optional<DistributionTracker::Settled> DistributionTracker::settle(uint64_t id, uint64_t node,
                                                                        const Outcome& outcome, time_point now) {
  auto c = calls_.find(id);
  if (c == calls_.end()) return std::nullopt;
  Call& call = c->second;
  auto p = call.pending.find(node);
  if (p == call.pending.end()) return std::nullopt;
  Settled out{std::move(p->second), call.result.model, call.result.evicted};
  call.pending.erase(p);
  if (!outcome.ok()) {
    call.result.errors.push_back(out.hop.node + ": " + outcome.error().message());
  } else if (*outcome) {
    call.result.nodes.push_back(**outcome);
  }
  finish_if_done(id, now);
  return out;
}

void DistributionTracker::finish_if_done(uint64_t id, time_point now) {
  auto c = calls_.find(id);
  if (c == calls_.end() || !c->second.pending.empty()) return;
  Call call = std::move(c->second);
  calls_.erase(c);
  distribute_result& r = call.result;
  if (!r.evicted) {
    r.seconds = std::chrono::duration<double>(now - call.started).count();
    spdlog::info("manager: distribution of {} ({}) to {} node(s) done in {:.2f} s, {} error(s)", r.model.to_string(),
                 to_string(r.mode), r.nodes.size() + r.errors.size(), r.seconds, r.errors.size());
  }
  if (call.reply) call.reply(std::move(r));
}

std::vector<uint64_t> DistributionTracker::waiting_on(uint64_t node) const {
  std::vector<uint64_t> out;
  for (const auto& [id, c] : calls_)
    if (c.pending.count(node)) out.push_back(id);
  return out;
}

}  // namespace ember
