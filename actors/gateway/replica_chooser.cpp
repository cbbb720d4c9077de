// The gateway process's replica choice and in-flight count (see replica_chooser.hpp).
#include "actors/gateway/replica_chooser.hpp"

namespace ember {

void ReplicaChooser::started(uint64_t node_id) {
  std::lock_guard lock(mu_);
  ++in_flight_[node_id];
}

void ReplicaChooser::finished(uint64_t node_id) {
  std::lock_guard lock(mu_);
  auto it = in_flight_.find(node_id);
  if (it != in_flight_.end() && --it->second == 0) in_flight_.erase(it);
}

uint32_t ReplicaChooser::in_flight(uint64_t node_id) const {
  std::lock_guard lock(mu_);
  return count(node_id);
}

uint32_t ReplicaChooser::count(uint64_t node_id) const {
  auto it = in_flight_.find(node_id);
  return it == in_flight_.end() ? 0 : it->second;
}

}  // namespace ember
