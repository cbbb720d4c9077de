// Blob-server settings shared by the node and manager processes (internal to actors/process/).
#pragma once

#include "base/token_file.hpp"
#include "config/cluster_config.hpp"
#include "transport/tcp_blob_server.hpp"

namespace ember {

/// Blob-server settings shared by nodes and the manager's repository server; with
/// security.ticket_key_file, its keys (read here: an unreadable or short file is the error), and with
/// security.data_plane: tls, the TLS context (its fetches use the same one).
inline Result<transport::BlobServerOptions> data_server_options(const TransferConfig& transfer,
                                                                const SecurityConfig& security) {
  transport::BlobServerOptions o;
  if (!security.ticket_key_file.empty()) {
    EMBER_ASSIGN_OR_RETURN(o.tickets,
                           transport::TicketKeys::load(security.ticket_key_file, "security.ticket_key_file"));
  }
  if (security.data_plane_tls) {
    std::string passphrase;
    if (!security.tls_key_passphrase_file.empty()) {
      EMBER_ASSIGN_OR_RETURN(passphrase,
                             read_token_file(security.tls_key_passphrase_file, "security.tls_key_passphrase_file"));
    }
    EMBER_ASSIGN_OR_RETURN(
        o.tls, transport::DataTls::make(security.tls_certificate, security.tls_key, passphrase, security.tls_ca));
    o.tickets_name_certificates = security.ticket_names_certificate;
  }
  o.chunk_bytes = static_cast<uint32_t>(transfer.chunk_bytes);
  o.socket_buffer_bytes = static_cast<int>(transfer.socket_buffer_bytes);
  // Every receiver of a unicast scale-out pulls from one holder at once; chains need one each.
  o.max_transfers = 16;
  return o;
}

}  // namespace ember
