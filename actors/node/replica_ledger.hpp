// ReplicaLedger: what a node's router must not lose when it dies, kept outside it. The router writes
// an entry when a replica becomes ready and erases it when the replica leaves; a router restarted by
// the node's supervisor (actors/node/node_supervisor.hpp) reads them back and serves those replicas
// again at once: the host copy of each model (the cache's bytes, still pinned), the device it is
// bound to (pinned binding: the executor still holds it) and late binding's profile (no re-run).
// Pipeline stages are written too but not restored (their upstreams' credits and hand-offs died
// with the router): a restarted router unpins them and reports them lost.
//
// The node process owns it. Thread-safe: a dying router and its successor may overlap.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/loading_messages.hpp"
#include "actors/node/swap_controller.hpp"
#include "model/model.hpp"

namespace ember {

struct LedgerEntry {
  model_key key;
  std::string blob_key;  // the cache key the replica pins
  uint64_t weights_bytes = 0;
  size_t device = 0;  // pinned binding: the executor holding it
  replica_info info;
  std::shared_ptr<const gpu::Model> model;  // the host copy
  std::optional<SwapModel> late;            // late binding: its profile
  slo_setting slo, own;                     // Replica::slo and Replica::own
  bool stage = false;
};

class ReplicaLedger {
 public:
  void put(LedgerEntry entry) {
    std::lock_guard lock(mu_);
    const model_key key = entry.key;
    entries_[key] = std::move(entry);
  }
  void erase(const model_key& key) {
    std::lock_guard lock(mu_);
    entries_.erase(key);
  }
  std::vector<LedgerEntry> entries() const {
    std::lock_guard lock(mu_);
    std::vector<LedgerEntry> out;
    for (const auto& [k, e] : entries_) out.push_back(e);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::map<model_key, LedgerEntry> entries_;
};

}  // namespace ember
