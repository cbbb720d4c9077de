// JoinedManager: the manager a node has joined, for the node's supervisor to check who sent it a
// fault. A fault reaches a node only from its manager, which takes one only from its admin actor,
// which checks the console's admin token (actors/console/admin.hpp): so a fault on a node needs the
// admin token, and a member that reaches a node's port cannot inject one by itself. (A member that
// forges CAF's sender field is not stopped by this: members hold the cluster's certificates.)
//
// Threads: the node's process sets it on each join (its own thread); the supervisor asks it (an
// actor). One mutex, held for a compare.
#pragma once

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_control_block.hpp>
#include <mutex>

namespace ember {

class JoinedManager {
 public:
  /// The manager this node joins, or joined, last (a manager that restarted is a new one).
  template <class Handle>
  void set(const Handle& manager) {
    std::lock_guard lock(mu_);
    manager_ = caf::actor_cast<caf::actor_addr>(manager);
  }
  /// Whether `sender` is that manager (false before any join).
  bool is(const caf::strong_actor_ptr& sender) const {
    std::lock_guard lock(mu_);
    return sender && manager_ && caf::actor_cast<caf::actor_addr>(sender) == manager_;
  }

 private:
  mutable std::mutex mu_;
  caf::actor_addr manager_;
};

}  // namespace ember
