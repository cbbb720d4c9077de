// TransferInstruments: the metrics of the multicast hops a node runs (transfer_peer actors). They
// live in the node's registry (NodeInstruments owns one), so a node's /metrics shows its hops.
//
// Thread-safe (metrics::Registry is); hops call it from their actor. Never blocks on I/O.
#pragma once

#include <cstdint>
#include <string>

#include "actors/model_key.hpp"
#include "metrics/metrics.hpp"

namespace ember {

class TransferInstruments {
 public:
  explicit TransferInstruments(metrics::Registry& registry);

  /// Multicast hops on this node: `delta` +1 when one starts, -1 when it ends.
  void add_active_hop(int delta);
  /// A hop's verified bytes so far, of `blob_bytes` (progress of the transfer on this node).
  void set_hop_progress(const model_key& model, uint64_t verified_bytes, uint64_t blob_bytes);
  /// A hop resumed: "corrupt" (chunk failed its checksum), "upstream_lost", "splice".
  void count_hop_resume(const std::string& reason);
  /// A hop ended: "ok" or the error code's name.
  void count_hop(const std::string& outcome);

 private:
  metrics::Gauge& hops_active_;
  metrics::GaugeFamily& hop_verified_;
  metrics::GaugeFamily& hop_blob_;
  metrics::CounterFamily& hop_resumes_;
  metrics::CounterFamily& hops_;
};

}  // namespace ember
