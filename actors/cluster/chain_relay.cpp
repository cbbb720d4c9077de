#include "actors/cluster/chain_relay.hpp"
#include "actors/transfer_progress_messages.hpp"

#include <spdlog/spdlog.h>

namespace ember {

std::vector<SpliceOrder> ChainRelay::orders(const std::vector<TransferSplice>& splices) const {
  std::vector<SpliceOrder> out;
  for (const auto& sp : splices) {
    auto peer = peers_.find({sp.transfer_id, sp.hop});
    auto upstream = planner_.source_named(sp.upstream);
    spdlog::info("manager: transfer {}: splice: {} now pulls from {}{}", sp.transfer_id, sp.hop, sp.upstream,
                 peer == peers_.end() ? " (when it reports)" : "");
    if (peer != peers_.end() && upstream)
      out.push_back({peer->second, chain_splice{sp.transfer_id, *upstream}, sp.hop});
  }
  return out;
}

void ChainRelay::drop_finished() {
  for (uint64_t t : chains_.finished_transfers()) {
    chains_.erase(t);
    for (auto it = peers_.begin(); it != peers_.end();) it = it->first.first == t ? peers_.erase(it) : std::next(it);
  }
}

std::vector<SpliceOrder> ChainRelay::on_progress(const chain_progress& p, int64_t now_ms) {
  if (p.state == placement::HopState::failed) {
    spdlog::warn("manager: transfer {}: hop {} failed at offset {}: {}", p.transfer_id, p.node, p.offset, p.error);
  }
  if (p.state != placement::HopState::receiving) return {};
  if (p.peer) peers_[{p.transfer_id, p.node}] = p.peer;
  return orders(chains_.on_progress(p.transfer_id, p.node, p.upstream, p.offset, now_ms));
}

Result<blob_source> ChainRelay::upstream_after_failure(const chain_upstream_request& r, std::vector<SpliceOrder>& out) {
  std::vector<TransferSplice> splices;
  auto upstream = chains_.upstream_after_failure(r.transfer_id, r.node, r.failed_upstream, splices);
  out = orders(splices);
  if (!upstream.ok()) return upstream.error();
  auto src = planner_.source_named(*upstream);
  if (!src) return unavailable("upstream " + *upstream + " left the cluster");
  spdlog::info("manager: transfer {}: {} lost {} at offset {} ({}); pulls from {} now", r.transfer_id, r.node,
               r.failed_upstream, r.offset, r.reason, *upstream);
  return *src;
}

std::vector<SpliceOrder> ChainRelay::hop_ended(uint64_t transfer, const std::string& hop, bool ok, int64_t now_ms) {
  if (transfer == 0) return {};
  std::vector<SpliceOrder> out;
  if (ok) {
    chains_.on_done(transfer, hop, now_ms);
  } else {
    out = orders(chains_.on_failed(transfer, hop));
  }
  peers_.erase({transfer, hop});
  drop_finished();
  return out;
}

std::vector<SpliceOrder> ChainRelay::node_lost(const std::string& node) {
  auto out = orders(chains_.node_lost(node, kRepositoryName));
  drop_finished();
  return out;
}

std::vector<SpliceOrder> ChainRelay::check_stalls(int64_t now_ms) { return orders(chains_.check_stalls(now_ms)); }

std::vector<hop_progress> ChainRelay::transfers() const {
  std::vector<hop_progress> out;
  for (const HopProgress& h : chains_.snapshot()) {
    out.push_back({h.transfer_id, h.model, h.hop, h.upstream, h.offset, h.blob_bytes, h.state});
  }
  return out;
}

}  // namespace ember
