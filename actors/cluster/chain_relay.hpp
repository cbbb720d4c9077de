// ChainRelay: the cluster manager's side of the multicast protocol (actors/transfer_peer_interface.hpp),
// between the hops and the ChainController. It feeds the controller what the hops report (progress,
// a lost upstream, a finished load) and what the manager sees (a node lost, the stall check's
// time), remembers the transfer_peer handle each hop reported, and turns the controller's splices
// into SpliceOrders: a chain_splice for one hop's peer, its upstream resolved to a data-plane
// endpoint (LoadPlanner::source_named). The actor sends the orders; nothing is sent from here.
//
// Plain C++: owned and called by the cluster_manager actor only (not thread-safe). Peer handles
// are data. Time is a parameter (milliseconds of the actor clock). A transfer is forgotten, with
// its peers, once every hop is done or failed. It also keeps whether the actor's stall-check timer
// is armed (one at a time, only while transfers run).
//
// A splice for a hop that has not reported yet has no peer to go to: it is logged and dropped,
// and the hop's first report is answered with it (ChainController::on_progress compares the
// upstream the hop reports with the plan's).
#pragma once

#include <caf/actor.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actors/cluster/chain_controller.hpp"
#include "actors/cluster/load_planner.hpp"
#include "actors/transfer_peer_interface.hpp"
#include "actors/transfer_progress_messages.hpp"
#include "base/status.hpp"

namespace ember {

struct SpliceOrder {
  caf::actor peer;  // the hop's transfer_peer
  chain_splice splice;
  std::string hop;  // its node's name (the receiver of the new upstream's ticket)
};

class ChainRelay {
 public:
  ChainRelay(ChainController& chains, const LoadPlanner& planner) : chains_(chains), planner_(planner) {}

  /// A hop's chain_progress. Receiving: the peer is remembered and a hop that pulls from the wrong
  /// upstream is re-pointed. done and failed are recorded by hop_ended (the load's answer) instead.
  std::vector<SpliceOrder> on_progress(const chain_progress& p, int64_t now_ms);
  /// A hop lost its upstream: its new upstream (the failed one is spliced out of the chain, which
  /// may re-point others: `orders`). Errors as ChainController::upstream_after_failure, and
  /// unavailable when the new upstream left the cluster.
  Result<blob_source> upstream_after_failure(const chain_upstream_request& r, std::vector<SpliceOrder>& orders);
  /// A hop's load answered (ok) or failed, or its node was lost. transfer 0: not a hop, nothing.
  std::vector<SpliceOrder> hop_ended(uint64_t transfer, const std::string& hop, bool ok, int64_t now_ms);
  /// A node left: chains through it go around it; chains it fed continue from the repository.
  std::vector<SpliceOrder> node_lost(const std::string& node);
  /// The periodic check: hops stalled or slow (placement::StallOptions) are spliced out.
  std::vector<SpliceOrder> check_stalls(int64_t now_ms);

  /// Transfers in progress (the actor's stall timer runs while there are any).
  bool active() const { return !chains_.empty(); }
  /// Whether the actor must arm the stall check's timer now (transfers run and it is not armed);
  /// timer_fired() when it fires.
  bool arm_timer() {
    if (timer_armed_ || !active()) return false;
    timer_armed_ = true;
    return true;
  }
  void timer_fired() { timer_armed_ = false; }
  /// Every hop of the chains in flight with how far it got (the console's `transfers`).
  std::vector<hop_progress> transfers() const;
  size_t peers() const { return peers_.size(); }

 private:
  std::vector<SpliceOrder> orders(const std::vector<TransferSplice>& splices) const;
  void drop_finished();

  ChainController& chains_;
  const LoadPlanner& planner_;
  std::map<std::pair<uint64_t, std::string>, caf::actor> peers_;  // (transfer, hop) -> its transfer_peer
  bool timer_armed_ = false;
};

}  // namespace ember
