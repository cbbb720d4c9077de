// ChainController: the cluster manager's bookkeeping of multicast transfers in progress (Flashpoint's
// "TCP-chain master controller"). For each transfer it keeps one placement::ChainPlan per chain and
// turns what the hops report (progress, a lost upstream, a finished hop) and what the manager sees
// (a node lost, time passing) into splices: "hop X, pull from Y now". The ChainRelay resolves names
// to data-plane endpoints and hop handles, and the manager sends the splices; this class sends
// nothing.
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only (not thread-safe). Time is
// a parameter (milliseconds of any monotonic clock).
//
// Transfer lifecycle:  started ──every hop done or failed──▶ finished (erase() drops it)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "placement/chain_builder.hpp"
#include "placement/chain_plan.hpp"

namespace ember {

struct TransferSplice {
  uint64_t transfer_id = 0;
  std::string hop;
  std::string upstream;  // a node name, or a chain's source name
};

/// One hop's line in a snapshot (metrics, logs, the distribute API's answer).
struct HopProgress {
  uint64_t transfer_id = 0;
  std::string model;
  std::string hop;
  std::string upstream;
  uint64_t offset = 0;
  uint64_t blob_bytes = 0;
  std::string state;
};

class ChainController {
 public:
  explicit ChainController(placement::StallOptions stall = {}) : stall_(stall) {}

  /// Registers a transfer of `blob_bytes` along `chains`; returns its id (never 0).
  uint64_t start(const std::string& model, uint64_t blob_bytes, std::vector<placement::Chain> chains, int64_t now_ms);

  /// A hop's periodic report. Returns a splice for that hop when it pulls from another upstream
  /// than the plan says (it missed a splice, or the plan changed before it first reported).
  std::vector<TransferSplice> on_progress(uint64_t id, const std::string& hop, const std::string& upstream,
                                          uint64_t offset, int64_t now_ms);
  /// The hop finished (verified) or gave up.
  std::vector<TransferSplice> on_done(uint64_t id, const std::string& hop, int64_t now_ms);
  std::vector<TransferSplice> on_failed(uint64_t id, const std::string& hop);

  /// A hop lost its upstream `failed`: the failed hop is spliced out of the chain (it keeps
  /// receiving as a leaf if it is alive), and the answer is the asking hop's new upstream.
  /// not_found for an unknown transfer or hop; unavailable when the transfer is finished.
  Result<std::string> upstream_after_failure(uint64_t id, const std::string& hop, const std::string& failed,
                                             std::vector<TransferSplice>& splices);

  /// A node left the cluster: every chain through it is spliced; a chain whose source it was
  /// continues from `fallback_source` (another holder, or the repository).
  std::vector<TransferSplice> node_lost(const std::string& node, const std::string& fallback_source);

  /// Hops that stopped making progress (placement::ChainPlan::check_stalls) are spliced out.
  std::vector<TransferSplice> check_stalls(int64_t now_ms);

  bool finished(uint64_t id) const;
  /// The model ("name/version", also its blob key) transfer `id` carries; empty for an unknown one.
  std::string model_of(uint64_t id) const;
  /// Ids of the transfers whose every hop is done or failed.
  std::vector<uint64_t> finished_transfers() const;
  void erase(uint64_t id);
  bool empty() const { return transfers_.empty(); }
  std::vector<HopProgress> snapshot() const;

 private:
  struct Transfer {
    std::string model;
    uint64_t blob_bytes = 0;
    std::vector<placement::ChainPlan> plans;
  };
  /// The plan holding `hop`, or nullptr.
  placement::ChainPlan* plan_of(Transfer& t, const std::string& hop);
  static void add(std::vector<TransferSplice>& out, uint64_t id, const std::vector<placement::Splice>& splices);

  placement::StallOptions stall_;
  std::map<uint64_t, Transfer> transfers_;
  uint64_t next_id_ = 1;
};

}  // namespace ember
