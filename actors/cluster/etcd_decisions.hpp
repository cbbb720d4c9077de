// The decisions of several managers kept in etcd (manager.etcd; issue 37): the whole DesiredState as
// one key (<prefix>/state, its snapshot JSON), written once per decision by the manager that leads,
// each write fenced by the leader key's create_revision it won (coord/leader_lease.hpp): a manager
// that lost the lead (paused past its lease, cut off) has its writes refused, so it can acknowledge
// nothing, and the manager that leads now reads every decision acknowledged before.
//
// Errors: etcd's (unavailable when no endpoint answers); permission_denied when the fence moved
// (this manager no longer leads); corrupt or unsupported for a state that does not read (naming the
// key). Blocking (one etcd call per decision, within the client's timeout), on the manager actor as
// the local journal's fsync is; not thread-safe beyond the client's own guarantees.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "actors/cluster/desired_state.hpp"
#include "coord/etcd_client.hpp"

namespace ember {

struct EtcdDecisionsOptions {
  std::string state_key;  // "<prefix>/state"
  std::string fence_key;  // the leader key, "<prefix>/leader"
  int64_t fence = 0;      // its create_revision, as this manager won it
};

/// The state as etcd holds it (none yet: empty), and the log that keeps every later decision there.
Result<std::unique_ptr<DecisionLog>> open_etcd_decisions(std::shared_ptr<coord::EtcdClient> etcd,
                                                         EtcdDecisionsOptions options);

}  // namespace ember
