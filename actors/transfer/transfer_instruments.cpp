#include "actors/transfer/transfer_instruments.hpp"

namespace ember {

TransferInstruments::TransferInstruments(metrics::Registry& registry)
    : hops_active_(registry.gauge("ember_transfer_hops_active", "Multicast chain hops receiving on this node")
                       .with(std::vector<std::string>{})),
      hop_verified_(registry.gauge("ember_transfer_verified_bytes",
                                   "Bytes of the model this node's latest multicast hop has verified",
                                   {"model", "version"})),
      hop_blob_(
          registry.gauge("ember_transfer_blob_bytes", "Size of the model that hop receives", {"model", "version"})),
      hop_resumes_(registry.counter("ember_transfer_resumes_total",
                                    "Multicast hops resumed from their verified offset, by cause", {"reason"})),
      hops_(registry.counter("ember_transfer_hops_total", "Multicast hops ended on this node, by outcome",
                             {"outcome"})) {}

void TransferInstruments::add_active_hop(int delta) { hops_active_.inc(static_cast<double>(delta)); }

void TransferInstruments::set_hop_progress(const model_key& model, uint64_t verified_bytes, uint64_t blob_bytes) {
  const std::string version = std::to_string(model.version);
  hop_verified_.with({model.name, version}).set(static_cast<double>(verified_bytes));
  hop_blob_.with({model.name, version}).set(static_cast<double>(blob_bytes));
}

void TransferInstruments::count_hop_resume(const std::string& reason) { hop_resumes_.with({reason}).inc(); }

void TransferInstruments::count_hop(const std::string& outcome) { hops_.with({outcome}).inc(); }

}  // namespace ember
