#include "actors/node_report_messages.hpp"

namespace ember {

uint64_t replicas_fingerprint(const std::vector<model_key>& replicas, uint64_t requests_id) {
  // Summed per-key hashes (FNV-1a): the order does not matter; the count and the requests actor's
  // id are mixed in.
  uint64_t sum = replicas.size() * 0x9e3779b97f4a7c15ull + requests_id * 0xff51afd7ed558ccdull;
  for (const auto& k : replicas) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : k.name) h = (h ^ c) * 1099511628211ull;
    h = (h ^ k.version) * 1099511628211ull;
    sum += h;
  }
  return sum;
}

uint64_t report_fingerprint(const node_report& report) {
  return replicas_fingerprint(report.replicas, report.requests ? report.requests.id() : 0);
}

}  // namespace ember
