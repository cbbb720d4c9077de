// TicketIssuer: the data plane's tickets (transport/ticket.hpp) on what the manager tells nodes to
// fetch. Every blob_source the manager gives a receiver (a load's sources, a stage load's, a chain
// hop's new upstream after a splice or a lost upstream) carries a ticket for that receiver (its node
// name) and that blob, so that the source's blob server serves the bytes to it alone, for the
// ticket's window. With no ticket keys (security.ticket_key_file unset) it stamps nothing, and the
// sources go without tickets as before.
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only; the keys are immutable and
// shared. The time a ticket's window starts from is a parameter (unix seconds: tickets are checked
// on other hosts, so it is the wall clock's, read by the actor).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/loading_messages.hpp"
#include "transport/ticket.hpp"

namespace ember {

class TicketIssuer {
 public:
  explicit TicketIssuer(std::shared_ptr<const transport::TicketKeys> keys = nullptr) : keys_(std::move(keys)) {}
  /// Whether tickets are issued at all.
  bool enabled() const { return keys_ != nullptr; }

  /// `source` gets `receiver`'s ticket for blob `blob_key`, valid for the ticket lifetime from
  /// `now_unix_s`. Nothing without keys.
  void stamp(blob_source& source, const std::string& blob_key, const std::string& receiver, uint64_t now_unix_s) const;
  /// The same for each of `sources`.
  void stamp(std::vector<blob_source>& sources, const std::string& blob_key, const std::string& receiver,
             uint64_t now_unix_s) const;

 private:
  std::shared_ptr<const transport::TicketKeys> keys_;
};

}  // namespace ember
