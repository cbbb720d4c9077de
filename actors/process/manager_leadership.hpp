// ManagerLeadership: a manager of several sharing etcd (manager.etcd; issue 37). Before it starts,
// win() campaigns (coord/leader_lease.hpp): while another leads it stands by, neither listening for
// nodes nor serving, and says who leads; once it leads it opens the decisions kept in etcd (every
// decision the previous leader acknowledged) and the process starts as a lone manager would. keep()
// then renews the lease on a thread of its own every ttl/3; if the lead is lost (the lease expired in
// etcd: this process was paused or cut off past its ttl; or no renewal for its ttl) `on_lost` is
// called at once, and the process exits: a manager that may no longer lead must not act. It starts
// again as a standby (systemd's Restart=, or the operator).
//
// Who else keeps two leaders from acting at once: the fence on every decision written
// (actors/cluster/etcd_decisions.hpp), and the nodes, which take orders only from the manager they
// joined last (actors/node/joined_manager.hpp). An orderly stop resigns (revokes the lease), so a
// standby takes over at its next step instead of after the ttl.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/cluster/desired_state.hpp"
#include "config/cluster_config.hpp"
#include "coord/etcd_client.hpp"
#include "coord/leader_lease.hpp"

namespace ember {

class ManagerLeadership {
 public:
  /// Campaigns until this manager (identified by manager.listen) leads, or `stop` (then unavailable
  /// "stopped"). Errors: the decisions in etcd do not read.
  static Result<std::unique_ptr<ManagerLeadership>> win(const ManagerConfig& config, const std::atomic<bool>& stop);
  ~ManagerLeadership();

  /// The decisions kept in etcd, written fenced by this lead (once; the manager owns them after).
  std::unique_ptr<DecisionLog> take_decisions() { return std::move(decisions_); }
  /// Renews the lease from now on; `on_lost(why)` once the lead is lost (from the renewing thread).
  void keep(std::function<void(const std::string& why)> on_lost);
  int64_t fence() const { return fence_; }

 private:
  ManagerLeadership() = default;

  std::shared_ptr<coord::EtcdClient> etcd_;
  std::unique_ptr<coord::LeaderLease> lease_;
  std::unique_ptr<DecisionLog> decisions_;
  int64_t fence_ = 0;
  std::chrono::milliseconds step_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread renewer_;
};

}  // namespace ember
