#include "actors/cluster/chain_controller.hpp"

namespace ember {

uint64_t ChainController::start(const std::string& model, uint64_t blob_bytes, std::vector<placement::Chain> chains,
                                int64_t now_ms) {
  const uint64_t id = next_id_++;
  Transfer t;
  t.model = model;
  t.blob_bytes = blob_bytes;
  for (auto& c : chains) t.plans.emplace_back(std::move(c), blob_bytes, now_ms);
  transfers_.emplace(id, std::move(t));
  return id;
}

placement::ChainPlan* ChainController::plan_of(Transfer& t, const std::string& hop) {
  for (auto& p : t.plans)
    for (const auto& h : p.chain().hops)
      if (h == hop) return &p;
  return nullptr;
}

void ChainController::add(std::vector<TransferSplice>& out, uint64_t id, const std::vector<placement::Splice>& splices) {
  for (const auto& s : splices) out.push_back({id, s.hop, s.new_upstream});
}

std::vector<TransferSplice> ChainController::on_progress(uint64_t id, const std::string& hop,
                                                         const std::string& upstream, uint64_t offset,
                                                         int64_t now_ms) {
  std::vector<TransferSplice> out;
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return out;
  auto* plan = plan_of(it->second, hop);
  if (!plan) return out;
  plan->on_progress(hop, offset, now_ms);
  auto want = plan->upstream_of(hop);
  if (want.ok() && *want != upstream) out.push_back({id, hop, *want});
  return out;
}

std::vector<TransferSplice> ChainController::on_done(uint64_t id, const std::string& hop, int64_t now_ms) {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return {};
  if (auto* plan = plan_of(it->second, hop)) (void)plan->on_done(hop, now_ms);  // unknown hop: nothing to record
  return {};
}

std::vector<TransferSplice> ChainController::on_failed(uint64_t id, const std::string& hop) {
  std::vector<TransferSplice> out;
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return out;
  if (auto* plan = plan_of(it->second, hop)) add(out, id, plan->on_failed(hop));
  return out;
}

Result<std::string> ChainController::upstream_after_failure(uint64_t id, const std::string& hop,
                                                            const std::string& failed,
                                                            std::vector<TransferSplice>& splices) {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return unavailable("transfer " + std::to_string(id) + " is over or unknown");
  auto* plan = plan_of(it->second, hop);
  if (!plan) return not_found("node " + hop + " is not a hop of transfer " + std::to_string(id));
  // The failed upstream is a hop of this chain that is still receiving: splice it out (it keeps
  // pulling as a leaf if it is alive; nobody waits on it any more).
  if (failed != plan->source() && plan_of(it->second, failed) == plan &&
      plan->state(failed) == placement::HopState::receiving) {
    add(splices, id, plan->splice_out(failed));
  }
  return plan->upstream_of(hop);
}

std::vector<TransferSplice> ChainController::node_lost(const std::string& node, const std::string& fallback_source) {
  std::vector<TransferSplice> out;
  for (auto& [id, t] : transfers_) {
    for (auto& plan : t.plans) {
      if (plan.source() == node) {
        auto splices = plan.replace_source(fallback_source);
        if (splices.ok()) add(out, id, *splices);
      } else {
        for (const auto& h : plan.chain().hops)
          if (h == node) add(out, id, plan.on_failed(node));
      }
    }
  }
  return out;
}

std::vector<TransferSplice> ChainController::check_stalls(int64_t now_ms) {
  std::vector<TransferSplice> out;
  for (auto& [id, t] : transfers_)
    for (auto& plan : t.plans) add(out, id, plan.check_stalls(now_ms, stall_));
  return out;
}

std::string ChainController::model_of(uint64_t id) const {
  auto it = transfers_.find(id);
  return it == transfers_.end() ? std::string() : it->second.model;
}

bool ChainController::finished(uint64_t id) const {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return true;
  for (const auto& p : it->second.plans)
    if (!p.finished()) return false;
  return true;
}

std::vector<uint64_t> ChainController::finished_transfers() const {
  std::vector<uint64_t> out;
  for (const auto& [id, t] : transfers_)
    if (finished(id)) out.push_back(id);
  return out;
}

void ChainController::erase(uint64_t id) { transfers_.erase(id); }

std::vector<HopProgress> ChainController::snapshot() const {
  std::vector<HopProgress> out;
  for (const auto& [id, t] : transfers_) {
    for (const auto& plan : t.plans) {
      for (const auto& h : plan.chain().hops) {
        HopProgress p;
        p.transfer_id = id;
        p.model = t.model;
        p.hop = h;
        auto up = plan.upstream_of(h);
        p.upstream = up.ok() ? *up : "";
        p.offset = plan.offset(h);
        p.blob_bytes = t.blob_bytes;
        p.state = std::string(placement::to_string(plan.state(h)));
        out.push_back(std::move(p));
      }
    }
  }
  return out;
}

}  // namespace ember
