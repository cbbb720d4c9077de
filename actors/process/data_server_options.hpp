// Blob-server settings shared by the node and manager processes (internal to actors/process/).
#pragma once

#include "config/cluster_config.hpp"
#include "transport/tcp_blob_server.hpp"

namespace ember {

/// Blob-server settings shared by nodes and the manager's repository server; with
/// security.ticket_key_file, its keys (read here: an unreadable or short file is the error).
inline Result<transport::BlobServerOptions> data_server_options(const TransferConfig& transfer) {
  transport::BlobServerOptions o;
  if (!transfer.ticket_key_file.empty()) {
    EMBER_ASSIGN_OR_RETURN(o.tickets,
                           transport::TicketKeys::load(transfer.ticket_key_file, "security.ticket_key_file"));
  }
  o.chunk_bytes = static_cast<uint32_t>(transfer.chunk_bytes);
  o.socket_buffer_bytes = static_cast<int>(transfer.socket_buffer_bytes);
  // Every receiver of a unicast scale-out pulls from one holder at once; chains need one each.
  o.max_transfers = 16;
  return o;
}

}  // namespace ember
