// LeaderLease: one manager's part in electing the cluster's leader through etcd (issue 37: several
// managers, one acting). Every manager campaigns for the same key with a lease of `ttl_s`: the one
// whose create succeeds leads, and the key's create_revision is its fencing token (every write of the
// shared state is fenced by it, EtcdClient::put_fenced, and refused once another has won); the
// others stand by, renew their own lease and campaign again at each step.
//
//   standby ──the key created (campaign won)──▶ leader ──renewal refused (the lease expired in etcd),
//      ▲ │                                         │     or no renewal for ttl by its own clock,
//      └─┘ the key is another's                    │     or resign()
//                                                  ▼
//                                                 lost (final: the caller stops acting at once and
//                                                       starts over as a standby, a new process)
//
// A leader that cannot reach etcd stops leading ttl after the last renewal it sent (sent, not
// answered: etcd counts from when it took it, later), so it stops before etcd would let a standby
// win. A leader paused past its ttl (SIGSTOP, a VM stall) finds itself lost at its first step after
// it resumes; what it does before that step is refused by the fence (its writes) and by the nodes,
// which follow the manager they joined last (actors/node/joined_manager.hpp). holds(now) is the
// cheap check before an action: leader, and within ttl of the last renewal sent.
//
// Plain C++, no CAF, blocking (each step is at most two etcd calls, each within the client's
// timeout); time is a parameter (a steady clock's). Not thread-safe: one owner calls it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "coord/etcd_client.hpp"

namespace ember::coord {

class LeaderLease {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::string key;       // e.g. "/ember/<cluster>/leader"
    std::string identity;  // what the leader key holds: the manager's control address
    int64_t ttl_s = 5;
  };
  enum class Role { standby, leader, lost };

  LeaderLease(EtcdClient& etcd, Options options) : etcd_(etcd), options_(std::move(options)) {}

  /// One step at `now`: a standby campaigns (a lease granted first, renewed after), a leader renews.
  /// The role after it. Call every ttl/3 or more often.
  Role step(Clock::time_point now);
  /// Gives the leadership up at once (the lease revoked: a standby wins at its next step). Lost.
  void resign();

  Role role() const { return role_; }
  /// Leading at `now`: the role is leader and the last renewal was sent less than ttl ago.
  bool holds(Clock::time_point now) const;
  /// The leader key's create_revision while leading (the fence); 0 otherwise.
  int64_t fence() const { return role_ == Role::leader ? fence_ : 0; }
  /// Who holds the key, as last seen ("" before the first step or when nobody does).
  const std::string& leader() const { return leader_; }
  /// Why the last step did not lead or why the leadership was lost ("" when nothing went wrong).
  const std::string& why() const { return why_; }
  const Options& options() const { return options_; }

 private:
  void campaign(Clock::time_point now);
  void renew(Clock::time_point now);
  void lose(std::string why);

  EtcdClient& etcd_;
  Options options_;
  Role role_ = Role::standby;
  int64_t lease_ = 0;
  int64_t fence_ = 0;
  Clock::time_point renewed_{};  // when the last renewal that etcd accepted was sent
  std::string leader_;
  std::string why_;
};

}  // namespace ember::coord
