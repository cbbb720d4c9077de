#include "actors/cluster/ticket_issuer.hpp"

namespace ember {

void TicketIssuer::stamp(blob_source& source, const std::string& blob_key, const std::string& receiver,
                         uint64_t now_unix_s) const {
  if (keys_) source.ticket = keys_->issue_at(blob_key, receiver, now_unix_s);
}

void TicketIssuer::stamp(std::vector<blob_source>& sources, const std::string& blob_key, const std::string& receiver,
                         uint64_t now_unix_s) const {
  for (auto& s : sources) stamp(s, blob_key, receiver, now_unix_s);
}

}  // namespace ember
